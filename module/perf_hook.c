// SPDX-License-Identifier: GPL-2.0
/*
 * The perf sample path, hooked at its ftrace site.
 *
 * The stock kernel has no deferred-unwind hook for perf, but every sample
 * written to a perf ring buffer goes through one function (see compat.h:
 * perf_prepare_sample() on 6.1), called in the sample's own context: NMI
 * for hardware events, the hrtimer interrupt for software ones.  An
 * ftrace_ops there sees the event and the sampled registers, and hands
 * both to the function its user (session.c) gave.  The hook exists from
 * the first session on; perf pays nothing for the module before that.
 */
#include <linux/err.h>
#include <linux/ftrace.h>
#include <linux/perf_event.h>
#include <linux/printk.h>
#include <linux/sched.h>
#include <linux/string.h>

#include "compat.h"
#include "perf_hook.h"

static sframe_perf_sample_fn sframe_sample_fn;

/*
 * At the entry of perf_prepare_sample(), through the ftrace site every
 * traced function has: ftrace calls this ops' own trampoline, which saves
 * the argument registers only (no FTRACE_OPS_FL_SAVE_REGS) and calls here
 * directly (no FTRACE_OPS_FL_RECURSION: the recursion test is ours, so
 * ftrace adds no helper in between).  A kprobe on the same site did the
 * same through the kprobe trampoline, with a full pt_regs, a hash lookup
 * of the probe and the kprobe state, on every perf sample of the machine.
 *
 * A sample taken within the handler (a software event on something the
 * walk does) is not hooked: the recursion test refuses it, as the kprobe
 * did (a missed probe).  Samples in an NMI that interrupted the handler
 * are a different context and are hooked; the sample path is written
 * for NMI (sample.c, deferred.c).
 */
static void notrace sframe_sample_ftrace(unsigned long ip,
					 unsigned long parent_ip,
					 struct ftrace_ops *op,
					 struct ftrace_regs *fregs)
{
	struct pt_regs *args = sframe_ftrace_args(fregs);
	int bit = ftrace_test_recursion_trylock(ip, parent_ip);

	if (bit < 0)
		return;
	sframe_sample_fn(SFRAME_SAMPLE_HOOK_REGS(args),
			 SFRAME_SAMPLE_HOOK_EVENT(args));
	ftrace_test_recursion_unlock(bit);
}

static struct ftrace_ops sframe_sample_ops = {
	.func = sframe_sample_ftrace,
};
static bool sframe_sample_hook_registered;

/*
 * The hook is registered at the first session and stays until module
 * exit; with no session its handler returns at once (one hash lookup).
 * Arming and disarming it with each session rewrote perf_prepare_sample()'s
 * ftrace site while other CPUs called it from interrupts, and 200 session
 * start/close cycles under 10 kHz sampling crashed the kernel (a call to
 * address 0 from perf_event_output_forward, or an int3 loop at the site),
 * when the hook was a kprobe.  Callers serialise.
 */
int sframe_perf_hook_enable(sframe_perf_sample_fn fn)
{
	char name[] = SFRAME_SAMPLE_HOOK_SYMBOL;
	int ret;

	if (sframe_sample_hook_registered)
		return 0;
	sframe_sample_fn = fn;
	ret = ftrace_set_filter(&sframe_sample_ops, name, strlen(name), 1);
	if (!ret)
		ret = register_ftrace_function(&sframe_sample_ops);
	if (ret) {
		ftrace_free_filter(&sframe_sample_ops);
		pr_err("sframe_unwind: cannot hook %s: %d\n",
		       SFRAME_SAMPLE_HOOK_SYMBOL, ret);
		return ret;
	}
	sframe_sample_hook_registered = true;
	return 0;
}

void sframe_perf_hook_exit(void)
{
	/* Waits until no CPU is in the handler or the trampoline. */
	if (sframe_sample_hook_registered) {
		unregister_ftrace_function(&sframe_sample_ops);
		ftrace_free_filter(&sframe_sample_ops);
	}
	sframe_sample_hook_registered = false;
}
