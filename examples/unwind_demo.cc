// unwind_demo: the module's main job in one screen.  A program built
// without frame pointers and with -Wa,--gsframe registers its .sframe and
// asks the kernel to unwind its own stack, once with SFrame and once with
// frame pointers only, and prints both, symbolized.
#include <cstdio>
#include <exception>

#include "sframe_client/device.h"
#include "sframe_client/objects.h"
#include "sframe_profile/symbolizer.h"

extern "C" {
typedef void (*chain_leaf_fn)(void* arg);
// bench/bench_chain.c, built with -O2 -fomit-frame-pointer -Wa,--gsframe.
int sframe_chain(int depth, chain_leaf_fn leaf, void* arg);
}

namespace {

void print_unwind(const sframe::Device& dev, uint32_t flags, const char* title) {
  sframe::UnwindResult r = dev.unwind_self(64, flags);
  sframe::Symbolizer symbolizer;
  std::printf("%s: %zu frames (%u by SFrame, %u by frame pointers), stopped: %s\n", title,
              r.frames.size(), r.nr_sframe, r.nr_fp, sframe::to_string(r.stop_reason).c_str());
  for (const sframe::Symbol& s : symbolizer.symbolize_frames(r.frames))
    std::printf("  %#014llx  %s\n", (unsigned long long)s.address, s.to_string().c_str());
}

void leaf(void* arg) {
  const auto& dev = *static_cast<const sframe::Device*>(arg);
  print_unwind(dev, SFRAME_UNWIND_F_SFRAME, "SFrame");
  print_unwind(dev, SFRAME_UNWIND_F_FP, "frame pointers only");
}

}  // namespace

int main() {
  try {
    sframe::Device dev;
    auto registrations = sframe::register_loaded_objects(dev);
    for (const auto& reg : registrations)
      std::printf("registered .sframe of %s (%llu bytes for %llu bytes of text)\n",
                  reg.object().c_str(), (unsigned long long)reg.sframe_len(),
                  (unsigned long long)reg.text_len());
    sframe_chain(5, leaf, &dev);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unwind_demo: %s\n", e.what());
    return 1;
  }
  return 0;
}
