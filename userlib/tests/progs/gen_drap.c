/*
 * Frames that need more than the default SFrame FDE, for the tests of the
 * SFrame generator (userlib/gen/src/eh_frame.cc): stack realignment through a
 * DRAP register (CFA = R10 + 0, then CFA = *(RBP - 16) and RBP saved at
 * *(RBP + 0)), which binutils 2.40's gas leaves out of its .sframe, next to
 * ordinary functions and a hand-written one whose CFI gas cannot turn into
 * SFrame either (.cfi_escape).
 */
#include <stdio.h>
#include <string.h>

volatile long sink;

__attribute__((noinline)) void use(void* p, long n) { sink += ((char*)p)[n - 1]; }

/* A variable-length array and a 64-byte aligned one: DRAP. */
__attribute__((noinline)) long drap_vla(long n) {
  char vla[n];
  char big[64] __attribute__((aligned(64)));

  memset(vla, 1, n);
  memset(big, 2, sizeof(big));
  use(vla, n);
  use(big, 64);
  return vla[0] + big[3];
}

/* Realignment with calls that take stack arguments. */
__attribute__((noinline)) long many_args(long a, long b, long c, long d, long e, long f, long g,
                                         long h) {
  return a + b * 2 + c * 3 + d * 4 + e * 5 + f * 6 + g * 7 + h * 8;
}

__attribute__((noinline)) long drap_calls(long n) {
  char vla[n];
  double v[8] __attribute__((aligned(32)));

  for (int i = 0; i < 8; i++) v[i] = i * n;
  memset(vla, 3, n);
  use(vla, n);
  use(v, sizeof(v));
  return many_args(n, n, n, n, n, n, n, vla[0]) + (long)v[3];
}

/* Ordinary shapes around them. */
__attribute__((noinline)) long plain(long a) {
  printf("%ld\n", a);
  return a * 3;
}

/*
 * Hand-written CFI: an RBP frame whose RBP save is said with .cfi_escape
 * (DW_CFA_offset_extended_sf rbp, -2: saved at CFA-16), which gas 2.40
 * does not turn into SFrame; the generator reads the DWARF it makes.
 */
long escaped(long a);
__asm__(
    ".text\n"
    ".globl escaped\n"
    ".type escaped, @function\n"
    "escaped:\n"
    ".cfi_startproc\n"
    "pushq %rbp\n"
    ".cfi_def_cfa_offset 16\n"
    ".cfi_escape 0x11, 0x06, 0x7e\n"
    "movq %rsp, %rbp\n"
    ".cfi_def_cfa_register %rbp\n"
    "leaq 1(%rdi), %rax\n"
    "popq %rbp\n"
    ".cfi_def_cfa %rsp, 8\n"
    ".cfi_restore %rbp\n"
    "ret\n"
    ".cfi_endproc\n"
    ".size escaped, .-escaped\n");

int main(int argc, char** argv) {
  (void)argv;
  return (int)(drap_vla(argc + 10) + drap_calls(argc + 20) + plain(argc) + escaped(argc)) & 1;
}
