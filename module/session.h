/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Sessions: readers of stitched stacks on /dev/sframe_unwind.  The
 * consumer of sample.c's samples, fed by perf_hook.c's ftrace hook; each
 * session's records go into its ring (session_ring.c).
 */
#ifndef SFRAME_SESSION_H
#define SFRAME_SESSION_H

#include <linux/fs.h>
#include <linux/mm_types.h>
#include <linux/poll.h>
#include <linux/types.h>

struct pid;
struct pt_regs;
struct sframe_session;
struct sframe_stats;

long sframe_session_start(struct file *file, void __user *uarg);
long sframe_session_stats(struct sframe_session *s, void __user *uarg);
ssize_t sframe_session_read(struct sframe_session *s, struct file *file,
			    char __user *buf, size_t len);
__poll_t sframe_session_poll(struct sframe_session *s, struct file *file,
			     poll_table *wait);
int sframe_session_mmap(struct sframe_session *s, struct vm_area_struct *vma);
void sframe_session_release(struct sframe_session *s);

/*
 * A sample of current with registers regs, from a perf event owned by the
 * process owner (its tgid pid): recorded for the sessions of owner that
 * follow current.  no_user: SFRAME_SAMPLE_F_* reasons the caller knows
 * for no user stack (SFRAME_SAMPLE_F_CROSS_TASK), or 0.  Any context, NMI
 * included; the caller holds the RCU read side (its own rcu_read_lock()
 * or the perf sample path's), which owner's reference relies on too.
 */
void sframe_sessions_sample(struct pt_regs *regs, struct pid *owner,
			    u32 no_user);

/* The caller's user's sessions and bounds, for SFRAME_IOC_GET_STATS. */
void sframe_sessions_user_stats(struct sframe_stats *st);

int sframe_sessions_init(void);
void sframe_sessions_exit(void);

#endif /* SFRAME_SESSION_H */
