// sframe-prof end to end in the VM: record a workload (a command it starts,
// a running pid, an interrupted recording) and report folded stacks and the
// top functions from the file; the errors a user gets; the data file's care
// (mode 0600, the previous file kept as .old, untouched by a failed
// record) and its build ids (a library replaced after the recording is not
// symbolized with the new file).
//
// The workload is qsort_workload (no frame pointers, no .sframe): its hot
// function qw_compare is called from libc's qsort, so a complete stack,
// root first, is qsort_workload;...;main;qw_sort_round;<libc>...;qw_compare,
// which only SFrame made from .eh_frame (supplied by sframe-prof) unwinds.
// perf is allowed to root only in the VM (perf_event_paranoid 3): the user
// run checks the permission error instead.
#include <fcntl.h>
#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "sessions.h"
#include "sframe_object/object_file.h"
#include "sframe_profile/profile.h"
#include "sframe_test/profile_contents.h"
#include "prof_tool.h"
#include "vmtest.h"

#ifndef SFRAME_DEMO_REL
#error "SFRAME_DEMO_REL (examples/demo_workload, relative to this program's directory) must be defined"
#endif

namespace {

using Result = vmtest::ShellResult;
using vmtest::CanProfile;
using vmtest::Prof;
using vmtest::ProfTool;

std::string Workload() { return vmtest::NextToSelf("qsort_workload"); }

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

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using Contents = sframe::ProfileContents;

// Copies data to out without the samples taken before t_ns (mappings and
// names kept in their place); *dropped counts them.
void SamplesFrom(const std::string& data, const std::string& out, uint64_t t_ns,
                 uint64_t* dropped) {
  struct Filter : sframe::ProfileHandler {
    sframe::ProfileWriter* w;
    uint64_t t_ns;
    uint64_t* dropped;
    void on_meta(const std::string& k, const std::string& v) override { w->meta(k, v); }
    void on_mapping(const sframe::ProfileMapping& m) override { w->mapping(m); }
    void on_comm(pid_t p, const std::string& n) override { w->comm(p, n); }
    void on_sample(const sframe::Sample& s) override {
      if (s.time < t_ns) {
        ++*dropped;
      } else {
        w->sample(s);
      }
    }
    void on_lost(uint64_t n) override { w->lost(n); }
  } filter;
  sframe::ProfileWriter w(out);
  filter.w = &w;
  filter.t_ns = t_ns;
  filter.dropped = dropped;
  sframe::read_profile(data, &filter);
  w.close();
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
  // Format 2, mode 0600; a name, and the program's and libc's mappings
  // with the build ids of those files.
  EXPECT_EQ(ReadFile("prof.data").substr(0, 12), std::string("\x89SFPROF\n\x02\0\0\0", 12));
  struct stat sb {};
  ASSERT_EQ(stat("prof.data", &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0600u);
  Contents contents;
  sframe::read_profile("prof.data", &contents);
  EXPECT_FALSE(contents.comms.empty());
  bool program = false, libc = false;
  for (const sframe::ProfileMapping& m : contents.maps) {
    const bool is_program = m.path == Workload();
    const bool is_libc = m.path.find("/libc.so.6") != std::string::npos;
    if (!is_program && !is_libc) continue;
    program |= is_program;
    libc |= is_libc;
    EXPECT_EQ(m.build_id, sframe::read_build_id(m.path)) << m.path;
    EXPECT_EQ(m.build_id.size(), 40u) << m.path;
  }
  EXPECT_TRUE(program) << Workload();
  EXPECT_TRUE(libc);
  const std::string data = "prof.data";

  const Result all = Prof("report --folded -i prof.data");
  ASSERT_EQ(all.status, 0) << all.output;
  const FoldedCheck whole = CheckFolded(all.output);
  RecordProperty("complete_all", std::to_string(whole.complete) + "/" + std::to_string(whole.leaf));
  const uint64_t covered = LastSupplyNs(rec.output);
  ASSERT_GT(covered, 0u) << "no supply reported\n" << rec.output;
  uint64_t before = 0;
  SamplesFrom(data, "prof.after.data", covered, &before);
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
  SamplesFrom("all.data", "all-after.data", covered, &before);
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

// The size of the O_TMPFILE file pid writes ("/DIR/#INODE (deleted)" in
// /proc/PID/fd), or 0.
uint64_t TemporaryFileSize(pid_t pid) {
  const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(fds.c_str());
  if (!d) return 0;
  uint64_t size = 0;
  while (dirent* e = readdir(d)) {
    char target[4096];
    const std::string fd = fds + "/" + e->d_name;
    const ssize_t n = readlink(fd.c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    const std::string t(target, size_t(n));
    struct stat st {};
    if (t.find("/#") != std::string::npos && t.find(" (deleted)") != std::string::npos &&
        stat(fd.c_str(), &st) == 0) {
      size = std::max<uint64_t>(size, uint64_t(st.st_size));
    }
  }
  closedir(d);
  return size;
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
  // Until samples are in the file (the writer flushes as its buffer fills):
  // the recorder's unnamed temporary file, until it ends.
  uint64_t written = 0;
  for (uint64_t end = vmtest::NowMs() + 30000; vmtest::NowMs() < end && written <= 16 * 1024;) {
    written = TemporaryFileSize(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GT(written, 16u * 1024) << ReadFile("int.log");
  struct stat st {};
  EXPECT_NE(stat(out.c_str(), &st), 0) << "the data file is there before the recording ends";
  ASSERT_EQ(kill(pid, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT) << ReadFile("int.log");
  const std::string log = ReadFile("int.log");
  EXPECT_NE(log.find(" samples, "), std::string::npos) << log;
  Contents contents;
  sframe::read_profile(out, &contents);  // complete: it has its end record
  EXPECT_FALSE(contents.samples.empty());
  ASSERT_EQ(Prof("report --folded -i " + out).status, 0) << "the file as the recorder left it";
  // The stacks, judged after the coverage as above.
  const uint64_t covered = LastSupplyNs(log);
  ASSERT_GT(covered, 0u) << log;
  uint64_t before = 0;
  SamplesFrom(out, "int.after.data", covered, &before);
  const Result folded = Prof("report --folded -i int.after.data");
  ASSERT_EQ(folded.status, 0) << folded.output;
  const FoldedCheck c = CheckFolded(folded.output);
  EXPECT_GT(c.leaf, 0u) << folded.output.substr(0, 2000);
  EXPECT_GE(c.complete * 100, c.leaf * 99) << c.first_bad;
}

// Issue 29: a recording opens each file it reads once (userlib/object's
// ObjectTable): coverage, the mapping tracker and the build ids all take
// the one opened object.  Traced with strace: the recorder's successful
// openat() calls from its first open of the device on (the loader's opens
// of sframe-prof's own libraries come before), by every thread of it but
// not by the recorded program (the tasks that exec'd it).
TEST(ProfTest, EachFileIsOpenedOncePerRecording) {
  if (!CanProfile()) GTEST_SKIP() << "this user may not profile (the root run covers it)";
  ASSERT_EQ(vmtest::RunShell("command -v strace").status, 0)
      << "no strace in this guest (scripts/install-deps.sh and tests/vm/images/*.conf list it)";
  const Result rec = vmtest::RunShell("strace -f -y -qq -e trace=openat,execve -e status=successful "
                              "-o libs30.strace " + ProfTool() + " record -o libs30.data -- " +
                              vmtest::NextToSelf("libs30_workload") + " 300000");
  ASSERT_EQ(rec.status, 0) << rec.output;

  // "PID syscall(...) = FD</path>" lines.
  std::ifstream in("libs30.strace");
  std::vector<std::pair<long, std::string>> lines;
  for (std::string line; std::getline(in, line);) {
    const size_t sp = line.find(' ');
    if (sp == std::string::npos) continue;
    lines.emplace_back(std::atol(line.c_str()), line.substr(sp + 1));
  }
  ASSERT_FALSE(lines.empty());
  // The first execve is strace's of sframe-prof; a task that execs after it
  // is the recorded program.
  std::set<long> program;
  bool first_exec = true;
  for (const auto& [pid, call] : lines) {
    if (call.find("execve(") == std::string::npos) continue;
    if (!first_exec) program.insert(pid);
    first_exec = false;
  }
  std::map<std::string, int> opened;
  bool device_seen = false;
  for (const auto& [pid, call] : lines) {
    // A call another thread interrupted ends on a "<... openat resumed>" line.
    if (program.count(pid) || (call.find("openat(") == std::string::npos &&
                               call.find("<... openat resumed>") == std::string::npos)) {
      continue;
    }
    const size_t lt = call.rfind("</"), end = call.rfind('>');
    if (lt == std::string::npos || end == std::string::npos || end < lt) continue;
    const std::string path = call.substr(lt + 1, end - lt - 1);
    if (path.find("sframe_unwind") != std::string::npos) device_seen = true;
    if (!device_seen) continue;
    if (path.rfind("/proc/", 0) == 0 || path.rfind("/dev/", 0) == 0 ||
        path.rfind("/sys/", 0) == 0) {
      continue;
    }
    opened[path]++;
  }
  ASSERT_TRUE(device_seen) << "the recorder never opened /dev/sframe_unwind";
  int libs = 0;
  std::string twice, all;
  for (const auto& [path, n] : opened) {
    all += "  " + std::to_string(n) + " " + path + "\n";
    if (n > 1) twice += "  " + std::to_string(n) + " " + path + "\n";
    if (path.find("/libs30/liblibs30_l") != std::string::npos) libs++;
  }
  EXPECT_EQ(libs, 30) << "the recorder opened " << libs
                      << " of the program's 30 libraries; it opened:\n" << all;
  EXPECT_TRUE(twice.empty()) << "opened more than once in one recording:\n" << twice;
  RecordProperty("files_opened", static_cast<int>(opened.size()));
  std::printf("the recorder opened %zu files after the device, each once:\n%s", opened.size(),
              all.c_str());
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
  // A file of this version cut short: the offset where it ends.
  {
    sframe::ProfileWriter w("whole.data");
    w.comm(1, "x");
    w.close();
  }
  const std::string whole = ReadFile("whole.data");
  std::ofstream("cut.data", std::ios::binary) << whole.substr(0, whole.size() - 1);
  r = Prof("report -i cut.data");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("cut.data at offset " + std::to_string(whole.size() - 1) +
                          ": truncated"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("(EBADMSG)"), std::string::npos) << r.output;
  r = Prof("report -i missing.data");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("missing.data"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(ENOENT)"), std::string::npos) << r.output;
}

std::vector<std::string> DirEntries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// A directory of its own under the working directory, emptied.
std::string FreshDir(const std::string& name) {
  for (const std::string& e : DirEntries(name)) unlink((name + "/" + e).c_str());
  mkdir(name.c_str(), 0755);
  return name;
}

// perf's habits: the data file is 0600 whatever the umask, the previous one
// is kept as FILE.old; a record that fails, early (no device, no such pid)
// or once the file is begun (a device without sessions), leaves the
// previous file as it was and nothing else behind.
TEST(ProfTest, ThePreviousFileIsKeptAndAFailedRecordLeavesIt) {
  const std::string dir = FreshDir("keep");
  const std::string data = dir + "/f.data";
  std::ofstream(data) << "previous";
  Result r = Prof("record --device /dev/sframe_unwind_missing -o " + data + " -- /bin/true");
  EXPECT_EQ(r.status, 1) << r.output;
  r = Prof("record -o " + data + " -p 4000000");
  EXPECT_EQ(r.status, 1) << r.output;
  if (CanProfile()) {
    r = Prof("record --device /dev/null -o " + data + " -- /bin/true");
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("(ENOTTY)"), std::string::npos) << r.output;
  }
  EXPECT_EQ(ReadFile(data), "previous");
  EXPECT_EQ(DirEntries(dir), std::vector<std::string>{"f.data"});
  if (!CanProfile()) return;  // the rest records

  r = Prof("record -F 1000 -o " + data + " -- " + Workload() + " 1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(DirEntries(dir), (std::vector<std::string>{"f.data", "f.data.old"}));
  EXPECT_EQ(ReadFile(data + ".old"), "previous");
  struct stat sb {};
  ASSERT_EQ(stat(data.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0600u);
  const std::string first = ReadFile(data);
  r = Prof("record -F 1000 -o " + data + " -- /bin/true");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(ReadFile(data + ".old"), first);
  EXPECT_EQ(DirEntries(dir), (std::vector<std::string>{"f.data", "f.data.old"}));
  EXPECT_EQ(Prof("report --folded -i " + data).status, 0);
}

// The demo (its library libdemo.so beside it, found through $ORIGIN) copied
// to a directory of the test's, recorded, then its library replaced by
// another build: report warns once, and names the library's frames
// [libdemo.so] instead of with the new file's symbols.
TEST(ProfTest, ALibraryReplacedAfterTheRecordingIsNotSymbolized) {
  if (!CanProfile()) GTEST_SKIP() << "perf not allowed to this user (PermissionError covers it)";
  const std::string demo = vmtest::BuildTreeFile(SFRAME_DEMO_REL);
  const std::string lib = demo.substr(0, demo.rfind('/') + 1) + "libdemo.so";
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  const std::string dir = std::string(cwd) + "/" + FreshDir("bid");
  ASSERT_EQ(system(("cp " + demo + " " + lib + " " + dir + "/").c_str()), 0);
  const Result rec = Prof("record -F 1000 -o " + dir + "/bid.data -- " + dir +
                          "/demo_workload 300");
  ASSERT_EQ(rec.status, 0) << rec.output;
  Contents contents;
  sframe::read_profile(dir + "/bid.data", &contents);
  std::string recorded;
  for (const sframe::ProfileMapping& m : contents.maps) {
    if (m.path == dir + "/libdemo.so") recorded = m.build_id;
  }
  ASSERT_EQ(recorded, sframe::read_build_id(dir + "/libdemo.so"));
  // The same file: symbolized, no warning.
  Result same = Prof("report --folded -i " + dir + "/bid.data");
  ASSERT_EQ(same.status, 0) << same.output;
  EXPECT_EQ(same.output.find("warning"), std::string::npos) << same.output.substr(0, 2000);
  EXPECT_NE(same.output.find(";demo_sort"), std::string::npos) << same.output.substr(0, 4000);

  // Another library at that path (a new file, as an upgrade installs it).
  const std::string other = "/lib/x86_64-linux-gnu/libm.so.6";
  const std::string other_id = sframe::read_build_id(other);
  ASSERT_NE(other_id, recorded);
  ASSERT_EQ(system(("cp " + other + " " + dir + "/libdemo.so.new && mv " + dir +
                    "/libdemo.so.new " + dir + "/libdemo.so").c_str()),
            0);
  const Result swapped = Prof("report --folded -i " + dir + "/bid.data");
  ASSERT_EQ(swapped.status, 0) << swapped.output;
  const std::string warning = "sframe-prof: warning: " + dir + "/libdemo.so has build id " +
                              other_id + ", the recording saw " + recorded +
                              ": its frames are not symbolized (shown as [libdemo.so])\n";
  const size_t at = swapped.output.find(warning);
  EXPECT_NE(at, std::string::npos) << swapped.output.substr(0, 4000);
  EXPECT_EQ(swapped.output.find("warning", at + warning.size()), std::string::npos)
      << "warned more than once\n" << swapped.output.substr(0, 4000);
  EXPECT_EQ(swapped.output.find("demo_sort"), std::string::npos) << swapped.output.substr(0, 4000);
  EXPECT_EQ(swapped.output.find("demo_mix"), std::string::npos);
  EXPECT_NE(swapped.output.find(";[libdemo.so]"), std::string::npos)
      << swapped.output.substr(0, 4000);
  // The program itself is unchanged: still symbolized.
  EXPECT_NE(swapped.output.find(";main;"), std::string::npos) << swapped.output.substr(0, 4000);
}

}  // namespace
