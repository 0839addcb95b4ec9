/* SPDX-License-Identifier: GPL-2.0 */
/* The hook on perf's sample path (its ftrace site). */
#ifndef SFRAME_PERF_HOOK_H
#define SFRAME_PERF_HOOK_H

struct perf_event;
struct pt_regs;

/*
 * Called for every perf sample, in the sample's context (NMI or IRQ), with
 * the sampled registers and the event.
 */
typedef void (*sframe_perf_sample_fn)(struct pt_regs *regs,
				      struct perf_event *event);

/*
 * Register the hook, calling fn for each sample (at the first session;
 * later calls, with the same fn, are no-ops).  Callers serialise.
 */
int sframe_perf_hook_enable(sframe_perf_sample_fn fn);
/* Remove it; module exit. */
void sframe_perf_hook_exit(void);

#endif /* SFRAME_PERF_HOOK_H */
