/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The per-process registry of SFrame sections, keyed by the text range
 * each section describes.
 */
#ifndef SFRAME_REGISTRY_H
#define SFRAME_REGISTRY_H

#include <linux/mm_types.h>

#include "sframe_decode.h"

struct sframe_mm;

/* A copy of one registered section, taken for one lookup. */
struct sframe_range {
	unsigned long text_start; /* [text_start, text_end) */
	unsigned long text_end;
	u64 sframe_addr;
	struct sframe_section sec; /* validated header; sec.src unset */
	bool none;                 /* discovery found no .sframe here */
	bool discovered;           /* registered by discovery, not the
				      program: explicit registrations
				      replace it */
};

int sframe_registry_init(void);
/* Forget every process's registry; called at module exit. */
void sframe_registry_exit(void);

/*
 * Validate and add a section for mm (the caller's).  Errors: see uapi.
 * discovered: found by discovery.c rather than given by the program.
 */
int sframe_register_section(struct mm_struct *mm, u64 sframe_addr,
			    u64 sframe_len, u64 text_start, u64 text_len,
			    bool discovered);
int sframe_unregister_section(struct mm_struct *mm, u64 text_start);
/* Remember that the text at [start, end) has no .sframe (discovery). */
int sframe_register_none(struct mm_struct *mm, unsigned long start,
			 unsigned long end);

/*
 * The registry of mm, or NULL.  The result stays valid while mm has users
 * and the module is held (an open file, a pending work item): only the exit
 * of mm and the module's exit free it.
 */
struct sframe_mm *sframe_mm_find(struct mm_struct *mm);
/* Copy the section covering pc into *range; false if none covers it. */
bool sframe_registry_lookup(struct sframe_mm *smm, unsigned long pc,
			    struct sframe_range *range);
unsigned int sframe_mm_nr_sections(struct sframe_mm *smm);
/* The generation of smm's sections, for sframe_row_cache entries. */
u32 sframe_mm_generation(struct sframe_mm *smm);
struct sframe_row_cache *sframe_mm_row_cache(struct sframe_mm *smm);

#endif /* SFRAME_REGISTRY_H */
