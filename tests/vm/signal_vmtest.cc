// Walks through signal frames (issue 11, section 2): from a handler on the
// normal stack, on a sigaltstack, from a nested handler, and in session
// samples taken inside a handler, the chain goes on through the kernel's
// rt_sigframe to the interrupted function and its callers; and the
// frame-pointer walk never follows an RBP into a stack other than the
// current one (a handler on a sigaltstack sees the interrupted code's RBP).
//
// Built with -O2 -fomit-frame-pointer -Wa,--gsframe like the other chains.
// The signals are raised with an inline `syscall` in sig_outer_b, so the
// interrupted PC is in covered code (right after that instruction), not in
// libc's raise().  glibc's rt_sigreturn trampoline (__restore_rt) has no
// symbol in Debian's libc: its frame is checked by address, the
// sa_restorer that sigaction() reports.
#include <signal.h>
#include <sys/wait.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "chains.h"
#include "sessions.h"
#include "vmtest.h"
#include "sframe_profile/symbolizer.h"

namespace {

using sframe::StopReason;
using vmtest::Chain;
using vmtest::ChildResult;
using vmtest::ChildTail;
using vmtest::kUnwindSelf;
using vmtest::RunChild;

// What the handlers do, set by the scenario before it raises the signal.
struct SignalPlan {
  const sframe::Device* dev = nullptr;
  uint32_t flags = SFRAME_UNWIND_F_SFRAME;
  bool nested = false;  // SIGUSR1's handler raises SIGUSR2
  sframe::UnwindResult result;
  uint64_t restorer = 0;
  bool done = false;
};
SignalPlan g_plan;

// tgkill(getpid(), gettid(), sig) straight from this function: the signal
// is delivered on the way back to user space, so the interrupted PC is the
// instruction after this `syscall`.
VMTEST_NOIPA void RaiseHere(int sig) {
  long ret;
  asm volatile("syscall"
               : "=a"(ret)
               : "0"(static_cast<long>(SYS_tgkill)), "D"(static_cast<long>(getpid())),
                 "S"(static_cast<long>(syscall(SYS_gettid))), "d"(static_cast<long>(sig))
               : "rcx", "r11", "memory");
  VMTEST_BARRIER();
}

VMTEST_NOIPA void sig_unwind(SignalPlan* p) {
  p->result = p->dev->unwind_self(512, p->flags);
  VMTEST_BARRIER();
}

VMTEST_NOIPA void sig_handler2(int) {
  sig_unwind(&g_plan);
  VMTEST_BARRIER();
}

VMTEST_NOIPA void sig_handler(int) {
  if (g_plan.nested) {
    RaiseHere(SIGUSR2);
  } else {
    sig_unwind(&g_plan);
  }
  VMTEST_BARRIER();
}

VMTEST_NOIPA int sig_outer_b(int sig) {
  RaiseHere(sig);
  VMTEST_BARRIER();
  return 2;
}

VMTEST_NOIPA int sig_outer_a(int sig) {
  int v = sig_outer_b(sig);
  VMTEST_BARRIER();
  return v + 1;
}

// Installs handler for sig (on the alternate stack with onstack) and
// returns the trampoline it returns into.
uint64_t Install(int sig, void (*handler)(int), bool onstack) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sa.sa_flags = onstack ? SA_ONSTACK : 0;
  sigemptyset(&sa.sa_mask);
  if (sigaction(sig, &sa, nullptr) != 0) return 0;
  struct sigaction now {};
  if (sigaction(sig, nullptr, &now) != 0) return 0;
  return reinterpret_cast<uint64_t>(now.sa_restorer);
}

bool UseAltStack() {
  constexpr size_t kSize = 256 << 10;
  void* m = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  stack_t ss{};
  ss.ss_sp = m;
  ss.ss_size = kSize;
  return sigaltstack(&ss, nullptr) == 0;
}

VMTEST_NOIPA int RunSignalScenario(const std::string& arg) {
  sframe::Device dev(vmtest::DevicePath());
  g_plan.dev = &dev;
  g_plan.nested = arg == "nested";
  const bool alt = arg == "altstack";
  if (alt && !UseAltStack()) return 2;
  g_plan.restorer = Install(SIGUSR1, sig_handler, alt);
  if (!g_plan.restorer || !Install(SIGUSR2, sig_handler2, false)) return 3;
  vmtest::EmitValue("restorer", g_plan.restorer);
  sig_outer_a(SIGUSR1);
  vmtest::EmitUnwind("sframe", g_plan.result);
  return 0;
}

VMTEST_CHILD(signal_chain) { return RunSignalScenario(arg); }

// The expected chain from unwind_self down to the scenario, with "@" where
// the trampoline's frame is (checked by address).
std::vector<std::string> Expected(bool nested) {
  std::vector<std::string> e = {kUnwindSelf, "(anonymous namespace)::sig_unwind"};
  if (nested) {
    e.insert(e.end(), {"(anonymous namespace)::sig_handler2", "@",
                       "(anonymous namespace)::RaiseHere", "(anonymous namespace)::sig_handler"});
  } else {
    e.push_back("(anonymous namespace)::sig_handler");
  }
  e.insert(e.end(), {"@", "(anonymous namespace)::RaiseHere", "(anonymous namespace)::sig_outer_b",
                     "(anonymous namespace)::sig_outer_a",
                     "(anonymous namespace)::RunSignalScenario"});
  return e;
}

::testing::AssertionResult ChainThroughSignals(const ChildResult& r, bool nested) {
  auto it = r.chains.find("sframe");
  if (it == r.chains.end()) return ::testing::AssertionFailure() << "no chain:\n" << r.output;
  const Chain& c = it->second;
  const uint64_t restorer = r.values.count("restorer") ? r.values.at("restorer") : 0;
  std::vector<std::string> want = Expected(nested);
  if (c.frames.size() < want.size()) {
    return ::testing::AssertionFailure() << "too short for " << want.size() << " frames:\n"
                                         << c.Describe();
  }
  for (size_t i = 0; i < want.size(); i++) {
    const vmtest::Frame& f = c.frames[i];
    bool ok = want[i] == "@" ? f.pc == restorer : f.function == want[i];
    if (!ok) {
      char pc[64];
      std::snprintf(pc, sizeof(pc), "0x%llx (trampoline 0x%llx)",
                    static_cast<unsigned long long>(f.pc),
                    static_cast<unsigned long long>(restorer));
      return ::testing::AssertionFailure() << "frame " << i << " is " << f.where << " at " << pc
                                           << ", want " << want[i] << "\n"
                                           << c.Describe();
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(SignalTest, HandlerOnTheNormalStackWalksThroughTheSignalFrame) {
  ChildResult r = RunChild("signal_chain", "normal");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(ChainThroughSignals(r, false));
}

TEST(SignalTest, HandlerOnASigaltstackWalksBackToTheInterruptedStack) {
  ChildResult r = RunChild("signal_chain", "altstack");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(ChainThroughSignals(r, false));
}

TEST(SignalTest, NestedHandlersWalkThroughBothSignalFrames) {
  ChildResult r = RunChild("signal_chain", "nested");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(ChainThroughSignals(r, true));
}

// ---- the frame-pointer rule on a sigaltstack ------------------------------------------

// A fake frame-pointer chain: {next fp, return address} pairs.
constexpr uint64_t kFakeRa[3] = {0x100000001000, 0x100000002000, 0x100000003000};

struct FakeChain {
  uint64_t words[8];
  void Build() {
    for (int i = 0; i < 3; i++) {
      words[2 * i] = i < 2 ? reinterpret_cast<uint64_t>(&words[2 * i + 2]) : 0;
      words[2 * i + 1] = kFakeRa[i];
    }
  }
};

FakeChain* g_other_stack_chain;  // in the interrupted function's frame
sframe_unwind_self g_fp_req;
uint64_t g_fp_frames[64];
long g_fp_ret;

// UNWIND_SELF with frame pointers only and RBP = fp, made right here.
VMTEST_NOIPA void UnwindWithRbp(int fd, uint64_t fp) {
  std::memset(&g_fp_req, 0, sizeof(g_fp_req));
  g_fp_req.size = sizeof(g_fp_req);
  g_fp_req.flags = SFRAME_UNWIND_F_FP;
  g_fp_req.frames = reinterpret_cast<uint64_t>(g_fp_frames);
  g_fp_req.max_frames = 64;
  long ret;
  asm volatile(
      "push %%rbp\n\t"
      "mov %[fp], %%rbp\n\t"
      "syscall\n\t"
      "pop %%rbp"
      : "=a"(ret)
      : "0"(static_cast<long>(SYS_ioctl)), "D"(static_cast<long>(fd)),
        "S"(static_cast<unsigned long>(SFRAME_IOC_UNWIND_SELF)), "d"(&g_fp_req), [fp] "r"(fp)
      : "rcx", "r11", "memory");
  g_fp_ret = ret;
}

int g_fp_fd = -1;
int g_fake_seen_other = -1, g_fake_seen_own = -1;

int FakeFramesIn(uint32_t n) {
  int seen = 0;
  for (uint32_t i = 0; i < n && i < 64; i++) {
    for (uint64_t ra : kFakeRa) seen += g_fp_frames[i] == ra;
  }
  return seen;
}

VMTEST_NOIPA void fp_handler(int) {
  // RBP pointing at a chain on the interrupted (main) stack: never followed.
  UnwindWithRbp(g_fp_fd, reinterpret_cast<uint64_t>(g_other_stack_chain));
  g_fake_seen_other = g_fp_ret == 0 ? FakeFramesIn(g_fp_req.nr_frames) : -100;
  // The same chain on this (alternate) stack: followed, as it is a stack.
  FakeChain own;
  own.Build();
  UnwindWithRbp(g_fp_fd, reinterpret_cast<uint64_t>(&own));
  g_fake_seen_own = g_fp_ret == 0 ? FakeFramesIn(g_fp_req.nr_frames) : -100;
  VMTEST_BARRIER();
}

VMTEST_CHILD(signal_fp_altstack) {
  (void)arg;
  sframe::Device dev(vmtest::DevicePath());
  g_fp_fd = dev.fd();
  if (!UseAltStack()) return 2;
  if (!Install(SIGUSR1, fp_handler, true)) return 3;
  FakeChain on_main;
  on_main.Build();
  g_other_stack_chain = &on_main;
  RaiseHere(SIGUSR1);
  vmtest::EmitValue("fake_other", static_cast<uint64_t>(g_fake_seen_other + 1000));
  vmtest::EmitValue("fake_own", static_cast<uint64_t>(g_fake_seen_own + 1000));
  return 0;
}

TEST(SignalTest, FramePointersNeverLeaveTheCurrentStack) {
  ChildResult r = RunChild("signal_fp_altstack");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  ASSERT_TRUE(r.values.count("fake_other") && r.values.count("fake_own")) << r.output;
  EXPECT_EQ(static_cast<int>(r.values["fake_other"]) - 1000, 0)
      << "the walk on the alternate stack followed RBP into the main stack";
  EXPECT_EQ(static_cast<int>(r.values["fake_own"]) - 1000, 3)
      << "the same chain on the current stack must be followed (the rule is about the stack, "
         "not the chain)";
}

// ---- session samples inside a handler ----------------------------------------------------

// Spins in this very function (the clock is read once in a while only,
// so nearly every sample's leaf is here).
VMTEST_NOIPA void sig_spin() {
  const uint64_t end = vmtest::NowMs() + 2500;
  while (vmtest::NowMs() < end) {
    for (volatile uint32_t i = 0; i < 1000000; i = i + 1) {
    }
  }
  VMTEST_BARRIER();
}

VMTEST_NOIPA void spin_handler(int) {
  sig_spin();
  VMTEST_BARRIER();
}

class SignalSessionTest : public vmtest::SessionTest {};

TEST_F(SignalSessionTest, SamplesInAHandlerCarryTheInterruptedChain) {
  SKIP_WITHOUT_PERF();
  // A child of this program: its text is at the same addresses.
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  uint64_t restorer = Install(SIGUSR1, spin_handler, false);
  ASSERT_NE(restorer, 0u);
  std::fflush(nullptr);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(go[1]);
    char c;
    if (read(go[0], &c, 1) != 1) _exit(3);
    sig_outer_a(SIGUSR1);
    _exit(0);
  }
  close(go[0]);
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(child, PerfOptions(2000));
  sframe::Session s = sframe::Session::start(sframe::Target::kProcess, child, SframeOnly());
  ASSERT_EQ(write(go[1], "g", 1), 1);
  close(go[1]);
  vmtest::Collected c = vmtest::Collect(&s, &ev, 3000);
  int st = 0;
  waitpid(child, &st, 0);
  sym_.load_process(getpid());
  const std::vector<std::string> want = {
      "(anonymous namespace)::sig_spin", "(anonymous namespace)::spin_handler", "@",
      "(anonymous namespace)::RaiseHere", "(anonymous namespace)::sig_outer_b",
      "(anonymous namespace)::sig_outer_a"};
  size_t in_spin = 0, complete = 0;
  std::string bad;
  for (const sframe::Sample* smp : c.Samples()) {
    if (smp->user.empty()) continue;
    std::vector<sframe::Symbol> syms = sym_.symbolize_frames(getpid(), smp->user);
    if (syms.empty() || !syms[0].found() || syms[0].function() != want[0]) continue;
    in_spin++;
    bool ok = syms.size() >= want.size();
    for (size_t i = 0; ok && i < want.size(); i++) {
      ok = want[i] == "@" ? smp->user[i] == restorer : syms[i].found() && syms[i].function() == want[i];
    }
    complete += ok;
    if (!ok && bad.empty()) bad = vmtest::Describe(*smp, syms);
  }
  RecordProperty("in_handler", std::to_string(in_spin));
  EXPECT_GE(in_spin, 200u);
  EXPECT_GE(complete * 100, in_spin * 99) << complete << " of " << in_spin
                                          << " samples in the handler complete; e.g.\n" << bad;
}

}  // namespace
