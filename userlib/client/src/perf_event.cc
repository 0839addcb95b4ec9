#include "sframe_client/perf_event.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <dirent.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "sframe_client/error.h"

namespace sframe {
namespace {

long sys_perf_event_open(perf_event_attr* attr, pid_t pid, int cpu, int group_fd,
                         unsigned long flags) {
  return syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, flags);
}

const char* kind_name(const PerfEventSpec& s) {
  if (s.task_events) return "side-band event";
  switch (s.kind) {
    case PerfEventKind::kTaskClock:
      return "task-clock";
    case PerfEventKind::kCycles:
      return "cycles";
    case PerfEventKind::kCpuClock:
      break;
  }
  return "cpu-clock";
}

std::string event_name(const PerfEventSpec& s, pid_t pid, int cpu) {
  std::string name = kind_name(s);
  if (pid >= 0) name += " of pid " + std::to_string(pid);
  if (cpu >= 0) name += (pid >= 0 ? " on cpu " : " of cpu ") + std::to_string(cpu);
  return name;
}

PerfEventSpec spec_of(const PerfEventOptions& o, bool task_events) {
  PerfEventSpec s;
  s.frequency = o.frequency;
  s.inherit = o.inherit;
  s.enable_on_exec = o.enable_on_exec;
  s.exclude_kernel = o.exclude_kernel;
  s.exclude_hv = o.exclude_hv;
  s.data_pages_log2 = o.data_pages_log2;
  s.task_events = task_events;
  return s;
}

// One event of s on task pid (-1: every task) and cpu (-1: any).
UniqueFd open_event_fd(const PerfEventSpec& s, pid_t pid, int cpu) {
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  if (s.task_events) {
    // Samples nothing; its records carry pid, tid and time at their end
    // (sample_id_all), and each wakes the reader.
    attr.config = PERF_COUNT_SW_DUMMY;
    attr.mmap = 1;
    attr.mmap2 = 1;
    attr.comm = 1;
    attr.comm_exec = 1;
    attr.task = 1;
    attr.sample_id_all = 1;
    // wakeup_watermark shares its union with wakeup_events (0 below):
    // set after it.
    attr.watermark = 1;
  } else {
    switch (s.kind) {
      case PerfEventKind::kTaskClock:
        attr.config = PERF_COUNT_SW_TASK_CLOCK;
        break;
      case PerfEventKind::kCycles:
        attr.type = PERF_TYPE_HARDWARE;
        attr.config = PERF_COUNT_HW_CPU_CYCLES;
        break;
      case PerfEventKind::kCpuClock:
      default:
        attr.config = PERF_COUNT_SW_CPU_CLOCK;
        break;
    }
    if (s.period) {
      attr.sample_period = s.period;
    } else {
      attr.freq = 1;
      attr.sample_freq = s.frequency;
    }
  }
  attr.disabled = 1;
  // A CPU-wide event cannot inherit.
  attr.inherit = s.inherit && pid >= 0 ? 1 : 0;
  attr.enable_on_exec = s.enable_on_exec ? 1 : 0;
  // A dummy event samples nothing: it asks for no kernel privilege.
  attr.exclude_kernel = s.task_events || s.exclude_kernel ? 1 : 0;
  attr.exclude_hv = s.exclude_hv ? 1 : 0;
  // One clock for every event: PERF_EVENT_IOC_SET_OUTPUT refuses to mix them.
  attr.use_clockid = 1;
  attr.clockid = CLOCK_MONOTONIC;
  attr.wakeup_events = 0;
  if (s.task_events) attr.wakeup_watermark = 1;
  const long fd = sys_perf_event_open(&attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) throw Error(errno, op::kPerfEventOpen, event_name(s, pid, cpu));
  return UniqueFd(static_cast<int>(fd));
}

// Whether the events of s get a ring buffer: side-band events always do
// (their records are what they are for).
bool has_ring(const PerfEventSpec& s) {
  return s.task_events || s.data_pages_log2 != kPerfEventNoRing;
}

// A ring of 1 + 2^n pages; perf_mmap() refuses what is not a power of two
// or beyond perf_event_mlock_kb, a shift beyond the address's width too.
MappedRegion map_ring(int fd, const PerfEventSpec& s) {
  const unsigned log2 =
      s.data_pages_log2 == kPerfEventNoRing ? PerfEventSpec{}.data_pages_log2 : s.data_pages_log2;
  if (log2 >= 32) throw Error(EINVAL, op::kMmap, "perf ring of 2^" + std::to_string(log2) + " pages");
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = 1 + (size_t{1} << log2);
  return MappedRegion::map(pages * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd);
}

// The threads of process pid (/proc/PID/task), or just pid if unreadable.
std::vector<pid_t> threads_of(pid_t pid) {
  std::vector<pid_t> out;
  if (DIR* d = opendir(("/proc/" + std::to_string(pid) + "/task").c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] >= '0' && e->d_name[0] <= '9') {
        out.push_back(static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10)));
      }
    }
    closedir(d);
  }
  if (out.empty()) out.push_back(pid);
  return out;
}

// The tasks of s, each once: (tid, whether its absence is an error: a
// pid or tid given, not a thread found in /proc).
std::vector<std::pair<pid_t, bool>> tasks_of(const PerfEventSpec& s) {
  std::vector<std::pair<pid_t, bool>> out;
  std::set<pid_t> seen;
  for (pid_t pid : s.pids) {
    for (pid_t tid : threads_of(pid)) {
      if (seen.insert(tid).second) out.emplace_back(tid, tid == pid);
    }
  }
  for (pid_t tid : s.tids) {
    if (seen.insert(tid).second) out.emplace_back(tid, true);
  }
  return out;
}

// Whether events on a task go on each CPU (else on cpu -1): asked for, or
// inherited with a ring, which perf_mmap() maps only for an event bound to
// a CPU.
bool per_cpu(const PerfEventSpec& s) {
  return s.all_tasks || !s.cpus.empty() || (s.inherit && has_ring(s));
}

}  // namespace

PerfEvent PerfEvent::open(const PerfEventSpec& spec) {
  PerfEvent p;
  const std::vector<int> cpus = spec.cpus.empty() ? online_cpus() : spec.cpus;
  // The event that owns each CPU's ring; the others on that CPU write into
  // it (an event on cpu -1 may only share a ring of its own task: each of
  // those has its own).
  std::map<int, int> ring_owner;
  auto add = [&](pid_t pid, int cpu) {
    Event ev;
    ev.fd = open_event_fd(spec, pid, cpu);
    const auto owner = cpu >= 0 ? ring_owner.find(cpu) : ring_owner.end();
    if (!has_ring(spec)) {
      // Samples reach the sessions all the same; perf writes none.
    } else if (owner != ring_owner.end()) {
      if (::ioctl(ev.fd.get(), PERF_EVENT_IOC_SET_OUTPUT, owner->second) != 0) {
        throw Error(errno, op::kPerfEventIoctl,
                    "PERF_EVENT_IOC_SET_OUTPUT of " + event_name(spec, pid, cpu));
      }
    } else {
      ev.ring = map_ring(ev.fd.get(), spec);
      if (cpu >= 0) ring_owner[cpu] = ev.fd.get();
    }
    p.events_.push_back(std::move(ev));
  };
  if (spec.all_tasks) {
    for (int cpu : cpus) add(-1, cpu);
    return p;
  }
  // An event follows one task (and, inherited, the tasks it creates later):
  // the threads that exist already each need their own, as with perf record
  // -p.
  const bool each_cpu = per_cpu(spec);
  for (const auto& [tid, required] : tasks_of(spec)) {
    try {
      if (!each_cpu) {
        add(tid, -1);
        continue;
      }
      for (int cpu : cpus) add(tid, cpu);
    } catch (const Error& e) {
      // A thread that exited meanwhile is no error; anything else is.
      if (e.err() != ESRCH || required) throw;
    }
  }
  return p;
}

size_t PerfEvent::count(const PerfEventSpec& spec) {
  const size_t ncpu = spec.cpus.empty() ? online_cpus().size() : spec.cpus.size();
  if (spec.all_tasks) return ncpu;
  const size_t ntask = tasks_of(spec).size();
  return per_cpu(spec) ? ntask * ncpu : ntask;
}

// Kept for the ABI (its symbol is exported): one event with its own ring,
// if it has one.
PerfEvent::Event PerfEvent::open_one(pid_t pid, int cpu, const PerfEventOptions& o,
                                     bool task_events) {
  const PerfEventSpec s = spec_of(o, task_events);
  Event ev;
  ev.fd = open_event_fd(s, pid, cpu);
  if (has_ring(s)) ev.ring = map_ring(ev.fd.get(), s);
  return ev;
}

PerfEvent PerfEvent::open_process(pid_t pid, const PerfEventOptions& options) {
  return open_per_thread(pid, options, false);
}

PerfEvent PerfEvent::open_task_events(pid_t pid, const PerfEventOptions& options) {
  return open_per_thread(pid, options, true);
}

PerfEvent PerfEvent::open_per_thread(pid_t pid, const PerfEventOptions& options, bool task_events) {
  PerfEventSpec s = spec_of(options, task_events);
  s.pids = {pid};
  return open(s);
}

PerfEvent PerfEvent::open_all_cpus(const PerfEventOptions& options) {
  PerfEventSpec s = spec_of(options, false);
  s.all_tasks = true;
  s.inherit = false;  // per-CPU events cannot inherit
  return open(s);
}

bool parse_cpu_list(const std::string& text, std::vector<int>* out) {
  constexpr unsigned long kMaxCpu = 65535;
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  if (t.empty()) return false;
  std::set<int> cpus;
  // Each item is a number or a range; the text bounds the items, a range
  // is at most kMaxCpu + 1 long.
  for (size_t at = 0; at <= t.size();) {
    size_t end = t.find(',', at);
    if (end == std::string::npos) end = t.size();
    const std::string item = t.substr(at, end - at);
    const size_t dash = item.find('-');
    auto number = [&](const std::string& n, unsigned long* v) {
      if (n.empty() || n.size() > 5 || n.find_first_not_of("0123456789") != std::string::npos) {
        return false;
      }
      *v = std::strtoul(n.c_str(), nullptr, 10);
      return *v <= kMaxCpu;
    };
    unsigned long lo = 0, hi = 0;
    if (dash == std::string::npos) {
      if (!number(item, &lo)) return false;
      hi = lo;
    } else if (!number(item.substr(0, dash), &lo) || !number(item.substr(dash + 1), &hi) ||
               hi < lo) {
      return false;
    }
    for (unsigned long c = lo; c <= hi; c++) cpus.insert(static_cast<int>(c));
    at = end + 1;
  }
  out->assign(cpus.begin(), cpus.end());
  return true;
}

std::vector<int> online_cpus() {
  std::vector<int> cpus;
  FILE* f = std::fopen("/sys/devices/system/cpu/online", "re");
  if (f) {
    char buf[4096];
    const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    if (parse_cpu_list(std::string(buf, n), &cpus)) return cpus;
  }
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  for (long cpu = 0; cpu < std::max(n, 1L); cpu++) cpus.push_back(static_cast<int>(cpu));
  return cpus;
}

void PerfEvent::ioctl_all(unsigned long request) const {
  for (const Event& e : events_) {
    if (::ioctl(e.fd.get(), request, 0) != 0) {
      throw Error(errno, op::kPerfEventIoctl, "perf event fd " + std::to_string(e.fd.get()));
    }
  }
}

void PerfEvent::enable() const { ioctl_all(PERF_EVENT_IOC_ENABLE); }
void PerfEvent::disable() const { ioctl_all(PERF_EVENT_IOC_DISABLE); }

namespace {

// The bytes [pos, pos + len) of a ring of size bytes (a power of two), which
// may wrap.
void ring_copy(const uint8_t* data, uint64_t size, uint64_t pos, void* dst, size_t len) {
  auto* out = static_cast<uint8_t*>(dst);
  const uint64_t off = pos & (size - 1);
  const size_t first = static_cast<size_t>(std::min<uint64_t>(len, size - off));
  std::memcpy(out, data + off, first);
  std::memcpy(out + first, data, len - first);
}

// One record in a ring: its header and where it starts.
struct RingRecord {
  perf_event_header header;
  const uint8_t* data;  // the ring's data pages
  uint64_t size;        // their size (a power of two)
  uint64_t pos;         // the record's first byte
  // The record's bytes [at, at + len), which may wrap.
  void copy(uint64_t at, void* dst, size_t len) const { ring_copy(data, size, pos + at, dst, len); }
};

// Hands each whole record between the ring's tail and head to visit and
// gives their space back to the kernel; returns the bytes consumed.  Each
// record is at most 64 KiB (its u16 size) and moves the tail up.
template <typename Visit>
uint64_t consume_records(MappedRegion& ring, Visit&& visit) {
  if (!ring) return 0;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* meta = static_cast<perf_event_mmap_page*>(ring.data());
  RingRecord r{};
  r.data = ring.bytes() + page;
  r.size = ring.size() - page;
  const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  const uint64_t start = meta->data_tail;
  uint64_t tail = start;
  while (head - tail >= sizeof(perf_event_header)) {
    ring_copy(r.data, r.size, tail, &r.header, sizeof(r.header));
    if (r.header.size < sizeof(r.header) || r.header.size > head - tail) break;
    r.pos = tail;
    visit(static_cast<const RingRecord&>(r));
    tail += r.header.size;
  }
  __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
  return tail - start;
}

}  // namespace

PerfCounts PerfEvent::drain() {
  for (Event& e : events_) {
    counts_.bytes += consume_records(e.ring, [&](const RingRecord& r) {
      if (r.header.type == PERF_RECORD_SAMPLE) {
        counts_.samples++;
      } else if (r.header.type == PERF_RECORD_LOST && r.header.size >= sizeof(r.header) + 16) {
        uint64_t lost = 0;
        r.copy(sizeof(r.header) + 8, &lost, sizeof(lost));
        counts_.lost += lost;
      }
    });
  }
  return counts_;
}

namespace {

uint32_t get32(const std::vector<uint8_t>& r, size_t at) {
  uint32_t v;
  std::memcpy(&v, r.data() + at, sizeof(v));
  return v;
}

uint64_t get64(const std::vector<uint8_t>& r, size_t at) {
  uint64_t v;
  std::memcpy(&v, r.data() + at, sizeof(v));
  return v;
}

// A NUL-terminated string in r[at, end), or all of it.
std::string get_string(const std::vector<uint8_t>& r, size_t at, size_t end) {
  const char* s = reinterpret_cast<const char*>(r.data() + at);
  return std::string(s, strnlen(s, end - at));
}

// Parses one side-band record r (header included) into ev; false for a
// record of another type or too short for its own.  With sample_id_all
// and PERF_SAMPLE_TID | PERF_SAMPLE_TIME, every record ends in {u32 pid,
// tid; u64 time}.
bool parse_task_record(const std::vector<uint8_t>& r, TaskEvent* ev) {
  const size_t hdr = sizeof(perf_event_header), id = 16;
  perf_event_header h;
  std::memcpy(&h, r.data(), hdr);
  if (r.size() < hdr + id) return false;
  const size_t end = r.size() - id;  // where sample_id starts
  ev->time = get64(r, end + 8);
  switch (h.type) {
    case PERF_RECORD_MMAP2: {
      // pid, tid, addr, len, pgoff, 24 bytes of maj/min/ino/generation or
      // build id, prot, flags, filename.
      const size_t name_at = hdr + 8 + 24 + 24 + 8;
      if (end <= name_at) return false;
      ev->kind = TaskEvent::Kind::kMmap;
      ev->pid = get32(r, hdr);
      ev->tid = get32(r, hdr + 4);
      ev->start = get64(r, hdr + 8);
      ev->len = get64(r, hdr + 16);
      ev->pgoff = get64(r, hdr + 24);
      ev->name = get_string(r, name_at, end);
      return true;
    }
    case PERF_RECORD_COMM:
      if (end <= hdr + 8) return false;
      ev->kind = TaskEvent::Kind::kComm;
      ev->pid = get32(r, hdr);
      ev->tid = get32(r, hdr + 4);
      ev->exec = (h.misc & PERF_RECORD_MISC_COMM_EXEC) != 0;
      ev->name = get_string(r, hdr + 8, end);
      return true;
    case PERF_RECORD_FORK:
    case PERF_RECORD_EXIT:
      // pid, ppid, tid, ptid, time.
      if (end < hdr + 24) return false;
      ev->kind = h.type == PERF_RECORD_FORK ? TaskEvent::Kind::kFork : TaskEvent::Kind::kExit;
      ev->pid = get32(r, hdr);
      ev->ppid = get32(r, hdr + 4);
      ev->tid = get32(r, hdr + 8);
      ev->ptid = get32(r, hdr + 12);
      return true;
  }
  return false;
}

}  // namespace

size_t PerfEvent::read_task_events(std::vector<TaskEvent>* out) {
  size_t n = 0;
  std::vector<uint8_t> rec;
  for (Event& e : events_) {
    counts_.bytes += consume_records(e.ring, [&](const RingRecord& r) {
      rec.resize(r.header.size);
      r.copy(0, rec.data(), rec.size());
      TaskEvent ev;
      if (r.header.type == PERF_RECORD_LOST && r.header.size >= sizeof(r.header) + 16) {
        counts_.lost += get64(rec, sizeof(r.header) + 8);
      } else if (parse_task_record(rec, &ev)) {
        out->push_back(std::move(ev));
        n++;
      }
    });
  }
  return n;
}

int perf_event_paranoid() {
  FILE* f = std::fopen("/proc/sys/kernel/perf_event_paranoid", "re");
  if (!f) return INT_MIN;
  int v = INT_MIN;
  if (std::fscanf(f, "%d", &v) != 1) v = INT_MIN;
  std::fclose(f);
  return v;
}

}  // namespace sframe
