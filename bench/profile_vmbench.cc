// profile_vmbench: what profiling through a session costs the profiled
// program, in the VM (it needs /dev/sframe_unwind; run by
// tests/vm/run-vm.sh --bench).  Prints; asserts nothing about time.
//
// The workload is session_workload's `work` mode (a fixed number of rounds
// in a chain of four functions built with -fomit-frame-pointer and
// --gsframe), started as a child that waits for a byte on stdin, so the
// event and the session are in place before it starts.  For each sampling
// rate (1 kHz, 10 kHz) it runs:
//   none      no event: the baseline
//   perf-only the cpu-clock event with its ring drained, no session: the
//             bare event
//   session   the event, without a perf ring (the session gets the samples;
//             sframe-prof opens its events so), and a session (this
//             module), its records written unparsed to a file in /tmp as
//             they come, as perf record does with its ring's samples:
//             copied out with read() ("read"), or written straight from the
//             mapped buffer ("mapped"), as perf record writes from its
//             mapped ring
//   no ring   the event without a ring and no session (after the sessions,
//             with the module's hook armed): what the event costs by itself
//             as the sessions open it
// and, when `perf` is installed (linux-perf), `perf record -e cpu-clock -F
// HZ --call-graph fp` on the same workload built with frame pointers
// (session_workload_fpbuild) and `--call-graph dwarf` on the same workload.  Each
// is run g_runs times; the median of the workload's own elapsed time is
// shown with the slowdown against the baseline, and bytes per sample (the
// session's read() bytes per record, or perf.data's size per sample).
//
// `profile_vmbench cost [SECONDS [RUNS]]` prints this table alone, with the
// workload calibrated to SECONDS (default 2) and RUNS runs a row (default
// 3), e.g. for a quick comparison of two builds of the module.
//
// Then (alone with the argument `data`) the data files: bytes per sample of
// `sframe-prof record`, `perf record --call-graph fp` and `--call-graph
// dwarf` (-e cpu-clock, 1 kHz) on the demo (examples/demo_workload) and on
// real programs (xz compressing a file, python3), one run each.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "sframe_client/sframe_client.hpp"
#include "sframe_profile/profile.h"

extern char** environ;

namespace {

int g_runs = 3;
double g_target_seconds = 2.0;

struct Child {
  pid_t pid = -1;
  sframe::UniqueFd in, out, err;
  std::string output, errors;
};

// Starts argv with pipes for stdin, stdout, stderr.
Child Spawn(const std::vector<std::string>& args) {
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
    throw sframe::Error(errno, "pipe", "");
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  std::vector<std::string> a = args;
  std::vector<char*> argv;
  for (std::string& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  Child c;
  int rc = posix_spawnp(&c.pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  c.in.reset(in[1]);
  c.out.reset(out[0]);
  c.err.reset(err[0]);
  if (rc != 0) throw sframe::Error(rc, "spawn", args[0]);
  return c;
}

// Reads what is available from the child's stdout/stderr within timeout_ms.
void Pump(Child* c, int timeout_ms) {
  pollfd p[2] = {{c->out.get(), POLLIN, 0}, {c->err.get(), POLLIN, 0}};
  if (poll(p, 2, timeout_ms) <= 0) return;
  char buf[4096];
  for (int i = 0; i < 2; i++) {
    if (!(p[i].revents & (POLLIN | POLLHUP))) continue;
    ssize_t n = read(p[i].fd, buf, sizeof(buf));
    if (n > 0) (i == 0 ? c->output : c->errors).append(buf, static_cast<size_t>(n));
  }
}

bool HasLine(const std::string& s, const std::string& prefix) {
  return s.find("\n" + prefix) != std::string::npos || s.rfind(prefix, 0) == 0;
}

std::optional<uint64_t> Value(const std::string& s, const std::string& key) {
  size_t at = s.find(key + " ");
  if (at == std::string::npos) return std::nullopt;
  return std::strtoull(s.c_str() + at + key.size() + 1, nullptr, 10);
}

int Finish(Child* c) {
  c->in.reset();
  int st = 0;
  for (;;) {
    pid_t r = waitpid(c->pid, &st, WNOHANG);
    if (r == c->pid) break;
    Pump(c, 50);
  }
  for (int i = 0; i < 20; i++) Pump(c, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

struct Result {
  double seconds = 0;
  uint64_t samples = 0;
  uint64_t bytes = 0;
  uint64_t unwinds = 0;
  uint64_t lost = 0;
  bool ok = false;
  std::string error;
};

// kPerfOnly: the event with its ring drained (the bare event); kEventNoRing:
// the event without a ring, as the sessions open theirs.
enum class Mode { kNone, kPerfOnly, kEventNoRing, kSession, kSessionMapped };

Result RunOurs(const std::string& workload, uint64_t rounds, Mode mode, uint64_t hz) {
  Result r;
  Child c = Spawn({workload, "work", std::to_string(rounds), "wait"});
  while (!HasLine(c.output, "ready")) {
    Pump(&c, 1000);
    if (waitpid(c.pid, nullptr, WNOHANG) == c.pid) {
      r.error = "workload died: " + c.errors;
      return r;
    }
  }
  std::optional<sframe::PerfEvent> ev;
  std::optional<sframe::Session> s;
  // Only the bare event has a ring: a session needs none, and sframe-prof
  // opens none (perf would write a record of its own for every sample:
  // perf_event.h).
  const bool perf_ring = mode == Mode::kPerfOnly;
  if (mode != Mode::kNone) {
    sframe::PerfEventOptions po;
    po.frequency = hz;
    if (!perf_ring) po.data_pages_log2 = sframe::kPerfEventNoRing;
    ev.emplace(sframe::PerfEvent::open_process(c.pid, po));
  }
  const bool session = mode == Mode::kSession || mode == Mode::kSessionMapped;
  if (session) {
    // Like perf record: wake the reader when a quarter of the buffer is
    // full, not at every record.
    sframe::SessionOptions so;
    so.wakeup_bytes = SFRAME_SESSION_DEFAULT_BUFFER / 4;
    s.emplace(sframe::Session::start(sframe::Target::kProcess, c.pid, so));
  }
  // The session's reader does what perf record's does while recording:
  // copies what the kernel buffer holds to a file, unparsed.
  const std::string data = "/tmp/profile_vmbench.session.data";
  sframe::UniqueFd out;
  std::vector<char> buf(1u << 20);
  uint64_t bytes = 0;
  sframe::SessionRing ring;
  if (mode == Mode::kSessionMapped) ring = sframe::SessionRing::map(*s);
  auto copy_out = [&] {
    if (ring) {
      sframe::SessionRing::Span spans[2];
      const size_t k = ring.unread(spans);
      uint64_t n = 0;
      for (size_t i = 0; i < k; i++) {
        if (write(out.get(), spans[i].data, spans[i].size) != static_cast<ssize_t>(spans[i].size)) {
          throw sframe::Error(errno, "write", data);
        }
        n += spans[i].size;
      }
      ring.consume(n);
      bytes += n;
      return;
    }
    for (;;) {
      const ssize_t n = read(s->fd(), buf.data(), buf.size());
      if (n < 0 && errno != EAGAIN && errno != EINTR) throw sframe::Error(errno, "read", "session");
      if (n <= 0) return;
      if (write(out.get(), buf.data(), static_cast<size_t>(n)) != n) {
        throw sframe::Error(errno, "write", data);
      }
      bytes += static_cast<uint64_t>(n);
    }
  };
  if (s) {
    out.reset(open(data.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!out) throw sframe::Error(errno, "open", data);
  }
  // Every reader sleeps in poll() until a ring reaches its watermark or the
  // workload exits, as perf record does (it polls without a timeout; the
  // child's exit ends the poll): a timer tick of the reader would cost the
  // workload's CPU a wakeup at every tick, more at 1 kHz than the samples.
  // The workload's exit is seen through a pidfd.
  sframe::UniqueFd exited(static_cast<int>(syscall(SYS_pidfd_open, c.pid, 0)));
  if (!exited) throw sframe::Error(errno, "pidfd_open", "workload");
  std::vector<pollfd> fds;
  fds.push_back({exited.get(), POLLIN, 0});
  if (s) fds.push_back({s->fd(), POLLIN, 0});
  // A ring-less event's poll() says POLLHUP at once (perf_poll()): only
  // the bare event's rings are polled and drained.
  for (size_t i = 0; ev && perf_ring && i < ev->size(); i++) {
    fds.push_back({ev->fd(i), POLLIN, 0});
  }
  if (ev) ev->enable();
  char go = 'g';
  if (write(c.in.get(), &go, 1) != 1) throw sframe::Error(errno, "write", "workload stdin");
  int st = -1;
  for (;;) {
    if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
      throw sframe::Error(errno, "poll", "workload");
    }
    if (s) copy_out();
    if (ev) ev->drain();
    if (fds[0].revents & POLLIN) break;
  }
  if (waitpid(c.pid, &st, 0) != c.pid) throw sframe::Error(errno, "waitpid", "workload");
  if (s) {
    copy_out();
    sframe::SessionStats stats = s->stats();
    r.samples = stats.records;
    r.unwinds = stats.unwinds;
    r.lost = stats.lost + stats.lost_capture;
    r.bytes = bytes;
    out.reset();
    unlink(data.c_str());
  } else if (ev) {
    r.samples = ev->drain().samples;
    r.bytes = ev->counts().bytes;
  }
  for (int i = 0; i < 20; i++) Pump(&c, 10);
  auto ns = Value(c.output, "elapsed_ns");
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !ns) {
    r.error = "workload failed: " + c.output + c.errors;
    return r;
  }
  r.seconds = double(*ns) / 1e9;
  r.ok = true;
  return r;
}

Result RunPerf(const std::string& workload, uint64_t rounds, uint64_t hz, const char* call_graph) {
  Result r;
  std::string data = "/tmp/profile_vmbench.perf.data";
  unlink(data.c_str());
  Child c = Spawn({"perf", "record", "-q", "-e", "cpu-clock", "-F", std::to_string(hz),
                   "--call-graph", call_graph, "-o", data, "--", workload, "work",
                   std::to_string(rounds), "wait"});
  char go = 'g';
  if (write(c.in.get(), &go, 1) != 1) {
    r.error = "perf did not start";
    Finish(&c);
    return r;
  }
  int rc = Finish(&c);
  auto ns = Value(c.output, "elapsed_ns");
  struct stat sb {};
  if (rc != 0 || !ns || stat(data.c_str(), &sb) != 0) {
    r.error = "perf record failed (exit " + std::to_string(rc) + "): " + c.errors;
    return r;
  }
  r.seconds = double(*ns) / 1e9;
  r.bytes = static_cast<uint64_t>(sb.st_size);
  // The sample count: "SAMPLE events: N" of perf report --stats.
  Child st = Spawn({"perf", "report", "-i", data, "--stats"});
  Finish(&st);
  size_t at = st.output.find("SAMPLE events:");
  if (at != std::string::npos) {
    r.samples = std::strtoull(st.output.c_str() + at + std::strlen("SAMPLE events:"), nullptr, 10);
  }
  unlink(data.c_str());
  r.ok = true;
  return r;
}

Result Median(std::vector<Result> v) {
  std::vector<Result> ok;
  for (Result& r : v) {
    if (r.ok) ok.push_back(r);
  }
  if (ok.empty()) return v.front();
  std::sort(ok.begin(), ok.end(), [](const Result& a, const Result& b) { return a.seconds < b.seconds; });
  return ok[ok.size() / 2];
}

// A data file's size over its samples, for one profiler on one command.
struct FileResult {
  bool ok = false;
  std::string error;
  uint64_t bytes = 0, samples = 0, frames = 0;
};

FileResult RecordData(const std::string& profiler, const std::vector<std::string>& command) {
  FileResult r;
  const std::string data = "/tmp/profile_vmbench." + profiler + ".data";
  unlink(data.c_str());
  std::vector<std::string> args;
  if (profiler == "sframe-prof") {
    args = {SFRAME_BENCH_PROF, "record", "-F", "1000", "-o", data, "--"};
  } else {
    args = {"perf", "record", "-q", "-e", "cpu-clock", "-F", "1000", "--call-graph",
            profiler == "perf-fp" ? "fp" : "dwarf", "-o", data, "--"};
  }
  args.insert(args.end(), command.begin(), command.end());
  Child c = Spawn(args);
  const int rc = Finish(&c);
  struct stat sb {};
  if (rc != 0 || stat(data.c_str(), &sb) != 0) {
    r.error = profiler + " failed (exit " + std::to_string(rc) + "): " + c.errors.substr(0, 400);
    return r;
  }
  r.bytes = static_cast<uint64_t>(sb.st_size);
  if (profiler == "sframe-prof") {
    struct Count : sframe::ProfileHandler {
      uint64_t samples = 0, frames = 0;
      void on_sample(const sframe::Sample& s) override {
        samples++;
        frames += s.user.size() + s.kernel.size();
      }
    } count;
    sframe::read_profile(data, &count);
    r.samples = count.samples;
    r.frames = count.frames;
  } else {
    Child st = Spawn({"perf", "report", "-i", data, "--stats"});
    Finish(&st);
    size_t at = st.output.find("SAMPLE events:");
    if (at != std::string::npos) {
      r.samples =
          std::strtoull(st.output.c_str() + at + std::strlen("SAMPLE events:"), nullptr, 10);
    }
  }
  unlink(data.c_str());
  unlink((data + ".old").c_str());
  r.ok = r.samples > 0;
  if (!r.ok) r.error = profiler + ": no samples";
  return r;
}

void DataFiles(bool perf) {
  // Input for xz: 4 MiB of this machine's libraries (compressible, real).
  const std::string input = "/tmp/profile_vmbench.xz-input";
  {
    Child c = Spawn({"sh", "-c",
                     "cat /lib/x86_64-linux-gnu/libc.so.6 /usr/bin/perl* 2>/dev/null | head -c "
                     "4194304 > " + input});
    Finish(&c);
  }
  const std::string python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  struct Workload {
    const char* name;
    std::vector<std::string> command;
  };
  const std::vector<Workload> workloads = {
      {"demo_workload 1500", {SFRAME_BENCH_DEMO, "1500"}},
      {"xz -6 (4 MiB)", {"sh", "-c", "exec xz -T1 -6 -c " + input + " > /dev/null"}},
      {"python3 (loop, 3e5)",
       {python, "-c", "import json\nx=0\nfor i in range(300000): x += len(json.dumps(i))"}},
  };
  std::printf("\nprofile_vmbench: data file bytes per sample, -e cpu-clock -F 1000, one run each\n");
  std::printf("  %-22s %-14s %9s %10s %12s  %s\n", "workload", "profiler", "samples", "bytes",
              "bytes/sample", "frames/sample");
  for (const Workload& w : workloads) {
    std::vector<std::string> profilers = {"sframe-prof"};
    if (perf) profilers.insert(profilers.end(), {"perf-fp", "perf-dwarf"});
    for (const std::string& p : profilers) {
      const FileResult r = RecordData(p, w.command);
      if (!r.ok) {
        std::printf("  %-22s %-14s failed: %s\n", w.name, p.c_str(), r.error.c_str());
        continue;
      }
      std::printf("  %-22s %-14s %9" PRIu64 " %10" PRIu64 " %12.1f", w.name, p.c_str(), r.samples,
                  r.bytes, double(r.bytes) / double(r.samples));
      if (r.frames) std::printf("  %.1f", double(r.frames) / double(r.samples));
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  unlink(input.c_str());
  std::printf("  bytes/sample: the data file's size over its samples (sframe-prof: format 2, "
              "docs/sframe-prof-format.md; perf: perf.data, samples from perf report --stats)\n"
              "  frames/sample: user + kernel frames of sframe-prof's samples\n");
}

// Whether anything is hooked on perf's sample path (the module's hook,
// module/perf_hook.c: an ftrace_ops, listed in tracefs's enabled_functions;
// modules before it used a kprobe, listed in debugfs); false when neither
// can be read.
bool HookArmed() {
  bool armed = false;
  for (const char* list : {"/sys/kernel/tracing/enabled_functions", "/sys/kernel/debug/kprobes/list"}) {
    FILE* f = std::fopen(list, "r");
    if (!f) continue;
    char line[512];
    while (std::fgets(line, sizeof(line), f)) armed |= std::strstr(line, "perf_prepare_sample") != nullptr;
    std::fclose(f);
  }
  return armed;
}

bool HavePerf() {
  Child c = Spawn({"sh", "-c", "command -v perf >/dev/null && perf --version"});
  return Finish(&c) == 0;
}

void Print(const char* name, uint64_t hz, const Result& r, double base) {
  if (!r.ok) {
    std::printf("  %-22s %6" PRIu64 " Hz  failed: %s\n", name, hz, r.error.c_str());
    return;
  }
  std::printf("  %-22s %6" PRIu64 " Hz  %8.3f s  %+7.2f %%  %8" PRIu64 " samples", name, hz,
              r.seconds, base > 0 ? (r.seconds / base - 1) * 100 : 0.0, r.samples);
  if (r.samples) {
    std::printf("  %8.1f bytes/sample", double(r.bytes) / double(r.samples));
  } else {
    std::printf("  %20s", "");
  }
  if (r.unwinds) std::printf("  %" PRIu64 " unwinds, %" PRIu64 " lost", r.unwinds, r.lost);
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 1 && std::strcmp(argv[1], "data") == 0) {
      DataFiles(HavePerf());
      return 0;
    }
    const bool cost_only = argc > 1 && std::strcmp(argv[1], "cost") == 0;
    if (cost_only && argc > 2) g_target_seconds = std::clamp(std::atof(argv[2]), 0.1, 60.0);
    if (cost_only && argc > 3) g_runs = std::clamp(std::atoi(argv[3]), 1, 15);
    const std::string workload = SFRAME_BENCH_WORKLOAD;
    // Calibrate the rounds to about g_target_seconds without profiling.
    uint64_t rounds = 20000000;
    Result cal = RunOurs(workload, rounds, Mode::kNone, 0);
    if (!cal.ok) {
      std::fprintf(stderr, "profile_vmbench: %s\n", cal.error.c_str());
      return 1;
    }
    rounds = static_cast<uint64_t>(double(rounds) * g_target_seconds / std::max(cal.seconds, 1e-3));
    std::printf("profile_vmbench: session_workload work %" PRIu64
                " (chain of 4 functions, -fomit-frame-pointer, .sframe); median of %d runs\n",
                rounds, g_runs);
    std::printf("  %-22s %9s  %10s  %9s  %8s\n", "profiler", "rate", "workload", "slowdown",
                "samples");

    auto median_of = [&](auto fn) {
      std::vector<Result> v;
      for (int i = 0; i < g_runs; i++) v.push_back(fn());
      return Median(v);
    };
    Result base = median_of([&] { return RunOurs(workload, rounds, Mode::kNone, 0); });
    Print("none", 0, base, base.seconds);
    // perf --call-graph fp needs frame pointers: its rows profile the
    // frame-pointer build, against that build's own baseline.
    const std::string workload_fp = SFRAME_BENCH_WORKLOAD_FP;
    Result base_fp = median_of([&] { return RunOurs(workload_fp, rounds, Mode::kNone, 0); });
    Print("none (fp build)", 0, base_fp, base.seconds);
    const bool perf = HavePerf();
    // The module's hook on perf's sample path is armed by the
    // first session and stays until the module is unloaded, and every
    // perf sample of the machine pays its no-match cost from then on.  So
    // the bare event and perf's own rows run first, before any session
    // (as a machine without the module would run them, if this benchmark
    // starts on a freshly loaded module: "hook armed" says), and the
    // event runs once more after the sessions, with the hook armed.
    const bool armed_at_start = HookArmed();
    std::printf("  hook armed at start: %s\n", armed_at_start ? "yes (a session ran before)" : "no");
    struct Rows {
      Result event, perf_fp, perf_dwarf, session_read, session_mapped, event_armed, event_noring;
    };
    const uint64_t rates[] = {1000u, 10000u};
    Rows rows[2];
    for (int i = 0; i < 2; i++) {
      const uint64_t hz = rates[i];
      rows[i].event = median_of([&] { return RunOurs(workload, rounds, Mode::kPerfOnly, hz); });
      Print("cpu-clock event only", hz, rows[i].event, base.seconds);
      if (perf) {
        rows[i].perf_fp = median_of([&] { return RunPerf(workload_fp, rounds, hz, "fp"); });
        Print("perf fp (fp build)", hz, rows[i].perf_fp, base_fp.seconds);
        rows[i].perf_dwarf = median_of([&] { return RunPerf(workload, rounds, hz, "dwarf"); });
        Print("perf --call-graph dwarf", hz, rows[i].perf_dwarf, base.seconds);
      }
    }
    for (int i = 0; i < 2; i++) {
      const uint64_t hz = rates[i];
      rows[i].session_read =
          median_of([&] { return RunOurs(workload, rounds, Mode::kSession, hz); });
      Print("sframe session (read)", hz, rows[i].session_read, base.seconds);
      rows[i].session_mapped =
          median_of([&] { return RunOurs(workload, rounds, Mode::kSessionMapped, hz); });
      Print("sframe session (mapped)", hz, rows[i].session_mapped, base.seconds);
      rows[i].event_armed = median_of([&] { return RunOurs(workload, rounds, Mode::kPerfOnly, hz); });
      Print("event only, hook armed", hz, rows[i].event_armed, base.seconds);
      rows[i].event_noring =
          median_of([&] { return RunOurs(workload, rounds, Mode::kEventNoRing, hz); });
      Print("event, no ring, armed", hz, rows[i].event_noring, base.seconds);
    }
    // The comparison of issue 14, in points of slowdown: what each profiler
    // costs over the bare event (perf fp's slowdown is against its own
    // build's baseline; the event's cost is the same on both builds).
    auto pts = [](const Result& r, const Result& b) {
      return r.ok && b.ok ? (r.seconds / b.seconds - 1) * 100 : 0.0;
    };
    std::printf("  cost in points:\n");
    for (int i = 0; i < 2; i++) {
      const Rows& r = rows[i];
      // Also over the event as the sessions open it (no ring, hook armed):
      // the session's own part, the module's alone.
      std::printf("  %6" PRIu64 " Hz  session over the bare event: read %.2f, mapped %.2f"
                  "  (over the event with the hook armed: %.2f, %.2f; over the event without"
                  " a ring: %.2f, %.2f)",
                  rates[i], pts(r.session_read, base) - pts(r.event, base),
                  pts(r.session_mapped, base) - pts(r.event, base),
                  pts(r.session_read, base) - pts(r.event_armed, base),
                  pts(r.session_mapped, base) - pts(r.event_armed, base),
                  pts(r.session_read, base) - pts(r.event_noring, base),
                  pts(r.session_mapped, base) - pts(r.event_noring, base));
      if (perf) {
        std::printf("  perf fp over the bare event: %.2f",
                    pts(r.perf_fp, base_fp) - pts(r.event, base));
      }
      std::printf("\n");
    }
    if (!perf) std::printf("  (perf not installed: no perf record comparison; linux-perf)\n");
    std::printf("  bytes/sample: session = bytes written to the file per record; perf = perf.data size per "
                "sample; cpu-clock event only = perf ring bytes (TID, TIME) per sample\n"
                "  slowdown: against the same build without profiling (the fp build's row "
                "'none (fp build)' shows what frame pointers cost by themselves)\n");
    if (!cost_only) DataFiles(perf);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "profile_vmbench: %s\n", e.what());
    return 1;
  }
  return 0;
}
