/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The user-space unwinder: SFrame where a registered section covers the PC,
 * frame pointers where none does.
 */
#ifndef SFRAME_UNWIND_USER_H
#define SFRAME_UNWIND_USER_H

#include <linux/ptrace.h>

#include "sframe_unwind.h"

#include "registry.h"
#include "stats.h"

/*
 * Module-internal stop reason, never reported: the walk reached code whose
 * .sframe could be discovered, which atomic context cannot do.
 */
#define SFRAME_STOP_RETRY_IN_TASK 0x100

/*
 * Module-internal walk flag, with SFRAME_UNWIND_F_*: the walk must end
 * where it runs (perf's own callchain, perf_callchain.c), so a mapping
 * discovery has not looked at yet is stepped as uncovered (frame
 * pointers) rather than stopping with SFRAME_STOP_RETRY_IN_TASK, and
 * uw->undiscovered says that it met one.
 */
#define SFRAME_UNWIND_F_HERE 0x100

/*
 * Budgets of decoding work per walk, in the units of sframe_decode.h
 * (one per FDE-table read, one per FRE read; cached rows are free).
 * sframe_unwind_start() gives a walk in a task SFRAME_WALK_BUDGET (uapi:
 * 2^20), and a walk anywhere else (hard interrupt or NMI, IRQs off: the
 * sample path) SFRAME_IRQ_WALK_BUDGET: 512 units, some 25 to 50 lookups
 * in an ordinary section (10 to 20 units each) or a sixteenth of one
 * lookup at the FRE cap, which keeps it to tens of microseconds (see
 * docs/benchmarks.md).  The caller may lower uw->budget after
 * sframe_unwind_start().  A walk that spends it stops with
 * SFRAME_STOP_BUDGET; the sample path then redoes it from the task.
 */
#define SFRAME_IRQ_WALK_BUDGET 512

/*
 * The state of one walk, one frame at a time (like the kernel's own).
 * sframe_unwind_start() (with sframe_unwind_set_mm()) sets each field but
 * range, stack_lo/hi and sig_regs, which are written before they are
 * read: a new field must be set there.
 */
struct sframe_user_unwind {
	unsigned long ip, sp, bp;   /* the current frame */
	const struct pt_regs *regs; /* registers of the topmost frame */
	bool topmost;
	bool caller_of_topmost;     /* the frame the topmost one returns to */
	u32 flags;                  /* SFRAME_UNWIND_F_* */
	struct sframe_mm *smm;      /* registry of current->mm, or NULL */
	struct sframe_row_cache *rows; /* its row cache */
	/*
	 * smm's generation when it was found, its low 32 bits (the row
	 * cache's): what the fast path compares entries with.
	 */
	u32 gen;
	bool can_sleep;             /* discovery allowed (task, faults on) */
	bool retry_in_task;         /* stopped: discovery needs the task */
	bool undiscovered;          /* F_HERE: met a mapping not looked at */
	struct sframe_range range;  /* the section used last, if have_range */
	bool have_range;
	/*
	 * range's entry in the registry uw->smm, and the generation it was
	 * found under (sframe_registry_find_rule()), or NULL.
	 */
	struct sframe_entry *entry;
	u64 entry_gen;
	u32 budget;                 /* decoding units left (see above) */
	/*
	 * The stack mapping of the current frame, [stack_lo, stack_hi), once
	 * a rule needed it (stack_known: the frame-pointer rule, a CFA from a
	 * guessed register); a signal frame may move the walk to another
	 * stack (sigaltstack), which forgets it.
	 */
	unsigned long stack_lo, stack_hi;
	bool stack_known;
	/* Registers of the frame a signal interrupted, from its ucontext:
	 * uw->regs points here once the walk crossed a signal frame. */
	struct pt_regs sig_regs;
	u32 nr_signal;              /* signal frames crossed */
	u32 stop;                   /* enum sframe_stop_reason, once stopped */
	u32 nr_sframe;              /* frames unwound with SFrame */
	u32 nr_fp;                  /* frames unwound with frame pointers */
};

/*
 * Start a walk of current's user stack from regs (its user registers).
 * Must run in process context of current: sections and stack are read from
 * current's memory with copy_from_user(), which may fault pages in.
 */
void sframe_unwind_start(struct sframe_user_unwind *uw,
			 const struct pt_regs *regs, u32 flags);

/*
 * Step to the caller of the current frame.  Returns true with ip/sp/bp of
 * the caller, or false with uw->stop set.  Each step moves sp up, so a walk
 * ends even on a corrupt or hostile stack.
 */
bool sframe_unwind_next(struct sframe_user_unwind *uw);

/*
 * A walk stopped by its decoding budget (SFRAME_STOP_BUDGET) goes on by
 * frame pointers alone, from the frame it stopped at: what it found so far
 * stands, and no row is read any more.  Returns false, changing nothing,
 * for any other stop.
 */
bool sframe_unwind_continue_fp(struct sframe_user_unwind *uw);

/*
 * Step while n < max, storing each caller's PC at frames[n++]: the same
 * walk as sframe_unwind_next() in a loop, in fewer instructions a frame.
 * Returns the new n, less than max when a step ended the walk.
 */
u32 sframe_unwind_fill(struct sframe_user_unwind *uw, u64 *frames, u32 n,
		       u32 max);

/* Add a finished walk to the module's counters (inline: every sample). */
static inline void sframe_unwind_account(const struct sframe_user_unwind *uw)
{
	atomic64_inc(&sframe_counters.unwinds);
	atomic64_add(uw->nr_sframe, &sframe_counters.frames_sframe);
	atomic64_add(uw->nr_fp, &sframe_counters.frames_fp);
	if (uw->stop == SFRAME_STOP_FAULT)
		atomic64_inc(&sframe_counters.unwind_faults);
	else if (uw->stop == SFRAME_STOP_BAD_FRAME)
		atomic64_inc(&sframe_counters.unwind_bad_frames);
}

/*
 * The user stack of one kernel entry, walked once per method some
 * consumer asks for (SFRAME_UNWIND_F_SFRAME, _FP or both): index by the
 * flags.
 */
struct sframe_user_stacks {
	u64 *frames[SFRAME_UNWIND_F_ALL + 1]; /* NULL: not walked */
	u32 nr[SFRAME_UNWIND_F_ALL + 1];
	u32 stop[SFRAME_UNWIND_F_ALL + 1];    /* enum sframe_stop_reason */
};

/*
 * Walk current's user stack (from the registers it will return to user
 * space with) with the methods flags into frames (room for max), record it
 * in stacks, and count it.  Returns the stop reason.  The decoding budget
 * is sframe_unwind_start()'s: SFRAME_WALK_BUDGET in a task, the small
 * SFRAME_IRQ_WALK_BUDGET in an interrupt.  may_sleep (a task, faults
 * allowed): reschedules every SFRAME_RESCHED_FRAMES frames, since a
 * crafted stack may spend its whole budget (some 150 ms under emulation).
 */
#define SFRAME_RESCHED_FRAMES 64
u32 sframe_unwind_user_stack(struct sframe_user_unwind *uw,
			     struct sframe_user_stacks *stacks, u32 flags,
			     u64 *frames, u32 max, bool may_sleep);

#endif /* SFRAME_UNWIND_USER_H */
