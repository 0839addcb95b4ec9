// SPDX-License-Identifier: GPL-2.0
/*
 * Reads for the SFrame decoder from the current process's memory.
 *
 * The section is never pinned: it is read with copy_from_user() at unwind
 * time, in process context where a page fault may be served (the section
 * of a freshly started program has usually never been touched).  A racing
 * munmap turns into -EFAULT, which ends the walk with SFRAME_STOP_FAULT.
 */
#include <linux/uaccess.h>

#include "sframe_decode.h"
#include "sframe_source_user.h"

int sframe_source_read(const struct sframe_source *src, uint64_t off,
		       void *dst, uint32_t len)
{
	/* The decoder checks bounds; this is the last line of defence. */
	if (off > src->size || len > src->size - off)
		return -EFAULT;
	if (copy_from_user(dst, src->base + off, len))
		return -EFAULT;
	return 0;
}
