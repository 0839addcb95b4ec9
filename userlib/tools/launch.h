// What the profiling tools (sframe-client record, sframe-prof record) share:
// starting a command stopped until its event and session exist, and keeping
// the target covered with SFrame made from .eh_frame while it runs.
#ifndef SFRAME_TOOLS_LAUNCH_H
#define SFRAME_TOOLS_LAUNCH_H

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "sframe_client/sframe_client.hpp"
#include "sframe_gen/coverage.h"
#include "sframe_gen/sframe_cache.h"
#include "sframe_object/object_table.h"

namespace tools {

// What one recording's coverage shares: the objects, each file opened once
// for every process, every consumer (coverage, the mapping records'
// build ids, the symbolizer) and the whole recording; and the SFrame made
// of each once, kept in memory and in the cache directory.
struct RecordingObjects {
  // max_held: the objects held open at most (ObjectTable).
  explicit RecordingObjects(size_t max_held = sframe::ObjectTable::kDefaultMaxHeld)
      : objects(max_held) {}
  sframe::ObjectTable objects;
  sframe::SframeCache cache;
};

// How many objects a recording may hold open when `others` descriptors are
// needed for everything else: what RLIMIT_NOFILE leaves, at most
// ObjectTable::kDefaultMaxHeld, at least 1 (then each object is opened
// again whenever it is needed again, as before the table).
size_t objects_to_hold(size_t others);

// Milliseconds and nanoseconds of CLOCK_MONOTONIC.
uint64_t now_ms();
uint64_t now_ns();

// A bound on a rate: take() allows `per_second` a second on average, and a
// burst of as many after a quiet time.
class RateBound {
 public:
  explicit RateBound(uint64_t per_second) : rate_(double(per_second)), tokens_(rate_) {}
  bool take();

 private:
  double rate_, tokens_;
  uint64_t at_ns_ = 0;
};

// The program execvp() would run for name (searched in $PATH when name has
// no slash); name itself when not found.
std::string find_program(const std::string& name);

// Exit code of a wait status: the exit status, or 128 + the signal.
int exit_code(int wait_status);

// The perf sampling event and the session of a profiling run: a CPU-wide
// event for `all`, else one for process pid (armed to start at exec for a
// command about to exec), inherited by the threads it creates.  The session
// wakes its reader at a quarter of its buffer, like perf record, not at
// every record: a wakeup per sample costs the target dearly, and the tools
// poll with a timeout anyway.
//
// follow (not with `all`): the descendants too, as perf record's inherit:
// the events follow every task pid creates (threads and child processes),
// the session takes every sample of its events (SFRAME_TARGET_EVENTS), and
// `tasks` reports each new process, exec and executable mapping.  Without
// follow, the session takes process pid's samples only and `tasks` is
// empty.
//
// The records come through the session's mapped buffer (`ring`), as perf
// record takes its samples, with no read() copy; with a module before
// ABI 3, which cannot map it, through read().
struct Sampling {
  sframe::PerfEvent event;
  sframe::Session session;
  sframe::PerfEvent tasks;
  sframe::SessionRing ring;

  // What the session has, parsed into out (appended).
  size_t read(std::vector<sframe::Record>* out) {
    return ring ? ring.read(out) : session.read(out);
  }
  uint64_t bytes_read() const { return ring ? ring.bytes_read() : session.bytes_read(); }
  // Waits up to timeout_ms for records, then read().
  size_t poll_read(std::vector<sframe::Record>* out, int timeout_ms) {
    return session.wait(timeout_ms) ? read(out) : 0;
  }
};
Sampling open_sampling(pid_t pid, bool all, bool command, bool follow, uint64_t hz,
                       sframe::SessionOptions options);

// The general form: the events of spec (on its pids and tids, or on every
// task of its CPUs), the side-band events on the same tasks when follow
// (not with spec.all_tasks), and a session of target (target_id: see
// Session::start).
Sampling open_sampling(const sframe::PerfEventSpec& spec, bool follow, sframe::Target target,
                       pid_t target_id, sframe::SessionOptions options);

// The side-band events open_sampling() opens with spec and follow.
sframe::PerfEventSpec task_events_spec(const sframe::PerfEventSpec& spec);

// Checks, before anything is opened, that RLIMIT_NOFILE leaves room for
// `events` perf events and `spare` other descriptors.  Raises the soft
// limit (up to the hard one, and the hard one where the process may, as
// perf does) when that is enough; else throws sframe::Error(EMFILE,
// "record", what) with what is needed, the limit and `ulimit -n`.
// what: the events, e.g. "pid 42 (101 threads) on 2 CPUs".  verbose: says
// when the limit was raised.
void ensure_descriptors(size_t events, size_t spare, const std::string& what,
                        const std::string& tool, bool verbose);

// A command forked stopped: the child waits on a pipe, then execs argv.  If
// the parent drops the object before start() (an error), the child sees EOF
// and exits 127 without running anything.
class StoppedCommand {
 public:
  // argv: null-terminated.  tool: prefix of the child's exec error message.
  StoppedCommand(char** argv, const std::string& tool);
  pid_t pid() const { return pid_; }
  const std::string& program() const { return program_; }  // as execvp() finds it
  // Lets the child exec.  Throws sframe::Error.
  void start();

 private:
  pid_t pid_ = -1;
  std::string program_;
  sframe::UniqueFd go_;
};

// Supplies SFrame for the objects the target maps without .sframe
// (ProcessCoverage), at most every 250 ms, every 10 ms in the first 500 ms
// after begin() (while a command execs and maps its libraries).  A command
// is covered only once it has exec'd (before, it is a copy of the tool).
class CoverageKeeper {
 public:
  // verbose: one stderr line per supply ("<tool>: supplied SFrame for N
  // objects (M made from .eh_frame), B bytes, at SEC.NSEC") and per object
  // not covered.  recording: what it shares with the rest of the recording
  // (must outlive it).
  CoverageKeeper(pid_t pid, bool command, const std::string& tool, bool verbose,
                 RecordingObjects* recording);
  // Makes the SFrame of a program about to be started (and of its libraries).
  void prepare(const std::string& program) { coverage_.prepare(program); }
  void begin() { eager_until_ = now_ms() + 500; }
  bool eager() const { return now_ms() < eager_until_; }
  // Refreshes when due; true if something was supplied.  Never throws (the
  // target being gone is noticed by the caller).
  bool refresh();
  // Whether the target runs its own program (not yet the tool's copy).
  bool exec_done() const;

 private:
  pid_t pid_;
  bool command_;
  std::string tool_;
  bool verbose_;
  sframe::Device dev_;
  sframe::ProcessCoverage coverage_;
  uint64_t next_ = 0;
  uint64_t eager_until_ = 0;
  dev_t self_dev_ = 0;
  ino_t self_ino_ = 0;
};

// SFrame for the processes a profiled command creates (and for the ones it
// execs), from the side-band records of Sampling::tasks: an executable
// mapping of a process makes it due for coverage (ProcessCoverage) at once
// and every 10 ms for the next 200 ms, while its loader maps the rest; an
// exit forgets it.  A process's samples taken before its SFrame is supplied
// (a few ms after its exec) may stop early; a fork child starts with its
// parent's supplied sections (the module copies them).
class DescendantCoverage {
 public:
  // verbose: as CoverageKeeper, with the pid and how long after its exec
  // the supply was done.  recording: as CoverageKeeper.
  DescendantCoverage(const std::string& tool, bool verbose, RecordingObjects* recording);
  void note(const sframe::TaskEvent& ev);
  // Covers the processes that are due.  Never throws.
  void refresh();
  // Whether a process is in its 200 ms of covering every 10 ms.
  bool eager() const;

 private:
  struct Proc {
    std::unique_ptr<sframe::ProcessCoverage> coverage;
    uint64_t next = 0, until = 0;
    uint64_t exec_ns = 0;  // CLOCK_MONOTONIC of its last exec, if seen
    uint64_t seen_ns = 0;  // when its first mapping since was read here
  };
  std::string tool_;
  bool verbose_;
  sframe::Device dev_;
  RecordingObjects* recording_;
  std::map<pid_t, Proc> procs_;
};

}  // namespace tools

#endif  // SFRAME_TOOLS_LAUNCH_H
