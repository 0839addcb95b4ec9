// SPDX-License-Identifier: GPL-2.0
/*
 * perf's deferred user callchains (Linux 7.x), walked with SFrame.
 *
 * perf record --call-graph fp,defer leaves the user part of a sample's
 * callchain for later: the sample carries a cookie
 * (PERF_CONTEXT_USER_DEFERRED), and when the task returns to user space,
 * kernel/unwind/deferred.c's task_work calls unwind_user_faultable(),
 * which walks the user stack once per kernel entry with unwind_user()
 * (kernel/unwind/user.c); perf writes the walk as a
 * PERF_RECORD_CALLCHAIN_DEFERRED, and perf script and perf report merge
 * it with the entry's samples by cookie.  unwind_user() walks frame
 * pointers only.  With the parameter perf_callchain on (perf_callchain.c
 * switches both hooks), an ftrace ops with FTRACE_OPS_FL_IPMODIFY on
 * unwind_user() sends the call to sframe_unwind_user() instead, as
 * perf_callchain.c does with perf_callchain_user(): the handler decides,
 * the replacement fills the same trace and returns straight to the
 * caller.  unwind_user() is global but not exported: ftrace finds it by
 * name (ftrace_set_filter(), through kallsyms), as it finds
 * perf_callchain_user().
 *
 * The handler decides before it redirects, and what the module does not
 * serve runs the kernel's own code unchanged: a kernel thread or a user
 * worker (no user stack of its own), an exiting task, a task without an
 * mm, a 32-bit or vm86 task, a call with no room, a call from outside a
 * task (upstream has none: unwind_user_faultable() is its one caller).
 * The replacement never calls the original: on kernels built with IBT
 * (Debian's 7.x is) the original's ENDBR is sealed, only direct calls
 * reach it.
 *
 * Unlike perf_callchain.c's walk, this one runs where faults are allowed:
 * the task itself, preemptible, about to return to user space.  So it has
 * a task's whole budget, reads the stack and the sections with faults
 * served, and discovers a mapping's .sframe on the way: nothing is left
 * for later, and the first callchain of a mapping is already whole.
 *
 * That it may sleep is what makes unhooking harder than there.  ftrace's
 * unregister waits for RCU-tasks (every task switched voluntarily, or in
 * user space), which covers a task preempted in the handler or the
 * trampoline; but a task sleeping in a page fault inside the replacement
 * has switched voluntarily, and its return address is still in this
 * module.  So the handler counts each call it redirects
 * (sframe_dcc_inflight), the replacement uncounts it last, and unhooking
 * waits, after ftrace's unregister, for the count to drop to zero, then
 * for RCU-tasks once more: a task preempted between its uncount and its
 * return has not switched voluntarily since.
 */
#include <linux/atomic.h>
#include <linux/delay.h>
#include <linux/ftrace.h>
#include <linux/module.h>
#include <linux/percpu.h>
#include <linux/preempt.h>
#include <linux/printk.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/unwind_user.h>

#include "compat.h"
#include "perf_callchain.h"
#include "perf_deferred.h"
#include "unwind.h"

#ifndef SFRAME_HAVE_UNWIND_USER
#error "perf_deferred.c is built only where the kernel has unwind_user() (Kbuild)"
#endif

#define SFRAME_DCC_SYMBOL "unwind_user"

static bool sframe_dcc_registered; /* the ops; under perf_callchain.c's lock */
static bool sframe_dcc_filtered;   /* the ops' filter set; same lock */
static bool sframe_dcc_on;         /* what the handler reads */
/* Calls redirected to the replacement and not yet out of its walk. */
static atomic_t sframe_dcc_inflight = ATOMIC_INIT(0);

/*
 * unwind_user()'s replacement, with its prototype (compat.h asserts it):
 * current's user stack into trace->entries, the PC its registers will
 * return to first, then each caller's return address, at most
 * max_entries in all; trace->nr says how many.  0 always, as the
 * original's for a task it can walk.
 */
static int notrace sframe_unwind_user(struct unwind_stacktrace *trace,
				      unsigned int max_entries)
{
	struct pt_regs *regs = task_pt_regs(current);
	/* Some 400 bytes, as deferred.c's task_work keeps on its stack. */
	struct sframe_user_unwind uw;
	unsigned int nr = 0;
	bool nofault;

	this_cpu_inc(sframe_cc_counters.served);
	trace->entries[nr++] = regs->ip;
	sframe_unwind_start(&uw, regs, SFRAME_UNWIND_F_ALL);
	/*
	 * unwind_user_faultable(), its only caller, runs in a task where it
	 * may fault (might_fault()).  Should another caller call in a task
	 * with preemption or faults off, the walk is the one that
	 * perf_callchain.c does there: no fault, no discovery, the small
	 * budget.
	 */
	nofault = !uw.can_sleep;
	if (nofault) {
		pagefault_disable();
		uw.flags |= SFRAME_UNWIND_F_HERE;
	}
	/* Twice at most: sframe_unwind_continue_fp() clears SFrame. */
	for (;;) {
		while (sframe_unwind_next(&uw)) {
			if (nr >= max_entries) {
				this_cpu_inc(sframe_cc_counters.truncated);
				goto full;
			}
			trace->entries[nr++] = uw.ip;
			/* A crafted stack may spend the whole budget. */
			if (!nofault && !(nr % SFRAME_RESCHED_FRAMES))
				cond_resched();
		}
		if (!sframe_unwind_continue_fp(&uw))
			break;
		this_cpu_inc(sframe_cc_counters.fp_continued);
	}
full:
	if (nofault)
		pagefault_enable();
	trace->nr = nr;
	this_cpu_add(sframe_cc_counters.frames, nr - 1);
	sframe_unwind_account(&uw);
	/* Last: unhooking waits for this, then for our return (above). */
	smp_mb__before_atomic();
	atomic_dec(&sframe_dcc_inflight);
	return 0;
}

/* Whether the module serves this call of unwind_user(). */
static bool sframe_dcc_serves(const struct unwind_stacktrace *trace,
			      unsigned int max_entries)
{
	const struct task_struct *task = current;
	struct pt_regs *regs;

	if (!trace || !max_entries)
		return false;
	/*
	 * Its one caller, unwind_user_faultable(), runs in a task.  Any
	 * other context (an interrupt, an NMI) is left to the original's
	 * walk: this one does not ask nmi_uaccess_okay() as
	 * perf_callchain.c's does.
	 */
	if (!in_task())
		return false;
	if (!task->mm ||
	    (task->flags & (PF_KTHREAD | PF_EXITING | SFRAME_PF_USER_WORKER)))
		return false;
	/*
	 * The module walks 64-bit stacks: a 32-bit task's is the
	 * original's, and vm86 mode, which it does not walk either.
	 */
	regs = task_pt_regs(current);
	return user_mode(regs) && user_64bit_mode(regs) &&
	       !(regs->flags & X86_VM_MASK);
}

/*
 * At unwind_user()'s ftrace site.  No FTRACE_OPS_FL_RECURSION: the
 * recursion test is ours, as in perf_callchain.c (and as livepatch's
 * handler has it).  A call from this module is never redirected (it
 * makes none; a defence).
 */
static void notrace sframe_dcc_ftrace(unsigned long ip, unsigned long parent_ip,
				      struct ftrace_ops *op,
				      struct ftrace_regs *fregs)
{
	struct pt_regs *args = sframe_ftrace_args(fregs);
	int bit = ftrace_test_recursion_trylock(ip, parent_ip);

	if (bit < 0) {
		this_cpu_inc(sframe_cc_counters.declined);
		return;
	}
	if (READ_ONCE(sframe_dcc_on) && !within_module(parent_ip, THIS_MODULE)) {
		if (sframe_dcc_serves((struct unwind_stacktrace *)args->di,
				      (unsigned int)args->si)) {
			/* Counted before the redirect: see the top. */
			atomic_inc(&sframe_dcc_inflight);
			sframe_ftrace_set_ip(fregs,
					     (unsigned long)sframe_unwind_user);
		} else {
			this_cpu_inc(sframe_cc_counters.declined);
		}
	}
	ftrace_test_recursion_unlock(bit);
}

static struct ftrace_ops sframe_dcc_ops = {
	.func = sframe_dcc_ftrace,
	.flags = FTRACE_OPS_FL_IPMODIFY,
};

/*
 * The filter is set once and freed at module exit only, for the reason
 * perf_callchain.c gives (ftrace_free_filter() leaves the ops' pointers to
 * the hashes it frees).
 */
int sframe_dcc_register(void)
{
	char name[] = SFRAME_DCC_SYMBOL;
	int ret = 0;

	if (sframe_dcc_registered)
		return 0;
	if (!sframe_dcc_filtered) {
		ret = ftrace_set_filter(&sframe_dcc_ops, name, strlen(name), 1);
		sframe_dcc_filtered = !ret;
	}
	if (!ret)
		ret = register_ftrace_function(&sframe_dcc_ops);
	if (ret) {
		pr_warn("sframe_unwind: cannot replace %s: %d\n",
			SFRAME_DCC_SYMBOL, ret);
		return ret;
	}
	sframe_dcc_registered = true;
	WRITE_ONCE(sframe_dcc_on, true);
	return 0;
}

void sframe_dcc_unregister(void)
{
	if (!sframe_dcc_registered)
		return;
	WRITE_ONCE(sframe_dcc_on, false);
	/* No CPU is in the handler or the trampoline once this returns... */
	unregister_ftrace_function(&sframe_dcc_ops);
	/*
	 * ...but a call it redirected may still be in the walk, asleep in
	 * a page fault or in discovery: for as long as that takes (a
	 * fault on a file over the network; on a userfaultfd range, until
	 * its privileged owner serves it, as the original would wait).
	 */
	while (atomic_read(&sframe_dcc_inflight))
		msleep(1);
	/* Every task out of the replacement's last instructions. */
	synchronize_rcu_tasks();
	sframe_dcc_registered = false;
}

void sframe_dcc_exit(void)
{
	if (sframe_dcc_filtered)
		ftrace_free_filter(&sframe_dcc_ops);
	sframe_dcc_filtered = false;
}
