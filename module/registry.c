// SPDX-License-Identifier: GPL-2.0
/*
 * The per-process registry of SFrame sections.
 *
 * Each process (mm) that registers a section gets a struct sframe_mm: a
 * maple tree from text ranges to sections, in RCU mode so the unwinder can
 * look a PC up without a lock.  Its lifetime follows the mm through an MMU
 * notifier: ->release runs when the mm's address space is torn down (exit,
 * exec), which is exactly when its sections stop meaning anything.  The
 * stock kernel has no hook in mm teardown a module could use otherwise.
 *
 * Registered and discovered sections stay in user memory: an entry holds
 * the address and the validated header only, so a registration costs about
 * a hundred bytes of kernel memory, charged to the caller's memory cgroup.
 * A supplied section (SFRAME_IOC_SUPPLY: by value, for any process the
 * caller may ptrace) is a copy in kernel memory, charged to the supplier
 * and bounded per process and in total.  A file's section from the file
 * store (file_store.c) is attached by reference: the entry holds the
 * store's entry, whose bytes, header and index describe the file at load
 * bias 0, and the entry's bias turns a PC of this process into the file's
 * address before any lookup in them.
 */
#include <linux/capability.h>
#include <linux/hashtable.h>
#include <linux/maple_tree.h>
#include <linux/mmu_notifier.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/wait_bit.h>

#include "compat.h"
#include "fde_index.h"
#include "file_store.h"
#include "quota.h"
#include "registry.h"
#include "row_cache.h"
#include "sframe_source_user.h"
#include "sframe_unwind.h"
#include "stats.h"

/*
 * The bytes of a supplied section.  Shared by the entries of a process and
 * of its fork children (each entry holds a reference), so a fork copies
 * no section.  Charged once, at creation, to the supplier's user and to
 * the global total; uncharged when the last reference goes.
 */
struct sframe_blob {
	refcount_t ref;
	u64 len;
	struct sframe_user *user; /* charged len; referenced */
	struct rcu_head rcu;
	u8 data[];
};

struct sframe_entry {
	struct sframe_range range;
	struct sframe_blob *blob; /* SFRAME_SOURCE_SUPPLIED: the section */
	/*
	 * SFRAME_SOURCE_FILE: the store's entry (referenced), whose bytes
	 * and index are read at pc - bias; range.sec is its header.
	 */
	struct sframe_file *file;
	u64 bias;
	/*
	 * SFRAME_SOURCE_NONE: the file store's generation when discovery
	 * found nothing for the mapping; under a newer one the store may
	 * have the file, so the entry is stale (sframe_entry_live()).
	 */
	u64 files_gen;
	struct sframe_fde_index *index; /* or NULL: lookups search */
	/*
	 * index's table, set once before the entry is inserted: lookups
	 * (sframe_registry_find_rule(), sframe_registry_find_row()) read it
	 * without a call into fde_index.c.
	 */
	const struct sframe_index *table;
	/*
	 * Its text was unmapped where we could not sleep to erase it (the OOM
	 * reaper): lookups skip it, the next writer under the lock erases it.
	 */
	bool dead;
	struct rcu_head rcu;
};

static unsigned int supply_max_process_kb = SFRAME_SUPPLY_MAX_PER_PROCESS >> 10;
module_param(supply_max_process_kb, uint, 0644);
MODULE_PARM_DESC(supply_max_process_kb,
		 "Bytes (KiB) of supplied sections one process may hold (at most the uapi's bound)");
static unsigned int supply_max_total_kb = SFRAME_SUPPLY_MAX_TOTAL >> 10;
module_param(supply_max_total_kb, uint, 0644);
MODULE_PARM_DESC(supply_max_total_kb,
		 "Bytes (KiB) of supplied sections all processes may hold (at most the uapi's bound)");
static unsigned int supply_max_user_kb = SFRAME_SUPPLY_MAX_PER_USER >> 10;
module_param(supply_max_user_kb, uint, 0644);
MODULE_PARM_DESC(supply_max_user_kb,
		 "Bytes (KiB) of supplied sections one user (real uid) may have made the module hold, CAP_IPC_LOCK exempt (at most the uapi's bound)");

/*
 * Entry identities (sframe_range.id): 64 bits, one per insertion, never
 * reused while the module is loaded.
 */
static atomic64_t sframe_entry_seq = ATOMIC64_INIT(0);

/* Bytes held by supplied sections, all processes: each blob once. */
static atomic64_t sframe_supplied_total = ATOMIC64_INIT(0);

u64 sframe_supplied_bytes(void)
{
	return atomic64_read(&sframe_supplied_total);
}

static u64 sframe_supply_max_user(void)
{
	return min_t(u64, (u64)READ_ONCE(supply_max_user_kb) << 10,
		     SFRAME_SUPPLY_MAX_PER_USER);
}

u64 sframe_supply_user_limit(void)
{
	/* As perf exempts CAP_IPC_LOCK from perf_event_mlock_kb. */
	if (ns_capable_noaudit(&init_user_ns, CAP_IPC_LOCK))
		return U64_MAX;
	return sframe_supply_max_user();
}

/* len more bytes in all, if they stay within the global bound. */
static int sframe_charge_total(u64 len)
{
	u64 max_total = min_t(u64, (u64)READ_ONCE(supply_max_total_kb) << 10,
			      SFRAME_SUPPLY_MAX_TOTAL);

	return sframe_charge_within(&sframe_supplied_total, len, max_total);
}

struct sframe_blob *sframe_blob_alloc(u64 len)
{
	struct sframe_user *user = sframe_user_current();
	struct sframe_blob *blob;
	int ret;

	if (!user)
		return ERR_PTR(-ENOMEM);
	/* Charged before the allocation they bound. */
	ret = sframe_user_charge(user, SFRAME_QUOTA_SUPPLIED_BYTES, len,
				 sframe_supply_max_user());
	/* capable() only past the bound: no audit record on every supply. */
	if (ret == -EDQUOT && capable(CAP_IPC_LOCK))
		ret = sframe_user_charge(user, SFRAME_QUOTA_SUPPLIED_BYTES,
					 len, U64_MAX);
	if (ret)
		goto put_user;
	ret = sframe_charge_total(len);
	if (ret)
		goto uncharge_user;
	/* Charged to the caller's memory cgroup: the supplier's. */
	blob = kvmalloc(struct_size(blob, data, len),
			GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!blob) {
		ret = -ENOMEM;
		goto uncharge_total;
	}
	refcount_set(&blob->ref, 1);
	blob->len = len;
	blob->user = user;
	return blob;

uncharge_total:
	atomic64_sub(len, &sframe_supplied_total);
uncharge_user:
	sframe_user_uncharge(user, SFRAME_QUOTA_SUPPLIED_BYTES, len);
put_user:
	sframe_user_put(user);
	return ERR_PTR(ret);
}

void *sframe_blob_data(struct sframe_blob *blob)
{
	return blob->data;
}

/*
 * Any context but NMI.  The charges go with the last reference, at once;
 * the memory after a grace period, since lookups under RCU may still read
 * the bytes through an entry erased meanwhile.
 */
void sframe_blob_put(struct sframe_blob *blob)
{
	if (!blob || !refcount_dec_and_test(&blob->ref))
		return;
	atomic64_sub(blob->len, &sframe_supplied_total);
	sframe_user_uncharge(blob->user, SFRAME_QUOTA_SUPPLIED_BYTES,
			     blob->len);
	sframe_user_put(blob->user);
	kvfree_rcu(blob, rcu);
}

/*
 * Lock-free lookups may still be reading entry (and its blob's bytes):
 * both are freed after a grace period.  The entry's reference on its blob
 * goes now, so what a process holds is uncharged as soon as it is erased.
 */
static void sframe_entry_free(struct sframe_entry *entry)
{
	sframe_blob_put(entry->blob);
	sframe_file_put(entry->file);
	sframe_fde_index_put(entry->index);
	kfree_rcu(entry, rcu);
}

struct sframe_mm {
	struct mmu_notifier mn;
	struct hlist_node hnode; /* in sframe_mm_hash, under sframe_mm_lock */
	struct mm_struct *mm;
	struct maple_tree sections; /* [text_start, text_end - 1] -> entry */
	struct mutex lock;          /* serialises writers of sections */
	/* The task changing sections now, under lock: see sframe_sections_write_begin(). */
	struct task_struct *sections_writer;
	unsigned int nr_entries;    /* under lock; sections and "none" */
	unsigned int nr_sections;   /* under lock; sections only */
	unsigned int nr_explicit;   /* under lock; registered or supplied */
	u64 supplied_bytes;         /* under lock */
	/*
	 * Bumped after every change of sections: by writers under lock, and
	 * by a non-blockable invalidation without it (so a cmpxchg loop).
	 * 64 bits, so that it never comes back to a value a walk remembered
	 * (sframe_registry_find_rule()); the row cache keeps the low 32.
	 */
	atomic64_t generation;
	/* Some entry is marked dead and still in sections. */
	atomic_t has_dead;
	struct sframe_row_cache *rows;
	bool hashed;                /* in sframe_mm_hash; under sframe_mm_lock */
	bool dead;                  /* torn down; under sframe_mm_lock */
	struct rcu_head rcu;
};

/*
 * Why a writer of smm->sections says who it is.  The maple tree's RCU
 * readers run beside a writer on another CPU: a reader that meets a node
 * the writer is replacing starts again from the root, and the writer,
 * going on meanwhile, soon leaves the tree whole.  But the walk also runs
 * in interrupts and NMIs (the sample path, perf's callchains), and one of
 * those can interrupt the writer on its own CPU, in the middle of a
 * change: then the reader starts again for ever, as the writer cannot go
 * on until the interrupt returns.  Seen on 6.1: an RCU stall, perf's
 * hrtimer sample spinning in mtree_load() over the task's own insertion
 * from its task work (discovery).  Writers are tasks holding smm->lock;
 * only an interrupt of current can come in the middle of current's
 * change.  So a reader that finds current here does not read the tree
 * (sframe_registry_readable()); anywhere else it may.  Program order on
 * one CPU is all that is needed: barrier() keeps the compiler from
 * moving the tree's stores outside the marks.
 */
static void sframe_sections_write_begin(struct sframe_mm *smm)
{
	lockdep_assert_held(&smm->lock);
	WRITE_ONCE(smm->sections_writer, current);
	barrier();
}

static void sframe_sections_write_end(struct sframe_mm *smm)
{
	barrier();
	WRITE_ONCE(smm->sections_writer, NULL);
}

bool sframe_registry_readable(const struct sframe_mm *smm)
{
	return READ_ONCE(smm->sections_writer) != current;
}

/*
 * mm -> sframe_mm.  Readers walk it under RCU.  mmu_notifier_get_locked()
 * gives each mm one sframe_mm (one notifier per ops and mm, under the
 * mm's own mmap_lock), and a reference on it per call; the first caller
 * to hash it (hashed, under sframe_mm_lock) keeps its reference for the
 * hash, which whoever tears the sframe_mm down drops; the others drop
 * theirs at once.  No global lock is held while waiting for an mm's
 * mmap_lock: another process can hold that lock for as long as it likes
 * (a fault on a FUSE file whose server never answers, under a read of
 * /proc/PID/mem), and must not stall anyone else's registry.
 */
static DEFINE_HASHTABLE(sframe_mm_hash, 8);
static DEFINE_SPINLOCK(sframe_mm_lock);
/* sframe_mm structs not yet freed by ->free_notifier; see registry_exit. */
static atomic_t sframe_mm_live = ATOMIC_INIT(0);

/*
 * Called after a change of smm's sections (under smm->lock, or with an
 * entry marked dead).  Release order: whoever reads the new generation
 * (with acquire) then finds the changed tree or the dead mark, so no row
 * decoded from a removed section is cached as current.  A cmpxchg loop,
 * since a non-blockable invalidation bumps without the lock; it ends as
 * soon as no other bump slips in between (each bump is one increment).
 */
static void sframe_mm_bump_generation(struct sframe_mm *smm)
{
	s64 old = atomic64_read(&smm->generation), next;

	do {
		next = old + 1;
		/* 0 is the generation of never-written cache entries. */
		if (!(u32)next)
			next++;
	} while (!atomic64_try_cmpxchg_release(&smm->generation, &old, next));
}

static u64 sframe_mm_generation64(struct sframe_mm *smm)
{
	return atomic64_read_acquire(&smm->generation);
}

/*
 * The row cache's generation: the registry's and the file store's
 * together, so that a row cached from a file's section is never used
 * once the store dropped the file.  Both only grow: so does the sum.
 */
u32 sframe_mm_generation(struct sframe_mm *smm)
{
	u32 gen = (u32)sframe_mm_generation64(smm) +
		  (u32)sframe_files_generation();

	/* 0 is the generation of never-written cache entries. */
	return gen ? gen : 1;
}

/*
 * Whether a lookup may use entry: not unmapped meanwhile, not attached
 * to a file the store has dropped, and not a "none" entry made before
 * the store last changed.  Any context (plain reads).
 */
static bool sframe_entry_live(const struct sframe_entry *entry)
{
	if (READ_ONCE(entry->dead))
		return false;
	if (entry->file)
		return !sframe_file_dead(entry->file);
	return entry->range.source != SFRAME_SOURCE_NONE ||
	       entry->files_gen == sframe_files_generation();
}

/* Inline: the walk's start looks its registry up on every sample. */
static __always_inline struct sframe_mm *
sframe_mm_find_rcu(struct mm_struct *mm)
{
	struct sframe_mm *smm;

	hash_for_each_possible_rcu(sframe_mm_hash, smm, hnode,
				   (unsigned long)mm) {
		if (smm->mm == mm && !READ_ONCE(smm->dead))
			return smm;
	}
	return NULL;
}

struct sframe_mm *sframe_mm_find(struct mm_struct *mm)
{
	struct sframe_mm *smm;

	rcu_read_lock();
	smm = sframe_mm_find_rcu(mm);
	rcu_read_unlock();
	return smm;
}

struct sframe_mm *sframe_mm_find_for_walk(struct mm_struct *mm,
					  struct sframe_row_cache **rows,
					  u32 *gen)
{
	struct sframe_mm *smm = sframe_mm_find(mm);

	*rows = smm ? smm->rows : NULL;
	*gen = smm ? sframe_mm_generation(smm) : 0;
	return smm;
}

/* Free every section of smm.  The caller owns smm exclusively. */
static void sframe_mm_free_sections(struct sframe_mm *smm)
{
	struct sframe_entry *entry;
	unsigned long index = 0;

	mutex_lock(&smm->lock);
	mt_for_each(&smm->sections, entry, index, ULONG_MAX) {
		if (sframe_range_covers(&entry->range))
			atomic64_dec(&sframe_counters.sections);
		sframe_entry_free(entry);
	}
	mtree_destroy(&smm->sections);
	smm->nr_entries = 0;
	smm->nr_sections = 0;
	WRITE_ONCE(smm->nr_explicit, 0);
	smm->supplied_bytes = 0;
	mutex_unlock(&smm->lock);
}

/*
 * Unhash smm if nobody did yet.  Returns true for the one caller that must
 * then free the sections and drop the notifier reference.
 */
static bool sframe_mm_claim(struct sframe_mm *smm)
{
	bool claimed = false;

	spin_lock(&sframe_mm_lock);
	/*
	 * Never hashed: its creator still holds a reference and an mm user,
	 * so this is not ->release (which runs once mm has no users).
	 */
	if (smm->hashed && !smm->dead) {
		WRITE_ONCE(smm->dead, true);
		hash_del_rcu(&smm->hnode);
		claimed = true;
	}
	spin_unlock(&sframe_mm_lock);
	return claimed;
}

static void sframe_mm_teardown(struct sframe_mm *smm)
{
	sframe_mm_free_sections(smm);
	atomic64_dec(&sframe_counters.processes);
	/* The notifier's memory goes in ->free_notifier, after SRCU. */
	mmu_notifier_put(&smm->mn);
}

/* The address space of the process is going away: exit or exec. */
static void sframe_mm_release(struct mmu_notifier *mn, struct mm_struct *mm)
{
	struct sframe_mm *smm = container_of(mn, struct sframe_mm, mn);

	if (sframe_mm_claim(smm))
		sframe_mm_teardown(smm);
}

static struct mmu_notifier *sframe_mm_alloc(struct mm_struct *mm)
{
	struct sframe_mm *smm = kzalloc(sizeof(*smm), GFP_KERNEL_ACCOUNT);

	if (!smm)
		return ERR_PTR(-ENOMEM);
	smm->rows = sframe_row_cache_alloc();
	if (!smm->rows) {
		kfree(smm);
		return ERR_PTR(-ENOMEM);
	}
	/* Zeroed cache entries carry generation 0: never a hit. */
	atomic64_set(&smm->generation, 1);
	smm->mm = mm;
	atomic_inc(&sframe_mm_live);
	mt_init_flags(&smm->sections, MT_FLAGS_USE_RCU);
	mutex_init(&smm->lock);
	return &smm->mn;
}

static void sframe_mm_free(struct mmu_notifier *mn)
{
	struct sframe_mm *smm = container_of(mn, struct sframe_mm, mn);

	/* Nobody reaches the cache any more: smm is unhashed, mm is gone. */
	sframe_row_cache_free(smm->rows);
	/* RCU readers of the hash may still look at smm. */
	kfree_rcu(smm, rcu);
	if (atomic_dec_and_test(&sframe_mm_live))
		wake_up_var(&sframe_mm_live);
}

/* Given by a program or a profiler, rather than found by the module. */
static bool sframe_source_is_explicit(u8 source)
{
	return source == SFRAME_SOURCE_REGISTERED ||
	       source == SFRAME_SOURCE_SUPPLIED;
}

/* Under smm->lock, after entry left the tree: account for it and free it. */
static void sframe_mm_forget(struct sframe_mm *smm, struct sframe_entry *entry)
{
	smm->nr_entries--;
	sframe_mm_bump_generation(smm);
	if (sframe_range_covers(&entry->range)) {
		smm->nr_sections--;
		atomic64_dec(&sframe_counters.sections);
	}
	if (sframe_source_is_explicit(entry->range.source))
		WRITE_ONCE(smm->nr_explicit, smm->nr_explicit - 1);
	if (entry->blob)
		smm->supplied_bytes -= entry->range.sec.sec_size;
	sframe_entry_free(entry);
}

/* Under smm->lock: entry into sections; -EEXIST if any part of its range is taken. */
static int sframe_sections_insert(struct sframe_mm *smm,
				  struct sframe_entry *entry)
{
	int ret;

	sframe_sections_write_begin(smm);
	ret = mtree_insert_range(&smm->sections, entry->range.text_start,
				 entry->range.text_end - 1, entry,
				 GFP_KERNEL_ACCOUNT);
	sframe_sections_write_end(smm);
	return ret;
}

/* Under smm->lock: forget entry (its text is gone or it is unregistered). */
static void sframe_mm_erase(struct sframe_mm *smm, struct sframe_entry *entry)
{
	sframe_sections_write_begin(smm);
	mtree_erase(&smm->sections, entry->range.text_start);
	sframe_sections_write_end(smm);
	sframe_mm_forget(smm, entry);
}

/*
 * Under smm->lock, from the MMU notifier: sframe_mm_erase() without an
 * allocation that may reclaim (see sframe_mm_invalidate_start()).  Erasing
 * a range of a maple tree may need nodes; GFP_NOWAIT takes them only if
 * they are at hand.  0, or -ENOMEM with entry left in the tree.
 */
static int sframe_mm_erase_nowait(struct sframe_mm *smm,
				  struct sframe_entry *entry)
{
	MA_STATE(mas, &smm->sections, entry->range.text_start,
		 entry->range.text_end - 1);
	int ret;

	sframe_sections_write_begin(smm);
	mtree_lock(&smm->sections);
	ret = mas_store_gfp(&mas, NULL, GFP_NOWAIT | __GFP_NOWARN);
	mtree_unlock(&smm->sections);
	sframe_sections_write_end(smm);
	if (ret)
		return ret;
	sframe_mm_forget(smm, entry);
	return 0;
}

static bool sframe_mm_overlaps(struct sframe_mm *smm, unsigned long start,
			       unsigned long last)
{
	unsigned long index = start;
	bool found;

	rcu_read_lock();
	found = mt_find(&smm->sections, &index, last) != NULL;
	rcu_read_unlock();
	return found;
}

/*
 * Without sleeping: mark every entry in [start, last] dead, so lookups no
 * longer return it.  Lock-free like a lookup (RCU); at most
 * SFRAME_MAX_SECTIONS_PER_MM entries, as each step moves index past one.
 * The entries stay in the tree, counted, until the next writer of smm
 * (sframe_mm_reap_dead()) or its teardown erases them.
 */
static void sframe_mm_mark_dead(struct sframe_mm *smm, unsigned long start,
				unsigned long last)
{
	struct sframe_entry *entry;
	unsigned long index = start;
	bool marked = false;

	rcu_read_lock();
	mt_for_each(&smm->sections, entry, index, last) {
		WRITE_ONCE(entry->dead, true);
		marked = true;
	}
	rcu_read_unlock();
	if (!marked)
		return;
	/*
	 * A full barrier: a writer that sees has_dead (its atomic_xchg())
	 * sees the marks made before it.
	 */
	atomic_xchg(&smm->has_dead, 1);
	sframe_mm_bump_generation(smm);
}

/* Under smm->lock: erase the entries marked dead, if any. */
static void sframe_mm_reap_dead(struct sframe_mm *smm)
{
	struct sframe_entry *entry;
	unsigned long index = 0;

	if (!atomic_xchg(&smm->has_dead, 0))
		return;
	/* Each step moves index past one entry: nr_entries steps at most. */
	for (;;) {
		entry = mt_find(&smm->sections, &index, ULONG_MAX);
		if (!entry)
			break;
		if (READ_ONCE(entry->dead))
			sframe_mm_erase(smm, entry);
		if (!index) /* the last entry ended at ULONG_MAX */
			break;
	}
}

/*
 * Text covered by a section was unmapped (munmap, mremap, dlclose): the
 * section must not describe whatever is mapped there next.  Only unmaps
 * matter: other invalidations (reclaim, migration, protection changes)
 * keep the text where it is.  And the OOM reaper's (process_mrelease()
 * too), the only invalidation that may not block: its mm is dying and its
 * text will never run again, so the sections go as they did when it said
 * MMU_NOTIFY_UNMAP (6.1, 6.12); 7.x's reaper says MMU_NOTIFY_CLEAR (seen
 * with a kprobe on 7.3.4: event 1, flags 0).
 */
static int sframe_mm_invalidate_start(struct mmu_notifier *mn,
				      const struct mmu_notifier_range *range)
{
	struct sframe_mm *smm = container_of(mn, struct sframe_mm, mn);
	struct sframe_entry *entry;
	unsigned long index;

	if ((range->event != MMU_NOTIFY_UNMAP &&
	     mmu_notifier_range_blockable(range)) ||
	    range->end <= range->start ||
	    !sframe_mm_overlaps(smm, range->start, range->end - 1))
		return 0;
	/*
	 * This runs where memory reclaim may run too (lockdep knows:
	 * mmu_notifier_register() records fs_reclaim before the notifier's
	 * map), so it must neither allocate with reclaim nor wait for a lock
	 * that is held across such an allocation.  smm->lock is: writers
	 * insert into the maple tree with GFP_KERNEL under it.  So the lock
	 * is only tried (a trylock adds no lockdep dependency, and cannot
	 * deadlock), entries are erased with GFP_NOWAIT, and whatever cannot
	 * be erased that way is marked dead: lookups skip it at once, and the
	 * next writer under the lock (or the registry's teardown) erases it.
	 * The OOM reaper's invalidation, which may not sleep at all, only
	 * marks: refusing it (-EAGAIN) would make the reaper give up on every
	 * process with sections.
	 */
	if (!mmu_notifier_range_blockable(range) ||
	    !mutex_trylock(&smm->lock)) {
		sframe_mm_mark_dead(smm, range->start, range->end - 1);
		return 0;
	}
	/* Each erase takes one entry out: SFRAME_MAX_SECTIONS_PER_MM steps. */
	for (;;) {
		index = range->start;
		entry = mt_find(&smm->sections, &index, range->end - 1);
		if (!entry)
			break;
		if (sframe_mm_erase_nowait(smm, entry)) {
			mutex_unlock(&smm->lock);
			sframe_mm_mark_dead(smm, range->start, range->end - 1);
			return 0;
		}
	}
	mutex_unlock(&smm->lock);
	return 0;
}

static const struct mmu_notifier_ops sframe_mm_ops = {
	.release = sframe_mm_release,
	.invalidate_range_start = sframe_mm_invalidate_start,
	.alloc_notifier = sframe_mm_alloc,
	.free_notifier = sframe_mm_free,
};

static struct sframe_mm *sframe_mm_get_or_create(struct mm_struct *mm)
{
	struct mmu_notifier *mn;
	struct sframe_mm *smm;
	bool mine = false, dead;

	smm = sframe_mm_find(mm);
	if (smm)
		return smm;

	/*
	 * mmu_notifier_get() without its uninterruptible wait: only this
	 * caller waits for mm's mmap_lock, and a fatal signal ends the wait.
	 * Allocates through sframe_mm_alloc, or finds the existing one.
	 */
	if (mmap_write_lock_killable(mm))
		return ERR_PTR(-EINTR);
	mn = mmu_notifier_get_locked(&sframe_mm_ops, mm);
	mmap_write_unlock(mm);
	if (IS_ERR(mn))
		return ERR_CAST(mn);
	smm = container_of(mn, struct sframe_mm, mn);
	spin_lock(&sframe_mm_lock);
	dead = smm->dead;
	if (!smm->hashed && !dead) {
		smm->hashed = true;
		hash_add_rcu(sframe_mm_hash, &smm->hnode, (unsigned long)mm);
		mine = true;
	}
	spin_unlock(&sframe_mm_lock);
	if (mine) {
		/* This reference is the hash's now. */
		atomic64_inc(&sframe_counters.processes);
		return smm;
	}
	/* Another caller hashed it first: drop our extra reference. */
	mmu_notifier_put(mn);
	/*
	 * Torn down already: mm is exiting (our caller's reference on it
	 * notwithstanding, only the module's exit does this, and it runs
	 * when nobody can call us).  Nothing to register into.
	 */
	return dead ? ERR_PTR(-ESRCH) : smm;
}

/*
 * Under mm's mmap_lock: every byte of [start, end) is mapped, with the
 * wanted protection, and, if inode is given, by that file.  Returns 0,
 * -EFAULT (a hole), -EACCES (wrong protection) or -ESTALE (another file).
 * One step per VMA in the range.
 */
static int sframe_mapped_locked(struct mm_struct *mm, unsigned long start,
				unsigned long end, unsigned long vm_flag,
				const struct inode *inode)
{
	unsigned long addr = start;
	struct vm_area_struct *vma;

	while (addr < end) {
		vma = sframe_next_vma(mm, addr);
		if (!vma || vma->vm_start > addr)
			return -EFAULT;
		if (!(vma->vm_flags & vm_flag))
			return -EACCES;
		if (inode && (!vma->vm_file || file_inode(vma->vm_file) != inode))
			return -ESTALE;
		addr = vma->vm_end;
	}
	return 0;
}

/*
 * Every byte of [start, start + len) must be mapped, and with the wanted
 * protection.  Returns 0, -EFAULT (a hole) or -EACCES (wrong protection).
 * An early answer for a request: the insertion checks the text again
 * (sframe_insert()), where it counts.
 */
static int sframe_check_mapped(struct mm_struct *mm, unsigned long start,
			       unsigned long len, unsigned long vm_flag)
{
	int ret;

	/* Killable: another process may hold mm's mmap_lock for long. */
	if (mmap_read_lock_killable(mm))
		return -EINTR;
	ret = sframe_mapped_locked(mm, start, start + len, vm_flag, NULL);
	mmap_read_unlock(mm);
	return ret;
}

/* A non-empty range inside the user address space, without overflow. */
static bool sframe_user_range_ok(u64 start, u64 len)
{
	return len && start < TASK_SIZE_MAX && len <= TASK_SIZE_MAX - start;
}

/* Bounds every request must meet before anything is read or mapped. */
static int sframe_check_bounds(u64 sframe_addr, u64 sframe_len,
			       u64 text_start, u64 text_len)
{
	if (sframe_len > SFRAME_MAX_SECTION_SIZE)
		return -E2BIG;
	if (!sframe_user_range_ok(sframe_addr, sframe_len) ||
	    !sframe_user_range_ok(text_start, text_len))
		return -EINVAL;
	return 0;
}

/*
 * Validate the section read through src, describe it in entry->range and
 * index its FDEs.
 */
static int sframe_check_section(const struct sframe_source *src,
				u64 sframe_addr, u64 text_start, u64 text_len,
				struct sframe_entry *entry)
{
	struct sframe_range *range = &entry->range;
	struct sframe_validation found;
	int ret;

	ret = sframe_section_init(&range->sec, src, sframe_addr, src->size);
	if (ret)
		return ret;
	/*
	 * An FDE with too many FREs costs its own function its rows, not
	 * the section its registration: counted, and shown by
	 * SFRAME_IOC_LIST_SECTIONS (nr_fdes_skipped, and covered_bytes
	 * without its text).
	 */
	ret = sframe_fde_index_validate(&range->sec, text_start, text_len,
					&entry->index, &found);
	if (ret)
		return ret;
	range->covered_bytes = found.covered_bytes;
	range->fdes_skipped = found.fdes_skipped;
	range->sec.src = NULL; /* the source lives on the caller's stack */
	range->text_start = text_start;
	range->text_end = text_start + text_len;
	range->sframe_addr = sframe_addr;
	return 0;
}

static int sframe_check_request(struct mm_struct *mm, u64 sframe_addr,
				u64 sframe_len, u64 text_start, u64 text_len,
				struct sframe_entry *entry)
{
	struct sframe_source src = {};
	int ret;

	ret = sframe_check_bounds(sframe_addr, sframe_len, text_start,
				  text_len);
	if (ret)
		return ret;
	ret = sframe_check_mapped(mm, text_start, text_len, VM_EXEC);
	if (ret)
		return ret;
	/* An unreadable section is as good as an unmapped one. */
	ret = sframe_check_mapped(mm, sframe_addr, sframe_len, VM_READ);
	if (ret)
		return ret == -EINTR ? ret : -EFAULT;

	src.base = u64_to_user_ptr(sframe_addr);
	src.size = sframe_len;
	return sframe_check_section(&src, sframe_addr, text_start, text_len,
				    entry);
}

/*
 * Under smm->lock: entry overlaps registered text.  If all that it
 * overlaps may go, drop those and return true: stale entries (a dropped
 * file's, an old "none"), and, for an entry the program or a profiler
 * gave, what discovery found (the program knows better).
 */
static bool sframe_mm_yield_discovered(struct sframe_mm *smm,
				       const struct sframe_entry *entry)
{
	bool explicit = sframe_source_is_explicit(entry->range.source);
	unsigned long first = entry->range.text_start;
	unsigned long last = entry->range.text_end - 1;
	struct sframe_entry *old;
	unsigned long index = first;

	mt_for_each(&smm->sections, old, index, last) {
		if (sframe_entry_live(old) &&
		    (!explicit || sframe_source_is_explicit(old->range.source)))
			return false;
	}
	for (;;) {
		index = first;
		old = mt_find(&smm->sections, &index, last);
		if (!old)
			break;
		sframe_mm_erase(smm, old);
	}
	return true;
}

/*
 * Under smm->lock: count len more supplied bytes for this process, within
 * its bound.  Per process, so a fork child that shares its parent's blobs
 * counts them again here (not in the user's or the global total, charged
 * once per blob by sframe_blob_alloc()).
 */
static int sframe_charge_supplied(struct sframe_mm *smm, u64 len)
{
	u64 max_process = min_t(u64, (u64)READ_ONCE(supply_max_process_kb) << 10,
				SFRAME_SUPPLY_MAX_PER_PROCESS);

	if (smm->supplied_bytes + len > max_process)
		return -EDQUOT;
	smm->supplied_bytes += len;
	return 0;
}

static void sframe_uncharge_supplied(struct sframe_mm *smm, u64 len)
{
	smm->supplied_bytes -= len;
}

/*
 * Insert entry into mm's registry, if its text is still mapped executable
 * (and by inode, for an entry made from a file).  The text is checked and
 * the entry inserted under mm's mmap_lock: an munmap of the text waits for
 * the insertion, then finds the entry and erases it
 * (sframe_mm_invalidate_start()).  Checked only before taking the lock,
 * an munmap falling between the check and the insertion found nothing to
 * erase, and the entry described whatever was mapped there next (seen:
 * 2,435 such entries in 13,094 unmaps, supply_vmtest).  Lock order: mmap_lock,
 * then smm->lock; the notifier only tries smm->lock.
 */
static int sframe_insert(struct mm_struct *mm, struct sframe_entry *entry,
			 const struct inode *inode)
{
	struct sframe_mm *smm;
	int ret;

	/* Before mmap_lock: registering the notifier takes it for writing. */
	smm = sframe_mm_get_or_create(mm);
	if (IS_ERR(smm))
		return PTR_ERR(smm);

	if (entry->index)
		entry->table = sframe_fde_index_table(entry->index);
	/* Killable: another process may hold mm's mmap_lock for long. */
	if (mmap_read_lock_killable(mm))
		return -EINTR;
	ret = sframe_mapped_locked(mm, entry->range.text_start,
				   entry->range.text_end, VM_EXEC, inode);
	if (ret) {
		mmap_read_unlock(mm);
		return ret;
	}
	mutex_lock(&smm->lock);
	sframe_mm_reap_dead(smm);
	if (smm->nr_entries >= SFRAME_MAX_SECTIONS_PER_MM) {
		ret = -ENOSPC;
		goto out;
	}
	if (entry->blob) {
		ret = sframe_charge_supplied(smm, entry->range.sec.sec_size);
		if (ret)
			goto out;
	}
	/* A new identity for every insertion, a fork child's copies too. */
	entry->range.id = atomic64_inc_return(&sframe_entry_seq);
	ret = sframe_sections_insert(smm, entry);
	if (ret == -EEXIST && sframe_mm_yield_discovered(smm, entry))
		ret = sframe_sections_insert(smm, entry);
	if (ret) {
		if (entry->blob)
			sframe_uncharge_supplied(smm,
						 entry->range.sec.sec_size);
		goto out;
	}
	smm->nr_entries++;
	sframe_mm_bump_generation(smm);
	/* "none" entries of discovery are not sections. */
	if (sframe_range_covers(&entry->range)) {
		smm->nr_sections++;
		atomic64_inc(&sframe_counters.sections);
	}
	if (sframe_source_is_explicit(entry->range.source))
		WRITE_ONCE(smm->nr_explicit, smm->nr_explicit + 1);
out:
	mutex_unlock(&smm->lock);
	mmap_read_unlock(mm);
	return ret;
}

static struct sframe_entry *sframe_entry_new(u8 source)
{
	struct sframe_entry *entry = kzalloc(sizeof(*entry), GFP_KERNEL_ACCOUNT);

	if (entry)
		entry->range.source = source;
	return entry;
}

/* An entry that never made it into a registry. */
static void sframe_entry_discard(struct sframe_entry *entry)
{
	sframe_blob_put(entry->blob);
	sframe_file_put(entry->file);
	sframe_fde_index_put(entry->index);
	kfree(entry);
}

/* Add a filled-in entry for mm, or discard it.  inode: see sframe_insert(). */
static int sframe_add(struct mm_struct *mm, struct sframe_entry *entry,
		      const struct inode *inode)
{
	int ret = sframe_insert(mm, entry, inode);

	if (ret)
		sframe_entry_discard(entry);
	return ret;
}

int sframe_register_section(struct mm_struct *mm, u64 sframe_addr,
			    u64 sframe_len, u64 text_start, u64 text_len,
			    u8 source, const struct inode *inode)
{
	struct sframe_entry *entry = sframe_entry_new(source);
	int ret;

	if (!entry)
		return -ENOMEM;
	ret = sframe_check_request(mm, sframe_addr, sframe_len, text_start,
				   text_len, entry);
	if (ret) {
		sframe_entry_discard(entry);
		return ret;
	}
	return sframe_add(mm, entry, inode);
}

int sframe_supply_section(struct mm_struct *mm, struct sframe_blob *blob,
			  u64 sframe_len, u64 sframe_addr, u64 text_start,
			  u64 text_len)
{
	struct sframe_source src = { .kbase = blob->data, .size = sframe_len };
	struct sframe_entry *entry = sframe_entry_new(SFRAME_SOURCE_SUPPLIED);
	int ret;

	if (!entry) {
		sframe_blob_put(blob);
		return -ENOMEM;
	}
	entry->blob = blob;
	ret = sframe_check_bounds(sframe_addr, sframe_len, text_start,
				  text_len);
	if (!ret)
		ret = sframe_check_mapped(mm, text_start, text_len, VM_EXEC);
	if (!ret)
		ret = sframe_check_section(&src, sframe_addr, text_start,
					   text_len, entry);
	if (ret) {
		sframe_entry_discard(entry);
		return ret;
	}
	return sframe_add(mm, entry, NULL);
}

int sframe_register_none(struct mm_struct *mm, unsigned long pc,
			 unsigned long start, unsigned long end, u64 files_gen)
{
	struct sframe_entry *entry, *old;
	unsigned long index = start;
	struct sframe_mm *smm;
	int ret;

	if (pc < start || pc >= end)
		return -EINVAL;
	entry = sframe_entry_new(SFRAME_SOURCE_NONE);
	if (!entry)
		return -ENOMEM;
	entry->files_gen = files_gen;
	smm = sframe_mm_get_or_create(mm);
	if (IS_ERR(smm)) {
		sframe_entry_discard(entry);
		return PTR_ERR(smm);
	}
	/*
	 * The free range around pc: [start, end) less the entries in it (a
	 * section registered for part of the mapping, say).  Under the lock,
	 * so it is still free when inserted below.  One step per entry in
	 * the mapping: SFRAME_MAX_SECTIONS_PER_MM at most.
	 */
	mutex_lock(&smm->lock);
	sframe_mm_reap_dead(smm);
	mt_for_each(&smm->sections, old, index, end - 1) {
		if (old->range.text_start <= pc && pc < old->range.text_end) {
			/* Covered meanwhile (a racing discovery): done. */
			mutex_unlock(&smm->lock);
			sframe_entry_discard(entry);
			return 0;
		}
		if (old->range.text_end <= pc)
			start = max(start, old->range.text_end);
		else
			end = min(end, old->range.text_start);
	}
	mutex_unlock(&smm->lock);
	entry->range.text_start = start;
	entry->range.text_end = end;
	/* -EEXIST only if a racing insert took part of it: fine as well. */
	ret = sframe_add(mm, entry, NULL);
	return ret == -EEXIST ? 0 : ret;
}

int sframe_register_file(struct mm_struct *mm, struct sframe_file *f,
			 unsigned long map_start, unsigned long map_offset)
{
	const struct sframe_elf_load *load;
	struct sframe_entry *entry;
	struct sframe_range *r;
	u64 bias;
	int ret, i;

	/*
	 * The entry covers the executable segment this mapping maps, not
	 * the file's whole text: between the segments of a file with
	 * several (node's .init, .text and large-page text) lie pages that
	 * are not mapped executable, or not mapped by it at all, and an
	 * entry must not claim them.  Each segment gets its entry when a
	 * PC in it is first looked up; all share the file's one table.
	 */
	i = sframe_elf_mapped_load(&f->text, map_start, map_offset, &bias);
	if (i < 0)
		return -ENOENT;
	load = &f->text.loads[i];
	if (!sframe_user_range_ok(bias + load->vaddr, load->memsz))
		return -EINVAL;
	entry = sframe_entry_new(SFRAME_SOURCE_FILE);
	if (!entry)
		return -ENOMEM;
	/* The caller's reference keeps f: this one cannot fail. */
	entry->file = sframe_file_get(f);
	entry->bias = bias;
	entry->table = f->table;
	r = &entry->range;
	r->sec = f->sec;
	r->text_start = bias + load->vaddr;
	r->text_end = r->text_start + load->memsz;
	r->sframe_addr = bias + f->sec.sec_addr;
	r->covered_bytes = f->load_covered[i];
	r->fdes_skipped = f->found.fdes_skipped;
	/* Inserted only if the text is this file's, mapped executable, here. */
	ret = sframe_add(mm, entry, f->inode);
	if (!ret)
		sframe_file_attached(f);
	return ret;
}

void sframe_registry_drop_stale(struct mm_struct *mm, unsigned long pc)
{
	struct sframe_entry *entry;
	struct sframe_mm *smm = sframe_mm_find(mm);

	if (!smm)
		return;
	mutex_lock(&smm->lock);
	sframe_mm_reap_dead(smm);
	entry = mtree_load(&smm->sections, pc);
	if (entry && !sframe_entry_live(entry))
		sframe_mm_erase(smm, entry);
	mutex_unlock(&smm->lock);
}

int sframe_unregister_section(struct mm_struct *mm, u64 text_start)
{
	struct sframe_entry *entry;
	struct sframe_mm *smm;
	int ret = -ENOENT;

	if (text_start >= TASK_SIZE_MAX)
		return -ENOENT;
	smm = sframe_mm_find(mm);
	if (!smm)
		return -ENOENT;

	mutex_lock(&smm->lock);
	sframe_mm_reap_dead(smm);
	entry = mtree_load(&smm->sections, text_start);
	if (entry && entry->range.text_start == text_start) {
		sframe_mm_erase(smm, entry);
		ret = 0;
	}
	mutex_unlock(&smm->lock);
	return ret;
}

bool sframe_registry_lookup(struct sframe_mm *smm, unsigned long pc,
			    struct sframe_range *range,
			    struct sframe_entry **found, u64 *gen)
{
	struct sframe_entry *entry;

	*found = NULL;
	rcu_read_lock();
	/* Before the tree: see sframe_registry_find_rule(). */
	*gen = sframe_mm_generation64(smm);
	entry = mtree_load(&smm->sections, pc);
	if (entry && sframe_entry_live(entry)) {
		*range = entry->range;
		*found = entry;
	}
	rcu_read_unlock();
	return *found;
}

/*
 * Why entry may be used here although the walk holds no reference on it
 * and may have slept since it found it: entry was found in the tree under
 * RCU after reading generation gen (with acquire, sframe_registry_lookup()),
 * and every path that frees an entry or its index first takes the entry
 * out of the tree (or marks it dead), then bumps the generation (with
 * release), then frees it with kfree_rcu()/kvfree_rcu() (sframe_mm_erase():
 * sframe_entry_free() drops the entry's reference on its index, whose
 * memory goes through kvfree_rcu() as well).  So, reading the generation
 * again inside rcu_read_lock() below:
 *  - if the bump for entry's removal came before our first read of gen,
 *    that read saw it (acquire pairs with the release), and the lookup
 *    after it saw the tree without entry: it cannot have found it;
 *  - otherwise that bump comes after our first read; if our read below
 *    still sees gen, the bump (and so the kfree_rcu() after it) had not
 *    happened when this read-side critical section began reading, and the
 *    grace period the free waits for includes this whole section.
 * The generation is 64 bits and only increases: it cannot come back to
 * gen.  The registry's teardown (sframe_mm_free_sections()) frees entries
 * without a bump, but only once smm itself is unreachable: mm has no users
 * left, or the module is going away, and a walk of current's stack holds
 * both (uw->smm, sframe_mm_find()).
 */
struct sframe_rule sframe_registry_find_rule(struct sframe_mm *smm,
					     struct sframe_entry *entry,
					     u64 gen, unsigned long pc,
					     u32 *budget)
{
	struct sframe_rule rule = {};

	rcu_read_lock();
	if (sframe_mm_generation64(smm) == gen && sframe_entry_live(entry) &&
	    entry->table)
		rule = sframe_index_find_rule(entry->table, pc - entry->bias,
					      budget);
	rcu_read_unlock();
	return rule;
}

/*
 * The entry range was copied from, if it is still the one at pc: under
 * RCU, NULL otherwise.  By id alone: an entry for the same text, at the
 * same address and from the same source can be another section (a user
 * unregisters its text and supplies a smaller section for it while a
 * walk holds the old copy), whose bytes must never be read with the old
 * copy's header.
 */
static struct sframe_entry *sframe_entry_of(struct sframe_mm *smm,
					    const struct sframe_range *range,
					    unsigned long pc)
{
	struct sframe_entry *entry = mtree_load(&smm->sections, pc);

	if (!entry || !sframe_entry_live(entry) || entry->range.id != range->id)
		return NULL;
	return entry;
}

int sframe_registry_find_row(struct sframe_mm *smm,
			     const struct sframe_range *range,
			     unsigned long pc, struct sframe_row *row,
			     u32 *budget)
{
	struct sframe_source src = {};
	struct sframe_section sec;
	struct sframe_entry *entry;
	struct sframe_fde fde;
	int ret = -ENOENT;

	rcu_read_lock();
	entry = sframe_entry_of(smm, range, pc);
	if (!entry) {
		rcu_read_unlock();
		return -ESTALE;
	}
	/* The header of the entry found here, never of the caller's copy. */
	sec = entry->range.sec;
	sec.src = &src;
	if (entry->blob || entry->file) {
		/*
		 * The kernel's copy stays while we are in here, and no read
		 * leaves it: the decoder keeps within sec_size, and the
		 * source within its own size, which is the copy's length.
		 * A file's section describes the file at bias 0.
		 */
		src.kbase = entry->blob ? entry->blob->data : entry->file->data;
		src.size = min_t(u64, sec.sec_size,
				 entry->blob ? entry->blob->len :
					       entry->file->len);
		sec.sec_size = src.size;
		ret = sframe_find_row_indexed(&sec, entry->table,
					      pc - entry->bias, row, budget);
		rcu_read_unlock();
		return ret;
	}
	src.size = sec.sec_size;
	src.base = u64_to_user_ptr(entry->range.sframe_addr);
	if (entry->table)
		ret = sframe_index_find_row(entry->table, pc, &fde, row, budget);
	else
		ret = -EAGAIN; /* no index: search the section */
	rcu_read_unlock();

	/*
	 * A section in user memory is read outside RCU: a read may fault
	 * and sleep.  The index told which FDE, from kernel memory; its
	 * FREs are read from the section, checked, as by the search.  The
	 * header is the entry's, as it was validated for these bytes; the
	 * process may have changed them since, which every read checks.
	 */
	if (ret == SFRAME_INDEX_READ_FRES)
		return sframe_find_row_in_fde(&sec, &fde, pc, row, budget);
	if (ret == -EAGAIN)
		return sframe_find_row_budget(&sec, pc, row, budget);
	return ret;
}

int sframe_registry_list(struct mm_struct *mm, struct sframe_section_info *out,
			 u32 max, u32 *nr)
{
	struct sframe_section_info *info;
	struct sframe_entry *entry;
	struct sframe_mm *smm;
	unsigned long index = 0;
	u32 n = 0;

	*nr = 0;
	smm = sframe_mm_find(mm);
	if (!smm)
		return 0;
	mutex_lock(&smm->lock);
	sframe_mm_reap_dead(smm);
	mt_for_each(&smm->sections, entry, index, ULONG_MAX) {
		/* Stale entries cover nothing; the next walk there erases them. */
		if (!sframe_entry_live(entry))
			continue;
		if (n < max) {
			const struct sframe_range *r = &entry->range;

			info = &out[n];
			memset(info, 0, sizeof(*info));
			info->text_start = r->text_start;
			info->text_len = r->text_end - r->text_start;
			info->source = r->source;
			if (sframe_range_covers(r)) {
				info->sframe_addr = r->sframe_addr;
				info->sframe_len = r->sec.sec_size;
				info->covered_bytes = r->covered_bytes;
				info->version = r->sec.version;
				info->nr_fdes = r->sec.num_fdes;
				info->nr_fdes_skipped = r->fdes_skipped;
			}
		}
		n++;
	}
	mutex_unlock(&smm->lock);
	*nr = n;
	return 0;
}

/* The registered and supplied entries of a process at one moment. */
struct sframe_snapshot {
	unsigned int n;
	struct {
		struct sframe_range range;
		struct sframe_blob *blob; /* referenced */
		struct sframe_fde_index *index; /* referenced, or NULL */
	} entries[];
};

bool sframe_snapshot_wanted(struct mm_struct *mm)
{
	struct sframe_mm *smm;
	bool wanted;

	rcu_read_lock();
	smm = sframe_mm_find_rcu(mm);
	wanted = smm && READ_ONCE(smm->nr_explicit);
	rcu_read_unlock();
	return wanted;
}

struct sframe_snapshot *sframe_snapshot_take(struct mm_struct *mm, gfp_t gfp,
					     bool *failed)
{
	struct sframe_snapshot *snap = NULL;
	struct sframe_entry *entry;
	unsigned long index = 0;
	struct sframe_mm *smm;
	unsigned int n, i = 0;

	*failed = false;
	rcu_read_lock();
	smm = sframe_mm_find_rcu(mm);
	n = smm ? READ_ONCE(smm->nr_explicit) : 0;
	if (!n)
		goto out;
	snap = kmalloc(struct_size(snap, entries, n), gfp);
	if (!snap) {
		*failed = true;
		goto out;
	}
	/*
	 * Lock-free, like a lookup: an entry seen here stays readable until
	 * the end of the RCU read side, and so does its blob's memory.
	 */
	mt_for_each(&smm->sections, entry, index, ULONG_MAX) {
		if (i == n)
			break;
		if (!sframe_source_is_explicit(entry->range.source) ||
		    READ_ONCE(entry->dead))
			continue;
		/*
		 * An entry erased meanwhile may have dropped the last
		 * reference of its blob: skip it, as if the erase came first.
		 */
		if (entry->blob && !refcount_inc_not_zero(&entry->blob->ref))
			continue;
		snap->entries[i].range = entry->range;
		snap->entries[i].blob = entry->blob;
		/* The child's section is a copy: the index holds for it. */
		snap->entries[i].index = sframe_fde_index_get(entry->index);
		i++;
	}
	snap->n = i;
out:
	rcu_read_unlock();
	return snap;
}

void sframe_snapshot_free(struct sframe_snapshot *snap)
{
	unsigned int i;

	if (!snap)
		return;
	for (i = 0; i < snap->n; i++) {
		sframe_blob_put(snap->entries[i].blob);
		sframe_fde_index_put(snap->entries[i].index);
	}
	kfree(snap);
}

/*
 * Whether the child has what the entry describes: its text mapped
 * executable and, for a section read from user memory, that memory
 * readable.  The fork copied most of the address space, but not mappings
 * marked MADV_DONTFORK (VM_DONTCOPY), and the parent may have unmapped
 * text between the snapshot and the fork's end.  0, or why not.
 */
static int sframe_snapshot_entry_mapped(struct mm_struct *mm,
					const struct sframe_range *r)
{
	int ret;

	ret = sframe_check_mapped(mm, r->text_start,
				  r->text_end - r->text_start, VM_EXEC);
	if (ret || r->source == SFRAME_SOURCE_SUPPLIED)
		return ret;
	return sframe_check_mapped(mm, r->sframe_addr, r->sec.sec_size,
				   VM_READ);
}

int sframe_snapshot_apply(struct mm_struct *mm, struct sframe_snapshot *snap)
{
	struct sframe_entry *entry;
	unsigned int i;
	int ret = 0, err;

	/*
	 * One entry refused (a bound) does not stop the others; one whose
	 * text or section the child does not have is left out (not an error:
	 * there is nothing to describe).  snap->n <= SFRAME_MAX_SECTIONS_PER_MM.
	 */
	for (i = 0; i < snap->n; i++) {
		err = sframe_snapshot_entry_mapped(mm, &snap->entries[i].range);
		if (err == -EINTR) {
			ret = err;
			break;
		}
		if (err)
			continue;
		entry = sframe_entry_new(snap->entries[i].range.source);
		if (!entry) {
			ret = -ENOMEM;
			continue;
		}
		entry->range = snap->entries[i].range;
		entry->blob = snap->entries[i].blob;
		entry->index = snap->entries[i].index;
		/* The entry's now. */
		snap->entries[i].blob = NULL;
		snap->entries[i].index = NULL;
		err = sframe_add(mm, entry, NULL);
		if (err && !ret)
			ret = err;
	}
	sframe_snapshot_free(snap);
	return ret;
}

unsigned int sframe_mm_nr_sections(struct sframe_mm *smm)
{
	return READ_ONCE(smm->nr_sections);
}

int sframe_registry_init(void)
{
	return 0;
}

void sframe_registry_exit(void)
{
	struct sframe_mm *smm;
	struct hlist_node *tmp;
	int bkt;

	/*
	 * No file is open (each holds the module), so nothing registers.
	 * An exiting mm may race us in ->release: sframe_mm_claim() picks
	 * one of us to tear each registry down.
	 */
	for (;;) {
		struct sframe_mm *victim = NULL;

		spin_lock(&sframe_mm_lock);
		hash_for_each_safe(sframe_mm_hash, bkt, tmp, smm, hnode) {
			victim = smm;
			break;
		}
		spin_unlock(&sframe_mm_lock);
		if (!victim)
			break;
		if (sframe_mm_claim(victim))
			sframe_mm_teardown(victim);
	}
	/*
	 * A registry claimed by a racing ->release is freed once that
	 * ->release has returned (its notifier is freed after the SRCU read
	 * side that called it): wait for every registry to be freed, then for
	 * the SRCU callbacks themselves to finish running module text.
	 */
	wait_var_event(&sframe_mm_live, !atomic_read(&sframe_mm_live));
	mmu_notifier_synchronize();
	/* And for the kfree_rcu() of entries and registries. */
	rcu_barrier();
}
