// libsframe-client: a perf sampling event for sessions (session.h).
//
// A session receives the samples of perf events owned by its process.  This
// opens such events: software cpu-clock at a frequency (open_process(),
// open_all_cpus()), or cpu-clock, task-clock or hardware cycles at a
// frequency or a period (open(PerfEventSpec)), with PERF_SAMPLE_TID |
// PERF_SAMPLE_TIME (the module needs no callchain), on processes or threads
// (inherited by the threads and children they create) or on every task of
// a list of CPUs.  The events on one CPU write into one ring buffer (1 + 2^n
// pages), mapped for the first of them, the others redirected to it with
// PERF_EVENT_IOC_SET_OUTPUT as perf record does: the kernel only outputs
// samples of an event that has somewhere to put them, and a ring per
// thread and CPU would cost locked memory that grows with the threads.
// Perf's own records are not needed, so drain() throws them away by moving
// data_tail up to data_head (counting samples and lost records on the way).
//
// A session needs no ring at all: perf hands every sample to the module's
// hook before it looks for a ring to write it in, so with data_pages_log2 =
// kPerfEventNoRing the sampling events have none, and perf writes no
// record of its own for each sample (in profile_vmbench at 10 kHz that
// write and the reader's draining cost the profiled program about 0.4
// points of slowdown: docs/benchmarks.md).  Without a ring, events on a
// task are not placed on each CPU for inherit (only a mapped ring needs a
// CPU): one per thread, as perf stat places them; counts() stays 0; and
// poll() on them returns POLLHUP at once (perf_poll() without a ring): poll
// the session's descriptor instead.
#ifndef SFRAME_CLIENT_PERF_EVENT_H
#define SFRAME_CLIENT_PERF_EVENT_H

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sframe_client/export.h"
#include "sframe_client/fd.h"

namespace sframe {

namespace op {
inline constexpr const char kPerfEventOpen[] = "perf_event_open";
inline constexpr const char kPerfEventIoctl[] = "perf event ioctl";
}  // namespace op

// data_pages_log2 for sampling events without a ring buffer (see above).
// Side-band events (task_events, open_task_events()) always have one: with
// this value, of the default size.
inline constexpr unsigned kPerfEventNoRing = ~0u;

struct PerfEventOptions {
  uint64_t frequency = 1000;  // samples per second of CPU time (cpu-clock)
  bool inherit = true;        // follow the target's new threads and children
  bool enable_on_exec = false;  // start counting at the target's next exec
  bool exclude_kernel = false;  // only samples taken in user mode
  bool exclude_hv = true;
  unsigned data_pages_log2 = 3;  // ring buffer of 1 + 2^n pages, or kPerfEventNoRing
};

// What drain() saw in perf's ring buffers since the event was opened.
struct PerfCounts {
  uint64_t samples = 0;  // PERF_RECORD_SAMPLE
  uint64_t lost = 0;     // samples perf says it dropped (PERF_RECORD_LOST)
  uint64_t bytes = 0;    // ring-buffer bytes consumed
};

// A side-band record of perf (read_task_events()): what a followed task did.
struct TaskEvent {
  enum class Kind { kMmap, kComm, kFork, kExit };
  Kind kind = Kind::kMmap;
  uint32_t pid = 0, tid = 0;    // the task (kFork: the new one)
  uint32_t ppid = 0, ptid = 0;  // kFork, kExit: the parent
  uint64_t time = 0;            // CLOCK_MONOTONIC ns
  uint64_t start = 0, len = 0, pgoff = 0;  // kMmap: an executable file mapping
  bool exec = false;            // kComm: the name an exec gave
  std::string name;             // kMmap: the file's path; kComm: the task's name

  // A new process (not a thread) was forked, or a whole process exited.
  bool new_process() const { return kind == Kind::kFork && pid != ppid; }
  bool process_exit() const { return kind == Kind::kExit && pid == tid; }
};

// The event a PerfEventSpec samples.
enum class PerfEventKind : uint32_t {
  kCpuClock = 0,   // software cpu-clock (period in ns of CPU time)
  kTaskClock = 1,  // software task-clock (period in ns of the task's time)
  kCycles = 2,     // hardware CPU cycles: ENOENT (or EOPNOTSUPP) without a PMU
};

// What PerfEvent::open() opens: one kind of event, on tasks or on CPUs.
// Events on a task are placed on each CPU of `cpus` (with inherit and a
// ring, since perf_mmap() refuses the ring of an inherited event not bound
// to a CPU; or when cpus is given), else on any CPU (cpu -1).  Events on
// the same CPU share one ring (PERF_EVENT_IOC_SET_OUTPUT, as perf record
// does): a process of T threads on C CPUs takes T x C descriptors but C
// rings.  Without a ring (kPerfEventNoRing) and cpus empty, T descriptors.
struct PerfEventSpec {
  PerfEventKind kind = PerfEventKind::kCpuClock;
  uint64_t frequency = 1000;  // samples per second (of the event's time)
  uint64_t period = 0;        // nonzero: a sample every `period` (ns, cycles) instead
  std::vector<pid_t> pids;    // processes: every thread of each (/proc/PID/task)
  std::vector<pid_t> tids;    // threads: each of these only
  bool all_tasks = false;     // every task (pid -1) on each CPU; pids, tids unused
  std::vector<int> cpus;      // empty: the online CPUs (online_cpus())
  bool task_events = false;   // the side-band dummy event (open_task_events())
  bool inherit = true;        // follow the targets' new threads and children
  bool enable_on_exec = false;
  bool exclude_kernel = false;
  bool exclude_hv = true;
  unsigned data_pages_log2 = 3;  // each ring: 1 + 2^n pages; kPerfEventNoRing: none
};

// Movable, not copyable; closes its events on destruction.
class SFRAME_CLIENT_API PerfEvent {
 public:
  PerfEvent() = default;
  PerfEvent(PerfEvent&&) noexcept = default;
  PerfEvent& operator=(PerfEvent&&) noexcept = default;

  // Events on every thread of process pid (/proc/PID/task), created
  // disabled: with options.inherit (threads and children created later are
  // followed) and a ring, one per thread and online CPU, since the kernel
  // refuses to map the ring of an inherited event not bound to a CPU (one
  // ring per CPU, shared); else one per thread (each with its ring, if it
  // has one).
  // Throws
  // sframe::Error(op::kPerfEventOpen, "pid N") with perf_event_open's errno
  // (EACCES/EPERM: perf_event_paranoid, ESRCH: no such process), or
  // op::kMmap.
  static PerfEvent open_process(pid_t pid, const PerfEventOptions& options = {});
  // One event per online CPU for every task (pid -1), created disabled.
  static PerfEvent open_all_cpus(const PerfEventOptions& options = {});
  // Side-band events on process pid, as open_process() places them (with
  // options.inherit: in every task it creates later too): a software dummy
  // event that samples nothing and reports executable file mappings
  // (PERF_RECORD_MMAP2), names and execs (COMM), forks and exits, as perf
  // record's own side-band event does.  Each record wakes poll() on fd(i)
  // (a watermark of one byte): a profiler learns of an exec at once.  Read
  // them with read_task_events(), not drain().
  static PerfEvent open_task_events(pid_t pid, const PerfEventOptions& options = {});

  // The events spec describes, created disabled.  A thread that exits
  // while they are opened is skipped; a pid given that does not exist is
  // ESRCH.  Throws sframe::Error(op::kPerfEventOpen, "<event> of pid N on
  // cpu C") with perf_event_open's errno, op::kMmap, or
  // op::kPerfEventIoctl (PERF_EVENT_IOC_SET_OUTPUT).
  static PerfEvent open(const PerfEventSpec& spec);
  // How many events (descriptors) open(spec) would open now, from the
  // threads /proc lists: for checking RLIMIT_NOFILE before opening.
  static size_t count(const PerfEventSpec& spec);

  // PERF_EVENT_IOC_ENABLE / DISABLE on every event.  Throws
  // sframe::Error(op::kPerfEventIoctl).
  void enable() const;
  void disable() const;

  // Discards what the ring buffers hold; returns the totals so far.
  PerfCounts drain();
  // Of events from open_task_events(): appends the records the ring
  // buffers hold to out (in each ring's order; rings are per CPU, so sort
  // by time to merge them) and frees their space.  A record too short for
  // its type is skipped; PERF_RECORD_LOST adds to counts().lost.  Returns
  // the number appended.
  size_t read_task_events(std::vector<TaskEvent>* out);
  const PerfCounts& counts() const noexcept { return counts_; }

  size_t size() const noexcept { return events_.size(); }
  int fd(size_t i = 0) const noexcept { return events_[i].fd.get(); }

 private:
  struct Event {
    UniqueFd fd;
    MappedRegion ring;
  };
  static Event open_one(pid_t pid, int cpu, const PerfEventOptions& options,
                        bool task_events = false);
  static PerfEvent open_per_thread(pid_t pid, const PerfEventOptions& options, bool task_events);
  void ioctl_all(unsigned long request) const;

  std::vector<Event> events_;
  PerfCounts counts_;
};

// A CPU list as the kernel writes it (/sys/devices/system/cpu/online) and
// perf's -C takes: "0-3,5,7-8", sorted and without duplicates into out.
// False (out unchanged) on anything else: empty items, a range upside
// down, a number above 65535.
SFRAME_CLIENT_API bool parse_cpu_list(const std::string& text, std::vector<int>* out);
// The online CPUs (/sys/devices/system/cpu/online; 0..N-1 from
// sysconf(_SC_NPROCESSORS_ONLN) when unreadable).
SFRAME_CLIENT_API std::vector<int> online_cpus();

// /proc/sys/kernel/perf_event_paranoid, or INT_MIN when it cannot be read.
SFRAME_CLIENT_API int perf_event_paranoid();

}  // namespace sframe

#endif  // SFRAME_CLIENT_PERF_EVENT_H
