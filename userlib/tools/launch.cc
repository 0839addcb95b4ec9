#include "launch.h"
#include "sframe_gen/coverage.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tools {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

uint64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000u + uint64_t(ts.tv_nsec) / 1000000u;
}

bool RateBound::take() {
  const uint64_t now = now_ns();
  if (at_ns_) tokens_ = std::min(rate_, tokens_ + rate_ * double(now - at_ns_) / 1e9);
  at_ns_ = now;
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t at = 0; at <= dirs.size();) {
    size_t end = dirs.find(':', at);
    if (end == std::string::npos) end = dirs.size();
    const std::string candidate = dirs.substr(at, end - at) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    at = end + 1;
  }
  return name;
}

int exit_code(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

StoppedCommand::StoppedCommand(char** argv, const std::string& tool)
    : program_(find_program(argv[0])) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw sframe::Error(errno, "pipe", "");
  std::fflush(nullptr);
  pid_ = fork();
  if (pid_ < 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    throw sframe::Error(err, "fork", argv[0]);
  }
  if (pid_ == 0) {
    close(fds[1]);
    char c;
    ssize_t n;
    do {
      n = read(fds[0], &c, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) _exit(127);  // the parent gave up
    execvp(argv[0], argv);
    std::fprintf(stderr, "%s: exec %s: %s\n", tool.c_str(), argv[0], std::strerror(errno));
    _exit(127);
  }
  close(fds[0]);
  go_.reset(fds[1]);
}

void StoppedCommand::start() {
  char c = 'g';
  if (write(go_.get(), &c, 1) != 1) throw sframe::Error(errno, "start", program_);
  go_.reset();
}

CoverageKeeper::CoverageKeeper(pid_t pid, bool command, const std::string& tool, bool verbose,
                               RecordingObjects* recording)
    : pid_(pid),
      command_(command),
      tool_(tool),
      verbose_(verbose),
      coverage_(dev_, pid, &recording->cache, &recording->objects) {
  struct stat self {};
  if (::stat("/proc/self/exe", &self) == 0) {
    self_dev_ = self.st_dev;
    self_ino_ = self.st_ino;
  }
}

bool CoverageKeeper::exec_done() const {
  struct stat st;
  const std::string exe = "/proc/" + std::to_string(pid_) + "/exe";
  return ::stat(exe.c_str(), &st) != 0 || st.st_ino != self_ino_ || st.st_dev != self_dev_;
}

bool CoverageKeeper::refresh() {
  if (now_ms() < next_) return false;
  if (command_ && !exec_done()) return false;
  next_ = now_ms() + (eager() ? 10 : 250);
  try {
    const sframe::CoverageUpdate u = coverage_.refresh();
    const bool supplied = !u.generated.empty() || !u.from_file.empty();
    if (supplied && verbose_) {
      timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      std::fprintf(stderr,
                   "%s: supplied SFrame for %zu objects (%zu made from .eh_frame), %" PRIu64
                   " bytes, at %ld.%09ld\n",
                   tool_.c_str(), u.generated.size() + u.from_file.size(), u.generated.size(),
                   u.supplied_bytes, static_cast<long>(ts.tv_sec), static_cast<long>(ts.tv_nsec));
    }
    if (verbose_) {
      for (const auto& [object, why] : u.failed) {
        std::fprintf(stderr, "%s: %s not covered: %s\n", tool_.c_str(), object.c_str(),
                     why.c_str());
      }
    }
    return supplied;
  } catch (const sframe::Error&) {
    // The target is gone (or exec'ing): the caller notices.
    return false;
  }
}

Sampling open_sampling(pid_t pid, bool all, bool command, bool follow, uint64_t hz,
                       sframe::SessionOptions options) {
  follow = follow && !all;
  sframe::PerfEventSpec spec;
  spec.frequency = hz;
  // The session gets the samples; perf's own records would cost each one.
  spec.data_pages_log2 = sframe::kPerfEventNoRing;
  spec.enable_on_exec = command;
  spec.inherit = true;
  if (all) {
    spec.all_tasks = true;
  } else {
    spec.pids = {pid};
  }
  const sframe::Target target = all      ? sframe::Target::kAll
                                : follow ? sframe::Target::kEvents
                                         : sframe::Target::kProcess;
  return open_sampling(spec, follow, target, target == sframe::Target::kProcess ? pid : 0,
                       options);
}

sframe::PerfEventSpec task_events_spec(const sframe::PerfEventSpec& spec) {
  sframe::PerfEventSpec t = spec;
  t.task_events = true;
  return t;
}

Sampling open_sampling(const sframe::PerfEventSpec& spec, bool follow, sframe::Target target,
                       pid_t target_id, sframe::SessionOptions options) {
  follow = follow && !spec.all_tasks;
  sframe::PerfEvent event = sframe::PerfEvent::open(spec);
  sframe::PerfEvent tasks;
  if (follow) tasks = sframe::PerfEvent::open(task_events_spec(spec));
  options.wakeup_bytes = SFRAME_SESSION_DEFAULT_BUFFER / 4;
  sframe::Session session = sframe::Session::start(target, target_id, options);
  sframe::SessionRing ring;
  try {
    ring = sframe::SessionRing::map(session);
  } catch (const sframe::Error& e) {
    if (e.err() != ENODEV) throw;  // a module before ABI 3: read() then
  }
  return Sampling{std::move(event), std::move(session), std::move(tasks), std::move(ring)};
}

size_t objects_to_hold(size_t others) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) {
    return sframe::ObjectTable::kDefaultMaxHeld;
  }
  const size_t left = lim.rlim_cur > others ? size_t(lim.rlim_cur - others) : 0;
  return std::max<size_t>(1, std::min(left, sframe::ObjectTable::kDefaultMaxHeld));
}

void ensure_descriptors(size_t events, size_t spare, const std::string& what,
                        const std::string& tool, bool verbose) {
  const rlim_t need = static_cast<rlim_t>(events + spare);
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= need) return;
  const rlimit before = lim;
  // As perf: the soft limit up to the hard one; beyond it, the hard one
  // too, which only a process with CAP_SYS_RESOURCE may raise.
  lim.rlim_cur = need;
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < need) lim.rlim_max = need;
  if (setrlimit(RLIMIT_NOFILE, &lim) == 0) {
    if (verbose) {
      std::fprintf(stderr, "%s: raised RLIMIT_NOFILE from %llu to %llu for %zu perf events\n",
                   tool.c_str(), static_cast<unsigned long long>(before.rlim_cur),
                   static_cast<unsigned long long>(need), events);
    }
    return;
  }
  auto num = [](rlim_t v) {
    return v == RLIM_INFINITY ? std::string("unlimited") : std::to_string(v);
  };
  throw sframe::Error(
      EMFILE, "record", what,
      "needs " + std::to_string(need) + " file descriptors (" + std::to_string(events) +
          " perf events for the threads and CPUs, and " + std::to_string(spare) +
          " for the rest); RLIMIT_NOFILE is " + num(before.rlim_cur) + " (hard limit " +
          num(before.rlim_max) + "): raise it with `ulimit -n " + std::to_string(need) +
          "` (beyond the hard limit: as root), or record fewer threads or CPUs (-t, -C, "
          "--no-inherit)");
}

DescendantCoverage::DescendantCoverage(const std::string& tool, bool verbose,
                                       RecordingObjects* recording)
    : tool_(tool), verbose_(verbose), recording_(recording) {}

void DescendantCoverage::note(const sframe::TaskEvent& ev) {
  const pid_t pid = static_cast<pid_t>(ev.pid);
  if (ev.process_exit()) {
    procs_.erase(pid);
  } else if (ev.kind == sframe::TaskEvent::Kind::kComm && ev.exec) {
    procs_[pid].exec_ns = ev.time;
    procs_[pid].seen_ns = 0;
  } else if (ev.kind == sframe::TaskEvent::Kind::kMmap && pid > 0) {
    Proc& p = procs_[pid];
    if (!p.seen_ns) p.seen_ns = now_ns();
    if (!p.coverage) {
      p.coverage = std::make_unique<sframe::ProcessCoverage>(dev_, pid, &recording_->cache,
                                                             &recording_->objects);
    }
    p.next = 0;
    p.until = now_ms() + 200;
  }
}

bool DescendantCoverage::eager() const {
  for (const auto& kv : procs_) {
    if (kv.second.coverage && kv.second.next <= kv.second.until) return true;
  }
  return false;
}

void DescendantCoverage::refresh() {
  const uint64_t now = now_ms();
  for (auto it = procs_.begin(); it != procs_.end();) {
    Proc& p = it->second;
    const pid_t pid = it->first;
    if (now < p.next || p.next > p.until) {
      ++it;
      continue;
    }
    p.next = now + 10;
    if (!p.coverage) {  // an exec seen, no mapping yet
      ++it;
      continue;
    }
    try {
      const uint64_t t0 = now_ns();
      const sframe::CoverageUpdate u = p.coverage->refresh();
      if (verbose_ && (!u.generated.empty() || !u.from_file.empty())) {
        const uint64_t t1 = now_ns();
        std::fprintf(stderr,
                     "%s: supplied SFrame for %zu objects (%zu made from .eh_frame), %" PRIu64
                     " bytes, at %" PRIu64 ".%09" PRIu64
                     ", pid %d, in %.1f ms, %.1f ms after its exec (its first mapping read "
                     "%.1f ms after it)\n",
                     tool_.c_str(), u.generated.size() + u.from_file.size(), u.generated.size(),
                     u.supplied_bytes, t1 / 1000000000u, t1 % 1000000000u, static_cast<int>(pid),
                     double(t1 - t0) / 1e6, p.exec_ns ? double(t1 - p.exec_ns) / 1e6 : -1.0,
                     p.exec_ns && p.seen_ns ? double(p.seen_ns - p.exec_ns) / 1e6 : -1.0);
      }
      if (verbose_) {
        for (const auto& [object, why] : u.failed) {
          std::fprintf(stderr, "%s: %s not covered in pid %d: %s\n", tool_.c_str(), object.c_str(),
                       static_cast<int>(pid), why.c_str());
        }
      }
      ++it;
    } catch (const sframe::Error&) {
      // Gone (its exit record may still be on its way), or not ours to read.
      it = procs_.erase(it);
    }
  }
}

}  // namespace tools
