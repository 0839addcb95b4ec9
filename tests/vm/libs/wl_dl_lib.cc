// libvmtest_wldl.so: dlopen()ed by session_workload's `dlspin` mode.  Built
// with .sframe; the workload never registers it, so only the module's
// discovery covers it.
//
// Built with WL_DL_FAR_TEXT (libvmtest_wldl_twoseg.so), wl_dl_spin sits in
// a section of its own that the link places 2 MiB after the text: a second
// executable segment with a hole before it, laid out as node's text is.
#include <cstdint>

#ifdef WL_DL_FAR_TEXT
#define WL_DL_PLACE __attribute__((section("wl_far_text")))
#else
#define WL_DL_PLACE
#endif

extern "C" __attribute__((noipa, visibility("default"))) WL_DL_PLACE uint64_t wl_dl_spin(
    uint64_t (*leaf)(uint64_t), uint64_t x) {
  x = leaf(x);
  asm volatile("" ::: "memory");
  return x + 1;
}
