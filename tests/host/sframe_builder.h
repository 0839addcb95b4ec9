// SPDX-License-Identifier: GPL-2.0
// A small SFrame section writer for the host tests and the fuzz seeds,
// written from the specification (binutils libsframe/doc/sframe-spec.texi,
// include/sframe.h), independently of the decoder.  It can also write
// malformed sections: every derived field can be overridden.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace sftest {

// A flexible-FDE control word (SFrame v3): (reg << 3) | deref << 1 | reg_p.
inline int64_t flex_ctl(unsigned reg, bool deref, bool reg_p)
{
	return ((int64_t)reg << 3) | ((int64_t)deref << 1) | (int64_t)reg_p;
}

struct BFre {
	uint32_t start = 0;
	bool sp = true;			// CFA base register: SP (or FP)
	std::vector<int64_t> words;	// data words, in order
	int wsize = 0;			// 1, 2 or 4; 0: smallest that fits
	int info = -1;			// raw info byte instead of the above
};

struct BFde {
	uint64_t start = 0;		// absolute function address
	uint32_t size = 0;
	bool pcmask = false;
	uint8_t rep_size = 0;		// v2, v3
	bool flex = false;		// v3
	bool signal = false;		// v3
	std::vector<BFre> fres;
	int fre_type = -1;		// 0, 1, 2; -1: from the function size
	int info = -1;			// raw info byte (v1/v2 FDE, v3 attr)
	int info2 = -1;			// raw v3 info2 byte
	int64_t num_fres = -1;		// stored count; -1: fres.size()
	int64_t fre_off = -1;		// stored FRE offset; -1: real one
};

struct BSection {
	uint8_t version = 2;
	uint8_t flags = 0x1;		// SFRAME_F_FDE_SORTED
	uint8_t abi = 3;		// AMD64
	int8_t fixed_fp = 0;
	int8_t fixed_ra = -8;
	uint8_t aux_len = 0;
	uint64_t sec_addr = 0x10000;
	std::vector<BFde> fdes;
	int64_t num_fres = -1;		// header overrides; -1: real values
	int64_t fre_len = -1;
};

namespace detail {
inline void put(std::vector<uint8_t> &b, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		b.push_back((uint8_t)(v >> (8 * i)));
}
inline void poke(std::vector<uint8_t> &b, size_t at, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		b[at + i] = (uint8_t)(v >> (8 * i));
}
inline int fit_size(const std::vector<int64_t> &w)
{
	int s = 1;
	for (int64_t v : w) {
		if (v < -32768 || v > 32767)
			return 4;
		if (v < -128 || v > 127)
			s = 2;
	}
	return s;
}
} // namespace detail

inline int fre_type_for(uint32_t size)
{
	return size <= 0xff ? 0 : size <= 0xffff ? 1 : 2;
}

inline std::vector<uint8_t> build(const BSection &s)
{
	using detail::put;
	const bool v3 = s.version == 3;
	const unsigned fde_size = s.version == 1 ? 17 : v3 ? 16 : 20;

	// FRE sub-section first: FDEs need the offsets.
	std::vector<uint8_t> fres;
	std::vector<uint32_t> offs;
	uint32_t total_fres = 0;
	for (const BFde &f : s.fdes) {
		int ft = f.fre_type >= 0 ? f.fre_type : fre_type_for(f.size);
		int finfo = f.info >= 0 ? f.info :
			(ft & 0xf) | (f.pcmask << 4) | (f.signal << 7);
		offs.push_back((uint32_t)fres.size());
		if (v3) {
			uint64_t n = f.num_fres >= 0 ? (uint64_t)f.num_fres :
						       f.fres.size();
			put(fres, n, 2);
			put(fres, finfo, 1);
			put(fres, f.info2 >= 0 ? f.info2 : (f.flex ? 1 : 0), 1);
			put(fres, f.rep_size, 1);
		}
		for (const BFre &r : f.fres) {
			int ws = r.wsize ? r.wsize : detail::fit_size(r.words);
			int code = ws == 1 ? 0 : ws == 2 ? 1 : 2;
			int info = r.info >= 0 ? r.info :
				(r.sp ? 1 : 0) |
				(((int)r.words.size() & 0xf) << 1) | (code << 5);
			put(fres, r.start, 1 << ft);
			put(fres, info, 1);
			for (int64_t w : r.words)
				put(fres, (uint64_t)w, ws);
		}
		total_fres += (uint32_t)f.fres.size();
	}

	std::vector<uint8_t> b;
	put(b, 0xdee2, 2);
	put(b, s.version, 1);
	put(b, s.flags, 1);
	put(b, s.abi, 1);
	put(b, (uint8_t)s.fixed_fp, 1);
	put(b, (uint8_t)s.fixed_ra, 1);
	put(b, s.aux_len, 1);
	put(b, s.fdes.size(), 4);
	put(b, s.num_fres >= 0 ? (uint64_t)s.num_fres : total_fres, 4);
	put(b, s.fre_len >= 0 ? (uint64_t)s.fre_len : fres.size(), 4);
	put(b, 0, 4);				  // FDEs right after the header
	put(b, s.fdes.size() * fde_size, 4);	  // then the FREs
	for (unsigned i = 0; i < s.aux_len; i++)
		b.push_back((uint8_t)(0xa0 + i));

	for (size_t i = 0; i < s.fdes.size(); i++) {
		const BFde &f = s.fdes[i];
		uint64_t field = s.sec_addr + b.size();	// this FDE's address
		uint64_t base = (s.flags & 0x4) ? field : s.sec_addr;
		int64_t enc = (int64_t)(f.start - base);
		int ft = f.fre_type >= 0 ? f.fre_type : fre_type_for(f.size);
		int finfo = f.info >= 0 ? f.info : (ft & 0xf) | (f.pcmask << 4);
		uint64_t fre_off = f.fre_off >= 0 ? (uint64_t)f.fre_off : offs[i];
		uint64_t n = f.num_fres >= 0 ? (uint64_t)f.num_fres :
					       f.fres.size();
		if (v3) {
			put(b, (uint64_t)enc, 8);
			put(b, f.size, 4);
			put(b, fre_off, 4);
		} else {
			put(b, (uint64_t)enc, 4);
			put(b, f.size, 4);
			put(b, fre_off, 4);
			put(b, n, 4);
			put(b, finfo, 1);
			if (s.version == 2) {
				put(b, f.rep_size, 1);
				put(b, 0, 2);
			}
		}
	}
	b.insert(b.end(), fres.begin(), fres.end());
	return b;
}

// Simple FRE constructors for default FDEs.
inline BFre fre(uint32_t start, bool sp, int64_t cfa)
{
	BFre r;
	r.start = start;
	r.sp = sp;
	r.words = { cfa };
	return r;
}

inline BFre fre_fp(uint32_t start, bool sp, int64_t cfa, int64_t fp)
{
	BFre r = fre(start, sp, cfa);
	r.words.push_back(fp);
	return r;
}

inline BFre fre_outermost(uint32_t start)
{
	BFre r;
	r.start = start;
	return r;
}

// A v3 flexible FDE of 0x40 bytes at start: CFA = SP + 8, then from 0x10
// CFA = *(FP - 8), RA at CFA - 8, FP at CFA - 16.
inline BFde flexible_function(uint64_t start)
{
	BFde fx;
	fx.start = start;
	fx.size = 0x40;
	fx.flex = true;
	BFre a, b;
	// DWARF registers 7 (RSP) and 6 (RBP).
	a.words = { flex_ctl(7, false, true), 8 };
	b.start = 0x10;
	b.words = { flex_ctl(6, true, true), -8,
		    flex_ctl(0, true, false), -8, flex_ctl(0, true, false),
		    -16 };
	fx.fres = { a, b };
	return fx;
}

} // namespace sftest
