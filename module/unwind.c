// SPDX-License-Identifier: GPL-2.0
/*
 * Unwinding one user frame at a time, on AMD64.
 *
 * SFrame first: find the section covering the PC, its row, then
 *   CFA = base register + offset (loaded from, for a v3 flexible row),
 *   RA  = *(CFA - 8), caller's FP = *(CFA + fp offset) if saved,
 *   caller's SP = CFA.
 * Where no section covers the PC, the frame-pointer rule, if allowed:
 *   RA = *(FP + 8), caller's FP = *FP, caller's SP = FP + 16.
 *
 * Signal frames: a handler returns into the C library's rt_sigreturn
 * trampoline (`mov $15, %rax; syscall`, recognised by its bytes as
 * libgcc's unwinder does, where glibc puts it: 16-byte aligned; or by an
 * SFrame v3 signal-frame FDE).  The frame
 * below it is the struct rt_sigframe the kernel pushed, whose ucontext has
 * every register of the interrupted code: the walk goes on from those, the
 * interrupted PC exact (not a return address) and every register known,
 * as at the top.  The interrupted stack may be another one (sigaltstack),
 * so such a step need not move the stack pointer up; at most
 * SFRAME_MAX_SIGNAL_FRAMES of them are crossed per walk.
 *
 * Every value comes from user memory the process controls, so nothing is
 * trusted: a fault ends the walk (SFRAME_STOP_FAULT), and a step that
 * does not move the stack pointer up ends it too (SFRAME_STOP_BAD_FRAME),
 * which bounds every walk by the size of the stack.
 */
#include <linux/mm_types.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/mmap_lock.h>
#include <linux/uaccess.h>
#include <asm/sigcontext.h>
#include <asm/ucontext.h>

#include "compat.h"
#include "discovery.h"
#include "row_cache.h"
#include "stats.h"
#include "sframe_unwind.h"
#include "unwind.h"

/* Result of one SFrame step when the PC has no row: try frame pointers. */
#define SFRAME_STEP_UNCOVERED 1
/* ...when the row says the PC is a signal trampoline. */
#define SFRAME_STEP_SIGNAL 2

/* Nested signal frames one walk crosses at most. */
#define SFRAME_MAX_SIGNAL_FRAMES 32
/*
 * Where the stack mapping cannot be looked up (interrupt context), a frame
 * pointer must lie within this much above the stack pointer: the default
 * stack size limit.
 */
#define SFRAME_FP_STACK_WINDOW (8UL << 20)

/*
 * The lowest address user code runs at: nothing is mapped below
 * mmap_min_addr (not exported: its default, 65536 on Debian, unless root
 * lowers vm.mmap_min_addr for an emulator).  A return address below it is
 * a small integer read where a frame would be, as when frame pointers are
 * followed through code built without them (ld.so's start-up gave perf
 * 0x9 as a caller of _dl_hwcaps_split): never a caller.
 */
#ifdef CONFIG_DEFAULT_MMAP_MIN_ADDR
#define SFRAME_MIN_USER_PC \
	max_t(unsigned long, CONFIG_DEFAULT_MMAP_MIN_ADDR, PAGE_SIZE)
#else
#define SFRAME_MIN_USER_PC PAGE_SIZE
#endif

static __always_inline bool sframe_user_pc(unsigned long pc)
{
	return pc >= SFRAME_MIN_USER_PC && pc < TASK_SIZE_MAX;
}

static int sframe_read_ulong(unsigned long addr, unsigned long *val)
{
	if (get_user(*val, (unsigned long __user *)addr))
		return -EFAULT;
	return 0;
}

static bool sframe_stop(struct sframe_user_unwind *uw, u32 reason)
{
	uw->stop = reason;
	return false;
}

/* General register reg (DWARF numbering, not SP or FP) of regs. */
static bool sframe_pt_reg(const struct pt_regs *regs, u8 reg,
			  unsigned long *val)
{
	switch (reg) {
	case 0: *val = regs->ax; return true;
	case 1: *val = regs->dx; return true;
	case 2: *val = regs->cx; return true;
	case 3: *val = regs->bx; return true;
	case 4: *val = regs->si; return true;
	case 5: *val = regs->di; return true;
	case 8: *val = regs->r8; return true;
	case 9: *val = regs->r9; return true;
	case 10: *val = regs->r10; return true;
	case 11: *val = regs->r11; return true;
	case 12: *val = regs->r12; return true;
	case 13: *val = regs->r13; return true;
	case 14: *val = regs->r14; return true;
	case 15: *val = regs->r15; return true;
	}
	return false;
}

/*
 * The value of DWARF register reg in the current frame.  Below the topmost
 * frame only SP and FP are known; every register is known at the top.
 */
static bool sframe_reg_value(const struct sframe_user_unwind *uw, u8 reg,
			     unsigned long *val)
{
	switch (reg) {
	case SFRAME_REG_RSP:
		*val = uw->sp;
		return true;
	case SFRAME_REG_RBP:
		*val = uw->bp;
		return true;
	}
	return uw->topmost && sframe_pt_reg(uw->regs, reg, val);
}

/*
 * Recover a register of the caller by its rule.  Returns 0, -EFAULT, or
 * -EINVAL for a rule that cannot be applied here.
 */
static int sframe_recover(const struct sframe_user_unwind *uw,
			  const struct sframe_loc *loc, unsigned long cfa,
			  unsigned long same, unsigned long *val)
{
	unsigned long base;

	switch (loc->kind) {
	case SFRAME_LOC_SAME:
		*val = same;
		return 0;
	case SFRAME_LOC_CFA_OFFSET:
		return sframe_read_ulong(cfa + (long)loc->offset, val);
	case SFRAME_LOC_REG_OFFSET:
		if (!sframe_reg_value(uw, loc->reg, &base))
			return -EINVAL;
		base += (long)loc->offset;
		if (!loc->deref) {
			*val = base;
			return 0;
		}
		return sframe_read_ulong(base, val);
	}
	return -EINVAL;
}

/* Stop for a failed read or rule: a fault, or a frame we cannot use. */
static int sframe_step_error(struct sframe_user_unwind *uw, int err)
{
	sframe_stop(uw, err == -EFAULT ? SFRAME_STOP_FAULT :
					 SFRAME_STOP_BAD_FRAME);
	return err;
}

/*
 * Move to the caller found by an SFrame rule, if it is a frame: the stack
 * pointer moves up (which bounds every walk by the stack's size) and the
 * return address is a user address.  same_sp: the topmost frame's return
 * address came from a register, so the caller's SP may be this frame's
 * (glibc's __vfork pops its return address into RDI around the system
 * call); registers are known at the top only, so this is allowed once per
 * walk and the bound holds.  0, or -EINVAL with uw->stop set.
 */
static __always_inline int sframe_step_to(struct sframe_user_unwind *uw,
					  unsigned long cfa, unsigned long ra,
					  unsigned long fp, bool same_sp)
{
	if ((same_sp ? cfa < uw->sp : cfa <= uw->sp) || !sframe_user_pc(ra))
		return sframe_step_error(uw, -EINVAL);

	uw->ip = ra;
	uw->sp = cfa;
	uw->bp = fp;
	uw->nr_sframe++;
	return 0;
}

static void sframe_unwind_set_mm(struct sframe_user_unwind *uw)
{
	/*
	 * The generation is read before any row is looked up: see
	 * sframe_step_cached().  The low 32 bits of the registry's 64-bit
	 * generation, the ones the row cache keeps.
	 */
	if (current->mm) {
		uw->smm = sframe_mm_find_for_walk(current->mm, &uw->rows,
						  &uw->gen);
	} else {
		uw->smm = NULL;
		uw->rows = NULL;
		uw->gen = 0;
	}
	/*
	 * An entry of another registry, if smm changed; entry_gen is
	 * written with entry (sframe_registry_lookup()), set here all the
	 * same (sframe_unwind_start() sets every field read before).
	 */
	uw->entry = NULL;
	uw->entry_gen = 0;
}

/* pc lies in the text of the section the walk used last. */
static bool sframe_in_range(const struct sframe_user_unwind *uw,
			    unsigned long pc)
{
	return uw->have_range && pc >= uw->range.text_start &&
	       pc < uw->range.text_end;
}

/*
 * Find the section covering pc into uw->range.  Where none is registered,
 * discovery (discovery.c) may find the .sframe of the mapped file, but it
 * reads files and takes mmap_lock: in atomic context the walk is stopped
 * with SFRAME_STOP_RETRY_IN_TASK instead, for the caller to redo it from
 * the task (no discovery is ever attempted twice for one mapping: a
 * mapping without .sframe gets a "none" entry).
 */
static bool sframe_find_range(struct sframe_user_unwind *uw, unsigned long pc)
{
	if (sframe_in_range(uw, pc))
		return sframe_range_covers(&uw->range);
	uw->have_range = uw->smm &&
			 sframe_registry_lookup(uw->smm, pc, &uw->range,
						&uw->entry, &uw->entry_gen);
	if (uw->have_range)
		return sframe_range_covers(&uw->range);
	if (!sframe_discovery_enabled())
		return false;
	if (!uw->can_sleep) {
		if (uw->flags & SFRAME_UNWIND_F_HERE)
			uw->undiscovered = true;
		else
			uw->retry_in_task = true;
		return false;
	}
	if (sframe_discover(pc))
		return false;
	sframe_unwind_set_mm(uw);
	uw->have_range = uw->smm &&
			 sframe_registry_lookup(uw->smm, pc, &uw->range,
						&uw->entry, &uw->entry_gen);
	return uw->have_range && sframe_range_covers(&uw->range);
}

/*
 * Decode the row for pc from its section.  Returns 0,
 * SFRAME_STEP_UNCOVERED, or a negative errno with uw->stop set.
 */
static int sframe_lookup_row(struct sframe_user_unwind *uw, unsigned long pc,
			     struct sframe_row *row)
{
	int ret;

	/*
	 * An interrupt of the task while it changes this registry (its own
	 * discovery, an munmap) would spin in the tree for ever: the walk
	 * ends here, as a section it could not read.
	 */
	if (uw->smm && !sframe_registry_readable(uw->smm))
		return sframe_step_error(uw, -EFAULT);
	if (!sframe_find_range(uw, pc))
		return SFRAME_STEP_UNCOVERED;

	ret = sframe_registry_find_row(uw->smm, &uw->range, pc, row,
				       &uw->budget);
	if (ret == -ESTALE) {
		/*
		 * The section the walk looked up earlier was replaced or
		 * removed meanwhile (the registry read it by its id and found
		 * another entry, or none): look the PC up once more, in the
		 * registry as it is now.  Once: a second change in between
		 * ends the step as uncovered.
		 */
		uw->have_range = false;
		if (!sframe_find_range(uw, pc))
			return SFRAME_STEP_UNCOVERED;
		ret = sframe_registry_find_row(uw->smm, &uw->range, pc, row,
					       &uw->budget);
		if (ret == -ESTALE)
			ret = -ENOENT;
	}
	if (ret == -ENOENT)
		return SFRAME_STEP_UNCOVERED;
	if (ret == -SFRAME_EBUDGET) {
		/*
		 * Counted here, where it happens, whatever the caller does
		 * next (an interrupt-context walk is redone from the task).
		 */
		atomic64_inc(&sframe_counters.walks_budget_exhausted);
		sframe_stop(uw, SFRAME_STOP_BUDGET);
		return ret;
	}
	if (ret)
		return sframe_step_error(uw, ret);
	return 0;
}

/*
 * The bounds of the stack the current frame is on: its mapping where it
 * can be looked up without sleeping (a task, and mmap_lock free), else a
 * window of SFRAME_FP_STACK_WINDOW above the stack pointer.
 */
static void sframe_find_stack(struct sframe_user_unwind *uw)
{
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;

	uw->stack_lo = uw->sp;
	uw->stack_hi = min(uw->sp + SFRAME_FP_STACK_WINDOW, TASK_SIZE_MAX);
	uw->stack_known = true;
	if (!mm || !uw->can_sleep || !mmap_read_trylock(mm))
		return;
	vma = sframe_next_vma(mm, uw->sp);
	if (vma && vma->vm_start <= uw->sp) {
		uw->stack_lo = vma->vm_start;
		uw->stack_hi = vma->vm_end;
	}
	mmap_read_unlock(mm);
}

/* [addr, addr + len) lies on the stack of the current frame. */
static bool sframe_on_stack(struct sframe_user_unwind *uw, unsigned long addr,
			    unsigned long len)
{
	if (!uw->stack_known)
		sframe_find_stack(uw);
	return addr >= uw->stack_lo && addr + len <= uw->stack_hi;
}

/*
 * One step with SFrame.  Returns 0 (stepped), SFRAME_STEP_UNCOVERED (no
 * section or no FDE covers the PC), or a negative errno with uw->stop set.
 */
static int sframe_step(struct sframe_user_unwind *uw)
{
	/*
	 * Below the top, ip is a return address: the call is just before
	 * it, and a call may be the last instruction of its function.
	 */
	unsigned long pc = uw->topmost ? uw->ip : uw->ip - 1;
	unsigned long cfa, ra, fp;
	struct sframe_row row;
	bool guessed;
	u32 gen;
	int ret;

	/* Read before the lookup, so a cached row is never newer than it. */
	gen = uw->smm ? sframe_mm_generation(uw->smm) : 0;
	if (!uw->smm || !sframe_row_cache_lookup(uw->rows, gen, pc, &row)) {
		/* A section looked up by an earlier step may be older than gen. */
		bool had_range = sframe_in_range(uw, pc);

		ret = sframe_lookup_row(uw, pc, &row);
		/*
		 * Remember a PC that the registry, looked up now, has an
		 * entry for but no row (a mapping without .sframe: the C
		 * library's frame below main, in every sample): the next
		 * walks take the frame-pointer rule without the lookup.  Not
		 * where no lookup was made (a range in hand, discovery left
		 * to the task) or it found no entry (a failed discovery,
		 * which a later walk retries).
		 */
		if (ret == SFRAME_STEP_UNCOVERED && !had_range &&
		    !uw->retry_in_task && sframe_in_range(uw, pc) &&
		    uw->smm && gen)
			sframe_row_cache_store_uncovered(uw->rows, gen, pc,
							 !uw->topmost);
		if (ret)
			return ret;
		/*
		 * Discovery may have made the registry (and its cache).
		 * Below the top, ip (pc + 1) was checked for the trampoline
		 * before this step (sframe_unwind_next_slow()).
		 */
		if (uw->smm && gen)
			sframe_row_cache_store(uw->rows, gen, pc, &row,
					       !uw->topmost);
	}

	if (row.outermost) {
		sframe_stop(uw, SFRAME_STOP_OUTERMOST);
		return -ENOENT;
	}
	if (row.signal_frame)
		return SFRAME_STEP_SIGNAL;

	guessed = false;
	if (!sframe_reg_value(uw, row.cfa_reg, &cfa)) {
		/*
		 * A CFA based on another register (OpenSSL's aesni_gcm_encrypt
		 * keeps its entry RSP in RAX around a call) in the caller of
		 * the topmost frame: take the value the topmost frame has,
		 * as libgcc and libdw do for a register the callee's CFI does
		 * not restore.  A guess (the callee may have changed it), so
		 * the CFA must also lie on the current stack; never deeper,
		 * where the register passed through frames we know less of.
		 */
		if (!uw->caller_of_topmost ||
		    !sframe_pt_reg(uw->regs, row.cfa_reg, &cfa))
			return sframe_step_error(uw, -EINVAL);
		guessed = true;
	}
	cfa += (long)row.cfa_offset;
	if (row.cfa_deref) {
		ret = sframe_read_ulong(cfa, &cfa);
		if (ret)
			return sframe_step_error(uw, ret);
		cfa += (long)row.cfa_addend;	/* SFRAME_F_X_CFA_ADDEND */
	}
	if (guessed) {
		if (cfa <= uw->sp || !sframe_on_stack(uw, cfa, 0))
			return sframe_step_error(uw, -EINVAL);
	}

	if (row.ra.kind == SFRAME_LOC_UNDEFINED) {
		sframe_stop(uw, SFRAME_STOP_OUTERMOST);
		return -ENOENT;
	}
	/* An RA that stays the same would be a loop, not a frame. */
	if (row.ra.kind == SFRAME_LOC_SAME)
		return sframe_step_error(uw, -EINVAL);
	ret = sframe_recover(uw, &row.ra, cfa, uw->ip, &ra);
	if (ret)
		return sframe_step_error(uw, ret);
	fp = 0;
	if (row.fp.kind != SFRAME_LOC_UNDEFINED) {
		ret = sframe_recover(uw, &row.fp, cfa, uw->bp, &fp);
		if (ret)
			return sframe_step_error(uw, ret);
	}

	return sframe_step_to(uw, cfa, ra, fp,
			      uw->topmost && row.ra.kind == SFRAME_LOC_REG_OFFSET &&
			      !row.ra.deref);
}

static bool sframe_step_fp(struct sframe_user_unwind *uw)
{
	unsigned long fp = uw->bp, next_fp, ra;

	if (!fp)
		return sframe_stop(uw, SFRAME_STOP_OUTERMOST);
	/*
	 * A frame pointer lies on the current stack above SP, 8-byte
	 * aligned.  In a handler on a sigaltstack, RBP may still hold the
	 * interrupted code's value, pointing into the other stack: following
	 * it would report frames that were never on this one.
	 */
	if (fp < uw->sp || (fp & 7) || fp > TASK_SIZE_MAX - 16)
		return sframe_stop(uw, SFRAME_STOP_NO_COVERAGE);
	if (!sframe_on_stack(uw, fp, 16))
		return sframe_stop(uw, SFRAME_STOP_NO_COVERAGE);
	if (sframe_read_ulong(fp, &next_fp) ||
	    sframe_read_ulong(fp + 8, &ra))
		return sframe_stop(uw, SFRAME_STOP_FAULT);
	if (!ra)
		return sframe_stop(uw, SFRAME_STOP_OUTERMOST);
	if (!sframe_user_pc(ra))
		return sframe_stop(uw, SFRAME_STOP_BAD_FRAME);

	uw->ip = ra;
	uw->sp = fp + 16;
	uw->bp = next_fp;
	uw->nr_fp++;
	return true;
}

/*
 * A PC below the top that no section covers: frame pointers, where the
 * walk may use them (the general step and the cached one alike).
 */
static bool sframe_step_uncovered(struct sframe_user_unwind *uw)
{
	if (!(uw->flags & SFRAME_UNWIND_F_FP))
		return sframe_stop(uw, SFRAME_STOP_NO_COVERAGE);
	return sframe_step_fp(uw);
}

/*
 * glibc's and musl's __restore_rt, where a handler returns to:
 * mov $__NR_rt_sigreturn, %rax; syscall.
 */
static const u8 sframe_sigreturn_code[] = {
	0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05,
};

/*
 * Is addr the start of the rt_sigreturn trampoline?  Out of line: its
 * buffer would give sframe_unwind_next() a stack canary on every frame.
 */
static noinline bool sframe_is_sigreturn(unsigned long addr)
{
	u8 code[sizeof(sframe_sigreturn_code)];

	if (addr >= TASK_SIZE_MAX - sizeof(code) ||
	    copy_from_user(code, (const void __user *)addr, sizeof(code)))
		return false;
	return !memcmp(code, sframe_sigreturn_code, sizeof(code));
}

/*
 * Is the topmost frame in the trampoline: at its start, at its syscall,
 * or in the kernel after it?
 */
static bool sframe_at_sigreturn(const struct sframe_user_unwind *uw)
{
	return sframe_is_sigreturn(uw->ip) || sframe_is_sigreturn(uw->ip - 7) ||
	       sframe_is_sigreturn(uw->ip - 9);
}

/*
 * Step over a signal frame: the trampoline's stack pointer is the address
 * of the ucontext the kernel pushed (struct rt_sigframe, after the
 * handler's return address), and its sigcontext has the interrupted
 * registers.
 */
static bool sframe_step_signal(struct sframe_user_unwind *uw)
{
	unsigned long mc = uw->sp + offsetof(struct ucontext, uc_mcontext);
	struct sigcontext_64 sc;
	struct pt_regs *r = &uw->sig_regs;

	if (++uw->nr_signal > SFRAME_MAX_SIGNAL_FRAMES)
		return sframe_stop(uw, SFRAME_STOP_BAD_FRAME);
	if (mc >= TASK_SIZE_MAX - sizeof(sc) ||
	    copy_from_user(&sc, (const void __user *)mc, sizeof(sc)))
		return sframe_stop(uw, SFRAME_STOP_FAULT);
	if (!sframe_user_pc(sc.ip) || sc.sp >= TASK_SIZE_MAX)
		return sframe_stop(uw, SFRAME_STOP_BAD_FRAME);
	memset(r, 0, sizeof(*r));
	r->r8 = sc.r8;
	r->r9 = sc.r9;
	r->r10 = sc.r10;
	r->r11 = sc.r11;
	r->r12 = sc.r12;
	r->r13 = sc.r13;
	r->r14 = sc.r14;
	r->r15 = sc.r15;
	r->di = sc.di;
	r->si = sc.si;
	r->bp = sc.bp;
	r->bx = sc.bx;
	r->dx = sc.dx;
	r->ax = sc.ax;
	r->cx = sc.cx;
	r->sp = sc.sp;
	r->ip = sc.ip;
	r->flags = sc.flags;
	uw->regs = r;
	uw->ip = sc.ip;
	uw->sp = sc.sp;
	uw->bp = sc.bp;
	/* The interrupted PC is exact, and every register is known. */
	uw->topmost = true;
	uw->caller_of_topmost = false;
	uw->stack_known = false;
	return true;
}

void sframe_unwind_start(struct sframe_user_unwind *uw,
			 const struct pt_regs *regs, u32 flags)
{
	/*
	 * Whether the walk may take long: only where it could be preempted.
	 * Not in_task() alone: software events (page faults, context
	 * switches, tracepoints) sample in task context with preemption off
	 * and under RCU, and an interrupt or NMI never may.  preemptible()
	 * is exact on every supported kernel (compat.h requires
	 * CONFIG_PREEMPT_COUNT).
	 */
	bool task = in_task() && preemptible();

	/*
	 * Field by field, not a memset() of the whole state: range,
	 * stack_lo/hi and sig_regs (some 300 bytes, a `rep stos` that qemu
	 * counts a word at a time) are written before they are read, under
	 * have_range, stack_known and a signal step.  Every other field is
	 * set here.
	 */
	uw->ip = regs->ip;
	uw->sp = regs->sp;
	uw->bp = regs->bp;
	uw->regs = regs;
	uw->topmost = true;
	uw->caller_of_topmost = false;
	uw->flags = flags;
	uw->retry_in_task = false;
	uw->undiscovered = false;
	uw->have_range = false;
	uw->stack_known = false;
	uw->nr_signal = 0;
	uw->stop = 0;
	uw->nr_sframe = 0;
	uw->nr_fp = 0;
	/*
	 * A walk that cannot be preempted (hard interrupt, NMI, a software
	 * event's sample with preemption off: the sample path) holds its
	 * CPU, so it gets the small budget whoever calls; its caller may
	 * lower either, and redoes a walk that ran out from the task.
	 */
	uw->budget = task ? SFRAME_WALK_BUDGET : SFRAME_IRQ_WALK_BUDGET;
	/* Discovery sleeps: only where faults may be served, in a task. */
	uw->can_sleep = task && !pagefault_disabled();
	sframe_unwind_set_mm(uw);
}

/*
 * Read the words at a and b in one user-access window: one range check
 * and one STAC/CLAC for both, where two get_user() have one each.  a and
 * b are within 64 KiB of each other (16-bit offsets from one CFA).
 */
static __always_inline int sframe_read_two(unsigned long a, unsigned long *va,
					   unsigned long b, unsigned long *vb)
{
	unsigned long lo = min(a, b), hi = max(a, b);

	if (!user_access_begin((const void __user *)lo, hi - lo + 8))
		return -EFAULT;
	unsafe_get_user(*va, (const unsigned long __user *)a, fault);
	unsafe_get_user(*vb, (const unsigned long __user *)b, fault);
	user_access_end();
	return 0;
fault:
	user_access_end();
	return -EFAULT;
}

/*
 * Read the word at a in a user-access window opened inline: get_user()
 * is a call to an out-of-line helper, with the same range check and
 * STAC/CLAC.
 */
static __always_inline int sframe_read_one(unsigned long a, unsigned long *va)
{
	if (!user_access_begin((const void __user *)a, sizeof(*va)))
		return -EFAULT;
	unsafe_get_user(*va, (const unsigned long __user *)a, fault);
	user_access_end();
	return 0;
fault:
	user_access_end();
	return -EFAULT;
}

/* Results of sframe_step_cached(): not applied, take the general path; */
#define SFRAME_STEP_SLOW 1
/* ...the row cache has no rule for the PC. */
#define SFRAME_STEP_MISS 2

/*
 * Apply a fast rule, at the top or below.  The same rule and checks as
 * sframe_step() (reads first, then: the stack pointer moves up, the RA is
 * a user address), in fewer instructions: RA and saved FP read in one
 * user-access window, a lone RA in an inline one (sframe_read_one()).
 * 0, or a negative errno with uw->stop set.
 */
static __always_inline int sframe_step_rule(struct sframe_user_unwind *uw,
					    const struct sframe_rule *rule)
{
	bool top = uw->topmost;
	unsigned long cfa, ra, fp;
	int err;

	cfa = (rule->flags & SFRAME_RULE_CFA_FP) ? uw->bp : uw->sp;
	cfa += (long)rule->cfa_off;
	if (rule->flags & SFRAME_RULE_FP_SAVED) {
		err = sframe_read_two(cfa + (long)rule->ra_off, &ra,
				      cfa + (long)rule->fp_off, &fp);
	} else {
		err = sframe_read_one(cfa + (long)rule->ra_off, &ra);
		fp = uw->bp;
	}
	if (err)
		return sframe_step_error(uw, err);
	uw->topmost = false;
	uw->caller_of_topmost = top;
	return sframe_step_to(uw, cfa, ra, fp, false);
}

/*
 * One step from the row cache's pre-reduced rule: the steady state of a
 * profiler, every frame of every sample, the topmost one included; an
 * inline cache probe copying 12 bytes.  The same rule and checks as
 * sframe_step() (the PC of the row).  Returns 0 (stepped),
 * SFRAME_STEP_MISS (no entry for the PC), SFRAME_STEP_SLOW (a row without
 * a fast form, or a return address whose trampoline check is not cached),
 * or a negative errno with uw->stop set.
 */
static __always_inline int sframe_step_cached(struct sframe_user_unwind *uw)
{
	bool top = uw->topmost;
	struct sframe_rule rule;

	/*
	 * As sframe_step(): the exact PC at the top, the call's below.  The
	 * generation is uw->gen, read when the walk found its registry
	 * (sframe_unwind_set_mm()), not read again for each frame (a call
	 * into registry.c).  Every entry was stored under the low 32 bits of
	 * a generation read before its row was found: a row decoded by the
	 * general step, or a rule taken from the index under uw->entry_gen
	 * (sframe_unwind_next_indexed()), which is never older than uw->gen.
	 * So a hit is a row found under the registry as it was at the walk's
	 * start or later, never an older one; what the walk finds after a
	 * change is cached under the new generation, a miss for the rest of
	 * this walk and a hit for the next ones.
	 */
	if (!sframe_row_cache_lookup_rule(uw->rows, uw->gen,
					  top ? uw->ip : uw->ip - 1, &rule))
		return SFRAME_STEP_MISS;
	/*
	 * Below the top, a 16-byte-aligned return address may be the
	 * trampoline's (sframe_unwind_next_slow()); at the top, a PC with a
	 * row is applied by it, as the general step does.
	 */
	if (!top && !(uw->ip & 15) && !(rule.flags & SFRAME_RULE_NOT_SIGRETURN))
		return SFRAME_STEP_SLOW;
	if (!(rule.flags & SFRAME_RULE_FAST)) {
		/*
		 * No row, below the top (SFRAME_RULE_UNCOVERED, never set
		 * on a rule from the index): the general step's
		 * frame-pointer rule (at the top it looks for the trampoline
		 * first).  A row without a fast form takes the general step.
		 */
		if (top || !(rule.flags & SFRAME_RULE_UNCOVERED))
			return SFRAME_STEP_SLOW;
		uw->caller_of_topmost = false;
		return sframe_step_uncovered(uw) ? 0 : -ENOENT;
	}
	return sframe_step_rule(uw, &rule);
}

/* A step by any rule: the first frame, a cache miss, a signal frame... */
static noinline bool sframe_unwind_next_slow(struct sframe_user_unwind *uw)
{
	bool was_topmost = uw->topmost;
	bool ok;

	if (uw->stop)
		return false;
	/*
	 * glibc aligns its trampoline to 16 bytes and puts a nop before it,
	 * so ip - 1 is in no function's row: look at the bytes first where
	 * the return address is so aligned (one frame in sixteen costs a
	 * read of 9 bytes of text).
	 */
	if (!uw->topmost && !(uw->ip & 15) && sframe_is_sigreturn(uw->ip))
		return sframe_step_signal(uw);
	if (uw->flags & SFRAME_UNWIND_F_SFRAME) {
		int ret = sframe_step(uw);

		if (uw->retry_in_task)
			return sframe_stop(uw, SFRAME_STOP_RETRY_IN_TASK);
		if (ret == SFRAME_STEP_SIGNAL)
			return sframe_step_signal(uw);
		if (ret != SFRAME_STEP_UNCOVERED) {
			uw->topmost = false;
			uw->caller_of_topmost = was_topmost;
			return ret == 0;
		}
	}
	/*
	 * No row.  At the top the task may be inside the trampoline (not
	 * only at its start); below, the aligned check above found it.
	 */
	if (uw->topmost && sframe_at_sigreturn(uw))
		return sframe_step_signal(uw);
	ok = sframe_step_uncovered(uw);
	uw->topmost = false;
	uw->caller_of_topmost = was_topmost;
	return ok;
}

/*
 * A step below the top that missed the row cache, in the section the walk
 * used last: its rule straight from the section's index (one budget
 * unit), through the entry remembered from the lookup of the section
 * rather than a lookup in the registry's tree, and applied as a cached
 * rule is; the row cache gets it.  Any other case takes the general path,
 * which spends the budget itself: a PC in another section, a section
 * without index, a changed registry, a row without a fast form, the
 * rt_sigreturn trampoline at a 16-byte-aligned return address (checked
 * here as sframe_unwind_next_slow() does, so the rule is cached as not
 * the trampoline).  Out of line from the cached path, which stays free
 * of this one's frame.
 */
static noinline bool sframe_unwind_next_indexed(struct sframe_user_unwind *uw)
{
	unsigned long pc = uw->ip - 1;
	struct sframe_rule rule;

	if (!sframe_in_range(uw, pc) || !uw->entry ||
	    (!(uw->ip & 15) && sframe_is_sigreturn(uw->ip)))
		return sframe_unwind_next_slow(uw);
	rule = sframe_registry_find_rule(uw->smm, uw->entry, uw->entry_gen, pc,
					 &uw->budget);
	if (!(rule.flags & SFRAME_RULE_FAST))
		return sframe_unwind_next_slow(uw);
	/*
	 * Found under entry_gen, the generation it is still valid for.  The
	 * flag is tested here, not only in the store, to spare a call per
	 * frame with the cache off.
	 */
	if (READ_ONCE(sframe_row_cache_enabled))
		sframe_row_cache_store_rule(uw->rows, (u32)uw->entry_gen, pc,
					    rule);
	return sframe_step_rule(uw, &rule) == 0;
}

/*
 * A step after the row cache had no entry for the PC, or was not looked
 * at (row_cache=0): below the top in an SFrame walk, the rule from the
 * index (sframe_unwind_next_indexed(), which falls back to the general
 * step itself); at the top, whose PC is exact and may be inside the
 * trampoline, or in a frame-pointer walk, the general step.
 */
static __always_inline bool
sframe_unwind_next_missed(struct sframe_user_unwind *uw)
{
	if ((uw->flags & SFRAME_UNWIND_F_SFRAME) && !uw->topmost && uw->rows)
		return sframe_unwind_next_indexed(uw);
	return sframe_unwind_next_slow(uw);
}

/* The fast paths, then the general one where they do not apply. */
static noinline bool sframe_unwind_next_cached(struct sframe_user_unwind *uw)
{
	int ret = sframe_step_cached(uw);

	if (ret == SFRAME_STEP_MISS)
		return sframe_unwind_next_missed(uw);
	if (ret != SFRAME_STEP_SLOW)
		return ret == 0;
	return sframe_unwind_next_slow(uw);
}

/*
 * Whether a step may look in the row cache (the caller checks uw->stop).
 * Off, a step below the top still takes its rule from the index.
 */
static bool sframe_unwind_cached(const struct sframe_user_unwind *uw)
{
	return (uw->flags & SFRAME_UNWIND_F_SFRAME) && uw->rows &&
	       READ_ONCE(sframe_row_cache_enabled);
}

/*
 * Two paths kept apart (noinline), so that the fast one has no stack
 * canary nor the general one's frame, and this dispatch none at all: the
 * frame-pointer walk pays a few tests and a jump.  The topmost frame
 * takes the fast path too: its row is cached under its PC like any other,
 * and the general step costs it the row's 36-byte copy and its kinds'
 * tests on every sample.
 */
bool sframe_unwind_next(struct sframe_user_unwind *uw)
{
	if (uw->stop)
		return false;
	if (sframe_unwind_cached(uw))
		return sframe_unwind_next_cached(uw);
	return sframe_unwind_next_missed(uw);
}

bool sframe_unwind_continue_fp(struct sframe_user_unwind *uw)
{
	/*
	 * A budget stop leaves the frame as it was: the lookup that ran
	 * out stopped before the step (sframe_lookup_row()).
	 */
	if (uw->stop != SFRAME_STOP_BUDGET)
		return false;
	uw->stop = 0;
	uw->flags &= ~SFRAME_UNWIND_F_SFRAME;
	return true;
}

/*
 * sframe_unwind_next() in a loop, for the sample path: the fast path is
 * inline here, so a cached frame costs no call and no dispatch (some 20
 * instructions a frame), and whether it applies is tested once, not for
 * each frame: a step that stops the walk ends the loop, and only the
 * steps out of line can find a registry (discovery), after which it is
 * tested again.  A miss below the top takes its rule from the index, as
 * in sframe_unwind_next().
 */
u32 sframe_unwind_fill(struct sframe_user_unwind *uw, u64 *frames, u32 n,
		       u32 max)
{
	bool cached = sframe_unwind_cached(uw);
	bool ok;
	int ret;

	if (uw->stop)
		return n;
	while (n < max) {
		ret = cached ? sframe_step_cached(uw) : SFRAME_STEP_MISS;
		if (ret == SFRAME_STEP_MISS || ret == SFRAME_STEP_SLOW) {
			ok = ret == SFRAME_STEP_MISS ?
				     sframe_unwind_next_missed(uw) :
				     sframe_unwind_next_slow(uw);
			if (!ok)
				break;
			cached = sframe_unwind_cached(uw);
		} else if (ret) {
			break;
		}
		frames[n++] = uw->ip;
	}
	return n;
}

u32 sframe_unwind_user_stack(struct sframe_user_unwind *uw,
			     struct sframe_user_stacks *stacks, u32 flags,
			     u64 *frames, u32 max, bool may_sleep)
{
	u32 n = 0;

	/* The registers the task will return to user space with. */
	sframe_unwind_start(uw, task_pt_regs(current), flags);
	frames[n++] = uw->ip;
	for (;;) {
		u32 end = may_sleep ? min(max, n + SFRAME_RESCHED_FRAMES) : max;

		n = sframe_unwind_fill(uw, frames, n, end);
		if (n < end || n == max)
			break;
		cond_resched();
	}
	if (!uw->stop)
		uw->stop = SFRAME_STOP_LIMIT;
	sframe_unwind_account(uw);
	stacks->frames[flags] = frames;
	stacks->nr[flags] = n;
	stacks->stop[flags] = uw->stop;
	return uw->stop;
}
