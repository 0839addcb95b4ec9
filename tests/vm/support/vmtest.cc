#include "vmtest.h"

#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "sframe_profile/symbolizer.h"

extern char** environ;

namespace vmtest {
namespace {

std::map<std::string, ChildFn>& Registry() {
  static std::map<std::string, ChildFn> registry;
  return registry;
}

sframe::Symbolizer& TheSymbolizer() {
  static sframe::Symbolizer symbolizer;
  return symbolizer;
}

std::vector<std::string> Split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string::size_type start = 0;
  for (;;) {
    auto pos = line.find(sep, start);
    out.push_back(line.substr(start, pos - start));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}

bool IsLibcEntry(const std::string& name) {
  return name == kLibcStartCallMain || name == kStartThread;
}

::testing::AssertionResult Compare(const Chain& chain, const std::vector<std::string>& expected,
                                   uint64_t libc_pc, bool prefix) {
  bool ok =
      prefix ? chain.frames.size() >= expected.size() : chain.frames.size() == expected.size();
  for (size_t i = 0; ok && i < expected.size(); i++) {
    const Frame& f = chain.frames[i];
    if (IsLibcEntry(expected[i]) && libc_pc != 0) {
      ok = f.pc == libc_pc && (f.function == expected[i] || f.function == "?");
    } else {
      ok = f.function == expected[i];
    }
  }
  if (ok) return ::testing::AssertionSuccess();
  std::ostringstream want;
  for (size_t i = 0; i < expected.size(); i++) {
    want << "    #" << i << " " << expected[i];
    if (IsLibcEntry(expected[i]) && libc_pc != 0) {
      want << " at 0x" << std::hex << libc_pc << std::dec;
    }
    want << "\n";
  }
  return ::testing::AssertionFailure()
         << (prefix ? "chain does not start with" : "chain is not") << "\n"
         << want.str() << "  got\n"
         << chain.Describe();
}

}  // namespace

uint64_t g_main_return = 0;

std::string DevicePath() {
  const char* env = std::getenv("SFRAME_VM_DEVICE");
  return (env != nullptr && *env != '\0') ? env : SFRAME_UNWIND_DEVICE;
}

std::string FreshCacheDir() {
  char dir[] = "/tmp/sframe-cache-XXXXXX";
  return mkdtemp(dir) ? std::string(dir) : std::string("/tmp");
}

bool SetModuleParam(const char* name, const char* value) {
  std::string path = std::string("/sys/module/sframe_unwind/parameters/") + name;
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  bool ok = std::fputs(value, f) >= 0;
  return std::fclose(f) == 0 && ok;
}

ScopedModuleParam::ScopedModuleParam(const char* name, const char* value) : name_(name) {
  std::string path = std::string("/sys/module/sframe_unwind/parameters/") + name;
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return;
  char buf[64] = {};
  bool read = std::fgets(buf, sizeof(buf), f) != nullptr;
  std::fclose(f);
  if (!read) return;
  old_ = buf;
  while (!old_.empty() && old_.back() == '\n') old_.pop_back();
  ok_ = SetModuleParam(name, value);
}

ScopedModuleParam::~ScopedModuleParam() {
  if (ok_) SetModuleParam(name_.c_str(), old_.c_str());
}

std::unique_ptr<ScopedModuleParam> NoFdeIndexIfRoot() {
  if (geteuid() != 0) return nullptr;
  return std::make_unique<ScopedModuleParam>("index_max_user_kb", "0");
}

bool DiscoveryEnabled() {
  FILE* f = std::fopen("/sys/module/sframe_unwind/parameters/discovery", "r");
  if (!f) return false;
  int c = std::fgetc(f);
  std::fclose(f);
  return c == 'Y';
}

namespace {
class DiscoveryOffEnvironment : public testing::Environment {
 public:
  void SetUp() override {
    if (geteuid() == 0) param_.emplace("discovery", "N");
  }
  void TearDown() override { param_.reset(); }

 private:
  std::optional<ScopedModuleParam> param_;
};
}  // namespace

bool DiscoveryOffWhenRoot() {
  // GoogleTest owns registered environments.
  testing::AddGlobalTestEnvironment(new DiscoveryOffEnvironment);
  return true;
}

void SelfSectionTest::SetUp() {
  DeviceTest::SetUp();
  if (HasFatalFailure()) return;
  // DevicePath lives in the test program (support/ is linked into it).
  auto obj = sframe::loaded_object_containing(reinterpret_cast<void*>(&DevicePath));
  ASSERT_TRUE(obj && obj->has_sframe()) << "the test program has no .sframe of its own";
  self_ = *obj;
}

void DeviceTest::SetUp() {
  try {
    dev_.emplace(DevicePath());
  } catch (const sframe::Error& e) {
    FAIL() << e.what();
  }
}

std::vector<sframe::Registration> RegisterLoaded(const sframe::Device& dev) {
  try {
    return sframe::register_loaded_objects(dev);
  } catch (const sframe::Error& e) {
    ADD_FAILURE() << e.what();
    return {};
  }
}

ChildRegistrar::ChildRegistrar(const char* name, ChildFn fn) { Registry()[name] = fn; }

VMTEST_NOIPA int RunChildScenario(int argc, char** argv) {
  std::string name = argv[1] + std::strlen("--vmtest-child=");
  std::string arg;
  for (int i = 2; i < argc; i++) {
    if (std::strncmp(argv[i], "--vmtest-arg=", 13) == 0) arg = argv[i] + 13;
  }
  auto it = Registry().find(name);
  if (it == Registry().end()) {
    std::fprintf(stderr, "no child scenario %s\n", name.c_str());
    return 2;
  }
  std::printf("M\t%" PRIx64 "\n", g_main_return);
  int rc;
  try {
    rc = it->second(arg);
  } catch (const std::exception& e) {
    std::printf("child %s: %s\n", name.c_str(), e.what());
    rc = 3;
  }
  VMTEST_BARRIER();
  std::fflush(stdout);
  return rc;
}

// Why a walk may have ended at pc: no .sframe for its object, or no FDE.
std::string Coverage(uint64_t pc, bool topmost) {
  const uint64_t at = topmost ? pc : pc - 1;
  auto obj = sframe::loaded_object_containing(reinterpret_cast<void*>(at));
  if (!obj) return " [no object]";
  if (!obj->has_sframe()) return " [object without .sframe]";
  if (!sframe::fde_covers(reinterpret_cast<void*>(obj->sframe_addr), obj->sframe_len,
                          obj->sframe_addr, at)) {
    return " [no FDE in the object's .sframe]";
  }
  return "";
}

Chain Symbolize(const sframe::UnwindResult& r) {
  Chain c;
  c.stop = r.stop_reason;
  c.nr_sframe = r.nr_sframe;
  c.nr_fp = r.nr_fp;
  for (const sframe::Symbol& s : TheSymbolizer().symbolize_frames(r.frames)) {
    c.frames.push_back({s.address, s.found() ? s.function() : "?", s.to_string()});
  }
  // Where the walk ended, say what covers that PC (for failure messages).
  if (!c.frames.empty()) {
    c.frames.back().where += Coverage(c.frames.back().pc, c.frames.size() == 1);
  }
  return c;
}

void EmitUnwind(const std::string& label, const sframe::UnwindResult& r) {
  Chain c = Symbolize(r);
  std::printf("U\t%s\t%u\t%u\t%u\t%zu\n", label.c_str(), static_cast<unsigned>(c.stop), c.nr_sframe,
              c.nr_fp, c.frames.size());
  for (const Frame& f : c.frames) {
    std::printf("F\t%s\t%" PRIx64 "\t%s\t%s\n", label.c_str(), f.pc, f.function.c_str(),
                f.where.c_str());
  }
  std::fflush(stdout);
}

void EmitValue(const std::string& key, uint64_t value) {
  std::printf("V\t%s\t%" PRIx64 "\n", key.c_str(), value);
  std::fflush(stdout);
}

std::string Chain::Describe() const {
  std::ostringstream out;
  for (size_t i = 0; i < frames.size(); i++) {
    out << "    #" << i << " 0x" << std::hex << frames[i].pc << std::dec << " " << frames[i].where
        << "\n";
  }
  out << "  stop " << sframe::to_string(stop) << ", " << frames.size() << " frames, nr_sframe "
      << nr_sframe << ", nr_fp " << nr_fp << "\n";
  return out.str();
}

std::vector<std::string> Chain::Functions() const {
  std::vector<std::string> out;
  for (const Frame& f : frames) out.push_back(f.function);
  return out;
}

ChildResult RunChild(const std::string& name, const std::string& arg) {
  ChildResult res;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    res.output = std::string("pipe: ") + std::strerror(errno);
    return res;
  }
  sframe::UniqueFd rd(fds[0]), wr(fds[1]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), 2);
  std::string exe = sframe::self_exe_path();
  std::string a1 = "--vmtest-child=" + name;
  std::string a2 = "--vmtest-arg=" + arg;
  char* argv[] = {exe.data(), a1.data(), a2.data(), nullptr};
  pid_t pid;
  int err = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  wr.reset();
  if (err != 0) {
    res.output = "posix_spawn " + exe + ": " + std::strerror(err);
    return res;
  }
  char buf[4096];
  for (;;) {
    ssize_t n = read(rd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    res.output.append(buf, static_cast<size_t>(n));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  res.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

  std::istringstream lines(res.output);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> f = Split(line, '\t');
    if (f[0] == "M" && f.size() == 2) {
      res.main_return = std::strtoull(f[1].c_str(), nullptr, 16);
    } else if (f[0] == "V" && f.size() == 3) {
      res.values[f[1]] = std::strtoull(f[2].c_str(), nullptr, 16);
    } else if (f[0] == "U" && f.size() == 6) {
      Chain& c = res.chains[f[1]];
      c.stop = static_cast<sframe::StopReason>(std::stoul(f[2]));
      c.nr_sframe = static_cast<uint32_t>(std::stoul(f[3]));
      c.nr_fp = static_cast<uint32_t>(std::stoul(f[4]));
    } else if (f[0] == "F" && f.size() == 5) {
      res.chains[f[1]].frames.push_back({std::strtoull(f[2].c_str(), nullptr, 16), f[3], f[4]});
    }
  }
  return res;
}

::testing::AssertionResult ChainIs(const Chain& chain, const std::vector<std::string>& expected,
                                   uint64_t libc_pc) {
  return Compare(chain, expected, libc_pc, false);
}

::testing::AssertionResult ChainStartsWith(const Chain& chain,
                                           const std::vector<std::string>& expected,
                                           uint64_t libc_pc) {
  return Compare(chain, expected, libc_pc, true);
}

std::vector<std::string> ChildTail(const std::string& scenario) {
  return {scenario, "vmtest::RunChildScenario", "main", kLibcStartCallMain};
}

std::string NextToSelf(const std::string& name) {
  std::string exe = sframe::self_exe_path();
  return exe.substr(0, exe.rfind('/') + 1) + name;
}

std::string BuildTreeFile(const std::string& relative) {
  return std::filesystem::path(NextToSelf(relative)).lexically_normal().string();
}

std::map<std::string, long> SlabCounts() {
  std::map<std::string, long> out;
  std::ifstream in("/proc/slabinfo");
  if (!in) return out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string name;
    long active = 0;
    if (!(f >> name >> active)) continue;  // the header lines
    if (name.rfind("kmalloc-", 0) == 0 || name == "maple_node") out[name] = active;
  }
  return out;
}

sframe::Stats WaitForRegistriesBack(const sframe::Device& dev, const sframe::Stats& before,
                                    int timeout_ms) {
  sframe::Stats s = dev.stats();
  for (int waited = 0; waited < timeout_ms && (s.sections != before.sections ||
                                               s.processes != before.processes ||
                                               s.supplied_bytes != before.supplied_bytes);
       waited += 100) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    s = dev.stats();
  }
  return s;
}

long SlabObjects() {
  const std::map<std::string, long> counts = SlabCounts();
  if (counts.empty()) return -1;
  long total = 0;
  for (const auto& [name, active] : counts) total += active;
  return total;
}

ShellResult RunShell(const std::string& cmd) {
  ShellResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) r.output.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

std::string TaskStates(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  return RunShell("for t in " + dir +
                  "/*; do echo \"${t##*/} $(sed 's/.*) //; s/ .*//' $t/stat)"
                  " $(cat $t/wchan)\"; cat $t/stack 2> /dev/null | head -20; done")
      .output;
}

namespace {
std::atomic<bool> g_spin_stop{false};
std::atomic<pid_t> g_spin_tid{0};
volatile uint64_t g_spin_sink;
}  // namespace

VMTEST_NOIPA void NmiSpinLeaf() {
  for (int i = 0; i < 1000; i++) g_spin_sink = g_spin_sink * 3 + 1;
  VMTEST_BARRIER();
}

VMTEST_NOIPA void NmiSpinMiddle() {
  while (!g_spin_stop.load(std::memory_order_relaxed)) NmiSpinLeaf();
  VMTEST_BARRIER();
}

VMTEST_NOIPA void* NmiSpinThread(void*) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  sched_setaffinity(0, sizeof(set), &set);
  g_spin_tid = static_cast<pid_t>(syscall(SYS_gettid));
  NmiSpinMiddle();
  VMTEST_BARRIER();
  return nullptr;
}

CpuZeroSpinner::CpuZeroSpinner() {
  g_spin_stop = false;
  g_spin_tid = 0;
  if (pthread_create(&thread_, nullptr, NmiSpinThread, nullptr) != 0) {
    ADD_FAILURE() << "pthread_create failed";
    return;
  }
  while (!g_spin_tid) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  tid_ = g_spin_tid;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

CpuZeroSpinner::~CpuZeroSpinner() {
  if (!tid_) return;
  g_spin_stop = true;
  pthread_join(thread_, nullptr);
}

const std::vector<std::string>& CpuZeroSpinner::FromLeaf() {
  static const std::vector<std::string> chain = {"vmtest::NmiSpinLeaf", "vmtest::NmiSpinMiddle",
                                                 "vmtest::NmiSpinThread", kStartThread};
  return chain;
}

const std::vector<std::string>& CpuZeroSpinner::FromMiddle() {
  static const std::vector<std::string> chain = {"vmtest::NmiSpinMiddle", "vmtest::NmiSpinThread",
                                                 kStartThread};
  return chain;
}

namespace {
bool WriteWholeFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.flush();
  return bool(f);
}
}  // namespace

::testing::AssertionResult InjectNmis(int count, int interval_ms) {
  static int requests = 0;
  const char* results = std::getenv("SFRAME_VM_RESULTS");
  if (!results) return ::testing::AssertionFailure() << "SFRAME_VM_RESULTS is not set";
  std::string dir = std::string(results) + "/nmi/";
  // Unique per request: a program may ask more than once.
  std::string id = "vmtest." + std::to_string(getpid()) + "." + std::to_string(++requests);
  if (!WriteWholeFile(dir + "tmp." + id, std::to_string(count) + " " + std::to_string(interval_ms)))
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

size_t CallEndingAt(const uint8_t* before, size_t n) {
  if (n >= 5 && before[n - 5] == 0xe8) return 5;
  // FF /2: opcode, ModRM, then a SIB byte where rm is 100 (not mod 11),
  // then the displacement: 8 bits (mod 01), 32 (mod 10), or 32 for mod 00
  // with rm 101 (RIP-relative) or with a SIB whose base is 101.
  for (size_t len = 2; len <= 7 && len <= n; len++) {
    const uint8_t* insn = before + n - len;
    if (insn[0] != 0xff || ((insn[1] >> 3) & 7) != 2) continue;
    const unsigned mod = insn[1] >> 6, rm = insn[1] & 7;
    size_t want = 2;
    if (mod != 3) {
      const bool sib = rm == 4;
      if (sib) want++;
      if (mod == 1) {
        want += 1;
      } else if (mod == 2) {
        want += 4;
      } else if (rm == 5 || (sib && len >= 3 && (insn[2] & 7) == 5)) {
        want += 4;
      }
    }
    if (want == len) return len;
  }
  return 0;
}

bool FollowsCall(pid_t pid, uint64_t ra, std::string* why) {
  uint8_t before[8];
  const std::string path = "/proc/" + std::to_string(pid) + "/mem";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = path + ": " + std::strerror(errno);
    return false;
  }
  const ssize_t got = pread(fd, before, sizeof(before), static_cast<off_t>(ra - sizeof(before)));
  const int err = errno;
  close(fd);
  char addr[32];
  std::snprintf(addr, sizeof(addr), "%#" PRIx64, ra);
  if (got != static_cast<ssize_t>(sizeof(before))) {
    *why = std::string(addr) + ": the 8 bytes before it unreadable (" +
           (got < 0 ? std::strerror(err) : "short read") + ")";
    return false;
  }
  if (CallEndingAt(before, sizeof(before))) return true;
  char bytes[3 * sizeof(before) + 1] = "";
  for (size_t i = 0; i < sizeof(before); i++) std::snprintf(bytes + 3 * i, 4, " %02x", before[i]);
  *why = std::string(addr) + ": no call ends there (bytes before it:" + bytes + ")";
  return false;
}

}  // namespace vmtest
