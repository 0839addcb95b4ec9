/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Deferred user unwinding, after upstream's kernel/unwind/deferred.c: a
 * sample taken in NMI or IRQ context keeps its kernel stack; the user
 * stack is unwound once per kernel entry, when the task returns to user
 * space, and handed with every sample of that entry to the consumer.
 *
 * The layer knows nothing of its consumer: the consumer gives its
 * callbacks to sframe_deferred_init() and asks for samples with
 * sframe_deferred_request(), passing an opaque context that comes back
 * with each sample.
 */
#ifndef SFRAME_DEFERRED_H
#define SFRAME_DEFERRED_H

#include <linux/llist.h>
#include <linux/ptrace.h>
#include <linux/types.h>

#include "sframe_unwind.h"

struct pid;

/* The consumer's own words about a sample, returned with it. */
struct sframe_sample_ctx {
	const void *key; /* compared, never dereferenced, by this layer */
	u64 seq;
	/*
	 * Never dereferenced by this layer either, and kept only in a sample
	 * delivered before sframe_deferred_request() returns (unwound in the
	 * interrupt), within the caller's RCU read side: NULL in a sample
	 * delivered later.  The consumer's shortcut to where the sample goes.
	 */
	void *now;
	/*
	 * SFRAME_SAMPLE_F_* the consumer knows already that mean the sample
	 * gets no user stack (SFRAME_SAMPLE_F_CROSS_TASK), or 0.
	 */
	u32 no_user;
};

/* One sample waiting for its user stack. */
struct sframe_sample {
	struct llist_node node;
	struct sframe_sample_ctx ctx;
	u64 cookie;        /* names the kernel entry, as upstream's */
	u64 time;
	u64 self_exec_id;  /* the task's, at sample time */
	/*
	 * The task's objective credentials (real_cred) at sample time,
	 * compared (never dereferenced) with them when the user stack is
	 * taken.
	 */
	const void *cred;
	struct pid *pid;   /* the sampled thread, referenced while queued */
	struct pid *tgid;  /* its process, referenced while queued */
	u32 cpu;
	u32 home_cpu;      /* pool it came from */
	u32 share;         /* its user's share bucket (deferred.c) */
	u32 flags;         /* SFRAME_SAMPLE_F_* */
	u32 nr_kernel;
	u64 kernel[SFRAME_SESSION_MAX_KERNEL_FRAMES];
};

/*
 * The user stack of one kernel entry, unwound once per method some
 * consumer asks for (SFRAME_UNWIND_F_SFRAME, _FP or both): index by the
 * flags.
 */
struct sframe_user_stacks {
	u64 *frames[SFRAME_UNWIND_F_ALL + 1]; /* NULL: not unwound */
	u32 nr[SFRAME_UNWIND_F_ALL + 1];
	u32 stop[SFRAME_UNWIND_F_ALL + 1];    /* enum sframe_stop_reason */
};

struct sframe_deferred_ops {
	/*
	 * A sample is done: its user stack is in stacks (NULL when it has
	 * none; flags say why).  SFRAME_SAMPLE_F_NOT_DUMPABLE in flags: the
	 * stack is of an image the sample's reader may not be allowed to
	 * see (the task's credentials changed since the sample, or it is
	 * not dumpable); the consumer decides.  Process or IRQ context, never NMI; on
	 * PREEMPT_RT atomic too (the sample path itself, or a hard
	 * irq_work), so it must not take a sleeping lock (compat.h).
	 */
	void (*deliver)(const struct sframe_sample *smp, u32 flags,
			const struct sframe_user_stacks *stacks);
};

int sframe_deferred_init(const struct sframe_deferred_ops *ops);
/*
 * The longest user walk wanted and the methods in use (bit f for unwind
 * flags f), for the walks from now on; the consumer's writers serialise.
 */
void sframe_deferred_set_walk(u32 max_frames, u32 methods);
/* Allocate the sample and request pools; before the first request. */
int sframe_deferred_prepare(void);
/*
 * Stop: no request comes any more (the perf hook is gone).  Cancels or
 * waits for every pending unwind, so no task_work, irq_work or work item
 * points into the module once this returns.
 */
void sframe_deferred_exit(void);

/*
 * Take a sample of current with the registers regs.  Any context, NMI
 * included: takes no lock, does not sleep or fault.  Returns false when
 * the sample had to be dropped (no free sample buffer or request).
 */
bool sframe_deferred_request(struct pt_regs *regs,
			     const struct sframe_sample_ctx *ctx);

#endif /* SFRAME_DEFERRED_H */
