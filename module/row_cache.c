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
 * Correctness: an entry carries the registry generation it was decoded
 * under; registering or unregistering a section bumps the generation, so
 * nothing decoded from a section survives its removal.  A process that
 * rewrites its own registered .sframe in place may get its old rows back:
 * that only affects its own unwinds, as the header validated at
 * registration does.
 *
 * Concurrency: the threads of a process share the cache.  Each entry is a
 * tiny seqlock whose writer only ever trylocks: a reader never waits, a
 * writer that loses a race simply does not cache, and a torn read is
 * detected by the sequence and treated as a miss.
 */
#include <linux/hash.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>

#include "row_cache.h"

#define SFRAME_ROW_CACHE_BITS 9

/* Off: every frame is decoded from its section (to measure, to debug). */
static bool row_cache = true;
module_param(row_cache, bool, 0644);
MODULE_PARM_DESC(row_cache, "Cache decoded SFrame rows per process (default: on)");

struct sframe_row_cache_entry {
	u32 seq; /* odd while being written */
	u32 gen;
	unsigned long pc;
	struct sframe_row row;
};

struct sframe_row_cache {
	struct sframe_row_cache_entry e[1 << SFRAME_ROW_CACHE_BITS];
};

struct sframe_row_cache *sframe_row_cache_alloc(void)
{
	return kvzalloc(sizeof(struct sframe_row_cache), GFP_KERNEL_ACCOUNT);
}

void sframe_row_cache_free(struct sframe_row_cache *cache)
{
	kvfree(cache);
}

static struct sframe_row_cache_entry *
sframe_row_cache_slot(struct sframe_row_cache *cache, unsigned long pc)
{
	return &cache->e[hash_long(pc, SFRAME_ROW_CACHE_BITS)];
}

bool sframe_row_cache_lookup(struct sframe_row_cache *cache, u32 gen,
			     unsigned long pc, struct sframe_row *row)
{
	struct sframe_row_cache_entry *e = sframe_row_cache_slot(cache, pc);
	u32 seq = READ_ONCE(e->seq);

	if ((seq & 1) || !READ_ONCE(row_cache))
		return false;
	smp_rmb();
	if (READ_ONCE(e->pc) != pc || READ_ONCE(e->gen) != gen)
		return false;
	*row = e->row;
	smp_rmb();
	return READ_ONCE(e->seq) == seq;
}

void sframe_row_cache_store(struct sframe_row_cache *cache, u32 gen,
			    unsigned long pc, const struct sframe_row *row)
{
	struct sframe_row_cache_entry *e = sframe_row_cache_slot(cache, pc);
	u32 seq = READ_ONCE(e->seq);

	if (!READ_ONCE(row_cache))
		return;
	if ((seq & 1) || cmpxchg(&e->seq, seq, seq + 1) != seq)
		return;
	smp_wmb();
	WRITE_ONCE(e->pc, pc);
	WRITE_ONCE(e->gen, gen);
	e->row = *row;
	smp_wmb();
	WRITE_ONCE(e->seq, seq + 2);
}
