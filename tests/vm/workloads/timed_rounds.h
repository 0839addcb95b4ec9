/*
 * The timing of the C workloads: `PROGRAM SECONDS` runs rounds until
 * SECONDS pass (0 or none: until killed), after printing "ready" (flushed:
 * the test starts sampling once it reads it).
 *
 *	struct timed_rounds t = timed_rounds_start(argc, argv);
 *	while (timed_rounds_go_on(&t))
 *		one_round(...);
 *
 * The loop stays in main, so main is the caller of the round in every
 * stack the tests check.
 */
#ifndef VMTEST_TIMED_ROUNDS_H
#define VMTEST_TIMED_ROUNDS_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct timed_rounds {
	double seconds; /* <= 0: no end */
	double start;
};

static inline double timed_rounds_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline struct timed_rounds timed_rounds_start(int argc, char **argv)
{
	struct timed_rounds t;

	t.seconds = argc > 1 ? atof(argv[1]) : 0;
	t.start = timed_rounds_now();
	printf("ready\n");
	fflush(stdout);
	return t;
}

static inline int timed_rounds_go_on(const struct timed_rounds *t)
{
	return t->seconds <= 0 || timed_rounds_now() - t->start < t->seconds;
}

#endif /* VMTEST_TIMED_ROUNDS_H */
