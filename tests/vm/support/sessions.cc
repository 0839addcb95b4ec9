#include "sessions.h"
#include "sframe_profile/symbolizer.h"

#include <grp.h>

#include <algorithm>
#include <chrono>
#include <fstream>

namespace vmtest {

using sframe::Record;
using sframe::Sample;
using sframe::Session;

uint64_t NowMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

std::vector<std::string> Names(const std::vector<sframe::Symbol>& syms) {
  std::vector<std::string> out;
  for (const sframe::Symbol& s : syms) {
    std::string base = s.object.substr(s.object.rfind('/') + 1);
    if (base.rfind("libc.so", 0) == 0) {
      out.push_back(kLibc);
    } else {
      out.push_back(s.found() ? s.function() : "?");
    }
  }
  return out;
}

std::string Describe(const Sample& s, const std::vector<sframe::Symbol>& user,
                     const sframe::KernelSymbolizer* k) {
  std::ostringstream o;
  o << "  sample pid " << s.pid << " tid " << s.tid << " cpu " << s.cpu << " cookie 0x" << std::hex
    << s.cookie << std::dec << " flags " << sframe::sample_flags_string(s.flags) << " user_stop "
    << sframe::to_string(s.user_stop) << ", " << s.kernel.size() << " kernel + " << s.user.size()
    << " user frames\n";
  for (uint64_t ip : s.kernel) {
    o << "    k 0x" << std::hex << ip << std::dec;
    if (k && k->usable()) o << " " << k->symbolize(ip).to_string();
    o << "\n";
  }
  for (const sframe::Symbol& u : user) {
    o << "    u 0x" << std::hex << u.address << std::dec << " " << u.to_string() << "\n";
  }
  return o.str();
}

void CheckChain(const Sample& s, const std::vector<sframe::Symbol>& syms,
                const std::vector<std::string>& chain, ChainCheck* c,
                const sframe::KernelSymbolizer* k) {
  std::vector<std::string> names = Names(syms);
  if (names.empty()) return;
  auto main_at = std::find(chain.begin(), chain.end(), "main");
  auto it = std::find(chain.begin(), main_at, names[0]);
  if (it == main_at) return;
  c->considered++;
  std::vector<std::string> want(it, chain.end());
  if (names == want && s.user_stop == sframe::StopReason::kNoCoverage) {
    c->complete++;
  } else if (c->bad.size() < 5) {
    std::string w;
    for (const std::string& n : want) w += " " + n;
    c->bad.push_back("  expected" + w + " (NO_COVERAGE)\n" + Describe(s, syms, k));
  }
}

::testing::AssertionResult MostlyComplete(const ChainCheck& c, double min_fraction,
                                          size_t min_considered) {
  if (c.considered >= min_considered && c.Fraction() >= min_fraction) {
    return ::testing::AssertionSuccess();
  }
  std::ostringstream o;
  o << c.complete << " of " << c.considered << " samples with the leaf in the chain are complete"
    << " (want >= " << min_fraction * 100 << "% of at least " << min_considered << ")\n";
  for (const std::string& b : c.bad) o << b;
  return ::testing::AssertionFailure() << o.str();
}

const std::vector<std::string> kSpinChain = {"wl_spin_leaf", "wl_spin_c", "wl_spin_b",
                                             "wl_spin_a",    "main",      kLibc};
const std::vector<std::string> kReadChain = {"wl_read_syscall", "wl_read_b", "wl_read_a", "main",
                                             kLibc};
const std::vector<std::string> kThreadChain = {"wl_spin_leaf", "wl_thread_leaf", "wl_thread_b",
                                               "wl_thread_main", kLibc};
const std::vector<std::string> kExecChain = {"wl_spin_leaf", "wl_exec_leaf", "wl_exec_a", "main",
                                             kLibc};

std::vector<Collected> Collect(std::vector<Session*> sessions, sframe::PerfEvent* ev, int ms,
                               const std::function<void()>& midway) {
  std::vector<Collected> out(sessions.size());
  std::vector<pollfd> pfds;
  auto pump = [&](int timeout) {
    pfds.clear();
    for (Session* s : sessions) pfds.push_back({s->fd(), POLLIN, 0});
    int n = poll(pfds.data(), pfds.size(), timeout);
    if (n <= 0) return false;
    bool any = false;
    for (size_t i = 0; i < sessions.size(); i++) {
      if (pfds[i].revents & POLLIN) any |= sessions[i]->read(&out[i].records) > 0;
    }
    return any;
  };
  ev->enable();
  const uint64_t start = NowMs(), end = start + static_cast<uint64_t>(ms);
  bool mid_done = !midway;
  for (uint64_t now = start; now < end; now = NowMs()) {
    pump(static_cast<int>(std::min<uint64_t>(50, end - now)));
    ev->drain();
    if (!mid_done && now >= start + static_cast<uint64_t>(ms) / 2) {
      midway();
      mid_done = true;
    }
  }
  ev->disable();
  ev->drain();
  // What is still in flight: until 300 ms pass without a record, and at
  // most kMaxDrainMs (a sample reaches the session within the module's
  // sample_max_wait_ms, 250 ms by default): records that keep coming after
  // the events are disabled end the wait, for the test's checks to see,
  // rather than hang it (a lifecycle test timed out once in CI on 6.12,
  // not reproduced).
  constexpr uint64_t kMaxDrainMs = 10000;
  const uint64_t drain_start = NowMs();
  for (uint64_t quiet_since = drain_start;
       NowMs() - quiet_since < 300 && NowMs() - drain_start < kMaxDrainMs;) {
    if (pump(100)) quiet_since = NowMs();
  }
  for (size_t i = 0; i < sessions.size(); i++) {
    out[i].stats = sessions[i]->stats();
    out[i].bytes = sessions[i]->bytes_read();
  }
  return out;
}

Collected Collect(Session* s, sframe::PerfEvent* ev, int ms, const std::function<void()>& midway) {
  return Collect(std::vector<Session*>{s}, ev, ms, midway).front();
}

// ---- plumbing for forked helpers -------------------------------------------------------

Pipe::Pipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) == 0) {
    r.reset(fds[0]);
    w.reset(fds[1]);
  }
}

void WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

int WaitStatus(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

uint64_t TracepointId(const std::string& name) {
  for (const char* root : {"/sys/kernel/tracing/events/", "/sys/kernel/debug/tracing/events/"}) {
    std::ifstream f(root + name + "/id");
    uint64_t id = 0;
    if (f >> id) return id;
  }
  return 0;
}

// ---- privileges -------------------------------------------------------------------------

namespace {
bool WriteParanoid(int v) {
  std::ofstream f("/proc/sys/kernel/perf_event_paranoid");
  f << v << "\n";
  f.flush();
  return static_cast<bool>(f) && sframe::perf_event_paranoid() == v;
}
}  // namespace

ParanoidGuard::ParanoidGuard(int value) : old_(sframe::perf_event_paranoid()) {
  ok_ = WriteParanoid(value);
}

ParanoidGuard::~ParanoidGuard() {
  if (ok_ && old_ != INT_MIN) WriteParanoid(old_);
}

std::string RunAsUser(uint32_t uid, int paranoid, const std::function<std::string()>& fn) {
  ParanoidGuard guard(paranoid);
  if (!guard.ok()) return "cannot set perf_event_paranoid to " + std::to_string(paranoid);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return "pipe failed";
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    close(fds[0]);
    std::string msg;
    if (setgroups(0, nullptr) != 0 || setresgid(uid, uid, uid) != 0 ||
        setresuid(uid, uid, uid) != 0) {
      msg = std::string("dropping privileges: ") + std::strerror(errno);
    } else {
      try {
        msg = fn();
      } catch (const std::exception& e) {
        msg = std::string("exception: ") + e.what();
      }
    }
    if (msg.empty()) msg = "OK";
    ssize_t unused = write(fds[1], msg.data(), msg.size());
    (void)unused;
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    msg.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (msg.empty()) return "the child died without a verdict (status " + std::to_string(st) + ")";
  return msg == "OK" ? "" : msg;
}

}  // namespace vmtest
