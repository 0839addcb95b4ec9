// A session's buffer mapped into the reader (ABI 3, "mapped" in the uapi
// header), in the VM on Debian's kernel: the records it carries, the
// shapes of mapping the module refuses, and a reader that writes garbage
// into the control page's data_tail while the ring fills.
//
// The data_tail word is the one place where user space writes and the
// kernel reads on the sample path, so the garbage test is the adversary's:
// a tail the kernel must not take (misaligned, behind what it took, beyond
// the head, random) may cost the reader its samples, counted, but must
// never let a record be written over unread ones, nor show in the log.
// It runs as root and, in a child dropped to uid 65534 at
// perf_event_paranoid 2, as an ordinary user on their own process.
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sessions.h"
#include "vmtest.h"
#include "sframe_test/errno_of.h"
#include "sframe_profile/symbolizer.h"

namespace {

using sframe::Record;
using sframe::Sample;
using sframe::Session;
using sframe::SessionRing;
using sframe::Target;
using vmtest::ChainCheck;
using vmtest::CheckChain;
using vmtest::IsRoot;
using vmtest::kSpinChain;
using vmtest::MostlyComplete;
using vmtest::NowMs;
using vmtest::RunAsNobody;
using vmtest::SessionTest;
using vmtest::Workload;

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// The control page of a mapped session, for the tests that write it.
struct Control {
  sframe_session_mmap_page* page;
  uint64_t head() const { return __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE); }
  uint64_t tail() const { return __atomic_load_n(&page->data_tail, __ATOMIC_ACQUIRE); }
  void set_tail(uint64_t t) { __atomic_store_n(&page->data_tail, t, __ATOMIC_RELEASE); }
};

// mmap() of the session file; MAP_FAILED's errno, or 0 (and unmapped).
int MapErrno(int fd, size_t len, int prot, int flags, off_t off) {
  void* p = mmap(nullptr, len, prot, flags, fd, off);
  if (p == MAP_FAILED) return errno;
  munmap(p, len);
  return 0;
}

sframe::SessionOptions Options(uint32_t buffer_size = 0) {
  sframe::SessionOptions o;
  o.device = vmtest::DevicePath();
  o.unwind_flags = SFRAME_UNWIND_F_SFRAME;
  o.buffer_size = buffer_size;
  return o;
}

sframe::PerfEventOptions Perf(bool user_only) {
  sframe::PerfEventOptions po;
  po.frequency = 10000;
  po.exclude_kernel = user_only;
  return po;
}

// Reads the mapped ring into out for ms, draining ev (enabled by the
// caller).
void ReadMappedFor(Session* s, SessionRing* ring, sframe::PerfEvent* ev, int ms,
                   std::vector<Record>* out) {
  for (uint64_t end = NowMs() + static_cast<uint64_t>(ms); NowMs() < end;) {
    s->wait(50);
    ring->read(out);
    ev->drain();
  }
}

// Reads the mapped ring for ms while ev samples, as Collect() reads a
// session with read().
std::vector<Record> CollectMapped(Session* s, SessionRing* ring, sframe::PerfEvent* ev, int ms) {
  std::vector<Record> out;
  ev->enable();
  ReadMappedFor(s, ring, ev, ms, &out);
  ev->disable();
  ev->drain();
  for (uint64_t quiet = NowMs(); NowMs() - quiet < 300;) {
    if (s->wait(100) && ring->read(&out)) quiet = NowMs();
  }
  return out;
}

// The garbage-tail attack on a process of the caller's own; "" or what
// went wrong.  A 64 KiB ring at 10 kHz fills in well under a second.
std::string GarbageTails(bool user_only) {
  std::ostringstream err;
  std::string why;
  auto w = Workload::Start({"spin", "0"}, &why);
  if (!w) return why;
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), Perf(user_only));
  Session s = Session::start(Target::kProcess, w->pid(), Options(SFRAME_SESSION_MIN_BUFFER));
  SessionRing ring = SessionRing::map(s);
  void* base = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd(), 0);
  if (base == MAP_FAILED) return std::string("mmap of the control page: ") + strerror(errno);
  Control c{static_cast<sframe_session_mmap_page*>(base)};
  const uint64_t size = c.page->data_size;

  // Phase 1: some records come and are consumed, so that the kernel has
  // taken a tail above 0 (tail0).
  ev.enable();
  std::vector<Record> before;
  ReadMappedFor(&s, &ring, &ev, 200, &before);
  const uint64_t tail0 = c.tail();
  if (tail0 == 0) err << "no records in 200 ms at 10 kHz\n";
  usleep(20000);  // the next record's writer takes tail0

  // Phase 2: nothing more consumed; a thread writes tails the kernel must
  // not take while the ring fills: behind tail0, misaligned, beyond any
  // head the ring can reach from tail0, random high values.  (A tail
  // between tail0 and the head would be a valid one, even in the middle
  // of a record: the reader says it is done with the bytes before it.)
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> written{0};
  std::thread scribbler([&] {
    std::mt19937_64 rng(12345);
    for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); i++) {
      uint64_t t;
      switch (i % 5) {
        case 0: t = tail0 - 8; break;                     // behind what it took
        case 1: t = c.head() + 4; break;                  // misaligned
        case 2: t = tail0 + 2 * size; break;              // beyond any head to come
        case 3: t = rng() | 1; break;                     // random, misaligned
        default: t = (rng() | (uint64_t{1} << 63)) & ~uint64_t{7}; break;  // far beyond
      }
      c.set_tail(t);
      written.fetch_add(1, std::memory_order_relaxed);
    }
  });
  for (uint64_t end = NowMs() + 1500; NowMs() < end;) {
    ev.drain();
    usleep(20000);
  }
  ev.disable();
  ev.drain();
  stop = true;
  scribbler.join();
  usleep(300000);  // samples in flight
  const uint64_t head1 = c.head();
  const sframe::SessionStats st1 = s.stats();
  if (written.load() < 100) err << "the scribbler wrote only " << written.load() << " tails\n";
  if (head1 - tail0 > size) {
    err << "head " << head1 << " more than the " << size << "-byte ring beyond the tail " << tail0
        << ": unread records were written over\n";
  }
  if (head1 - tail0 + 1024 < size) {
    err << "the ring did not fill (" << head1 - tail0 << " of " << size << " bytes)\n";
  }
  if (st1.lost == 0) err << "a full ring dropped nothing (stats.lost 0)\n";
  if (!s.wait(0)) err << "poll() says nothing to read with " << head1 - tail0 << " bytes unread\n";

  // What the ring holds from tail0 to the head: whole, well-formed records.
  c.set_tail(tail0);  // the tail the kernel took last: valid
  std::vector<Record> recs;
  try {
    ring.read(&recs);
  } catch (const std::exception& e) {
    err << "records in the ring after the attack: " << e.what() << "\n";
  }
  size_t samples = 0, ours = 0;
  for (const Record& r : before) samples += r.is_sample();
  size_t full = 0;
  for (const Record& r : recs) {
    if (!r.is_sample()) continue;
    full++;
    ours += r.sample.pid == static_cast<uint32_t>(w->pid());
  }
  samples += full;
  if (full < 100) err << "only " << full << " sample records in a full ring\n";
  if (ours != full) err << full - ours << " of " << full << " records not the workload's\n";
  if (c.tail() != head1) err << "consumed up to " << c.tail() << ", head " << head1 << "\n";

  // Phase 3: room again.  The next records start with a LOST record that
  // counts every dropped sample.
  ev.enable();
  std::vector<Record> after;
  ReadMappedFor(&s, &ring, &ev, 500, &after);
  ev.disable();
  ev.drain();
  usleep(300000);
  ring.read(&after);
  if (after.empty() || !after.front().is_lost()) {
    err << "the first record after room came back is not a LOST record\n";
  }
  // Every drop is told by a LOST record, but only ahead of the next record
  // written (perf's rule too): a reader stalled by the emulator in phase 1
  // or 3 drops samples whose count waits for a later record, so the tally
  // counts LOST records of all three phases, and a last drop before the
  // event was disabled is carried out by a few more samples (at most
  // kFlushTries rounds; each may drop again if the reader stalls again).
  auto lost_in = [](const std::vector<Record>& v) {
    uint64_t n = 0;
    for (const Record& r : v) n += r.is_lost() ? r.lost : 0;
    return n;
  };
  const uint64_t lost_before = lost_in(before) + lost_in(recs);
  constexpr int kFlushTries = 5;
  sframe::SessionStats st2 = s.stats();
  for (int i = 0; i < kFlushTries && lost_before + lost_in(after) != st2.lost; i++) {
    ev.enable();
    ReadMappedFor(&s, &ring, &ev, 50, &after);
    ev.disable();
    ev.drain();
    usleep(300000);
    ring.read(&after);
    st2 = s.stats();
  }
  w->Kill();
  const uint64_t lost_seen = lost_before + lost_in(after);
  if (lost_seen != st2.lost) err << "LOST records count " << lost_seen << ", stats.lost " << st2.lost << "\n";
  size_t after_samples = 0;
  for (const Record& r : after) after_samples += r.is_sample();
  if (after_samples == 0) err << "no records after room came back\n";
  if (st2.records != samples + after_samples) {
    err << "stats.records " << st2.records << ", records seen " << samples + after_samples << "\n";
  }
  munmap(base, kPage);
  return err.str();
}

// ---- records through the mapping --------------------------------------------------------

TEST_F(SessionTest, MappedRingCarriesCompleteChainsAndRefusesRead) {
  SKIP_WITHOUT_PERF();
  auto w = StartWorkload({"spin", "0"});
  ASSERT_TRUE(w);
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(10000));
  Session s = Session::start(Target::kProcess, w->pid(), SframeOnly());
  SessionRing ring = SessionRing::map(s);
  EXPECT_EQ(ring.data_size(), size_t{SFRAME_SESSION_DEFAULT_BUFFER});
  // read() would look at bytes the reader may have written: refused.
  std::vector<Record> none;
  EXPECT_EQ(sframe::errno_of([&] { s.read(&none); }), EBUSY);
  std::vector<Record> recs = CollectMapped(&s, &ring, &ev, 2000);
  w->Kill();

  ChainCheck check;
  size_t samples = 0;
  for (const Record& r : recs) {
    if (!r.is_sample()) continue;
    samples++;
    CheckChain(r.sample, User(r.sample), kSpinChain, &check);
  }
  const sframe::SessionStats st = s.stats();
  RecordProperty("complete", std::to_string(check.complete) + "/" + std::to_string(check.considered));
  EXPECT_TRUE(MostlyComplete(check, 0.99, 500));
  EXPECT_EQ(st.lost, 0u);
  EXPECT_EQ(st.records, samples) << "records written vs records in the mapping";
  EXPECT_EQ(sframe::errno_of([&] { s.read(&none); }), EBUSY) << "after records came";
}

TEST_F(SessionTest, MappingAgainAndClosingWhileMapped) {
  SKIP_WITHOUT_PERF();
  auto w = StartWorkload({"spin", "0"});
  ASSERT_TRUE(w);
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(10000));
  Session s = Session::start(Target::kProcess, w->pid(), SframeOnly());
  size_t samples = 0;
  {
    SessionRing first = SessionRing::map(s);
    for (const Record& r : CollectMapped(&s, &first, &ev, 500)) samples += r.is_sample();
  }
  // A second mapping goes on from the tail the first left.
  SessionRing second = SessionRing::map(s);
  for (const Record& r : CollectMapped(&s, &second, &ev, 500)) samples += r.is_sample();
  EXPECT_EQ(s.stats().records, samples);
  EXPECT_EQ(s.stats().lost, 0u);
  EXPECT_GE(samples, 100u);

  // fork() does not copy the mapping (VM_DONTCOPY).
  Control c{static_cast<sframe_session_mmap_page*>(
      mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd(), 0))};
  ASSERT_NE(static_cast<void*>(c.page), MAP_FAILED) << strerror(errno);
  char addr[32];
  std::snprintf(addr, sizeof(addr), "%lx-", reinterpret_cast<unsigned long>(c.page));
  std::fflush(nullptr);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
      if (line.rfind(addr, 0) == 0) _exit(1);
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child has the mapping";

  // Closing the session's file while mapped: the mapping holds the file,
  // so the session ends only at munmap(), and nothing breaks meanwhile.
  const uint64_t sessions = dev().stats().user_sessions;
  s.close();
  second = SessionRing();
  EXPECT_EQ(c.page->version, uint32_t{SFRAME_SESSION_MMAP_VERSION});
  c.set_tail(c.head());
  EXPECT_EQ(dev().stats().user_sessions, sessions) << "ended while still mapped";
  munmap(c.page, kPage);
  EXPECT_EQ(dev().stats().user_sessions, sessions - 1) << "not ended by the last munmap";
  w->Kill();
}

// ---- shapes of mapping -------------------------------------------------------------------

TEST_F(SessionTest, MmapRefusesEveryOtherShape) {
  SKIP_WITHOUT_PERF();
  sframe::SessionOptions o = SframeOnly();
  o.buffer_size = 100000;  // rounded up to 128 KiB, which start returns
  Session s = Session::start(Target::kProcess, getpid(), o);
  const size_t size = 128u << 10;
  const int rw = PROT_READ | PROT_WRITE;
  EXPECT_EQ(MapErrno(s.fd(), kPage + size, rw, MAP_SHARED, static_cast<off_t>(kPage)), EINVAL)
      << "offset";
  EXPECT_EQ(MapErrno(s.fd(), kPage + size / 2, rw, MAP_SHARED, 0), EINVAL) << "half the ring";
  EXPECT_EQ(MapErrno(s.fd(), kPage + 2 * size, rw, MAP_SHARED, 0), EINVAL) << "twice the ring";
  EXPECT_EQ(MapErrno(s.fd(), 2 * kPage, rw, MAP_SHARED, 0), EINVAL) << "two pages";
  EXPECT_EQ(MapErrno(s.fd(), kPage + size, rw, MAP_PRIVATE, 0), EINVAL) << "private";
  EXPECT_EQ(MapErrno(s.fd(), kPage + size, PROT_READ, MAP_SHARED, 0), EINVAL) << "read-only";
  // EPERM where /dev is mounted noexec, before the module is asked.
  const int exec = MapErrno(s.fd(), kPage + size, rw | PROT_EXEC, MAP_SHARED, 0);
  EXPECT_TRUE(exec == EINVAL || exec == EPERM) << "exec: " << sframe::errno_name(exec);
  // A file that is not a session.
  sframe::UniqueFd plain = sframe::UniqueFd::open(vmtest::DevicePath(), O_RDWR);
  EXPECT_EQ(MapErrno(plain.get(), kPage, rw, MAP_SHARED, 0), ENODEV);

  // The right shapes: the control page alone, and all of it.
  void* p = mmap(nullptr, kPage + size, rw, MAP_SHARED, s.fd(), 0);
  ASSERT_NE(p, MAP_FAILED) << strerror(errno);
  const auto* c = static_cast<const sframe_session_mmap_page*>(p);
  EXPECT_EQ(c->version, uint32_t{SFRAME_SESSION_MMAP_VERSION});
  EXPECT_EQ(c->data_offset, kPage);
  EXPECT_EQ(c->data_size, size);
  EXPECT_EQ(c->data_head, 0u);
  EXPECT_EQ(c->data_tail, 0u);
  // Zeroed: no kernel memory shows through.
  const auto* bytes = static_cast<const uint8_t*>(p);
  size_t nonzero = 0;
  for (size_t i = sizeof(*c); i < kPage + size; i++) nonzero += bytes[i] != 0;
  EXPECT_EQ(nonzero, 0u);
  EXPECT_NE(mprotect(p, kPage + size, PROT_READ | PROT_EXEC), 0) << "made executable";
  void* grown = mremap(p, kPage + size, kPage + 2 * size, MREMAP_MAYMOVE);
  EXPECT_EQ(grown, MAP_FAILED) << "grew";
  if (grown != MAP_FAILED) p = grown;
  munmap(p, kPage + size);
}

// ---- garbage in data_tail ----------------------------------------------------------------

TEST_F(SessionTest, GarbageTailsDropSamplesButNeverOverwriteUnreadRecords) {
  SKIP_WITHOUT_PERF();
  EXPECT_EQ(GarbageTails(UserOnly()), "");
  if (IsRoot()) {
    EXPECT_EQ(RunAsNobody(2, [] { return GarbageTails(true); }), "");
  }
}

// ---- a read() racing the first mapping ---------------------------------------------------

// Issue 27, point 5: a read() that had passed its "not mapped" check when
// the buffer was mapped went on to set the tail, and the data_tail in the
// control page, to where it had read: behind what the mapping's reader had
// taken meanwhile, so the writer would put records over bytes that reader
// may read again (227df5d's module; the test's output is quoted in
// docs/benchmarks.md, "Security fixes of issue 27").  Now such a read()
// consumes nothing and says EBUSY, and the mapping alone moves the tail.
// Made deterministic with userfaultfd: the read()'s copy to user memory
// stalls on a missing page while the buffer is mapped and its records
// consumed through the mapping.  Root: userfaultfd of kernel-mode faults.
TEST_F(SessionTest, AReadRacingTheFirstMappingNeverMovesTheTail) {
  if (!IsRoot()) GTEST_SKIP() << "userfaultfd of a kernel copy needs privilege; the root run covers it";
  std::string why;
  auto w = Workload::Start({"spin", "0"}, &why);
  ASSERT_TRUE(w) << why;
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), Perf(false));
  Session s = Session::start(Target::kProcess, w->pid(), Options(SFRAME_SESSION_MIN_BUFFER));
  // Some records, then no more: the event is disabled before the race.
  ev.enable();
  const uint64_t t0 = NowMs();
  pollfd pfd{s.fd(), POLLIN, 0};
  while (NowMs() - t0 < 10000 && poll(&pfd, 1, 100) <= 0) {
    ev.drain();
  }
  usleep(200 * 1000);
  ev.disable();
  ev.drain();
  usleep(400 * 1000);  // the last deferred samples land (sample_max_wait_ms)
  w->Kill();

  // The read() buffer: a page whose first touch waits for us.
  sframe::UniqueFd uffd(static_cast<int>(syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK)));
  ASSERT_TRUE(uffd) << "userfaultfd: " << strerror(errno);
  uffdio_api api{};
  api.api = UFFD_API;
  ASSERT_EQ(ioctl(uffd.get(), UFFDIO_API, &api), 0) << strerror(errno);
  void* buf = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(buf, MAP_FAILED);
  uffdio_register reg{};
  reg.range.start = reinterpret_cast<uint64_t>(buf);
  reg.range.len = kPage;
  reg.mode = UFFDIO_REGISTER_MODE_MISSING;
  ASSERT_EQ(ioctl(uffd.get(), UFFDIO_REGISTER, &reg), 0) << strerror(errno);

  // Room for one record of the spin chain at most: the read() takes a
  // first record or two, not all.
  ssize_t got = 0;
  int read_errno = 0;
  std::thread reader([&] {
    got = read(s.fd(), buf, 256);
    read_errno = got < 0 ? errno : 0;
  });
  pollfd up{uffd.get(), POLLIN, 0};
  const bool stalled = poll(&up, 1, 10000) == 1;
  uffd_msg msg{};
  const bool fault = stalled && read(uffd.get(), &msg, sizeof(msg)) == sizeof(msg) &&
                     msg.event == UFFD_EVENT_PAGEFAULT;

  // Meanwhile: the buffer mapped, and everything in it consumed there.
  uint64_t head = 0, tail_before = 0;
  void* map = MAP_FAILED;
  if (fault) {
    map = mmap(nullptr, kPage + SFRAME_SESSION_MIN_BUFFER, PROT_READ | PROT_WRITE, MAP_SHARED,
               s.fd(), 0);
  }
  Control c{static_cast<sframe_session_mmap_page*>(map)};
  if (map != MAP_FAILED) {
    tail_before = c.tail();
    head = c.head();
    c.set_tail(head);
  }
  // Let the read() go on, whatever happened.
  uffdio_zeropage zp{};
  zp.range.start = reinterpret_cast<uint64_t>(buf);
  zp.range.len = kPage;
  ioctl(uffd.get(), UFFDIO_ZEROPAGE, &zp);
  reader.join();
  ASSERT_TRUE(fault) << "the read() never touched its buffer";
  ASSERT_NE(map, MAP_FAILED) << strerror(errno);
  ASSERT_GT(head, tail_before) << "no records to race over";
  const uint64_t tail_after = c.tail();
  std::printf("read() returned %zd (%s); data_tail %" PRIu64 " at mapping, set to the head %" PRIu64
              ", %" PRIu64 " after the read()\n",
              got, got < 0 ? strerror(read_errno) : "bytes", tail_before, head, tail_after);
  EXPECT_EQ(tail_after, head) << "the read() moved the mapping's tail";
  EXPECT_EQ(got, -1);
  EXPECT_EQ(read_errno, EBUSY);
  munmap(map, kPage + SFRAME_SESSION_MIN_BUFFER);
  munmap(buf, kPage);
}

}  // namespace
