// sframe-prof: the profiler.  Records stitched stacks (kernel + user,
// unwound by the sframe_unwind module) into a data file, and reports them
// offline: folded stacks, a table of the hottest functions, a flame graph,
// pprof, perf script text.
// Its command line follows perf's (prof_options.h has the options):
//
//   sframe-prof record [-a] [-p PID,..] [-t TID,..] [-C CPUS] [-F HZ|-c N] [-e EVENT]
//                      [--call-graph sframe|fp|auto] [--duration S] [-o FILE] ...
//                      [--] [COMMAND ARGS...]
//   sframe-prof report [-i FILE] [--folded | --top N | --svg FILE | --format FMT] [-o FILE]
//
// The data file's format: docs/sframe-prof-format.md.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "launch.h"
#include "machine_coverage.h"
#include "prof_options.h"
#include "sframe_client/sframe_client.hpp"
#include "sframe_gen/store_coverage.h"
#include "sframe_object/maps.h"
#include "sframe_object/object_table.h"
#include "sframe_profile/build_ids.h"
#include "sframe_profile/flamegraph.h"
#include "sframe_profile/perf_script.h"
#include "sframe_profile/pprof_writer.h"
#include "sframe_profile/profile.h"
#include "sframe_profile/symbolizer.h"

namespace {

using prof::kTool;

volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

std::string read_line_of(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string boot_id() { return read_line_of("/proc/sys/kernel/random/boot_id"); }

// Whether pid has exited: no such process, or a zombie its parent has not
// reaped yet.
bool process_gone(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  const std::string stat = read_line_of("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return true;
  const char state = stat[paren + 2];
  return state == 'Z' || state == 'X';
}

// What a user can do about an error, or "" when the message says it all.
std::string advice(const sframe::Error& e, const std::string& device) {
  const int err = e.err();
  if (e.op() == sframe::op::kOpen && e.object() == device && err == ENOENT) {
    return device +
           " does not exist: the sframe_unwind kernel module is not loaded.  Install it "
           "(the package sframe-unwind-dkms, which builds it with DKMS; or from the source "
           "tree, as root: `make install`), then load it: `modprobe sframe_unwind`.";
  }
  if (e.op() == sframe::op::kOpen && e.object() == device && (err == EACCES || err == EPERM)) {
    return "no permission to open " + device +
           ": the package sframe-unwind-dkms gives it to group sframe (mode 0660): "
           "join it (as root: `adduser $USER sframe`, then log in again); the module alone "
           "creates it with mode 0666.";
  }
  if ((e.op() == sframe::op::kPerfEventOpen || e.op() == sframe::op::kSessionStart) &&
      (err == EACCES || err == EPERM)) {
    if (e.op() == sframe::op::kSessionStart && err == EPERM) {
      return "the target belongs to a user whose processes you may not trace (ptrace rules): "
             "profile it as that user or as root.";
    }
    const int paranoid = sframe::perf_event_paranoid();
    std::string now = paranoid == INT_MIN ? std::string("unreadable") : std::to_string(paranoid);
    return "not allowed to profile: kernel.perf_event_paranoid is " + now +
           "; profiling your own processes needs 2 or less (-a and kernel frames: 0 or "
           "less, -1 for everything).  As root: `sysctl kernel.perf_event_paranoid=2` "
           "(or 1, 0), or run sframe-prof with CAP_PERFMON (or as root).";
  }
  if (e.op() == sframe::op::kSessionStart && err == EINVAL) {
    return "the loaded sframe_unwind module may be older than this sframe-prof (it cannot "
           "follow child processes: ABI version 2): install the current module (its package, "
           "or `make install`) and reload it, or record with --no-inherit.";
  }
  if (e.op() == sframe::op::kSessionStart && err == ENOTTY) {
    return "the loaded sframe_unwind module is older than this sframe-prof and has no "
           "sessions: install the current module (its package, or `make install`), then reload it "
           "(`rmmod sframe_unwind; modprobe sframe_unwind`).";
  }
  if (err == ESRCH) return "no such process: check the pid (it may have exited).";
  if (e.op() == sframe::op::kPerfEventOpen && e.object().rfind("cycles", 0) == 0 &&
      (err == ENOENT || err == EOPNOTSUPP || err == ENODEV)) {
    return "the cycles event is not supported here: this machine has no hardware PMU that "
           "perf can use (as in a VM without a virtual PMU, e.g. qemu without KVM): sample "
           "-e cpu-clock (the default) or -e task-clock.";
  }
  if (e.op() == sframe::op::kPerfEventOpen && err == EMFILE) {
    return "too many open files: raise RLIMIT_NOFILE (`ulimit -n`), or record fewer threads "
           "or CPUs (-t, -C).";
  }
  return "";
}

// The mmap and comm lines: a snapshot of a process's executable file
// mappings when it is first seen, again when one of its addresses is
// outside them (at most every 200 ms per process), and periodically for the
// target.  Only what changed is written; a mapping replaces the ones it
// overlaps (see the format).  Each mapping record carries the object's
// build id, read once per object (MappedObjectIds) from the recording's
// objects (the coverage's too).
class MappingTracker {
 public:
  MappingTracker(sframe::ProfileWriter* w, sframe::ObjectTable* objects)
      : w_(w), ids_(objects) {}

  // Before a sample of s.pid is written.
  void before_sample(const sframe::Sample& s) {
    const pid_t pid = static_cast<pid_t>(s.pid);
    auto it = procs_.find(pid);
    if (it == procs_.end()) {
      snapshot(pid);
      return;
    }
    // Its number may belong to another process by now.
    if (it->second.exited) return;
    if (tools::now_ms() < it->second.next_read) return;
    for (uint64_t ip : s.user) {
      if (!it->second.covers(ip)) {
        snapshot(pid);
        return;
      }
    }
  }

  // A side-band record (in time order with the samples): a fork child
  // starts with its parent's name and mappings, an exec renames, an
  // executable mapping replaces what it overlaps.
  void note(const sframe::TaskEvent& ev) {
    const pid_t pid = static_cast<pid_t>(ev.pid);
    switch (ev.kind) {
      case sframe::TaskEvent::Kind::kFork: {
        if (!ev.new_process()) return;
        auto parent = procs_.find(static_cast<pid_t>(ev.ppid));
        Proc& p = procs_[pid];
        p = parent != procs_.end() ? parent->second : Proc{};
        p.exited = false;
        p.next_read = tools::now_ms() + 200;
        if (!p.comm.empty()) w_->comm(pid, p.comm);
        for (const auto& [m, build_id] : p.maps) {
          w_->mapping({pid, std::get<0>(m), std::get<1>(m), std::get<2>(m), std::get<3>(m),
                       build_id});
        }
        return;
      }
      case sframe::TaskEvent::Kind::kComm: {
        // A thread's own name is not the process's.
        if (ev.pid != ev.tid && !ev.exec) return;
        Proc& p = procs_[pid];
        p.exited = false;
        if (ev.name != p.comm) {
          w_->comm(pid, ev.name);
          p.comm = ev.name;
        }
        return;
      }
      case sframe::TaskEvent::Kind::kMmap: {
        // Files only ("//anon", "[vdso]" are not).
        if (ev.name.size() < 2 || ev.name[0] != '/' || ev.name[1] == '/') return;
        Proc& p = procs_[pid];
        p.exited = false;
        if (p.next_read == 0) p.next_read = tools::now_ms() + 200;
        add(pid, &p, ev.start, ev.start + ev.len, ev.pgoff, ev.name);
        return;
      }
      case sframe::TaskEvent::Kind::kExit:
        if (ev.process_exit()) procs_[pid].exited = true;
        return;
    }
  }

  void snapshot(pid_t pid) {
    Proc& p = procs_[pid];
    p.next_read = tools::now_ms() + 200;
    std::string comm =
        pid == 0 ? "swapper" : read_line_of("/proc/" + std::to_string(pid) + "/comm");
    if (!comm.empty() && comm != p.comm) {
      w_->comm(pid, comm);
      p.comm = comm;
    }
    if (pid == 0) return;
    std::vector<sframe::MapsEntry> maps;
    try {
      maps = sframe::read_maps(pid);
    } catch (const sframe::Error&) {
      return;  // gone, or not ours
    }
    for (const sframe::MapsEntry& m : maps) {
      if (m.is_file() && m.executable()) add(pid, &p, m.start, m.end, m.offset, m.name(), &m);
    }
  }

 private:
  struct Proc;
  // entry: the mapping's maps line, when it comes from one (else a
  // side-band record's).
  void add(pid_t pid, Proc* p, uint64_t start, uint64_t end, uint64_t offset,
           const std::string& path, const sframe::MapsEntry* entry = nullptr) {
    const auto key = std::make_tuple(start, end, offset, path);
    if (p->maps.count(key) || end <= start || path.empty()) return;
    // Drop what it replaces.
    for (auto o = p->maps.begin(); o != p->maps.end();) {
      if (std::get<0>(o->first) < end && start < std::get<1>(o->first)) {
        o = p->maps.erase(o);
      } else {
        ++o;
      }
    }
    // A side-band record may come after the mapping is gone: then the
    // build id is read by path.
    const std::string build_id =
        entry ? ids_.of_mapping(pid, *entry) : ids_.of_mapping(pid, start, end, path);
    p->maps.emplace(key, build_id);
    w_->mapping({pid, start, end, offset, path, build_id});
  }

  struct Proc {
    bool exited = false;  // its exit record was seen
    std::string comm;
    // (start, end, offset, path): build id
    std::map<std::tuple<uint64_t, uint64_t, uint64_t, std::string>, std::string> maps;
    uint64_t next_read = 0;
    bool covers(uint64_t ip) const {
      for (const auto& m : maps) {
        if (ip >= std::get<0>(m.first) && ip < std::get<1>(m.first)) return true;
      }
      return false;
    }
  };
  sframe::ProfileWriter* w_;
  sframe::MappedObjectIds ids_;
  std::map<pid_t, Proc> procs_;
};

// The status line on stderr: rewritten (\r) at most 4 times a second on a
// terminal, else printed once at the end.
class Status {
 public:
  Status() : tty_(isatty(STDERR_FILENO) == 1), start_(tools::now_ms()) {}
  void update(uint64_t samples, uint64_t lost, bool final) {
    const uint64_t now = tools::now_ms();
    if (!final && (!tty_ || now < next_)) return;
    next_ = now + 250;
    std::fprintf(stderr, "%s%s: %" PRIu64 " samples, %" PRIu64 " lost, %.1f s%s", tty_ ? "\r" : "",
                 kTool, samples, lost, double(now - start_) / 1000.0,
                 final ? "\n" : (tty_ ? "\033[K" : ""));
    std::fflush(stderr);
  }

 private:
  bool tty_;
  uint64_t start_;
  uint64_t next_ = 0;
};

// /proc/sys/kernel/perf_event_max_sample_rate, or 0 when unreadable.
uint64_t max_sample_rate() {
  const std::string line = read_line_of("/proc/sys/kernel/perf_event_max_sample_rate");
  return line.empty() ? 0 : std::strtoull(line.c_str(), nullptr, 10);
}

// The process a thread belongs to (its Tgid), or tid when unreadable.
pid_t process_of(pid_t tid) {
  std::ifstream in("/proc/" + std::to_string(tid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Tgid:", 0) == 0) return static_cast<pid_t>(std::atol(line.c_str() + 5));
  }
  return tid;
}

// Whether pid runs a program of its own, no longer the copy of this tool
// it was forked as (or is gone).
bool exec_done(pid_t pid) {
  struct stat self {}, st {};
  if (::stat("/proc/self/exe", &self) != 0) return true;
  const std::string exe = "/proc/" + std::to_string(pid) + "/exe";
  return ::stat(exe.c_str(), &st) != 0 || st.st_ino != self.st_ino || st.st_dev != self.st_dev;
}

std::string join(const std::vector<pid_t>& v) {
  std::string out;
  for (pid_t p : v) out += (out.empty() ? "" : ",") + std::to_string(p);
  return out;
}

// The usage error of a subcommand: perf's "  Error: ..." then the usage.
int usage_error(const prof::ParseResult& r, const std::string& usage, const char* sub) {
  std::fprintf(stderr, "%s\n\n%s\n (%s %s --help lists the options)\n", r.error.c_str(),
               usage.c_str(), kTool, sub);
  return prof::kUsageExit;
}

// A failure of a subcommand: the error, and what to do about it.
int failed(const std::exception& e, const std::string& device) {
  std::fprintf(stderr, "%s: %s\n", kTool, e.what());
  if (const auto* se = dynamic_cast<const sframe::Error*>(&e)) {
    const std::string a = advice(*se, device);
    if (!a.empty()) std::fprintf(stderr, "%s: %s\n", kTool, a.c_str());
  }
  return 1;
}

// What record samples, where, and which session takes the samples: made
// from the options before anything is opened.
struct RecordPlan {
  sframe::PerfEventSpec spec;
  bool follow = false;  // side-band events and descendants' coverage
  sframe::Target target = sframe::Target::kEvents;
  pid_t target_id = 0;
  std::vector<pid_t> processes;  // the processes given (-p, and those of -t)
  std::string what;              // "pid 42 (3 threads) on 2 CPUs", for messages
};

// The plan for the options; for a command target, pid is the command's.
RecordPlan plan_record(const prof::RecordOptions& o, pid_t command_pid) {
  RecordPlan p;
  sframe::PerfEventSpec& s = p.spec;
  s.kind = o.event;
  s.frequency = o.frequency;
  // The session gets the samples; perf's own records would cost each one
  // (perf_event.h).  The side-band events keep their ring.
  s.data_pages_log2 = sframe::kPerfEventNoRing;
  s.period = o.period;
  s.cpus = o.cpus;
  const size_t ncpu = o.cpus.empty() ? sframe::online_cpus().size() : o.cpus.size();
  const std::string on = " on " + std::to_string(ncpu) + (ncpu == 1 ? " CPU" : " CPUs");
  if (o.cpu_wide()) {
    s.all_tasks = true;
    s.inherit = false;
    p.target = sframe::Target::kAll;
    p.what = "every task" + on;
    return p;
  }
  if (o.command_is_target()) {
    // The command's events arm at its exec and follow its threads; its
    // child processes too unless --no-inherit (then the session takes the
    // process's samples only).
    s.pids = {command_pid};
    s.enable_on_exec = true;
    s.inherit = true;
    p.follow = o.inherit;
    p.target = p.follow ? sframe::Target::kEvents : sframe::Target::kProcess;
    p.target_id = p.follow ? 0 : command_pid;
    p.processes = {command_pid};
    p.what = "the command" + on;
    return p;
  }
  s.pids = o.pids;
  s.tids = o.tids;
  p.processes = o.pids;
  for (pid_t tid : o.tids) {
    const pid_t proc = process_of(tid);
    if (std::find(p.processes.begin(), p.processes.end(), proc) == p.processes.end()) {
      p.processes.push_back(proc);
    }
  }
  if (o.pids.size() == 1 && o.tids.empty()) {
    // One process: its events follow its threads; --no-inherit keeps the
    // session to the process (not the processes it creates).
    s.inherit = true;
    p.follow = o.inherit;
    p.target = p.follow ? sframe::Target::kEvents : sframe::Target::kProcess;
    p.target_id = p.follow ? 0 : o.pids[0];
  } else {
    // Several, or threads: the session takes what their events sample;
    // --no-inherit: the existing threads only.
    s.inherit = o.inherit;
    p.follow = o.inherit;
    p.target = sframe::Target::kEvents;
  }
  sframe::PerfEventSpec threads = s;
  threads.inherit = false;
  threads.cpus.clear();
  const size_t nthreads = sframe::PerfEvent::count(threads);
  std::string who;
  if (!o.pids.empty()) who = (o.pids.size() == 1 ? "pid " : "pids ") + join(o.pids);
  if (!o.tids.empty()) {
    who += (who.empty() ? "" : " and ") + std::string(o.tids.size() == 1 ? "tid " : "tids ") +
           join(o.tids);
  }
  p.what = who + " (" + std::to_string(nthreads) + (nthreads == 1 ? " thread)" : " threads)") + on;
  return p;
}

int record(prof::RecordOptions& o) {
  const std::string device = o.device.empty() ? std::string(SFRAME_UNWIND_DEVICE) : o.device;
  const bool command = !o.command.empty();
  const bool fp_only = o.call_graph == prof::CallGraph::kFp;

  // The checks a user can act on, before anything starts.  The kernel
  // refuses a frequency above its limit (EINVAL): perf throttles to it,
  // with a warning, or refuses with --strict-freq.
  if (!o.period) {
    const uint64_t max = max_sample_rate();
    if (o.frequency_max) {
      if (!max) throw sframe::Error(ENOENT, sframe::op::kOpen, "/proc/sys/kernel/perf_event_max_sample_rate");
      o.frequency = max;
    } else if (max && o.frequency > max) {
      if (o.strict_freq) {
        std::fprintf(stderr,
                     "%s: error: Maximum frequency rate (%" PRIu64 " Hz) exceeded.\n"
                     "       Please use -F freq option with a lower value or consider\n"
                     "       tweaking /proc/sys/kernel/perf_event_max_sample_rate.\n",
                     kTool, max);
        return 1;
      }
      std::fprintf(stderr,
                   "%s: warning: Maximum frequency rate (%" PRIu64
                   " Hz) exceeded, throttling from %" PRIu64 " Hz to %" PRIu64 " Hz.\n"
                   "         The limit can be raised via "
                   "/proc/sys/kernel/perf_event_max_sample_rate.\n"
                   "         The kernel will lower it when perf's interrupts take too long.\n"
                   "         Use --strict-freq to disable this throttling, refusing to record.\n",
                   kTool, max, o.frequency, max);
      o.frequency = max;
    }
  }
  if (!o.cpus.empty()) {
    const std::vector<int> online = sframe::online_cpus();
    for (int cpu : o.cpus) {
      if (!std::binary_search(online.begin(), online.end(), cpu)) {
        throw sframe::Error(ENODEV, "record", "-C " + o.cpu_list,
                            "cpu " + std::to_string(cpu) + " is not online (online: " +
                                read_line_of("/sys/devices/system/cpu/online") + ")");
      }
    }
  }
  { sframe::Device probe(device); }
  for (pid_t pid : o.pids) {
    if (kill(pid, 0) != 0 && errno == ESRCH) {
      throw sframe::Error(ESRCH, "profile", "pid " + std::to_string(pid));
    }
  }
  for (pid_t tid : o.tids) {
    if (::access(("/proc/" + std::to_string(tid)).c_str(), F_OK) != 0) {
      throw sframe::Error(ESRCH, "profile", "tid " + std::to_string(tid));
    }
  }

  // The command (target or timer) waits until its events exist.
  std::unique_ptr<tools::StoppedCommand> child;
  std::vector<char*> cargv;
  if (command) {
    for (std::string& a : o.command) cargv.push_back(&a[0]);
    cargv.push_back(nullptr);
    child = std::make_unique<tools::StoppedCommand>(cargv.data(), kTool);
  }
  const pid_t child_pid = child ? child->pid() : 0;
  RecordPlan plan = plan_record(o, child_pid);
  const bool follow = plan.follow;
  const size_t events = sframe::PerfEvent::count(plan.spec) +
                        (follow ? sframe::PerfEvent::count(tools::task_events_spec(plan.spec)) : 0);
  // The rest: stdio, the device and session, the data file, the objects the
  // recording holds open, perf_event_paranoid and /proc reads.  Of these,
  // the objects get what the others (kOtherDescriptors) leave, more where
  // RLIMIT_NOFILE has room (tools::objects_to_hold()).
  constexpr size_t kSpareDescriptors = 64;
  constexpr size_t kOtherDescriptors = 32;
  tools::ensure_descriptors(events, kSpareDescriptors, plan.what, kTool, o.verbose);

  sframe::ProfileWriter out(o.output);
  sframe::SessionOptions so;
  so.device = device;
  so.unwind_flags = prof::unwind_flags(o.call_graph);
  tools::Sampling sampling =
      tools::open_sampling(plan.spec, follow, plan.target, plan.target_id, so);
  sframe::PerfEvent& ev = sampling.event;
  sframe::Session& session = sampling.session;
  sframe::PerfEvent& tasks = sampling.tasks;

  if (o.period) {
    out.meta("period", std::to_string(o.period));
  } else {
    out.meta("hz", std::to_string(o.frequency));
  }
  out.meta("event", o.event_name);
  out.meta("call_graph", prof::call_graph_name(o.call_graph));
  out.meta("kernel", session.kernel_visible() ? "visible" : "hidden");
  out.meta("boot_id", boot_id());
  std::string target;
  if (o.cpu_wide()) {
    target = o.cpu_list.empty() ? "all" : "cpus " + o.cpu_list;
  } else if (o.command_is_target()) {
    target = "command";
  } else {
    if (!o.pids.empty()) target = "pid " + join(o.pids);
    if (!o.tids.empty()) target += (target.empty() ? "" : " ") + std::string("tid ") + join(o.tids);
    if (!o.cpu_list.empty()) target += " cpus " + o.cpu_list;
  }
  for (const std::string& a : o.command) target += " " + a;
  out.meta("target", target);
  if (!o.cpu_wide()) out.meta("inherit", follow ? "yes" : "no");

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  // The coverage service: its store is used while the module's discovery
  // (which attaches it) is on.
  pid_t coverd = 0;
  if (!fp_only && o.coverage != prof::CoverageMode::kProcess) {
    coverd = sframe::coverage_service_pid();
    const char* why = !coverd ? "sframe-coverd does not run"
                      : !sframe::module_discovery_enabled()
                          ? "the module's discovery is off (parameter discovery=N), which "
                            "attaches the store's sections"
                          : nullptr;
    if (why && o.coverage == prof::CoverageMode::kService) {
      std::fprintf(stderr, "%s: --coverage service: %s\n", kTool, why);
      return 1;
    }
    if (why) coverd = 0;
  }
  std::unique_ptr<sframe::Device> store_device;
  sframe::FileStoreStats store_at_start;
  if (coverd) {
    store_device = std::make_unique<sframe::Device>(device);
    store_at_start = store_device->file_store_stats();
  }
  out.meta("coverage", fp_only ? "none" : coverd ? "sframe-coverd" : "per-process");

  // Every object the recording reads (coverage, the mapping records' build
  // ids), each file opened once, and the SFrame made of each once.
  tools::RecordingObjects recording(tools::objects_to_hold(events + kOtherDescriptors));
  // SFrame from .eh_frame for the targets' objects (none needed with
  // --call-graph fp): from sframe-coverd's file store when the service
  // runs (the module attaches a covered file's section to every mapping of
  // it by itself, from the process's first instruction: nothing to supply,
  // no /proc to read), else made and supplied per process here.
  const bool per_process = !fp_only && !coverd;
  std::vector<std::unique_ptr<tools::CoverageKeeper>> coverage;
  if (per_process) {
    for (pid_t pid : plan.processes) {
      coverage.push_back(std::make_unique<tools::CoverageKeeper>(
          pid, o.command_is_target(), kTool, o.verbose, &recording));
    }
  }
  std::unique_ptr<tools::DescendantCoverage> descendants;
  if (follow && per_process) {
    descendants = std::make_unique<tools::DescendantCoverage>(kTool, o.verbose, &recording);
  }
  // CPU-wide: every process sampled (machine_coverage.h), the objects most
  // of them map made before the recording starts (2 s at most).
  std::unique_ptr<tools::MachineCoverage> machine;
  if (o.cpu_wide() && per_process) {
    machine = std::make_unique<tools::MachineCoverage>(kTool, o.verbose, &recording.objects);
    machine->prepare(2000);
  }
  if (o.command_is_target() && !coverage.empty()) coverage[0]->prepare(child->program());
  for (auto& c : coverage) c->begin();
  MappingTracker tracker(&out, &recording.objects);
  if (!o.command_is_target()) {
    for (pid_t pid : plan.processes) tracker.snapshot(pid);
  }
  const uint64_t start_ms = tools::now_ms();
  if (o.command_is_target()) {
    child->start();
  } else {
    for (auto& c : coverage) c->refresh();  // covered before the first sample
    if (machine) machine->refresh();
    ev.enable();
    if (follow) tasks.enable();
    if (child) child->start();  // the timer starts with the recording
  }
  auto any_eager = [&] {
    for (auto& c : coverage) {
      if (c->eager()) return true;
    }
    return (descendants && descendants->eager()) || (machine && machine->busy());
  };

  Status status;
  uint64_t samples = 0, lost = 0;
  std::vector<sframe::Record> recs;
  std::vector<sframe::TaskEvent> news;
  // Side-band records not written yet, oldest first: each goes into the
  // file before the first sample taken after it, so that the report reads
  // a process's name and mappings before its samples.  A sample reaches us
  // at most sample_max_wait_ms (250 ms by default) after it was taken, so
  // a record older than kHoldNs precedes every sample still to come.
  constexpr uint64_t kHoldNs = 1000000000;
  std::deque<sframe::TaskEvent> held;
  auto write_held = [&](uint64_t until_ns) {
    while (!held.empty() && held.front().time <= until_ns) {
      tracker.note(held.front());
      held.pop_front();
    }
  };
  std::vector<pollfd> fds;
  fds.push_back({session.fd(), POLLIN, 0});
  for (size_t i = 0; i < tasks.size(); i++) fds.push_back({tasks.fd(i), POLLIN, 0});
  auto consume = [&](int timeout) {
    recs.clear();
    size_t n = 0;
    if (follow) {
      for (pollfd& f : fds) f.revents = 0;
      if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
        throw sframe::Error(errno, sframe::op::kSessionPoll, "session and perf side-band");
      }
      // An event whose task exited says POLLHUP for good; its ring (which
      // the children's inherited events write into) is still read.
      for (size_t i = 1; i < fds.size(); i++) {
        if (fds[i].revents & (POLLHUP | POLLERR)) fds[i].fd = -1;
      }
      n = sampling.read(&recs);
      news.clear();
      n += tasks.read_task_events(&news);
      // New processes are covered first, then the records are filed.
      if (descendants) {
        for (const sframe::TaskEvent& t : news) descendants->note(t);
        descendants->refresh();
      }
      std::sort(news.begin(), news.end(), [](const sframe::TaskEvent& a,
                                             const sframe::TaskEvent& b) { return a.time < b.time; });
      std::deque<sframe::TaskEvent> merged;
      std::merge(held.begin(), held.end(), news.begin(), news.end(), std::back_inserter(merged),
                 [](const sframe::TaskEvent& a, const sframe::TaskEvent& b) {
                   return a.time < b.time;
                 });
      held.swap(merged);
    } else {
      n = sampling.poll_read(&recs, timeout);
    }
    for (const sframe::Record& r : recs) {
      if (r.is_sample()) {
        write_held(r.sample.time);
        tracker.before_sample(r.sample);
        if (machine) machine->note_sample(static_cast<pid_t>(r.sample.pid));
        out.sample(r.sample);
        samples++;
      } else if (r.is_lost()) {
        out.lost(r.lost);
        lost += r.lost;
      }
    }
    if (follow) {
      const uint64_t now_ns = tools::now_ns();
      if (now_ns > kHoldNs) write_held(now_ns - kHoldNs);
    }
    return n;
  };
  int child_status = -1;
  bool timed_out = false;
  uint64_t next_snapshot = 0;
  while (!g_signal) {
    for (auto& c : coverage) c->refresh();
    if (machine) machine->refresh();
    // The targets' mappings, while they can still be read (following, the
    // side-band records say what they map).
    if (!o.cpu_wide() && !follow && tools::now_ms() >= next_snapshot &&
        (!o.command_is_target() || exec_done(child_pid))) {
      for (pid_t pid : plan.processes) tracker.snapshot(pid);
      next_snapshot = tools::now_ms() + (any_eager() ? 20 : 250);
    }
    consume(any_eager() ? 10 : 100);
    status.update(samples, lost, false);
    if (o.duration_ms && tools::now_ms() - start_ms >= o.duration_ms) {
      timed_out = true;
      break;
    }
    if (command) {
      int st;
      if (waitpid(child_pid, &st, WNOHANG) == child_pid) {
        child_status = st;
        break;
      }
    } else if (!o.cpu_wide()) {
      bool all_gone = true;
      for (pid_t pid : plan.processes) all_gone = all_gone && process_gone(pid);
      if (all_gone) break;
    }
  }
  // Interrupted or out of time: the command gets the signal (as from a
  // terminal; SIGTERM at the end of --duration), and is waited for
  // (killed after 5 s).
  if (command && child_status < 0) {
    kill(child_pid, g_signal ? g_signal : SIGTERM);
    for (uint64_t until = tools::now_ms() + 5000; child_status < 0;) {
      int st;
      if (waitpid(child_pid, &st, WNOHANG) == child_pid) {
        child_status = st;
      } else if (tools::now_ms() > until) {
        kill(child_pid, SIGKILL);
        until = UINT64_MAX;
      } else {
        consume(20);
      }
    }
  }
  ev.disable();
  for (uint64_t quiet_since = tools::now_ms(); tools::now_ms() - quiet_since < 300;) {
    if (consume(100)) quiet_since = tools::now_ms();
  }
  write_held(UINT64_MAX);
  const sframe::SessionStats st = session.stats();
  if (st.lost_capture) out.meta("lost_at_capture", std::to_string(st.lost_capture));
  out.close();
  status.update(samples, lost, true);
  if (machine) std::fprintf(stderr, "%s: %s\n", kTool, machine->summary().c_str());
  if (coverd) {
    const sframe::FileStoreStats now = store_device->file_store_stats();
    std::fprintf(stderr,
                 "%s: SFrame from sframe-coverd's file store (pid %d): %" PRIu64
                 " files, %" PRIu64 " bytes; %" PRIu64 " mappings attached while recording\n",
                 kTool, static_cast<int>(coverd), now.entries, now.bytes,
                 now.attaches - store_at_start.attaches);
  }
  if (o.verbose) {
    std::fprintf(stderr,
                 "%s: wrote %s (%" PRIu64 " samples, %" PRIu64 " lost in the buffer, %" PRIu64
                 " lost at capture)\n",
                 kTool, o.output.c_str(), samples, st.lost, st.lost_capture);
  }
  // The command's status, unless the recording ended it (--duration).
  if (command && !timed_out) return tools::exit_code(child_status);
  return 0;
}

int cmd_record(const std::vector<std::string>& args) {
  prof::RecordOptions o;
  const prof::ParseResult r = prof::parse_record(args, &o);
  if (r.kind == prof::ParseResult::kHelp) {
    std::fputs(prof::record_help().c_str(), stdout);
    return 0;
  }
  if (r.kind == prof::ParseResult::kError) return usage_error(r, prof::record_usage(), "record");
  for (const std::string& w : r.warnings) std::fprintf(stderr, "%s: warning: %s\n", kTool, w.c_str());
  try {
    return record(o);
  } catch (const std::exception& e) {
    return failed(e, o.device.empty() ? std::string(SFRAME_UNWIND_DEVICE) : o.device);
  }
}

// Where report's text goes: stdout, or the file of -o (created 0600, as
// the data file: profiles hold command lines and addresses).
class ReportOutput {
 public:
  explicit ReportOutput(const std::string& path) : path_(path.empty() ? "-" : path) {
    if (path_ == "-") return;
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) throw sframe::Error(errno, sframe::op::kOpen, path_);
    f_ = fdopen(fd, "w");
    if (!f_) {
      const int err = errno;
      ::close(fd);
      throw sframe::Error(err, sframe::op::kOpen, path_);
    }
  }
  ~ReportOutput() {
    if (f_ != stdout) std::fclose(f_);
  }
  ReportOutput(const ReportOutput&) = delete;
  ReportOutput& operator=(const ReportOutput&) = delete;
  FILE* get() const { return f_; }
  // Throws sframe::Error("write", path) on a write error.
  void close() {
    const bool ok = std::fflush(f_) == 0 && !std::ferror(f_);
    const int err = errno ? errno : EIO;
    if (f_ != stdout) {
      FILE* f = f_;
      f_ = stdout;
      if (std::fclose(f) != 0 && ok) throw sframe::Error(errno, "write", path_);
    }
    if (!ok) throw sframe::Error(err, "write", path_);
  }

 private:
  std::string path_;
  FILE* f_ = stdout;
};

int report(const prof::ReportOptions& o) {
  const std::string& input = o.input;
  // Kernel symbols only for a file recorded since this boot (KASLR).
  struct BootCheck : sframe::ProfileHandler {
    std::string boot;
    void on_meta(const std::string& k, const std::string& v) override {
      if (k == "boot_id") boot = v;
    }
  } boot;
  sframe::read_profile(input, &boot);
  std::unique_ptr<sframe::KernelSymbolizer> ksym;
  if (!boot.boot.empty() && boot.boot == boot_id()) {
    ksym = std::make_unique<sframe::KernelSymbolizer>();
  }
  sframe::Symbolizer sym;
  if (o.format == prof::ReportFormat::kPprof) {
    sframe::PprofBuilder pprof(&sym, ksym.get());
    sframe::read_profile(input, &pprof);
    sframe::write_file(o.output, pprof.gzipped());
    std::fprintf(stderr, "%s: wrote %s (%" PRIu64 " samples)\n", kTool, o.output.c_str(),
                 pprof.samples());
    return 0;
  }
  if (o.format == prof::ReportFormat::kPerfScript) {
    ReportOutput out(o.output);
    sframe::PerfScriptWriter script(out.get(), &sym, ksym.get());
    sframe::read_profile(input, &script);
    out.close();
    return 0;
  }
  sframe::StackFolder folder(&sym, ksym.get());
  sframe::read_profile(input, &folder);
  const sframe::FoldedStacks folded = folder.folded();

  switch (o.format) {
    case prof::ReportFormat::kFolded: {
      ReportOutput out(o.output);
      const std::string text = sframe::format_folded(folded);
      std::fwrite(text.data(), 1, text.size(), out.get());
      out.close();
      break;
    }
    case prof::ReportFormat::kSvg: {
      sframe::FlamegraphOptions fo;
      fo.title = "sframe-prof " + input;
      const std::string& svg = o.svg.empty() ? o.output : o.svg;
      sframe::write_file(svg, sframe::render_flamegraph_svg(folded, fo));
      std::fprintf(stderr, "%s: wrote %s (%" PRIu64 " samples)\n", kTool, svg.c_str(),
                   folder.samples());
      break;
    }
    case prof::ReportFormat::kTop: {
      ReportOutput out(o.output);
      const uint64_t total = sframe::total_samples(folded);
      std::fprintf(out.get(), "# %s: %" PRIu64 " samples, %" PRIu64 " lost\n", input.c_str(),
                   total, folder.lost());
      auto pct = [total](uint64_t n) { return total ? 100.0 * double(n) / double(total) : 0.0; };
      for (bool by_total : {false, true}) {
        std::fprintf(out.get(), "\n# by %s samples\n%7s %8s %7s %8s  %s\n",
                     by_total ? "total" : "self", "SELF%", "SELF", "TOTAL%", "TOTAL", "FUNCTION");
        for (const sframe::FunctionCount& f : sframe::top_functions(folded, o.top, by_total)) {
          std::fprintf(out.get(), "%6.2f%% %8" PRIu64 " %6.2f%% %8" PRIu64 "  %s\n", pct(f.self),
                       f.self, pct(f.total), f.total, f.name.c_str());
        }
      }
      out.close();
      break;
    }
    case prof::ReportFormat::kPprof:
    case prof::ReportFormat::kPerfScript:
      break;  // above
  }
  return 0;
}

int cmd_report(const std::vector<std::string>& args) {
  prof::ReportOptions o;
  const prof::ParseResult r = prof::parse_report(args, &o);
  if (r.kind == prof::ParseResult::kHelp) {
    std::fputs(prof::report_help().c_str(), stdout);
    return 0;
  }
  if (r.kind == prof::ParseResult::kError) return usage_error(r, prof::report_usage(), "report");
  const bool to_file_only =
      o.format == prof::ReportFormat::kPprof ||
      (o.format == prof::ReportFormat::kSvg && o.svg.empty());
  if (to_file_only && (o.output.empty() || o.output == "-")) {
    prof::ParseResult needs;
    needs.error = std::string("  Error: --format ") +
                  (o.format == prof::ReportFormat::kPprof ? "pprof" : "svg") +
                  " writes a file: give it with -o FILE";
    return usage_error(needs, prof::report_usage(), "report");
  }
  try {
    return report(o);
  } catch (const std::exception& e) {
    return failed(e, SFRAME_UNWIND_DEVICE);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(prof::main_help().c_str(), stderr);
    return prof::kUsageExit;
  }
  const std::string cmd = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "record") return cmd_record(args);
  if (cmd == "report") return cmd_report(args);
  if (cmd == "--version" || cmd == "version" || cmd == "-v") {
    std::printf("%s version %s\n", kTool, SFRAME_PROF_VERSION);
    return 0;
  }
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    if (cmd == "help" && !args.empty() && args[0] == "record") {
      std::fputs(prof::record_help().c_str(), stdout);
    } else if (cmd == "help" && !args.empty() && args[0] == "report") {
      std::fputs(prof::report_help().c_str(), stdout);
    } else {
      std::fputs(prof::main_help().c_str(), stdout);
    }
    return 0;
  }
  std::fprintf(stderr, "%s: '%s' is not a %s command. See '%s --help'.\n", kTool, cmd.c_str(),
               kTool, kTool);
  return 1;
}
