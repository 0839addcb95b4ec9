/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Sessions: readers of stitched stacks on /dev/sframe_unwind.
 */
#ifndef SFRAME_SESSION_H
#define SFRAME_SESSION_H

#include <linux/fs.h>
#include <linux/poll.h>
#include <linux/types.h>

struct sframe_session;
struct sframe_sample;
struct sframe_user_stacks;

long sframe_session_start(struct file *file, void __user *uarg);
long sframe_session_stats(struct sframe_session *s, void __user *uarg);
ssize_t sframe_session_read(struct sframe_session *s, struct file *file,
			    char __user *buf, size_t len);
__poll_t sframe_session_poll(struct sframe_session *s, struct file *file,
			     poll_table *wait);
void sframe_session_release(struct sframe_session *s);

/*
 * Does a session want a sample of task tid/tgid from a perf event owned
 * by owner_tgid?  Any context, NMI included (RCU only).  count: account
 * the sample in the matching sessions' statistics.
 */
bool sframe_sessions_want(pid_t owner_tgid, pid_t tid, pid_t tgid);
/* The sample was dropped at capture: count it in the matching sessions. */
void sframe_sessions_lost_capture(pid_t owner_tgid, pid_t tid, pid_t tgid);
/*
 * The widest user walk any session asks for, and which unwind methods are
 * in use: bit f of *methods for sessions with unwind_flags f.
 */
void sframe_sessions_unwind_params(u32 *max_frames, u32 *methods);
/*
 * Write a record for smp to every matching session, with the user stack
 * its method gave (none if stacks is NULL).  Process or IRQ context, not
 * NMI.
 */
void sframe_sessions_deliver(const struct sframe_sample *smp, u32 flags,
			     const struct sframe_user_stacks *stacks);

int sframe_sessions_init(void);
void sframe_sessions_exit(void);

#endif /* SFRAME_SESSION_H */
