// Limits, lifetimes and races: SFRAME_MAX_SECTIONS_PER_MM (ENOSPC), 10,000
// register/unregister cycles (counters and slab usage come back), sections
// dropped when a process exits, a section unmapped or rewritten while other
// threads unwind through it, and unregistering while others unwind.
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "synthetic.h"
#include "vmtest.h"
#include "sframe_profile/symbolizer.h"

namespace {

using sframe::StopReason;
using vmtest::SyntheticSections;

class StressTest : public vmtest::SelfSectionTest {
 protected:
  void Cycle(int n) {
    for (int i = 0; i < n; i++) {
      dev().register_section(self_.sframe_addr, self_.sframe_len, self_.text_start, self_.text_len);
      dev().unregister_section(self_.text_start);
    }
  }
};

// ---- SFRAME_MAX_SECTIONS_PER_MM -------------------------------------------------

TEST_F(StressTest, MoreThanTheMaximumSectionsPerProcess) {
  // 4096 distinct text ranges: 16-byte pieces of one executable mapping,
  // each with its own minimal section (one FDE over the piece).
  const size_t max = SFRAME_MAX_SECTIONS_PER_MM;
  SyntheticSections s(max + 1, 16);
  const uint64_t before = dev().stats().mm_sections;
  ASSERT_LT(before, max);
  std::vector<sframe::Registration> regs;
  regs.reserve(max);
  for (size_t i = 0; before + regs.size() < max; i++) {
    ASSERT_NO_THROW(
        regs.push_back(dev().register_scoped(s.section(i), s.section_len(), s.text(i), 16)))
        << "section " << i;
  }
  EXPECT_EQ(dev().stats().mm_sections, max);
  const size_t next = regs.size();
  try {
    dev().register_section(s.section(next), s.section_len(), s.text(next), 16);
    FAIL() << "section " << max + 1 << " accepted";
  } catch (const sframe::Error& e) {
    EXPECT_EQ(e.err(), ENOSPC) << e.what();
  }
  // A slot freed is a slot usable again.
  EXPECT_EQ(regs.back().reset(), 0);
  regs.pop_back();
  EXPECT_NO_THROW(
      regs.push_back(dev().register_scoped(s.section(next), s.section_len(), s.text(next), 16)));
  regs.clear();
  EXPECT_EQ(dev().stats().mm_sections, before);
}

// Covered text unmapped: its section goes with it, so whatever is mapped
// there next is never described by the stale section.
TEST_F(StressTest, MunmapOfCoveredTextForgetsItsSection) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  SyntheticSections s(4, page);
  // (The sections laid out by SyntheticSections are sized for chunks of
  // under 256 bytes; page-sized functions need their own.)
  const SyntheticSections::Built one = s.BuildFor(s.text(1), static_cast<uint32_t>(page));
  const SyntheticSections::Built two = s.BuildFor(s.text(2), static_cast<uint32_t>(page));
  const uint64_t before = dev().stats().mm_sections;
  dev().register_section(one.addr, one.len, s.text(1), page);
  dev().register_section(two.addr, two.len, s.text(2), page);
  EXPECT_EQ(dev().stats().mm_sections, before + 2);

  ASSERT_EQ(munmap(reinterpret_cast<void*>(s.text(1)), page), 0);
  EXPECT_EQ(dev().stats().mm_sections, before + 1) << "the unmapped text's section is gone";
  try {
    dev().unregister_section(s.text(1));
    ADD_FAILURE() << "the section of unmapped text could still be unregistered";
  } catch (const sframe::Error& e) {
    EXPECT_EQ(e.err(), ENOENT) << e.what();
  }
  // Something else mapped there: a new section for it is no overlap.
  void* p = mmap(reinterpret_cast<void*>(s.text(1)), page, PROT_READ | PROT_EXEC,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  ASSERT_EQ(p, reinterpret_cast<void*>(s.text(1)));
  EXPECT_NO_THROW(dev().register_section(one.addr, one.len, s.text(1), page));
  EXPECT_NO_THROW(dev().unregister_section(s.text(1)));
  EXPECT_NO_THROW(dev().unregister_section(s.text(2)));
  EXPECT_EQ(dev().stats().mm_sections, before);
}

// ---- register/unregister cycles -------------------------------------------------------

TEST_F(StressTest, TenThousandCyclesLeaveTheCountsAsTheyWere) {
  const sframe::Stats before = dev().stats();
  Cycle(10000);
  const sframe::Stats after = dev().stats();
  EXPECT_EQ(after.sections, before.sections);
  EXPECT_EQ(after.mm_sections, before.mm_sections);
  EXPECT_EQ(after.registrations - before.registrations, 10000u);
  EXPECT_EQ(after.registrations_rejected, before.registrations_rejected);
}

using vmtest::SlabObjects;

TEST_F(StressTest, SlabUsageComesBackAfterTenThousandCycles) {
  if (SlabObjects() < 0) {
    if (geteuid() != 0) {
      GTEST_SKIP() << "/proc/slabinfo is readable by root only (running as uid " << geteuid()
                   << "); the root run of this test checks slab usage";
    }
    FAIL() << "/proc/slabinfo not readable as root: " << std::strerror(errno);
  }
  Cycle(1000);  // warm up caches and the maple tree
  const long before = SlabObjects();
  Cycle(10000);
  // Entries and tree nodes are freed after an RCU grace period: give the
  // count time to come back.  A leak of one object per cycle would be 10000.
  constexpr long kMargin = 2000;
  long after = SlabObjects();
  for (int i = 0; i < 50 && after - before > kMargin; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    after = SlabObjects();
  }
  RecordProperty("slab_objects_before", std::to_string(before));
  RecordProperty("slab_objects_after", std::to_string(after));
  EXPECT_LE(after - before, kMargin)
      << "kmalloc + maple_node objects: " << before << " -> " << after;
}

// ---- a process's sections die with it ---------------------------------------------------

VMTEST_CHILD(register_and_exit) {
  (void)arg;
  sframe::Device dev(vmtest::DevicePath());
  sframe::register_loaded_objects(dev).front().release();  // never unregistered
  vmtest::EmitValue("mm_sections", dev.stats().mm_sections);
  std::fflush(stdout);
  _exit(0);
}

TEST_F(StressTest, SectionsOfAnExitedProcessAreDropped) {
  const sframe::Stats before = dev().stats();
  vmtest::ChildResult r = vmtest::RunChild("register_and_exit");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(r.values["mm_sections"], 1u) << r.output;
  sframe::Stats after = dev().stats();
  for (int i = 0;
       i < 40 && (after.sections != before.sections || after.processes != before.processes); i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    after = dev().stats();
  }
  EXPECT_EQ(after.sections, before.sections);
  EXPECT_EQ(after.processes, before.processes);
  EXPECT_EQ(after.registrations, before.registrations + 1);
}

// ---- registrations belong to one process ---------------------------------------

// A fork child has its parent's registration (copied before its first
// instruction in user space: the text and section are where they were),
// and from then on its own registry.
TEST_F(StressTest, ForkedChildInheritsTheParentsRegistration) {
  sframe::Registration reg =
      dev().register_scoped(self_.sframe_addr, self_.sframe_len, self_.text_start, self_.text_len);
  const sframe::Stats before = dev().stats();
  ASSERT_EQ(before.mm_sections, 1u);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int rc = 0;
    try {
      if (dev().stats().mm_sections != 1) rc |= 1;
      auto entries = dev().list_sections();
      if (entries.size() != 1 || entries[0].source != sframe::Source::kRegistered ||
          entries[0].text_start != self_.text_start)
        rc |= 2;
      sframe::UnwindResult r = dev().unwind_self(16, SFRAME_UNWIND_F_SFRAME);
      // The test program's frames are SFrame's, up to GoogleTest's (a
      // library without .sframe).
      if (r.nr_sframe < 1 || r.stop_reason != StopReason::kNoCoverage) rc |= 4;
      // Its own: unregistering in the child leaves the parent's.
      dev().unregister_section(self_.text_start);
      if (dev().stats().mm_sections != 0) rc |= 8;
    } catch (const sframe::Error&) {
      rc |= 16;
    }
    _exit(rc);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: child's count, 2: child's listing, 4: child's walk, "
                                       "8: child could not unregister its copy, 16: error";
  EXPECT_EQ(dev().stats().mm_sections, 1u) << "the parent's registration is untouched";
  EXPECT_EQ(dev().stats().forks_inherited, before.forks_inherited + 1);
  EXPECT_EQ(dev().stats().forks_not_inherited, before.forks_not_inherited);
}

// A process with nothing registered pays nothing at fork: no copy is made.
TEST_F(StressTest, ForkWithoutRegistrationsCopiesNothing) {
  const sframe::Stats before = dev().stats();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(dev().stats().mm_sections == 0 ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(dev().stats().forks_inherited, before.forks_inherited);
}

// ---- an unmapped section ---------------------------------------------------------

VMTEST_NOIPA static sframe::UnwindResult unwind_here(const sframe::Device* dev) {
  sframe::UnwindResult r = dev->unwind_self(64, SFRAME_UNWIND_F_SFRAME);
  VMTEST_BARRIER();
  return r;
}

// Never called before the section is gone: its return address is a PC the
// module cannot have seen (the module may cache rows of PCs it has seen).
VMTEST_NOIPA static sframe::UnwindResult unwind_fresh(const sframe::Device* dev) {
  sframe::UnwindResult r = dev->unwind_self(64, SFRAME_UNWIND_F_SFRAME);
  VMTEST_BARRIER();
  return r;
}

// Without an index (as root, vmtest::NoFdeIndexIfRoot()) the walk reads
// the section and faults; with one (as uid 65534) the walk goes on with the
// rows kept at registration, which the unmapping does not touch.
TEST_F(StressTest, UnwindThroughAnUnmappedSectionFaults) {
  const auto no_index = vmtest::NoFdeIndexIfRoot();
  if (no_index) {
    ASSERT_TRUE(no_index->ok());
  }
  vmtest::SectionCopy copy = vmtest::CopySection(self_);
  sframe::Registration reg =
      dev().register_scoped(copy.addr(), copy.len, self_.text_start, self_.text_len, "copy");
  sframe::UnwindResult before = unwind_here(&dev());
  EXPECT_GE(before.frames.size(), 3u);
  EXPECT_EQ(before.stop_reason, StopReason::kNoCoverage) << vmtest::Symbolize(before).Describe();
  copy.mem.reset();
  // The step out of unwind_fresh needs the section (a cached row may have
  // served the step out of unwind_self).
  sframe::UnwindResult after = unwind_fresh(&dev());
  vmtest::Chain chain = vmtest::Symbolize(after);
  if (no_index) {
    EXPECT_EQ(after.stop_reason, StopReason::kFault) << chain.Describe();
    EXPECT_TRUE(
        vmtest::ChainIs(chain, {vmtest::kUnwindSelf, "(anonymous namespace)::unwind_fresh"}) ||
        vmtest::ChainIs(chain, {vmtest::kUnwindSelf}))
        << chain.Describe();
  } else {
    EXPECT_EQ(after.stop_reason, StopReason::kNoCoverage) << chain.Describe();
    EXPECT_EQ(after.frames.size(), before.frames.size()) << chain.Describe();
  }
  int err = reg.reset();
  EXPECT_TRUE(err == 0 || err == ENOENT) << sframe::errno_name(err);
}

// ---- racing munmap and unregister -------------------------------------------------------

struct Racer {
  const sframe::Device* dev = nullptr;
  std::atomic<bool>* stop = nullptr;
  std::atomic<int>* ready = nullptr;
  std::atomic<int>* phase = nullptr;  // what the main thread is doing now
  std::atomic<int> seen{-1};          // the phase this racer's unwind started in
  std::atomic<bool> done{false};
  std::vector<uint64_t> ref;  // the complete chain
  uint64_t start_thread_pc = 0;
  long unwinds = 0;
  long by_stop[6] = {};
  long by_phase_stop[4][6] = {};
  long violations = 0;
  std::string first_violation;
};

bool IsPrefix(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace

// Phases of the race: 0 section intact, 1 section unmapped, 2 section
// rewritten with garbage, 3 registration coming and going.
enum RacePhase { kIntact, kUnmapped, kGarbage, kFlapping };

VMTEST_NOIPA static void race_b(Racer* r, sframe::UnwindResult* out) {
  *out = r->dev->unwind_self(64, SFRAME_UNWIND_F_SFRAME);
  VMTEST_BARRIER();
}

VMTEST_NOIPA static void race_a(Racer* r, sframe::UnwindResult* out) {
  race_b(r, out);
  VMTEST_BARRIER();
}

VMTEST_NOIPA static void* race_thread(void* p) {
  auto* r = static_cast<Racer*>(p);
  r->start_thread_pc = reinterpret_cast<uint64_t>(__builtin_return_address(0));
  sframe::UnwindResult res;
  bool first = true;
  try {
    while (!r->stop->load()) {
      const int phase = r->phase->load();
      r->seen = phase;
      race_a(r, &res);  // the one call site: every chain has the same frames
      VMTEST_BARRIER();
      if (first) {
        // The section is intact before the race starts.
        r->ref = res.frames;
        first = false;
        r->ready->fetch_add(1);
        continue;
      }
      r->unwinds++;
      const uint32_t stop = static_cast<uint32_t>(res.stop_reason);
      r->by_stop[stop < 6 ? stop : 0]++;
      r->by_phase_stop[phase][stop < 6 ? stop : 0]++;
      bool ok;
      switch (phase) {
        case kIntact:
        case kUnmapped:
          // Complete, or ended by the fault: never anything else.
          ok = (res.stop_reason == StopReason::kNoCoverage && res.frames == r->ref) ||
               (res.stop_reason == StopReason::kFault && IsPrefix(res.frames, r->ref));
          break;
        case kFlapping:
          ok = res.stop_reason == StopReason::kNoCoverage && !res.frames.empty() &&
               IsPrefix(res.frames, r->ref);
          break;
        default:  // garbage rows: any end, but a defined one
          ok =
              stop >= SFRAME_STOP_OUTERMOST && stop <= SFRAME_STOP_BAD_FRAME && !res.frames.empty();
      }
      if (!ok && r->violations++ == 0) {
        r->first_violation =
            "phase " + std::to_string(phase) + ":\n" + vmtest::Symbolize(res).Describe();
      }
    }
  } catch (const sframe::Error& e) {
    r->violations++;
    r->first_violation = e.what();
    if (first) r->ready->fetch_add(1);
  }
  r->done = true;
  return nullptr;
}

class RaceTest : public StressTest {
 protected:
  static constexpr int kRacers = 3;

  // For about ms milliseconds, register and unregister an unrelated section:
  // each change of the registry makes the module forget rows it may have
  // cached, so the racers' unwinds really read the section under test.
  void Churn(int ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    do {
      sframe::Registration r =
          dev().register_scoped(churn_.section(0), churn_.section_len(), churn_.text(0), 16);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    } while (std::chrono::steady_clock::now() < end);
  }

  SyntheticSections churn_{1, 16};

  void StartRacers() {
    stop_ = false;
    ready_ = 0;
    phase_ = kIntact;
    racers_.clear();
    threads_.resize(kRacers);
    for (int i = 0; i < kRacers; i++) {
      racers_.push_back(std::make_unique<Racer>());
      racers_[i]->dev = &dev();
      racers_[i]->stop = &stop_;
      racers_[i]->ready = &ready_;
      racers_[i]->phase = &phase_;
      ASSERT_EQ(pthread_create(&threads_[i], nullptr, race_thread, racers_[i].get()), 0);
    }
    while (ready_.load() < kRacers) std::this_thread::yield();
  }

  // Enter a phase, and wait until every racer's unwinds started in it (so
  // each unwind is judged by the rules of the phase it ran in).
  void EnterPhase(RacePhase phase) {
    phase_ = phase;
    for (auto& r : racers_) {
      while (r->seen.load() != phase && !r->done.load()) std::this_thread::yield();
    }
  }

  void StopRacers() {
    stop_ = true;
    for (pthread_t t : threads_) pthread_join(t, nullptr);
    threads_.clear();
  }

  void CheckRacers() {
    for (const auto& rp : racers_) {
      const Racer& r = *rp;
      vmtest::Chain ref = vmtest::Symbolize({r.ref, StopReason::kNoCoverage, 0, 0});
      EXPECT_TRUE(vmtest::ChainIs(
          ref, {vmtest::kUnwindSelf, "race_b", "race_a", "race_thread", vmtest::kStartThread},
          r.start_thread_pc));
      EXPECT_EQ(r.violations, 0) << r.first_violation;
      EXPECT_GT(r.unwinds, 0);
    }
  }

  std::atomic<bool> stop_{false};
  std::atomic<int> ready_{0};
  std::atomic<int> phase_{kIntact};
  std::vector<std::unique_ptr<Racer>> racers_;
  std::vector<pthread_t> threads_;
};

// Without an index (as root) the racers read the section and some fault
// once it is gone; with one (as uid 65534) none does: the rows kept at
// registration serve them throughout.  Either way every chain is right.
TEST_F(RaceTest, SectionUnmappedWhileOthersUnwind) {
  const auto no_index = vmtest::NoFdeIndexIfRoot();
  if (no_index) {
    ASSERT_TRUE(no_index->ok());
  }
  long faults = 0, unwinds = 0;
  for (int round = 0; round < 8; round++) {
    SCOPED_TRACE(testing::Message() << "round " << round);
    // A copy of the program's section, registered for the program's text.
    vmtest::SectionCopy copy = vmtest::CopySection(self_);
    const uint64_t addr = copy.addr();
    const size_t map_len = copy.mem.size();
    sframe::Registration reg =
        dev().register_scoped(addr, copy.len, self_.text_start, self_.text_len, "copy");
    StartRacers();
    Churn(2 + round);
    EnterPhase(kUnmapped);
    copy.mem.reset();  // munmap under the racers' feet
    Churn(20);
    // Something else at the same address: the same header, garbage rows.
    EnterPhase(kGarbage);
    void* p = mmap(reinterpret_cast<void*>(addr), map_len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    sframe::MappedRegion garbage;
    if (p != MAP_FAILED) {
      garbage = sframe::MappedRegion(p, map_len);
      std::mt19937 rng(round);
      for (size_t i = 0; i < map_len; i++) garbage.bytes()[i] = static_cast<uint8_t>(rng());
      std::memcpy(garbage.data(), reinterpret_cast<void*>(self_.sframe_addr),
                  sframe::kSframeHeaderSize);
    }
    Churn(20);
    StopRacers();
    CheckRacers();
    for (const auto& r : racers_) {
      faults += r->by_stop[SFRAME_STOP_FAULT];
      unwinds += r->unwinds;
    }
    int err = reg.reset();
    EXPECT_TRUE(err == 0 || err == ENOENT) << sframe::errno_name(err);
  }
  RecordProperty("unwinds", std::to_string(unwinds));
  RecordProperty("faults", std::to_string(faults));
  std::ostringstream counts;
  for (int phase = 0; phase < 3; phase++) {
    counts << "phase " << phase << ":";
    for (int stop = 0; stop < 6; stop++) {
      long n = 0;
      for (const auto& r : racers_) n += r->by_phase_stop[phase][stop];
      counts << " " << sframe::to_string(static_cast<StopReason>(stop)) << "=" << n;
    }
    counts << "\n";
  }
  if (no_index) {
    EXPECT_GT(faults, 0) << "no unwind ever ran into the unmapped section (last round)\n"
                         << counts.str();
  } else {
    EXPECT_EQ(faults, 0) << "an indexed walk read the unmapped section\n" << counts.str();
  }
}

TEST_F(RaceTest, UnregisterWhileOthersUnwind) {
  sframe::Registration reg =
      dev().register_scoped(self_.sframe_addr, self_.sframe_len, self_.text_start, self_.text_len);
  StartRacers();
  EnterPhase(kFlapping);
  for (int i = 0; i < 2000; i++) {
    reg.reset();
    reg = dev().register_scoped(self_.sframe_addr, self_.sframe_len, self_.text_start,
                                self_.text_len);
  }
  StopRacers();
  CheckRacers();
}

// ---- discovery and explicit registration ------------------------------------------------

// A section the module discovered gives way to the program's own
// registration of the same text (last in this file: the discovered state
// of this process stays behind).
TEST_F(StressTest, ExplicitRegistrationReplacesADiscoveredSection) {
  const sframe::Stats before = dev().stats();
  sframe::UnwindResult r = dev().unwind_self(64, SFRAME_UNWIND_F_SFRAME);
  const sframe::Stats mid = dev().stats();
  EXPECT_GE(mid.sections_discovered, before.sections_discovered + 1) << "the program was discovered";
  EXPECT_GE(r.nr_sframe, 1u) << "and unwound with it";

  std::vector<sframe::Registration> regs;
  EXPECT_NO_THROW(regs = sframe::register_loaded_objects(dev())) << "no EEXIST against discovery";
  EXPECT_FALSE(regs.empty());
  for (auto& reg : regs) EXPECT_EQ(reg.reset(), 0) << reg.object();
}
