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
#include <asm/ibt.h>

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

#endif /* SFRAME_COMPAT_H */
