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
 * Every value comes from user memory the process controls, so nothing is
 * trusted: a fault ends the walk (SFRAME_STOP_FAULT), and a step that
 * does not move the stack pointer up ends it too (SFRAME_STOP_BAD_FRAME),
 * which bounds every walk by the size of the stack.
 */
#include <linux/mm_types.h>
#include <linux/sched.h>
#include <linux/uaccess.h>

#include "discovery.h"
#include "row_cache.h"
#include "sframe_source_user.h"
#include "stats.h"
#include "sframe_unwind.h"
#include "unwind.h"

/* Result of one SFrame step when the PC has no row: try frame pointers. */
#define SFRAME_STEP_UNCOVERED 1

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

/*
 * The value of DWARF register reg in the current frame.  Below the topmost
 * frame only SP and FP are known; every register is known at the top.
 */
static bool sframe_reg_value(const struct sframe_user_unwind *uw, u8 reg,
			     unsigned long *val)
{
	const struct pt_regs *regs = uw->regs;

	switch (reg) {
	case SFRAME_REG_RSP:
		*val = uw->sp;
		return true;
	case SFRAME_REG_RBP:
		*val = uw->bp;
		return true;
	}
	if (!uw->topmost)
		return false;
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

static void sframe_unwind_set_mm(struct sframe_user_unwind *uw)
{
	uw->smm = current->mm ? sframe_mm_find(current->mm) : NULL;
	uw->rows = uw->smm ? sframe_mm_row_cache(uw->smm) : NULL;
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
	if (uw->have_range && pc >= uw->range.text_start &&
	    pc < uw->range.text_end)
		return sframe_range_covers(&uw->range);
	uw->have_range = uw->smm &&
			 sframe_registry_lookup(uw->smm, pc, &uw->range);
	if (uw->have_range)
		return sframe_range_covers(&uw->range);
	if (!sframe_discovery_enabled())
		return false;
	if (!uw->can_sleep) {
		uw->retry_in_task = true;
		return false;
	}
	if (sframe_discover(pc))
		return false;
	sframe_unwind_set_mm(uw);
	uw->have_range = uw->smm &&
			 sframe_registry_lookup(uw->smm, pc, &uw->range);
	return uw->have_range && sframe_range_covers(&uw->range);
}

/*
 * Decode the row for pc from its section.  Returns 0,
 * SFRAME_STEP_UNCOVERED, or a negative errno with uw->stop set.
 */
static int sframe_lookup_row(struct sframe_user_unwind *uw, unsigned long pc,
			     struct sframe_row *row)
{
	struct sframe_source src = {};
	int ret;

	if (!sframe_find_range(uw, pc))
		return SFRAME_STEP_UNCOVERED;

	if (uw->range.source == SFRAME_SOURCE_SUPPLIED) {
		ret = sframe_supplied_find_row(uw->smm, pc, row, &uw->budget);
	} else {
		src.base = u64_to_user_ptr(uw->range.sframe_addr);
		src.size = uw->range.sec.sec_size;
		uw->range.sec.src = &src;
		ret = sframe_find_row_budget(&uw->range.sec, pc, row,
					     &uw->budget);
		uw->range.sec.src = NULL;
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
	u32 gen;
	int ret;

	/* Read before the lookup, so a cached row is never newer than it. */
	gen = uw->smm ? sframe_mm_generation(uw->smm) : 0;
	if (!uw->smm || !sframe_row_cache_lookup(uw->rows, gen, pc, &row)) {
		ret = sframe_lookup_row(uw, pc, &row);
		if (ret)
			return ret;
		/* Discovery may have made the registry (and its cache). */
		if (uw->smm && gen)
			sframe_row_cache_store(uw->rows, gen, pc, &row);
	}

	if (row.outermost) {
		sframe_stop(uw, SFRAME_STOP_OUTERMOST);
		return -ENOENT;
	}

	if (!sframe_reg_value(uw, row.cfa_reg, &cfa))
		return sframe_step_error(uw, -EINVAL);
	cfa += (long)row.cfa_offset;
	if (row.cfa_deref) {
		ret = sframe_read_ulong(cfa, &cfa);
		if (ret)
			return sframe_step_error(uw, ret);
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

	if (cfa <= uw->sp || !ra || ra >= TASK_SIZE_MAX)
		return sframe_step_error(uw, -EINVAL);

	uw->ip = ra;
	uw->sp = cfa;
	uw->bp = fp;
	uw->nr_sframe++;
	return 0;
}

static bool sframe_step_fp(struct sframe_user_unwind *uw)
{
	unsigned long fp = uw->bp, next_fp, ra;

	if (!fp)
		return sframe_stop(uw, SFRAME_STOP_OUTERMOST);
	/* A frame pointer lies on the stack above SP, 8-byte aligned. */
	if (fp < uw->sp || (fp & 7) || fp > TASK_SIZE_MAX - 16)
		return sframe_stop(uw, SFRAME_STOP_NO_COVERAGE);
	if (sframe_read_ulong(fp, &next_fp) ||
	    sframe_read_ulong(fp + 8, &ra))
		return sframe_stop(uw, SFRAME_STOP_FAULT);
	if (!ra)
		return sframe_stop(uw, SFRAME_STOP_OUTERMOST);
	if (ra >= TASK_SIZE_MAX)
		return sframe_stop(uw, SFRAME_STOP_BAD_FRAME);

	uw->ip = ra;
	uw->sp = fp + 16;
	uw->bp = next_fp;
	uw->nr_fp++;
	return true;
}

void sframe_unwind_start(struct sframe_user_unwind *uw,
			 const struct pt_regs *regs, u32 flags)
{
	memset(uw, 0, sizeof(*uw));
	uw->ip = regs->ip;
	uw->sp = regs->sp;
	uw->bp = regs->bp;
	uw->regs = regs;
	uw->topmost = true;
	uw->flags = flags;
	/*
	 * A walk outside a task (hard interrupt, NMI: the sample path) holds
	 * a CPU with interrupts off, so it gets the small budget whoever
	 * calls; its caller may lower either, and redoes a walk that ran out
	 * from the task.
	 */
	uw->budget = in_task() ? SFRAME_WALK_BUDGET : SFRAME_IRQ_WALK_BUDGET;
	/* Discovery sleeps: only where faults may be served, in a task. */
	uw->can_sleep = in_task() && !pagefault_disabled();
	sframe_unwind_set_mm(uw);
}

bool sframe_unwind_next(struct sframe_user_unwind *uw)
{
	bool ok;

	if (uw->stop)
		return false;
	if (uw->flags & SFRAME_UNWIND_F_SFRAME) {
		int ret = sframe_step(uw);

		if (uw->retry_in_task)
			return sframe_stop(uw, SFRAME_STOP_RETRY_IN_TASK);
		if (ret != SFRAME_STEP_UNCOVERED) {
			uw->topmost = false;
			return ret == 0;
		}
	}
	if (!(uw->flags & SFRAME_UNWIND_F_FP))
		return sframe_stop(uw, SFRAME_STOP_NO_COVERAGE);
	ok = sframe_step_fp(uw);
	uw->topmost = false;
	return ok;
}

void sframe_unwind_account(const struct sframe_user_unwind *uw)
{
	atomic64_inc(&sframe_counters.unwinds);
	atomic64_add(uw->nr_sframe, &sframe_counters.frames_sframe);
	atomic64_add(uw->nr_fp, &sframe_counters.frames_fp);
	if (uw->stop == SFRAME_STOP_FAULT)
		atomic64_inc(&sframe_counters.unwind_faults);
	else if (uw->stop == SFRAME_STOP_BAD_FRAME)
		atomic64_inc(&sframe_counters.unwind_bad_frames);
}
