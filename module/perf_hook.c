// SPDX-License-Identifier: GPL-2.0
/*
 * The perf sample path, hooked with a kprobe.
 *
 * The stock kernel has no deferred-unwind hook for perf, but every sample
 * written to a perf ring buffer goes through one function (see compat.h:
 * perf_prepare_sample() on 6.1), called in the sample's own context: NMI
 * for hardware events, the hrtimer interrupt for software ones.  A kprobe
 * there sees the event and the sampled registers, and hands the sample to
 * deferred.c when a session wants it.  The kprobe exists from the first
 * session on; perf pays nothing for the module before that.
 */
#include <linux/err.h>
#include <linux/kprobes.h>
#include <linux/perf_event.h>
#include <linux/printk.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>

#include "compat.h"
#include "deferred.h"
#include "perf_hook.h"
#include "session.h"

/* The process that opened event: sessions take only their own events. */
static pid_t sframe_event_owner_tgid(struct perf_event *event)
{
	struct task_struct *owner;
	pid_t tgid = 0;

	/* Inherited (per-thread) events: the original's owner. */
	if (event->parent)
		event = event->parent;
	rcu_read_lock();
	owner = READ_ONCE(event->owner);
	/*
	 * NULL once the owner has exited (perf reads it under RCU too);
	 * TASK_TOMBSTONE, -1, for the kernel's own counters.
	 */
	if (!IS_ERR_OR_NULL(owner))
		tgid = owner->tgid;
	rcu_read_unlock();
	return tgid;
}

void sframe_perf_sample(struct pt_regs *regs, pid_t owner_tgid)
{
	struct task_struct *task = current;

	if (!owner_tgid ||
	    !sframe_sessions_want(owner_tgid, task->pid, task->tgid))
		return;
	if (!sframe_deferred_sample(regs, owner_tgid))
		sframe_sessions_lost_capture(owner_tgid, task->pid, task->tgid);
}

static int sframe_sample_pre(struct kprobe *kp, struct pt_regs *kregs)
{
	struct perf_event *event = SFRAME_SAMPLE_HOOK_EVENT(kregs);

	sframe_perf_sample(SFRAME_SAMPLE_HOOK_REGS(kregs),
			   sframe_event_owner_tgid(event));
	return 0;
}

static struct kprobe sframe_sample_kprobe;
static bool sframe_sample_kprobe_registered;

/*
 * The kprobe is registered at the first session and stays until module
 * exit; with no session its handler returns at once (one RCU list check).
 * Arming and disarming it with each session rewrote perf_prepare_sample()'s
 * ftrace site while other CPUs called it from interrupts, and 200 session
 * start/close cycles under 10 kHz sampling crashed the kernel (a call to
 * address 0 from perf_event_output_forward, or an int3 loop at the site).
 * Callers serialise.
 */
int sframe_perf_hook_enable(void)
{
	int ret;

	if (sframe_sample_kprobe_registered)
		return 0;
	memset(&sframe_sample_kprobe, 0, sizeof(sframe_sample_kprobe));
	sframe_sample_kprobe.symbol_name = SFRAME_SAMPLE_HOOK_SYMBOL;
	sframe_sample_kprobe.pre_handler = sframe_sample_pre;
	ret = register_kprobe(&sframe_sample_kprobe);
	if (ret) {
		pr_err("sframe_unwind: cannot hook %s: %d\n",
		       SFRAME_SAMPLE_HOOK_SYMBOL, ret);
		return ret;
	}
	sframe_sample_kprobe_registered = true;
	return 0;
}

void sframe_perf_hook_exit(void)
{
	/* Waits for handlers still running on other CPUs. */
	if (sframe_sample_kprobe_registered)
		unregister_kprobe(&sframe_sample_kprobe);
	sframe_sample_kprobe_registered = false;
}
