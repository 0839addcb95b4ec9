// libvmtest_dl.so: opened with dlopen() by chain_vmtest.
#include "chain_lib.h"

extern "C" {

int dl_chain_a(vmtest_callback cb, void* arg);
int dl_chain_b(vmtest_callback cb, void* arg);

__attribute__((noipa)) int dl_chain_b(vmtest_callback cb, void* arg) {
  cb(arg);
  asm volatile("" ::: "memory");
  return 20;
}

__attribute__((noipa)) int dl_chain_a(vmtest_callback cb, void* arg) {
  int r = dl_chain_b(cb, arg);
  asm volatile("" ::: "memory");
  return r + 1;
}

}  // extern "C"
