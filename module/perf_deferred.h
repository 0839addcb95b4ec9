/* SPDX-License-Identifier: GPL-2.0 */
/*
 * perf's deferred user callchains walked with SFrame (perf_deferred.c):
 * the hook of unwind_user(), on kernels that have it (7.x,
 * SFRAME_HAVE_UNWIND_USER); elsewhere these do nothing, and
 * perf_callchain.c's switch hooks perf_callchain_user() alone.
 *
 * Called by perf_callchain.c only, under its lock: the parameter
 * perf_callchain switches both hooks.
 */
#ifndef SFRAME_PERF_DEFERRED_H
#define SFRAME_PERF_DEFERRED_H

#ifdef SFRAME_HAVE_UNWIND_USER
/*
 * Hook unwind_user(): 0, or the error of ftrace (-EBUSY: another
 * IPMODIFY ops, a livepatch, has it), with nothing hooked.
 */
int sframe_dcc_register(void);
/*
 * Unhook it.  Returns once no task is in the hook and none runs its
 * replacement any more, nor will: sleeps (RCU-tasks, and the walks in
 * flight, which may wait for page faults).
 */
void sframe_dcc_unregister(void);
/* Module exit, after sframe_dcc_unregister(): frees the ops' filter. */
void sframe_dcc_exit(void);
#else
static inline int sframe_dcc_register(void)
{
	return 0;
}

static inline void sframe_dcc_unregister(void)
{
}

static inline void sframe_dcc_exit(void)
{
}
#endif

#endif /* SFRAME_PERF_DEFERRED_H */
