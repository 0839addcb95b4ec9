/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Deferred user unwinding, in the shape of upstream's
 * kernel/unwind/deferred.c: a consumer has a work (its callback), asks for
 * the user stack of current's kernel entry from any context, NMI included,
 * and gets it back, with the entry's cookie, when the task returns to user
 * space, where page faults are allowed.  Every request made during one
 * kernel entry shares one walk and one cookie.
 *
 * Unlike upstream's request, ours carries an item of the consumer's (its
 * sample): upstream's perf writes the kernel part of a sample at once and
 * leaves the stitching to user space by cookie, while this module's
 * readers get whole records, so each item comes back with the stack.  The
 * layer knows nothing of an item but the fields below.
 */
#ifndef SFRAME_DEFERRED_H
#define SFRAME_DEFERRED_H

#include <linux/llist.h>
#include <linux/types.h>

#include "unwind.h"

struct sframe_unwind_work;

/* What a consumer hangs on a request; embed it in the consumer's own. */
struct sframe_unwind_item {
	struct llist_node node;
	struct sframe_unwind_work *work;
	u64 time;          /* when taken (mono fast ns), set by the consumer */
	/* Set by sframe_unwind_deferred_request(): */
	u64 cookie;        /* names the kernel entry, as upstream's */
	u64 self_exec_id;  /* the task's, at request time */
	/*
	 * The task's objective credentials (real_cred) at request time,
	 * compared (never dereferenced) with them when the stack is taken.
	 */
	const void *cred;
};

/*
 * An item is done: the user stack of its entry is in stacks (NULL when it
 * has none; flags say why: SFRAME_SAMPLE_F_NO_USER with _EXITED, _EXECED or
 * _TIMEOUT, or with none of them when the module unloads).
 * SFRAME_SAMPLE_F_NOT_DUMPABLE in flags: the stack is of an image the
 * item's reader may not be allowed to see (the task's credentials changed
 * since the request, or it is not dumpable); the consumer decides.
 * Process or IRQ context, never NMI; on PREEMPT_RT atomic too (a hard
 * irq_work), so it must not take a sleeping lock (compat.h).
 */
typedef void (*sframe_unwind_callback_t)(struct sframe_unwind_item *item,
					 u32 flags,
					 const struct sframe_user_stacks *stacks);

struct sframe_unwind_work {
	sframe_unwind_callback_t func;
	/* The walk it wants: max_frames << 32 | methods (bit f for flags f). */
	u64 walk;
};

/* At most this many consumers (the sessions, and perf's own callchains). */
#define SFRAME_UNWIND_MAX_WORKS 2

/* Register work (module init, before any request); -ENOSPC past the max. */
int sframe_unwind_deferred_init(struct sframe_unwind_work *work,
				sframe_unwind_callback_t func);
/*
 * The longest user walk work wants and its methods, for the walks from now
 * on: each entry is walked once per method any work uses, as long as the
 * longest; the consumer's writers serialise.
 */
void sframe_unwind_deferred_set_walk(struct sframe_unwind_work *work,
				     u32 max_frames, u32 methods);
/* Allocate the request pools; before the first request. */
int sframe_unwind_deferred_prepare(void);

/*
 * Hang item on current's pending entry, or on a new one whose walk is
 * queued for the task's return to user space.  Any context, NMI included:
 * takes no lock, does not sleep or fault.  The caller has checked that
 * current has a 64-bit user stack (not a kernel thread, not exiting).
 * Returns 0, or -EBUSY when no request is free (the item is not queued).
 */
int sframe_unwind_deferred_request(struct sframe_unwind_work *work,
				   struct sframe_unwind_item *item);

/* A cookie for a stack taken at once, outside a request (same counter). */
u64 sframe_unwind_new_cookie(void);

/*
 * Close the requests older than max_age_ns (their tasks are blocked or busy
 * in the kernel): their items come back without a stack, flags
 * SFRAME_SAMPLE_F_TIMEOUT, and their walks are cancelled.  Task context.
 * Returns the items handed back; *pending: whether requests remain.
 */
u32 sframe_unwind_deferred_expire(u64 max_age_ns, bool *pending);

/*
 * Stop: no request comes any more (every consumer's hook is gone).
 * Cancels or waits for every pending walk, so no task_work or irq_work of
 * this layer points into the module once this returns.
 */
void sframe_unwind_deferred_exit(void);

#endif /* SFRAME_DEFERRED_H */
