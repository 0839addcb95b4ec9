// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred user unwinding, the way upstream's kernel/unwind/deferred.c
 * does it, on a kernel that does not have it.
 *
 * At sample time (NMI or IRQ) nothing may sleep or fault, and user memory
 * may fault.  So a sample keeps only its kernel stack, and the user stack
 * is unwound by a task_work when the task returns to user space.  Every
 * sample taken while the task stays in the kernel belongs to the same
 * kernel entry and gets the same user stack: one unwind serves them all,
 * and one cookie (CPU id and a per-CPU counter) names the entry.
 *
 * A task's pending entry lives in a slot of a fixed table, found by the
 * task's address; the stock kernel has no room in task_struct for it.  A
 * slot's owner word is the task pointer with SLOT_PENDING set while an
 * unwind is queued; a task keeps its slot (not pending) afterwards, and
 * any task may take over a slot that is not pending.  All changes are
 * cmpxchg, so NMIs may claim slots.  A task's samples are all taken on the
 * CPU it runs on, in its own context or in interrupts of it, so a slot's
 * sample list is only ever touched from there (and once more at unload).
 *
 * Sample buffers come from per-CPU pools filled at the first session:
 * nothing is allocated in NMI.  A pool is popped only on its own CPU, and
 * a sample taken in an NMI that interrupted a pop on the same CPU is
 * dropped (and counted) rather than risk the llist ABA problem.
 *
 * Samples that can have no user stack (kernel threads, tasks whose mm is
 * gone, tasks that exit before their task_work could be queued) are
 * written from an irq_work.  From NMI, task_work_add() is not allowed on
 * 6.1 either, so an irq_work queues it (NMI -> irq_work -> task_work).
 */
#include <linux/hash.h>
#include <linux/irq_work.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/slab.h>
#include <linux/task_work.h>
#include <linux/timekeeping.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/wait_bit.h>
#include <asm/unwind.h>

#include "deferred.h"
#include "ksyms.h"
#include "session.h"
#include "sframe_unwind.h"
#include "stats.h"
#include "unwind.h"

#define SLOT_BITS 10
#define SLOT_COUNT (1u << SLOT_BITS)
#define SLOT_PROBES 8
#define SLOT_PENDING 1UL
#define POOL_PER_CPU 512

struct sframe_slot {
	atomic_long_t owner;        /* task | SLOT_PENDING, task, or 0 */
	u64 cookie;                 /* of the pending entry */
	struct llist_head samples;
	struct callback_head twork; /* the unwind at return to user space */
	struct irq_work queue_work; /* NMI: queues twork from IRQ context */
};

struct sframe_pool {
	struct llist_head free;
	int busy;                   /* a pop is in progress on this CPU */
	struct sframe_sample *mem;
};

struct sframe_immediate {
	struct llist_head samples;  /* samples without a user stack */
	struct irq_work work;
};

static struct sframe_slot *sframe_slots;
static DEFINE_PER_CPU(struct sframe_pool, sframe_pools);
static DEFINE_PER_CPU(struct sframe_immediate, sframe_immediate);
static DEFINE_PER_CPU(u64, sframe_cookie_seq);

/* Walks done in the interrupt itself: see sframe_unwind_now(). */
#define SFRAME_NOW_MAX_FRAMES 128
struct sframe_now_buf {
	u64 frames[SFRAME_UNWIND_F_ALL][SFRAME_NOW_MAX_FRAMES];
};
static struct sframe_now_buf __percpu *sframe_now_bufs;
static bool sframe_pools_ready;
/* Slots claimed and not yet finished: unload waits for zero. */
static atomic_t sframe_pending = ATOMIC_INIT(0);

static struct sframe_sample *sframe_pool_get(void)
{
	struct sframe_pool *pool = this_cpu_ptr(&sframe_pools);
	struct llist_node *node = NULL;

	if (!READ_ONCE(sframe_pools_ready))
		return NULL;
	if (this_cpu_inc_return(sframe_pools.busy) == 1)
		node = llist_del_first(&pool->free);
	this_cpu_dec(sframe_pools.busy);
	return node ? llist_entry(node, struct sframe_sample, node) : NULL;
}

/* Any CPU, any context: back to the pool of the CPU it came from. */
static void sframe_pool_put(struct sframe_sample *smp)
{
	llist_add(&smp->node, &per_cpu_ptr(&sframe_pools, smp->home_cpu)->free);
}

static u64 sframe_new_cookie(void)
{
	/* Upstream's layout: the CPU in the top bits, a counter below. */
	return ((u64)smp_processor_id() << 48) |
	       (this_cpu_inc_return(sframe_cookie_seq) & ((1ULL << 48) - 1));
}

/*
 * The slot of task with an entry pending, or a slot newly claimed for it
 * (*claimed), or NULL when every slot it may use is pending for others.
 */
static struct sframe_slot *sframe_slot_get(struct task_struct *task,
					   bool *claimed)
{
	unsigned long pending = (unsigned long)task | SLOT_PENDING;
	u32 h = hash_ptr(task, SLOT_BITS), i;
	struct sframe_slot *slot;
	long old;

	for (i = 0; i < SLOT_PROBES; i++) {
		slot = &sframe_slots[(h + i) & (SLOT_COUNT - 1)];
		if (atomic_long_read(&slot->owner) == pending) {
			*claimed = false;
			return slot;
		}
	}
	for (i = 0; i < SLOT_PROBES; i++) {
		slot = &sframe_slots[(h + i) & (SLOT_COUNT - 1)];
		old = atomic_long_read(&slot->owner);
		if (old & SLOT_PENDING)
			continue;
		if (atomic_long_cmpxchg(&slot->owner, old, pending) == old) {
			slot->cookie = sframe_new_cookie();
			*claimed = true;
			return slot;
		}
	}
	return NULL;
}

static u32 sframe_capture_kernel(struct pt_regs *regs, u64 *ips, u32 max)
{
	struct unwind_state state;
	unsigned long addr;
	u32 n = 0;

	if (user_mode(regs))
		return 0;
	/* As perf_callchain_kernel() does: ORC from the sampled registers. */
	ips[n++] = regs->ip;
	for (unwind_start(&state, current, regs, NULL);
	     !unwind_done(&state) && n < max; unwind_next_frame(&state)) {
		addr = unwind_get_return_address(&state);
		if (!addr)
			break;
		ips[n++] = addr;
	}
	return n;
}

/* Write and free samples that have no user stack (IRQ context). */
static void sframe_immediate_run(struct irq_work *work)
{
	struct sframe_immediate *imm =
		container_of(work, struct sframe_immediate, work);
	struct llist_node *list = llist_del_all(&imm->samples);
	struct sframe_sample *smp, *next;

	llist_for_each_entry_safe(smp, next, list, node) {
		sframe_sessions_deliver(smp, smp->flags | SFRAME_SAMPLE_F_NO_USER,
					NULL);
		sframe_pool_put(smp);
	}
}

static void sframe_immediate_queue(struct sframe_sample *smp, u32 flags)
{
	struct sframe_immediate *imm = this_cpu_ptr(&sframe_immediate);

	smp->flags |= flags;
	llist_add(&smp->node, &imm->samples);
	irq_work_queue(&imm->work);
}

/*
 * The slot's entry is over: write its samples, with the user stacks if
 * there are any, and give the slot back to owner (the task, or 0).
 */
static void sframe_slot_finish(struct sframe_slot *slot, unsigned long owner,
			       u32 flags,
			       const struct sframe_user_stacks *stacks)
{
	u64 cookie = slot->cookie;
	struct llist_node *list;
	struct sframe_sample *smp, *next;

	/*
	 * Release first: a sample taken from now on starts a new entry
	 * (possibly in this very slot, with a new cookie).  Then take every
	 * sample; those of a newer entry go back.
	 */
	atomic_long_set_release(&slot->owner, owner);
	list = llist_del_all(&slot->samples);
	llist_for_each_entry_safe(smp, next, list, node) {
		u32 f = smp->flags | flags;

		if (smp->cookie != cookie) {
			llist_add(&smp->node, &slot->samples);
			continue;
		}
		if (stacks && smp->self_exec_id != current->self_exec_id) {
			/* Taken before an exec: its user stack is gone. */
			sframe_sessions_deliver(smp, f | SFRAME_SAMPLE_F_EXECED |
						SFRAME_SAMPLE_F_NO_USER, NULL);
		} else {
			sframe_sessions_deliver(smp, f, stacks);
		}
		sframe_pool_put(smp);
	}
	if (atomic_dec_and_test(&sframe_pending))
		wake_up_var(&sframe_pending);
}

/* The entry's samples get no user stack (flags say why). */
static void sframe_slot_drop(struct sframe_slot *slot, unsigned long owner,
			     u32 flags)
{
	sframe_slot_finish(slot, owner, flags | SFRAME_SAMPLE_F_NO_USER, NULL);
}

/*
 * Walk current's user stack with the methods flags into frames (room for
 * max), and record it in stacks.  Returns the stop reason.
 */
static u32 sframe_unwind_into(struct sframe_user_stacks *stacks, u32 flags,
			      u64 *frames, u32 max)
{
	struct sframe_user_unwind uw;
	u32 n = 0;

	/* The registers the task will return to user space with. */
	sframe_unwind_start(&uw, task_pt_regs(current), flags);
	frames[n++] = uw.ip;
	while (n < max && sframe_unwind_next(&uw))
		frames[n++] = uw.ip;
	if (!uw.stop)
		uw.stop = SFRAME_STOP_LIMIT;
	sframe_unwind_account(&uw);
	stacks->frames[flags] = frames;
	stacks->nr[flags] = n;
	stacks->stop[flags] = uw.stop;
	return uw.stop;
}

/* task_work: the task is about to return to user space (or exits). */
static void sframe_unwind_work(struct callback_head *cb)
{
	struct sframe_slot *slot = container_of(cb, struct sframe_slot, twork);
	struct sframe_user_stacks stacks = {};
	u32 max_frames, methods, flags;

	if (current->flags & PF_EXITING) {
		sframe_slot_drop(slot, 0, SFRAME_SAMPLE_F_EXITED);
		return;
	}
	/* One walk per method in use: each session gets its own. */
	sframe_sessions_unwind_params(&max_frames, &methods);
	for (flags = 1; flags <= SFRAME_UNWIND_F_ALL; flags++) {
		u64 *frames;

		if (!max_frames || !(methods & BIT(flags)))
			continue;
		frames = kvmalloc_array(max_frames, sizeof(u64), GFP_KERNEL);
		if (frames)
			sframe_unwind_into(&stacks, flags, frames, max_frames);
	}
	sframe_slot_finish(slot, (unsigned long)current, 0, &stacks);
	for (flags = 1; flags <= SFRAME_UNWIND_F_ALL; flags++)
		kvfree(stacks.frames[flags]);
}

/*
 * A sample taken in user mode, in an interrupt (not NMI): its kernel
 * entry is that interrupt, so nothing is gained by waiting for the return
 * to user space, and a task_work costs the task a trip through the
 * notify-resume work.  Try the walk right here with page faults disabled;
 * the sections and the stack are usually resident (and decoded rows
 * cached).  If a read would fault, or a session wants more frames than
 * the per-CPU buffers hold, return false: the caller defers as usual.
 */
static bool sframe_unwind_now(struct sframe_sample *smp)
{
	struct sframe_now_buf *buf = this_cpu_ptr(sframe_now_bufs);
	struct sframe_user_stacks stacks = {};
	u32 max_frames, methods, flags;
	bool ok = true;

	sframe_sessions_unwind_params(&max_frames, &methods);
	if (!max_frames || max_frames > SFRAME_NOW_MAX_FRAMES)
		return false;
	pagefault_disable();
	for (flags = 1; flags <= SFRAME_UNWIND_F_ALL && ok; flags++) {
		if (methods & BIT(flags)) {
			u32 stop = sframe_unwind_into(&stacks, flags,
						      buf->frames[flags - 1],
						      max_frames);

			ok = stop != SFRAME_STOP_FAULT &&
			     stop != SFRAME_STOP_RETRY_IN_TASK;
		}
	}
	pagefault_enable();
	if (!ok)
		return false;
	smp->cookie = sframe_new_cookie();
	sframe_sessions_deliver(smp, smp->flags, &stacks);
	sframe_pool_put(smp);
	return true;
}

/* IRQ context, right after the NMI that claimed the slot. */
static void sframe_queue_unwind_irq(struct irq_work *work)
{
	struct sframe_slot *slot =
		container_of(work, struct sframe_slot, queue_work);
	struct task_struct *task =
		(void *)(atomic_long_read(&slot->owner) & ~SLOT_PENDING);

	/*
	 * The task cannot be freed yet: it has not run its exit task_works,
	 * and it is freed an RCU grace period after exit, which cannot pass
	 * before this interrupt handler ends.
	 */
	if (task_work_add(task, &slot->twork, TWA_RESUME))
		sframe_slot_drop(slot, 0, SFRAME_SAMPLE_F_EXITED);
}

bool sframe_deferred_sample(struct pt_regs *regs, pid_t owner_tgid)
{
	struct task_struct *task = current;
	struct sframe_sample *smp;
	struct sframe_slot *slot;
	bool claimed;

	smp = sframe_pool_get();
	if (!smp)
		return false;
	atomic64_inc(&sframe_counters.samples_deferred);
	if (in_nmi())
		atomic64_inc(&sframe_counters.samples_nmi);
	smp->time = ktime_get_mono_fast_ns();
	smp->cpu = smp_processor_id();
	smp->tid = task->pid;
	smp->tgid = task->tgid;
	smp->owner_tgid = owner_tgid;
	smp->flags = user_mode(regs) ? SFRAME_SAMPLE_F_USER_MODE : 0;
	smp->cookie = 0;
	smp->nr_kernel = sframe_capture_kernel(regs, smp->kernel,
					       SFRAME_SESSION_MAX_KERNEL_FRAMES);

	if ((task->flags & PF_KTHREAD) || !task->mm) {
		sframe_immediate_queue(smp, task->flags & PF_KTHREAD ?
						    SFRAME_SAMPLE_F_KTHREAD : 0);
		return true;
	}
	if (task->flags & PF_EXITING) {
		sframe_immediate_queue(smp, SFRAME_SAMPLE_F_EXITED);
		return true;
	}
	smp->self_exec_id = task->self_exec_id;
	if (user_mode(regs) && !in_nmi() && sframe_unwind_now(smp))
		return true;

	slot = sframe_slot_get(task, &claimed);
	if (!slot) {
		sframe_pool_put(smp);
		return false;
	}
	smp->cookie = slot->cookie;
	llist_add(&smp->node, &slot->samples);
	if (!claimed)
		return true;

	atomic_inc(&sframe_pending);
	if (in_nmi()) {
		irq_work_queue(&slot->queue_work);
	} else if (task_work_add(task, &slot->twork, TWA_RESUME)) {
		sframe_slot_drop(slot, 0, SFRAME_SAMPLE_F_EXITED);
	}
	return true;
}

int sframe_deferred_prepare(void)
{
	struct sframe_pool *pool;
	int cpu, i;

	if (sframe_pools_ready)
		return 0;
	if (!sframe_now_bufs) {
		sframe_now_bufs = alloc_percpu(struct sframe_now_buf);
		if (!sframe_now_bufs)
			return -ENOMEM;
	}
	for_each_possible_cpu(cpu) {
		pool = per_cpu_ptr(&sframe_pools, cpu);
		if (pool->mem)
			continue;
		pool->mem = vzalloc_node(POOL_PER_CPU * sizeof(*pool->mem),
					 cpu_to_node(cpu));
		if (!pool->mem)
			return -ENOMEM;
		for (i = 0; i < POOL_PER_CPU; i++) {
			pool->mem[i].home_cpu = cpu;
			llist_add(&pool->mem[i].node, &pool->free);
		}
	}
	smp_store_release(&sframe_pools_ready, true);
	return 0;
}

int sframe_deferred_init(void)
{
	int cpu;
	u32 i;

	sframe_slots = vzalloc(SLOT_COUNT * sizeof(*sframe_slots));
	if (!sframe_slots)
		return -ENOMEM;
	for (i = 0; i < SLOT_COUNT; i++) {
		init_task_work(&sframe_slots[i].twork, sframe_unwind_work);
		init_irq_work(&sframe_slots[i].queue_work,
			      sframe_queue_unwind_irq);
	}
	for_each_possible_cpu(cpu)
		init_irq_work(&per_cpu_ptr(&sframe_immediate, cpu)->work,
			      sframe_immediate_run);
	return 0;
}

static bool sframe_match_twork(struct callback_head *cb, void *data)
{
	return cb == data;
}

void sframe_deferred_exit(void)
{
	struct sframe_slot *slot;
	struct task_struct *task;
	struct callback_head *cb;
	long owner;
	int cpu;
	u32 i;

	/* The hook is gone: no new sample.  Let the irq_works run out. */
	for (i = 0; i < SLOT_COUNT; i++)
		irq_work_sync(&sframe_slots[i].queue_work);
	for_each_possible_cpu(cpu)
		irq_work_sync(&per_cpu_ptr(&sframe_immediate, cpu)->work);

	/*
	 * Cancel the unwinds still queued on tasks that have not returned to
	 * user space (one may sleep in a system call for hours).  A pending
	 * slot's task has not run its exit task_works, and RCU keeps its
	 * task_struct while we look.
	 */
	for (i = 0; i < SLOT_COUNT; i++) {
		slot = &sframe_slots[i];
		rcu_read_lock();
		owner = atomic_long_read(&slot->owner);
		task = (void *)(owner & ~SLOT_PENDING);
		cb = NULL;
		if (owner & SLOT_PENDING)
			cb = sframe_ksyms.task_work_cancel_match(
				task, sframe_match_twork, &slot->twork);
		rcu_read_unlock();
		if (cb)
			sframe_slot_drop(slot, 0, 0);
	}
	/* Those already running: wait for them to finish... */
	wait_var_event(&sframe_pending, !atomic_read(&sframe_pending));
	/* ...and to have left module text (a voluntary switch or user). */
	synchronize_rcu_tasks();

	for_each_possible_cpu(cpu)
		vfree(per_cpu_ptr(&sframe_pools, cpu)->mem);
	free_percpu(sframe_now_bufs);
	vfree(sframe_slots);
}
