/*
 * qsort_workload: a program as a distribution builds it, with no frame
 * pointers and no .sframe (only the .eh_frame every x86-64 object has),
 * whose hot function is a callback of libc's qsort().  Its stacks pass
 * through libc (qsort_r, msort_with_tmp) on the way to main, so only SFrame
 * made from .eh_frame -- its own and libc's -- unwinds them.
 *
 *   qsort_workload SECONDS      sorts arrays until SECONDS pass (0: until
 *                               killed)
 *
 * It prints "ready" (flushed) before the first sort.  A complete user chain
 * of a sample in the callback is
 *   qw_compare, <libc: msort_with_tmp ...>, <libc: qsort_r>, qw_sort_round,
 *   main, <libc: __libc_start_call_main>
 */
#include <stdint.h>
#include <stdlib.h>

#include "timed_rounds.h"

#define QW_ELEMENTS 4096

/* The hot function: some work per comparison, so samples land here. */
__attribute__((noinline, noclone)) static int qw_compare(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	volatile uint64_t h = x ^ y;

	for (int i = 0; i < 16; i++)
		h = h * 6364136223846793005ull + 1442695040888963407ull;
	return (x > y) - (x < y);
}

__attribute__((noinline, noclone)) static void qw_sort_round(uint64_t *v, size_t n,
						    uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		v[i] = seed >> 11;
	}
	qsort(v, n, sizeof(*v), qw_compare);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	uint64_t *v = malloc(QW_ELEMENTS * sizeof(*v));
	uint64_t seed = 1;
	struct timed_rounds t;

	if (!v)
		return 1;
	t = timed_rounds_start(argc, argv);
	while (timed_rounds_go_on(&t))
		qw_sort_round(v, QW_ELEMENTS, seed++);
	free(v);
	return 0;
}
