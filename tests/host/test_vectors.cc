// SPDX-License-Identifier: GPL-2.0
// Version 2 and version 3 sections built by hand from the specification
// (sframe_builder.h), covering what Debian 12's toolchain cannot produce:
// rep_size, SFRAME_F_FDE_FUNC_START_PCREL, outermost FREs, v3 index and
// attribute records, flexible FDEs.
#include <gtest/gtest.h>

#include <climits>

#include "decoder_fixture.h"
#include "sframe_builder.h"

using namespace sftest;

namespace {

const uint64_t kSecAddr = 0x500000;

// What the specification says the row for pc is, from the builder's input:
// the last FRE whose start is at or below the PC's offset in the function
// (modulo the block size for PC-mask FDEs).
const BFre *model_row(const BFde &f, uint64_t pc)
{
	if (pc < f.start || pc - f.start >= f.size)
		return nullptr;
	uint64_t off = pc - f.start;
	if (f.pcmask)
		off %= f.rep_size ? f.rep_size : SFRAME_V1_PCMASK_BLOCK;
	const BFre *best = nullptr;
	for (const BFre &r : f.fres)
		if (r.start <= off)
			best = &r;
	return best;
}

// For default FDEs: compare every PC of every function (and the gaps
// between them) with the model.
void check_all_pcs(const BSection &s, Decoder &d)
{
	uint64_t lo = s.fdes.front().start - 16;
	uint64_t hi = s.fdes.back().start + s.fdes.back().size + 16;
	for (uint64_t pc = lo; pc < hi; pc++) {
		const BFde *f = nullptr;
		for (const BFde &x : s.fdes)
			if (pc >= x.start && pc - x.start < x.size)
				f = &x;
		const BFre *want = f ? model_row(*f, pc) : nullptr;
		sframe_row row;
		int ret = sframe_find_row(&d.sec, pc, &row);
		if (!want) {
			ASSERT_EQ(ret, -ENOENT) << std::hex << pc;
			continue;
		}
		ASSERT_EQ(ret, 0) << std::hex << pc;
		ASSERT_EQ(row.start_off, want->start) << std::hex << pc;
		if (want->words.empty()) {
			ASSERT_TRUE(row.outermost);
			ASSERT_EQ(row.ra.kind, SFRAME_LOC_UNDEFINED);
			continue;
		}
		ASSERT_FALSE(row.outermost);
		ASSERT_EQ(row.cfa_reg,
			  want->sp ? SFRAME_REG_RSP : SFRAME_REG_RBP);
		ASSERT_EQ(row.cfa_offset, want->words[0]) << std::hex << pc;
		ASSERT_EQ(row.ra.kind, SFRAME_LOC_CFA_OFFSET);
		ASSERT_EQ(row.ra.offset, s.fixed_ra);
		if (want->words.size() > 1) {
			ASSERT_EQ(row.fp.kind, SFRAME_LOC_CFA_OFFSET);
			ASSERT_EQ(row.fp.offset, want->words[1]);
		} else {
			ASSERT_EQ(row.fp.kind, SFRAME_LOC_SAME);
		}
		ASSERT_EQ(row.signal_frame, f->signal);
	}
	EXPECT_EQ(d.stats.out_of_range, 0u);
}

// A PLT-like layout plus ordinary functions.
BSection typical(uint8_t version, uint8_t flags)
{
	BSection s;
	s.version = version;
	s.flags = flags;
	s.sec_addr = kSecAddr;

	BFde plt0;		// PLT0: push, jmp
	plt0.start = 0x401000;
	plt0.size = 16;
	plt0.fres = { fre(0, true, 16), fre(6, true, 24) };

	BFde pltn;		// pltN entries: repeated 16-byte blocks
	pltn.start = 0x401010;
	pltn.size = 64;
	pltn.pcmask = true;
	pltn.rep_size = 16;
	pltn.fres = { fre(0, true, 8), fre(11, true, 16) };

	BFde f1;		// pushes, frame pointer, epilogue
	f1.start = 0x401100;
	f1.size = 0x40;
	f1.fres = { fre(0, true, 8), fre_fp(1, true, 16, -16),
		    fre_fp(4, false, 16, -16), fre_fp(0x3e, true, 8, -16) };

	BFde f2;		// leaf
	f2.start = 0x401140;
	f2.size = 3;
	f2.fres = { fre(0, true, 8) };

	s.fdes = { plt0, pltn, f1, f2 };
	return s;
}

TEST(V2, TypicalSectionEveryPc)
{
	BSection s = typical(2, SFRAME_F_FDE_SORTED);
	Decoder d(build(s));
	ASSERT_EQ(d.init(kSecAddr), 0);
	EXPECT_EQ(d.sec.version, 2);
	EXPECT_EQ(d.sec.fde_size, 20u);
	EXPECT_EQ(sframe_validate(&d.sec, 0x401000, 0x1000), 0);
	check_all_pcs(s, d);
}

TEST(V2, FuncStartPcrel)
{
	// With the flag, start addresses are relative to each FDE's own
	// start-address field; the decoder must give the same functions.
	BSection s = typical(2, SFRAME_F_FDE_SORTED |
				     SFRAME_F_FDE_FUNC_START_PCREL);
	std::vector<uint8_t> bytes = build(s);
	// FDE 2 sits at 28 + 2 * 20 = 68: its field holds start - (sec + 68).
	EXPECT_EQ((int32_t)peek32(bytes, 68),
		  (int32_t)(0x401100 - (kSecAddr + 68)));
	Decoder d(bytes);
	ASSERT_EQ(d.init(kSecAddr), 0);
	sframe_fde fde;
	for (uint32_t i = 0; i < s.fdes.size(); i++) {
		ASSERT_EQ(sframe_get_fde(&d.sec, i, &fde), 0);
		EXPECT_EQ(fde.func_start, s.fdes[i].start);
	}
	EXPECT_EQ(sframe_validate(&d.sec, 0x401000, 0x1000), 0);
	check_all_pcs(s, d);

	// The same bytes read without the flag mean other addresses.
	bytes[HDR_FLAGS] = SFRAME_F_FDE_SORTED;
	Decoder d2(bytes);
	ASSERT_EQ(d2.init(kSecAddr), 0);
	ASSERT_EQ(sframe_get_fde(&d2.sec, 2, &fde), 0);
	EXPECT_EQ(fde.func_start, 0x401100u - 68);
}

TEST(V2, SectionRelativeStartsMoveWithTheSection)
{
	BSection s = typical(2, SFRAME_F_FDE_SORTED);
	Decoder d(build(s));
	// The same section mapped 0x1000 higher describes code 0x1000 higher.
	ASSERT_EQ(d.init(kSecAddr + 0x1000), 0);
	sframe_fde fde;
	ASSERT_EQ(sframe_find_fde(&d.sec, 0x402100, &fde), 0);
	EXPECT_EQ(fde.func_start, 0x402100u);
	EXPECT_EQ(sframe_find_fde(&d.sec, 0x401100, &fde), -ENOENT);
}

TEST(V2, PcMaskUsesRepSize)
{
	BSection s;
	s.sec_addr = kSecAddr;
	BFde f;
	f.start = 0x402000;
	f.size = 60;		// 5 blocks of 12 bytes: not a power of 2
	f.pcmask = true;
	f.rep_size = 12;
	f.fres = { fre(0, true, 8), fre(5, true, 16), fre(9, true, 24) };
	s.fdes = { f };
	Decoder d(build(s));
	ASSERT_EQ(d.init(kSecAddr), 0);
	for (uint64_t pc = f.start; pc < f.start + f.size; pc++) {
		sframe_row row;
		ASSERT_EQ(sframe_find_row(&d.sec, pc, &row), 0);
		uint64_t m = (pc - f.start) % 12;
		int want = m >= 9 ? 24 : m >= 5 ? 16 : 8;
		EXPECT_EQ(row.cfa_offset, want) << pc - f.start;
	}
	sframe_fde fde;
	ASSERT_EQ(sframe_get_fde(&d.sec, 0, &fde), 0);
	EXPECT_EQ(fde.pc_type, SFRAME_PC_MASK);
	EXPECT_EQ(fde.rep_size, 12);
}

TEST(V2, OutermostFre)
{
	// _start-like: the first row has no data words, RA undefined.
	BSection s;
	s.sec_addr = kSecAddr;
	BFde f;
	f.start = 0x401000;
	f.size = 0x20;
	f.fres = { fre_outermost(0), fre(4, true, 16) };
	s.fdes = { f };
	Decoder d(build(s));
	ASSERT_EQ(d.init(kSecAddr), 0);
	EXPECT_EQ(sframe_validate(&d.sec, 0x401000, 0x20), 0);
	sframe_row row;
	ASSERT_EQ(sframe_find_row(&d.sec, 0x401002, &row), 0);
	EXPECT_TRUE(row.outermost);
	EXPECT_EQ(row.ra.kind, SFRAME_LOC_UNDEFINED);
	ASSERT_EQ(sframe_find_row(&d.sec, 0x401004, &row), 0);
	EXPECT_FALSE(row.outermost);
	EXPECT_EQ(row.cfa_offset, 16);
	check_all_pcs(s, d);
}

TEST(V2, FreStartAddressTypes)
{
	BSection s;
	s.sec_addr = kSecAddr;
	BFde a, b, c;
	a.start = 0x410000;		// ADDR1
	a.size = 0xff;
	a.fres = { fre(0, true, 8), fre(0x80, true, 16), fre(0xfe, true, 8) };
	b.start = 0x420000;		// ADDR2
	b.size = 0x9000;
	b.fres = { fre(0, true, 8), fre(0x100, true, 16),
		   fre(0x8fff, true, 8) };
	c.start = 0x440000;		// ADDR4
	c.size = 0x20000;
	c.fres = { fre(0, true, 8), fre(0x10000, true, 32),
		   fre(0x1ffff, true, 8) };
	s.fdes = { a, b, c };
	Decoder d(build(s));
	ASSERT_EQ(d.init(kSecAddr), 0);
	EXPECT_EQ(sframe_validate(&d.sec, 0x400000, 0x100000), 0);
	for (uint32_t i = 0; i < 3; i++) {
		sframe_fde fde;
		ASSERT_EQ(sframe_get_fde(&d.sec, i, &fde), 0);
		EXPECT_EQ(fde.fre_type, i);
		for (uint32_t j = 0; j < 3; j++) {
			sframe_row row;
			ASSERT_EQ(sframe_get_fre(&d.sec, &fde, j, &row), 0);
			EXPECT_EQ(row.start_off, s.fdes[i].fres[j].start);
		}
	}
	check_all_pcs(s, d);
}

TEST(V2, DataWordSizes)
{
	BSection s;
	s.sec_addr = kSecAddr;
	BFde f;
	f.start = 0x401000;
	f.size = 0x100;
	const int64_t vals[][2] = {
		{ 127, -128 },		{ 8, -8 },	   // 1 byte
		{ 32767, -32768 },	{ 300, -300 },	   // 2 bytes
		{ INT32_MAX, INT32_MIN }, { 100000, -100000 }, // 4 bytes
	};
	uint32_t k = 0;
	for (const auto &v : vals) {
		f.fres.push_back(fre_fp(k * 16, k % 2, v[0], v[1]));
		k++;
	}
	// Small values written in wider words decode the same.
	BFre wide = fre_fp(0x70, true, 8, -16);
	wide.wsize = 4;
	f.fres.push_back(wide);
	s.fdes = { f };
	std::vector<uint8_t> bytes = build(s);
	Decoder d(bytes);
	ASSERT_EQ(d.init(kSecAddr), 0);
	sframe_fde fde;
	ASSERT_EQ(sframe_get_fde(&d.sec, 0, &fde), 0);
	for (uint32_t j = 0; j < f.fres.size(); j++) {
		sframe_row row;
		ASSERT_EQ(sframe_get_fre(&d.sec, &fde, j, &row), 0);
		EXPECT_EQ(row.cfa_offset, f.fres[j].words[0]) << j;
		EXPECT_EQ(row.fp.kind, SFRAME_LOC_CFA_OFFSET);
		EXPECT_EQ(row.fp.offset, f.fres[j].words[1]) << j;
	}
	check_all_pcs(s, d);
}

TEST(V2, FixedFpOffsetInHeader)
{
	BSection s;
	s.sec_addr = kSecAddr;
	s.fixed_fp = -16;
	BFde f;
	f.start = 0x401000;
	f.size = 0x10;
	f.fres = { fre(0, true, 8), fre(4, false, 16) };
	s.fdes = { f };
	Decoder d(build(s));
	ASSERT_EQ(d.init(kSecAddr), 0);
	EXPECT_EQ(d.sec.fixed_fp_offset, -16);
	sframe_row row;
	ASSERT_EQ(sframe_find_row(&d.sec, 0x401005, &row), 0);
	EXPECT_EQ(row.fp.kind, SFRAME_LOC_CFA_OFFSET);
	EXPECT_EQ(row.fp.offset, -16);
	EXPECT_EQ(row.cfa_reg, SFRAME_REG_RBP);
}

TEST(V2, AuxiliaryHeaderIsSkipped)
{
	BSection s = typical(2, SFRAME_F_FDE_SORTED);
	s.aux_len = 9;
	Decoder d(build(s));
	ASSERT_EQ(d.init(kSecAddr), 0);
	EXPECT_EQ(d.sec.fde_start, 28u + 9u);
	EXPECT_EQ(sframe_validate(&d.sec, 0x401000, 0x1000), 0);
	check_all_pcs(s, d);
}

TEST(V2, EmptySection)
{
	BSection s;
	s.sec_addr = kSecAddr;
	Decoder d(build(s));
	ASSERT_EQ(d.init(kSecAddr), 0);
	EXPECT_EQ(sframe_validate(&d.sec, 0, 0x1000), 0);
	sframe_row row;
	EXPECT_EQ(sframe_find_row(&d.sec, 0x401000, &row), -ENOENT);
}

TEST(V2, FdeWithoutFres)
{
	BSection s = typical(2, SFRAME_F_FDE_SORTED);
	s.fdes[3].fres.clear();
	Decoder d(build(s));
	ASSERT_EQ(d.init(kSecAddr), 0);
	EXPECT_EQ(sframe_validate(&d.sec, 0x401000, 0x1000), 0);
	sframe_row row;
	EXPECT_EQ(sframe_find_row(&d.sec, s.fdes[3].start, &row), -ENOENT);
}

TEST(V1, PcMaskAssumesPltEntrySize)
{
	// v1 has no rep_size: lookups use the 16-byte PLT entry size.
	BSection s = typical(1, SFRAME_F_FDE_SORTED);
	Decoder d(build(s));
	ASSERT_EQ(d.init(kSecAddr), 0);
	EXPECT_EQ(d.sec.fde_size, 17u);
	sframe_fde fde;
	ASSERT_EQ(sframe_get_fde(&d.sec, 1, &fde), 0);
	EXPECT_EQ(fde.rep_size, 0);
	EXPECT_EQ(fde.pc_type, SFRAME_PC_MASK);
	check_all_pcs(s, d);
}

// ---- Version 3 ----

TEST(V3, TypicalSectionEveryPc)
{
	for (uint8_t flags : { SFRAME_F_FDE_SORTED,
			       SFRAME_F_FDE_SORTED |
				       SFRAME_F_FDE_FUNC_START_PCREL }) {
		SCOPED_TRACE(flags);
		BSection s = typical(3, flags);
		s.fdes[2].signal = true;
		std::vector<uint8_t> bytes = build(s);
		Decoder d(bytes);
		ASSERT_EQ(d.init(kSecAddr), 0);
		EXPECT_EQ(d.sec.fde_size, 16u);
		// FDE 1's attribute record sits at its fre_off: {2, info,
		// info2, 16}.
		uint32_t fre_off = peek32(bytes, 28 + 16 + 12);
		const uint8_t *a = bytes.data() + d.sec.fre_start + fre_off;
		EXPECT_EQ(a[0] | a[1] << 8, 2);
		EXPECT_EQ(a[4], 16);
		sframe_fde fde;
		ASSERT_EQ(sframe_get_fde(&d.sec, 1, &fde), 0);
		EXPECT_EQ(fde.fre_off, fre_off + 5);
		EXPECT_EQ(fde.rep_size, 16);
		EXPECT_EQ(fde.num_fres, 2u);
		ASSERT_EQ(sframe_get_fde(&d.sec, 2, &fde), 0);
		EXPECT_TRUE(fde.signal_frame);
		EXPECT_EQ(sframe_validate(&d.sec, 0x401000, 0x1000), 0);
		check_all_pcs(s, d);
	}
}

// A lookup reads the start field of each FDE the binary search probes
// (4 bytes in v2, 8 in v3) until the candidates fit in 256 bytes, then
// those FDEs in one read, then the function's FREs in one chunk: in v3
// the attribute record heading them comes in that same chunk.
TEST(V3, LookupReadsProbesWindowAndOneChunk)
{
	for (uint8_t version : { 2, 3 }) {
		SCOPED_TRACE((int)version);
		BSection s;
		s.version = version;
		s.sec_addr = kSecAddr;
		for (int i = 0; i < 300; i++) {
			BFde f;
			f.start = 0x401000 + 0x40 * i;
			f.size = 0x40;
			f.fres = { fre(0, true, 8), fre_fp(1, true, 16, -16),
				   fre(0x3e, true, 8) };
			s.fdes.push_back(f);
		}
		Decoder d(build(s));
		ASSERT_EQ(d.init(kSecAddr), 0);
		const uint32_t size = d.sec.fde_size;
		unsigned probes = 0;
		for (uint32_t m = d.sec.num_fdes; m > 256 / size; m -= m / 2)
			probes++;
		for (uint32_t i = 0; i < d.sec.num_fdes; i++) {
			sframe_fde fde;
			ASSERT_EQ(sframe_get_fde(&d.sec, i, &fde), 0);
			uint64_t fres = d.sec.fre_start + fde.fre_off -
					(version == 3 ? 5 : 0);
			sframe_row row;
			d.reset_stats();
			ASSERT_EQ(sframe_find_row(&d.sec, fde.func_start + 2,
						  &row), 0);
			EXPECT_EQ(row.start_off, 1u);
			EXPECT_EQ(d.stats.reads, probes + 2u) << i;
			EXPECT_EQ(d.stats.last_off, fres) << i;
			EXPECT_LE(d.stats.max_len, 256u);
		}
		EXPECT_EQ(d.stats.out_of_range, 0u);
	}
}

TEST(V3, SixtyFourBitStartOffsets)
{
	// v3 start offsets are 64-bit: the section may be farther than
	// 2 GiB from the code it describes.
	BSection s = typical(3, SFRAME_F_FDE_SORTED |
				     SFRAME_F_FDE_FUNC_START_PCREL);
	s.sec_addr = 0x7f1234560000;
	Decoder d(build(s));
	ASSERT_EQ(d.init(s.sec_addr), 0);
	sframe_fde fde;
	ASSERT_EQ(sframe_find_fde(&d.sec, 0x401105, &fde), 0);
	EXPECT_EQ(fde.func_start, 0x401100u);
	EXPECT_EQ(sframe_validate(&d.sec, 0x400000, 0x10000), 0);
	check_all_pcs(s, d);
}

// One flexible FDE with the given FREs, decoded row by row.
struct Flex {
	BSection s;
	std::unique_ptr<Decoder> d;
	sframe_fde fde;

	explicit Flex(std::vector<BFre> fres, uint8_t flags = SFRAME_F_FDE_SORTED)
	{
		s.version = 3;
		s.flags = flags;
		s.sec_addr = kSecAddr;
		BFde f;
		f.start = 0x401000;
		f.size = 0x100;
		f.flex = true;
		f.fres = std::move(fres);
		s.fdes = { f };
		d.reset(new Decoder(build(s)));
	}
	int row(uint32_t j, sframe_row &r)
	{
		int ret = d->init(kSecAddr);
		if (!ret)
			ret = sframe_get_fde(&d->sec, 0, &fde);
		if (!ret)
			ret = sframe_get_fre(&d->sec, &fde, j, &r);
		return ret;
	}
};

BFre flex_fre(uint32_t start, std::vector<int64_t> words, int wsize = 0)
{
	BFre r;
	r.start = start;
	r.words = std::move(words);
	r.wsize = wsize;
	return r;
}

TEST(V3Flex, DrapCfaFromMemory)
{
	// Stack realignment with a DRAP register: CFA = *(RBP - 8),
	// RA at CFA - 8, FP saved at CFA - 16.
	for (int ws : { 1, 2, 4 }) {
		SCOPED_TRACE(ws);
		Flex x({ flex_fre(0, { flex_ctl(SFRAME_REG_RSP, false, true), 8 },
				  ws),
			 flex_fre(0x20, { flex_ctl(SFRAME_REG_RBP, true, true), -8,
					  flex_ctl(0, true, false), -8,
					  flex_ctl(0, true, false), -16 },
				  ws) });
		sframe_row r;
		ASSERT_EQ(x.row(0, r), 0);
		EXPECT_EQ(x.fde.flex, 1);
		EXPECT_EQ(r.cfa_reg, SFRAME_REG_RSP);
		EXPECT_FALSE(r.cfa_deref);
		EXPECT_EQ(r.cfa_offset, 8);
		EXPECT_EQ(r.ra.kind, SFRAME_LOC_CFA_OFFSET);
		EXPECT_EQ(r.ra.offset, -8);
		EXPECT_EQ(r.fp.kind, SFRAME_LOC_SAME);

		ASSERT_EQ(x.row(1, r), 0);
		EXPECT_EQ(r.cfa_reg, SFRAME_REG_RBP);
		EXPECT_TRUE(r.cfa_deref);
		EXPECT_EQ(r.cfa_offset, -8);
		EXPECT_EQ(r.ra.kind, SFRAME_LOC_CFA_OFFSET);
		EXPECT_EQ(r.ra.offset, -8);
		EXPECT_EQ(r.fp.kind, SFRAME_LOC_CFA_OFFSET);
		EXPECT_EQ(r.fp.offset, -16);
		EXPECT_EQ(sframe_validate(&x.d->sec, 0x401000, 0x100), 0);
	}
}

TEST(V3Flex, ReturnAddressInRegister)
{
	// RA in r11 (e.g. a trampoline), FP in r10 plus 8, dereferenced.
	Flex x({ flex_fre(0, { flex_ctl(SFRAME_REG_RSP, false, true), 16,
			       flex_ctl(11, false, true), 0,
			       flex_ctl(10, true, true), 8 }) });
	sframe_row r;
	ASSERT_EQ(x.row(0, r), 0);
	EXPECT_EQ(r.cfa_reg, SFRAME_REG_RSP);
	EXPECT_EQ(r.cfa_offset, 16);
	EXPECT_EQ(r.ra.kind, SFRAME_LOC_REG_OFFSET);
	EXPECT_EQ(r.ra.reg, 11);
	EXPECT_FALSE(r.ra.deref);
	EXPECT_EQ(r.ra.offset, 0);
	EXPECT_EQ(r.fp.kind, SFRAME_LOC_REG_OFFSET);
	EXPECT_EQ(r.fp.reg, 10);
	EXPECT_TRUE(r.fp.deref);
	EXPECT_EQ(r.fp.offset, 8);
}

TEST(V3Flex, PaddingForRaThenFp)
{
	// RA keeps its default (fixed offset), signalled by one padding
	// word 0, then the FP pair.  Control words above 127 need 2 bytes.
	Flex x({ flex_fre(0, { flex_ctl(20, false, true), 32, 0,
			       flex_ctl(0, true, false), -24 }) });
	sframe_row r;
	ASSERT_EQ(x.row(0, r), 0);
	EXPECT_EQ(r.cfa_reg, 20);
	EXPECT_EQ(r.cfa_offset, 32);
	EXPECT_EQ(r.ra.kind, SFRAME_LOC_CFA_OFFSET);
	EXPECT_EQ(r.ra.offset, -8);
	EXPECT_EQ(r.fp.kind, SFRAME_LOC_CFA_OFFSET);
	EXPECT_EQ(r.fp.offset, -24);
}

TEST(V3Flex, FpAtAnInexpressibleRegisterIsUndefined)
{
	// gas 2.47 for ".cfi_escape 0x10,0x6,0x2,0x73,0x10" (RBP saved at
	// *(RBX + 16)): the FP's register is 0x1fffffff.  The row unwinds with
	// the caller's FP not recoverable; an RA like that is refused.
	const uint32_t inexpressible = 0x1fffffff;
	Flex x({ flex_fre(0, { flex_ctl(SFRAME_REG_RSP, false, true), 16, 0,
			       flex_ctl(inexpressible, true, true), 16 },
			  4) });
	sframe_row r;
	ASSERT_EQ(x.row(0, r), 0);
	EXPECT_EQ(r.cfa_reg, SFRAME_REG_RSP);
	EXPECT_EQ(r.cfa_offset, 16);
	EXPECT_EQ(r.ra.kind, SFRAME_LOC_CFA_OFFSET);
	EXPECT_EQ(r.ra.offset, -8);
	EXPECT_EQ(r.fp.kind, SFRAME_LOC_UNDEFINED);
	EXPECT_EQ(sframe_validate(&x.d->sec, 0x401000, 0x100), 0);

	Flex y({ flex_fre(0, { flex_ctl(SFRAME_REG_RSP, false, true), 16,
			       flex_ctl(inexpressible, true, true), 16 },
			  4) });
	EXPECT_EQ(y.row(0, r), -EINVAL);
}

TEST(V3Flex, OutermostAndFindRow)
{
	Flex x({ flex_fre(0, {}),
		 flex_fre(1, { flex_ctl(SFRAME_REG_RSP, false, true), 16 }) });
	ASSERT_EQ(x.d->init(kSecAddr), 0);
	sframe_row r;
	ASSERT_EQ(sframe_find_row(&x.d->sec, 0x401000, &r), 0);
	EXPECT_TRUE(r.outermost);
	ASSERT_EQ(sframe_find_row(&x.d->sec, 0x4010ff, &r), 0);
	EXPECT_FALSE(r.outermost);
	EXPECT_EQ(r.cfa_offset, 16);
	EXPECT_EQ(sframe_find_row(&x.d->sec, 0x401100, &r), -ENOENT);
}

TEST(V3Flex, MalformedControlWords)
{
	struct {
		const char *what;
		std::vector<int64_t> words;
	} bad[] = {
		{ "CFA not register based", { flex_ctl(0, true, false), 8 } },
		{ "only a control word", { flex_ctl(SFRAME_REG_RSP, 0, 1) } },
		{ "RA control word without its offset",
		  { flex_ctl(SFRAME_REG_RSP, 0, 1), 8, flex_ctl(0, 1, 0) } },
		{ "RA as CFA + offset, not a location",
		  { flex_ctl(SFRAME_REG_RSP, 0, 1), 8, 4, -8 } },
		{ "seven words",
		  { flex_ctl(SFRAME_REG_RSP, 0, 1), 8, 2, -8, 2, -16, 0 } },
		{ "padding, FP control word, no offset",
		  { flex_ctl(SFRAME_REG_RSP, 0, 1), 8, 0, 2 } },
		{ "register number past 255",
		  { flex_ctl(300, false, true), 8 } },
	};
	for (const auto &b : bad) {
		SCOPED_TRACE(b.what);
		Flex x({ flex_fre(0, b.words, 2) });
		sframe_row r;
		EXPECT_EQ(x.row(0, r), -EINVAL);
		ASSERT_EQ(x.d->init(kSecAddr), 0);
		EXPECT_EQ(sframe_find_row(&x.d->sec, 0x401000, &r), -EINVAL);
		EXPECT_EQ(sframe_validate(&x.d->sec, 0x401000, 0x100),
			  -EINVAL);
	}
}

TEST(V3Flex, CfaAddendExtension)
{
	// SFRAME_F_X_CFA_ADDEND: OpenSSL's perlasm CFA, *(RSP + 16) + 8,
	// then the FP saved at CFA - 16.
	const uint8_t flags = SFRAME_F_FDE_SORTED | SFRAME_F_X_CFA_ADDEND;
	const int64_t ctl = flex_ctl(SFRAME_REG_RSP, true, true) | 4;
	for (int ws : { 1, 2, 4 }) {
		SCOPED_TRACE(ws);
		Flex x({ flex_fre(0, { ctl, 16, 8 }, ws),
			 flex_fre(4, { ctl, 16, 8, 0, flex_ctl(0, true, false),
				       -16 },
				  ws) },
		       flags);
		sframe_row r;
		ASSERT_EQ(x.row(0, r), 0);
		EXPECT_EQ(r.cfa_reg, SFRAME_REG_RSP);
		EXPECT_TRUE(r.cfa_deref);
		EXPECT_EQ(r.cfa_offset, 16);
		EXPECT_EQ(r.cfa_addend, 8);
		EXPECT_EQ(r.ra.kind, SFRAME_LOC_CFA_OFFSET);
		EXPECT_EQ(r.ra.offset, -8);
		EXPECT_EQ(r.fp.kind, SFRAME_LOC_SAME);
		ASSERT_EQ(x.row(1, r), 0);
		EXPECT_EQ(r.cfa_addend, 8);
		EXPECT_EQ(r.fp.kind, SFRAME_LOC_CFA_OFFSET);
		EXPECT_EQ(r.fp.offset, -16);
		EXPECT_EQ(sframe_validate(&x.d->sec, 0x401000, 0x100), 0);
	}
	// Rows without the bit have no addend, in a section with the flag.
	Flex plain({ flex_fre(0, { flex_ctl(SFRAME_REG_RSP, true, true), 16 }) },
		   flags);
	sframe_row r;
	ASSERT_EQ(plain.row(0, r), 0);
	EXPECT_EQ(r.cfa_addend, 0);
}

TEST(V3Flex, CfaAddendOnlyWithTheFlagAndALoad)
{
	const uint8_t flags = SFRAME_F_FDE_SORTED | SFRAME_F_X_CFA_ADDEND;
	struct {
		const char *what;
		uint8_t flags;
		std::vector<int64_t> words;
	} bad[] = {
		// Without the flag bit 2 is the spec's: the addend would be
		// read as the RA's control word, 8, no location.
		{ "no flag", SFRAME_F_FDE_SORTED,
		  { flex_ctl(SFRAME_REG_RSP, true, true) | 4, 16, 8 } },
		{ "addend without a load", flags,
		  { flex_ctl(SFRAME_REG_RSP, false, true) | 4, 16, 8 } },
		{ "addend word missing", flags,
		  { flex_ctl(SFRAME_REG_RSP, true, true) | 4, 16 } },
		{ "eight words", flags,
		  { flex_ctl(SFRAME_REG_RSP, true, true) | 4, 16, 8, 2, -8, 2,
		    -16, 0 } },
	};
	for (const auto &b : bad) {
		SCOPED_TRACE(b.what);
		Flex x({ flex_fre(0, b.words, 2) }, b.flags);
		sframe_row r;
		EXPECT_EQ(x.row(0, r), -EINVAL);
		ASSERT_EQ(x.d->init(kSecAddr), 0);
		EXPECT_EQ(sframe_validate(&x.d->sec, 0x401000, 0x100),
			  -EINVAL);
	}
	// Version 2 has no such flag.
	BSection s = typical(2, SFRAME_F_FDE_SORTED | SFRAME_F_X_CFA_ADDEND);
	Decoder d(build(s));
	EXPECT_EQ(d.init(kSecAddr), -EOPNOTSUPP);
}

TEST(V3, UnknownFdeTypeIsNotSupported)
{
	BSection s = typical(3, SFRAME_F_FDE_SORTED);
	s.fdes[2].info2 = 2;
	Decoder d(build(s));
	ASSERT_EQ(d.init(kSecAddr), 0);
	sframe_fde fde;
	sframe_row r;
	EXPECT_EQ(sframe_get_fde(&d.sec, 2, &fde), -EOPNOTSUPP);
	EXPECT_EQ(sframe_find_row(&d.sec, s.fdes[2].start, &r), -EOPNOTSUPP);
	EXPECT_EQ(sframe_validate(&d.sec, 0x401000, 0x1000), -EOPNOTSUPP);
	// Other functions still decode.
	EXPECT_EQ(sframe_find_row(&d.sec, s.fdes[3].start, &r), 0);
}

} // namespace
