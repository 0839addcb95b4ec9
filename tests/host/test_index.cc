// SPDX-License-Identifier: GPL-2.0
// The FDE index (sframe_validate_index / sframe_find_row_indexed): on every
// section it is built for, an indexed lookup gives exactly what the search
// of the section gives, row or error; building refuses what the lookup
// could not rely on; a lookup's budget is spent as documented.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "decoder_fixture.h"
#include "sframe_builder.h"
#include "test_support.h"

using namespace sftest;

namespace {

const uint64_t kSecAddr = 0x500000;

// An index built in memory aligned for its 64-bit fields.
struct Index {
	std::vector<uint64_t> mem;
	int ret = 0;
	uint64_t size = 0;

	explicit Index(const sframe_section &sec)
	{
		ret = sframe_index_size(&sec, &size);
		if (ret)
			return;
		mem.resize((size + 7) / 8);
		ret = sframe_validate_index(&sec, 0, ~0ull, mem.data(), size);
	}
	const sframe_index *get() const
	{
		return ret ? nullptr : (const sframe_index *)mem.data();
	}
};

// Indexed and searched lookups agree on pc: same return, same row, same
// budget left; and the FDE the index gives is the one the search finds.
void expect_same(const Decoder &d, const Index &idx, uint64_t pc)
{
	sframe_row want, got;
	std::memset(&want, 0, sizeof(want));
	std::memset(&got, 0, sizeof(got));
	int want_ret = sframe_find_row(&d.sec, pc, &want);
	int got_ret = sframe_find_row_indexed(&d.sec, idx.get(), pc, &got,
					      nullptr);
	ASSERT_EQ(got_ret, want_ret) << std::hex << "pc 0x" << pc;
	if (!want_ret) {
		ASSERT_TRUE(row_eq(got, want)) << std::hex << "pc 0x" << pc;
	}

	// A rule from the index is the search's row, reduced; a row of
	// another shape gives none, and only a rule spends (one unit).
	uint32_t budget = 5;
	sframe_rule rule = sframe_index_find_rule(idx.get(), pc, &budget);
	if (rule.flags) {
		ASSERT_EQ(want_ret, 0) << std::hex << "pc 0x" << pc;
		EXPECT_EQ(budget, 4u);
		EXPECT_FALSE(want.outermost || want.signal_frame ||
			     want.cfa_deref);
		EXPECT_EQ(rule.flags & SFRAME_RULE_FAST, SFRAME_RULE_FAST);
		EXPECT_EQ(want.cfa_reg, (rule.flags & SFRAME_RULE_CFA_FP) ?
						SFRAME_REG_RBP : SFRAME_REG_RSP);
		EXPECT_EQ(want.cfa_offset, rule.cfa_off);
		EXPECT_EQ(want.ra.kind, SFRAME_LOC_CFA_OFFSET);
		EXPECT_EQ(want.ra.offset, rule.ra_off);
		if (rule.flags & SFRAME_RULE_FP_SAVED) {
			EXPECT_EQ(want.fp.kind, SFRAME_LOC_CFA_OFFSET);
			EXPECT_EQ(want.fp.offset, rule.fp_off);
		} else {
			EXPECT_EQ(want.fp.kind, SFRAME_LOC_SAME);
		}
	} else {
		EXPECT_EQ(budget, 5u);
	}
	budget = 0;
	EXPECT_EQ(sframe_index_find_rule(idx.get(), pc, &budget).flags, 0);

	// The FDE the index gives when it sends the caller to the FREs is
	// the one the search finds; a row from the index alone reads nothing.
	sframe_fde a, b;
	sframe_row r;
	int fa = sframe_find_fde(&d.sec, pc, &a);
	uint64_t reads = d.stats.reads;
	int fb = sframe_index_find_row(idx.get(), pc, &b, &r, nullptr);
	EXPECT_EQ(d.stats.reads, reads);
	if (fb == SFRAME_INDEX_READ_FRES) {
		ASSERT_EQ(fa, 0);
		EXPECT_EQ(b.func_start, a.func_start);
		EXPECT_EQ(b.func_size, a.func_size);
		EXPECT_EQ(b.fre_off, a.fre_off);
		EXPECT_EQ(b.num_fres, a.num_fres);
		EXPECT_EQ(b.fre_type, a.fre_type);
		EXPECT_EQ(b.pc_type, a.pc_type);
		EXPECT_EQ(b.rep_size, a.rep_size);
		EXPECT_EQ(b.flex, a.flex);
		EXPECT_EQ(b.signal_frame, a.signal_frame);
	} else if (fa) {
		EXPECT_EQ(fb, -ENOENT);
	}
}

TEST(Index, RealSectionsEveryPc)
{
	for (const char *name :
	     { "shapes_O2", "shapes_fp", "shapes_O0", "shapes_so",
	       "many_funcs" }) {
		SCOPED_TRACE(name);
		ElfInfo elf;
		ASSERT_EQ(load_elf(std::string(SFRAME_PROG_DIR) + "/" + name,
				   elf),
			  "");
		Decoder d(elf.sframe);
		ASSERT_EQ(d.init(elf.sframe_addr), 0);
		Index idx(d.sec);
		ASSERT_EQ(idx.ret, 0);
		// Every byte of text and a little around it.  The index keeps
		// the rows of every FDE of gcc's but those of a function
		// whose frame is beyond 16 bits of offset (shapes.c has one).
		for (uint64_t pc = elf.text_lo - 64; pc < elf.text_hi + 64;
		     pc++) {
			expect_same(d, idx, pc);
			sframe_fde f;
			sframe_row r;
			if (sframe_index_find_row(idx.get(), pc, &f, &r,
						  nullptr) !=
			    SFRAME_INDEX_READ_FRES)
				continue;
			bool wide = false;
			for (uint32_t j = 0; j < f.num_fres; j++) {
				ASSERT_EQ(sframe_get_fre(&d.sec, &f, j, &r), 0);
				wide |= r.cfa_offset != (int16_t)r.cfa_offset;
			}
			ASSERT_TRUE(wide) << std::hex << "pc 0x" << pc;
		}
		EXPECT_EQ(d.stats.out_of_range, 0u);
		// 20 bytes per FDE, 8 per FRE, and a few.
		EXPECT_LE(idx.size, 160 + 20 * (uint64_t)d.sec.num_fdes +
					    8 * (uint64_t)d.sec.num_fres);
	}
}

// Functions of random sizes with random gaps, zero-sized ones, several in
// one bucket and buckets with none, functions of many FREs and of 64 KiB
// and more: every PC near an edge, and random ones, agree.
TEST(Index, RandomLayoutsAtEveryEdge)
{
	std::mt19937 rng(7);
	for (int round = 0; round < 60; round++) {
		for (uint8_t v : { 1, 2, 3 }) {
			BSection s;
			s.version = v;
			s.sec_addr = kSecAddr;
			uint64_t at = 0x400000 + rng() % 64;
			int n = 1 + rng() % 40;
			for (int i = 0; i < n; i++) {
				BFde f;
				at += rng() % 4 == 0 ? rng() % 3000 : 0;
				f.start = at;
				f.size = rng() % 5 == 0 ? 0 :
				 rng() % 3 == 0 ? 1 + rng() % 8 :
				 rng() % 9 == 0 ? 0xff00 + rng() % 0x200 :
						 1 + rng() % 400;
				if (f.size)
					f.fres = { fre(0, true, 8) };
				// Up to 11 more FREs at increasing
				// offsets, some far apart.
				uint32_t more = f.size > 12 ? rng() % 12 : 0;
				uint32_t st = 0;
				for (uint32_t k = 0; k < more; k++) {
					uint32_t room = f.size - 1 - st;
					if (room < 1)
						break;
					st += 1 + rng() % std::min<uint32_t>(
							  room, rng() % 2 ? 6 :
							  0x2000);
					f.fres.push_back(fre_fp(
						st, rng() % 2, 8 + 8 * k,
						-16));
				}
				if (v >= 2 && f.size >= 32 && rng() % 4 == 0) {
					f.pcmask = true;
					f.rep_size = 16;
					f.fres = { fre(0, true, 8),
						   fre(11, true, 16) };
				}
				at += f.size;
				s.fdes.push_back(f);
			}
			Decoder d(build(s));
			ASSERT_EQ(d.init(kSecAddr), 0);
			Index idx(d.sec);
			ASSERT_EQ(idx.ret, 0) << "round " << round;
			// Every PC near a function's or an FRE's
			// boundary, and random ones in between.
			std::vector<uint64_t> edges = { at };
			for (const BFde &f : s.fdes) {
				edges.push_back(f.start);
				for (const BFre &r : f.fres)
					edges.push_back(f.start + r.start);
			}
			for (uint64_t e : edges)
				for (uint64_t pc = e - 3; pc < e + 3; pc++)
					expect_same(d, idx, pc);
			uint64_t lo = s.fdes.front().start - 20;
			for (int k = 0; k < 2000; k++)
				expect_same(d, idx, lo + rng() % (at + 40 - lo));
			EXPECT_EQ(d.stats.out_of_range, 0u);
		}
	}
}

BSection two_functions(uint8_t version)
{
	BSection s;
	s.version = version;
	s.sec_addr = kSecAddr;
	BFde a, b;
	a.start = 0x401000;
	a.size = 0x40;
	a.fres = { fre(0, true, 8), fre(1, true, 16), fre(0x3f, true, 8) };
	b.start = 0x401040;
	b.size = 0x20;
	b.fres = { fre(0, true, 8) };
	s.fdes = { a, b };
	return s;
}

// v3: two_functions() and a flexible FDE at 0x401080, whose rows the index
// does not keep.
BSection with_flexible_function()
{
	BSection s = two_functions(3);
	s.fdes.push_back(flexible_function(0x401080));
	return s;
}

TEST(Index, RefusesWhatTheLookupCannotRelyOn)
{
	for (uint8_t v : { 1, 2, 3 }) {
		SCOPED_TRACE(v);
		{
			BSection s = two_functions(v);
			s.flags = 0;
			Decoder d(build(s));
			ASSERT_EQ(d.init(kSecAddr), 0);
			EXPECT_EQ(Index(d.sec).ret, -EOPNOTSUPP);
		}
		{
			// Overlap (the first runs into the second).
			BSection s = two_functions(v);
			s.fdes[0].size = 0x41;
			s.fdes[0].fre_type = 0;
			Decoder d(build(s));
			ASSERT_EQ(d.init(kSecAddr), 0);
			EXPECT_EQ(Index(d.sec).ret, -EINVAL);
		}
		{
			// Three FDEs out of order: first and last in place.
			BSection s = two_functions(v);
			BFde c = s.fdes[1];
			c.start = 0x401080;
			s.fdes.push_back(c);
			std::swap(s.fdes[0].start, s.fdes[1].start);
			Decoder d(build(s));
			ASSERT_EQ(d.init(kSecAddr), 0);
			EXPECT_EQ(Index(d.sec).ret, -EINVAL);
		}
		{
			// Text of 4 GiB or more.
			BSection s = two_functions(v);
			s.fdes[1].start = s.fdes[0].start + (1ull << 32);
			if (v == 1 || v == 2)
				s.sec_addr = 0; // 32-bit start fields
			Decoder d(build(s));
			if (d.init(s.sec_addr))
				continue;
			uint64_t size;
			int ret = sframe_index_size(&d.sec, &size);
			if (v == 3)
				EXPECT_EQ(ret, -E2BIG);
			else
				EXPECT_TRUE(ret == -E2BIG || ret == 0);
		}
		{
			// The section grew more FDEs between size and build.
			BSection s = two_functions(v);
			Decoder d(build(s));
			ASSERT_EQ(d.init(kSecAddr), 0);
			uint64_t size;
			ASSERT_EQ(sframe_index_size(&d.sec, &size), 0);
			std::vector<uint64_t> mem(size / 8 + 1);
			EXPECT_EQ(sframe_validate_index(&d.sec, 0, ~0ull,
							mem.data(), size - 1),
				  -EINVAL);
		}
		{
			BSection s = two_functions(v);
			s.fdes.clear();
			Decoder d(build(s));
			ASSERT_EQ(d.init(kSecAddr), 0);
			EXPECT_EQ(Index(d.sec).ret, -ENOENT);
		}
	}
}

// Every byte of the section faulting in turn: building fails with -EFAULT
// where it reads that byte; a lookup with an index built gives what the
// search gives without the fault, or -EFAULT (it reads less than the
// search: a fault the search trips over may not concern it).
TEST(Index, FaultAtEveryOffset)
{
	for (uint8_t v : { 1, 2, 3 }) {
		SCOPED_TRACE(v);
		std::vector<uint8_t> bytes = build(two_functions(v));
		std::vector<int> want_ret;
		std::vector<sframe_row> want_row;
		{
			Decoder d(bytes);
			ASSERT_EQ(d.init(kSecAddr), 0);
			for (uint64_t pc = 0x400ff0; pc < 0x401070; pc++) {
				sframe_row r;
				std::memset(&r, 0, sizeof(r));
				want_ret.push_back(
					sframe_find_row(&d.sec, pc, &r));
				want_row.push_back(r);
			}
		}
		for (uint64_t k = SFRAME_HDR_SIZE; k < bytes.size(); k++) {
			Decoder d(bytes);
			d.src.fault_at = k;
			ASSERT_EQ(d.init(kSecAddr), 0);
			Index idx(d.sec);
			ASSERT_TRUE(idx.ret == 0 || idx.ret == -EFAULT)
				<< idx.ret;
			if (idx.ret)
				continue;
			for (uint64_t pc = 0x400ff0; pc < 0x401070; pc++) {
				size_t i = pc - 0x400ff0;
				sframe_row r;
				int ret = sframe_find_row_indexed(
					&d.sec, idx.get(), pc, &r, nullptr);
				if (ret == -EFAULT)
					continue;
				ASSERT_EQ(ret, want_ret[i]) << k << " " << pc;
				if (!ret) {
					ASSERT_TRUE(row_eq(r, want_row[i]));
				}
			}
			ASSERT_EQ(d.stats.out_of_range, 0u);
		}
	}
}

TEST(Index, BuildPausesLikeValidation)
{
	BSection s;
	s.version = 2;
	s.sec_addr = kSecAddr;
	for (int i = 0; i < 3 * SFRAME_VALIDATE_PAUSE_EVERY; i++) {
		BFde f;
		f.start = 0x400000 + 16 * (uint64_t)i;
		f.size = 16;
		f.fres = { fre(0, true, 8) };
		s.fdes.push_back(f);
	}
	Decoder d(build(s));
	ASSERT_EQ(d.init(kSecAddr), 0);
	{
		Index idx(d.sec);
		ASSERT_EQ(idx.ret, 0);
		EXPECT_GE(d.stats.pauses, 2u);
	}
	d.src.pause_ret = -EINTR;
	EXPECT_EQ(Index(d.sec).ret, -EINTR);
}

// One unit for a row from the index; one for the FDE and one per FRE read
// where the FDE keeps no rows; none left: -SFRAME_EBUDGET.
TEST(Index, SpendsTheBudget)
{
	Decoder d(build(two_functions(2)));
	ASSERT_EQ(d.init(kSecAddr), 0);
	Index idx(d.sec);
	ASSERT_EQ(idx.ret, 0);
	sframe_row row;
	// The row comes from the index: one unit, no read of the section.
	uint32_t budget = 100;
	uint64_t reads = d.stats.reads;
	ASSERT_EQ(sframe_find_row_indexed(&d.sec, idx.get(), 0x401002, &row,
					  &budget),
		  0);
	EXPECT_EQ(d.stats.reads, reads);
	EXPECT_EQ(budget, 100u - 1);
	EXPECT_EQ(row.cfa_offset, 16);
	budget = 0;
	EXPECT_EQ(sframe_find_row_indexed(&d.sec, idx.get(), 0x401002, &row,
					  &budget),
		  -SFRAME_EBUDGET);

	// A v3 flexible FDE keeps no rows: its FREs are read, at or below the
	// PC and the next one.
	Decoder d3(build(with_flexible_function()));
	ASSERT_EQ(d3.init(kSecAddr), 0);
	Index idx3(d3.sec);
	ASSERT_EQ(idx3.ret, 0);
	budget = 100;
	ASSERT_EQ(sframe_find_row_indexed(&d3.sec, idx3.get(), 0x401085, &row,
					  &budget),
		  0);
	EXPECT_EQ(budget, 100u - 1 - 2);
	for (uint32_t give = 0; give < 3; give++) {
		budget = give;
		EXPECT_EQ(sframe_find_row_indexed(&d3.sec, idx3.get(), 0x401085,
						  &row, &budget),
			  -SFRAME_EBUDGET)
			<< give;
		EXPECT_EQ(budget, 0u);
	}
}

// Rows the index keeps are the section's as registered: a section
// rewritten in place afterwards (which the uapi says to register again)
// does not change them.  A flexible FDE's FREs are read as they are.
TEST(Index, KeptRowsAreTheSectionAsRegistered)
{
	Decoder d(build(with_flexible_function()));
	ASSERT_EQ(d.init(kSecAddr), 0);
	Index idx(d.sec);
	ASSERT_EQ(idx.ret, 0);
	std::vector<sframe_row> before;
	for (uint64_t pc = 0x401000; pc < 0x401060; pc++) {
		sframe_row r;
		ASSERT_EQ(sframe_find_row(&d.sec, pc, &r), 0);
		before.push_back(r);
	}
	// Every FRE byte zeroed: the search now fails, the index does not.
	std::fill(d.data.begin() + d.sec.fre_start,
		  d.data.begin() + d.sec.fre_start + d.sec.fre_len, 0);
	for (uint64_t pc = 0x401000; pc < 0x401060; pc++) {
		sframe_row r;
		ASSERT_EQ(sframe_find_row_indexed(&d.sec, idx.get(), pc, &r,
						  nullptr),
			  0);
		EXPECT_TRUE(row_eq(r, before[pc - 0x401000]));
	}
	sframe_row r;
	EXPECT_NE(sframe_find_row_indexed(&d.sec, idx.get(), 0x401085, &r,
					  nullptr),
		  0);
}

// The section changes after the build (it is user memory): FREs the index
// does not keep are read checked, as the search reads them, and never out
// of bounds.
TEST(Index, SectionChangedAfterBuild)
{
	for (uint8_t v : { 1, 2, 3 }) {
		std::vector<uint8_t> bytes =
			build(v == 3 ? with_flexible_function() : two_functions(v));
		std::mt19937 rng(v);
		for (int round = 0; round < 2000; round++) {
			Decoder d(bytes);
			ASSERT_EQ(d.init(kSecAddr), 0);
			Index idx(d.sec);
			ASSERT_EQ(idx.ret, 0);
			d.data[SFRAME_HDR_SIZE + rng() % (d.data.size() -
							  SFRAME_HDR_SIZE)] =
				(uint8_t)rng();
			for (uint64_t pc = 0x400ff0; pc < 0x4010d0; pc++) {
				sframe_row row;
				int ret = sframe_find_row_indexed(
					&d.sec, idx.get(), pc, &row, nullptr);
				// No -E2BIG: an FDE grown past the cap has
				// no row (-ENOENT), as in the search.
				ASSERT_TRUE(ret == 0 || ret == -EINVAL ||
					    ret == -ENOENT)
					<< ret;
			}
			ASSERT_EQ(d.stats.out_of_range, 0u);
		}
	}
}

} // namespace
