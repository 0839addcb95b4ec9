// SPDX-License-Identifier: GPL-2.0
/*
 * Registrations across fork().
 *
 * A fork child starts with a copy of its parent's address space: the text
 * and the sections a program registered (JIT code among them) or a
 * profiler supplied are at the same addresses, but the registry follows
 * the mm, and the kernel gives a module no hook in dup_mmap().  So the
 * module listens to the task_newtask tracepoint (every new task, in
 * copy_process(), after the mm is copied) and, for a child with an address
 * space of its own whose parent has such sections, takes a snapshot of
 * them there and then (the parent may change its registry as soon as
 * fork() returns, before the child runs) and queues a task_work on the
 * child: it runs before the child's first instruction in user space, in
 * the child, where it may sleep, and adds the snapshot's entries to the
 * child's registry.  Discovered sections are not copied: discovery finds
 * them again.
 *
 * The tracepoint probe runs with preemption off: the snapshot is taken
 * lock-free under RCU, allocated with GFP_NOWAIT (a failure is counted in
 * forks_not_inherited), and shares the bytes of supplied sections by
 * reference instead of copying them.
 */
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/task_work.h>
#include <linux/tracepoint.h>
#include <linux/wait_bit.h>

#include "inherit.h"
#include "ksyms.h"
#include "registry.h"
#include "stats.h"

struct sframe_inherit_work {
	struct callback_head twork;
	struct list_head node;       /* in sframe_inherit_list */
	struct task_struct *child;   /* referenced */
	struct sframe_snapshot *snap; /* the parent's, at the fork */
};

static struct tracepoint *sframe_newtask_tp;
/* Work items queued and not yet run: module exit cancels them. */
static LIST_HEAD(sframe_inherit_list);
static DEFINE_SPINLOCK(sframe_inherit_lock);
/* Work items not yet freed, queued or running. */
static atomic_t sframe_inherit_pending = ATOMIC_INIT(0);

static void sframe_inherit_free(struct sframe_inherit_work *w)
{
	sframe_snapshot_free(w->snap);
	put_task_struct(w->child);
	kfree(w);
	if (atomic_dec_and_test(&sframe_inherit_pending))
		wake_up_var(&sframe_inherit_pending);
}

static void sframe_inherit_run(struct callback_head *twork)
{
	struct sframe_inherit_work *w =
		container_of(twork, struct sframe_inherit_work, twork);

	spin_lock(&sframe_inherit_lock);
	list_del_init(&w->node);
	spin_unlock(&sframe_inherit_lock);
	/* No mm: the child is exiting before it ever ran in user space. */
	if (current->mm) {
		/* Consumes the snapshot. */
		if (sframe_snapshot_apply(current->mm, w->snap))
			atomic64_inc(&sframe_counters.forks_not_inherited);
		else
			atomic64_inc(&sframe_counters.forks_inherited);
		w->snap = NULL;
	}
	sframe_inherit_free(w);
}

static void sframe_on_newtask(void *data, struct task_struct *child,
			      unsigned long clone_flags)
{
	const gfp_t gfp = GFP_NOWAIT | __GFP_NOWARN | __GFP_ACCOUNT;
	struct mm_struct *mm = current->mm;
	struct sframe_inherit_work *w;
	struct sframe_snapshot *snap;
	bool failed;

	/* Threads and vfork() share the mm, and with it the registry. */
	if ((clone_flags & CLONE_VM) || !mm || !child->mm)
		return;
	snap = sframe_snapshot_take(mm, gfp, &failed);
	if (!snap) {
		if (failed)
			atomic64_inc(&sframe_counters.forks_not_inherited);
		return;
	}
	w = kzalloc(sizeof(*w), gfp);
	if (!w) {
		sframe_snapshot_free(snap);
		atomic64_inc(&sframe_counters.forks_not_inherited);
		return;
	}
	init_task_work(&w->twork, sframe_inherit_run);
	get_task_struct(child);
	w->child = child;
	w->snap = snap;
	atomic_inc(&sframe_inherit_pending);
	spin_lock(&sframe_inherit_lock);
	list_add(&w->node, &sframe_inherit_list);
	spin_unlock(&sframe_inherit_lock);
	/* The child has not run yet: it runs this on its way to user space. */
	if (task_work_add(child, &w->twork, TWA_RESUME)) {
		spin_lock(&sframe_inherit_lock);
		list_del_init(&w->node);
		spin_unlock(&sframe_inherit_lock);
		atomic64_inc(&sframe_counters.forks_not_inherited);
		sframe_inherit_free(w);
	}
}

static void sframe_find_newtask(struct tracepoint *tp, void *priv)
{
	if (!strcmp(tp->name, "task_newtask"))
		sframe_newtask_tp = tp;
}

int sframe_inherit_init(void)
{
	int ret;

	for_each_kernel_tracepoint(sframe_find_newtask, NULL);
	if (!sframe_newtask_tp) {
		pr_err("sframe_unwind: no task_newtask tracepoint\n");
		return -ENOENT;
	}
	ret = tracepoint_probe_register(sframe_newtask_tp,
					(void *)sframe_on_newtask, NULL);
	if (ret)
		pr_err("sframe_unwind: cannot attach to task_newtask (%d)\n",
		       ret);
	return ret;
}

static bool sframe_match_inherit(struct callback_head *cb, void *data)
{
	return cb == data;
}

void sframe_inherit_exit(void)
{
	struct sframe_inherit_work *w;

	tracepoint_probe_unregister(sframe_newtask_tp,
				    (void *)sframe_on_newtask, NULL);
	/* No probe runs any more: nothing is queued from here on. */
	tracepoint_synchronize_unregister();
	for (;;) {
		struct callback_head *cancelled = NULL;

		/*
		 * Under the lock: a work item on the list has not reached the
		 * start of sframe_inherit_run(), so it cannot be freed while
		 * we cancel it.
		 */
		spin_lock(&sframe_inherit_lock);
		w = list_first_entry_or_null(&sframe_inherit_list,
					     struct sframe_inherit_work, node);
		if (w) {
			list_del_init(&w->node);
			cancelled = sframe_ksyms.task_work_cancel_match(
				w->child, sframe_match_inherit, &w->twork);
		}
		spin_unlock(&sframe_inherit_lock);
		if (!w)
			break;
		/* Not cancelled: it is running now, and frees itself. */
		if (cancelled)
			sframe_inherit_free(w);
	}
	wait_var_event(&sframe_inherit_pending,
		       !atomic_read(&sframe_inherit_pending));
	/* And for the last of them to have left module text. */
	synchronize_rcu_tasks();
}
