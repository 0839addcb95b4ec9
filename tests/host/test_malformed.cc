// SPDX-License-Identifier: GPL-2.0
// Malformed, truncated, lying and faulting sections: each must give its
// specific error, never a crash and never a read outside the section.
#include <gtest/gtest.h>

#include <random>

#include "decoder_fixture.h"
#include "sframe_builder.h"
#include "test_support.h"

using namespace sftest;

namespace {

const uint64_t kSecAddr = 0x500000;
const uint64_t kText = 0x401000, kTextLen = 0x1000;

BSection sample(uint8_t version)
{
	BSection s;
	s.version = version;
	s.sec_addr = kSecAddr;
	BFde plt;
	plt.start = 0x401010;
	plt.size = 32;
	plt.pcmask = true;
	plt.rep_size = version >= 2 ? 16 : 0;
	plt.fres = { fre(0, true, 8), fre(11, true, 16) };
	BFde f1;
	f1.start = 0x401100;
	f1.size = 0x40;
	f1.fres = { fre(0, true, 8), fre_fp(1, true, 16, -16),
		    fre_fp(4, false, 16, -16), fre_fp(0x3e, true, 8, -16) };
	BFde f2;
	f2.start = 0x401140;
	f2.size = 0x300;
	f2.fres = { fre(0, true, 8), fre(0x200, true, 4000),
		    fre(0x2ff, true, 8) };
	s.fdes = { plt, f1, f2 };
	if (version == 3)
		s.fdes.push_back(flexible_function(0x401500));
	return s;
}

int init_bytes(const std::vector<uint8_t> &b)
{
	Decoder d(b);
	return d.init(kSecAddr);
}

int validate_bytes(const std::vector<uint8_t> &b)
{
	Decoder d(b);
	int ret = d.init(kSecAddr);
	if (!ret)
		ret = sframe_validate(&d.sec, kText, kTextLen);
	EXPECT_EQ(d.stats.out_of_range, 0u);
	return ret;
}

class Versions : public ::testing::TestWithParam<int> {};

TEST_P(Versions, SampleIsValid)
{
	EXPECT_EQ(validate_bytes(build(sample(GetParam()))), 0);
}

TEST_P(Versions, TruncatedAtEveryLength)
{
	// The FRE sub-section ends the section and its length is exact, so
	// any shorter section claims tables that do not fit.  The buffer is
	// exactly len bytes, so an over-read would also be caught by ASan.
	std::vector<uint8_t> full = build(sample(GetParam()));
	for (size_t len = 0; len < full.size(); len++) {
		std::vector<uint8_t> cut(full.begin(), full.begin() + len);
		Decoder d(cut);
		ASSERT_EQ(d.init(kSecAddr), -EINVAL) << len;
		ASSERT_EQ(d.stats.out_of_range, 0u);
		// The same bytes with an honest (short) size passed but a
		// larger buffer behind it: still refused.
		Decoder d2(full);
		ASSERT_EQ(d2.init(kSecAddr, len), -EINVAL) << len;
	}
}

TEST_P(Versions, BadMagic)
{
	std::vector<uint8_t> b = build(sample(GetParam()));
	b[0] = 0xde; // big-endian magic: 0xe2de read as little-endian
	b[1] = 0xe2;
	EXPECT_EQ(init_bytes(b), -ENOEXEC);
	b[0] = 0;
	b[1] = 0;
	EXPECT_EQ(init_bytes(b), -ENOEXEC);
}

TEST_P(Versions, UnsupportedHeader)
{
	const std::vector<uint8_t> good = build(sample(GetParam()));
	for (int v : { 0, 4, 5, 255 }) {
		std::vector<uint8_t> b = good;
		b[HDR_VERSION] = (uint8_t)v;
		EXPECT_EQ(init_bytes(b), -EOPNOTSUPP) << "version " << v;
	}
	for (int abi : { 0, 1, 2, 4, 200 }) {
		std::vector<uint8_t> b = good;
		b[HDR_ABI] = (uint8_t)abi;
		EXPECT_EQ(init_bytes(b), -EOPNOTSUPP) << "abi " << abi;
	}
	for (int flag : { 0x8, 0x10, 0x40, 0x80 }) {
		/* Version 3 has this project's extension (sframe_decode.h). */
		if (flag == SFRAME_F_X_CFA_ADDEND && GetParam() == 3)
			continue;
		std::vector<uint8_t> b = good;
		b[HDR_FLAGS] |= (uint8_t)flag;
		EXPECT_EQ(init_bytes(b), -EOPNOTSUPP) << "flag " << flag;
	}
	std::vector<uint8_t> b = good;
	b[HDR_FIXED_RA] = 0;
	EXPECT_EQ(init_bytes(b), -EOPNOTSUPP) << "no fixed RA offset";
}

TEST_P(Versions, LyingHeader)
{
	const std::vector<uint8_t> good = build(sample(GetParam()));
	const uint32_t nfdes = peek32(good, HDR_NUM_FDES);
	const uint32_t frelen = peek32(good, HDR_FRE_LEN);
	const uint32_t freoff = peek32(good, HDR_FREOFF);
	struct {
		const char *what;
		int field;
		uint32_t val;
	} lies[] = {
		{ "num_fdes + 1", HDR_NUM_FDES, nfdes + 1 },
		{ "num_fdes huge", HDR_NUM_FDES, 0xffffffff },
		{ "num_fdes * size wraps 32 bits", HDR_NUM_FDES, 0x10000000 },
		{ "fre_len + 1", HDR_FRE_LEN, frelen + 1 },
		{ "fre_len huge", HDR_FRE_LEN, 0xffffffff },
		{ "fdeoff past the end", HDR_FDEOFF, 0x100000 },
		{ "fdeoff huge", HDR_FDEOFF, 0xfffffff0 },
		{ "fdeoff into the FREs", HDR_FDEOFF, 4 },
		{ "freoff past the end", HDR_FREOFF, freoff + 1 },
		{ "freoff huge", HDR_FREOFF, 0xffffffff },
		{ "freoff inside the FDE table", HDR_FREOFF, freoff - 1 },
		{ "num_fres more than fre_len allows", HDR_NUM_FRES,
		  frelen / 2 + 1 },
		{ "num_fres huge", HDR_NUM_FRES, 0xffffffff },
	};
	for (const auto &l : lies) {
		std::vector<uint8_t> b = good;
		poke32(b, l.field, l.val);
		EXPECT_EQ(init_bytes(b), -EINVAL) << l.what;
	}
	// An aux header length that pushes everything past the end.
	std::vector<uint8_t> b = good;
	b[HDR_AUXLEN] = 255;
	EXPECT_EQ(init_bytes(b), -EINVAL) << "aux header";
	// Counts that pass init but not the FREs actually there.
	b = good;
	poke32(b, HDR_NUM_FRES, peek32(good, HDR_NUM_FRES) - 1);
	EXPECT_EQ(validate_bytes(b), -EINVAL) << "num_fres != sum";
}

TEST_P(Versions, FdeFieldsOutOfRange)
{
	int v = GetParam();
	sframe_fde fde;
	{
		// FRE offset past the FRE sub-section.
		BSection s = sample(v);
		s.fdes[1].fre_off = 0x7fffffff;
		Decoder d(build(s));
		ASSERT_EQ(d.init(kSecAddr), 0);
		EXPECT_EQ(sframe_get_fde(&d.sec, 1, &fde), -EINVAL);
		EXPECT_EQ(sframe_validate(&d.sec, kText, kTextLen), -EINVAL);
		sframe_row r;
		EXPECT_EQ(sframe_find_row(&d.sec, 0x401105, &r), -EINVAL);
		EXPECT_EQ(sframe_get_fde(&d.sec, d.sec.num_fdes, &fde),
			  -EINVAL);
		EXPECT_EQ(sframe_get_fde(&d.sec, 0xffffffff, &fde), -EINVAL);
	}
	{
		// More FREs than the sub-section can hold.
		BSection s = sample(v);
		s.fdes[2].num_fres = v == 3 ? 0xffff : 0x7fffffff;
		Decoder d(build(s));
		ASSERT_EQ(d.init(kSecAddr), 0);
		EXPECT_EQ(sframe_get_fde(&d.sec, 2, &fde), -EINVAL);
	}
	{
		// FRE type 3 does not exist.
		BSection s = sample(v);
		s.fdes[1].info = 3;
		Decoder d(build(s));
		ASSERT_EQ(d.init(kSecAddr), 0);
		EXPECT_EQ(sframe_get_fde(&d.sec, 1, &fde), -EINVAL);
	}
	if (v >= 2) {
		// A PC-mask FDE needs its block size.
		BSection s = sample(v);
		s.fdes[0].rep_size = 0;
		Decoder d(build(s));
		ASSERT_EQ(d.init(kSecAddr), 0);
		EXPECT_EQ(sframe_get_fde(&d.sec, 0, &fde), -EINVAL);
	}
	if (v == 3) {
		// Attribute record cut by the end of the FRE sub-section.
		BSection s = sample(v);
		std::vector<uint8_t> b = build(s);
		uint32_t frelen = peek32(b, HDR_FRE_LEN);
		// FDE 1's index entry: fre_off at 28 + 16 + 12.
		poke32(b, 28 + 16 + 12, frelen - 4);
		Decoder d(b);
		ASSERT_EQ(d.init(kSecAddr), 0);
		EXPECT_EQ(sframe_get_fde(&d.sec, 1, &fde), -EINVAL);
	}
}

TEST_P(Versions, UnsortedOrOverlappingFdes)
{
	int v = GetParam();
	sframe_row r;
	{
		BSection s = sample(v);
		std::swap(s.fdes[1], s.fdes[2]);
		EXPECT_EQ(validate_bytes(build(s)), -EINVAL) << "out of order";
	}
	{
		BSection s = sample(v);
		s.fdes[1].size = 0x41; // runs one byte into the next function
		s.fdes[1].fre_type = 0;
		EXPECT_EQ(validate_bytes(build(s)), -EINVAL) << "overlap";
	}
	{
		BSection s = sample(v);
		s.fdes[2].start = s.fdes[1].start;
		EXPECT_EQ(validate_bytes(build(s)), -EINVAL) << "same start";
	}
	{
		// Without the sorted flag the tables are not searched.
		BSection s = sample(v);
		s.flags = 0;
		Decoder d(build(s));
		ASSERT_EQ(d.init(kSecAddr), 0);
		EXPECT_EQ(sframe_validate(&d.sec, kText, kTextLen),
			  -EOPNOTSUPP);
		sframe_fde fde;
		EXPECT_EQ(sframe_find_fde(&d.sec, 0x401105, &fde),
			  -EOPNOTSUPP);
		EXPECT_EQ(sframe_find_row(&d.sec, 0x401105, &r), -EOPNOTSUPP);
		// Random access still works.
		EXPECT_EQ(sframe_get_fde(&d.sec, 1, &fde), 0);
	}
}

TEST_P(Versions, FdeOutsideText)
{
	std::vector<uint8_t> b = build(sample(GetParam()));
	Decoder d(b);
	ASSERT_EQ(d.init(kSecAddr), 0);
	// Each range leaves some function (partly) outside.
	EXPECT_EQ(sframe_validate(&d.sec, 0x401011, kTextLen), -EINVAL);
	EXPECT_EQ(sframe_validate(&d.sec, kText, 0x400), -EINVAL);
	EXPECT_EQ(sframe_validate(&d.sec, 0x402000, 0x1000), -EINVAL);
	EXPECT_EQ(sframe_validate(&d.sec, 0, 0x1000), -EINVAL);
	// A range that wraps around the address space.
	EXPECT_EQ(sframe_validate(&d.sec, 0x401000, ~0ull), -EINVAL);
	// And the exact hull passes.
	uint64_t end = GetParam() == 3 ? 0x401540 : 0x401440;
	EXPECT_EQ(sframe_validate(&d.sec, 0x401010, end - 0x401010), 0);
}

TEST_P(Versions, FreOrderAndBounds)
{
	int v = GetParam();
	sframe_fde fde;
	sframe_row r;
	{
		// Start offsets not increasing.
		BSection s = sample(v);
		s.fdes[1].fres[2].start = 1;
		Decoder d(build(s));
		ASSERT_EQ(d.init(kSecAddr), 0);
		EXPECT_EQ(sframe_validate(&d.sec, kText, kTextLen), -EINVAL);
		ASSERT_EQ(sframe_get_fde(&d.sec, 1, &fde), 0);
		EXPECT_EQ(sframe_get_fre(&d.sec, &fde, 1, &r), 0);
		EXPECT_EQ(sframe_get_fre(&d.sec, &fde, 2, &r), -EINVAL);
		EXPECT_EQ(sframe_find_row(&d.sec, 0x401100 + 0x30, &r),
			  -EINVAL);
	}
	{
		// Decreasing.
		BSection s = sample(v);
		s.fdes[1].fres[3].start = 2;
		EXPECT_EQ(validate_bytes(build(s)), -EINVAL);
	}
	{
		// Start at or past the function size.
		BSection s = sample(v);
		s.fdes[1].fres[3].start = 0x40;
		Decoder d(build(s));
		ASSERT_EQ(d.init(kSecAddr), 0);
		EXPECT_EQ(sframe_validate(&d.sec, kText, kTextLen), -EINVAL);
		ASSERT_EQ(sframe_get_fde(&d.sec, 1, &fde), 0);
		EXPECT_EQ(sframe_get_fre(&d.sec, &fde, 3, &r), -EINVAL);
	}
	if (v >= 2) {
		// PC-mask start past the block.
		BSection s = sample(v);
		s.fdes[0].fres[1].start = 16;
		EXPECT_EQ(validate_bytes(build(s)), -EINVAL);
	}
	{
		// The last FDE claims one FRE more than there is: the walk
		// runs past fre_len.
		BSection s = sample(v);
		s.fdes.back().num_fres = s.fdes.back().fres.size() + 1;
		s.num_fres = -1;
		std::vector<uint8_t> b = build(s);
		// Keep the header total consistent with the claim.
		poke32(b, HDR_NUM_FRES, peek32(b, HDR_NUM_FRES) + 1);
		Decoder d(b);
		ASSERT_EQ(d.init(kSecAddr), 0);
		uint32_t last = d.sec.num_fdes - 1;
		ASSERT_EQ(sframe_get_fde(&d.sec, last, &fde), 0);
		EXPECT_EQ(sframe_get_fre(&d.sec, &fde, fde.num_fres - 1, &r),
			  -EINVAL);
		EXPECT_EQ(sframe_validate(&d.sec, kText, kTextLen), -EINVAL);
	}
	{
		// fre_len one byte short: the last FRE runs past it.
		std::vector<uint8_t> b = build(sample(v));
		poke32(b, HDR_FRE_LEN, peek32(b, HDR_FRE_LEN) - 1);
		Decoder d(b);
		ASSERT_EQ(d.init(kSecAddr), 0);
		EXPECT_EQ(sframe_validate(&d.sec, kText, kTextLen), -EINVAL);
		uint32_t last = d.sec.num_fdes - 1;
		ASSERT_EQ(sframe_get_fde(&d.sec, last, &fde), 0);
		EXPECT_EQ(sframe_get_fre(&d.sec, &fde, fde.num_fres - 1, &r),
			  -EINVAL);
	}
	if (v < 3) {
		// The last FRE (f2's, one 1-byte word) claims a second word
		// that is not there.
		std::vector<uint8_t> b = build(sample(v));
		size_t info_at = b.size() - 2;
		ASSERT_EQ(b[info_at], 1 | (1 << 1));
		b[info_at] = 1 | (2 << 1);
		Decoder d(b);
		ASSERT_EQ(d.init(kSecAddr), 0);
		EXPECT_EQ(sframe_validate(&d.sec, kText, kTextLen), -EINVAL);
		ASSERT_EQ(sframe_get_fde(&d.sec, 2, &fde), 0);
		EXPECT_EQ(sframe_get_fre(&d.sec, &fde, 2, &r), -EINVAL);
		EXPECT_EQ(sframe_find_row(&d.sec, 0x401140 + 0x2ff, &r),
			  -EINVAL);
	}
}

TEST_P(Versions, BadFreInfo)
{
	int v = GetParam();
	struct {
		const char *what;
		int info;
		int expect;
	} bad[] = {
		{ "word size code 3", 1 | (1 << 1) | (3 << 5), -EINVAL },
		{ "three words in a default FRE", 1 | (3 << 1), -EINVAL },
		{ "fifteen words", 1 | (15 << 1), -EINVAL },
		// v1 has no outermost marker.
		{ "no words", 1, v == 1 ? -EINVAL : 0 },
	};
	for (const auto &b : bad) {
		SCOPED_TRACE(b.what);
		BSection s = sample(v);
		s.fdes[1].fres[1].info = b.info;
		std::vector<uint8_t> bytes = build(s);
		Decoder d(bytes);
		ASSERT_EQ(d.init(kSecAddr), 0);
		sframe_fde fde;
		sframe_row r;
		ASSERT_EQ(sframe_get_fde(&d.sec, 1, &fde), 0);
		int ret = sframe_get_fre(&d.sec, &fde, 1, &r);
		EXPECT_EQ(ret, b.expect);
		if (b.expect) {
			EXPECT_EQ(sframe_find_row(&d.sec, 0x401102, &r),
				  b.expect);
		}
	}
	{
		// A fixed FP offset leaves no room for an FP word.
		BSection s = sample(v);
		s.fixed_fp = -16;
		EXPECT_EQ(validate_bytes(build(s)), -EINVAL);
	}
}

// Every byte offset faulting in turn: init fails with -EFAULT exactly when
// the header is hit, validate (which reads every byte of these compact
// sections) whenever anything is hit, and lookups either fail with
// -EFAULT or give the unfaulted answer.
void fault_everywhere(const std::vector<uint8_t> &bytes, uint64_t sec_addr,
		      const std::vector<uint64_t> &pcs, uint64_t text_lo,
		      uint64_t text_len)
{
	std::vector<int> want_ret;
	std::vector<sframe_row> want_row;
	{
		Decoder d(bytes);
		ASSERT_EQ(d.init(sec_addr), 0);
		ASSERT_EQ(sframe_validate(&d.sec, text_lo, text_len), 0);
		for (uint64_t pc : pcs) {
			sframe_row r;
			std::memset(&r, 0, sizeof(r));
			want_ret.push_back(sframe_find_row(&d.sec, pc, &r));
			want_row.push_back(r);
		}
	}
	for (uint64_t k = 0; k < bytes.size(); k++) {
		Decoder d(bytes);
		d.src.fault_at = k;
		int ret = d.init(sec_addr);
		if (k < SFRAME_HDR_SIZE) {
			ASSERT_EQ(ret, -EFAULT) << k;
			continue;
		}
		ASSERT_EQ(ret, 0) << k;
		ASSERT_EQ(sframe_validate(&d.sec, text_lo, text_len), -EFAULT)
			<< k;
		for (size_t i = 0; i < pcs.size(); i++) {
			sframe_row r;
			std::memset(&r, 0, sizeof(r));
			ret = sframe_find_row(&d.sec, pcs[i], &r);
			if (ret == -EFAULT)
				continue;
			ASSERT_EQ(ret, want_ret[i]) << k << " pc " << pcs[i];
			if (!ret) {
				ASSERT_TRUE(row_eq(r, want_row[i]))
					<< k << " pc " << pcs[i];
			}
		}
		ASSERT_EQ(d.stats.out_of_range, 0u);
	}
}

TEST_P(Versions, FaultAtEveryOffset)
{
	BSection s = sample(GetParam());
	std::vector<uint64_t> pcs;
	for (const BFde &f : s.fdes)
		for (uint64_t pc = f.start - 1; pc <= f.start + f.size; pc++)
			pcs.push_back(pc);
	fault_everywhere(build(s), kSecAddr, pcs, kText, kTextLen);
}

// The section changes under the decoder: after every read a byte flips.
// Any result is acceptable except a crash or a read out of bounds.
struct Racer {
	std::vector<uint8_t> *buf;
	std::mt19937 rng;
	static void hook(void *arg, uint64_t, uint32_t)
	{
		Racer *r = (Racer *)arg;
		(*r->buf)[r->rng() % r->buf->size()] ^= (uint8_t)(1 << (r->rng() % 8));
	}
};

TEST_P(Versions, SectionChangingBetweenReads)
{
	BSection s = sample(GetParam());
	for (unsigned seed = 0; seed < 300; seed++) {
		Decoder d(build(s));
		Racer racer{ &d.data, std::mt19937(seed) };
		d.src.on_read = Racer::hook;
		d.src.on_read_arg = &racer;
		if (d.init(kSecAddr))
			continue;
		(void)sframe_validate(&d.sec, kText, kTextLen);
		for (const BFde &f : s.fdes) {
			sframe_row r;
			for (uint64_t pc = f.start; pc < f.start + f.size; pc += 7)
				(void)sframe_find_row(&d.sec, pc, &r);
		}
		ASSERT_EQ(d.stats.out_of_range, 0u);
	}
}

INSTANTIATE_TEST_SUITE_P(SFrame, Versions, ::testing::Values(1, 2, 3),
			 [](const auto &info) {
				 return "v" + std::to_string(info.param);
			 });

TEST(RealSectionFaults, FaultAtEveryOffset)
{
	ElfInfo elf;
	ASSERT_EQ(load_elf(std::string(SFRAME_PROG_DIR) + "/shapes_O2", elf),
		  "");
	std::vector<uint64_t> pcs;
	for (uint64_t pc = elf.text_lo; pc < elf.text_hi; pc += 101)
		pcs.push_back(pc);
	fault_everywhere(elf.sframe, elf.sframe_addr, pcs, elf.text_lo,
			 elf.text_hi - elf.text_lo);
}

} // namespace
