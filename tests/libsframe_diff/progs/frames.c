/*
 * Variable-size frames for the differential test (tests/libsframe_diff):
 * alloca and VLAs make gcc keep the CFA on RBP even at -O2; the other
 * functions give shrink-wrapped prologues, several epilogues and tail
 * calls.  Built with shapes.c (tests/host/progs), which has main.
 */
#include <alloca.h>
#include <stdio.h>
#include <string.h>

extern volatile int sink;

__attribute__((noinline)) int vla_sum(int n)
{
	int v[n];

	for (int i = 0; i < n; i++)
		v[i] = i * sink;
	return v[n / 2] + puts("vla_sum");
}

/* alloca in a loop: the frame grows at each turn. */
__attribute__((noinline)) int alloca_loop(int n)
{
	int t = 0;

	for (int i = 1; i <= n; i++) {
		char *p = alloca(i * 16);

		memset(p, i, i * 16);
		t += p[i];
	}
	return t;
}

/* A VLA in an inner block, and a call after it ends. */
__attribute__((noinline)) int vla_block(int n, int m)
{
	int r = 0;

	if (n > 0) {
		char b[n * m + 1];

		memset(b, 2, sizeof(b));
		r = b[n] + puts("vla_block");
	}
	return r + printf("%d\n", m);
}

/* Early return before any frame is made (shrink-wrapping). */
__attribute__((noinline)) long shrink(long n)
{
	if (n < 0)
		return -1;
	char buf[256];

	snprintf(buf, sizeof(buf), "%ld", n);
	return (long)strlen(buf) + puts(buf);
}

/* Several returns from different stack depths. */
__attribute__((noinline)) int multi_ret(int a, int b, int c)
{
	if (a == b)
		return c;
	int x = printf("%d %d\n", a, b);
	if (x > c)
		return x + puts("multi_ret");
	int y = printf("%d\n", c);
	return x + y;
}

/* A tail call after a frame was taken down. */
__attribute__((noinline)) int tail(int n)
{
	printf("tail %d\n", n);
	return vla_sum(n + 1);
}

int frames_all(int n)
{
	return vla_sum(n) + alloca_loop(n) + vla_block(n, n + 1) +
	       (int)shrink(n) + multi_ret(n, n + 1, n + 2) + tail(n);
}
