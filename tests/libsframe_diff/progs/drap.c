/*
 * Stack realignment with a DRAP register, for the differential test
 * (tests/libsframe_diff): with -mstackrealign, a 32-byte aligned local
 * and a frame of variable size (or arguments on the stack), gcc saves the
 * incoming SP in %r10 (lea 8(%rsp),%r10; and $-32,%rsp), describes the CFA
 * as %r10 and then as *(%rbp - 8) (DW_CFA_def_cfa_expression), and the
 * caller's RBP as *(%rbp) (DW_CFA_expression): gas makes flexible FDEs.
 */
#include <stdio.h>
#include <string.h>

volatile int dsink;

__attribute__((noinline)) void use(void *p)
{
	dsink += *(volatile char *)p;
}

/* Realigned with a VLA: DRAP. */
__attribute__((noinline)) int drap_vla(int n)
{
	char buf[64] __attribute__((aligned(32)));
	char v[n];

	memset(v, 1, n);
	memset(buf, n, sizeof(buf));
	use(v);
	use(buf);
	return v[n / 2] + buf[3];
}

/* Realigned with arguments on the stack (the 7th and 8th). */
__attribute__((noinline)) int drap_args(int a, int b, int c, int d, int e,
					int f, int g, int h)
{
	char buf[96] __attribute__((aligned(32)));

	memset(buf, a + h, sizeof(buf));
	use(buf);
	return buf[5] + g + b + c + d + e + f;
}

/* Realigned with alloca and a call that needs the frame. */
__attribute__((noinline)) int drap_alloca(int n)
{
	double d[4] __attribute__((aligned(32))) = { n, n + 1, n + 2, n + 3 };
	char *p = __builtin_alloca(n + 1);

	memset(p, 0, n + 1);
	use(p);
	use(d);
	return printf("%d %f\n", p[0], d[2]);
}

int main(int argc, char **argv)
{
	(void)argv;
	return drap_vla(argc + 10) + drap_args(1, 2, 3, 4, 5, 6, 7, argc) +
	       drap_alloca(argc);
}
