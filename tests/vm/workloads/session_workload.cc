// session_workload: the target processes of session_vmtest and
// profile_vmbench.  Built with -O2 -fomit-frame-pointer -Wa,--gsframe: only
// SFrame can walk it, and it registers its own .sframe at start.
//
//   session_workload spin SECONDS         main -> wl_spin_a -> wl_spin_b ->
//                                         wl_spin_c -> wl_spin_leaf (spins)
//   session_workload read SECONDS BYTES   main -> wl_read_a -> wl_read_b ->
//                                         wl_read_syscall: read(/dev/zero,
//                                         BYTES) made with inline asm
//   session_workload threads N SECONDS    N threads: wl_thread_main ->
//                                         wl_thread_b -> wl_thread_leaf
//   session_workload exec MS SECONDS      main -> wl_exec_a -> wl_exec_leaf
//                                         spins MS ms, then execs itself as
//                                         "spin SECONDS"
//   session_workload fpspin SECONDS       main -> wl_fp_mid (frame pointer, no
//                                         .sframe) -> wl_spin_a -> ... spins
//   session_workload work N [wait]        main -> wl_spin_a ... a fixed
//                                         amount of work (N rounds); prints
//                                         its time; with `wait`, starts at
//                                         a byte on stdin
//   session_workload forkspin SECONDS     forks; the child spins as `spin`
//                                         does (main -> wl_spin_a -> ...)
//                                         with the module's copy of the
//                                         parent's registration (or, with
//                                         nothing registered, discovery),
//                                         and dies with its parent; the
//                                         parent waits
//   session_workload threadchurn N SECONDS [ROUNDS]
//                                         rounds of N threads, each spinning
//                                         ROUNDS (default 200000) rounds in
//                                         wl_churn_main -> wl_churn_b ->
//                                         wl_spin_leaf and exiting
//
// SECONDS 0 means until killed.  It prints (flushed):
//   text START END      its executable text (every image prints it)
//   tid TID             each spinning thread (threads)
//   child PID           the spinning child (forkspin)
//   ready               registered and about to start
//   elapsed_ns N        (work) the time of the work
// A session's complete user chain of the spin mode is
//   wl_spin_leaf, wl_spin_c, wl_spin_b, wl_spin_a, main, <libc>
// and the walk stops in libc (NO_COVERAGE): libc has no .sframe.
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sframe_client/device.h"
#include "sframe_client/error.h"
#include "sframe_client/objects.h"

#define WL_NOIPA extern "C" __attribute__((noipa))
#define WL_BARRIER() asm volatile("" ::: "memory")

static volatile sig_atomic_t g_stop = 0;
static volatile uint64_t g_sink = 0;
static sframe::Device* g_dev = nullptr;
static std::vector<sframe::Registration>* g_regs = nullptr;

static void on_alarm(int) { g_stop = 1; }

// Stop after ms milliseconds (0: never).
static void stop_after_ms(long ms) {
  if (ms <= 0) return;
  struct sigaction sa {};
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, nullptr);
  itimerval it{};
  it.it_value.tv_sec = ms / 1000;
  it.it_value.tv_usec = (ms % 1000) * 1000;
  setitimer(ITIMER_REAL, &it, nullptr);
}

// ---- dlspin: the chain crosses a dlopen()ed library -------------------------

WL_NOIPA uint64_t wl_dl_leaf(uint64_t x) {
  while (!g_stop) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    asm volatile("" : "+r"(x));
  }
  return x;
}

// libvmtest_wldl.so next to this program (or $SFRAME_WORKLOAD_DL_PATH):
// wl_dl_spin calls back into wl_dl_leaf.  Returns -1 when the library
// cannot be loaded.
WL_NOIPA long wl_dlspin_a() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return -1;
  self[n] = 0;
  std::string path(self);
  path = path.substr(0, path.rfind('/') + 1) + "libvmtest_wldl.so";
  // Another copy of the library (file_store_vmtest: one without .sframe).
  if (const char* other = getenv("SFRAME_WORKLOAD_DL_PATH")) path = other;
  void* h = dlopen(path.c_str(), RTLD_NOW);
  if (!h) return -1;
  auto spin = reinterpret_cast<uint64_t (*)(uint64_t (*)(uint64_t), uint64_t)>(
      dlsym(h, "wl_dl_spin"));
  if (!spin) return -1;
  g_sink = spin(wl_dl_leaf, g_sink);
  WL_BARRIER();
  return 0;
}

// ---- spin -----------------------------------------------------------------

WL_NOIPA uint64_t wl_spin_leaf(uint64_t x, long limit) {
  // limit < 0: until g_stop; else exactly limit rounds.
  for (long i = 0; limit < 0 ? !g_stop : i < limit; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    asm volatile("" : "+r"(x));
  }
  return x;
}
WL_NOIPA uint64_t wl_spin_c(uint64_t x, long limit) {
  uint64_t r = wl_spin_leaf(x, limit);
  WL_BARRIER();
  return r + 1;
}
WL_NOIPA uint64_t wl_spin_b(uint64_t x, long limit) {
  uint64_t r = wl_spin_c(x, limit);
  WL_BARRIER();
  return r + 2;
}
WL_NOIPA uint64_t wl_spin_a(uint64_t x, long limit) {
  uint64_t r = wl_spin_b(x, limit);
  WL_BARRIER();
  return r + 3;
}

extern "C" uint64_t wl_fp_mid(uint64_t x);  // session_workload_fp.cc

// ---- read -----------------------------------------------------------------

// read(fd, buf, len) without glibc's wrapper (which has no .sframe): the user
// PC of a sample in the kernel is right after this syscall instruction.
WL_NOIPA long wl_read_syscall(int fd, void* buf, size_t len) {
  long ret;
  asm volatile("syscall"
               : "=a"(ret)
               : "0"(static_cast<long>(SYS_read)), "D"(static_cast<long>(fd)), "S"(buf), "d"(len)
               : "rcx", "r11", "memory");
  return ret;
}
WL_NOIPA long wl_read_b(int fd, void* buf, size_t len) {
  long total = 0;
  while (!g_stop) {
    long n = wl_read_syscall(fd, buf, len);
    if (n < 0 && n != -EINTR) return n;
    if (n > 0) total += n;
  }
  WL_BARRIER();
  return total;
}
WL_NOIPA long wl_read_a(int fd, void* buf, size_t len) {
  long r = wl_read_b(fd, buf, len);
  WL_BARRIER();
  return r;
}

// ---- threads ----------------------------------------------------------------

static pthread_mutex_t g_print = PTHREAD_MUTEX_INITIALIZER;

WL_NOIPA uint64_t wl_thread_leaf(uint64_t x) {
  uint64_t r = wl_spin_leaf(x, -1);
  WL_BARRIER();  // no tail call: this frame stays in the chain
  return r + 1;
}
WL_NOIPA uint64_t wl_thread_b(uint64_t x) {
  uint64_t r = wl_thread_leaf(x);
  WL_BARRIER();
  return r + 1;
}
WL_NOIPA void* wl_thread_main(void* arg) {
  pthread_mutex_lock(&g_print);
  std::printf("tid %ld\n", static_cast<long>(syscall(SYS_gettid)));
  std::fflush(stdout);
  pthread_mutex_unlock(&g_print);
  g_sink = wl_thread_b(reinterpret_cast<uintptr_t>(arg));
  WL_BARRIER();
  return nullptr;
}

// ---- threadchurn: threads that come and go ------------------------------------

static long g_churn_rounds = 200000;

WL_NOIPA uint64_t wl_churn_b(uint64_t x) {
  uint64_t r = wl_spin_leaf(x, g_churn_rounds);
  WL_BARRIER();
  return r + 1;
}
WL_NOIPA void* wl_churn_main(void* arg) {
  g_sink = wl_churn_b(reinterpret_cast<uintptr_t>(arg));
  WL_BARRIER();
  return nullptr;
}

// ---- exec -------------------------------------------------------------------

static char g_exe[4096];
static char g_seconds_after[32];

WL_NOIPA int wl_exec_leaf(uint64_t x) {
  g_sink = wl_spin_leaf(x, -1);
  char spin[] = "spin";
  char* argv[] = {g_exe, spin, g_seconds_after, nullptr};
  char* envp[] = {nullptr};
  execve(g_exe, argv, envp);
  WL_BARRIER();
  return 1;
}
WL_NOIPA int wl_exec_a(uint64_t x) {
  int r = wl_exec_leaf(x);
  WL_BARRIER();
  return r;
}

// ---- setup ------------------------------------------------------------------

static const char* device_path() {
  const char* env = std::getenv("SFRAME_VM_DEVICE");
  return (env && *env) ? env : SFRAME_UNWIND_DEVICE;
}

// Registers every loaded .sframe (kept for the life of the process) and
// prints the text range.  Returns 0 or an exit status.
// With SFRAME_WORKLOAD_NO_REGISTER=1 it registers nothing: the module's
// discovery must find its .sframe.
static int setup() {
  try {
    const char* no_register = std::getenv("SFRAME_WORKLOAD_NO_REGISTER");
    if (!no_register || std::strcmp(no_register, "1") != 0) {
      g_dev = new sframe::Device(device_path());
      g_regs = new std::vector<sframe::Registration>(sframe::register_loaded_objects(*g_dev));
    }
  } catch (const sframe::Error& e) {
    std::fprintf(stderr, "session_workload: %s\n", e.what());
    return 3;
  }
  auto self = sframe::loaded_object_containing(reinterpret_cast<void*>(&wl_spin_leaf));
  if (!self || !self->has_sframe()) {
    std::fprintf(stderr, "session_workload: no .sframe of its own\n");
    return 3;
  }
  std::printf("text %" PRIx64 " %" PRIx64 "\n", self->text_start, self->text_start + self->text_len);
  return 0;
}

static void ready() {
  std::printf("ready\n");
  std::fflush(stdout);
}

static uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: session_workload spin SECONDS | read SECONDS BYTES | threads N SECONDS"
                 " | exec MS SECONDS | work N | forkspin SECONDS"
                 " | threadchurn N SECONDS [ROUNDS]\n");
    return 2;
  }
  const char* mode = argv[1];
  if (int rc = setup()) return rc;
  const long a2 = argc > 2 ? std::strtol(argv[2], nullptr, 10) : 0;
  const long a3 = argc > 3 ? std::strtol(argv[3], nullptr, 10) : 0;
  if (std::strcmp(mode, "spin") == 0) {
    stop_after_ms(a2 * 1000);
    ready();
    g_sink = wl_spin_a(a2, -1);
  } else if (std::strcmp(mode, "dlspin") == 0) {
    stop_after_ms(a2 * 1000);
    ready();
    if (wl_dlspin_a() != 0) return 5;
  } else if (std::strcmp(mode, "fpspin") == 0) {
    stop_after_ms(a2 * 1000);
    ready();
    g_sink = wl_fp_mid(a2);
  } else if (std::strcmp(mode, "read") == 0) {
    size_t len = a3 > 0 ? static_cast<size_t>(a3) : (4u << 20);
    void* buf = std::malloc(len);
    int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
    if (!buf || fd < 0) return 4;
    std::memset(buf, 1, len);  // fault the pages in before sampling
    stop_after_ms(a2 * 1000);
    ready();
    long r = wl_read_a(fd, buf, len);
    if (r < 0) return 5;
  } else if (std::strcmp(mode, "threads") == 0) {
    std::vector<pthread_t> threads(a2 > 0 ? static_cast<size_t>(a2) : 1);
    stop_after_ms(a3 * 1000);
    for (size_t i = 0; i < threads.size(); i++) {
      if (pthread_create(&threads[i], nullptr, wl_thread_main, reinterpret_cast<void*>(i + 1))) {
        return 4;
      }
    }
    ready();
    for (pthread_t t : threads) pthread_join(t, nullptr);
  } else if (std::strcmp(mode, "exec") == 0) {
    ssize_t n = readlink("/proc/self/exe", g_exe, sizeof(g_exe) - 1);
    if (n <= 0) return 4;
    g_exe[n] = 0;
    std::snprintf(g_seconds_after, sizeof(g_seconds_after), "%ld", a3);
    stop_after_ms(a2);
    ready();
    int r = wl_exec_a(1);  // not a tail call: main keeps its frame
    WL_BARRIER();
    return r;
  } else if (std::strcmp(mode, "forkspin") == 0) {
    const pid_t parent = getpid();
    std::fflush(stdout);  // nothing buffered is printed twice
    pid_t child = fork();
    if (child < 0) return 4;
    if (child == 0) {
      // It must not outlive the parent (which the test kills).
      if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(4);
      stop_after_ms(a2 * 1000);
      g_sink = wl_spin_a(a2, -1);
      WL_BARRIER();
      _exit(0);
    }
    std::printf("child %ld\n", static_cast<long>(child));
    ready();
    int st = 0;
    while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  } else if (std::strcmp(mode, "threadchurn") == 0) {
    const size_t n = a2 > 0 ? static_cast<size_t>(a2) : 1;
    if (argc > 4) g_churn_rounds = std::strtol(argv[4], nullptr, 10);
    std::vector<pthread_t> threads(n);
    stop_after_ms(a3 * 1000);
    ready();
    while (!g_stop) {
      for (size_t i = 0; i < n; i++) {
        if (pthread_create(&threads[i], nullptr, wl_churn_main, reinterpret_cast<void*>(i + 1))) {
          return 4;
        }
      }
      for (pthread_t t : threads) pthread_join(t, nullptr);
    }
  } else if (std::strcmp(mode, "work") == 0) {
    ready();
    if (argc > 3 && std::strcmp(argv[3], "wait") == 0) {
      char c;  // the go: one byte on stdin
      if (read(0, &c, 1) != 1) return 4;
    }
    uint64_t t0 = now_ns();
    g_sink = wl_spin_a(1, a2);
    uint64_t t1 = now_ns();
    std::printf("elapsed_ns %" PRIu64 "\n", t1 - t0);
  } else {
    std::fprintf(stderr, "session_workload: unknown mode %s\n", mode);
    return 2;
  }
  WL_BARRIER();
  std::fflush(stdout);
  return 0;
}
