/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the user walks done in interrupt context cost: the module
 * parameters irq_walks, irq_walk_ns and irq_walk_max_ns, for the
 * benchmarks and the bounds tests.  Built only with SFRAME_WALK_TIMING=y
 * (module/Kbuild; on with SFRAME_TEST_HOOKS=y): a user's module has no
 * such parameter and its sample path no clock read for them.
 */
#ifndef SFRAME_WALK_TIMING_H
#define SFRAME_WALK_TIMING_H

#include <linux/types.h>

#ifdef SFRAME_WALK_TIMING
#include <asm/msr.h>

/* The start of a walk, in TSC cycles. */
static inline u64 sframe_walk_timing_start(void)
{
	return rdtsc();
}

/* A walk that started at start (sframe_walk_timing_start()) is done. */
void sframe_walk_timing_note(u64 start);
#else
static inline u64 sframe_walk_timing_start(void)
{
	return 0;
}

static inline void sframe_walk_timing_note(u64 start)
{
}
#endif

#endif /* SFRAME_WALK_TIMING_H */
