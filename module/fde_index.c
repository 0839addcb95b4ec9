// SPDX-License-Identifier: GPL-2.0
/*
 * FDE indexes of registered sections (see fde_index.h).
 *
 * A lookup without an index binary-searches the FDE table in user memory
 * (a dozen user reads for a few thousand functions, each a fault-checked
 * access) and then scans the function's FREs there.  The index holds the
 * decoded FDEs and their rows in kernel memory (16 bytes per FDE, 8 per
 * row: about 1.6 times the section), so a lookup reads nothing of the
 * section, but for the FREs of the few FDEs whose rows it does not keep.
 * Any local user can make the module build one (by
 * registering a section, or by running a program that discovery finds),
 * so its bytes are charged to the user, within index_max_user_kb, and to
 * the memory cgroup of the task that made it.
 */
#include <linux/moduleparam.h>
#include <linux/overflow.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/slab.h>
#include <linux/mm.h>

#include "fde_index.h"
#include "quota.h"

/*
 * Not enough for the largest sections (64 MiB of small FREs make about
 * 260 MiB of rows), which are then searched; enough for the sections of
 * a user's programs, at 1.6 times their size (a large program's .sframe
 * is a few MiB).
 */
static unsigned int index_max_user_kb = 64 << 10;
module_param(index_max_user_kb, uint, 0644);
MODULE_PARM_DESC(index_max_user_kb,
		 "Bytes (KiB) of FDE indexes one user (real uid) may have made the module hold; past it, sections are searched without one");

struct sframe_fde_index {
	refcount_t ref;
	struct sframe_user *user; /* charged bytes; referenced */
	u64 bytes;
	struct rcu_head rcu;
	u64 table[];		  /* struct sframe_index, 8-byte aligned */
};

/*
 * An index for sec, charged, not yet built: NULL when none is to be made.
 * *size: the bytes sframe_validate_index() may fill.
 */
static struct sframe_fde_index *sframe_fde_index_alloc(const struct sframe_section *sec,
						       u64 *size)
{
	struct sframe_fde_index *fi;
	struct sframe_user *user;
	u64 bytes;
	int ret;

	if (sframe_index_size(sec, size))
		return NULL;
	bytes = size_add(sizeof(*fi), *size);
	user = sframe_user_current();
	if (!user)
		return NULL;
	/*
	 * No exemption (perf's CAP_IPC_LOCK, as for supplied sections): an
	 * index only makes lookups faster, and past the bound the section
	 * is searched instead.
	 */
	ret = sframe_user_charge(user, SFRAME_QUOTA_INDEX_BYTES, bytes,
				 (u64)READ_ONCE(index_max_user_kb) << 10);
	if (ret)
		goto put_user;
	fi = kvmalloc(bytes, GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!fi)
		goto uncharge;
	refcount_set(&fi->ref, 1);
	fi->user = user;
	fi->bytes = bytes;
	return fi;

uncharge:
	sframe_user_uncharge(user, SFRAME_QUOTA_INDEX_BYTES, bytes);
put_user:
	sframe_user_put(user);
	return NULL;
}

int sframe_fde_index_validate(const struct sframe_section *sec, u64 text_start,
			      u64 text_len, struct sframe_fde_index **index,
			      struct sframe_validation *res)
{
	struct sframe_fde_index *fi;
	u64 size = 0;
	int ret;

	*index = NULL;
	fi = sframe_fde_index_alloc(sec, &size);
	ret = sframe_validate_report(sec, text_start, text_len,
				     fi ? fi->table : NULL, size, res);
	if (ret) {
		sframe_fde_index_put(fi);
		return ret;
	}
	*index = fi;
	return 0;
}

struct sframe_fde_index *sframe_fde_index_get(struct sframe_fde_index *fi)
{
	return fi && refcount_inc_not_zero(&fi->ref) ? fi : NULL;
}

void sframe_fde_index_put(struct sframe_fde_index *fi)
{
	if (!fi || !refcount_dec_and_test(&fi->ref))
		return;
	sframe_user_uncharge(fi->user, SFRAME_QUOTA_INDEX_BYTES, fi->bytes);
	sframe_user_put(fi->user);
	kvfree_rcu(fi, rcu);
}

const struct sframe_index *sframe_fde_index_table(const struct sframe_fde_index *fi)
{
	return (const struct sframe_index *)fi->table;
}
