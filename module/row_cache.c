// SPDX-License-Identifier: GPL-2.0
/*
 * A per-process cache of decoded SFrame rows, keyed by PC.
 *
 * Why: a lookup in a section is a binary search over the FDEs plus a scan
 * of the function's FREs, every byte read from user memory and checked:
 * hundreds of instructions per frame where the frame-pointer walk needs
 * two loads.  A profiler unwinds the same few hundred return addresses
 * over and over, so a small direct-mapped cache of (pc -> row) makes the
 * steady-state cost of an SFrame frame that of a hash and a copy.
 *
 * Each entry keeps the row twice: whole, and pre-reduced to the common
 * AMD64 rule (struct sframe_rule, 12 bytes) that unwind.c's per-frame
 * fast path applies directly, so a hit copies 12 bytes rather than 36 and
 * tests a flag rather than the row's kinds (docs/benchmarks.md).  64
 * bytes per entry, 32 KiB per registering process.
 *
 * Correctness: an entry carries the registry generation it was decoded
 * under; registering or unregistering a section bumps the generation, so
 * nothing decoded from a section survives its removal.  A process that
 * rewrites its own registered .sframe in place may get its old rows back:
 * that only affects its own unwinds, as the header validated at
 * registration does.  Likewise for SFRAME_RULE_NOT_SIGRETURN, the result
 * of reading the process's text at a return address: a process that
 * writes the rt_sigreturn trampoline's bytes over code it returned
 * through before gets that signal frame unwound as an ordinary frame, in
 * its own walks, until the entry is replaced or the registry changes.
 *
 * Concurrency: the threads of a process share the cache.  Each entry is a
 * tiny seqlock whose writer only ever trylocks: a reader never waits, a
 * writer that loses a race simply does not cache, and a torn read is
 * detected by the sequence and treated as a miss.
 */
#include <linux/limits.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "row_cache.h"

/* Off: every frame is decoded from its section (to measure, to debug). */
bool sframe_row_cache_enabled = true;
module_param_named(row_cache, sframe_row_cache_enabled, bool, 0644);
MODULE_PARM_DESC(row_cache, "Cache decoded SFrame rows per process (default: on)");

struct sframe_row_cache *sframe_row_cache_alloc(void)
{
	return kvzalloc(sizeof(struct sframe_row_cache), GFP_KERNEL_ACCOUNT);
}

void sframe_row_cache_free(struct sframe_row_cache *cache)
{
	kvfree(cache);
}

bool sframe_row_cache_lookup(struct sframe_row_cache *cache, u32 gen,
			     unsigned long pc, struct sframe_row *row)
{
	u32 seq;
	struct sframe_row_cache_entry *e =
		sframe_row_cache_probe(cache, gen, pc, &seq);
	u8 flags;

	if (!e || !READ_ONCE(sframe_row_cache_enabled))
		return false;
	*row = e->row;
	flags = READ_ONCE(e->rule.flags);
	return sframe_row_cache_unchanged(e, seq) &&
	       !(flags & SFRAME_RULE_UNCOVERED);
}

static bool sframe_fits_s16(s32 v)
{
	return v >= S16_MIN && v <= S16_MAX;
}

/* The fast form of row, if it has one (see struct sframe_rule). */
static struct sframe_rule sframe_row_rule(const struct sframe_row *row)
{
	struct sframe_rule rule = {};

	if (row->outermost || row->signal_frame || row->cfa_deref ||
	    (row->cfa_reg != SFRAME_REG_RSP && row->cfa_reg != SFRAME_REG_RBP) ||
	    row->ra.kind != SFRAME_LOC_CFA_OFFSET ||
	    !sframe_fits_s16(row->ra.offset))
		return rule;
	if (row->fp.kind == SFRAME_LOC_CFA_OFFSET &&
	    sframe_fits_s16(row->fp.offset)) {
		rule.fp_off = row->fp.offset;
		rule.flags |= SFRAME_RULE_FP_SAVED;
	} else if (row->fp.kind != SFRAME_LOC_SAME) {
		return rule;
	}
	rule.cfa_off = row->cfa_offset;
	rule.ra_off = row->ra.offset;
	rule.flags |= SFRAME_RULE_FAST;
	if (row->cfa_reg == SFRAME_REG_RBP)
		rule.flags |= SFRAME_RULE_CFA_FP;
	return rule;
}

/* Write rule and row for pc under gen, unless a writer holds the slot. */
static void sframe_row_cache_write(struct sframe_row_cache *cache, u32 gen,
				   unsigned long pc,
				   const struct sframe_rule *rule,
				   const struct sframe_row *row)
{
	struct sframe_row_cache_entry *e = sframe_row_cache_slot(cache, pc);
	u32 seq = READ_ONCE(e->seq);

	if ((seq & 1) || cmpxchg(&e->seq, seq, seq + 1) != seq)
		return;
	smp_wmb();
	WRITE_ONCE(e->pc, pc);
	WRITE_ONCE(e->gen, gen);
	e->rule = *rule;
	e->row = *row;
	smp_wmb();
	WRITE_ONCE(e->seq, seq + 2);
}

void sframe_row_cache_store(struct sframe_row_cache *cache, u32 gen,
			    unsigned long pc, const struct sframe_row *row,
			    bool not_sigreturn)
{
	struct sframe_rule rule;

	if (!READ_ONCE(sframe_row_cache_enabled))
		return;
	rule = sframe_row_rule(row);
	if (not_sigreturn)
		rule.flags |= SFRAME_RULE_NOT_SIGRETURN;
	sframe_row_cache_write(cache, gen, pc, &rule, row);
}

/* The row a fast rule stands for; start_off is not kept, no step reads it. */
static void sframe_rule_row(const struct sframe_rule *rule,
			    struct sframe_row *row)
{
	memset(row, 0, sizeof(*row));
	row->cfa_reg = (rule->flags & SFRAME_RULE_CFA_FP) ? SFRAME_REG_RBP :
							    SFRAME_REG_RSP;
	row->cfa_offset = rule->cfa_off;
	row->ra.kind = SFRAME_LOC_CFA_OFFSET;
	row->ra.offset = rule->ra_off;
	row->fp.kind = (rule->flags & SFRAME_RULE_FP_SAVED) ?
			       SFRAME_LOC_CFA_OFFSET : SFRAME_LOC_SAME;
	row->fp.offset = (rule->flags & SFRAME_RULE_FP_SAVED) ?
				 rule->fp_off : 0;
}

void sframe_row_cache_store_rule(struct sframe_row_cache *cache, u32 gen,
				 unsigned long pc, struct sframe_rule rule)
{
	struct sframe_row row;

	if (!READ_ONCE(sframe_row_cache_enabled))
		return;
	/*
	 * The full row too: a topmost frame's lookup (sframe_step()) at the
	 * same pc reads it.
	 */
	sframe_rule_row(&rule, &row);
	rule.flags |= SFRAME_RULE_NOT_SIGRETURN;
	sframe_row_cache_write(cache, gen, pc, &rule, &row);
}

void sframe_row_cache_store_uncovered(struct sframe_row_cache *cache,
				      u32 gen, unsigned long pc,
				      bool not_sigreturn)
{
	static const struct sframe_row none = {};
	struct sframe_rule rule = { .flags = SFRAME_RULE_UNCOVERED };

	if (!READ_ONCE(sframe_row_cache_enabled))
		return;
	if (not_sigreturn)
		rule.flags |= SFRAME_RULE_NOT_SIGRETURN;
	sframe_row_cache_write(cache, gen, pc, &rule, &none);
}
