// SPDX-License-Identifier: GPL-2.0
/*
 * Sessions: the readers of stitched stacks.
 *
 * A session is an open /dev/sframe_unwind made a reader by
 * SFRAME_IOC_SESSION_START.  It follows a thread, a process, every task,
 * or whatever task its events sample (SFRAME_TARGET_EVENTS: a command and
 * its descendants, through inherited events), and takes samples of the
 * perf events its own process opened, never of anyone else's.  It is the
 * consumer of sample.c: perf_hook.c's hook hands each perf sample to
 * sframe_sessions_sample(), which has sample.c take it if a session
 * wants it, and sample.c hands it back through the callbacks below once
 * its user stack is known.  Records are written into a session's buffer
 * from a task_work, an irq_work or the interrupt itself, never in NMI, so
 * a spinlock guards the buffer: a raw one, since on PREEMPT_RT a
 * spinlock_t sleeps and the interrupt (or the hook, preemption off)
 * writes too.  For the same reason a writer in atomic context on RT
 * leaves the reader's wakeup to an irq_work (compat.h).  The NMI side only
 * looks, under RCU, at the sessions of the one process that owns the
 * sampled event.
 *
 * Owner and target are held as struct pid references, never as numbers: a
 * number reused by another process after an exit matches nothing.  Each
 * user's sessions and buffer memory are counted (quota.c) and bounded by
 * session_max_user and session_max_user_kb.
 *
 * Each session's buffer is a ring of records (session_ring.c), read with
 * read() or mapped.
 */
#include <linux/capability.h>
#include <linux/hashtable.h>
#include <linux/perf_event.h>
#include <linux/sched/task.h>
#include <linux/pid_namespace.h>
#include <linux/ptrace.h>
#include <linux/rculist.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "compat.h"
#include "sample.h"
#include "ksyms.h"
#include "perf_hook.h"
#include "quota.h"
#include "session.h"
#include "session_ring.h"
#include "sframe_unwind.h"
#include "uarg.h"

struct sframe_session {
	struct hlist_node node; /* in sframe_sessions_by_owner, RCU */
	struct list_head all;   /* in sframe_sessions_all, under the mutex */
	u64 id;                 /* from sframe_session_seq: creation order */
	struct pid *owner;      /* the process that started it (referenced) */
	u32 target_type;        /* SFRAME_TARGET_* */
	struct pid *target;     /* the thread or process; NULL for ALL */
	struct pid_namespace *pid_ns; /* the reader's, for pid/tid */
	struct sframe_user *user;     /* charged for it and its buffer */
	bool kernel_visible;
	/*
	 * CAP_PERFMON (or CAP_SYS_ADMIN) at start: may see the user stack
	 * of an image that is not dumpable (SFRAME_SAMPLE_F_NOT_DUMPABLE).
	 */
	bool privileged;
	u32 max_user;
	u32 max_kernel;
	u32 unwind_flags;

	u32 ring_size;         /* bytes charged for the ring's data */
	struct sframe_ring ring;

	atomic64_t samples;
	atomic64_t lost_capture;
};

/*
 * Sessions by owner process: a sample looks at the sessions of the one
 * process that owns its perf event, never at unrelated ones, so the cost
 * in NMI does not grow with other users' sessions.
 */
#define SFRAME_OWNER_HASH_BITS 8
static DEFINE_HASHTABLE(sframe_sessions_by_owner, SFRAME_OWNER_HASH_BITS);
static LIST_HEAD(sframe_sessions_all);     /* under sframe_sessions_lock */
static DEFINE_MUTEX(sframe_sessions_lock); /* writers of both */
static unsigned int sframe_nr_sessions;    /* under sframe_sessions_lock */
/* Ids of sessions; a sample is for sessions at most as new as it. */
static atomic64_t sframe_session_seq = ATOMIC64_INIT(0);
static unsigned int session_max_user = 64;
module_param(session_max_user, uint, 0644);
MODULE_PARM_DESC(session_max_user,
		 "Sessions one user may have open at once");
static unsigned int session_max_user_kb = 64 << 10;
module_param(session_max_user_kb, uint, 0644);
MODULE_PARM_DESC(session_max_user_kb,
		 "Session buffer memory (KiB) one user may hold, beyond which CAP_IPC_LOCK is needed (as perf's perf_event_mlock_kb)");

static bool sframe_target_match(const struct sframe_session *s,
				const struct pid *pid, const struct pid *tgid)
{
	switch (s->target_type) {
	case SFRAME_TARGET_THREAD:
		return pid == s->target;
	case SFRAME_TARGET_PROCESS:
		return tgid == s->target;
	}
	/* ALL and EVENTS: the owner's events chose the tasks. */
	return true;
}

/*
 * Pointers identify: each session holds its owner and target, so while
 * it exists no other pid can have their addresses; and a sample goes only
 * to sessions that existed when it was taken (id <= seq), so a pid freed
 * and reused in between cannot make a match.
 */
static bool sframe_session_match(const struct sframe_session *s,
				 const struct sframe_sample_ctx *ctx,
				 const struct pid *pid, const struct pid *tgid)
{
	return s->owner == ctx->key && s->id <= ctx->seq &&
	       sframe_target_match(s, pid, tgid);
}

/*
 * Under sframe_sessions_lock, after the set of sessions changed: what the
 * walks must do for all sessions together (the widest walk, the methods).
 */
static void sframe_sessions_update_params(void)
{
	struct sframe_session *s;
	u32 max_frames = 0, methods = 0;

	list_for_each_entry(s, &sframe_sessions_all, all) {
		max_frames = max(max_frames, s->max_user);
		methods |= BIT(s->unwind_flags);
	}
	sframe_samples_set_walk(max_frames, methods);
}

static void sframe_session_write(struct sframe_session *s,
				 const struct sframe_sample *smp, u32 flags,
				 const struct sframe_user_stacks *stacks)
{
	struct sframe_ring_sample rs = {
		.time = smp->item.time,
		.cookie = smp->item.cookie,
		.cpu = smp->cpu,
		.kernel = smp->kernel,
	};

	/*
	 * A stack of an image its task may hide (sample.h): only for a
	 * privileged reader, as perf, which removes such a task's events at
	 * its setuid exec, gives it to nobody else.
	 */
	if ((flags & SFRAME_SAMPLE_F_NOT_DUMPABLE) && !s->privileged && stacks) {
		stacks = NULL;
		flags |= SFRAME_SAMPLE_F_NO_USER;
	}
	/* The user stack as this session's own method found it. */
	if (stacks && stacks->frames[s->unwind_flags]) {
		rs.user = stacks->frames[s->unwind_flags];
		rs.nr_user = stacks->nr[s->unwind_flags];
		rs.user_stop = stacks->stop[s->unwind_flags];
	} else if (stacks) {
		flags |= SFRAME_SAMPLE_F_NO_USER;
	}
	if (s->kernel_visible)
		rs.nr_kernel = min(smp->nr_kernel, s->max_kernel);
	else if (smp->nr_kernel)
		flags |= SFRAME_SAMPLE_F_KERNEL_HIDDEN;
	rs.nr_user = min(rs.nr_user, s->max_user);

	/*
	 * pid and tid as the reader's namespace sees them (0: invisible).
	 * In the initial namespace, the usual case, that is the pid's first
	 * number (what pid_nr_ns() returns there), without two calls.
	 */
	if (s->pid_ns == &init_pid_ns) {
		rs.pid = pid_nr(smp->tgid);
		rs.tid = pid_nr(smp->pid);
	} else {
		rs.pid = pid_nr_ns(smp->tgid, s->pid_ns);
		rs.tid = pid_nr_ns(smp->pid, s->pid_ns);
	}
	rs.flags = flags;
	sframe_ring_write_sample(&s->ring, &rs);
}

static void sframe_sessions_deliver(const struct sframe_sample *smp,
				    u32 flags,
				    const struct sframe_user_stacks *stacks)
{
	struct sframe_session *s = smp->ctx.now;

	/*
	 * Unwound in the interrupt, the sample comes back within the RCU
	 * read side of sframe_sessions_sample(), which found its one session:
	 * no second search.
	 */
	if (s) {
		sframe_session_write(s, smp, flags, stacks);
		return;
	}
	rcu_read_lock();
	hash_for_each_possible_rcu(sframe_sessions_by_owner, s, node,
				   (unsigned long)smp->ctx.key) {
		if (sframe_session_match(s, &smp->ctx, smp->pid, smp->tgid))
			sframe_session_write(s, smp, flags, stacks);
	}
	rcu_read_unlock();
}

static const struct sframe_sample_ops sframe_session_sample_ops = {
	.deliver = sframe_sessions_deliver,
};

void sframe_sessions_sample(struct pt_regs *regs, struct pid *owner,
			    u32 no_user)
{
	struct sframe_sample_ctx ctx = {
		.key = owner,
		.seq = atomic64_read(&sframe_session_seq),
		.no_user = no_user,
	};
	struct pid *pid = task_pid(current), *tgid = task_tgid(current);
	struct sframe_session *s;
	unsigned int want = 0;

	/* The caller holds the RCU read side (session.h). */
	hash_for_each_possible_rcu(sframe_sessions_by_owner, s, node,
				   (unsigned long)owner) {
		if (sframe_session_match(s, &ctx, pid, tgid)) {
			atomic64_inc(&s->samples);
			ctx.now = s;
			want++;
		}
	}
	/* With one session, a sample delivered at once goes straight to it. */
	if (want > 1)
		ctx.now = NULL;
	if (want && !sframe_samples_take(regs, &ctx)) {
		hash_for_each_possible_rcu(sframe_sessions_by_owner, s, node,
					   (unsigned long)owner) {
			if (sframe_session_match(s, &ctx, pid, tgid))
				atomic64_inc(&s->lost_capture);
		}
	}
}

/* The process that opened event: sessions take only their own events. */
static struct pid *sframe_event_owner(struct perf_event *event)
{
	struct task_struct *owner;

	/* Inherited (per-thread) events: the original's owner. */
	if (event->parent)
		event = event->parent;
	/*
	 * NULL once the owner has exited (perf reads it under RCU too);
	 * TASK_TOMBSTONE, -1, for the kernel's own counters.  The caller
	 * holds the RCU read side (the sample path runs with interrupts
	 * off), which keeps the task and so its signal struct.
	 */
	owner = READ_ONCE(event->owner);
	if (IS_ERR_OR_NULL(owner))
		return NULL;
	return task_tgid(owner);
}

/*
 * No rcu_read_lock() of our own (two calls on every sample under
 * PREEMPT_RCU): every caller of the hooked function holds the RCU read
 * side already (perf's __perf_event_output() and bpf_overflow_handler(),
 * for the callchain buffers and the program), and the handler runs with
 * preemption disabled (by the hook's recursion lock), which
 * synchronize_rcu() waits for too.
 */
static void sframe_sessions_perf_sample(struct pt_regs *regs,
				       struct perf_event *event)
{
	struct pid *owner = sframe_event_owner(event);
	struct task_struct *task;

	if (!owner)
		return;
	/*
	 * perf delivers some samples of an event on task T while another
	 * task runs: tracepoints whose __perf_task() names T (sched_waking,
	 * sched_wakeup, sched_stat_*), BPF output.  current's user stack is
	 * then not T's, and perf gives none ("cross-task user callchains"
	 * in perf_callchain(), the same test): neither do we.  The task is
	 * TASK_TOMBSTONE once T exited, which is not current either.
	 */
	task = READ_ONCE(event->ctx->task);
	sframe_sessions_sample(regs, owner,
			       task && task != current ?
				       SFRAME_SAMPLE_F_CROSS_TASK : 0);
}

/* kernel.perf_event_paranoid, which perf_event_open() obeys. */
static int sframe_paranoid(void)
{
	return READ_ONCE(*sframe_ksyms.perf_event_paranoid);
}

/*
 * The LSM hook of perf_event_open() (security_perf_event_open(), not
 * exported; found through kallsyms where the kernel has it), with the
 * attributes of the event a session stands for: a sampling cpu-clock
 * event.  0 where the kernel has no such hook.
 */
static int sframe_security_perf(int type)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_type = PERF_SAMPLE_CALLCHAIN,
	};

	if (!sframe_ksyms.security_perf_event_open)
		return 0;
	return sframe_call_security_perf_event_open(
		sframe_ksyms.security_perf_event_open, &attr, type);
}

/*
 * May the caller follow target_type/target_id?  perf_event_open()'s rules
 * on the same kernel (kernel/events/core.c of 6.1): perf_event_paranoid
 * above 2 (Debian's addition) refuses the unprivileged; a CPU-wide event
 * needs paranoid <= 0 or CAP_PERFMON (perf_allow_cpu()); a task needs the
 * ptrace-read right to it, checked under its exec_update_lock so a racing
 * setuid exec cannot slip by, with no exemption for CAP_PERFMON
 * (perf_check_permission()).  Takes a reference on the target's pid.
 */
static int sframe_session_check_target(struct sframe_session *s,
				       u32 target_type, s32 target_id)
{
	struct task_struct *task;
	bool privileged = perfmon_capable();
	int ret;

	if (!privileged && sframe_paranoid() > 2)
		return -EACCES;
	ret = sframe_security_perf(PERF_SECURITY_OPEN);
	if (ret)
		return ret;
	if (target_type == SFRAME_TARGET_EVENTS) {
		/*
		 * perf_event_open() checked each event's target when the
		 * owner opened it, and inherited copies follow perf's rules
		 * (none survives a setuid exec): nothing more to check here.
		 */
		return target_id ? -EINVAL : 0;
	}
	if (target_type == SFRAME_TARGET_ALL) {
		if (target_id)
			return -EINVAL;
		if (!privileged && sframe_paranoid() > 0)
			return -EACCES;
		return sframe_security_perf(PERF_SECURITY_CPU);
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
	ret = down_read_interruptible(&task->signal->exec_update_lock);
	if (ret)
		goto out;
	if (!sframe_ksyms.ptrace_may_access(task, PTRACE_MODE_READ_REALCREDS))
		ret = -EPERM;
	else if (task->flags & PF_EXITING)
		ret = -ESRCH;
	else
		s->target = get_pid(target_type == SFRAME_TARGET_THREAD ?
				    task_pid(task) : task_tgid(task));
	up_read(&task->signal->exec_update_lock);
out:
	put_task_struct(task);
	return ret;
}

/*
 * The per-user bounds, for this caller: U64_MAX where none applies.
 * audit: the check is for a real request (as perf's), not a report.
 */
static u64 sframe_session_limit(enum sframe_quota_res res, bool audit)
{
	bool ipc_lock;

	if (res == SFRAME_QUOTA_SESSIONS)
		return READ_ONCE(session_max_user);
	/*
	 * perf's rule for ring buffers beyond perf_event_mlock_kb.  (The
	 * silent check is ns_capable_noaudit(): has_capability_noaudit() is
	 * no longer exported in 7.x.)
	 */
	ipc_lock = audit ? capable(CAP_IPC_LOCK) :
			   ns_capable_noaudit(&init_user_ns, CAP_IPC_LOCK);
	if (ipc_lock)
		return U64_MAX;
	return (u64)READ_ONCE(session_max_user_kb) << 10;
}

void sframe_sessions_user_stats(struct sframe_stats *st)
{
	struct sframe_user *user = sframe_user_current();

	st->user_sessions_limit =
		sframe_session_limit(SFRAME_QUOTA_SESSIONS, false);
	st->user_session_bytes_limit =
		sframe_session_limit(SFRAME_QUOTA_SESSION_BYTES, false);
	if (!user)
		return;
	st->user_sessions = sframe_user_usage(user, SFRAME_QUOTA_SESSIONS);
	st->user_session_bytes =
		sframe_user_usage(user, SFRAME_QUOTA_SESSION_BYTES);
	sframe_user_put(user);
}

/* Charge s and its buffer to its user: 0 or -EDQUOT. */
static int sframe_session_charge(struct sframe_session *s)
{
	int ret;

	ret = sframe_user_charge(s->user, SFRAME_QUOTA_SESSIONS, 1,
				 sframe_session_limit(SFRAME_QUOTA_SESSIONS, true));
	if (ret)
		return ret;
	ret = sframe_user_charge(s->user, SFRAME_QUOTA_SESSION_BYTES,
				 s->ring_size,
				 sframe_session_limit(SFRAME_QUOTA_SESSION_BYTES,
						      true));
	if (ret) {
		sframe_user_uncharge(s->user, SFRAME_QUOTA_SESSIONS, 1);
		return ret;
	}
	return 0;
}

static void sframe_session_free(struct sframe_session *s, bool charged)
{
	if (!s)
		return;
	if (charged) {
		sframe_user_uncharge(s->user, SFRAME_QUOTA_SESSION_BYTES,
				     s->ring_size);
		sframe_user_uncharge(s->user, SFRAME_QUOTA_SESSIONS, 1);
	}
	sframe_user_put(s->user);
	if (s->pid_ns)
		put_pid_ns(s->pid_ns);
	put_pid(s->owner);
	put_pid(s->target);
	sframe_ring_free(&s->ring);
	kfree(s);
}

long sframe_session_start(struct file *file, void __user *uarg)
{
	struct sframe_session_start req;
	struct sframe_session *s;
	bool charged = false;
	long usize, ret;

	usize = sframe_copy_arg(&req, sizeof(req),
				SFRAME_SESSION_START_SIZE_VER0, uarg);
	if (usize < 0)
		return usize;
	if (req.flags ||
	    !sframe_all_zero(req.reserved, ARRAY_SIZE(req.reserved)))
		return -EINVAL;
	if (req.target_type < SFRAME_TARGET_THREAD ||
	    req.target_type > SFRAME_TARGET_EVENTS)
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
	s->owner = get_pid(task_tgid(current));
	s->target_type = req.target_type;
	s->pid_ns = get_pid_ns(task_active_pid_ns(current));
	s->privileged = perfmon_capable();
	s->kernel_visible = (perfmon_capable() || sframe_paranoid() <= 1) &&
			    !sframe_security_perf(PERF_SECURITY_KERNEL);
	s->max_user = req.max_user_frames ?: SFRAME_SESSION_DEFAULT_USER_FRAMES;
	s->max_kernel = req.max_kernel_frames ?:
			SFRAME_SESSION_MAX_KERNEL_FRAMES;
	s->unwind_flags = req.unwind_flags ?: SFRAME_UNWIND_F_ALL;
	s->ring_size = sframe_ring_size(req.buffer_size);
	s->user = sframe_user_current();
	if (!s->user) {
		ret = -ENOMEM;
		goto fail;
	}
	/* Before the allocation it bounds. */
	ret = sframe_session_charge(s);
	if (ret)
		goto fail;
	charged = true;
	ret = sframe_ring_init(&s->ring, s->ring_size, req.wakeup_bytes);
	if (ret)
		goto fail;

	req.out_flags = s->kernel_visible ? SFRAME_SESSION_KERNEL_VISIBLE : 0;
	req.buffer_size = s->ring_size;
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
		ret = sframe_samples_prepare();
		if (!ret)
			ret = sframe_perf_hook_enable(sframe_sessions_perf_sample);
		if (ret)
			goto unlock;
	}
	sframe_nr_sessions++;
	s->id = atomic64_inc_return(&sframe_session_seq);
	list_add_tail(&s->all, &sframe_sessions_all);
	sframe_sessions_update_params();
	hash_add_rcu(sframe_sessions_by_owner, &s->node,
		     (unsigned long)s->owner);
	/* Pairs with READ_ONCE in device.c: the session is ready. */
	smp_store_release(&file->private_data, s);
unlock:
	mutex_unlock(&sframe_sessions_lock);
	if (ret)
		goto fail;
	return 0;
fail:
	sframe_session_free(s, charged);
	return ret;
}

void sframe_session_release(struct sframe_session *s)
{
	mutex_lock(&sframe_sessions_lock);
	hash_del_rcu(&s->node);
	list_del(&s->all);
	sframe_sessions_update_params();
	sframe_nr_sessions--;
	mutex_unlock(&sframe_sessions_lock);
	/* Deliveries walk the hash under RCU and write into the ring. */
	synchronize_rcu();
	sframe_session_free(s, true);
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
	st.records = atomic64_read(&s->ring.records);
	st.lost = atomic64_read(&s->ring.lost);
	st.lost_capture = atomic64_read(&s->lost_capture);
	st.unwinds = atomic64_read(&s->ring.unwinds);
	if (copy_to_user(uarg, &st, min_t(size_t, usize, sizeof(st))))
		return -EFAULT;
	return 0;
}

ssize_t sframe_session_read(struct sframe_session *s, struct file *file,
			    char __user *buf, size_t len)
{
	return sframe_ring_read(&s->ring, file, buf, len);
}

__poll_t sframe_session_poll(struct sframe_session *s, struct file *file,
			     poll_table *wait)
{
	return sframe_ring_poll(&s->ring, file, wait);
}

int sframe_session_mmap(struct sframe_session *s, struct vm_area_struct *vma)
{
	return sframe_ring_mmap(&s->ring, vma);
}

int sframe_sessions_init(void)
{
	return sframe_samples_init(&sframe_session_sample_ops);
}

/*
 * Mirrors sframe_sessions_init().  No session is left (each is an open
 * file, which holds the module), but the perf hook stays registered from
 * the first session on (perf_hook.c): it goes first, so no sample comes
 * any more, then sample.c (and deferred.c) hand back or wait for the
 * samples still queued on tasks.
 */
void sframe_sessions_exit(void)
{
	sframe_perf_hook_exit();
	sframe_samples_exit();
}
