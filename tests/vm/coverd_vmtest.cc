// sframe-coverd (userlib/tools/sframe_coverd.cc): the service that keeps the
// module's file store filled, run as a child of the test with a state and a
// cache directory of its own and only the libraries the test names.
//
// The library under test is libvmtest_wldl_nosframe.so (as in
// file_store_vmtest): session_workload's dlspin library without .sframe and
// without frame pointers, copied to a directory of the test's own (a fresh
// inode each time) so that it can be written, renamed over and
// bind-mounted over.  A SFrame-only walk crosses it to main only when the
// store has a section for the very inode the process maps.
//
// With the service running, libc is covered from the store too, so a
// complete chain goes on past main into libc (and may stop anywhere after
// it): "complete" here is the exact chain from the leaf down to main
// followed by a frame in libc, and a normal end of the walk (NO_COVERAGE
// or OUTERMOST).
//
// Every test leaves the store as it found it: the fixture lists the store
// before the test and removes every entry that appeared during it.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sessions.h"
#include "vmtest.h"
#include "sframe_client/fd.h"
#include "sframe_gen/store_coverage.h"
#include "sframe_test/errno_of.h"

#ifndef SFRAME_COVERD_REL
#error "SFRAME_COVERD_REL (sframe-coverd, relative to this program's directory) must be defined"
#endif

extern char** environ;

namespace {

using sframe::FileInfo;
using vmtest::ChainCheck;
using vmtest::Collect;
using vmtest::Collected;
using vmtest::IsRoot;
using vmtest::kLibc;
using vmtest::MostlyComplete;
using vmtest::NowMs;

constexpr char kRootOnly[] =
    "sframe-coverd needs CAP_SYS_ADMIN (the supply ioctl, system-wide perf events): the root "
    "run tests it; the user run checks that it refuses";

// The chain of dlspin from the leaf down to main; a complete one continues
// with a frame in libc.
const std::vector<std::string> kDlToMain = {"wl_dl_leaf", "wl_dl_spin", "wl_dlspin_a", "main"};

std::string CoverdTool() { return vmtest::BuildTreeFile(SFRAME_COVERD_REL); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream o;
  o << in.rdbuf();
  return o.str();
}

std::string MakeTempDir(const char* what) {
  std::string tmpl = std::string("/tmp/coverd-") + what + "-XXXXXX";
  if (!mkdtemp(tmpl.data())) return "";
  chmod(tmpl.c_str(), 0755);  // the workloads may run as another user
  return tmpl;
}

void RemoveTree(const std::string& dir) {
  if (!dir.empty()) std::system(("rm -rf '" + dir + "'").c_str());
}

bool CopyFile(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  out << in.rdbuf();
  out.close();
  return in && out && chmod(to.c_str(), 0755) == 0;
}

// A fresh copy of a file (a new inode) in a directory of its own, removed
// with the directory at the end.
class TempCopy {
 public:
  explicit TempCopy(const std::string& from, const std::string& name = "libwl.so") {
    dir_ = MakeTempDir("copy");
    if (dir_.empty()) return;
    path_ = dir_ + "/" + name;
    if (!CopyFile(from, path_)) path_.clear();
  }
  ~TempCopy() { RemoveTree(dir_); }
  TempCopy(const TempCopy&) = delete;
  TempCopy& operator=(const TempCopy&) = delete;

  const std::string& path() const { return path_; }
  const std::string& dir() const { return dir_; }
  bool ok() const { return !path_.empty() && access(path_.c_str(), R_OK) == 0; }

 private:
  std::string dir_, path_;
};

std::string NoSframeLibrary() { return vmtest::NextToSelf("libvmtest_wldl_nosframe.so"); }

struct stat StatOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) st.st_ino = 0;
  return st;
}

std::optional<FileInfo> EntryFor(const std::vector<FileInfo>& files, uint64_t ino,
                                 std::optional<uint64_t> size = std::nullopt) {
  for (const FileInfo& f : files) {
    if (f.ino == ino && (!size || f.file_size == *size)) return f;
  }
  return std::nullopt;
}

std::optional<FileInfo> EntryById(const std::vector<FileInfo>& files, uint64_t id) {
  for (const FileInfo& f : files) {
    if (f.id == id) return f;
  }
  return std::nullopt;
}

size_t EntriesFor(const std::vector<FileInfo>& files, uint64_t ino) {
  return size_t(std::count_if(files.begin(), files.end(),
                              [&](const FileInfo& f) { return f.ino == ino; }));
}

std::string DescribeEntries(const std::vector<FileInfo>& files) {
  std::ostringstream o;
  for (const FileInfo& f : files) {
    o << "  id " << f.id << " ino " << f.ino << " size " << f.file_size << " sframe_len "
      << f.sframe_len << " attaches " << f.attaches << "\n";
  }
  return o.str();
}

// The chain check of this suite (see the header comment).
void CheckDlChain(const sframe::Sample& s, const std::vector<sframe::Symbol>& syms,
                  ChainCheck* c) {
  const std::vector<std::string> names = vmtest::Names(syms);
  if (names.empty()) return;
  const auto main_at = kDlToMain.end() - 1;
  const auto it = std::find(kDlToMain.begin(), main_at, names[0]);
  if (it == main_at) return;
  c->considered++;
  const std::vector<std::string> want(it, kDlToMain.end());
  const bool prefix = names.size() > want.size() && std::equal(want.begin(), want.end(),
                                                               names.begin()) &&
                      names[want.size()] == kLibc;
  const bool ended = s.user_stop == sframe::StopReason::kNoCoverage ||
                     s.user_stop == sframe::StopReason::kOutermost;
  if (prefix && ended) {
    c->complete++;
  } else if (c->bad.size() < 5) {
    std::string w;
    for (const std::string& n : want) w += " " + n;
    c->bad.push_back("  expected" + w + " " + kLibc + " ... (NO_COVERAGE or OUTERMOST)\n" +
                     vmtest::Describe(s, syms));
  }
}

std::string Fraction(const ChainCheck& c) {
  return std::to_string(c.complete) + "/" + std::to_string(c.considered);
}

// Waits for pid up to ms: its exit status (128 + signal), or -1 if still
// running at the end.
int WaitPidFor(pid_t pid, int ms) {
  const uint64_t end = NowMs() + uint64_t(ms);
  for (;;) {
    int st = 0;
    const pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (r < 0 && errno != EINTR) return -2;
    if (NowMs() >= end) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Starts program ARGS with stdin /dev/null and stdout and stderr to
// out_path; its pid, or -1.
pid_t Spawn(const std::vector<std::string>& args, const std::string& out_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<std::string> all = args;
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, all[0].c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// sframe-coverd run to its end (bounded): exit status and output.
struct DaemonRun {
  int status = -1;
  std::string output;
};
DaemonRun RunCoverd(const std::vector<std::string>& args, const std::string& out_path,
                    int timeout_ms) {
  std::vector<std::string> all{CoverdTool()};
  all.insert(all.end(), args.begin(), args.end());
  DaemonRun r;
  const pid_t pid = Spawn(all, out_path);
  if (pid < 0) return r;
  r.status = WaitPidFor(pid, timeout_ms);
  if (r.status == -1) {
    kill(pid, SIGKILL);
    WaitPidFor(pid, 10000);
    r.status = -1;
  }
  r.output = ReadFile(out_path);
  return r;
}

class CoverdTest : public vmtest::SessionTest {
 protected:
  void SetUp() override {
    SessionTest::SetUp();
    if (HasFatalFailure()) return;
    state_dir_ = MakeTempDir("state");
    ASSERT_FALSE(state_dir_.empty());
    // A cache of the test's own: each test's service makes the sections of
    // the files mapped at its start (libc among them) from .eh_frame, as a
    // first start does; AServiceStartedAgainCoversFromItsCache tests a
    // second start with the same cache.
    cache_dir_ = MakeTempDir("cache");
    ASSERT_FALSE(cache_dir_.empty());
    log_path_ = state_dir_ + "/coverd.log";
    for (const FileInfo& f : dev().list_files()) before_.insert(f.id);
    if (IsRoot()) discovery_ = std::make_unique<vmtest::ScopedModuleParam>("discovery", "Y");
  }

  void TearDown() override {
    if (pid_ > 0) StopService();
    if (HasFailure()) {
      std::cout << "---- sframe-coverd's stderr (" << log_path_ << ") ----\n"
                << ReadFile(log_path_) << "---- end ----\n";
    }
    if (dev_) {
      // The store as it was: every entry that appeared during the test goes.
      const size_t removed = RemoveNewEntries();
      for (const FileInfo& f : dev().list_files()) {
        EXPECT_TRUE(before_.count(f.id)) << "entry " << f.id << " left in the store";
      }
      if (removed) RecordProperty("entries_removed_after", std::to_string(removed));
    }
    discovery_.reset();
    RemoveTree(state_dir_);
    RemoveTree(cache_dir_);
    SessionTest::TearDown();
  }

  // Removes the entries that were not in the store before the test; how
  // many.
  size_t RemoveNewEntries() {
    std::vector<FileInfo> now;
    try {
      now = dev().list_files();
    } catch (const sframe::Error& e) {
      ADD_FAILURE() << e.what();
    }
    size_t removed = 0;
    for (const FileInfo& f : now) {
      if (before_.count(f.id)) continue;
      const int err = sframe::errno_of([&] { dev().remove_file(f.id); });
      EXPECT_TRUE(err == 0 || err == ENOENT) << "remove_file(" << f.id << "): " << err;
      removed += err == 0;
    }
    return removed;
  }

  std::string StatusPath() const { return state_dir_ + "/status"; }

  std::vector<std::string> CommonArgs() const {
    return {"--state-dir", state_dir_, "--cache-dir", cache_dir_, "-v"};
  }

  // Starts the service (only the libraries of library_dir, or none) and
  // waits up to 120 s for its start-up to be done.
  void StartService(const std::string& library_dir = "") {
    std::vector<std::string> args{CoverdTool()};
    for (const std::string& a : CommonArgs()) args.push_back(a);
    if (library_dir.empty()) {
      args.push_back("--no-libraries");
    } else {
      args.push_back("--library-dir");
      args.push_back(library_dir);
    }
    const uint64_t t0 = NowMs();
    pid_ = Spawn(args, log_path_);
    ASSERT_GT(pid_, 0) << "cannot start " << args[0];
    const uint64_t end = t0 + 120000;
    for (;;) {
      if (ReadFile(log_path_).find("the files mapped at start are covered") != std::string::npos) {
        break;
      }
      const int st = WaitPidFor(pid_, 0);
      if (st != -1) {
        pid_ = -1;
        FAIL() << "sframe-coverd exited with status " << st << " during its start-up";
      }
      if (NowMs() >= end) FAIL() << "sframe-coverd's start-up not done after 120 s";
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    startup_ms_ = NowMs() - t0;
    RecordProperty("startup_ms", std::to_string(startup_ms_));
    EXPECT_EQ(sframe::coverage_service_pid(state_dir_), pid_) << "its pid file";
  }

  // SIGTERM: it stops with status 0 (bounded, 60 s).
  void StopService() {
    ASSERT_GT(pid_, 0);
    ASSERT_EQ(kill(pid_, SIGTERM), 0);
    const int st = WaitPidFor(pid_, 60000);
    if (st == -1) {
      kill(pid_, SIGKILL);
      WaitPidFor(pid_, 10000);
    }
    pid_ = -1;
    EXPECT_EQ(st, 0) << "sframe-coverd's status after SIGTERM (-1: still running after 60 s)";
    EXPECT_EQ(sframe::coverage_service_pid(state_dir_), 0) << "its pid file is still locked";
  }

  std::optional<sframe::CoverageStatus> Status() const {
    try {
      return sframe::read_coverage_status(StatusPath());
    } catch (const sframe::Error&) {
      return std::nullopt;
    }
  }
  // The status file's line for the file st describes.
  std::optional<sframe::StoreFile> StatusOf(const struct stat& st) const {
    auto s = Status();
    if (!s) return std::nullopt;
    for (const sframe::StoreFile& f : s->files) {
      if (f.dev == uint64_t(st.st_dev) && f.ino == uint64_t(st.st_ino)) return f;
    }
    return std::nullopt;
  }
  // Waits up to ms for the status file to show the file in state.
  bool WaitStatus(const struct stat& st, sframe::StoreFile::State state, int ms,
                  sframe::StoreFile* out = nullptr) {
    const uint64_t end = NowMs() + uint64_t(ms);
    for (;;) {
      auto f = StatusOf(st);
      if (f && f->state == state) {
        if (out) *out = *f;
        return true;
      }
      if (NowMs() >= end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  // Waits up to ms for an entry of inode ino (and size, if given).
  std::optional<FileInfo> WaitEntry(uint64_t ino, std::optional<uint64_t> size, int ms) {
    const uint64_t end = NowMs() + uint64_t(ms);
    for (;;) {
      if (auto e = EntryFor(dev().list_files(), ino, size)) return e;
      if (NowMs() >= end) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // Waits up to ms for entry id to leave the store.
  bool WaitGone(uint64_t id, int ms) {
    const uint64_t end = NowMs() + uint64_t(ms);
    for (;;) {
      if (!EntryById(dev().list_files(), id)) return true;
      if (NowMs() >= end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // Samples w for ms; the chain check of every sample, and of the first
  // `first` samples whose leaf is in the chain.
  ChainCheck Sample(vmtest::Workload* w, int ms, ChainCheck* first_few = nullptr,
                    size_t first = 0) {
    sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(10000));
    sframe::Session s = sframe::Session::start(sframe::Target::kProcess, w->pid(), SframeOnly());
    Collected c = Collect(&s, &ev, ms);
    ChainCheck check;
    for (const sframe::Sample* smp : c.Samples()) {
      const std::vector<sframe::Symbol> syms = User(*smp);
      CheckDlChain(*smp, syms, &check);
      if (first_few && first_few->considered < first) CheckDlChain(*smp, syms, first_few);
    }
    return check;
  }

  // session_workload dlspin with the library at lib (in this mount
  // namespace; through `program` and args when given: the container).
  std::unique_ptr<vmtest::Workload> StartDlspin(const std::string& lib,
                                                const std::vector<std::string>& args = {"dlspin",
                                                                                        "0"},
                                                const std::string& program = "session_workload") {
    setenv("SFRAME_WORKLOAD_NO_REGISTER", "1", 1);
    setenv("SFRAME_WORKLOAD_DL_PATH", lib.c_str(), 1);
    std::string err;
    auto w = vmtest::Workload::Start(args, &err, program);
    unsetenv("SFRAME_WORKLOAD_NO_REGISTER");
    unsetenv("SFRAME_WORKLOAD_DL_PATH");
    EXPECT_TRUE(w) << err;
    if (!w) return w;
    // Let it load the library before the symbolizer reads its maps.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    sym_.forget_process(w->pid());
    sym_.load_process(w->pid());
    return w;
  }

  std::string state_dir_, cache_dir_, log_path_;
  pid_t pid_ = -1;
  uint64_t startup_ms_ = 0;
  std::set<uint64_t> before_;
  std::unique_ptr<vmtest::ScopedModuleParam> discovery_;
};

// Watches the store from another thread from now on: when an entry of
// inode ino first appears (milliseconds after the watch started).
class EntryWatch {
 public:
  EntryWatch(const sframe::Device& dev, uint64_t ino, int timeout_ms)
      : t0_(NowMs()), thread_([this, &dev, ino, timeout_ms] {
          const uint64_t end = t0_ + uint64_t(timeout_ms);
          while (!stop_ && NowMs() < end) {
            std::vector<FileInfo> files;
            try {
              files = dev.list_files();
            } catch (const sframe::Error&) {
            }
            if (auto e = EntryFor(files, ino)) {
              found_ = *e;
              ms_ = int64_t(NowMs() - t0_);
              return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
        }) {}
  ~EntryWatch() { Join(); }
  // Waits for the watch to end; the entry, if it appeared.
  std::optional<FileInfo> Join() {
    if (thread_.joinable()) thread_.join();
    return found_;
  }
  int64_t ms() const { return ms_; }
  void Stop() { stop_ = true; }

 private:
  const uint64_t t0_;
  std::atomic<bool> stop_{false};
  std::optional<FileInfo> found_;
  int64_t ms_ = -1;
  std::thread thread_;
};

// The container: a new mount namespace (root), private mounts, the file of
// arg's first field bind-mounted over the path of its second, then
// session_workload dlspin 0 (which dlopen()s that path, given to it in
// SFRAME_WORKLOAD_DL_PATH by the parent).
VMTEST_CHILD(container_dlspin) {
  const size_t tab = arg.find('\t');
  if (tab == std::string::npos) return 2;
  const std::string other = arg.substr(0, tab), path = arg.substr(tab + 1);
  if (unshare(CLONE_NEWNS) != 0) {
    std::printf("unshare: %s\n", std::strerror(errno));
    return 3;
  }
  if (mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      mount(other.c_str(), path.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    std::printf("mount: %s\n", std::strerror(errno));
    return 4;
  }
  const std::string wl = vmtest::NextToSelf("session_workload");
  std::fflush(stdout);
  execl(wl.c_str(), "session_workload", "dlspin", "0", static_cast<char*>(nullptr));
  std::printf("exec %s: %s\n", wl.c_str(), std::strerror(errno));
  return 5;
}

// ---- privileges ---------------------------------------------------------------------------

TEST_F(CoverdTest, ServiceRefusesWithoutPrivilegeClearly) {
  if (IsRoot()) {
    GTEST_SKIP() << "run as root, sframe-coverd has the privileges it needs: the user run "
                    "(uid 65534, no capabilities) checks its refusal";
  }
  const size_t entries = dev().list_files().size();
  struct Mode {
    const char* what;
    std::vector<std::string> args;
  };
  const Mode modes[] = {
      {"service", {"--no-libraries"}},
      {"--once", {"--once", "--library-dir", state_dir_}},
  };
  for (const Mode& m : modes) {
    std::vector<std::string> args{"--state-dir", state_dir_, "--cache-dir", cache_dir_};
    args.insert(args.end(), m.args.begin(), m.args.end());
    const DaemonRun r = RunCoverd(args, log_path_, 60000);
    EXPECT_EQ(r.status, 1) << m.what << " (-1: still running after 60 s); its output:\n"
                           << r.output;
    EXPECT_TRUE(r.output.find("CAP_SYS_ADMIN") != std::string::npos ||
                r.output.find("root") != std::string::npos)
        << m.what << ": the message names neither CAP_SYS_ADMIN nor root:\n"
        << r.output;
    RecordProperty(std::string(m.what) + "_message", r.output);
    EXPECT_EQ(sframe::coverage_service_pid(state_dir_), 0) << m.what;
  }
  EXPECT_EQ(dev().list_files().size(), entries);
}

// ---- coverage -----------------------------------------------------------------------------

// A process running before the service starts: its library (no .sframe, no
// frame pointers, a fresh inode) is in the store when the start-up is done,
// and its chains cross it to main.
TEST_F(CoverdTest, ProcessesRunningAtStartAreCoveredFromTheStore) {
  if (!IsRoot()) GTEST_SKIP() << kRootOnly;
  TempCopy lib(NoSframeLibrary());
  ASSERT_TRUE(lib.ok());
  const struct stat st = StatOf(lib.path());
  auto w = StartDlspin(lib.path());
  ASSERT_TRUE(w);
  ASSERT_FALSE(EntryFor(dev().list_files(), st.st_ino)) << "an entry before the service ran";

  ASSERT_NO_FATAL_FAILURE(StartService());
  const std::vector<FileInfo> files = dev().list_files();
  const auto e = EntryFor(files, st.st_ino, uint64_t(st.st_size));
  ASSERT_TRUE(e) << "no entry for the library (inode " << st.st_ino << ", " << st.st_size
                 << " bytes) after the start-up; the store:\n"
                 << DescribeEntries(files);
  EXPECT_GT(e->sframe_len, 0u);
  RecordProperty("store_entries_after_startup", std::to_string(files.size()));

  const ChainCheck c = Sample(w.get(), 2000);
  RecordProperty("complete", Fraction(c));
  EXPECT_TRUE(MostlyComplete(c, 0.99, 500));

  sframe::StoreFile f;
  EXPECT_TRUE(WaitStatus(st, sframe::StoreFile::State::kCovered, 3000, &f))
      << "the status file does not say covered for " << lib.path() << ":\n"
      << ReadFile(StatusPath());
  EXPECT_EQ(f.id, e->id);
  EXPECT_EQ(f.source, "generated");
  EXPECT_EQ(f.sframe_bytes, e->sframe_len);
  if (auto s = Status()) {
    EXPECT_EQ(s->counter("pid"), uint64_t(pid_));
    EXPECT_EQ(s->counter("waiting"), 0u) << "work left after the start-up (no libraries asked)";
    RecordProperty("status_covered", std::to_string(s->counter("covered")));
    RecordProperty("status_generated", std::to_string(s->counter("generated")));
    RecordProperty("status_cache_reads", std::to_string(s->counter("cache_reads")));
  }
  w->Kill();
}

// A file first mapped while the service runs is covered at that mapping:
// the time from the process's start to the entry is recorded; the process's
// chains are complete; a second process of the same file adds no entry and
// no bytes and is complete from its first samples.
TEST_F(CoverdTest, ANewFileIsCoveredAtItsFirstMappingAndItsFirstSamplesAreComplete) {
  if (!IsRoot()) GTEST_SKIP() << kRootOnly;
  ASSERT_NO_FATAL_FAILURE(StartService());
  TempCopy lib(NoSframeLibrary());
  ASSERT_TRUE(lib.ok());
  const struct stat st = StatOf(lib.path());

  std::unique_ptr<vmtest::Workload> w;
  std::optional<FileInfo> e;
  int64_t ms = -1;
  {
    EntryWatch watch(dev(), st.st_ino, 30000);
    w = StartDlspin(lib.path());
    if (!w) watch.Stop();
    e = watch.Join();
    ms = watch.ms();
  }
  ASSERT_TRUE(w);
  ASSERT_TRUE(e) << "no entry for the library 30 s after the process started; the store:\n"
                 << DescribeEntries(dev().list_files());
  RecordProperty("ms_process_start_to_entry", std::to_string(ms));
  EXPECT_EQ(e->file_size, uint64_t(st.st_size));

  const ChainCheck c = Sample(w.get(), 2000);
  RecordProperty("first_process_complete", Fraction(c));
  EXPECT_TRUE(MostlyComplete(c, 0.99, 500));

  // A second process of the same copy.
  const sframe::FileStoreStats st0 = dev().file_store_stats();
  const FileInfo e0 = *EntryById(dev().list_files(), e->id);
  auto w2 = StartDlspin(lib.path());
  ASSERT_TRUE(w2);
  ChainCheck first10;
  const ChainCheck c2 = Sample(w2.get(), 1000, &first10, 10);
  RecordProperty("second_process_complete", Fraction(c2));
  RecordProperty("second_process_first_samples_complete", Fraction(first10));
  EXPECT_EQ(first10.considered, 10u) << "fewer than 10 samples in the chain";
  EXPECT_EQ(first10.complete, first10.considered) << "its first samples:\n"
                                                  << (first10.bad.empty() ? "" : first10.bad[0]);
  EXPECT_TRUE(MostlyComplete(c2, 0.99, 100));
  const std::vector<FileInfo> files = dev().list_files();
  EXPECT_EQ(EntriesFor(files, st.st_ino), 1u) << DescribeEntries(files);
  const auto e1 = EntryById(files, e->id);
  ASSERT_TRUE(e1) << "the entry is gone";
  EXPECT_GT(e1->attaches, e0.attaches) << "the second process's mapping is not the entry's";
  const sframe::FileStoreStats st1 = dev().file_store_stats();
  EXPECT_EQ(st1.bytes, st0.bytes) << "the second process made a copy";
  EXPECT_EQ(st1.entries, st0.entries);
  RecordProperty("file_bytes", std::to_string(st1.bytes));
  RecordProperty("entry_sframe_len", std::to_string(e1->sframe_len));
  w->Kill();
  w2->Kill();
}

// ---- changes ------------------------------------------------------------------------------

TEST_F(CoverdTest, AChangedFileNeverKeepsItsOldSection) {
  if (!IsRoot()) GTEST_SKIP() << kRootOnly;
  ASSERT_NO_FATAL_FAILURE(StartService());

  // (a) One byte written to the file while a process maps it.
  {
    SCOPED_TRACE("(a) written");
    TempCopy lib(NoSframeLibrary());
    ASSERT_TRUE(lib.ok());
    const struct stat st = StatOf(lib.path());
    auto w = StartDlspin(lib.path());
    ASSERT_TRUE(w);
    const auto e = WaitEntry(st.st_ino, uint64_t(st.st_size), 30000);
    ASSERT_TRUE(e) << "not covered in 30 s";
    const ChainCheck with = Sample(w.get(), 1000);
    RecordProperty("a_with", Fraction(with));
    EXPECT_TRUE(MostlyComplete(with, 0.99, 100));
    ASSERT_TRUE(WaitStatus(st, sframe::StoreFile::State::kCovered, 3000))
        << ReadFile(StatusPath());
    {
      sframe::UniqueFd out = sframe::UniqueFd::open(lib.path(), O_WRONLY | O_APPEND);
      ASSERT_EQ(write(out.get(), "x", 1), 1);
    }
    EXPECT_TRUE(WaitGone(e->id, 5000)) << "the module kept the entry of a written file";
    const ChainCheck after = Sample(w.get(), 1000);
    RecordProperty("a_after_write", Fraction(after));
    EXPECT_GE(after.considered, 100u);
    EXPECT_EQ(after.complete, 0u) << "complete chains through the old section of a written file";
    // Nothing maps anything meanwhile: the service tells the drop by itself.
    EXPECT_TRUE(WaitStatus(st, sframe::StoreFile::State::kDropped, 10000))
        << "the status file does not say dropped 10 s after the module dropped the entry:\n"
        << ReadFile(StatusPath());
    // A new process of the changed file: covered again, for its new size.
    const struct stat changed = StatOf(lib.path());
    ASSERT_EQ(changed.st_size, st.st_size + 1);
    auto w2 = StartDlspin(lib.path());
    ASSERT_TRUE(w2);
    const auto e2 = WaitEntry(st.st_ino, uint64_t(changed.st_size), 30000);
    ASSERT_TRUE(e2) << "the changed file not covered again in 30 s; the store:\n"
                    << DescribeEntries(dev().list_files());
    EXPECT_NE(e2->id, e->id);
    EXPECT_EQ(e2->file_size, uint64_t(changed.st_size));
    EXPECT_EQ(EntriesFor(dev().list_files(), st.st_ino), 1u);
    const ChainCheck again = Sample(w2.get(), 1000);
    RecordProperty("a_new_process", Fraction(again));
    EXPECT_TRUE(MostlyComplete(again, 0.99, 100));
    sframe::StoreFile f;
    EXPECT_TRUE(WaitStatus(changed, sframe::StoreFile::State::kCovered, 3000, &f))
        << ReadFile(StatusPath());
    EXPECT_EQ(f.id, e2->id);
    EXPECT_EQ(f.sframe_bytes, e2->sframe_len);
  }

  // (b) Another copy renamed over the path while a process maps the old
  // file: the old entry is dropped or at least not used for the new file,
  // which gets its own.
  {
    SCOPED_TRACE("(b) renamed over");
    TempCopy lib(NoSframeLibrary());
    ASSERT_TRUE(lib.ok());
    const struct stat st = StatOf(lib.path());
    auto w = StartDlspin(lib.path());
    ASSERT_TRUE(w);
    const auto e = WaitEntry(st.st_ino, uint64_t(st.st_size), 30000);
    ASSERT_TRUE(e) << "not covered in 30 s";
    EXPECT_TRUE(MostlyComplete(Sample(w.get(), 1000), 0.99, 100));
    const std::string other = lib.dir() + "/other.so";
    ASSERT_TRUE(CopyFile(NoSframeLibrary(), other));
    const struct stat ost = StatOf(other);
    ASSERT_EQ(rename(other.c_str(), lib.path().c_str()), 0);
    const auto old_before = EntryById(dev().list_files(), e->id);
    auto w2 = StartDlspin(lib.path());
    ASSERT_TRUE(w2);
    const auto e2 = WaitEntry(ost.st_ino, uint64_t(ost.st_size), 30000);
    ASSERT_TRUE(e2) << "the file renamed over the path not covered in 30 s; the store:\n"
                    << DescribeEntries(dev().list_files());
    EXPECT_NE(e2->id, e->id);
    const ChainCheck c = Sample(w2.get(), 1000);
    RecordProperty("b_new_file", Fraction(c));
    EXPECT_TRUE(MostlyComplete(c, 0.99, 100));
    const auto old_after = EntryById(dev().list_files(), e->id);
    RecordProperty("b_old_entry", old_after ? "kept, unused" : "dropped");
    if (old_before && old_after) {
      EXPECT_EQ(old_after->attaches, old_before->attaches)
          << "the old file's entry was attached to the new file's mapping";
    }
  }

  // (c) Another copy bind-mounted over the path: a process mapping the path
  // gets the other inode's entry; the original's is not attached.
  {
    SCOPED_TRACE("(c) bind mount");
    TempCopy lib(NoSframeLibrary());
    ASSERT_TRUE(lib.ok());
    const struct stat st = StatOf(lib.path());
    const std::string other = lib.dir() + "/other.so";
    ASSERT_TRUE(CopyFile(NoSframeLibrary(), other));
    const struct stat ost = StatOf(other);
    auto w = StartDlspin(lib.path());
    ASSERT_TRUE(w);
    const auto e = WaitEntry(st.st_ino, uint64_t(st.st_size), 30000);
    ASSERT_TRUE(e) << "not covered in 30 s";
    EXPECT_TRUE(MostlyComplete(Sample(w.get(), 1000), 0.99, 100));
    const auto e0 = EntryById(dev().list_files(), e->id);
    ASSERT_TRUE(e0);
    const uint64_t attaches0 = e0->attaches;
    ASSERT_EQ(mount(other.c_str(), lib.path().c_str(), nullptr, MS_BIND, nullptr), 0)
        << std::strerror(errno);
    struct Unmount {
      std::string path;
      ~Unmount() { umount2(path.c_str(), MNT_DETACH); }
    } unmount{lib.path()};
    ASSERT_EQ(StatOf(lib.path()).st_ino, ost.st_ino) << "the bind mount did not take";
    auto w2 = StartDlspin(lib.path());
    ASSERT_TRUE(w2);
    const auto e2 = WaitEntry(ost.st_ino, uint64_t(ost.st_size), 30000);
    ASSERT_TRUE(e2) << "the file bind-mounted over the path not covered in 30 s; the store:\n"
                    << DescribeEntries(dev().list_files());
    EXPECT_NE(e2->id, e->id);
    const ChainCheck c = Sample(w2.get(), 1000);
    RecordProperty("c_bind_mounted", Fraction(c));
    EXPECT_TRUE(MostlyComplete(c, 0.99, 100));
    const std::vector<FileInfo> files = dev().list_files();
    const auto orig = EntryById(files, e->id);
    ASSERT_TRUE(orig) << "the original's entry is gone (nothing changed it)";
    EXPECT_EQ(orig->attaches, attaches0) << "the original's entry was attached to the other file";
    const auto other_entry = EntryById(files, e2->id);
    ASSERT_TRUE(other_entry);
    EXPECT_GE(other_entry->attaches, 1u);
    w2->Kill();
    w2->Wait();
  }

  // (d) A process in a mount namespace of its own where another copy is
  // bind-mounted at the path (a container's different file of the same
  // path): it gets an entry for the container's inode, and complete chains.
  {
    SCOPED_TRACE("(d) container");
    TempCopy lib(NoSframeLibrary());
    ASSERT_TRUE(lib.ok());
    const struct stat st = StatOf(lib.path());
    const std::string other = lib.dir() + "/other.so";
    ASSERT_TRUE(CopyFile(NoSframeLibrary(), other));
    const struct stat ost = StatOf(other);
    // The host's file of the path, covered first.
    auto host = StartDlspin(lib.path());
    ASSERT_TRUE(host);
    const auto e = WaitEntry(st.st_ino, uint64_t(st.st_size), 30000);
    ASSERT_TRUE(e) << "not covered in 30 s";
    EXPECT_TRUE(MostlyComplete(Sample(host.get(), 1000), 0.99, 100));
    const auto e0 = EntryById(dev().list_files(), e->id);
    ASSERT_TRUE(e0);
    const uint64_t attaches0 = e0->attaches;
    auto guest = StartDlspin(lib.path(),
                             {"--vmtest-child=container_dlspin",
                              "--vmtest-arg=" + other + "\t" + lib.path()},
                             sframe::self_exe_path());
    ASSERT_TRUE(guest);
    const auto e2 = WaitEntry(ost.st_ino, uint64_t(ost.st_size), 30000);
    ASSERT_TRUE(e2) << "the container's file not covered in 30 s; the store:\n"
                    << DescribeEntries(dev().list_files());
    EXPECT_NE(e2->id, e->id);
    const ChainCheck c = Sample(guest.get(), 1000);
    RecordProperty("d_container", Fraction(c));
    EXPECT_TRUE(MostlyComplete(c, 0.99, 100));
    const std::vector<FileInfo> files = dev().list_files();
    const auto hosts = EntryById(files, e->id);
    ASSERT_TRUE(hosts);
    EXPECT_EQ(hosts->attaches, attaches0) << "the host's entry was attached in the container";
    const auto guests = EntryById(files, e2->id);
    ASSERT_TRUE(guests);
    EXPECT_GE(guests->attaches, 1u);
  }
}

// ---- many processes -----------------------------------------------------------------------

// 200 processes of one program without .sframe (a fresh copy of sleep):
// one entry, one section's bytes.
TEST_F(CoverdTest, TwoHundredProcessesShareOneCopy) {
  if (!IsRoot()) GTEST_SKIP() << kRootOnly;
  ASSERT_NO_FATAL_FAILURE(StartService());
  TempCopy prog("/bin/sleep", "sleep");
  ASSERT_TRUE(prog.ok());
  const struct stat st = StatOf(prog.path());
  const auto status0 = Status();
  ASSERT_TRUE(status0);
  const std::set<uint64_t> ids0 = [&] {
    std::set<uint64_t> s;
    for (const FileInfo& f : dev().list_files()) s.insert(f.id);
    return s;
  }();
  const sframe::FileStoreStats st0 = dev().file_store_stats();

  constexpr int kProcesses = 200;
  struct Sleepers {
    std::vector<pid_t> pids;
    ~Sleepers() {
      for (pid_t p : pids) kill(p, SIGKILL);
      for (pid_t p : pids) WaitPidFor(p, 10000);
    }
  } sleepers;
  std::optional<FileInfo> e;
  int64_t ms = -1;
  uint64_t spawn_ms = 0;
  {
    EntryWatch watch(dev(), st.st_ino, 60000);
    const uint64_t t0 = NowMs();
    for (int i = 0; i < kProcesses; i++) {
      const pid_t p = Spawn({prog.path(), "60"}, "/dev/null");
      if (p < 0) break;
      sleepers.pids.push_back(p);
    }
    spawn_ms = NowMs() - t0;
    if (sleepers.pids.size() != size_t(kProcesses)) watch.Stop();
    e = watch.Join();
    ms = watch.ms();
  }
  ASSERT_EQ(sleepers.pids.size(), size_t(kProcesses));
  ASSERT_TRUE(e) << "no entry for the program 60 s after its first start; the store:\n"
                 << DescribeEntries(dev().list_files());
  RecordProperty("ms_first_start_to_entry", std::to_string(ms));
  RecordProperty("ms_to_start_200", std::to_string(spawn_ms));
  // All running still.
  for (pid_t p : sleepers.pids) ASSERT_EQ(WaitPidFor(p, 0), -1) << "a sleep ended early";

  const std::vector<FileInfo> files = dev().list_files();
  const sframe::FileStoreStats st1 = dev().file_store_stats();
  EXPECT_EQ(EntriesFor(files, st.st_ino), 1u) << DescribeEntries(files);
  const auto now = EntryFor(files, st.st_ino);
  ASSERT_TRUE(now);
  uint64_t others = 0;
  std::vector<FileInfo> other_entries;
  for (const FileInfo& f : files) {
    if (ids0.count(f.id) || f.id == now->id) continue;
    others += f.sframe_len;
    other_entries.push_back(f);
  }
  const uint64_t growth = st1.bytes - st0.bytes;
  RecordProperty("file_bytes_before", std::to_string(st0.bytes));
  RecordProperty("file_bytes_after", std::to_string(st1.bytes));
  RecordProperty("file_bytes_growth", std::to_string(growth));
  RecordProperty("sleep_sframe_len", std::to_string(now->sframe_len));
  RecordProperty("sleep_entry_attaches", std::to_string(now->attaches));
  RecordProperty("other_new_entries", std::to_string(other_entries.size()));
  EXPECT_EQ(growth, now->sframe_len + others)
      << "the store grew by more than the program's one section (and the other new entries:\n"
      << DescribeEntries(other_entries) << ")";
  EXPECT_LT(growth, 2 * now->sframe_len + others);
  EXPECT_EQ(st1.entries, st0.entries + 1 + other_entries.size());

  // The service looked at the file once: one supply, no second try.
  for (pid_t p : sleepers.pids) kill(p, SIGKILL);
  ASSERT_NO_FATAL_FAILURE(StopService());
  const auto status1 = Status();
  ASSERT_TRUE(status1);
  RecordProperty("mmap_records", std::to_string(status1->counter("mmap_records")));
  RecordProperty("mmap_records_lost", std::to_string(status1->counter("mmap_records_lost")));
  EXPECT_EQ(status1->counter("supplied") - status0->counter("supplied"),
            1 + other_entries.size());
  EXPECT_EQ(status1->counter("present"), status0->counter("present"))
      << "the service supplied the same file again";
  EXPECT_GE(status1->counter("mmap_records") - status0->counter("mmap_records"),
            uint64_t(kProcesses));
}

// ---- the cache ----------------------------------------------------------------------------

// The path of the libc this program maps (from /proc/self/maps).
std::string MappedLibc() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    if (path.size() > 10 && path.compare(path.size() - 10, 10, "/libc.so.6") == 0) return path;
  }
  return "";
}

// The service started a second time with the same cache directory (a
// restart, a reboot, or a cache filled by `--once --cache-only` after an
// upgrade) covers what it covered the first time, from the sections the
// first one stored: libc, which this program maps and which has no
// .sframe, is covered both times.
TEST_F(CoverdTest, AServiceStartedAgainCoversFromItsCache) {
  if (!IsRoot()) GTEST_SKIP() << kRootOnly;
  const std::string libc = MappedLibc();
  ASSERT_FALSE(libc.empty()) << "no libc.so.6 in /proc/self/maps";
  const struct stat st = StatOf(libc);

  for (int start = 1; start <= 2; start++) {
    SCOPED_TRACE(start == 1 ? "first start (empty cache)" : "second start (the cache filled)");
    const std::string n = std::to_string(start);
    ASSERT_NO_FATAL_FAILURE(StartService());
    const auto status = Status();
    ASSERT_TRUE(status) << "no status file";
    RecordProperty("start" + n + "_ms", std::to_string(startup_ms_));
    RecordProperty("start" + n + "_covered", std::to_string(status->counter("covered")));
    RecordProperty("start" + n + "_failed", std::to_string(status->counter("failed")));
    RecordProperty("start" + n + "_generated", std::to_string(status->counter("generated")));
    RecordProperty("start" + n + "_cache_reads", std::to_string(status->counter("cache_reads")));
    if (start == 1) {
      EXPECT_GT(status->counter("generated"), 0u);
    } else {
      EXPECT_GT(status->counter("cache_reads"), 0u) << "nothing read from the cache";
    }
    const auto f = StatusOf(st);
    ASSERT_TRUE(f) << "the status file does not list " << libc << ":\n" << ReadFile(StatusPath());
    EXPECT_STREQ(sframe::to_string(f->state), "covered")
        << libc << ": " << f->reason << "; the status file:\n" << ReadFile(StatusPath());
    EXPECT_EQ(f->source, "generated");
    EXPECT_GT(f->rows_permille, 0u);
    const auto e = EntryById(dev().list_files(), f->id);
    EXPECT_TRUE(e) << "no entry " << f->id << " for " << libc << " in the store";
    if (e) {
      EXPECT_EQ(e->sframe_len, f->sframe_bytes);
    }
    ASSERT_NO_FATAL_FAILURE(StopService());
    // The next start finds the store as the test found it: it supplies
    // again rather than finding the entries there.
    RemoveNewEntries();
  }
}

// A file covered because a process mapped it is listed (the cache
// directory's coverd-mapped-files, mode 0600) and covered at the service's
// next start before any process maps it again: that process's first
// samples are complete without waiting for the service (the compiler run
// a second time after a reboot: cc1plus's first samples, issue 30).
TEST_F(CoverdTest, AFileMappedBeforeIsCoveredAtTheNextStartBeforeItRuns) {
  if (!IsRoot()) GTEST_SKIP() << kRootOnly;
  TempCopy lib(NoSframeLibrary());
  ASSERT_TRUE(lib.ok());
  const struct stat st = StatOf(lib.path());
  ASSERT_NO_FATAL_FAILURE(StartService());
  {
    auto w = StartDlspin(lib.path());
    ASSERT_TRUE(w);
    ASSERT_TRUE(WaitEntry(st.st_ino, uint64_t(st.st_size), 30000))
        << "not covered at its first mapping; the store:\n" << DescribeEntries(dev().list_files());
    w->Kill();
  }
  ASSERT_NO_FATAL_FAILURE(StopService());
  const std::string list = cache_dir_ + "/coverd-mapped-files";
  const std::string text = ReadFile(list);
  EXPECT_NE(text.find(" " + lib.path() + "\n"), std::string::npos)
      << list << " does not list " << lib.path() << ":\n" << text;
  struct stat ls;
  ASSERT_EQ(stat(list.c_str(), &ls), 0) << list;
  EXPECT_EQ(ls.st_mode & 0777, 0600u) << list << " names other users' files";

  // The store as after a reboot: the entry gone.
  RemoveNewEntries();
  ASSERT_FALSE(EntryFor(dev().list_files(), st.st_ino));
  ASSERT_NO_FATAL_FAILURE(StartService());
  const auto e = EntryFor(dev().list_files(), st.st_ino, uint64_t(st.st_size));
  ASSERT_TRUE(e) << "no entry for " << lib.path()
                 << " once the start-up is done, before any process maps it; the store:\n"
                 << DescribeEntries(dev().list_files());
  if (auto s = Status()) {
    EXPECT_GE(s->counter("mapped_before"), 1u);
    RecordProperty("mapped_before", std::to_string(s->counter("mapped_before")));
  }
  auto w = StartDlspin(lib.path());
  ASSERT_TRUE(w);
  ChainCheck first10;
  const ChainCheck c = Sample(w.get(), 1000, &first10, 10);
  RecordProperty("first_samples_complete", Fraction(first10));
  EXPECT_EQ(first10.considered, 10u) << "fewer than 10 samples in the chain";
  EXPECT_EQ(first10.complete, first10.considered) << "its first samples:\n"
                                                  << (first10.bad.empty() ? "" : first10.bad[0]);
  EXPECT_TRUE(MostlyComplete(c, 0.99, 100));
  const auto e1 = EntryById(dev().list_files(), e->id);
  ASSERT_TRUE(e1);
  EXPECT_GT(e1->attaches, e->attaches) << "the process's mapping is not the entry's";
  w->Kill();
}

// ---- once ---------------------------------------------------------------------------------

TEST_F(CoverdTest, OnceModeCoversAndExits) {
  if (!IsRoot()) GTEST_SKIP() << kRootOnly;
  TempCopy lib(NoSframeLibrary());
  ASSERT_TRUE(lib.ok());
  const struct stat st = StatOf(lib.path());
  std::vector<std::string> args = CommonArgs();
  for (const std::string& a : {std::string("--once"), std::string("--library-dir"), lib.dir()}) {
    args.push_back(a);
  }
  const uint64_t t0 = NowMs();
  const DaemonRun r = RunCoverd(args, log_path_, 120000);
  RecordProperty("once_ms", std::to_string(NowMs() - t0));
  ASSERT_EQ(r.status, 0) << "(-1: still running after 120 s); its output:\n" << r.output;
  const std::vector<FileInfo> files = dev().list_files();
  const auto e = EntryFor(files, st.st_ino, uint64_t(st.st_size));
  ASSERT_TRUE(e) << "no entry for " << lib.path() << "; the store:\n" << DescribeEntries(files);
  EXPECT_EQ(sframe::coverage_service_pid(state_dir_), 0) << "its pid file is still locked";
  const auto f = StatusOf(st);
  ASSERT_TRUE(f) << "the status file does not list " << lib.path() << ":\n"
                 << ReadFile(StatusPath());
  EXPECT_STREQ(sframe::to_string(f->state), "covered") << f->reason;
  EXPECT_EQ(f->id, e->id);
  EXPECT_EQ(f->path, lib.path());
  EXPECT_EQ(f->sframe_bytes, e->sframe_len);
  if (auto s = Status()) {
    EXPECT_EQ(s->counter("waiting"), 0u);
    RecordProperty("once_covered", std::to_string(s->counter("covered")));
  }
}

}  // namespace
