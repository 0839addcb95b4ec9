// libvmtest_wldl.so: dlopen()ed by session_workload's `dlspin` mode.  Built
// with .sframe; the workload never registers it, so only the module's
// discovery covers it.
#include <cstdint>

extern "C" __attribute__((noipa, visibility("default"))) uint64_t wl_dl_spin(
    uint64_t (*leaf)(uint64_t), uint64_t x) {
  x = leaf(x);
  asm volatile("" ::: "memory");
  return x + 1;
}
