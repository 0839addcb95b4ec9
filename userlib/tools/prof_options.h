// sframe-prof's command line: one table of options per subcommand, from
// which both the parser and the --help text are made (they cannot drift
// apart), parsed in perf's manner: "-F 99", "-F99", "--freq=99",
// "--freq 99", bundled flags ("-av"), "--" or the first word that is no
// option starting the command (record), a usage error exits 129 with a
// message naming the option.
#ifndef SFRAME_TOOLS_PROF_OPTIONS_H
#define SFRAME_TOOLS_PROF_OPTIONS_H

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sframe_client/perf_event.h"

namespace prof {

inline constexpr const char kTool[] = "sframe-prof";
inline constexpr const char kDefaultFile[] = "sframe-prof.data";
// perf's exit status for a usage error (its parse-options).
inline constexpr int kUsageExit = 129;

// --call-graph: which unwinders the session uses (SFRAME_UNWIND_F_*).
enum class CallGraph { kAuto, kSframe, kFp };

// Where the targets' SFrame comes from (--coverage): the file store kept by
// sframe-coverd when it runs (auto), or supplied per process by the
// recording (process: what sframe-prof did before the service).
enum class CoverageMode { kAuto, kService, kProcess };

struct RecordOptions {
  bool all_cpus = false;            // -a
  std::vector<pid_t> pids;          // -p
  std::vector<pid_t> tids;          // -t
  std::vector<int> cpus;            // -C (empty: the online CPUs)
  std::string cpu_list;             // -C as given
  uint64_t frequency = 1000;        // -F
  bool frequency_given = false;
  bool frequency_max = false;       // -F max
  bool strict_freq = false;         // --strict-freq
  uint64_t period = 0;              // -c (0: -F)
  sframe::PerfEventKind event = sframe::PerfEventKind::kCpuClock;  // -e
  std::string event_name = "cpu-clock";
  CallGraph call_graph = CallGraph::kAuto;  // --call-graph, -g
  CoverageMode coverage = CoverageMode::kAuto;  // --coverage
  uint64_t duration_ms = 0;         // --duration (0: none)
  std::string output = kDefaultFile;  // -o
  bool verbose = false;             // -v
  bool inherit = true;              // --no-inherit
  std::string device;               // --device (empty: the default)
  std::vector<std::string> command;  // after "--" or the first non-option

  // Tasks given with -p or -t.
  bool has_tasks() const { return !pids.empty() || !tids.empty(); }
  // Every task on the CPUs (-a, or -C without -p/-t, as perf).
  bool cpu_wide() const { return !has_tasks() && (all_cpus || !cpu_list.empty()); }
  // The command is the target (neither -a, -C, -p nor -t).
  bool command_is_target() const { return !has_tasks() && !cpu_wide(); }
};

// How report prints the profile.  A new output is one more enumerator and
// one more option in the table (see prof_options.cc) plus its branch in
// cmd_report.
enum class ReportFormat { kTop, kFolded, kSvg, kPprof, kPerfScript };

struct ReportOptions {
  std::string input = kDefaultFile;  // -i
  ReportFormat format = ReportFormat::kTop;
  uint64_t top = 20;   // --top N
  std::string svg;     // --svg FILE
  std::string output;  // -o FILE: where the output goes (default stdout)
};

// What a parse came to.
struct ParseResult {
  enum Kind { kRun, kHelp, kError } kind = kRun;
  std::string error;     // kError: "  Error: ..." (no newline)
  std::vector<std::string> warnings;  // printed, the run goes on
};

ParseResult parse_record(const std::vector<std::string>& args, RecordOptions* out);
ParseResult parse_report(const std::vector<std::string>& args, ReportOptions* out);

// The --help texts, from the tables.
std::string record_help();
std::string report_help();
std::string main_help();
// The short usage lines printed after a usage error.
std::string record_usage();
std::string report_usage();

// The names of every option a table accepts ("-F", "--freq", ...), for
// tests that check the help against the parser.
std::vector<std::string> record_option_names();
std::vector<std::string> report_option_names();

// SFRAME_UNWIND_F_* of a --call-graph mode (0: the module's default, all).
uint32_t unwind_flags(CallGraph mode);
const char* call_graph_name(CallGraph mode);

// The lists of -p and -t: "1234" or "1234,5678" (each 1..INT32_MAX).
bool parse_pid_list(const std::string& text, std::vector<pid_t>* out);

}  // namespace prof

#endif  // SFRAME_TOOLS_PROF_OPTIONS_H
