// PerfEvent on the host (no module needed; skipped where perf is not
// allowed): open_task_events(), perf's side-band records of a command that
// forks and execs; and where sampling events go with and without a ring.
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "sframe_client/error.h"
#include "sframe_client/perf_event.h"
#include "sframe_test/errno_of.h"

namespace {

using sframe::TaskEvent;

TEST(TaskEvents, ForkExecMmapExitOfACommandAndItsChild) {
  int go[2];
  ASSERT_EQ(pipe2(go, O_CLOEXEC), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char c;
    if (read(go[0], &c, 1) != 1) _exit(126);
    // The shell forks, its child execs /bin/true.
    execl("/bin/sh", "sh", "-c", "/bin/true; sleep 1", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(go[0]);
  sframe::PerfEventOptions o;
  o.enable_on_exec = true;
  sframe::PerfEvent ev;
  try {
    ev = sframe::PerfEvent::open_task_events(child, o);
  } catch (const sframe::Error& e) {
    close(go[1]);
    waitpid(child, nullptr, 0);
    GTEST_SKIP() << "perf not allowed here: " << e.what();
  }
  ASSERT_EQ(write(go[1], "g", 1), 1);
  close(go[1]);
  // Each record wakes its reader (a watermark of one byte), not half a
  // ring: poll() says so while the shell still sleeps (1 s), long before
  // its exit would (POLLHUP).
  std::vector<pollfd> fds;
  for (size_t i = 0; i < ev.size(); i++) fds.push_back({ev.fd(i), POLLIN, 0});
  EXPECT_GT(poll(fds.data(), fds.size(), 500), 0);
  int st = 0;
  EXPECT_EQ(waitpid(child, &st, WNOHANG), 0) << "woken only by the exit";
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  std::vector<TaskEvent> events;
  ev.read_task_events(&events);

  bool sh_exec = false, true_exec = false, true_mmap = false, forked = false, exited = false;
  uint32_t true_pid = 0;  // the shell's child that exec'd /bin/true
  for (const TaskEvent& e : events) {
    EXPECT_GT(e.time, 0u);
    if (e.kind == TaskEvent::Kind::kComm && e.exec && e.name == "true") {
      true_exec = true;
      true_pid = e.pid;
    }
    if (e.kind == TaskEvent::Kind::kComm && e.exec && e.pid == static_cast<uint32_t>(child) &&
        e.name == "sh") {
      sh_exec = true;
    }
  }
  for (const TaskEvent& e : events) {
    if (e.kind == TaskEvent::Kind::kFork && e.new_process() && e.pid == true_pid &&
        e.ppid == static_cast<uint32_t>(child)) {
      forked = true;
    }
    if (e.kind == TaskEvent::Kind::kMmap && e.pid == true_pid &&
        e.name.find("true") != std::string::npos) {
      true_mmap = e.len > 0 && e.start > 0;
    }
    if (e.process_exit() && e.pid == true_pid) exited = true;
  }
  EXPECT_TRUE(sh_exec);
  EXPECT_TRUE(true_exec);
  EXPECT_TRUE(forked);
  EXPECT_TRUE(true_mmap);
  EXPECT_TRUE(exited);
}

// Perf's ring buffers this process has mapped.
int perf_rings_mapped() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("[perf_event]") != std::string::npos) n++;
  }
  return n;
}

// This process, with two more threads for as long as it lives.
class ThreeThreads {
 public:
  ThreeThreads() {
    for (auto& t : threads_) {
      t = std::thread([this] {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return done_; });
      });
    }
  }
  ~ThreeThreads() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread threads_[2];
};

// Sampling events without a ring (what sframe-prof opens): one per thread
// even with inherit, since only a mapped ring needs a CPU, and nothing
// mapped; with a ring, one per thread and CPU and one ring per CPU.  The
// side-band events keep their rings whatever data_pages_log2 says.
TEST(SamplingEvents, WithoutARingOnePerThreadNothingMapped) {
  ThreeThreads threads;
  const size_t ncpu = sframe::online_cpus().size();
  sframe::PerfEventSpec spec;
  spec.pids = {getpid()};
  spec.inherit = true;
  spec.exclude_kernel = true;
  spec.data_pages_log2 = sframe::kPerfEventNoRing;
  const int rings_before = perf_rings_mapped();
  sframe::PerfEvent ev;
  try {
    ev = sframe::PerfEvent::open(spec);
  } catch (const sframe::Error& e) {
    GTEST_SKIP() << "perf not allowed here: " << e.what();
  }
  EXPECT_EQ(sframe::PerfEvent::count(spec), 3u);
  EXPECT_EQ(ev.size(), 3u);
  EXPECT_EQ(perf_rings_mapped(), rings_before) << "no ring for sampling events";
  ev.enable();
  ev.disable();
  EXPECT_EQ(ev.drain().bytes, 0u);

  sframe::PerfEventSpec ringed = spec;
  ringed.data_pages_log2 = 1;
  EXPECT_EQ(sframe::PerfEvent::count(ringed), 3 * ncpu);
  {
    sframe::PerfEvent with_rings = sframe::PerfEvent::open(ringed);
    EXPECT_EQ(with_rings.size(), 3 * ncpu);
    EXPECT_EQ(perf_rings_mapped(), rings_before + static_cast<int>(ncpu)) << "one ring per CPU";
  }

  sframe::PerfEventSpec side_band = spec;
  side_band.task_events = true;
  EXPECT_EQ(sframe::PerfEvent::count(side_band), 3 * ncpu);
  {
    sframe::PerfEvent tasks = sframe::PerfEvent::open(side_band);
    EXPECT_EQ(perf_rings_mapped(), rings_before + static_cast<int>(ncpu))
        << "side-band events have rings of the default size";
  }

  // A ring larger than a shift can say: refused before any mmap().
  ringed.data_pages_log2 = 40;
  EXPECT_EQ(sframe::errno_of([&] { sframe::PerfEvent::open(ringed); }), EINVAL);
}

}  // namespace
