// Test libraries of the VM suite: chains of calls that cross an object
// boundary and come back through a callback.
//   libvmtest_chain.so (linked):  lib_chain_a -> lib_chain_b -> cb(arg)
//   libvmtest_dl.so (dlopen'ed):  dl_chain_a  -> dl_chain_b  -> cb(arg)
// Both are built with -O2 -fomit-frame-pointer -Wa,--gsframe.  The call
// from a to b goes through the library's PLT (default visibility, -fPIC),
// and so does the program's call of lib_chain_a.
#ifndef SFRAME_VMTEST_CHAIN_LIB_H
#define SFRAME_VMTEST_CHAIN_LIB_H

extern "C" {
typedef void (*vmtest_callback)(void* arg);

int lib_chain_a(vmtest_callback cb, void* arg);
int lib_chain_b(vmtest_callback cb, void* arg);

// In libvmtest_dl.so, found with dlsym.
typedef int (*dl_chain_fn)(vmtest_callback cb, void* arg);
}

#endif  // SFRAME_VMTEST_CHAIN_LIB_H
