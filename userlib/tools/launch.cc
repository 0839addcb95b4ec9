#include "launch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tools {

uint64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000u + uint64_t(ts.tv_nsec) / 1000000u;
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

CoverageKeeper::CoverageKeeper(pid_t pid, bool command, const std::string& tool, bool verbose)
    : pid_(pid), command_(command), tool_(tool), verbose_(verbose), coverage_(dev_, pid, &cache_) {
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

Sampling open_sampling(pid_t pid, bool all, bool command, uint64_t hz,
                       sframe::SessionOptions options) {
  sframe::PerfEventOptions po;
  po.frequency = hz;
  po.enable_on_exec = command;
  sframe::PerfEvent event =
      all ? sframe::PerfEvent::open_all_cpus(po) : sframe::PerfEvent::open_process(pid, po);
  options.wakeup_bytes = SFRAME_SESSION_DEFAULT_BUFFER / 4;
  sframe::Session session = sframe::Session::start(
      all ? sframe::Target::kAll : sframe::Target::kProcess, all ? 0 : pid, options);
  return Sampling{std::move(event), std::move(session)};
}

}  // namespace tools
