// SPDX-License-Identifier: GPL-2.0
/*
 * Samples for the sessions (sample.h): the consumer side of deferred.c.
 *
 * A sample keeps its kernel stack, taken at sample time as perf takes it,
 * and waits for its user stack: deferred.c walks it once per kernel entry
 * when the task returns to user space, and hands the sample back through
 * sframe_samples_unwound().  A sample taken in user mode in an interrupt
 * (not NMI) is walked at once instead, when that walk can finish there
 * (sframe_samples_walk_now()).  Samples that can have no user stack
 * (kernel threads, tasks whose mm is gone or that exit, 32-bit tasks) are
 * delivered from an irq_work.
 *
 * Sample buffers come from per-CPU pools filled before the first sample
 * (pcpu_pool.h): nothing is allocated in NMI.  A queued sample holds its
 * thread's and process's pids, so a sample delivered after its task
 * exited still names them.
 *
 * A task may block in the kernel for hours after a sample.  Its samples
 * are not held for that long: the flusher (a delayed work) expires every
 * request older than sample_max_wait_ms (deferred.c delivers its samples
 * with their kernel stacks and SFRAME_SAMPLE_F_TIMEOUT, and cancels its
 * walk).  So a sample waits at most sample_max_wait_ms plus one flusher
 * period, and the pools cannot be drained by tasks that never return.
 */
#include <linux/irq_work.h>
#include <linux/moduleparam.h>
#include <linux/percpu.h>
#include <linux/pid.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/timekeeping.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <asm/unwind.h>

#include "compat.h"
#include "deferred.h"
#include "pcpu_pool.h"
#include "sample.h"
#include "sframe_unwind.h"
#include "stats.h"
#include "unwind.h"
#include "walk_timing.h"

#define SAMPLES_PER_CPU 512

static unsigned int sample_max_wait_ms = 250;
module_param(sample_max_wait_ms, uint, 0644);
MODULE_PARM_DESC(sample_max_wait_ms,
		 "Longest a session sample waits for its task to return to user space (ms, 10..10000)");

struct sframe_immediate {
	struct llist_head samples;  /* samples without a user stack */
	struct irq_work work;
};

static const struct sframe_sample_ops *sframe_ops;
static struct sframe_unwind_work sframe_samples_work;

/*
 * The sessions' walk (sframe_samples_set_walk()) in one word, which the
 * sample path reads without calling back: max_frames << 32 | methods.
 */
static u64 sframe_samples_walk_params;

/* Each user's share of a CPU's samples (pcpu_pool.h). */
#define SFRAME_SAMPLE_SHARE (SAMPLES_PER_CPU / 2)
struct sframe_sample_shares {
	atomic_t held[1 << SFRAME_SHARE_BITS];
};
static DEFINE_PER_CPU(struct sframe_sample_shares, sframe_sample_shares);

static DEFINE_PER_CPU(struct sframe_pool, sframe_sample_pool);
static DEFINE_PER_CPU(struct sframe_immediate, sframe_immediate);
static struct sframe_sample *sframe_sample_mem;   /* all CPUs' buffers */
static bool sframe_samples_ready;

static void sframe_flush_fn(struct work_struct *work);
static DECLARE_DELAYED_WORK(sframe_flush_work, sframe_flush_fn);
/* From NMI, the flusher is scheduled through a hard irq_work. */
static struct irq_work sframe_flush_kick_work;

/*
 * Walks done in the interrupt itself: see sframe_samples_walk_now().  The
 * sample is delivered before the interrupt returns, so it needs no pool
 * entry and no references: one per CPU serves, as the hook does not
 * nest within one context (perf_hook.c) and NMIs never take this path.
 */
#define SFRAME_NOW_MAX_FRAMES 128
struct sframe_now_buf {
	u64 frames[SFRAME_UNWIND_F_ALL][SFRAME_NOW_MAX_FRAMES];
	struct sframe_sample sample;
	/*
	 * The walk's state (some 400 bytes) is here rather than on the
	 * stack: the kernel is built to zero every local (Debian's
	 * INIT_STACK_ALL_ZERO), a `rep stos` that qemu counts a word at a
	 * time, and sframe_unwind_start() sets what a walk reads.  The
	 * same for the stacks handed to the sessions.
	 */
	struct sframe_user_unwind uw;
	struct sframe_user_stacks stacks;
};
static struct sframe_now_buf __percpu *sframe_now_bufs;

void sframe_samples_set_walk(u32 max_frames, u32 methods)
{
	WRITE_ONCE(sframe_samples_walk_params, (u64)max_frames << 32 | methods);
	sframe_unwind_deferred_set_walk(&sframe_samples_work, max_frames,
					methods);
}

static void sframe_samples_walk_get(u32 *max_frames, u32 *methods)
{
	u64 p = READ_ONCE(sframe_samples_walk_params);

	*max_frames = p >> 32;
	*methods = (u32)p;
}

static void sframe_sample_free(struct sframe_sample *smp)
{
	put_pid(smp->pid);
	put_pid(smp->tgid);
	atomic_dec(&per_cpu_ptr(&sframe_sample_shares, smp->home_cpu)->held[smp->share]);
	sframe_pool_push(&sframe_sample_pool, smp->home_cpu, &smp->item.node);
}

/* Hand a finished sample to the sessions, and free it. */
static void sframe_sample_done(struct sframe_sample *smp, u32 flags,
			       const struct sframe_user_stacks *stacks)
{
	sframe_ops->deliver(smp, smp->flags | flags, stacks);
	sframe_sample_free(smp);
}

/* deferred.c is done with a sample: its walk ran, or it expired. */
static void sframe_samples_unwound(struct sframe_unwind_item *item, u32 flags,
				   const struct sframe_user_stacks *stacks)
{
	sframe_sample_done(container_of(item, struct sframe_sample, item),
			   flags, stacks);
}

/*
 * The kernel stack of the sample, as perf_callchain_kernel() takes it:
 * from the sampled registers when they are real (hardware events), and
 * from the stack pointer when perf synthesized them (software and
 * tracepoint events: perf_fetch_caller_regs() leaves the flags without
 * X86_EFLAGS_FIXED, the test of perf_hw_regs()), frame for frame as
 * arch/x86/events/core.c of 6.1 does.
 */
static u32 sframe_capture_kernel(struct pt_regs *regs, u64 *ips, u32 max)
{
	struct unwind_state state;
	unsigned long addr;
	u32 n = 0;

	if (user_mode(regs))
		return 0;
	if (regs->flags & X86_EFLAGS_FIXED) {
		ips[n++] = regs->ip;
		unwind_start(&state, current, regs, NULL);
	} else {
		/* The first frame the unwinder reports is regs->ip's. */
		unwind_start(&state, current, NULL, (void *)regs->sp);
	}
	for (; !unwind_done(&state) && n < max; unwind_next_frame(&state)) {
		addr = unwind_get_return_address(&state);
		if (!addr)
			break;
		ips[n++] = addr;
	}
	return n;
}

/* Deliver samples that have no user stack (IRQ context; on RT a thread). */
static void sframe_immediate_run(struct irq_work *work)
{
	struct sframe_immediate *imm =
		container_of(work, struct sframe_immediate, work);
	struct llist_node *list = llist_del_all(&imm->samples);
	struct sframe_sample *smp, *next;

	llist_for_each_entry_safe(smp, next, list, item.node)
		sframe_sample_done(smp, SFRAME_SAMPLE_F_NO_USER, NULL);
}

static void sframe_immediate_queue(struct sframe_sample *smp, u32 flags)
{
	struct sframe_immediate *imm = this_cpu_ptr(&sframe_immediate);

	smp->flags |= flags;
	llist_add(&smp->item.node, &imm->samples);
	irq_work_queue(&imm->work);
}

static u32 sframe_max_wait_ms(void)
{
	return clamp(READ_ONCE(sample_max_wait_ms), 10u, 10000u);
}

/* A sample waits: make sure the flusher will look at it.  Not NMI. */
static void sframe_flush_kick(void)
{
	if (!delayed_work_pending(&sframe_flush_work))
		schedule_delayed_work(&sframe_flush_work,
				      msecs_to_jiffies(sframe_max_wait_ms()));
}

/* Hard IRQ context (even on RT), after an NMI whose sample waits. */
static void sframe_flush_kick_irq(struct irq_work *work)
{
	sframe_flush_kick();
}

/*
 * Expire the requests that waited too long: their tasks are blocked in
 * the kernel (or busy there).  Their samples go out with the kernel stack
 * only, and their walks are cancelled, so they hold nothing.
 */
static void sframe_flush_fn(struct work_struct *work)
{
	bool pending;
	u32 n;

	n = sframe_unwind_deferred_expire((u64)sframe_max_wait_ms() * NSEC_PER_MSEC,
					  &pending);
	atomic64_add(n, &sframe_counters.samples_timed_out);
	if (pending)
		schedule_delayed_work(&sframe_flush_work,
				      msecs_to_jiffies(sframe_max_wait_ms()) / 2 + 1);
}

/*
 * A sample taken in user mode, in an interrupt (not NMI): its kernel
 * entry is that interrupt, so nothing is gained by waiting for the return
 * to user space, and a task_work costs the task a trip through the
 * notify-resume work.  Try the walk right here with page faults disabled
 * and a small fixed decoding budget; the sections and the stack are
 * usually resident (and decoded rows cached).  If a read would fault, the
 * budget runs out, or a session wants more frames than the per-CPU
 * buffers hold, return false: the caller defers as usual.
 *
 * Within one interrupt the task's credentials cannot change, so of
 * deferred.c's test for a stack its reader may not see only the
 * dumpability is left to look at.
 */
static bool sframe_samples_walk_now(struct sframe_sample *smp)
{
	struct sframe_now_buf *buf = this_cpu_ptr(sframe_now_bufs);
	struct sframe_user_stacks *stacks = &buf->stacks;
	u32 max_frames, methods, flags;
	bool ok = true;
	u64 t0;

	sframe_samples_walk_get(&max_frames, &methods);
	if (!max_frames || max_frames > SFRAME_NOW_MAX_FRAMES)
		return false;
	/* A method's counts are read only where its frames are set. */
	for (flags = 0; flags <= SFRAME_UNWIND_F_ALL; flags++)
		stacks->frames[flags] = NULL;
	t0 = sframe_walk_timing_start();
	pagefault_disable();
	for (flags = 1; flags <= SFRAME_UNWIND_F_ALL && ok; flags++) {
		if (methods & BIT(flags)) {
			u32 stop = sframe_unwind_user_stack(&buf->uw, stacks,
							    flags,
							    buf->frames[flags - 1],
							    max_frames, false);

			ok = stop != SFRAME_STOP_FAULT &&
			     stop != SFRAME_STOP_BUDGET &&
			     stop != SFRAME_STOP_RETRY_IN_TASK;
		}
	}
	pagefault_enable();
	sframe_walk_timing_note(t0);
	if (!ok)
		return false;
	smp->item.cookie = sframe_unwind_new_cookie();
	/* Delivered now: current holds its pids, and no pool had it. */
	sframe_ops->deliver(smp, smp->flags |
			    (sframe_dumpable_by_owner(current) ?
				     0 : SFRAME_SAMPLE_F_NOT_DUMPABLE),
			    stacks);
	return true;
}

/* Can current have a user stack we unwind? If not, why not. */
static u32 sframe_no_user_reason(struct task_struct *task)
{
	if (task->flags & PF_KTHREAD)
		return SFRAME_SAMPLE_F_KTHREAD;
	if (!task->mm)
		return SFRAME_SAMPLE_F_NO_USER;
	if (task->flags & PF_EXITING)
		return SFRAME_SAMPLE_F_EXITED;
	/* A 32-bit task (or one in 32-bit mode): not an AMD64 stack. */
	if (!user_64bit_mode(task_pt_regs(task)))
		return SFRAME_SAMPLE_F_COMPAT;
	return 0;
}

/* smp as current's sample at regs, taken at time; no references held. */
static void sframe_sample_fill(struct sframe_sample *smp,
			       struct pt_regs *regs,
			       const struct sframe_sample_ctx *ctx,
			       struct task_struct *task, u64 time)
{
	smp->ctx = *ctx;
	smp->item.time = time;
	smp->item.cookie = 0;
	smp->cpu = smp_processor_id();
	smp->pid = task_pid(task);
	smp->tgid = task_tgid(task);
	smp->flags = user_mode(regs) ? SFRAME_SAMPLE_F_USER_MODE : 0;
	smp->nr_kernel = 0;
}

bool sframe_samples_take(struct pt_regs *regs,
			 const struct sframe_sample_ctx *ctx)
{
	struct task_struct *task = current;
	struct sframe_sample *smp;
	struct llist_node *node;
	atomic_t *held;
	u32 why, share;
	u64 time;

	if (!READ_ONCE(sframe_samples_ready))
		return false;
	time = ktime_get_mono_fast_ns();
	why = ctx->no_user ? ctx->no_user | SFRAME_SAMPLE_F_NO_USER :
			     sframe_no_user_reason(task);
	if (!why && user_mode(regs) && !in_nmi()) {
		smp = &this_cpu_ptr(sframe_now_bufs)->sample;
		sframe_sample_fill(smp, regs, ctx, task, time);
		if (sframe_samples_walk_now(smp)) {
			atomic64_inc(&sframe_counters.samples_deferred);
			return true;
		}
	}

	share = sframe_share_bucket();
	held = &this_cpu_ptr(&sframe_sample_shares)->held[share];
	if (!sframe_share_take(held, SFRAME_SAMPLE_SHARE))
		return false;
	node = sframe_pool_pop(&sframe_sample_pool);
	if (!node) {
		atomic_dec(held);
		return false;
	}
	smp = container_of(node, struct sframe_sample, item.node);
	smp->share = share;
	atomic64_inc(&sframe_counters.samples_deferred);
	if (in_nmi())
		atomic64_inc(&sframe_counters.samples_nmi);
	sframe_sample_fill(smp, regs, ctx, task, time);
	/* Delivered after this returns: no shortcut (sample.h). */
	smp->ctx.now = NULL;
	/*
	 * Delivered later, perhaps after current exits: hold its pids
	 * (refcount increments: safe in NMI; current keeps both alive).
	 */
	get_pid(smp->pid);
	get_pid(smp->tgid);
	smp->nr_kernel = sframe_capture_kernel(regs, smp->kernel,
					       SFRAME_SESSION_MAX_KERNEL_FRAMES);

	if (why) {
		sframe_immediate_queue(smp, why);
		return true;
	}
	if (sframe_unwind_deferred_request(&sframe_samples_work, &smp->item)) {
		sframe_sample_free(smp);
		return false;
	}
	/* It waits for its task: the flusher bounds how long. */
	if (!delayed_work_pending(&sframe_flush_work)) {
		if (in_nmi())
			irq_work_queue(&sframe_flush_kick_work);
		else
			sframe_flush_kick();
	}
	return true;
}

int sframe_samples_prepare(void)
{
	unsigned int cpu, i;
	int ret;

	if (sframe_samples_ready)
		return 0;
	ret = sframe_unwind_deferred_prepare();
	if (ret)
		return ret;
	if (!sframe_now_bufs) {
		sframe_now_bufs = alloc_percpu(struct sframe_now_buf);
		if (!sframe_now_bufs)
			return -ENOMEM;
	}
	if (!sframe_sample_mem)
		sframe_sample_mem = vzalloc(array_size(nr_cpu_ids * SAMPLES_PER_CPU,
						       sizeof(*sframe_sample_mem)));
	if (!sframe_sample_mem)
		return -ENOMEM;
	for_each_possible_cpu(cpu) {
		for (i = 0; i < SAMPLES_PER_CPU; i++) {
			struct sframe_sample *smp =
				&sframe_sample_mem[cpu * SAMPLES_PER_CPU + i];

			smp->home_cpu = cpu;
			sframe_pool_push(&sframe_sample_pool, cpu, &smp->item.node);
		}
	}
	smp_store_release(&sframe_samples_ready, true);
	return 0;
}

int sframe_samples_init(const struct sframe_sample_ops *ops)
{
	int cpu;

	sframe_ops = ops;
	for_each_possible_cpu(cpu)
		init_irq_work(&per_cpu_ptr(&sframe_immediate, cpu)->work,
			      sframe_immediate_run);
	sframe_init_irq_work_hard(&sframe_flush_kick_work, sframe_flush_kick_irq);
	return sframe_unwind_deferred_init(&sframe_samples_work,
					   sframe_samples_unwound);
}

void sframe_samples_exit(void)
{
	int cpu;

	/* The hook is gone: no new sample.  Let the irq_works run out. */
	for_each_possible_cpu(cpu)
		irq_work_sync(&per_cpu_ptr(&sframe_immediate, cpu)->work);
	irq_work_sync(&sframe_flush_kick_work);
	cancel_delayed_work_sync(&sframe_flush_work);
	/*
	 * The samples still waiting come back through
	 * sframe_samples_unwound() (cancelled ones without a stack), and
	 * no walk runs module code any more once this returns.
	 */
	sframe_unwind_deferred_exit();

	free_percpu(sframe_now_bufs);
	vfree(sframe_sample_mem);
}
