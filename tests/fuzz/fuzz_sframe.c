// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target for the SFrame decoder (module/sframe_decode.c).
 *
 * Input: the section bytes.  The decoder must never crash, never trip a
 * sanitizer and never ask the source for bytes outside the section, whatever
 * the bytes are; some runs also inject a read fault or change the section
 * between reads, as user memory can.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sframe_decode.h"
#include "sframe_source_mem.h"

#define SEC_ADDR 0x500000ull

struct racer {
	uint8_t *buf;
	size_t size;
	uint32_t state;
};

static void race(void *arg, uint64_t off, uint32_t len)
{
	struct racer *r = arg;

	(void)off;
	(void)len;
	r->state = r->state * 1103515245u + 12345u;
	r->buf[(r->state >> 8) % r->size] ^= (uint8_t)(r->state >> 24);
}

static void check_row(const struct sframe_row *row)
{
	/* Values the decoder documents; anything else is a decoder bug. */
	if (row->ra.kind > SFRAME_LOC_UNDEFINED ||
	    row->fp.kind > SFRAME_LOC_UNDEFINED)
		abort();
	if (row->outermost != (row->ra.kind == SFRAME_LOC_UNDEFINED))
		abort();
}

/*
 * A lookup with a budget of small units never spends more than it was
 * given nor more than SFRAME_LOOKUP_MAX_UNITS, and runs out with
 * -SFRAME_EBUDGET only when it spent all of it.
 */
static void check_budget(const struct sframe_section *sec, uint64_t pc,
			 uint8_t small)
{
	struct sframe_row row;
	uint32_t budget = small, big = SFRAME_LOOKUP_MAX_UNITS + 1;
	int ret;

	ret = sframe_find_row_budget(sec, pc, &row, &budget);
	if (budget > small || (ret == -SFRAME_EBUDGET && budget))
		abort();
	if (!ret)
		check_row(&row);
	ret = sframe_find_row_budget(sec, pc, &row, &big);
	if (ret == -SFRAME_EBUDGET || !big)
		abort();
}

static int same_loc(const struct sframe_loc *a, const struct sframe_loc *b)
{
	return a->kind == b->kind && a->reg == b->reg &&
	       a->deref == b->deref && a->offset == b->offset;
}

/*
 * The FDE index, where it could be built, answers pc as the search does:
 * the same return and the same row while the section stays as it was
 * (exact), and a documented row in any case.
 */
static void check_index(const struct sframe_section *sec,
			const struct sframe_index *idx, uint64_t pc, int exact)
{
	struct sframe_row a, b;
	int ra, rb;

	if (!idx)
		return;
	rb = sframe_find_row_indexed(sec, idx, pc, &b, NULL);
	if (!rb)
		check_row(&b);
	if (!exact)
		return;
	ra = sframe_find_row(sec, pc, &a);
	if (ra != rb)
		abort();
	if (!ra && (a.start_off != b.start_off || a.cfa_reg != b.cfa_reg ||
		    a.cfa_deref != b.cfa_deref ||
		    a.cfa_offset != b.cfa_offset ||
		    a.cfa_addend != b.cfa_addend ||
		    !same_loc(&a.ra, &b.ra) || !same_loc(&a.fp, &b.fp) ||
		    a.outermost != b.outermost ||
		    a.signal_frame != b.signal_frame))
		abort();
}

/* Index sections of at most this many bytes of index (fuzzing speed). */
#define FUZZ_INDEX_MAX (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sframe_index *idx = NULL;
	struct sframe_validation res;
	uint64_t index_size;
	void *index_mem = NULL;
	int exact, valid;
	struct sframe_mem_stats stats;
	struct sframe_source src;
	struct sframe_section sec;
	struct sframe_fde fde;
	struct sframe_row row;
	struct racer racer;
	uint8_t *buf;
	uint32_t i, j, n;
	uint64_t pc;
	int ret;

	if (!size)
		return 0;
	/* A private copy the racer may change; exact size for ASan. */
	buf = malloc(size);
	if (!buf)
		return 0;
	memcpy(buf, data, size);

	memset(&stats, 0, sizeof(stats));
	sframe_source_mem_init(&src, buf, size);
	src.stats = &stats;
	/* The last byte picks a mode: a fault, a racing section, or none. */
	switch (data[size - 1] & 7) {
	case 1:
		src.fault_at = SFRAME_HDR_SIZE + data[size - 1] % 61 * size / 61;
		break;
	case 2:
		racer.buf = buf;
		racer.size = size;
		racer.state = data[0] | (uint32_t)size << 8;
		src.on_read = race;
		src.on_read_arg = &racer;
		break;
	default:
		break;
	}

	ret = sframe_section_init(&sec, &src, SEC_ADDR, size);
	if (ret)
		goto out;
	valid = !sframe_validate_report(&sec, 0, ~0ull, NULL, 0, &res);
	if (valid && (res.fdes_skipped > sec.num_fdes || res.pad))
		abort();
	(void)sframe_validate(&sec, SEC_ADDR - 0x100000, 0x200000);
	exact = src.fault_at == SFRAME_NO_FAULT && !src.on_read;
	if (!sframe_index_size(&sec, &index_size) &&
	    index_size <= FUZZ_INDEX_MAX) {
		/* The exact size, so ASan sees any read past the index. */
		index_mem = malloc(index_size);
		if (index_mem && !sframe_validate_index(&sec, 0, ~0ull,
							index_mem, index_size))
			idx = index_mem;
	}

	n = sec.num_fdes < 64 ? sec.num_fdes : 64;
	for (i = 0; i < n; i++) {
		if (sframe_get_fde(&sec, i, &fde))
			continue;
		for (j = 0; j < fde.num_fres && j < 16; j++)
			if (!sframe_get_fre(&sec, &fde, j, &row))
				check_row(&row);
		/* Around and inside the function. */
		uint64_t pcs[] = { fde.func_start - 1, fde.func_start,
				   fde.func_start + fde.func_size / 2,
				   fde.func_start + fde.func_size - 1,
				   fde.func_start + fde.func_size };
		/*
		 * A skipped FDE (above SFRAME_MAX_FRES_PER_FDE) gives no row
		 * in its function: in a valid section (sorted, disjoint) left
		 * as it was, no other FDE covers it.  (fde is reused below.)
		 */
		int no_rows = valid && exact && sframe_fde_skipped(&fde) &&
			      fde.func_size;
		for (j = 0; j < sizeof(pcs) / sizeof(pcs[0]); j++) {
			ret = sframe_find_row(&sec, pcs[j], &row);
			if (no_rows && j >= 1 && j <= 3 && !ret)
				abort();
			check_budget(&sec, pcs[j], data[i % size]);
			check_index(&sec, idx, pcs[j], exact);
			if (!ret) {
				check_row(&row);
				if (sframe_find_fde(&sec, pcs[j], &fde))
					continue; /* section changed */
			}
		}
	}
	/* PCs taken from the input itself. */
	for (i = 0; i + 8 <= size && i < 256; i += 8) {
		memcpy(&pc, data + i, 8);
		if (!sframe_find_row(&sec, pc, &row))
			check_row(&row);
		if (!sframe_find_row(&sec, SEC_ADDR + (int32_t)pc, &row))
			check_row(&row);
		check_index(&sec, idx, pc, exact);
		check_index(&sec, idx, SEC_ADDR + (int32_t)pc, exact);
	}
out:
	free(index_mem);
	free(buf);
	if (stats.out_of_range)
		abort();
	return 0;
}
