// bounds_vmbench: the cost of the decoding bounds' worst cases (issue 10,
// finding 1), next to the typical case.  Runs in the VM as root (it needs
// /dev/sframe_unwind and the row_cache module parameter).  Prints; asserts
// nothing about time.
//
//   UNWIND_SELF, typical: a 16-frame chain of ordinary functions
//     (bench_chain.c, the assembler's .sframe, registered), with the row
//     cache (a profiler's steady state) and without (every frame decoded).
//   UNWIND_SELF, worst under the bounds: the crafted section at
//     SFRAME_MAX_FRES_PER_FDE and 4096 crafted frames with distinct PCs
//     (tests/vm/bounds_attack.h), the row cache emptied before each call by
//     registering the section again: the walk spends SFRAME_WALK_BUDGET.
//   Interrupt-context unwind: a session samples, at 10 kHz, first a child
//     in the typical chain, then a child spinning on the crafted chain;
//     after each, the module parameter irq_walk_max_ns (the longest
//     interrupt-context walk since load) is read, where the module has it.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "bounds_attack.h"
#include "sframe_client/device.h"
#include "sframe_client/error.h"
#include "sframe_client/objects.h"
#include "sframe_client/perf_event.h"
#include "sframe_client/session.h"
#include "sframe_profile/symbolizer.h"

extern "C" {
typedef void (*chain_leaf_fn)(void* arg);
int sframe_chain(int depth, chain_leaf_fn leaf, void* arg);
}

namespace {

constexpr int kTypicalDepth = 16;
constexpr char kIrqParam[] = "/sys/module/sframe_unwind/parameters/irq_walk_max_ns";

struct Times {
  std::vector<double> ns;
  double Median() const {
    std::vector<double> v = ns;
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
  }
  double Worst() const { return ns.empty() ? 0 : *std::max_element(ns.begin(), ns.end()); }
};

bool SetRowCache(bool on) {
  FILE* f = std::fopen("/sys/module/sframe_unwind/parameters/row_cache", "w");
  if (!f) return false;
  bool ok = std::fputs(on ? "Y" : "N", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

// A parameter of the module, or -1 when it has no such parameter.
long long ModuleParam(const std::string& name) {
  std::ifstream in("/sys/module/sframe_unwind/parameters/" + name);
  long long v = -1;
  if (!(in >> v)) return -1;
  return v;
}

// irq_walk_max_ns, or -1 when the module has no such parameter.
long long IrqWalkMaxNs() { return ModuleParam("irq_walk_max_ns"); }

// The interrupt-context walks since ResetIrqWalks(): longest and mean.
struct IrqWalks {
  long long longest_ns = -1;
  long long walks = 0;
  double mean_ns = 0;
};

void ResetIrqWalks() {
  for (const char* p : {"irq_walk_max_ns", "irq_walks", "irq_walk_ns"}) {
    std::ofstream out(std::string("/sys/module/sframe_unwind/parameters/") + p);
    out << 0 << "\n";
  }
}

IrqWalks ReadIrqWalks() {
  IrqWalks w;
  w.longest_ns = IrqWalkMaxNs();
  w.walks = ModuleParam("irq_walks");
  long long total = ModuleParam("irq_walk_ns");
  if (w.walks > 0 && total >= 0) w.mean_ns = double(total) / double(w.walks);
  return w;
}

struct TypicalRun {
  const sframe::Device* dev;
  int iterations;
  Times times;
  sframe::UnwindResult last;
};

void TypicalLeaf(void* arg) {
  auto* r = static_cast<TypicalRun*>(arg);
  for (int i = 0; i < r->iterations; i++) {
    uint64_t t0 = bounds::NowNs();
    r->last = r->dev->unwind_self(256, SFRAME_UNWIND_F_ALL);
    r->times.ns.push_back(double(bounds::NowNs() - t0));
  }
}

volatile uint64_t g_sink;

void SpinLeaf(void* arg) {
  const uint64_t end = bounds::NowNs() + *static_cast<uint64_t*>(arg);
  while (bounds::NowNs() < end) {
    for (int i = 0; i < 100000; i++) g_sink = g_sink + 1;
  }
}

// Samples child pid at 10 kHz for ms, through a session; returns samples.
size_t SampleChild(pid_t pid, int ms) {
  sframe::PerfEventOptions po;
  po.frequency = 10000;
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(pid, po);
  sframe::Session s = sframe::Session::start(sframe::Target::kProcess, pid);
  std::vector<sframe::Record> recs;
  ev.enable();
  const uint64_t end = bounds::NowNs() + uint64_t(ms) * 1000000;
  while (bounds::NowNs() < end) {
    s.poll_read(&recs, 50);
    ev.drain();
  }
  ev.disable();
  while (s.poll_read(&recs, 300) > 0) {
  }
  size_t n = 0;
  for (const auto& r : recs) n += r.is_sample();
  return n;
}

// Forks a child that runs fn for about ms, after telling the parent it is
// ready; returns its pid.
template <typename Fn>
pid_t ForkReady(Fn fn) {
  int p[2];
  if (pipe(p) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    fn(p[1]);
    _exit(0);
  }
  close(p[1]);
  char c;
  if (pid < 0 || read(p[0], &c, 1) != 1) {
    close(p[0]);
    return -1;
  }
  close(p[0]);
  return pid;
}

void Reap(pid_t pid) {
  kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
}

}  // namespace

int main(int argc, char** argv) {
  const int worst_reps = argc > 1 ? std::atoi(argv[1]) : 21;
  try {
    sframe::Device dev;
    auto regs = sframe::register_loaded_objects(dev);
    const bool root = SetRowCache(true);

    // --- UNWIND_SELF, typical -------------------------------------------
    TypicalRun warm{&dev, 1000, {}, {}};
    sframe_chain(kTypicalDepth, TypicalLeaf, &warm);
    TypicalRun cached{&dev, 2000, {}, {}};
    sframe_chain(kTypicalDepth, TypicalLeaf, &cached);
    TypicalRun uncached{&dev, 2000, {}, {}};
    if (root) {
      SetRowCache(false);
      sframe_chain(kTypicalDepth, TypicalLeaf, &uncached);
      SetRowCache(true);
    }

    // --- UNWIND_SELF, worst under the bounds ------------------------------
    bounds::Attack a;
    if (!a.Build()) throw std::runtime_error("cannot map the crafted text");
    Times worst;
    sframe_unwind_self req{};
    std::vector<uint64_t> frames;
    uint32_t worst_frames = 0, worst_stop = 0;
    for (int i = 0; i < worst_reps; i++) {
      // A new registration: the row cache starts empty for every walk.
      if (long e = a.Register(dev.fd())) throw std::runtime_error("register: " + std::to_string(e));
      uint64_t ns = 0;
      long ret = bounds::UnwindThroughChain(a, dev.fd(), &req, &frames, &ns);
      if (ret) throw std::runtime_error("UNWIND_SELF: " + std::to_string(ret));
      worst.ns.push_back(double(ns));
      worst_frames = req.nr_frames;
      worst_stop = req.stop_reason;
      a.Unregister(dev.fd());
    }
    // Units that walk spent: all of the budget (it stopped on it).
    const double ns_per_unit = worst.Median() / SFRAME_WALK_BUDGET;

    std::printf("bounds_vmbench: SFRAME_MAX_FRES_PER_FDE %u, SFRAME_WALK_BUDGET %u units\n",
                SFRAME_MAX_FRES_PER_FDE, SFRAME_WALK_BUDGET);
    std::printf("%-52s %8s %12s %12s %s\n", "one SFRAME_IOC_UNWIND_SELF", "calls", "median us",
                "worst us", "frames, stop");
    std::printf("%-52s %8zu %12.1f %12.1f %zu, %s\n", "typical: 16-frame chain, row cache on",
                cached.times.ns.size(), cached.times.Median() / 1e3, cached.times.Worst() / 1e3,
                cached.last.frames.size(), sframe::to_string(cached.last.stop_reason).c_str());
    if (root) {
      std::printf("%-52s %8zu %12.1f %12.1f %zu, %s\n", "typical: 16-frame chain, row cache off",
                  uncached.times.ns.size(), uncached.times.Median() / 1e3,
                  uncached.times.Worst() / 1e3, uncached.last.frames.size(),
                  sframe::to_string(uncached.last.stop_reason).c_str());
    }
    std::printf("%-52s %8zu %12.1f %12.1f %u, %s\n",
                "worst: crafted section at the cap, 4096 frames", worst.ns.size(),
                worst.Median() / 1e3, worst.Worst() / 1e3, worst_frames,
                worst_stop == SFRAME_STOP_BUDGET ? "BUDGET" : std::to_string(worst_stop).c_str());
    std::printf("decoding cost in the worst walk: %.1f ns per unit\n", ns_per_unit);

    // --- interrupt-context unwinds (sessions, 10 kHz) ----------------------
    // Each phase starts with half a second of sampling that is not counted:
    // under TCG the first run of a code path includes its translation.
    const long long irq0 = IrqWalkMaxNs();
    uint64_t spin_ns = 3000ull * 1000000;
    IrqWalks irq_typical, irq_crafted;
    pid_t typical = ForkReady([&](int w) {
      if (write(w, "r", 1) != 1) return;
      sframe_chain(kTypicalDepth, SpinLeaf, &spin_ns);
    });
    size_t typical_samples = 0;
    if (typical > 0) {
      SampleChild(typical, 500);
      ResetIrqWalks();
      typical_samples = SampleChild(typical, 2000);
      irq_typical = ReadIrqWalks();
      Reap(typical);
    }

    pid_t crafted = ForkReady([&](int w) {
      bounds::Attack c;
      if (!c.Build() || c.Register(dev.fd()) != 0) return;
      if (write(w, "r", 1) != 1) return;
      for (int round = 0; round < 12; round++) {
        bounds::SpinThroughChain(c, 250);
        c.Unregister(dev.fd());
        c.Register(dev.fd());
      }
    });
    size_t crafted_samples = 0;
    if (crafted > 0) {
      SampleChild(crafted, 500);
      ResetIrqWalks();
      crafted_samples = SampleChild(crafted, 2000);
      irq_crafted = ReadIrqWalks();
      Reap(crafted);
    }

    std::printf("%-52s %8s %8s %10s %10s\n", "interrupt-context unwind (session, 10 kHz, 2 s)",
                "samples", "walks", "mean us", "longest us");
    if (irq_crafted.longest_ns < 0) {
      std::printf("%s is missing: the module does not report interrupt-context walk times\n",
                  kIrqParam);
      std::printf("estimate of the worst: SFRAME_IRQ_WALK_BUDGET 512 units x %.1f ns = %.1f us "
                  "of decoding, plus a few loads per frame\n",
                  ns_per_unit, 512 * ns_per_unit / 1e3);
    } else {
      (void)irq0;
      std::printf("%-52s %8zu %8lld %10.1f %10.1f\n", "typical: 16-frame chain", typical_samples,
                  irq_typical.walks, irq_typical.mean_ns / 1e3, irq_typical.longest_ns / 1e3);
      std::printf("%-52s %8zu %8lld %10.1f %10.1f\n", "worst: crafted chain at the cap",
                  crafted_samples, irq_crafted.walks, irq_crafted.mean_ns / 1e3,
                  irq_crafted.longest_ns / 1e3);
      std::printf("bound: SFRAME_IRQ_WALK_BUDGET 512 units x %.1f ns = %.1f us of decoding\n",
                  ns_per_unit, 512 * ns_per_unit / 1e3);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bounds_vmbench: %s\n", e.what());
    return 1;
  }
  return 0;
}
