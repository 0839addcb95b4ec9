// A downstream C++ program: unwinds its own stack through the module with
// libsframe-client's C++ API, found with find_package(SframeClient).
//
// It registers the .sframe of every object it has loaded (itself, built
// with -Wa,--gsframe, and libsframe-client.so.0, whose Device::unwind_self
// makes the system call), walks down from three nested calls, and says
// whether the walk reached main.  Exit 0 only if it did.
#include <sframe_client/sframe_client.hpp>

#include <cinttypes>
#include <cstdio>
#include <vector>

namespace {

// Three frames of our own between main and the unwind, kept apart.
__attribute__((noinline)) sframe::UnwindResult level3(const sframe::Device& dev) {
  sframe::UnwindResult r = dev.unwind_self(64, SFRAME_UNWIND_F_SFRAME);
  asm volatile("" ::: "memory");  // no tail call: this frame stays
  return r;
}
__attribute__((noinline)) sframe::UnwindResult level2(const sframe::Device& dev) {
  sframe::UnwindResult r = level3(dev);
  asm volatile("" ::: "memory");
  return r;
}
__attribute__((noinline)) sframe::UnwindResult level1(const sframe::Device& dev) {
  sframe::UnwindResult r = level2(dev);
  asm volatile("" ::: "memory");
  return r;
}

// Whether pc lies in this program's executable (not in a library).
bool in_this_program(uint64_t pc) {
  auto obj = sframe::loaded_object_containing(reinterpret_cast<const void*>(pc));
  auto self = sframe::loaded_object_containing(reinterpret_cast<const void*>(&in_this_program));
  return obj && self && obj->path == self->path;
}

}  // namespace

int main() {
  try {
    sframe::Device dev;
    std::vector<sframe::Registration> regs = sframe::register_loaded_objects(dev);
    std::printf("registered %zu object(s) with .sframe\n", regs.size());
    sframe::UnwindResult r = level1(dev);
    std::printf("%zu frames, stop: %s, %u by SFrame, %u by frame pointer\n", r.frames.size(),
                sframe::to_string(r.stop_reason).c_str(), r.nr_sframe, r.nr_fp);
    // frames: unwind_self (in the library), level3, level2, level1, main,
    // then libc's start code (no .sframe in Debian's libc: the walk ends).
    size_t ours = 0;
    for (size_t i = 0; i < r.frames.size(); i++) {
      bool mine = in_this_program(r.frames[i]);
      ours += mine;
      std::printf("  #%zu 0x%016" PRIx64 "%s\n", i, r.frames[i], mine ? "  (this program)" : "");
    }
    // level3, level2, level1 and main are this program's: four frames.
    if (ours < 4) {
      std::printf("FAIL: the walk did not reach main (%zu frames of this program)\n", ours);
      return 1;
    }
    std::printf("OK: the walk reached main\n");
    return 0;
  } catch (const sframe::Error& e) {
    std::fprintf(stderr, "unwind_self: %s\n", e.what());
    return 2;
  }
}
