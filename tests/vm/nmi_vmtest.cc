// The NMI side of the perf sample path, driven by real NMIs.
//
// The VM has no PMU: perf samples there arrive in hrtimer interrupts, never
// in NMI.  The module's test hook (parameter nmi_test_owner) takes a sample
// at every NMI of unknown reason, as a hardware perf event would, and qemu
// injects such NMIs on CPU 0 when a test asks the rig (tests/vm/rig/README.md).
// A thread pinned to CPU 0 spins in a known chain; the NMIs interrupt it; the
// samples must come back through NMI -> irq_work -> task_work with the whole
// user chain, while the kernel log stays clean (the rig checks it, with
// panic_on_warn).
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "vmtest.h"
#include "sframe_profile/symbolizer.h"

namespace {

constexpr char kParam[] = "/sys/module/sframe_unwind/parameters/nmi_test_owner";

std::atomic<bool> g_stop{false};
std::atomic<pid_t> g_spinner_tid{0};
volatile uint64_t g_sink;

VMTEST_NOIPA void nmi_leaf() {
  for (int i = 0; i < 1000; i++) g_sink = g_sink * 3 + 1;
  VMTEST_BARRIER();
}

VMTEST_NOIPA void nmi_middle() {
  while (!g_stop.load(std::memory_order_relaxed)) nmi_leaf();
  VMTEST_BARRIER();
}

VMTEST_NOIPA void* nmi_spinner(void*) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  sched_setaffinity(0, sizeof(set), &set);
  g_spinner_tid = static_cast<pid_t>(syscall(SYS_gettid));
  nmi_middle();
  VMTEST_BARRIER();
  return nullptr;
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.flush();
  return bool(f);
}

// Asks the host for count NMIs (tests/vm/rig/README.md) and waits for them.
::testing::AssertionResult InjectNmis(int count, int interval_ms) {
  const char* results = std::getenv("SFRAME_VM_RESULTS");
  if (!results) return ::testing::AssertionFailure() << "SFRAME_VM_RESULTS is not set";
  std::string dir = std::string(results) + "/nmi/";
  std::string id = "nmi_vmtest." + std::to_string(getpid());
  if (!WriteFile(dir + "tmp." + id, std::to_string(count) + " " + std::to_string(interval_ms)))
    return ::testing::AssertionFailure() << "cannot write " << dir << "tmp." << id;
  if (rename((dir + "tmp." + id).c_str(), (dir + "req." + id).c_str()) != 0)
    return ::testing::AssertionFailure() << "cannot rename the NMI request";
  for (int i = 0; i < 600; i++) {
    std::ifstream done(dir + "done." + id);
    std::string line;
    if (done && std::getline(done, line)) {
      if (line.find("sent") != std::string::npos) return ::testing::AssertionSuccess();
      return ::testing::AssertionFailure() << "NMI request failed: " << line;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return ::testing::AssertionFailure() << "no answer to the NMI request in 60 s";
}

struct Records {
  std::vector<sframe_sample_record> headers;
  std::vector<std::vector<uint64_t>> user;
  uint64_t lost = 0;
};

// Reads every record available now from the session fd.
Records Drain(int fd) {
  Records out;
  std::vector<uint8_t> buf(1 << 20);
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 0) != 1) break;
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n <= 0) break;
    for (ssize_t off = 0; off + ssize_t(sizeof(sframe_record_header)) <= n;) {
      auto* h = reinterpret_cast<const sframe_record_header*>(buf.data() + off);
      if (h->size < sizeof(*h) || size_t(off) + h->size > size_t(n)) {
        ADD_FAILURE() << "malformed record at " << off;
        return out;
      }
      if (h->type == SFRAME_RECORD_SAMPLE) {
        auto* r = reinterpret_cast<const sframe_sample_record*>(h);
        EXPECT_EQ(h->size, sizeof(*r) + (r->nr_kernel + r->nr_user) * 8u);
        out.headers.push_back(*r);
        out.user.emplace_back(r->ips + r->nr_kernel, r->ips + r->nr_kernel + r->nr_user);
      } else if (h->type == SFRAME_RECORD_LOST) {
        out.lost += reinterpret_cast<const sframe_lost_record*>(h)->lost;
      }
      off += h->size;
    }
  }
  return out;
}

TEST(NmiTest, SamplesTakenInNmiCarryTheWholeUserChain) {
  if (geteuid() != 0) GTEST_SKIP() << "arming the NMI test hook needs root (module parameter)";
  if (access(kParam, W_OK) != 0) GTEST_SKIP() << "module without the NMI test hook";

  sframe::Device dev(vmtest::DevicePath());
  std::vector<sframe::Registration> regs = vmtest::RegisterLoaded(dev);
  sframe_session_start start{};
  start.size = sizeof(start);
  start.target_type = SFRAME_TARGET_PROCESS;
  start.target_id = getpid();
  // SFrame only: the walk ends at the first uncovered frame (libc's
  // start_thread), whatever RBP libc leaves there.
  start.unwind_flags = SFRAME_UNWIND_F_SFRAME;
  ASSERT_EQ(ioctl(dev.fd(), SFRAME_IOC_SESSION_START, &start), 0) << strerror(errno);
  sframe::Stats before = dev.stats();

  // The test itself stays off CPU 0, where the NMIs land.
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(1, &set);
  ASSERT_EQ(sched_setaffinity(0, sizeof(set), &set), 0);
  pthread_t spinner;
  ASSERT_EQ(pthread_create(&spinner, nullptr, nmi_spinner, nullptr), 0);
  while (!g_spinner_tid) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));

  ASSERT_TRUE(vmtest::SetModuleParam("nmi_test_owner", std::to_string(getpid()).c_str()));
  ::testing::AssertionResult injected = InjectNmis(40, 20);
  EXPECT_TRUE(vmtest::SetModuleParam("nmi_test_owner", "0"));
  g_stop = true;
  pthread_join(spinner, nullptr);
  ASSERT_TRUE(injected);

  sframe::Stats after = dev.stats();
  Records recs = Drain(dev.fd());
  uint64_t nmi_samples = after.samples_nmi - before.samples_nmi;
  EXPECT_GE(nmi_samples, 20u) << "most of the 40 NMIs interrupt the spinner on CPU 0";
  EXPECT_EQ(recs.lost, 0u);

  // Every sample of the spinner, unwound at its return to user space: the
  // whole chain.
  sframe::Symbolizer sym;
  size_t spinner_records = 0, complete = 0;
  std::string first_bad;
  for (size_t i = 0; i < recs.headers.size(); i++) {
    const sframe_sample_record& r = recs.headers[i];
    if (pid_t(r.tid) != g_spinner_tid) continue;
    spinner_records++;
    vmtest::Chain chain;
    for (const sframe::Symbol& s : sym.symbolize_frames(recs.user[i]))
      chain.frames.push_back({s.address, s.found() ? s.function() : "?", s.to_string()});
    chain.stop = static_cast<sframe::StopReason>(r.user_stop);
    // The NMI lands in the leaf's loop or, between two calls, in the middle.
    // Mostly in user mode; an NMI may also catch the spinner in the kernel
    // (an interrupt, a page fault), with the same user chain below.
    bool user_mode = r.flags & SFRAME_SAMPLE_F_USER_MODE;
    bool ok = (user_mode ? r.nr_kernel == 0 : r.nr_kernel > 0) &&
              r.user_stop == SFRAME_STOP_NO_COVERAGE &&
              (vmtest::ChainIs(chain, {"(anonymous namespace)::nmi_leaf",
                                       "(anonymous namespace)::nmi_middle",
                                       "(anonymous namespace)::nmi_spinner", vmtest::kStartThread}) ||
               vmtest::ChainIs(chain, {"(anonymous namespace)::nmi_middle",
                                       "(anonymous namespace)::nmi_spinner", vmtest::kStartThread}));
    if (ok)
      complete++;
    else if (first_bad.empty())
      first_bad = "flags " + std::to_string(r.flags) + " nr_kernel " + std::to_string(r.nr_kernel) +
                  ": " + chain.Describe();
  }
  EXPECT_GE(spinner_records, nmi_samples > 5 ? nmi_samples - 5 : 0)
      << "samples taken in NMI are lost on the way to the session";
  EXPECT_EQ(complete, spinner_records) << "first incomplete: " << first_bad;
}

}  // namespace
