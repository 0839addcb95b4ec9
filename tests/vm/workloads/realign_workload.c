/*
 * realign_workload: hand-written assembly that realigns the stack and
 * describes its CFA with DWARF expressions (realign_asm.S), called from C
 * built without frame pointers and without .sframe.
 *
 *   realign_workload SECONDS     runs rounds until SECONDS pass (0: until
 *                                killed)
 *
 * It prints "ready" (flushed) before the first round.  Each round calls
 * rw_saved_cfa, rw_drap and rw_perlasm, each spinning in its own body and
 * then calling rw_leaf, and rw_rax_cfa, which calls the assembly leaf
 * rw_rax_leaf.  A complete user chain of a sample there is
 *   [rw_leaf,] rw_saved_cfa | rw_drap | rw_perlasm, rw_round, main,
 *   [rw_rax_leaf,] rw_rax_cfa, rw_round, main,
 * and rw_rax_cfa_clobbered (its leaf holds a heap address in RAX) one whose
 * walk stops below rw_rax_clobber_leaf.
 *   <libc: __libc_start_call_main>
 * (rw_perlasm's body, CFA = *(RSP + 40) + 8, has no SFrame v3 rule: the
 * generator writes it with this project's extension, SFRAME_F_X_CFA_ADDEND).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "timed_rounds.h"

#define RW_SPINS 20000

void rw_saved_cfa(void (*fn)(uint64_t *), uint64_t *arg, uint64_t spins);
void rw_drap(void (*fn)(uint64_t *), uint64_t *arg, uint64_t spins);
void rw_perlasm(void (*fn)(uint64_t *), uint64_t *arg, uint64_t spins);
void rw_rax_cfa(uint64_t *arg, uint64_t spins, void *rax);
void rw_rax_cfa_clobbered(uint64_t *arg, uint64_t spins, void *heap);

static void *rw_heap;

__attribute__((noinline, noclone)) static void rw_leaf(uint64_t *x)
{
	volatile uint64_t h = *x;

	for (int i = 0; i < RW_SPINS; i++)
		h = h * 6364136223846793005ull + 1442695040888963407ull;
	*x = h;
}

__attribute__((noinline, noclone)) static void rw_round(uint64_t *x)
{
	rw_saved_cfa(rw_leaf, x, RW_SPINS);
	rw_drap(rw_leaf, x, RW_SPINS);
	rw_perlasm(rw_leaf, x, RW_SPINS);
	rw_rax_cfa(x, RW_SPINS, NULL);
	rw_rax_cfa_clobbered(x, RW_SPINS, rw_heap);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	uint64_t x = 1;
	struct timed_rounds t;

	rw_heap = malloc(64);
	t = timed_rounds_start(argc, argv);
	while (timed_rounds_go_on(&t))
		rw_round(&x);
	printf("%llu\n", (unsigned long long)(x & 1));
	return 0;
}
