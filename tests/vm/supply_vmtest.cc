// Sections supplied by value for another process (SFRAME_IOC_SUPPLY), the
// listing of a process's entries (SFRAME_IOC_LIST_SECTIONS), and
// unregistering for another process.
//
// As root this suite runs with discovery off, so a supplied section is the
// only thing that can cover a process that registers nothing; as a user it
// runs with discovery on, where a supplied section replaces what discovery
// found.  The targets are fork()ed children of the test: the same program
// at the same addresses, which registers nothing itself.
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "synthetic.h"
#include "vmtest.h"
#include "sframe_test/errno_of.h"
#include "sframe_gen/supply.h"

#ifndef SFRAME_CLIENT_TOOL_REL
#error "SFRAME_CLIENT_TOOL_REL (sframe-client, relative to this program's directory) must be defined"
#endif

namespace {

using sframe::Source;
using sframe::StopReason;

// As root the suite runs with discovery off, as a user with it on.
const bool kDiscoveryOffWhenRoot = vmtest::DiscoveryOffWhenRoot();

// What a child's walk found, sent back through a pipe.
struct WalkReport {
  uint32_t nr_frames = 0;
  uint32_t nr_sframe = 0;
  uint32_t stop = 0;
  uint32_t chain_ok = 0;  // the first frames are unwind_self, sup_c, sup_b, sup_a
};

}  // namespace

VMTEST_NOIPA static int sup_c(WalkReport* w) {
  sframe::Device dev(vmtest::DevicePath());
  sframe::UnwindResult r = dev.unwind_self(64, SFRAME_UNWIND_F_SFRAME);
  w->nr_frames = static_cast<uint32_t>(r.frames.size());
  w->nr_sframe = r.nr_sframe;
  w->stop = static_cast<uint32_t>(r.stop_reason);
  w->chain_ok = vmtest::ChainStartsWith(vmtest::Symbolize(r),
                                        {vmtest::kUnwindSelf, "sup_c", "sup_b", "sup_a"})
                    ? 1
                    : 0;
  VMTEST_BARRIER();
  return 1;
}

VMTEST_NOIPA static int sup_b(WalkReport* w) {
  int v = sup_c(w);
  VMTEST_BARRIER();
  return v + 1;
}

VMTEST_NOIPA static int sup_a(WalkReport* w) {
  int v = sup_b(w);
  VMTEST_BARRIER();
  return v + 1;
}

namespace {

// A fork()ed copy of the test that waits for Go(), walks its stack from
// sup_a, reports and exits.  Killed if the test ends first.
class Target {
 public:
  Target() {
    int to_child[2], to_parent[2];
    if (pipe(to_child) != 0 || pipe(to_parent) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(to_child[1]);
      close(to_parent[0]);
      char go;
      if (read(to_child[0], &go, 1) != 1) _exit(1);
      WalkReport w;
      try {
        sup_a(&w);
      } catch (...) {
        _exit(2);
      }
      _exit(write(to_parent[1], &w, sizeof(w)) == sizeof(w) ? 0 : 3);
    }
    close(to_child[0]);
    close(to_parent[1]);
    go_fd_ = to_child[1];
    report_fd_ = to_parent[0];
  }
  ~Target() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Wait();
    }
    if (go_fd_ >= 0) close(go_fd_);
    if (report_fd_ >= 0) close(report_fd_);
  }
  Target(const Target&) = delete;
  Target& operator=(const Target&) = delete;

  pid_t pid() const { return pid_; }
  bool ok() const { return pid_ > 0; }

  // Lets it walk; its report, or nothing if it failed.
  std::optional<WalkReport> Go() {
    WalkReport w;
    if (write(go_fd_, "g", 1) != 1) return std::nullopt;
    ssize_t n = read(report_fd_, &w, sizeof(w));
    Wait();
    if (n != sizeof(w)) return std::nullopt;
    return w;
  }

  // Waits for it to exit (it has been told to go or killed).
  void Wait() {
    if (pid_ <= 0) return;
    int status;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int go_fd_ = -1;
  int report_fd_ = -1;
};

class SupplyTest : public vmtest::SelfSectionTest {
 protected:
  void SetUp() override {
    SelfSectionTest::SetUp();
    if (HasFatalFailure()) return;
    const auto* p = reinterpret_cast<const uint8_t*>(self_.sframe_addr);
    bytes_.assign(p, p + self_.sframe_len);
  }

  // Supplies the program's own section (a copy of its bytes) for pid.
  int Supply(pid_t pid, const std::vector<uint8_t>& bytes) const {
    return sframe::errno_of([&] {
      dev().supply_section(pid, bytes.data(), bytes.size(), self_.sframe_addr, self_.text_start,
                           self_.text_len);
    });
  }
  int Supply(pid_t pid) const { return Supply(pid, bytes_); }

  int SupplyRaw(sframe_supply* req) const {
    return ::ioctl(dev().fd(), SFRAME_IOC_SUPPLY, req) == 0 ? 0 : errno;
  }
  sframe_supply SelfRequest(pid_t pid) const {
    sframe_supply req{};
    req.size = sizeof(req);
    req.pid = pid;
    req.sframe_data = reinterpret_cast<uintptr_t>(bytes_.data());
    req.sframe_len = bytes_.size();
    req.sframe_addr = self_.sframe_addr;
    req.text_start = self_.text_start;
    req.text_len = self_.text_len;
    return req;
  }

  // The entry of pid holding the program's text, if any.
  std::optional<sframe::SectionInfo> SelfEntry(pid_t pid) const {
    for (const auto& e : dev().list_sections(pid)) {
      if (e.text_start <= self_.text_start && self_.text_start < e.text_start + e.text_len)
        return e;
    }
    return std::nullopt;
  }

  std::vector<uint8_t> bytes_;
};

// ---- the profiler's case ----------------------------------------------------

TEST_F(SupplyTest, SuppliedSectionCoversAProcessThatRegistersNothing) {
  const sframe::Stats before = dev().stats();
  const uint64_t held_before = before.supplied_bytes;
  Target t;
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(Supply(t.pid()), 0);
  EXPECT_EQ(dev().stats().supplied_bytes, held_before + bytes_.size())
      << "the copy is held by the module";

  auto e = SelfEntry(t.pid());
  ASSERT_TRUE(e) << "the target lists the supplied section";
  EXPECT_EQ(e->source, Source::kSupplied);
  EXPECT_EQ(e->text_start, self_.text_start);
  EXPECT_EQ(e->text_len, self_.text_len);
  EXPECT_EQ(e->sframe_addr, self_.sframe_addr);
  EXPECT_EQ(e->sframe_len, bytes_.size());
  EXPECT_GT(e->nr_fdes, 0u);
  EXPECT_GT(e->covered_bytes, 0u);
  EXPECT_LE(e->covered_bytes, self_.text_len);
  EXPECT_EQ(e->version, bytes_[2]) << "SFrame version byte of the preamble";
  // The caller's own registry is not touched.
  EXPECT_EQ(dev().stats().mm_sections, before.mm_sections);

  auto w = t.Go();
  ASSERT_TRUE(w) << "the target did not report";
  EXPECT_TRUE(w->chain_ok) << "unwind_self, sup_c, sup_b, sup_a";
  EXPECT_GE(w->nr_sframe, 4u);
  // The target is gone: its supplied section with it.
  EXPECT_EQ(dev().stats().supplied_bytes, held_before);
}

// What a profiler does with the file of a mapped object: read its .sframe
// and place it where the file is mapped in the target (its load bias from
// /proc/PID/maps), through the library and through `sframe-client supply`.
TEST_F(SupplyTest, SupplyingAFilesSectionPlacesItWhereTheFileIsMapped) {
  Target t;
  ASSERT_TRUE(t.ok());
  sframe::SuppliedSection s = sframe::supply_file_sframe(dev(), t.pid(), sframe::self_exe_path());
  EXPECT_EQ(s.text_start, self_.text_start) << "the same bias as the running program's";
  EXPECT_EQ(s.text_len, self_.text_len);
  EXPECT_EQ(s.sframe_addr, self_.sframe_addr);
  auto e = SelfEntry(t.pid());
  ASSERT_TRUE(e);
  EXPECT_EQ(e->source, Source::kSupplied);
  auto w = t.Go();
  ASSERT_TRUE(w);
  EXPECT_TRUE(w->chain_ok);
  EXPECT_GE(w->nr_sframe, 4u);
}

// Runs the command-line tool; its stdout, and its exit status in *status.
std::string RunTool(const std::string& args, int* status) {
  std::string out;
  FILE* p = popen((vmtest::BuildTreeFile(SFRAME_CLIENT_TOOL_REL) + " " + args + " 2>&1").c_str(), "r");
  if (!p) return out;
  char buf[512];
  while (std::fgets(buf, sizeof(buf), p)) out += buf;
  int st = pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

TEST_F(SupplyTest, ToolSuppliesAndListsForAPid) {
  Target t;
  ASSERT_TRUE(t.ok());
  const std::string pid = std::to_string(t.pid());
  int status = -1;
  std::string out = RunTool("supply " + pid + " " + sframe::self_exe_path(), &status);
  EXPECT_EQ(status, 0) << out;
  out = RunTool("list " + pid, &status);
  EXPECT_EQ(status, 0) << out;
  // One line per entry: the program's text, supplied, with its path.
  bool found = false;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" supplied ") != std::string::npos &&
        line.find(sframe::self_exe_path()) != std::string::npos)
      found = true;
  }
  EXPECT_TRUE(found) << out;
  EXPECT_NE(out.find("entries,"), std::string::npos) << out;

  // Errors a user can act on, on stderr, with a non-zero status.
  out = RunTool("list 2147483000", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("no such process"), std::string::npos) << out;
  if (geteuid() != 0) {
    out = RunTool("supply 1 " + sframe::self_exe_path(), &status);
    EXPECT_NE(status, 0);
    EXPECT_NE(out.find("ptrace"), std::string::npos) << out;
  }
}

// The control of the tests above: without the supplied section, only
// discovery (as a user; off as root) covers the same walk.
TEST_F(SupplyTest, WithoutASuppliedSectionOnlyDiscoveryCovers) {
  Target t;
  ASSERT_TRUE(t.ok());
  auto w = t.Go();
  ASSERT_TRUE(w);
  if (vmtest::DiscoveryEnabled()) {
    EXPECT_TRUE(w->chain_ok);
  } else {
    EXPECT_EQ(w->nr_frames, 1u);
    EXPECT_EQ(w->nr_sframe, 0u);
    EXPECT_EQ(w->stop, static_cast<uint32_t>(StopReason::kNoCoverage));
  }
}

// A supplied section replaces the sections discovery found for the text,
// as the program's own registration does; it does not replace those.
TEST_F(SupplyTest, SuppliedReplacesDiscoveredButNotRegistered) {
  if (vmtest::DiscoveryEnabled()) {
    // Discover the program's own text first (an unwind reaches it).
    dev().unwind_self(8, SFRAME_UNWIND_F_SFRAME);
    auto before = SelfEntry(0);
    ASSERT_TRUE(before);
    EXPECT_EQ(before->source, Source::kDiscovered);
  }
  ASSERT_EQ(Supply(0), 0);
  auto e = SelfEntry(0);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->source, Source::kSupplied);
  EXPECT_EQ(Supply(0), EEXIST) << "a second supply overlaps the first";
  EXPECT_EQ(sframe::errno_of([&] {
              dev().register_section(self_.sframe_addr, self_.sframe_len, self_.text_start,
                                     self_.text_len);
            }),
            EEXIST)
      << "a registration overlaps the supplied section";
  dev().unregister_section_of(getpid(), self_.text_start);
  EXPECT_FALSE(SelfEntry(0) && SelfEntry(0)->source == Source::kSupplied);
}

TEST_F(SupplyTest, UnregisterForAnotherProcess) {
  const uint64_t held_before = dev().stats().supplied_bytes;
  Target t;
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(Supply(t.pid()), 0);
  EXPECT_EQ(sframe::errno_of([&] { dev().unregister_section_of(t.pid(), self_.text_start + 1); }),
            ENOENT);
  EXPECT_EQ(sframe::errno_of([&] { dev().unregister_section_of(t.pid(), self_.text_start); }), 0);
  EXPECT_FALSE(SelfEntry(t.pid()));
  EXPECT_EQ(dev().stats().supplied_bytes, held_before) << "the copy is freed at once";
  auto w = t.Go();
  ASSERT_TRUE(w);
  if (!vmtest::DiscoveryEnabled()) {
    EXPECT_EQ(w->nr_frames, 1u) << "nothing covers it any more";
  }

  sframe_unregister req{};
  req.size = sizeof(req);
  req.text_start = self_.text_start;
  req.pid = getpid();  // without SFRAME_UNREGISTER_F_PID
  EXPECT_EQ(::ioctl(dev().fd(), SFRAME_IOC_UNREGISTER, &req) == 0 ? 0 : errno, EINVAL);
}

// A fork child gets its own entry for a supplied section, sharing the
// parent's kernel copy: the bytes are held (and counted) once, and the
// child's entry goes when the child exits.
TEST_F(SupplyTest, ForkChildInheritsASuppliedSection) {
  ASSERT_EQ(Supply(0), 0);
  const uint64_t held = dev().stats().supplied_bytes;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int rc = 0;
    auto e = SelfEntry(0);
    if (!e || e->source != Source::kSupplied) rc |= 1;
    if (dev().stats().supplied_bytes != held) rc |= 2;
    _exit(rc);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: no supplied entry in the child, 2: the shared copy counted again";
  EXPECT_EQ(dev().stats().supplied_bytes, held) << "the child's exit changes nothing held";
  dev().unregister_section_of(0, self_.text_start);
}

// ---- permissions ------------------------------------------------------------

// Run as a user: init belongs to root.  Run as root: a child that drops to
// uid 65534 tries the same on its root parent.
TEST_F(SupplyTest, OnlyWhoMayPtraceAProcessSuppliesForIt) {
  if (geteuid() != 0) {
    EXPECT_EQ(Supply(1), EPERM);
    EXPECT_EQ(sframe::errno_of([&] { dev().list_sections(1); }), EPERM);
    EXPECT_EQ(sframe::errno_of([&] { dev().unregister_section_of(1, self_.text_start); }), EPERM);
    return;
  }
  const pid_t parent = getpid();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int rc = 0;
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(64);
    if (Supply(parent) != EPERM) rc |= 1;
    if (sframe::errno_of([&] { dev().list_sections(parent); }) != EPERM) rc |= 2;
    if (sframe::errno_of([&] { dev().unregister_section_of(parent, self_.text_start); }) != EPERM)
      rc |= 4;
    // Its own process stays its own.
    if (Supply(0) != 0) rc |= 8;
    _exit(rc);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: supply, 2: list, 4: unregister not EPERM; "
                                       "8: supplying for itself failed; 64: setuid failed";
  EXPECT_FALSE(SelfEntry(0)) << "nothing reached the parent";
}

TEST_F(SupplyTest, NoSuchProcess) {
  // Beyond the default pid_max (4194304 at most): never a process.
  EXPECT_EQ(Supply(0x7ffffff0), ESRCH);
  EXPECT_EQ(Supply(-5), ESRCH);
  EXPECT_EQ(sframe::errno_of([&] { dev().list_sections(0x7ffffff0); }), ESRCH);
  // A kernel thread (kthreadd) has no address space.
  if (geteuid() == 0) {
    EXPECT_EQ(Supply(2), ESRCH);
  }
}

// ---- bad input --------------------------------------------------------------

TEST_F(SupplyTest, MalformedOrOversizedSectionsAreRefused) {
  const uint64_t held_before = dev().stats().supplied_bytes;
  std::vector<uint8_t> bad = bytes_;
  bad[0] ^= 0xff;  // the magic
  EXPECT_EQ(Supply(0, bad), ENOEXEC);

  bad = bytes_;
  // num_fdes (preamble 4 bytes, then abi/arch, fixed offsets, aux header
  // length: 4 more) far beyond what the section holds.
  const uint32_t huge = 0x10000000;
  std::memcpy(bad.data() + 8, &huge, 4);
  EXPECT_EQ(Supply(0, bad), EINVAL);

  bad.assign(bytes_.begin(), bytes_.begin() + 16);  // a truncated header
  EXPECT_EQ(Supply(0, bad), EINVAL);

  sframe_supply req = SelfRequest(0);
  req.sframe_len = SFRAME_MAX_SECTION_SIZE + 1ull;
  EXPECT_EQ(SupplyRaw(&req), E2BIG);
  req = SelfRequest(0);
  req.sframe_data = 0x1000;  // not mapped
  EXPECT_EQ(SupplyRaw(&req), EFAULT);
  req = SelfRequest(0);
  req.text_start = 0x1000;  // the target's text: not mapped
  req.text_len = 0x1000;
  EXPECT_EQ(SupplyRaw(&req), EFAULT);
  // Mapped but not executable in the target.
  void* data = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(data, MAP_FAILED);
  req = SelfRequest(0);
  req.text_start = reinterpret_cast<uintptr_t>(data);
  req.text_len = 4096;
  EXPECT_EQ(SupplyRaw(&req), EACCES);
  munmap(data, 4096);
  // FDEs outside the text given.
  req = SelfRequest(0);
  req.text_len = 16;
  EXPECT_EQ(SupplyRaw(&req), EINVAL);

  req = SelfRequest(0);
  req.flags = 1;
  EXPECT_EQ(SupplyRaw(&req), EINVAL);
  req = SelfRequest(0);
  req.reserved[1] = 1;
  EXPECT_EQ(SupplyRaw(&req), EINVAL);
  req = SelfRequest(0);
  req.sframe_len = 0;
  EXPECT_EQ(SupplyRaw(&req), EINVAL);
  req = SelfRequest(0);
  req.size = SFRAME_SUPPLY_SIZE_VER0 - 8;
  EXPECT_EQ(SupplyRaw(&req), EINVAL);

  EXPECT_FALSE(SelfEntry(0) && SelfEntry(0)->source == Source::kSupplied);
  EXPECT_EQ(dev().stats().supplied_bytes, held_before) << "nothing is held after refusals";
}

TEST_F(SupplyTest, ListingValidatesItsRequest) {
  sframe_list_sections req{};
  req.size = sizeof(req);
  req.max_entries = SFRAME_MAX_SECTIONS_PER_MM + 1;
  EXPECT_EQ(::ioctl(dev().fd(), SFRAME_IOC_LIST_SECTIONS, &req) == 0 ? 0 : errno, EINVAL);
  req = {};
  req.size = sizeof(req);
  req.reserved[0] = 1;
  EXPECT_EQ(::ioctl(dev().fd(), SFRAME_IOC_LIST_SECTIONS, &req) == 0 ? 0 : errno, EINVAL);

  ASSERT_EQ(Supply(0), 0);
  req = {};
  req.size = sizeof(req);
  req.max_entries = 1;
  req.entries = 0x1000;  // not writable
  EXPECT_EQ(::ioctl(dev().fd(), SFRAME_IOC_LIST_SECTIONS, &req) == 0 ? 0 : errno, EFAULT);
  // Counting only.
  req = {};
  req.size = sizeof(req);
  ASSERT_EQ(::ioctl(dev().fd(), SFRAME_IOC_LIST_SECTIONS, &req), 0);
  EXPECT_GE(req.nr_entries, 1u);
  dev().unregister_section_of(getpid(), self_.text_start);
}

// ---- bounds -----------------------------------------------------------------

// Bytes held per process and in total are bounded (lowered here through
// the module parameters, which only root may write).
TEST_F(SupplyTest, SuppliedBytesAreBoundedPerProcessAndInTotal) {
  if (geteuid() != 0) GTEST_SKIP() << "lowering the bounds needs root (module parameters)";
  const uint64_t kb = (bytes_.size() + 1023) / 1024;
  {
    vmtest::ScopedModuleParam per_process("supply_max_process_kb",
                                          std::to_string(kb - 1 ? kb - 1 : 0).c_str());
    ASSERT_TRUE(per_process.ok());
    EXPECT_EQ(Supply(0), EDQUOT);
  }
  {
    const uint64_t held = dev().stats().supplied_bytes;
    vmtest::ScopedModuleParam total("supply_max_total_kb",
                                    std::to_string(held / 1024 + kb - 1).c_str());
    ASSERT_TRUE(total.ok());
    Target t;
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(Supply(t.pid()), EDQUOT);
  }
  EXPECT_EQ(Supply(0), 0) << "back within the bounds";
  dev().unregister_section_of(getpid(), self_.text_start);
}

// ---- races ------------------------------------------------------------------

// One thread walks through the program's text while another supplies and
// unregisters its section: every walk ends, no fault, no stale read (the
// module reads the kernel copy under RCU).
TEST_F(SupplyTest, SupplyAndUnregisterRacingWalks) {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> walks{0};
  std::thread walker([&] {
    sframe::Device dev2(vmtest::DevicePath());
    while (!stop.load()) {
      WalkReport w;
      sup_a(&w);
      walks++;
    }
  });
  int failures = 0;
  for (int i = 0; i < 2000; i++) {
    if (Supply(0) != 0) failures++;
    if (sframe::errno_of([&] { dev().unregister_section_of(0, self_.text_start); }) != 0)
      failures++;
  }
  stop = true;
  walker.join();
  EXPECT_EQ(failures, 0);
  EXPECT_GT(walks.load(), 0u);
  EXPECT_FALSE(SelfEntry(0) && SelfEntry(0)->source == Source::kSupplied);
}

// ---- supplies racing their target's fork, exec and exit ---------------------
//
// The fuzzer's last check twice found the module's counters not back after
// every worker had exited: one supplied section of the fuzzer's own program,
// in one process (issue 28; 6.12 as uid 65534, and 6.1 as root).  The races
// it suspects are made dense here.  A churner forks one child after another;
// each child publishes its pid, waits a moment, then forks a grandchild
// (which inherits whatever was supplied to the child by then), execs
// /bin/true, or exits.  Two threads of the test supply the program's own
// section, as fast as they can, to the newest child and the newest
// grandchild: supplies land before, during and after each fork, exec and
// exit.  Afterwards the counters must come back, as in the fuzzer.
TEST_F(SupplyTest, SuppliesRacingTheirTargetsForkExecAndExitLeaveNothingBehind) {
  struct Churn {
    std::atomic<pid_t> newest[2];  // child, grandchild
    std::atomic<int> stop;
    std::atomic<uint64_t> children;
    std::atomic<uint64_t> failed;  // a child or grandchild that did not end with 0
  };
  void* mem = mmap(nullptr, sizeof(Churn), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  Churn* churn = new (mem) Churn{};

  const sframe::Stats before = dev().stats();
  // Forked before any thread of the test exists: the churner and its
  // children are single-threaded copies of the program.
  const pid_t churner = fork();
  ASSERT_GE(churner, 0);
  if (churner == 0) {
    for (uint64_t n = 0; !churn->stop.load(); n++) {
      const pid_t child = fork();
      if (child < 0) _exit(2);
      if (child == 0) {
        churn->newest[0] = getpid();
        // 0 to 1.5 ms: the suppliers' requests reach the child at every
        // point of its short life.
        const timespec ts{0, static_cast<long>((n * 7919) % 1500) * 1000};
        nanosleep(&ts, nullptr);
        switch (n % 3) {
          case 0: {
            const pid_t grandchild = fork();
            if (grandchild == 0) {
              churn->newest[1] = getpid();
              nanosleep(&ts, nullptr);
              _exit(0);
            }
            int st = 0;
            while (grandchild > 0 && waitpid(grandchild, &st, 0) < 0 && errno == EINTR) {
            }
            _exit(grandchild > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1);
          }
          case 1: {
            char* const argv[] = {const_cast<char*>("true"), nullptr};
            char* const envp[] = {nullptr};
            execve("/bin/true", argv, envp);
            _exit(1);
          }
          default:
            _exit(0);
        }
      }
      int st = 0;
      while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
      }
      churn->children++;
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) churn->failed++;
    }
    _exit(0);
  }

  // What a supply to a process anywhere in its life may get: done, already
  // covered (EEXIST), gone (ESRCH), exec'd into a program without this text
  // (EFAULT), or its pid reused by another user's process (EPERM).
  std::atomic<uint64_t> supplied{0}, refused{0}, undocumented{0};
  std::atomic<int> first_undocumented{0};
  std::vector<std::thread> suppliers;
  // Until the churner has made kChildren processes (some 6 s under TCG),
  // or 30 s: a count, not a time, so that a slow host races as many lives.
  constexpr uint64_t kChildren = 150;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int t = 0; t < 2; t++) {
    suppliers.emplace_back([&, t] {
      while (churn->children.load() < kChildren &&
             std::chrono::steady_clock::now() < deadline) {
        const pid_t pid = churn->newest[t].load();
        if (pid <= 0) {
          std::this_thread::yield();
          continue;
        }
        const int e = Supply(pid);
        if (e == 0) {
          supplied++;
          // Taken away again at once, every other time: the target's
          // registry changes under its fork and its exit too.
          if (supplied % 2) {
            sframe::errno_of([&] { dev().unregister_section_of(pid, self_.text_start); });
          }
        } else if (e == EEXIST || e == ESRCH || e == EFAULT || e == EPERM) {
          refused++;
          // Nothing new until the churner's next process: let it run.
          std::this_thread::yield();
        } else {
          undocumented++;
          int zero = 0;
          first_undocumented.compare_exchange_strong(zero, e);
        }
      }
    });
  }
  for (auto& s : suppliers) s.join();
  churn->stop = 1;
  int st = 0;
  while (waitpid(churner, &st, 0) < 0 && errno == EINTR) {
  }
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "churner: status 0x" << std::hex << st;

  const sframe::Stats after = vmtest::WaitForRegistriesBack(dev(), before);
  const uint64_t inherited = after.forks_inherited - before.forks_inherited;
  std::printf("%" PRIu64 " children, %" PRIu64 " supplies done, %" PRIu64 " refused, %" PRIu64
              " forks inherited\n",
              churn->children.load(), supplied.load(), refused.load(), inherited);
  RecordProperty("children", std::to_string(churn->children.load()));
  RecordProperty("supplied", std::to_string(supplied.load()));
  RecordProperty("forks_inherited", std::to_string(inherited));
  EXPECT_EQ(undocumented.load(), 0u) << "first: " << std::strerror(first_undocumented.load());
  EXPECT_EQ(churn->failed.load(), 0u);
  EXPECT_GE(churn->children.load(), kChildren) << "the churner fell short in 30 s";
  EXPECT_GT(supplied.load(), 0u);
  EXPECT_GT(inherited, 0u) << "no grandchild inherited a supply";
  EXPECT_EQ(after.sections, before.sections);
  EXPECT_EQ(after.processes, before.processes);
  EXPECT_EQ(after.supplied_bytes, before.supplied_bytes);
  munmap(mem, sizeof(Churn));
}

// ---- a registration racing the unmap of its text --------------------------
//
// A supply or a registration checks that its text is mapped, then inserts
// the entry; an munmap erases the entries of the text it unmaps.  An munmap
// that falls between the check and the insertion finds nothing to erase,
// and the entry then describes whatever is mapped there next.  Here one
// thread maps and unmaps a page of text, again and again, at one address;
// another supplies (or registers) a section for it, as fast as it can.
// After each munmap, once the call in flight has returned, no entry may
// cover the page.
TEST_F(SupplyTest, ASectionNeverOutlivesTheUnmapOfItsText) {
  // One function of 16 bytes at the start of a page of its own.
  constexpr size_t kPage = 4096;
  vmtest::SyntheticSections syn(1);
  const uint64_t text = syn.text(0);
  void* const text_ptr = reinterpret_cast<void*>(text);
  const std::vector<uint8_t> bytes(reinterpret_cast<const uint8_t*>(syn.section(0)),
                                   reinterpret_cast<const uint8_t*>(syn.section(0)) +
                                       syn.section_len());
  for (const bool supply : {true, false}) {
    SCOPED_TRACE(supply ? "supply" : "register");
    std::atomic<bool> stop{false};
    std::atomic<int> inflight{0};
    std::atomic<uint64_t> done{0}, refused{0};
    std::atomic<int> undocumented{0};
    std::thread caller([&] {
      while (!stop.load()) {
        inflight = 1;
        long r;
        if (supply) {
          sframe_supply req{};
          req.size = sizeof(req);
          req.sframe_data = reinterpret_cast<uintptr_t>(bytes.data());
          req.sframe_len = bytes.size();
          req.sframe_addr = syn.section(0);
          req.text_start = text;
          req.text_len = syn.chunk();
          r = ::ioctl(dev().fd(), SFRAME_IOC_SUPPLY, &req);
        } else {
          sframe_register req{};
          req.size = sizeof(req);
          req.sframe_addr = syn.section(0);
          req.sframe_len = syn.section_len();
          req.text_start = text;
          req.text_len = syn.chunk();
          r = ::ioctl(dev().fd(), SFRAME_IOC_REGISTER, &req);
        }
        const int e = r == 0 ? 0 : errno;
        inflight = 0;
        if (e == 0) {
          done++;
        } else if (e == EEXIST || e == EFAULT) {
          refused++;
        } else if (!undocumented.load()) {
          undocumented = e;
        }
      }
    });
    uint64_t cycles = 0, stale = 0;
    bool lost = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (std::chrono::steady_clock::now() < deadline) {
      // 0 to 50 us mapped: the caller's check and insertion land on
      // either side of the munmap.
      const auto until = std::chrono::steady_clock::now() +
                         std::chrono::microseconds((cycles * 7) % 50);
      while (std::chrono::steady_clock::now() < until) {
      }
      ASSERT_EQ(munmap(text_ptr, kPage), 0) << std::strerror(errno);
      while (inflight.load()) std::this_thread::yield();
      cycles++;
      for (const auto& e : dev().list_sections(0)) {
        if (e.text_start <= text && text < e.text_start + e.text_len) {
          stale++;
          sframe::errno_of([&] { dev().unregister_section_of(0, e.text_start); });
        }
      }
      // MAP_FIXED_NOREPLACE: never over a mapping another thread made
      // there meanwhile.
      if (mmap(text_ptr, kPage, PROT_READ | PROT_EXEC,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) != text_ptr) {
        lost = true;
        break;
      }
    }
    stop = true;
    caller.join();
    std::printf("%s: %" PRIu64 " unmaps, %" PRIu64 " calls done, %" PRIu64
                " refused; %" PRIu64 " entries outlived their text\n",
                supply ? "supply" : "register", cycles, done.load(), refused.load(), stale);
    ASSERT_FALSE(lost) << "another mapping took the text's address";
    EXPECT_EQ(undocumented.load(), 0) << std::strerror(undocumented.load());
    EXPECT_GT(done.load(), 0u);
    EXPECT_EQ(stale, 0u) << "of " << cycles << " unmaps";
    sframe::errno_of([&] { dev().unregister_section_of(0, text); });
  }
}

}  // namespace
