/*
 * A shared library whose functions call each other and libc through the
 * PLT, for the differential test (tests/libsframe_diff): sid's ld makes
 * PC-mask SFrame FDEs for .plt, .plt.got and .plt.sec.
 */
#include <stdio.h>
#include <stdlib.h>

int plt_f1(int x)
{
	printf("%d\n", x);
	return x + 1;
}

int plt_f2(int x)
{
	return plt_f1(x) * 2;
}

int plt_f3(int x)
{
	puts("plt_f3");
	return plt_f2(x) + plt_f1(x) + abs(x);
}

int plt_f4(const char *s)
{
	return atoi(s) + plt_f3(1);
}
