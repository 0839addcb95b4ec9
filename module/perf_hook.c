// SPDX-License-Identifier: GPL-2.0
/*
 * The perf sample path, hooked with a kprobe.
 *
 * The stock kernel has no deferred-unwind hook for perf, but every sample
 * written to a perf ring buffer goes through one function (see compat.h:
 * perf_prepare_sample() on 6.1), called in the sample's own context: NMI
 * for hardware events, the hrtimer interrupt for software ones.  A kprobe
 * there sees the event and the sampled registers, and hands both to the
 * function its user (session.c) gave.  The kprobe exists from the first
 * session on; perf pays nothing for the module before that.
 */
#include <linux/err.h>
#include <linux/kprobes.h>
#include <linux/perf_event.h>
#include <linux/printk.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>

#include "compat.h"
#include "perf_hook.h"

static sframe_perf_sample_fn sframe_sample_fn;

static int sframe_sample_pre(struct kprobe *kp, struct pt_regs *kregs)
{
	sframe_sample_fn(SFRAME_SAMPLE_HOOK_REGS(kregs),
			 SFRAME_SAMPLE_HOOK_EVENT(kregs));
	return 0;
}

static struct kprobe sframe_sample_kprobe;
static bool sframe_sample_kprobe_registered;

/*
 * The kprobe is registered at the first session and stays until module
 * exit; with no session its handler returns at once (one hash lookup).
 * Arming and disarming it with each session rewrote perf_prepare_sample()'s
 * ftrace site while other CPUs called it from interrupts, and 200 session
 * start/close cycles under 10 kHz sampling crashed the kernel (a call to
 * address 0 from perf_event_output_forward, or an int3 loop at the site).
 * Callers serialise.
 */
int sframe_perf_hook_enable(sframe_perf_sample_fn fn)
{
	int ret;

	if (sframe_sample_kprobe_registered)
		return 0;
	sframe_sample_fn = fn;
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
