// SPDX-License-Identifier: GPL-2.0
/*
 * A session's buffer (session_ring.h).
 *
 * A byte ring of whole records.  read() copies records out without the
 * lock (the writer never touches unread bytes), then frees them.  A record
 * that does not fit is counted, and a LOST record with the count goes
 * first into the buffer once there is room.
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
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>

#include "compat.h"
#include "session_ring.h"

u32 sframe_ring_size(u32 requested)
{
	if (!requested)
		return SFRAME_SESSION_DEFAULT_BUFFER;
	requested = clamp(requested, SFRAME_SESSION_MIN_BUFFER,
			  SFRAME_SESSION_MAX_BUFFER);
	return roundup_pow_of_two(requested);
}

/* A plain irq_work: on PREEMPT_RT in a thread, where wake_up may sleep. */
static void sframe_ring_wake(struct irq_work *work)
{
	struct sframe_ring *r = container_of(work, struct sframe_ring, wake_work);

	wake_up_interruptible(&r->wait);
}

int sframe_ring_init(struct sframe_ring *r, u32 size, u32 wakeup_bytes)
{
	/*
	 * Zeroed: a reader may map all of it.  The control page is not
	 * counted in session_max_user_kb (it is one page a session, and
	 * sessions are counted); the memory cgroup is charged for all.
	 */
	r->ctl = __vmalloc(PAGE_SIZE + size,
			   GFP_KERNEL_ACCOUNT | __GFP_ZERO | __GFP_NOWARN);
	if (!r->ctl)
		return -ENOMEM;
	r->data = (u8 *)r->ctl + PAGE_SIZE;
	r->size = size;
	r->wakeup_bytes = min(wakeup_bytes, size / 2);
	r->ctl->version = SFRAME_SESSION_MMAP_VERSION;
	r->ctl->data_offset = PAGE_SIZE;
	r->ctl->data_size = size;
	raw_spin_lock_init(&r->lock);
	mutex_init(&r->read_lock);
	init_waitqueue_head(&r->wait);
	init_irq_work(&r->wake_work, sframe_ring_wake);
	return 0;
}

void sframe_ring_free(struct sframe_ring *r)
{
	/* None is left to queue a wakeup; let the last one run. */
	if (r->ctl)
		irq_work_sync(&r->wake_work);
	vfree(r->ctl);
	r->ctl = NULL;
}

/*
 * Copy nwords u64 words into the ring at byte position pos, wrapping.
 * Every record is whole words and the ring (vmalloc'ed, a power of two)
 * is word-aligned, so so is pos.  A record is a few words: a loop of
 * stores, not memcpy()'s rep movsb with its fixed start-up cost (which
 * an emulator pays per byte).
 */
static u32 sframe_ring_word_mask(const struct sframe_ring *r)
{
	return r->size / sizeof(u64) - 1;
}

static void sframe_ring_put(struct sframe_ring *r, u64 pos,
			    const u64 *src, u32 nwords)
{
	u64 *ring = (u64 *)r->data;
	u32 mask = sframe_ring_word_mask(r);
	u32 at = (pos / sizeof(u64)) & mask;
	u32 i;

	for (i = 0; i < nwords; i++)
		ring[(at + i) & mask] = src[i];
}

/*
 * Copy n words to dst, which does not wrap: the record's common case
 * (sframe_ring_write_sample()), a load and a store a word.
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
 * Under r->lock, when the ring is mapped: the reader's tail from the
 * control page, if it is one the reader could have written (a whole
 * word, no older than the last one taken and not beyond the head).
 * Anything else leaves the tail where it was: the ring fills and samples
 * are dropped and counted, but no unread byte is written over.
 */
static void sframe_ring_take_tail(struct sframe_ring *r)
{
	/* Pairs with the reader's store-release: it is done with the bytes. */
	u64 tail = smp_load_acquire(&r->ctl->data_tail);

	if (!(tail % sizeof(u64)) && tail - r->tail <= r->head - r->tail)
		r->tail = tail;
}

static bool sframe_ring_fits(struct sframe_ring *r, u32 len)
{
	return r->size - (r->head - r->tail) >= len;
}

/* Under r->lock: a LOST record first, if samples were dropped. */
static bool sframe_ring_flush_lost(struct sframe_ring *r, u32 next_len)
{
	struct sframe_lost_record lost = {
		.header = { .type = SFRAME_RECORD_LOST,
			    .size = sizeof(lost) },
	};

	if (!r->lost_pending)
		return true;
	if (!sframe_ring_fits(r, sizeof(lost) + next_len))
		return false;
	lost.lost = r->lost_pending;
	sframe_ring_put(r, r->head, (const u64 *)&lost,
			sizeof(lost) / sizeof(u64));
	r->head += sizeof(lost);
	r->lost_pending = 0;
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
		   const struct sframe_ring_sample *rs, u32 len)
{
	rec->header.type = SFRAME_RECORD_SAMPLE;
	rec->header.reserved = 0;
	rec->header.size = len;
	rec->pid = rs->pid;
	rec->tid = rs->tid;
	rec->time = rs->time;
	rec->cookie = rs->cookie;
	rec->cpu = rs->cpu;
	rec->flags = rs->flags;
	rec->nr_kernel = rs->nr_kernel;
	rec->nr_user = rs->nr_user;
	rec->user_stop = rs->user_stop;
}

void sframe_ring_write_sample(struct sframe_ring *r,
			      const struct sframe_ring_sample *rs)
{
	u32 len = sizeof(struct sframe_sample_record) +
		  (rs->nr_kernel + rs->nr_user) * sizeof(u64);
	unsigned long irqflags;
	bool written = false, wake = false;

	raw_spin_lock_irqsave(&r->lock, irqflags);
	if (r->mapped)
		sframe_ring_take_tail(r);
	if (sframe_ring_flush_lost(r, len) && sframe_ring_fits(r, len)) {
		u64 pos = r->head;
		u32 mask = sframe_ring_word_mask(r);
		u32 at = (pos / sizeof(u64)) & mask;

		if (at + len / sizeof(u64) <= mask + 1) {
			/* Nearly always: the record does not wrap. */
			u64 *dst = (u64 *)r->data + at;

			sframe_record_fill((struct sframe_sample_record *)dst,
					   rs, len);
			dst += sizeof(struct sframe_sample_record) /
			       sizeof(u64);
			sframe_copy_words(dst, rs->kernel, rs->nr_kernel);
			sframe_copy_words(dst + rs->nr_kernel, rs->user,
					  rs->nr_user);
		} else {
			struct sframe_sample_record rec;

			sframe_record_fill(&rec, rs, len);
			sframe_ring_put(r, pos, (const u64 *)&rec,
					sizeof(rec) / sizeof(u64));
			pos += sizeof(rec);
			sframe_ring_put(r, pos, rs->kernel, rs->nr_kernel);
			pos += rs->nr_kernel * sizeof(u64);
			sframe_ring_put(r, pos, rs->user, rs->nr_user);
		}
		r->head += len;
		written = true;
		wake = r->head - r->tail >= r->wakeup_bytes;
	} else {
		r->lost_pending++;
	}
	/* The records (and a LOST one) before the head that shows them. */
	smp_store_release(&r->ctl->data_head, r->head);
	/* One cookie is one user unwind, however many samples share it. */
	if (rs->nr_user && rs->cookie != r->last_cookie) {
		r->last_cookie = rs->cookie;
		atomic64_inc(&r->unwinds);
	}
	raw_spin_unlock_irqrestore(&r->lock, irqflags);

	atomic64_inc(written ? &r->records : &r->lost);
	/* Each wakeup costs the sampled task an IPI and the reader a switch. */
	if (wake && wq_has_sleeper(&r->wait)) {
		if (sframe_may_take_spinlock())
			wake_up_interruptible(&r->wait);
		else
			irq_work_queue(&r->wake_work);
	}
}

/*
 * Copy len bytes at ring position pos to user memory, wrapping.  Returns
 * how many bytes could not be copied (0: all of them).
 */
static size_t sframe_ring_get_user(struct sframe_ring *r,
				   char __user *dst, u64 pos, size_t len)
{
	u32 off = pos & (r->size - 1);
	size_t first = min_t(size_t, len, r->size - off);
	size_t left = copy_to_user(dst, r->data + off, first);

	if (left)
		return left + (len - first);
	return copy_to_user(dst + first, r->data, len - first);
}

/* A header is one word, at a word-aligned position: it never wraps. */
static_assert(sizeof(struct sframe_record_header) == sizeof(u64));
static void sframe_ring_peek_header(struct sframe_ring *r, u64 pos,
				    struct sframe_record_header *h)
{
	const u64 *ring = (const u64 *)r->data;
	u64 word = ring[(pos / sizeof(u64)) & sframe_ring_word_mask(r)];

	memcpy(h, &word, sizeof(*h));
}

/* A record's size as the writer makes them: whole words, within left. */
static bool sframe_record_size_ok(u32 size, u64 left)
{
	return size >= sizeof(struct sframe_record_header) &&
	       !(size % sizeof(u64)) && size <= left;
}

ssize_t sframe_ring_read(struct sframe_ring *r, struct file *file,
			 char __user *buf, size_t len)
{
	struct sframe_record_header h;
	u64 tail, head, end;
	size_t done = 0, copied;
	ssize_t ret;

	if (mutex_lock_interruptible(&r->read_lock))
		return -ERESTARTSYS;
	/*
	 * The reader may have written anything into a mapped ring.  A
	 * mapping made while this read() runs is not waited for (mmap()
	 * holds mmap_lock, which a fault of the copy below takes): the
	 * header checks below keep this read() bounded whatever the ring
	 * holds.
	 */
	if (READ_ONCE(r->mapped)) {
		ret = -EBUSY;
		goto out;
	}
	for (;;) {
		raw_spin_lock_irq(&r->lock);
		tail = r->tail;
		head = r->head;
		raw_spin_unlock_irq(&r->lock);
		if (head != tail)
			break;
		if (file->f_flags & O_NONBLOCK) {
			ret = -EAGAIN;
			goto out;
		}
		ret = wait_event_interruptible(r->wait,
					       READ_ONCE(r->head) != tail);
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
		sframe_ring_peek_header(r, end, &h);
		if (!sframe_record_size_ok(h.size, head - end) ||
		    h.size > len - (end - tail))
			break;
		end += h.size;
	}
	if (end == tail) {
		ret = -EINVAL; /* the next record does not fit */
		goto out;
	}
	copied = end - tail - sframe_ring_get_user(r, buf, tail, end - tail);
	/* On a fault, consume the records that were copied whole, if any. */
	while (tail != end) {
		sframe_ring_peek_header(r, tail, &h);
		if (!sframe_record_size_ok(h.size, end - tail) ||
		    done + h.size > copied)
			break;
		done += h.size;
		tail += h.size;
	}
	ret = done ? done : -EFAULT;

	raw_spin_lock_irq(&r->lock);
	/*
	 * Mapped meanwhile: the mapping owns the tail from the moment it was
	 * made (mmap() published ours as data_tail, and its reader may have
	 * moved it since).  Setting it here could move it back over records
	 * the mapping's reader took, or past records it has not read, which
	 * the writer would then overwrite.  So this read() consumes nothing:
	 * the records stay for the mapping, and read() says EBUSY as it does
	 * to any read() after a mapping.
	 */
	if (r->mapped)
		ret = -EBUSY;
	else
		r->tail = tail;
	raw_spin_unlock_irq(&r->lock);
out:
	mutex_unlock(&r->read_lock);
	return ret;
}

__poll_t sframe_ring_poll(struct sframe_ring *r, struct file *file,
			  poll_table *wait)
{
	bool readable;

	poll_wait(file, &r->wait, wait);
	raw_spin_lock_irq(&r->lock);
	if (r->mapped)
		sframe_ring_take_tail(r);
	readable = r->head != r->tail;
	raw_spin_unlock_irq(&r->lock);
	return readable ? EPOLLIN | EPOLLRDNORM : 0;
}

/*
 * mmap() of the ring: the whole area (control page and ring), or the
 * control page alone, at offset 0, shared and writable (the reader writes
 * data_tail), never executable, not inherited by fork() and not
 * expandable.  Its pages are
 * inserted now, as remap_vmalloc_range() would (which wants a VM_USERMAP
 * area, one that vmalloc_user() makes without the memory cgroup's
 * charge): at most PAGE_SIZE + SFRAME_SESSION_MAX_BUFFER, 16,385 pages.
 * The file stays open while a mapping exists, so the session, its ring
 * and the area outlive the mapping.
 */
int sframe_ring_mmap(struct sframe_ring *r, struct vm_area_struct *vma)
{
	unsigned long size = vma->vm_end - vma->vm_start, off;
	int ret;

	/* The control page alone tells a reader data_size. */
	if (vma->vm_pgoff ||
	    (size != PAGE_SIZE && size != PAGE_SIZE + r->size))
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
	 * (its header checks) and consumes nothing (sframe_ring_read()).
	 */
	raw_spin_lock_irq(&r->lock);
	if (!r->mapped) {
		WRITE_ONCE(r->ctl->data_tail, r->tail);
		WRITE_ONCE(r->mapped, true);
	}
	raw_spin_unlock_irq(&r->lock);

	for (off = 0; off < size; off += PAGE_SIZE) {
		ret = vm_insert_page(vma, vma->vm_start + off,
				     vmalloc_to_page((u8 *)r->ctl + off));
		if (ret)
			return ret;
		cond_resched();
	}
	return 0;
}
