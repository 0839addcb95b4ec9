// SPDX-License-Identifier: GPL-2.0
/*
 * Sessions: the readers of stitched stacks.
 *
 * A session is an open /dev/sframe_unwind made a reader by
 * SFRAME_IOC_SESSION_START.  It follows a thread, a process, every task,
 * or whatever task its events sample (SFRAME_TARGET_EVENTS: a command and
 * its descendants, through inherited events), and takes samples of the
 * perf events its own process opened, never of anyone else's.  It is the
 * consumer of deferred.c: perf_hook.c's hook hands each perf sample to
 * sframe_sessions_sample(), which asks deferred.c for it if a session
 * wants it, and deferred.c hands it back through the callbacks below once
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
 * The buffer is a byte ring of whole records.  read() copies records out
 * without the lock (the writer never touches unread bytes), then frees
 * them.  A record that does not fit is counted, and a LOST record with the
 * count goes first into the buffer once there is room.
 *
 * Or the reader maps the buffer, as perf record maps its ring, and writes
 * the records to its file straight from it: a control page first (the
 * uapi's sframe_session_mmap_page), then the ring, one vmalloc area.  The
 * writer then publishes its head in the control page and takes the
 * reader's tail from it, under the lock, only if it is one a reader could
 * have written (sframe_ring_take_tail()).  From the first mapping on,
 * the kernel never reads the ring again (read() is refused), since the
 * reader may have written anything there.
 */
#include <linux/capability.h>
#include <linux/hashtable.h>
#include <linux/irq_work.h>
#include <linux/perf_event.h>
#include <linux/sched/task.h>
#include <linux/pid_namespace.h>
#include <linux/ptrace.h>
#include <linux/rculist.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>

#include "compat.h"
#include "deferred.h"
#include "ksyms.h"
#include "perf_hook.h"
#include "quota.h"
#include "session.h"
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
	u32 wakeup_bytes;      /* wake readers at this fill (0: always) */

	raw_spinlock_t lock;   /* the ring's head and lost counts */
	/* One vmalloc area, all of it mappable: the control page, then the ring. */
	struct sframe_session_mmap_page *ctl;
	u8 *ring;              /* = (u8 *)ctl + PAGE_SIZE */
	u32 ring_size;         /* a power of two */
	bool mapped;           /* ever mapped (set under lock) */
	u64 head;              /* bytes ever written (under lock) */
	u64 tail;              /* bytes ever read (under lock) */
	u64 lost_pending;      /* dropped since the last LOST record */
	u64 last_cookie;       /* of the last unwind counted */
	struct mutex read_lock; /* one reader at a time */
	wait_queue_head_t wait;
	struct irq_work wake_work; /* wakes wait where the writer may not */

	atomic64_t samples;
	atomic64_t records;
	atomic64_t lost;
	atomic64_t lost_capture;
	atomic64_t unwinds;
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
	sframe_deferred_set_walk(max_frames, methods);
}

/*
 * Copy nwords u64 words into the ring at byte position pos, wrapping.
 * Every record is whole words and the ring (vmalloc'ed, a power of two)
 * is word-aligned, so so is pos.  A record is a few words: a loop of
 * stores, not memcpy()'s rep movsb with its fixed start-up cost (which
 * an emulator pays per byte).
 */
static u32 sframe_ring_word_mask(const struct sframe_session *s)
{
	return s->ring_size / sizeof(u64) - 1;
}

static void sframe_ring_put(struct sframe_session *s, u64 pos,
			    const u64 *src, u32 nwords)
{
	u64 *ring = (u64 *)s->ring;
	u32 mask = sframe_ring_word_mask(s);
	u32 at = (pos / sizeof(u64)) & mask;
	u32 i;

	for (i = 0; i < nwords; i++)
		ring[(at + i) & mask] = src[i];
}

/*
 * Copy n words to dst, which does not wrap: the record's common case
 * (sframe_session_write()), a load and a store a word.
 */
static __always_inline void sframe_copy_words(u64 *dst, const u64 *src,
					      u32 n)
{
	u32 i;

	for (i = 0; i < n; i++)
		dst[i] = src[i];
}

static_assert(sizeof(struct sframe_sample_record) % sizeof(u64) == 0);
static_assert(sizeof(struct sframe_lost_record) % sizeof(u64) == 0);

/*
 * Under s->lock, when the ring is mapped: the reader's tail from the
 * control page, if it is one the reader could have written (a whole
 * word, no older than the last one taken and not beyond the head).
 * Anything else leaves the tail where it was: the ring fills and samples
 * are dropped and counted, but no unread byte is written over.
 */
static void sframe_ring_take_tail(struct sframe_session *s)
{
	/* Pairs with the reader's store-release: it is done with the bytes. */
	u64 tail = smp_load_acquire(&s->ctl->data_tail);

	if (!(tail % sizeof(u64)) && tail - s->tail <= s->head - s->tail)
		s->tail = tail;
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
	sframe_ring_put(s, s->head, (const u64 *)&lost,
			sizeof(lost) / sizeof(u64));
	s->head += sizeof(lost);
	s->lost_pending = 0;
	return true;
}

/* The record's fields, with no padding between them that a fill would miss. */
static_assert(sizeof(struct sframe_sample_record) == 48);

/*
 * Every field of a sample record but its frames.  Written straight into
 * the ring where the record does not wrap (nearly always), rather than
 * built on the stack and copied: the stack copy is zeroed first (the
 * kernel is built to zero every local), and both cost a store a word.
 * Every field is written, reserved ones included: a mapped ring holds
 * whatever its reader wrote there.
 */
static __always_inline void
sframe_record_fill(struct sframe_sample_record *rec,
		   const struct sframe_sample *smp, u32 len, u32 pid, u32 tid,
		   u32 flags, u32 nr_kernel, u32 nr_user, u32 user_stop)
{
	rec->header.type = SFRAME_RECORD_SAMPLE;
	rec->header.reserved = 0;
	rec->header.size = len;
	rec->pid = pid;
	rec->tid = tid;
	rec->time = smp->time;
	rec->cookie = smp->cookie;
	rec->cpu = smp->cpu;
	rec->flags = flags;
	rec->nr_kernel = nr_kernel;
	rec->nr_user = nr_user;
	rec->user_stop = user_stop;
}

static void sframe_session_write(struct sframe_session *s,
				 const struct sframe_sample *smp, u32 flags,
				 const struct sframe_user_stacks *stacks)
{
	u32 nr_kernel = 0, nr_user = 0, user_stop = 0, len, pid, tid;
	const u64 *user = NULL;
	bool wake = false;
	unsigned long irqflags;
	bool written = false;

	/*
	 * A stack of an image its task may hide (deferred.h): only for a
	 * privileged reader, as perf, which removes such a task's events at
	 * its setuid exec, gives it to nobody else.
	 */
	if ((flags & SFRAME_SAMPLE_F_NOT_DUMPABLE) && !s->privileged && stacks) {
		stacks = NULL;
		flags |= SFRAME_SAMPLE_F_NO_USER;
	}
	/* The user stack as this session's own method found it. */
	if (stacks && stacks->frames[s->unwind_flags]) {
		user = stacks->frames[s->unwind_flags];
		nr_user = stacks->nr[s->unwind_flags];
		user_stop = stacks->stop[s->unwind_flags];
	} else if (stacks) {
		flags |= SFRAME_SAMPLE_F_NO_USER;
	}
	if (s->kernel_visible)
		nr_kernel = min(smp->nr_kernel, s->max_kernel);
	else if (smp->nr_kernel)
		flags |= SFRAME_SAMPLE_F_KERNEL_HIDDEN;
	nr_user = min(nr_user, s->max_user);
	len = sizeof(struct sframe_sample_record) +
	      (nr_kernel + nr_user) * sizeof(u64);

	/*
	 * pid and tid as the reader's namespace sees them (0: invisible).
	 * In the initial namespace, the usual case, that is the pid's first
	 * number (what pid_nr_ns() returns there), without two calls.
	 */
	if (s->pid_ns == &init_pid_ns) {
		pid = pid_nr(smp->tgid);
		tid = pid_nr(smp->pid);
	} else {
		pid = pid_nr_ns(smp->tgid, s->pid_ns);
		tid = pid_nr_ns(smp->pid, s->pid_ns);
	}

	raw_spin_lock_irqsave(&s->lock, irqflags);
	if (s->mapped)
		sframe_ring_take_tail(s);
	if (sframe_ring_flush_lost(s, len) && sframe_ring_fits(s, len)) {
		u64 pos = s->head;
		u32 mask = sframe_ring_word_mask(s);
		u32 at = (pos / sizeof(u64)) & mask;

		if (at + len / sizeof(u64) <= mask + 1) {
			/* Nearly always: the record does not wrap. */
			u64 *dst = (u64 *)s->ring + at;

			sframe_record_fill((struct sframe_sample_record *)dst,
					   smp, len, pid, tid, flags,
					   nr_kernel, nr_user, user_stop);
			dst += sizeof(struct sframe_sample_record) /
			       sizeof(u64);
			sframe_copy_words(dst, smp->kernel, nr_kernel);
			sframe_copy_words(dst + nr_kernel, user, nr_user);
		} else {
			struct sframe_sample_record rec;

			sframe_record_fill(&rec, smp, len, pid, tid, flags,
					   nr_kernel, nr_user, user_stop);
			sframe_ring_put(s, pos, (const u64 *)&rec,
					sizeof(rec) / sizeof(u64));
			pos += sizeof(rec);
			sframe_ring_put(s, pos, smp->kernel, nr_kernel);
			pos += nr_kernel * sizeof(u64);
			sframe_ring_put(s, pos, user, nr_user);
		}
		s->head += len;
		written = true;
		wake = s->head - s->tail >= s->wakeup_bytes;
	} else {
		s->lost_pending++;
	}
	/* The records (and a LOST one) before the head that shows them. */
	smp_store_release(&s->ctl->data_head, s->head);
	/* One cookie is one user unwind, however many samples share it. */
	if (nr_user && smp->cookie != s->last_cookie) {
		s->last_cookie = smp->cookie;
		atomic64_inc(&s->unwinds);
	}
	raw_spin_unlock_irqrestore(&s->lock, irqflags);

	atomic64_inc(written ? &s->records : &s->lost);
	/* Each wakeup costs the sampled task an IPI and the reader a switch. */
	if (wake && wq_has_sleeper(&s->wait)) {
		if (sframe_may_take_spinlock())
			wake_up_interruptible(&s->wait);
		else
			irq_work_queue(&s->wake_work);
	}
}

/* A plain irq_work: on PREEMPT_RT in a thread, where wake_up may sleep. */
static void sframe_session_wake(struct irq_work *work)
{
	struct sframe_session *s =
		container_of(work, struct sframe_session, wake_work);

	wake_up_interruptible(&s->wait);
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

static const struct sframe_deferred_ops sframe_session_deferred_ops = {
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
	if (want && !sframe_deferred_request(regs, &ctx)) {
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

static u32 sframe_ring_size(u32 requested)
{
	if (!requested)
		return SFRAME_SESSION_DEFAULT_BUFFER;
	requested = clamp(requested, SFRAME_SESSION_MIN_BUFFER,
			  SFRAME_SESSION_MAX_BUFFER);
	return roundup_pow_of_two(requested);
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
	vfree(s->ctl);
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
	s->wakeup_bytes = min(req.wakeup_bytes, s->ring_size / 2);
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
	/*
	 * Zeroed: a reader may map all of it.  The control page is not
	 * counted in session_max_user_kb (it is one page a session, and
	 * sessions are counted); the memory cgroup is charged for all.
	 */
	s->ctl = __vmalloc(PAGE_SIZE + s->ring_size,
			   GFP_KERNEL_ACCOUNT | __GFP_ZERO | __GFP_NOWARN);
	if (!s->ctl) {
		ret = -ENOMEM;
		goto fail;
	}
	s->ring = (u8 *)s->ctl + PAGE_SIZE;
	s->ctl->version = SFRAME_SESSION_MMAP_VERSION;
	s->ctl->data_offset = PAGE_SIZE;
	s->ctl->data_size = s->ring_size;
	raw_spin_lock_init(&s->lock);
	mutex_init(&s->read_lock);
	init_waitqueue_head(&s->wait);
	init_irq_work(&s->wake_work, sframe_session_wake);

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
		ret = sframe_deferred_prepare();
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
	/* None is left to queue a wakeup; let the last one run. */
	irq_work_sync(&s->wake_work);
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
	st.records = atomic64_read(&s->records);
	st.lost = atomic64_read(&s->lost);
	st.lost_capture = atomic64_read(&s->lost_capture);
	st.unwinds = atomic64_read(&s->unwinds);
	if (copy_to_user(uarg, &st, min_t(size_t, usize, sizeof(st))))
		return -EFAULT;
	return 0;
}

/*
 * Copy len bytes at ring position pos to user memory, wrapping.  Returns
 * how many bytes could not be copied (0: all of them).
 */
static size_t sframe_ring_get_user(struct sframe_session *s,
				   char __user *dst, u64 pos, size_t len)
{
	u32 off = pos & (s->ring_size - 1);
	size_t first = min_t(size_t, len, s->ring_size - off);
	size_t left = copy_to_user(dst, s->ring + off, first);

	if (left)
		return left + (len - first);
	return copy_to_user(dst + first, s->ring, len - first);
}

/* A header is one word, at a word-aligned position: it never wraps. */
static_assert(sizeof(struct sframe_record_header) == sizeof(u64));
static void sframe_ring_peek_header(struct sframe_session *s, u64 pos,
				    struct sframe_record_header *h)
{
	const u64 *ring = (const u64 *)s->ring;
	u64 word = ring[(pos / sizeof(u64)) & sframe_ring_word_mask(s)];

	memcpy(h, &word, sizeof(*h));
}

/* A record's size as the writer makes them: whole words, within left. */
static bool sframe_record_size_ok(u32 size, u64 left)
{
	return size >= sizeof(struct sframe_record_header) &&
	       !(size % sizeof(u64)) && size <= left;
}

ssize_t sframe_session_read(struct sframe_session *s, struct file *file,
			    char __user *buf, size_t len)
{
	struct sframe_record_header h;
	u64 tail, head, end;
	size_t done = 0, copied;
	ssize_t ret;

	if (mutex_lock_interruptible(&s->read_lock))
		return -ERESTARTSYS;
	/*
	 * The reader may have written anything into a mapped ring.  A
	 * mapping made while this read() runs is not waited for (mmap()
	 * holds mmap_lock, which a fault of the copy below takes): the
	 * header checks below keep this read() bounded whatever the ring
	 * holds.
	 */
	if (READ_ONCE(s->mapped)) {
		ret = -EBUSY;
		goto out;
	}
	for (;;) {
		raw_spin_lock_irq(&s->lock);
		tail = s->tail;
		head = s->head;
		raw_spin_unlock_irq(&s->lock);
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
	/*
	 * Only whole records; the writer never touches [tail, head).  The
	 * records that fit are copied in one go (two where the ring wraps),
	 * not one by one: a reader keeping up at 10 kHz takes a few hundred
	 * records per read().  The walk over their headers is bounded by
	 * head - tail, at least 8 bytes a record (a header that says
	 * otherwise, which only a mapping's writer can have made, ends it).
	 */
	end = tail;
	while (end != head) {
		sframe_ring_peek_header(s, end, &h);
		if (!sframe_record_size_ok(h.size, head - end) ||
		    h.size > len - (end - tail))
			break;
		end += h.size;
	}
	if (end == tail) {
		ret = -EINVAL; /* the next record does not fit */
		goto out;
	}
	copied = end - tail - sframe_ring_get_user(s, buf, tail, end - tail);
	/* On a fault, consume the records that were copied whole, if any. */
	while (tail != end) {
		sframe_ring_peek_header(s, tail, &h);
		if (!sframe_record_size_ok(h.size, end - tail) ||
		    done + h.size > copied)
			break;
		done += h.size;
		tail += h.size;
	}
	ret = done ? done : -EFAULT;

	raw_spin_lock_irq(&s->lock);
	/*
	 * Mapped meanwhile: the mapping owns the tail from the moment it was
	 * made (mmap() published ours as data_tail, and its reader may have
	 * moved it since).  Setting it here could move it back over records
	 * the mapping's reader took, or past records it has not read, which
	 * the writer would then overwrite.  So this read() consumes nothing:
	 * the records stay for the mapping, and read() says EBUSY as it does
	 * to any read() after a mapping.
	 */
	if (s->mapped)
		ret = -EBUSY;
	else
		s->tail = tail;
	raw_spin_unlock_irq(&s->lock);
out:
	mutex_unlock(&s->read_lock);
	return ret;
}

__poll_t sframe_session_poll(struct sframe_session *s, struct file *file,
			     poll_table *wait)
{
	bool readable;

	poll_wait(file, &s->wait, wait);
	raw_spin_lock_irq(&s->lock);
	if (s->mapped)
		sframe_ring_take_tail(s);
	readable = s->head != s->tail;
	raw_spin_unlock_irq(&s->lock);
	return readable ? EPOLLIN | EPOLLRDNORM : 0;
}

/*
 * mmap() of the session: the whole area (control page and ring), or the
 * control page alone, at offset 0, shared and writable (the reader writes
 * data_tail), never executable, not inherited by fork() and not
 * expandable.  Its pages are
 * inserted now, as remap_vmalloc_range() would (which wants a VM_USERMAP
 * area, one that vmalloc_user() makes without the memory cgroup's
 * charge): at most PAGE_SIZE + SFRAME_SESSION_MAX_BUFFER, 16,385 pages.
 * The file stays open while a mapping exists, so the session and its
 * area outlive the mapping.
 */
int sframe_session_mmap(struct sframe_session *s, struct vm_area_struct *vma)
{
	unsigned long size = vma->vm_end - vma->vm_start, off;
	int ret;

	/* The control page alone tells a reader data_size. */
	if (vma->vm_pgoff ||
	    (size != PAGE_SIZE && size != PAGE_SIZE + s->ring_size))
		return -EINVAL;
	if ((vma->vm_flags & (VM_SHARED | VM_WRITE | VM_EXEC)) !=
	    (VM_SHARED | VM_WRITE))
		return -EINVAL;
	sframe_vm_flags_set(vma, VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP);
	sframe_vm_flags_clear(vma, VM_MAYEXEC);

	/*
	 * From here on read() refuses.  Not under read_lock: a read() holds
	 * it across a copy to user memory whose fault takes mmap_lock, which
	 * our caller holds.  A read() already past its check stays bounded
	 * (its header checks) and consumes nothing (sframe_session_read()).
	 */
	raw_spin_lock_irq(&s->lock);
	if (!s->mapped) {
		WRITE_ONCE(s->ctl->data_tail, s->tail);
		WRITE_ONCE(s->mapped, true);
	}
	raw_spin_unlock_irq(&s->lock);

	for (off = 0; off < size; off += PAGE_SIZE) {
		ret = vm_insert_page(vma, vma->vm_start + off,
				     vmalloc_to_page((u8 *)s->ctl + off));
		if (ret)
			return ret;
		cond_resched();
	}
	return 0;
}

int sframe_sessions_init(void)
{
	return sframe_deferred_init(&sframe_session_deferred_ops);
}

void sframe_sessions_exit(void)
{
	/* Nothing to do: every session is an open file, which holds us. */
}
