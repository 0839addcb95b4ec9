// Sessions (SFRAME_IOC_SESSION_START): stitched kernel + user stacks of
// perf samples, in the VM on Debian's kernel.
//
// The targets are separate processes (session_workload, next to this
// program, built with -O2 -fomit-frame-pointer -Wa,--gsframe; it registers
// its own .sframe at start): this program opens a cpu-clock perf event on
// the target (sframe::PerfEvent) and a session on it (sframe::Session), so
// the session sees the samples of an event its own process owns.  Records
// are symbolized through the target's /proc/PID/maps.
//
// Exact chains use SFRAME_UNWIND_F_SFRAME only: the walk stops in libc (no
// .sframe) with NO_COVERAGE instead of guessing on with frame pointers that
// the target does not keep.
//
// Privileges.  Debian's kernel defaults kernel.perf_event_paranoid to 3,
// which forbids perf_event_open() and sessions to every unprivileged user.
// The rig runs this program as root, then as uid 65534, and the user run
// sees whatever the root run left: so no test leaves the setting changed
// (ParanoidGuard restores it).  The unprivileged cases run in the ROOT run,
// in a forked child that sets the paranoid level as root, then drops to
// uid/gid 65534 with setresuid/setresgid (RunAsNobody).  In the user run,
// with paranoid 3, the tests that need perf_event_open() are skipped with
// that reason, and SESSION_START is checked to be refused (EACCES).
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sessions.h"
#include "vmtest.h"
#include "sframe_test/errno_of.h"
#include "sframe_profile/symbolizer.h"

namespace {

using sframe::Record;
using sframe::Sample;
using sframe::Session;
using sframe::Target;
using vmtest::ChainCheck;
using vmtest::CheckChain;
using vmtest::Collect;
using vmtest::Collected;
using vmtest::Describe;
using vmtest::IsRoot;
using vmtest::kExecChain;
using vmtest::kLibc;
using vmtest::kReadChain;
using vmtest::kSpinChain;
using vmtest::kThreadChain;
using vmtest::MostlyComplete;
using vmtest::Names;
using vmtest::ParanoidGuard;
using vmtest::RunAsNobody;
using vmtest::SessionTest;
using vmtest::Workload;

constexpr char kModule[] = "sframe_unwind";

// ---- chains at 10 kHz ------------------------------------------------------------------

TEST_F(SessionTest, SpinChainIsCompleteInAtLeast99PercentAtTenKilohertz) {
  SKIP_WITHOUT_PERF();
  auto w = StartWorkload({"spin", "0"});
  ASSERT_TRUE(w);
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(10000));
  Session s = Session::start(Target::kProcess, w->pid(), SframeOnly());
  Collected c = Collect(&s, &ev, 3000);
  w->Kill();

  ChainCheck check;
  size_t other_pid = 0;
  for (const Sample* smp : c.Samples()) {
    if (smp->pid != static_cast<uint32_t>(w->pid())) other_pid++;
    CheckChain(*smp, User(*smp), kSpinChain, &check);
  }
  RecordProperty("samples", std::to_string(c.stats.samples));
  RecordProperty("records", std::to_string(c.records.size()));
  RecordProperty("perf_samples", std::to_string(ev.counts().samples));
  RecordProperty("complete", std::to_string(check.complete) + "/" + std::to_string(check.considered));
  RecordProperty("bytes_per_record",
                 std::to_string(c.records.empty() ? 0 : c.bytes / c.records.size()));
  EXPECT_EQ(other_pid, 0u) << "records of other processes";
  // 3 s of a CPU-bound task at 10 kHz: thousands of samples even under TCG.
  EXPECT_TRUE(MostlyComplete(check, 0.99, 1000));
  EXPECT_EQ(c.stats.lost, 0u) << "records dropped at 10 kHz with the default buffer";
  EXPECT_EQ(c.LostRecords(), 0u);
  EXPECT_EQ(c.stats.records, c.Samples().size()) << "records written vs read";
  EXPECT_GE(c.stats.samples, c.stats.records);
  // Every sample perf took of its event reached the session (the last few
  // may be in flight when perf's ring was drained).
  EXPECT_GE(c.stats.samples + 10, ev.counts().samples);
}

// Discovery (module parameter `discovery`, on by default): a program
// that registers nothing still gets complete chains, because the module
// finds the .sframe of the files mapped where its PCs are.
TEST_F(SessionTest, DiscoveryCoversAProgramThatNeverRegisters) {
  SKIP_WITHOUT_PERF();
  sframe::Stats before = dev().stats();
  setenv("SFRAME_WORKLOAD_NO_REGISTER", "1", 1);
  auto w = StartWorkload({"spin", "0"});
  unsetenv("SFRAME_WORKLOAD_NO_REGISTER");
  ASSERT_TRUE(w);
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(10000));
  Session s = Session::start(Target::kProcess, w->pid(), SframeOnly());
  Collected c = Collect(&s, &ev, 2000);
  w->Kill();

  ChainCheck check;
  for (const Sample* smp : c.Samples()) CheckChain(*smp, User(*smp), kSpinChain, &check);
  RecordProperty("complete", std::to_string(check.complete) + "/" + std::to_string(check.considered));
  EXPECT_TRUE(MostlyComplete(check, 0.99, 500));
  // The executable, and libc (none: a "none" entry, not a section).
  EXPECT_GE(dev().stats().sections_discovered, before.sections_discovered + 1);
  EXPECT_EQ(c.stats.lost, 0u);
}

// The same through a dlopen()ed library that nobody registers: the
// executable and the library are both discovered.
TEST_F(SessionTest, DiscoveryCoversADlopenedLibrary) {
  SKIP_WITHOUT_PERF();
  const sframe::Stats before = dev().stats();
  setenv("SFRAME_WORKLOAD_NO_REGISTER", "1", 1);
  auto w = StartWorkload({"dlspin", "0"});
  unsetenv("SFRAME_WORKLOAD_NO_REGISTER");
  ASSERT_TRUE(w);
  // Let it load the library before the symbolizer reads its maps.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  sym_.forget_process(w->pid());
  sym_.load_process(w->pid());
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(10000));
  Session s = Session::start(Target::kProcess, w->pid(), SframeOnly());
  Collected c = Collect(&s, &ev, 2000);
  w->Kill();

  const std::vector<std::string> chain = {"wl_dl_leaf", "wl_dl_spin", "wl_dlspin_a", "main", kLibc};
  ChainCheck check;
  for (const Sample* smp : c.Samples()) CheckChain(*smp, User(*smp), chain, &check);
  RecordProperty("complete", std::to_string(check.complete) + "/" + std::to_string(check.considered));
  EXPECT_TRUE(MostlyComplete(check, 0.99, 500));
  EXPECT_GE(dev().stats().sections_discovered, before.sections_discovered + 2)
      << "the executable and the dlopen()ed library";
}

TEST_F(SessionTest, ReadsOfDevZeroCarryKernelFramesAndShareOneUnwindPerEntry) {
  SKIP_WITHOUT_PERF();
  if (UserOnly()) GTEST_SKIP() << "kernel-mode samples need paranoid <= 1 (is " << paranoid_ << ")";
  auto w = StartWorkload({"read", "0", std::to_string(8 << 20)});
  ASSERT_TRUE(w);
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(10000));
  Session s = Session::start(Target::kProcess, w->pid(), SframeOnly());
  ASSERT_TRUE(s.kernel_visible()) << "as root the session must show kernel addresses";
  Collected c = Collect(&s, &ev, 3000);
  w->Kill();

  sframe::KernelSymbolizer k;
  ChainCheck in_kernel;
  std::map<uint64_t, size_t> per_cookie;
  size_t kernel_mode = 0, with_vfs_read = 0, bad_kernel_ip = 0;
  std::string example;
  for (const Sample* smp : c.Samples()) {
    if (smp->has(SFRAME_SAMPLE_F_USER_MODE)) continue;
    kernel_mode++;
    per_cookie[smp->cookie]++;
    EXPECT_FALSE(smp->has(SFRAME_SAMPLE_F_KERNEL_HIDDEN)) << Describe(*smp, User(*smp), &k);
    for (uint64_t ip : smp->kernel) {
      if (ip < 0xffff800000000000ull) bad_kernel_ip++;
    }
    if (k.usable()) {
      for (uint64_t ip : smp->kernel) {
        if (k.symbolize(ip).name == "vfs_read") {
          with_vfs_read++;
          break;
        }
      }
    }
    CheckChain(*smp, User(*smp), kReadChain, &in_kernel, &k);
    if (example.empty() && !smp->kernel.empty()) example = Describe(*smp, User(*smp), &k);
  }
  size_t max_per_cookie = 0;
  for (const auto& [cookie, n] : per_cookie) max_per_cookie = std::max(max_per_cookie, n);
  RecordProperty("kernel_mode_samples", std::to_string(kernel_mode));
  RecordProperty("cookies", std::to_string(per_cookie.size()));
  RecordProperty("max_samples_per_cookie", std::to_string(max_per_cookie));
  RecordProperty("unwinds", std::to_string(c.stats.unwinds));
  RecordProperty("samples", std::to_string(c.stats.samples));
  std::printf("example record:\n%s", example.c_str());

  ASSERT_GE(kernel_mode, 500u) << "a task reading 8 MiB of /dev/zero per call spends its time in "
                                  "the kernel";
  EXPECT_EQ(bad_kernel_ip, 0u) << "kernel frames below the kernel's half of the address space";
  if (k.usable()) {
    EXPECT_GE(with_vfs_read * 10, kernel_mode * 8)
        << with_vfs_read << " of " << kernel_mode << " kernel-mode samples have vfs_read in "
        << "their kernel frames; e.g.\n" << example;
  }
  // The user chain that made the call, stitched to the kernel frames.
  EXPECT_TRUE(MostlyComplete(in_kernel, 0.99, 500));
  EXPECT_GE(in_kernel.considered * 100, kernel_mode * 99) << "kernel-mode samples whose user PC "
                                                             "is not the read syscall";
  EXPECT_GE(max_per_cookie, 2u) << "no kernel entry got two samples";
  EXPECT_LT(per_cookie.size(), kernel_mode) << "every sample had its own cookie";
  EXPECT_LT(c.stats.unwinds, c.stats.samples);
  EXPECT_GT(c.stats.unwinds, 0u);
  EXPECT_EQ(c.stats.lost, 0u);
}

// ---- threads --------------------------------------------------------------------------

TEST_F(SessionTest, EightThreadsAreEachSampledWithTheirOwnChains) {
  SKIP_WITHOUT_PERF();
  auto w = StartWorkload({"threads", "8", "0"});
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->WaitFor("tid", 8, 10000)) << w->output();
  std::vector<pid_t> tids = w->Tids();
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(10000));
  Session s = Session::start(Target::kProcess, w->pid(), SframeOnly());
  Collected c = Collect(&s, &ev, 3000);

  ChainCheck check;
  std::map<uint32_t, size_t> per_tid;
  for (const Sample* smp : c.Samples()) {
    EXPECT_EQ(smp->pid, static_cast<uint32_t>(w->pid()));
    per_tid[smp->tid]++;
    CheckChain(*smp, User(*smp), kThreadChain, &check);
  }
  for (pid_t t : tids) {
    EXPECT_GE(per_tid[static_cast<uint32_t>(t)], 20u) << "thread " << t << " barely sampled";
  }
  EXPECT_TRUE(MostlyComplete(check, 0.99, 1000));
  EXPECT_EQ(c.stats.lost, 0u);

  // A session on one thread sees only that thread.
  const pid_t one = tids.at(3);
  Session t = Session::start(Target::kThread, one, SframeOnly());
  Collected ct = Collect(&t, &ev, 1000);
  w->Kill();
  size_t others = 0;
  for (const Sample* smp : ct.Samples()) others += smp->tid != static_cast<uint32_t>(one);
  EXPECT_GE(ct.Samples().size(), 20u);
  EXPECT_EQ(others, 0u) << "a thread session got samples of other threads";
}

TEST_F(SessionTest, TwoSessionsAtOnceSeeTheSameSamplesIndependently) {
  SKIP_WITHOUT_PERF();
  auto w = StartWorkload({"threads", "8", "0"});
  ASSERT_TRUE(w);
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(10000));
  // Rings that hold the whole 2 s (at most 20,000 samples of about 170
  // bytes): the test is about two sessions' independence, not about its one
  // reader thread keeping up beside eight spinning threads.  With the
  // default 1 MiB, a reader starved for half a second under emulation lost
  // some 9,650 records in each ring (once, on 7.3).
  sframe::SessionOptions o = SframeOnly();
  o.buffer_size = 16u << 20;
  Session a = Session::start(Target::kProcess, w->pid(), o);
  Session b = Session::start(Target::kProcess, w->pid(), o);
  std::vector<Collected> c = Collect({&a, &b}, &ev, 2000);
  w->Kill();

  std::set<std::pair<uint32_t, uint64_t>> seen[2];
  ChainCheck check[2];
  for (int i = 0; i < 2; i++) {
    for (const Sample* smp : c[i].Samples()) {
      seen[i].insert({smp->tid, smp->time});
      CheckChain(*smp, User(*smp), kThreadChain, &check[i]);
    }
    EXPECT_TRUE(MostlyComplete(check[i], 0.99, 500)) << "session " << i;
    EXPECT_EQ(c[i].stats.lost, 0u) << "session " << i << ": " << c[i].stats.samples
                                   << " samples written";
  }
  size_t common = 0;
  for (const auto& k : seen[0]) common += seen[1].count(k);
  EXPECT_GE(common * 100, seen[0].size() * 99) << "samples of session 0 also in session 1";
  EXPECT_GE(common * 100, seen[1].size() * 99) << "samples of session 1 also in session 0";
  EXPECT_EQ(c[0].stats.samples, c[1].stats.samples);
}

// SFRAME_TARGET_ALL with one event per CPU (root): every task's samples,
// the workload's with their chains, kernel threads flagged without a user
// stack.
TEST_F(SessionTest, AllTasksWithPerCpuEvents) {
  if (!IsRoot() && paranoid_ > 0) {
    GTEST_SKIP() << "CPU-wide events and SFRAME_TARGET_ALL need privileges or "
                    "perf_event_paranoid <= 0 (it is " << paranoid_ << ")";
  }
  auto w = StartWorkload({"spin", "0"});
  ASSERT_TRUE(w);
  sframe::PerfEventOptions po = PerfOptions(2000);
  sframe::PerfEvent ev = sframe::PerfEvent::open_all_cpus(po);
  Session s = Session::start(Target::kAll, 0, SframeOnly());
  Collected c = Collect(&s, &ev, 2000);
  w->Kill();
  ChainCheck check;
  size_t workload = 0, kthread_with_user = 0;
  std::set<uint32_t> pids;
  for (const Sample* smp : c.Samples()) {
    pids.insert(smp->pid);
    if (smp->has(SFRAME_SAMPLE_F_KTHREAD) && !smp->user.empty()) kthread_with_user++;
    if (smp->pid != static_cast<uint32_t>(w->pid())) continue;
    workload++;
    CheckChain(*smp, User(*smp), kSpinChain, &check);
  }
  RecordProperty("pids", std::to_string(pids.size()));
  EXPECT_GE(workload, 500u);
  EXPECT_TRUE(MostlyComplete(check, 0.99, 500));
  EXPECT_EQ(kthread_with_user, 0u) << "kernel-thread samples with a user stack";
  EXPECT_GE(pids.size(), 2u) << "only one process sampled CPU-wide";
}

// Each session's unwind_flags are its own.  The chain of `fpspin` has one
// frame with a frame pointer and no .sframe (wl_fp_mid): a session asking
// for SFrame only stops there (NO_COVERAGE); one asking for both methods
// gets through it to main.  Both at once on the same target must each get
// their own kind of chain.
const std::vector<std::string> kFpSpinSframeOnly = {"wl_spin_leaf", "wl_spin_c", "wl_spin_b",
                                                    "wl_spin_a", "wl_fp_mid"};

TEST_F(SessionTest, UnwindFlagsOfOneSessionDoNotLeakIntoAnother) {
  SKIP_WITHOUT_PERF();
  auto w = StartWorkload({"fpspin", "0"});
  ASSERT_TRUE(w);
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(5000));
  sframe::SessionOptions all;
  all.device = vmtest::DevicePath();
  all.unwind_flags = SFRAME_UNWIND_F_ALL;
  {
    // Alone, each session gets its own kind of chain.
    Session alone = Session::start(Target::kProcess, w->pid(), SframeOnly());
    Collected c = Collect(&alone, &ev, 700);
    ChainCheck check;
    for (const Sample* smp : c.Samples()) CheckChain(*smp, User(*smp), kFpSpinSframeOnly, &check);
    ASSERT_TRUE(MostlyComplete(check, 0.99, 100)) << "SFrame-only session alone";
  }
  size_t through_fp = 0, total_fp = 0;
  {
    Session alone = Session::start(Target::kProcess, w->pid(), all);
    Collected c = Collect(&alone, &ev, 700);
    for (const Sample* smp : c.Samples()) {
      std::vector<std::string> n = Names(User(*smp));
      total_fp += !n.empty() && n[0] == "wl_spin_leaf";
      through_fp += n.size() >= 7 && n[4] == "wl_fp_mid" && n[5] == "main";
    }
    ASSERT_GE(through_fp * 100, total_fp * 99)
        << "the frame-pointer fallback does not step through wl_fp_mid to main";
  }
  Session sframe_only = Session::start(Target::kProcess, w->pid(), SframeOnly());
  Session with_fp = Session::start(Target::kProcess, w->pid(), all);
  std::vector<Collected> c = Collect({&sframe_only, &with_fp}, &ev, 1500);
  w->Kill();
  ChainCheck check;
  for (const Sample* smp : c[0].Samples()) CheckChain(*smp, User(*smp), kFpSpinSframeOnly, &check);
  EXPECT_TRUE(MostlyComplete(check, 0.99, 300))
      << "the SFrame-only session got frames of the frame-pointer walk of the other session";
  size_t ok = 0, considered = 0;
  for (const Sample* smp : c[1].Samples()) {
    std::vector<std::string> n = Names(User(*smp));
    considered += !n.empty() && n[0] == "wl_spin_leaf";
    ok += n.size() >= 7 && n[4] == "wl_fp_mid" && n[5] == "main";
  }
  EXPECT_GE(ok * 100, considered * 99) << "the session with both methods lost its fallback";
}

// ---- lifetimes --------------------------------------------------------------------------

TEST_F(SessionTest, TargetKilledMidSessionGivesExitedOrCompleteRecords) {
  SKIP_WITHOUT_PERF();
  for (int round = 0; round < 3; round++) {
    auto w = StartWorkload({"read", "0", std::to_string(8 << 20)});
    ASSERT_TRUE(w);
    sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(10000));
    Session s = Session::start(Target::kProcess, w->pid(), SframeOnly());
    Collected c = Collect(&s, &ev, 1500, [&] { w->Kill(); });
    EXPECT_EQ(w->Wait(), 128 + SIGKILL);

    ChainCheck check;
    size_t exited = 0, wrong = 0;
    std::string bad;
    for (const Sample* smp : c.Samples()) {
      if (smp->user.empty()) {
        // No user stack: only for a reason the flags give.
        if (smp->has(SFRAME_SAMPLE_F_EXITED) && smp->has(SFRAME_SAMPLE_F_NO_USER)) {
          exited++;
        } else {
          wrong++;
          if (bad.size() < 2000) bad += Describe(*smp, {});
        }
        continue;
      }
      EXPECT_FALSE(smp->has(SFRAME_SAMPLE_F_EXITED)) << "EXITED with a user stack";
      CheckChain(*smp, User(*smp), kReadChain, &check);
    }
    RecordProperty("exited_round" + std::to_string(round), std::to_string(exited));
    EXPECT_EQ(wrong, 0u) << "records without a user stack and without EXITED|NO_USER:\n" << bad;
    EXPECT_TRUE(MostlyComplete(check, 1.0, 100)) << "round " << round;
    EXPECT_EQ(check.considered + exited + wrong, c.Samples().size())
        << "records whose first user frame is not in the read chain";
  }
}

TEST_F(SessionTest, TargetThatExecsNeverStitchesTheOldStackToTheNew) {
  SKIP_WITHOUT_PERF();
  auto w = StartWorkload({"exec", "1000", "0"});
  ASSERT_TRUE(w);
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(10000));
  Session s = Session::start(Target::kProcess, w->pid(), SframeOnly());
  Collected c;
  // The old image's maps are needed to name its frames: read them now.
  sym_.load_process(w->pid());
  sframe::Symbolizer old_sym;
  old_sym.load_process(w->pid());
  c = Collect(&s, &ev, 2500);
  ASSERT_TRUE(w->WaitFor("text", 2, 5000)) << "the new image did not start:\n" << w->output();
  sframe::Symbolizer new_sym;
  new_sym.load_process(w->pid());
  w->Kill();
  auto texts = w->Texts();
  ASSERT_EQ(texts.size(), 2u);
  auto in = [](uint64_t pc, std::pair<uint64_t, uint64_t> r) {
    return pc >= r.first && pc < r.second;
  };

  ChainCheck old_chain, new_chain;
  size_t execed = 0, old_n = 0, new_n = 0, wrong = 0;
  std::string bad;
  for (const Sample* smp : c.Samples()) {
    if (smp->user.empty()) {
      if (smp->has(SFRAME_SAMPLE_F_EXECED)) execed++;
      continue;
    }
    EXPECT_FALSE(smp->has(SFRAME_SAMPLE_F_EXECED)) << "EXECED with a user stack";
    size_t in_old = 0, in_new = 0;
    for (uint64_t pc : smp->user) {
      in_old += in(pc, texts[0]);
      in_new += in(pc, texts[1]);
    }
    if (in_old && in_new) {
      wrong++;
      if (bad.size() < 3000) bad += Describe(*smp, old_sym.symbolize_frames(smp->pid, smp->user));
    } else if (in_old) {
      old_n++;
      CheckChain(*smp, old_sym.symbolize_frames(smp->pid, smp->user), kExecChain, &old_chain);
    } else if (in_new) {
      new_n++;
      CheckChain(*smp, new_sym.symbolize_frames(smp->pid, smp->user), kSpinChain, &new_chain);
    }
  }
  RecordProperty("execed", std::to_string(execed));
  RecordProperty("old_image", std::to_string(old_n));
  RecordProperty("new_image", std::to_string(new_n));
  EXPECT_EQ(wrong, 0u) << "frames of both images in one record:\n" << bad;
  EXPECT_GE(old_n, 100u) << "samples of the old image";
  EXPECT_GE(new_n, 100u) << "samples of the new image";
  // Before exec the old chain is complete; after it the new image's chain.
  EXPECT_TRUE(MostlyComplete(old_chain, 1.0, 100)) << "old image";
  EXPECT_TRUE(MostlyComplete(new_chain, 0.99, 100)) << "new image";
}

TEST_F(SessionTest, ClosingSessionsMidFlightLeavesLaterSessionsWorking) {
  SKIP_WITHOUT_PERF();
  auto w = StartWorkload({"read", "0", std::to_string(8 << 20)});
  ASSERT_TRUE(w);
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(10000));
  ev.enable();
  for (int i = 0; i < 10; i++) {
    // Never read: samples pile up and unwinds are pending when it closes.
    Session s = Session::start(Target::kProcess, w->pid(), SframeOnly());
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + 20 * i));
    ev.drain();
    EXPECT_GT(s.stats().samples, 0u) << "round " << i;
    s.close();
  }
  Collected c = CollectCompleteChains(w->pid(), &ev, kReadChain, 1000);
  w->Kill();
  EXPECT_EQ(c.stats.samples, c.stats.records + c.stats.lost + c.stats.lost_capture);
}

// Sessions started and closed 200 times in a row while a 10 kHz event
// samples a task in the kernel (perf's hooked sample path runs in the
// hrtimer interrupt on the other CPU all along).  Arming and disarming the
// module's kprobe with each first and last session crashed the kernel
// here; the kprobe now stays from the first session to module unload.
TEST_F(SessionTest, RapidSessionStartAndCloseWhileSampling) {
  SKIP_WITHOUT_PERF();
  auto w = StartWorkload({"read", "0", std::to_string(8 << 20)});
  ASSERT_TRUE(w);
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(10000));
  ev.enable();
  for (int i = 0; i < 200; i++) {
    Session s = Session::start(Target::kProcess, w->pid(), SframeOnly());
    if (i % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    s.close();
    ev.drain();
  }
  CollectCompleteChains(w->pid(), &ev, kReadChain, 1000);
  w->Kill();
}

// ---- ABI errors ---------------------------------------------------------------------------

TEST_F(SessionTest, StartErrors) {
  SKIP_WITHOUT_PERF();
  sframe::SessionOptions o;
  o.device = vmtest::DevicePath();
  // A pid that does not exist (pid_max is at most 2^22).
  EXPECT_EQ(sframe::errno_of([&] { Session::start(Target::kProcess, 0x7ffffff0, o); }), ESRCH);
  EXPECT_EQ(sframe::errno_of([&] { Session::start(static_cast<Target>(9), getpid(), o); }),
            EINVAL);
  sframe::SessionOptions big = o;
  big.max_user_frames = SFRAME_MAX_FRAMES + 1;
  EXPECT_EQ(sframe::errno_of([&] { Session::start(Target::kProcess, getpid(), big); }), EINVAL);
  sframe::SessionOptions bad_flags = o;
  bad_flags.unwind_flags = 0x80;
  EXPECT_EQ(sframe::errno_of([&] { Session::start(Target::kProcess, getpid(), bad_flags); }),
            EINVAL);

  // One session per file.
  Session s = Session::start(Target::kProcess, getpid(), o);
  sframe_session_start req{};
  req.size = sizeof(req);
  req.target_type = SFRAME_TARGET_PROCESS;
  req.target_id = getpid();
  EXPECT_EQ(ioctl(s.fd(), SFRAME_IOC_SESSION_START, &req), -1);
  EXPECT_EQ(errno, EBUSY);
  // A reserved field set.
  sframe::UniqueFd f = sframe::UniqueFd::open(vmtest::DevicePath(), O_RDWR);
  req.reserved[1] = 1;
  EXPECT_EQ(ioctl(f.get(), SFRAME_IOC_SESSION_START, &req), -1);
  EXPECT_EQ(errno, EINVAL);
  // Reading a file that is no session.
  char buf[256];
  EXPECT_EQ(read(f.get(), buf, sizeof(buf)), -1);
  // A buffer too small for a record.
  EXPECT_EQ(read(s.fd(), buf, 8), -1);
  EXPECT_TRUE(errno == EINVAL || errno == EAGAIN) << std::strerror(errno);
  // Stats of a fresh session: nothing yet.
  sframe::SessionStats st = s.stats();
  EXPECT_EQ(st.lost, 0u);
  EXPECT_EQ(st.records, st.samples - st.lost - st.lost_capture);
}

// ---- unprivileged ---------------------------------------------------------------------------

// What a uid-65534 process may do with paranoid 2: sessions on its own
// processes, user-only samples, no kernel addresses; nothing on root's.
std::string NobodyAtParanoidTwo(pid_t roots_process) {
  std::ostringstream err;
  sframe::SessionOptions o;
  o.device = vmtest::DevicePath();
  o.unwind_flags = SFRAME_UNWIND_F_SFRAME;
  int e = sframe::errno_of([&] { Session::start(Target::kProcess, roots_process, o); });
  if (e != EPERM) err << "session on root's process " << roots_process << ": " << sframe::errno_name(e) << ", want EPERM\n";
  e = sframe::errno_of([&] { Session::start(Target::kThread, roots_process, o); });
  if (e != EPERM) err << "session on root's thread: " << sframe::errno_name(e) << ", want EPERM\n";
  e = sframe::errno_of([&] { Session::start(Target::kAll, 0, o); });
  if (e != EACCES) err << "session on all tasks: " << sframe::errno_name(e) << ", want EACCES\n";

  std::string why;
  auto w = Workload::Start({"spin", "0"}, &why);
  if (!w) return err.str() + why;
  sframe::Symbolizer sym;
  sym.load_process(w->pid());
  sframe::PerfEventOptions po;
  po.frequency = 10000;
  po.exclude_kernel = true;  // paranoid 2: user space only
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), po);
  Session s = Session::start(Target::kProcess, w->pid(), o);
  if (s.kernel_visible()) err << "out_flags KERNEL_VISIBLE for uid 65534 at paranoid 2\n";
  Collected c = Collect(&s, &ev, 1500);
  w->Kill();
  ChainCheck check;
  size_t with_kernel = 0, not_hidden = 0;
  for (const Sample* smp : c.Samples()) {
    with_kernel += !smp->kernel.empty();
    // The module flags the samples whose kernel frames it withheld: those
    // taken in the kernel (none here: the event excludes the kernel).
    not_hidden += !smp->has(SFRAME_SAMPLE_F_USER_MODE) && !smp->has(SFRAME_SAMPLE_F_KERNEL_HIDDEN);
    CheckChain(*smp, sym.symbolize_frames(smp->pid, smp->user), kSpinChain, &check);
  }
  if (c.Samples().size() < 100) err << "only " << c.Samples().size() << " records\n";
  if (with_kernel) err << with_kernel << " records carry kernel frames\n";
  if (not_hidden) err << not_hidden << " kernel-mode records without KERNEL_HIDDEN\n";
  auto r = MostlyComplete(check, 0.99, 100);
  if (!r) err << r.message();
  return err.str();
}

// At paranoid 1 the same user may profile the kernel too, and sees its
// addresses (perf's rule, which the module follows).
std::string NobodyAtParanoidOne() {
  std::ostringstream err;
  std::string why;
  auto w = Workload::Start({"read", "0", std::to_string(8 << 20)}, &why);
  if (!w) return why;
  sframe::Symbolizer sym;
  sym.load_process(w->pid());
  sframe::PerfEventOptions po;
  po.frequency = 10000;
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), po);
  sframe::SessionOptions o;
  o.device = vmtest::DevicePath();
  o.unwind_flags = SFRAME_UNWIND_F_SFRAME;
  Session s = Session::start(Target::kProcess, w->pid(), o);
  if (!s.kernel_visible()) err << "no KERNEL_VISIBLE for uid 65534 at paranoid 1\n";
  Collected c = Collect(&s, &ev, 1000);
  w->Kill();
  size_t kernel_mode = 0, with_kernel = 0;
  ChainCheck check;
  for (const Sample* smp : c.Samples()) {
    if (smp->has(SFRAME_SAMPLE_F_USER_MODE)) continue;
    kernel_mode++;
    with_kernel += !smp->kernel.empty() && !smp->has(SFRAME_SAMPLE_F_KERNEL_HIDDEN);
    CheckChain(*smp, sym.symbolize_frames(smp->pid, smp->user), kReadChain, &check);
  }
  if (kernel_mode < 100) err << "only " << kernel_mode << " kernel-mode records\n";
  if (with_kernel != kernel_mode) {
    err << with_kernel << " of " << kernel_mode << " kernel-mode records carry kernel frames\n";
  }
  auto r = MostlyComplete(check, 0.99, 100);
  if (!r) err << r.message();
  return err.str();
}

TEST_F(SessionTest, UnprivilegedCannotTraceOthersNorSeeKernelAddresses) {
  if (IsRoot()) {
    EXPECT_EQ(RunAsNobody(2, [] { return NobodyAtParanoidTwo(getppid()); }), "");
    EXPECT_EQ(RunAsNobody(1, NobodyAtParanoidOne), "");
  } else if (paranoid_ == 2) {
    EXPECT_EQ(NobodyAtParanoidTwo(1), "");
  } else {
    GTEST_SKIP() << "runs as root (in a child dropping to uid 65534 with paranoid 2, then 1) or "
                    "as an unprivileged user when perf_event_paranoid is 2 (it is "
                 << paranoid_ << ")";
  }
}

std::string NobodyAtParanoidThree() {
  sframe::SessionOptions o;
  o.device = vmtest::DevicePath();
  std::string err;
  for (auto [t, id] : {std::pair<Target, pid_t>{Target::kProcess, getpid()},
                       {Target::kThread, static_cast<pid_t>(syscall(SYS_gettid))},
                       {Target::kAll, 0}}) {
    int e = sframe::errno_of([&] { Session::start(t, id, o); });
    if (e != EACCES) {
      err += "target " + std::to_string(static_cast<int>(t)) + ": " + sframe::errno_name(e) +
             ", want EACCES\n";
    }
  }
  return err;
}

TEST_F(SessionTest, ParanoidThreeRefusesUnprivilegedSessions) {
  if (IsRoot()) {
    EXPECT_EQ(RunAsNobody(3, NobodyAtParanoidThree), "");
    // Root is not bound by it.
    ParanoidGuard g(3);
    ASSERT_TRUE(g.ok());
    sframe::SessionOptions o;
    o.device = vmtest::DevicePath();
    EXPECT_NO_THROW(Session::start(Target::kAll, 0, o));
  } else if (paranoid_ > 2) {
    EXPECT_EQ(NobodyAtParanoidThree(), "");
  } else {
    GTEST_SKIP() << "perf_event_paranoid is " << paranoid_ << ", not 3, and only root may change it";
  }
}

// ---- the module cannot go while a session is open -------------------------------------------

long ModuleRefcount() {
  std::ifstream f(std::string("/sys/module/") + kModule + "/refcnt");
  long n = -1;
  f >> n;
  return f ? n : -1;
}

TEST_F(SessionTest, ModuleUnloadIsRefusedWhileASessionIsOpen) {
  if (!IsRoot()) {
    GTEST_SKIP() << "unloading a module needs CAP_SYS_MODULE (uid " << geteuid() << ")";
  }
  auto w = StartWorkload({"read", "0", std::to_string(8 << 20)});
  ASSERT_TRUE(w);
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(10000));
  sframe::SessionOptions o;
  o.device = vmtest::DevicePath();
  dev_.reset();  // only the session holds the device now
  Session s = Session::start(Target::kProcess, w->pid(), o);
  ev.enable();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_GT(ModuleRefcount(), 0);
  // delete_module(2) with O_NONBLOCK is what rmmod does.  On 6.1 a module in
  // use gives EWOULDBLOCK (== EAGAIN); EBUSY is what older kernels and the
  // "already dying" case give.  Either way the module must stay.
  errno = 0;
  long r = syscall(SYS_delete_module, kModule, O_NONBLOCK);
  int e = errno;
  RecordProperty("delete_module_errno", sframe::errno_name(e));
  EXPECT_EQ(r, -1) << "the module was unloaded under an open session";
  EXPECT_TRUE(e == EBUSY || e == EAGAIN) << "delete_module: " << sframe::errno_name(e);
  // rmmod says so too.
  int rc = std::system((std::string("rmmod ") + kModule + " >/dev/null 2>&1").c_str());
  EXPECT_NE(rc, 0) << "rmmod succeeded under an open session";
  std::ifstream mods("/proc/modules");
  std::string all((std::istreambuf_iterator<char>(mods)), std::istreambuf_iterator<char>());
  ASSERT_NE(all.find(std::string(kModule) + " "), std::string::npos) << "module gone";
  // The session still works.
  std::vector<Record> recs;
  for (int i = 0; i < 20 && recs.empty(); i++) {
    ev.drain();
    s.poll_read(&recs, 100);
  }
  EXPECT_FALSE(recs.empty());
  ev.disable();
  w->Kill();
}

}  // namespace
