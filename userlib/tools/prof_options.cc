#include "prof_options.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <utility>

#include "sframe_unwind.h"

namespace prof {
namespace {

// One option of a subcommand.  set() takes the value ("" for a flag) and
// returns what is wrong with it, or "".  An entry without set is --help.
template <typename T>
struct OptionDef {
  char short_name;        // 0: none
  const char* long_name;  // nullptr: none
  const char* arg;        // the value's name in the help; nullptr: a flag
  const char* help;       // wrapped by options_help()
  std::string (*set)(T*, const std::string&);
};

bool parse_u64(const std::string& s, uint64_t* out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

std::string quoted(const std::string& s) { return "`" + s + "'"; }

using R = RecordOptions;
const std::vector<OptionDef<R>>& record_table() {
  static const std::vector<OptionDef<R>> table = {
      {'a', "all-cpus", nullptr,
       "system-wide: every task on every CPU (or on the CPUs of -C); needs\n"
       "kernel.perf_event_paranoid <= 0 or CAP_PERFMON",
       [](R* o, const std::string&) {
         o->all_cpus = true;
         return std::string();
       }},
      {'p', "pid", "pid[,pid...]",
       "existing processes, every thread of each, and (unless --no-inherit)\n"
       "the threads and processes they create",
       [](R* o, const std::string& v) {
         return parse_pid_list(v, &o->pids) ? std::string()
                                             : "expects process ids (1234 or 1234,5678), not " +
                                                   quoted(v);
       }},
      {'t', "tid", "tid[,tid...]",
       "existing threads only (and, unless --no-inherit, what they create)",
       [](R* o, const std::string& v) {
         return parse_pid_list(v, &o->tids) ? std::string()
                                             : "expects thread ids (1234 or 1234,5678), not " +
                                                   quoted(v);
       }},
      {'C', "cpu", "cpu-list",
       "only on these CPUs (e.g. 0,2-3); without -p/-t, every task on them",
       [](R* o, const std::string& v) {
         o->cpu_list = v;
         return sframe::parse_cpu_list(v, &o->cpus)
                    ? std::string()
                    : "expects a CPU list (0, 0,2 or 0-3), not " + quoted(v);
       }},
      {'F', "freq", "n|max",
       "samples per second of the event's time (default 1000); max: the\n"
       "kernel's limit, kernel.perf_event_max_sample_rate, above which -F\n"
       "is throttled to it (with a warning)",
       [](R* o, const std::string& v) {
         o->frequency_given = true;
         if (v == "max") {
           o->frequency_max = true;
           return std::string();
         }
         o->frequency_max = false;
         if (!parse_u64(v, &o->frequency) || o->frequency == 0) {
           return "expects a frequency in Hz (1 or more) or max, not " + quoted(v);
         }
         return std::string();
       }},
      {0, "strict-freq", nullptr,
       "refuse to record with -F above kernel.perf_event_max_sample_rate\n"
       "instead of throttling",
       [](R* o, const std::string&) {
         o->strict_freq = true;
         return std::string();
       }},
      {'c', "count", "n",
       "a sample every N events instead of -F: nanoseconds of CPU time for\n"
       "cpu-clock and task-clock, cycles for cycles",
       [](R* o, const std::string& v) {
         if (!parse_u64(v, &o->period) || o->period == 0) {
           return "expects a period (1 or more), not " + quoted(v);
         }
         return std::string();
       }},
      {'e', "event", "event",
       "what to sample: cpu-clock (the default: a timer on CPU time),\n"
       "task-clock (a timer on the task's time), or cycles (hardware CPU\n"
       "cycles: needs a PMU, which VMs often lack)",
       [](R* o, const std::string& v) {
         if (v == "cpu-clock") {
           o->event = sframe::PerfEventKind::kCpuClock;
         } else if (v == "task-clock") {
           o->event = sframe::PerfEventKind::kTaskClock;
         } else if (v == "cycles" || v == "cpu-cycles") {
           o->event = sframe::PerfEventKind::kCycles;
         } else {
           return "event " + quoted(v) +
                  " is not supported: cpu-clock, task-clock or cycles";
         }
         o->event_name = v == "cpu-cycles" ? "cycles" : v;
         return std::string();
       }},
      {'g', nullptr, nullptr, "stacks unwound as --call-graph auto (the default)",
       [](R* o, const std::string&) {
         o->call_graph = CallGraph::kAuto;
         return std::string();
       }},
      {0, "call-graph", "sframe|fp|auto",
       "how user stacks are unwound: sframe (SFrame only: a stack stops\n"
       "where no section covers the code), fp (frame pointers only: no\n"
       "SFrame is made or supplied), auto (the default: SFrame where a\n"
       "section covers the code, frame pointers elsewhere)",
       [](R* o, const std::string& v) {
         if (v == "sframe") {
           o->call_graph = CallGraph::kSframe;
         } else if (v == "fp") {
           o->call_graph = CallGraph::kFp;
         } else if (v == "auto") {
           o->call_graph = CallGraph::kAuto;
         } else if (v.rfind("dwarf", 0) == 0 || v == "lbr") {
           return quoted(v) +
                  " is perf's: sframe-prof unwinds in the kernel with SFrame or frame "
                  "pointers (sframe, fp or auto)";
         } else {
           return "expects sframe, fp or auto, not " + quoted(v);
         }
         return std::string();
       }},
      {0, "coverage", "auto|service|process",
       "where SFrame for code without its own .sframe comes from: auto\n"
       "(the default: sframe-coverd's file store when the service runs,\n"
       "else made and supplied per process by the recording), service\n"
       "(the store only: an error when sframe-coverd does not run), or\n"
       "process (per process, as without the service)",
       [](R* o, const std::string& v) {
         if (v == "auto") {
           o->coverage = CoverageMode::kAuto;
         } else if (v == "service") {
           o->coverage = CoverageMode::kService;
         } else if (v == "process") {
           o->coverage = CoverageMode::kProcess;
         } else {
           return "expects auto, service or process, not " + quoted(v);
         }
         return std::string();
       }},
      {0, "duration", "seconds",
       "stop after this many seconds (a fraction too, e.g. 0.5)",
       [](R* o, const std::string& v) {
         char* end = nullptr;
         errno = 0;
         const double s = v.empty() ? 0 : std::strtod(v.c_str(), &end);
         if (v.empty() || errno || *end || !std::isfinite(s) || s <= 0 || s > 1e7 ||
             v.find_first_not_of("0123456789.") != std::string::npos) {
           return "expects a number of seconds above 0, not " + quoted(v);
         }
         o->duration_ms = std::max<uint64_t>(1, static_cast<uint64_t>(s * 1000.0 + 0.5));
         return std::string();
       }},
      {'o', "output", "file",
       "the data file to write (default sframe-prof.data)",
       [](R* o, const std::string& v) {
         if (v.empty()) return std::string("expects a file name");
         o->output = v;
         return std::string();
       }},
      {0, "no-inherit", nullptr,
       "do not follow what the targets create: with a command or one -p, the\n"
       "process (its threads) only; with several -p, or -t, the threads that\n"
       "exist",
       [](R* o, const std::string&) {
         o->inherit = false;
         return std::string();
       }},
      {0, "device", "path",
       "the module's device (default " SFRAME_UNWIND_DEVICE ")",
       [](R* o, const std::string& v) {
         if (v.empty()) return std::string("expects a path");
         o->device = v;
         return std::string();
       }},
      {'v', "verbose", nullptr,
       "say what SFrame was supplied for which objects, what could not be\n"
       "covered, and what was written",
       [](R* o, const std::string&) {
         o->verbose = true;
         return std::string();
       }},
      {'h', "help", nullptr, "this text", nullptr},
  };
  return table;
}

using P = ReportOptions;
const std::vector<OptionDef<P>>& report_table() {
  static const std::vector<OptionDef<P>> table = {
      {'i', "input", "file", "the data file to read (default sframe-prof.data)",
       [](P* o, const std::string& v) {
         if (v.empty()) return std::string("expects a file name");
         o->input = v;
         return std::string();
       }},
      {0, "top", "n",
       "the N hottest functions, by self and by total samples (the default,\n"
       "with N 20)",
       [](P* o, const std::string& v) {
         if (!parse_u64(v, &o->top) || o->top == 0) {
           return "expects a number (1 or more), not " + quoted(v);
         }
         o->format = ReportFormat::kTop;
         return std::string();
       }},
      {0, "folded", nullptr,
       "folded stacks on stdout, root first (flamegraph.pl, speedscope)",
       [](P* o, const std::string&) {
         o->format = ReportFormat::kFolded;
         return std::string();
       }},
      {0, "svg", "file", "an interactive flame graph written to FILE",
       [](P* o, const std::string& v) {
         if (v.empty()) return std::string("expects a file name");
         o->format = ReportFormat::kSvg;
         o->svg = v;
         return std::string();
       }},
      {0, "format", "fmt",
       "the output: top, folded, svg (needs -o or --svg), pprof (gzipped\n"
       "profile.proto for pprof, Grafana Pyroscope, Parca; needs -o) or\n"
       "perf-script (the text of `perf script`, for its consumers)",
       [](P* o, const std::string& v) {
         static const std::pair<const char*, ReportFormat> formats[] = {
             {"top", ReportFormat::kTop},
             {"folded", ReportFormat::kFolded},
             {"svg", ReportFormat::kSvg},
             {"pprof", ReportFormat::kPprof},
             {"perf-script", ReportFormat::kPerfScript}};
         for (const auto& [name, format] : formats) {
           if (v == name) {
             o->format = format;
             return std::string();
           }
         }
         return "expects top, folded, svg, pprof or perf-script, not " + quoted(v);
       }},
      {'o', "output", "file", "write the output to FILE (mode 0600) instead of stdout",
       [](P* o, const std::string& v) {
         if (v.empty()) return std::string("expects a file name");
         o->output = v;
         return std::string();
       }},
      {'h', "help", nullptr, "this text", nullptr},
  };
  return table;
}

// Parses args by table into out.  command: where the words from the first
// one that is no option (or after "--") go; nullptr: such a word is an
// error.
template <typename T>
ParseResult parse(const std::vector<OptionDef<T>>& table, const std::vector<std::string>& args,
                  T* out, std::vector<std::string>* command) {
  ParseResult r;
  auto fail = [&r](const std::string& what) {
    r.kind = ParseResult::kError;
    r.error = "  Error: " + what;
    return r;
  };
  // Each iteration takes one or two words: bounded by args.size().
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    if (a == "--") {
      if (!command) return fail("unexpected " + quoted(a));
      command->assign(args.begin() + static_cast<long>(i) + 1, args.end());
      return r;
    }
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      const size_t eq = a.find('=');
      const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      const OptionDef<T>* def = nullptr;
      for (const auto& d : table) {
        if (d.long_name && name == d.long_name) def = &d;
      }
      if (!def) return fail("unknown option " + quoted(name));
      if (!def->set) {
        r.kind = ParseResult::kHelp;
        return r;
      }
      std::string value;
      if (def->arg) {
        if (eq != std::string::npos) {
          value = a.substr(eq + 1);
        } else if (i + 1 < args.size()) {
          value = args[++i];
        } else {
          return fail("option " + quoted(name) + " requires a value");
        }
      } else if (eq != std::string::npos) {
        return fail("option " + quoted(name) + " takes no value");
      }
      const std::string why = def->set(out, value);
      if (!why.empty()) return fail("option " + quoted(name) + " " + why);
      continue;
    }
    if (a.size() > 1 && a[0] == '-') {
      // Bundled switches: each a flag, the last may take the rest of the
      // word or the next one as its value.
      for (size_t j = 1; j < a.size(); j++) {
        const OptionDef<T>* def = nullptr;
        for (const auto& d : table) {
          if (d.short_name && d.short_name == a[j]) def = &d;
        }
        if (!def) return fail("unknown switch " + quoted(std::string(1, a[j])));
        if (!def->set) {
          r.kind = ParseResult::kHelp;
          return r;
        }
        const std::string sw = quoted(std::string(1, a[j]));
        std::string value;
        if (def->arg) {
          if (j + 1 < a.size()) {
            value = a.substr(j + 1);
          } else if (i + 1 < args.size()) {
            value = args[++i];
          } else {
            return fail("switch " + sw + " requires a value");
          }
          j = a.size();
        }
        const std::string why = def->set(out, value);
        if (!why.empty()) return fail("switch " + sw + " " + why);
      }
      continue;
    }
    if (!command) return fail("unexpected argument " + quoted(a));
    command->assign(args.begin() + static_cast<long>(i), args.end());
    return r;
  }
  return r;
}

template <typename T>
std::string options_help(const std::vector<OptionDef<T>>& table) {
  std::string out;
  for (const auto& d : table) {
    std::string left = "    ";
    left += d.short_name ? std::string("-") + d.short_name : std::string("  ");
    if (d.long_name) left += std::string(d.short_name ? ", " : "  ") + "--" + d.long_name;
    if (d.arg) left += std::string(" <") + d.arg + ">";
    // The help in a column, its words wrapped at 80 characters.
    const size_t column = 30, width = 80;
    left += left.size() < column ? std::string(column - left.size(), ' ')
                                 : "\n" + std::string(column, ' ');
    std::string line;
    std::istringstream words(d.help);
    for (std::string word; words >> word;) {
      if (!line.empty() && column + line.size() + 1 + word.size() > width) {
        left += line + "\n" + std::string(column, ' ');
        line.clear();
      }
      line += (line.empty() ? "" : " ") + word;
    }
    out += left + line + "\n";
  }
  return out;
}

template <typename T>
std::vector<std::string> option_names(const std::vector<OptionDef<T>>& table) {
  std::vector<std::string> out;
  for (const auto& d : table) {
    if (d.short_name) out.push_back(std::string("-") + d.short_name);
    if (d.long_name) out.push_back(std::string("--") + d.long_name);
  }
  return out;
}

}  // namespace

bool parse_pid_list(const std::string& text, std::vector<pid_t>* out) {
  std::vector<pid_t> pids;
  for (size_t at = 0; at <= text.size();) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    uint64_t v = 0;
    if (!parse_u64(text.substr(at, end - at), &v) || v == 0 || v > INT32_MAX) return false;
    pids.push_back(static_cast<pid_t>(v));
    at = end + 1;
  }
  out->insert(out->end(), pids.begin(), pids.end());
  return true;
}

ParseResult parse_record(const std::vector<std::string>& args, RecordOptions* out) {
  ParseResult r = parse(record_table(), args, out, &out->command);
  if (r.kind != ParseResult::kRun) return r;
  if (out->command_is_target() && out->command.empty()) {
    r.kind = ParseResult::kError;
    r.error = "  Error: nothing to record: give a command (-- COMMAND [ARGS]), -p, -t, -a or -C";
    return r;
  }
  // perf's words when both are given: the tasks win.
  if (out->all_cpus && out->has_tasks()) r.warnings.push_back("PID/TID switch overriding SYSTEM");
  if (out->period && out->frequency_given) {
    r.warnings.push_back("-c " + std::to_string(out->period) + " overrides -F");
  }
  return r;
}

ParseResult parse_report(const std::vector<std::string>& args, ReportOptions* out) {
  return parse(report_table(), args, out, nullptr);
}

std::string record_usage() {
  return std::string(" Usage: ") + kTool + " record [<options>] [--] [<command> [<args>...]]\n";
}

std::string report_usage() {
  return std::string(" Usage: ") + kTool + " report [<options>]\n";
}

std::string record_help() {
  return record_usage() +
         "\n"
         "Records stitched kernel + user stacks of the target into a data file, unwound in\n"
         "the kernel by the sframe_unwind module.  The target: a command (run until it\n"
         "exits), or -p/-t tasks, or -a/-C CPUs; with a target given, a command only times\n"
         "the recording (as perf: record -a -- sleep 10), and --duration bounds it too.\n"
         "Without either, it ends when the target processes exit or at Ctrl-C.\n"
         "\n" +
         options_help(record_table()) +
         "\n"
         "Exit status: the command's when one ran, else 0; 1 when recording failed;\n"
         "129 for a usage error.\n";
}

std::string report_help() {
  return report_usage() +
         "\n"
         "Reads a data file written by record and prints its profile.\n"
         "\n" +
         options_help(report_table()) +
         "\n"
         "Exit status: 0; 1 when the file cannot be read; 129 for a usage error.\n";
}

std::string main_help() {
  return std::string(" Usage: ") + kTool +
         " [--version] [--help] <command> [<args>]\n"
         "\n"
         "   record     record stitched stacks into a data file\n"
         "   report     print the profile of a data file\n"
         "   version    print the version\n"
         "\n"
         "sframe-prof record --help and sframe-prof report --help describe their options:\n"
         "\n" +
         record_usage() + options_help(record_table()) + "\n" + report_usage() +
         options_help(report_table());
}

std::vector<std::string> record_option_names() { return option_names(record_table()); }
std::vector<std::string> report_option_names() { return option_names(report_table()); }

uint32_t unwind_flags(CallGraph mode) {
  switch (mode) {
    case CallGraph::kSframe:
      return SFRAME_UNWIND_F_SFRAME;
    case CallGraph::kFp:
      return SFRAME_UNWIND_F_FP;
    case CallGraph::kAuto:
      break;
  }
  return SFRAME_UNWIND_F_ALL;
}

const char* call_graph_name(CallGraph mode) {
  switch (mode) {
    case CallGraph::kSframe:
      return "sframe";
    case CallGraph::kFp:
      return "fp";
    case CallGraph::kAuto:
      break;
  }
  return "auto";
}

}  // namespace prof
