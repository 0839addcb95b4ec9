// libvmtest_container_{host,guest}.so: two builds of one library, to stand at
// the same path on the host and in a container (container_vmtest).  Neither
// has .sframe (SFrame is made from their .eh_frame), and the function they
// share has a different frame in each (and, in the guest's, another
// address): the host's SFrame applied to the guest's code walks to a wrong
// caller or stops, which the guest's own gets right.
#include <cstdint>

#ifndef CONTAINER_VARIANT
#error "CONTAINER_VARIANT (1: the host's build, 2: the guest's) must be defined"
#endif

extern "C" {

#if CONTAINER_VARIANT == 2
// Padding: container_lib_call starts further into the text than on the host.
__attribute__((noinline, noipa)) uint64_t container_lib_pad(uint64_t x) {
  volatile uint64_t a[64];
  for (int i = 0; i < 64; i++) a[i] = x * 2654435761u + uint64_t(i);
  uint64_t s = 0;
  for (int i = 0; i < 64; i++) s += a[i] ^ (a[(i * 7) & 63] >> 3);
  return s;
}
#endif

// Calls cb(arg) from a frame of 16 (host) or 4000 (guest) bytes.
__attribute__((noinline, noipa)) int container_lib_call(void (*cb)(void*), void* arg) {
#if CONTAINER_VARIANT == 1
  volatile char buf[16];
#else
  volatile char buf[4000];
#endif
  buf[0] = 1;
  cb(arg);
  asm volatile("" ::: "memory");
  return buf[0] + 1;
}

const char* container_lib_variant() { return CONTAINER_VARIANT == 1 ? "host" : "guest"; }

}  // extern "C"
