// SPDX-License-Identifier: GPL-2.0
// Lookups per second of this decoder (module/sframe_decode.c over a memory
// source), searching the section (sframe_find_row) and with the FDE index
// the module builds at registration (sframe_find_row_indexed), against
// binutils' libsframe (libsframe.so.0, loaded with dlopen: Debian ships no
// headers for it) on the same real SFrame section and the same random PCs,
// for each section given.  Prints; asserts nothing about time.
//
//   decoder_bench [lookups] [repetitions] [ELF...]
// Without ELF: the generated programs of 5,000 and 20,000 functions.
#include <dlfcn.h>

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

namespace {

// libsframe 2.40 API (include/sframe-api.h at binutils-2_40): the decoder
// context is opaque; the row entry is {u32 start, u8 offsets[12], u8 info}.
// PCs are int32 offsets from the start of the section.
struct lsf_fre {
	uint32_t fre_start_addr;
	unsigned char fre_offsets[2 * 2 * 3];
	unsigned char fre_info;
	unsigned char slack[32]; // room should the layout be larger
};
using lsf_decode_t = void *(*)(const char *, size_t, int *);
using lsf_free_t = void (*)(void **);
using lsf_find_fre_t = int (*)(void *, int32_t, lsf_fre *);
using lsf_cfa_t = int32_t (*)(void *, lsf_fre *, int *);
using lsf_base_t = unsigned (*)(lsf_fre *, int *);

struct Libsframe {
	void *h = nullptr;
	lsf_decode_t decode;
	lsf_free_t free_ctx;
	lsf_find_fre_t find_fre;
	lsf_cfa_t cfa_offset;
	lsf_base_t base_reg;

	bool load()
	{
		h = dlopen("libsframe.so.0", RTLD_NOW);
		if (!h)
			return false;
		decode = (lsf_decode_t)dlsym(h, "sframe_decode");
		free_ctx = (lsf_free_t)dlsym(h, "sframe_decoder_free");
		find_fre = (lsf_find_fre_t)dlsym(h, "sframe_find_fre");
		cfa_offset = (lsf_cfa_t)dlsym(h, "sframe_fre_get_cfa_offset");
		base_reg = (lsf_base_t)dlsym(h, "sframe_fre_get_base_reg_id");
		return decode && free_ctx && find_fre && cfa_offset && base_reg;
	}
};

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

// Seconds one pass of lookup over pcs takes; sums what it finds.
template <typename F>
double time_pass(const std::vector<uint64_t> &pcs, F lookup, int64_t &acc)
{
	double t0 = now();
	for (uint64_t pc : pcs)
		acc += lookup(pc);
	return now() - t0;
}

// One section: agreement, then the three readers timed in turn within
// each repetition (so machine noise hits them alike).  0, or 1 on error.
int bench_section(const std::string &path, size_t lookups, int reps,
		  Libsframe &lsf, bool have_lsf)
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

	// Random PCs, uniform over functions then over each function.
	std::vector<sframe_fde> fdes(sec.num_fdes);
	for (uint32_t i = 0; i < sec.num_fdes; i++)
		if (sframe_get_fde(&sec, i, &fdes[i])) {
			std::fprintf(stderr, "bad FDE %u\n", i);
			return 1;
		}
	std::mt19937_64 rng(1);
	std::vector<uint64_t> pcs(lookups);
	for (uint64_t &pc : pcs) {
		const sframe_fde &f = fdes[rng() % fdes.size()];
		pc = f.func_start + (f.func_size ? rng() % f.func_size : 0);
	}

	void *ctx = nullptr;
	if (have_lsf) {
		int e = 0;
		ctx = lsf.decode((const char *)elf.sframe.data(),
				 elf.sframe.size(), &e);
		have_lsf = ctx != nullptr;
	}

	std::printf("section: %s: SFrame v%u, %u FDEs, %u FREs, %zu bytes; "
		    "index %" PRIu64 " bytes\n",
		    path.c_str(), sec.version, sec.num_fdes, sec.num_fres,
		    elf.sframe.size(), index_size);
	std::printf("lookups per repetition: %zu, repetitions: %d\n", lookups,
		    reps);

	// Agreement on every PC: the index with the search (whole rows),
	// libsframe with both (CFA base register and offset).
	size_t ours_fail = 0, index_differ = 0, lsf_fail = 0,
	       lsf_fail_mask = 0, differ = 0;
	for (uint64_t pc : pcs) {
		sframe_row row, irow;
		int r1 = sframe_find_row(&sec, pc, &row);
		int r2 = sframe_find_row_indexed(&sec, idx, pc, &irow, nullptr);
		if (r1 != r2 || (!r1 && !sftest::row_eq(row, irow)))
			index_differ++;
		if (r1) {
			ours_fail++;
			continue;
		}
		if (!have_lsf)
			continue;
		lsf_fre f;
		int e = 0;
		if (lsf.find_fre(ctx, (int32_t)(pc - elf.sframe_addr), &f)) {
			// libsframe 2.40 masks PC-mask (PLT) lookups with
			// 0xff instead of a block size and misses some.
			sframe_fde fde;
			if (!sframe_find_fde(&sec, pc, &fde) &&
			    fde.pc_type == SFRAME_PC_MASK)
				lsf_fail_mask++;
			lsf_fail++;
			continue;
		}
		int32_t off = lsf.cfa_offset(ctx, &f, &e);
		bool sp = lsf.base_reg(&f, &e) == 1;
		if (off != row.cfa_offset ||
		    sp != (row.cfa_reg == SFRAME_REG_RSP))
			differ++;
	}
	std::printf("check: this decoder failed %zu, indexed rows differing "
		    "%zu, libsframe failed %zu (%zu in PC-mask FDEs), rows "
		    "differing %zu\n",
		    ours_fail, index_differ, lsf_fail, lsf_fail_mask, differ);

	auto search = [&](uint64_t pc) -> int64_t {
		sframe_row row;
		return sframe_find_row(&sec, pc, &row) ? 0 : row.cfa_offset;
	};
	auto indexed = [&](uint64_t pc) -> int64_t {
		sframe_row row;
		return sframe_find_row_indexed(&sec, idx, pc, &row, nullptr) ?
			       0 :
			       row.cfa_offset;
	};
	auto libsframe = [&](uint64_t pc) -> int64_t {
		lsf_fre f;
		int e = 0;
		if (lsf.find_fre(ctx, (int32_t)(pc - elf.sframe_addr), &f))
			return 0;
		return lsf.cfa_offset(ctx, &f, &e);
	};
	std::vector<double> t_search, t_index, t_lsf;
	static volatile int64_t sink;
	for (int r = 0; r < reps; r++) {
		int64_t acc = 0;
		t_search.push_back(time_pass(pcs, search, acc));
		t_index.push_back(time_pass(pcs, indexed, acc));
		if (have_lsf)
			t_lsf.push_back(time_pass(pcs, libsframe, acc));
		sink = sink + acc;
	}

	double s = lookups / median(t_search), i = lookups / median(t_index);
	std::printf("sframe_find_row (search):         %12.0f lookups/s "
		    "(median of %d)\n", s, reps);
	std::printf("sframe_find_row_indexed (index):  %12.0f lookups/s "
		    "(median of %d)\n", i, reps);
	if (have_lsf) {
		double theirs = lookups / median(t_lsf);
		std::printf("libsframe.so.0 sframe_find_fre:   %12.0f lookups/s "
			    "(median of %d)\n", theirs, reps);
		std::printf("ratio to libsframe: search %.2f, index %.2f\n",
			    s / theirs, i / theirs);
		lsf.free_ctx(&ctx);
	} else {
		std::printf("libsframe.so.0: not available (%s)\n", dlerror());
	}
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	size_t lookups = argc > 1 ? std::strtoul(argv[1], nullptr, 0) : 1000000;
	int reps = argc > 2 ? std::atoi(argv[2]) : 7;
	if (!lookups || reps <= 0) {
		std::fprintf(stderr, "usage: %s [lookups] [reps] [ELF...]\n",
			     argv[0]);
		return 2;
	}
	std::vector<std::string> paths;
	for (int i = 3; i < argc; i++)
		paths.push_back(argv[i]);
	if (paths.empty())
		paths = { SFRAME_BENCH_ELF, SFRAME_BENCH_ELF_20K };

	Libsframe lsf;
	bool have_lsf = lsf.load();
	int ret = 0;
	for (size_t i = 0; i < paths.size(); i++) {
		if (i)
			std::printf("\n");
		ret |= bench_section(paths[i], lookups, reps, lsf, have_lsf);
	}
	return ret;
}
