// SPDX-License-Identifier: GPL-2.0
/*
 * SFrame decoder: versions 1, 2 and 3, AMD64 only.
 *
 * The authority for the format is binutils' libsframe/doc/sframe-spec.texi
 * and include/sframe.h.  In short:
 *
 *   header (28 bytes) + auxiliary header (sfh_auxhdr_len bytes)
 *   FDE table at hdr_len + sfh_fdeoff, sfh_num_fdes fixed-size entries:
 *     v1: 17 bytes {s32 start, u32 size, u32 fre_off, u32 num_fres, u8 info}
 *     v2: 20 bytes, v1 + {u8 rep_size, u16 padding}
 *     v3: 16 bytes {s64 start, u32 size, u32 fre_off}; the rest of the
 *         descriptor, {u16 num_fres, u8 info, u8 info2, u8 rep_size}, sits
 *         at fre_off in the FRE sub-section, right before the FREs
 *   FRE sub-section at hdr_len + sfh_freoff, sfh_fre_len bytes of
 *   variable-length FREs: start offset (1, 2 or 4 bytes), info byte, then
 *   N data words of 1, 2 or 4 bytes.
 *
 * The start address of a function is relative to the start-address field of
 * its FDE when SFRAME_F_FDE_FUNC_START_PCREL is set (binutils 2.45 and
 * later), else to the first byte of the .sframe section.
 *
 * All multi-byte fields are little-endian (AMD64 is the only ABI read here).
 *
 * Everything read from the section is untrusted: it lives in user memory
 * and may change between two reads.  So every value is checked where it is
 * used, every offset is computed in 64 bits from 32-bit fields (no sum can
 * wrap), every loop is bounded by a count that was checked against the
 * section size, and no read leaves [0, sec_size).
 *
 * Reads are kept few and small because in the kernel each one is a user
 * copy: the binary search reads only the start-address field of each probed
 * FDE until the remaining candidates fit in FDE_WINDOW bytes, which it then
 * reads whole (the FDE found comes from that copy), and FREs are read in
 * chunks of at most FRE_CHUNK bytes.  A v1 lookup in a table of 5000 FDEs
 * makes about 11 reads: 9 probes, the window and one chunk of FREs.  With
 * the index the validation can build (sframe_validate_index()), most
 * lookups read nothing: see struct sframe_index.
 */

#include "sframe_decode.h"

#ifdef __KERNEL__
#include <linux/string.h>
#else
#include <string.h>
#endif

/*
 * For the per-FRE and per-read helpers of the lookup loops: inlined, they
 * keep the FDE's fields in registers across the loop.  The kernel defines
 * it in compiler_types.h.
 */
#ifndef __always_inline
#define __always_inline inline __attribute__((__always_inline__))
#endif

#define SFRAME_U32_MAX ((uint32_t)~0u)

/* Version-specific sizes of the fixed tables. */
#define SFRAME_V1_FDE_SIZE 17
#define SFRAME_V2_FDE_SIZE 20
#define SFRAME_V3_FDE_SIZE 16
#define SFRAME_V3_ATTR_SIZE 5

/* sfde_func_info / sfda_func_info */
#define SFRAME_FUNC_FRE_TYPE(info) ((info) & 0xf)
#define SFRAME_FUNC_PC_TYPE(info) (((info) >> 4) & 0x1)
#define SFRAME_V3_FUNC_SIGNAL_P(info) (((info) >> 7) & 0x1)
/* sfda_func_info2 (v3) */
#define SFRAME_V3_FDE_TYPE(info2) ((info2) & 0x1f)
#define SFRAME_V3_FDE_TYPE_DEFAULT 0
#define SFRAME_V3_FDE_TYPE_FLEX 1

/* FRE info byte */
#define SFRAME_FRE_BASE_REG_SP(info) ((info) & 0x1)
#define SFRAME_FRE_WORD_COUNT(info) (((info) >> 1) & 0xf)
#define SFRAME_FRE_WORD_SIZE_CODE(info) (((info) >> 5) & 0x3)

/* v3 flexible FDE control word */
#define SFRAME_FLEX_REG_P(ctl) ((ctl) & 0x1)
#define SFRAME_FLEX_DEREF_P(ctl) (((ctl) >> 1) & 0x1)
#define SFRAME_FLEX_X_ADDEND_P(ctl) (((ctl) >> 2) & 0x1) /* see the flag */
#define SFRAME_FLEX_REGNUM(ctl) ((ctl) >> 3)

/*
 * Flags each version defines.  An unknown flag may change how the tables
 * are read (SFRAME_F_FDE_FUNC_START_PCREL did), so it is refused rather
 * than ignored.  v3 dropped SFRAME_F_FRAME_POINTER.
 */
#define SFRAME_V1_FLAGS (SFRAME_F_FDE_SORTED | SFRAME_F_FRAME_POINTER)
#define SFRAME_V2_FLAGS (SFRAME_V1_FLAGS | SFRAME_F_FDE_FUNC_START_PCREL)
#define SFRAME_V3_FLAGS (SFRAME_F_FDE_SORTED | SFRAME_F_FDE_FUNC_START_PCREL | \
			 SFRAME_F_X_CFA_ADDEND)

/*
 * Bytes of FREs read at once.  The largest FRE the decoder accepts on
 * AMD64 is 33 bytes: a 4-byte start offset, the info byte and 7 data words
 * of 4 bytes (v3 flexible FDE: CFA, RA and FP each as a control word plus
 * an offset, and the CFA's addend of SFRAME_F_X_CFA_ADDEND).  Bigger FREs
 * are refused before their words are read, so a chunk always holds at
 * least one whole FRE.
 */
#define FRE_CHUNK 64

static inline uint16_t get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) |
	       ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t get_le64(const uint8_t *p)
{
	return (uint64_t)get_le32(p) | ((uint64_t)get_le32(p + 4) << 32);
}

/*
 * Read len bytes at section offset off.  The bound is checked here once
 * more, so a caller's mistake turns into -EINVAL, never into a read past
 * the section.
 */
static inline int sec_read(const struct sframe_section *sec, uint64_t off,
			   void *dst, uint32_t len)
{
	if (off > sec->sec_size || len > sec->sec_size - off)
		return -EINVAL;
	if (sframe_source_read(sec->src, off, dst, len))
		return -EFAULT;
	return 0;
}

int sframe_section_init(struct sframe_section *sec,
			const struct sframe_source *src, uint64_t sec_addr,
			uint64_t size)
{
	uint8_t h[SFRAME_HDR_SIZE];
	uint64_t hdr_len, fde_start, fde_end, fre_start, fre_end;
	uint32_t fde_size;
	uint8_t version, flags, allowed;

	/*
	 * Fill in what the reads below need before the header is known, so
	 * that sec_read() bounds them by the caller's size.
	 */
	sec->src = src;
	sec->sec_addr = sec_addr;
	sec->sec_size = size;

	if (size < SFRAME_HDR_SIZE)
		return -EINVAL;
	if (sframe_source_read(src, 0, h, SFRAME_HDR_SIZE))
		return -EFAULT;

	if (get_le16(h) != SFRAME_MAGIC)
		return -ENOEXEC;
	version = h[2];
	flags = h[3];
	switch (version) {
	case 1:
		fde_size = SFRAME_V1_FDE_SIZE;
		allowed = SFRAME_V1_FLAGS;
		break;
	case 2:
		fde_size = SFRAME_V2_FDE_SIZE;
		allowed = SFRAME_V2_FLAGS;
		break;
	case 3:
		fde_size = SFRAME_V3_FDE_SIZE;
		allowed = SFRAME_V3_FLAGS;
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (flags & ~allowed)
		return -EOPNOTSUPP;
	if (h[4] != SFRAME_ABI_AMD64_ENDIAN_LITTLE)
		return -EOPNOTSUPP;
	/*
	 * AMD64 keeps the RA at a fixed CFA offset given in the header;
	 * without one the FREs would have to carry RA offsets, a layout no
	 * AMD64 producer writes and this decoder does not read.
	 */
	if ((int8_t)h[6] == 0)
		return -EOPNOTSUPP;

	sec->version = version;
	sec->flags = flags;
	sec->abi_arch = h[4];
	sec->fixed_fp_offset = (int8_t)h[5];
	sec->fixed_ra_offset = (int8_t)h[6];
	sec->num_fdes = get_le32(h + 8);
	sec->num_fres = get_le32(h + 12);
	sec->fre_len = get_le32(h + 16);

	/*
	 * Sub-section offsets count from the end of the header, auxiliary
	 * header included.  All sums are of 32-bit values in 64 bits, so
	 * none can wrap.
	 */
	hdr_len = SFRAME_HDR_SIZE + (uint64_t)h[7];
	fde_start = hdr_len + get_le32(h + 20);
	fde_end = fde_start + (uint64_t)sec->num_fdes * fde_size;
	fre_start = hdr_len + get_le32(h + 24);
	fre_end = fre_start + sec->fre_len;

	/* The FDE table comes first, the FRE sub-section ends the tables. */
	if (fde_end > fre_start || fre_end > size)
		return -EINVAL;
	/* The struct keeps 32-bit offsets (no real section nears 4 GiB). */
	if (fre_end > SFRAME_U32_MAX)
		return -EINVAL;
	/* Each FRE takes at least 2 bytes: a 1-byte start and the info. */
	if ((uint64_t)sec->num_fres * 2 > sec->fre_len)
		return -EINVAL;

	sec->fde_start = (uint32_t)fde_start;
	sec->fde_size = fde_size;
	sec->fre_start = (uint32_t)fre_start;
	return 0;
}

/* Section offset of FDE i's first byte (its start-address field). */
static inline uint64_t fde_offset(const struct sframe_section *sec,
				  uint32_t i)
{
	return sec->fde_start + (uint64_t)i * sec->fde_size;
}

/*
 * Absolute start address of the FDE copied to b from section offset off:
 * base is the section's address, pcrel says the field counts from itself
 * (SFRAME_F_FDE_FUNC_START_PCREL), wide that it has 8 bytes (v3).  They
 * come as arguments so that the search loops keep them in registers
 * rather than reload them from the section after every read.
 */
static inline uint64_t fde_start_at(uint64_t base, bool pcrel, bool wide,
				    uint64_t off, const uint8_t *b)
{
	int64_t enc = wide ? (int64_t)get_le64(b) :
			     (int64_t)(int32_t)get_le32(b);

	/* Address arithmetic is modulo 2^64, as in the unwound process. */
	return base + (pcrel ? off : 0) + (uint64_t)enc;
}

static inline uint32_t fre_addr_size(uint8_t fre_type)
{
	return 1u << fre_type;	/* ADDR1, ADDR2, ADDR4: 0, 1, 2 */
}

/*
 * Sequential reader over the FRE sub-section that fetches up to FRE_CHUNK
 * bytes at a time, so that walking a function's FREs costs a few user
 * copies rather than one per field.  Bytes are used only from [pos, end);
 * what a chunk holds past end (another function's FREs) is never looked at.
 */
struct fre_cursor {
	const struct sframe_section *sec;
	uint64_t pos;		/* section offset of the next byte to use */
	uint64_t end;		/* no byte at or past end is used */
	uint64_t buf_off;	/* section offset of buf[0] */
	uint32_t buf_len;	/* valid bytes in buf */
	uint8_t buf[FRE_CHUNK];
};

/* Most data words an AMD64 FRE may carry (see read_fre()). */
#define FRE_MAX_WORDS_DEFAULT 2
#define FRE_MAX_WORDS_FLEX 7

/*
 * Point the cursor at byte off of the FRE sub-section with len bytes to
 * use (off + len <= fre_len, checked by the caller), buffer empty.
 */
static inline void cursor_start(struct fre_cursor *c,
				const struct sframe_section *sec,
				uint64_t off, uint64_t len)
{
	c->sec = sec;
	c->pos = sec->fre_start + off;
	c->end = c->pos + len;
	c->buf_off = 0;
	c->buf_len = 0;
}

/*
 * Aim the cursor at fde's first FRE, keeping what its buffer holds (v3:
 * the read of the attribute record brought the first FREs along).
 */
static inline void cursor_fres(struct fre_cursor *c,
			       const struct sframe_section *sec,
			       const struct sframe_fde *fde)
{
	uint32_t words = fde->flex ? FRE_MAX_WORDS_FLEX : FRE_MAX_WORDS_DEFAULT;
	uint64_t max_len;

	c->sec = sec;
	c->pos = sec->fre_start + (uint64_t)fde->fre_off;
	c->end = sec->fre_start + (uint64_t)sec->fre_len;
	/*
	 * The function's FREs cannot extend further than num_fres FREs of
	 * the largest size read_fre() accepts: chunks stop there, so no
	 * byte of the next function's FREs is copied for nothing.
	 */
	max_len = (uint64_t)fde->num_fres *
		  (fre_addr_size(fde->fre_type) + 1 + words * 4);
	if (c->pos <= c->end && max_len < c->end - c->pos)
		c->end = c->pos + max_len;
}

static inline void cursor_init(struct fre_cursor *c,
			       const struct sframe_section *sec,
			       const struct sframe_fde *fde)
{
	c->buf_off = 0;
	c->buf_len = 0;
	cursor_fres(c, sec, fde);
}

/*
 * Make the bytes at the cursor visible: *p points at them and *avail says
 * how many there are, at least want (<= FRE_CHUNK) unless fewer remain
 * before end.  A chunk is read only when the buffer holds fewer, so one
 * check per FRE (want: the largest FRE it may be) covers all its fields.
 */
static __always_inline int cursor_peek(struct fre_cursor *c, uint32_t want,
				       const uint8_t **p, uint32_t *avail)
{
	uint64_t left, have;
	int ret;

	if (c->pos > c->end)
		return -EINVAL;
	left = c->end - c->pos;
	if (c->pos >= c->buf_off && c->pos - c->buf_off <= c->buf_len) {
		have = c->buf_len - (c->pos - c->buf_off);
		if (have > left)
			have = left;
		if (have >= want || have == left) {
			*p = c->buf + (c->pos - c->buf_off);
			*avail = (uint32_t)have;
			return 0;
		}
	}
	have = left < FRE_CHUNK ? left : FRE_CHUNK;
	if (have) {
		ret = sec_read(c->sec, c->pos, c->buf, (uint32_t)have);
		if (ret)
			return ret;
	}
	c->buf_off = c->pos;
	c->buf_len = (uint32_t)have;
	*p = c->buf;
	*avail = (uint32_t)have;
	return 0;
}

/*
 * Decode the FDE whose fde_size bytes, at section offset off, were copied
 * to b.  A v3 FDE continues in the attribute record that heads its FRE
 * data: with a cursor c it is read through c, whose first chunk then also
 * holds the first FREs, and c is left at them; without, it is read alone.
 */
static int decode_fde(const struct sframe_section *sec, uint64_t off,
		      const uint8_t *b, struct sframe_fde *fde,
		      struct fre_cursor *c)
{
	uint64_t data_off, min_bytes;
	uint32_t fre_off;
	uint8_t info, info2 = 0;
	bool pcrel;
	int ret;

	if (c) {
		/* Nothing buffered yet (v3 fills it below). */
		c->buf_off = 0;
		c->buf_len = 0;
	}
	fde->rep_size = 0;
	fde->flex = 0;
	fde->signal_frame = false;
	if (sec->version == 3) {
		uint8_t attr[SFRAME_V3_ATTR_SIZE];
		const uint8_t *a = attr;

		fde->func_size = get_le32(b + 8);
		fre_off = get_le32(b + 12);
		/* The attribute record heads the function's FRE data. */
		if ((uint64_t)fre_off + SFRAME_V3_ATTR_SIZE > sec->fre_len)
			return -EINVAL;
		if (c) {
			uint32_t avail;

			cursor_start(c, sec, fre_off,
				     (uint64_t)sec->fre_len - fre_off);
			ret = cursor_peek(c, FRE_CHUNK, &a, &avail);
			if (!ret && avail < SFRAME_V3_ATTR_SIZE)
				ret = -EINVAL;
		} else {
			ret = sec_read(sec, sec->fre_start + (uint64_t)fre_off,
				       attr, SFRAME_V3_ATTR_SIZE);
		}
		if (ret)
			return ret;
		fde->num_fres = get_le16(a);
		info = a[2];
		info2 = a[3];
		fde->rep_size = a[4];
		fde->signal_frame = SFRAME_V3_FUNC_SIGNAL_P(info);
		data_off = (uint64_t)fre_off + SFRAME_V3_ATTR_SIZE;
	} else {
		fde->func_size = get_le32(b + 4);
		fre_off = get_le32(b + 8);
		fde->num_fres = get_le32(b + 12);
		info = b[16];
		if (sec->version == 2)
			fde->rep_size = b[17];
		data_off = fre_off;
	}

	pcrel = sec->flags & SFRAME_F_FDE_FUNC_START_PCREL;
	fde->func_start = fde_start_at(sec->sec_addr, pcrel, sec->version == 3,
				       off, b);
	fde->fre_type = SFRAME_FUNC_FRE_TYPE(info);
	fde->pc_type = SFRAME_FUNC_PC_TYPE(info);
	if (fde->fre_type > 2)
		return -EINVAL;

	if (sec->version == 3) {
		switch (SFRAME_V3_FDE_TYPE(info2)) {
		case SFRAME_V3_FDE_TYPE_DEFAULT:
			break;
		case SFRAME_V3_FDE_TYPE_FLEX:
			fde->flex = 1;
			break;
		default:
			/* A type from a later spec: cannot be interpreted. */
			return -EOPNOTSUPP;
		}
	}
	/*
	 * v2 and v3 give the size of the repeated block.  v1 does not; there
	 * the only producer of PC-mask FDEs on AMD64 is ld's PLT, whose
	 * entries are SFRAME_V1_PCMASK_BLOCK bytes, and the lookup assumes it.
	 */
	if (fde->pc_type == SFRAME_PC_MASK && sec->version >= 2 &&
	    !fde->rep_size)
		return -EINVAL;

	/*
	 * The FREs must at least fit at their smallest (start offset and
	 * info byte, no data word); their real length is checked as they
	 * are walked.
	 */
	min_bytes = (uint64_t)fde->num_fres *
		    (fre_addr_size(fde->fre_type) + 1);
	if (data_off > sec->fre_len || min_bytes > sec->fre_len - data_off)
		return -EINVAL;
	/*
	 * An FDE with more FREs than SFRAME_MAX_FRES_PER_FDE decodes, and is
	 * skipped by what reads FREs for a lookup (row_in_fde()) and by the
	 * validation: see sframe_fde_skipped().
	 */
	fde->fre_off = (uint32_t)data_off;
	if (c)
		cursor_fres(c, sec, fde);
	return 0;
}

/* Read FDE i and decode it; with c, leave c at its first FRE. */
static int read_fde(const struct sframe_section *sec, uint32_t i,
		    struct sframe_fde *fde, struct fre_cursor *c)
{
	uint8_t b[SFRAME_V2_FDE_SIZE];
	uint64_t off;
	int ret;

	if (i >= sec->num_fdes)
		return -EINVAL;
	off = fde_offset(sec, i);
	ret = sec_read(sec, off, b, sec->fde_size);
	if (ret)
		return ret;
	return decode_fde(sec, off, b, fde, c);
}

int sframe_get_fde(const struct sframe_section *sec, uint32_t i,
		   struct sframe_fde *fde)
{
	return read_fde(sec, i, fde, NULL);
}

/*
 * One FRE as copied from the section, its words not yet interpreted.  A
 * lookup reads FREs until the first one past the PC and turns only the
 * one before it into a row.
 */
struct fre_raw {
	uint32_t start;		/* start offset within the function */
	uint8_t info;
	uint8_t n;		/* data words, at most FRE_MAX_WORDS_FLEX */
	uint8_t wsize;		/* bytes per word: 1, 2 or 4 */
	uint32_t w[FRE_MAX_WORDS_FLEX];	/* zero-extended */
};

/* Word k sign-extended, for offsets (control words are unsigned). */
static inline int32_t fre_sword(const struct fre_raw *f, uint32_t k)
{
	if (f->wsize == 1)
		return (int8_t)f->w[k];
	if (f->wsize == 2)
		return (int16_t)f->w[k];
	return (int32_t)f->w[k];
}

/*
 * Read the FRE at the cursor into f, checking everything its size and
 * position depend on: start inside the function (and the PC-mask block),
 * word size code, word count, and that its bytes lie before the cursor's
 * end.
 */
static __always_inline int read_fre(const struct sframe_section *sec,
				    const struct sframe_fde *fde,
				    struct fre_cursor *c, struct fre_raw *f)
{
	uint32_t asize = fre_addr_size(fde->fre_type);
	uint32_t max_words = fde->flex ? FRE_MAX_WORDS_FLEX :
					 FRE_MAX_WORDS_DEFAULT;
	uint32_t n, code, k, len, avail;
	const uint8_t *p;
	uint32_t start;
	int ret;

	/* The largest FRE is 33 bytes, so a chunk can always hold it. */
	ret = cursor_peek(c, asize + 1 + max_words * 4, &p, &avail);
	if (ret)
		return ret;
	if (avail < asize + 1)
		return -EINVAL;
	if (asize == 1)
		start = p[0];
	else if (asize == 2)
		start = get_le16(p);
	else
		start = get_le32(p);
	f->start = start;
	f->info = p[asize];
	p += asize + 1;

	/*
	 * A row must start inside the function (a zero-sized function may
	 * carry a row at 0, as libsframe allows) and, for a PC-mask FDE,
	 * inside the repeated block.
	 */
	if (start >= fde->func_size && !(start == 0 && fde->func_size == 0))
		return -EINVAL;
	if (fde->pc_type == SFRAME_PC_MASK && fde->rep_size &&
	    start >= fde->rep_size)
		return -EINVAL;

	n = SFRAME_FRE_WORD_COUNT(f->info);
	code = SFRAME_FRE_WORD_SIZE_CODE(f->info);
	/*
	 * AMD64 default FREs carry the CFA offset and maybe the FP offset
	 * (not with a fixed FP offset, which leaves no room for one);
	 * flexible ones up to three pairs.  Zero words (v2 on) mark the
	 * outermost frame.
	 */
	if (code > 2 || n > max_words || (n == 0 && sec->version == 1))
		return -EINVAL;
	if (n == FRE_MAX_WORDS_DEFAULT && !fde->flex && sec->fixed_fp_offset)
		return -EINVAL;
	f->n = (uint8_t)n;
	f->wsize = (uint8_t)(1u << code);

	/*
	 * avail is short of the peeked size only when the cursor's end is
	 * near: then an FRE longer than avail runs past it.
	 */
	len = asize + 1 + (n << code);
	if (len > avail)
		return -EINVAL;
	c->pos += len;
	for (k = 0; k < n; k++) {
		if (code == 0)
			f->w[k] = p[k];
		else if (code == 1)
			f->w[k] = get_le16(p + 2 * k);
		else
			f->w[k] = get_le32(p + 4 * k);
	}
	return 0;
}

/*
 * Turn a v3 flexible control word and its offset into a location for the
 * RA or the FP.  Control word 0 is padding: the entity keeps its default.
 */
static int flex_loc(uint32_t ctl, int32_t off, struct sframe_loc *loc)
{
	if (SFRAME_FLEX_REG_P(ctl)) {
		if (SFRAME_FLEX_REGNUM(ctl) > 0xff)
			return -EINVAL;
		loc->kind = SFRAME_LOC_REG_OFFSET;
		loc->reg = (uint8_t)SFRAME_FLEX_REGNUM(ctl);
		loc->deref = SFRAME_FLEX_DEREF_P(ctl);
		loc->offset = off;
		return 0;
	}
	/*
	 * Not a register: relative to the CFA.  Only "saved at CFA + offset"
	 * (dereferenced) is meaningful for a return address or a saved frame
	 * pointer; a value of CFA + offset cannot be either.
	 */
	if (!SFRAME_FLEX_DEREF_P(ctl))
		return -EINVAL;
	loc->kind = SFRAME_LOC_CFA_OFFSET;
	loc->reg = 0;
	loc->deref = false;
	loc->offset = off;
	return 0;
}

/*
 * Decode the data words of a v3 flexible FRE: pairs of control word and
 * offset for the CFA (with SFRAME_F_X_CFA_ADDEND maybe an addend after
 * it), then the RA, then the FP.  The RA pair may be a single padding word
 * 0 when only the FP follows; absent entities keep their defaults (RA at
 * the fixed offset, FP unchanged or fixed).
 */
static int decode_flex(const struct sframe_section *sec,
		       const struct fre_raw *f, struct sframe_row *row)
{
	uint32_t ctl, k = 0;
	int e, ret;

	if (f->n < 2)
		return -EINVAL;
	ctl = f->w[k++];
	/* The CFA is always register based. */
	if (!SFRAME_FLEX_REG_P(ctl) || SFRAME_FLEX_REGNUM(ctl) > 0xff)
		return -EINVAL;
	row->cfa_reg = (uint8_t)SFRAME_FLEX_REGNUM(ctl);
	row->cfa_deref = SFRAME_FLEX_DEREF_P(ctl);
	row->cfa_offset = fre_sword(f, k++);
	/* (Without the flag the bit is the spec's, written 0 and ignored.) */
	if ((sec->flags & SFRAME_F_X_CFA_ADDEND) && SFRAME_FLEX_X_ADDEND_P(ctl)) {
		/* Something added after a load only: else it is the offset's. */
		if (!row->cfa_deref || k == f->n)
			return -EINVAL;
		row->cfa_addend = fre_sword(f, k++);
	}

	/* e = 0: RA, e = 1: FP */
	for (e = 0; e < 2 && k < f->n; e++) {
		ctl = f->w[k++];
		if (!ctl)
			continue;	/* padding */
		if (k == f->n)
			return -EINVAL;
		/*
		 * gas 2.47 writes a saved FP it cannot express (at *(reg + N)
		 * for a base register other than the FP, from .cfi_escape
		 * expressions) as register 0x1fffffff: the caller's FP is then
		 * not recoverable, and the row still unwinds (found by the
		 * differential check against libsframe 2.47, issue 28).  A
		 * return address like that has no meaning: refused below.
		 */
		if (e == 1 && SFRAME_FLEX_REG_P(ctl) &&
		    SFRAME_FLEX_REGNUM(ctl) > 0xff) {
			row->fp.kind = SFRAME_LOC_UNDEFINED;
			row->fp.reg = 0;
			row->fp.deref = false;
			row->fp.offset = 0;
			k++;
			continue;
		}
		ret = flex_loc(ctl, fre_sword(f, k++), e ? &row->fp : &row->ra);
		if (ret)
			return ret;
	}
	return k < f->n ? -EINVAL : 0;
}

/* Turn an FRE that read_fre() accepted into the unwind rule it gives. */
static int fre_to_row(const struct sframe_section *sec,
		      const struct sframe_fde *fde, const struct fre_raw *f,
		      struct sframe_row *row)
{
	row->start_off = f->start;
	row->signal_frame = fde->signal_frame;
	row->outermost = false;
	row->cfa_deref = false;
	row->cfa_addend = 0;
	row->ra.kind = SFRAME_LOC_CFA_OFFSET;
	row->ra.reg = 0;
	row->ra.deref = false;
	row->ra.offset = sec->fixed_ra_offset;
	row->fp.reg = 0;
	row->fp.deref = false;
	if (sec->fixed_fp_offset) {
		row->fp.kind = SFRAME_LOC_CFA_OFFSET;
		row->fp.offset = sec->fixed_fp_offset;
	} else {
		row->fp.kind = SFRAME_LOC_SAME;
		row->fp.offset = 0;
	}

	if (f->n == 0) {
		/* RA undefined: the unwind ends here, successfully. */
		row->outermost = true;
		row->cfa_reg = SFRAME_REG_RSP;
		row->cfa_offset = 0;
		row->ra.kind = SFRAME_LOC_UNDEFINED;
		row->ra.offset = 0;
		return 0;
	}

	if (fde->flex)
		return decode_flex(sec, f, row);

	row->cfa_reg = SFRAME_FRE_BASE_REG_SP(f->info) ? SFRAME_REG_RSP :
							 SFRAME_REG_RBP;
	row->cfa_offset = fre_sword(f, 0);
	if (f->n == 2) {
		row->fp.kind = SFRAME_LOC_CFA_OFFSET;
		row->fp.offset = fre_sword(f, 1);
	}
	/* The mangled-RA bit (7) is aarch64's; AMD64 ignores it. */
	return 0;
}

int sframe_get_fre(const struct sframe_section *sec,
		   const struct sframe_fde *fde, uint32_t j,
		   struct sframe_row *row)
{
	struct fre_cursor c;
	struct fre_raw f;
	uint32_t k, prev = 0;
	int ret;

	if (j >= fde->num_fres || fde->fre_type > 2)
		return -EINVAL;
	cursor_init(&c, sec, fde);
	/* FREs have no index: walk from the first, checking the order. */
	for (k = 0; k <= j; k++) {
		ret = read_fre(sec, fde, &c, &f);
		if (ret)
			return ret;
		if (k && f.start <= prev)
			return -EINVAL;
		prev = f.start;
	}
	return fre_to_row(sec, fde, &f, row);
}

/*
 * Count one unit of validation work; every SFRAME_VALIDATE_PAUSE_EVERY
 * units, let the environment pause (reschedule) or give up (fatal signal).
 */
static inline int validate_tick(const struct sframe_section *sec,
				uint32_t *work)
{
	if (++*work < SFRAME_VALIDATE_PAUSE_EVERY)
		return 0;
	*work = 0;
	return sframe_source_pause(sec->src);
}

/*
 * The index, one block of memory: this header, then
 *   uint32_t bucket[num_buckets + 1]  FDEs starting below bucket b's text
 *   struct index_fde fde[num_fdes + INDEX_PAD]  the FDEs, decoded, then
 *                                    INDEX_PAD entries starting at 2^32 - 1
 *   struct index_row row[num_rows]   each FDE's rows, in FDE order
 * An FDE's start and the rest sit in one 16-byte entry: the search ends on
 * the entry it then reads, in the same cache line.
 */

/*
 * The last step of a lookup compares rel with the starts of the INDEX_PAD
 * entries after the first candidate, whether or not they are candidates
 * (those that are not start above rel), so that it has no branch on how
 * many there are; the padding entries let it do so at the end.
 */
#define INDEX_PAD 3

/* index_fde.type: the FDE's rows are in the index (else: read its FREs) */
#define INDEX_F_ROWS (1u << 5)

struct index_fde {
	uint32_t start;		/* func_start - base */
	uint32_t func_size;
	uint32_t where;		/* INDEX_F_ROWS: its first row in row[];
				   else its fre_off, for reading its FREs */
	uint16_t num_fres;	/* <= SFRAME_MAX_FRES_PER_FDE; 0 for a
				   skipped FDE (with INDEX_F_ROWS: no row) */
	uint8_t type;		/* fre_type | pc_type << 2 | flex << 3 |
				   signal_frame << 4 | INDEX_F_ROWS */
	uint8_t rep_size;
};

/* index_row.flags */
#define INDEX_ROW_CFA_FP 1	/* CFA = FP + offset (else SP + offset) */
#define INDEX_ROW_OUTERMOST 2	/* RA undefined: the walk ends here */

/*
 * A row of the common AMD64 shape, the only one kept: CFA = SP or FP +
 * offset, RA at the section's fixed offset from the CFA, FP saved at
 * CFA + fp_offset or (0) unchanged.  An FDE with any other row (v3
 * flexible ones; offsets too wide) keeps none, and its lookups read its
 * FREs from the section.
 */
struct index_row {
	uint32_t start;		/* FRE start offset within the function */
	int16_t cfa_offset;
	int8_t fp_offset;
	uint8_t flags;
};

struct sframe_index {
	uint64_t base;		/* start of the first FDE */
	uint32_t span;		/* text from base to the end of the last FDE */
	uint32_t num_fdes;
	uint32_t num_buckets;
	uint32_t shift;		/* bucket of pc: (pc - base) >> shift */
	uint32_t num_rows;	/* the section's FRE count */
	uint32_t next_bucket;	/* while building: first bucket not set */
	uint32_t next_row;	/* while building: first row not taken */
	int8_t ra_offset;	/* the section's fixed RA offset */
	uint8_t pad[3];
};

static inline uint32_t *index_buckets(const struct sframe_index *idx)
{
	return (uint32_t *)(idx + 1);
}

static inline struct index_fde *index_fdes(const struct sframe_index *idx)
{
	return (struct index_fde *)(index_buckets(idx) + idx->num_buckets + 1);
}

static inline struct index_row *index_rows(const struct sframe_index *idx)
{
	return (struct index_row *)(index_fdes(idx) + idx->num_fdes +
				    INDEX_PAD);
}

/*
 * The shape of sec's index: base, span and bucket shift from its first and
 * last FDE, and the bytes it takes.  Buckets are the smallest power of two
 * of at least 16 bytes that gives no more buckets than FDEs (or 2^31).
 */
static int index_shape(const struct sframe_section *sec,
		       struct sframe_index *shape, uint64_t *size)
{
	struct sframe_fde first, last;
	uint64_t span;
	uint32_t shift = 4;
	int ret;

	if (!sec->num_fdes)
		return -ENOENT;
	ret = read_fde(sec, 0, &first, NULL);
	if (!ret)
		ret = read_fde(sec, sec->num_fdes - 1, &last, NULL);
	if (ret)
		return ret;
	span = last.func_start + last.func_size - first.func_start;
	if (last.func_start < first.func_start || span > SFRAME_U32_MAX)
		return -E2BIG;
	while (shift < 31 && (span >> shift) >= sec->num_fdes)
		shift++;
	memset(shape, 0, sizeof(*shape));
	shape->base = first.func_start;
	shape->span = (uint32_t)span;
	shape->num_fdes = sec->num_fdes;
	shape->num_buckets = (uint32_t)(span >> shift) + 1;
	shape->shift = shift;
	shape->num_rows = sec->num_fres;
	shape->ra_offset = sec->fixed_ra_offset;
	/* Everything after the header stays 4-byte aligned. */
	*size = sizeof(*shape) + 4 * ((uint64_t)shape->num_buckets + 1) +
		sizeof(struct index_fde) * ((uint64_t)sec->num_fdes + INDEX_PAD) +
		sizeof(struct index_row) * (uint64_t)sec->num_fres;
	return 0;
}

int sframe_index_size(const struct sframe_section *sec, uint64_t *size)
{
	struct sframe_index shape;

	return index_shape(sec, &shape, size);
}

/*
 * FDE i, validated (sorted, disjoint, inside the span): its entry, with
 * room for its rows.  -EINVAL if the FDEs have more FREs than the header
 * said (the validation would refuse the section at its end).
 */
static int index_add_fde(struct sframe_index *idx, uint32_t i,
			 const struct sframe_fde *fde)
{
	struct index_fde *out = &index_fdes(idx)[i];
	uint32_t *bucket = index_buckets(idx);
	uint32_t rel = (uint32_t)(fde->func_start - idx->base);
	uint32_t b = idx->next_bucket;

	if (fde->num_fres > idx->num_rows - idx->next_row)
		return -EINVAL;
	out->start = rel;
	out->func_size = fde->func_size;
	out->type = fde->fre_type | fde->pc_type << 2 | fde->flex << 3 |
		    (uint8_t)fde->signal_frame << 4;
	out->rep_size = fde->rep_size;
	if (sframe_fde_skipped(fde)) {
		/*
		 * An entry of no rows, whose lookups find none without
		 * reading the section; the room for its rows stays unused.
		 */
		out->num_fres = 0;
		out->type |= INDEX_F_ROWS;
		out->where = idx->next_row;
	} else if (fde->flex) {
		out->num_fres = (uint16_t)fde->num_fres;
		out->where = fde->fre_off;
	} else {
		out->num_fres = (uint16_t)fde->num_fres;
		/* Rows kept unless one does not fit (index_add_row()). */
		out->type |= INDEX_F_ROWS;
		out->where = idx->next_row;
	}
	idx->next_row += fde->num_fres;
	/* Buckets up to this FDE's start count the FDEs before it. */
	while (b < idx->num_buckets && ((uint64_t)b << idx->shift) <= rel)
		bucket[b++] = i;
	idx->next_bucket = b;
	return 0;
}

/* Row j of FDE i (fde), validated: kept if it has the common shape. */
static void index_add_row(struct sframe_index *idx, uint32_t i,
			  const struct sframe_fde *fde, uint32_t j,
			  const struct sframe_row *row)
{
	struct index_fde *e = &index_fdes(idx)[i];
	struct index_row *r;
	bool fits;

	if (!(e->type & INDEX_F_ROWS))
		return;
	fits = !row->cfa_deref && !row->cfa_addend &&
	       (row->cfa_reg == SFRAME_REG_RSP ||
		row->cfa_reg == SFRAME_REG_RBP) &&
	       row->cfa_offset == (int16_t)row->cfa_offset &&
	       (row->fp.kind == SFRAME_LOC_SAME ||
		(row->fp.kind == SFRAME_LOC_CFA_OFFSET && row->fp.offset &&
		 row->fp.offset == (int8_t)row->fp.offset));
	if (row->outermost)
		fits = fits && row->ra.kind == SFRAME_LOC_UNDEFINED &&
		       !row->ra.offset;
	else
		fits = fits && row->ra.kind == SFRAME_LOC_CFA_OFFSET &&
		       row->ra.offset == idx->ra_offset;
	if (!fits) {
		/* This FDE's lookups read its FREs. */
		e->type &= ~INDEX_F_ROWS;
		e->where = fde->fre_off;
		return;
	}
	r = &index_rows(idx)[e->where + j];
	r->start = row->start_off;
	r->cfa_offset = (int16_t)row->cfa_offset;
	r->fp_offset = row->fp.kind == SFRAME_LOC_SAME ? 0 :
			(int8_t)row->fp.offset;
	r->flags = (row->cfa_reg == SFRAME_REG_RBP ? INDEX_ROW_CFA_FP : 0) |
		   (row->outermost ? INDEX_ROW_OUTERMOST : 0);
}

static void index_finish(struct sframe_index *idx)
{
	struct index_fde *pad = &index_fdes(idx)[idx->num_fdes];
	uint32_t *bucket = index_buckets(idx);
	uint32_t b, k;

	for (b = idx->next_bucket; b <= idx->num_buckets; b++)
		bucket[b] = idx->num_fdes;
	for (k = 0; k < INDEX_PAD; k++) {
		memset(&pad[k], 0, sizeof(pad[k]));
		pad[k].start = SFRAME_U32_MAX;
	}
}

int sframe_validate(const struct sframe_section *sec, uint64_t text_start,
		    uint64_t text_len)
{
	return sframe_validate_report(sec, text_start, text_len, NULL, 0,
				      NULL);
}

int sframe_validate_index(const struct sframe_section *sec,
			  uint64_t text_start, uint64_t text_len, void *mem,
			  uint64_t size)
{
	return sframe_validate_report(sec, text_start, text_len, mem, size,
				      NULL);
}

int sframe_validate_report(const struct sframe_section *sec,
			   uint64_t text_start, uint64_t text_len, void *mem,
			   uint64_t size, struct sframe_validation *res)
{
	struct sframe_validation found;
	struct sframe_index *idx = mem;
	struct sframe_fde fde;
	struct sframe_row row;
	struct fre_cursor c;
	struct fre_raw f;
	uint64_t prev_end = 0, total_fres = 0, need;
	uint32_t i, j, prev, work = 0;
	int ret;

	memset(&found, 0, sizeof(found));
	if (res)
		memset(res, 0, sizeof(*res));

	/* The lookups need a binary search; unsorted tables are not read. */
	if (!(sec->flags & SFRAME_F_FDE_SORTED))
		return -EOPNOTSUPP;
	if (text_len > ~(uint64_t)0 - text_start)
		return -EINVAL;
	if (idx) {
		ret = index_shape(sec, idx, &need);
		if (ret)
			return ret;
		/* The section changed since its size was asked. */
		if (need > size)
			return -EINVAL;
	}

	/*
	 * num_fdes and every FDE's FRE count were checked against the
	 * section's size, so both loops are bounded by it (a 64 MiB section
	 * holds at most about 33 M FREs and 4 M FDEs); validate_tick() keeps
	 * even that from holding the CPU.
	 */
	for (i = 0; i < sec->num_fdes; i++) {
		ret = validate_tick(sec, &work);
		if (ret)
			return ret;
		ret = read_fde(sec, i, &fde, &c);
		if (ret)
			return ret;
		if (fde.func_start < text_start ||
		    fde.func_start - text_start > text_len ||
		    fde.func_size > text_len - (fde.func_start - text_start))
			return -EINVAL;
		/* Sorted and disjoint: what the binary search relies on. */
		if (i && fde.func_start < prev_end)
			return -EINVAL;
		prev_end = fde.func_start + fde.func_size;
		if (idx) {
			/* Within the span its first and last FDE gave. */
			if (fde.func_start < idx->base ||
			    prev_end - idx->base > idx->span)
				return -EINVAL;
			ret = index_add_fde(idx, i, &fde);
			if (ret)
				return ret;
		}

		total_fres += fde.num_fres;
		if (sframe_fde_skipped(&fde)) {
			/*
			 * No lookup reads its FREs, so neither does this:
			 * registering a section of one FDE of 10 M FREs
			 * costs no more than one of a single FRE.  That
			 * they fit at their smallest was checked when the
			 * FDE was decoded, and the count is in the total.
			 */
			found.fdes_skipped++;
			found.skipped_bytes += fde.func_size;
			continue;
		}
		found.covered_bytes += fde.func_size;

		prev = 0;
		for (j = 0; j < fde.num_fres; j++) {
			ret = validate_tick(sec, &work);
			if (ret)
				return ret;
			ret = read_fre(sec, &fde, &c, &f);
			if (!ret)
				ret = fre_to_row(sec, &fde, &f, &row);
			if (ret)
				return ret;
			if (j && f.start <= prev)
				return -EINVAL;
			prev = f.start;
			if (idx)
				index_add_row(idx, i, &fde, j, &row);
		}
	}
	if (total_fres != sec->num_fres)
		return -EINVAL;
	if (idx)
		index_finish(idx);
	if (res)
		*res = found;
	return 0;
}

/*
 * The binary search ends with one read of the FDEs still in question once
 * they fit in FDE_WINDOW bytes (15 v1, 12 v2 or 16 v3 FDEs): that read
 * replaces the last three or four probes and the read of the FDE found,
 * which then comes from the same copy as the start addresses it was chosen
 * by.  In the kernel it costs at most 32 unsafe_get_user() loads in one
 * user access window instead of four or five windows.  The copy lives on
 * the stack, so it stays small.
 */
#define FDE_WINDOW 256

/*
 * Spend one unit of a lookup's budget (NULL: unbounded), or say that none
 * is left.  Checked before the read it pays for, so a lookup never does
 * more than it was given.
 */
static __always_inline int spend(uint32_t *budget)
{
	if (!budget)
		return 0;
	if (!*budget)
		return -SFRAME_EBUDGET;
	--*budget;
	return 0;
}

/*
 * Find and decode the FDE covering pc; with c (see decode_fde()), leave c
 * at its first FRE.  Each read of the FDE table costs a unit of *budget.
 */
static int find_fde(const struct sframe_section *sec, uint64_t pc,
		    struct sframe_fde *fde, struct fre_cursor *c,
		    uint32_t *budget)
{
	const uint64_t base = sec->sec_addr;
	const uint64_t table = sec->fde_start;
	const uint32_t size = sec->fde_size;
	const uint32_t win_fdes = FDE_WINDOW / size;
	const bool pcrel = sec->flags & SFRAME_F_FDE_FUNC_START_PCREL;
	const bool wide = sec->version == 3;	/* 8-byte start field */
	uint32_t lo = 0, n = sec->num_fdes, half, k, below;
	uint8_t win[FDE_WINDOW];
	uint64_t off;
	int ret;

	/* Only sorted tables can be searched; see sframe_validate(). */
	if (!(sec->flags & SFRAME_F_FDE_SORTED))
		return -EOPNOTSUPP;

	/*
	 * The FDE covering pc is the last one starting at or below it; in a
	 * sorted table it is among FDEs lo to lo + n - 1, or there is none.
	 * Halve that range, reading only the start-address field of the
	 * FDE probed, until it fits in the window.  n shrinks by half each
	 * time whatever the table says: at most 32 probes.  The update is
	 * written so that compilers make it a conditional move (gcc does,
	 * for the host and the kernel): a branch on it would be mispredicted
	 * half of the time, and that was most of a lookup's time.
	 */
	while (n > win_fdes) {
		half = n / 2;
		off = table + (uint64_t)(lo + half) * size;
		ret = spend(budget);
		if (ret)
			return ret;
		ret = sec_read(sec, off, win, wide ? 8 : 4);
		if (ret)
			return ret;
		below = fde_start_at(base, pcrel, wide, off, win) <= pc;
		lo = below ? lo + half : lo;
		n -= half;
	}
	if (!n)
		return -ENOENT;	/* no FDEs */
	/* n <= win_fdes, so n * size <= FDE_WINDOW. */
	off = table + (uint64_t)lo * size;
	ret = spend(budget);
	if (ret)
		return ret;
	ret = sec_read(sec, off, win, n * size);
	if (ret)
		return ret;

	/*
	 * Search the copy: in a sorted table the FDEs starting at or below
	 * pc come first, so counting them finds the last one, again with no
	 * branch to mispredict.  The section may have changed since the
	 * probes, so nothing is assumed of the copy: below is an index in it
	 * whatever it holds, the FDE picked is decoded from it and coverage
	 * is judged on what was decoded.
	 */
	below = 0;
	for (k = 0; k < n; k++)
		below += fde_start_at(base, pcrel, wide, off + k * size,
				      win + k * size) <= pc;
	if (!below)
		return -ENOENT;	/* pc below the first FDE */
	k = below - 1;
	ret = decode_fde(sec, off + k * size, win + k * size, fde, c);
	if (ret)
		return ret;
	if (pc < fde->func_start || pc - fde->func_start >= fde->func_size)
		return -ENOENT;
	return 0;
}

int sframe_find_fde(const struct sframe_section *sec, uint64_t pc,
		    struct sframe_fde *fde)
{
	return find_fde(sec, pc, fde, NULL, NULL);
}

int sframe_find_row(const struct sframe_section *sec, uint64_t pc,
		    struct sframe_row *row)
{
	return sframe_find_row_budget(sec, pc, row, NULL);
}

/*
 * pc's offset in the function at func_start, which covers it: where to
 * look among its FREs (for SFRAME_PC_MASK, the offset in its repeated
 * block of rep_size bytes).
 */
static inline uint32_t fre_offset_in(uint64_t func_start, uint8_t pc_type,
				     uint32_t rep_size, uint64_t pc)
{
	/* pc - func_start < func_size, a u32 */
	uint32_t off = (uint32_t)(pc - func_start);

	if (pc_type == SFRAME_PC_MASK)
		off %= rep_size ? rep_size : SFRAME_V1_PCMASK_BLOCK;
	return off;
}

/* pc's offset in fde, which covers it. */
static inline uint32_t fre_offset(const struct sframe_fde *fde, uint64_t pc)
{
	return fre_offset_in(fde->func_start, fde->pc_type, fde->rep_size, pc);
}

/*
 * The row for pc in fde, which covers it, with c at fde's first FRE (or
 * at its attribute record's copy, for v3: see decode_fde()).
 */
static int row_in_fde(const struct sframe_section *sec,
		      const struct sframe_fde *fde, struct fre_cursor *c,
		      uint64_t pc, struct sframe_row *row, uint32_t *budget)
{
	struct fre_raw f[2];	/* the last FRE at or below off, the next */
	uint32_t off = fre_offset(fde, pc), j, prev = 0;
	int last = -1, k = 0;
	int ret;

	/*
	 * The rule is the last FRE starting at or below off.  FREs are in
	 * increasing order, so the scan stops at the first one past off.
	 * Each FRE read is checked for what the walk relies on (order,
	 * bounds, size); only the one chosen is turned into a row, and its
	 * words checked, from the same copy its start was judged on.
	 * sframe_validate() checks every row.  Each FRE read costs a unit
	 * of the budget, and at most SFRAME_MAX_FRES_PER_FDE are read: an
	 * FDE with more is skipped, its function has no row, like an
	 * uncovered one (checked here, at each lookup, as the section may
	 * have been rewritten after validation; nothing is read for it).
	 */
	if (sframe_fde_skipped(fde))
		return -ENOENT;
	for (j = 0; j < fde->num_fres; j++) {
		ret = spend(budget);
		if (ret)
			return ret;
		ret = read_fre(sec, fde, c, &f[k]);
		if (ret)
			return ret;
		if (j && f[k].start <= prev)
			return -EINVAL;
		prev = f[k].start;
		if (prev > off)
			break;
		last = k;
		k ^= 1;
	}
	/* A PC before the first row has no rule, like an uncovered one. */
	if (last < 0)
		return -ENOENT;
	return fre_to_row(sec, fde, &f[last], row);
}

int sframe_find_row_budget(const struct sframe_section *sec, uint64_t pc,
			   struct sframe_row *row, uint32_t *budget)
{
	struct sframe_fde fde;
	struct fre_cursor c;
	int ret;

	ret = find_fde(sec, pc, &fde, &c, budget);
	if (ret)
		return ret;
	return row_in_fde(sec, &fde, &c, pc, row, budget);
}

int sframe_find_row_in_fde(const struct sframe_section *sec,
			   const struct sframe_fde *fde, uint64_t pc,
			   struct sframe_row *row, uint32_t *budget)
{
	struct fre_cursor c;

	if (fde->fre_type > 2 || pc < fde->func_start ||
	    pc - fde->func_start >= fde->func_size)
		return -EINVAL;
	cursor_init(&c, sec, fde);
	return row_in_fde(sec, fde, &c, pc, row, budget);
}

/* The entry of the FDE covering pc, or NULL. */
static const struct index_fde *index_find(const struct sframe_index *idx,
					  uint64_t pc)
{
	const struct index_fde *e = index_fdes(idx), *f;
	uint32_t rel, b, lo, n, half;

	if (pc < idx->base || pc - idx->base >= idx->span)
		return NULL;
	rel = (uint32_t)(pc - idx->base);
	b = rel >> idx->shift;
	/*
	 * The covering FDE is the last one starting at or below rel: one
	 * that starts in bucket b at or below rel, or else the last that
	 * starts before bucket b.  Candidates lo .. lo + n - 1; halving them
	 * with a conditional move, as find_fde() does, takes at most
	 * log2(num_fdes) + 1 steps however the FDEs fall in buckets.  There
	 * are rarely more than INDEX_PAD + 1, and then none are halved: the
	 * last step counts those of the next INDEX_PAD entries that start at
	 * or below rel (sorted, so they are the first ones), with no branch
	 * to mispredict on n.
	 */
	lo = index_buckets(idx)[b];
	n = index_buckets(idx)[b + 1] - lo + 1;
	if (lo) {
		lo--;
	} else {
		n--;
		if (!n || e[0].start > rel)
			return NULL;
	}
	while (n > INDEX_PAD + 1) {
		half = n / 2;
		lo = e[lo + half].start <= rel ? lo + half : lo;
		n -= half;
	}
	/* Entries past the last candidate start above rel (or pad). */
	lo += (e[lo + 1].start <= rel) + (e[lo + 2].start <= rel) +
	      (e[lo + 3].start <= rel);
	f = &e[lo];
	return rel - f->start < f->func_size ? f : NULL;
}

/* The row r of an FDE, as fre_to_row() made it when it was kept. */
static void index_row_to_row(const struct sframe_index *idx,
			     const struct index_fde *f,
			     const struct index_row *r,
			     struct sframe_row *row)
{
	bool outermost = r->flags & INDEX_ROW_OUTERMOST;

	row->start_off = r->start;
	row->cfa_reg = r->flags & INDEX_ROW_CFA_FP ? SFRAME_REG_RBP :
						     SFRAME_REG_RSP;
	row->cfa_deref = false;
	row->cfa_offset = r->cfa_offset;
	row->cfa_addend = 0;
	row->ra.kind = outermost ? SFRAME_LOC_UNDEFINED : SFRAME_LOC_CFA_OFFSET;
	row->ra.reg = 0;
	row->ra.deref = false;
	row->ra.offset = outermost ? 0 : idx->ra_offset;
	row->fp.kind = r->fp_offset ? SFRAME_LOC_CFA_OFFSET : SFRAME_LOC_SAME;
	row->fp.reg = 0;
	row->fp.deref = false;
	row->fp.offset = r->fp_offset;
	row->outermost = outermost;
	row->signal_frame = (f->type >> 4) & 1;
}

/*
 * The last of n rows r starting at or below off, or NULL; halving them
 * with a conditional move: at most 14 steps (n <= SFRAME_MAX_FRES_PER_FDE
 * = 8192: one comparison, then 13 halvings; a skipped FDE has n = 0).
 */
static const struct index_row *index_row_at(const struct index_row *r,
					    uint32_t n, uint32_t off)
{
	uint32_t lo = 0, half;

	if (!n || r[0].start > off)
		return NULL;
	while (n > 1) {
		half = n / 2;
		lo = r[lo + half].start <= off ? lo + half : lo;
		n -= half;
	}
	return &r[lo];
}

struct sframe_rule sframe_index_find_rule(const struct sframe_index *idx,
					  uint64_t pc, uint32_t *budget)
{
	struct sframe_rule rule = { 0 };
	const struct index_fde *f;
	const struct index_row *r;
	uint32_t off;

	/* Checked first: a lookup past the budget is the full one's. */
	if (budget && !*budget)
		return rule;
	f = index_find(idx, pc);
	/* Signal frames and FREs read from the section: the full lookup. */
	if (!f || (f->type & (1u << 4)) || !(f->type & INDEX_F_ROWS))
		return rule;
	/* The FDE's fre_offset(), from the entry alone. */
	off = fre_offset_in(idx->base + f->start, (f->type >> 2) & 1,
			    f->rep_size, pc);
	r = index_row_at(&index_rows(idx)[f->where], f->num_fres, off);
	if (!r || (r->flags & INDEX_ROW_OUTERMOST))
		return rule;
	if (budget)
		--*budget;
	/* As index_row_to_row() and the row cache's reduction make it. */
	rule.cfa_off = r->cfa_offset;
	rule.ra_off = idx->ra_offset;
	rule.fp_off = r->fp_offset;
	rule.flags = SFRAME_RULE_FAST;
	if (r->flags & INDEX_ROW_CFA_FP)
		rule.flags |= SFRAME_RULE_CFA_FP;
	if (r->fp_offset)
		rule.flags |= SFRAME_RULE_FP_SAVED;
	return rule;
}

int sframe_index_find_row(const struct sframe_index *idx, uint64_t pc,
			  struct sframe_fde *fde, struct sframe_row *row,
			  uint32_t *budget)
{
	const struct index_fde *f;
	const struct index_row *r;
	int ret;

	ret = spend(budget);
	if (ret)
		return ret;
	f = index_find(idx, pc);
	if (!f)
		return -ENOENT;
	fde->func_start = idx->base + f->start;
	fde->func_size = f->func_size;
	fde->num_fres = f->num_fres;
	fde->fre_type = f->type & 3;
	fde->pc_type = (f->type >> 2) & 1;
	fde->flex = (f->type >> 3) & 1;
	fde->signal_frame = (f->type >> 4) & 1;
	fde->rep_size = f->rep_size;
	if (!(f->type & INDEX_F_ROWS)) {
		fde->fre_off = f->where;
		return SFRAME_INDEX_READ_FRES;
	}
	fde->fre_off = 0;	/* not kept: its rows are */

	/* The last row starting at or below pc's offset. */
	r = index_row_at(&index_rows(idx)[f->where], f->num_fres,
			 fre_offset(fde, pc));
	if (!r)
		return -ENOENT;
	index_row_to_row(idx, f, r, row);
	return 0;
}

int sframe_find_row_indexed(const struct sframe_section *sec,
			    const struct sframe_index *idx, uint64_t pc,
			    struct sframe_row *row, uint32_t *budget)
{
	struct sframe_fde fde;
	int ret;

	if (!idx)
		return sframe_find_row_budget(sec, pc, row, budget);
	ret = sframe_index_find_row(idx, pc, &fde, row, budget);
	if (ret == SFRAME_INDEX_READ_FRES)
		return sframe_find_row_in_fde(sec, &fde, pc, row, budget);
	return ret;
}
