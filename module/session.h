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
/* The widest user walk and the methods any session asks for. */
void sframe_sessions_unwind_params(u32 *max_frames, u32 *flags);
/*
 * Write a record for smp, with nr_user user frames, to every matching
 * session.  Process or IRQ context, not NMI.
 */
void sframe_sessions_deliver(const struct sframe_sample *smp, u32 flags,
			     const u64 *user, u32 nr_user, u32 user_stop);

int sframe_sessions_init(void);
void sframe_sessions_exit(void);

#endif /* SFRAME_SESSION_H */
