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
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "vmtest.h"
#include "sframe_profile/symbolizer.h"

namespace {

constexpr char kParam[] = "/sys/module/sframe_unwind/parameters/nmi_test_owner";

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
  ::testing::AssertionResult injected = ::testing::AssertionFailure();
  pid_t spinner_tid;
  {
    vmtest::CpuZeroSpinner spinner;
    spinner_tid = spinner.tid();
    ASSERT_TRUE(vmtest::SetModuleParam("nmi_test_owner", std::to_string(getpid()).c_str()));
    injected = vmtest::InjectNmis(40, 20);
    EXPECT_TRUE(vmtest::SetModuleParam("nmi_test_owner", "0"));
  }
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
    if (pid_t(r.tid) != spinner_tid) continue;
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
              (vmtest::ChainIs(chain, vmtest::CpuZeroSpinner::FromLeaf()) ||
               vmtest::ChainIs(chain, vmtest::CpuZeroSpinner::FromMiddle()));
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
