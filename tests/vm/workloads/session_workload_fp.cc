// A frame of session_workload built with frame pointers and WITHOUT .sframe
// (its own object, see tests/vm/CMakeLists.txt): an SFrame-only walk stops
// here (NO_COVERAGE), the frame-pointer fallback goes on to main.
#include <cstdint>

extern "C" uint64_t wl_spin_a(uint64_t x, long limit);

extern "C" __attribute__((noipa)) uint64_t wl_fp_mid(uint64_t x) {
  uint64_t r = wl_spin_a(x, -1);
  asm volatile("" ::: "memory");  // no tail call
  return r + 5;
}
