/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The per-process registry of SFrame sections, keyed by the text range
 * each section describes.
 */
#ifndef SFRAME_REGISTRY_H
#define SFRAME_REGISTRY_H

#include <linux/mm_types.h>

#include "sframe_decode.h"
#include "sframe_unwind.h"

struct inode;
struct sframe_mm;
struct sframe_row_cache;

struct sframe_section_info;

/* A copy of one registered section, taken for one lookup. */
struct sframe_range {
	/*
	 * The entry's identity: a number no other entry ever had (a 64-bit
	 * counter, given when the entry goes into a registry).  A copy
	 * names the entry it came from by it, never by its text, address
	 * or source, which a new entry for the same text can repeat with
	 * another section behind them.
	 */
	u64 id;
	unsigned long text_start; /* [text_start, text_end) */
	unsigned long text_end;
	u64 sframe_addr;
	struct sframe_section sec; /* validated header; sec.src unset */
	u64 covered_bytes;         /* text bytes its FDEs give rows for */
	/*
	 * SFRAME_SOURCE_*: NONE says discovery found no .sframe for this
	 * mapping; REGISTERED and SUPPLIED replace DISCOVERED and NONE; a
	 * SUPPLIED section is read from the kernel's copy, through
	 * sframe_registry_find_row().
	 */
	u8 source;
	/* FDEs skipped: above SFRAME_MAX_FRES_PER_FDE FREs, so no rows. */
	u32 fdes_skipped;
};

static inline bool sframe_range_covers(const struct sframe_range *range)
{
	return range->source != SFRAME_SOURCE_NONE;
}

int sframe_registry_init(void);
/* Forget every process's registry; called at module exit. */
void sframe_registry_exit(void);

/*
 * Validate and add a section in mm's memory for mm (the caller's).
 * source: SFRAME_SOURCE_REGISTERED or _DISCOVERED.  inode: the file whose
 * mapping discovery found the section in (its text must still be that
 * file's when the entry is inserted), or NULL.  Errors: see uapi.
 */
int sframe_register_section(struct mm_struct *mm, u64 sframe_addr,
			    u64 sframe_len, u64 text_start, u64 text_len,
			    u8 source, const struct inode *inode);
/*
 * The bytes of a supplied section, reference counted.  Allocation charges
 * len to the caller's user and to the global total (once per blob):
 * ERR_PTR(-EDQUOT) past a bound, (-ENOMEM).
 */
struct sframe_blob;
struct sframe_blob *sframe_blob_alloc(u64 len);
/* The caller's per-user bound on supplied bytes (U64_MAX: exempt). */
u64 sframe_supply_user_limit(void);
void *sframe_blob_data(struct sframe_blob *blob);
void sframe_blob_put(struct sframe_blob *blob);
/*
 * Validate and add a section given by value (blob: its bytes; the caller's
 * reference passes to the registry, and is dropped on error) for mm, which
 * may be another process's.  Errors: see SFRAME_IOC_SUPPLY.
 */
int sframe_supply_section(struct mm_struct *mm, struct sframe_blob *blob,
			  u64 sframe_len, u64 sframe_addr, u64 text_start,
			  u64 text_len);
int sframe_unregister_section(struct mm_struct *mm, u64 text_start);
/*
 * Remember that pc, in the executable mapping [start, end), has no
 * usable .sframe (discovery): a "none" entry for the free range around pc
 * within the mapping (the mapping less the entries already in it).  0 if
 * recorded or pc is covered by now; else an error.  files_gen: the file
 * store's generation, read before discovery asked the store.
 */
int sframe_register_none(struct mm_struct *mm, unsigned long pc,
			 unsigned long start, unsigned long end, u64 files_gen);
/*
 * Cover the executable mapping of f's file that starts at map_start with
 * file offset map_offset, by reference to the file store's section.
 * Process context.  0, -EEXIST (a section covers part of the text), or
 * an error as for a registration.
 */
struct sframe_file;
int sframe_register_file(struct mm_struct *mm, struct sframe_file *f,
			 unsigned long map_start, unsigned long map_offset);
/*
 * Erase the entry at pc if it is stale: attached to a file the store has
 * dropped, or a "none" entry older than the store's last change.
 */
void sframe_registry_drop_stale(struct mm_struct *mm, unsigned long pc);

/*
 * The registry of mm, or NULL.  The result stays valid while mm has users
 * and the module is held (an open file, a pending work item): only the exit
 * of mm and the module's exit free it.
 */
struct sframe_mm *sframe_mm_find(struct mm_struct *mm);
/*
 * sframe_mm_find() for a walk's start, in one call on every sample: with
 * the registry's row cache in *rows and its generation
 * (sframe_mm_generation()) in *gen, read after the registry was found;
 * NULL and 0 without a registry.
 */
struct sframe_mm *sframe_mm_find_for_walk(struct mm_struct *mm,
					  struct sframe_row_cache **rows,
					  u32 *gen);
/*
 * Whether the walk may read smm's sections here: false in an interrupt
 * or NMI of the task that is changing them (registry.c says why).
 */
bool sframe_registry_readable(const struct sframe_mm *smm);
/*
 * Copy the section covering pc into *range; false if none covers it.  With
 * *entry, its entry in the registry (NULL if none), and in *gen the
 * generation it was found under, for sframe_registry_find_rule().
 */
struct sframe_entry;
bool sframe_registry_lookup(struct sframe_mm *smm, unsigned long pc,
			    struct sframe_range *range,
			    struct sframe_entry **entry, u64 *gen);
/*
 * The row for pc from the section range describes (as
 * sframe_registry_lookup() copied it): found in the section's FDE index
 * where it has one, else by searching the section; a supplied section is
 * decoded under RCU from the kernel's copy, so a racing munmap cannot
 * free it meanwhile, with the header of the entry found there and every
 * read bounded by that copy's own length.  -ENOENT if no FDE covers pc;
 * -ESTALE if range's entry is no longer in the registry (unregistered,
 * replaced, unmapped): the caller looks the PC up again.  Spends *budget as sframe_find_row_budget() does
 * (-SFRAME_EBUDGET when it runs out), which bounds the time spent under
 * rcu_read_lock().  A section in user memory is read outside it (a read
 * may fault and sleep).
 */
int sframe_registry_find_row(struct sframe_mm *smm,
			     const struct sframe_range *range,
			     unsigned long pc, struct sframe_row *row,
			     u32 *budget);
/*
 * The row for pc as a fast rule (sframe_index_find_rule()) from the index
 * of entry, as sframe_registry_lookup() gave it with gen, without looking
 * entry up again: usable while the registry's generation is still gen,
 * which is checked here (see registry.c for why that keeps entry alive).
 * Any context the walk runs in (RCU only, no sleeping).  Returns the rule,
 * or one with flags 0 and *budget untouched: the registry changed, the
 * entry has no index, or the row has no fast form; the caller then looks
 * the row up in full (sframe_registry_find_row()).  pc lies in entry's
 * range (the caller's copy of it says so).  By value, in two registers:
 * the caller's frame takes no address, so needs no stack canary.
 */
struct sframe_rule sframe_registry_find_rule(struct sframe_mm *smm,
					     struct sframe_entry *entry,
					     u64 gen, unsigned long pc,
					     u32 *budget);
/*
 * Describe mm's entries, in text order: up to max into out, and the count
 * of all in *nr.
 */
int sframe_registry_list(struct mm_struct *mm, struct sframe_section_info *out,
			 u32 max, u32 *nr);
/*
 * The sections of mm that a program registered or a profiler supplied
 * (discovery finds the rest again by itself), as they are now, for a fork
 * child.  Any context where gfp may allocate (not atomic context on
 * PREEMPT_RT, whatever gfp says).  NULL when there are none, or with
 * *failed set when there was no memory.
 */
struct sframe_snapshot;
/* Whether mm has such sections now.  Any context but NMI; allocates nothing. */
bool sframe_snapshot_wanted(struct mm_struct *mm);
struct sframe_snapshot *sframe_snapshot_take(struct mm_struct *mm, gfp_t gfp,
					     bool *failed);
/* Add the snapshot's sections to mm (the child's, in the child); frees it. */
int sframe_snapshot_apply(struct mm_struct *mm, struct sframe_snapshot *snap);
void sframe_snapshot_free(struct sframe_snapshot *snap);
/* Bytes held by supplied sections, all processes. */
u64 sframe_supplied_bytes(void);
unsigned int sframe_mm_nr_sections(struct sframe_mm *smm);
/* The generation of smm's sections, for sframe_row_cache entries. */
u32 sframe_mm_generation(struct sframe_mm *smm);

#endif /* SFRAME_REGISTRY_H */
