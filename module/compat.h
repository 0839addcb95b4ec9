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
#include <linux/ptrace.h>
#include <linux/security.h>
#include <asm/ibt.h>

/*
 * put_unaligned()/get_unaligned(): <asm/unaligned.h> moved to
 * <linux/unaligned.h> in 6.12 (the asm-generic header was made the only
 * one); the old name is gone there.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 12, 0)
#include <linux/unaligned.h>
#else
#include <asm/unaligned.h>
#endif

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

/* The ELF program header of .sframe; <linux/elf.h> names it from 6.x on. */
#ifndef PT_GNU_SFRAME
#define PT_GNU_SFRAME 0x6474e554
#endif

/*
 * The function containing a kprobe's address at offset 0: with IBT the
 * kprobe sits after the ENDBR instruction, and an indirect call must land
 * on it.
 */
static inline unsigned long sframe_function_entry(unsigned long kprobe_addr)
{
#ifdef CONFIG_X86_KERNEL_IBT
	if (is_endbr(*(u32 *)(kprobe_addr - ENDBR_INSN_SIZE)))
		return kprobe_addr - ENDBR_INSN_SIZE;
#endif
	return kprobe_addr;
}

/*
 * The perf sample path hooked by perf_hook.c: perf_prepare_sample() runs
 * for every sample written to a perf ring buffer, in the context of the
 * sample (NMI for hardware events, the hrtimer interrupt for software
 * ones), with the sampled event and registers as arguments.  Its
 * signature lost the header argument in 6.3.
 */
#define SFRAME_SAMPLE_HOOK_SYMBOL "perf_prepare_sample"
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 3, 0)
/* (header, data, event, regs) */
#define SFRAME_SAMPLE_HOOK_EVENT(kregs) ((struct perf_event *)(kregs)->dx)
#define SFRAME_SAMPLE_HOOK_REGS(kregs) ((struct pt_regs *)(kregs)->cx)
#else
/* (data, event, regs) */
#define SFRAME_SAMPLE_HOOK_EVENT(kregs) ((struct perf_event *)(kregs)->si)
#define SFRAME_SAMPLE_HOOK_REGS(kregs) ((struct pt_regs *)(kregs)->dx)
#endif

/*
 * security_perf_event_open(), perf_event_open()'s LSM hook (not exported:
 * called through the address ksyms.c finds), lost its unused attr argument
 * upstream ("perf: Remove unnecessary parameter of security check",
 * posted December 2024, after 6.12); Debian's 6.12 kernel (6.12.117, the
 * stable line) carries that change while 6.12.0 does not.  So the version
 * number cannot tell the two apart: the prototype in the kernel's own
 * headers does, at build time.  Called with the wrong arguments, the hook
 * would read attr's address as the event type.
 */
#define SFRAME_SECURITY_PERF_OPEN_HAS_ATTR                                \
	__builtin_types_compatible_p(typeof(&security_perf_event_open),   \
				     int (*)(struct perf_event_attr *, int))
static_assert(SFRAME_SECURITY_PERF_OPEN_HAS_ATTR ||
	      __builtin_types_compatible_p(typeof(&security_perf_event_open),
					   int (*)(int)),
	      "security_perf_event_open() has a prototype compat.h does not know");

static inline int sframe_call_security_perf_event_open(void *fn,
							struct perf_event_attr *attr,
							int type)
{
	if (SFRAME_SECURITY_PERF_OPEN_HAS_ATTR)
		return ((int (*)(struct perf_event_attr *, int))fn)(attr, type);
	return ((int (*)(int))fn)(type);
}

#endif /* SFRAME_COMPAT_H */
