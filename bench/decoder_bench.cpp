// SPDX-License-Identifier: GPL-2.0
// Lookups per second of sframe_find_row (module/sframe_decode.c over a
// memory source) against binutils' libsframe (libsframe.so.0, loaded with
// dlopen: Debian ships no headers for it) on the same real SFrame v1
// section and the same random PCs.  Prints; asserts nothing about time.
//
//   decoder_bench [ELF] [lookups] [repetitions]
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

} // namespace

int main(int argc, char **argv)
{
	std::string path = argc > 1 ? argv[1] : SFRAME_BENCH_ELF;
	size_t lookups = argc > 2 ? std::strtoul(argv[2], nullptr, 0) : 1000000;
	int reps = argc > 3 ? std::atoi(argv[3]) : 7;
	if (!lookups || reps <= 0) {
		std::fprintf(stderr, "usage: %s [ELF] [lookups] [reps]\n",
			     argv[0]);
		return 2;
	}

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
		std::fprintf(stderr, "sframe_section_init: %d\n", ret);
		return 1;
	}

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

	Libsframe lsf;
	bool have_lsf = lsf.load();
	void *ctx = nullptr;
	if (have_lsf) {
		int e = 0;
		ctx = lsf.decode((const char *)elf.sframe.data(),
				 elf.sframe.size(), &e);
		have_lsf = ctx != nullptr;
	}

	std::printf("section: %s: SFrame v%u, %u FDEs, %u FREs, %zu bytes\n",
		    path.c_str(), sec.version, sec.num_fdes, sec.num_fres,
		    elf.sframe.size());
	std::printf("lookups per repetition: %zu, repetitions: %d\n", lookups,
		    reps);

	// Agreement on every PC: CFA base register and offset.
	size_t ours_fail = 0, lsf_fail = 0, lsf_fail_mask = 0, differ = 0;
	for (uint64_t pc : pcs) {
		sframe_row row;
		if (sframe_find_row(&sec, pc, &row)) {
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
	std::printf("check: this decoder failed %zu, libsframe failed %zu "
		    "(%zu in PC-mask FDEs), rows differing %zu\n",
		    ours_fail, lsf_fail, lsf_fail_mask, differ);

	std::vector<double> t_ours, t_lsf;
	volatile int64_t sink = 0;
	for (int r = 0; r < reps; r++) {
		int64_t acc = 0;
		double t0 = now();
		for (uint64_t pc : pcs) {
			sframe_row row;
			if (!sframe_find_row(&sec, pc, &row))
				acc += row.cfa_offset;
		}
		t_ours.push_back(now() - t0);
		if (have_lsf) {
			t0 = now();
			for (uint64_t pc : pcs) {
				lsf_fre f;
				int e = 0;
				if (!lsf.find_fre(ctx,
						  (int32_t)(pc - elf.sframe_addr),
						  &f))
					acc += lsf.cfa_offset(ctx, &f, &e);
			}
			t_lsf.push_back(now() - t0);
		}
		sink = sink + acc;
	}

	double ours = lookups / median(t_ours);
	std::printf("sframe_find_row (this decoder):  %12.0f lookups/s "
		    "(median of %d)\n",
		    ours, reps);
	if (have_lsf) {
		double theirs = lookups / median(t_lsf);
		std::printf("libsframe.so.0 sframe_find_fre: %12.0f lookups/s "
			    "(median of %d)\n",
			    theirs, reps);
		std::printf("ratio (this decoder / libsframe): %.2f\n",
			    ours / theirs);
		lsf.free_ctx(&ctx);
	} else {
		std::printf("libsframe.so.0: not available (%s)\n", dlerror());
	}
	return 0;
}
