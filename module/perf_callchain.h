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

struct sframe_stats;
/* Adds the hook's counters (callchain_*) to *st, for SFRAME_IOC_GET_STATS. */
void sframe_callchain_stats(struct sframe_stats *st);

#endif /* SFRAME_PERF_CALLCHAIN_H */
