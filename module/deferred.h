/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Deferred user unwinding: samples taken in NMI or IRQ context keep their
 * kernel stack; the user stack is unwound once per kernel entry, when the
 * task returns to user space, and stitched to every sample of that entry.
 */
#ifndef SFRAME_DEFERRED_H
#define SFRAME_DEFERRED_H

#include <linux/llist.h>
#include <linux/ptrace.h>
#include <linux/types.h>

#include "sframe_unwind.h"

/* One sample waiting for its user stack. */
struct sframe_sample {
	struct llist_node node;
	u64 cookie;
	u64 time;
	u64 self_exec_id;  /* the task's, at sample time */
	pid_t tid, tgid;   /* in the initial pid namespace */
	pid_t owner_tgid;  /* process that owns the sampled perf event */
	u32 cpu;
	u32 home_cpu;      /* pool it came from */
	u32 flags;         /* SFRAME_SAMPLE_F_* */
	u32 nr_kernel;
	u64 kernel[SFRAME_SESSION_MAX_KERNEL_FRAMES];
};

/*
 * The user stack of one kernel entry, unwound once per method some session
 * asks for (SFRAME_UNWIND_F_SFRAME, _FP or both): index by the flags.
 */
struct sframe_user_stacks {
	u64 *frames[SFRAME_UNWIND_F_ALL + 1]; /* NULL: not unwound */
	u32 nr[SFRAME_UNWIND_F_ALL + 1];
	u32 stop[SFRAME_UNWIND_F_ALL + 1];    /* enum sframe_stop_reason */
};

int sframe_deferred_init(void);
/* Allocate the sample pools; called before the first session starts. */
int sframe_deferred_prepare(void);
/*
 * Stop: no sample is taken any more (the hook is gone).  Cancels or waits
 * for every pending unwind, so no task_work or irq_work points into the
 * module once this returns.
 */
void sframe_deferred_exit(void);

/*
 * Capture a sample of current taken with the registers regs, for the
 * sessions of owner_tgid.  Any context, NMI included: takes no lock,
 * does not sleep or fault.  Returns false when the sample had to be
 * dropped (no free sample buffer or task slot).
 */
bool sframe_deferred_sample(struct pt_regs *regs, pid_t owner_tgid);

#endif /* SFRAME_DEFERRED_H */
