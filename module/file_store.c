// SPDX-License-Identifier: GPL-2.0
/*
 * The file store: one SFrame section per file, for every mapping of it.
 *
 * Per-process supply (SFRAME_IOC_SUPPLY) makes a copy of a library's
 * section in every process that maps it, and only after a profiler has
 * seen the process.  Here a privileged service supplies the section once
 * for the file itself; discovery (discovery.c) finds it for any mapping,
 * in any process, from its first sample on, and the registry attaches it
 * by reference (registry.c: a small entry per mapping, no copy).
 *
 * The key is the inode, held by an fsnotify mark for as long as the entry
 * lives, so the key cannot be freed and reused for another file while the
 * entry exists: an entry is identified by something that cannot repeat.
 * The same mark tells us when the file stops being the file the section
 * was made for: a write, a truncation, an open for writing (after which
 * shared writable mappings can change it without telling anyone), the
 * last link removed, or its filesystem unmounted.  Then the entry is
 * dropped at once (marked dead, unhashed) and the store's generation
 * bumped: walks skip entries attached to a dead file, and no row cached
 * under the old generation is used again.  The mark itself is destroyed
 * from a work item, since fsnotify may call us with filesystem locks held
 * and destroying a mark takes the group's mutex.
 *
 * Lifetime: an entry is referenced by the store (while hashed), by its
 * mark (until fsnotify's last call, ->free_mark), by each registry entry
 * attached to it, and by lookups in progress.  Its bytes are freed after
 * an RCU grace period: walks read them under rcu_read_lock().
 */
#include <linux/capability.h>
#include <linux/hashtable.h>
#include <linux/iversion.h>
#include <linux/kdev_t.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>

#include "compat.h"
#include "fde_index.h"
#include "file_store.h"
#include "quota.h"
#include "sframe_source_user.h"

static unsigned int file_max_kb = SFRAME_FILE_MAX_TOTAL >> 12; /* 256 MiB */
module_param(file_max_kb, uint, 0644);
MODULE_PARM_DESC(file_max_kb,
		 "Bytes (KiB) of sections the file store may hold (at most the uapi's bound)");

/* What a watched file may do before its entry goes. */
#define SFRAME_FILE_EVENTS                                                  \
	(FS_MODIFY | FS_OPEN | FS_ATTRIB | FS_DELETE_SELF | FS_UNMOUNT)

static struct fsnotify_group *sframe_files_group;
static DEFINE_HASHTABLE(sframe_files_hash, 10);
/*
 * Irq-safe: fsnotify may call sframe_file_kill() from wherever a write
 * completes, and nothing here needs to be fast.
 */
static DEFINE_SPINLOCK(sframe_files_lock);
static LIST_HEAD(sframe_files_list);  /* live entries, in id order */
static LIST_HEAD(sframe_files_dead);  /* dropped, mark not destroyed yet */
static unsigned int sframe_files_nr;  /* under sframe_files_lock */
static u64 sframe_files_seq;          /* under sframe_files_lock */
static atomic64_t sframe_files_bytes = ATOMIC64_INIT(0);
static atomic64_t sframe_files_attaches = ATOMIC64_INIT(0);
static atomic64_t sframe_files_invalidated = ATOMIC64_INIT(0);

atomic64_t sframe_files_gen = ATOMIC64_INIT(0);

static void sframe_files_reap(struct work_struct *work);
static DECLARE_WORK(sframe_files_reap_work, sframe_files_reap);

static u64 sframe_files_max_bytes(void)
{
	return min_t(u64, (u64)READ_ONCE(file_max_kb) << 10,
		     SFRAME_FILE_MAX_TOTAL);
}

/*
 * Release order: whoever reads the new generation (acquire) sees the
 * change that preceded it (a dead mark, a new entry in the hash).
 */
static void sframe_files_bump(void)
{
	atomic64_inc_return_release(&sframe_files_gen);
}

struct sframe_file *sframe_file_get(struct sframe_file *f)
{
	return refcount_inc_not_zero(&f->ref) ? f : NULL;
}

void sframe_file_put(struct sframe_file *f)
{
	if (!f || !refcount_dec_and_test(&f->ref))
		return;
	sframe_fde_index_put(f->index);
	atomic64_sub(f->len, &sframe_files_bytes);
	kvfree_rcu(f, rcu);
}

struct sframe_file *sframe_files_find(struct inode *inode)
{
	struct sframe_file *f, *found = NULL;

	rcu_read_lock();
	hash_for_each_possible_rcu(sframe_files_hash, f, hnode,
				   (unsigned long)inode) {
		if (f->inode == inode && !sframe_file_dead(f)) {
			found = sframe_file_get(f);
			break;
		}
	}
	rcu_read_unlock();
	return found;
}

/*
 * Drop f from the store: from now on nobody finds it, and walks skip the
 * entries attached to it.  Any context but NMI (fsnotify calls it from a
 * writer's or an unlinker's path).  Its mark goes in the reaper.
 */
static void sframe_file_kill(struct sframe_file *f, bool invalidated)
{
	unsigned long irqflags;
	bool was_hashed;

	spin_lock_irqsave(&sframe_files_lock, irqflags);
	if (f->dead) {
		spin_unlock_irqrestore(&sframe_files_lock, irqflags);
		return;
	}
	WRITE_ONCE(f->dead, true);
	was_hashed = f->hashed;
	if (was_hashed) {
		f->hashed = false;
		hash_del_rcu(&f->hnode);
		list_del(&f->node);
		sframe_files_nr--;
		list_add_tail(&f->dead_node, &sframe_files_dead);
	}
	spin_unlock_irqrestore(&sframe_files_lock, irqflags);
	sframe_files_bump();
	if (invalidated)
		atomic64_inc(&sframe_files_invalidated);
	if (was_hashed)
		queue_work(system_unbound_wq, &sframe_files_reap_work);
}

/* Destroy the marks of dropped entries; drops the store's reference. */
static void sframe_files_reap(struct work_struct *work)
{
	unsigned long irqflags;
	struct sframe_file *f, *next;
	LIST_HEAD(dead);

	spin_lock_irqsave(&sframe_files_lock, irqflags);
	list_splice_init(&sframe_files_dead, &dead);
	spin_unlock_irqrestore(&sframe_files_lock, irqflags);
	/* Each entry was hashed once and is here once: a bounded list. */
	list_for_each_entry_safe(f, next, &dead, dead_node) {
		list_del(&f->dead_node);
		fsnotify_destroy_mark(&f->mark, sframe_files_group);
		/* The mark's first reference: ->free_mark follows. */
		fsnotify_put_mark(&f->mark);
		sframe_file_put(f); /* the store's */
	}
}

static int sframe_files_handle_event(struct fsnotify_mark *mark, u32 mask,
				     struct inode *inode, struct inode *dir,
				     const struct qstr *name, u32 cookie)
{
	struct sframe_file *f = container_of(mark, struct sframe_file, mark);

	/*
	 * An open for writing ends the entry even before a byte is
	 * written: a shared writable mapping changes the file without any
	 * further event.  A change of attributes matters only when it is
	 * the last link going.
	 */
	if ((mask & (FS_MODIFY | FS_DELETE_SELF | FS_UNMOUNT)) ||
	    ((mask & FS_OPEN) && inode_is_open_for_write(f->inode)) ||
	    ((mask & FS_ATTRIB) && !READ_ONCE(f->inode->i_nlink)))
		sframe_file_kill(f, true);
	return 0;
}

/* fsnotify destroys the mark itself: inode evicted, filesystem unmounted. */
static void sframe_files_freeing_mark(struct fsnotify_mark *mark,
				      struct fsnotify_group *group)
{
	sframe_file_kill(container_of(mark, struct sframe_file, mark), true);
}

/* fsnotify's last call about the mark: the mark's reference goes. */
static void sframe_files_free_mark(struct fsnotify_mark *mark)
{
	sframe_file_put(container_of(mark, struct sframe_file, mark));
}

static const struct fsnotify_ops sframe_files_ops = {
	.handle_inode_event = sframe_files_handle_event,
	.freeing_mark = sframe_files_freeing_mark,
	.free_mark = sframe_files_free_mark,
};

/* The file is still the one that was read: nothing changed it since. */
static bool sframe_file_unchanged(const struct sframe_file *f, u64 iversion)
{
	struct timespec64 now = sframe_inode_ctime(f->inode);

	/* i_version stays put on filesystems without it: ctime and size. */
	return !inode_is_open_for_write(f->inode) &&
	       timespec64_equal(&now, &f->ctime) &&
	       i_size_read(f->inode) == f->file_size &&
	       inode_query_iversion(f->inode) == iversion;
}

/*
 * How many text bytes of each executable segment the validated section
 * covers: a mapping's entry covers one segment (sframe_register_file()),
 * and what it lists must add up to its own text.  One pass over the
 * FDEs, already bounded by the validation; process context.
 */
static int sframe_file_count_covered(struct sframe_file *f)
{
	const struct sframe_elf_load *load;
	struct sframe_fde fde;
	u32 i, k;
	int ret;

	for (i = 0; i < f->sec.num_fdes; i++) {
		if (!(i % 4096))
			cond_resched();
		ret = sframe_get_fde(&f->sec, i, &fde);
		if (ret)
			return ret;
		if (sframe_fde_skipped(&fde))
			continue;
		for (k = 0; k < f->text.nr_loads; k++) {
			load = &f->text.loads[k];
			if (fde.func_start >= load->vaddr &&
			    fde.func_start - load->vaddr < load->memsz) {
				f->load_covered[k] += min(fde.func_size,
					load->memsz - (fde.func_start - load->vaddr));
				break;
			}
		}
	}
	return 0;
}

/* Read, validate and describe the section of f, for f->text. */
static int sframe_file_check(struct sframe_file *f, struct file *file,
			     u64 sframe_vaddr)
{
	struct sframe_source src = { .kbase = f->data, .size = f->len };
	int ret;

	ret = sframe_elf_read_text(file, &f->text);
	if (ret)
		return ret;
	if (sframe_vaddr >= TASK_SIZE_MAX ||
	    f->len > TASK_SIZE_MAX - sframe_vaddr)
		return -EINVAL;
	ret = sframe_section_init(&f->sec, &src, sframe_vaddr, f->len);
	if (ret)
		return ret;
	ret = sframe_fde_index_validate(&f->sec, f->text.text_lo,
					f->text.text_hi - f->text.text_lo,
					&f->index, &f->found);
	if (!ret)
		ret = sframe_file_count_covered(f);
	if (ret)
		return ret;
	f->sec.src = NULL; /* the source lives on this stack */
	f->table = f->index ? sframe_fde_index_table(f->index) : NULL;
	return 0;
}

/* Under sframe_files_lock: the live entry of inode. */
static struct sframe_file *sframe_files_lookup_locked(struct inode *inode)
{
	struct sframe_file *f;

	hash_for_each_possible(sframe_files_hash, f, hnode,
			       (unsigned long)inode) {
		if (f->inode == inode)
			return f;
	}
	return NULL;
}

/* Publish f, replacing the entry of its file if flags allow. */
static int sframe_file_insert(struct sframe_file *f, u32 flags)
{
	unsigned long irqflags;
	struct sframe_file *old;

	spin_lock_irqsave(&sframe_files_lock, irqflags);
	/* An event since the mark was added: the file is not what we read. */
	if (f->dead) {
		spin_unlock_irqrestore(&sframe_files_lock, irqflags);
		return -EAGAIN;
	}
	old = sframe_files_lookup_locked(f->inode);
	if (old && !(flags & SFRAME_FILE_F_REPLACE)) {
		spin_unlock_irqrestore(&sframe_files_lock, irqflags);
		return -EEXIST;
	}
	if (!old && sframe_files_nr >= SFRAME_FILE_MAX_ENTRIES) {
		spin_unlock_irqrestore(&sframe_files_lock, irqflags);
		return -ENOSPC;
	}
	f->id = ++sframe_files_seq;
	f->hashed = true;
	refcount_inc(&f->ref); /* the store's */
	hash_add_rcu(sframe_files_hash, &f->hnode, (unsigned long)f->inode);
	list_add_tail(&f->node, &sframe_files_list);
	sframe_files_nr++;
	spin_unlock_irqrestore(&sframe_files_lock, irqflags);
	if (old)
		sframe_file_kill(old, false);
	sframe_files_bump();
	return 0;
}

int sframe_file_supply(struct file *file, const void __user *data, u64 len,
		       u64 sframe_vaddr, u32 flags, u64 *id)
{
	/* An overlayfs file is mapped as the file under it. */
	struct inode *inode = d_real_inode(file->f_path.dentry);
	struct sframe_file *f;
	u64 iversion;
	int ret;

	if (!len)
		return -EINVAL;
	if (len > SFRAME_MAX_SECTION_SIZE)
		return -E2BIG;
	if (inode_is_open_for_write(inode))
		return -ETXTBSY;
	ret = sframe_charge_within(&sframe_files_bytes, len,
				   sframe_files_max_bytes());
	if (ret)
		return ret;
	/* Charged to the caller's memory cgroup: the supplier's. */
	f = kvzalloc(struct_size(f, data, len),
		     GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!f) {
		atomic64_sub(len, &sframe_files_bytes);
		return -ENOMEM;
	}
	refcount_set(&f->ref, 1); /* ours, until the end of this call */
	f->len = len;
	f->inode = inode;
	f->dev = new_encode_dev(inode->i_sb->s_dev);
	f->ino = inode->i_ino;
	atomic64_set(&f->attaches, 0);
	/* What the file is before it is read: checked again once watched. */
	iversion = inode_query_iversion(inode);
	f->ctime = sframe_inode_ctime(inode);
	f->file_size = i_size_read(inode);
	INIT_LIST_HEAD(&f->dead_node);

	ret = -EFAULT;
	if (copy_from_user(f->data, data, len))
		goto put;
	ret = sframe_file_check(f, file, sframe_vaddr);
	if (ret)
		goto put;

	fsnotify_init_mark(&f->mark, sframe_files_group);
	f->mark.mask = SFRAME_FILE_EVENTS;
	refcount_inc(&f->ref); /* the mark's */
	ret = fsnotify_add_inode_mark(&f->mark, inode, 0);
	if (ret) {
		fsnotify_put_mark(&f->mark);
		goto put;
	}
	/* Watched from here on; a change before that is seen here. */
	if (!sframe_file_unchanged(f, iversion))
		sframe_file_kill(f, false);
	ret = sframe_file_insert(f, flags);
	if (ret) {
		fsnotify_destroy_mark(&f->mark, sframe_files_group);
		fsnotify_put_mark(&f->mark);
		goto put;
	}
	*id = f->id;
put:
	sframe_file_put(f);
	return ret;
}

int sframe_file_remove(u64 id, struct inode *inode)
{
	unsigned long irqflags;
	struct sframe_file *f, *found = NULL;

	spin_lock_irqsave(&sframe_files_lock, irqflags);
	if (id) {
		/* At most SFRAME_FILE_MAX_ENTRIES steps, privileged callers. */
		list_for_each_entry(f, &sframe_files_list, node) {
			if (f->id == id) {
				found = f;
				break;
			}
		}
	} else {
		found = sframe_files_lookup_locked(inode);
	}
	if (found)
		found = sframe_file_get(found);
	spin_unlock_irqrestore(&sframe_files_lock, irqflags);
	if (!found)
		return -ENOENT;
	sframe_file_kill(found, false);
	sframe_file_put(found);
	return 0;
}

static void sframe_file_describe(const struct sframe_file *f,
				 struct sframe_file_info *info)
{
	*info = (struct sframe_file_info){
		.id = f->id,
		.dev = f->dev,
		.ino = f->ino,
		.file_size = f->file_size,
		.sframe_len = f->len,
		.sframe_vaddr = f->sec.sec_addr,
		.text_vaddr = f->text.text_lo,
		.text_len = f->text.text_hi - f->text.text_lo,
		.covered_bytes = f->found.covered_bytes,
		.attaches = atomic64_read(&f->attaches),
		.version = f->sec.version,
		.nr_fdes = f->sec.num_fdes,
		.nr_fdes_skipped = f->found.fdes_skipped,
	};
}

int sframe_file_list(struct sframe_file_info *out, u32 max, u32 *nr)
{
	unsigned long irqflags;
	struct sframe_file *f;
	u32 n = 0;

	spin_lock_irqsave(&sframe_files_lock, irqflags);
	/* At most SFRAME_FILE_MAX_ENTRIES steps. */
	list_for_each_entry(f, &sframe_files_list, node) {
		if (n < max)
			sframe_file_describe(f, &out[n]);
		n++;
	}
	spin_unlock_irqrestore(&sframe_files_lock, irqflags);
	*nr = n;
	return 0;
}

u32 sframe_files_count(void)
{
	return READ_ONCE(sframe_files_nr);
}

void sframe_file_attached(struct sframe_file *f)
{
	atomic64_inc(&f->attaches);
	atomic64_inc(&sframe_files_attaches);
}

void sframe_files_stats(struct sframe_stats *st)
{
	st->file_entries = sframe_files_count();
	st->file_bytes = atomic64_read(&sframe_files_bytes);
	st->file_bytes_limit = sframe_files_max_bytes();
	st->file_attaches = atomic64_read(&sframe_files_attaches);
	st->file_invalidated = atomic64_read(&sframe_files_invalidated);
}

int sframe_files_init(void)
{
	/*
	 * DUPS: a replacing entry watches the inode before the entry it
	 * replaces is dropped, so one inode may have two of our marks.
	 */
	sframe_files_group = fsnotify_alloc_group(&sframe_files_ops,
						  FSNOTIFY_GROUP_DUPS);
	return PTR_ERR_OR_ZERO(sframe_files_group);
}

void sframe_files_exit(void)
{
	unsigned long irqflags;
	struct sframe_file *f;

	/* Every live entry to the reaper; at most SFRAME_FILE_MAX_ENTRIES. */
	for (;;) {
		spin_lock_irqsave(&sframe_files_lock, irqflags);
		f = list_first_entry_or_null(&sframe_files_list,
					     struct sframe_file, node);
		/* Held: an event may drop it (and the reaper free it) meanwhile. */
		if (f)
			f = sframe_file_get(f);
		spin_unlock_irqrestore(&sframe_files_lock, irqflags);
		if (!f)
			break;
		sframe_file_kill(f, false);
		sframe_file_put(f);
	}
	flush_work(&sframe_files_reap_work);
	/* Each mark holds the group; ->free_mark runs from fsnotify's reaper. */
	fsnotify_put_group(sframe_files_group);
	fsnotify_wait_marks_destroyed();
}
