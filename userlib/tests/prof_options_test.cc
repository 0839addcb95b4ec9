// sframe-prof's command line on the host (no module needed): the option
// tables (userlib/tools/prof_options.cc) against their help, perf's
// parsing habits, the CPU lists of -C and of the online mask, and the
// built program's --help, --version and usage errors.
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../tools/prof_options.h"
#include "sframe_client/perf_event.h"
#include "sframe_unwind.h"

namespace {

using prof::ParseResult;
using prof::RecordOptions;
using prof::ReportOptions;

std::vector<int> Cpus(const std::string& text, bool* ok = nullptr) {
  std::vector<int> out = {-1};
  const bool r = sframe::parse_cpu_list(text, &out);
  if (ok) *ok = r;
  return out;
}

TEST(CpuList, RangesAndSinglesSortedOnce) {
  EXPECT_EQ(Cpus("0-1,3"), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(Cpus("0"), (std::vector<int>{0}));
  EXPECT_EQ(Cpus("5,2-3,3,0\n"), (std::vector<int>{0, 2, 3, 5}));
  EXPECT_EQ(Cpus("2-2"), (std::vector<int>{2}));
}

TEST(CpuList, RefusesWhatIsNoList) {
  for (const char* bad : {"", "a", "1,,2", ",1", "1,", "3-1", "-1", "1-", "0x1", "1 2", "99999",
                          "0-70000", "1--2"}) {
    bool ok = true;
    EXPECT_EQ(Cpus(bad, &ok), (std::vector<int>{-1})) << bad;
    EXPECT_FALSE(ok) << bad;
  }
}

TEST(CpuList, OnlineMaskIsTheKernelsNotACount) {
  std::vector<int> expected;
  if (FILE* f = std::fopen("/sys/devices/system/cpu/online", "re")) {
    char buf[256] = {};
    const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    ASSERT_TRUE(sframe::parse_cpu_list(std::string(buf, n), &expected)) << buf;
  } else {
    GTEST_SKIP() << "no /sys/devices/system/cpu/online here";
  }
  EXPECT_EQ(sframe::online_cpus(), expected);
}

ParseResult Record(std::vector<std::string> args, RecordOptions* o) {
  return prof::parse_record(args, o);
}

TEST(RecordOptions, PerfsSpellings) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"-F", "99", "-a"}, {"-F99", "-a"}, {"--freq=99", "-a"}, {"--freq", "99", "-a"},
           {"-aF99"}, {"-aF", "99"}}) {
    RecordOptions o;
    const ParseResult r = Record(args, &o);
    ASSERT_EQ(r.kind, ParseResult::kRun) << r.error;
    EXPECT_EQ(o.frequency, 99u);
    EXPECT_TRUE(o.all_cpus);
    EXPECT_TRUE(o.cpu_wide());
  }
}

TEST(RecordOptions, EveryOptionSetsItsField) {
  RecordOptions o;
  const ParseResult r =
      Record({"-p", "10,20", "-p30", "-t", "40", "-C", "0-1,3", "-c", "100000", "-e",
              "task-clock", "--call-graph", "fp", "--duration", "0.5", "-o", "out.data",
              "--no-inherit", "--device", "/dev/x", "-v", "--strict-freq", "--", "sleep", "1"},
             &o);
  ASSERT_EQ(r.kind, ParseResult::kRun) << r.error;
  EXPECT_EQ(o.pids, (std::vector<pid_t>{10, 20, 30}));
  EXPECT_EQ(o.tids, (std::vector<pid_t>{40}));
  EXPECT_EQ(o.cpus, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(o.cpu_list, "0-1,3");
  EXPECT_EQ(o.period, 100000u);
  EXPECT_EQ(o.event, sframe::PerfEventKind::kTaskClock);
  EXPECT_EQ(o.call_graph, prof::CallGraph::kFp);
  EXPECT_EQ(prof::unwind_flags(o.call_graph), uint32_t{SFRAME_UNWIND_F_FP});
  EXPECT_EQ(o.duration_ms, 500u);
  EXPECT_EQ(o.output, "out.data");
  EXPECT_FALSE(o.inherit);
  EXPECT_EQ(o.device, "/dev/x");
  EXPECT_TRUE(o.verbose);
  EXPECT_TRUE(o.strict_freq);
  EXPECT_EQ(o.command, (std::vector<std::string>{"sleep", "1"}));
  EXPECT_TRUE(o.has_tasks());
  EXPECT_FALSE(o.cpu_wide());
  EXPECT_FALSE(o.command_is_target());
}

TEST(RecordOptions, TargetsAsPerf) {
  RecordOptions cmd;
  ASSERT_EQ(Record({"./prog", "-x", "--y"}, &cmd).kind, ParseResult::kRun);
  EXPECT_EQ(cmd.command, (std::vector<std::string>{"./prog", "-x", "--y"}));
  EXPECT_TRUE(cmd.command_is_target());

  RecordOptions cpus;  // -C alone: every task on those CPUs
  ASSERT_EQ(Record({"-C", "0", "--", "sleep", "1"}, &cpus).kind, ParseResult::kRun);
  EXPECT_TRUE(cpus.cpu_wide());
  EXPECT_FALSE(cpus.command_is_target());

  RecordOptions both;  // -a with -p: perf's warning, the pid wins
  const ParseResult r = Record({"-a", "-p", "1"}, &both);
  ASSERT_EQ(r.kind, ParseResult::kRun);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0], "PID/TID switch overriding SYSTEM");
  EXPECT_FALSE(both.cpu_wide());

  RecordOptions max;
  ASSERT_EQ(Record({"-F", "max", "-a"}, &max).kind, ParseResult::kRun);
  EXPECT_TRUE(max.frequency_max);

  RecordOptions g;
  ASSERT_EQ(Record({"-g", "--call-graph=sframe", "-a"}, &g).kind, ParseResult::kRun);
  EXPECT_EQ(prof::unwind_flags(g.call_graph), uint32_t{SFRAME_UNWIND_F_SFRAME});
  EXPECT_EQ(prof::unwind_flags(prof::CallGraph::kAuto), uint32_t{SFRAME_UNWIND_F_ALL});
}

// Each usage error names the option and what is wrong.
TEST(RecordOptions, UsageErrorsNameTheOption) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--frob", "-a"}, "unknown option `frob'"},
      {{"-x", "-a"}, "unknown switch `x'"},
      {{"-a", "-F"}, "switch `F' requires a value"},
      {{"-a", "--freq"}, "option `freq' requires a value"},
      {{"-a", "-F", "fast"}, "switch `F' expects a frequency in Hz (1 or more) or max, not `fast'"},
      {{"-a", "-F", "0"}, "switch `F' expects"},
      {{"-a", "-c", "-5"}, "switch `c' expects a period"},
      {{"-p", "0"}, "switch `p' expects process ids"},
      {{"-p", "1,,2"}, "switch `p' expects process ids"},
      {{"-t", "x"}, "switch `t' expects thread ids"},
      {{"-C", "1-0"}, "switch `C' expects a CPU list"},
      {{"-a", "-e", "cycles:pp"}, "event `cycles:pp' is not supported"},
      {{"-a", "--call-graph", "dwarf"}, "`dwarf' is perf's"},
      {{"-a", "--call-graph", "x"}, "expects sframe, fp or auto"},
      {{"-a", "--duration", "0"}, "option `duration' expects a number of seconds"},
      {{"-a", "--duration", "1e3"}, "option `duration' expects"},
      {{"-a", "--no-inherit=1"}, "option `no-inherit' takes no value"},
      {{}, "nothing to record"},
      {{"-v", "--"}, "nothing to record"},
  };
  for (const auto& [args, message] : cases) {
    RecordOptions o;
    const ParseResult r = Record(args, &o);
    EXPECT_EQ(r.kind, ParseResult::kError) << message;
    EXPECT_EQ(r.error.rfind("  Error: ", 0), 0u) << r.error;
    EXPECT_NE(r.error.find(message), std::string::npos) << r.error;
  }
}

TEST(ReportOptions, ModesAndErrors) {
  ReportOptions o;
  ASSERT_EQ(prof::parse_report({"-i", "x.data", "--top", "5"}, &o).kind, ParseResult::kRun);
  EXPECT_EQ(o.input, "x.data");
  EXPECT_EQ(o.format, prof::ReportFormat::kTop);
  EXPECT_EQ(o.top, 5u);
  ASSERT_EQ(prof::parse_report({"--input=y", "--folded"}, &o).kind, ParseResult::kRun);
  EXPECT_EQ(o.input, "y");
  EXPECT_EQ(o.format, prof::ReportFormat::kFolded);
  ASSERT_EQ(prof::parse_report({"--svg", "f.svg"}, &o).kind, ParseResult::kRun);
  EXPECT_EQ(o.format, prof::ReportFormat::kSvg);
  EXPECT_EQ(o.svg, "f.svg");
  const ParseResult stray = prof::parse_report({"stray"}, &o);
  EXPECT_EQ(stray.kind, ParseResult::kError);
  EXPECT_NE(stray.error.find("unexpected argument `stray'"), std::string::npos);
  EXPECT_EQ(prof::parse_report({"--top", "0"}, &o).kind, ParseResult::kError);
  EXPECT_EQ(prof::parse_report({"-h"}, &o).kind, ParseResult::kHelp);
}

// The help and the parser come from one table: every option the parser
// knows is in the help, and every option the help shows is one the parser
// takes (not "unknown").
template <typename Options>
void CheckHelpMatchesParser(const std::vector<std::string>& names, const std::string& help,
                            ParseResult (*parse)(const std::vector<std::string>&, Options*)) {
  ASSERT_GE(names.size(), 4u);
  for (const std::string& name : names) {
    EXPECT_NE(help.find(name), std::string::npos) << name << " missing from\n" << help;
    Options o;
    const ParseResult r = parse({name, "1"}, &o);
    EXPECT_EQ(r.error.find("unknown"), std::string::npos) << name << ": " << r.error;
  }
  // Every "--word" in the help is an option of the table.
  for (size_t at = help.find("--"); at != std::string::npos; at = help.find("--", at + 2)) {
    size_t end = at + 2;
    while (end < help.size() && (std::isalnum(static_cast<unsigned char>(help[end])) ||
                                 help[end] == '-')) {
      end++;
    }
    const std::string word = help.substr(at, end - at);
    if (word == "--") continue;  // the separator in the usage line
    EXPECT_NE(std::find(names.begin(), names.end(), word), names.end())
        << word << " is in the help but not in the table";
  }
}

TEST(Help, RecordHelpListsEveryOptionTheParserTakes) {
  const std::vector<std::string> names = prof::record_option_names();
  for (const char* expected : {"-a", "--all-cpus", "-p", "--pid", "-t", "--tid", "-C", "--cpu",
                               "-F", "--freq", "-c", "--count", "-e", "--event", "-g",
                               "--call-graph", "--duration", "-o", "--output", "--no-inherit",
                               "--device", "-v", "--strict-freq", "--help"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
  CheckHelpMatchesParser<RecordOptions>(names, prof::record_help(), prof::parse_record);
}

TEST(Help, ReportHelpListsEveryOptionTheParserTakes) {
  const std::vector<std::string> names = prof::report_option_names();
  for (const char* expected : {"-i", "--input", "--folded", "--top", "--svg", "--help"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
  CheckHelpMatchesParser<ReportOptions>(names, prof::report_help(), prof::parse_report);
}

// The built program.
struct ProgRun {
  int status = -1;
  std::string out;
};

ProgRun Prof(const std::string& args) {
  ProgRun r;
  FILE* p = popen((std::string(SFRAME_PROF_BIN) + " " + args + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

TEST(Program, HelpOfEachSubcommandListsItsOptions) {
  const ProgRun rec = Prof("record --help");
  EXPECT_EQ(rec.status, 0);
  for (const std::string& n : prof::record_option_names()) {
    EXPECT_NE(rec.out.find(n), std::string::npos) << n;
  }
  const ProgRun rep = Prof("report -h");
  EXPECT_EQ(rep.status, 0);
  for (const std::string& n : prof::report_option_names()) {
    EXPECT_NE(rep.out.find(n), std::string::npos) << n;
  }
  const ProgRun top = Prof("--help");
  EXPECT_EQ(top.status, 0);
  for (const auto& names : {prof::record_option_names(), prof::report_option_names()}) {
    for (const std::string& n : names) EXPECT_NE(top.out.find(n), std::string::npos) << n;
  }
}

TEST(Program, VersionIsTheProjects) {
  const ProgRun v = Prof("--version");
  EXPECT_EQ(v.status, 0);
  EXPECT_EQ(v.out, std::string("sframe-prof version ") + SFRAME_PROJECT_VERSION + "\n");
}

TEST(Program, UsageErrorsExit129NamingTheOption) {
  const ProgRun bad = Prof("record --frob -a");
  EXPECT_EQ(bad.status, 129);
  EXPECT_NE(bad.out.find("  Error: unknown option `frob'"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find(" Usage: sframe-prof record"), std::string::npos) << bad.out;
  const ProgRun rep = Prof("report -x");
  EXPECT_EQ(rep.status, 129);
  EXPECT_NE(rep.out.find("unknown switch `x'"), std::string::npos) << rep.out;
  const ProgRun none = Prof("");
  EXPECT_EQ(none.status, 129);
  const ProgRun cmd = Prof("frobnicate");
  EXPECT_EQ(cmd.status, 1);
  EXPECT_NE(cmd.out.find("'frobnicate' is not a sframe-prof command"), std::string::npos);
}

// Above kernel.perf_event_max_sample_rate: refused with --strict-freq
// (before the module is looked at), else throttled with perf's warning.
TEST(Program, FrequencyAboveTheKernelsMaximum) {
  FILE* f = std::fopen("/proc/sys/kernel/perf_event_max_sample_rate", "re");
  if (!f) GTEST_SKIP() << "no perf_event_max_sample_rate here";
  unsigned long long max = 0;
  const int n = std::fscanf(f, "%llu", &max);
  std::fclose(f);
  ASSERT_EQ(n, 1);
  const std::string too_high = std::to_string(max + 1);
  const ProgRun strict = Prof("record --strict-freq -F " + too_high +
                          " --device /nonexistent -o /nonexistent/x -a -- true");
  EXPECT_EQ(strict.status, 1);
  EXPECT_NE(strict.out.find("error: Maximum frequency rate (" + std::to_string(max) +
                            " Hz) exceeded."),
            std::string::npos)
      << strict.out;
  EXPECT_NE(strict.out.find("tweaking /proc/sys/kernel/perf_event_max_sample_rate"),
            std::string::npos);
  const ProgRun throttled =
      Prof("record -F " + too_high + " --device /nonexistent -o /nonexistent/x -a -- true");
  EXPECT_NE(throttled.out.find("warning: Maximum frequency rate (" + std::to_string(max) +
                               " Hz) exceeded, throttling from " + too_high + " Hz to " +
                               std::to_string(max) + " Hz."),
            std::string::npos)
      << throttled.out;
  // Then it goes on, to the device that is not there.
  EXPECT_EQ(throttled.status, 1);
  EXPECT_NE(throttled.out.find("/nonexistent"), std::string::npos) << throttled.out;
}

}  // namespace
