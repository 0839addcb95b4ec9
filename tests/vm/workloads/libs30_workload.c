/*
 * A program with 30 shared libraries of its own (libs30_l1.so ..
 * libs30_l30.so, DT_NEEDED, found through its RUNPATH), each called in
 * its loop: prof_vmtest counts the files a recording of it opens (each
 * once: userlib/object's ObjectTable).  Argument: rounds (default 2e6).
 */
#include <stdlib.h>

#define LIBS30(X)                                                         \
	X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12)   \
	X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22)       \
	X(23) X(24) X(25) X(26) X(27) X(28) X(29) X(30)

#define DECLARE(i) int libs30_f##i(long x);
LIBS30(DECLARE)

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 2000000;
	volatile long sum = 0;

	for (long k = 0; k < rounds; k++) {
#define CALL(i) sum += libs30_f##i(k);
		LIBS30(CALL)
	}
	return sum == 42;
}
