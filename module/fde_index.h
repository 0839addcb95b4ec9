/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel's index of a registered section's FDEs and rows (sframe_index
 * in sframe_decode.h), built once at registration so that a lookup does
 * not search the section in user memory.  Reference counted: the
 * entries of a process and of its fork children share one.
 */
#ifndef SFRAME_FDE_INDEX_H
#define SFRAME_FDE_INDEX_H

#include "sframe_decode.h"

struct sframe_fde_index;

/*
 * Validate sec (sframe_validate(), sec->src set) for the text
 * [text_start, text_start + text_len), building its FDE index on the way
 * into *index, charged to the caller's memory cgroup and, within
 * index_max_user_kb, to its user.  Process context.  Returns what the
 * validation returns; on success *index is the index, or NULL when none
 * was made (the user's bound, no memory, or a section the index cannot
 * describe): lookups then search the section, as correct and slower.  On
 * success *res says what the validation found (sframe_validate_report()):
 * FDEs skipped for too many FREs, text covered.
 */
int sframe_fde_index_validate(const struct sframe_section *sec, u64 text_start,
			      u64 text_len, struct sframe_fde_index **index,
			      struct sframe_validation *res);

/* Another reference, or NULL if the last one is gone (RCU readers). */
struct sframe_fde_index *sframe_fde_index_get(struct sframe_fde_index *fi);

/*
 * Drop a reference (NULL: nothing).  Any context but NMI.  The charge goes
 * with the last reference; the memory after a grace period, since lookups
 * under RCU may still read it.
 */
void sframe_fde_index_put(struct sframe_fde_index *fi);

/* The decoder's index, for sframe_index_find_row(); under RCU or a ref. */
const struct sframe_index *sframe_fde_index_table(const struct sframe_fde_index *fi);

#endif /* SFRAME_FDE_INDEX_H */
