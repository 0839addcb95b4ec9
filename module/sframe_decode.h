/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SFrame decoder: versions 1, 2 and 3, AMD64.
 *
 * Plain C with no kernel-only calls: the same sframe_decode.c is built into
 * the module and into the host library that unit tests and fuzzers use.
 *
 * The decoder never touches section bytes directly.  It reads them through
 * sframe_source_read(), which each environment defines: the module reads
 * user memory with fault-safe copies, the host library reads a buffer.  The
 * section may change or vanish under the decoder (it lives in user memory),
 * so every read is bounds-checked against the header validated at
 * sframe_section_init() and every failure is an error code, never a crash.
 */
#ifndef SFRAME_DECODE_H
#define SFRAME_DECODE_H

#ifdef __KERNEL__
#include <linux/errno.h>
#include <linux/types.h>
#else
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Defined by the environment; opaque to the decoder. */
struct sframe_source;

/*
 * Copy len bytes at byte offset off of the section into dst.  Returns 0, or
 * -EFAULT when the bytes cannot be read.  The decoder never asks for bytes
 * beyond the section length it was given.
 */
int sframe_source_read(const struct sframe_source *src, uint64_t off,
		       void *dst, uint32_t len);

/*
 * Called by sframe_validate() once every SFRAME_VALIDATE_PAUSE_EVERY FDEs
 * and FREs it checks, so that validating a maximal section (64 MiB, tens
 * of millions of FREs) neither holds a CPU nor outlives a fatal signal.
 * Returns 0 to go on, or a negative errno (-EINTR) that sframe_validate()
 * returns as it is.  The module's reschedules and checks for a fatal
 * signal; the host's does nothing (tests may make it fail).
 */
int sframe_source_pause(const struct sframe_source *src);
#define SFRAME_VALIDATE_PAUSE_EVERY 4096

/*
 * Most FREs one FDE may have and still give rows.  An FDE with more is
 * skipped, not refused: the section is accepted (sframe_validate_report()
 * counts such FDEs) and every lookup of a PC in that function finds no
 * row (-ENOENT, as for a PC no FDE covers), without reading one of its
 * FREs.  Checked at each lookup too, since the section may be rewritten
 * after validation.  The same value is the ABI's (uapi/sframe_unwind.h,
 * where the measurements behind it are): the module includes both
 * headers, and the compiler rejects a redefinition that differs.
 *
 * Why 8192 and not more (issue 28; 65535 is the most a v3 attribute
 * record or the index's 16-bit count can say, v1 and v2 count in 32
 * bits).  What grows with n, the FREs of one FDE:
 *  - A lookup in the section (sframe_find_row_budget(), and
 *    sframe_find_row_in_fde() for FDEs the index sends back to their
 *    FREs) scans the FREs one by one up to the PC: n units.  It cannot
 *    binary-search them: an FRE is 2 to 33 bytes (start of 1, 2 or 4,
 *    info byte, 0 to 7 words of 1, 2 or 4), and nothing in the format
 *    says where the k-th one starts but the k - 1 before it.  This path
 *    serves every FDE of a section without an index (its user past
 *    index_max_user_kb, no memory, text spanning 4 GiB) and, in an
 *    indexed one, the FDEs whose rows the index does not keep (v3
 *    flexible FDEs, a CFA offset beyond 16 bits, an FP offset beyond 8).
 *    The cap is therefore the bound of this scan, and of one lookup:
 *    SFRAME_LOOKUP_MAX_UNITS = 33 + the cap.
 *  - A lookup in the index binary-searches the FDE's rows, kept decoded
 *    in kernel memory (index_row_at()): 1 + ceil(log2 n) comparisons,
 *    14 at 8192, 17 at 65535.  That search would stay small at any u16
 *    count.
 *  - Validation: one unit per FRE, bounded by the section's size and
 *    paused every SFRAME_VALIDATE_PAUSE_EVERY; not per lookup.
 *  - sframe_get_fre() walks j FREs; tools only, never the module.
 * Raising the cap to 65535 would make the worst lookup in the section
 * 65568 units instead of 8225, eight times as long (about 0.4 ms on a
 * current core at 6 ns a unit, 11 ms in qemu's TCG at 170 ns), for one
 * frame of any walk made from a task.  (A walk at sample time, NMI or
 * hard interrupt, has 512 units, so it ends on its budget in any long
 * scan whatever the cap.)  Raising the cap without that would need FDEs
 * above 8192 FREs to be served only by the index's binary search, and
 * skipped wherever the index has no rows for them: a function's coverage
 * would then hang on its user's index quota and on the shape of its
 * rows.  So the cap stays 8192, the named bound of the scan, and an FDE
 * above it loses its own rows only.  8192 is 47 times the longest
 * function measured in Debian's libraries; gcc -O2 reaches it only in
 * rare generated code (a 406 KB function of 9,814 FREs).  The generator
 * (userlib/gen/src/eh_frame.cc) splits longer functions at the cap, so
 * the sections it makes lose nothing.
 */
#define SFRAME_MAX_FRES_PER_FDE 8192

/*
 * Returned by the bounded lookup when the caller's budget of decoding work
 * (see sframe_find_row_budget()) runs out: -SFRAME_EBUDGET.
 */
#define SFRAME_EBUDGET ETIME

#define SFRAME_MAGIC 0xdee2
#define SFRAME_ABI_AMD64_ENDIAN_LITTLE 3

#define SFRAME_F_FDE_SORTED 0x1
#define SFRAME_F_FRAME_POINTER 0x2
#define SFRAME_F_FDE_FUNC_START_PCREL 0x4
/*
 * This project's extension of version 3, never written by gas: in a
 * flexible FRE, a CFA control word with bit 2 set (0 in the spec) is
 * followed by its offset and then one more word, added to the CFA after
 * the load: CFA = *(reg + offset) + addend.  OpenSSL's perlasm describes
 * its realigned frames so (`.cfi_cfa_expression %rsp+N,deref,+8`), and
 * no rule of the spec says it.  The generator (sframe-client gen) writes
 * it only into the sections it makes for this module; libsframe refuses
 * a header with a flag it does not know, so no other reader misreads the
 * extra word.
 */
#define SFRAME_F_X_CFA_ADDEND 0x80

/* DWARF register numbers on AMD64, as SFrame v3 flexible FDEs use them. */
#define SFRAME_REG_RBP 6
#define SFRAME_REG_RSP 7
#define SFRAME_REG_RIP 16

/*
 * Size of the fixed SFrame header.  An auxiliary header of sfh_auxhdr_len
 * bytes (a u8) may follow it; the decoder skips it, since the table offsets
 * count from its end.
 */
#define SFRAME_HDR_SIZE 28

/* A validated section header, plus where its tables are. */
struct sframe_section {
	const struct sframe_source *src;
	uint64_t sec_addr;  /* address of the section's first byte in the
			       unwound process (for PC-relative FDEs) */
	uint64_t sec_size;  /* bytes readable through src */
	uint8_t version;    /* 1, 2 or 3 */
	uint8_t flags;      /* SFRAME_F_* */
	uint8_t abi_arch;
	int8_t fixed_fp_offset; /* 0: not fixed */
	int8_t fixed_ra_offset; /* 0: not fixed (AMD64 has -8) */
	uint32_t num_fdes;
	uint32_t num_fres;
	uint32_t fde_start; /* section offset of the FDE (v3: index) table */
	uint32_t fde_size;  /* bytes per FDE: 17 (v1), 20 (v2), 16 (v3 index) */
	uint32_t fre_start; /* section offset of the FRE sub-section */
	uint32_t fre_len;   /* its length */
};

/* Types of FDE, as far as a lookup is concerned. */
#define SFRAME_PC_INC 0  /* FRE start offsets are increments from start */
#define SFRAME_PC_MASK 1 /* ...are offsets within a repeated block */

/*
 * Version 1 does not record the size of the repeated block of a PC-mask
 * FDE.  On AMD64 the only producer of such FDEs is ld's PLT, whose entries
 * are 16 bytes, so lookups in v1 PC-mask FDEs assume that size.
 */
#define SFRAME_V1_PCMASK_BLOCK 16

/* One function descriptor, version independent. */
struct sframe_fde {
	uint64_t func_start;   /* absolute address of the function */
	uint32_t func_size;
	uint32_t fre_off;      /* offset of its first FRE in the FRE
				  sub-section (v3: past the attribute
				  record) */
	uint32_t num_fres;
	uint8_t fre_type;      /* SFRAME_FRE_TYPE_ADDR1/2/4: 0, 1, 2 */
	uint8_t pc_type;       /* SFRAME_PC_INC or SFRAME_PC_MASK */
	uint8_t rep_size;      /* block size for SFRAME_PC_MASK (v1: 0) */
	uint8_t flex;          /* v3 AMD64 flexible FDE */
	bool signal_frame;     /* v3 signal frame bit */
};

/*
 * An FDE that gives no rows: more FREs than SFRAME_MAX_FRES_PER_FDE.
 * sframe_get_fde() decodes it (num_fres says how many), lookups in its
 * function find no row, and validation counts it without reading its FREs.
 */
static inline bool sframe_fde_skipped(const struct sframe_fde *fde)
{
	return fde->num_fres > SFRAME_MAX_FRES_PER_FDE;
}

/* Where a register's value in the caller comes from. */
enum sframe_loc_kind {
	SFRAME_LOC_SAME = 0,      /* unchanged from the callee */
	SFRAME_LOC_CFA_OFFSET,    /* saved at CFA + offset */
	SFRAME_LOC_REG_OFFSET,    /* reg + offset (dereferenced if deref) */
	SFRAME_LOC_UNDEFINED,     /* not recoverable */
};

struct sframe_loc {
	uint8_t kind;   /* enum sframe_loc_kind */
	uint8_t reg;    /* DWARF register, for SFRAME_LOC_REG_OFFSET */
	bool deref;     /* for SFRAME_LOC_REG_OFFSET */
	int32_t offset;
};

/* The unwind rule for one PC. */
struct sframe_row {
	uint32_t start_off;    /* FRE start offset within the function */
	/*
	 * CFA = value of cfa_reg + cfa_offset, loaded from if cfa_deref, plus
	 * cfa_addend (SFRAME_F_X_CFA_ADDEND; 0 otherwise).
	 */
	uint8_t cfa_reg;       /* SFRAME_REG_RSP or SFRAME_REG_RBP (v3 flex:
				  any DWARF register) */
	bool cfa_deref;
	int32_t cfa_offset;
	int32_t cfa_addend;
	struct sframe_loc ra;  /* AMD64 non-flex: CFA + fixed_ra_offset */
	struct sframe_loc fp;  /* AMD64 non-flex: CFA + offset, or SAME */
	bool outermost;        /* RA undefined: the walk ends here, done */
	bool signal_frame;
};

/*
 * Read and validate the header of a section of size bytes found at sec_addr
 * in the unwound process.  Returns 0, or:
 *   -ENOEXEC     bad magic
 *   -EOPNOTSUPP  version, ABI/arch or flags not read by this decoder (or
 *                no fixed RA offset, which every AMD64 section has)
 *   -EINVAL      tables that do not fit in size bytes, or inconsistent counts
 *   -EFAULT      the header could not be read
 */
int sframe_section_init(struct sframe_section *sec,
			const struct sframe_source *src, uint64_t sec_addr,
			uint64_t size);

/*
 * Decode FDE number i (0 <= i < num_fdes).  Returns 0, -EINVAL (i out of
 * range, a field that does not fit the section), -EOPNOTSUPP (a v3 FDE type
 * this decoder does not know) or -EFAULT.  An FDE above
 * SFRAME_MAX_FRES_PER_FDE decodes (sframe_fde_skipped() tells it).
 */
int sframe_get_fde(const struct sframe_section *sec, uint32_t i,
		   struct sframe_fde *fde);

/*
 * Decode FRE number j (0 <= j < fde->num_fres) of fde into row.  Walks the
 * variable-length FREs from the first, so it costs j + 1 FRE reads, for
 * skipped FDEs too (tools may show their rows; the module never calls it).
 * Returns 0, -EINVAL, or -EFAULT.
 */
int sframe_get_fre(const struct sframe_section *sec,
		   const struct sframe_fde *fde, uint32_t j,
		   struct sframe_row *row);

/*
 * Check the whole section once: every FDE decodes, FDEs are sorted and do
 * not overlap, every FDE lies in [text_start, text_start + text_len), the
 * FDEs' FRE counts add up to the header's, every FRE decodes inside the FRE
 * sub-section with increasing start offsets below the function size.  An
 * FDE with more than SFRAME_MAX_FRES_PER_FDE FREs is skipped, not refused:
 * its FREs are not read (a lookup never reads them either), only their
 * smallest size checked against the FRE sub-section.  Returns 0, -EINVAL,
 * -EOPNOTSUPP, -EFAULT or what sframe_source_pause() returned (-EINTR).
 */
int sframe_validate(const struct sframe_section *sec, uint64_t text_start,
		    uint64_t text_len);

/* What a validation that succeeded found, besides that it did. */
struct sframe_validation {
	uint64_t covered_bytes;	/* text bytes of the FDEs that give rows */
	uint64_t skipped_bytes;	/* text bytes of the skipped FDEs */
	uint32_t fdes_skipped;	/* FDEs above SFRAME_MAX_FRES_PER_FDE */
	uint32_t pad;		/* 0 */
};

/*
 * Find the FDE covering pc (binary search over the sorted FDEs).
 * Returns 0, -ENOENT (no FDE covers pc), -EINVAL, -EOPNOTSUPP (FDEs not
 * sorted, or an unknown v3 FDE type) or -EFAULT.
 */
int sframe_find_fde(const struct sframe_section *sec, uint64_t pc,
		    struct sframe_fde *fde);

/*
 * Find the unwind rule for pc: its FDE, then the last FRE whose start is at
 * or below pc's offset (modulo rep_size for PC-mask FDEs).
 * Returns 0, -ENOENT (pc not covered, before the function's first FRE, or
 * in a function whose FDE is skipped: above SFRAME_MAX_FRES_PER_FDE),
 * -EINVAL (malformed data), -EOPNOTSUPP (as sframe_find_fde) or -EFAULT.
 * One lookup costs at most SFRAME_LOOKUP_MAX_UNITS units (below).
 */
int sframe_find_row(const struct sframe_section *sec, uint64_t pc,
		    struct sframe_row *row);

/*
 * Units of decoding work: one per read of the FDE table (a binary-search
 * probe, or the final window of FDEs) and one per FRE read.  A lookup
 * makes at most 32 probes (the table is halved each time, num_fdes is a
 * u32) and one window read, and reads at most SFRAME_MAX_FRES_PER_FDE
 * FREs.
 */
#define SFRAME_LOOKUP_MAX_UNITS (32 + 1 + SFRAME_MAX_FRES_PER_FDE)

/*
 * sframe_find_row() spending at most *budget units (see above): *budget
 * is lowered by what the lookup used, and a lookup that would need more
 * stops with -SFRAME_EBUDGET (the walk it serves then ends; nothing is
 * half-done).  budget may be NULL: no bound but SFRAME_LOOKUP_MAX_UNITS.
 */
int sframe_find_row_budget(const struct sframe_section *sec, uint64_t pc,
			   struct sframe_row *row, uint32_t *budget);

/*
 * An index of a section's FDEs and rows, built once (at registration, by
 * the validation) in memory the caller owns, so that a lookup neither
 * searches nor reads the section: a table of buckets, one per 2^shift
 * bytes of text, says which few FDEs may cover a PC; a branch-free search
 * of their start addresses, kept in the index, picks the FDE, whose
 * decoded fields are kept there too, with its rows as the validation
 * decoded them (those of the common AMD64 shape: CFA = SP or FP + a
 * 16-bit offset, RA at the fixed offset, FP saved at an 8-bit offset or
 * unchanged).  An FDE with a row of another shape (v3 flexible FDEs) keeps
 * none: its lookups read its FREs from the section, checked as always.
 *
 * The index is trusted: it is the caller's memory, built from what the
 * validation checked.  So rows come from the section as it was when
 * registered, as the uapi says ("a process that rewrites a registered
 * section in place must unregister and register it again").
 *
 * Its size: 16 bytes per FDE, 8 per FRE, 4 per bucket (no more buckets
 * than FDEs), and a few.
 */
struct sframe_index;

/*
 * Bytes an index of sec needs, into *size.  Returns 0, -E2BIG (the FDEs
 * span 4 GiB or more of text, which the index's 32-bit offsets cannot
 * say), -ENOENT (no FDEs), or what reading the first and last FDE gave.
 */
int sframe_index_size(const struct sframe_section *sec, uint64_t *size);

/*
 * sframe_validate(), and with mem, building the index of sec there on the
 * way: size bytes (as sframe_index_size() gave; 8-byte aligned).  Returns
 * what sframe_validate() returns, or -ENOENT or -E2BIG as
 * sframe_index_size(), or -EINVAL when the section changed so that the
 * index would not fit in size bytes.  On error mem holds no usable index.
 * A skipped FDE is in the index with no rows: its lookups find none.
 */
int sframe_validate_index(const struct sframe_section *sec,
			  uint64_t text_start, uint64_t text_len, void *mem,
			  uint64_t size);

/*
 * sframe_validate_index() (mem NULL: sframe_validate()), telling in *res
 * (may be NULL) what it found: the FDEs skipped, the text bytes with rows.
 * *res is filled on success only (zeroed first).
 */
int sframe_validate_report(const struct sframe_section *sec,
			   uint64_t text_start, uint64_t text_len, void *mem,
			   uint64_t size, struct sframe_validation *res);

/* From sframe_index_find_row(): the FDE's rows are not in the index. */
#define SFRAME_INDEX_READ_FRES 1

/*
 * The row for pc from the index alone: 0, -ENOENT (no FDE covers pc, pc
 * lies before its FDE's first row, or its FDE is skipped: above
 * SFRAME_MAX_FRES_PER_FDE, kept with no rows), -SFRAME_EBUDGET (one unit of
 * *budget, NULL: none, as for a read of the FDE table), or
 * SFRAME_INDEX_READ_FRES: *fde is the FDE covering pc, whose FREs the
 * caller reads (sframe_find_row_in_fde()).  At most 2 + log2(num_fdes)
 * steps to the FDE and 14 in its rows.
 */
int sframe_index_find_row(const struct sframe_index *idx, uint64_t pc,
			  struct sframe_fde *fde, struct sframe_row *row,
			  uint32_t *budget);

/*
 * A row of the common AMD64 shape, pre-reduced for the unwinder's
 * per-frame fast path: CFA = SP or FP + cfa_off, RA at CFA + ra_off, the
 * caller's FP at CFA + fp_off or unchanged.  Made by the row cache
 * (module/row_cache.c) and by sframe_index_find_rule(); the flags above
 * 0x08 are the row cache's own.
 */
#define SFRAME_RULE_FAST	0x01 /* cfa_off, ra_off, fp_off are the row */
#define SFRAME_RULE_CFA_FP	0x02 /* CFA from FP, not SP */
#define SFRAME_RULE_FP_SAVED	0x04 /* caller's FP at CFA + fp_off */

struct sframe_rule {
	int32_t cfa_off;
	int16_t ra_off;
	int16_t fp_off;
	uint8_t flags;	/* SFRAME_RULE_* */
};

/*
 * The row for pc from the index alone as a rule (SFRAME_RULE_FAST set),
 * spending one unit of *budget: what sframe_index_find_row() finds,
 * without decoding it into a struct sframe_row.  Returns the rule, or no
 * rule (flags 0) with *budget untouched wherever the full lookup must
 * decide: no FDE or row covers pc, the FDE's rows are not in the index,
 * the row is outermost or a signal frame's, or *budget is spent (the full
 * lookup then reports -SFRAME_EBUDGET).  By value: 12 bytes, returned in
 * two registers.
 */
struct sframe_rule sframe_index_find_rule(const struct sframe_index *idx,
					  uint64_t pc, uint32_t *budget);

/*
 * The row for pc in fde (which covers pc), reading its FREs; spends one
 * unit of *budget per FRE read, as sframe_find_row_budget() does.
 * Returns as sframe_find_row_budget().
 */
int sframe_find_row_in_fde(const struct sframe_section *sec,
			   const struct sframe_fde *fde, uint64_t pc,
			   struct sframe_row *row, uint32_t *budget);

/*
 * sframe_find_row_budget() through idx (built for sec): from the index, or
 * reading the FREs of the FDE it gives; with idx NULL, by searching the
 * section.  Gives the same row or error as the search, for the section
 * the index was built from.
 */
int sframe_find_row_indexed(const struct sframe_section *sec,
			    const struct sframe_index *idx, uint64_t pc,
			    struct sframe_row *row, uint32_t *budget);

#ifdef __cplusplus
}
#endif

#endif /* SFRAME_DECODE_H */
