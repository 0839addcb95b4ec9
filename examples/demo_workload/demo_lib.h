#ifndef DEMO_LIB_H
#define DEMO_LIB_H

#include <stddef.h>
#include <stdint.h>

/* Sorts v with libc's qsort (a callback in this library). */
void demo_sort(uint64_t *v, size_t n);
/* Some arithmetic over v. */
double demo_mix(const uint64_t *v, size_t n);

#endif
