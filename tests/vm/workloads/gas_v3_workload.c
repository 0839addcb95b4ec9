/*
 * gas_v3_workload: the program gas_v3_vmtest compiles IN THE GUEST with
 * the guest's own gcc and gas (issue 28, point 3):
 *
 *   gcc -O2 -fomit-frame-pointer -Wa,--gsframe gas_v3_workload.c
 *
 * so that its .sframe is whatever that gas makes (SFrame version 3 with
 * SFRAME_F_FDE_FUNC_START_PCREL from binutils 2.47 on), and the module has
 * to find it by itself (discovery, through PT_GNU_SFRAME): nobody
 * registers or supplies it.
 *
 *   gas_v3_workload SECONDS [stop]
 *
 * spins until SECONDS of its CPU time pass.  It prints "ready" (flushed)
 * before the first round, then with "stop" stops itself (SIGSTOP) until
 * the test, its sampling set up, continues it (SIGCONT); "done CHECKSUM"
 * at the end.  The hot path stays in this program's own code (libc has no
 * .sframe on Debian and no frame pointers, so a sample taken inside libc
 * could not reach main): main calls g3_round until the time is up, and
 * the only library call in the loop is clock_gettime(), once every 4
 * rounds (a system call from the vDSO for this clock).
 * Every sample taken in this program's text past main's start must unwind
 * to main through frames of these shapes:
 *
 *   main
 *    g3_round          small frame, a loop around its call
 *     g3_big           a 4 KiB frame (CFA = RSP + ~4 KiB)
 *      g3_vla          a variable-length array: RBP becomes the frame
 *                      pointer, CFA = RBP + 16 in its body
 *       g3_realign     a 64-byte aligned local and a variable-length
 *                      array: gcc realigns the stack through a DRAP
 *                      register, CFA = R10 in its prologue and epilogue,
 *                      CFA = *(RBP - 8) in its body, RBP saved at *(RBP):
 *                      no standard FRE says that, gas 2.47 makes it a
 *                      v3 flexible FDE (older gas left the function out)
 *        g3_saver      callee-saved registers pushed and live across its
 *                      calls, RBP among them (the CFA offset changes
 *                      with each push; g3_realign's CFA needs that RBP)
 *         g3_leaf      a leaf: no frame at all (CFA = RSP + 8)
 *
 * Each level does some work of its own before and after its calls, and
 * the calls are frequent (a few hundred instructions of leaf work each),
 * so samples fall in every function, prologues and epilogues included.
 * The functions are noipa (no inlining, cloning or interprocedural
 * changes: their symbol names are exact) and use their callees' results
 * after the call (no tail calls).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define G3_FN __attribute__((noipa))
#define G3_BARRIER() __asm__ volatile("" ::: "memory")

static double g3_cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Leaf: registers only, no stack frame. */
G3_FN uint64_t g3_leaf(uint64_t x, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

/* Six values live across two calls: rbx, rbp, r12-r15 pushed. */
G3_FN uint64_t g3_saver(uint64_t x, unsigned n)
{
	uint64_t a = x * 3, b = x + 5, c = x ^ 0x55, d = x >> 3, e = x * 7, f = x + n;
	uint64_t r = g3_leaf(x, n);

	G3_BARRIER();
	r += g3_leaf(r ^ a, n / 2 + 1);
	G3_BARRIER();
	return r + (a ^ b) + (c * d) + (e - f);
}

/* Stack realignment with a DRAP register (see the header comment). */
G3_FN uint64_t g3_realign(uint64_t x, unsigned n)
{
	_Alignas(64) volatile uint64_t wide[8];
	volatile uint64_t buf[(n & 3) + 1];
	uint64_t s;

	wide[n & 7] = x;
	buf[0] = x >> 1;
	s = g3_saver(x, n);
	G3_BARRIER();
	return s + wide[n & 7] + buf[0];
}

/* A variable-length array: gcc keeps a frame pointer in this function. */
G3_FN uint64_t g3_vla(uint64_t x, unsigned n)
{
	volatile uint64_t buf[(n & 7) + 3];
	uint64_t s = 0;

	for (unsigned i = 0; i < (n & 7) + 3; i++)
		buf[i] = x + i;
	s = g3_realign(x, n);
	G3_BARRIER();
	for (unsigned i = 0; i < (n & 7) + 3; i++)
		s += buf[i];
	return s;
}

/* A big fixed frame. */
G3_FN uint64_t g3_big(uint64_t x, unsigned n)
{
	volatile uint64_t pad[512];
	uint64_t s;

	for (unsigned i = 0; i < 512; i += 16)
		pad[i] = x + i;
	s = g3_vla(x, n);
	G3_BARRIER();
	for (unsigned i = 0; i < 512; i += 32)
		s += pad[i];
	return s;
}

/* One round: many short calls down the chain. */
G3_FN uint64_t g3_round(uint64_t x)
{
	for (unsigned i = 0; i < 2000; i++) {
		x = g3_big(x + i, 40 + (i & 31));
		G3_BARRIER();
	}
	return x;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 3;
	double start;
	uint64_t x = 88172645463325252ull;

	printf("ready\n");
	fflush(stdout);
	if (argc > 2 && strcmp(argv[2], "stop") == 0)
		raise(SIGSTOP);
	start = g3_cpu_seconds();
	do {
		for (int i = 0; i < 4; i++) {
			x = g3_round(x);
			G3_BARRIER();
		}
	} while (g3_cpu_seconds() - start < seconds);
	printf("done %llx\n", (unsigned long long)x);
	return 0;
}
