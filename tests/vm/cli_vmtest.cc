// sframe-prof's perf-shaped command line in the VM (issue 13, items 1 and
// 7): -a, -p PID,PID, -t, -C, -c, -e, --call-graph, --duration, -F above
// the kernel's maximum, and a process of 101 threads under `ulimit -n 128`
// (sampling events without a ring, side-band rings per CPU shared with
// PERF_EVENT_IOC_SET_OUTPUT, the descriptors checked up front).
//
// The target is cli_workload (no frame pointers, no .sframe): worker 0
// spins in cli_outer_a > cli_middle_a > cli_leaf_a, the others in the _b
// chain (or sleep).  Copies under other names (symbolic links: a process's
// name is the one it was exec'd by) tell processes apart in the folded
// stacks, whose root is the process name.  Recordings whose stacks do not
// matter use --call-graph fp: no SFrame is made, which keeps them short.
// perf is allowed to root only in the VM (perf_event_paranoid 3).
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "prof_tool.h"
#include "sessions.h"
#include "vmtest.h"

namespace {

using Result = vmtest::ShellResult;
using vmtest::Prof;
using vmtest::ProfTool;

bool IsRoot() { return geteuid() == 0; }

// cli_workload under another name, in the working directory.
std::string Named(const std::string& name) {
  const std::string path = "./" + name;
  unlink(path.c_str());
  if (symlink(vmtest::NextToSelf("cli_workload").c_str(), path.c_str()) != 0) return "";
  return path;
}

std::unique_ptr<vmtest::Workload> Start(const std::string& name, std::vector<std::string> args,
                                        std::string* err) {
  const std::string path = Named(name);
  if (path.empty()) {
    *err = "symlink " + name + ": " + std::strerror(errno);
    return nullptr;
  }
  return vmtest::Workload::Start(args, err, path);
}

// Worker i's thread id ("tid I TID" lines).
pid_t WorkerTid(const vmtest::Workload& w, int i) {
  for (const std::string& l : w.Lines("tid")) {
    int index = -1, tid = 0;
    if (std::sscanf(l.c_str(), "%d %d", &index, &tid) == 2 && index == i) return tid;
  }
  return -1;
}

// report --folded of a file: samples per stack.
struct Folded {
  std::map<std::string, uint64_t> stacks;
  uint64_t total = 0;
  // Samples whose root (the process name) is name.
  uint64_t OfProcess(const std::string& name) const {
    uint64_t n = 0;
    for (const auto& [stack, count] : stacks) {
      if (stack.rfind(name + ";", 0) == 0 || stack == name) n += count;
    }
    return n;
  }
  // Samples whose stack contains text.
  uint64_t With(const std::string& text) const {
    uint64_t n = 0;
    for (const auto& [stack, count] : stacks) {
      if (stack.find(text) != std::string::npos) n += count;
    }
    return n;
  }
  std::set<std::string> Roots() const {
    std::set<std::string> out;
    for (const auto& kv : stacks) out.insert(kv.first.substr(0, kv.first.find(';')));
    return out;
  }
};

Folded Report(const std::string& file, std::string* text = nullptr) {
  Folded f;
  const Result r = Prof("report --folded -i " + file);
  if (text) *text = r.output;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    const uint64_t n = std::stoull(line.substr(sp + 1));
    f.stacks[line.substr(0, sp)] += n;
    f.total += n;
  }
  return f;
}

std::string Join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += x + " ";
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int OnlineCpus() { return static_cast<int>(sframe::online_cpus().size()); }

// -a with a command: every task for as long as the command runs.
TEST(CliTest, AllCpusForAsLongAsACommandRuns) {
  if (!IsRoot()) GTEST_SKIP() << "-a needs perf_event_paranoid <= 0 or root";
  std::string err;
  auto a = Start("busy_a", {"0", "1"}, &err);
  ASSERT_TRUE(a) << err;
  auto b = Start("busy_b", {"0", "1"}, &err);
  ASSERT_TRUE(b) << err;
  const Result rec = Prof("record -a --call-graph fp -o all.data -- sleep 0.5");
  ASSERT_EQ(rec.status, 0) << rec.output;
  const Folded f = Report("all.data");
  RecordProperty("processes", Join(f.Roots()));
  EXPECT_GT(f.OfProcess("busy_a"), 0u) << Join(f.Roots());
  EXPECT_GT(f.OfProcess("busy_b"), 0u) << Join(f.Roots());
  EXPECT_GE(f.Roots().size(), 2u);
}

// -p A,B: both processes' samples, and nobody else's (busy_c runs too).
TEST(CliTest, PidListSamplesThoseProcessesOnly) {
  if (!IsRoot()) GTEST_SKIP() << "perf not allowed to this user";
  std::string err;
  auto a = Start("busy_a", {"0", "1"}, &err);
  ASSERT_TRUE(a) << err;
  auto b = Start("busy_b", {"0", "1"}, &err);
  ASSERT_TRUE(b) << err;
  auto c = Start("busy_c", {"0", "1"}, &err);
  ASSERT_TRUE(c) << err;
  const Result rec = Prof("record --call-graph fp -o pids.data -p " + std::to_string(a->pid()) +
                          "," + std::to_string(b->pid()) + " -- sleep 0.5");
  ASSERT_EQ(rec.status, 0) << rec.output;
  const Folded f = Report("pids.data");
  RecordProperty("processes", Join(f.Roots()));
  EXPECT_GT(f.OfProcess("busy_a"), 0u) << Join(f.Roots());
  EXPECT_GT(f.OfProcess("busy_b"), 0u) << Join(f.Roots());
  EXPECT_EQ(f.OfProcess("busy_a") + f.OfProcess("busy_b"), f.total) << Join(f.Roots());
  // The targets still run: the command (sleep 0.5) timed the recording.
  EXPECT_EQ(kill(a->pid(), 0), 0);
}

// -t TID: worker 0 spins in the _a chain, worker 1 in the _b chain; the
// recording takes the one thread, for --duration, and leaves the process
// running.  The stacks (SFrame made from .eh_frame, supplied before the
// events are enabled) are complete down to the thread's start.
TEST(CliTest, ThreadOnlyForADuration) {
  if (!IsRoot()) GTEST_SKIP() << "perf not allowed to this user";
  std::string err;
  auto w = Start("cli_threads", {"0", "2"}, &err);
  ASSERT_TRUE(w) << err;
  const pid_t tid0 = WorkerTid(*w, 0);
  ASSERT_GT(tid0, 0) << w->output();
  const Result rec =
      Prof("record -o tid.data --duration 1 -t " + std::to_string(tid0));
  ASSERT_EQ(rec.status, 0) << rec.output;
  EXPECT_EQ(kill(w->pid(), 0), 0) << "--duration ended the recording, not the target";
  std::string text;
  const Folded f = Report("tid.data", &text);
  EXPECT_GT(f.With(";cli_leaf_a"), 0u) << text.substr(0, 2000);
  EXPECT_EQ(f.With("cli_leaf_b"), 0u) << text.substr(0, 2000);
  EXPECT_EQ(f.With("cli_middle_b"), 0u);
}

// -C 0 without -p/-t: every task on CPU 0 only (as perf), here busy_a
// pinned to CPU 0 and not busy_b pinned to CPU 1.
TEST(CliTest, CpuListOnlyThoseCpus) {
  if (!IsRoot()) GTEST_SKIP() << "-C without -p needs perf_event_paranoid <= 0 or root";
  if (OnlineCpus() < 2) GTEST_SKIP() << "one CPU online";
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  // Spawned processes inherit the affinity.
  auto pinned = [&](const std::string& name, int cpu, std::string* err) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    sched_setaffinity(0, sizeof(one), &one);
    auto w = Start(name, {"0", "1"}, err);
    sched_setaffinity(0, sizeof(saved), &saved);
    return w;
  };
  std::string err;
  auto a = pinned("busy_a", 0, &err);
  ASSERT_TRUE(a) << err;
  auto b = pinned("busy_b", 1, &err);
  ASSERT_TRUE(b) << err;
  const Result rec = Prof("record -C 0 --call-graph fp -o cpu.data -- sleep 0.5");
  ASSERT_EQ(rec.status, 0) << rec.output;
  const Folded f = Report("cpu.data");
  RecordProperty("processes", Join(f.Roots()));
  EXPECT_GT(f.OfProcess("busy_a"), 0u) << Join(f.Roots());
  EXPECT_EQ(f.OfProcess("busy_b"), 0u) << Join(f.Roots());
  // A CPU that is not online is refused by name.
  const Result off = Prof("record -C 4000 -o off.data -- true");
  EXPECT_EQ(off.status, 1) << off.output;
  EXPECT_NE(off.output.find("cpu 4000 is not online"), std::string::npos) << off.output;
}

// -c: a sample every 10 ms of CPU time, so about the command's CPU time
// (which it prints) over 10 ms; -F 1000 would take ten times as many.
TEST(CliTest, CountSetsThePeriod) {
  if (!IsRoot()) GTEST_SKIP() << "perf not allowed to this user";
  const Result rec = Prof("record -c 10000000 --call-graph fp -o count.data -- " +
                          vmtest::NextToSelf("cli_workload") + " 1 1");
  ASSERT_EQ(rec.status, 0) << rec.output;
  unsigned long long cpu_ns = 0;
  const size_t at = rec.output.find("cpu_ns ");
  ASSERT_NE(at, std::string::npos) << rec.output;
  ASSERT_EQ(std::sscanf(rec.output.c_str() + at, "cpu_ns %llu", &cpu_ns), 1);
  const Folded f = Report("count.data");
  const double expected = double(cpu_ns) / 1e7;
  RecordProperty("samples", std::to_string(f.total) + " for " + std::to_string(cpu_ns) + " ns");
  ASSERT_GE(expected, 20.0) << "the workload got too little CPU to judge";
  EXPECT_GE(double(f.total), expected * 0.5);
  EXPECT_LE(double(f.total), expected * 1.5 + 2);
}

// -e task-clock samples; -e cycles needs a PMU: under qemu's TCG there is
// none, and the error says so.
TEST(CliTest, Events) {
  if (!IsRoot()) GTEST_SKIP() << "perf not allowed to this user";
  std::string err;
  auto w = Start("busy_a", {"0", "1"}, &err);
  ASSERT_TRUE(w) << err;
  const std::string pid = std::to_string(w->pid());
  const Result task =
      Prof("record -e task-clock --call-graph fp --duration 0.5 -o task.data -p " + pid);
  ASSERT_EQ(task.status, 0) << task.output;
  EXPECT_GT(Report("task.data").OfProcess("busy_a"), 0u);

  const Result cycles =
      Prof("record -e cycles --call-graph fp --duration 0.5 -o cycles.data -p " + pid);
  if (cycles.status == 0) {
    RecordProperty("cycles", "a PMU: sampled");
    EXPECT_GT(Report("cycles.data").OfProcess("busy_a"), 0u) << cycles.output;
  } else {
    RecordProperty("cycles", "no PMU");
    EXPECT_EQ(cycles.status, 1) << cycles.output;
    EXPECT_NE(cycles.output.find("perf_event_open cycles of pid " + pid), std::string::npos)
        << cycles.output;
    EXPECT_NE(cycles.output.find("the cycles event is not supported here"), std::string::npos)
        << cycles.output;
  }
  const Result bad = Prof("record -e instructions -p " + pid);
  EXPECT_EQ(bad.status, 129) << bad.output;
  EXPECT_NE(bad.output.find("event `instructions' is not supported"), std::string::npos);
}

// The same thread (no frame pointers) recorded with --call-graph sframe
// and fp: SFrame (made from .eh_frame) unwinds its chain to the thread's
// start, frame pointers do not.
TEST(CliTest, CallGraphSframeAgainstFp) {
  if (!IsRoot()) GTEST_SKIP() << "perf not allowed to this user";
  std::string err;
  auto w = Start("cli_chain", {"0", "1"}, &err);
  ASSERT_TRUE(w) << err;
  const std::string pid = std::to_string(w->pid());
  const std::string chain = ";start_thread;";
  const std::string tail = ";cli_outer_a;cli_middle_a;cli_leaf_a";
  // Kernel frames (an interrupt in the leaf) follow the user leaf: the
  // user part is what is judged.
  auto user_part = [](std::string stack) {
    for (size_t semi; (semi = stack.rfind(';')) != std::string::npos &&
                      stack.size() > 4 && stack.compare(stack.size() - 4, 4, "_[k]") == 0;) {
      stack.resize(semi);
    }
    return stack;
  };
  auto complete = [&](const Folded& f) {
    uint64_t n = 0;
    for (const auto& [whole, count] : f.stacks) {
      const std::string stack = user_part(whole);
      if (stack.find(chain) != std::string::npos && stack.size() > tail.size() &&
          stack.compare(stack.size() - tail.size(), tail.size(), tail) == 0) {
        n += count;
      }
    }
    return n;
  };
  const Result s = Prof("record --call-graph sframe --duration 1 -o sf.data -p " + pid);
  ASSERT_EQ(s.status, 0) << s.output;
  std::string stext, ftext;
  const Folded sf = Report("sf.data", &stext);
  const Result p = Prof("record --call-graph fp --duration 1 -o fp.data -p " + pid);
  ASSERT_EQ(p.status, 0) << p.output;
  const Folded fp = Report("fp.data", &ftext);
  const uint64_t sf_leaf = sf.With(";cli_leaf_a"), fp_leaf = fp.With(";cli_leaf_a");
  RecordProperty("sframe_complete", std::to_string(complete(sf)) + "/" + std::to_string(sf_leaf));
  RecordProperty("fp_complete", std::to_string(complete(fp)) + "/" + std::to_string(fp_leaf));
  ASSERT_GE(sf_leaf, 50u) << stext.substr(0, 2000);
  ASSERT_GE(fp_leaf, 50u) << ftext.substr(0, 2000);
  EXPECT_GE(complete(sf) * 100, sf_leaf * 95) << stext.substr(0, 3000);
  EXPECT_LE(complete(fp) * 100, fp_leaf * 5) << ftext.substr(0, 3000);
}

// -F above kernel.perf_event_max_sample_rate: perf's warning and a
// recording at the maximum; with --strict-freq, perf's error and exit 1.
TEST(CliTest, FrequencyAboveTheKernelsMaximum) {
  std::ifstream in("/proc/sys/kernel/perf_event_max_sample_rate");
  unsigned long long max = 0;
  ASSERT_TRUE(in >> max);
  const std::string high = std::to_string(max * 2);
  const Result strict =
      Prof("record --strict-freq -F " + high + " -o strict.data -- true");
  EXPECT_EQ(strict.status, 1) << strict.output;
  EXPECT_NE(strict.output.find("error: Maximum frequency rate (" + std::to_string(max) +
                               " Hz) exceeded.\n       Please use -F freq option with a lower "
                               "value or consider\n       tweaking "
                               "/proc/sys/kernel/perf_event_max_sample_rate."),
            std::string::npos)
      << strict.output;
  struct stat st;
  EXPECT_NE(stat("strict.data", &st), 0) << "no file written";
  if (!IsRoot()) return;
  const Result throttled = Prof("record -F " + high + " --call-graph fp -o throttled.data -- " +
                                vmtest::NextToSelf("cli_workload") + " 0.5 1");
  ASSERT_EQ(throttled.status, 0) << throttled.output;
  EXPECT_NE(throttled.output.find("throttling from " + high + " Hz to " + std::to_string(max) +
                                  " Hz"),
            std::string::npos)
      << throttled.output;
  EXPECT_GT(Report("throttled.data").total, 0u);
}

// Runs argv with RLIMIT_NOFILE at `limit` (soft and hard, as `ulimit -n`),
// without CAP_SYS_RESOURCE when drop_resource (setpriv), stdout and
// stderr to log; returns its pid.
pid_t SpawnLimited(std::vector<std::string> argv, rlim_t limit, bool drop_resource,
                   const std::string& log) {
  if (drop_resource) {
    argv.insert(argv.begin(), {"setpriv", "--inh-caps=-sys_resource",
                               "--bounding-set=-sys_resource", "--"});
  }
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const rlimit l{limit, limit};
  if (setrlimit(RLIMIT_NOFILE, &l) != 0) _exit(125);
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) _exit(125);
  dup2(fd, 1);
  dup2(fd, 2);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  execvp(args[0], args.data());
  _exit(127);
}

int WaitStatus(pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Item 7: a process of 101 threads (100 workers, 99 of them asleep) under
// `ulimit -n 128`.  Root: the recorder raises the limit to what it needs
// (as perf does) and records: one sampling event per thread, without a
// ring (the session takes the samples), and side-band events per thread
// and CPU whose rings are one per CPU, not one per thread and CPU
// (PERF_EVENT_IOC_SET_OUTPUT).  Without the right to raise it (the user
// run, or root without CAP_SYS_RESOURCE), it says what it needs before it
// touches the data file.
TEST(CliTest, ManyThreadsUnderUlimit128) {
  std::string err;
  auto w = Start("cli_many", {"0", "100", "idle"}, &err);
  ASSERT_TRUE(w) << err;
  const std::string pid = std::to_string(w->pid());
  const int ncpu = OnlineCpus();
  const size_t need = 101 + 101 * size_t(ncpu) + 64;

  {
    std::ofstream old("limited.data");
    old << "previous\n";
  }
  const pid_t refused = SpawnLimited({ProfTool(), "record", "-o", "limited.data", "-p", pid},
                                     128, /*drop_resource=*/IsRoot(), "limited.log");
  EXPECT_EQ(WaitStatus(refused), 1);
  const std::string log = ReadFile("limited.log");
  EXPECT_NE(log.find("record pid " + pid + " (101 threads) on " + std::to_string(ncpu) +
                     (ncpu == 1 ? " CPU" : " CPUs") + ": needs " + std::to_string(need) +
                     " file descriptors"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("RLIMIT_NOFILE is 128 (hard limit 128)"), std::string::npos) << log;
  EXPECT_NE(log.find("`ulimit -n " + std::to_string(need) + "`"), std::string::npos) << log;
  EXPECT_EQ(ReadFile("limited.data"), "previous\n") << "the previous file is left alone";

  if (!IsRoot()) return;
  const pid_t rec = SpawnLimited({ProfTool(), "record", "-v", "--call-graph", "fp", "--duration",
                                  "3", "-o", "many.data", "-p", pid},
                                 128, false, "many.log");
  // Its perf rings (mappings of /proc/PID/maps), the most seen while it
  // runs: the events are opened at its start, the recording lasts 3 s.
  int rings = 0, status = -1;
  for (;;) {
    std::ifstream maps("/proc/" + std::to_string(rec) + "/maps");
    int n = 0;
    for (std::string line; std::getline(maps, line);) {
      if (line.find("[perf_event]") != std::string::npos) n++;
    }
    rings = std::max(rings, n);
    int st = 0;
    const pid_t done = waitpid(rec, &st, WNOHANG);
    if (done == rec) {
      status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      break;
    }
    if (done < 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(status, 0) << ReadFile("many.log");
  const std::string mlog = ReadFile("many.log");
  EXPECT_NE(mlog.find("raised RLIMIT_NOFILE from 128 to " + std::to_string(need)),
            std::string::npos)
      << mlog;
  RecordProperty("perf_rings", std::to_string(rings));
  EXPECT_EQ(rings, ncpu) << "no ring for the samples, one per CPU for the side-band";
  EXPECT_GT(Report("many.data").With(";cli_leaf_a"), 0u) << mlog;
}

}  // namespace
