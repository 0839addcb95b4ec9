// Issue 27, point 1: a section replaced under a walk.  A walk keeps the
// copy of the section it looked up (struct sframe_range) from one frame to
// the next.  Before the fix (commit d3ad159) the registry took the entry at
// the PC for the one the copy came from when text_start, sframe_addr and
// source matched, and decoded that entry's kernel blob with the copy's
// header and size.  So a user who supplies a big section A (1 MiB, its
// tables at its end) for its text T under a label S, walks T with
// UNWIND_SELF, and meanwhile unregisters T and supplies a small section B
// (57 bytes, kmalloc()ed) for the same T and S, makes the walk's next
// lookup in T read up to A's size past B's blob: kernel heap out of bounds.
// Now every entry has an id; a copy finds its entry by id alone, a stale
// one makes the step look the PC up again, and every read is bounded by the
// blob's own length.
//
// A and B give different rules for all of T (A: CFA = RBP + 16, B: CFA =
// RBP + 32; RA at CFA - 8, FP at CFA - 16), and the crafted chain holds
// what both read: record k (32 bytes) leads to record k + 1 by either rule,
// with a return address that says which rule read it (RaA, RaB).  B is a
// version 3 section whose one FDE is flexible: its rows are not kept in the
// FDE index, so every lookup of B decodes B's bytes, with or without an
// index.
//
//  - StalledWalkTest (root only: userfaultfd of faults taken in the kernel
//    needs CAP_SYS_PTRACE while vm.unprivileged_userfaultfd is 0): the walk
//    is stopped between two steps in T by a missing page of its stack
//    registered with userfaultfd; while it waits, the test unregisters T
//    and supplies B, then serves the page.  The frames after the swap must
//    be exactly B's.  Twice: with the FDE index (B's flexible FDE is found
//    in B's index and its FREs read from B's blob) and without (root's
//    index_max_user_kb set to 0: B's tables are searched).
//  - RaceTest (both modes, 30 s): walker threads walk the chain in T while
//    a thread unregisters T and supplies B, then A, in a loop.  Every walk
//    must follow A's or B's rule at each frame, and end at its frame limit
//    or where T was not covered; every ioctl must succeed.
//
// On the old module (227df5d, 6.1.0-57-amd64), in every run:
//   StalledWalkTest/...WithFdeIndex: "the walk gave 3 frames (2 by SFrame),
//     stop 1 (OUTERMOST): stub A1-A2 / wanted 120 frames, stop 4 (LIMIT):
//     stub A1-A2 B3-B119" (bytes 1 MiB past B's blob taken for B's FRE);
//   StalledWalkTest/...WithoutFdeIndex: the same with "stop 2
//     (NO_COVERAGE)" (no FDE in what was searched as A's FDE table, 1 MiB
//     past B's blob);
//   RaceTest, as root and as uid 65534: 331 and 647 bad walks in one run,
//     such as "walk: 60 frames (59 by SFrame), stop 1 (OUTERMOST): stub
//     A1-A59" (after frame 59, B's bytes read with A's header); in another
//     the guest oopsed: "BUG: unable to handle page fault for address:
//     ff422d184002bdad", RIP memcpy_erms, in sframe_source_read <-
//     row_in_fde <- sframe_find_row_in_fde <- sframe_find_row_indexed <-
//     sframe_registry_find_row <- sframe_unwind_next_slow <-
//     sframe_ioctl_unwind_self.
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bounds_attack.h"
#include "sframe_gen/section_builder.h"
#include "vmtest.h"

namespace {

constexpr uint64_t kPage = 4096;
// T: 32 KiB of text (room for many distinct return addresses, below).
constexpr uint32_t kTextLen = 32 * 1024;
// Frames per walk (max_frames): the stub's, then one per record.  No more
// than one page holds records for (StalledWalkTest puts records 1 on on
// one page).
constexpr uint32_t kFrames = 120;
// A's size: the distance a stale copy reads past B's blob.
constexpr uint64_t kBigLen = 1u << 20;
// A's FREs: enough that its FRE sub-section is longer than B's offsets
// into its own, so a stale copy's reads of B's FDE land past B's blob.
constexpr uint32_t kBigFres = 256;
// Where the sections count as mapped (SUPPLY's sframe_addr): a label, the
// same for A and B, within reach of 32-bit offsets from T.
constexpr uint64_t kLabelOffset = 16u << 20;
// The PC right after the stub's syscall instruction (push; mov; mov;
// syscall): frames[0] of every walk.
constexpr uint64_t kStubPcOffset = sizeof(bounds::kSyscallStub) - 2;
static_assert(kStubPcOffset == 11, "the stub ends with pop %rbp; ret");

// The return address of frame k (k >= 1) of a chain made with `base`, as
// A's rule and as B's rule find it: slot (base + k) of kSlots in one half
// of T for A, in the other for B.  Distinct for every frame and rule of a
// chain, so that no two frames share a row cache entry; a walker changes
// base from walk to walk, so that the rows a walk needs are mostly not
// cached yet (the module's row cache has 512 entries; a cached row is
// used without any lookup) and most of its steps look their PC up.  Never
// 16-byte aligned (no look for the sigreturn trampoline), all past the
// stub, in the int3 bytes of T.
constexpr uint32_t kSlotsStart = 0x100;
constexpr uint32_t kSlots = (kTextLen - kSlotsStart) / 16;
static_assert(kFrames < kSlots, "a chain's return addresses are distinct");
uint64_t RaA(uint64_t text, uint32_t k, uint32_t base) {
  return text + kSlotsStart + 8 * uint64_t{(base + k) % kSlots} + 3;
}
uint64_t RaB(uint64_t text, uint32_t k, uint32_t base) {
  return text + kSlotsStart + 8 * uint64_t{kSlots + (base + k) % kSlots} + 3;
}

// "LIMIT" etc. for a stop reason.
std::string StopName(uint32_t stop) {
  static const char* const kNames[] = {"none",  "OUTERMOST", "NO_COVERAGE", "FAULT",
                                       "LIMIT", "BAD_FRAME", "BUDGET"};
  return std::to_string(stop) + " (" + (stop < 7 ? kNames[stop] : "?") + ")";
}

// Record k of the chain, at address addr (words at[0..3]).  A's rule (CFA =
// RBP + 16) reads FP at addr and RA at addr + 8; B's (CFA = RBP + 32) FP at
// addr + 16 and RA at addr + 24.  Both lead to record k + 1, 32 bytes up
// (above either CFA, so each step moves SP up), with frame k + 1's return
// address as that rule gives it.
void PutRecord(uint64_t* at, uint64_t addr, uint32_t k, uint64_t text, uint32_t base) {
  at[0] = addr + 32;
  at[1] = RaA(text, k + 1, base);
  at[2] = addr + 32;
  at[3] = RaB(text, k + 1, base);
}
constexpr uint64_t kRecordBytes = 32;
static_assert((kFrames - 1) * kRecordBytes <= kPage, "StalledWalk: records 1 on fit P1");

// "stub A1-A2 B3-B9" for frames[0, n): which rule each frame came from
// (runs of one rule shortened), any other address in hex.
std::string Describe(const uint64_t* frames, uint32_t n, uint64_t text, uint32_t base) {
  std::ostringstream out;
  for (uint32_t k = 0; k < n; k++) {
    if (k) out << ' ';
    char rule = 0;
    if (k && frames[k] == RaA(text, k, base)) rule = 'A';
    else if (k && frames[k] == RaB(text, k, base)) rule = 'B';
    if (!rule) {
      if (k == 0 && frames[0] == text + kStubPcOffset) out << "stub";
      else out << "0x" << std::hex << frames[k] << std::dec;
      continue;
    }
    uint32_t last = k;
    while (last + 1 < n && frames[last + 1] == (rule == 'A' ? RaA : RaB)(text, last + 1, base)) {
      last++;
    }
    out << rule << k;
    if (last > k) out << '-' << rule << last;
    k = last;
  }
  return out.str();
}

// T between two PROT_NONE pages (so that T's mapping is T alone: nothing
// merges with it, and discovery's "none" entry for it, made while T is
// unregistered, covers T exactly), with the syscall stub at its start;
// section A and B for it under one label.
class Replacement {
 public:
  // Throws sframe::Error if a mapping fails.
  Replacement() {
    map_ = sframe::MappedRegion::map(kTextLen + 2 * kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS);
    uint8_t* t = map_.bytes() + kPage;
    text_ = reinterpret_cast<uint64_t>(t);
    if (mprotect(t, kTextLen, PROT_READ | PROT_WRITE) != 0) {
      throw sframe::Error(errno, "mprotect", "T");
    }
    std::memset(t, 0xcc, kTextLen);  // int3 wherever no stub is
    std::memcpy(t, bounds::kSyscallStub, sizeof(bounds::kSyscallStub));
    if (mprotect(t, kTextLen, PROT_READ | PROT_EXEC) != 0) {
      throw sframe::Error(errno, "mprotect", "T");
    }
    stub_ = reinterpret_cast<bounds::SyscallFn>(t);
    label_ = text_ + kLabelOffset;

    // A: version 2, one FDE over T with kBigFres rows of one rule, CFA =
    // RBP + 16 (the fixed RA at CFA - 8), FP at CFA - 16.  Then its tables
    // are moved to the end of kBigLen bytes: the header's FDE and FRE
    // offsets (bytes 20 and 24, from the end of the 28-byte header) grow
    // by the filler put before them.  Function starts count from the
    // section's start (no SFRAME_F_FDE_FUNC_START_PCREL), so they stay.
    sframe::FdeSpec a;
    a.func_start = text_;
    a.func_size = kTextLen;
    for (uint32_t j = 0; j < kBigFres; j++) {
      a.fres.push_back(sframe::FreSpec{j * (kTextLen / kBigFres), false, 16, -16});
    }
    const std::vector<uint8_t> tables = sframe::SectionBuilder(2).add_fde(a).build(label_);
    constexpr size_t kHeader = 28;
    const size_t filler = kBigLen - tables.size();
    big_.assign(tables.begin(), tables.begin() + kHeader);
    big_.resize(kHeader + filler, 0x5a);
    big_.insert(big_.end(), tables.begin() + kHeader, tables.end());
    for (size_t field : {size_t{20}, size_t{24}}) {
      uint32_t off;
      std::memcpy(&off, &big_[field], 4);
      off += static_cast<uint32_t>(filler);
      std::memcpy(&big_[field], &off, 4);
    }

    // B: version 3, one flexible FDE over T, CFA = RBP + 32, FP at CFA -
    // 16 (RA: the fixed CFA - 8).
    sframe::FdeSpec b;
    b.func_start = text_;
    b.func_size = kTextLen;
    b.flex = true;
    b.fres.push_back(sframe::FreSpec{0, false, 32, -16});
    small_ = sframe::SectionBuilder(3).add_fde(b).build(label_);
  }

  uint64_t text() const { return text_; }
  size_t big_len() const { return big_.size(); }
  size_t small_len() const { return small_.size(); }

  // SFRAME_IOC_SUPPLY of A (big) or B for T, for this process: 0 or -errno.
  long Supply(int fd, bool big) const {
    const std::vector<uint8_t>& s = big ? big_ : small_;
    sframe_supply r{};
    r.size = sizeof(r);
    r.sframe_data = reinterpret_cast<uint64_t>(s.data());
    r.sframe_len = s.size();
    r.sframe_addr = label_;
    r.text_start = text_;
    r.text_len = kTextLen;
    return ioctl(fd, SFRAME_IOC_SUPPLY, &r) == 0 ? 0 : -errno;
  }
  long Unregister(int fd) const {
    sframe_unregister u{};
    u.size = sizeof(u);
    u.text_start = text_;
    return ioctl(fd, SFRAME_IOC_UNREGISTER, &u) == 0 ? 0 : -errno;
  }

  // UNWIND_SELF (SFrame only, kFrames frames) made from the stub in T with
  // RBP at record 0 of a chain: the ioctl's result, 0 or -errno.
  long Walk(int fd, uint64_t rbp, sframe_unwind_self* req, uint64_t* frames) const {
    std::memset(req, 0, sizeof(*req));
    req->size = sizeof(*req);
    req->flags = SFRAME_UNWIND_F_SFRAME;
    req->frames = reinterpret_cast<uint64_t>(frames);
    req->max_frames = kFrames;
    return stub_(fd, SFRAME_IOC_UNWIND_SELF, req, reinterpret_cast<void*>(rbp));
  }

 private:
  sframe::MappedRegion map_;  // guard, T, guard
  uint64_t text_ = 0;
  uint64_t label_ = 0;
  bounds::SyscallFn stub_ = nullptr;
  std::vector<uint8_t> big_, small_;
};

// Joins a thread started with pthread_create() at scope exit.
class Joiner {
 public:
  Joiner() = default;
  Joiner(const Joiner&) = delete;
  Joiner& operator=(const Joiner&) = delete;
  ~Joiner() { Join(); }
  int Start(const pthread_attr_t* attr, void* (*fn)(void*), void* arg) {
    const int err = pthread_create(&t_, attr, fn, arg);
    started_ = err == 0;
    return err;
  }
  void Join() {
    if (started_) pthread_join(t_, nullptr);
    started_ = false;
  }

 private:
  pthread_t t_{};
  bool started_ = false;
};

// ---- the deterministic case ---------------------------------------------------------

enum class Index { kWith, kWithout };
void PrintTo(Index i, std::ostream* os) {
  *os << (i == Index::kWith ? "with the FDE index" : "without the FDE index");
}

class StalledWalkTest : public vmtest::DeviceTest,
                        public ::testing::WithParamInterface<Index> {
 protected:
  int fd() const { return dev().fd(); }
};

// The walk of StalledWalkTest, on a thread whose stack ends right below the
// chain's pages.
struct StalledWalk {
  const Replacement* r = nullptr;
  int fd = -1;
  uint64_t rbp = 0;
  sframe_unwind_self req{};
  uint64_t frames[kFrames] = {};
  long ret = -1;
  std::atomic<bool> done{false};
};

void* RunStalledWalk(void* arg) {
  auto* w = static_cast<StalledWalk*>(arg);
  w->ret = w->r->Walk(w->fd, w->rbp, &w->req, w->frames);
  w->done = true;
  return nullptr;
}

// Frames 1 and 2 by A's rule (frame 2's return address was read from P1
// by the stalled step), every one after by B's: B's FDE looked up and
// decoded, not B's bytes read with A's header; to the walk's limit.
::testing::AssertionResult FollowsBAfterTheSwap(const StalledWalk& w, uint64_t text) {
  std::vector<uint64_t> want(kFrames);
  want[0] = text + kStubPcOffset;
  for (uint32_t k = 1; k < kFrames; k++) want[k] = k <= 2 ? RaA(text, k, 0) : RaB(text, k, 0);
  const uint32_t n = std::min(w.req.nr_frames, kFrames);
  if (std::vector<uint64_t>(w.frames, w.frames + n) == want &&
      w.req.stop_reason == SFRAME_STOP_LIMIT && w.req.nr_sframe == kFrames - 1) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "the walk gave " << w.req.nr_frames << " frames (" << w.req.nr_sframe
         << " by SFrame), stop " << StopName(w.req.stop_reason) << ": "
         << Describe(w.frames, n, text, 0) << "\nwanted " << kFrames << " frames, stop "
         << StopName(SFRAME_STOP_LIMIT) << ": " << Describe(want.data(), kFrames, text, 0);
}

TEST_P(StalledWalkTest, FramesAfterTheSwapAreTheNewSections) {
  // Without UFFD_USER_MODE_ONLY: the fault to catch is the kernel's.
  sframe::UniqueFd probe(static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK)));
  if (!probe && errno == EPERM && geteuid() != 0) {
    GTEST_SKIP() << "userfaultfd() of faults taken in the kernel needs CAP_SYS_PTRACE while "
                    "vm.unprivileged_userfaultfd is 0; the root run covers this test";
  }
  ASSERT_TRUE(probe) << "userfaultfd: " << std::strerror(errno);
  probe.reset();
  std::unique_ptr<vmtest::ScopedModuleParam> no_index;
  if (GetParam() == Index::kWithout) {
    no_index = vmtest::NoFdeIndexIfRoot();
    if (!no_index) GTEST_SKIP() << "only root can set index_max_user_kb";
    ASSERT_TRUE(no_index->ok());
  }

  Replacement r;
  ASSERT_EQ(r.Supply(fd(), true), 0) << "supply A (" << r.big_len() << " bytes)";

  // The walker's stack: kStackPages for the thread (pthread_attr_setstack;
  // glibc keeps its thread descriptor at their top), then page P0 with
  // record 0 in its last 32 bytes, then page P1 with records 1 on, left
  // unpopulated and registered with userfaultfd: the walk stalls in its
  // second step, reading record 1 by A's rule (frame 1's PC is in T), and
  // its next step is a lookup in T with the copy of A it holds.
  constexpr size_t kStackPages = 64;
  sframe::MappedRegion stack = sframe::MappedRegion::map((kStackPages + 2) * kPage,
                                                         PROT_READ | PROT_WRITE,
                                                         MAP_PRIVATE | MAP_ANONYMOUS);
  // No huge page may bring P1 in with P0.
  madvise(stack.data(), stack.size(), MADV_NOHUGEPAGE);
  const uint64_t p0 = stack.address() + kStackPages * kPage;
  const uint64_t p1 = p0 + kPage;
  const uint64_t rec0 = p1 - kRecordBytes;
  PutRecord(reinterpret_cast<uint64_t*>(rec0), rec0, 0, r.text(), 0);
  // P1's bytes, copied in when the walk faults on it.
  std::vector<uint64_t> image(kPage / 8, 0);
  for (uint32_t k = 1; k + 1 < kFrames; k++) {
    const uint64_t at = p1 + (k - 1) * kRecordBytes;
    PutRecord(&image[(at - p1) / 8], at, k, r.text(), 0);
  }

  StalledWalk w;
  w.r = &r;
  w.fd = fd();
  w.rbp = rec0;
  // Joined at scope exit after the userfaultfd (declared below) is closed,
  // which wakes a walk still waiting on it: a failed assertion never
  // leaves the thread stuck.
  Joiner walker;
  sframe::UniqueFd uffd(static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK)));
  ASSERT_TRUE(uffd) << "userfaultfd: " << std::strerror(errno);
  uffdio_api api{};
  api.api = UFFD_API;
  ASSERT_EQ(ioctl(uffd.get(), UFFDIO_API, &api), 0) << std::strerror(errno);
  uffdio_register reg{};
  reg.range.start = p1;
  reg.range.len = kPage;
  reg.mode = UFFDIO_REGISTER_MODE_MISSING;
  ASSERT_EQ(ioctl(uffd.get(), UFFDIO_REGISTER, &reg), 0) << std::strerror(errno);

  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstack(&attr, stack.data(), kStackPages * kPage), 0);
  const int err = walker.Start(&attr, RunStalledWalk, &w);
  pthread_attr_destroy(&attr);
  ASSERT_EQ(err, 0) << std::strerror(err);

  // Wait for the fault on P1 (or the walk's end, if it never reads P1):
  // polled in slices of 100 ms, 600 at most (a minute: a bound on a hang,
  // not a measure; the walk reaches P1 within milliseconds).
  uffd_msg msg{};
  bool faulted = false;
  for (int i = 0; i < 600 && !faulted && !w.done; i++) {
    pollfd p{uffd.get(), POLLIN, 0};
    if (poll(&p, 1, 100) == 1 && read(uffd.get(), &msg, sizeof(msg)) == sizeof(msg)) {
      faulted = true;
    }
  }
  if (faulted) {
    // The swap, while the walk waits: T unregistered, B supplied for the
    // same text and label.
    EXPECT_EQ(msg.event, UFFD_EVENT_PAGEFAULT);
    EXPECT_EQ(msg.arg.pagefault.address & ~(kPage - 1), p1);
    EXPECT_EQ(r.Unregister(fd()), 0);
    EXPECT_EQ(r.Supply(fd(), false), 0) << "supply B (" << r.small_len() << " bytes)";
  }
  // Serve P1 (wakes the walk; fills the page if it never faulted).
  uffdio_copy copy{};
  copy.dst = p1;
  copy.src = reinterpret_cast<uint64_t>(image.data());
  copy.len = kPage;
  EXPECT_EQ(ioctl(uffd.get(), UFFDIO_COPY, &copy), 0) << std::strerror(errno);
  walker.Join();
  ASSERT_TRUE(faulted) << "the walk never read its record 1 (P1 at 0x" << std::hex << p1
                       << std::dec << "): returned " << w.ret << ", frames "
                       << Describe(w.frames, std::min(w.req.nr_frames, kFrames), r.text(), 0);
  ASSERT_EQ(w.ret, 0) << std::strerror(static_cast<int>(-w.ret));

  EXPECT_TRUE(FollowsBAfterTheSwap(w, r.text()));
  EXPECT_EQ(r.Unregister(fd()), 0);
}

INSTANTIATE_TEST_SUITE_P(Index, StalledWalkTest, ::testing::Values(Index::kWith, Index::kWithout),
                         [](const ::testing::TestParamInfo<Index>& i) {
                           return i.param == Index::kWith ? std::string("WithFdeIndex")
                                                          : std::string("WithoutFdeIndex");
                         });

// ---- the race ---------------------------------------------------------------------

// 15 s: in 30 s the 6.1 guest made 4,176 swaps and 2,966 walks that saw
// both sections, 7.3's 758 and 162; half of that still crosses every swap
// with walks, for half the time in each `make check` (4 runs).
constexpr int kRaceSeconds = 15;
constexpr int kWalkers = 2;
// How long the swapper leaves each section in place before it replaces
// it, so that T is covered most of the time and walks are under way when
// it changes (a pace, not a measure: nothing is asserted about time).
constexpr auto kHold = std::chrono::milliseconds(1);

class RaceTest : public vmtest::DeviceTest {
 protected:
  int fd() const { return dev().fd(); }
};

// What the threads of the race found; the first bad results are kept for
// the report.
struct RaceLog {
  std::atomic<uint64_t> walks{0}, limit{0}, uncovered{0}, mixed{0}, only_a{0}, only_b{0};
  std::atomic<uint64_t> swaps{0}, supplied_a{0}, supplied_b{0};
  std::atomic<uint64_t> bad{0};
  std::mutex mu;
  std::vector<std::string> first_bad;  // under mu, at most 8
  void Bad(const std::string& what) {
    bad++;
    std::lock_guard<std::mutex> lock(mu);
    if (first_bad.size() < 8) first_bad.push_back(what);
  }
};

// One walk through a chain made with base, on this function's stack (above
// the stub's SP, as a real stack is), checked: frames[0] is the stub's,
// each frame after it is the return address A's rule or B's gives for it,
// and the walk ends at its limit or, where T was not covered at that
// moment (between an unregister and a supply), with
// SFRAME_STOP_NO_COVERAGE.
VMTEST_NOIPA void RaceWalk(const Replacement& r, int fd, uint32_t base, RaceLog* log) {
  uint64_t chain[4 * kFrames];
  const uint64_t rbp = reinterpret_cast<uint64_t>(chain);
  for (uint32_t k = 0; k + 1 < kFrames; k++) {
    PutRecord(&chain[4 * k], rbp + k * kRecordBytes, k, r.text(), base);
  }
  sframe_unwind_self req;
  uint64_t frames[kFrames] = {};
  const long ret = r.Walk(fd, rbp, &req, frames);
  asm volatile("" ::"r"(chain) : "memory");  // the chain lives until here
  log->walks++;
  if (ret != 0) {
    log->Bad("UNWIND_SELF returned " + std::to_string(ret) + " (" +
             std::strerror(static_cast<int>(-ret)) + ")");
    return;
  }
  const uint64_t t = r.text();
  const uint32_t n = std::min(req.nr_frames, kFrames);
  bool ok = n >= 1 && frames[0] == t + kStubPcOffset && req.nr_sframe + 1 == n;
  uint32_t by_a = 0, by_b = 0;
  for (uint32_t k = 1; ok && k < n; k++) {
    by_a += frames[k] == RaA(t, k, base);
    by_b += frames[k] == RaB(t, k, base);
    ok = frames[k] == RaA(t, k, base) || frames[k] == RaB(t, k, base);
  }
  if (ok && req.stop_reason == SFRAME_STOP_LIMIT) {
    ok = req.nr_frames == kFrames;
    log->limit++;
  } else if (ok && req.stop_reason == SFRAME_STOP_NO_COVERAGE) {
    ok = req.nr_frames < kFrames;
    log->uncovered++;
  } else {
    ok = false;
  }
  if (!ok) {
    std::ostringstream what;
    what << "walk: " << req.nr_frames << " frames (" << req.nr_sframe << " by SFrame), stop "
         << StopName(req.stop_reason) << ": " << Describe(frames, n, t, base);
    log->Bad(what.str());
    return;
  }
  if (by_a && by_b) log->mixed++;
  else if (by_a) log->only_a++;
  else if (by_b) log->only_b++;
}

TEST_F(RaceTest, WalksRacingReplacementsFollowOneSectionOrTheOther) {
  Replacement r;
  ASSERT_EQ(r.Supply(fd(), true), 0) << "supply A (" << r.big_len() << " bytes)";
  RaceLog log;
  std::atomic<bool> stop{false};
  std::vector<std::thread> walkers;
  for (int i = 0; i < kWalkers; i++) {
    walkers.emplace_back([&, i] {
      // Each walker its own bases (i, i + kWalkers, ...), a new one for
      // each walk.
      for (uint32_t base = static_cast<uint32_t>(i); !stop.load(std::memory_order_relaxed);
           base = (base + kWalkers) % kSlots) {
        RaceWalk(r, fd(), base, &log);
      }
    });
  }
  // Unregister T, supply B, unregister T, supply A, each section left in
  // place for kHold: each call must succeed (nothing else touches T's
  // entry; discovery's "none" entry for T, made by a walk while T is
  // unregistered, gives way to a supply).
  std::thread swapper([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      for (int step = 0; step < 4; step++) {
        const bool big = step == 3;
        const long ret = step % 2 == 0 ? r.Unregister(fd()) : r.Supply(fd(), big);
        if (ret != 0) {
          log.Bad(std::string(step % 2 == 0 ? "UNREGISTER" : big ? "SUPPLY of A" : "SUPPLY of B") +
                  " returned " + std::to_string(ret) + " (" +
                  std::strerror(static_cast<int>(-ret)) + ")");
        } else if (step % 2) {
          log.swaps++;
          (big ? log.supplied_a : log.supplied_b)++;
          std::this_thread::sleep_for(kHold);
        }
      }
    }
  });
  for (int s = 0; s < kRaceSeconds; s++) std::this_thread::sleep_for(std::chrono::seconds(1));
  stop = true;
  swapper.join();
  for (std::thread& t : walkers) t.join();

  std::printf("replace race: A %zu bytes, B %zu bytes\n", r.big_len(), r.small_len());
  std::printf("replace race: %d s, %" PRIu64 " swaps (%" PRIu64 " of A, %" PRIu64
              " of B), %" PRIu64 " walks: %" PRIu64 " to their limit, %" PRIu64
              " stopped where T was not covered; %" PRIu64 " by A's rule alone, %" PRIu64
              " by B's alone, %" PRIu64 " by both (a swap during the walk); %" PRIu64 " bad\n",
              kRaceSeconds, log.swaps.load(), log.supplied_a.load(), log.supplied_b.load(),
              log.walks.load(), log.limit.load(), log.uncovered.load(), log.only_a.load(),
              log.only_b.load(), log.mixed.load(), log.bad.load());
  std::fflush(stdout);
  for (const std::string& s : log.first_bad) ADD_FAILURE() << s;
  EXPECT_EQ(log.bad.load(), 0u);
  EXPECT_GT(log.supplied_a.load(), 0u);
  EXPECT_GT(log.supplied_b.load(), 0u);
  EXPECT_GT(log.walks.load(), 0u);
  // Whatever the swapper left.
  r.Unregister(fd());
}

}  // namespace
