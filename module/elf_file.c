// SPDX-License-Identifier: GPL-2.0
/*
 * The ELF headers of a file, as far as unwinding needs them.  A file is
 * attacker data like any other input: every count is bounded before it
 * sizes a read, and a short read is a bad file.
 */
#include <linux/elf.h>
#include <linux/slab.h>

#include "compat.h"
#include "elf_file.h"

/* Program headers read at most: ld.so allows more, no real object has. */
#define SFRAME_MAX_PHDRS 64

static int sframe_elf_read(struct file *file, void *buf, size_t len, loff_t pos)
{
	ssize_t n = kernel_read(file, buf, len, &pos);

	return n == len ? 0 : -ENOEXEC;
}

int sframe_elf_read_text(struct file *file, struct sframe_elf_text *text)
{
	const Elf64_Phdr *p;
	Elf64_Phdr *phdrs;
	Elf64_Ehdr eh;
	int i, ret;

	memset(text, 0, sizeof(*text));
	text->text_lo = U64_MAX;
	ret = sframe_elf_read(file, &eh, sizeof(eh), 0);
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
	ret = sframe_elf_read(file, phdrs, eh.e_phnum * sizeof(*phdrs),
			      eh.e_phoff);
	if (ret)
		goto out;

	ret = -ENOEXEC;
	for (i = 0; i < eh.e_phnum; i++) {
		p = &phdrs[i];
		if (p->p_type == PT_GNU_SFRAME && p->p_memsz) {
			text->has_sframe = true;
			text->sframe_vaddr = p->p_vaddr;
			text->sframe_len = p->p_memsz;
		}
		if (p->p_type != PT_LOAD || !(p->p_flags & PF_X))
			continue;
		if (text->nr_loads == SFRAME_FILE_MAX_LOADS ||
		    p->p_vaddr + p->p_memsz < p->p_vaddr)
			goto out;
		text->loads[text->nr_loads++] = (struct sframe_elf_load){
			.vaddr = p->p_vaddr,
			.offset = p->p_offset,
			.filesz = p->p_filesz,
			.memsz = p->p_memsz,
		};
		text->text_lo = min(text->text_lo, p->p_vaddr);
		text->text_hi = max(text->text_hi, p->p_vaddr + p->p_memsz);
	}
	if (text->nr_loads && text->text_hi > text->text_lo)
		ret = 0;
out:
	kfree(phdrs);
	return ret;
}

int sframe_elf_mapped_load(const struct sframe_elf_text *text,
			   unsigned long start, unsigned long offset, u64 *bias)
{
	const struct sframe_elf_load *load;
	u32 i;

	for (i = 0; i < text->nr_loads; i++) {
		load = &text->loads[i];
		/* The executable segment this mapping maps (page-aligned). */
		if ((load->offset & PAGE_MASK) <= offset &&
		    offset < load->offset + load->filesz) {
			/* The mapping's first byte is file offset offset. */
			*bias = start - (load->vaddr - load->offset + offset);
			return i;
		}
	}
	return -1;
}
