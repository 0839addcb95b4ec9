/* SPDX-License-Identifier: GPL-2.0 */
/* The kprobe on perf's sample path. */
#ifndef SFRAME_PERF_HOOK_H
#define SFRAME_PERF_HOOK_H

/* Register the kprobe (at the first session; then a no-op). */
int sframe_perf_hook_enable(void);
/* Remove it; module exit. */
void sframe_perf_hook_exit(void);

/*
 * The sample path itself, for a perf event owned by owner_tgid, with the
 * sampled registers.  Exposed for the NMI test hook.
 */
void sframe_perf_sample(struct pt_regs *regs, pid_t owner_tgid);

#endif /* SFRAME_PERF_HOOK_H */
