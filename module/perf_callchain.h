/* SPDX-License-Identifier: GPL-2.0 */
/* perf's own user callchains walked with SFrame (perf_callchain.c). */
#ifndef SFRAME_PERF_CALLCHAIN_H
#define SFRAME_PERF_CALLCHAIN_H

/*
 * Module init, after the sessions (it is the deferred layer's second
 * consumer): applies a perf_callchain=1 given at load.
 */
int sframe_callchain_init(void);
/*
 * Module exit, before the sessions: the hook is gone once this returns,
 * and no CPU runs it any more.  Its deferred walks still pending are
 * handed back by the sessions' exit (sframe_unwind_deferred_exit()).
 */
void sframe_callchain_exit(void);

#include <linux/percpu.h>
#include <linux/types.h>

/*
 * What the hooks did, per CPU: they run in every context up to NMI, where
 * this_cpu_inc() (one instruction on x86) is safe and a shared atomic
 * would bounce between CPUs at every sample.  Summed for
 * SFRAME_IOC_GET_STATS (struct sframe_stats's callchain_*).  Here, not in
 * perf_callchain.c alone: the hook of perf's deferred callchains
 * (perf_deferred.c) counts into the same.
 */
struct sframe_cc_counters {
	u64 served;
	u64 declined;
	u64 frames;
	u64 fp_continued;
	u64 truncated;
	u64 discoveries;
	u64 discoveries_dropped;
};
DECLARE_PER_CPU(struct sframe_cc_counters, sframe_cc_counters);

struct sframe_stats;
/* Adds the hook's counters (callchain_*) to *st, for SFRAME_IOC_GET_STATS. */
void sframe_callchain_stats(struct sframe_stats *st);

#endif /* SFRAME_PERF_CALLCHAIN_H */
