// SPDX-License-Identifier: GPL-2.0
/*
 * perf's own user callchains, walked with SFrame.
 *
 * Every user stack perf records (perf record -g, and BPF's
 * bpf_get_stack*(): bpftrace's ustack, bcc's profile) comes from one
 * function: get_perf_callchain() calls perf_callchain_user(entry, regs),
 * whose x86 body walks frame pointers and stops at the first function
 * built without them, which on Debian is nearly every function.  With the
 * parameter perf_callchain on, an ftrace ops on that function with
 * FTRACE_OPS_FL_IPMODIFY sends the call to sframe_perf_callchain_user()
 * instead, the way livepatch replaces a function: the handler runs at the
 * function's ftrace site, and the instruction pointer it sets is where
 * the site returns to, with the original's arguments; the replacement
 * returns straight to perf.
 *
 * The handler decides before it redirects, and what the module does not
 * serve runs perf's own code unchanged: a 32-bit task, a sample of a
 * guest, a task without a user stack.
 * The replacement never calls the original: on kernels built with IBT
 * the original's ENDBR is sealed (only direct calls reach it), and an
 * indirect call there faults on IBT hardware.  Where SFrame cannot go on,
 * the walk goes on by frame pointers itself (unwind.c), as perf's would.
 *
 * The walk runs where perf_callchain_user() runs: an NMI (hardware
 * events), an interrupt (timers), or a task with preemption off (software
 * events, BPF).  So page faults are off,
 * the decoding budget is the interrupt's (a walk that spends it goes on
 * by frame pointers), and there is no discovery, which reads files.  A
 * mapping the module has not looked at yet is walked by frame pointers,
 * and a deferred walk of the task is asked for (deferred.c, with this
 * file's work): at the task's next return to user space it looks at each
 * mapping on the stack, so that the task's later samples find their
 * sections (its own .sframe, or the file store's).
 */
#include <linux/bitops.h>
#include <linux/ftrace.h>
#include <linux/kstrtox.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/perf_event.h>
#include <linux/preempt.h>
#include <linux/printk.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/timekeeping.h>
#include <linux/uaccess.h>
#include <asm/perf_event.h>

#include "compat.h"
#include "deferred.h"
#include "perf_callchain.h"
#include "perf_deferred.h"
#include "sframe_unwind.h"
#include "unwind.h"

#define SFRAME_CC_SYMBOL "perf_callchain_user"

/* The contexts one CPU may nest: task, softirq, hardirq, NMI. */
#define SFRAME_CC_LEVELS 4

/*
 * Deferred walks for discovery asked for at once, machine-wide.  Each
 * ends at its task's next return to user space; none is asked for when
 * all are out, and a later sample of the task asks again.
 */
#define SFRAME_CC_DISCOVERIES 64

struct sframe_cc_scratch {
	/*
	 * One walk's state per context level (an interrupt may come in the
	 * middle of a walk in a task, an NMI in one in an interrupt), off the
	 * stack: some 400 bytes.
	 */
	struct sframe_user_unwind uw[SFRAME_CC_LEVELS];
};

static DEFINE_MUTEX(sframe_cc_lock);
static bool sframe_cc_wanted;      /* the parameter; under the lock */
static bool sframe_cc_ready;       /* between init and exit; under the lock */
static bool sframe_cc_registered;  /* the ops; under the lock */
static bool sframe_cc_filtered;    /* the ops' filter set; under the lock */
static bool sframe_cc_on;          /* what the handler reads */
static struct sframe_cc_scratch __percpu *sframe_cc_scratch;

DEFINE_PER_CPU(struct sframe_cc_counters, sframe_cc_counters);

/*
 * Whether an NMI may read current's user memory.  An NMI can come in the
 * middle of switch_mm(), or while a temporary mm is loaded (text poking,
 * EFI), when CR3 is not current->mm's: a read of "user memory" then reads
 * another address space.  perf's own walk asks nmi_uaccess_okay() first;
 * that is not exported (nor safe to call indirectly: with IBT, objtool
 * seals the ENDBR of a function only ever called directly), but
 * copy_from_user_nofault() (exported) asks it before it reads.  So one
 * read through it of the word at the stack pointer, the first word the
 * walk reads: a failure is either that, or a stack the walk could not
 * read either.  Nothing can switch the mm under an NMI: one test holds
 * for the whole walk.  Everything else the walk touches is NMI-safe:
 * RCU readers only (the registry's hash and maple tree, the file store's
 * entries, the FDE indexes), the row cache's trylocked writer, per-CPU
 * scratch per context level, atomics, and deferred.c's NMI path for the
 * discovery it asks for.
 */
static bool sframe_cc_nmi_may_read(const struct pt_regs *regs)
{
	unsigned long word;

	return !copy_from_user_nofault(&word, (const void __user *)regs->sp,
				       sizeof(word));
}

static struct sframe_unwind_work sframe_cc_work;
static struct sframe_unwind_item sframe_cc_items[SFRAME_CC_DISCOVERIES];
static DECLARE_BITMAP(sframe_cc_items_used, SFRAME_CC_DISCOVERIES);

/* A deferred walk for discovery is done (or cancelled): nothing to keep. */
static void sframe_cc_discovered(struct sframe_unwind_item *item, u32 flags,
				 const struct sframe_user_stacks *stacks)
{
	clear_bit(item - sframe_cc_items, sframe_cc_items_used);
}

/*
 * Ask for a walk of current's stack from the task, where discovery may
 * run.  Any context the replacement runs in: no lock, no sleep, at most
 * four tries at a free item.
 */
static void sframe_cc_ask_discovery(void)
{
	struct sframe_unwind_item *item;
	unsigned long i;
	int tries;

	if (current->flags & PF_EXITING)
		return;
	for (tries = 0; tries < 4; tries++) {
		i = find_first_zero_bit(sframe_cc_items_used,
					SFRAME_CC_DISCOVERIES);
		if (i >= SFRAME_CC_DISCOVERIES)
			goto dropped;
		if (!test_and_set_bit(i, sframe_cc_items_used))
			break;
	}
	if (tries == 4)
		goto dropped;
	item = &sframe_cc_items[i];
	item->time = ktime_get_mono_fast_ns();
	if (sframe_unwind_deferred_request(&sframe_cc_work, item)) {
		clear_bit(i, sframe_cc_items_used);
		goto dropped;
	}
	this_cpu_inc(sframe_cc_counters.discoveries);
	return;
dropped:
	this_cpu_inc(sframe_cc_counters.discoveries_dropped);
}

/*
 * perf_callchain_user()'s replacement, with its prototype: the user part
 * of perf's callchain, after the PERF_CONTEXT_USER mark its caller wrote.
 * As perf's own: the sampled PC first, then each caller's return address
 * while perf_callchain_store() takes them (max_stack), never a mark.
 */
static void notrace sframe_perf_callchain_user(struct perf_callchain_entry_ctx *entry,
					       struct pt_regs *regs)
{
	struct sframe_user_unwind *uw;
	u64 frames = 0;

	this_cpu_inc(sframe_cc_counters.served);
	if (perf_callchain_store(entry, regs->ip)) {
		this_cpu_inc(sframe_cc_counters.truncated);
		return;
	}
	uw = &this_cpu_ptr(sframe_cc_scratch)->uw[interrupt_context_level()];
	pagefault_disable();
	sframe_unwind_start(uw, regs,
			    SFRAME_UNWIND_F_ALL | SFRAME_UNWIND_F_HERE);
	if (in_nmi() && !sframe_cc_nmi_may_read(regs)) {
		/* Counted as a walk stopped by a fault, as it is. */
		uw->stop = SFRAME_STOP_FAULT;
		goto full;
	}
	/* Twice at most: sframe_unwind_continue_fp() clears SFrame. */
	for (;;) {
		while (sframe_unwind_next(uw)) {
			if (perf_callchain_store(entry, uw->ip)) {
				this_cpu_inc(sframe_cc_counters.truncated);
				goto full;
			}
			frames++;
		}
		if (!sframe_unwind_continue_fp(uw))
			break;
		this_cpu_inc(sframe_cc_counters.fp_continued);
	}
full:
	pagefault_enable();
	this_cpu_add(sframe_cc_counters.frames, frames);
	sframe_unwind_account(uw);
	if (uw->undiscovered)
		sframe_cc_ask_discovery();
}

/* Whether the module serves this call of perf_callchain_user(). */
static bool sframe_cc_serves(struct pt_regs *regs)
{
	const struct task_struct *task = current;

	/* As perf's own: nothing of a guest's, nor of vm86 mode. */
	if (!regs || !user_mode(regs) || !user_64bit_mode(regs) ||
	    (regs->flags & (X86_VM_MASK | PERF_EFLAGS_VM)))
		return false;
	/*
	 * perf_guest_state() (a sample taken while a vCPU ran) is not
	 * exported: PF_VCPU is set over the same time, and then some.
	 */
	return task->mm &&
	       !(task->flags & (PF_KTHREAD | PF_VCPU | SFRAME_PF_USER_WORKER));
}

/*
 * At perf_callchain_user()'s ftrace site.  No FTRACE_OPS_FL_RECURSION:
 * the recursion test is ours, as in perf_hook.c.  A call from this module
 * is never redirected (it makes none; a defence, as livepatch's users
 * keep one).
 */
static void notrace sframe_cc_ftrace(unsigned long ip, unsigned long parent_ip,
				     struct ftrace_ops *op,
				     struct ftrace_regs *fregs)
{
	struct pt_regs *args = sframe_ftrace_args(fregs);
	int bit = ftrace_test_recursion_trylock(ip, parent_ip);

	if (bit < 0) {
		this_cpu_inc(sframe_cc_counters.declined);
		return;
	}
	if (READ_ONCE(sframe_cc_on) && !within_module(parent_ip, THIS_MODULE)) {
		if (sframe_cc_serves((struct pt_regs *)args->si))
			sframe_ftrace_set_ip(fregs,
					     (unsigned long)sframe_perf_callchain_user);
		else
			this_cpu_inc(sframe_cc_counters.declined);
	}
	ftrace_test_recursion_unlock(bit);
}

static struct ftrace_ops sframe_cc_ops = {
	.func = sframe_cc_ftrace,
	.flags = FTRACE_OPS_FL_IPMODIFY,
};

/*
 * Hook or unhook, under the lock: perf_callchain_user() and, where the
 * kernel has it (7.x), unwind_user() for perf's deferred callchains
 * (perf_deferred.c), both or neither.  Unhooking returns once no CPU is
 * in the handler, its trampoline or the replacement: ftrace's shutdown
 * waits for RCU-tasks (every task voluntarily switched) and
 * RCU-tasks-rude (every CPU scheduled), and the replacement, called only
 * where preemption is off, never sleeps (perf_deferred.c's may, and waits
 * for its own).
 *
 * The ops' filter is set once and freed at module exit only:
 * ftrace_free_filter() frees the hashes without resetting the ops' pointers
 * to them, so an ops filtered again after it reads freed memory, and the
 * hash is freed twice (an oops in free_ftrace_hash() from an RCU callback
 * at the 2nd switch on, in the first run of the switching test).
 */
static int sframe_cc_apply(bool on)
{
	char name[] = SFRAME_CC_SYMBOL;
	int ret;

	if (on == sframe_cc_registered)
		return 0;
	if (!on) {
		sframe_dcc_unregister();
		WRITE_ONCE(sframe_cc_on, false);
		unregister_ftrace_function(&sframe_cc_ops);
		sframe_unwind_deferred_set_walk(&sframe_cc_work, 0, 0);
		sframe_cc_registered = false;
		return 0;
	}
	if (!sframe_cc_scratch) {
		sframe_cc_scratch = alloc_percpu(struct sframe_cc_scratch);
		if (!sframe_cc_scratch)
			return -ENOMEM;
	}
	ret = sframe_unwind_deferred_prepare();
	if (ret)
		return ret;
	/* The discovery walk: as deep as perf's deepest callchain. */
	sframe_unwind_deferred_set_walk(&sframe_cc_work, PERF_MAX_STACK_DEPTH,
					BIT(SFRAME_UNWIND_F_ALL));
	if (!sframe_cc_filtered) {
		ret = ftrace_set_filter(&sframe_cc_ops, name, strlen(name), 1);
		sframe_cc_filtered = !ret;
	} else {
		ret = 0;
	}
	if (!ret)
		ret = register_ftrace_function(&sframe_cc_ops);
	if (ret) {
		/* -EBUSY: another IPMODIFY ops (a livepatch) has it. */
		sframe_unwind_deferred_set_walk(&sframe_cc_work, 0, 0);
		pr_warn("sframe_unwind: cannot replace %s: %d\n",
			SFRAME_CC_SYMBOL, ret);
		return ret;
	}
	/*
	 * Then unwind_user(), where the kernel has it (it says why not).
	 * The first ops is registered but never redirects yet
	 * (sframe_cc_on): undone as it is, the switch stays off whole.
	 */
	ret = sframe_dcc_register();
	if (ret) {
		unregister_ftrace_function(&sframe_cc_ops);
		sframe_unwind_deferred_set_walk(&sframe_cc_work, 0, 0);
		return ret;
	}
	sframe_cc_registered = true;
	WRITE_ONCE(sframe_cc_on, true);
	return 0;
}

/*
 * The parameter: written at load (before init, which applies it) or at
 * any time by root through sysfs; a write that cannot hook fails with
 * the error and leaves the value as it was.
 */
static int sframe_cc_param_set(const char *val, const struct kernel_param *kp)
{
	bool on;
	int ret = kstrtobool(val, &on);

	if (ret)
		return ret;
	mutex_lock(&sframe_cc_lock);
	if (sframe_cc_ready)
		ret = sframe_cc_apply(on);
	if (!ret)
		sframe_cc_wanted = on;
	mutex_unlock(&sframe_cc_lock);
	return ret;
}

static int sframe_cc_param_get(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "%c\n",
			 READ_ONCE(sframe_cc_wanted) ? 'Y' : 'N');
}

static const struct kernel_param_ops sframe_cc_param_ops = {
	.set = sframe_cc_param_set,
	.get = sframe_cc_param_get,
};
module_param_cb(perf_callchain, &sframe_cc_param_ops, NULL, 0644);
MODULE_PARM_DESC(perf_callchain,
		 "perf's own user callchains (perf record -g, BPF's stacks; on 7.x also --call-graph fp,defer) walked with SFrame (default: off)");

void sframe_callchain_stats(struct sframe_stats *st)
{
	unsigned int cpu;

	for_each_possible_cpu(cpu) {
		const struct sframe_cc_counters *c =
			per_cpu_ptr(&sframe_cc_counters, cpu);

		/* Each a u64 one instruction writes: no torn read on 64-bit. */
		st->callchain_served += READ_ONCE(c->served);
		st->callchain_declined += READ_ONCE(c->declined);
		st->callchain_frames += READ_ONCE(c->frames);
		st->callchain_fp_continued += READ_ONCE(c->fp_continued);
		st->callchain_truncated += READ_ONCE(c->truncated);
		st->callchain_discoveries += READ_ONCE(c->discoveries);
		st->callchain_discoveries_dropped +=
			READ_ONCE(c->discoveries_dropped);
	}
}

int sframe_callchain_init(void)
{
	int ret = sframe_unwind_deferred_init(&sframe_cc_work,
					      sframe_cc_discovered);

	if (ret)
		return ret;
	mutex_lock(&sframe_cc_lock);
	sframe_cc_ready = true;
	/* Asked for at load and impossible: said, and the module loads. */
	if (sframe_cc_wanted && sframe_cc_apply(true))
		sframe_cc_wanted = false;
	mutex_unlock(&sframe_cc_lock);
	return 0;
}

void sframe_callchain_exit(void)
{
	mutex_lock(&sframe_cc_lock);
	sframe_cc_ready = false;
	sframe_cc_apply(false);
	if (sframe_cc_filtered)
		ftrace_free_filter(&sframe_cc_ops);
	sframe_cc_filtered = false;
	sframe_dcc_exit();
	mutex_unlock(&sframe_cc_lock);
	free_percpu(sframe_cc_scratch);
	sframe_cc_scratch = NULL;
}
