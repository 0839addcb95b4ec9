// libvmtest_chain.so: linked into chain_vmtest.
#include "chain_lib.h"

extern "C" {

__attribute__((noipa)) int lib_chain_b(vmtest_callback cb, void* arg) {
  cb(arg);
  asm volatile("" ::: "memory");
  return 2;
}

__attribute__((noipa)) int lib_chain_a(vmtest_callback cb, void* arg) {
  int r = lib_chain_b(cb, arg);  // through this library's PLT
  asm volatile("" ::: "memory");
  return r + 1;
}

}  // extern "C"
