/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The file store: SFrame sections kept per file (inode), supplied by a
 * privileged caller (SFRAME_IOC_FILE_SUPPLY) and shared by every mapping
 * of the file in every process (registry.c attaches them, discovery.c
 * asks).  One kernel copy per file.
 */
#ifndef SFRAME_FILE_STORE_H
#define SFRAME_FILE_STORE_H

#include <linux/atomic.h>
#include <linux/fs.h>
#include <linux/fsnotify_backend.h>

#include "elf_file.h"
#include "sframe_decode.h"
#include "sframe_unwind.h"

struct sframe_fde_index;

/*
 * One file's section.  Everything but the mark, the links and dead is
 * set before the entry is published and never changes: walks read it
 * under RCU or a reference.
 */
struct sframe_file {
	struct fsnotify_mark mark;  /* on the inode: holds it, tells writes */
	struct hlist_node hnode;    /* by inode, under sframe_files_lock */
	struct list_head node;      /* in id order, under sframe_files_lock */
	struct list_head dead_node; /* to the reaper, under sframe_files_lock */
	refcount_t ref;
	/*
	 * Dropped from the store (written, deleted, replaced, removed):
	 * walks no longer use entries attached to it.  Set once.
	 */
	bool dead;
	bool hashed;                /* under sframe_files_lock */
	u64 id;                     /* never reused while loaded */
	struct inode *inode;        /* the key; held by the mark */
	u64 dev, ino, file_size;    /* as at supply, for listing */
	struct timespec64 ctime;
	struct sframe_elf_text text;   /* the file's executable segments */
	struct sframe_section sec;     /* validated; sec_addr: at bias 0 */
	struct sframe_fde_index *index; /* or NULL: lookups search */
	const struct sframe_index *table;
	struct sframe_validation found;
	/* found.covered_bytes by executable segment (text.loads[i]) */
	u64 load_covered[SFRAME_FILE_MAX_LOADS];
	atomic64_t attaches;
	struct rcu_head rcu;
	u64 len;
	u8 data[];
};

int sframe_files_init(void);
/* Drop every entry; called at module exit, after the registries. */
void sframe_files_exit(void);

/*
 * Bumped on every change of the store (an entry added or dropped): a
 * process's "none" entry made under an older one is stale, and a walk's
 * cached rows (row_cache.c) are keyed by it too.
 */
extern atomic64_t sframe_files_gen;

static inline u64 sframe_files_generation(void)
{
	return atomic64_read_acquire(&sframe_files_gen);
}

/* The live entry of inode, referenced, or NULL.  Any context but NMI. */
struct sframe_file *sframe_files_find(struct inode *inode);
struct sframe_file *sframe_file_get(struct sframe_file *f);
/* Any context but NMI. */
void sframe_file_put(struct sframe_file *f);

static inline bool sframe_file_dead(const struct sframe_file *f)
{
	return READ_ONCE(f->dead);
}

/*
 * SFRAME_IOC_FILE_SUPPLY for file: len bytes at data (the caller's
 * memory), counted as loaded at sframe_vaddr.  Errors: see the uapi.
 */
int sframe_file_supply(struct file *file, const void __user *data, u64 len,
		       u64 sframe_vaddr, u32 flags, u64 *id);
/* SFRAME_IOC_FILE_REMOVE: entry id, or with id 0 the entry of inode. */
int sframe_file_remove(u64 id, struct inode *inode);
/* Entries now (changes at any time). */
u32 sframe_files_count(void);
/* Up to max entries into out (may be NULL with max 0); all in *nr. */
int sframe_file_list(struct sframe_file_info *out, u32 max, u32 *nr);
void sframe_files_stats(struct sframe_stats *st);
/* A mapping was covered by f (registry.c). */
void sframe_file_attached(struct sframe_file *f);

#endif /* SFRAME_FILE_STORE_H */
