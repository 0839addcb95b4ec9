// The chains of chain_vmtest and audit_vmtest: small functions, each its
// own frame with an exact name, that end in an unwind of the calling
// thread.  Compiled into both programs with their flags (chains.cc is in
// their SOURCES), so the chains they check are the same code.
#ifndef SFRAME_VMTEST_CHAINS_H
#define SFRAME_VMTEST_CHAINS_H

#include <string>
#include <vector>

#include "libs/chain_lib.h"
#include "vmtest.h"

// What a chain's innermost function does.
struct UnwindReq {
  const sframe::Device* dev;
  uint32_t flags = SFRAME_UNWIND_F_SFRAME;
  uint32_t max_frames = 512;
  sframe::UnwindResult result;
};

// a followed by b.
std::vector<std::string> Cat(std::vector<std::string> a, const std::vector<std::string>& b);

// The innermost frame of every chain: r->result = unwind_self().
void DoUnwind(UnwindReq* r);

// exe_a -> exe_b -> exe_c -> DoUnwind, in the program.
int exe_a(UnwindReq* r);
int exe_b(UnwindReq* r);
int exe_c(UnwindReq* r);

// exe_calls_lib -> lib_chain_a -> lib_chain_b (libvmtest_chain.so, through
// the program's PLT) -> lib_callback -> DoUnwind.
void lib_callback(void* arg);
int exe_calls_lib(UnwindReq* r);

// exe_calls_dl -> fn (dl_chain_a of a dlopen()ed library) -> dl_chain_b ->
// dl_callback -> DoUnwind.
void dl_callback(void* arg);
int exe_calls_dl(dl_chain_fn fn, UnwindReq* r);

#endif  // SFRAME_VMTEST_CHAINS_H
