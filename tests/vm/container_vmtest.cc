// Containers (issue 13, section 3): a process in its own mount namespace maps
// a library whose file differs from the host's at the same path.  The
// profiler, in the host's namespace, must cover it with the SFrame of the
// file the process maps (ProcessCoverage opens it through
// /proc/PID/map_files, or through /proc/PID/root), never with the host's.
//
// The scenario: libvmtest_container_guest.so is bind-mounted over
// libvmtest_container_host.so in the child's namespace (a new mount
// namespace as root; a new user and mount namespace as another user) and
// dlopen()ed by that path; a helper forked before the unshare (so in the
// host's namespace) covers the child; the child then unwinds itself from a
// callback of the library.  Both builds lack .sframe and give the shared
// function another frame and address, so only the guest's SFrame walks
// through it to the caller in the program and on to main.
#include <dlfcn.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "sframe_gen/build_id.h"
#include "sframe_gen/coverage.h"
#include "sframe_gen/sframe_cache.h"
#include "vmtest.h"

namespace {

using vmtest::ChildResult;
using vmtest::RunChild;

struct UnwindReq {
  const sframe::Device* dev;
  sframe::UnwindResult result;
};

using lib_call_fn = int (*)(void (*)(void*), void*);

VMTEST_NOIPA void container_cb(void* arg) {
  auto* r = static_cast<UnwindReq*>(arg);
  r->result = r->dev->unwind_self(128, SFRAME_UNWIND_F_SFRAME);
  VMTEST_BARRIER();
}

VMTEST_NOIPA int exe_calls_container(lib_call_fn fn, UnwindReq* r) {
  int v = fn(&container_cb, r);
  VMTEST_BARRIER();
  return v + 1;
}

// Drops CAP_SYS_ADMIN and CAP_CHECKPOINT_RESTORE from this process's
// effective set: /proc/PID/map_files may then not be opened.
bool drop_map_files_caps() {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2]{};
  if (syscall(SYS_capget, &h, d) != 0) return false;
  for (int cap : {CAP_SYS_ADMIN, 40 /* CAP_CHECKPOINT_RESTORE */}) {
    d[cap / 32].effective &= ~(1u << (cap % 32));
  }
  return syscall(SYS_capset, &h, d) == 0;
}

// The helper in the host's namespace: covers process target, answers
// "COVERED_BUILD_ID VIA HOST_BUILD_ID" (the section supplied for the
// library's path, how its file was opened, the build id of the host's file
// at that path) or "error: ...".
[[noreturn]] void cover_from_host(pid_t target, int ready, int answer, bool drop_caps,
                                  const std::string& lib) {
  char c;
  std::string msg;
  if (read(ready, &c, 1) != 1) _exit(2);
  try {
    if (drop_caps && !drop_map_files_caps()) throw std::runtime_error("capset failed");
    sframe::Device dev(vmtest::DevicePath());
    sframe::SframeCache cache(vmtest::FreshCacheDir());
    sframe::ProcessCoverage cov(dev, target, &cache);
    const sframe::CoverageUpdate u = cov.refresh();
    for (const sframe::CoveredObject& o : u.covered) {
      if (o.path != lib) continue;
      msg = (o.build_id.empty() ? "-" : o.build_id) + " " +
            (o.via == sframe::MappedVia::kMapFiles ? "map_files"
             : o.via == sframe::MappedVia::kRoot   ? "root"
                                                   : "path") +
            " " + sframe::read_build_id(lib);
    }
    for (const auto& [object, why] : u.failed) {
      if (object == lib) msg = "error: " + why;
    }
    if (msg.empty()) msg = "error: " + lib + " not covered";
  } catch (const std::exception& e) {
    msg = std::string("error: ") + e.what();
  }
  msg += "\n";
  if (write(answer, msg.data(), msg.size()) < 0) _exit(3);
  _exit(0);
}

// arg: "drop_caps" makes the helper do without map_files.
VMTEST_CHILD(container_guest) {
  const std::string host_lib = vmtest::NextToSelf("libvmtest_container_host.so");
  const std::string guest_lib = vmtest::NextToSelf("libvmtest_container_guest.so");
  int ready[2], answer[2];
  if (pipe(ready) != 0 || pipe(answer) != 0) return 2;
  const pid_t self = getpid();
  std::fflush(nullptr);
  const pid_t helper = fork();
  if (helper < 0) return 2;
  if (helper == 0) {
    close(ready[1]);
    close(answer[0]);
    cover_from_host(self, ready[0], answer[1], arg == "drop_caps", host_lib);
  }
  close(ready[0]);
  close(answer[1]);
  // The container: root needs only a mount namespace; another user gets
  // one inside a user namespace of its own.
  const int flags = geteuid() == 0 ? CLONE_NEWNS : CLONE_NEWUSER | CLONE_NEWNS;
  if (unshare(flags) != 0) {
    std::printf("unshare: %s\n", std::strerror(errno));
    return 3;
  }
  if (mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      mount(guest_lib.c_str(), host_lib.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    std::printf("mount: %s\n", std::strerror(errno));
    return 3;
  }
  void* handle = dlopen(host_lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::printf("dlopen %s: %s\n", host_lib.c_str(), dlerror());
    return 4;
  }
  auto variant = reinterpret_cast<const char* (*)()>(dlsym(handle, "container_lib_variant"));
  auto fn = reinterpret_cast<lib_call_fn>(dlsym(handle, "container_lib_call"));
  if (!variant || !fn) return 4;
  vmtest::EmitValue("guest_loaded", std::strcmp(variant(), "guest") == 0);
  // Covered from the host's namespace.
  if (write(ready[1], "g", 1) != 1) return 2;
  std::string reply;
  char buf[512];
  for (ssize_t n; (n = read(answer[0], buf, sizeof(buf))) > 0;) reply.append(buf, size_t(n));
  int st = 0;
  waitpid(helper, &st, 0);
  std::printf("helper: %s", reply.c_str());
  std::istringstream in(reply);
  std::string covered_id, via, host_id;
  in >> covered_id >> via >> host_id;
  // The guest's file, read here (its own path is not covered over).
  const std::string guest_id = sframe::read_build_id(guest_lib);
  vmtest::EmitValue("covered_is_guest", !guest_id.empty() && covered_id == guest_id);
  vmtest::EmitValue("host_differs", !host_id.empty() && host_id != guest_id);
  vmtest::EmitValue("via_map_files", via == "map_files");
  vmtest::EmitValue("via_root", via == "root");
  sframe::Device dev(vmtest::DevicePath());
  UnwindReq req{&dev, {}};
  exe_calls_container(fn, &req);
  vmtest::EmitUnwind("chain", req.result);
  return 0;
}

void ExpectGuestCovered(const ChildResult& r) {
  EXPECT_EQ(r.values.at("guest_loaded"), 1u) << "the bind mount did not take";
  EXPECT_EQ(r.values.at("host_differs"), 1u) << "the two builds must differ";
  EXPECT_EQ(r.values.at("covered_is_guest"), 1u)
      << "the section supplied was not made from the container's file\n"
      << r.output;
  // unwind_self, the callback, the guest's function, its caller in the
  // program, the scenario ... main, __libc_start_call_main.
  std::vector<std::string> all = {vmtest::kUnwindSelf, "container_cb", "container_lib_call",
                                  "exe_calls_container"};
  for (const auto& f : vmtest::ChildTail("container_guest")) all.push_back(f);
  EXPECT_TRUE(vmtest::ChainStartsWith(r.chains.at("chain"), all, r.main_return)) << r.output;
}

TEST(ContainerTest, TheContainersFileIsCoveredNotTheHosts) {
  ChildResult r = RunChild("container_guest");
  if (r.exit_status == 3) {
    // No namespace for this user (unprivileged user namespaces off).
    GTEST_SKIP() << "cannot make a mount namespace here: " << r.output;
  }
  ASSERT_EQ(r.exit_status, 0) << r.output;
  ExpectGuestCovered(r);
  // Root opens the mapping itself; another user goes through its root.
  if (geteuid() == 0) {
    EXPECT_EQ(r.values.at("via_map_files"), 1u) << r.output;
  } else {
    EXPECT_EQ(r.values.at("via_root"), 1u) << r.output;
  }
}

// Without CAP_SYS_ADMIN and CAP_CHECKPOINT_RESTORE, map_files cannot be
// opened (EPERM): the file is read through /proc/PID/root, in the
// container's mount namespace, and is still the guest's.
TEST(ContainerTest, WithoutMapFilesTheProcessRootGivesTheContainersFile) {
  if (geteuid() != 0) GTEST_SKIP() << "root only (the user run of the first test goes this way)";
  ChildResult r = RunChild("container_guest", "drop_caps");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  ExpectGuestCovered(r);
  EXPECT_EQ(r.values.at("via_root"), 1u) << r.output;
}

}  // namespace
