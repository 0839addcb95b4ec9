// sframe-prof: the profiler.  Records stitched stacks (kernel + user,
// unwound by the sframe_unwind module) into a data file, and reports them
// offline: folded stacks, a table of the hottest functions, a flame graph.
//
//   sframe-prof record [-F HZ] [-o FILE] [-v] [--no-inherit] [--device PATH]
//                      (-p PID | -a | -- COMMAND ARGS...)
//   sframe-prof report [-i FILE] [--folded | --top N | --svg FILE]
//                      [--format top|folded|svg|pprof|perf-script] [-o FILE]
//
// The data file's format: docs/sframe-prof-format.md.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
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
#include "sframe_client/sframe_client.hpp"
#include "sframe_profile/build_ids.h"
#include "sframe_profile/flamegraph.h"
#include "sframe_profile/perf_script.h"
#include "sframe_profile/pprof_writer.h"
#include "sframe_profile/profile.h"
#include "sframe_profile/symbolizer.h"

namespace {

constexpr const char kTool[] = "sframe-prof";
constexpr const char kDefaultFile[] = "sframe-prof.data";

volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

int usage(FILE* out) {
  std::fprintf(out,
               "usage: sframe-prof record [-F HZ] [-o FILE] [-v] [--no-inherit] [--device PATH] "
               "(-p PID | -a | -- COMMAND [ARGS...])\n"
               "       sframe-prof report [-i FILE] [--folded | --top N | --svg FILE]\n"
               "                          [--format top|folded|svg|pprof|perf-script] [-o FILE]\n"
               "record writes stitched stacks to FILE (default %s); report reads it.\n"
               "report --format pprof -o FILE: gzipped profile.proto (pprof, Pyroscope, Parca);\n"
               "perf-script: the text of `perf script` (stackcollapse-perf.pl, speedscope).\n"
               "record follows the threads and child processes the target creates, and what\n"
               "they exec; --no-inherit: the target process (its threads) only.\n",
               kDefaultFile);
  return out == stderr ? 2 : 0;
}

bool parse_number(const char* s, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-') return false;
  *out = v;
  return true;
}

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
  return "";
}

// The mmap and comm lines: a snapshot of a process's executable file
// mappings when it is first seen, again when one of its addresses is
// outside them (at most every 200 ms per process), and periodically for the
// target.  Only what changed is written; a mapping replaces the ones it
// overlaps (see the format).  Each mapping record carries the object's
// build id, read once per object (MappedObjectIds).
class MappingTracker {
 public:
  explicit MappingTracker(sframe::ProfileWriter* w) : w_(w) {}

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
    std::vector<sframe::FileMapping> maps;
    if (pid == 0 || !sframe::read_file_mappings(pid, &maps)) return;
    for (const sframe::FileMapping& m : maps) {
      if (m.executable) add(pid, &p, m.start, m.end, m.offset, m.path);
    }
  }

 private:
  struct Proc;
  void add(pid_t pid, Proc* p, uint64_t start, uint64_t end, uint64_t offset,
           const std::string& path) {
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
    const std::string build_id = ids_.of_mapping(pid, start, end, path);
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

int cmd_record(int argc, char** argv) {
  uint64_t hz = 1000;
  std::string output = kDefaultFile;
  std::string device = SFRAME_UNWIND_DEVICE;
  pid_t pid = 0;
  bool all = false, verbose = false, inherit = true;
  int cmd_at = -1;
  for (int i = 0; i < argc; i++) {
    const std::string a = argv[i];
    uint64_t v = 0;
    if (a == "--") {
      cmd_at = i + 1;
      break;
    } else if (a == "-F" && i + 1 < argc && parse_number(argv[i + 1], &v) && v > 0) {
      hz = v;
      i++;
    } else if (a == "-o" && i + 1 < argc) {
      output = argv[++i];
    } else if (a == "-p" && i + 1 < argc && parse_number(argv[i + 1], &v) && v > 0 &&
               v <= INT32_MAX) {
      pid = static_cast<pid_t>(v);
      i++;
    } else if (a == "-a") {
      all = true;
    } else if (a == "-v") {
      verbose = true;
    } else if (a == "--no-inherit") {
      inherit = false;
    } else if (a == "--device" && i + 1 < argc) {
      device = argv[++i];
    } else {
      return usage(stderr);
    }
  }
  const bool command = cmd_at >= 0 && cmd_at < argc;
  if ((int(command) + int(pid > 0) + int(all)) != 1) return usage(stderr);

  // The checks a user can act on, before anything starts.
  { sframe::Device probe(device); }
  if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
    throw sframe::Error(ESRCH, "profile", "pid " + std::to_string(pid));
  }
  sframe::ProfileWriter out(output);

  std::unique_ptr<tools::StoppedCommand> child;
  if (command) {
    child = std::make_unique<tools::StoppedCommand>(argv + cmd_at, kTool);
    pid = child->pid();
  }
  sframe::SessionOptions so;
  so.device = device;
  const bool follow = inherit && !all;
  tools::Sampling sampling = tools::open_sampling(pid, all, command, follow, hz, so);
  sframe::PerfEvent& ev = sampling.event;
  sframe::Session& session = sampling.session;
  sframe::PerfEvent& tasks = sampling.tasks;

  out.meta("hz", std::to_string(hz));
  out.meta("kernel", session.kernel_visible() ? "visible" : "hidden");
  out.meta("boot_id", boot_id());
  std::string target = all ? "all" : command ? "command" : "pid " + std::to_string(pid);
  if (command) {
    for (int i = cmd_at; i < argc; i++) target += std::string(" ") + argv[i];
  }
  out.meta("target", target);
  if (!all) out.meta("inherit", follow ? "yes" : "no");

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::unique_ptr<tools::CoverageKeeper> coverage;
  if (!all) coverage = std::make_unique<tools::CoverageKeeper>(pid, command, kTool, verbose);
  std::unique_ptr<tools::DescendantCoverage> descendants;
  if (follow) descendants = std::make_unique<tools::DescendantCoverage>(kTool, verbose);
  // -a: every process sampled (machine_coverage.h).
  std::unique_ptr<tools::MachineCoverage> machine;
  if (all) machine = std::make_unique<tools::MachineCoverage>(kTool, verbose);
  if (machine) machine->prepare(2000);
  if (command) coverage->prepare(child->program());
  coverage ? coverage->begin() : void();
  MappingTracker tracker(&out);
  if (!command && !all) tracker.snapshot(pid);
  if (command) {
    child->start();
  } else {
    if (coverage) coverage->refresh();  // covered before the first sample
    if (machine) machine->refresh();
    ev.enable();
    if (follow) tasks.enable();
  }

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
      n = session.read(&recs);
      news.clear();
      n += tasks.read_task_events(&news);
      // New processes are covered first, then the records are filed.
      for (const sframe::TaskEvent& t : news) descendants->note(t);
      descendants->refresh();
      std::sort(news.begin(), news.end(), [](const sframe::TaskEvent& a,
                                             const sframe::TaskEvent& b) { return a.time < b.time; });
      std::deque<sframe::TaskEvent> merged;
      std::merge(held.begin(), held.end(), news.begin(), news.end(), std::back_inserter(merged),
                 [](const sframe::TaskEvent& a, const sframe::TaskEvent& b) {
                   return a.time < b.time;
                 });
      held.swap(merged);
    } else {
      n = session.poll_read(&recs, timeout);
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
    ev.drain();
    return n;
  };
  int child_status = -1;
  uint64_t next_snapshot = 0;
  while (!g_signal) {
    if (coverage) coverage->refresh();
    if (machine) machine->refresh();
    // The target's mappings, while it can still be read (following, the
    // side-band records say what it maps).
    if (!all && !follow && tools::now_ms() >= next_snapshot &&
        (!command || coverage->exec_done())) {
      tracker.snapshot(pid);
      next_snapshot = tools::now_ms() + (coverage->eager() ? 20 : 250);
    }
    consume((coverage && coverage->eager()) || (descendants && descendants->eager()) ||
                    (machine && machine->busy())
                ? 10
                : 100);
    status.update(samples, lost, false);
    if (command) {
      int st;
      if (waitpid(pid, &st, WNOHANG) == pid) {
        child_status = st;
        break;
      }
    } else if (!all && process_gone(pid)) {
      break;
    }
  }
  // Interrupted: the command gets the same signal (as from a terminal),
  // and is waited for (killed after 5 s).
  if (command && child_status < 0) {
    kill(pid, g_signal ? g_signal : SIGTERM);
    for (uint64_t until = tools::now_ms() + 5000; child_status < 0;) {
      int st;
      if (waitpid(pid, &st, WNOHANG) == pid) {
        child_status = st;
      } else if (tools::now_ms() > until) {
        kill(pid, SIGKILL);
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
  if (verbose) {
    std::fprintf(stderr,
                 "%s: wrote %s (%" PRIu64 " samples, %" PRIu64 " lost in the buffer, %" PRIu64
                 " lost at capture)\n",
                 kTool, output.c_str(), samples, st.lost, st.lost_capture);
  }
  if (command) return tools::exit_code(child_status);
  return 0;
}

int cmd_report(int argc, char** argv) {
  std::string input = kDefaultFile, svg, output;
  enum { kTop, kFolded, kSvg, kPprof, kPerfScript } mode = kTop;
  const std::map<std::string, decltype(mode)> formats = {{"top", kTop},
                                                         {"folded", kFolded},
                                                         {"svg", kSvg},
                                                         {"pprof", kPprof},
                                                         {"perf-script", kPerfScript}};
  uint64_t top = 20;
  for (int i = 0; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "-i" && i + 1 < argc) {
      input = argv[++i];
    } else if (a == "--folded") {
      mode = kFolded;
    } else if (a == "--top" && i + 1 < argc && parse_number(argv[i + 1], &top) && top > 0) {
      mode = kTop;
      i++;
    } else if (a == "--svg" && i + 1 < argc) {
      mode = kSvg;
      svg = argv[++i];
    } else if (a == "--format" && i + 1 < argc && formats.count(argv[i + 1])) {
      mode = formats.at(argv[++i]);
    } else if (a == "-o" && i + 1 < argc) {
      output = argv[++i];
    } else {
      return usage(stderr);
    }
  }
  if (mode == kSvg && svg.empty()) svg = output;
  if ((mode == kSvg && svg.empty()) || (mode == kPprof && output.empty())) {
    std::fprintf(stderr, "%s: report --format %s needs -o FILE\n", kTool,
                 mode == kSvg ? "svg" : "pprof");
    return 2;
  }
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
  if (mode == kPprof) {
    sframe::PprofBuilder pprof(&sym, ksym.get());
    sframe::read_profile(input, &pprof);
    sframe::write_file(output, pprof.gzipped());
    std::fprintf(stderr, "%s: wrote %s (%" PRIu64 " samples)\n", kTool, output.c_str(),
                 pprof.samples());
    return 0;
  }
  if (mode == kPerfScript) {
    FILE* out = stdout;
    if (!output.empty() && output != "-") {
      const int fd = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd < 0 || !(out = fdopen(fd, "w"))) throw sframe::Error(errno, sframe::op::kOpen, output);
    }
    sframe::PerfScriptWriter script(out, &sym, ksym.get());
    sframe::read_profile(input, &script);
    const bool ok = std::fflush(out) == 0 && !std::ferror(out);
    if (out != stdout && std::fclose(out) != 0) throw sframe::Error(errno, "write", output);
    if (!ok) throw sframe::Error(errno ? errno : EIO, "write", output.empty() ? "-" : output);
    return 0;
  }
  sframe::StackFolder folder(&sym, ksym.get());
  sframe::read_profile(input, &folder);
  const sframe::FoldedStacks folded = folder.folded();

  if (mode == kFolded) {
    const std::string text = sframe::format_folded(folded);
    if (!output.empty()) {
      sframe::write_file(output, text);
    } else {
      std::fwrite(text.data(), 1, text.size(), stdout);
    }
  } else if (mode == kSvg) {
    sframe::FlamegraphOptions fo;
    fo.title = "sframe-prof " + input;
    sframe::write_file(svg, sframe::render_flamegraph_svg(folded, fo));
    std::fprintf(stderr, "%s: wrote %s (%" PRIu64 " samples)\n", kTool, svg.c_str(),
                 folder.samples());
  } else {
    if (!output.empty() && output != "-") {
      const int fd = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd < 0) throw sframe::Error(errno, sframe::op::kOpen, output);
      std::fflush(stdout);
      const bool ok = dup2(fd, STDOUT_FILENO) >= 0;
      ::close(fd);
      if (!ok) throw sframe::Error(errno, "dup2", output);
    }
    const uint64_t total = sframe::total_samples(folded);
    std::printf("# %s: %" PRIu64 " samples, %" PRIu64 " lost\n", input.c_str(), total,
                folder.lost());
    auto pct = [total](uint64_t n) { return total ? 100.0 * double(n) / double(total) : 0.0; };
    for (bool by_total : {false, true}) {
      std::printf("\n# by %s samples\n%7s %8s %7s %8s  %s\n", by_total ? "total" : "self", "SELF%",
                  "SELF", "TOTAL%", "TOTAL", "FUNCTION");
      for (const sframe::FunctionCount& f : sframe::top_functions(folded, top, by_total)) {
        std::printf("%6.2f%% %8" PRIu64 " %6.2f%% %8" PRIu64 "  %s\n", pct(f.self), f.self,
                    pct(f.total), f.total, f.name.c_str());
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(stderr);
  const std::string cmd = argv[1];
  std::string device = SFRAME_UNWIND_DEVICE;
  for (int i = 2; i + 1 < argc; i++) {
    if (std::strcmp(argv[i], "--device") == 0) device = argv[i + 1];
    if (std::strcmp(argv[i], "--") == 0) break;
  }
  try {
    if (cmd == "record") return cmd_record(argc - 2, argv + 2);
    if (cmd == "report") return cmd_report(argc - 2, argv + 2);
    if (cmd == "-h" || cmd == "--help" || cmd == "help") return usage(stdout);
  } catch (const sframe::Error& e) {
    std::fprintf(stderr, "%s: %s\n", kTool, e.what());
    const std::string a = advice(e, device);
    if (!a.empty()) std::fprintf(stderr, "%s: %s\n", kTool, a.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kTool, e.what());
    return 1;
  }
  return usage(stderr);
}
