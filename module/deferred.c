// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred user unwinding, the way upstream's kernel/unwind/deferred.c
 * does it, on a kernel that does not have it (deferred.h).
 *
 * At sample time (NMI or IRQ) nothing may sleep, and user memory may
 * fault.  So the user stack is walked by a task_work when the task returns
 * to user space.  Every request made while the task stays in the kernel
 * belongs to the same kernel entry and gets the same user stack: one walk
 * serves them all, and one cookie (CPU id and a per-CPU counter) names the
 * entry.
 *
 * Upstream keeps a task's pending entry in task_struct; the stock kernel
 * has no room there.  Here each pending entry is a request: an object of
 * its own, with its own task_work, taken from a per-CPU pool
 * (pcpu_pool.h) when a task's first item of an entry comes in and owned
 * by that task until its walk ran.  A CPU remembers the last few requests
 * it made, so the next items of the same entry find and join theirs; a
 * task that moved to another CPU meanwhile gets a second request (a second
 * walk of the same stack, a second cookie), never a wrong one.  No task
 * can take over or hold another task's request.
 *
 * A request's owner word is the task with its state in the low bits.
 * Items join only a PENDING request of their own task, counted in
 * `joining` while they look, so whoever closes the request (its walk, an
 * expiry or unload) knows when no item can still be joining and takes the
 * list whole: no item is stranded.
 *
 * A task may block in the kernel for hours after a request.  The consumer
 * decides how long its items may wait and calls
 * sframe_unwind_deferred_expire(), which closes the older requests, hands
 * their items back without a stack and cancels their task_works: the pool
 * cannot be drained by tasks that never return.
 *
 * From NMI, task_work_add() is not allowed on 6.1 either, so an irq_work
 * queues it (NMI -> irq_work -> task_work): a hard one, which runs before
 * the interrupted task continues even on PREEMPT_RT, where a plain
 * irq_work runs later in a thread and the task could have gone back to
 * user space meanwhile (its walk would then see another entry's stack).
 *
 * On PREEMPT_RT nothing on the request path may take a sleeping lock
 * (compat.h): the pools and requests are lock-free, and the one wakeup
 * made here (unload waiting for the last request) is left to an irq_work
 * where the caller is atomic.
 */
#include <linux/irq_work.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/task_work.h>
#include <linux/timekeeping.h>
#include <linux/vmalloc.h>
#include <linux/wait_bit.h>

#include "compat.h"
#include "deferred.h"
#include "ksyms.h"
#include "pcpu_pool.h"
#include "sframe_unwind.h"
#include "unwind.h"

#define REQUESTS_PER_CPU 256
/* Requests a CPU remembers, for the next items of the same entries. */
#define RECENT_PER_CPU 8

/* Request states, in the low bits of the owner word (task | state). */
#define REQ_PENDING 1UL   /* its walk is queued; items may join */
#define REQ_CLOSED 2UL    /* its items are handed back or being handed back */
#define REQ_STATE_MASK 3UL

struct sframe_request {
	atomic_long_t owner;        /* task | REQ_*, or 0 when free */
	atomic_t joining;           /* items between check and add */
	atomic_t ref;               /* its walk, and an expiry at work */
	u64 cookie;                 /* set before owner (release) */
	u64 since;                  /* ns: its first item's time */
	struct task_struct *task;   /* referenced while in use */
	struct llist_head items;
	struct callback_head twork; /* the walk at return to user space */
	struct irq_work queue_work; /* NMI: queues twork from IRQ context */
	struct llist_node free_node;
	u32 home_cpu;
	u32 share;                  /* its user's bucket (pcpu_pool.h) */
};

struct sframe_recent {
	struct sframe_request *req[RECENT_PER_CPU];
	unsigned int next;
};

static struct sframe_unwind_work *sframe_works[SFRAME_UNWIND_MAX_WORKS];

/*
 * The walk all works want together (sframe_unwind_deferred_set_walk()) in
 * one word, which a task_work reads without asking them:
 * max_frames << 32 | methods.
 */
static u64 sframe_walk_params;

/* Each user's share of a CPU's requests (pcpu_pool.h). */
#define SFRAME_REQUEST_SHARE (REQUESTS_PER_CPU / 2)
struct sframe_request_shares {
	atomic_t held[1 << SFRAME_SHARE_BITS];
};
static DEFINE_PER_CPU(struct sframe_request_shares, sframe_request_shares);

static DEFINE_PER_CPU(struct sframe_pool, sframe_request_pool);
static DEFINE_PER_CPU(struct sframe_recent, sframe_recent);
static DEFINE_PER_CPU(u64, sframe_cookie_seq);
static struct sframe_request *sframe_request_mem; /* all CPUs' requests */
static unsigned int sframe_nr_requests;
static bool sframe_requests_ready;
/* Requests in use: unload waits for zero. */
static atomic_t sframe_requests_busy = ATOMIC_INIT(0);

/* The wakeup of that wait, from a caller that may not make it (RT). */
static void sframe_requests_idle_wake(struct irq_work *work)
{
	wake_up_var(&sframe_requests_busy);
}

static struct irq_work sframe_requests_idle_work =
	IRQ_WORK_INIT(sframe_requests_idle_wake);

/*
 * The two consumers (the sessions, perf's callchains) prepare the pools
 * and set their walks apart, each under its own lock: this one orders
 * them.  Process context.
 */
static DEFINE_MUTEX(sframe_requests_lock);

void sframe_unwind_deferred_set_walk(struct sframe_unwind_work *work,
				     u32 max_frames, u32 methods)
{
	u32 i, max_all = 0, methods_all = 0;

	mutex_lock(&sframe_requests_lock);
	WRITE_ONCE(work->walk, (u64)max_frames << 32 | methods);
	for (i = 0; i < SFRAME_UNWIND_MAX_WORKS; i++) {
		u64 w;

		if (!sframe_works[i])
			continue;
		w = READ_ONCE(sframe_works[i]->walk);
		max_all = max_t(u32, max_all, w >> 32);
		methods_all |= (u32)w;
	}
	WRITE_ONCE(sframe_walk_params, (u64)max_all << 32 | methods_all);
	mutex_unlock(&sframe_requests_lock);
}

u64 sframe_unwind_new_cookie(void)
{
	/* Upstream's layout: the CPU in the top bits, a counter below. */
	return ((u64)smp_processor_id() << 48) |
	       (this_cpu_inc_return(sframe_cookie_seq) & ((1ULL << 48) - 1));
}

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
	atomic_dec(&per_cpu_ptr(&sframe_request_shares, req->home_cpu)->held[req->share]);
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
 * Add item to req if req is task's pending request.  Any context; the
 * joining count tells a closer to wait for us.
 */
static bool sframe_request_join(struct sframe_request *req,
				struct task_struct *task,
				struct sframe_unwind_item *item)
{
	bool joined = false;

	atomic_inc(&req->joining);
	smp_mb__after_atomic();
	if (atomic_long_read_acquire(&req->owner) ==
	    sframe_req_word(task, REQ_PENDING)) {
		item->cookie = req->cookie;
		llist_add(&item->node, &req->items);
		joined = true;
	}
	smp_mb__before_atomic();
	atomic_dec(&req->joining);
	return joined;
}

/*
 * Close req, PENDING for task: no item joins it any more.  Returns true
 * for the one caller that closed it, which then owns its items.
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
 * SFRAME_SAMPLE_F_NOT_DUMPABLE if the user stack about to go with item, of
 * current as it is now, is one its reader may not be entitled to: the
 * task's credentials changed since the request, or its image is not
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
 * still in use when the request was made, cannot be reused before the
 * task runs in user space again, which it has not yet.  (Every exec
 * commits new credentials, so an item taken in the short window of a
 * plain exec is withheld too: rare, and only from unprivileged readers.)
 */
static u32 sframe_stack_sensitive(const struct sframe_unwind_item *item)
{
	if (item->cred != (const void *)rcu_access_pointer(current->real_cred) ||
	    !sframe_dumpable_by_owner(current))
		return SFRAME_SAMPLE_F_NOT_DUMPABLE;
	return 0;
}

/* Hand every item of a closed request back without a stack. */
static u32 sframe_request_drop(struct sframe_request *req, u32 flags)
{
	struct llist_node *list = llist_del_all(&req->items);
	struct sframe_unwind_item *item, *next;
	u32 n = 0;

	llist_for_each_entry_safe(item, next, list, node) {
		item->work->func(item, flags | SFRAME_SAMPLE_F_NO_USER, NULL);
		n++;
	}
	return n;
}

/* task_work: the task is about to return to user space (or exits). */
static void sframe_unwind_work(struct callback_head *cb)
{
	struct sframe_request *req =
		container_of(cb, struct sframe_request, twork);
	struct sframe_user_stacks stacks = {};
	struct sframe_user_unwind uw;
	struct sframe_unwind_item *item, *next;
	struct llist_node *list;
	u32 max_frames, methods, flags;
	u64 walk;

	/* An expiry closed it (and handed its items back) first. */
	if (!sframe_request_close(req, current))
		goto out;
	if (current->flags & PF_EXITING) {
		sframe_request_drop(req, SFRAME_SAMPLE_F_EXITED);
		goto out;
	}
	/* One walk per method in use: each work gets its own. */
	walk = READ_ONCE(sframe_walk_params);
	max_frames = walk >> 32;
	methods = (u32)walk;
	for (flags = 1; flags <= SFRAME_UNWIND_F_ALL; flags++) {
		u64 *frames;

		if (!max_frames || !(methods & BIT(flags)))
			continue;
		frames = kvmalloc_array(max_frames, sizeof(u64), GFP_KERNEL);
		if (frames)
			sframe_unwind_user_stack(&uw, &stacks, flags, frames,
						 max_frames, true);
		cond_resched();
	}
	list = llist_del_all(&req->items);
	llist_for_each_entry_safe(item, next, list, node) {
		if (item->self_exec_id != current->self_exec_id)
			/* Taken before an exec: its user stack is gone. */
			item->work->func(item, SFRAME_SAMPLE_F_EXECED |
					 SFRAME_SAMPLE_F_NO_USER, NULL);
		else
			item->work->func(item, sframe_stack_sensitive(item),
					 &stacks);
	}
	for (flags = 1; flags <= SFRAME_UNWIND_F_ALL; flags++)
		kvfree(stacks.frames[flags]);
out:
	sframe_request_put(req);
}

/* The task exits before its walk could be queued. */
static void sframe_request_abandon(struct sframe_request *req)
{
	if (sframe_request_close(req, req->task))
		sframe_request_drop(req, SFRAME_SAMPLE_F_EXITED);
	sframe_request_put(req);
}

/* Hard IRQ context (even on RT), right after the NMI that made the request. */
static void sframe_queue_unwind_irq(struct irq_work *work)
{
	struct sframe_request *req =
		container_of(work, struct sframe_request, queue_work);

	if (task_work_add(req->task, &req->twork, TWA_RESUME))
		sframe_request_abandon(req);
}

static bool sframe_match_twork(struct callback_head *cb, void *data)
{
	return cb == data;
}

u32 sframe_unwind_deferred_expire(u64 max_age_ns, bool *pending)
{
	u64 now = ktime_get_mono_fast_ns();
	struct sframe_request *req;
	struct task_struct *task;
	unsigned long owner;
	u32 i, n = 0;

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
		    READ_ONCE(req->since) + max_age_ns > now ||
		    !sframe_request_close(req, task)) {
			sframe_request_put(req);
			continue;
		}
		n += sframe_request_drop(req, SFRAME_SAMPLE_F_TIMEOUT);
		/*
		 * Cancelled: its walk's reference is ours to drop.  If the
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
	*pending = atomic_read(&sframe_requests_busy);
	return n;
}

/* A new request for task, current, holding item; NULL if none is free. */
static struct sframe_request *
sframe_request_new(struct task_struct *task, struct sframe_unwind_item *item)
{
	struct sframe_recent *recent = this_cpu_ptr(&sframe_recent);
	u32 share = sframe_share_bucket();
	atomic_t *held = &this_cpu_ptr(&sframe_request_shares)->held[share];
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
	req->share = share;
	atomic_inc(&sframe_requests_busy);
	get_task_struct(task);
	req->task = task;
	atomic_set(&req->ref, 1); /* the walk's */
	req->cookie = sframe_unwind_new_cookie();
	req->since = item->time;
	item->cookie = req->cookie;
	init_llist_head(&req->items);
	llist_add(&item->node, &req->items);
	atomic_long_set_release(&req->owner,
				sframe_req_word(task, REQ_PENDING));
	recent->req[recent->next++ % RECENT_PER_CPU] = req;
	return req;
}

/* Join a pending request of current's that this CPU remembers. */
static bool sframe_request_join_recent(struct task_struct *task,
				       struct sframe_unwind_item *item)
{
	struct sframe_recent *recent = this_cpu_ptr(&sframe_recent);
	unsigned long want = sframe_req_word(task, REQ_PENDING);
	struct sframe_request *req;
	u32 i;

	for (i = 0; i < RECENT_PER_CPU; i++) {
		req = READ_ONCE(recent->req[i]);
		if (req && atomic_long_read(&req->owner) == want &&
		    sframe_request_join(req, task, item))
			return true;
	}
	return false;
}

int sframe_unwind_deferred_request(struct sframe_unwind_work *work,
				   struct sframe_unwind_item *item)
{
	struct task_struct *task = current;
	struct sframe_request *req;

	if (!READ_ONCE(sframe_requests_ready))
		return -EBUSY;
	item->work = work;
	item->self_exec_id = task->self_exec_id;
	item->cred = rcu_access_pointer(task->real_cred);
	if (sframe_request_join_recent(task, item))
		return 0;
	req = sframe_request_new(task, item);
	if (!req)
		return -EBUSY;
	if (in_nmi()) {
		irq_work_queue(&req->queue_work);
		return 0;
	}
	if (task_work_add(task, &req->twork, TWA_RESUME))
		sframe_request_abandon(req);
	return 0;
}

static int sframe_unwind_deferred_prepare_locked(void)
{
	unsigned int cpu, i, n;

	if (sframe_requests_ready)
		return 0;
	if (!sframe_request_mem)
		sframe_request_mem = vzalloc(array_size(nr_cpu_ids * REQUESTS_PER_CPU,
							sizeof(*sframe_request_mem)));
	if (!sframe_request_mem)
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
		for (i = 0; i < REQUESTS_PER_CPU; i++)
			sframe_pool_push(&sframe_request_pool, cpu,
					 &sframe_request_mem[cpu * REQUESTS_PER_CPU + i].free_node);
	}
	sframe_nr_requests = n;
	smp_store_release(&sframe_requests_ready, true);
	return 0;
}

int sframe_unwind_deferred_prepare(void)
{
	int ret;

	mutex_lock(&sframe_requests_lock);
	ret = sframe_unwind_deferred_prepare_locked();
	mutex_unlock(&sframe_requests_lock);
	return ret;
}

int sframe_unwind_deferred_init(struct sframe_unwind_work *work,
				sframe_unwind_callback_t func)
{
	u32 i;

	work->func = func;
	work->walk = 0;
	for (i = 0; i < SFRAME_UNWIND_MAX_WORKS; i++) {
		if (!sframe_works[i]) {
			sframe_works[i] = work;
			return 0;
		}
	}
	return -ENOSPC;
}

void sframe_unwind_deferred_exit(void)
{
	struct sframe_request *req;
	struct task_struct *task;
	unsigned long owner;
	u32 i;

	/* No request comes any more.  Let the irq_works run out. */
	for (i = 0; i < sframe_nr_requests; i++)
		irq_work_sync(&sframe_request_mem[i].queue_work);

	/*
	 * Cancel the walks still queued on tasks that have not returned to
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

	vfree(sframe_request_mem);
	sframe_request_mem = NULL;
	memset(sframe_works, 0, sizeof(sframe_works));
}
