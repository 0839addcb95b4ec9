/*
 * The three programs children_vmtest runs from one shell script under
 * `sframe-prof record`, built from this file with no frame pointers and no
 * .sframe (only .eh_frame), so that only SFrame made from .eh_frame -- and
 * supplied for each process as it appears -- unwinds their stacks:
 *
 *   children_hash MS     (CHILDREN_HASH)   one thread hashing: main ->
 *                                          ch_round -> ch_mix
 *   children_sort MS     (CHILDREN_SORT)   one thread sorting with libc's
 *                                          qsort: main -> cs_round ->
 *                                          <libc> -> cs_compare
 *   children_thread MS   (CHILDREN_THREAD) main and two more threads
 *                                          spinning: main -> ct_spin, and
 *                                          <libc: start_thread> -> ct_worker
 *                                          -> ct_spin
 *
 * Each thread works until it has used MS milliseconds of CPU time
 * (CLOCK_THREAD_CPUTIME_ID), so the samples each gets do not depend on how
 * fast the machine is.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static volatile uint64_t sink;

#if defined(CHILDREN_HASH)

__attribute__((noinline, noclone)) static uint64_t ch_mix(uint64_t h, uint64_t x)
{
	for (int i = 0; i < 64; i++)
		h = (h ^ (x + i)) * 0x100000001b3ull;
	return h;
}

__attribute__((noinline, noclone)) static void ch_round(uint64_t seed)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (uint64_t i = 0; i < 4096; i++)
		h = ch_mix(h, seed + i);
	sink = h;
}

static void run(uint64_t ms)
{
	for (uint64_t start = cpu_ms(), seed = 1; cpu_ms() - start < ms; seed++)
		ch_round(seed);
}

#elif defined(CHILDREN_SORT)

#define CS_ELEMENTS 2048

__attribute__((noinline, noclone)) static int cs_compare(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	volatile uint64_t h = x ^ y;

	for (int i = 0; i < 16; i++)
		h = h * 6364136223846793005ull + 1442695040888963407ull;
	return (x > y) - (x < y);
}

__attribute__((noinline, noclone)) static void cs_round(uint64_t *v, uint64_t seed)
{
	for (size_t i = 0; i < CS_ELEMENTS; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		v[i] = seed >> 11;
	}
	qsort(v, CS_ELEMENTS, sizeof(*v), cs_compare);
	__asm__ volatile("" ::: "memory");
}

static void run(uint64_t ms)
{
	uint64_t *v = malloc(CS_ELEMENTS * sizeof(*v));

	if (!v)
		exit(1);
	for (uint64_t start = cpu_ms(), seed = 1; cpu_ms() - start < ms; seed++)
		cs_round(v, seed);
	free(v);
}

#elif defined(CHILDREN_THREAD)

__attribute__((noinline, noclone)) static void ct_spin(uint64_t ms)
{
	uint64_t h = 1;

	for (uint64_t start = cpu_ms(); cpu_ms() - start < ms;) {
		for (int i = 0; i < 262144; i++)
			h = h * 6364136223846793005ull + 1442695040888963407ull;
	}
	sink = h;
}

__attribute__((noinline, noclone)) static void *ct_worker(void *arg)
{
	ct_spin((uint64_t)(uintptr_t)arg);
	return NULL;
}

static void run(uint64_t ms)
{
	pthread_t t[2];

	for (int i = 0; i < 2; i++) {
		if (pthread_create(&t[i], NULL, ct_worker, (void *)(uintptr_t)ms) != 0)
			exit(1);
	}
	ct_spin(ms);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
}

#else
#error "define CHILDREN_HASH, CHILDREN_SORT or CHILDREN_THREAD"
#endif

int main(int argc, char **argv)
{
	run(argc > 1 ? strtoull(argv[1], NULL, 10) : 1000);
	return 0;
}
