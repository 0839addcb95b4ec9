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
	u64 vaddr, offset, filesz;
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
 * The load bias of a mapping of the file that starts at start with file
 * offset offset, found from the executable segment it maps; false if it
 * maps none.
 */
bool sframe_elf_bias(const struct sframe_elf_text *text, unsigned long start,
		     unsigned long offset, u64 *bias);

#endif /* SFRAME_ELF_FILE_H */
