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
 * The module parameter `discovery` turns this off, e.g. where a profiler
 * should see only what programs register (or what the LD_AUDIT library of
 * libsframe-client registers for them).
 */
#include <linux/elf.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "compat.h"
#include "discovery.h"
#include "registry.h"
#include "stats.h"

static bool discovery = true;
module_param(discovery, bool, 0644);
MODULE_PARM_DESC(discovery,
		 "Find the .sframe of mapped ELF files without registration (default: on)");

/* Program headers read at most: ld.so allows more, no real object has. */
#define SFRAME_MAX_PHDRS 64

bool sframe_discovery_enabled(void)
{
	return READ_ONCE(discovery);
}

struct sframe_mapping {
	unsigned long start, end; /* the executable VMA */
	unsigned long offset;     /* file offset mapped at start */
};

static int sframe_read_file(struct file *file, void *buf, size_t len,
			    loff_t pos)
{
	ssize_t n = kernel_read(file, buf, len, &pos);

	return n == len ? 0 : -ENOEXEC;
}

/*
 * Find PT_GNU_SFRAME in file, mapped as map, and register it for mm.
 * Returns 0 (registered, or already there), or an error: no section.
 */
static int sframe_discover_file(struct mm_struct *mm, struct file *file,
				const struct sframe_mapping *map)
{
	const Elf64_Phdr *load = NULL, *sframe = NULL, *p;
	u64 text_lo = U64_MAX, text_hi = 0, bias;
	Elf64_Phdr *phdrs;
	Elf64_Ehdr eh;
	int i, ret;

	ret = sframe_read_file(file, &eh, sizeof(eh), 0);
	if (ret)
		return ret;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_X86_64 ||
	    (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || !eh.e_phnum ||
	    eh.e_phnum > SFRAME_MAX_PHDRS)
		return -ENOEXEC;

	phdrs = kmalloc_array(eh.e_phnum, sizeof(*phdrs), GFP_KERNEL);
	if (!phdrs)
		return -ENOMEM;
	ret = sframe_read_file(file, phdrs, eh.e_phnum * sizeof(*phdrs),
			       eh.e_phoff);
	if (ret)
		goto out;

	for (i = 0; i < eh.e_phnum; i++) {
		p = &phdrs[i];
		if (p->p_type == PT_GNU_SFRAME)
			sframe = p;
		if (p->p_type != PT_LOAD || !(p->p_flags & PF_X))
			continue;
		text_lo = min(text_lo, p->p_vaddr);
		text_hi = max(text_hi, p->p_vaddr + p->p_memsz);
		/* The executable segment this VMA maps (page-aligned). */
		if ((p->p_offset & PAGE_MASK) <= map->offset &&
		    map->offset < p->p_offset + p->p_filesz)
			load = p;
	}
	ret = -ENOENT;
	if (!sframe || !load || !sframe->p_memsz || text_hi <= text_lo)
		goto out;

	/* The mapping's first byte is file offset map->offset. */
	bias = map->start - (load->p_vaddr - load->p_offset + map->offset);
	ret = sframe_register_section(mm, bias + sframe->p_vaddr,
				      sframe->p_memsz, bias + text_lo,
				      text_hi - text_lo,
				      SFRAME_SOURCE_DISCOVERED);
	if (ret == -EEXIST)
		ret = 0;
	else if (!ret)
		atomic64_inc(&sframe_counters.sections_discovered);
out:
	kfree(phdrs);
	return ret;
}

int sframe_discover(unsigned long pc)
{
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	struct sframe_mapping map;
	struct file *file = NULL;
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
	sframe_register_none(mm, pc, map.start, map.end);
	return ret;
}
