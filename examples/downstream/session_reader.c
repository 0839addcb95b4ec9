/*
 * A downstream C program: reads a session of the sframe_unwind module with
 * libsframe-client's C API, found with pkg-config.
 *
 * It does what a profiler does for one process, itself: registers the
 * .sframe of what it has loaded (it is built with -Wa,--gsframe), opens a
 * perf event that samples its own CPU time (perf_event_open(2), with the
 * ring buffer perf needs to deliver samples), starts a session for its own
 * process, and burns CPU in a chain of three functions while it reads the
 * stitched stacks.  It prints what it got and exits 0 only if at least 20
 * samples came and at least 90 % of them carry a user stack of three or more
 * frames (the spinning function, its two callers, and further down main).
 *
 * Needs the right to open a perf event on itself (root, or
 * kernel.perf_event_paranoid <= 2) and to open /dev/sframe_unwind.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <sframe_client/sframe_client.h>

#define RING_PAGES 8 /* data pages of the perf ring, a power of two */
#define MIN_SAMPLES 20
#define MAX_SECONDS 60

struct tally {
	unsigned samples, deep, lost;
	uint32_t first_nr_user;
	uint64_t first_user[8];
};

static int on_record(void *ctx, const struct sframe_client_record *rec)
{
	struct tally *t = ctx;

	if (rec->type == SFRAME_RECORD_LOST) {
		t->lost += (unsigned)rec->lost;
		return 0;
	}
	if (rec->type != SFRAME_RECORD_SAMPLE)
		return 0;
	if (t->samples == 0) {
		t->first_nr_user = rec->nr_user;
		for (uint32_t i = 0; i < rec->nr_user && i < 8; i++)
			t->first_user[i] = rec->user[i];
	}
	t->samples++;
	if (rec->nr_user >= 3)
		t->deep++;
	return 0;
}

/* The CPU burner, three frames deep; volatile keeps the work. */
static volatile uint64_t sink;
__attribute__((noinline)) static void spin(unsigned rounds)
{
	for (unsigned i = 0; i < rounds; i++)
		sink = sink * 6364136223846793005ull + i;
}
__attribute__((noinline)) static void middle(unsigned rounds)
{
	spin(rounds);
	__asm__ volatile("" ::: "memory"); /* no tail call */
}
__attribute__((noinline)) static void outer(unsigned rounds)
{
	middle(rounds);
	__asm__ volatile("" ::: "memory");
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "session_reader: %s: %s (%s)\n", what, sframe_client_errmsg(),
		sframe_client_errno_name(err));
	return 1;
}

int main(void)
{
	struct sframe_client_device *dev = NULL;
	struct sframe_client_session *sess = NULL;
	struct tally t = { 0 };
	size_t registered = 0;
	int err, rc = 1;

	printf("libsframe-client %s\n", sframe_client_version());
	err = sframe_client_open(NULL, &dev);
	if (err)
		return fail("open", err);
	err = sframe_client_register_loaded_objects(dev, &registered);
	if (err) {
		rc = fail("register loaded objects", err);
		goto out;
	}
	printf("registered %zu object(s) with .sframe\n", registered);

	/* A cpu-clock event on this process, 1000 samples per second of CPU. */
	struct perf_event_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_CPU_CLOCK;
	attr.freq = 1;
	attr.sample_freq = 1000;
	attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
	attr.disabled = 1;
	attr.exclude_hv = 1;
	int pfd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (pfd < 0) {
		fprintf(stderr, "session_reader: perf_event_open: %s\n", strerror(errno));
		goto out;
	}
	long page = sysconf(_SC_PAGESIZE);
	size_t ring_len = (size_t)page * (RING_PAGES + 1);
	struct perf_event_mmap_page *ring =
		mmap(NULL, ring_len, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0);
	if (ring == MAP_FAILED) {
		fprintf(stderr, "session_reader: mmap of the perf ring: %s\n", strerror(errno));
		goto out_perf;
	}

	err = sframe_client_session_start(SFRAME_TARGET_PROCESS, getpid(), NULL, &sess);
	if (err) {
		rc = fail("session start", err);
		goto out_ring;
	}
	ioctl(pfd, PERF_EVENT_IOC_ENABLE, 0);
	double t0 = now_s();
	while (t.samples < 10 * MIN_SAMPLES && now_s() - t0 < MAX_SECONDS) {
		outer(2000000);
		/* perf's own copies of the samples are not needed: drop them. */
		__atomic_store_n(&ring->data_tail, __atomic_load_n(&ring->data_head, __ATOMIC_ACQUIRE),
				 __ATOMIC_RELEASE);
		int n = sframe_client_session_read(sess, on_record, &t);
		if (n < 0) {
			rc = fail("session read", n);
			goto out_sess;
		}
	}
	ioctl(pfd, PERF_EVENT_IOC_DISABLE, 0);
	while (sframe_client_session_poll(sess, 200) > 0 &&
	       sframe_client_session_read(sess, on_record, &t) > 0)
		;

	printf("%u samples, %u with >= 3 user frames, %u lost, %.1f s\n", t.samples, t.deep,
	       t.lost, now_s() - t0);
	if (t.samples) {
		printf("first sample's user stack (%u frames):", t.first_nr_user);
		for (uint32_t i = 0; i < t.first_nr_user && i < 8; i++)
			printf(" %#" PRIx64, t.first_user[i]);
		printf("\n");
	}
	if (t.samples >= MIN_SAMPLES && t.deep * 10 >= t.samples * 9) {
		printf("OK\n");
		rc = 0;
	} else {
		printf("FAIL: need >= %d samples, >= 90 %% of them with >= 3 user frames\n",
		       MIN_SAMPLES);
	}
out_sess:
	sframe_client_session_close(sess);
out_ring:
	munmap(ring, ring_len);
out_perf:
	close(pfd);
out:
	sframe_client_close(dev);
	return rc;
}
