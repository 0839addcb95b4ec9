/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel version differences, kept out of the logic.
 *
 * The module targets Debian 12's 6.1 first.  It needs the maple tree
 * (mtree_*, 6.1) for the per-process registry and the get/put interface
 * of MMU notifiers (5.5) for the process lifetime; older kernels are
 * refused at build time with a clear message rather than by a broken build.
 */
#ifndef SFRAME_COMPAT_H
#define SFRAME_COMPAT_H

#include <linux/version.h>
#include <linux/mm.h>

#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 1, 0)
#error "sframe_unwind needs Linux 6.1 or later (maple tree registry)"
#endif

/*
 * The first VMA that ends above addr, or NULL.  find_vma() is exported and
 * keeps the same meaning on every kernel we target; the VMA iterators do
 * not (6.1 introduced them, later kernels changed them).
 */
static inline struct vm_area_struct *sframe_next_vma(struct mm_struct *mm,
						      unsigned long addr)
{
	return find_vma(mm, addr);
}

#endif /* SFRAME_COMPAT_H */
