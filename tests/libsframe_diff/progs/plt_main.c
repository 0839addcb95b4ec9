/* The executable of the PLT part of tests/libsframe_diff. */
#include <stdio.h>
#include <stdlib.h>

int plt_f1(int), plt_f2(int), plt_f3(int), plt_f4(const char *);

int main(int argc, char **argv)
{
	int r = plt_f1(argc) + plt_f2(argc) + plt_f3(argc);

	if (argc > 1)
		r += plt_f4(argv[1]);
	printf("%d\n", r);
	exit(r & 1);
}
