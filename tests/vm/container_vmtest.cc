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

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sframe_gen/coverage.h"
#include "sframe_gen/eh_frame.h"
#include "sframe_gen/sframe_cache.h"
#include "sframe_object/object_file.h"
#include "vmtest.h"

// File-scope statics, not an anonymous namespace: the chains are compared
// by plain function names.
using vmtest::ChildResult;
using vmtest::RunChild;

struct ContainerUnwindReq {
  const sframe::Device* dev;
  sframe::UnwindResult result;
};

using lib_call_fn = int (*)(void (*)(void*), void*);

// The child's exit status when it cannot make its namespace.
static constexpr int kNoNamespace = 77;

VMTEST_NOIPA static void container_cb(void* arg) {
  auto* r = static_cast<ContainerUnwindReq*>(arg);
  r->result = r->dev->unwind_self(128, SFRAME_UNWIND_F_SFRAME);
  VMTEST_BARRIER();
}

VMTEST_NOIPA static int exe_calls_container(lib_call_fn fn, ContainerUnwindReq* r) {
  int v = fn(&container_cb, r);
  VMTEST_BARRIER();
  return v + 1;
}

// Drops CAP_SYS_ADMIN and CAP_CHECKPOINT_RESTORE from this process's
// effective set: /proc/PID/map_files may then not be opened.
static bool drop_map_files_caps() {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2]{};
  if (syscall(SYS_capget, &h, d) != 0) return false;
  for (int cap : {CAP_SYS_ADMIN, 40 /* CAP_CHECKPOINT_RESTORE */}) {
    d[cap / 32].effective &= ~(1u << (cap % 32));
  }
  return syscall(SYS_capset, &h, d) == 0;
}

// What a profiler that opens objects by path would do (and this one did
// before): SFrame made from the file at the library's path in the HOST's
// namespace, supplied where the target maps the library.
static void supply_host_file(const sframe::Device& dev, pid_t target, const std::string& lib) {
  std::ifstream maps("/proc/" + std::to_string(target) + "/maps");
  for (std::string line; std::getline(maps, line);) {
    uint64_t start = 0, off = 1;
    int name_at = 0;
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%*x %*s %" SCNx64 " %*s %*s %n", &start, &off,
                    &name_at) < 2 ||
        off != 0 || name_at == 0 || line.substr(name_at) != lib)
      continue;
    const sframe::ObjectFile host = sframe::ObjectFile::open(lib);
    const sframe::GeneratedSframe g = sframe::generate_sframe(host);
    const uint64_t bias = start - host.layout().image_vaddr;
    dev.supply_section(target, g.bytes.data(), g.bytes.size(), bias + g.section_vaddr,
                       bias + g.text_vaddr, g.text_len, lib);
    return;
  }
  throw std::runtime_error(lib + " not mapped in the target");
}

// The helper in the host's namespace: covers process target, answers
// "COVERED_BUILD_ID VIA HOST_BUILD_ID" (the section supplied for the
// library's path, how its file was opened, the build id of the host's file
// at that path) or "error: ...".
[[noreturn]] static void cover_from_host(pid_t target, int ready, int answer, bool drop_caps,
                                         bool host_file, const std::string& lib) {
  char c;
  std::string msg;
  if (read(ready, &c, 1) != 1) _exit(2);
  try {
    if (drop_caps && !drop_map_files_caps()) throw std::runtime_error("capset failed");
    sframe::Device dev(vmtest::DevicePath());
    if (host_file) supply_host_file(dev, target, lib);
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
    // The library's section was there already: the host's.
    if (host_file && msg.empty()) msg = "host_file - " + sframe::read_build_id(lib);
    if (msg.empty()) msg = "error: " + lib + " not covered";
  } catch (const std::exception& e) {
    msg = std::string("error: ") + e.what();
  }
  msg += "\n";
  if (write(answer, msg.data(), msg.size()) < 0) _exit(3);
  _exit(0);
}

// arg: "drop_caps" makes the helper do without map_files; "host_file" makes
// it supply the host's file's SFrame for the library first.
// The child's setup, out of the scenario's frame (which the chain walks
// through, so it is kept small): the helper, the namespace, the library,
// its coverage.  status: 0, kNoNamespace or another failure.
struct GuestSetup {
  lib_call_fn fn = nullptr;
  int status = 0;
};

VMTEST_NOIPA static GuestSetup enter_container(const std::string& arg) {
  const std::string host_lib = vmtest::NextToSelf("libvmtest_container_host.so");
  const std::string guest_lib = vmtest::NextToSelf("libvmtest_container_guest.so");
  int ready[2], answer[2];
  if (pipe(ready) != 0 || pipe(answer) != 0) return {nullptr, 2};
  const pid_t self = getpid();
  std::fflush(nullptr);
  const pid_t helper = fork();
  if (helper < 0) return {nullptr, 2};
  if (helper == 0) {
    close(ready[1]);
    close(answer[0]);
    cover_from_host(self, ready[0], answer[1], arg == "drop_caps", arg == "host_file",
                    host_lib);
  }
  close(ready[0]);
  close(answer[1]);
  // The container: root needs only a mount namespace; another user gets
  // one inside a user namespace of its own.
  const int flags = geteuid() == 0 ? CLONE_NEWNS : CLONE_NEWUSER | CLONE_NEWNS;
  if (unshare(flags) != 0) {
    std::printf("unshare: %s\n", std::strerror(errno));
    return {nullptr, kNoNamespace};
  }
  if (mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      mount(guest_lib.c_str(), host_lib.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    std::printf("mount: %s\n", std::strerror(errno));
    return {nullptr, kNoNamespace};
  }
  void* handle = dlopen(host_lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::printf("dlopen %s: %s\n", host_lib.c_str(), dlerror());
    return {nullptr, 4};
  }
  auto variant = reinterpret_cast<const char* (*)()>(dlsym(handle, "container_lib_variant"));
  auto fn = reinterpret_cast<lib_call_fn>(dlsym(handle, "container_lib_call"));
  if (!variant || !fn) return {nullptr, 4};
  vmtest::EmitValue("guest_loaded", std::strcmp(variant(), "guest") == 0);
  // Covered from the host's namespace.
  if (write(ready[1], "g", 1) != 1) return {nullptr, 2};
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
  return {fn, 0};
}

VMTEST_CHILD(container_guest) {
  const GuestSetup g = enter_container(arg);
  if (g.status != 0) return g.status;
  sframe::Device dev(vmtest::DevicePath());
  ContainerUnwindReq req{&dev, {}};
  exe_calls_container(g.fn, &req);
  vmtest::EmitUnwind("chain", req.result);
  return 0;
}

static void ExpectGuestCovered(const ChildResult& r) {
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
  if (r.exit_status == kNoNamespace) {
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

// The control: with the SFrame of the host's file at the same path (what
// opening objects by path gives), the walk through the guest's function goes
// wrong; so the first test's complete chain is owed to the guest's file.
TEST(ContainerTest, TheHostsFileWouldGetTheStackWrong) {
  ChildResult r = RunChild("container_guest", "host_file");
  if (r.exit_status == kNoNamespace) {
    GTEST_SKIP() << "cannot make a mount namespace here: " << r.output;
  }
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(r.values.at("guest_loaded"), 1u);
  EXPECT_EQ(r.values.at("covered_is_guest"), 0u) << r.output;
  std::vector<std::string> all = {vmtest::kUnwindSelf, "container_cb", "container_lib_call",
                                  "exe_calls_container"};
  for (const auto& f : vmtest::ChildTail("container_guest")) all.push_back(f);
  EXPECT_FALSE(vmtest::ChainStartsWith(r.chains.at("chain"), all, r.main_return)) << r.output;
}
