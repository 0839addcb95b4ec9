// Adversarial tests of the registry (issue 10, findings 2, 3, 7 and 9):
// what one local user can do to the module's per-process registries, and
// to other users, through a device that is open to everyone.
//
// Every attack here is one an unprivileged user can mount, so the suite
// does the same as root and as uid 65534; root only adds a second user
// where one is needed (per-user accounting).  Holding another process's
// mmap_lock, and keeping a killed process from exiting, both use a FUSE
// file whose server (in this program, no libfuse) never answers READ until
// told: the server mounts it in a user and mount namespace of its own,
// which any user may create, and the other processes reach the file
// through /proc/SERVER/root.  Every such pin is released by the test, and
// by the server itself after kMaxPinSeconds at most, far below the
// guest's 120 s hung-task limit.
#include <fcntl.h>
#include <grp.h>
#include <linux/fuse.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "synthetic.h"
#include "vmtest.h"
#include "sframe_test/errno_of.h"

#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434
#endif
#ifndef __NR_process_mrelease
#define __NR_process_mrelease 448
#endif

namespace {

using Clock = std::chrono::steady_clock;
using sframe::Source;

// The longest a FUSE read is left unanswered: the server answers by itself
// after this, whatever the test does.
constexpr int kMaxPinSeconds = 20;
constexpr uint64_t kFuseFileSize = 64 * 1024;

int64_t MsSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

bool WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads exactly n bytes within timeout_ms (0: only what is there now).
bool ReadAll(int fd, void* p, size_t n, int timeout_ms) {
  char* c = static_cast<char*>(p);
  const auto t0 = Clock::now();
  while (n) {
    int left = static_cast<int>(timeout_ms - MsSince(t0));
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, left > 0 ? left : 0) <= 0) return false;
    ssize_t r = read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// waitpid() with a timeout: true and *status if pid ended in time.
bool WaitFor(pid_t pid, int* status, int timeout_ms) {
  const auto t0 = Clock::now();
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 || MsSince(t0) >= timeout_ms) return false;
    usleep(10000);
  }
}

// The state letter of /proc/PID/stat ('R', 'S', 'D', 'Z', ...), 0 if gone.
char TaskState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t p = s.rfind(')');
  return p != std::string::npos && p + 2 < s.size() ? s[p + 2] : 0;
}

bool WaitState(pid_t pid, char state, int timeout_ms) {
  const auto t0 = Clock::now();
  while (MsSince(t0) < timeout_ms) {
    if (TaskState(pid) == state) return true;
    usleep(10000);
  }
  return false;
}

struct Pipe {
  int r = -1, w = -1;
  Pipe() {
    int p[2];
    if (pipe2(p, O_CLOEXEC) == 0) {
      r = p[0];
      w = p[1];
    }
  }
  ~Pipe() {
    if (r >= 0) close(r);
    if (w >= 0) close(w);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
};

bool WriteFile(const std::string& path, const std::string& s) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size());
  close(fd);
  return ok;
}

int RegisterErrno(const sframe::LoadedObject& o) {
  try {
    sframe::Device d(vmtest::DevicePath());
    return sframe::errno_of(
        [&] { d.register_section(o.sframe_addr, o.sframe_len, o.text_start, o.text_len); });
  } catch (const sframe::Error& e) {
    return e.err() ? e.err() : EIO;
  }
}

// ---- a FUSE server that holds READ requests ---------------------------------
//
// Root (nodeid 1) holds one regular file "f" (nodeid 2) of kFuseFileSize
// zero bytes.  INIT, LOOKUP, GETATTR, OPEN, FLUSH and RELEASE are answered,
// everything else but READ gets ENOSYS.  READ requests are held until the
// test says 'r' on the control pipe (or kMaxPinSeconds after the first one),
// then answered with zeros, as are later ones.  Async reads are not
// negotiated, so a READ is sent by the faulting task itself and, once the
// server has read it, waited for uninterruptibly (fuse's
// request_wait_answer()): a SIGKILL does not end that wait.

void FuseReply(int fd, uint64_t unique, int error, const void* data, size_t len) {
  fuse_out_header h{};
  h.len = static_cast<uint32_t>(sizeof(h) + len);
  h.error = error;
  h.unique = unique;
  iovec iov[2] = {{&h, sizeof(h)}, {const_cast<void*>(data), len}};
  // A write for a request the kernel has given up (interrupted) fails with
  // ENOENT: nothing to do.
  (void)!writev(fd, iov, len ? 2 : 1);
}

fuse_attr FuseAttr(uint64_t nodeid) {
  fuse_attr a{};
  a.ino = nodeid;
  a.blksize = 4096;
  if (nodeid == FUSE_ROOT_ID) {
    a.mode = S_IFDIR | 0755;
    a.nlink = 2;
  } else {
    a.mode = S_IFREG | 0444;
    a.nlink = 1;
    a.size = kFuseFileSize;
    a.blocks = kFuseFileSize / 512;
  }
  return a;  // uid, gid 0: the namespace's root, the user outside
}

struct HeldRead {
  uint64_t unique;
  uint64_t offset;
  uint32_t size;
};

void FuseAnswerRead(int fd, const HeldRead& r) {
  static const std::vector<char> zeros(1 << 20);
  uint64_t n = r.offset >= kFuseFileSize ? 0 : std::min<uint64_t>(r.size, kFuseFileSize - r.offset);
  n = std::min<uint64_t>(n, zeros.size());
  FuseReply(fd, r.unique, 0, zeros.data(), n);
}

// fuse.ko not loaded yet: a mount of type fuse has the kernel load it
// (request_module("fs-fuse")), then refuses the fd (0: not /dev/fuse)
// without a word in the kernel log.
void LoadFuse(const std::string& dir) {
  (void)mount("sframe-adversary", dir.c_str(), "fuse", 0,
              "fd=0,rootmode=40000,user_id=0,group_id=0");
}

// The body of the server process.  Status bytes: 'M' mounted, 'R' a READ is
// held, 'E' failed (then exits).  Exits when the control pipe closes.
[[noreturn]] void FuseServe(const std::string& dir, int ctl, int status) {
  auto fail = [&](const char* what) {
    std::fprintf(stderr, "fuse server: %s: %s\n", what, std::strerror(errno));
    (void)!write(status, "E", 1);
    _exit(1);
  };
  const uid_t uid = getuid();
  const gid_t gid = getgid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) fail("unshare(CLONE_NEWUSER|CLONE_NEWNS)");
  if (!WriteFile("/proc/self/setgroups", "deny") ||
      !WriteFile("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
      !WriteFile("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1"))
    fail("id maps");
  int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    LoadFuse(dir);
    fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  }
  if (fd < 0) {
    fail(errno == EACCES ? "open /dev/fuse (udev gives it mode 0666; the root run of this "
                           "program does so in the VM, which has no udev)"
                         : "open /dev/fuse");
  }
  const std::string opts =
      "fd=" + std::to_string(fd) + ",rootmode=40000,user_id=0,group_id=0,max_read=65536";
  if (mount("sframe-adversary", dir.c_str(), "fuse", MS_NOSUID | MS_NODEV, opts.c_str()) != 0)
    fail("mount fuse");
  (void)!write(status, "M", 1);

  std::vector<char> buf(FUSE_MIN_READ_BUFFER + (1 << 20));
  std::vector<HeldRead> held;
  bool released = false;
  Clock::time_point first_held;
  // Bounded: each pass waits 100 ms at most, and the server ends when the
  // test closes the control pipe (or its own process ends).
  for (;;) {
    if (!released && !held.empty() && MsSince(first_held) > kMaxPinSeconds * 1000) {
      released = true;  // never pin anything longer than that
    }
    if (released) {
      for (const HeldRead& r : held) FuseAnswerRead(fd, r);
      held.clear();
    }
    pollfd pfd[2] = {{fd, POLLIN, 0}, {ctl, POLLIN, 0}};
    if (poll(pfd, 2, 100) < 0 && errno != EINTR) _exit(1);
    if (pfd[1].revents) {
      char c = 0;
      if (read(ctl, &c, 1) <= 0) _exit(0);  // closing fd aborts the connection
      if (c == 'r') released = true;
      continue;
    }
    if (!(pfd[0].revents & POLLIN)) {
      if (pfd[0].revents & (POLLERR | POLLHUP)) _exit(0);
      continue;
    }
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ENOENT) continue;
      _exit(errno == ENODEV ? 0 : 1);  // ENODEV: unmounted or aborted
    }
    if (static_cast<size_t>(n) < sizeof(fuse_in_header)) continue;
    const auto* in = reinterpret_cast<const fuse_in_header*>(buf.data());
    const char* arg = buf.data() + sizeof(*in);
    switch (in->opcode) {
      case FUSE_INIT: {
        const auto* ii = reinterpret_cast<const fuse_init_in*>(arg);
        fuse_init_out o{};
        o.major = FUSE_KERNEL_VERSION;
        o.minor = FUSE_KERNEL_MINOR_VERSION;
        o.max_readahead = ii->max_readahead;
        o.flags = 0;  // in particular no FUSE_ASYNC_READ: see above
        o.max_background = 16;
        o.congestion_threshold = 12;
        o.max_write = 4096;
        o.time_gran = 1;
        FuseReply(fd, in->unique, 0, &o, sizeof(o));
        break;
      }
      case FUSE_LOOKUP: {
        if (in->nodeid != FUSE_ROOT_ID || std::strcmp(arg, "f") != 0) {
          FuseReply(fd, in->unique, -ENOENT, nullptr, 0);
          break;
        }
        fuse_entry_out e{};
        e.nodeid = 2;
        e.generation = 1;
        e.entry_valid = 3600;
        e.attr_valid = 3600;
        e.attr = FuseAttr(2);
        FuseReply(fd, in->unique, 0, &e, sizeof(e));
        break;
      }
      case FUSE_GETATTR: {
        fuse_attr_out a{};
        a.attr_valid = 3600;
        a.attr = FuseAttr(in->nodeid);
        FuseReply(fd, in->unique, 0, &a, sizeof(a));
        break;
      }
      case FUSE_OPEN: {
        fuse_open_out o{};
        o.fh = 1;
        FuseReply(fd, in->unique, 0, &o, sizeof(o));
        break;
      }
      case FUSE_READ: {
        const auto* r = reinterpret_cast<const fuse_read_in*>(arg);
        HeldRead h{in->unique, r->offset, r->size};
        if (released) {
          FuseAnswerRead(fd, h);
        } else {
          if (held.empty()) first_held = Clock::now();
          held.push_back(h);
          (void)!write(status, "R", 1);
        }
        break;
      }
      case FUSE_FLUSH:
      case FUSE_RELEASE:
      case FUSE_DESTROY:
        FuseReply(fd, in->unique, 0, nullptr, 0);
        break;
      case FUSE_FORGET:
      case FUSE_BATCH_FORGET:
      case FUSE_INTERRUPT:
        break;  // no reply expected
      default:
        FuseReply(fd, in->unique, -ENOSYS, nullptr, 0);
        break;
    }
  }
}

// The test's handle on the server process.
class FuseServer {
 public:
  FuseServer() = default;
  FuseServer(const FuseServer&) = delete;
  FuseServer& operator=(const FuseServer&) = delete;
  ~FuseServer() {
    if (pid_ <= 0) return;
    close(ctl_.w);
    ctl_.w = -1;
    int st;
    if (!WaitFor(pid_, &st, 5000)) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &st, 0);
    }
    if (!dir_.empty()) rmdir(dir_.c_str());
  }

  // Forks the server and waits for its mount.  Empty, or what failed.
  std::string Start() {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof(cwd))) return "getcwd failed";
    std::string tmpl = std::string(cwd) + "/fuse.XXXXXX";
    if (!mkdtemp(tmpl.data())) return "mkdtemp failed";
    dir_ = tmpl;
    if (geteuid() == 0) {
      // What udev does on a Debian system (50-udev-default.rules: fuse
      // 0666), which the VM, without udev, does not: so that users may
      // mount FUSE file systems in namespaces of their own.
      struct stat sb;
      if (stat("/dev/fuse", &sb) != 0) LoadFuse(dir_);
      if (chmod("/dev/fuse", 0666) != 0) return "chmod /dev/fuse failed";
    }
    pid_ = fork();
    if (pid_ < 0) return "fork failed";
    if (pid_ == 0) {
      close(ctl_.w);
      close(status_.r);
      FuseServe(dir_, ctl_.r, status_.w);
    }
    char c = 0;
    if (!ReadAll(status_.r, &c, 1, 15000)) return "the FUSE server did not report";
    if (c != 'M') return "the FUSE server failed to mount (see the log)";
    return "";
  }

  // The file, as seen from outside the server's mount namespace.
  std::string FilePath() const {
    return "/proc/" + std::to_string(pid_) + "/root" + dir_ + "/f";
  }

  // Whether a READ reached the server (and is held) within timeout_ms.
  bool WaitHeldRead(int timeout_ms) {
    char c = 0;
    return ReadAll(status_.r, &c, 1, timeout_ms) && c == 'R';
  }

  // Answers the held READs, and all later ones.  Idempotent.
  void Release() {
    if (pid_ > 0 && ctl_.w >= 0) (void)!write(ctl_.w, "r", 1);
  }

 private:
  pid_t pid_ = -1;
  std::string dir_;
  Pipe ctl_, status_;
};

// Kills and reaps a child at the end of a test, after releasing whatever it
// may be stuck on.
class ChildGuard {
 public:
  ChildGuard(pid_t pid, FuseServer* fuse) : pid_(pid), fuse_(fuse) {}
  ~ChildGuard() {
    if (pid_ <= 0) return;
    if (fuse_) fuse_->Release();
    kill(pid_, SIGKILL);
    int st;
    WaitFor(pid_, &st, (kMaxPinSeconds + 5) * 1000);
  }
  // The child was reaped by the test.
  void Reaped() { pid_ = -1; }

 private:
  pid_t pid_;
  FuseServer* fuse_;
};

class AdversaryTest : public vmtest::SelfSectionTest {};

// ---- finding 2: a pinned mmap_lock stalls nobody else ----------------------

// One user pins a victim's mmap_lock: a read of /proc/VICTIM/mem at a page
// of a FUSE file holds the victim's mmap_read_lock until the READ is
// answered.  The victim's first registration then waits for its own
// mmap_lock (mmu_notifier_get), which is fine; a registration by another
// process, whose registry does not exist yet, must not wait with it (it
// did when a global mutex was held across that wait).
TEST_F(AdversaryTest, PinnedMmapLockStallsNoOtherProcessRegistry) {
  FuseServer fuse;
  std::string err = fuse.Start();
  ASSERT_EQ(err, "");

  Pipe to_v, from_v;
  pid_t v = fork();
  ASSERT_GE(v, 0);
  if (v == 0) {
    int fd = open(fuse.FilePath().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) _exit(10);
    void* p = mmap(nullptr, 4 * 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) _exit(11);
    uint64_t addr = reinterpret_cast<uint64_t>(p);
    if (!WriteAll(from_v.w, &addr, sizeof(addr))) _exit(12);
    char c;
    if (read(to_v.r, &c, 1) != 1) _exit(0);
    int e = RegisterErrno(self_);
    WriteAll(from_v.w, &e, sizeof(e));
    (void)!read(to_v.r, &c, 1);  // until the test is done
    _exit(0);
  }
  ChildGuard vg(v, &fuse);
  uint64_t addr = 0;
  ASSERT_TRUE(ReadAll(from_v.r, &addr, sizeof(addr), 10000)) << "the victim did not map the file";

  // The pin: this read faults the FUSE page in under the victim's
  // mmap_read_lock, without FAULT_FLAG_ALLOW_RETRY, so it keeps the lock.
  pid_t r = fork();
  ASSERT_GE(r, 0);
  if (r == 0) {
    std::string mem = "/proc/" + std::to_string(v) + "/mem";
    int fd = open(mem.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) _exit(20);
    char b[16];
    _exit(pread(fd, b, sizeof(b), static_cast<off_t>(addr)) == sizeof(b) ? 0 : 21);
  }
  ChildGuard rg(r, &fuse);
  ASSERT_TRUE(fuse.WaitHeldRead(10000)) << "the read of the victim's memory never reached the server";

  // The victim registers: it waits for its own mmap_lock (for writing).
  ASSERT_TRUE(WriteAll(to_v.w, "g", 1));
  EXPECT_TRUE(WaitState(v, 'D', 10000))
      << "the victim's first registration does not wait for its pinned mmap_lock";

  // Meanwhile another process registers its first section.
  const auto t0 = Clock::now();
  pid_t b = fork();
  ASSERT_GE(b, 0);
  if (b == 0) _exit(RegisterErrno(self_));
  ChildGuard bg(b, &fuse);
  int st = 0;
  const bool done = WaitFor(b, &st, 5000);
  const int64_t ms = MsSince(t0);
  EXPECT_TRUE(done) << "another process's REGISTER waited " << ms
                    << " ms for the victim's pinned mmap_lock";
  if (done) {
    bg.Reaped();
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
        << "another process's REGISTER failed: status " << st;
  }
  int verr = -1;
  EXPECT_FALSE(ReadAll(from_v.r, &verr, sizeof(verr), 0))
      << "the victim's registration did not wait: the pin did not hold";

  // Unpinned: the victim's registration completes, the reader reads zeros.
  fuse.Release();
  ASSERT_TRUE(ReadAll(from_v.r, &verr, sizeof(verr), 15000))
      << "the victim's registration did not finish after the pin went";
  EXPECT_EQ(verr, 0);
  ASSERT_TRUE(WaitFor(r, &st, 15000));
  rg.Reaped();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "the reader: status " << st;
  WriteAll(to_v.w, "x", 1);
  ASSERT_TRUE(WaitFor(v, &st, 10000));
  vg.Reaped();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "the victim: status " << st;
}

// ---- finding 7: the OOM reaper's pass over a process with sections ---------

// The OOM reaper frees a killed process's memory while it cannot exit yet,
// through __oom_reap_task_mm(), whose MMU notifier invalidations may not
// sleep; a notifier that refuses one (-EAGAIN) makes the whole pass fail
// ("oom_reaper: unable to reap").  process_mrelease(2) runs that same pass,
// on demand and for any user, on a process with SIGKILL pending, and fails
// with EAGAIN exactly when the reaper would.  (A memcg OOM kill would dump
// a stack trace into the kernel log, which the rig rightly fails, and its
// victim usually exits before the reaper's 2 s delay, when the module's
// ->release has already dropped its registry.)  The victim here cannot
// exit: it is stuck in its own fault on a FUSE page whose READ the server
// has read and holds.
TEST_F(AdversaryTest, ReapingAKilledProcessWithSectionsSucceeds) {
  FuseServer fuse;
  std::string err = fuse.Start();
  ASSERT_EQ(err, "");
  const sframe::Stats base = dev().stats();

  Pipe from_v;
  pid_t v = fork();
  ASSERT_GE(v, 0);
  if (v == 0) {
    // A registered section (the program's own: file-backed text) and a
    // supplied one (for anonymous executable text).
    if (RegisterErrno(self_) != 0) _exit(30);
    vmtest::SyntheticSections syn(1);
    try {
      sframe::Device d(vmtest::DevicePath());
      d.supply_section(0, reinterpret_cast<const void*>(syn.section(0)), syn.section_len(),
                       syn.section(0), syn.text(0), syn.chunk());
    } catch (const sframe::Error&) {
      _exit(31);
    }
    int fd = open(fuse.FilePath().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) _exit(32);
    void* p = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) _exit(33);
    uint64_t text = syn.text(0);
    WriteAll(from_v.w, &text, sizeof(text));
    // Stuck here until the server answers.
    volatile const char* q = static_cast<const char*>(p);
    _exit(*q == 0 ? 0 : 34);
  }
  ChildGuard vg(v, &fuse);
  uint64_t synthetic_text = 0;
  ASSERT_TRUE(ReadAll(from_v.r, &synthetic_text, sizeof(synthetic_text), 10000))
      << "the victim failed to set up";
  ASSERT_TRUE(fuse.WaitHeldRead(10000)) << "the victim's fault never reached the server";
  {
    auto entries = dev().list_sections(v);
    size_t explicit_entries = 0;
    for (const auto& e : entries) {
      if (e.source == Source::kRegistered || e.source == Source::kSupplied) explicit_entries++;
    }
    EXPECT_EQ(explicit_entries, 2u) << "a registered and a supplied section";
  }

  int pidfd = static_cast<int>(syscall(__NR_pidfd_open, v, 0));
  ASSERT_GE(pidfd, 0) << std::strerror(errno);
  ASSERT_EQ(kill(v, SIGKILL), 0);
  // From the interruptible wait for the READ to the uninterruptible one.
  EXPECT_TRUE(WaitState(v, 'D', 5000)) << "the killed victim must still hold its address space";
  int rc = static_cast<int>(syscall(__NR_process_mrelease, pidfd, 0));
  const int merr = rc == 0 ? 0 : errno;
  EXPECT_EQ(merr, 0) << "the reaper's pass failed: " << std::strerror(merr)
                     << " (EAGAIN: an MMU notifier refused a non-blockable invalidation)";
  close(pidfd);
  // The reaped text is described no more (the entries were marked dead;
  // a listing erases them under the lock).
  try {
    for (const auto& e : dev().list_sections(v)) {
      EXPECT_FALSE(e.text_start <= self_.text_start && self_.text_start < e.text_start + e.text_len)
          << "the registered section survived the reaping of its text";
      EXPECT_FALSE(e.text_start <= synthetic_text && synthetic_text < e.text_start + e.text_len)
          << "the supplied section survived the reaping of its text";
    }
  } catch (const sframe::Error& e) {
    ADD_FAILURE() << e.what();
  }

  fuse.Release();
  int st = 0;
  ASSERT_TRUE(WaitFor(v, &st, 15000)) << "the killed victim did not exit";
  vg.Reaped();
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "status " << st;

  // Everything it held is gone: the registry, its sections, the copy.
  sframe::Stats now;
  const auto t0 = Clock::now();
  do {
    now = dev().stats();
    if (now.sections == base.sections && now.processes == base.processes &&
        now.supplied_bytes == base.supplied_bytes &&
        now.user_supplied_bytes == base.user_supplied_bytes)
      break;
    usleep(20000);
  } while (MsSince(t0) < 5000);
  EXPECT_EQ(now.sections, base.sections);
  EXPECT_EQ(now.processes, base.processes);
  EXPECT_EQ(now.supplied_bytes, base.supplied_bytes);
  EXPECT_EQ(now.user_supplied_bytes, base.user_supplied_bytes);
}

// ---- finding 3: supplied bytes per user ------------------------------------

// Fork()ed copies of the caller that wait (targets of SUPPLY: the same
// program, so the same synthetic text at the same addresses); killed on
// destruction.
class Targets {
 public:
  explicit Targets(size_t n) {
    for (size_t i = 0; i < n; i++) {
      pid_t pid = fork();
      if (pid == 0) {
        close(go_.w);
        char c;
        (void)!read(go_.r, &c, 1);
        _exit(0);
      }
      if (pid > 0) pids_.push_back(pid);
    }
  }
  ~Targets() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  }
  size_t size() const { return pids_.size(); }
  pid_t pid(size_t i) const { return pids_[i]; }

 private:
  Pipe go_;
  std::vector<pid_t> pids_;
};

// At most this many sections per target, so no per-process bound refuses.
constexpr size_t kPerTarget = 3;

struct SupplyRun {
  int accepted = 0;
  int last_err = 0;  // why the last one was refused
  uint64_t user_bytes_before = 0;
  uint64_t user_bytes = 0;  // after
  uint64_t limit = 0;
};

size_t TargetsFor(size_t attempts) { return (attempts + kPerTarget - 1) / kPerTarget; }

// Supplies sections of len bytes each (syn's, zero-padded; trailing bytes
// are allowed) to the targets t (made after syn, kPerTarget each) until one
// is refused or `attempts` were made.  Run by the user whose bound is
// tested; the copies stay held as long as the targets live.
SupplyRun ExhaustUserBound(const vmtest::SyntheticSections& syn, const Targets& t, size_t len,
                           size_t attempts) {
  SupplyRun run;
  sframe::Device d(vmtest::DevicePath());
  const sframe::Stats before = d.stats();
  run.user_bytes_before = before.user_supplied_bytes;
  run.limit = before.user_supplied_limit;
  std::vector<uint8_t> buf(len, 0);
  for (size_t i = 0; i < attempts && i / kPerTarget < t.size(); i++) {
    std::memcpy(buf.data(), reinterpret_cast<const void*>(syn.section(i)), syn.section_len());
    int e = sframe::errno_of([&] {
      d.supply_section(t.pid(i / kPerTarget), buf.data(), len, syn.section(i), syn.text(i),
                       syn.chunk());
    });
    if (e) {
      run.last_err = e;
      break;
    }
    run.accepted++;
  }
  run.user_bytes = d.stats().user_supplied_bytes;
  return run;
}

// Becomes uid (from root), still ptrace-able by its own children's
// supplier: a change of credentials makes a process non-dumpable, and its
// fork children with it.
bool DropTo(uid_t uid) {
  return setgroups(0, nullptr) == 0 && setresgid(uid, uid, uid) == 0 &&
         setresuid(uid, uid, uid) == 0 && prctl(PR_SET_DUMPABLE, 1) == 0;
}

// One user fills its bound: EDQUOT, and the stats show its bytes and its
// bound.  As root, a second user (uid 65533) can still supply meanwhile,
// and the bound is lowered to keep the copies small; as uid 65534 the
// module's own bound (128 MiB by default) is filled with 16 MiB copies.
TEST_F(AdversaryTest, OneUserFillingItsSupplyBoundLeavesOthersTheirs) {
  const sframe::Stats base = dev().stats();
  if (geteuid() != 0) {
    ASSERT_NE(base.user_supplied_limit, UINT64_MAX) << "no per-user bound for uid " << getuid();
    ASSERT_LE(base.user_supplied_limit, uint64_t{SFRAME_SUPPLY_MAX_PER_USER});
    ASSERT_LE(base.user_supplied_bytes, base.user_supplied_limit);
    const size_t len = 16u << 20;
    const uint64_t room = base.user_supplied_limit - base.user_supplied_bytes;
    ASSERT_LE(base.supplied_bytes + room + len, uint64_t{SFRAME_SUPPLY_MAX_TOTAL})
        << "the global bound would refuse first";
    const size_t attempts = static_cast<size_t>(room / len) + 2;
    vmtest::SyntheticSections syn(attempts);
    std::optional<Targets> t(std::in_place, TargetsFor(attempts));
    SupplyRun run = ExhaustUserBound(syn, *t, len, attempts);
    t.reset();  // the copies go with the targets
    EXPECT_EQ(run.last_err, EDQUOT);
    EXPECT_EQ(static_cast<uint64_t>(run.accepted), room / len);
    EXPECT_EQ(run.user_bytes, run.user_bytes_before + uint64_t(run.accepted) * len);
    EXPECT_LE(run.user_bytes, run.limit);
  } else {
    EXPECT_EQ(base.user_supplied_limit, UINT64_MAX) << "root (CAP_IPC_LOCK) is exempt";
    vmtest::ScopedModuleParam bound("supply_max_user_kb", "8");
    ASSERT_TRUE(bound.ok());
    const size_t len = 1024;
    Pipe from_c, to_c;
    pid_t c = fork();
    ASSERT_GE(c, 0);
    if (c == 0) {
      if (!DropTo(65534)) _exit(40);
      {
        vmtest::SyntheticSections syn(10);
        Targets t(TargetsFor(10));
        SupplyRun run = ExhaustUserBound(syn, t, len, 10);
        WriteAll(from_c.w, &run, sizeof(run));
        // Holds its copies (its targets live) until the other user is done.
        char ch;
        (void)!read(to_c.r, &ch, 1);
      }
      _exit(0);
    }
    ChildGuard cg(c, nullptr);
    SupplyRun run;
    ASSERT_TRUE(ReadAll(from_c.r, &run, sizeof(run), 60000)) << "uid 65534 did not report";
    EXPECT_EQ(run.limit, 8192u);
    EXPECT_EQ(run.user_bytes_before, 0u);
    EXPECT_EQ(run.accepted, 8);
    EXPECT_EQ(run.last_err, EDQUOT);
    EXPECT_EQ(run.user_bytes, 8192u);
    EXPECT_EQ(dev().stats().supplied_bytes, base.supplied_bytes + 8192);

    // Another user, meanwhile.
    Pipe from_d;
    pid_t d = fork();
    ASSERT_GE(d, 0);
    if (d == 0) {
      if (!DropTo(65533)) _exit(40);
      {
        vmtest::SyntheticSections syn(1);
        Targets t(1);
        SupplyRun other = ExhaustUserBound(syn, t, len, 1);
        WriteAll(from_d.w, &other, sizeof(other));
      }
      _exit(0);
    }
    ChildGuard dg(d, nullptr);
    SupplyRun other;
    ASSERT_TRUE(ReadAll(from_d.r, &other, sizeof(other), 60000)) << "uid 65533 did not report";
    EXPECT_EQ(other.last_err, 0) << "uid 65533 refused: " << std::strerror(other.last_err);
    EXPECT_EQ(other.accepted, 1);
    EXPECT_EQ(other.user_bytes, len) << "its own bytes only";
    int st = 0;
    ASSERT_TRUE(WaitFor(d, &st, 10000));
    dg.Reaped();
    WriteAll(to_c.w, "x", 1);
    ASSERT_TRUE(WaitFor(c, &st, 10000));
    cg.Reaped();
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "uid 65534's process: " << st;
  }
  // Everything returns to where it was once the targets are gone.
  sframe::Stats now;
  const auto t0 = Clock::now();
  do {
    now = dev().stats();
    if (now.supplied_bytes == base.supplied_bytes &&
        now.user_supplied_bytes == base.user_supplied_bytes)
      break;
    usleep(20000);
  } while (MsSince(t0) < 10000);
  EXPECT_EQ(now.supplied_bytes, base.supplied_bytes);
  EXPECT_EQ(now.user_supplied_bytes, base.user_supplied_bytes);
}

// Issue 27, point 5: per-user bounds keyed by kuid alone are multiplied by
// a user namespace.  A user given subordinate uids (newuidmap, which root
// runs for it: here root writes the maps itself) acts under as many kuids
// as it was given, each with a bound of its own, and together they could
// take the global total from everyone.  The module charges a caller in a
// namespace made by another user than root to that user (the namespace's
// owner), so its subordinate uids share its one bound.  On 227df5d's
// module each of kSubUids workers got the whole bound (the test's output
// is quoted in docs/benchmarks.md, "Security fixes of issue 27").
TEST_F(AdversaryTest, SubordinateUidsOfOneUserShareItsSupplyBound) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "root maps the namespace's uids, as newuidmap does for a user; the "
                    "workers run as uid 65534's subordinate uids in the root run";
  }
  constexpr int kSubUids = 4;
  constexpr uint32_t kFirstKuid = 300000;
  vmtest::ScopedModuleParam bound("supply_max_user_kb", "8");
  ASSERT_TRUE(bound.ok());
  const size_t len = 1024;
  Pipe ready, mapped, result;
  const pid_t u = fork();
  ASSERT_GE(u, 0);
  if (u == 0) {
    // uid 65534 makes a user namespace and waits for its maps.
    char c;
    if (!DropTo(65534) || unshare(CLONE_NEWUSER) != 0) _exit(40);
    if (write(ready.w, "u", 1) != 1 || read(mapped.r, &c, 1) != 1) _exit(41);
    // One worker per subordinate uid, all holding their copies at once.
    Pipe hold;
    std::vector<pid_t> workers;
    std::vector<int> reports;
    for (int i = 1; i <= kSubUids; i++) {
      int p[2];
      if (pipe2(p, O_CLOEXEC) != 0) _exit(42);
      const pid_t w = fork();
      if (w == 0) {
        close(p[0]);
        close(hold.w);
        if (setresgid(i, i, i) != 0 || setresuid(i, i, i) != 0 || prctl(PR_SET_DUMPABLE, 1) != 0)
          _exit(43);
        {
          vmtest::SyntheticSections syn(10);
          Targets t(TargetsFor(10));
          SupplyRun run = ExhaustUserBound(syn, t, len, 10);
          WriteAll(p[1], &run, sizeof(run));
          char h;
          (void)!read(hold.r, &h, 1);  // until every worker has reported
        }
        _exit(0);
      }
      close(p[1]);
      if (w < 0) _exit(44);
      workers.push_back(w);
      reports.push_back(p[0]);
    }
    int accepted = 0;
    for (int fd : reports) {
      SupplyRun run;
      if (!ReadAll(fd, &run, sizeof(run), 60000)) _exit(45);
      accepted += run.accepted;
    }
    WriteAll(result.w, &accepted, sizeof(accepted));
    close(hold.w);
    for (pid_t w : workers) waitpid(w, nullptr, 0);
    _exit(0);
  }
  ChildGuard ug(u, nullptr);
  char c;
  ASSERT_TRUE(ReadAll(ready.r, &c, 1, 10000)) << "uid 65534 could not make a user namespace";
  const std::string map = "0 " + std::to_string(kFirstKuid) + " 16\n";
  ASSERT_TRUE(WriteFile("/proc/" + std::to_string(u) + "/uid_map", map));
  ASSERT_TRUE(WriteFile("/proc/" + std::to_string(u) + "/gid_map", map));
  WriteAll(mapped.w, "m", 1);
  int accepted = -1;
  ASSERT_TRUE(ReadAll(result.r, &accepted, sizeof(accepted), 120000)) << "the workers did not report";
  int st = 0;
  ASSERT_TRUE(WaitFor(u, &st, 20000));
  ug.Reaped();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "uid 65534's process: " << st;
  std::printf("%d subordinate uids of uid 65534 held %d copies of %zu bytes at once "
              "(bound 8 KiB)\n",
              kSubUids, accepted, len);
  // One bound for all of them: the owner's.
  EXPECT_EQ(static_cast<uint64_t>(accepted) * len, 8192u);
}

// A fork child shares its parent's kernel copies: it gets the entries, but
// neither the user's nor the global count moves.
TEST_F(AdversaryTest, ForkChildSharesSuppliedCopiesWithoutRecharging) {
  const sframe::Stats base = dev().stats();
  pid_t p = fork();
  ASSERT_GE(p, 0);
  if (p == 0) {
    int rc = 0;
    try {
      sframe::Device d(vmtest::DevicePath());
      vmtest::SyntheticSections syn(1);
      std::vector<uint8_t> buf(4096, 0);
      std::memcpy(buf.data(), reinterpret_cast<const void*>(syn.section(0)), syn.section_len());
      d.supply_section(0, buf.data(), buf.size(), syn.section(0), syn.text(0), syn.chunk());
      const sframe::Stats s1 = d.stats();
      if (s1.user_supplied_bytes != base.user_supplied_bytes + 4096) rc |= 1;
      if (s1.supplied_bytes != base.supplied_bytes + 4096) rc |= 1;
      pid_t c = fork();
      if (c == 0) {
        int crc = 0;
        bool inherited = false;
        for (const auto& e : d.list_sections(0)) {
          if (e.text_start == syn.text(0) && e.source == Source::kSupplied) inherited = true;
        }
        if (!inherited) crc |= 2;
        const sframe::Stats s2 = d.stats();
        if (s2.supplied_bytes != s1.supplied_bytes) crc |= 4;
        if (s2.user_supplied_bytes != s1.user_supplied_bytes) crc |= 8;
        _exit(crc);
      }
      int st = 0;
      if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st)) {
        rc |= 16;
      } else {
        rc |= WEXITSTATUS(st);
      }
      const sframe::Stats s3 = d.stats();
      if (s3.supplied_bytes != s1.supplied_bytes ||
          s3.user_supplied_bytes != s1.user_supplied_bytes)
        rc |= 32;
    } catch (const sframe::Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      rc |= 64;
    }
    _exit(rc);
  }
  int st = 0;
  ASSERT_EQ(waitpid(p, &st, 0), p);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0)
      << "1: the supply was not counted once; 2: the child has no supplied entry; 4: the "
         "child's inheritance moved the global count; 8: ...the user's; 16: the child "
         "crashed; 32: the child's exit moved a count; 64: a request failed";
  const sframe::Stats now = dev().stats();
  EXPECT_EQ(now.supplied_bytes, base.supplied_bytes);
  EXPECT_EQ(now.user_supplied_bytes, base.user_supplied_bytes);
}

// ---- finding 9b: a fork child inherits only what it maps --------------------

// Text (or a registered section's memory) marked MADV_DONTFORK is not in the
// child: its entries must not be either.
TEST_F(AdversaryTest, ForkChildInheritsOnlyWhatItMaps) {
  pid_t p = fork();
  ASSERT_GE(p, 0);
  if (p == 0) {
    int rc = 0;
    try {
      sframe::Device d(vmtest::DevicePath());
      vmtest::SyntheticSections kept(1), no_text(1), no_section(1);
      for (auto* s : {&kept, &no_text, &no_section})
        d.register_section(s->section(0), s->section_len(), s->text(0), s->chunk());
      if (madvise(no_text.text_region().data(), no_text.text_region().size(), MADV_DONTFORK))
        _exit(100);
      const long page = sysconf(_SC_PAGESIZE);
      if (madvise(reinterpret_cast<void*>(no_section.section(0) & ~uint64_t(page - 1)),
                  static_cast<size_t>(page), MADV_DONTFORK))
        _exit(101);
      pid_t c = fork();
      if (c == 0) {
        int crc = 0;
        for (const auto& e : d.list_sections(0)) {
          if (e.source != Source::kRegistered) continue;
          if (e.text_start == kept.text(0)) crc |= 1;
          if (e.text_start == no_text.text(0)) crc |= 2;
          if (e.text_start == no_section.text(0)) crc |= 4;
        }
        _exit(crc);
      }
      int st = 0;
      if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st)) _exit(102);
      rc = WEXITSTATUS(st);
    } catch (const sframe::Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      _exit(103);
    }
    _exit(rc);
  }
  int st = 0;
  ASSERT_EQ(waitpid(p, &st, 0), p);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 1)
      << "1: the mapped entry inherited (wanted); 2: an entry for text the child does not "
         "map; 4: an entry whose section the child does not map; 100+: setup failed";
}

}  // namespace

// ---- finding 9a: a discovery refused with EEXIST is remembered -------------

// Never called: a function of the program's text that the test registers a
// one-function section for, so that discovery's section for the whole text
// overlaps it and is refused (EEXIST).
VMTEST_NOIPA static int disc_anchor(int x) {
  VMTEST_BARRIER();
  return x * 3 + 1;
}

namespace {

// The syscr of /proc/self/io: read calls made, the kernel's file reads for
// discovery (kernel_read()) included.
uint64_t ReadSyscalls(int fd) {
  char buf[512];
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char* p = std::strstr(buf, "syscr:");
  return p ? std::strtoull(p + 6, nullptr, 10) : 0;
}

struct DiscoveryReport {
  int setup = 0;           // nonzero: what failed
  uint64_t reads = 0;      // syscr across the measured walks
  uint32_t nones = 0;      // "none" entries in the program's text
  uint32_t walks = 0;
};

TEST_F(AdversaryTest, RefusedDiscoveryIsRememberedNotRetried) {
  std::optional<vmtest::ScopedModuleParam> on;
  if (geteuid() == 0) {
    on.emplace("discovery", "Y");
    ASSERT_TRUE(on->ok());
  }
  ASSERT_TRUE(vmtest::DiscoveryEnabled()) << "the module's discovery is off";
  Pipe from_c;
  pid_t c = fork();
  ASSERT_GE(c, 0);
  if (c == 0) {
    DiscoveryReport rep;
    try {
      sframe::Device d(vmtest::DevicePath());
      vmtest::SyntheticSections syn(1);
      const uint64_t f = reinterpret_cast<uint64_t>(&disc_anchor);
      auto built = syn.Build(vmtest::OneFunction(f, 16), f);
      d.register_section(built.addr, built.len, f, 16);
      // The first walks discover: the program's .sframe is refused
      // (EEXIST), and the outcome recorded for each side of disc_anchor.
      for (int i = 0; i < 3; i++) d.unwind_self(8, SFRAME_UNWIND_F_SFRAME);
      int io = open("/proc/self/io", O_RDONLY | O_CLOEXEC);
      if (io < 0) {
        rep.setup = 2;
      } else {
        const uint64_t before = ReadSyscalls(io);
        for (int i = 0; i < 20; i++) {
          d.unwind_self(8, SFRAME_UNWIND_F_SFRAME);
          rep.walks++;
        }
        // Minus the pread that took `before`.
        rep.reads = ReadSyscalls(io) - before - 1;
        close(io);
      }
      for (const auto& e : d.list_sections(0)) {
        if (e.source == Source::kNone && e.text_start < self_.text_start + self_.text_len &&
            e.text_start + e.text_len > self_.text_start)
          rep.nones++;
      }
    } catch (const sframe::Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      rep.setup = 1;
    }
    WriteAll(from_c.w, &rep, sizeof(rep));
    _exit(0);
  }
  ChildGuard cg(c, nullptr);
  DiscoveryReport rep;
  ASSERT_TRUE(ReadAll(from_c.r, &rep, sizeof(rep), 30000));
  ASSERT_EQ(rep.setup, 0) << "1: a request failed, 2: /proc/self/io";
  EXPECT_EQ(rep.walks, 20u);
  EXPECT_EQ(rep.reads, 0u) << "the ELF file was read again by later walks";
  EXPECT_GE(rep.nones, 1u) << "no \"none\" entry records the refused discovery";
}

}  // namespace
