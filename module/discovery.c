// SPDX-License-Identifier: GPL-2.0
/*
 * Discovery of .sframe sections in mapped files.
 *
 * A stock distribution's glibc tells the kernel nothing about the
 * libraries it maps, and a profiler cannot ask every program to register
 * itself.  So when a walk reaches a PC that no registered section covers,
 * and the PC lies in an executable mapping of a file, the module reads the
 * file's ELF header and program headers, finds PT_GNU_SFRAME, computes the
 * load bias from the mapping, and registers the section (which is mapped
 * with the file: it lives in a PT_LOAD) exactly as a program would.  A
 * PC that this does not cover (no section in the file, a bad one, or one
 * refused because a registered section overlaps it) gets a "none" entry
 * for the free part of its mapping, so the file is read once per mapping
 * (per free part of it).
 *
 * The file store (file_store.c) comes first: a section a privileged
 * service supplied for the file covers the mapping by reference, with no
 * read of the file.  A "none" entry made before the store had the file is
 * stale once the store changes, and so is an entry of a file the store
 * has dropped: both are erased here and the mapping is looked at again.
 *
 * The module parameter `discovery` turns this off, e.g. where a profiler
 * should see only what programs register (or what the LD_AUDIT library of
 * libsframe-client registers for them).
 */
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "compat.h"
#include "discovery.h"
#include "elf_file.h"
#include "file_store.h"
#include "registry.h"
#include "stats.h"

static bool discovery = true;
module_param(discovery, bool, 0644);
MODULE_PARM_DESC(discovery,
		 "Find the .sframe of mapped ELF files without registration (default: on)");

bool sframe_discovery_enabled(void)
{
	return READ_ONCE(discovery);
}

struct sframe_mapping {
	unsigned long start, end; /* the executable VMA */
	unsigned long offset;     /* file offset mapped at start */
};

/*
 * Cover the mapping map of file for mm: from the file store if it has a
 * section for the file, else from the file's own PT_GNU_SFRAME.  Returns
 * 0 (registered, or already there), or an error: no section.
 */
static int sframe_discover_file(struct mm_struct *mm, struct file *file,
				const struct sframe_mapping *map)
{
	struct sframe_elf_text text;
	struct sframe_file *stored;
	u64 bias;
	int ret;

	stored = sframe_files_find(file_inode(file));
	if (stored) {
		ret = sframe_register_file(mm, stored, map->start, map->offset);
		sframe_file_put(stored);
		if (!ret || ret == -EEXIST)
			return 0;
	}

	ret = sframe_elf_read_text(file, &text);
	if (ret)
		return ret;
	if (!text.has_sframe ||
	    sframe_elf_mapped_load(&text, map->start, map->offset, &bias) < 0)
		return -ENOENT;
	ret = sframe_register_section(mm, bias + text.sframe_vaddr,
				      text.sframe_len, bias + text.text_lo,
				      text.text_hi - text.text_lo,
				      SFRAME_SOURCE_DISCOVERED, file_inode(file));
	if (ret == -EEXIST)
		ret = 0;
	else if (!ret)
		atomic64_inc(&sframe_counters.sections_discovered);
	return ret;
}

int sframe_discover(unsigned long pc)
{
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	struct sframe_mapping map;
	struct file *file = NULL;
	u64 files_gen;
	int ret;

	if (!mm)
		return -ENOENT;
	mmap_read_lock(mm);
	vma = sframe_next_vma(mm, pc);
	if (vma && vma->vm_start <= pc && (vma->vm_flags & VM_EXEC) &&
	    vma->vm_file) {
		file = get_file(vma->vm_file);
		map.start = vma->vm_start;
		map.end = vma->vm_end;
		map.offset = vma->vm_pgoff << PAGE_SHIFT;
	}
	mmap_read_unlock(mm);
	if (!file)
		return -ENOENT;

	/* Before the store is asked: a supply after this makes "none" stale. */
	files_gen = sframe_files_generation();
	sframe_registry_drop_stale(mm, pc);
	ret = sframe_discover_file(mm, file, &map);
	fput(file);
	/*
	 * Whatever the outcome, remember it for the mapping, so later PCs
	 * there do not read the file again: a section registered covers pc;
	 * if it did not (no .sframe, a bad one, or EEXIST: a section the
	 * program registered overlaps the file's text without covering pc),
	 * a "none" entry covers the free part of the mapping around pc.
	 * Does nothing if pc is covered.
	 */
	sframe_register_none(mm, pc, map.start, map.end, files_gen);
	return ret;
}
