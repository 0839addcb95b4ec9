// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred user unwinding, the way upstream's kernel/unwind/deferred.c
 * does it, on a kernel that does not have it.
 *
 * At sample time (NMI or IRQ) nothing may sleep, and user memory may
 * fault.  So a sample keeps only its kernel stack, and the user stack is
 * unwound by a task_work when the task returns to user space.  Every
 * sample taken while the task stays in the kernel belongs to the same
 * kernel entry and gets the same user stack: one unwind serves them all,
 * and one cookie (CPU id and a per-CPU counter) names the entry.
 *
 * Upstream keeps a task's pending entry in task_struct; the stock kernel
 * has no room there.  Here each pending entry is a request: an object of
 * its own, with its own task_work, taken from a per-CPU pool when a task's
 * first sample of an entry comes in and owned by that task until its
 * unwind ran.  A CPU remembers the last few requests it made, so the next
 * samples of the same entry find and join theirs; a task that moved to
 * another CPU meanwhile gets a second request (a second unwind of the same
 * stack, a second cookie), never a wrong one.  No task can take over or
 * hold another task's request.
 *
 * A request's owner word is the task with its state in the low bits.
 * Samples join only a PENDING request of their own task, counted in
 * `joining` while they look, so whoever closes the request (its unwind,
 * or the flusher below) knows when no sample can still be joining and
 * takes the list whole: no sample is stranded.
 *
 * A task may block in the kernel for hours after a sample.  Its samples
 * are not held for that long: the flusher (a delayed work) closes every
 * request older than sample_max_wait_ms, delivers its samples with their
 * kernel stacks and SFRAME_SAMPLE_F_TIMEOUT, and cancels its task_work.
 * So a sample waits at most sample_max_wait_ms plus one flusher period,
 * and the pools cannot be drained by tasks that never return.
 *
 * Sample buffers and requests come from per-CPU pools filled before the
 * first request: nothing is allocated in NMI.  A pool is popped only on
 * its own CPU, and a pop in an NMI that interrupted a pop on the same CPU
 * fails (the sample is dropped and counted) rather than risk the llist
 * ABA problem.
 *
 * Samples that can have no user stack (kernel threads, tasks whose mm is
 * gone or that exit, 32-bit tasks) are delivered from an irq_work.  From
 * NMI, task_work_add() is not allowed on 6.1 either, so an irq_work queues
 * it (NMI -> irq_work -> task_work): a hard one, which runs before the
 * interrupted task continues even on PREEMPT_RT, where a plain irq_work
 * runs later in a thread and the task could have gone back to user space
 * meanwhile (its unwind would then see another entry's stack).
 *
 * On PREEMPT_RT nothing on the sample path may take a sleeping lock
 * (compat.h): the pools and requests are lock-free, the consumer's ring
 * takes a raw spinlock, and the one wakeup made here (unload waiting for
 * the last request) is left to an irq_work where the caller is atomic.
 */
#include <linux/hash.h>
#include <linux/irq_work.h>
#include <linux/moduleparam.h>
#include <linux/percpu.h>
#include <linux/pid.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/coredump.h>
#include <linux/sched/task.h>
#include <linux/sched/task_stack.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/task_work.h>
#include <linux/timekeeping.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/wait_bit.h>
#include <linux/workqueue.h>
#include <asm/unwind.h>

#include "compat.h"
#include "deferred.h"
#include "ksyms.h"
#include "quota.h"
#include "sframe_unwind.h"
#include "stats.h"
#include "unwind.h"
#include "walk_timing.h"

#define SAMPLES_PER_CPU 512
#define REQUESTS_PER_CPU 256
/* Requests a CPU remembers, for the next samples of the same entries. */
#define RECENT_PER_CPU 8

/* Request states, in the low bits of the owner word (task | state). */
#define REQ_PENDING 1UL   /* its unwind is queued; samples may join */
#define REQ_CLOSED 2UL    /* its samples are delivered or being delivered */
#define REQ_STATE_MASK 3UL

static unsigned int sample_max_wait_ms = 250;
module_param(sample_max_wait_ms, uint, 0644);
MODULE_PARM_DESC(sample_max_wait_ms,
		 "Longest a session sample waits for its task to return to user space (ms, 10..10000)");

struct sframe_request {
	atomic_long_t owner;        /* task | REQ_*, or 0 when free */
	atomic_t joining;           /* samples between check and add */
	atomic_t ref;               /* its unwind, and a flusher at work */
	u64 cookie;                 /* set before owner (release) */
	u64 since;                  /* ns: its first sample */
	struct task_struct *task;   /* referenced while in use */
	struct llist_head samples;
	struct callback_head twork; /* the unwind at return to user space */
	struct irq_work queue_work; /* NMI: queues twork from IRQ context */
	struct llist_node free_node;
	u32 home_cpu;
	u32 share;                  /* its user's bucket (sframe_shares) */
};

/* A per-CPU free list; popped on its own CPU only. */
struct sframe_pool {
	struct llist_head free;
	int busy;                   /* a pop is in progress on this CPU */
};

struct sframe_recent {
	struct sframe_request *req[RECENT_PER_CPU];
	unsigned int next;
};

struct sframe_immediate {
	struct llist_head samples;  /* samples without a user stack */
	struct irq_work work;
};

static const struct sframe_deferred_ops *sframe_ops;

/*
 * The consumer's walk (sframe_deferred_set_walk()) in one word, which
 * the sample path reads without calling back: max_frames << 32 | methods.
 */
static u64 sframe_walk_params;

void sframe_deferred_set_walk(u32 max_frames, u32 methods)
{
	WRITE_ONCE(sframe_walk_params, (u64)max_frames << 32 | methods);
}

static void sframe_walk_get(u32 *max_frames, u32 *methods)
{
	u64 p = READ_ONCE(sframe_walk_params);

	*max_frames = p >> 32;
	*methods = (u32)p;
}

/*
 * Each user's share of a CPU's pools.  A user whose tasks stay in the
 * kernel after their samples (a system call that blocks, or that runs
 * long) holds samples and requests until sample_max_wait_ms; without a
 * share, one user could keep a CPU's pools empty and every other user's
 * samples there would be dropped.  So a user (sframe_accountable_uid():
 * subordinate uids count as their owner's) may hold at most half of each
 * of a CPU's pools; past that its samples are dropped, and counted by the
 * consumer as any sample this layer refuses.  Users are counted in
 * buckets of their hashed uid, which NMI can reach without a lock: two
 * users in one bucket share one share, which leaves the other half of the
 * pool to everyone else all the same.
 */
#define SFRAME_SHARE_BITS 6
struct sframe_shares {
	atomic_t samples[1 << SFRAME_SHARE_BITS];
	atomic_t requests[1 << SFRAME_SHARE_BITS];
};
#define SFRAME_SAMPLE_SHARE (SAMPLES_PER_CPU / 2)
#define SFRAME_REQUEST_SHARE (REQUESTS_PER_CPU / 2)
static DEFINE_PER_CPU(struct sframe_shares, sframe_shares);

static u32 sframe_share_bucket(void)
{
	return hash_32(__kuid_val(sframe_accountable_uid()), SFRAME_SHARE_BITS);
}

/* One more of this CPU's count, if it stays within share. */
static bool sframe_share_take(atomic_t *count, int share)
{
	if (atomic_inc_return(count) <= share)
		return true;
	atomic_dec(count);
	return false;
}

static DEFINE_PER_CPU(struct sframe_pool, sframe_sample_pool);
static DEFINE_PER_CPU(struct sframe_pool, sframe_request_pool);
static DEFINE_PER_CPU(struct sframe_recent, sframe_recent);
static DEFINE_PER_CPU(struct sframe_immediate, sframe_immediate);
static DEFINE_PER_CPU(u64, sframe_cookie_seq);
static struct sframe_sample *sframe_sample_mem;   /* all CPUs' buffers */
static struct sframe_request *sframe_request_mem; /* all CPUs' requests */
static unsigned int sframe_nr_requests;
static bool sframe_pools_ready;
/* Requests in use: unload waits for zero. */
static atomic_t sframe_requests_busy = ATOMIC_INIT(0);

/* The wakeup of that wait, from a caller that may not make it (RT). */
static void sframe_requests_idle_wake(struct irq_work *work)
{
	wake_up_var(&sframe_requests_busy);
}

static struct irq_work sframe_requests_idle_work =
	IRQ_WORK_INIT(sframe_requests_idle_wake);

static void sframe_flush_fn(struct work_struct *work);
static DECLARE_DELAYED_WORK(sframe_flush_work, sframe_flush_fn);

/*
 * Walks done in the interrupt itself: see sframe_unwind_now().  The
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
	 * same for the stacks handed to the consumer.
	 */
	struct sframe_user_unwind uw;
	struct sframe_user_stacks stacks;
};
static struct sframe_now_buf __percpu *sframe_now_bufs;

static struct llist_node *sframe_pool_pop(struct sframe_pool __percpu *pools)
{
	struct sframe_pool *pool = this_cpu_ptr(pools);
	struct llist_node *node = NULL;

	if (!READ_ONCE(sframe_pools_ready))
		return NULL;
	if (this_cpu_inc_return(pools->busy) == 1)
		node = llist_del_first(&pool->free);
	this_cpu_dec(pools->busy);
	return node;
}

/* Any CPU, any context: back to the pool of the CPU it came from. */
static void sframe_pool_push(struct sframe_pool __percpu *pools, u32 cpu,
			     struct llist_node *node)
{
	llist_add(node, &per_cpu_ptr(pools, cpu)->free);
}

static void sframe_sample_free(struct sframe_sample *smp)
{
	put_pid(smp->pid);
	put_pid(smp->tgid);
	atomic_dec(&per_cpu_ptr(&sframe_shares, smp->home_cpu)->samples[smp->share]);
	sframe_pool_push(&sframe_sample_pool, smp->home_cpu, &smp->node);
}

/* Hand a finished sample to the consumer, and free it. */
static void sframe_sample_done(struct sframe_sample *smp, u32 flags,
			       const struct sframe_user_stacks *stacks)
{
	sframe_ops->deliver(smp, smp->flags | flags, stacks);
	sframe_sample_free(smp);
}

static u64 sframe_new_cookie(void)
{
	/* Upstream's layout: the CPU in the top bits, a counter below. */
	return ((u64)smp_processor_id() << 48) |
	       (this_cpu_inc_return(sframe_cookie_seq) & ((1ULL << 48) - 1));
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

	llist_for_each_entry_safe(smp, next, list, node)
		sframe_sample_done(smp, SFRAME_SAMPLE_F_NO_USER, NULL);
}

static void sframe_immediate_queue(struct sframe_sample *smp, u32 flags)
{
	struct sframe_immediate *imm = this_cpu_ptr(&sframe_immediate);

	smp->flags |= flags;
	llist_add(&smp->node, &imm->samples);
	irq_work_queue(&imm->work);
}

/* ---- requests ------------------------------------------------------- */

static unsigned long sframe_req_word(struct task_struct *task,
				     unsigned long state)
{
	return (unsigned long)task | state;
}

static void sframe_request_put(struct sframe_request *req)
{
	if (!atomic_dec_and_test(&req->ref))
		return;
	/*
	 * Any context but NMI: the task is alive (it owned the request), and
	 * put_task_struct() defers the free where it must (compat.h).
	 */
	put_task_struct(req->task);
	req->task = NULL;
	atomic_dec(&per_cpu_ptr(&sframe_shares, req->home_cpu)->requests[req->share]);
	atomic_long_set_release(&req->owner, 0);
	sframe_pool_push(&sframe_request_pool, req->home_cpu, &req->free_node);
	if (atomic_dec_and_test(&sframe_requests_busy)) {
		/* The wait queue's lock sleeps on RT. */
		if (sframe_may_take_spinlock())
			wake_up_var(&sframe_requests_busy);
		else
			irq_work_queue(&sframe_requests_idle_work);
	}
}

/*
 * Add smp to req if req is task's pending request.  Any context; the
 * joining count tells a closer to wait for us.
 */
static bool sframe_request_join(struct sframe_request *req,
				struct task_struct *task,
				struct sframe_sample *smp)
{
	bool joined = false;

	atomic_inc(&req->joining);
	smp_mb__after_atomic();
	if (atomic_long_read_acquire(&req->owner) ==
	    sframe_req_word(task, REQ_PENDING)) {
		smp->cookie = req->cookie;
		llist_add(&smp->node, &req->samples);
		joined = true;
	}
	smp_mb__before_atomic();
	atomic_dec(&req->joining);
	return joined;
}

/*
 * Close req, PENDING for task: no sample joins it any more.  Returns true
 * for the one caller that closed it, which then owns its samples.
 */
static bool sframe_request_close(struct sframe_request *req,
				 struct task_struct *task)
{
	unsigned long pending = sframe_req_word(task, REQ_PENDING);

	/* A full barrier: joiners that saw PENDING are counted by now. */
	if (atomic_long_cmpxchg(&req->owner, pending,
				sframe_req_word(task, REQ_CLOSED)) != pending)
		return false;
	/* A joiner runs a few instructions in an interrupt: a short wait. */
	while (atomic_read(&req->joining))
		cpu_relax();
	return true;
}

/*
 * SFRAME_SAMPLE_F_NOT_DUMPABLE if the user stack about to go with smp, of
 * current as it is now, is one its reader may not be entitled to: the
 * task's credentials changed since the sample, or its image is not
 * dumpable.  An exec of a setuid program bumps self_exec_id, then commits
 * the new credentials and marks the new mm undumpable, and only then
 * removes the task's perf events (perf_event_exit_task() in
 * begin_new_exec()): a sample taken in that window, after the bump, would
 * otherwise be unwound on the new image (ld.so's base and the setuid
 * program's initial stack).  perf gives such a task's stack to nobody
 * once its events are gone; the consumer withholds it from readers
 * without privileges.  The credentials are the task's objective ones
 * (real_cred): its subjective ones (cred) are swapped for a while by
 * override_creds() in the kernel (overlayfs does on every open, stat and
 * read), which is no change of who the task is.  They are compared by
 * pointer: commit_creds() installs a new struct cred, and the old one,
 * still in use when the sample was taken, cannot be reused before the
 * task runs in user space again, which it has not yet.  (Every exec
 * commits new credentials, so a sample taken in the short window of a
 * plain exec is withheld too: rare, and only from unprivileged readers.)
 */
static u32 sframe_stack_sensitive(const struct sframe_sample *smp)
{
	if (smp->cred != (const void *)rcu_access_pointer(current->real_cred) ||
	    !sframe_dumpable_by_owner(current))
		return SFRAME_SAMPLE_F_NOT_DUMPABLE;
	return 0;
}

/* Deliver every sample of a closed request without a user stack. */
static u32 sframe_request_drop(struct sframe_request *req, u32 flags)
{
	struct llist_node *list = llist_del_all(&req->samples);
	struct sframe_sample *smp, *next;
	u32 n = 0;

	llist_for_each_entry_safe(smp, next, list, node) {
		sframe_sample_done(smp, flags | SFRAME_SAMPLE_F_NO_USER, NULL);
		n++;
	}
	return n;
}

/*
 * Walk current's user stack with the methods flags into frames (room for
 * max), and record it in stacks.  Returns the stop reason.  The walk's
 * decoding budget is unwind.c's: SFRAME_WALK_BUDGET in a task, the small
 * SFRAME_IRQ_WALK_BUDGET in an interrupt.  In a task (may_sleep) it
 * reschedules every SFRAME_RESCHED_FRAMES frames: a crafted stack may
 * spend its whole budget, some 150 ms under emulation.
 */
#define SFRAME_RESCHED_FRAMES 64
static u32 sframe_unwind_into(struct sframe_user_unwind *uw,
			      struct sframe_user_stacks *stacks, u32 flags,
			      u64 *frames, u32 max, bool may_sleep)
{
	u32 n = 0;

	/* The registers the task will return to user space with. */
	sframe_unwind_start(uw, task_pt_regs(current), flags);
	frames[n++] = uw->ip;
	for (;;) {
		u32 end = may_sleep ? min(max, n + SFRAME_RESCHED_FRAMES) : max;

		n = sframe_unwind_fill(uw, frames, n, end);
		if (n < end || n == max)
			break;
		cond_resched();
	}
	if (!uw->stop)
		uw->stop = SFRAME_STOP_LIMIT;
	sframe_unwind_account(uw);
	stacks->frames[flags] = frames;
	stacks->nr[flags] = n;
	stacks->stop[flags] = uw->stop;
	return uw->stop;
}

/* task_work: the task is about to return to user space (or exits). */
static void sframe_unwind_work(struct callback_head *cb)
{
	struct sframe_request *req =
		container_of(cb, struct sframe_request, twork);
	struct sframe_user_stacks stacks = {};
	struct sframe_user_unwind uw;
	struct sframe_sample *smp, *next;
	struct llist_node *list;
	u32 max_frames, methods, flags;

	/* The flusher closed it (and delivered its samples) first. */
	if (!sframe_request_close(req, current))
		goto out;
	if (current->flags & PF_EXITING) {
		sframe_request_drop(req, SFRAME_SAMPLE_F_EXITED);
		goto out;
	}
	/* One walk per method in use: each consumer gets its own. */
	sframe_walk_get(&max_frames, &methods);
	for (flags = 1; flags <= SFRAME_UNWIND_F_ALL; flags++) {
		u64 *frames;

		if (!max_frames || !(methods & BIT(flags)))
			continue;
		frames = kvmalloc_array(max_frames, sizeof(u64), GFP_KERNEL);
		if (frames)
			sframe_unwind_into(&uw, &stacks, flags, frames,
					   max_frames, true);
		cond_resched();
	}
	list = llist_del_all(&req->samples);
	llist_for_each_entry_safe(smp, next, list, node) {
		if (smp->self_exec_id != current->self_exec_id)
			/* Taken before an exec: its user stack is gone. */
			sframe_sample_done(smp, SFRAME_SAMPLE_F_EXECED |
					   SFRAME_SAMPLE_F_NO_USER, NULL);
		else
			sframe_sample_done(smp, sframe_stack_sensitive(smp),
					   &stacks);
	}
	for (flags = 1; flags <= SFRAME_UNWIND_F_ALL; flags++)
		kvfree(stacks.frames[flags]);
out:
	sframe_request_put(req);
}

/* The task exits before its unwind could be queued. */
static void sframe_request_abandon(struct sframe_request *req)
{
	if (sframe_request_close(req, req->task))
		sframe_request_drop(req, SFRAME_SAMPLE_F_EXITED);
	sframe_request_put(req);
}

static u32 sframe_max_wait_ms(void)
{
	return clamp(READ_ONCE(sample_max_wait_ms), 10u, 10000u);
}

/* A request is pending: make sure the flusher will look at it.  Not NMI. */
static void sframe_flush_kick(void)
{
	if (!delayed_work_pending(&sframe_flush_work))
		schedule_delayed_work(&sframe_flush_work,
				      msecs_to_jiffies(sframe_max_wait_ms()));
}

/* Hard IRQ context (even on RT), right after the NMI that made the request. */
static void sframe_queue_unwind_irq(struct irq_work *work)
{
	struct sframe_request *req =
		container_of(work, struct sframe_request, queue_work);

	if (task_work_add(req->task, &req->twork, TWA_RESUME))
		sframe_request_abandon(req);
	sframe_flush_kick();
}

static bool sframe_match_twork(struct callback_head *cb, void *data)
{
	return cb == data;
}

/*
 * Close the requests that waited too long: their tasks are blocked in the
 * kernel (or busy there).  Their samples go out with the kernel stack
 * only, and their task_works are cancelled, so they hold nothing.
 */
static void sframe_flush_fn(struct work_struct *work)
{
	u64 now = ktime_get_mono_fast_ns();
	u64 max_wait = (u64)sframe_max_wait_ms() * NSEC_PER_MSEC;
	struct sframe_request *req;
	struct task_struct *task;
	unsigned long owner;
	u32 i, n;

	for (i = 0; i < sframe_nr_requests; i++) {
		req = &sframe_request_mem[i];
		owner = atomic_long_read(&req->owner);
		if ((owner & REQ_STATE_MASK) != REQ_PENDING)
			continue;
		/* Hold it, then look again: it may have been reused. */
		if (!atomic_inc_not_zero(&req->ref))
			continue;
		task = (void *)(owner & ~REQ_STATE_MASK);
		if (atomic_long_read_acquire(&req->owner) != owner ||
		    READ_ONCE(req->since) + max_wait > now ||
		    !sframe_request_close(req, task)) {
			sframe_request_put(req);
			continue;
		}
		n = sframe_request_drop(req, SFRAME_SAMPLE_F_TIMEOUT);
		atomic64_add(n, &sframe_counters.samples_timed_out);
		/*
		 * Cancelled: its unwind's reference is ours to drop.  If the
		 * cancel fails, the task_work is running or about to (or its
		 * irq_work is about to queue it) and drops it itself.
		 */
		if (sframe_ksyms.task_work_cancel_match(task,
							sframe_match_twork,
							&req->twork))
			sframe_request_put(req);
		sframe_request_put(req);
		if (!(i % 64))
			cond_resched();
	}
	if (atomic_read(&sframe_requests_busy))
		schedule_delayed_work(&sframe_flush_work,
				      msecs_to_jiffies(sframe_max_wait_ms()) / 2 + 1);
}

/* A new request for task, current, holding smp; NULL if none is free. */
static struct sframe_request *sframe_request_new(struct task_struct *task,
						 struct sframe_sample *smp)
{
	struct sframe_recent *recent = this_cpu_ptr(&sframe_recent);
	atomic_t *held = &this_cpu_ptr(&sframe_shares)->requests[smp->share];
	struct sframe_request *req;
	struct llist_node *node;

	if (!sframe_share_take(held, SFRAME_REQUEST_SHARE))
		return NULL;
	node = sframe_pool_pop(&sframe_request_pool);
	if (!node) {
		atomic_dec(held);
		return NULL;
	}
	req = container_of(node, struct sframe_request, free_node);
	req->share = smp->share;
	atomic_inc(&sframe_requests_busy);
	get_task_struct(task);
	req->task = task;
	atomic_set(&req->ref, 1); /* the unwind's */
	req->cookie = sframe_new_cookie();
	req->since = smp->time;
	smp->cookie = req->cookie;
	init_llist_head(&req->samples);
	llist_add(&smp->node, &req->samples);
	atomic_long_set_release(&req->owner,
				sframe_req_word(task, REQ_PENDING));
	recent->req[recent->next++ % RECENT_PER_CPU] = req;
	return req;
}

/* Join a pending request of current's that this CPU remembers. */
static bool sframe_request_join_recent(struct task_struct *task,
				       struct sframe_sample *smp)
{
	struct sframe_recent *recent = this_cpu_ptr(&sframe_recent);
	unsigned long want = sframe_req_word(task, REQ_PENDING);
	struct sframe_request *req;
	u32 i;

	for (i = 0; i < RECENT_PER_CPU; i++) {
		req = READ_ONCE(recent->req[i]);
		if (req && atomic_long_read(&req->owner) == want &&
		    sframe_request_join(req, task, smp))
			return true;
	}
	return false;
}

/* ---- the sample path ---------------------------------------------- */

/*
 * A sample taken in user mode, in an interrupt (not NMI): its kernel
 * entry is that interrupt, so nothing is gained by waiting for the return
 * to user space, and a task_work costs the task a trip through the
 * notify-resume work.  Try the walk right here with page faults disabled
 * and a small fixed decoding budget; the sections and the stack are
 * usually resident (and decoded rows cached).  If a read would fault, the
 * budget runs out, or a consumer wants more frames than the per-CPU
 * buffers hold, return false: the caller defers as usual.
 */
static bool sframe_unwind_now(struct sframe_sample *smp)
{
	struct sframe_now_buf *buf = this_cpu_ptr(sframe_now_bufs);
	struct sframe_user_stacks *stacks = &buf->stacks;
	u32 max_frames, methods, flags;
	bool ok = true;
	u64 t0;

	sframe_walk_get(&max_frames, &methods);
	if (!max_frames || max_frames > SFRAME_NOW_MAX_FRAMES)
		return false;
	/* A method's counts are read only where its frames are set. */
	for (flags = 0; flags <= SFRAME_UNWIND_F_ALL; flags++)
		stacks->frames[flags] = NULL;
	t0 = sframe_walk_timing_start();
	pagefault_disable();
	for (flags = 1; flags <= SFRAME_UNWIND_F_ALL && ok; flags++) {
		if (methods & BIT(flags)) {
			u32 stop = sframe_unwind_into(&buf->uw, stacks, flags,
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
	smp->cookie = sframe_new_cookie();
	/* Delivered now: current holds its pids, and no pool had it. */
	sframe_ops->deliver(smp, smp->flags | sframe_stack_sensitive(smp),
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
	smp->time = time;
	smp->cpu = smp_processor_id();
	smp->pid = task_pid(task);
	smp->tgid = task_tgid(task);
	smp->flags = user_mode(regs) ? SFRAME_SAMPLE_F_USER_MODE : 0;
	smp->cookie = 0;
	smp->self_exec_id = task->self_exec_id;
	smp->cred = rcu_access_pointer(task->real_cred);
	smp->nr_kernel = 0;
}

bool sframe_deferred_request(struct pt_regs *regs,
			     const struct sframe_sample_ctx *ctx)
{
	struct task_struct *task = current;
	struct sframe_request *req;
	struct sframe_sample *smp;
	struct llist_node *node;
	atomic_t *held;
	u32 why, share;
	u64 time;

	if (!READ_ONCE(sframe_pools_ready))
		return false;
	time = ktime_get_mono_fast_ns();
	why = ctx->no_user ? ctx->no_user | SFRAME_SAMPLE_F_NO_USER :
			     sframe_no_user_reason(task);
	if (!why && user_mode(regs) && !in_nmi()) {
		smp = &this_cpu_ptr(sframe_now_bufs)->sample;
		sframe_sample_fill(smp, regs, ctx, task, time);
		if (sframe_unwind_now(smp)) {
			atomic64_inc(&sframe_counters.samples_deferred);
			return true;
		}
	}

	share = sframe_share_bucket();
	held = &this_cpu_ptr(&sframe_shares)->samples[share];
	if (!sframe_share_take(held, SFRAME_SAMPLE_SHARE))
		return false;
	node = sframe_pool_pop(&sframe_sample_pool);
	if (!node) {
		atomic_dec(held);
		return false;
	}
	smp = container_of(node, struct sframe_sample, node);
	smp->share = share;
	atomic64_inc(&sframe_counters.samples_deferred);
	if (in_nmi())
		atomic64_inc(&sframe_counters.samples_nmi);
	sframe_sample_fill(smp, regs, ctx, task, time);
	/* Delivered after the request returns: no shortcut (deferred.h). */
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
	if (sframe_request_join_recent(task, smp))
		return true;

	req = sframe_request_new(task, smp);
	if (!req) {
		sframe_sample_free(smp);
		return false;
	}
	if (in_nmi()) {
		irq_work_queue(&req->queue_work);
		return true;
	}
	if (task_work_add(task, &req->twork, TWA_RESUME))
		sframe_request_abandon(req);
	sframe_flush_kick();
	return true;
}

int sframe_deferred_prepare(void)
{
	unsigned int cpu, i, n;

	if (sframe_pools_ready)
		return 0;
	if (!sframe_now_bufs) {
		sframe_now_bufs = alloc_percpu(struct sframe_now_buf);
		if (!sframe_now_bufs)
			return -ENOMEM;
	}
	if (!sframe_sample_mem)
		sframe_sample_mem = vzalloc(array_size(nr_cpu_ids * SAMPLES_PER_CPU,
						       sizeof(*sframe_sample_mem)));
	if (!sframe_request_mem)
		sframe_request_mem = vzalloc(array_size(nr_cpu_ids * REQUESTS_PER_CPU,
							sizeof(*sframe_request_mem)));
	if (!sframe_sample_mem || !sframe_request_mem)
		return -ENOMEM;
	/* Every request's works are initialised: exit syncs them all. */
	n = nr_cpu_ids * REQUESTS_PER_CPU;
	for (i = 0; i < n; i++) {
		struct sframe_request *req = &sframe_request_mem[i];

		req->home_cpu = i / REQUESTS_PER_CPU;
		init_task_work(&req->twork, sframe_unwind_work);
		sframe_init_irq_work_hard(&req->queue_work,
					  sframe_queue_unwind_irq);
	}
	for_each_possible_cpu(cpu) {
		for (i = 0; i < SAMPLES_PER_CPU; i++) {
			struct sframe_sample *smp =
				&sframe_sample_mem[cpu * SAMPLES_PER_CPU + i];

			smp->home_cpu = cpu;
			sframe_pool_push(&sframe_sample_pool, cpu, &smp->node);
		}
		for (i = 0; i < REQUESTS_PER_CPU; i++)
			sframe_pool_push(&sframe_request_pool, cpu,
					 &sframe_request_mem[cpu * REQUESTS_PER_CPU + i].free_node);
	}
	sframe_nr_requests = n;
	smp_store_release(&sframe_pools_ready, true);
	return 0;
}

int sframe_deferred_init(const struct sframe_deferred_ops *ops)
{
	int cpu;

	sframe_ops = ops;
	for_each_possible_cpu(cpu)
		init_irq_work(&per_cpu_ptr(&sframe_immediate, cpu)->work,
			      sframe_immediate_run);
	return 0;
}

void sframe_deferred_exit(void)
{
	struct sframe_request *req;
	struct task_struct *task;
	unsigned long owner;
	int cpu;
	u32 i;

	/* The hook is gone: no new sample.  Let the irq_works run out. */
	for (i = 0; i < sframe_nr_requests; i++)
		irq_work_sync(&sframe_request_mem[i].queue_work);
	for_each_possible_cpu(cpu)
		irq_work_sync(&per_cpu_ptr(&sframe_immediate, cpu)->work);
	cancel_delayed_work_sync(&sframe_flush_work);

	/*
	 * Cancel the unwinds still queued on tasks that have not returned to
	 * user space (one may sleep in a system call for hours).  A pending
	 * request holds its task.
	 */
	for (i = 0; i < sframe_nr_requests; i++) {
		req = &sframe_request_mem[i];
		owner = atomic_long_read(&req->owner);
		if ((owner & REQ_STATE_MASK) != REQ_PENDING ||
		    !atomic_inc_not_zero(&req->ref))
			continue;
		task = (void *)(owner & ~REQ_STATE_MASK);
		if (atomic_long_read(&req->owner) == owner &&
		    sframe_request_close(req, task)) {
			sframe_request_drop(req, 0);
			if (sframe_ksyms.task_work_cancel_match(
				    task, sframe_match_twork, &req->twork))
				sframe_request_put(req);
		}
		sframe_request_put(req);
	}
	/* Those already running: wait for them to finish... */
	wait_var_event(&sframe_requests_busy,
		       !atomic_read(&sframe_requests_busy));
	irq_work_sync(&sframe_requests_idle_work);
	/* ...and to have left module text (a voluntary switch or user). */
	synchronize_rcu_tasks();

	free_percpu(sframe_now_bufs);
	vfree(sframe_sample_mem);
	vfree(sframe_request_mem);
}
