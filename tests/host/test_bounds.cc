// SPDX-License-Identifier: GPL-2.0
// Bounds on decoding work (issue 10, finding 1): the cap on FREs per FDE,
// the budget of a lookup and of a walk, and the pauses of validation.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

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

TEST_P(BoundsVersions, FdeAboveTheCapIsRefused)
{
	Decoder d(one_long_function(GetParam(), kCap + 1));
	ASSERT_EQ(d.init(kSecAddr), 0);
	EXPECT_EQ(sframe_validate(&d.sec, kText, kTextLen), -E2BIG);
	// Lookups refuse it too: a section may be rewritten after validation.
	sframe_row row;
	EXPECT_EQ(sframe_find_row(&d.sec, 0x401000, &row), -E2BIG);
	sframe_fde fde;
	EXPECT_EQ(sframe_get_fde(&d.sec, 0, &fde), -E2BIG);
	EXPECT_EQ(d.stats.out_of_range, 0u);
}

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
// with a 4-byte start), refused at once: the cap is checked at the FDE,
// before any of its FREs is read.
TEST(Bounds, MaximalSectionIsRefusedQuickly)
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
	EXPECT_EQ(sframe_validate(&d.sec, kText, kTextLen), -E2BIG);
	sframe_row row;
	EXPECT_EQ(sframe_find_row(&d.sec, 0x401000 + n - 1, &row), -E2BIG);
	auto us = std::chrono::duration_cast<std::chrono::microseconds>(
		std::chrono::steady_clock::now() - t0).count();
	EXPECT_LT(us, 10000) << "refusal should not scan the FREs";
	EXPECT_LT(d.stats.bytes, 4096u);
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
