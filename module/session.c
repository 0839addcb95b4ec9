// SPDX-License-Identifier: GPL-2.0
/*
 * Sessions: the readers of stitched stacks.
 *
 * A session is an open /dev/sframe_unwind made a reader by
 * SFRAME_IOC_SESSION_START.  It follows a thread, a process or every task,
 * and takes samples of the perf events its own process opened.  Records
 * are written into its buffer when a task's user stack has been unwound
 * (task_work, process context) or when a sample can have no user stack
 * (irq_work): never in NMI, so a spinlock guards the buffer.  The NMI side
 * only asks, under RCU, whether some session wants a sample.
 *
 * The buffer is a byte ring of whole records.  read() copies records out
 * without the lock (the writer never touches unread bytes), then frees
 * them.  A record that does not fit is counted, and a LOST record with the
 * count goes first into the buffer once there is room.
 */
#include <linux/capability.h>
#include <linux/pid_namespace.h>
#include <linux/ptrace.h>
#include <linux/rculist.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>

#include "deferred.h"
#include "ksyms.h"
#include "perf_hook.h"
#include "session.h"
#include "sframe_unwind.h"
#include "uarg.h"

struct sframe_session {
	struct list_head node; /* in sframe_sessions, RCU */
	pid_t owner_tgid;      /* the process that started it */
	u32 target_type;       /* SFRAME_TARGET_* */
	pid_t target;          /* tid or tgid, initial pid namespace */
	struct pid_namespace *pid_ns; /* the reader's, for pid/tid */
	bool kernel_visible;
	u32 max_user;
	u32 max_kernel;
	u32 unwind_flags;
	u32 wakeup_bytes;      /* wake readers at this fill (0: always) */

	spinlock_t lock;       /* the ring's head and lost counts */
	u8 *ring;
	u32 ring_size;         /* a power of two */
	u64 head;              /* bytes ever written (under lock) */
	u64 tail;              /* bytes ever read (under lock) */
	u64 lost_pending;      /* dropped since the last LOST record */
	u64 last_cookie;       /* of the last unwind counted */
	struct mutex read_lock; /* one reader at a time */
	wait_queue_head_t wait;

	atomic64_t samples;
	atomic64_t records;
	atomic64_t lost;
	atomic64_t lost_capture;
	atomic64_t unwinds;
};

static LIST_HEAD(sframe_sessions);
static DEFINE_MUTEX(sframe_sessions_lock); /* writers of the list */
static unsigned int sframe_nr_sessions;    /* under sframe_sessions_lock */

static bool sframe_session_match(const struct sframe_session *s,
				 pid_t owner_tgid, pid_t tid, pid_t tgid)
{
	if (s->owner_tgid != owner_tgid)
		return false;
	switch (s->target_type) {
	case SFRAME_TARGET_THREAD:
		return tid == s->target;
	case SFRAME_TARGET_PROCESS:
		return tgid == s->target;
	}
	return true;
}

bool sframe_sessions_want(pid_t owner_tgid, pid_t tid, pid_t tgid)
{
	struct sframe_session *s;
	bool want = false;

	rcu_read_lock();
	list_for_each_entry_rcu(s, &sframe_sessions, node) {
		if (sframe_session_match(s, owner_tgid, tid, tgid)) {
			atomic64_inc(&s->samples);
			want = true;
		}
	}
	rcu_read_unlock();
	return want;
}

void sframe_sessions_lost_capture(pid_t owner_tgid, pid_t tid, pid_t tgid)
{
	struct sframe_session *s;

	rcu_read_lock();
	list_for_each_entry_rcu(s, &sframe_sessions, node) {
		if (sframe_session_match(s, owner_tgid, tid, tgid))
			atomic64_inc(&s->lost_capture);
	}
	rcu_read_unlock();
}

void sframe_sessions_unwind_params(u32 *max_frames, u32 *methods)
{
	struct sframe_session *s;

	*max_frames = 0;
	*methods = 0;
	rcu_read_lock();
	list_for_each_entry_rcu(s, &sframe_sessions, node) {
		*max_frames = max(*max_frames, s->max_user);
		*methods |= BIT(s->unwind_flags);
	}
	rcu_read_unlock();
}

/* Copy len bytes into the ring at byte position pos, wrapping. */
static void sframe_ring_put(struct sframe_session *s, u64 pos,
			    const void *src, u32 len)
{
	u32 off = pos & (s->ring_size - 1);
	u32 first = min(len, s->ring_size - off);

	memcpy(s->ring + off, src, first);
	memcpy(s->ring, src + first, len - first);
}

static bool sframe_ring_fits(struct sframe_session *s, u32 len)
{
	return s->ring_size - (s->head - s->tail) >= len;
}

/* Under s->lock: a LOST record first, if samples were dropped. */
static bool sframe_ring_flush_lost(struct sframe_session *s, u32 next_len)
{
	struct sframe_lost_record lost = {
		.header = { .type = SFRAME_RECORD_LOST,
			    .size = sizeof(lost) },
	};

	if (!s->lost_pending)
		return true;
	if (!sframe_ring_fits(s, sizeof(lost) + next_len))
		return false;
	lost.lost = s->lost_pending;
	sframe_ring_put(s, s->head, &lost, sizeof(lost));
	s->head += sizeof(lost);
	s->lost_pending = 0;
	return true;
}

static void sframe_session_write(struct sframe_session *s,
				 const struct sframe_sample *smp, u32 flags,
				 const struct sframe_user_stacks *stacks)
{
	struct sframe_sample_record rec = {
		.header = { .type = SFRAME_RECORD_SAMPLE },
		.time = smp->time,
		.cookie = smp->cookie,
		.cpu = smp->cpu,
	};
	u32 nr_kernel = 0, nr_user = 0, len;
	const u64 *user = NULL;
	bool wake = false;
	unsigned long irqflags;
	struct pid *pid;
	bool written = false;

	/* The user stack as this session's own method found it. */
	if (stacks && stacks->frames[s->unwind_flags]) {
		user = stacks->frames[s->unwind_flags];
		nr_user = stacks->nr[s->unwind_flags];
		rec.user_stop = stacks->stop[s->unwind_flags];
	} else if (stacks) {
		flags |= SFRAME_SAMPLE_F_NO_USER;
	}
	if (s->kernel_visible)
		nr_kernel = min(smp->nr_kernel, s->max_kernel);
	else if (smp->nr_kernel)
		flags |= SFRAME_SAMPLE_F_KERNEL_HIDDEN;
	nr_user = min(nr_user, s->max_user);
	rec.flags = flags;
	rec.nr_kernel = nr_kernel;
	rec.nr_user = nr_user;
	len = sizeof(rec) + (nr_kernel + nr_user) * sizeof(u64);
	rec.header.size = len;

	/* pid and tid as the reader's namespace sees them (0: invisible). */
	rcu_read_lock();
	pid = find_pid_ns(smp->tgid, &init_pid_ns);
	rec.pid = pid ? pid_nr_ns(pid, s->pid_ns) : 0;
	pid = find_pid_ns(smp->tid, &init_pid_ns);
	rec.tid = pid ? pid_nr_ns(pid, s->pid_ns) : 0;
	rcu_read_unlock();

	spin_lock_irqsave(&s->lock, irqflags);
	if (sframe_ring_flush_lost(s, len) && sframe_ring_fits(s, len)) {
		u64 pos = s->head;

		sframe_ring_put(s, pos, &rec, sizeof(rec));
		pos += sizeof(rec);
		sframe_ring_put(s, pos, smp->kernel, nr_kernel * sizeof(u64));
		pos += nr_kernel * sizeof(u64);
		sframe_ring_put(s, pos, user, nr_user * sizeof(u64));
		s->head += len;
		written = true;
		wake = s->head - s->tail >= s->wakeup_bytes;
	} else {
		s->lost_pending++;
	}
	/* One cookie is one user unwind, however many samples share it. */
	if (nr_user && smp->cookie != s->last_cookie) {
		s->last_cookie = smp->cookie;
		atomic64_inc(&s->unwinds);
	}
	spin_unlock_irqrestore(&s->lock, irqflags);

	atomic64_inc(written ? &s->records : &s->lost);
	/* Each wakeup costs the sampled task an IPI and the reader a switch. */
	if (wake && wq_has_sleeper(&s->wait))
		wake_up_interruptible(&s->wait);
}

void sframe_sessions_deliver(const struct sframe_sample *smp, u32 flags,
			     const struct sframe_user_stacks *stacks)
{
	struct sframe_session *s;

	rcu_read_lock();
	list_for_each_entry_rcu(s, &sframe_sessions, node) {
		if (sframe_session_match(s, smp->owner_tgid, smp->tid,
					 smp->tgid))
			sframe_session_write(s, smp, flags, stacks);
	}
	rcu_read_unlock();
}

/* perf_event_open()'s rule for kernel.perf_event_paranoid. */
static int sframe_paranoid(void)
{
	return READ_ONCE(*sframe_ksyms.perf_event_paranoid);
}

/*
 * May the caller follow target_type/target_id?  Resolves the target to
 * its number in the initial pid namespace.
 */
static int sframe_session_check_target(struct sframe_session *s,
				       u32 target_type, s32 target_id)
{
	struct task_struct *task;
	bool privileged = perfmon_capable();
	int ret = 0;

	if (!privileged && sframe_paranoid() > 2)
		return -EACCES;
	if (target_type == SFRAME_TARGET_ALL) {
		if (target_id)
			return -EINVAL;
		if (!privileged && sframe_paranoid() > 0)
			return -EACCES;
		return 0;
	}
	if (target_id <= 0)
		return -EINVAL;

	task = sframe_get_task(target_id);
	if (!task)
		return -ESRCH;
	if (target_type == SFRAME_TARGET_PROCESS &&
	    !thread_group_leader(task)) {
		ret = -ESRCH;
		goto out;
	}
	if (!privileged &&
	    !sframe_ksyms.ptrace_may_access(task, PTRACE_MODE_READ_REALCREDS)) {
		ret = -EPERM;
		goto out;
	}
	s->target = target_type == SFRAME_TARGET_THREAD ? task->pid :
							  task->tgid;
out:
	put_task_struct(task);
	return ret;
}

static u32 sframe_ring_size(u32 requested)
{
	if (!requested)
		return SFRAME_SESSION_DEFAULT_BUFFER;
	requested = clamp(requested, SFRAME_SESSION_MIN_BUFFER,
			  SFRAME_SESSION_MAX_BUFFER);
	return roundup_pow_of_two(requested);
}

static void sframe_session_free(struct sframe_session *s)
{
	if (!s)
		return;
	if (s->pid_ns)
		put_pid_ns(s->pid_ns);
	vfree(s->ring);
	kfree(s);
}

long sframe_session_start(struct file *file, void __user *uarg)
{
	struct sframe_session_start req;
	struct sframe_session *s;
	long usize, ret;

	usize = sframe_copy_arg(&req, sizeof(req),
				SFRAME_SESSION_START_SIZE_VER0, uarg);
	if (usize < 0)
		return usize;
	if (req.flags ||
	    !sframe_all_zero(req.reserved, ARRAY_SIZE(req.reserved)))
		return -EINVAL;
	if (req.target_type < SFRAME_TARGET_THREAD ||
	    req.target_type > SFRAME_TARGET_ALL)
		return -EINVAL;
	if (req.max_user_frames > SFRAME_MAX_FRAMES ||
	    req.max_kernel_frames > SFRAME_SESSION_MAX_KERNEL_FRAMES ||
	    (req.unwind_flags & ~SFRAME_UNWIND_F_ALL))
		return -EINVAL;

	s = kzalloc(sizeof(*s), GFP_KERNEL_ACCOUNT);
	if (!s)
		return -ENOMEM;
	ret = sframe_session_check_target(s, req.target_type, req.target_id);
	if (ret)
		goto fail;
	s->owner_tgid = current->tgid;
	s->target_type = req.target_type;
	s->pid_ns = get_pid_ns(task_active_pid_ns(current));
	s->kernel_visible = perfmon_capable() || sframe_paranoid() <= 1;
	s->max_user = req.max_user_frames ?: SFRAME_SESSION_DEFAULT_USER_FRAMES;
	s->max_kernel = req.max_kernel_frames ?:
			SFRAME_SESSION_MAX_KERNEL_FRAMES;
	s->unwind_flags = req.unwind_flags ?: SFRAME_UNWIND_F_ALL;
	s->ring_size = sframe_ring_size(req.buffer_size);
	s->wakeup_bytes = min(req.wakeup_bytes, s->ring_size / 2);
	s->ring = __vmalloc(s->ring_size, GFP_KERNEL_ACCOUNT);
	if (!s->ring) {
		ret = -ENOMEM;
		goto fail;
	}
	spin_lock_init(&s->lock);
	mutex_init(&s->read_lock);
	init_waitqueue_head(&s->wait);

	req.out_flags = s->kernel_visible ? SFRAME_SESSION_KERNEL_VISIBLE : 0;
	if (copy_to_user(uarg, &req, min_t(size_t, usize, sizeof(req)))) {
		ret = -EFAULT;
		goto fail;
	}

	mutex_lock(&sframe_sessions_lock);
	/* One session per file; the ioctl may race with itself. */
	if (file->private_data) {
		ret = -EBUSY;
		goto unlock;
	}
	if (!sframe_nr_sessions) {
		ret = sframe_deferred_prepare();
		if (!ret)
			ret = sframe_perf_hook_enable();
		if (ret)
			goto unlock;
	}
	sframe_nr_sessions++;
	list_add_tail_rcu(&s->node, &sframe_sessions);
	/* Pairs with READ_ONCE in device.c: the session is ready. */
	smp_store_release(&file->private_data, s);
unlock:
	mutex_unlock(&sframe_sessions_lock);
	if (ret)
		goto fail;
	return 0;
fail:
	sframe_session_free(s);
	return ret;
}

void sframe_session_release(struct sframe_session *s)
{
	mutex_lock(&sframe_sessions_lock);
	list_del_rcu(&s->node);
	sframe_nr_sessions--;
	mutex_unlock(&sframe_sessions_lock);
	/* Deliveries walk the list under RCU and write into the ring. */
	synchronize_rcu();
	sframe_session_free(s);
}

long sframe_session_stats(struct sframe_session *s, void __user *uarg)
{
	struct sframe_session_stats st;
	long usize;

	usize = sframe_copy_arg(&st, sizeof(st),
				SFRAME_SESSION_STATS_SIZE_VER0, uarg);
	if (usize < 0)
		return usize;
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	st.samples = atomic64_read(&s->samples);
	st.records = atomic64_read(&s->records);
	st.lost = atomic64_read(&s->lost);
	st.lost_capture = atomic64_read(&s->lost_capture);
	st.unwinds = atomic64_read(&s->unwinds);
	if (copy_to_user(uarg, &st, min_t(size_t, usize, sizeof(st))))
		return -EFAULT;
	return 0;
}

/* Copy len bytes at ring position pos to user memory, wrapping. */
static int sframe_ring_get_user(struct sframe_session *s, char __user *dst,
				u64 pos, u32 len)
{
	u32 off = pos & (s->ring_size - 1);
	u32 first = min(len, s->ring_size - off);

	if (copy_to_user(dst, s->ring + off, first) ||
	    copy_to_user(dst + first, s->ring, len - first))
		return -EFAULT;
	return 0;
}

static void sframe_ring_peek_header(struct sframe_session *s, u64 pos,
				    struct sframe_record_header *h)
{
	u32 off = pos & (s->ring_size - 1);
	u32 first = min_t(u32, sizeof(*h), s->ring_size - off);

	memcpy(h, s->ring + off, first);
	memcpy((u8 *)h + first, s->ring, sizeof(*h) - first);
}

ssize_t sframe_session_read(struct sframe_session *s, struct file *file,
			    char __user *buf, size_t len)
{
	struct sframe_record_header h;
	u64 tail, head;
	size_t done = 0;
	ssize_t ret;

	if (mutex_lock_interruptible(&s->read_lock))
		return -ERESTARTSYS;
	for (;;) {
		spin_lock_irq(&s->lock);
		tail = s->tail;
		head = s->head;
		spin_unlock_irq(&s->lock);
		if (head != tail)
			break;
		if (file->f_flags & O_NONBLOCK) {
			ret = -EAGAIN;
			goto out;
		}
		ret = wait_event_interruptible(s->wait,
					       READ_ONCE(s->head) != tail);
		if (ret)
			goto out;
	}
	/* Only whole records; the writer never touches [tail, head). */
	while (tail != head) {
		sframe_ring_peek_header(s, tail, &h);
		if (h.size > len - done)
			break;
		if (sframe_ring_get_user(s, buf + done, tail, h.size)) {
			ret = done ? done : -EFAULT;
			goto advance;
		}
		done += h.size;
		tail += h.size;
	}
	ret = done ? done : -EINVAL; /* the next record does not fit */
advance:
	spin_lock_irq(&s->lock);
	s->tail = tail;
	spin_unlock_irq(&s->lock);
out:
	mutex_unlock(&s->read_lock);
	return ret;
}

__poll_t sframe_session_poll(struct sframe_session *s, struct file *file,
			     poll_table *wait)
{
	poll_wait(file, &s->wait, wait);
	return READ_ONCE(s->head) != READ_ONCE(s->tail) ?
		       EPOLLIN | EPOLLRDNORM : 0;
}

int sframe_sessions_init(void)
{
	return 0;
}

void sframe_sessions_exit(void)
{
	/* Nothing to do: every session is an open file, which holds us. */
}
