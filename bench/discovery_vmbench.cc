// discovery_vmbench: what discovery costs, in the VM (root: it switches the
// module parameter `discovery`).  Prints; asserts nothing about time.
//
// Each sample is a fresh fork()ed child (an empty registry, a cold row
// cache) that unwinds its own stack from a 16-deep chain (bench_chain.c,
// .sframe, no frame pointers) several times:
//   discovered  discovery on, nothing registered: the first unwind finds and
//               validates the program's .sframe (and notes that libc has
//               none) on its way;
//   registered  discovery off, the child registers its objects first
//               (register_loaded_objects, timed on its own): the explicit
//               path a program or the LD_AUDIT library takes.
// The first unwind is the first-sample latency; the median of the later
// ones is the steady state.  Children of both kinds alternate, so the
// machine's noise falls on both.
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "sframe_client/device.h"
#include "sframe_client/error.h"
#include "sframe_client/objects.h"

extern "C" {
typedef void (*chain_leaf_fn)(void* arg);
int sframe_chain(int depth, chain_leaf_fn leaf, void* arg);
}

namespace {

constexpr int kDepth = 16;
constexpr int kSteadyUnwinds = 20;
constexpr uint32_t kMaxFrames = 512;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// What one child measured, sent back through a pipe.
struct ChildTimes {
  double register_ns = 0;  // registered only
  double first_ns = 0;
  double steady_ns = 0;    // median of the later unwinds
  uint32_t frames = 0;     // of the first unwind
  uint32_t nr_sframe = 0;
};

struct LeafArg {
  const sframe::Device* dev;
  ChildTimes* t;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void leaf(void* p) {
  auto* a = static_cast<LeafArg*>(p);
  uint64_t t0 = now_ns();
  sframe::UnwindResult r = a->dev->unwind_self(kMaxFrames, SFRAME_UNWIND_F_SFRAME);
  a->t->first_ns = double(now_ns() - t0);
  a->t->frames = static_cast<uint32_t>(r.frames.size());
  a->t->nr_sframe = r.nr_sframe;
  std::vector<double> steady;
  for (int i = 0; i < kSteadyUnwinds; i++) {
    t0 = now_ns();
    a->dev->unwind_self(kMaxFrames, SFRAME_UNWIND_F_SFRAME);
    steady.push_back(double(now_ns() - t0));
  }
  a->t->steady_ns = median(steady);
}

bool set_discovery(bool on) {
  FILE* f = std::fopen("/sys/module/sframe_unwind/parameters/discovery", "w");
  if (!f) return false;
  bool ok = std::fputs(on ? "Y" : "N", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

// One child: registers first if asked, then unwinds.  nullopt-like
// (frames 0) on failure.
ChildTimes run_child(bool do_register) {
  int fds[2];
  ChildTimes t;
  if (pipe(fds) != 0) return t;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    ChildTimes c;
    try {
      sframe::Device dev;
      std::vector<sframe::Registration> regs;
      if (do_register) {
        uint64_t t0 = now_ns();
        regs = sframe::register_loaded_objects(dev);
        c.register_ns = double(now_ns() - t0);
      }
      LeafArg a{&dev, &c};
      sframe_chain(kDepth, leaf, &a);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      _exit(1);
    }
    _exit(write(fds[1], &c, sizeof(c)) == sizeof(c) ? 0 : 1);
  }
  close(fds[1]);
  if (pid > 0 && read(fds[0], &t, sizeof(t)) != sizeof(t)) t = ChildTimes{};
  close(fds[0]);
  int status;
  if (pid > 0) waitpid(pid, &status, 0);
  return t;
}

struct Series {
  std::vector<double> reg, first, steady;
  uint32_t frames = 0, nr_sframe = 0;
  int failed = 0;
  void add(const ChildTimes& t) {
    if (!t.frames) {
      failed++;
      return;
    }
    reg.push_back(t.register_ns);
    first.push_back(t.first_ns);
    steady.push_back(t.steady_ns);
    frames = t.frames;
    nr_sframe = t.nr_sframe;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int children = argc > 1 ? std::atoi(argv[1]) : 200;
  try {
    sframe::Device dev;
    const sframe::Stats before = dev.stats();
    Series discovered, registered;
    for (int i = 0; i < children; i++) {
      if (!set_discovery(true)) {
        std::fprintf(stderr, "cannot set the discovery parameter (root?)\n");
        return 1;
      }
      discovered.add(run_child(false));
      set_discovery(false);
      registered.add(run_child(true));
    }
    set_discovery(true);
    const sframe::Stats after = dev.stats();
    auto self = sframe::loaded_object_containing(reinterpret_cast<void*>(&main));

    std::printf("discovery_vmbench: %d children per kind, chain depth %d, .sframe of the "
                "program %llu bytes\n",
                children, kDepth, self ? (unsigned long long)self->sframe_len : 0ull);
    std::printf("sections discovered during the run: %llu\n",
                (unsigned long long)(after.sections_discovered - before.sections_discovered));
    std::printf("%-11s %8s %8s %14s %12s %12s %8s\n", "kind", "frames", "sframe",
                "register_us", "first_us", "steady_us", "failed");
    for (auto* s : {&discovered, &registered}) {
      const bool reg = s == &registered;
      if (s->first.empty()) {
        std::printf("%-11s no successful child (%d failed)\n",
                    reg ? "registered" : "discovered", s->failed);
        continue;
      }
      std::printf("%-11s %8u %8u %14.1f %12.1f %12.1f %8d\n", reg ? "registered" : "discovered",
                  s->frames, s->nr_sframe, reg ? median(s->reg) / 1000 : 0.0,
                  median(s->first) / 1000, median(s->steady) / 1000, s->failed);
    }
    if (!discovered.first.empty() && !registered.first.empty()) {
      const double d_first = median(discovered.first), r_first = median(registered.first);
      const double r_total = median(registered.reg) + r_first;
      std::printf("first unwind, discovered / registered: %.2f\n", d_first / r_first);
      std::printf("first unwind, discovered / (registration + first unwind): %.2f\n",
                  d_first / r_total);
      std::printf("steady state, discovered / registered: %.2f\n",
                  median(discovered.steady) / median(registered.steady));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "discovery_vmbench: %s\n", e.what());
    set_discovery(true);
    return 1;
  }
  return 0;
}
