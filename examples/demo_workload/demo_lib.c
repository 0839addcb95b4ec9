/*
 * libdemo.so: the shared library of the demo workload.  Built, like the
 * program, as a distribution builds code: -O2, no frame pointers, no
 * .sframe (only the .eh_frame every x86-64 object carries).
 */
#include <stdint.h>
#include <stdlib.h>

#include "demo_lib.h"

static int demo_compare(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

__attribute__((noinline, noclone)) void demo_sort(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), demo_compare);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline, noclone)) double demo_mix(const uint64_t *v,
						    size_t n)
{
	double acc = 0;

	for (size_t i = 0; i < n; i++)
		acc = acc * 0.999 + (double)(v[i] % 1000) / (1.0 + (double)i);
	return acc;
}
