// SPDX-License-Identifier: GPL-2.0
// Lookups per second of this decoder (module/sframe_decode.c over a memory
// source), searching the section (sframe_find_row) and with the FDE index
// the module builds at registration (sframe_find_row_indexed), against
// binutils' libsframe (loaded with dlopen: Debian ships no headers for it)
// on the same real SFrame section and the same random PCs, for each
// section given.  Before timing, it compares the rows of both on every PC
// (CFA, RA and FP: tests/libsframe_diff/libsframe_dl.h) and says how many
// it compared; a libsframe that refuses the section (libsframe.so.0 of
// binutils 2.40 reads no version 3) or finds no row compares nothing, and
// the output says so.  Prints; asserts nothing about time.
//
//   decoder_bench [--libsframe PATH] [lookups] [repetitions] [ELF...]
//
// PATH (or SFRAME_BENCH_LIBSFRAME; default libsframe.so.0, Debian 12's):
// the libsframe to load, of either ABI (Debian 12's 2.40, sid's 2.47).
// Without ELF: the generated programs of 5,000 and 20,000 functions.
// SFrame version 3 against sid's libsframe.so.3 (binutils 2.47), which
// needs sid's glibc, so runs under sid's loader:
//   cmake --build build --target decoder_bench_v3
// (bench/CMakeLists.txt: the same programs assembled by sid's gas, fetched
// by scripts/sid-binutils.sh), or by hand:
//   sid=$(scripts/sid-binutils.sh)
//   $sid/bin/run build/bench/decoder_bench \
//       --libsframe $sid/usr/lib/x86_64-linux-gnu/libsframe.so.3 1000000 7 \
//       build/bench/progs/bench_funcs_v3 build/bench/progs/bench_funcs_20k_v3
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "sframe_decode.h"
#include "sframe_source_mem.h"
#include "decoder_fixture.h"
#include "test_support.h"
#include "libsframe_dl.h"

namespace {

double now()
{
	return std::chrono::duration<double>(
		       std::chrono::steady_clock::now().time_since_epoch())
		.count();
}

double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	size_t n = v.size();
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Seconds one pass of lookup over pcs takes; sums what it finds.  lookup
// gets the PC's index too.
template <typename F>
double time_pass(const std::vector<uint64_t> &pcs, F lookup, int64_t &acc)
{
	double t0 = now();
	for (size_t i = 0; i < pcs.size(); i++)
		acc += lookup(i, pcs[i]);
	return now() - t0;
}

// One section: agreement, then the three readers timed in turn within
// each repetition (so machine noise hits them alike).  0, or 1 on error.
int bench_section(const std::string &path, size_t lookups, int reps,
		  const lsfdl::Libsframe &lsf, const std::string &lsf_err)
{
	sftest::ElfInfo elf;
	std::string err = sftest::load_elf(path, elf);
	if (!err.empty()) {
		std::fprintf(stderr, "%s\n", err.c_str());
		return 1;
	}
	sframe_source src;
	sframe_section sec;
	sframe_source_mem_init(&src, elf.sframe.data(), elf.sframe.size());
	int ret = sframe_section_init(&sec, &src, elf.sframe_addr,
				      elf.sframe.size());
	if (ret) {
		std::fprintf(stderr, "%s: sframe_section_init: %d\n",
			     path.c_str(), ret);
		return 1;
	}
	uint64_t index_size = 0;
	std::vector<uint64_t> index_mem;
	ret = sframe_index_size(&sec, &index_size);
	if (!ret) {
		index_mem.resize(index_size / 8 + 1);
		ret = sframe_validate_index(&sec, 0, ~0ull, index_mem.data(),
					    index_size);
	}
	if (ret) {
		std::fprintf(stderr, "%s: sframe_validate_index: %d\n",
			     path.c_str(), ret);
		return 1;
	}
	const sframe_index *idx = (const sframe_index *)index_mem.data();

	// Random PCs, uniform over functions then over each function; with
	// the type of the FDE covering each, which libsframe's v3 getters
	// take (its sframe_find_fre does not say which FDE it used).
	std::vector<sframe_fde> fdes(sec.num_fdes);
	for (uint32_t i = 0; i < sec.num_fdes; i++)
		if (sframe_get_fde(&sec, i, &fdes[i])) {
			std::fprintf(stderr, "bad FDE %u\n", i);
			return 1;
		}
	std::mt19937_64 rng(1);
	std::vector<uint64_t> pcs(lookups);
	std::vector<uint8_t> fde_type(lookups);
	for (size_t k = 0; k < lookups; k++) {
		const sframe_fde &f = fdes[rng() % fdes.size()];
		pcs[k] = f.func_start + (f.func_size ? rng() % f.func_size : 0);
		fde_type[k] = f.flex ? LSFDL_FDE_TYPE_FLEX :
				       LSFDL_FDE_TYPE_DEFAULT;
	}

	// libsframe keeps pointers into the buffer it decodes: elf outlives
	// ctx.
	void *ctx = nullptr;
	std::string refused;
	if (lsf.loaded()) {
		int e = 0;
		ctx = lsf.decode(elf.sframe.data(), elf.sframe.size(), &e);
		if (!ctx)
			refused = "error " + std::to_string(e) + ": " +
				  lsf.errmsg(e);
	}

	std::printf("section: %s: SFrame v%u, %u FDEs, %u FREs, %zu bytes; "
		    "index %" PRIu64 " bytes\n",
		    path.c_str(), sec.version, sec.num_fdes, sec.num_fres,
		    elf.sframe.size(), index_size);
	std::printf("lookups per repetition: %zu, repetitions: %d\n", lookups,
		    reps);

	// Agreement on every PC: the index with the search (whole rows),
	// libsframe with both (CFA, RA and FP, or "no row" alike).
	size_t ours_fail = 0, index_differ = 0, lsf_fail = 0,
	       lsf_fail_mask = 0, compared = 0, differ = 0, cfa_differ = 0;
	std::string first_diff;
	for (size_t k = 0; k < lookups; k++) {
		uint64_t pc = pcs[k];
		sframe_row row, irow;
		int r1 = sframe_find_row(&sec, pc, &row);
		int r2 = sframe_find_row_indexed(&sec, idx, pc, &irow, nullptr);
		if (r1 != r2 || (!r1 && !sftest::row_eq(row, irow)))
			index_differ++;
		if (r1) {
			ours_fail++;
			continue;
		}
		if (!ctx)
			continue;
		lsfdl::Row theirs;
		if (lsf.find(ctx, (int64_t)(pc - elf.sframe_addr), fde_type[k],
			     &theirs)) {
			// libsframe 2.40 masks PC-mask (PLT) lookups with
			// 0xff instead of a block size and misses some.
			sframe_fde fde;
			if (!sframe_find_fde(&sec, pc, &fde) &&
			    fde.pc_type == SFRAME_PC_MASK)
				lsf_fail_mask++;
			lsf_fail++;
			continue;
		}
		compared++;
		lsfdl::Row mine = lsfdl::row_of(row);
		if (!lsfdl::row_same(mine, theirs)) {
			differ++;
			if (first_diff.empty()) {
				char b[24];
				std::snprintf(b, sizeof(b), "0x%" PRIx64, pc);
				first_diff = "pc " + std::string(b) +
					     ": this decoder " +
					     lsfdl::row_str(mine) +
					     "; libsframe " +
					     lsfdl::row_str(theirs);
			}
		}
		if (!lsfdl::cfa_same(mine, theirs))
			cfa_differ++;
	}
	std::printf("check: this decoder failed %zu, indexed rows differing "
		    "%zu\n",
		    ours_fail, index_differ);
	if (!lsf.loaded()) {
		std::printf("check: compared nothing: no libsframe (%s)\n",
			    lsf_err.c_str());
	} else if (!ctx) {
		std::printf("check: compared nothing: %s refused this "
			    "version-%u section (%s)\n",
			    lsf.name().c_str(), sec.version, refused.c_str());
	} else if (!compared) {
		std::printf("check: compared nothing: %s found no row for any "
			    "of the %zu PCs (failed %zu, %zu in PC-mask "
			    "FDEs)\n",
			    lsf.name().c_str(), lookups, lsf_fail,
			    lsf_fail_mask);
	} else {
		std::printf("check: against %s: rows compared %zu, differing "
			    "%zu (CFA differing %zu); libsframe found no row "
			    "for %zu (%zu in PC-mask FDEs)\n",
			    lsf.name().c_str(), compared, differ, cfa_differ,
			    lsf_fail, lsf_fail_mask);
		if (!first_diff.empty())
			std::printf("check: first difference: %s\n",
				    first_diff.c_str());
	}

	auto search = [&](size_t, uint64_t pc) -> int64_t {
		sframe_row row;
		return sframe_find_row(&sec, pc, &row) ? 0 : row.cfa_offset;
	};
	auto indexed = [&](size_t, uint64_t pc) -> int64_t {
		sframe_row row;
		return sframe_find_row_indexed(&sec, idx, pc, &row, nullptr) ?
			       0 :
			       row.cfa_offset;
	};
	// What a libsframe user does for a CFA: find the row entry, then
	// read its CFA offset (the FDE type is taken from a table, untimed).
	auto libsframe = [&](size_t k, uint64_t pc) -> int64_t {
		lsfdl::Fre f;
		int e = 0;
		if (lsf.find_fre(ctx, (int64_t)(pc - elf.sframe_addr), &f))
			return 0;
		return lsf.cfa_offset(ctx, &f, fde_type[k], &e);
	};
	std::vector<double> t_search, t_index, t_lsf;
	static volatile int64_t sink;
	for (int r = 0; r < reps; r++) {
		int64_t acc = 0;
		t_search.push_back(time_pass(pcs, search, acc));
		t_index.push_back(time_pass(pcs, indexed, acc));
		if (ctx)
			t_lsf.push_back(time_pass(pcs, libsframe, acc));
		sink = sink + acc;
	}

	double s = lookups / median(t_search), i = lookups / median(t_index);
	std::printf("sframe_find_row (search):         %12.0f lookups/s "
		    "(median of %d)\n", s, reps);
	std::printf("sframe_find_row_indexed (index):  %12.0f lookups/s "
		    "(median of %d)\n", i, reps);
	if (ctx) {
		double theirs = lookups / median(t_lsf);
		std::printf("libsframe sframe_find_fre:        %12.0f lookups/s "
			    "(median of %d; %s)\n", theirs, reps,
			    lsf.name().c_str());
		std::printf("ratio to libsframe: search %.2f, index %.2f\n",
			    s / theirs, i / theirs);
		lsf.free_ctx(ctx);
	} else {
		std::printf("libsframe: not timed (%s)\n",
			    lsf.loaded() ? "it refused the section" :
					   lsf_err.c_str());
	}
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	const char *env = std::getenv("SFRAME_BENCH_LIBSFRAME");
	std::string lib = env && *env ? env : "libsframe.so.0";
	std::vector<std::string> args;
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		if (a == "--libsframe" && i + 1 < argc)
			lib = argv[++i];
		else if (a.rfind("--libsframe=", 0) == 0)
			lib = a.substr(12);
		else
			args.push_back(a);
	}
	size_t lookups = args.size() > 0 ?
				 std::strtoul(args[0].c_str(), nullptr, 0) :
				 1000000;
	int reps = args.size() > 1 ? std::atoi(args[1].c_str()) : 7;
	if (!lookups || reps <= 0) {
		std::fprintf(stderr,
			     "usage: %s [--libsframe PATH] [lookups] [reps] "
			     "[ELF...]\n",
			     argv[0]);
		return 2;
	}
	std::vector<std::string> paths(args.size() > 2 ? args.begin() + 2 :
							  args.end(),
				       args.end());
	if (paths.empty())
		paths = { SFRAME_BENCH_ELF, SFRAME_BENCH_ELF_20K };

	lsfdl::Libsframe lsf;
	std::string lsf_err = lsf.load(lib);
	if (lsf_err.empty())
		std::printf("libsframe: %s\n", lsf.name().c_str());
	else
		std::printf("libsframe: cannot load %s: %s\n", lib.c_str(),
			    lsf_err.c_str());
	int ret = 0;
	for (size_t i = 0; i < paths.size(); i++) {
		std::printf("\n");
		ret |= bench_section(paths[i], lookups, reps, lsf, lsf_err);
	}
	return ret;
}
