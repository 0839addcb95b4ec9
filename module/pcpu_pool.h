/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Per-CPU free lists of preallocated objects, for the sample path: nothing
 * may be allocated in NMI.  deferred.c keeps its requests in them and
 * sample.c its samples.
 *
 * A pool is popped only on its own CPU, and a pop in an NMI that
 * interrupted a pop on the same CPU fails (the caller drops its sample and
 * counts it) rather than risk the llist ABA problem.  Anyone may push, from
 * any context, back onto the pool of the CPU the object came from.
 *
 * Each user holds at most half of each of a CPU's pools (a share): a user
 * whose tasks stay in the kernel after their samples (a system call that
 * blocks, or that runs long) holds samples and requests until they time
 * out, and without a share could keep a CPU's pools empty so that every
 * other user's samples there would be dropped.  Users are counted in
 * buckets of their hashed uid (sframe_accountable_uid(): subordinate uids
 * count as their owner's), which NMI can reach without a lock: two users in
 * one bucket share one share, which leaves the other half of the pool to
 * everyone else all the same.
 */
#ifndef SFRAME_PCPU_POOL_H
#define SFRAME_PCPU_POOL_H

#include <linux/atomic.h>
#include <linux/hash.h>
#include <linux/llist.h>
#include <linux/percpu.h>

#include "quota.h"

struct sframe_pool {
	struct llist_head free;
	int busy;                   /* a pop is in progress on this CPU */
};

static inline struct llist_node *
sframe_pool_pop(struct sframe_pool __percpu *pools)
{
	struct sframe_pool *pool = this_cpu_ptr(pools);
	struct llist_node *node = NULL;

	if (this_cpu_inc_return(pools->busy) == 1)
		node = llist_del_first(&pool->free);
	this_cpu_dec(pools->busy);
	return node;
}

/* Any CPU, any context: back to the pool of the CPU it came from. */
static inline void sframe_pool_push(struct sframe_pool __percpu *pools,
				    u32 cpu, struct llist_node *node)
{
	llist_add(node, &per_cpu_ptr(pools, cpu)->free);
}

#define SFRAME_SHARE_BITS 6

/* The current user's share bucket. */
static inline u32 sframe_share_bucket(void)
{
	return hash_32(__kuid_val(sframe_accountable_uid()), SFRAME_SHARE_BITS);
}

/* One more of a CPU's count, if it stays within share. */
static inline bool sframe_share_take(atomic_t *count, int share)
{
	if (atomic_inc_return(count) <= share)
		return true;
	atomic_dec(count);
	return false;
}

#endif /* SFRAME_PCPU_POOL_H */
