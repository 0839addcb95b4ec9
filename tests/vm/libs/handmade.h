// libvmtest_handmade.so: assembly functions with frame layouts written by
// hand (libs/handmade.cc), and no .sframe of their own.
#ifndef SFRAME_VMTEST_HANDMADE_H
#define SFRAME_VMTEST_HANDMADE_H

#include <cstdint>

extern "C" {
typedef void (*handmade_callback)(void* arg);

// sub $0x1008,%rsp; call handmade_fp_frame; add $0x1008,%rsp; ret
//   CFA = SP+8, then SP+0x1010 (a 2-byte offset), then SP+8.
void handmade_sp_frame(handmade_callback cb, void* arg);
// push %rbp; mov %rsp,%rbp; push %rbx; sub $24,%rsp; call *cb; ...; pop %rbp
//   CFA = SP+8, SP+16 (FP at CFA-16), FP+16 (FP at CFA-16), SP+8.
void handmade_fp_frame(handmade_callback cb, void* arg);
// sub $8,%rsp; call *cb; add $8,%rsp; ret -- described as the outermost
// frame (RA undefined) by the test.
void handmade_outermost(handmade_callback cb, void* arg);
// 4 identical 16-byte blocks, like PLT entries; enter at block k with
// (arg, cb): sub $8,%rsp; call *%rsi; add $8,%rsp; ret; int3 padding.
//   In each block: CFA = SP+8, SP+16 from byte 4, SP+8 from byte 10.
// (Declared as a function: a data declaration would let the linker copy the
// code into the program with a copy relocation.)
void handmade_pcmask_stubs(void);
typedef void (*handmade_stub)(void* arg, handmade_callback cb);
// ioctl(fd, cmd, arg) as glibc's __vfork makes its system call: pop %r10
// (the return address); syscall; push %r10; ret.  Returns the raw result
// (-errno on failure).
//   CFA = SP+8, then SP+0 with the return address in R10, then SP+8.
long handmade_ioctl_ra_in_r10(long fd, unsigned long cmd, void* arg);

// Offsets within the functions, from labels in the assembly.
enum HandmadeLayout {
  kSpSize,      // size of handmade_sp_frame
  kSpAfterSub,  // CFA = SP+0x1010 from here
  kSpAfterAdd,  // CFA = SP+8 from here
  kFpSize,
  kFpAfterPush,  // CFA = SP+16, FP at CFA-16
  kFpAfterMov,   // CFA = FP+16, FP at CFA-16
  kFpAfterPop,   // CFA = SP+8
  kOutSize,
  kStubsSize,     // 64
  kStubAfterSub,  // 4: CFA = SP+16 (within each block)
  kStubAfterAdd,  // 10: CFA = SP+8
  kRaSize,        // size of handmade_ioctl_ra_in_r10
  kRaAfterPop,    // CFA = SP+0, the return address in R10
  kRaAfterPush,   // CFA = SP+8
  kLayoutEntries,
};
extern const uint32_t handmade_layout[kLayoutEntries];
}

#endif  // SFRAME_VMTEST_HANDMADE_H
