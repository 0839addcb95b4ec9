// SPDX-License-Identifier: GPL-2.0
/*
 * Reads for the SFrame decoder from the current process's memory (or from
 * the kernel's copy of a supplied section).
 *
 * The section is never pinned: it is read at unwind time, in process
 * context where a page fault may be served (the section of a freshly
 * started program has usually never been touched).  A racing munmap turns
 * into -EFAULT, which ends the walk with SFRAME_STOP_FAULT.
 *
 * The decoder's reads are small (a 4- or 8-byte field per binary-search
 * probe, an FDE, a chunk of FREs), so they are done with unsafe_get_user()
 * inside one user_read_access_begin() window each, as upstream's SFrame
 * unwinder does, rather than with copy_from_user(), whose fixed cost
 * (hardened usercopy checks, an out-of-line copy) is several times that of
 * the read itself.
 */
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/uaccess.h>

#include "compat.h"
#include "sframe_decode.h"
#include "sframe_source_user.h"

#define SFRAME_READ_UNITS(type, p, d, len, label)                       \
	while ((len) >= sizeof(type)) {                                 \
		type __v;                                               \
		unsafe_get_user(__v, (const type __user *)(p), label); \
		put_unaligned(__v, (type *)(d));                        \
		(p) += sizeof(type);                                    \
		(d) += sizeof(type);                                    \
		(len) -= sizeof(type);                                  \
	}

int sframe_source_read(const struct sframe_source *src, uint64_t off,
		       void *dst, uint32_t len)
{
	const u8 __user *p;
	u8 *d = dst;

	/* The decoder checks bounds; this is the last line of defence. */
	if (off > src->size || len > src->size - off)
		return -EFAULT;
	if (src->kbase) {
		memcpy(dst, src->kbase + off, len);
		return 0;
	}
	p = (const u8 __user *)src->base + off;
	if (!user_read_access_begin(p, len))
		return -EFAULT;
	SFRAME_READ_UNITS(u64, p, d, len, fault);
	SFRAME_READ_UNITS(u32, p, d, len, fault);
	SFRAME_READ_UNITS(u16, p, d, len, fault);
	SFRAME_READ_UNITS(u8, p, d, len, fault);
	user_read_access_end();
	return 0;
fault:
	user_read_access_end();
	return -EFAULT;
}

/*
 * Validation of a section runs in process context (the REGISTER and SUPPLY
 * ioctls, discovery from a walk that may sleep) and may check tens of
 * millions of FREs of a maximal section: let others run, and stop for a
 * task that is being killed, whose registration no longer matters.
 */
int sframe_source_pause(const struct sframe_source *src)
{
	cond_resched();
	if (fatal_signal_pending(current))
		return -EINTR;
	return 0;
}
