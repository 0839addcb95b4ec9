/*
 * demo_workload: what `make demo` profiles.  Several threads (main and
 * DEMO_THREADS more) each do ROUNDS rounds of: fill an array, sort it with
 * libc's qsort through the shared library libdemo.so, mix it (libdemo.so),
 * and write it to /dev/null (a system call path).  Built -O2 without frame
 * pointers and without .sframe: frame pointers find almost nothing, SFrame
 * made from .eh_frame finds everything.
 *
 *   demo_workload [ROUNDS]     prints "elapsed_ns N" at the end
 *
 * Every stack of the work ends in main (the main thread) or in demo_thread
 * (the others, below libc's start_thread).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "demo_lib.h"

#define DEMO_THREADS 3
#define DEMO_ELEMENTS 2048

static long demo_rounds = 400;
static int demo_null = -1;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline, noclone)) static void demo_fill(uint64_t *v,
							  size_t n,
							  uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		v[i] = seed >> 11;
	}
}

__attribute__((noinline, noclone)) static void demo_output(const uint64_t *v,
							    size_t n)
{
	/* The system call path: the kernel copies it, the task returns. */
	if (write(demo_null, v, n * sizeof(*v)) < 0)
		abort();
}

__attribute__((noinline, noclone)) static double demo_work(uint64_t seed)
{
	uint64_t *v = malloc(DEMO_ELEMENTS * sizeof(*v));
	double acc = 0;

	if (!v)
		abort();
	for (long r = 0; r < demo_rounds; r++) {
		demo_fill(v, DEMO_ELEMENTS, seed + (uint64_t)r);
		demo_sort(v, DEMO_ELEMENTS);
		acc += demo_mix(v, DEMO_ELEMENTS);
		demo_output(v, DEMO_ELEMENTS);
	}
	free(v);
	return acc;
}

__attribute__((noinline, noclone)) static void *demo_thread(void *arg)
{
	static double sink;

	sink += demo_work((uint64_t)(uintptr_t)arg);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t threads[DEMO_THREADS];
	uint64_t start;
	double acc;

	if (argc > 1)
		demo_rounds = atol(argv[1]);
	demo_null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (demo_null < 0)
		return 1;
	start = now_ns();
	for (int i = 0; i < DEMO_THREADS; i++) {
		if (pthread_create(&threads[i], NULL, demo_thread,
				   (void *)(uintptr_t)(i + 1)))
			return 1;
	}
	acc = demo_work(0);
	for (int i = 0; i < DEMO_THREADS; i++)
		pthread_join(threads[i], NULL);
	printf("elapsed_ns %llu\n", (unsigned long long)(now_ns() - start));
	return acc == 0.5; /* keep the work */
}
