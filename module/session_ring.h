/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A session's buffer: a byte ring of whole records (the uapi's sample and
 * LOST records), read with read() or mapped as perf maps its ring.  It
 * knows records, not sessions: session.c decides what goes into a record
 * and calls sframe_ring_write_sample().
 */
#ifndef SFRAME_SESSION_RING_H
#define SFRAME_SESSION_RING_H

#include <linux/atomic.h>
#include <linux/fs.h>
#include <linux/irq_work.h>
#include <linux/mm_types.h>
#include <linux/mutex.h>
#include <linux/poll.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>

#include "sframe_unwind.h"

struct sframe_ring {
	/*
	 * Guards head, tail and the lost count.  Raw: on PREEMPT_RT a
	 * spinlock_t sleeps, and records are written from the interrupt
	 * and from irq_works too.
	 */
	raw_spinlock_t lock;
	/* One vmalloc area, all of it mappable: the control page, then the ring. */
	struct sframe_session_mmap_page *ctl;
	u8 *data;              /* = (u8 *)ctl + PAGE_SIZE */
	u32 size;              /* a power of two */
	u32 wakeup_bytes;      /* wake readers at this fill (0: always) */
	bool mapped;           /* ever mapped (set under lock) */
	u64 head;              /* bytes ever written (under lock) */
	u64 tail;              /* bytes ever read (under lock) */
	u64 lost_pending;      /* dropped since the last LOST record */
	u64 last_cookie;       /* of the last unwind counted */
	struct mutex read_lock; /* one reader at a time */
	wait_queue_head_t wait;
	struct irq_work wake_work; /* wakes wait where the writer may not */

	atomic64_t records;
	atomic64_t lost;
	atomic64_t unwinds;    /* distinct cookies written with a user stack */
};

/* One sample record's contents; the frames are copied, not kept. */
struct sframe_ring_sample {
	u64 time;
	u64 cookie;
	u32 cpu;
	u32 pid;
	u32 tid;
	u32 flags;             /* SFRAME_SAMPLE_F_* */
	u32 nr_kernel;
	u32 nr_user;
	u32 user_stop;         /* enum sframe_stop_reason */
	const u64 *kernel;
	const u64 *user;
};

/* The ring's size for a requested one (0: the default), a power of two. */
u32 sframe_ring_size(u32 requested);
/*
 * Allocate r's area (control page and size bytes, zeroed, charged to the
 * memory cgroup) and set it up.  0 or -ENOMEM.
 */
int sframe_ring_init(struct sframe_ring *r, u32 size, u32 wakeup_bytes);
/* No writer is left (the caller waited for them): free the area. */
void sframe_ring_free(struct sframe_ring *r);

/*
 * Write a sample record, or count it lost (a LOST record with the count
 * goes first once there is room).  Any context but NMI; wakes readers
 * (through an irq_work where the caller may not).
 */
void sframe_ring_write_sample(struct sframe_ring *r,
			      const struct sframe_ring_sample *rs);

ssize_t sframe_ring_read(struct sframe_ring *r, struct file *file,
			 char __user *buf, size_t len);
__poll_t sframe_ring_poll(struct sframe_ring *r, struct file *file,
			  poll_table *wait);
int sframe_ring_mmap(struct sframe_ring *r, struct vm_area_struct *vma);

#endif /* SFRAME_SESSION_RING_H */
