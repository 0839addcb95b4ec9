// Issue 10, finding 1: unbounded decoding work.  An unprivileged process
// (the rig runs this suite as root and as uid 65534; every test but the
// session one is the unprivileged attack itself and runs in both) tries to
// make the module decode without end:
//   - the maximal section (one FDE of 10 M FREs in 60 MB) must be taken at
//     once, without its FREs being read: since issue 28 an FDE above
//     SFRAME_MAX_FRES_PER_FDE is skipped (its function has no rows, counted
//     in LIST_SECTIONS' nr_fdes_skipped) instead of the section being
//     refused with E2BIG; a walk through such functions goes on with frame
//     pointers, decoding nothing;
//   - a section at the cap and a crafted chain of 4096 frames with
//     distinct PCs (see bounds_attack.h) make one UNWIND_SELF do the most
//     decoding a walk may where the section has no FDE index (root sets
//     index_max_user_kb to 0 for it; uid 65534's run walks the indexed
//     section, one unit per frame): it must end with SFRAME_STOP_BUDGET
//     within a bound derived from SFRAME_WALK_BUDGET, and SIGKILL must end
//     a process looping in it promptly;
//   - a session sampling that chain at 10 kHz (perf cpu-clock, hrtimer
//     interrupt) must neither lock up the guest (the rig panics on soft
//     lockups and RCU stalls) nor lose its samples, and the walks at sample
//     time must stop on their small budget;
//   - issue 27, point 3: the same for a software event that samples in task
//     context with preemption off (page faults, which any user may sample
//     at perf_event_paranoid 2): the walk at sample time gets the small
//     budget too, not the task's 2^20 units.
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <poll.h>
#include <fcntl.h>
#include <sstream>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bounds_attack.h"
#include "sessions.h"
#include "vmtest.h"

namespace {

using bounds::Attack;
using vmtest::NowMs;

// Wall-clock ceiling of one worst-case UNWIND_SELF in the VM.  The bound
// is SFRAME_WALK_BUDGET units plus one lookup (SFRAME_LOOKUP_MAX_UNITS)
// and 4096 frames of a few loads each; measured under qemu TCG it takes
// 0.08 to 0.36 s (docs/history/issue-10-bounds-first-run.md).  Five
// seconds leave room for two loaded vCPUs, and are still 45 times below
// the 230 s of the issue.
constexpr uint64_t kWorstUnwindCeilingMs = 5000;

class BoundsTest : public vmtest::DeviceTest {
 protected:
  int fd() const { return dev().fd(); }
};

// The caller's entry for the text at text_start, from LIST_SECTIONS.
std::optional<sframe::SectionInfo> ListedAt(const sframe::Device& dev, uint64_t text_start) {
  for (const sframe::SectionInfo& e : dev.list_sections(0)) {
    if (e.text_start == text_start) return e;
  }
  return std::nullopt;
}

// (a) The maximal section of the issue is taken at once, its one FDE
// skipped.
TEST_F(BoundsTest, MaximalSectionIsSkippedAtOnce) {
  const uint32_t n = 10u << 20;
  const uint64_t func_size = n + 16;
  // 10 M FREs with 4-byte starts: 6 bytes each, 60 MB, under the 64 MiB
  // SFRAME_MAX_SECTION_SIZE.  Text for the FDE: 10 MiB of executable
  // anonymous memory.
  const uint64_t text_len = bounds::RoundUp(func_size);
  void* text = mmap(nullptr, text_len, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(text, MAP_FAILED) << std::strerror(errno);
  const uint64_t sec_len = 28 + 20 + static_cast<uint64_t>(n) * 6;
  ASSERT_LE(sec_len, SFRAME_MAX_SECTION_SIZE);
  void* secp = mmap(nullptr, sec_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(secp, MAP_FAILED) << std::strerror(errno);
  uint8_t* s = static_cast<uint8_t*>(secp);
  const uint64_t sec = reinterpret_cast<uint64_t>(secp);
  auto put = [&](uint64_t at, uint64_t v, int len) {
    for (int i = 0; i < len; i++) s[at + i] = static_cast<uint8_t>(v >> (8 * i));
  };
  put(0, 0xdee2, 2);
  put(2, 2, 1);
  put(3, 1, 1);
  put(4, 3, 1);
  put(6, 0xf8, 1);
  put(8, 1, 4);
  put(12, n, 4);
  put(16, static_cast<uint64_t>(n) * 6, 4);
  put(20, 0, 4);
  put(24, 20, 4);
  put(28, static_cast<uint32_t>(static_cast<int32_t>(reinterpret_cast<uint64_t>(text) - sec)), 4);
  put(32, func_size, 4);
  put(36, 0, 4);
  put(40, n, 4);
  put(44, 2, 1);  // 4-byte FRE starts
  for (uint32_t j = 0; j < n; j++) {
    const uint64_t at = 48 + static_cast<uint64_t>(j) * 6;
    put(at, j, 4);
    s[at + 4] = 0x03;  // CFA = SP + 8
    s[at + 5] = 8;
  }
  // PC-relative addresses are not used: the FDE start is from the section.
  const int64_t dist = static_cast<int64_t>(reinterpret_cast<uint64_t>(text) - sec);
  ASSERT_TRUE(dist >= INT32_MIN && dist <= INT32_MAX) << "mappings too far apart";

  sframe_register r{};
  r.size = sizeof(r);
  r.sframe_addr = sec;
  r.sframe_len = sec_len;
  r.text_start = reinterpret_cast<uint64_t>(text);
  r.text_len = text_len;
  const uint64_t t0 = NowMs();
  const int rc = ioctl(fd(), SFRAME_IOC_REGISTER, &r);
  const int err = errno;
  const uint64_t ms = NowMs() - t0;
  EXPECT_EQ(rc, 0) << std::strerror(err);
  // Skipped at the FDE, none of its FREs read (reading them took 752 ms).
  EXPECT_LT(ms, 200u);
  std::optional<sframe::SectionInfo> e = ListedAt(dev(), r.text_start);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->nr_fdes, 1u);
  EXPECT_EQ(e->nr_fdes_skipped, 1u);
  EXPECT_EQ(e->covered_bytes, 0u);
  sframe_unregister u{};
  u.size = sizeof(u);
  u.text_start = r.text_start;
  EXPECT_EQ(ioctl(fd(), SFRAME_IOC_UNREGISTER, &u), 0);

  // The cap's FREs in the same place: not skipped, so the mark is the
  // cap's, not the layout's.
  put(12, bounds::kCap, 4);
  put(16, static_cast<uint64_t>(bounds::kCap) * 6, 4);
  put(40, bounds::kCap, 4);
  r.sframe_len = 48 + static_cast<uint64_t>(bounds::kCap) * 6;
  EXPECT_EQ(ioctl(fd(), SFRAME_IOC_REGISTER, &r), 0) << std::strerror(errno);
  e = ListedAt(dev(), r.text_start);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->nr_fdes_skipped, 0u);
  EXPECT_EQ(e->covered_bytes, func_size);
  EXPECT_EQ(ioctl(fd(), SFRAME_IOC_UNREGISTER, &u), 0);
  munmap(secp, sec_len);
  munmap(text, text_len);
}

// (b) The worst walk under the bounds: a section at the cap, 4096 crafted
// frames with distinct PCs.  It ends on its budget, within the ceiling.
TEST_F(BoundsTest, CraftedChainStopsOnItsBudgetInTime) {
  const auto no_index = vmtest::NoFdeIndexIfRoot();
  if (no_index) {
    ASSERT_TRUE(no_index->ok());
  }
  Attack a;
  ASSERT_TRUE(a.Build()) << std::strerror(errno);
  ASSERT_EQ(a.Register(fd()), 0);
  sframe_stats before, after;
  ASSERT_TRUE(bounds::GetStats(fd(), &before));

  sframe_unwind_self req;
  std::vector<uint64_t> frames;
  uint64_t ns = 0;
  ASSERT_EQ(bounds::UnwindThroughChain(a, fd(), &req, &frames, &ns), 0);
  ASSERT_TRUE(bounds::GetStats(fd(), &after));
  std::printf("%s UNWIND_SELF: %.1f ms, %u frames, stop %u\n",
              no_index ? "worst-case (no index)" : "indexed", ns / 1e6, req.nr_frames,
              req.stop_reason);
  // Without an index the walk ends on its budget; indexed, at one unit
  // per frame, it follows every crafted frame to the request's limit.
  // Either way within the ceiling, and with SFrame through the crafted
  // frames.
  EXPECT_EQ(req.stop_reason,
            static_cast<uint32_t>(no_index ? SFRAME_STOP_BUDGET : SFRAME_STOP_LIMIT));
  EXPECT_LT(ns / 1000000, kWorstUnwindCeilingMs);
  ASSERT_GE(req.nr_frames, 3u);
  EXPECT_EQ(frames[1], a.FramePc(0) + 1);
  EXPECT_EQ(frames[2], a.FramePc(1) + 1);
  EXPECT_EQ(req.nr_sframe, req.nr_frames - 1);
  if (!no_index) {
    EXPECT_EQ(after.walks_budget_exhausted, before.walks_budget_exhausted);
    EXPECT_EQ(a.Unregister(fd()), 0);
    return;
  }
  // Each lookup costs at least the FREs before its PC (over 7900).
  EXPECT_LE(req.nr_frames, 2 + SFRAME_WALK_BUDGET / (bounds::kCap - 300));
  EXPECT_GE(req.nr_frames, SFRAME_WALK_BUDGET / (bounds::kCap + 40));
  EXPECT_GE(after.walks_budget_exhausted, before.walks_budget_exhausted + 1);

  // Again: the rows cached by the first walk are free, so this one gets
  // further, and still ends within the bound (on the budget or the limit).
  ASSERT_EQ(bounds::UnwindThroughChain(a, fd(), &req, &frames, &ns), 0);
  EXPECT_TRUE(req.stop_reason == SFRAME_STOP_BUDGET || req.stop_reason == SFRAME_STOP_LIMIT)
      << req.stop_reason;
  EXPECT_LT(ns / 1000000, kWorstUnwindCeilingMs);
  EXPECT_EQ(a.Unregister(fd()), 0);
}

// (b') The same attack one FRE above the cap: the section is taken with
// every FDE skipped, and the walk decodes nothing.  Its functions have no
// rows, as code no section covers: with frame pointers allowed the walk
// follows the crafted chain by them (the frames it makes are the chain's,
// nothing made up), SFrame alone stops at the first frame.
TEST_F(BoundsTest, SectionAboveTheCapIsSkipped) {
  const auto no_index = vmtest::NoFdeIndexIfRoot();
  if (no_index) {
    ASSERT_TRUE(no_index->ok());
  }
  Attack a;
  ASSERT_TRUE(a.Build(bounds::kCap + 1)) << std::strerror(errno);
  ASSERT_EQ(a.Register(fd()), 0);
  std::optional<sframe::SectionInfo> e = ListedAt(dev(), a.text);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->nr_fdes, bounds::kFdes);
  EXPECT_EQ(e->nr_fdes_skipped, bounds::kFdes);
  EXPECT_EQ(e->covered_bytes, 0u);

  sframe_stats before, after;
  ASSERT_TRUE(bounds::GetStats(fd(), &before));
  sframe_unwind_self req;
  std::vector<uint64_t> frames;
  uint64_t ns = 0;
  ASSERT_EQ(bounds::UnwindThroughChain(a, fd(), &req, &frames, &ns), 0);
  ASSERT_TRUE(bounds::GetStats(fd(), &after));
  std::printf("skipped FDEs, frame pointers: %.1f ms, %u frames, stop %u\n", ns / 1e6,
              req.nr_frames, req.stop_reason);
  EXPECT_EQ(req.stop_reason, static_cast<uint32_t>(SFRAME_STOP_LIMIT));
  EXPECT_EQ(req.nr_frames, static_cast<uint32_t>(SFRAME_MAX_FRAMES));
  EXPECT_EQ(req.nr_sframe, 0u);
  EXPECT_EQ(req.nr_fp, req.nr_frames - 1);
  ASSERT_GE(req.nr_frames, 3u);
  EXPECT_EQ(frames[1], a.FramePc(0) + 1);
  EXPECT_EQ(frames[2], a.FramePc(1) + 1);
  EXPECT_EQ(after.walks_budget_exhausted, before.walks_budget_exhausted);
  EXPECT_LT(ns / 1000000, kWorstUnwindCeilingMs);

  ASSERT_EQ(bounds::UnwindThroughChain(a, fd(), &req, &frames, &ns, SFRAME_UNWIND_F_SFRAME), 0);
  EXPECT_EQ(req.stop_reason, static_cast<uint32_t>(SFRAME_STOP_NO_COVERAGE));
  EXPECT_EQ(req.nr_frames, 1u);
  EXPECT_EQ(req.nr_sframe, 0u);
  EXPECT_EQ(a.Unregister(fd()), 0);
}

// (c) A process looping in the worst UNWIND_SELF dies promptly of SIGKILL.
TEST_F(BoundsTest, SigkillEndsALoopOfWorstCaseUnwinds) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(p[0]);
    Attack a;
    if (!a.Build() || a.Register(fd()) != 0) _exit(2);
    sframe_unwind_self req;
    std::vector<uint64_t> frames;
    uint64_t ns;
    bool told = false;
    for (;;) {
      if (bounds::UnwindThroughChain(a, fd(), &req, &frames, &ns) != 0) _exit(3);
      // Each round invalidates the row cache, so each walk is the worst.
      if (a.Unregister(fd()) != 0 || a.Register(fd()) != 0) _exit(4);
      if (!told) {
        told = write(p[1], "r", 1) == 1;
      }
    }
  }
  close(p[1]);
  char c;
  ASSERT_EQ(read(p[0], &c, 1), 1) << "the child could not run the attack";
  close(p[0]);
  usleep(300 * 1000);  // well inside the loop
  const uint64_t t0 = NowMs();
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  const uint64_t ms = NowMs() - t0;
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << st;
  EXPECT_LT(ms, 2000u);
  std::printf("SIGKILL to reaped: %llu ms\n", static_cast<unsigned long long>(ms));
}

// (d) A session samples the crafted chain at 10 kHz: samples come back,
// the guest does not lock up, and the walks at sample time stop on their
// budget (counted in walks_budget_exhausted) rather than decode at length
// with interrupts off.
class BoundsSessionTest : public vmtest::SessionTest {
 protected:
  int fd() const { return dev().fd(); }
};

TEST_F(BoundsSessionTest, TenKilohertzSessionOnTheCraftedChain) {
  // Sessions follow perf_event_open()'s rules; root always may.
  if (!vmtest::IsRoot() && SkipWithoutPerf()) {
    GTEST_SKIP() << "perf_event_paranoid " << paranoid_ << " forbids perf to uid " << geteuid()
                 << "; the root run covers this test";
  }
  // The worst case: without an index (see vmtest::NoFdeIndexIfRoot(); the
  // indexed crafted section is no worst case).
  const auto no_index = vmtest::NoFdeIndexIfRoot();
  if (no_index) {
    ASSERT_TRUE(no_index->ok());
  }
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(p[0]);
    Attack a;
    if (!a.Build() || a.Register(fd()) != 0) _exit(2);
    const uint64_t where[1] = {a.text};
    if (write(p[1], where, sizeof(where)) != sizeof(where)) _exit(3);
    // Registration changes invalidate the row cache: every few hundred
    // milliseconds the walks start cold again.
    for (int round = 0; round < 20; round++) {
      bounds::SpinThroughChain(a, 300);
      if (a.Unregister(fd()) != 0 || a.Register(fd()) != 0) _exit(4);
    }
    _exit(0);
  }
  close(p[1]);
  uint64_t where[1];
  ASSERT_EQ(read(p[0], where, sizeof(where)), static_cast<ssize_t>(sizeof(where)))
      << "the child could not set up the attack";
  close(p[0]);
  const uint64_t text = where[0];

  sframe_stats before, after;
  ASSERT_TRUE(bounds::GetStats(fd(), &before));
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(pid, PerfOptions(10000));
  sframe::SessionOptions so;
  so.device = vmtest::DevicePath();
  sframe::Session s = sframe::Session::start(sframe::Target::kProcess, pid, so);
  vmtest::Collected col = vmtest::Collect(&s, &ev, 3000);
  ASSERT_TRUE(bounds::GetStats(fd(), &after));
  kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);

  size_t samples = 0, budget = 0, limit = 0, in_spin = 0, through = 0;
  size_t user_mode = 0, user_mode_budget = 0, timed_out = 0, exited = 0;
  for (const sframe::Sample* smp : col.Samples()) {
    samples++;
    timed_out += smp->has(SFRAME_SAMPLE_F_TIMEOUT);
    exited += smp->has(SFRAME_SAMPLE_F_EXITED);
    const uint32_t stop = static_cast<uint32_t>(smp->user_stop);
    budget += stop == SFRAME_STOP_BUDGET;
    limit += stop == SFRAME_STOP_LIMIT;
    // Taken in user mode: walked at sample time, in the interrupt (the
    // others share the walk made when the task returns to user space).
    if (smp->has(SFRAME_SAMPLE_F_USER_MODE)) {
      user_mode++;
      user_mode_budget += stop == SFRAME_STOP_BUDGET;
    }
    // In the spin loop with RBP at the chain: the leaf is in function 0's
    // spin stub and the next frame is the first crafted one.
    if (smp->user.empty() || smp->user[0] < text + bounds::kSpinStubOffset ||
        smp->user[0] >= text + bounds::kSpinStubOffset + sizeof(bounds::kSpinStub))
      continue;
    in_spin++;
    // The first crafted frame: a return address near the end of one of
    // functions 1 to 15 (its PC changes from slice to slice).
    through += smp->user.size() >= 2 && smp->user[1] > text + bounds::kFuncSize &&
               smp->user[1] < text + bounds::kFdes * bounds::kFuncSize &&
               (smp->user[1] - text) % bounds::kFuncSize > bounds::kCap / 2;
  }
  std::printf("%zu samples (%zu in the spin stub, %zu of them through the first crafted "
              "frame): %zu ended on the budget, %zu on the limit; "
              "walks_budget_exhausted +%llu; taken in user mode %zu, of them %zu on the budget; "
              "without a user stack: %zu timed out, %zu exited\n",
              samples, in_spin, through, budget, limit,
              static_cast<unsigned long long>(after.walks_budget_exhausted -
                                              before.walks_budget_exhausted),
              user_mode, user_mode_budget, timed_out, exited);
  // TCG delivers far fewer than 10 kHz of CPU time; 3 s give hundreds.
  EXPECT_GE(samples, 100u);
  EXPECT_GE(in_spin, samples / 2);
  // Walking at least one crafted frame: the chain was really unwound.
  EXPECT_GT(through, 0u);
  // The walks at sample time ran out of their small budget: counted, and
  // the samples say so (or, where a walk is redone from the task with the
  // full budget, end on it or on the session's frame limit).
  EXPECT_GT(after.walks_budget_exhausted, before.walks_budget_exhausted);
  EXPECT_GE(budget + limit, in_spin / 2);
}

// (e) Issue 27, point 3.  A software event samples in task context with
// preemption off: perf_sw_event() disables preemption around the event,
// and a page fault's sample has the faulting user registers, so the
// module walks it at sample time (in_task() is true, but nothing may
// preempt the walk).  The module of 227df5d chose the budget by in_task()
// and gave such a walk the full SFRAME_WALK_BUDGET (2^20 units: up to
// 0.4 s under emulation per fault, with preemption off); it must get the
// small SFRAME_IRQ_WALK_BUDGET and leave the rest to the task.
//
// The attack, as uid 65534 at perf_event_paranoid 2 (a page-fault event
// needs no more): the crafted section without an FDE index and the row
// cache off (root sets both: a user gets there by using up its index
// quota, and by changing its registrations between faults), a chain of
// kFaultChainFrames crafted frames, and a stub near the end of function 0
// that stores to fresh pages: each fault's PC is found after a scan of
// nearly kCap FREs (more than the small budget), and the whole walk takes
// about kFaultChainFrames * kCap units (less than 2^20).  So:
//   - with the small budget, every walk at sample time runs out
//     (walks_budget_exhausted counts each) and the task redoes it;
//   - with the task's budget (227df5d), none runs out: each is done
//     whole, with preemption off.
// Measured on 227df5d's module (6.1.0-57, TCG): see the test's output
// quoted in docs/benchmarks.md ("Security fixes of issue 27").
constexpr uint32_t kFaultChainFrames = 16;
constexpr unsigned kFaultPages = 64;
constexpr int kFaultRounds = 20;

// perf_event_open() of a page-fault event sampling every fault of pid.
int OpenPageFaultEvent(pid_t pid) {
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_PAGE_FAULTS;
  attr.sample_period = 1;
  attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID;
  attr.exclude_kernel = 1;  // paranoid 2; a user fault's sample is user mode
  attr.exclude_hv = 1;
  return static_cast<int>(syscall(__NR_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC));
}

uint64_t ReadModuleParam(const char* name) {
  std::ifstream f(std::string("/sys/module/sframe_unwind/parameters/") + name);
  uint64_t v = 0;
  f >> v;
  return v;
}

// The faulting process: kFaultRounds rounds of stores to kFaultPages fresh
// pages through the touch stub, RBP at a chain of kFaultChainFrames
// crafted frames (the last with no caller).  Writes a byte to ready once
// registered, waits for one on go.
[[noreturn]] void FaultingChild(const std::string& dev, int ready, int go) {
  Attack a;
  sframe::UniqueFd fd(open(dev.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd || !a.Build() || a.Register(fd.get()) != 0) _exit(2);
  uint64_t chain[2 * bounds::kChainFrames];
  a.Chain(chain);
  chain[2 * (kFaultChainFrames - 1)] = 0;  // the last frame has no caller
  char c;
  if (write(ready, &a.text, sizeof(a.text)) != sizeof(a.text) || read(go, &c, 1) != 1) _exit(3);
  for (int round = 0; round < kFaultRounds; round++) {
    const size_t len = kFaultPages * bounds::kPage;
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) _exit(4);
    a.touch_stub(chain, p, kFaultPages);
    munmap(p, len);
  }
  asm volatile("" ::"r"(chain) : "memory");
  _exit(0);
}

TEST_F(BoundsSessionTest, PageFaultSamplesWalkOnTheInterruptBudget) {
  if (!vmtest::IsRoot()) {
    GTEST_SKIP() << "root sets index_max_user_kb, row_cache and irq_walk_max_ns; the attack "
                    "itself runs as uid 65534 in the root run";
  }
  const auto no_index = vmtest::NoFdeIndexIfRoot();
  ASSERT_TRUE(no_index && no_index->ok());
  vmtest::ScopedModuleParam no_cache("row_cache", "0");
  ASSERT_TRUE(no_cache.ok());
  ASSERT_TRUE(vmtest::SetModuleParam("irq_walk_max_ns", "0"));
  const std::string dev = vmtest::DevicePath();

  const std::string verdict = vmtest::RunAsNobody(2, [&]() -> std::string {
    // Dropping privileges made this process undumpable, and its children
    // with it: nobody, itself included, could open a perf event on them.
    if (prctl(PR_SET_DUMPABLE, 1) != 0) return "PR_SET_DUMPABLE failed";
    int ready[2], go[2];
    if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(go, O_CLOEXEC) != 0) return "pipe failed";
    const pid_t pid = fork();
    if (pid < 0) return "fork failed";
    if (pid == 0) FaultingChild(dev, ready[1], go[0]);
    close(ready[1]);
    close(go[0]);
    uint64_t text = 0;
    auto reap = [&](int* st) {
      close(go[1]);
      kill(pid, SIGKILL);
      while (waitpid(pid, st, 0) < 0 && errno == EINTR) {
      }
    };
    int st = 0;
    if (read(ready[0], &text, sizeof(text)) != sizeof(text)) {
      reap(&st);
      return "the faulting child did not get ready (status " + std::to_string(st) + ")";
    }
    sframe::UniqueFd ev(OpenPageFaultEvent(pid));
    if (!ev) {
      reap(&st);
      return std::string("perf_event_open(page-faults): ") + std::strerror(errno);
    }
    sframe::SessionOptions so;
    so.device = dev;
    so.unwind_flags = SFRAME_UNWIND_F_SFRAME;
    sframe::Session s = sframe::Session::start(sframe::Target::kProcess, pid, so);
    sframe::Device d(dev);
    sframe_stats before;
    if (!bounds::GetStats(d.fd(), &before)) return "GET_STATS failed";
    if (write(go[1], "g", 1) != 1) return "go failed";
    // Until the child is done, then until the session is quiet (bounded).
    std::vector<sframe::Record> records;
    bool exited = false;
    const uint64_t start = NowMs();
    for (uint64_t quiet_since = 0; NowMs() - start < 60000;) {
      pollfd p{s.fd(), POLLIN, 0};
      if (poll(&p, 1, 100) > 0 && s.read(&records) > 0) quiet_since = NowMs();
      if (!exited && waitpid(pid, &st, WNOHANG) == pid) {
        exited = true;
        quiet_since = NowMs();
      }
      if (exited && NowMs() - quiet_since > 500) break;
    }
    if (!exited) {
      reap(&st);
      return "the faulting child did not finish in 60 s";
    }
    close(go[1]);
    sframe_stats after;
    if (!bounds::GetStats(d.fd(), &after)) return "GET_STATS failed";

    // The samples of the stores: the exact PC first, then the crafted
    // frames, and the walk ends where the last one has no caller.
    // The last crafted frame has no caller: the step from it reads its
    // return address at RBP 0 + 8, a fault.
    size_t at_store = 0, complete = 0, no_user = 0;
    std::string first_other;
    for (const sframe::Record& r : records) {
      if (!r.is_sample()) continue;
      const sframe::Sample& smp = r.sample;
      no_user += smp.has(SFRAME_SAMPLE_F_NO_USER);
      if (smp.user.empty() || smp.user[0] != text + bounds::kTouchStoreOffset) continue;
      at_store++;
      const bool whole = smp.user.size() == 1 + kFaultChainFrames &&
                         smp.user_stop == sframe::StopReason::kFault;
      complete += whole;
      if (!whole && first_other.empty()) {
        first_other = std::to_string(smp.user.size()) + " frames, stop " +
                      sframe::to_string(smp.user_stop) + ", flags " +
                      sframe::sample_flags_string(smp.flags);
      }
    }
    const uint64_t exhausted = after.walks_budget_exhausted - before.walks_budget_exhausted;
    std::printf("page faults: %zu samples at the store (%zu with the whole chain), %zu without a "
                "user stack; walks_budget_exhausted +%llu\n",
                at_store, complete, no_user, static_cast<unsigned long long>(exhausted));
    std::ostringstream bad;
    // 1,280 faults: most are sampled (perf throttles none at this rate).
    if (at_store < 100) bad << "only " << at_store << " samples at the store; ";
    if (complete * 10 < at_store * 9)
      bad << complete << " of " << at_store << " complete (first other: " << first_other << "); ";
    // Each walk at sample time must have run out of the small budget (the
    // top frame alone needs nearly kCap units); the task redid it.
    if (exhausted * 2 < at_store)
      bad << "walks_budget_exhausted +" << exhausted << " for " << at_store
          << " samples: walks at sample time did not stop on the small budget; ";
    std::fflush(stdout);  // this child leaves with _exit()
    return bad.str();
  });
  EXPECT_EQ(verdict, "");
  // What the longest walk at sample time cost, preemption off.  On
  // hardware the small budget (512 units) is microseconds; under qemu TCG
  // each unit is a few microseconds (measured here: 2.7 ms at most with the
  // small budget, 53 ms with 227df5d's, for this chain of ~130,000 units;
  // docs/benchmarks.md).  A ceiling with room for a loaded host, still
  // five times below 227df5d's; the budget count above is the exact check.
  const uint64_t max_ns = ReadModuleParam("irq_walk_max_ns");
  std::printf("irq_walk_max_ns after the attack: %llu\n", static_cast<unsigned long long>(max_ns));
  EXPECT_LT(max_ns, 10000000u);
}

}  // namespace
