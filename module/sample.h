/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Samples for the sessions: what the perf hook's sample of current becomes
 * until its user stack is known (sample.c).  The consumer side of
 * deferred.c: the samples' pools, their kernel stacks and pid references,
 * the walk done at once in an interrupt when it can finish there, and how
 * long a sample may wait for its task.
 */
#ifndef SFRAME_SAMPLE_H
#define SFRAME_SAMPLE_H

#include <linux/ptrace.h>
#include <linux/types.h>

#include "deferred.h"
#include "sframe_unwind.h"
#include "unwind.h"

struct pid;

/* The sessions' own words about a sample, returned with it. */
struct sframe_sample_ctx {
	const void *key; /* compared, never dereferenced, by sample.c */
	u64 seq;
	/*
	 * Never dereferenced by sample.c either, and kept only in a sample
	 * delivered before sframe_samples_take() returns (unwound in the
	 * interrupt), within the caller's RCU read side: NULL in a sample
	 * delivered later.  The sessions' shortcut to where the sample goes.
	 */
	void *now;
	/*
	 * SFRAME_SAMPLE_F_* the caller knows already that mean the sample
	 * gets no user stack (SFRAME_SAMPLE_F_CROSS_TASK), or 0.
	 */
	u32 no_user;
};

/* One sample waiting for its user stack. */
struct sframe_sample {
	/* Its place in deferred.c's request: time, cookie (deferred.h). */
	struct sframe_unwind_item item;
	struct sframe_sample_ctx ctx;
	struct pid *pid;   /* the sampled thread, referenced while queued */
	struct pid *tgid;  /* its process, referenced while queued */
	u32 cpu;
	u32 home_cpu;      /* pool it came from */
	u32 share;         /* its user's share bucket (pcpu_pool.h) */
	u32 flags;         /* SFRAME_SAMPLE_F_* */
	u32 nr_kernel;
	u64 kernel[SFRAME_SESSION_MAX_KERNEL_FRAMES];
};

struct sframe_sample_ops {
	/*
	 * A sample is done: its user stack is in stacks (NULL when it has
	 * none; flags say why).  SFRAME_SAMPLE_F_NOT_DUMPABLE in flags: the
	 * stack is of an image the sample's reader may not be allowed to
	 * see; the sessions decide.  Process or IRQ context, never NMI; on
	 * PREEMPT_RT atomic too (the sample path itself, or a hard
	 * irq_work), so it must not take a sleeping lock (compat.h).
	 */
	void (*deliver)(const struct sframe_sample *smp, u32 flags,
			const struct sframe_user_stacks *stacks);
};

int sframe_samples_init(const struct sframe_sample_ops *ops);
/*
 * The longest user walk wanted and the methods in use (bit f for unwind
 * flags f), for the walks from now on; the sessions' writers serialise.
 */
void sframe_samples_set_walk(u32 max_frames, u32 methods);
/* Allocate the sample (and deferred.c's request) pools; before the first sample. */
int sframe_samples_prepare(void);
/*
 * Stop: no sample comes any more (the perf hook is gone).  Hands back or
 * waits for every sample in flight, so no work of sample.c or deferred.c
 * points into the module once this returns.
 */
void sframe_samples_exit(void);

/*
 * Take a sample of current with the registers regs.  Any context, NMI
 * included: takes no lock, does not sleep or fault.  Returns false when
 * the sample had to be dropped (no free sample buffer or request).
 */
bool sframe_samples_take(struct pt_regs *regs,
			 const struct sframe_sample_ctx *ctx);

#endif /* SFRAME_SAMPLE_H */
