/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Per-user accounting of what a user can make the module hold: supplied
 * sections, sessions and their buffers.  The device is open to every local
 * user, so each such resource is bounded per user (by real uid, as perf
 * charges its ring buffers to the user in perf_event_mlock_kb) on top of
 * any global bound.
 */
#ifndef SFRAME_QUOTA_H
#define SFRAME_QUOTA_H

#include <linux/atomic.h>
#include <linux/errno.h>
#include <linux/types.h>
#include <linux/uidgid.h>

enum sframe_quota_res {
	SFRAME_QUOTA_SUPPLIED_BYTES, /* kernel copies of supplied sections */
	SFRAME_QUOTA_SESSIONS,       /* open sessions */
	SFRAME_QUOTA_SESSION_BYTES,  /* their buffers */
	SFRAME_QUOTA_INDEX_BYTES,    /* FDE indexes of sections (fde_index.c) */
	SFRAME_QUOTA_NR,
};

struct sframe_user;

/*
 * The accounting of uid, created on first use, with a reference.  Process
 * context.  NULL when out of memory.
 */
struct sframe_user *sframe_user_get(kuid_t uid);
/*
 * Whom current's charges go to: its real uid, or in a user namespace made
 * by another user than root, that user (quota.c).  Any context, NMI
 * included: it reads only current's own credentials.
 */
kuid_t sframe_accountable_uid(void);
/* The accounting of sframe_accountable_uid(), with a reference. */
struct sframe_user *sframe_user_current(void);
/* Drop a reference.  Any context but NMI. */
void sframe_user_put(struct sframe_user *user);
/*
 * Count n more of res for user if its usage stays at or below limit:
 * 0, or -EDQUOT (nothing counted).  Any context but NMI.
 */
int sframe_user_charge(struct sframe_user *user, enum sframe_quota_res res,
		       u64 n, u64 limit);
void sframe_user_uncharge(struct sframe_user *user, enum sframe_quota_res res,
			  u64 n);
u64 sframe_user_usage(const struct sframe_user *user,
		      enum sframe_quota_res res);

/*
 * len more in *total if it stays at or below max: 0, or -EDQUOT.  A
 * cmpxchg loop, so racing chargers never see a transient excess.
 */
static inline int sframe_charge_within(atomic64_t *total, u64 len, u64 max)
{
	s64 old = atomic64_read(total);

	do {
		if ((u64)old > max || len > max - (u64)old)
			return -EDQUOT;
	} while (!atomic64_try_cmpxchg(total, &old, old + len));
	return 0;
}

/* Module exit: every reference has been dropped. */
void sframe_quota_exit(void);

#endif /* SFRAME_QUOTA_H */
