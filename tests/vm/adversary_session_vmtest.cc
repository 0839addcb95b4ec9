// Adversarial tests of sessions and deferred unwinding (issue 10, findings
// 4, 5, 6 and 8), in the VM on Debian's kernel.
//
// Each test plays an attack as the user who could make it (uid 65534 in a
// child of the root run: Debian's perf_event_paranoid=3 forbids perf and
// sessions to the user run, see session_vmtest.cc) against a root session
// or another user, and asserts the victim's outcome:
//   - tasks that block in the kernel right after being sampled do not pin
//     the module's sample buffers: another session keeps complete stacks,
//     and the blocked tasks' samples come out (TIMEOUT) while they block;
//   - a pid number reused after a session's owner exited gets nothing of
//     that session's;
//   - each user's sessions and buffer memory are bounded (EDQUOT), and one
//     user at its bound leaves another user's sessions working;
//   - CAP_PERFMON does not skip the ptrace check for another user's task
//     (perf_check_permission() on 6.1 does not either);
//   - kernel stacks of software events are taken the way perf takes them:
//     a session's kernel frames equal perf's own callchain of the sample.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sessions.h"
#include "vmtest.h"
#include "sframe_test/errno_of.h"

namespace {

using sframe::Record;
using sframe::Sample;
using sframe::Session;
using sframe::Target;
using vmtest::ChainCheck;
using vmtest::CheckChain;
using vmtest::Collect;
using vmtest::Collected;
using vmtest::IsRoot;
using vmtest::kNobody;
using vmtest::kSpinChain;
using vmtest::MostlyComplete;
using vmtest::NowMs;
using vmtest::ParanoidGuard;
using vmtest::RunAsUser;
using vmtest::SessionTest;
using vmtest::Pipe;
using vmtest::ReadAll;
using vmtest::WaitStatus;
using vmtest::WriteAll;

// Reads a whole small file (a /proc or /sys value).
std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

// The module's bound on how long a sample waits (250 if the module has no
// such parameter: a module from before the bound, which must then fail).
unsigned SampleMaxWaitMs() {
  std::string v = ReadFile("/sys/module/sframe_unwind/parameters/sample_max_wait_ms");
  return v.empty() ? 250u : static_cast<unsigned>(std::stoul(v));
}

bool WriteFile(const std::string& path, const std::string& value) {
  std::ofstream f(path);
  f << value << "\n";
  f.flush();
  return static_cast<bool>(f);
}



// ---- finding 6: tasks blocked in the kernel ---------------------------------------------

// The attacker: `pairs` pairs of threads.  In each, a writer makes one
// write() of 64 MiB into a pipe and a reader takes 16 MiB out of it and
// stops: the writer has spent a long kernel entry copying (sampled many
// times) and then blocks in that same entry, for as long as the test
// wants.  Writes "blocked" to `ready` once every reader has stopped.  When
// `release` closes, each reader closes its end and the writer returns.
void BlockingAttacker(int pairs, int ready, int release) {
  constexpr size_t kWrite = 64u << 20, kRead = 16u << 20;
  void* big = mmap(nullptr, kWrite, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (big == MAP_FAILED) return;
  signal(SIGPIPE, SIG_IGN);
  std::atomic<int> stopped{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < pairs; i++) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) break;
    ts.emplace_back([=] {
      ssize_t unused = write(p[1], big, kWrite);  // blocks in the kernel
      (void)unused;
      close(p[1]);
    });
    ts.emplace_back([=, &stopped] {
      std::vector<char> buf(64 << 10);
      size_t got = 0;
      while (got < kRead) {
        ssize_t n = read(p[0], buf.data(), buf.size());
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
      stopped++;
      char c;
      ssize_t unused = read(release, &c, 1);  // until the test closes it
      (void)unused;
      close(p[0]);
    });
  }
  while (stopped.load() < static_cast<int>(ts.size() / 2)) usleep(10000);
  usleep(200000);  // the writers fill the pipes and block
  WriteAll(ready, "blocked\n");
  for (auto& t : ts) t.join();
  munmap(big, kWrite);
}

// Waits for "blocked" on fd while draining sessions (so they never fill).
bool WaitBlocked(int fd, const std::vector<Session*>& sessions) {
  std::string line;
  const uint64_t until = NowMs() + 120000;
  while (line.find("blocked") == std::string::npos && NowMs() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) == 1) {
      char buf[64];
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) return false;
      line.append(buf, static_cast<size_t>(n));
    }
    std::vector<Record> drop;
    for (Session* s : sessions) {
      while (s->read(&drop)) drop.clear();
    }
  }
  return line.find("blocked") != std::string::npos;
}

TEST_F(SessionTest, TasksBlockedInTheKernelDoNotBlindAnotherSession) {
  if (!IsRoot()) {
    GTEST_SKIP() << "the victim is a root CPU-wide session; the attacker runs as uid 65534 in a "
                    "child of the root run";
  }
  const unsigned max_wait_ms = SampleMaxWaitMs();
  auto w = StartWorkload({"spin", "0"});
  ASSERT_TRUE(w);
  sframe::PerfEventOptions po = PerfOptions(10000);
  sframe::PerfEvent ev = sframe::PerfEvent::open_all_cpus(po);
  sframe::SessionOptions big = SframeOnly();
  big.buffer_size = 16u << 20;
  Session all = Session::start(Target::kAll, 0, big);
  Session victim = Session::start(Target::kProcess, w->pid(), SframeOnly());
  const sframe::Stats before = dev().stats();

  Pipe ready, release, go;
  ASSERT_TRUE(ready.r && release.r && go.r);
  std::fflush(nullptr);
  pid_t attacker = fork();
  ASSERT_GE(attacker, 0);
  if (attacker == 0) {
    ready.r.reset();
    release.w.reset();
    go.w.reset();
    if (setresgid(kNobody, kNobody, kNobody) != 0 || setresuid(kNobody, kNobody, kNobody) != 0)
      _exit(2);
    char c;
    if (read(go.r.get(), &c, 1) != 1) _exit(3);
    BlockingAttacker(32, ready.w.get(), release.r.get());
    _exit(0);
  }
  ready.w.reset();
  release.r.reset();
  go.r.reset();
  ev.enable();
  WriteAll(go.w.get(), "g");
  // Sampled while they copy; then the writers block for good.
  ASSERT_TRUE(WaitBlocked(ready.r.get(), {&all, &victim})) << "the attacker's threads did not block";
  ev.disable();

  // From now on the attacker's writers stay blocked in the kernel.  Before
  // the fix each of them held a slot and its samples for as long as it
  // blocked, and the sample buffers of the whole machine ran out.
  const sframe::SessionStats victim_before = victim.stats();
  Collected c = Collect(std::vector<Session*>{&victim, &all}, &ev, 3000)[0];
  const sframe::Stats after = dev().stats();

  release.w.reset();  // the attacker's threads return and exit
  EXPECT_EQ(WaitStatus(attacker), 0);
  w->Kill();

  ChainCheck check;
  for (const Sample* smp : c.Samples()) CheckChain(*smp, User(*smp), kSpinChain, &check);
  EXPECT_TRUE(MostlyComplete(check, 0.99, 300));
  EXPECT_EQ(c.stats.lost_capture, victim_before.lost_capture)
      << "samples of the victim dropped at capture while the attacker's tasks blocked";
  EXPECT_EQ(c.stats.lost, victim_before.lost);
  EXPECT_GT(after.samples_timed_out, before.samples_timed_out)
      << "no sample of the blocked threads came out while they blocked";
  RecordProperty("samples_timed_out",
                 std::to_string(after.samples_timed_out - before.samples_timed_out));
  RecordProperty("max_wait_ms", std::to_string(max_wait_ms));
}

// A blocked task's samples come out within sample_max_wait_ms (plus the
// flusher's period and emulation's slack), with their kernel stack.
TEST_F(SessionTest, ABlockedTasksSampleComesOutWithinTheBound) {
  SKIP_WITHOUT_PERF();
  if (UserOnly()) GTEST_SKIP() << "kernel-mode samples need paranoid <= 1 (is " << paranoid_ << ")";
  const unsigned max_wait_ms = SampleMaxWaitMs();
  Pipe ready, release, go;
  ASSERT_TRUE(ready.r && release.r && go.r);
  std::fflush(nullptr);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ready.r.reset();
    release.w.reset();
    go.w.reset();
    char c;
    if (read(go.r.get(), &c, 1) != 1) _exit(3);
    BlockingAttacker(2, ready.w.get(), release.r.get());
    _exit(0);
  }
  ready.w.reset();
  release.r.reset();
  go.r.reset();
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(child, PerfOptions(10000));
  Session s = Session::start(Target::kProcess, child, SframeOnly());
  ev.enable();
  WriteAll(go.w.get(), "g");
  ASSERT_TRUE(WaitBlocked(ready.r.get(), {}));
  const uint64_t blocked_at = NowMs();
  ev.disable();
  // The samples of the writers' entries, which are still blocked, must
  // come without the writers returning, within the bound.
  std::vector<Record> recs;
  size_t timed_out = 0;
  uint64_t last_timeout_ms = 0;
  const uint64_t deadline = blocked_at + max_wait_ms + 5000;
  while (NowMs() < deadline) {
    size_t n = s.poll_read(&recs, 100);
    for (size_t i = recs.size() - n; i < recs.size(); i++) {
      if (recs[i].is_sample() && recs[i].sample.has(SFRAME_SAMPLE_F_TIMEOUT)) {
        timed_out++;
        last_timeout_ms = NowMs();
        const Sample& smp = recs[i].sample;
        EXPECT_TRUE(smp.has(SFRAME_SAMPLE_F_NO_USER));
        EXPECT_TRUE(smp.user.empty());
        EXPECT_FALSE(smp.kernel.empty()) << "a timed-out sample keeps its kernel stack";
      }
    }
  }
  release.w.reset();
  EXPECT_EQ(WaitStatus(child), 0);
  EXPECT_GT(timed_out, 0u) << "no sample of the blocked writers came out while they blocked";
  if (timed_out) {
    EXPECT_LE(last_timeout_ms - blocked_at, max_wait_ms + 3000u)
        << "the last timed-out sample came " << (last_timeout_ms - blocked_at)
        << " ms after the writers blocked; the bound is " << max_wait_ms << " ms";
  }
  RecordProperty("timed_out", std::to_string(timed_out));
}

// ---- finding 5: owners are pids, not numbers --------------------------------------------------

TEST_F(SessionTest, AReusedPidOfAnExitedOwnerReceivesNothing) {
  if (!IsRoot()) {
    GTEST_SKIP() << "making a pid number come back on demand (ns_last_pid) needs root; an "
                    "unprivileged attacker would cycle through pid_max instead";
  }
  auto w = StartWorkload({"spin", "0"});
  ASSERT_TRUE(w);
  Pipe to_keeper, from_keeper, p_done;
  ASSERT_TRUE(to_keeper.r && from_keeper.r && p_done.r);
  std::fflush(nullptr);
  // P starts a session on the workload, leaves it to its child K, exits.
  pid_t p = fork();
  ASSERT_GE(p, 0);
  if (p == 0) {
    Session s;
    try {
      s = Session::start(Target::kProcess, w->pid(), SframeOnly());
    } catch (...) {
      _exit(2);
    }
    pid_t k = fork();
    if (k == 0) {
      // K: holds the session until told, then counts what came.
      p_done.w.reset();
      char c;
      ssize_t unused = read(to_keeper.r.get(), &c, 1);
      (void)unused;
      std::vector<Record> recs;
      while (s.read(&recs)) {
      }
      size_t samples = 0;
      for (const Record& r : recs) samples += r.is_sample();
      WriteAll(from_keeper.w.get(), std::to_string(samples) + " " +
                                        std::to_string(s.stats().samples) + "\n");
      _exit(0);
    }
    _exit(k > 0 ? 0 : 3);
  }
  p_done.w.reset();
  ASSERT_EQ(WaitStatus(p), 0);

  // Q gets P's number and samples the workload with an event of its own.
  std::string q_out;
  bool reused = false;
  for (int attempt = 0; attempt < 10 && !reused; attempt++) {
    ASSERT_TRUE(WriteFile("/proc/sys/kernel/ns_last_pid", std::to_string(p - 1)));
    Pipe q_pipe;
    std::fflush(nullptr);
    pid_t q = fork();
    ASSERT_GE(q, 0);
    if (q == 0) {
      if (getpid() != p) _exit(3);
      q_pipe.r.reset();
      std::string out;
      try {
        sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(2000));
        Session own = Session::start(Target::kProcess, w->pid(), SframeOnly());
        Collected c = Collect(&own, &ev, 1500);
        out = std::to_string(c.Samples().size());
      } catch (const std::exception& e) {
        out = std::string("error ") + e.what();
      }
      WriteAll(q_pipe.w.get(), out);
      _exit(0);
    }
    q_pipe.w.reset();
    q_out = ReadAll(q_pipe.r.get());
    int st = WaitStatus(q);
    reused = st == 0;
    ASSERT_TRUE(st == 0 || st == 3) << "Q exited " << st << ": " << q_out;
  }
  ASSERT_TRUE(reused) << "pid " << p << " did not come back in 10 tries";
  WriteAll(to_keeper.w.get(), "x");
  to_keeper.w.reset();
  from_keeper.w.reset();
  std::string kept = ReadAll(from_keeper.r.get());
  w->Kill();

  size_t q_samples = 0;
  ASSERT_EQ(std::sscanf(q_out.c_str(), "%zu", &q_samples), 1) << q_out;
  EXPECT_GE(q_samples, 100u) << "Q's own session: the samples did go through the module";
  unsigned long kept_records = 1, kept_matched = 1;
  ASSERT_EQ(std::sscanf(kept.c_str(), "%lu %lu", &kept_records, &kept_matched), 2) << kept;
  EXPECT_EQ(kept_records, 0u) << "the exited owner's session received samples of the process "
                                 "that reused its pid number";
  EXPECT_EQ(kept_matched, 0u);
}

// ---- finding 4: per-user bounds ----------------------------------------------------------------

std::string SessionsUpToTheBound(uint32_t buffer, size_t want, std::vector<Session>* held) {
  sframe::SessionOptions o;
  o.device = vmtest::DevicePath();
  o.buffer_size = buffer;
  size_t ok = 0;
  int err = 0;
  for (size_t i = 0; i < want + 8; i++) {
    err = sframe::errno_of([&] { held->push_back(Session::start(Target::kProcess, getpid(), o)); });
    if (err) break;
    ok++;
  }
  if (ok != want || err != EDQUOT) {
    return "buffer " + std::to_string(buffer) + ": " + std::to_string(ok) + " sessions, then " +
           sframe::errno_name(err) + "; want " + std::to_string(want) + ", then EDQUOT\n";
  }
  return "";
}

TEST_F(SessionTest, EachUsersSessionsAndBuffersAreBounded) {
  if (!IsRoot()) {
    GTEST_SKIP() << "runs as root: children drop to uids 65534 and 65533 at perf_event_paranoid "
                    "2 (the user run has paranoid 3, where no session starts: StartErrors checks "
                    "that)";
  }
  const std::string param = "/sys/module/sframe_unwind/parameters/";
  const unsigned max_sessions =
      static_cast<unsigned>(std::stoul(ReadFile(param + "session_max_user")));
  const uint64_t max_kb = std::stoull(ReadFile(param + "session_max_user_kb"));
  ASSERT_GT(max_sessions, 1u);
  ASSERT_GE(max_kb, 1024u);
  ParanoidGuard g(2);
  ASSERT_TRUE(g.ok());
  Pipe holding, go, verdict;
  std::fflush(nullptr);
  // uid 65534 takes all it may, and holds it while uid 65533 starts one.
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    holding.r.reset();
    go.w.reset();
    verdict.r.reset();
    std::string err;
    if (setresgid(kNobody, kNobody, kNobody) != 0 || setresuid(kNobody, kNobody, kNobody) != 0) {
      err = "setresuid failed";
    } else {
      sframe::Device d(vmtest::DevicePath());
      {
        std::vector<Session> held;
        err += SessionsUpToTheBound(SFRAME_SESSION_MIN_BUFFER, max_sessions, &held);
        sframe::Stats st = d.stats();
        if (st.user_sessions != held.size() || st.user_sessions_limit != max_sessions) {
          err += "stats: user_sessions " + std::to_string(st.user_sessions) + " limit " +
                 std::to_string(st.user_sessions_limit) + "\n";
        }
        WriteAll(holding.w.get(), "h");
        char c;
        ssize_t unused = read(go.r.get(), &c, 1);
        (void)unused;
      }
      {
        // Memory: buffers of a quarter of the bound each, four fit.
        std::vector<Session> held;
        const uint64_t quarter = (max_kb << 10) / 4;
        if (quarter <= SFRAME_SESSION_MAX_BUFFER && (quarter & (quarter - 1)) == 0) {
          err += SessionsUpToTheBound(static_cast<uint32_t>(quarter), 4, &held);
          sframe::Stats st = d.stats();
          if (st.user_session_bytes != held.size() * quarter ||
              st.user_session_bytes_limit != max_kb << 10)
            err += "stats: user_session_bytes " + std::to_string(st.user_session_bytes) + "\n";
        }
      }
      sframe::Stats st = d.stats();
      if (st.user_sessions || st.user_session_bytes) err += "sessions still counted after close\n";
    }
    WriteAll(verdict.w.get(), err.empty() ? "OK" : err);
    _exit(0);
  }
  holding.w.reset();
  go.r.reset();
  verdict.w.reset();
  char c;
  ASSERT_EQ(read(holding.r.get(), &c, 1), 1);
  // Another user is not affected by 65534 being at its bound.
  EXPECT_EQ(RunAsUser(kNobody - 1, 2, [] {
              sframe::SessionOptions o;
              o.device = vmtest::DevicePath();
              int e = sframe::errno_of([&] { Session::start(Target::kProcess, getpid(), o); });
              return e ? "uid 65533: " + sframe::errno_name(e) : std::string();
            }),
            "");
  WriteAll(go.w.get(), "g");
  go.w.reset();
  std::string out = ReadAll(verdict.r.get());
  EXPECT_EQ(WaitStatus(child), 0);
  EXPECT_EQ(out, "OK");
}

// ---- finding 5: CAP_PERFMON and the ptrace rule ---------------------------------------------

// Keeps only CAP_PERFMON (effective and permitted) after dropping to uid.
bool KeepOnlyPerfmon(uint32_t uid) {
  if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) return false;
  if (setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0) return false;
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  const int cap = 38;  // CAP_PERFMON
  data[cap / 32].effective = data[cap / 32].permitted = 1u << (cap % 32);
  return syscall(SYS_capset, &hdr, data) == 0;
}

TEST_F(SessionTest, PerfmonDoesNotSkipThePtraceCheckOnAnotherUsersTask) {
  if (!IsRoot()) GTEST_SKIP() << "granting CAP_PERFMON to uid 65534 needs root";
  ParanoidGuard g(2);
  ASSERT_TRUE(g.ok());
  Pipe verdict;
  std::fflush(nullptr);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    verdict.r.reset();
    std::string err;
    if (!KeepOnlyPerfmon(kNobody)) {
      err = std::string("capset: ") + std::strerror(errno);
    } else {
      sframe::SessionOptions o;
      o.device = vmtest::DevicePath();
      // init belongs to root: perf would refuse an event on it (EACCES from
      // perf_check_permission); the module refuses the session (EPERM).
      int e = sframe::errno_of([&] { Session::start(Target::kProcess, 1, o); });
      if (e != EPERM) err += "session on pid 1 with CAP_PERFMON only: " + sframe::errno_name(e) + ", want EPERM\n";
      // Its own process it may follow, and CPU-wide is what CAP_PERFMON is for.
      e = sframe::errno_of([&] { Session::start(Target::kProcess, getpid(), o); });
      if (e) err += "own process: " + sframe::errno_name(e) + "\n";
      e = sframe::errno_of([&] { Session::start(Target::kAll, 0, o); });
      if (e) err += "all tasks with CAP_PERFMON: " + sframe::errno_name(e) + "\n";
    }
    WriteAll(verdict.w.get(), err.empty() ? "OK" : err);
    _exit(0);
  }
  verdict.w.reset();
  std::string out = ReadAll(verdict.r.get());
  EXPECT_EQ(WaitStatus(child), 0);
  EXPECT_EQ(out, "OK");
}

// ---- finding 8: kernel stacks of software events ---------------------------------------------

// A raw perf event with kernel callchains, its ring mapped.
class CallchainEvent {
 public:
  CallchainEvent(pid_t pid, uint32_t type, uint64_t config) {
    perf_event_attr a{};
    a.size = sizeof(a);
    a.type = type;
    a.config = config;
    a.sample_period = 1;
    a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_CALLCHAIN;
    a.exclude_callchain_user = 1;
    a.disabled = 1;
    a.wakeup_events = 1;
    fd_.reset(static_cast<int>(syscall(SYS_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC)));
    if (!fd_) return;
    len_ = (1 + kPages) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* m = mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
    if (m != MAP_FAILED) map_ = static_cast<uint8_t*>(m);
  }
  ~CallchainEvent() {
    if (map_) munmap(map_, len_);
  }
  bool ok() const { return fd_ && map_; }
  void enable() { ioctl(fd_.get(), PERF_EVENT_IOC_ENABLE, 0); }
  void disable() { ioctl(fd_.get(), PERF_EVENT_IOC_DISABLE, 0); }
  // Appends the kernel callchains of the samples in the ring.
  void drain(std::vector<std::vector<uint64_t>>* out) {
    auto* meta = reinterpret_cast<perf_event_mmap_page*>(map_);
    const uint64_t size = len_ - static_cast<size_t>(sysconf(_SC_PAGESIZE));
    uint8_t* data = map_ + sysconf(_SC_PAGESIZE);
    uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = meta->data_tail;
    std::vector<uint8_t> rec;
    while (tail < head) {
      perf_event_header h;
      Copy(data, size, tail, &h, sizeof(h));
      rec.resize(h.size);
      Copy(data, size, tail, rec.data(), h.size);
      tail += h.size;
      if (h.type != PERF_RECORD_SAMPLE) continue;
      const uint64_t* p = reinterpret_cast<const uint64_t*>(rec.data() + sizeof(h) + 8);
      uint64_t nr = *p++;
      std::vector<uint64_t> chain;
      for (uint64_t i = 0; i < nr; i++) {
        if (p[i] == PERF_CONTEXT_KERNEL) continue;
        if (p[i] >= static_cast<uint64_t>(PERF_CONTEXT_MAX)) break;
        chain.push_back(p[i]);
      }
      out->push_back(chain);
    }
    __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
  }

 private:
  static constexpr size_t kPages = 64;
  static void Copy(const uint8_t* data, uint64_t size, uint64_t pos, void* dst, size_t n) {
    for (size_t i = 0; i < n; i++) static_cast<uint8_t*>(dst)[i] = data[(pos + i) % size];
  }
  sframe::UniqueFd fd_;
  uint8_t* map_ = nullptr;
  size_t len_ = 0;
};

TEST_F(SessionTest, KernelStacksOfSoftwareEventsAreTheOnesPerfRecords) {
  if (!IsRoot()) GTEST_SKIP() << "kernel callchains of perf need paranoid <= 1 or privileges";
  // A child that switches out at every nanosleep: a context-switch event,
  // whose registers perf synthesizes (perf_fetch_caller_regs()).
  Pipe go;
  std::fflush(nullptr);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    go.w.reset();
    char c;
    ssize_t unused = read(go.r.get(), &c, 1);
    (void)unused;
    for (int i = 0; i < 400; i++) {
      timespec ts{0, 200000};
      nanosleep(&ts, nullptr);
    }
    _exit(0);
  }
  go.r.reset();
  CallchainEvent ev(child, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES);
  ASSERT_TRUE(ev.ok()) << std::strerror(errno);
  Session s = Session::start(Target::kProcess, child, SframeOnly());
  ASSERT_TRUE(s.kernel_visible());
  ev.enable();
  go.w.reset();
  std::vector<std::vector<uint64_t>> perf_chains;
  std::vector<Record> recs;
  while (waitpid(child, nullptr, WNOHANG) == 0) {
    ev.drain(&perf_chains);
    s.poll_read(&recs, 20);
  }
  ev.disable();
  ev.drain(&perf_chains);
  const uint64_t quiet_until = NowMs() + 1000;
  while (NowMs() < quiet_until) s.poll_read(&recs, 100);

  std::set<std::vector<uint64_t>> perf_set;
  for (auto& c : perf_chains) {
    if (c.size() > SFRAME_SESSION_MAX_KERNEL_FRAMES) c.resize(SFRAME_SESSION_MAX_KERNEL_FRAMES);
    perf_set.insert(c);
  }
  size_t samples = 0, equal = 0;
  std::string example;
  for (const Record& r : recs) {
    if (!r.is_sample()) continue;
    samples++;
    if (perf_set.count(r.sample.kernel)) {
      equal++;
    } else if (example.empty()) {
      char buf[64];
      for (uint64_t ip : r.sample.kernel) {
        std::snprintf(buf, sizeof(buf), " %" PRIx64, ip);
        example += buf;
      }
    }
  }
  std::string perf_example;
  if (!perf_chains.empty()) {
    char buf[64];
    for (uint64_t ip : perf_chains[perf_chains.size() / 2]) {
      std::snprintf(buf, sizeof(buf), " %" PRIx64, ip);
      perf_example += buf;
    }
  }
  RecordProperty("perf_samples", std::to_string(perf_chains.size()));
  RecordProperty("session_samples", std::to_string(samples));
  ASSERT_GE(perf_chains.size(), 200u);
  ASSERT_GE(samples, 200u);
  EXPECT_GE(equal * 100, samples * 95)
      << equal << " of " << samples << " session samples carry a kernel stack perf recorded for "
      << "the same event; e.g. one that does not:" << example << "\nand one of perf's:"
      << perf_example;
}

// ---- finding 9: 32-bit code ----------------------------------------------------------

// Machine code for an address below 4 GiB (base): called from 64-bit code
// as void f(uint32_t n), it far-jumps into the 32-bit user code segment
// (__USER32_CS, 0x23), counts ecx down from n there, and far-jumps back
// (__USER_CS, 0x33).  What a 32-bit program, or a 64-bit one running
// 32-bit code, looks like to a sample.
std::vector<uint8_t> CompatSpinCode(uint32_t base) {
  auto le32 = [](std::vector<uint8_t>* v, uint32_t x) {
    for (int i = 0; i < 4; i++) v->push_back(static_cast<uint8_t>(x >> (8 * i)));
  };
  std::vector<uint8_t> c = {
      0x53,                                      // 0: push %rbx
      0x89, 0xf9,                                // 1: mov %edi,%ecx
      0x48, 0x8d, 0x05, 0x02, 0x00, 0x00, 0x00,  // 3: lea 2(%rip),%rax (-> 12)
      0xff, 0x28,                                // 10: ljmp *(%rax) (m16:32)
  };
  le32(&c, base + 18);  // 12: offset of the 32-bit code
  c.push_back(0x23);    // 16: selector __USER32_CS
  c.push_back(0x00);
  c.push_back(0x49);    // 18: dec %ecx (32-bit)
  c.push_back(0x75);    // 19: jnz 18
  c.push_back(0xfd);
  c.push_back(0xea);    // 21: ljmp $0x33, base + 28
  le32(&c, base + 28);
  c.push_back(0x33);
  c.push_back(0x00);
  c.push_back(0x5b);  // 28: pop %rbx (64-bit again)
  c.push_back(0xc3);  // 29: ret
  return c;
}

TEST_F(SessionTest, SamplesOf32BitCodeGetNoUserStack) {
  SKIP_WITHOUT_PERF();
  Pipe go;
  ASSERT_TRUE(go.r);
  std::fflush(nullptr);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    go.w.reset();
    void* m = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT,
                   -1, 0);
    if (m == MAP_FAILED) _exit(2);
    std::vector<uint8_t> code = CompatSpinCode(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(m)));
    std::memcpy(m, code.data(), code.size());
    if (mprotect(m, 4096, PROT_READ | PROT_EXEC) != 0) _exit(3);
    char c;
    if (read(go.r.get(), &c, 1) != 1) _exit(4);
    // On a stack below 4 GiB too: returning from an interrupt into 32-bit
    // code keeps only the low half of the stack pointer under qemu.
    constexpr size_t kStack = 1 << 20;
    void* stack = mmap(nullptr, kStack, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    if (stack == MAP_FAILED) _exit(5);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstack(&attr, stack, kStack);
    pthread_t t;
    if (pthread_create(&t, &attr, [](void* code) -> void* {
          auto spin32 = reinterpret_cast<void (*)(uint32_t)>(code);
          const uint64_t end = NowMs() + 3000;
          while (NowMs() < end) spin32(20000000);
          return nullptr;
        }, m) != 0)
      _exit(6);
    pthread_join(t, nullptr);
    _exit(0);
  }
  go.r.reset();
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(child, PerfOptions(2000));
  Session s = Session::start(Target::kProcess, child, SframeOnly());
  WriteAll(go.w.get(), "g");
  Collected c = Collect(&s, &ev, 3500);
  EXPECT_EQ(WaitStatus(child), 0) << "the 32-bit code did not run and return";
  size_t compat = 0, compat_with_user = 0;
  for (const Sample* smp : c.Samples()) {
    if (!smp->has(SFRAME_SAMPLE_F_COMPAT)) continue;
    compat++;
    compat_with_user += !smp->user.empty() || !smp->has(SFRAME_SAMPLE_F_NO_USER);
  }
  RecordProperty("compat_samples", std::to_string(compat));
  EXPECT_GE(compat, 100u) << "samples taken in 32-bit mode, of " << c.Samples().size();
  EXPECT_EQ(compat_with_user, 0u) << "32-bit samples with an AMD64 user walk";
}

// Issue 27, point 5: the sample and request pools are per CPU and shared
// by everyone; a user whose task stays in the kernel while it is sampled
// holds one pool entry per sample until the task returns to user space
// (or sample_max_wait_ms).  On 227df5d's module one such task took its
// CPU's whole sample pool (512), leaving nothing for any other user's
// samples there; now a user holds at most half of a CPU's pool
// (SFRAME_SAMPLE_SHARE, module/sample.c) and the rest stays for the
// others.  The hog, as uid 65533 pinned to CPU 0, reads 256 MiB of
// /dev/zero at a time (one kernel entry of about a second under TCG); a
// root session samples it at 10 kHz; every sample of one kernel entry
// carries the entry's cookie, so the most records with one cookie is the
// most pool entries the hog held at once.
TEST_F(SessionTest, OneUsersTaskInTheKernelHoldsAtMostHalfOfACpusPool) {
  if (!IsRoot()) GTEST_SKIP() << "a root session samples the other user's task (kernel mode)";
  constexpr size_t kChunk = 256u << 20;
  constexpr size_t kPoolPerCpu = 512;  // SAMPLES_PER_CPU, module/sample.c
  int ready[2];
  ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
  const pid_t hog = fork();
  ASSERT_GE(hog, 0);
  if (hog == 0) {
    close(ready[0]);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0 || setresgid(65533, 65533, 65533) != 0 ||
        setresuid(65533, 65533, 65533) != 0)
      _exit(40);
    void* buf = mmap(nullptr, kChunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    const int zero = open("/dev/zero", O_RDONLY | O_CLOEXEC);
    if (buf == MAP_FAILED || zero < 0) _exit(41);
    if (write(ready[1], "r", 1) != 1) _exit(42);
    for (int i = 0; i < 3; i++) {
      if (read(zero, buf, kChunk) <= 0) _exit(43);
      madvise(buf, kChunk, MADV_DONTNEED);  // fresh pages again: a long entry
    }
    _exit(0);
  }
  close(ready[1]);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1) << "the hog did not start";
  close(ready[0]);
  sframe::PerfEventOptions po;
  po.frequency = 10000;
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(hog, po);
  sframe::SessionOptions so;
  so.device = vmtest::DevicePath();
  so.unwind_flags = SFRAME_UNWIND_F_SFRAME;
  Session s = Session::start(Target::kProcess, hog, so);
  std::vector<Record> records;
  ev.enable();
  int st = 0;
  bool exited = false;
  for (const uint64_t t0 = NowMs(); NowMs() - t0 < 120000;) {
    pollfd p{s.fd(), POLLIN, 0};
    if (poll(&p, 1, 100) > 0) s.read(&records);
    ev.drain();
    if (waitpid(hog, &st, WNOHANG) == hog) {
      exited = true;
      break;
    }
  }
  if (!exited) {
    kill(hog, SIGKILL);
    waitpid(hog, &st, 0);
  }
  ev.disable();
  for (uint64_t quiet = NowMs(); NowMs() - quiet < 500;) {
    pollfd p{s.fd(), POLLIN, 0};
    if (poll(&p, 1, 100) > 0 && s.read(&records) > 0) quiet = NowMs();
  }
  ASSERT_TRUE(exited && WIFEXITED(st) && WEXITSTATUS(st) == 0) << "hog status " << st;
  std::map<uint64_t, size_t> per_entry;
  size_t in_kernel = 0;
  for (const Record& r : records) {
    if (!r.is_sample() || r.sample.has(SFRAME_SAMPLE_F_USER_MODE)) continue;
    in_kernel++;
    per_entry[r.sample.cookie]++;
  }
  size_t most = 0;
  for (const auto& e : per_entry) most = std::max(most, e.second);
  const sframe::SessionStats stats = s.stats();
  std::printf("hog: %zu kernel-mode samples in %zu kernel entries, at most %zu in one; "
              "%" PRIu64 " refused at capture\n",
              in_kernel, per_entry.size(), most, stats.lost_capture);
  // Not vacuous: the hog's entries were long enough to hold more than half.
  EXPECT_GT(stats.lost_capture, 0u) << "no entry outgrew the share";
  EXPECT_GE(most, kPoolPerCpu / 2 - 16) << "no entry came near the share";
  EXPECT_LE(most, kPoolPerCpu / 2) << "one user held more than half of a CPU's pool";
}

}  // namespace
