// PerfEvent::open_task_events() on the host: perf's side-band records of a
// command that forks and execs (no module needed; skipped where perf is
// not allowed).
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sframe_client/error.h"
#include "sframe_client/perf_event.h"

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

}  // namespace
