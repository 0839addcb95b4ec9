/*
 * Functions with different frame shapes, compiled with -Wa,--gsframe so
 * that the host tests can compare the decoder against readelf --sframe.
 * Every function is noinline and used, so each keeps its own FDE.
 */
#include <alloca.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

volatile int sink;

/* No stack change at all: one FRE (CFA = SP + 8). */
__attribute__((noinline)) int leaf(int a)
{
	return a * 3 + 1;
}

/* Callee-saved pushes and pops: a row per push and per pop. */
__attribute__((noinline)) long pushes(long a, long b, long c, long d)
{
	long x = a * b, y = b * c, z = c * d, w = d * a;

	printf("%ld %ld\n", x, y);
	printf("%ld %ld\n", z, w);
	return x + y + z + w + a + b + c + d;
}

/* alloca: the frame size varies, so the CFA moves to RBP. */
__attribute__((noinline)) int varframe(int n)
{
	char *p = alloca(n);

	memset(p, 1, n);
	return p[n / 2] + puts("varframe");
}

/* Frame of a few KiB: 2-byte CFA offsets. */
__attribute__((noinline)) int medium(int n)
{
	volatile char buf[4000];

	buf[n] = 1;
	return buf[n / 2];
}

/* Frame over 32 KiB: 4-byte CFA offsets. */
__attribute__((noinline)) int big(int n)
{
	volatile char buf[100000];

	buf[n] = 1;
	return buf[n / 2];
}

/*
 * A body over 64 KiB with pops at its end: FREs that need 4-byte start
 * offsets (SFRAME_FRE_TYPE_ADDR4).
 */
#define S1(i) sink = (i) * 7 + n;
#define S10(i) S1(i) S1(i + 1) S1(i + 2) S1(i + 3) S1(i + 4) S1(i + 5) \
	S1(i + 6) S1(i + 7) S1(i + 8) S1(i + 9)
#define S100(i) S10(i) S10(i + 10) S10(i + 20) S10(i + 30) S10(i + 40) \
	S10(i + 50) S10(i + 60) S10(i + 70) S10(i + 80) S10(i + 90)
#define S1000(i) S100(i) S100(i + 100) S100(i + 200) S100(i + 300) \
	S100(i + 400) S100(i + 500) S100(i + 600) S100(i + 700) \
	S100(i + 800) S100(i + 900)
__attribute__((noinline)) long longbody(long n, long m, long k)
{
	long r = pushes(n, m, k, n + m);

	S1000(0) S1000(1000) S1000(2000) S1000(3000) S1000(4000)
	S1000(5000) S1000(6000) S1000(7000) S1000(8000) S1000(9000)
	return r + pushes(r, n, m, k);
}

/* A body between 256 bytes and 64 KiB: 2-byte start offsets. */
__attribute__((noinline)) long midbody(long n, long m)
{
	long r = pushes(n, m, n, m);

	S100(0) S100(100)
	return r + pushes(r, n, m, r);
}

/* Recursion, so the stack holds several frames of one function. */
__attribute__((noinline)) int recurse(int n)
{
	if (n <= 0)
		return leaf(n);
	return recurse(n - 1) + (int)strlen("abc") + n;
}

int main(int argc, char **argv)
{
	long r = leaf(argc);

	(void)argv;
	r += pushes(argc, 2, 3, 4);
	r += varframe(argc + 10);
	r += medium(argc) + big(argc);
	r += longbody(argc, 2, 3) + midbody(argc, 5);
	r += recurse(argc + 3);
	if (argc > 100)
		abort();
	return (int)(r & 1);
}
