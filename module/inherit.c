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
 * space of its own whose parent has such sections, queues two task_works:
 * one on the parent thread, which runs before fork() returns to its user
 * space, and one on the child, which runs before the child's first
 * instruction in user space.  The first of the two to run takes a snapshot
 * of the parent's registered and supplied sections (sharing the bytes of
 * supplied ones by reference); the child's adds the snapshot's entries to
 * its own registry.  So the snapshot is the parent's registry as it was
 * when the fork ended, before either side ran user code again (the parent
 * may change its registry as soon as fork() returns), as if taken in the
 * tracepoint.  Discovered sections are not copied: discovery finds them
 * again.
 *
 * The snapshot is not taken in the tracepoint probe itself: the probe runs
 * with preemption off, where PREEMPT_RT allows no allocation (compat.h).
 * The probe allocates nothing and takes no lock: the work items come from
 * per-CPU pools filled at load (a fork that finds its CPU's pool empty is
 * counted in forks_not_inherited), popped only by the probe on its own CPU
 * with preemption off, given back from anywhere.  Each item is referenced
 * by its two task_works; module exit cancels those not yet run.
 */
#include <linux/percpu.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/task_work.h>
#include <linux/tracepoint.h>
#include <linux/vmalloc.h>
#include <linux/wait_bit.h>

#include "inherit.h"
#include "ksyms.h"
#include "registry.h"
#include "stats.h"

/* Forks of processes with registered sections in flight on one CPU. */
#define SFRAME_FORKS_PER_CPU 64

struct sframe_fork {
	struct callback_head parent_work; /* in the parent, before fork() returns */
	struct callback_head child_work;  /* in the child, before user space */
	atomic_t ref;                /* the two works; 0 when free */
	struct task_struct *parent;  /* referenced while in use */
	struct task_struct *child;   /* referenced while in use */
	struct mm_struct *mm;        /* the parent's, grabbed while in use */
	struct mutex lock;           /* taken, snap, failed */
	bool taken;                  /* the snapshot was taken */
	bool failed;                 /* ...and there was no memory for it */
	struct sframe_snapshot *snap; /* NULL once the child consumed it */
	struct llist_node free_node;
	u32 home_cpu;
};

static struct tracepoint *sframe_newtask_tp;
static DEFINE_PER_CPU(struct llist_head, sframe_fork_pool);
static struct sframe_fork *sframe_fork_mem; /* all CPUs' items */
static unsigned int sframe_nr_forks;
/* Items in use: exit waits for zero. */
static atomic_t sframe_forks_busy = ATOMIC_INIT(0);

/*
 * Drop a reference.  The last one is dropped by a task_work or by module
 * exit (process context): the probe holds none of its own, and when it
 * gives one up, the other remains.
 */
static void sframe_fork_put(struct sframe_fork *f)
{
	if (!atomic_dec_and_test(&f->ref))
		return;
	sframe_snapshot_free(f->snap);
	f->snap = NULL;
	mmdrop(f->mm);
	put_task_struct(f->parent);
	put_task_struct(f->child);
	f->mm = NULL;
	f->parent = NULL;
	f->child = NULL;
	llist_add(&f->free_node, per_cpu_ptr(&sframe_fork_pool, f->home_cpu));
	if (atomic_dec_and_test(&sframe_forks_busy))
		wake_up_var(&sframe_forks_busy);
}

/* The first of the parent and the child to get here takes the snapshot. */
static void sframe_fork_snapshot(struct sframe_fork *f)
{
	const gfp_t gfp = GFP_NOWAIT | __GFP_NOWARN | __GFP_ACCOUNT;

	mutex_lock(&f->lock);
	if (!f->taken) {
		f->snap = sframe_snapshot_take(f->mm, gfp, &f->failed);
		f->taken = true;
	}
	mutex_unlock(&f->lock);
}

static void sframe_fork_parent_run(struct callback_head *twork)
{
	struct sframe_fork *f =
		container_of(twork, struct sframe_fork, parent_work);

	sframe_fork_snapshot(f);
	sframe_fork_put(f);
}

static void sframe_fork_child_run(struct callback_head *twork)
{
	struct sframe_fork *f =
		container_of(twork, struct sframe_fork, child_work);
	struct sframe_snapshot *snap;

	sframe_fork_snapshot(f);
	/* The parent's work only takes it: taken, snap is ours alone. */
	snap = f->snap;
	f->snap = NULL;
	if (f->failed) {
		atomic64_inc(&sframe_counters.forks_not_inherited);
	} else if (snap && !current->mm) {
		/* The child is exiting before it ever ran in user space. */
		sframe_snapshot_free(snap);
	} else if (snap) {
		/* Consumes the snapshot. */
		if (sframe_snapshot_apply(current->mm, snap))
			atomic64_inc(&sframe_counters.forks_not_inherited);
		else
			atomic64_inc(&sframe_counters.forks_inherited);
	}
	sframe_fork_put(f);
}

/* Preemption off (a tracepoint probe): no lock, no allocation. */
static struct sframe_fork *sframe_fork_pop(void)
{
	struct llist_node *node;

	/* The only consumer of this CPU's list: preemption is off. */
	node = llist_del_first(this_cpu_ptr(&sframe_fork_pool));
	return node ? container_of(node, struct sframe_fork, free_node) : NULL;
}

static void sframe_on_newtask(void *data, struct task_struct *child,
			      unsigned long clone_flags)
{
	struct mm_struct *mm = current->mm;
	struct sframe_fork *f;

	/* Threads and vfork() share the mm, and with it the registry. */
	if ((clone_flags & CLONE_VM) || !mm || !child->mm ||
	    !sframe_snapshot_wanted(mm))
		return;
	f = sframe_fork_pop();
	if (!f) {
		atomic64_inc(&sframe_counters.forks_not_inherited);
		return;
	}
	get_task_struct(child);
	f->child = child;
	get_task_struct(current);
	f->parent = current;
	mmgrab(mm);
	f->mm = mm;
	f->taken = false;
	f->failed = false;
	f->snap = NULL;
	atomic_set(&f->ref, 2);
	atomic_inc(&sframe_forks_busy);
	/*
	 * The child has not run yet (it is woken after copy_process()): its
	 * work is not refused, nor can it run before the parent's is queued.
	 * Should it be refused all the same, none of the references given
	 * back here is the last (copy_process() holds the child, current its
	 * mm), and no exit waits yet (it unhooks the probe first).
	 */
	if (task_work_add(child, &f->child_work, TWA_RESUME)) {
		atomic64_inc(&sframe_counters.forks_not_inherited);
		atomic_set(&f->ref, 0);
		mmdrop(mm);
		put_task_struct(current);
		put_task_struct(child);
		llist_add(&f->free_node, this_cpu_ptr(&sframe_fork_pool));
		atomic_dec(&sframe_forks_busy);
		return;
	}
	/* Not the last reference: the child's work holds one. */
	if (task_work_add(current, &f->parent_work, TWA_RESUME))
		sframe_fork_put(f);
}

static void sframe_find_newtask(struct tracepoint *tp, void *priv)
{
	if (!strcmp(tp->name, "task_newtask"))
		sframe_newtask_tp = tp;
}

int sframe_inherit_init(void)
{
	unsigned int cpu, i;
	int ret;

	for_each_kernel_tracepoint(sframe_find_newtask, NULL);
	if (!sframe_newtask_tp) {
		pr_err("sframe_unwind: no task_newtask tracepoint\n");
		return -ENOENT;
	}
	sframe_nr_forks = nr_cpu_ids * SFRAME_FORKS_PER_CPU;
	sframe_fork_mem = vzalloc(array_size(sframe_nr_forks,
					     sizeof(*sframe_fork_mem)));
	if (!sframe_fork_mem)
		return -ENOMEM;
	for (i = 0; i < sframe_nr_forks; i++) {
		struct sframe_fork *f = &sframe_fork_mem[i];

		f->home_cpu = i / SFRAME_FORKS_PER_CPU;
		mutex_init(&f->lock);
		init_task_work(&f->parent_work, sframe_fork_parent_run);
		init_task_work(&f->child_work, sframe_fork_child_run);
	}
	for_each_possible_cpu(cpu) {
		for (i = 0; i < SFRAME_FORKS_PER_CPU; i++)
			llist_add(&sframe_fork_mem[cpu * SFRAME_FORKS_PER_CPU + i].free_node,
				  per_cpu_ptr(&sframe_fork_pool, cpu));
	}
	ret = tracepoint_probe_register(sframe_newtask_tp,
					(void *)sframe_on_newtask, NULL);
	if (ret) {
		pr_err("sframe_unwind: cannot attach to task_newtask (%d)\n",
		       ret);
		vfree(sframe_fork_mem);
		sframe_fork_mem = NULL;
	}
	return ret;
}

static bool sframe_match_twork(struct callback_head *cb, void *data)
{
	return cb == data;
}

void sframe_inherit_exit(void)
{
	struct sframe_fork *f;
	unsigned int i;

	tracepoint_probe_unregister(sframe_newtask_tp,
				    (void *)sframe_on_newtask, NULL);
	/* No probe runs any more: no item is taken from here on. */
	tracepoint_synchronize_unregister();
	/*
	 * Cancel the works not yet run; a cancelled work's reference is ours
	 * to drop.  Holding a reference keeps the item's tasks.  A work not
	 * cancelled is running, or has run, and drops its own.
	 */
	for (i = 0; i < sframe_nr_forks; i++) {
		f = &sframe_fork_mem[i];
		if (!atomic_inc_not_zero(&f->ref))
			continue;
		if (sframe_ksyms.task_work_cancel_match(f->child,
							sframe_match_twork,
							&f->child_work))
			sframe_fork_put(f);
		if (sframe_ksyms.task_work_cancel_match(f->parent,
							sframe_match_twork,
							&f->parent_work))
			sframe_fork_put(f);
		sframe_fork_put(f);
		if (!(i % 64))
			cond_resched();
	}
	wait_var_event(&sframe_forks_busy, !atomic_read(&sframe_forks_busy));
	/* And for the last of them to have left module text. */
	synchronize_rcu_tasks();
	vfree(sframe_fork_mem);
	sframe_fork_mem = NULL;
}
