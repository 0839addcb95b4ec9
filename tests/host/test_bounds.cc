// SPDX-License-Identifier: GPL-2.0
// Bounds on decoding work (issue 10, finding 1): the cap on FREs per FDE,
// the budget of a lookup and of a walk, and the pauses of validation.
// Issue 28: an FDE above the cap is skipped (its function has no row), not
// a reason to refuse its section.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <tuple>
#include <vector>

#include "decoder_fixture.h"
#include "sframe_builder.h"

using namespace sftest;

namespace {

const uint64_t kSecAddr = 0x800000;
const uint64_t kText = 0x400000, kTextLen = 0x400000;
const uint32_t kCap = SFRAME_MAX_FRES_PER_FDE;

// One function at 0x401000 of nfres rows, one per byte, all "CFA = SP + 8".
BFde long_function(uint64_t start, uint32_t nfres)
{
	BFde f;
	f.start = start;
	f.size = nfres + 16;
	f.fres.reserve(nfres);
	for (uint32_t j = 0; j < nfres; j++)
		f.fres.push_back(fre(j, true, 8 + 8 * (j & 1)));
	return f;
}

std::vector<uint8_t> one_long_function(int version, uint32_t nfres)
{
	BSection s;
	s.version = (uint8_t)version;
	s.sec_addr = kSecAddr;
	s.fdes = { long_function(0x401000, nfres) };
	return build(s);
}

class BoundsVersions : public ::testing::TestWithParam<int> {};

TEST_P(BoundsVersions, FdeAtTheCapIsAccepted)
{
	Decoder d(one_long_function(GetParam(), kCap));
	ASSERT_EQ(d.init(kSecAddr), 0);
	EXPECT_EQ(sframe_validate(&d.sec, kText, kTextLen), 0);
	sframe_row row;
	ASSERT_EQ(sframe_find_row(&d.sec, 0x401000 + kCap - 1, &row), 0);
	EXPECT_EQ(row.start_off, kCap - 1);
	EXPECT_EQ(row.cfa_offset, 16);
	EXPECT_EQ(d.stats.out_of_range, 0u);
}

TEST_P(BoundsVersions, FdeAboveTheCapIsSkipped)
{
	Decoder d(one_long_function(GetParam(), kCap + 1));
	ASSERT_EQ(d.init(kSecAddr), 0);
	sframe_validation res;
	EXPECT_EQ(sframe_validate_report(&d.sec, kText, kTextLen, nullptr, 0,
					 &res), 0);
	EXPECT_EQ(res.fdes_skipped, 1u);
	EXPECT_EQ(res.skipped_bytes, kCap + 1 + 16);
	EXPECT_EQ(res.covered_bytes, 0u);
	// Lookups find no row, without reading an FRE, whether or not the
	// section was validated (it may be rewritten after validation).
	sframe_row row;
	for (uint64_t pc : { 0x401000ull, 0x401000ull + kCap,
			     0x401000ull + kCap + 15 }) {
		uint32_t budget = 100;
		d.reset_stats();
		EXPECT_EQ(sframe_find_row_budget(&d.sec, pc, &row, &budget),
			  -ENOENT);
		EXPECT_EQ(budget, 99u);	// the window of FDEs
		// v3: and its attribute record (a chunk, not decoded).
		EXPECT_EQ(d.stats.reads, GetParam() == 3 ? 2u : 1u);
	}
	sframe_fde fde;
	ASSERT_EQ(sframe_get_fde(&d.sec, 0, &fde), 0);
	EXPECT_EQ(fde.num_fres, kCap + 1);
	EXPECT_TRUE(sframe_fde_skipped(&fde));
	EXPECT_EQ(sframe_find_row_in_fde(&d.sec, &fde, 0x401000 + kCap, &row,
					 nullptr), -ENOENT);
	// Tools may still read its rows, one by one.
	ASSERT_EQ(sframe_get_fre(&d.sec, &fde, kCap, &row), 0);
	EXPECT_EQ(row.start_off, kCap);
	EXPECT_EQ(d.stats.out_of_range, 0u);
}

// Issue 28: a section of ordinary functions around one of 9,814 FREs (the
// gcc -O2 function of the issue had as many): validation accepts it and
// counts one FDE skipped; a PC in the long function has no row, searched
// or indexed, and its neighbours' PCs their rows, as without it.
struct Around {
	static constexpr uint64_t kBefore = 0x400f00, kLong = 0x401000,
				  kAfter = 0x404000;
	static constexpr uint32_t kLongFres = 9814;
	// Where the function after the long one starts.
	static uint64_t after(uint32_t long_fres)
	{
		const uint64_t end = kLong + long_fres + 16;
		return end <= kAfter ? kAfter : (end + 0xfff) & ~0xfffull;
	}
	static std::vector<uint8_t> build_section(int version, uint8_t flags,
						  uint32_t long_fres)
	{
		BSection s;
		s.version = (uint8_t)version;
		s.flags = flags;
		s.sec_addr = kSecAddr;
		BFde before;
		before.start = kBefore;
		before.size = 0x40;
		before.fres = { fre(0, true, 8), fre(1, true, 16),
				fre_fp(4, false, 16, -16) };
		BFde after;
		after.start = Around::after(long_fres);
		after.size = 0x30;
		after.fres = { fre(0, true, 8), fre(0x10, true, 24),
			       fre(0x2f, true, 8) };
		s.fdes = { before, long_function(kLong, long_fres), after };
		return build(s);
	}
};

// The rows of the neighbours, from the FREs above.
void expect_neighbours(const sframe_section &sec, const sframe_index *idx,
		       uint64_t after)
{
	struct {
		uint64_t pc;
		uint32_t start;
		uint8_t reg;
		int32_t cfa;
		bool fp_saved;
	} want[] = {
		{ Around::kBefore, 0, SFRAME_REG_RSP, 8, false },
		{ Around::kBefore + 3, 1, SFRAME_REG_RSP, 16, false },
		{ Around::kBefore + 0x3f, 4, SFRAME_REG_RBP, 16, true },
		{ after, 0, SFRAME_REG_RSP, 8, false },
		{ after + 0x10, 0x10, SFRAME_REG_RSP, 24, false },
		{ after + 0x2e, 0x10, SFRAME_REG_RSP, 24, false },
		{ after + 0x2f, 0x2f, SFRAME_REG_RSP, 8, false },
	};
	for (const auto &w : want) {
		SCOPED_TRACE(w.pc);
		for (int indexed = 0; indexed < 2; indexed++) {
			sframe_row row;
			ASSERT_EQ(indexed ? sframe_find_row_indexed(
						    &sec, idx, w.pc, &row,
						    nullptr) :
					    sframe_find_row(&sec, w.pc, &row),
				  0);
			EXPECT_EQ(row.start_off, w.start);
			EXPECT_EQ(row.cfa_reg, w.reg);
			EXPECT_EQ(row.cfa_offset, w.cfa);
			EXPECT_EQ(row.ra.kind, SFRAME_LOC_CFA_OFFSET);
			EXPECT_EQ(row.ra.offset, -8);
			EXPECT_EQ(row.fp.kind, w.fp_saved ?
						       SFRAME_LOC_CFA_OFFSET :
						       SFRAME_LOC_SAME);
			if (w.fp_saved) {
				EXPECT_EQ(row.fp.offset, -16);
			}
		}
	}
	// Around them: no FDE.
	sframe_row row;
	EXPECT_EQ(sframe_find_row(&sec, Around::kBefore - 1, &row), -ENOENT);
	EXPECT_EQ(sframe_find_row(&sec, after + 0x30, &row), -ENOENT);
}

// The long function: no row at any PC, searched or indexed; nothing of
// its FREs read (the search spends its FDE units only); no fast rule.
void expect_no_rows(Decoder &d, const sframe_index *idx, uint32_t nfres)
{
	const uint64_t size = nfres + 16;
	for (uint64_t off : { (uint64_t)0, (uint64_t)1, (uint64_t)4711,
			      (uint64_t)nfres / 2, (uint64_t)nfres - 1,
			      size - 1 }) {
		const uint64_t pc = Around::kLong + off;
		SCOPED_TRACE(pc);
		sframe_row row;
		uint32_t budget = SFRAME_LOOKUP_MAX_UNITS;
		EXPECT_EQ(sframe_find_row_budget(&d.sec, pc, &row, &budget),
			  -ENOENT);
		// Three FDEs: one window, no probe.
		EXPECT_EQ(budget, SFRAME_LOOKUP_MAX_UNITS - 1u);
		budget = 5;
		d.reset_stats();
		EXPECT_EQ(sframe_find_row_indexed(&d.sec, idx, pc, &row,
						  &budget), -ENOENT);
		EXPECT_EQ(d.stats.reads, 0u);
		EXPECT_EQ(budget, 4u);
		sframe_fde fde;
		EXPECT_EQ(sframe_index_find_row(idx, pc, &fde, &row, nullptr),
			  -ENOENT);
		EXPECT_EQ(sframe_index_find_rule(idx, pc, &budget).flags, 0);
		EXPECT_EQ(budget, 4u);
	}
}

class SkippedFde : public ::testing::TestWithParam<std::tuple<int, uint8_t>> {
    protected:
	int version() const { return std::get<0>(GetParam()); }
	uint8_t flags() const { return std::get<1>(GetParam()); }
};

TEST_P(SkippedFde, OnlyItsFunctionLosesItsRows)
{
	Decoder d(Around::build_section(version(), flags(),
					Around::kLongFres));
	ASSERT_EQ(d.init(kSecAddr), 0);
	EXPECT_EQ(sframe_validate(&d.sec, kText, kTextLen), 0);
	sframe_validation res;
	d.reset_stats();
	ASSERT_EQ(sframe_validate_report(&d.sec, kText, kTextLen, nullptr, 0,
					 &res), 0);
	EXPECT_EQ(res.fdes_skipped, 1u);
	EXPECT_EQ(res.skipped_bytes, Around::kLongFres + 16u);
	EXPECT_EQ(res.covered_bytes, 0x40u + 0x30u);
	// Its 9814 FREs (2 x 9814 bytes and more) were not read.
	EXPECT_LT(d.stats.bytes, 1024u);

	sframe_fde fde;
	ASSERT_EQ(sframe_get_fde(&d.sec, 1, &fde), 0);
	EXPECT_EQ(fde.num_fres, Around::kLongFres);
	EXPECT_TRUE(sframe_fde_skipped(&fde));
	ASSERT_EQ(sframe_get_fde(&d.sec, 2, &fde), 0);
	EXPECT_FALSE(sframe_fde_skipped(&fde));

	uint64_t size = 0;
	ASSERT_EQ(sframe_index_size(&d.sec, &size), 0);
	std::vector<uint64_t> mem((size + 7) / 8);
	sframe_validation ires;
	ASSERT_EQ(sframe_validate_report(&d.sec, kText, kTextLen, mem.data(),
					 size, &ires), 0);
	EXPECT_EQ(ires.fdes_skipped, 1u);
	EXPECT_EQ(ires.covered_bytes, res.covered_bytes);
	const sframe_index *idx = (const sframe_index *)mem.data();

	expect_no_rows(d, idx, Around::kLongFres);
	expect_neighbours(d.sec, idx, Around::after(Around::kLongFres));
	EXPECT_EQ(d.stats.out_of_range, 0u);
}

// Counts the index's 16-bit field cannot hold (v1, v2: 32-bit counts) and
// the most a v3 attribute record says: skipped all the same, never read
// as a count modulo 2^16 (70000 would be 4464 rows).
TEST_P(SkippedFde, CountsBeyondSixteenBits)
{
	const uint32_t n = version() == 3 ? 0xffff : 70000;
	Decoder d(Around::build_section(version(), flags(), n));
	ASSERT_EQ(d.init(kSecAddr), 0);
	uint64_t size = 0;
	ASSERT_EQ(sframe_index_size(&d.sec, &size), 0);
	std::vector<uint64_t> mem((size + 7) / 8);
	sframe_validation res;
	ASSERT_EQ(sframe_validate_report(&d.sec, kText, kTextLen, mem.data(),
					 size, &res), 0);
	EXPECT_EQ(res.fdes_skipped, 1u);
	const sframe_index *idx = (const sframe_index *)mem.data();
	expect_no_rows(d, idx, n);
	expect_neighbours(d.sec, idx, Around::after(n));
}

// Every version; v2 and v3 also with PC-relative start addresses.
INSTANTIATE_TEST_SUITE_P(V, SkippedFde,
			 ::testing::Values(std::make_tuple(1, (uint8_t)0x1),
					   std::make_tuple(2, (uint8_t)0x1),
					   std::make_tuple(2, (uint8_t)0x5),
					   std::make_tuple(3, (uint8_t)0x1),
					   std::make_tuple(3, (uint8_t)0x5)));

// A count that does not fit the section is still malformed (EINVAL), not
// too big: the cap is about FREs that are there.
TEST_P(BoundsVersions, CountBeyondTheSectionStaysInvalid)
{
	BSection s;
	s.version = (uint8_t)GetParam();
	s.sec_addr = kSecAddr;
	BFde f = long_function(0x401000, 4);
	f.num_fres = GetParam() == 3 ? 0xffff : 10000000;
	s.fdes = { f };
	Decoder d(build(s));
	ASSERT_EQ(d.init(kSecAddr), 0);
	sframe_fde fde;
	EXPECT_EQ(sframe_get_fde(&d.sec, 0, &fde), -EINVAL);
}

INSTANTIATE_TEST_SUITE_P(V, BoundsVersions, ::testing::Values(1, 2, 3));

// The maximal section of the issue: one FDE of 10 M FREs, 60 MB, under
// SFRAME_MAX_SECTION_SIZE.  Written directly (v2: 20-byte FDE, 6-byte FREs
// with a 4-byte start), accepted at once with that FDE skipped: the cap is
// checked at the FDE, and none of its FREs is read, neither by the
// validation nor by a lookup.
TEST(Bounds, MaximalSectionIsSkippedQuickly)
{
	const uint32_t n = 10u << 20;
	std::vector<uint8_t> b(28 + 20 + (size_t)n * 6);
	uint8_t *p = b.data();
	auto put = [&](size_t at, uint64_t v, int len) {
		for (int i = 0; i < len; i++)
			p[at + i] = (uint8_t)(v >> (8 * i));
	};
	put(0, 0xdee2, 2);
	put(2, 2, 1);		// version
	put(3, 1, 1);		// FDE_SORTED
	put(4, 3, 1);		// AMD64
	put(6, 0xf8, 1);	// RA at CFA - 8
	put(8, 1, 4);
	put(12, n, 4);
	put(16, (uint64_t)n * 6, 4);
	put(20, 0, 4);
	put(24, 20, 4);
	put(28, 0x401000 - kSecAddr, 4);
	put(32, n + 16, 4);
	put(36, 0, 4);
	put(40, n, 4);
	put(44, 2, 1);		// ADDR4 FREs
	for (uint32_t j = 0; j < n; j++) {
		size_t at = 48 + (size_t)j * 6;
		put(at, j, 4);
		p[at + 4] = 0x03;	// SP-based, one 1-byte word
		p[at + 5] = 8;
	}
	ASSERT_LE(b.size(), 64u << 20);

	Decoder d(std::move(b));
	ASSERT_EQ(d.init(kSecAddr), 0);
	auto t0 = std::chrono::steady_clock::now();
	sframe_validation res;
	// The text its 10 MiB function needs.
	EXPECT_EQ(sframe_validate_report(&d.sec, kText, 16u << 20, nullptr, 0,
					 &res), 0);
	EXPECT_EQ(res.fdes_skipped, 1u);
	EXPECT_EQ(res.skipped_bytes, n + 16u);
	sframe_row row;
	EXPECT_EQ(sframe_find_row(&d.sec, 0x401000 + n - 1, &row), -ENOENT);
	auto us = std::chrono::duration_cast<std::chrono::microseconds>(
		std::chrono::steady_clock::now() - t0).count();
	EXPECT_LT(us, 10000) << "skipping should not scan the FREs";
	EXPECT_LT(d.stats.bytes, 4096u);
	EXPECT_EQ(d.stats.pauses, 0u);
}

// What one lookup costs: the window read plus one unit per FRE read; the
// budget is lowered by exactly that, and one unit less stops the lookup.
TEST(Bounds, LookupSpendsItsUnitsAndStopsWhenShort)
{
	Decoder d(one_long_function(2, kCap));
	ASSERT_EQ(d.init(kSecAddr), 0);
	ASSERT_EQ(sframe_validate(&d.sec, kText, kTextLen), 0);
	const uint64_t pc = 0x401000 + kCap - 1;	// the last row

	sframe_row want, row;
	ASSERT_EQ(sframe_find_row(&d.sec, pc, &want), 0);
	uint32_t budget = 1u << 30;
	ASSERT_EQ(sframe_find_row_budget(&d.sec, pc, &row, &budget), 0);
	const uint32_t cost = (1u << 30) - budget;
	// One FDE: no probe, the window, then every FRE.
	EXPECT_EQ(cost, 1 + kCap);
	EXPECT_LE(cost, (uint32_t)SFRAME_LOOKUP_MAX_UNITS);
	EXPECT_TRUE(row_eq(row, want));

	budget = cost;
	EXPECT_EQ(sframe_find_row_budget(&d.sec, pc, &row, &budget), 0);
	EXPECT_EQ(budget, 0u);
	budget = cost - 1;
	d.reset_stats();
	EXPECT_EQ(sframe_find_row_budget(&d.sec, pc, &row, &budget),
		  -SFRAME_EBUDGET);
	EXPECT_EQ(budget, 0u);
	budget = 0;
	EXPECT_EQ(sframe_find_row_budget(&d.sec, pc, &row, &budget),
		  -SFRAME_EBUDGET);
	// An early row is cheap: the scan stops at the first FRE past it.
	budget = 100;
	ASSERT_EQ(sframe_find_row_budget(&d.sec, 0x401000 + 3, &row, &budget),
		  0);
	EXPECT_EQ(budget, 100u - (1 + 5));
	EXPECT_EQ(row.start_off, 3u);
}

// Binary-search probes count too, and stay within SFRAME_LOOKUP_MAX_UNITS.
TEST(Bounds, ProbesAreCounted)
{
	BSection s;
	s.version = 1;
	s.sec_addr = kSecAddr;
	const uint32_t nf = 100000;
	for (uint32_t i = 0; i < nf; i++) {
		BFde f;
		f.start = 0x400000 + 16ull * i;
		f.size = 16;
		f.fres = { fre(0, true, 8) };
		s.fdes.push_back(f);
	}
	Decoder d(build(s));
	ASSERT_EQ(d.init(kSecAddr), 0);
	ASSERT_EQ(sframe_validate(&d.sec, 0x400000, 16ull * nf), 0);
	for (uint32_t i : { 0u, 1u, 4711u, nf / 2, nf - 1 }) {
		uint32_t budget = 1000;
		sframe_row row;
		ASSERT_EQ(sframe_find_row_budget(&d.sec,
						 0x400000 + 16ull * i + 3,
						 &row, &budget), 0);
		uint32_t cost = 1000 - budget;
		// 100000 FDEs of 17 bytes, 15 to a window: 13 probes, the
		// window, one FRE.
		EXPECT_EQ(cost, 13u + 1 + 1) << i;
	}
}

// A walk's budget is shared by its lookups: with room for three lookups at
// the cap, the fourth stops, having done nothing.
TEST(Bounds, WalkBudgetRunsOut)
{
	BSection s;
	s.version = 3;
	s.flags = 0x5;	// sorted, PC-relative
	s.sec_addr = kSecAddr;
	for (int i = 0; i < 4; i++)
		s.fdes.push_back(long_function(0x401000 + 0x10000 * i, kCap));
	Decoder d(build(s));
	ASSERT_EQ(d.init(kSecAddr), 0);
	ASSERT_EQ(sframe_validate(&d.sec, kText, kTextLen), 0);
	uint32_t budget = 3 * (1 + kCap) + kCap / 2;
	sframe_row row;
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(sframe_find_row_budget(&d.sec,
						 0x401000 + 0x10000 * i +
						 kCap - 1, &row, &budget), 0);
	EXPECT_EQ(budget, kCap / 2);
	EXPECT_EQ(sframe_find_row_budget(&d.sec, 0x431000 + kCap - 1, &row,
					 &budget), -SFRAME_EBUDGET);
	EXPECT_EQ(budget, 0u);
}

// Validation pauses every SFRAME_VALIDATE_PAUSE_EVERY FDEs and FREs, and
// gives up with what the pause returned (the module: -EINTR for a task
// being killed) without reading on.
TEST(Bounds, ValidationPausesAndStops)
{
	BSection s;
	s.version = 2;
	s.sec_addr = kSecAddr;
	for (int i = 0; i < 5; i++)
		s.fdes.push_back(long_function(0x401000 + 0x10000 * i, kCap));
	Decoder d(build(s));
	ASSERT_EQ(d.init(kSecAddr), 0);
	ASSERT_EQ(sframe_validate(&d.sec, kText, kTextLen), 0);
	const uint64_t units = 5 + 5ull * kCap;
	EXPECT_EQ(d.stats.pauses, units / SFRAME_VALIDATE_PAUSE_EVERY);
	const uint64_t full_bytes = d.stats.bytes;

	d.reset_stats();
	d.src.pause_ret = -EINTR;
	EXPECT_EQ(sframe_validate(&d.sec, kText, kTextLen), -EINTR);
	EXPECT_EQ(d.stats.pauses, 1u);
	EXPECT_LT(d.stats.bytes, full_bytes / 4);
	// Lookups never pause: their work is bounded by the cap.
	d.reset_stats();
	sframe_row row;
	EXPECT_EQ(sframe_find_row(&d.sec, 0x441000 + kCap - 1, &row), 0);
	EXPECT_EQ(d.stats.pauses, 0u);
}

} // namespace
