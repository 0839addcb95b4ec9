// SPDX-License-Identifier: GPL-2.0
// The decoder against real .sframe sections made by gcc -Wa,--gsframe and
// GNU ld (Debian 12: binutils 2.40, SFrame version 1), compared entry by
// entry with `readelf --sframe` of the same binaries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>

#include "decoder_fixture.h"
#include "test_support.h"

using namespace sftest;

namespace {

struct Prog {
	std::string name;
	ElfInfo elf;
	ReadelfDump dump;
};

// Built by tests/host/CMakeLists.txt into SFRAME_PROG_DIR: NAME (the ELF
// file) and NAME.readelf (readelf --sframe NAME).
const Prog &load_prog(const std::string &name)
{
	static std::map<std::string, Prog> cache;
	auto it = cache.find(name);
	if (it != cache.end())
		return it->second;
	Prog &p = cache[name];
	p.name = name;
	std::string path = std::string(SFRAME_PROG_DIR) + "/" + name;
	std::string err = load_elf(path, p.elf);
	EXPECT_EQ(err, "");
	std::vector<uint8_t> text = read_file(path + ".readelf");
	err = parse_readelf_sframe(std::string(text.begin(), text.end()),
				   p.dump);
	EXPECT_EQ(err, "");
	return p;
}

// The row readelf gives for pc in FDE f (the last FRE starting at or
// below the PC's offset, modulo the block size for PC-mask FDEs).
const ReadelfFre *readelf_row(const ReadelfFde &f, uint64_t pc)
{
	uint64_t off = pc - f.pc;
	if (f.pcmask)
		off %= SFRAME_V1_PCMASK_BLOCK;
	const ReadelfFre *best = nullptr;
	for (const ReadelfFre &r : f.fres) {
		uint64_t start = f.pcmask ? r.pc : r.pc - f.pc;
		if (start <= off)
			best = &r;
	}
	return best;
}

// Compare a decoded row with readelf's, for a section whose header has a
// fixed RA offset of fixed_ra and no fixed FP offset.
void expect_row_eq(const sframe_row &row, const ReadelfFre &r,
		   int8_t fixed_ra, const std::string &where)
{
	SCOPED_TRACE(where);
	if (r.ra_undefined) {
		EXPECT_TRUE(row.outermost);
		EXPECT_EQ(row.ra.kind, SFRAME_LOC_UNDEFINED);
		return;
	}
	EXPECT_FALSE(row.outermost);
	EXPECT_EQ(row.cfa_reg, r.cfa_sp ? SFRAME_REG_RSP : SFRAME_REG_RBP);
	EXPECT_FALSE(row.cfa_deref);
	EXPECT_EQ(row.cfa_offset, r.cfa_off);
	if (r.fp_saved) {
		EXPECT_EQ(row.fp.kind, SFRAME_LOC_CFA_OFFSET);
		EXPECT_EQ(row.fp.offset, r.fp_off);
	} else {
		EXPECT_EQ(row.fp.kind, SFRAME_LOC_SAME);
	}
	// readelf 2.40 prints "u" for an RA that the FRE does not carry,
	// later versions "f" (fixed): either way it is at the header's
	// fixed offset from the CFA.
	ASSERT_TRUE(r.ra == 'u' || r.ra == 'f' || r.ra == 'c');
	EXPECT_EQ(row.ra.kind, SFRAME_LOC_CFA_OFFSET);
	EXPECT_EQ(row.ra.offset, r.ra == 'c' ? r.ra_off : fixed_ra);
}

class RealSection : public ::testing::TestWithParam<const char *> {
    protected:
	void SetUp() override
	{
		prog = &load_prog(GetParam());
		ASSERT_FALSE(prog->elf.sframe.empty());
		dec.reset(new Decoder(prog->elf.sframe));
		ASSERT_EQ(dec->init(prog->elf.sframe_addr), 0);
	}
	const Prog *prog = nullptr;
	std::unique_ptr<Decoder> dec;
};

TEST_P(RealSection, HeaderMatchesReadelf)
{
	const sframe_section &s = dec->sec;
	EXPECT_EQ(s.version, prog->dump.version);
	EXPECT_EQ(s.num_fdes, prog->dump.num_fdes);
	EXPECT_EQ(s.num_fres, prog->dump.num_fres);
	EXPECT_EQ(s.abi_arch, SFRAME_ABI_AMD64_ENDIAN_LITTLE);
	EXPECT_TRUE(s.flags & SFRAME_F_FDE_SORTED);
	// Raw header byte 6, read here independently of the decoder.
	EXPECT_EQ(s.fixed_ra_offset, (int8_t)prog->elf.sframe[HDR_FIXED_RA]);
	EXPECT_EQ(s.fixed_ra_offset, -8);
	EXPECT_EQ(s.fixed_fp_offset, 0);
	EXPECT_GT(s.num_fdes, 3u);
}

TEST_P(RealSection, EveryFdeAndFreMatchesReadelf)
{
	const auto &fdes = prog->dump.fdes;
	ASSERT_EQ(fdes.size(), dec->sec.num_fdes);
	unsigned rows = 0, masks = 0;
	for (uint32_t i = 0; i < fdes.size(); i++) {
		const ReadelfFde &rf = fdes[i];
		sframe_fde fde;
		ASSERT_EQ(sframe_get_fde(&dec->sec, i, &fde), 0) << i;
		EXPECT_EQ(fde.func_start, rf.pc) << i;
		EXPECT_EQ(fde.func_size, rf.size) << i;
		EXPECT_EQ(fde.num_fres, rf.fres.size()) << i;
		EXPECT_EQ(fde.pc_type == SFRAME_PC_MASK, rf.pcmask) << i;
		EXPECT_EQ(fde.flex, 0) << i;
		masks += rf.pcmask;
		for (uint32_t j = 0; j < rf.fres.size(); j++) {
			sframe_row row;
			ASSERT_EQ(sframe_get_fre(&dec->sec, &fde, j, &row), 0);
			const ReadelfFre &r = rf.fres[j];
			EXPECT_EQ(row.start_off, rf.pcmask ? r.pc : r.pc - rf.pc);
			expect_row_eq(row, r, dec->sec.fixed_ra_offset,
				      "fde " + std::to_string(i) + " fre " +
					      std::to_string(j));
			rows++;
		}
	}
	EXPECT_EQ(rows, prog->dump.num_fres);
	// ld gives the PLT a PC-mask FDE; every program here calls libc.
	EXPECT_GE(masks, 1u);
}

TEST_P(RealSection, FdesStartAtTheirSymbols)
{
	// Independent of readelf: FDE start addresses against the symbol
	// table.  A function symbol that has an FDE starting at its address
	// must have the same size.
	std::map<uint64_t, uint32_t> by_start;
	for (uint32_t i = 0; i < dec->sec.num_fdes; i++) {
		sframe_fde fde;
		ASSERT_EQ(sframe_get_fde(&dec->sec, i, &fde), 0);
		by_start[fde.func_start] = fde.func_size;
	}
	unsigned matched = 0;
	for (const ElfFunc &f : prog->elf.funcs) {
		auto it = by_start.find(f.addr);
		if (it == by_start.end())
			continue;
		EXPECT_EQ(it->second, f.size) << f.name;
		matched++;
	}
	// All but the PLT and (maybe) crt code have symbols and FDEs.
	EXPECT_GE(matched + 3, dec->sec.num_fdes);
}

TEST_P(RealSection, Validates)
{
	EXPECT_EQ(sframe_validate(&dec->sec, prog->elf.text_lo,
				  prog->elf.text_hi - prog->elf.text_lo),
		  0);
	EXPECT_EQ(dec->stats.out_of_range, 0u);
}

TEST_P(RealSection, FindRowForEveryTextPc)
{
	const auto &fdes = prog->dump.fdes;
	size_t k = 0;
	uint64_t covered = 0, uncovered = 0;
	for (uint64_t pc = prog->elf.text_lo; pc < prog->elf.text_hi; pc++) {
		while (k < fdes.size() && fdes[k].pc + fdes[k].size <= pc)
			k++;
		sframe_row row;
		int ret = sframe_find_row(&dec->sec, pc, &row);
		if (k < fdes.size() && fdes[k].pc <= pc) {
			const ReadelfFre *r = readelf_row(fdes[k], pc);
			ASSERT_NE(r, nullptr);
			ASSERT_EQ(ret, 0) << std::hex << pc;
			expect_row_eq(row, *r, dec->sec.fixed_ra_offset,
				      "pc " + std::to_string(pc));
			if (::testing::Test::HasFailure())
				return;
			covered++;
		} else {
			ASSERT_EQ(ret, -ENOENT) << std::hex << pc;
			uncovered++;
		}
	}
	EXPECT_GT(covered, 0u);
	// crt code (_start and friends) has no FDE on Debian 12.
	EXPECT_GT(uncovered, 0u);
	// Outside the text entirely.
	sframe_row row;
	EXPECT_EQ(sframe_find_row(&dec->sec, 0, &row), -ENOENT);
	EXPECT_EQ(sframe_find_row(&dec->sec, prog->elf.text_hi + 4096, &row),
		  -ENOENT);
	EXPECT_EQ(sframe_find_row(&dec->sec, ~0ull, &row), -ENOENT);
	EXPECT_EQ(dec->stats.out_of_range, 0u);
}

// sframe_source.on_read hook: appends {offset, length} of every read.
void record_read(void *arg, uint64_t off, uint32_t len)
{
	((std::vector<std::pair<uint64_t, uint32_t>> *)arg)->emplace_back(off,
									 len);
}

TEST_P(RealSection, LookupsReadLittle)
{
	// Binary search: one 4-byte read per probe, halving the candidates
	// until they fit in 256 bytes, then one read of all of them (the FDE
	// found is decoded from it, not read again); the FRE walk reads
	// chunks of at most 64 bytes, fewer reads than FREs for functions
	// with many rows.  These sections are v1 (binutils 2.40).
	const auto &fdes = prog->dump.fdes;
	const uint32_t n = dec->sec.num_fdes;
	const uint32_t size = dec->sec.fde_size;
	unsigned want_probes = 0;
	for (uint32_t m = n; m > 256 / size; m -= m / 2)
		want_probes++;
	std::mt19937_64 rng(42);
	for (int t = 0; t < 500; t++) {
		const ReadelfFde &f = fdes[rng() % fdes.size()];
		uint64_t pc = f.pc + rng() % f.size;
		sframe_fde fde;
		dec->reset_stats();
		ASSERT_EQ(sframe_find_fde(&dec->sec, pc, &fde), 0);
		uint64_t probes = dec->stats.reads - 1;
		EXPECT_EQ(probes, want_probes);
		uint32_t window = dec->stats.last_len;
		EXPECT_EQ(dec->stats.bytes, probes * 4 + window);
		EXPECT_EQ(window % size, 0u);
		EXPECT_GE(window, size);
		EXPECT_LE(window, 256u);

		// The same search, then the walk: every read after the
		// window lies in the FRE sub-section and is a chunk of at
		// most 64 bytes.
		std::vector<std::pair<uint64_t, uint32_t>> reads;
		dec->src.on_read = record_read;
		dec->src.on_read_arg = &reads;
		sframe_row row;
		ASSERT_EQ(sframe_find_row(&dec->sec, pc, &row), 0);
		dec->src.on_read = nullptr;
		ASSERT_GE(reads.size(), probes + 2);
		EXPECT_EQ(reads[probes].second, window);
		uint64_t walk = reads.size() - probes - 1;
		for (size_t i = probes + 1; i < reads.size(); i++) {
			EXPECT_GE(reads[i].first, dec->sec.fre_start);
			EXPECT_LE(reads[i].second, 64u);
		}
		// Largest v1 AMD64 FRE: 4-byte start, info, two 4-byte words.
		uint64_t fre_bytes = (uint64_t)fde.num_fres * 13;
		EXPECT_LE(walk, 1 + fre_bytes / (64 - 13));
	}
}

INSTANTIATE_TEST_SUITE_P(Gcc, RealSection,
			 ::testing::Values("shapes_O2", "shapes_fp",
					   "shapes_O0", "shapes_so",
					   "many_funcs"));

// Issue 28: gcc -O2 -Wa,--gsframe made long_function() an FDE of more FREs
// than SFRAME_MAX_FRES_PER_FDE (progs/gen_long_function.cmake).  The
// section validates, with that one FDE skipped: no row anywhere in its
// function, searched or indexed, and readelf's row for every PC of every
// other function, as before.
TEST(RealSectionLongFunction, OnlyTheLongFunctionLosesItsRows)
{
	const Prog &p = load_prog("long_function");
	Decoder d(p.elf.sframe);
	ASSERT_EQ(d.init(p.elf.sframe_addr), 0);
	const uint64_t text_len = p.elf.text_hi - p.elf.text_lo;

	uint64_t fde_bytes = 0;
	const ReadelfFde *longest = nullptr;
	for (const ReadelfFde &f : p.dump.fdes) {
		fde_bytes += f.size;
		if (!longest || f.fres.size() > longest->fres.size())
			longest = &f;
	}
	ASSERT_NE(longest, nullptr);
	// Not vacuous: gcc made more FREs than the cap, in long_function.
	ASSERT_GT(longest->fres.size(), (size_t)SFRAME_MAX_FRES_PER_FDE);
	uint64_t sym = 0;
	for (const ElfFunc &f : p.elf.funcs)
		if (f.name == "long_function")
			sym = f.addr;
	EXPECT_EQ(longest->pc, sym);

	sframe_validation res;
	ASSERT_EQ(sframe_validate_report(&d.sec, p.elf.text_lo, text_len,
					 nullptr, 0, &res), 0);
	EXPECT_EQ(res.fdes_skipped, 1u);
	EXPECT_EQ(res.skipped_bytes, longest->size);
	EXPECT_EQ(res.covered_bytes, fde_bytes - longest->size);
	EXPECT_EQ(sframe_validate(&d.sec, p.elf.text_lo, text_len), 0);

	uint64_t isize = 0;
	ASSERT_EQ(sframe_index_size(&d.sec, &isize), 0);
	std::vector<uint64_t> mem((isize + 7) / 8);
	sframe_validation ires;
	ASSERT_EQ(sframe_validate_report(&d.sec, p.elf.text_lo, text_len,
					 mem.data(), isize, &ires), 0);
	EXPECT_EQ(ires.fdes_skipped, 1u);
	const sframe_index *idx = (const sframe_index *)mem.data();

	unsigned checked = 0;
	for (const ReadelfFde &f : p.dump.fdes) {
		const bool skipped = &f == longest;
		sframe_fde fde;
		ASSERT_EQ(sframe_find_fde(&d.sec, f.pc, &fde), 0);
		EXPECT_EQ(sframe_fde_skipped(&fde), skipped);
		EXPECT_EQ(fde.num_fres, f.fres.size());
		// Every byte of the short functions, every 7th of the long
		// one and its last.
		for (uint64_t off = 0; off < f.size; off += skipped ? 7 : 1) {
			const uint64_t pc = f.pc + off;
			sframe_row row, irow;
			uint32_t budget = 1000;
			int ret = sframe_find_row_budget(&d.sec, pc, &row,
							 &budget);
			int iret = sframe_find_row_indexed(&d.sec, idx, pc,
							   &irow, nullptr);
			if (skipped) {
				ASSERT_EQ(ret, -ENOENT) << std::hex << pc;
				ASSERT_EQ(iret, -ENOENT) << std::hex << pc;
				// The FDE search only: no FRE of it read.
				ASSERT_LE(1000 - budget, 33u);
				uint32_t b = 1;
				ASSERT_EQ(sframe_index_find_rule(idx, pc, &b)
						  .flags, 0);
				ASSERT_EQ(b, 1u);
				continue;
			}
			const ReadelfFre *r = readelf_row(f, pc);
			ASSERT_NE(r, nullptr);
			ASSERT_EQ(ret, 0) << std::hex << pc;
			ASSERT_EQ(iret, 0) << std::hex << pc;
			ASSERT_TRUE(row_eq(row, irow)) << std::hex << pc;
			expect_row_eq(row, *r, d.sec.fixed_ra_offset,
				      "pc " + std::to_string(pc));
			if (::testing::Test::HasFailure())
				return;
			checked++;
		}
		if (skipped) {
			sframe_row row;
			EXPECT_EQ(sframe_find_row(&d.sec, f.pc + f.size - 1,
						  &row), -ENOENT);
		}
	}
	EXPECT_GT(checked, 100u);
	EXPECT_EQ(d.stats.out_of_range, 0u);
}

TEST(RealSectionShapes, FrameShapesArePresent)
{
	// The test programs are meant to exercise several encodings; check
	// that the toolchain produced them, so the comparisons above are not
	// vacuous.
	const Prog &p = load_prog("shapes_O2");
	Decoder d(p.elf.sframe);
	ASSERT_EQ(d.init(p.elf.sframe_addr), 0);
	std::map<std::string, uint64_t> sym;
	for (const ElfFunc &f : p.elf.funcs)
		sym[f.name] = f.addr;
	auto fde_at = [&](const char *name, sframe_fde &fde) {
		ASSERT_TRUE(sym.count(name)) << name;
		ASSERT_EQ(sframe_find_fde(&d.sec, sym[name], &fde), 0) << name;
		ASSERT_EQ(fde.func_start, sym[name]);
	};
	sframe_fde fde;
	sframe_row row;
	bool fp_based = false, big_cfa = false;

	fde_at("longbody", fde);
	EXPECT_EQ(fde.fre_type, 2); // SFRAME_FRE_TYPE_ADDR4
	ASSERT_EQ(sframe_get_fre(&d.sec, &fde, fde.num_fres - 1, &row), 0);
	EXPECT_GT(row.start_off, 0xffffu);

	fde_at("midbody", fde);
	EXPECT_EQ(fde.fre_type, 1); // SFRAME_FRE_TYPE_ADDR2

	fde_at("leaf", fde);
	EXPECT_EQ(fde.fre_type, 0);
	EXPECT_EQ(fde.num_fres, 1u);

	fde_at("varframe", fde);
	for (uint32_t j = 0; j < fde.num_fres; j++) {
		ASSERT_EQ(sframe_get_fre(&d.sec, &fde, j, &row), 0);
		fp_based |= row.cfa_reg == SFRAME_REG_RBP;
	}
	EXPECT_TRUE(fp_based);

	fde_at("big", fde);
	for (uint32_t j = 0; j < fde.num_fres; j++) {
		ASSERT_EQ(sframe_get_fre(&d.sec, &fde, j, &row), 0);
		big_cfa |= row.cfa_offset > 32767;
	}
	EXPECT_TRUE(big_cfa);
}

} // namespace
