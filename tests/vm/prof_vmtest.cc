// sframe-prof end to end in the VM: record a workload (a command it starts,
// a running pid, an interrupted recording) and report folded stacks and the
// top functions from the file; the errors a user gets.
//
// The workload is qsort_workload (no frame pointers, no .sframe): its hot
// function qw_compare is called from libc's qsort, so a complete stack,
// root first, is qsort_workload;...;main;qw_sort_round;<libc>...;qw_compare,
// which only SFrame made from .eh_frame (supplied by sframe-prof) unwinds.
// perf is allowed to root only in the VM (perf_event_paranoid 3): the user
// run checks the permission error instead.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "sessions.h"
#include "vmtest.h"

#ifndef SFRAME_PROF_TOOL_REL
#error "SFRAME_PROF_TOOL_REL (sframe-prof, relative to this program's directory) must be defined"
#endif

namespace {

// sframe-prof of this build tree, wherever the rig shows the tree.
std::string ProfTool() { return vmtest::BuildTreeFile(SFRAME_PROF_TOOL_REL); }

struct Result {
  int status = -1;  // exit code, or 128 + signal
  std::string output;
};

// Runs sframe-prof ARGS (a shell command line), stdout and stderr together.
Result Prof(const std::string& args) {
  Result r;
  const std::string cmd = ProfTool() + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) r.output.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

std::string Workload() { return vmtest::NextToSelf("qsort_workload"); }

bool CanProfile() { return geteuid() == 0 || sframe::perf_event_paranoid() <= 2; }

struct FoldedCheck {
  uint64_t samples = 0;
  uint64_t leaf = 0;      // samples whose leaf is qw_compare
  uint64_t complete = 0;  // ... with main;qw_sort_round below it
  std::string first_bad;
};

FoldedCheck CheckFolded(const std::string& folded) {
  FoldedCheck c;
  std::istringstream in(folded);
  for (std::string line; std::getline(in, line);) {
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    const uint64_t n = std::stoull(line.substr(sp + 1));
    const std::string stack = line.substr(0, sp);
    c.samples += n;
    if (stack.size() < 11 || stack.compare(stack.size() - 11, 11, ";qw_compare") != 0) continue;
    c.leaf += n;
    if (stack.rfind("qsort_workload;", 0) == 0 &&
        stack.find(";main;qw_sort_round;") != std::string::npos) {
      c.complete += n;
    } else if (c.first_bad.empty()) {
      c.first_bad = line;
    }
  }
  return c;
}

// CLOCK_MONOTONIC ns of the last "supplied SFrame ... at SEC.NSEC" that a
// recorder run with -v reported (anywhere in its output: stderr lines may
// land inside stdout's), or 0.
uint64_t LastSupplyNs(const std::string& output) {
  uint64_t last = 0;
  const std::string key = "supplied SFrame for ";
  for (size_t at = output.find(key); at != std::string::npos; at = output.find(key, at + 1)) {
    const size_t t = output.find(" at ", at);
    long sec = 0, nsec = 0;
    if (t != std::string::npos && std::sscanf(output.c_str() + t + 4, "%ld.%ld", &sec, &nsec) == 2)
      last = std::max<uint64_t>(last, uint64_t(sec) * 1000000000u + uint64_t(nsec));
  }
  return last;
}

// The data file without the samples taken before t_ns; *dropped counts them.
std::string SamplesFrom(const std::string& data, uint64_t t_ns, uint64_t* dropped) {
  std::istringstream in(data);
  std::string out, line;
  while (std::getline(in, line)) {
    unsigned long long t = 0;
    if (std::sscanf(line.c_str(), "sample %llu ", &t) == 1 && t < t_ns) {
      ++*dropped;
      continue;
    }
    out += line + "\n";
  }
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Samples the command takes before the SFrame of its libraries is supplied
// (some tens of ms after its exec under emulation) may stop early: they are
// counted as a property; of the samples after the last supply, 99 % must be
// complete.
TEST(ProfTest, RecordsACommandAndReportsFoldedStacksAndTop) {
  if (!CanProfile()) GTEST_SKIP() << "perf not allowed to this user (PermissionError covers it)";
  const Result rec = Prof("record -v -F 2000 -o prof.data -- " + Workload() + " 4");
  ASSERT_EQ(rec.status, 0) << rec.output;
  EXPECT_NE(rec.output.find("sframe-prof: "), std::string::npos) << rec.output;
  EXPECT_NE(rec.output.find(" samples, "), std::string::npos) << rec.output;
  const std::string data = ReadFile("prof.data");
  EXPECT_EQ(data.rfind("sframe-prof 1\n", 0), 0u);
  EXPECT_NE(data.find("\ncomm "), std::string::npos);
  EXPECT_NE(data.find("qsort_workload\n"), std::string::npos);  // its mmap line
  EXPECT_NE(data.find("libc.so.6\n"), std::string::npos);

  const Result all = Prof("report --folded -i prof.data");
  ASSERT_EQ(all.status, 0) << all.output;
  const FoldedCheck whole = CheckFolded(all.output);
  RecordProperty("complete_all", std::to_string(whole.complete) + "/" + std::to_string(whole.leaf));
  const uint64_t covered = LastSupplyNs(rec.output);
  ASSERT_GT(covered, 0u) << "no supply reported\n" << rec.output;
  uint64_t before = 0;
  {
    std::ofstream after("prof.after.data");
    after << SamplesFrom(data, covered, &before);
  }
  RecordProperty("samples_before_coverage", std::to_string(before));
  const Result folded = Prof("report --folded -i prof.after.data");
  ASSERT_EQ(folded.status, 0) << folded.output;
  const FoldedCheck c = CheckFolded(folded.output);
  RecordProperty("samples", std::to_string(c.samples));
  RecordProperty("complete", std::to_string(c.complete) + "/" + std::to_string(c.leaf));
  ASSERT_GE(c.leaf, 500u) << folded.output.substr(0, 4000);
  EXPECT_GE(c.complete * 100, c.leaf * 99)
      << c.complete << " of " << c.leaf << " complete; e.g. " << c.first_bad;

  const Result top = Prof("report --top 5 -i prof.data");
  ASSERT_EQ(top.status, 0) << top.output;
  // qw_compare is in the first two rows of the self table (libc's
  // msort_with_tmp, its caller, takes about as many samples), and the
  // total table has main at about 100 %.
  std::istringstream lines(top.output);
  std::string line, first_two;
  while (std::getline(lines, line) && line.find("FUNCTION") == std::string::npos) {
  }
  for (int i = 0; i < 2 && std::getline(lines, line); i++) first_two += line + "\n";
  EXPECT_NE(first_two.find("qw_compare"), std::string::npos) << top.output;
  const size_t main_at = top.output.find(" main\n");
  ASSERT_NE(main_at, std::string::npos) << top.output;
  const size_t row = top.output.rfind('\n', main_at) + 1;
  double self_pct = 0, self = 0, total_pct = 0;
  ASSERT_EQ(std::sscanf(top.output.c_str() + row, " %lf%% %lf %lf%%", &self_pct, &self, &total_pct),
            3)
      << top.output;
  EXPECT_GE(total_pct, 95.0) << top.output;

  const Result svg = Prof("report -i prof.data --svg prof.svg");
  ASSERT_EQ(svg.status, 0) << svg.output;
  EXPECT_NE(ReadFile("prof.svg").find("<svg"), std::string::npos);
}

TEST(ProfTest, RecordsARunningProcessUntilItExits) {
  if (!CanProfile()) GTEST_SKIP() << "perf not allowed to this user (PermissionError covers it)";
  std::string err;
  auto w = vmtest::Workload::Start({"3"}, &err, "qsort_workload");
  ASSERT_TRUE(w) << err;
  const Result rec = Prof("record -F 2000 -o pid.data -p " + std::to_string(w->pid()));
  ASSERT_EQ(rec.status, 0) << rec.output;
  // A zombie until reaped here (the recorder takes that for an exit); the
  // report works from the file's snapshots alone.
  EXPECT_EQ(w->Wait(), 0);
  const Result folded = Prof("report --folded -i pid.data");
  ASSERT_EQ(folded.status, 0) << folded.output;
  const FoldedCheck c = CheckFolded(folded.output);
  RecordProperty("complete", std::to_string(c.complete) + "/" + std::to_string(c.leaf));
  ASSERT_GE(c.leaf, 200u) << folded.output.substr(0, 4000);
  EXPECT_GE(c.complete * 100, c.leaf * 99)
      << c.complete << " of " << c.leaf << " complete; e.g. " << c.first_bad;
}

// Machine-wide (issue 13, section 2): `record -a` gives every process it
// samples SFrame made from .eh_frame, a process started after the recording
// began included.  qsort_workload (no .sframe, its hot path through the
// distribution's libc, which has none either) starts a second into the
// recording; of its samples in the callback taken after its coverage, 95 %
// must reach main (those before, while the recorder finds it and makes its
// SFrame, may stop early: their share is recorded).  Before machine-wide
// coverage, none did.
TEST(ProfTest, MachineWideCoversAProcessStartedDuringTheRecording) {
  if (geteuid() != 0) GTEST_SKIP() << "-a needs perf_event_paranoid <= 0: root only in the VM";
  unlink("all.data");
  const std::string tool = ProfTool();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "all.out", O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  const char* argv[] = {tool.c_str(), "record", "-a", "-v", "-F", "1000", "-o", "all.data",
                        nullptr};
  pid_t rec = -1;
  ASSERT_EQ(posix_spawn(&rec, tool.c_str(), &fa, nullptr, const_cast<char**>(argv), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  // Recording once the data file exists (made before the events start).
  struct stat st;
  for (int i = 0; i < 100 && ::stat("all.data", &st) != 0; i++) usleep(50000);
  usleep(1000000);
  std::string err;
  auto w = vmtest::Workload::Start({"3"}, &err, "qsort_workload");
  ASSERT_TRUE(w) << err;
  EXPECT_EQ(w->Wait(), 0);
  kill(rec, SIGINT);
  int status = 0;
  ASSERT_EQ(waitpid(rec, &status, 0), rec);
  const std::string out = ReadFile("all.out");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  // The summary: what was covered, what was not and why.
  EXPECT_NE(out.find("sframe-prof: covered "), std::string::npos) << out;
  const Result folded = Prof("report --folded -i all.data");
  ASSERT_EQ(folded.status, 0) << folded.output;
  const FoldedCheck c = CheckFolded(folded.output);
  RecordProperty("complete", std::to_string(c.complete) + "/" + std::to_string(c.leaf));
  std::printf("qsort_workload under -a: %llu of %llu samples in the callback reach main\n%s\n",
              static_cast<unsigned long long>(c.complete), static_cast<unsigned long long>(c.leaf),
              out.c_str());
  ASSERT_GE(c.leaf, 200u) << folded.output.substr(0, 4000);
  // Under emulation a generation takes up to a second, so how many samples
  // come before the workload's coverage varies (recorded above); after its
  // last supply, 95 % must be complete.
  const std::string key = ", pid " + std::to_string(w->pid()) + ",";
  std::string supplies;
  std::istringstream lines(out);
  for (std::string l; std::getline(lines, l);) {
    if (l.find(key) != std::string::npos) supplies += l + "\n";
  }
  const uint64_t covered = LastSupplyNs(supplies);
  ASSERT_NE(covered, 0u) << "the workload was never covered:\n" << out;
  uint64_t before = 0;
  {
    std::ofstream after("all-after.data");
    after << SamplesFrom(ReadFile("all.data"), covered, &before);
  }
  const Result after = Prof("report --folded -i all-after.data");
  ASSERT_EQ(after.status, 0) << after.output;
  const FoldedCheck a = CheckFolded(after.output);
  RecordProperty("complete_after_cover", std::to_string(a.complete) + "/" + std::to_string(a.leaf));
  std::printf("after its coverage: %llu of %llu\n", static_cast<unsigned long long>(a.complete),
              static_cast<unsigned long long>(a.leaf));
  ASSERT_GE(a.leaf, 100u) << after.output.substr(0, 4000);
  EXPECT_GE(a.complete * 100, a.leaf * 95)
      << a.complete << " of " << a.leaf << " complete; e.g. " << a.first_bad;
}

// SIGINT to the recorder (what Ctrl-C does, minus the terminal): the
// command gets it too, the file is complete, the exit status is the
// command's (130).
TEST(ProfTest, SigintEndsTheRecordingCleanly) {
  if (!CanProfile()) GTEST_SKIP() << "perf not allowed to this user (PermissionError covers it)";
  const std::string tool = ProfTool(), out = "int.data", wl = Workload();
  std::vector<std::string> args{tool, "record", "-v", "-F", "2000", "-o", out, "--", wl, "0"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, "int.log", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, tool.c_str(), &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  // Until samples are in the file (the writer flushes as its buffer fills).
  struct stat st {};
  for (uint64_t end = vmtest::NowMs() + 30000; vmtest::NowMs() < end;) {
    if (stat(out.c_str(), &st) == 0 && st.st_size > 64 * 1024) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GT(st.st_size, 64 * 1024) << ReadFile("int.log");
  ASSERT_EQ(kill(pid, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT) << ReadFile("int.log");
  const std::string log = ReadFile("int.log");
  EXPECT_NE(log.find(" samples, "), std::string::npos) << log;
  const std::string data = ReadFile(out);
  ASSERT_FALSE(data.empty());
  EXPECT_EQ(data.back(), '\n');
  ASSERT_EQ(Prof("report --folded -i " + out).status, 0) << "the file as the recorder left it";
  // The stacks, judged after the coverage as above.
  const uint64_t covered = LastSupplyNs(log);
  ASSERT_GT(covered, 0u) << log;
  uint64_t before = 0;
  {
    std::ofstream after("int.after.data");
    after << SamplesFrom(data, covered, &before);
  }
  const Result folded = Prof("report --folded -i int.after.data");
  ASSERT_EQ(folded.status, 0) << folded.output;
  const FoldedCheck c = CheckFolded(folded.output);
  EXPECT_GT(c.leaf, 0u) << folded.output.substr(0, 2000);
  EXPECT_GE(c.complete * 100, c.leaf * 99) << c.first_bad;
}

TEST(ProfTest, PermissionError) {
  if (CanProfile()) GTEST_SKIP() << "this user may profile (the root run)";
  const Result r = Prof("record -o perm.data -- " + Workload() + " 1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("(EACCES)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kernel.perf_event_paranoid is 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("sysctl kernel.perf_event_paranoid=2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("CAP_PERFMON"), std::string::npos) << r.output;
}

TEST(ProfTest, ModuleNotLoaded) {
  const Result r = Prof("record --device /dev/sframe_unwind_missing -o x.data -- /bin/true");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("(ENOENT)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("module is not loaded"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("sframe-unwind-dkms"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("make install"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("modprobe sframe_unwind"), std::string::npos) << r.output;
}

// A device without sessions (an older module answers ENOTTY; so does
// /dev/null).
TEST(ProfTest, KernelModuleWithoutSessions) {
  if (!CanProfile()) GTEST_SKIP() << "perf_event_open fails first for this user";
  const Result r = Prof("record --device /dev/null -o x.data -- /bin/true");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("(ENOTTY)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("older than this sframe-prof"), std::string::npos) << r.output;
}

TEST(ProfTest, TargetNotFound) {
  const Result r = Prof("record -o x.data -p 4000000");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("(ESRCH)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no such process"), std::string::npos) << r.output;
}

TEST(ProfTest, GarbledAndMissingDataFiles) {
  std::ofstream("bad.data") << "sframe-prof 1\nlost 3\nsample 12 x\n";
  Result r = Prof("report -i bad.data");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("bad.data:3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(EBADMSG)"), std::string::npos) << r.output;
  r = Prof("report -i missing.data");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("missing.data"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(ENOENT)"), std::string::npos) << r.output;
}

}  // namespace
