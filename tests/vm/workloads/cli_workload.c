/*
 * cli_workload: the target of cli_vmtest (sframe-prof's command line),
 * built with neither frame pointers nor .sframe.  Worker threads spin in a
 * chain of three functions of their own, so a test tells from the folded
 * stacks which thread was sampled and whether the chain was unwound:
 *
 *   worker 0:       main <- ... start_thread, cli_outer_a, cli_middle_a, cli_leaf_a
 *   workers 1..N-1: cli_outer_b, cli_middle_b, cli_leaf_b (or asleep, with "idle")
 *
 *   cli_workload SECONDS NTHREADS [idle]
 *
 * It prints "tid I TID" for each worker and then "ready" (flushed), runs
 * SECONDS (0: until killed), and at the end prints "cpu_ns N": the CPU time
 * the process used.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int idle_others;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int started;
static pid_t *tids;

#define CHAIN(x)                                                                   \
	__attribute__((noinline, noclone)) static uint64_t cli_leaf_##x(uint64_t h)  \
	{                                                                          \
		for (int i = 0; i < 256; i++)                                      \
			h = h * 6364136223846793005ull + 1442695040888963407ull;   \
		__asm__ volatile("" : "+r"(h));                                    \
		return h;                                                          \
	}                                                                          \
	__attribute__((noinline, noclone)) static uint64_t cli_middle_##x(uint64_t h) \
	{                                                                          \
		h = cli_leaf_##x(h) ^ 1;                                           \
		__asm__ volatile("" : "+r"(h));                                    \
		return h + 3;                                                      \
	}                                                                          \
	__attribute__((noinline, noclone)) static void cli_outer_##x(void)          \
	{                                                                          \
		volatile uint64_t sink = 0;                                        \
		for (;;)                                                           \
			sink = cli_middle_##x(sink) + 7;                           \
	}

CHAIN(a)
CHAIN(b)

static void *worker(void *arg)
{
	const long i = (long)arg;

	pthread_mutex_lock(&lock);
	tids[i] = (pid_t)syscall(SYS_gettid);
	started++;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&lock);
	if (i == 0)
		cli_outer_a();
	if (idle_others) {
		for (;;) {
			struct timespec ts = {0, 10 * 1000 * 1000};

			nanosleep(&ts, NULL);
		}
	}
	cli_outer_b();
	return NULL;
}

int main(int argc, char **argv)
{
	const double seconds = argc > 1 ? atof(argv[1]) : 0;
	const long n = argc > 2 ? atol(argv[2]) : 1;
	pthread_attr_t attr;

	idle_others = argc > 3 && strcmp(argv[3], "idle") == 0;
	if (n < 1 || n > 1000) {
		fprintf(stderr, "cli_workload: 1..1000 threads\n");
		return 2;
	}
	tids = calloc((size_t)n, sizeof(*tids));
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (long i = 0; i < n; i++) {
		pthread_t t;

		if (pthread_create(&t, &attr, worker, (void *)i) != 0) {
			perror("cli_workload: pthread_create");
			return 1;
		}
	}
	pthread_mutex_lock(&lock);
	while (started < n)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	for (long i = 0; i < n; i++)
		printf("tid %ld %d\n", i, (int)tids[i]);
	printf("ready\n");
	fflush(stdout);
	if (seconds > 0) {
		struct timespec ts = {(time_t)seconds,
				      (long)((seconds - (double)(time_t)seconds) * 1e9)};
		struct timespec cpu;

		nanosleep(&ts, NULL);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
		printf("cpu_ns %llu\n",
		       (unsigned long long)cpu.tv_sec * 1000000000ull + (unsigned long long)cpu.tv_nsec);
		fflush(stdout);
		_exit(0);
	}
	for (;;)
		pause();
}
