// SPDX-License-Identifier: GPL-2.0
/*
 * Per-user accounting (see quota.h).
 *
 * One struct per uid that holds something now, in a small hash table; it
 * goes when its last reference does.  Charges are atomic compare-and-swap
 * loops, so a charge never takes a lock and never overshoots the limit,
 * however many tasks of one user race.  The table's lock is taken only to
 * find or create and to unhash, in process context or from an RCU
 * callback (the last reference of a supplied section), never in NMI.
 */
#include <linux/atomic.h>
#include <linux/cred.h>
#include <linux/hashtable.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/user_namespace.h>

#include "quota.h"

struct sframe_user {
	struct hlist_node node; /* in sframe_users, under sframe_users_lock */
	kuid_t uid;
	refcount_t ref;
	atomic64_t usage[SFRAME_QUOTA_NR];
	struct rcu_head rcu;
};

static DEFINE_HASHTABLE(sframe_users, 6);
static DEFINE_SPINLOCK(sframe_users_lock);

static struct sframe_user *sframe_user_find(kuid_t uid)
{
	struct sframe_user *user;

	hash_for_each_possible(sframe_users, user, node, __kuid_val(uid)) {
		if (uid_eq(user->uid, uid) && refcount_inc_not_zero(&user->ref))
			return user;
	}
	return NULL;
}

struct sframe_user *sframe_user_get(kuid_t uid)
{
	struct sframe_user *user, *fresh;
	unsigned long flags;

	spin_lock_irqsave(&sframe_users_lock, flags);
	user = sframe_user_find(uid);
	spin_unlock_irqrestore(&sframe_users_lock, flags);
	if (user)
		return user;

	fresh = kzalloc(sizeof(*fresh), GFP_KERNEL_ACCOUNT);
	if (!fresh)
		return NULL;
	fresh->uid = uid;
	refcount_set(&fresh->ref, 1);

	spin_lock_irqsave(&sframe_users_lock, flags);
	user = sframe_user_find(uid); /* created meanwhile? */
	if (!user) {
		hash_add(sframe_users, &fresh->node, __kuid_val(uid));
		user = fresh;
		fresh = NULL;
	}
	spin_unlock_irqrestore(&sframe_users_lock, flags);
	kfree(fresh);
	return user;
}

/*
 * Whom the caller's charges go to.  A user namespace lets its creator
 * act under many kuids (newuidmap maps its subordinate uids): charged by
 * kuid alone, each would get a bound of its own, and together they could
 * take the global total from everyone.  So a caller in a user namespace
 * is charged to the creator of the outermost namespace above it (its
 * owner, a kuid of the initial namespace), however deep it nests, unless
 * that creator is root: namespaces made by root (containers) map uids
 * root chose to give, and their users keep a bound each, as on the host.
 * The walk up is bounded by the kernel's nesting limit (32 levels).
 */
kuid_t sframe_accountable_uid(void)
{
	const struct user_namespace *ns = current_user_ns();
	kuid_t owner = GLOBAL_ROOT_UID;

	while (ns != &init_user_ns) {
		owner = ns->owner;
		ns = ns->parent;
	}
	if (!uid_eq(owner, GLOBAL_ROOT_UID))
		return owner;
	return current_uid();
}

struct sframe_user *sframe_user_current(void)
{
	return sframe_user_get(sframe_accountable_uid());
}

void sframe_user_put(struct sframe_user *user)
{
	unsigned long flags;

	if (!user)
		return;
	/* Unhashed under the lock, so a finder never revives it. */
	if (!refcount_dec_and_lock_irqsave(&user->ref, &sframe_users_lock,
					   &flags))
		return;
	hash_del(&user->node);
	spin_unlock_irqrestore(&sframe_users_lock, flags);
	kfree_rcu(user, rcu);
}

int sframe_user_charge(struct sframe_user *user, enum sframe_quota_res res,
		       u64 n, u64 limit)
{
	return sframe_charge_within(&user->usage[res], n, limit);
}

void sframe_user_uncharge(struct sframe_user *user, enum sframe_quota_res res,
			  u64 n)
{
	atomic64_sub(n, &user->usage[res]);
}

u64 sframe_user_usage(const struct sframe_user *user,
		      enum sframe_quota_res res)
{
	return atomic64_read(&user->usage[res]);
}

void sframe_quota_exit(void)
{
	/* Every user struct went with its last reference; wait for kfree_rcu. */
	rcu_barrier();
}
