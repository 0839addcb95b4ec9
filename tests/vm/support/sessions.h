// Support for the VM tests that profile session_workload (next to the test
// program) with sessions: the target process, reading a session's records
// while a perf event samples, and checking the user chains of the records
// against the workload's known chains.  Used by session_vmtest and
// lifecycle_vmtest (support/sessions.cc is in their SOURCES).
#ifndef SFRAME_VMTEST_SESSIONS_H
#define SFRAME_VMTEST_SESSIONS_H

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "vmtest.h"
#include "sframe_profile/symbolizer.h"

extern char** environ;

namespace vmtest {

// Milliseconds of CLOCK_MONOTONIC (steady_clock).
uint64_t NowMs();

inline bool IsRoot() { return geteuid() == 0; }

// ---- the target process -----------------------------------------------------

class Workload {
 public:
  // Starts program (next to the test program, or a path) ARGS..., waits
  // for its "ready" line.
  static std::unique_ptr<Workload> Start(const std::vector<std::string>& args, std::string* err,
                                         const std::string& program = "session_workload") {
    auto w = std::unique_ptr<Workload>(new Workload);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      *err = std::string("pipe: ") + std::strerror(errno);
      return nullptr;
    }
    w->out_.reset(fds[0]);
    sframe::UniqueFd wr(fds[1]);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, wr.get(), 1);
    posix_spawn_file_actions_adddup2(&fa, wr.get(), 2);
    // A path, or the name of a program next to the test program.
    std::string exe = program.find('/') != std::string::npos ? program : vmtest::NextToSelf(program);
    std::vector<std::string> all{exe};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = posix_spawn(&w->pid_, exe.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      *err = "posix_spawn " + exe + ": " + std::strerror(rc);
      return nullptr;
    }
    wr.reset();
    if (!w->WaitFor("ready", 1, 20000)) {
      *err = program + " did not get ready; its output:\n" + w->output_;
      return nullptr;
    }
    return w;
  }

  ~Workload() {
    Kill();
    Wait();
  }

  pid_t pid() const { return pid_; }
  const std::string& output() const { return output_; }

  // Reads output until `count` lines start with `prefix ` (or equal it), or
  // timeout_ms pass.
  bool WaitFor(const std::string& prefix, size_t count, int timeout_ms) {
    const uint64_t end = NowMs() + static_cast<uint64_t>(timeout_ms);
    for (;;) {
      if (Lines(prefix).size() >= count) return true;
      const uint64_t now = NowMs();
      if (now >= end || !out_) return false;
      pollfd p{out_.get(), POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(end - now)) <= 0) continue;
      char buf[4096];
      ssize_t n = read(out_.get(), buf, sizeof(buf));
      if (n <= 0) {
        out_.reset();
        continue;
      }
      output_.append(buf, static_cast<size_t>(n));
    }
  }
  // Rest of the lines of the lines that start with prefix.
  std::vector<std::string> Lines(const std::string& prefix) const {
    std::vector<std::string> out;
    std::istringstream in(output_);
    std::string line;
    while (std::getline(in, line)) {
      if (line == prefix) out.push_back("");
      if (line.rfind(prefix + " ", 0) == 0) out.push_back(line.substr(prefix.size() + 1));
    }
    return out;
  }
  // The "text START END" ranges it printed, one per image.
  std::vector<std::pair<uint64_t, uint64_t>> Texts() const {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    for (const std::string& l : Lines("text")) {
      unsigned long long a = 0, b = 0;
      if (std::sscanf(l.c_str(), "%llx %llx", &a, &b) == 2) out.emplace_back(a, b);
    }
    return out;
  }
  std::vector<pid_t> Tids() const {
    std::vector<pid_t> out;
    for (const std::string& l : Lines("tid")) out.push_back(static_cast<pid_t>(std::stol(l)));
    return out;
  }

  void Kill() {
    if (pid_ > 0 && !reaped_) kill(pid_, SIGKILL);
  }
  // Exit status (128 + signal when killed); -1 if not started.
  int Wait() {
    if (pid_ <= 0) return -1;
    if (!reaped_) {
      int st = 0;
      while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
      }
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      reaped_ = true;
      WaitFor("\x01never", 1, 0);  // collect what is left
    }
    return status_;
  }

 private:
  Workload() = default;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = -1;
  sframe::UniqueFd out_;
  std::string output_;
};

// ---- chains -------------------------------------------------------------------------

// A frame in libc, in the chains below and in Names().
inline constexpr char kLibc[] = "<libc>";

// The function names of a user chain; frames in libc become "<libc>".
std::vector<std::string> Names(const std::vector<sframe::Symbol>& syms);

// A sample with its symbolized user frames (and kernel frames, with k), for
// failure messages.
std::string Describe(const sframe::Sample& s, const std::vector<sframe::Symbol>& user,
                     const sframe::KernelSymbolizer* k = nullptr);

struct ChainCheck {
  size_t considered = 0;         // samples whose leaf is in the chain
  size_t complete = 0;           // ... that carry the exact expected chain
  std::vector<std::string> bad;  // descriptions of the first few others

  double Fraction() const { return considered ? double(complete) / double(considered) : 0; }
};

// chain: the expected user chain from the leaf down ("<libc>" for the frame
// in libc).  A sample whose first user frame is chain[i] (i below the index
// of main) must carry exactly chain[i..] and stop with NO_COVERAGE.
void CheckChain(const sframe::Sample& s, const std::vector<sframe::Symbol>& syms,
                const std::vector<std::string>& chain, ChainCheck* c,
                const sframe::KernelSymbolizer* k = nullptr);

// At least min_considered samples considered, and at least min_fraction of
// them complete.
::testing::AssertionResult MostlyComplete(const ChainCheck& c, double min_fraction,
                                          size_t min_considered);

// The chains of session_workload (see its header comment), leaf first.
extern const std::vector<std::string> kSpinChain;    // spin
extern const std::vector<std::string> kReadChain;    // read, in the kernel
extern const std::vector<std::string> kThreadChain;  // threads
extern const std::vector<std::string> kExecChain;    // exec, before it execs

// ---- collecting ------------------------------------------------------------------------

struct Collected {
  std::vector<sframe::Record> records;
  sframe::SessionStats stats;
  uint64_t bytes = 0;
  std::vector<const sframe::Sample*> Samples() const {
    std::vector<const sframe::Sample*> out;
    for (const sframe::Record& r : records) {
      if (r.is_sample()) out.push_back(&r.sample);
    }
    return out;
  }
  uint64_t LostRecords() const {
    uint64_t n = 0;
    for (const sframe::Record& r : records) {
      if (r.is_lost()) n += r.lost;
    }
    return n;
  }
};

// Reads the sessions for ms milliseconds while the event runs (draining
// perf's ring), calls `midway` once at half time, then disables the event
// and reads until the sessions stay quiet for 300 ms.
std::vector<Collected> Collect(std::vector<sframe::Session*> sessions, sframe::PerfEvent* ev,
                               int ms, const std::function<void()>& midway = nullptr);

Collected Collect(sframe::Session* s, sframe::PerfEvent* ev, int ms,
                  const std::function<void()>& midway = nullptr);

// ---- plumbing for forked helpers -------------------------------------------------------

// A pipe whose ends close themselves.
struct Pipe {
  sframe::UniqueFd r, w;
  Pipe();
};

// Writes all of s (stops at an error or a closed pipe).
void WriteAll(int fd, const std::string& s);
// Reads until EOF.
std::string ReadAll(int fd);
// Reaps pid: its exit status, or 128 + the signal that killed it.
int WaitStatus(pid_t pid);

// The id of tracepoint `name` ("sched/sched_waking") from tracefs (root
// only), or 0.
uint64_t TracepointId(const std::string& name);

// ---- privileges -------------------------------------------------------------------------

inline constexpr uint32_t kNobody = 65534;

// Sets kernel.perf_event_paranoid for its lifetime (root only).
class ParanoidGuard {
 public:
  explicit ParanoidGuard(int value);
  ~ParanoidGuard();
  bool ok() const { return ok_; }

 private:
  int old_;
  bool ok_ = false;
};

// Runs fn in a forked child that drops to uid/gid `uid` (after the parent,
// root, set perf_event_paranoid to `paranoid`).  fn returns "" for success
// or what went wrong.  Returns the child's verdict.
std::string RunAsUser(uint32_t uid, int paranoid, const std::function<std::string()>& fn);
inline std::string RunAsNobody(int paranoid, const std::function<std::string()>& fn) {
  return RunAsUser(kNobody, paranoid, fn);
}

// ---- the fixture ------------------------------------------------------------------------

class SessionTest : public DeviceTest {
 protected:
  void SetUp() override {
    DeviceTest::SetUp();
    if (HasFatalFailure()) return;
    paranoid_ = sframe::perf_event_paranoid();
  }

  // Skips the test when this user cannot open perf events at all.
  bool SkipWithoutPerf() {
    if (IsRoot() || paranoid_ <= 2) return false;
    return true;
  }

  // Kernel-mode samples need privileges or paranoid <= 1.
  bool UserOnly() const { return !IsRoot() && paranoid_ > 1; }

  sframe::PerfEventOptions PerfOptions(uint64_t hz) const {
    sframe::PerfEventOptions o;
    o.frequency = hz;
    o.exclude_kernel = UserOnly();
    return o;
  }

  static sframe::SessionOptions SframeOnly() {
    sframe::SessionOptions o;
    o.device = DevicePath();
    o.unwind_flags = SFRAME_UNWIND_F_SFRAME;
    return o;
  }

  std::unique_ptr<Workload> StartWorkload(const std::vector<std::string>& args) {
    std::string err;
    auto w = Workload::Start(args, &err);
    EXPECT_TRUE(w) << err;
    if (w) sym_.load_process(w->pid());
    return w;
  }

  std::vector<sframe::Symbol> User(const sframe::Sample& s) {
    return sym_.symbolize_frames(s.pid, s.user);
  }
  // Reads a session started now on process pid for ms while ev samples,
  // and expects `chain` complete in 99 % of at least 100 samples.
  Collected CollectCompleteChains(pid_t pid, sframe::PerfEvent* ev,
                                  const std::vector<std::string>& chain, int ms) {
    sframe::Session s = sframe::Session::start(sframe::Target::kProcess, pid, SframeOnly());
    Collected c = Collect(&s, ev, ms);
    ChainCheck check;
    for (const sframe::Sample* smp : c.Samples()) CheckChain(*smp, User(*smp), chain, &check);
    EXPECT_TRUE(MostlyComplete(check, 0.99, 100));
    return c;
  }

  int paranoid_ = INT_MIN;
  sframe::Symbolizer sym_;
};

}  // namespace vmtest

// In a TEST_F of SessionTest (or of a fixture derived from it).
#define SKIP_WITHOUT_PERF()                                                                       \
  do {                                                                                            \
    if (SkipWithoutPerf()) {                                                                      \
      GTEST_SKIP() << "kernel.perf_event_paranoid is " << paranoid_ << ": uid " << geteuid()      \
                   << " may not use perf_event_open() nor sessions (SessionTest.ParanoidThree"    \
                      "RefusesUnprivilegedSessions checks that); the root run of session_vmtest " \
                      "covers unprivileged sessions in a child that drops to uid 65534";          \
    }                                                                                             \
  } while (0)

#endif  // SFRAME_VMTEST_SESSIONS_H
