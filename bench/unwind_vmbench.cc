// unwind_vmbench: cost per frame of the module's SFrame unwind against its
// frame-pointer walk of the same stacks, in one run.  Runs in the VM (it
// needs /dev/sframe_unwind).  Prints; asserts nothing about time.
//
// The same ring of functions (bench_chain.c) is built twice: once without
// frame pointers and with .sframe, once with frame pointers and without
// .sframe.  Each method unwinds its own build at two depths; the difference
// divided by the difference in frames is the cost of one frame, free of the
// fixed cost of the system call and of the frames below the chain.
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "sframe_client/device.h"
#include "sframe_client/error.h"
#include "sframe_client/objects.h"
#include "sframe_profile/symbolizer.h"

extern "C" {
typedef void (*chain_leaf_fn)(void* arg);
int sframe_chain(int depth, chain_leaf_fn leaf, void* arg);
int fp_chain(int depth, chain_leaf_fn leaf, void* arg);
}

namespace {

constexpr int kShallow = 16;
constexpr int kDeep = 144;
constexpr uint32_t kMaxFrames = 512;

struct Run {
  Run(const sframe::Device* d, uint32_t f, int n) : dev(d), flags(f), iterations(n) {}
  const sframe::Device* dev;
  uint32_t flags;
  int iterations;
  double ns_per_unwind = 0;
  sframe::UnwindResult last;
};

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

void leaf(void* arg) {
  auto* run = static_cast<Run*>(arg);
  uint64_t start = now_ns();
  for (int i = 0; i < run->iterations; i++) run->last = run->dev->unwind_self(kMaxFrames, run->flags);
  run->ns_per_unwind = double(now_ns() - start) / run->iterations;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The module's per-process cache of decoded rows (module parameter
// row_cache): on, the steady state of a profiler; off, every frame decoded
// from its section.  Switching needs root; returns whether it worked.
bool set_row_cache(bool on) {
  FILE* f = std::fopen("/sys/module/sframe_unwind/parameters/row_cache", "w");
  if (!f) return false;
  bool ok = std::fputs(on ? "Y" : "N", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

struct Method {
  const char* name;
  bool row_cache;
  uint32_t flags;
  int (*chain)(int, chain_leaf_fn, void*);
  std::vector<double> per_frame, shallow, deep;
  uint32_t frames_shallow = 0, frames_deep = 0, by_method = 0;
  sframe::StopReason stop = sframe::StopReason::kNone;
};

}  // namespace

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 11;
  int iterations = argc > 2 ? std::atoi(argv[2]) : 2000;
  try {
    sframe::Device dev;
    auto registrations = sframe::register_loaded_objects(dev);
    std::vector<Method> methods = {
        {"sframe", true, SFRAME_UNWIND_F_SFRAME, sframe_chain, {}, {}, {}},
        {"fp", true, SFRAME_UNWIND_F_FP, fp_chain, {}, {}, {}},
    };
    if (set_row_cache(false)) {
      methods.push_back({"sframe, no row cache", false, SFRAME_UNWIND_F_SFRAME, sframe_chain, {}, {}, {}});
    } else {
      std::printf("(not root: the uncached SFrame figure needs the row_cache parameter)\n");
    }
    for (auto& m : methods) {  // warm up: fault the sections and stacks in
      set_row_cache(m.row_cache);
      Run run{&dev, m.flags, 200};
      m.chain(kDeep, leaf, &run);
    }
    for (int rep = 0; rep < reps; rep++) {
      for (auto& m : methods) {
        set_row_cache(m.row_cache);
        Run shallow{&dev, m.flags, iterations}, deep{&dev, m.flags, iterations};
        m.chain(kShallow, leaf, &shallow);
        m.chain(kDeep, leaf, &deep);
        m.frames_shallow = uint32_t(shallow.last.frames.size());
        m.frames_deep = uint32_t(deep.last.frames.size());
        m.by_method = m.flags == SFRAME_UNWIND_F_SFRAME ? deep.last.nr_sframe : deep.last.nr_fp;
        m.stop = deep.last.stop_reason;
        m.shallow.push_back(shallow.ns_per_unwind);
        m.deep.push_back(deep.ns_per_unwind);
        m.per_frame.push_back((deep.ns_per_unwind - shallow.ns_per_unwind) /
                              double(m.frames_deep - m.frames_shallow));
      }
    }
    std::printf("unwind_vmbench: %d repetitions x %d unwinds, depths %d and %d of an 8-function ring\n",
                reps, iterations, kShallow, kDeep);
    set_row_cache(true);
    std::printf("%-22s %12s %12s %14s %14s %10s %s\n", "method", "frames", "by method",
                "ns/unwind@16", "ns/unwind@144", "ns/frame", "stop (deep)");
    for (auto& m : methods) {
      std::printf("%-22s %5u..%-6u %12u %14.0f %14.0f %10.1f %s\n", m.name, m.frames_shallow,
                  m.frames_deep, m.by_method, median(m.shallow), median(m.deep),
                  median(m.per_frame), sframe::to_string(m.stop).c_str());
    }
    double ratio = median(methods[0].per_frame) / median(methods[1].per_frame);
    std::printf("ratio sframe/fp per frame (median): %.2f\n", ratio);
    if (methods.size() > 2)
      std::printf("ratio sframe without row cache/fp per frame (median): %.2f\n",
                  median(methods[2].per_frame) / median(methods[1].per_frame));
    for (auto& m : methods) {
      if (m.frames_deep - m.frames_shallow != kDeep - kShallow) {
        std::printf("WARNING: the %s walk did not cover the whole chain; figures are not comparable\n",
                    m.name);
        return 1;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unwind_vmbench: %s\n", e.what());
    return 1;
  }
  return 0;
}
