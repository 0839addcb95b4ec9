// sframe-client record: profile a process through a session and print each
// stitched stack, symbolized, then a summary.
//
//   sframe-client record [-F HZ] [-d SECONDS] [-q] [-u] (-p PID | -a | -- COMMAND ARGS...)
//
// -p PID follows every thread of PID (and those it creates); -a every task,
// one event per CPU (needs privileges or perf_event_paranoid <= 0);
// -- COMMAND starts COMMAND stopped (the child waits on a pipe before exec),
// opens the event with enable_on_exec and the session on it, then lets it
// exec, so no sample of it is missed; recording ends when it exits.
// -q prints the summary only; -u unwinds with SFrame only (no frame-pointer
// fallback).
//
// With -p or -- COMMAND, every object the target maps without a .sframe of
// its own gets SFrame made from its .eh_frame (cached by build id, see
// sframe_cache.h) and supplied to the module for the target, at the start
// and again as the target maps more (dlopen, exec); -E turns that off.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "launch.h"
#include "sframe_client/sframe_client.hpp"
#include "sframe_profile/profile.h"
#include "sframe_profile/symbolizer.h"

namespace {

volatile sig_atomic_t g_interrupted = 0;
void on_sigint(int) { g_interrupted = 1; }

using tools::now_ms;

int record_usage() {
  std::fprintf(stderr,
               "usage: sframe-client record [-F HZ] [-d SECONDS] [-q] [-u] [-E] "
               "(-p PID | -a | -- COMMAND [ARGS...])\n");
  return 2;
}

struct Printer {
  // objects: the recording's, so the files coverage opened are not opened
  // again for their symbols.
  explicit Printer(sframe::ObjectTable* objects) : sym(objects) {}

  sframe::Symbolizer sym;
  std::unique_ptr<sframe::KernelSymbolizer> ksym;
  bool quiet = false;

  void print(const sframe::Record& r) {
    if (quiet) return;
    if (r.is_lost()) {
      std::printf("LOST %" PRIu64 " samples\n\n", r.lost);
      return;
    }
    const sframe::Sample& s = r.sample;
    std::printf("pid %u tid %u cpu %u time %" PRIu64 ".%09" PRIu64 " cookie %" PRIx64
                " flags %s user_stop %s\n",
                s.pid, s.tid, s.cpu, s.time / 1000000000u, s.time % 1000000000u, s.cookie,
                sframe::sample_flags_string(s.flags).c_str(),
                sframe::to_string(s.user_stop).c_str());
    for (uint64_t ip : s.kernel) {
      std::string where = ksym ? ksym->symbolize(ip).to_string() : std::string();
      std::printf("  k %016" PRIx64 " %s\n", ip, where.c_str());
    }
    std::vector<sframe::Symbol> syms = sym.symbolize_frames(static_cast<pid_t>(s.pid), s.user);
    for (const sframe::Symbol& u : syms) {
      std::printf("  u %016" PRIx64 " %s\n", u.address, u.to_string().c_str());
    }
    std::printf("\n");
  }
};

}  // namespace

int cmd_record(int argc, char** argv) {
  uint64_t hz = 1000;
  double seconds = 0;
  pid_t pid = 0;
  bool all = false, quiet = false, sframe_only = false, eh_frame = true;
  int cmd_at = -1;
  for (int i = 0; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--") {
      cmd_at = i + 1;
      break;
    } else if (a == "-F" && i + 1 < argc) {
      hz = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "-d" && i + 1 < argc) {
      seconds = std::strtod(argv[++i], nullptr);
    } else if (a == "-p" && i + 1 < argc) {
      pid = static_cast<pid_t>(std::strtol(argv[++i], nullptr, 10));
    } else if (a == "-a") {
      all = true;
    } else if (a == "-q") {
      quiet = true;
    } else if (a == "-u") {
      sframe_only = true;
    } else if (a == "-E") {
      eh_frame = false;
    } else {
      return record_usage();
    }
  }
  const bool command = cmd_at >= 0 && cmd_at < argc;
  if (hz == 0 || (int(command) + int(pid > 0) + int(all)) != 1) return record_usage();

  // -- COMMAND: a child that waits for the go before it execs.  If anything
  // below throws, the stopped child sees EOF and exits.
  std::unique_ptr<tools::StoppedCommand> child;
  if (command) {
    child = std::make_unique<tools::StoppedCommand>(argv + cmd_at, "sframe-client record");
    pid = child->pid();
  }

  sframe::SessionOptions so;
  if (sframe_only) so.unwind_flags = SFRAME_UNWIND_F_SFRAME;
  tools::Sampling sampling = tools::open_sampling(pid, all, command, /*follow=*/false, hz, so);
  sframe::PerfEvent& ev = sampling.event;
  sframe::Session& session = sampling.session;

  // Every object the recording reads (coverage, symbols), each file opened
  // once.
  tools::RecordingObjects recording;
  Printer printer(&recording.objects);
  printer.quiet = quiet;
  if (session.kernel_visible()) {
    auto k = std::make_unique<sframe::KernelSymbolizer>();
    if (k->usable()) printer.ksym = std::move(k);
  }
  if (pid > 0 && !command) printer.sym.load_process(pid);

  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  const uint64_t start = now_ms();
  // SFrame for what the target maps without .sframe.
  std::unique_ptr<tools::CoverageKeeper> coverage;
  if (eh_frame && !all) {
    coverage = std::make_unique<tools::CoverageKeeper>(pid, command, "sframe-client record", true,
                                                       &recording);
  }
  auto cover = [&] {
    if (coverage && coverage->refresh()) printer.sym.forget_process(pid);
  };
  if (command && coverage) coverage->prepare(child->program());
  if (coverage) coverage->begin();
  if (command) {
    child->start();
  } else {
    ev.enable();
  }

  const uint64_t end = seconds > 0 ? start + static_cast<uint64_t>(seconds * 1000) : UINT64_MAX;
  uint64_t samples = 0, lost_records = 0;
  int child_status = -1;
  std::vector<sframe::Record> recs;
  auto consume = [&](int timeout) {
    recs.clear();
    size_t n = sampling.poll_read(&recs, timeout);
    for (const sframe::Record& r : recs) {
      if (r.is_sample()) samples++;
      if (r.is_lost()) lost_records += r.lost;
      printer.print(r);
    }
    return n;
  };
  bool stop = false;
  while (!stop && !g_interrupted && now_ms() < end) {
    cover();
    consume(coverage && coverage->eager() ? 10 : 100);
    if (command) {
      int st;
      pid_t r = waitpid(pid, &st, WNOHANG);
      if (r == pid) {
        child_status = st;
        stop = true;
      }
    } else if (!all && kill(pid, 0) != 0 && errno == ESRCH) {
      stop = true;
    }
  }
  ev.disable();
  // What is still in flight.
  for (uint64_t quiet_since = now_ms(); now_ms() - quiet_since < 300;) {
    if (consume(100)) quiet_since = now_ms();
  }
  if (command && child_status < 0) {
    // Stopped by -d or a signal: the command goes on; wait for it only if
    // it was interrupted together with us.
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) child_status = st;
  }

  const sframe::SessionStats st = session.stats();
  const double secs = double(now_ms() - start) / 1000.0;
  std::fprintf(
      stderr,
      "sframe-client record: %.2f s, %" PRIu64 " Hz: %" PRIu64 " samples, %" PRIu64
      " records read, %" PRIu64 " lost (buffer full), %" PRIu64 " lost at capture, %" PRIu64
      " user unwinds; %.1f bytes per record; kernel addresses %s\n",
      secs, hz, st.samples, samples, st.lost, st.lost_capture, st.unwinds,
      samples ? double(sampling.bytes_read()) / double(samples) : 0.0,
      session.kernel_visible() ? (printer.ksym ? "shown" : "shown (no kallsyms)") : "hidden");
  (void)lost_records;
  if (command && child_status >= 0) {
    return tools::exit_code(child_status);
  }
  return 0;
}
