/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the module reads of an ELF file: its executable PT_LOAD segments
 * (the text, and how a mapping of the file finds its load bias) and its
 * PT_GNU_SFRAME.  Shared by discovery (a mapped file's own .sframe) and
 * the file store (a section supplied for a file).
 */
#ifndef SFRAME_ELF_FILE_H
#define SFRAME_ELF_FILE_H

#include <linux/fs.h>
#include <linux/types.h>

#include "sframe_unwind.h"

struct sframe_elf_load {
	u64 vaddr, offset, filesz, memsz;
};

struct sframe_elf_text {
	/* The executable PT_LOADs, in program header order. */
	struct sframe_elf_load loads[SFRAME_FILE_MAX_LOADS];
	u32 nr_loads;
	u64 text_lo, text_hi;  /* [lo, hi): every executable segment */
	u64 sframe_vaddr;      /* PT_GNU_SFRAME, if has_sframe */
	u64 sframe_len;
	bool has_sframe;
};

/*
 * Read file's ELF header and program headers into *text.  Process
 * context; sleeps.  -ENOEXEC: not a 64-bit little-endian x86-64 executable
 * or shared object, no executable PT_LOAD, or more than
 * SFRAME_FILE_MAX_LOADS of them; -ENOMEM.
 */
int sframe_elf_read_text(struct file *file, struct sframe_elf_text *text);

/*
 * The executable segment that a mapping of the file maps, the mapping
 * starting at start with file offset offset: its index in text->loads,
 * with the file's load bias in *bias; -1 if the mapping maps none.
 */
int sframe_elf_mapped_load(const struct sframe_elf_text *text,
			   unsigned long start, unsigned long offset, u64 *bias);

#endif /* SFRAME_ELF_FILE_H */
