// SPDX-License-Identifier: GPL-2.0
// binutils' libsframe loaded with dlopen (Debian 12 ships no headers for
// it, and the library that reads SFrame version 3 is sid's, run under sid's
// loader), in either of its two ABIs, and its answer for a PC turned into
// the same normalized row as this project's decoder's, so that the two can
// be compared field by field.  Used by bench/decoder_bench and by the
// differential test (tests/libsframe_diff/libsframe_diff.cc).
//
// The two ABIs (include/sframe-api.h):
//   old (libsframe.so.0, binutils 2.40, Debian 12's): PCs are
//     int32 offsets from the start of the section; the row entry is
//     {u32 start, u8 offsets[12], u8 info}; the getters take no FDE type.
//   v3 (libsframe.so.3, sid's binutils 2.47, reads SFrame v2 and v3): PCs are
//     int64 offsets from the start of the section; the row entry is
//     {u32 start, u8 datawords[24], u8 info}; sframe_fre_get_cfa_offset,
//     _fp_offset and _ra_offset take the FDE type (default or flexible),
//     and a flexible FDE's control words are read with
//     sframe_get_fre_udata, as libsframe's own dumper (readelf --sframe)
//     does.  Told apart by sframe_decoder_get_funcdesc_v3.
// Neither ABI returns the FDE that sframe_find_fre used, so the caller
// passes the type of the FDE covering the PC.
#pragma once

#include <dlfcn.h>
#include <link.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sframe_decode.h"

namespace lsfdl {

// --- The normalized row ----------------------------------------------------

// Where the caller's RA or FP is (a superset of enum sframe_loc_kind).
enum LocKind : uint8_t {
	LOC_SAME = SFRAME_LOC_SAME,		// unchanged
	LOC_CFA_OFFSET = SFRAME_LOC_CFA_OFFSET,	// saved at CFA + off
	LOC_REG_OFFSET = SFRAME_LOC_REG_OFFSET,	// reg + off (deref: loaded)
	LOC_UNDEFINED = SFRAME_LOC_UNDEFINED,
	LOC_CFA_VALUE = 0x10,	// the value CFA + off (libsframe only: a flex
				// control word neither register nor deref)
};

struct Loc {
	uint8_t kind = LOC_SAME;
	uint32_t reg = 0;	// DWARF register (libsframe: 29 bits)
	bool deref = false;
	int32_t off = 0;
};

struct Row {
	bool outermost = false;	// RA undefined: the other fields are unused
	bool cfa_reg_p = true;	// false: a flex CFA control word without a
				// register (libsframe only)
	uint32_t cfa_reg = 0;	// DWARF register (libsframe: 29 bits)
	bool cfa_deref = false;
	int32_t cfa_off = 0;
	int32_t cfa_addend = 0;	// SFRAME_F_X_CFA_ADDEND (this project only)
	Loc ra, fp;
};

inline bool loc_same(const Loc &a, const Loc &b)
{
	if (a.kind != b.kind)
		return false;
	switch (a.kind) {
	case LOC_SAME:
	case LOC_UNDEFINED:
		return true;
	case LOC_REG_OFFSET:
		return a.reg == b.reg && a.deref == b.deref && a.off == b.off;
	default:
		return a.off == b.off;
	}
}

inline bool row_same(const Row &a, const Row &b)
{
	if (a.outermost || b.outermost)
		return a.outermost == b.outermost;
	return a.cfa_reg_p == b.cfa_reg_p && a.cfa_reg == b.cfa_reg &&
	       a.cfa_deref == b.cfa_deref && a.cfa_off == b.cfa_off &&
	       a.cfa_addend == b.cfa_addend && loc_same(a.ra, b.ra) &&
	       loc_same(a.fp, b.fp);
}

// Only the CFA (what the benchmark compared before it knew the RA and FP).
inline bool cfa_same(const Row &a, const Row &b)
{
	if (a.outermost || b.outermost)
		return a.outermost == b.outermost;
	return a.cfa_reg_p == b.cfa_reg_p && a.cfa_reg == b.cfa_reg &&
	       a.cfa_deref == b.cfa_deref && a.cfa_off == b.cfa_off;
}

inline std::string reg_name(unsigned r)
{
	if (r == SFRAME_REG_RSP)
		return "sp";
	if (r == SFRAME_REG_RBP)
		return "fp";
	return "r" + std::to_string(r);
}

inline std::string loc_str(const Loc &l)
{
	char b[64];
	switch (l.kind) {
	case LOC_SAME:
		return "same";
	case LOC_UNDEFINED:
		return "undefined";
	case LOC_CFA_OFFSET:
		std::snprintf(b, sizeof(b), "(c%+d)", l.off);
		return b;
	case LOC_CFA_VALUE:
		std::snprintf(b, sizeof(b), "c%+d", l.off);
		return b;
	case LOC_REG_OFFSET:
		std::snprintf(b, sizeof(b), l.deref ? "(%s%+d)" : "%s%+d",
			      reg_name(l.reg).c_str(), l.off);
		return b;
	}
	return "?";
}

// "CFA=sp+16 RA=(c-8) FP=same", "outermost", in readelf's notation
// (parentheses: loaded from).
inline std::string row_str(const Row &r)
{
	if (r.outermost)
		return "outermost (RA undefined)";
	char b[64];
	std::string cfa = r.cfa_reg_p ? reg_name(r.cfa_reg) : "c";
	std::snprintf(b, sizeof(b), "%s%+d", cfa.c_str(), r.cfa_off);
	cfa = r.cfa_deref ? "(" + std::string(b) + ")" : std::string(b);
	if (r.cfa_addend)
		cfa += (r.cfa_addend > 0 ? "+" : "") +
		       std::to_string(r.cfa_addend);
	return "CFA=" + cfa + " RA=" + loc_str(r.ra) + " FP=" + loc_str(r.fp);
}

inline Loc loc_of(const sframe_loc &l)
{
	Loc o;
	o.kind = l.kind;
	if (l.kind == SFRAME_LOC_REG_OFFSET) {
		o.reg = l.reg;
		o.deref = l.deref;
	}
	if (l.kind == SFRAME_LOC_CFA_OFFSET || l.kind == SFRAME_LOC_REG_OFFSET)
		o.off = l.offset;
	return o;
}

// This project's row (sframe_find_row()) normalized.
inline Row row_of(const sframe_row &r)
{
	Row o;
	o.outermost = r.outermost;
	if (r.outermost)
		return o;
	o.cfa_reg = r.cfa_reg;
	o.cfa_deref = r.cfa_deref;
	o.cfa_off = r.cfa_offset;
	o.cfa_addend = r.cfa_addend;
	o.ra = loc_of(r.ra);
	o.fp = loc_of(r.fp);
	return o;
}

// --- libsframe --------------------------------------------------------------

// The row entry of either ABI (20 or 32 bytes), with room to spare.
struct alignas(8) Fre {
	unsigned char bytes[64];
};

// One FDE as libsframe's v3 ABI gives it.
struct Fde {
	uint64_t start = 0;	// absolute: the section's address added
	uint32_t size = 0;
	uint32_t num_fres = 0;
	bool pc_mask = false;
	uint8_t rep_size = 0;
	bool flex = false;
	bool signal = false;
	uint8_t fre_type = 0;
};

#define LSFDL_FDE_TYPE_DEFAULT 0
#define LSFDL_FDE_TYPE_FLEX 1

class Libsframe {
public:
	// path: a file name (dlopen's search) or a path.  "" on success, else
	// why not.
	std::string load(const std::string &path)
	{
		h_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
		if (!h_) {
			const char *e = dlerror();
			return e ? e : "dlopen failed";
		}
		const char *s = nullptr;
		link_map *lm = nullptr;
		if (!dlinfo(h_, RTLD_DI_LINKMAP, &lm) && lm && lm->l_name)
			s = lm->l_name;
		file_ = s && *s ? s : path;
		char *real = realpath(file_.c_str(), nullptr);
		if (real) {
			real_ = real;
			std::free(real);
		}
		decode_ = (decode_t)sym("sframe_decode");
		free_ = (free_t)sym("sframe_decoder_free");
		errmsg_ = (errmsg_t)sym("sframe_errmsg");
		find_ = (void *)sym("sframe_find_fre");
		base_reg_ = (void *)sym("sframe_fre_get_base_reg_id");
		cfa_ = (void *)sym("sframe_fre_get_cfa_offset");
		fp_ = (void *)sym("sframe_fre_get_fp_offset");
		ra_ = (void *)sym("sframe_fre_get_ra_offset");
		ra_undef_ = (void *)sym("sframe_fre_get_ra_undefined_p");
		fixed_fp_ = (fixed_t)sym("sframe_decoder_get_fixed_fp_offset");
		fixed_ra_ = (fixed_t)sym("sframe_decoder_get_fixed_ra_offset");
		num_fdes_ = (num_t)sym("sframe_decoder_get_num_fidx");
		funcdesc_v3_ = (funcdesc_v3_t)sym(
			"sframe_decoder_get_funcdesc_v3");
		v3_ = funcdesc_v3_ != nullptr;
		if (v3_) {
			udata_ = (udata_t)sym("sframe_get_fre_udata");
			version_ = (u8_t)sym("sframe_decoder_get_version");
			flags_ = (u8_t)sym("sframe_decoder_get_flags");
			fde_off_ = (fde_off_t)sym(
				"sframe_decoder_get_offsetof_fde_start_addr");
		}
		if (!decode_ || !free_ || !find_ || !base_reg_ || !cfa_ ||
		    !fp_ || !ra_ || !fixed_ra_ || !fixed_fp_ ||
		    (v3_ && (!udata_ || !version_ || !flags_ || !fde_off_ ||
			     !ra_undef_ || !num_fdes_))) {
			dlclose(h_);
			h_ = nullptr;
			return file_ + ": a libsframe without the functions "
				       "this program calls";
		}
		return "";
	}

	bool loaded() const { return h_ != nullptr; }
	// The v3 ABI (libsframe.so.3: sid's binutils 2.47).
	bool v3_api() const { return v3_; }

	// "libsframe.so.3 (/.../libsframe.so.3.0.0, v3 ABI)"
	std::string name() const
	{
		std::string base = file_.substr(file_.rfind('/') + 1);
		std::string s = base + " (";
		s += real_.empty() ? file_ : real_;
		s += v3_ ? ", v3 ABI)" : ", old ABI)";
		return s;
	}

	const char *errmsg(int e) const
	{
		const char *m = errmsg_ ? errmsg_(e) : nullptr;
		return m ? m : "unknown error";
	}

	// A decoder context over the section (keep buf while it lives:
	// libsframe may point into it), or nullptr with *err set.
	void *decode(const void *buf, size_t size, int *err) const
	{
		*err = 0;
		return decode_((const char *)buf, size, err);
	}
	void free_ctx(void *ctx) const { free_(&ctx); }

	uint32_t num_fdes(void *ctx) const
	{
		return num_fdes_ ? num_fdes_(ctx) : 0;
	}

	// FDE i of a v3-ABI context, with the section at sec_addr.
	bool fde(void *ctx, uint32_t i, uint64_t sec_addr, Fde *out) const
	{
		if (!v3_)
			return false;
		uint32_t num_fres = 0, size = 0;
		int64_t start = 0;
		unsigned char info = 0, info2 = 0;
		uint8_t rep = 0;
		if (funcdesc_v3_(ctx, i, &num_fres, &size, &start, &info, &info2,
				 &rep))
			return false;
		int e = 0;
		uint64_t at = sec_addr + (uint64_t)start;
		// As libsframe's dumper: PC-relative starts count from the FDE's
		// start field.
		if (flags_(ctx) & SFRAME_F_FDE_FUNC_START_PCREL)
			at += fde_off_(ctx, i, &e);
		out->start = at;
		out->size = size;
		out->num_fres = num_fres;
		out->fre_type = info & 0xf;
		out->pc_mask = (info >> 4) & 1;
		out->signal = (info >> 7) & 1;
		out->rep_size = rep;
		out->flex = version_(ctx) >= 3 &&
			    (info2 & 0x1f) == LSFDL_FDE_TYPE_FLEX;
		return true;
	}

	// The row entry for secrel_pc (the PC's offset from the section's
	// first byte): 0, or libsframe's nonzero return.  The raw lookup that
	// the benchmark times.
	int find_fre(void *ctx, int64_t secrel_pc, Fre *f) const
	{
		if (v3_)
			return ((int (*)(void *, int64_t, Fre *))find_)(
				ctx, secrel_pc, f);
		return ((int (*)(void *, int32_t, Fre *))find_)(
			ctx, (int32_t)secrel_pc, f);
	}

	int32_t cfa_offset(void *ctx, Fre *f, uint32_t fde_type, int *e) const
	{
		return get_off(cfa_, ctx, f, fde_type, e);
	}

	// The row for secrel_pc in an FDE of fde_type: 0, or libsframe's
	// nonzero return of sframe_find_fre (no row).  What libsframe says,
	// read as its dumper (readelf --sframe) reads it:
	//   default FDE: CFA = (base register bit: sp or fp) + offset; RA at
	//     CFA + the RA offset (AMD64: the header's fixed one); FP at
	//     CFA + the FP offset, or unchanged when there is none;
	//   flexible FDE: control word and offset for the CFA, then the RA
	//     (or one padding word 0), then the FP; a control word says the
	//     register (or the CFA) and whether the value is loaded.  The RA
	//     padding ("U" in the dump) leaves the RA where the ABI has it:
	//     on AMD64 at CFA + the fixed RA offset.
	int find(void *ctx, int64_t secrel_pc, uint32_t fde_type, Row *row) const
	{
		Fre f;
		std::memset(&f, 0, sizeof(f));
		int ret = find_fre(ctx, secrel_pc, &f);
		if (ret)
			return ret;
		*row = Row();
		int e = 0;
		if (ra_undef_ && ra_undefined(ctx, &f)) {
			row->outermost = true;
			return 0;
		}
		int8_t fixed_ra = fixed_ra_(ctx);
		int8_t fixed_fp = fixed_fp_(ctx);
		if (fde_type != LSFDL_FDE_TYPE_FLEX) {
			unsigned base = base_reg(&f);
			row->cfa_reg = base == 1 ? SFRAME_REG_RSP :
						   SFRAME_REG_RBP;
			row->cfa_off = get_off(cfa_, ctx, &f, fde_type, &e);
			// An ABI with a fixed RA offset (AMD64) never tracks it
			// in default FREs (libsframe 2.40's getter then fails,
			// later ones return the fixed offset; the dumper of
			// both prints "f").
			e = 0;
			int32_t ra = fixed_ra ? fixed_ra :
						get_off(ra_, ctx, &f, fde_type, &e);
			if (!e) {
				row->ra.kind = LOC_CFA_OFFSET;
				row->ra.off = ra;
			} else {
				row->ra.kind = LOC_UNDEFINED;
			}
			// (The header's fixed FP offset when it has one.)
			e = 0;
			int32_t fp = get_off(fp_, ctx, &f, fde_type, &e);
			if (!e) {
				row->fp.kind = LOC_CFA_OFFSET;
				row->fp.off = fp;
			}
			return 0;
		}
		// Flexible FDE (v3 ABI only).
		int ec = 0;
		uint32_t ctl = udata_(&f, 0, &ec);
		row->cfa_off = get_off(cfa_, ctx, &f, fde_type, &e);
		row->cfa_reg_p = ctl & 1;
		row->cfa_reg = ctl >> 3;
		row->cfa_deref = (ctl >> 1) & 1;

		int era = 0;
		uint32_t ra_ctl = udata_(&f, 2, &era);
		if (era || ra_ctl == 0) {
			// Absent or padding: the ABI's place.
			if (fixed_ra) {
				row->ra.kind = LOC_CFA_OFFSET;
				row->ra.off = fixed_ra;
			} else {
				row->ra.kind = LOC_UNDEFINED;
			}
		} else {
			e = 0;
			int32_t off = get_off(ra_, ctx, &f, fde_type, &e);
			row->ra = flex_loc(ra_ctl, off);
		}

		int fp_idx = (!era && ra_ctl == 0) ? 3 : 4;
		int efc = 0, efo = 0;
		uint32_t fp_ctl = udata_(&f, fp_idx, &efc);
		int32_t fp_off = get_off(fp_, ctx, &f, fde_type, &efo);
		if (!efc && !efo)
			row->fp = flex_loc(fp_ctl, fp_off);
		else if (!efo && fixed_fp) {
			row->fp.kind = LOC_CFA_OFFSET;
			row->fp.off = fp_off;
		}
		return 0;
	}

private:
	using decode_t = void *(*)(const char *, size_t, int *);
	using free_t = void (*)(void **);
	using errmsg_t = const char *(*)(int);
	using fixed_t = int8_t (*)(void *);
	using num_t = uint32_t (*)(void *);
	using u8_t = uint8_t (*)(void *);
	using funcdesc_v3_t = int (*)(void *, unsigned, uint32_t *, uint32_t *,
				      int64_t *, unsigned char *,
				      unsigned char *, uint8_t *);
	using udata_t = uint32_t (*)(Fre *, int, int *);
	using fde_off_t = uint32_t (*)(void *, uint32_t, int *);

	void *sym(const char *n) const { return dlsym(h_, n); }

	static Loc flex_loc(uint32_t ctl, int32_t off)
	{
		Loc l;
		bool reg_p = ctl & 1, deref = (ctl >> 1) & 1;
		l.off = off;
		if (reg_p) {
			l.kind = LOC_REG_OFFSET;
			l.reg = ctl >> 3;
			l.deref = deref;
		} else {
			l.kind = deref ? LOC_CFA_OFFSET : LOC_CFA_VALUE;
		}
		return l;
	}

	unsigned base_reg(Fre *f) const
	{
		int e = 0;
		if (v3_)
			return ((uint8_t(*)(Fre *, int *))base_reg_)(f, &e);
		return ((unsigned (*)(Fre *, int *))base_reg_)(f, &e);
	}

	bool ra_undefined(void *ctx, Fre *f) const
	{
		int e = 0;
		return ((bool (*)(void *, Fre *, int *))ra_undef_)(ctx, f, &e);
	}

	int32_t get_off(void *fn, void *ctx, Fre *f, uint32_t fde_type,
			int *e) const
	{
		if (v3_)
			return ((int32_t(*)(void *, Fre *, uint32_t, int *))fn)(
				ctx, f, fde_type, e);
		return ((int32_t(*)(void *, Fre *, int *))fn)(ctx, f, e);
	}

	void *h_ = nullptr;	// never closed: contexts may outlive this
	std::string file_, real_;
	bool v3_ = false;
	decode_t decode_ = nullptr;
	free_t free_ = nullptr;
	errmsg_t errmsg_ = nullptr;
	void *find_ = nullptr, *base_reg_ = nullptr, *cfa_ = nullptr,
	     *fp_ = nullptr, *ra_ = nullptr, *ra_undef_ = nullptr;
	fixed_t fixed_fp_ = nullptr, fixed_ra_ = nullptr;
	num_t num_fdes_ = nullptr;
	funcdesc_v3_t funcdesc_v3_ = nullptr;
	udata_t udata_ = nullptr;
	u8_t version_ = nullptr, flags_ = nullptr;
	fde_off_t fde_off_ = nullptr;
};

} // namespace lsfdl
