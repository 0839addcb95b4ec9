// Stock perf's own callchains walked with SFrame (module/perf_callchain.c,
// issue 31, the synchronous part; on 7.x also module/perf_deferred.c, the
// deferred part): `perf record -g` (and on 7.x `perf record --call-graph
// fp,defer`) of a program built without frame pointers, with the module's
// perf_callchain parameter off and on, read back with `perf script`.
//
// The program is session_workload spinning in wl_spin_leaf < wl_spin_c <
// wl_spin_b < wl_spin_a < main (its own .sframe, no frame pointers), told
// not to register its section: the module must find it by itself, from a
// deferred walk the hook asks for.  cpu-clock samples in the hrtimer
// interrupt (TCG has no PMU), where perf_callchain_user() runs.
// Root only: the parameter is root's, and perf is root's in the VM
// (perf_event_paranoid 3).
//
// make check boots this program apart, with single-threaded TCG: under
// Debian 12's qemu 7.2 with multi-threaded TCG, ftrace's rewriting of
// perf_callchain_user()'s first bytes while another vCPU samples oopses
// 7.3's guest on an int3 nobody claims, stock ftrace's function tracer
// alike with no module loaded (tests/vm/rig/mttcg-ftrace-int3.sh).
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sframe_client/device.h"
#include "synthetic.h"
#include "vmtest.h"

#ifndef SFRAME_CLIENT_TOOL_REL
#error "SFRAME_CLIENT_TOOL_REL (sframe-client, relative to this program's directory) must be defined"
#endif

namespace {

bool IsRoot() { return geteuid() == 0; }
using vmtest::RunShell;
using vmtest::ShellResult;

const char kParam[] = "/sys/module/sframe_unwind/parameters/perf_callchain";
const std::vector<std::string> kSpinChain = {"wl_spin_leaf", "wl_spin_c", "wl_spin_b",
                                             "wl_spin_a", "main"};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One sample of `perf script -F ip,sym`: its callchain, leaf first.
struct Frame {
  uint64_t ip = 0;
  std::string sym;
  std::string dso;  // with -F ...,dso: the file, as perf names it
};
using Chain = std::vector<Frame>;

std::vector<Chain> ParseScript(const std::string& text) {
  std::vector<Chain> out;
  Chain cur;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string addr, sym;
    if (!(f >> addr)) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      continue;
    }
    f >> sym;
    char* end = nullptr;
    const uint64_t ip = std::strtoull(addr.c_str(), &end, 16);
    if (end == addr.c_str() || *end) continue;  // not a frame line
    std::string dso;
    const size_t open = line.rfind(" (");
    if (open != std::string::npos && line.back() == ')')
      dso = line.substr(open + 2, line.size() - open - 3);
    cur.push_back({ip, sym.substr(0, sym.find('+')), dso});
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

struct Recorded {
  int status = -1;
  std::string log;
  std::vector<Chain> chains;
  size_t with_leaf = 0;      // samples whose first frame is in the chain's functions
  size_t complete = 0;       // of those, the whole chain in order, then libc
  size_t bad_addresses = 0;  // frames outside user space
  std::string bad_chains;    // the first few chains with one, for the failure message
};

// perf record of the workload for seconds with callchains (callgraph:
// perf record's option, "-g" or "--call-graph fp,defer"), then perf
// script, which merges deferred user callchains with their samples by
// default (perf 7.3's --merge-callchains).
Recorded Record(const std::string& dir, int seconds, const std::string& callgraph = "-g") {
  Recorded r;
  const std::string data = dir + "/perf.data";
  const std::string workload = vmtest::NextToSelf("session_workload");
  ShellResult rec = RunShell("cd " + dir + " && SFRAME_WORKLOAD_NO_REGISTER=1 perf record -q -B " +
                             callgraph + " -e cpu-clock:u -F 999 -o " + data + " -- " + workload +
                             " spin " + std::to_string(seconds));
  r.log = rec.output;
  if (rec.status != 0) {
    r.status = rec.status;
    return r;
  }
  ShellResult script = RunShell("perf script -i " + data + " -F ip,sym 2>/dev/null");
  r.status = script.status;
  if (script.status != 0) {
    r.log += script.output;
    return r;
  }
  r.chains = ParseScript(script.output);
  size_t shown = 0;
  for (const Chain& c : r.chains) {
    size_t bad = 0;
    for (const Frame& f : c) bad += f.ip >= 0x7ffffffff000ull || f.ip < 0x1000;
    r.bad_addresses += bad;
    if (bad && shown++ < 3) {
      for (const Frame& f : c) {
        char line[128];
        std::snprintf(line, sizeof(line), "  %#llx %s\n",
                      static_cast<unsigned long long>(f.ip), f.sym.c_str());
        r.bad_chains += line;
      }
      r.bad_chains += "\n";
    }
    size_t i = 0;
    while (i < c.size() && c[i].sym != kSpinChain[0]) i++;
    if (i != 0 || c.empty()) continue;  // the leaf on top only
    r.with_leaf++;
    size_t k = 0;
    while (k < kSpinChain.size() && i + k < c.size() && c[i + k].sym == kSpinChain[k]) k++;
    r.complete += k == kSpinChain.size();
  }
  return r;
}

class PerfCallchainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IsRoot()) return;
    char tmpl[] = "/tmp/perf-callchain-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }
  std::string dir_;
};

// Whether ftrace lists the kernel function fn as hooked (a line of
// enabled_functions is the name, a space, the counts and flags).
bool HookedFunction(const std::string& fn) {
  std::istringstream in(ReadFile("/sys/kernel/tracing/enabled_functions"));
  std::string line;
  while (std::getline(in, line))
    if (line.compare(0, fn.size() + 1, fn + " ") == 0) return true;
  return false;
}
// The module's counters around a recording with the switch off, then one
// with it on: nothing moves while off (checked here); what the on run
// added, served callchains and frames, recorded with the declined calls
// and the discoveries as the test's properties.
std::pair<uint64_t, uint64_t> OnRunCounters(const sframe::PerfCallchainStats& before,
                                            const sframe::PerfCallchainStats& after_off,
                                            const sframe::PerfCallchainStats& after_on) {
  EXPECT_EQ(after_off.served, before.served);
  EXPECT_EQ(after_off.frames, before.frames);
  const uint64_t served = after_on.served - after_off.served;
  const uint64_t frames = after_on.frames - after_off.frames;
  ::testing::Test::RecordProperty("callchain_served", std::to_string(served));
  ::testing::Test::RecordProperty("callchain_frames", std::to_string(frames));
  ::testing::Test::RecordProperty("callchain_declined",
                                  std::to_string(after_on.declined - after_off.declined));
  ::testing::Test::RecordProperty("callchain_discoveries",
                                  std::to_string(after_on.discoveries - after_off.discoveries));
  return {served, frames};
}

bool Hooked() { return HookedFunction("perf_callchain_user"); }

// Whether the kernel has unwind_user(), traceable (7.x: perf's deferred
// user callchains, perf record --call-graph fp,defer), which the module
// then replaces with perf_callchain_user() (module/perf_deferred.c).
// 6.1 and 6.12 have neither the function nor perf's defer.
bool KernelHasUnwindUser() {
  return RunShell("grep -qx unwind_user /sys/kernel/tracing/available_filter_functions").status == 0;
}

// Off by default: perf_callchain_user() is not hooked, and perf walks frame
// pointers, which this program does not keep: its stacks end early.  On,
// the same recording reaches main through the SFrame the module found.
TEST_F(PerfCallchainTest, PerfRecordGReachesMainOnlyWithTheParameterOn) {
  if (!IsRoot()) {
    // The parameter is root's (0644).
    FILE* f = std::fopen(kParam, "w");
    EXPECT_EQ(f, nullptr) << "uid " << geteuid() << " may write " << kParam;
    if (f) std::fclose(f);
    GTEST_SKIP() << "perf and the parameter are root's; the user run checks the parameter's mode";
  }
  ASSERT_EQ(ReadFile(kParam), "N\n") << "perf_callchain is not off by default";
  ASSERT_FALSE(Hooked());
  sframe::Device dev;
  const sframe::PerfCallchainStats before = dev.perf_callchain_stats();
  const Recorded off = Record(dir_, 1);
  ASSERT_EQ(off.status, 0) << off.log;
  const sframe::PerfCallchainStats after_off = dev.perf_callchain_stats();

  Recorded on;
  {
    vmtest::ScopedModuleParam param("perf_callchain", "Y");
    ASSERT_TRUE(param.ok());
    EXPECT_TRUE(Hooked()) << ReadFile("/sys/kernel/tracing/enabled_functions");
    on = Record(dir_, 2);
  }
  EXPECT_FALSE(Hooked()) << "still hooked after the parameter went back off";
  ASSERT_EQ(on.status, 0) << on.log;
  const sframe::PerfCallchainStats after_on = dev.perf_callchain_stats();

  // The counters (SFRAME_STATS_SIZE_VER3): nothing while off; while on,
  // one served callchain per sample perf wrote with the leaf on top at
  // least, each giving perf 4 callers up to main and more (libc's), and
  // a discovery asked for before the first complete chain.
  const auto [served, frames] = OnRunCounters(before, after_off, after_on);
  EXPECT_GE(served, on.with_leaf);
  EXPECT_GE(frames, on.complete * (kSpinChain.size() - 1));
  EXPECT_GE(after_on.discoveries - after_off.discoveries, 1u);
  // cpu-clock samples in the hrtimer interrupt, never in NMI; every task
  // here is 64-bit: nothing for perf's own walk.
  EXPECT_EQ(after_on.declined, after_off.declined);

  RecordProperty("off", std::to_string(off.complete) + "/" + std::to_string(off.with_leaf));
  RecordProperty("on", std::to_string(on.complete) + "/" + std::to_string(on.with_leaf));
  EXPECT_GE(off.with_leaf, 300u);
  EXPECT_GE(on.with_leaf, 600u);
  EXPECT_LE(off.complete * 2, off.with_leaf) << "perf's frame-pointer walk reached main";
  // The first samples may come before the deferred walk found the section.
  EXPECT_GE(on.complete * 100, on.with_leaf * 95) << on.complete << " of " << on.with_leaf;
  // perf's own walk stores what it reads where frame pointers would be:
  // garbage, for this program (not checked).  The module's, never.
  RecordProperty("off_bad_addresses", std::to_string(off.bad_addresses));
  EXPECT_EQ(on.bad_addresses, 0u) << "chains with one:\n" << on.bad_chains;
}

// perf's deferred user callchains (7.x: perf record --call-graph fp,defer):
// the user part of each sample is walked when the task returns to user
// space, by unwind_user() (frame pointers only), and perf script merges
// it with its sample.  Off, this program's stacks end early as with -g;
// on, the module's walk replaces unwind_user() (module/perf_deferred.c)
// and reaches main.  That walk runs in the task, where it discovers the
// program's section itself: no deferred discovery is asked for, and the
// first samples are whole too.
TEST_F(PerfCallchainTest, PerfRecordDeferReachesMainOnlyWithTheParameterOn) {
  if (!IsRoot()) GTEST_SKIP() << "perf and the parameter are root's";
  if (!KernelHasUnwindUser())
    GTEST_SKIP() << "no traceable unwind_user() in this kernel (7.x only): no deferred callchains";
  ASSERT_EQ(ReadFile(kParam), "N\n") << "perf_callchain is not off by default";
  ASSERT_FALSE(HookedFunction("unwind_user"));
  const std::string defer = "--call-graph fp,defer";
  sframe::Device dev;
  const sframe::PerfCallchainStats before = dev.perf_callchain_stats();
  const Recorded off = Record(dir_, 1, defer);
  ASSERT_EQ(off.status, 0) << off.log;
  const sframe::PerfCallchainStats after_off = dev.perf_callchain_stats();

  Recorded on;
  {
    vmtest::ScopedModuleParam param("perf_callchain", "Y");
    ASSERT_TRUE(param.ok());
    EXPECT_TRUE(HookedFunction("unwind_user")) << ReadFile("/sys/kernel/tracing/enabled_functions");
    EXPECT_TRUE(Hooked());
    on = Record(dir_, 2, defer);
  }
  EXPECT_FALSE(HookedFunction("unwind_user")) << "still hooked after the parameter went back off";
  ASSERT_EQ(on.status, 0) << on.log;
  const sframe::PerfCallchainStats after_on = dev.perf_callchain_stats();

  // Nothing while off.  While on, one walk per kernel entry whose user
  // stack perf asked for: each sample here is taken in the hrtimer
  // interrupt from user mode (cpu-clock:u), an entry of its own, so at
  // least one walk per merged chain, each with 4 callers up to main.
  // Every task perf samples here is 64-bit and alive when walked (an
  // exiting task's deferred walk never calls unwind_user()).
  const auto [served, frames] = OnRunCounters(before, after_off, after_on);
  EXPECT_GE(served, on.complete);
  EXPECT_GE(frames, on.complete * (kSpinChain.size() - 1));
  EXPECT_EQ(after_on.declined, after_off.declined);

  RecordProperty("off", std::to_string(off.complete) + "/" + std::to_string(off.with_leaf));
  RecordProperty("on", std::to_string(on.complete) + "/" + std::to_string(on.with_leaf));
  EXPECT_GE(off.with_leaf, 300u) << off.log;
  EXPECT_GE(on.with_leaf, 600u) << on.log;
  EXPECT_LE(off.complete * 2, off.with_leaf) << "the kernel's frame-pointer walk reached main";
  EXPECT_GE(on.complete * 100, on.with_leaf * 95) << on.complete << " of " << on.with_leaf;
  RecordProperty("off_bad_addresses", std::to_string(off.bad_addresses));
  EXPECT_EQ(on.bad_addresses, 0u) << "chains with one:\n" << on.bad_chains;
}

// A perf event of one thread with callchains (user part only), and what
// it recorded: the user part of each sample's callchain.
class PerfEventChains {
 public:
  PerfEventChains(perf_event_attr attr, pid_t tid) {
    attr.size = sizeof(attr);
    attr.sample_type = PERF_SAMPLE_CALLCHAIN;
    attr.exclude_callchain_kernel = 1;
    fd_ = static_cast<int>(syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd_ < 0) return;
    len_ = (1 + kDataPages) * static_cast<size_t>(getpagesize());
    base_ = mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (base_ == MAP_FAILED) base_ = nullptr;
  }
  ~PerfEventChains() {
    if (base_) munmap(base_, len_);
    if (fd_ >= 0) close(fd_);
  }
  PerfEventChains(const PerfEventChains&) = delete;
  PerfEventChains& operator=(const PerfEventChains&) = delete;
  bool ok() const { return base_ != nullptr; }

  // Every sample in the buffer now; lost counts PERF_RECORD_LOST's.
  std::vector<std::vector<uint64_t>> Read(uint64_t* lost) {
    std::vector<std::vector<uint64_t>> out;
    auto* page = static_cast<perf_event_mmap_page*>(base_);
    const uint8_t* data = static_cast<const uint8_t*>(base_) + page->data_offset;
    const uint64_t size = page->data_size;
    const uint64_t head = __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE);
    // The records, unwrapped: the ring may wrap in the middle of one.
    std::vector<uint8_t> bytes;
    for (uint64_t pos = page->data_tail; pos < head; pos++) bytes.push_back(data[pos % size]);
    __atomic_store_n(&page->data_tail, head, __ATOMIC_RELEASE);
    *lost = 0;
    for (size_t off = 0; off + sizeof(perf_event_header) <= bytes.size();) {
      perf_event_header h;
      std::memcpy(&h, &bytes[off], sizeof(h));
      if (h.size < sizeof(h) || off + h.size > bytes.size()) break;
      std::vector<uint64_t> words((h.size - sizeof(h)) / 8);
      std::memcpy(words.data(), &bytes[off + sizeof(h)], words.size() * 8);
      if (h.type == PERF_RECORD_LOST && words.size() >= 2) *lost += words[1];
      if (h.type == PERF_RECORD_SAMPLE && !words.empty() && words[0] + 1 <= words.size()) {
        // nr, then the chain: PERF_CONTEXT_USER, the user PC, its callers.
        std::vector<uint64_t> chain(words.begin() + 1, words.begin() + 1 + words[0]);
        if (!chain.empty() && chain[0] == static_cast<uint64_t>(PERF_CONTEXT_USER))
          chain.erase(chain.begin());
        out.push_back(chain);
      }
      off += h.size;
    }
    return out;
  }

 private:
  static constexpr size_t kDataPages = 64;
  int fd_ = -1;
  void* base_ = nullptr;
  size_t len_ = 0;
};

// Hardware events sample in NMI, and perf_callchain_user() runs there.  TCG
// has no PMU: here the module's NMI test hook (nmi_test.c, test builds only)
// claims the NMIs qemu raises, and a perf event on a kprobe on that hook,
// with callchains, takes its samples in the NMI as a hardware event does:
// get_perf_callchain() -> perf_callchain_user() -> the module's walk, all in
// NMI.  The event is opened here, not by the perf tool: perf record of a
// kprobe event spends two minutes starting under emulation.  The thread's
// section is unknown to the module until the deferred walk asked for from
// the NMI discovers it; from then on its chains are whole, and nothing is
// left to perf's own walk.
TEST_F(PerfCallchainTest, PerfSamplesTakenInNmiAreWhole) {
  if (!IsRoot()) GTEST_SKIP() << "perf events of kprobes and the parameters are root's";
  ASSERT_EQ(access("/sys/module/sframe_unwind/parameters/nmi_test_owner", W_OK), 0)
      << "module built without its test hooks (SFRAME_UNWIND_TEST_HOOKS=y)";
  const std::string events = "/sys/kernel/tracing/kprobe_events";
  ShellResult add = RunShell("echo 'p:sframe_cc_nmi sframe_unwind:sframe_nmi_test_handler' >> " +
                             events + " && cat /sys/kernel/tracing/events/kprobes/sframe_cc_nmi/id");
  ASSERT_EQ(add.status, 0) << add.output;
  sframe::Device dev;
  std::vector<std::vector<uint64_t>> chains;
  uint64_t lost = 0;
  sframe::PerfCallchainStats before, after;
  ::testing::AssertionResult injected = ::testing::AssertionFailure();
  {
    vmtest::ScopedModuleParam param("perf_callchain", "Y");
    ASSERT_TRUE(param.ok());
    vmtest::CpuZeroSpinner spinner;
    perf_event_attr attr{};
    attr.type = PERF_TYPE_TRACEPOINT;
    attr.config = std::strtoull(add.output.c_str(), nullptr, 10);
    attr.sample_period = 1;
    PerfEventChains event(attr, spinner.tid());
    ASSERT_TRUE(event.ok()) << strerror(errno);
    before = dev.perf_callchain_stats();
    ASSERT_TRUE(vmtest::SetModuleParam("nmi_test_owner", std::to_string(getpid()).c_str()));
    injected = vmtest::InjectNmis(60, 20);
    EXPECT_TRUE(vmtest::SetModuleParam("nmi_test_owner", "0"));
    after = dev.perf_callchain_stats();
    chains = event.Read(&lost);
  }
  EXPECT_EQ(RunShell("echo '-:sframe_cc_nmi' >> " + events).status, 0);
  ASSERT_TRUE(injected);

  size_t whole = 0;
  std::string first_bad;
  for (const std::vector<uint64_t>& ips : chains) {
    sframe::UnwindResult r;
    r.frames = ips;
    const vmtest::Chain chain = vmtest::Symbolize(r);
    if (vmtest::ChainStartsWith(chain, vmtest::CpuZeroSpinner::FromLeaf()) ||
        vmtest::ChainStartsWith(chain, vmtest::CpuZeroSpinner::FromMiddle()))
      whole++;
    else if (first_bad.empty())
      first_bad = chain.Describe();
    for (uint64_t ip : ips)
      EXPECT_TRUE(ip >= 0x10000 && ip < 0x7ffffffff000ull) << std::hex << ip << " in\n"
                                                           << chain.Describe();
  }
  RecordProperty("samples", std::to_string(chains.size()));
  RecordProperty("whole", std::to_string(whole));
  RecordProperty("callchain_served", std::to_string(after.served - before.served));
  EXPECT_EQ(lost, 0u);
  // 60 NMIs on CPU 0, where the spinner runs nearly all the time.
  EXPECT_GE(chains.size(), 40u);
  // The first samples may come before the deferred walk found the section.
  EXPECT_GE(whole + 3, chains.size()) << "first not whole: " << first_bad;
  // Each served by the module in the NMI, none left to perf's walk.
  EXPECT_GE(after.served - before.served, chains.size());
  EXPECT_EQ(after.declined, before.declined);
  EXPECT_GE(after.discoveries - before.discoveries, 1u);
}

// A sample taken in the middle of the task's own change of its registry
// (module/registry.c, sframe_sections_write_begin()): the maple tree's
// readers wait for a writer by starting again, and a reader in an
// interrupt of the writer's own CPU waits for ever.  Seen once in a
// benchmark as an RCU stall (perf's hrtimer sample over the task's
// discovery).  Here on purpose: perf's cpu-clock at 10 kHz with
// callchains on this thread while it registers and unregisters enough
// sections to split and merge the tree's nodes, for SECONDS.  (A kprobe
// inside the tree's writer would hit the window every time, but
// lib/maple_tree.c is notrace: kprobes refuse it.)  A sample in the
// window must end its walk there, the sampled PC alone, rather than read
// the tree; before the fix the guest stalled (the rig panics on an RCU
// stall).
TEST_F(PerfCallchainTest, SamplesInsideTheTasksOwnRegistryChangeEndCleanly) {
  if (!IsRoot()) GTEST_SKIP() << "the parameter is root's";
  const char* env = std::getenv("SFRAME_REGISTRY_CHANGE_SECONDS");
  const int seconds = env && std::atoi(env) > 0 ? std::atoi(env) : 10;
  sframe::Device dev;
  vmtest::SyntheticSections synthetic(96, 16);
  vmtest::ScopedModuleParam param("perf_callchain", "Y");
  ASSERT_TRUE(param.ok());
  const sframe::PerfCallchainStats before = dev.perf_callchain_stats();
  perf_event_attr attr{};
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.sample_period = 100000;  // ns: 10 kHz
  PerfEventChains event(attr, 0);
  ASSERT_TRUE(event.ok()) << std::strerror(errno);
  size_t samples = 0, rounds = 0;
  uint64_t lost = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    std::vector<sframe::Registration> regs;
    for (size_t i = 0; i < synthetic.count(); i++)
      ASSERT_NO_THROW(regs.push_back(dev.register_scoped(synthetic.section(i), synthetic.section_len(),
                                                         synthetic.text(i), 16)));
    regs.clear();
    rounds++;
    uint64_t l = 0;
    samples += event.Read(&l).size();
    lost += l;
  }
  const sframe::PerfCallchainStats after = dev.perf_callchain_stats();
  RecordProperty("rounds", std::to_string(rounds));
  RecordProperty("samples", std::to_string(samples));
  RecordProperty("lost", std::to_string(lost));
  EXPECT_GT(rounds, 0u);
  EXPECT_GT(samples, 0u);
  // Each sample's user callchain was walked by the module.
  EXPECT_GE(after.served - before.served, samples);
}

// The parameter switched on and off while perf records every CPU with
// callchains: no oops (the rig stops at one), each switch succeeds, and
// perf's data stays whole.  Each switch off waits for RCU-tasks (about
// 0.35 s under emulation), three times on 7.x, where unwind_user() is
// unhooked too (50 switches in 42 to 64 s on 7.3, single-threaded TCG):
// 25 here (make check runs three such tests), and as many as
// SFRAME_PERF_CALLCHAIN_SWITCHES says in a run of
// its own (the 1,000: SFRAME_VM_TEST_ENV=SFRAME_PERF_CALLCHAIN_SWITCHES=1000
// with run-vm.sh).
int Switches() {
  const char* env = std::getenv("SFRAME_PERF_CALLCHAIN_SWITCHES");
  const int n = env ? std::atoi(env) : 0;
  return n > 0 ? n : 25;
}

// perf record's frequency there: 2 kHz here, where emulated CPUs sample
// every perf_event_max_sample_rate allows but the parsing of every sample
// is the test's time; the 10 kHz with SFRAME_PERF_CALLCHAIN_HZ=10000.
int SwitchHz() {
  const char* env = std::getenv("SFRAME_PERF_CALLCHAIN_HZ");
  const int hz = env ? std::atoi(env) : 0;
  return hz > 0 ? hz : 2000;
}

// Switches the parameter Switches() times under perf record -a of every
// CPU with callgraph (perf record's option) while the workload spins, then
// reads the recording back: its output, and whether it all went well.
// And whether the callchains are sound: in each of the workload's samples
// that reaches main, every user frame after the first (the sampled PC)
// follows a call instruction, read from the workload's own memory while it
// still runs (vmtest::FollowsCall).  Only those: the samples taken while
// the switch was off are perf's own frame-pointer walk of a program
// without frame pointers, which never reaches main (the test above) and
// stores whatever words it finds, as it always has.
struct SwitchRun {
  ShellResult shell;
  size_t chains_to_main = 0;  // the workload's samples reaching main
  size_t frames_checked = 0;
  size_t frames_not_after_call = 0;
  std::string first_bad;
};
SwitchRun SwitchUnderPerfRecordA(const std::string& dir, const std::string& callgraph) {
  const std::string script = dir + "/toggle.sh";
  const int switches = Switches();
  {
    std::ofstream out(script);
    out << "cd " << dir << "\n"
        << "SFRAME_WORKLOAD_NO_REGISTER=1 " << vmtest::NextToSelf("session_workload")
        // Its output away from the test's pipe, which it outlives.
        // It spins until killed at the end, past the slowest switching
        // (1,000 switches took 274 s on 7.3 before each waited 20 ms).
        << " spin " << 600 + 2 * switches << " > /dev/null 2>&1 & w=$!\n"
        << "echo $w > workload.pid\n"
        // Its data rotates in files of 16 MB, of which the last two
        // are kept: 1,000 switches at 10 kHz record some GB, more than the
        // guest's tmpfs holds (perf record exits when a write fails).
        // Each file is whole, with its own header and the tasks' maps.
        << "perf record -B -a " << callgraph << " -e cpu-clock -F " << SwitchHz()
        << " --switch-output=16M --switch-max-files=2 -o all.data 2> perf.log & p=$!\n"
        // Under emulation perf takes seconds to start sampling: the
        // switching starts once samples come in (the file grows past what
        // perf writes first), at most a minute later.
        << "s0=; for i in $(seq 120); do sleep 0.5; s=$(stat -c %s all.data 2> /dev/null || echo 0)\n"
        << "  [ -z \"$s0\" ] && [ \"$s\" -gt 0 ] && s0=$s\n"
        << "  [ -n \"$s0\" ] && [ \"$s\" -gt $((s0 + 65536)) ] && break; done\n"
        << "t0=$(date +%s.%N)\n"
        // Each time on for 20 ms, so that some samples are the module's.
        << "for i in $(seq " << switches << "); do\n"
        << "  echo Y > " << kParam << " && sleep 0.02 && echo N > " << kParam
        << " || { echo \"switch $i failed\"; kill -INT $p; exit 1; }\n"
        << "done\n"
        << "echo \"" << switches << " switches at " << SwitchHz() << " Hz in $(awk -v a=$(date +%s.%N) -v b=$t0 'BEGIN { printf \"%.1f\", a - b }') s\"\n"
        // The kernel lowers it when samples take too long.
        << "echo \"perf_event_max_sample_rate $(cat /proc/sys/kernel/perf_event_max_sample_rate)\"\n"
        << "kill -INT $p; wait $p; rc=$?\n"
        // 130: stopped by SIGINT, as by ^C
        << "[ $rc = 0 ] || [ $rc = 130 ] || { echo \"perf record exited $rc\"; exit 1; }\n"
        << "files=$(ls all.data.* 2> /dev/null)\n"
        << "echo \"$(grep -c 'Dump all.data' perf.log) data files written, kept:\" $files\n"
        << "[ -n \"$files\" ] || { echo \"no data file\"; cat perf.log; exit 1; }\n"
        << ": > workload.chains; all=0; mine=0\n"
        << "for f in $files; do\n"
        << "  perf script -i $f --pid $w -F ip,sym,dso >> workload.chains 2> /dev/null || "
        << "{ echo \"perf script of $f failed\"; exit 1; }\n"
        // Every sample's pid, one line each (no callchain without ip):
        // both counts from one pass that resolves no symbols.
        << "  c=$(set -o pipefail; perf script -i $f -F pid 2> /dev/null | "
        << "awk -v w=$w '{ n++ } $1 == w { m++ } END { print n + 0, m + 0 }') || "
        << "{ echo \"perf script of $f failed\"; exit 1; }\n"
        << "  set -- $c; all=$((all + $1)); mine=$((mine + $2))\n"
        << "done\n"
        << "echo \"$all samples, $mine of the workload\"\n"
        << "n=$(grep -c wl_spin_leaf workload.chains)\n"
        << "echo \"$n frames in wl_spin_leaf\"\n"
        << "[ \"$n\" -gt 0 ]\n";
  }
  SwitchRun run;
  run.shell = RunShell("bash " + script);
  const pid_t workload = static_cast<pid_t>(std::atoi(ReadFile(dir + "/workload.pid").c_str()));
  if (workload <= 0) return run;
  // perf script gives a user frame's address in the process (7.3's perf)
  // or in its file (6.1's: the offset map__map_ip() makes), which goes
  // back to the process's address by the file's mapping: by its path, or
  // by its name where the paths differ (the rig's build tree is a bind
  // mount, which perf may name by another of its paths than
  // /proc/PID/maps does).  No mapping lies below 64 KiB, so an address
  // inside one is never a file offset.
  struct Mapping {
    uint64_t start, end, pgoff;
    std::string path;
  };
  std::vector<Mapping> maps;
  {
    std::istringstream in(ReadFile("/proc/" + std::to_string(workload) + "/maps"));
    std::string line;
    while (std::getline(in, line)) {
      Mapping m{};
      char perms[8] = "", path[512] = "";
      unsigned long long a, b, off;
      if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %*s %511s", &a, &b, perms, &off, path) == 5 &&
          perms[2] == 'x') {
        m.start = a, m.end = b, m.pgoff = off, m.path = path;
        maps.push_back(m);
      }
    }
  }
  auto base = [](const std::string& path) { return path.substr(path.rfind('/') + 1); };
  auto absolute = [&maps, &base](const Frame& f, uint64_t* out) {
    for (const Mapping& m : maps)
      if (f.ip >= m.start && f.ip < m.end) {
        *out = f.ip;
        return true;
      }
    for (int by_name = 0; by_name < 2; by_name++)
      for (const Mapping& m : maps)
        if ((by_name ? base(m.path) == base(f.dso) : m.path == f.dso) && f.ip >= m.pgoff &&
            f.ip - m.pgoff < m.end - m.start) {
          *out = m.start + (f.ip - m.pgoff);
          return true;
        }
    return false;
  };
  std::set<uint64_t> checked;
  for (const Chain& c : ParseScript(ReadFile(dir + "/workload.chains"))) {
    std::vector<const Frame*> user;
    for (const Frame& f : c)
      if (f.ip < 0x800000000000ull) user.push_back(&f);
    if (std::none_of(user.begin(), user.end(), [](const Frame* f) { return f->sym == "main"; }))
      continue;
    run.chains_to_main++;
    for (size_t i = 1; i < user.size(); i++) {
      if (!checked.insert(user[i]->ip).second) continue;
      run.frames_checked++;
      std::string why;
      uint64_t ra = 0;
      if (!absolute(*user[i], &ra)) {
        run.frames_not_after_call++;
        if (run.first_bad.empty())
          run.first_bad = user[i]->sym + " in " + user[i]->dso + " at " + std::to_string(user[i]->ip) +
                          ": in no executable mapping of " + std::to_string(maps.size());
        continue;
      }
      if (!vmtest::FollowsCall(workload, ra, &why)) {
        run.frames_not_after_call++;
        if (run.first_bad.empty()) run.first_bad = user[i]->sym + " " + why;
      }
    }
  }
  kill(workload, SIGKILL);
  return run;
}

// The script went well, and the chains that reach main are sound.
void ExpectSound(const SwitchRun& run) {
  EXPECT_EQ(run.shell.status, 0) << run.shell.output;
  ::testing::Test::RecordProperty("output", run.shell.output);
  ::testing::Test::RecordProperty("chains_to_main", std::to_string(run.chains_to_main));
  ::testing::Test::RecordProperty("frames_checked", std::to_string(run.frames_checked));
  EXPECT_GT(run.chains_to_main, 0u);
  EXPECT_GT(run.frames_checked, 0u);
  EXPECT_EQ(run.frames_not_after_call, 0u) << "first: " << run.first_bad;
}

TEST_F(PerfCallchainTest, SwitchedOnAndOffUnderPerfRecordA) {
  if (!IsRoot()) GTEST_SKIP() << "perf and the parameter are root's";
  const SwitchRun run = SwitchUnderPerfRecordA(dir_, "-g");
  ExpectSound(run);
  EXPECT_EQ(ReadFile(kParam), "N\n");
  EXPECT_FALSE(Hooked());
}

// The same with perf's deferred callchains (7.x): unwind_user()'s hook is
// switched with the other, and its replacement, which may sleep in a page
// fault, runs in the tasks perf samples all along: each switch off waits
// for the walks in flight.  The counters say that it did run.
TEST_F(PerfCallchainTest, SwitchedOnAndOffUnderPerfRecordADefer) {
  if (!IsRoot()) GTEST_SKIP() << "perf and the parameter are root's";
  if (!KernelHasUnwindUser())
    GTEST_SKIP() << "no traceable unwind_user() in this kernel (7.x only): no deferred callchains";
  sframe::Device dev;
  const sframe::PerfCallchainStats before = dev.perf_callchain_stats();
  const SwitchRun run = SwitchUnderPerfRecordA(dir_, "--call-graph fp,defer");
  const sframe::PerfCallchainStats after = dev.perf_callchain_stats();
  ExpectSound(run);
  RecordProperty("callchain_served", std::to_string(after.served - before.served));
  EXPECT_GT(after.served, before.served);
  EXPECT_EQ(ReadFile(kParam), "N\n");
  EXPECT_FALSE(Hooked());
  EXPECT_FALSE(HookedFunction("unwind_user"));
}

// `sframe-client perf on|off|status`: the switch as a user would turn it.
// Root switches it and status says so, with ftrace's own list agreeing;
// anyone may read the status; a user's switch is refused by name and
// changes nothing.
TEST_F(PerfCallchainTest, SframeClientPerfSwitchesItForRootOnly) {
  const std::string tool = vmtest::BuildTreeFile(SFRAME_CLIENT_TOOL_REL);
  ShellResult st = RunShell(tool + " perf status");
  ASSERT_EQ(st.status, 0) << st.output;
  EXPECT_NE(st.output.find("perf_callchain: off"), std::string::npos) << st.output;
  EXPECT_NE(st.output.find("options sframe_unwind perf_callchain=1"), std::string::npos)
      << st.output;
  ShellResult bad = RunShell(tool + " perf maybe");
  EXPECT_EQ(bad.status, 2) << bad.output;
  if (!IsRoot()) {
    EXPECT_NE(st.output.find("replaced by the module: unknown"), std::string::npos) << st.output;
    ShellResult on = RunShell(tool + " perf on");
    EXPECT_EQ(on.status, 1) << on.output;
    EXPECT_NE(on.output.find("only root may switch it (EACCES)"), std::string::npos)
        << on.output;
    EXPECT_EQ(ReadFile(kParam), "N\n");
    return;
  }
  EXPECT_NE(st.output.find("perf_callchain_user replaced by the module: no\n"), std::string::npos)
      << st.output;
  EXPECT_NE(st.output.find("unwind_user (--call-graph fp,defer) replaced by the module: no\n"),
            std::string::npos)
      << st.output;
  ShellResult on = RunShell(tool + " perf on");
  EXPECT_EQ(on.status, 0) << on.output;
  EXPECT_EQ(ReadFile(kParam), "Y\n");
  EXPECT_TRUE(Hooked());
  st = RunShell(tool + " perf status");
  EXPECT_EQ(st.status, 0) << st.output;
  EXPECT_NE(st.output.find("perf_callchain: on"), std::string::npos) << st.output;
  EXPECT_NE(st.output.find("perf_callchain_user replaced by the module: yes\n"), std::string::npos)
      << st.output;
  // unwind_user() with it where the kernel has it (7.x), else said so.
  EXPECT_NE(st.output.find(KernelHasUnwindUser()
                               ? "unwind_user (--call-graph fp,defer) replaced by the module: yes\n"
                               : "unwind_user (--call-graph fp,defer) replaced by the module: no "
                                 "(this kernel has none: 7.x only)\n"),
            std::string::npos)
      << st.output;
  ShellResult off = RunShell(tool + " perf off");
  EXPECT_EQ(off.status, 0) << off.output;
  EXPECT_EQ(ReadFile(kParam), "N\n");
  EXPECT_FALSE(Hooked());
  EXPECT_FALSE(HookedFunction("unwind_user"));
}

}  // namespace
