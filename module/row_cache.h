/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A per-process cache of decoded SFrame rows, keyed by PC.
 */
#ifndef SFRAME_ROW_CACHE_H
#define SFRAME_ROW_CACHE_H

#include <linux/build_bug.h>
#include <linux/compiler.h>
#include <linux/hash.h>
#include <linux/types.h>

#include "sframe_decode.h"

#define SFRAME_ROW_CACHE_BITS 9

/*
 * The fast form of a row (struct sframe_rule, sframe_decode.h): the
 * common AMD64 rule, pre-reduced for the per-frame fast path (unwind.c).
 * Any other row (outermost, signal frame, a CFA loaded from memory or
 * based on another register, offsets beyond 16 bits) has no fast form
 * and is applied from the full row.
 *
 * The return address pc + 1 was read and is not the start of the
 * rt_sigreturn trampoline (unwind.c: the 1-in-16 text check for
 * 16-byte-aligned return addresses need not be redone on a hit).
 */
#define SFRAME_RULE_NOT_SIGRETURN 0x08
/*
 * No SFrame row covers pc: the registry had an entry around it (a "none"
 * entry of discovery, or a section without an FDE for it), so the
 * frame-pointer rule applies (unwind.c), without a registry lookup.
 * Never returned as a row by sframe_row_cache_lookup().
 */
#define SFRAME_RULE_UNCOVERED 0x10
/*
 * The row cache's flags above the decoder's (sframe_decode.h): a rule
 * from the index (sframe_row_cache_store_rule()) never reads as
 * uncovered, nor an uncovered entry as a rule.
 */
static_assert(!((SFRAME_RULE_NOT_SIGRETURN | SFRAME_RULE_UNCOVERED) &
		(SFRAME_RULE_FAST | SFRAME_RULE_CFA_FP | SFRAME_RULE_FP_SAVED)));

struct sframe_row_cache_entry {
	u32 seq; /* odd while being written */
	u32 gen;
	unsigned long pc;
	struct sframe_rule rule;
	struct sframe_row row;	/* read only for rules without a fast form */
};

struct sframe_row_cache {
	struct sframe_row_cache_entry e[1 << SFRAME_ROW_CACHE_BITS];
};

/* module parameter row_cache (row_cache.c) */
extern bool sframe_row_cache_enabled;

struct sframe_row_cache *sframe_row_cache_alloc(void);
void sframe_row_cache_free(struct sframe_row_cache *cache);

static inline struct sframe_row_cache_entry *
sframe_row_cache_slot(struct sframe_row_cache *cache, unsigned long pc)
{
	return &cache->e[hash_long(pc, SFRAME_ROW_CACHE_BITS)];
}

/*
 * The two halves of a probe, for the lookups that copy the rule (inline,
 * below) or the whole row (row_cache.c): the entry for pc if it holds
 * generation gen, with its sequence in *seq; then, after the copy,
 * whether no writer touched it meanwhile.
 */
static __always_inline struct sframe_row_cache_entry *
sframe_row_cache_probe(struct sframe_row_cache *cache, u32 gen,
		       unsigned long pc, u32 *seq)
{
	struct sframe_row_cache_entry *e = sframe_row_cache_slot(cache, pc);

	*seq = READ_ONCE(e->seq);
	if (*seq & 1)
		return NULL;
	smp_rmb();
	if (READ_ONCE(e->pc) != pc || READ_ONCE(e->gen) != gen)
		return NULL;
	return e;
}

static __always_inline bool
sframe_row_cache_unchanged(const struct sframe_row_cache_entry *e, u32 seq)
{
	smp_rmb();
	return READ_ONCE(e->seq) == seq;
}

/*
 * The pre-reduced rule cached for pc under generation gen, or false.  gen
 * is the registry's generation read before the row was looked up: any
 * change to the registry makes older entries misses.  Inline: it is on
 * the path of every frame, and copies 12 bytes where the full row is 36.
 * The caller tests sframe_row_cache_enabled, once a walk (unwind.c).
 */
static __always_inline bool
sframe_row_cache_lookup_rule(struct sframe_row_cache *cache, u32 gen,
			     unsigned long pc, struct sframe_rule *rule)
{
	u32 seq;
	struct sframe_row_cache_entry *e =
		sframe_row_cache_probe(cache, gen, pc, &seq);

	if (!e)
		return false;
	*rule = e->rule;
	return sframe_row_cache_unchanged(e, seq);
}

/*
 * The full row cached for pc under generation gen, or false (also for
 * an SFRAME_RULE_UNCOVERED entry, which has no row).
 */
bool sframe_row_cache_lookup(struct sframe_row_cache *cache, u32 gen,
			     unsigned long pc, struct sframe_row *row);

/*
 * Cache row for pc under gen; not_sigreturn: pc + 1 was checked and is
 * not the rt_sigreturn trampoline (SFRAME_RULE_NOT_SIGRETURN).
 */
void sframe_row_cache_store(struct sframe_row_cache *cache, u32 gen,
			    unsigned long pc, const struct sframe_row *row,
			    bool not_sigreturn);
/* Cache that no row covers pc under gen (SFRAME_RULE_UNCOVERED). */
void sframe_row_cache_store_uncovered(struct sframe_row_cache *cache,
				      u32 gen, unsigned long pc,
				      bool not_sigreturn);

/*
 * Cache the fast rule (SFRAME_RULE_FAST set) for pc under gen, with the
 * row it stands for; pc + 1 was checked and is not the trampoline.  The
 * rule by value, in registers: the caller's frame takes no address.
 */
void sframe_row_cache_store_rule(struct sframe_row_cache *cache, u32 gen,
				 unsigned long pc, struct sframe_rule rule);

#endif /* SFRAME_ROW_CACHE_H */
