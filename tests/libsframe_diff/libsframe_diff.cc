// SPDX-License-Identifier: GPL-2.0
// Differential test of this project's SFrame decoder (module/sframe_decode.c,
// the host library) against binutils' libsframe, on real sections: for
// every FDE, its fields; for every byte address from the lowest to the
// highest text address of each ELF (every PC of every function, and the
// gaps between them), the unwind row each gives (CFA register, offset and
// dereference, where the RA and the FP are, the outermost frame), or that
// neither has one.
//
//   libsframe_diff [--libsframe PATH] [--version N] [--max-diffs N] ELF...
//
// PATH defaults to libsframe.so.3.  For SFrame version 3 it must be
// the v3 ABI's (sid's libsframe.so.3, binutils 2.47), which needs sid's glibc:
// run this program under sid's loader (scripts/sid-binutils.sh's bin/run).
// --version N: every section must be of version N.
//
// Prints one line per section, the first --max-diffs differences (default
// 20) and a total: sections, FDEs and PCs compared.  Exits 0 only when
// every PC agrees and something was compared (no section, FDE or PC
// compared is a failure: a comparison of nothing proves nothing); 1 on
// any difference or error, 2 on bad usage.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "libsframe_dl.h"
#include "sframe_decode.h"
#include "sframe_source_mem.h"
#include "test_support.h"

namespace {

struct Totals {
	uint64_t sections = 0, fdes = 0, pcs = 0, pcs_row = 0,
		 pcs_norow = 0, pcs_outside = 0, diffs = 0;
};

struct Diffs {
	size_t max;
	uint64_t count = 0;
	void add(const std::string &what)
	{
		if (count++ < max)
			std::printf("  DIFF %s\n", what.c_str());
		else if (count == max + 1)
			std::printf("  (further differences not listed)\n");
	}
};

std::string hex(uint64_t v)
{
	char b[32];
	std::snprintf(b, sizeof(b), "0x%" PRIx64, v);
	return b;
}

std::string fde_str(const sframe_fde &f)
{
	char b[160];
	std::snprintf(b, sizeof(b),
		      "start 0x%" PRIx64 " size %u FREs %u%s%s%s rep %u",
		      f.func_start, f.func_size, f.num_fres,
		      f.pc_type == SFRAME_PC_MASK ? " pc-mask" : "",
		      f.flex ? " flex" : "", f.signal_frame ? " signal" : "",
		      f.rep_size);
	return b;
}

std::string fde_str(const lsfdl::Fde &f)
{
	char b[160];
	std::snprintf(b, sizeof(b),
		      "start 0x%" PRIx64 " size %u FREs %u%s%s%s rep %u",
		      f.start, f.size, f.num_fres, f.pc_mask ? " pc-mask" : "",
		      f.flex ? " flex" : "", f.signal ? " signal" : "",
		      f.rep_size);
	return b;
}

// One ELF file: 0, or 1 when it could not be compared at all.
int compare_file(const std::string &path, const lsfdl::Libsframe &lsf,
		 int want_version, Totals &tot, Diffs &diffs)
{
	sftest::ElfInfo elf;
	std::string err = sftest::load_elf(path, elf);
	if (!err.empty()) {
		std::printf("%s: %s\n", path.c_str(), err.c_str());
		return 1;
	}
	uint64_t before = diffs.count;
	auto diff = [&](const std::string &what) {
		diffs.add(path + ": " + what);
	};

	sframe_source src;
	sframe_section sec;
	sframe_source_mem_init(&src, elf.sframe.data(), elf.sframe.size());
	int ret = sframe_section_init(&sec, &src, elf.sframe_addr,
				      elf.sframe.size());
	if (ret) {
		diff("this decoder refused the header: " + std::to_string(ret));
		return 1;
	}
	if (want_version && sec.version != want_version) {
		diff("SFrame version " + std::to_string(sec.version) +
		     ", not " + std::to_string(want_version));
		return 1;
	}
	ret = sframe_validate(&sec, elf.text_lo, elf.text_hi - elf.text_lo);
	if (ret)
		diff("sframe_validate: " + std::to_string(ret) +
		     " (libsframe is asked all the same)");
	uint64_t index_size = 0;
	std::vector<uint64_t> index_mem;
	const sframe_index *idx = nullptr;
	if (!ret && !sframe_index_size(&sec, &index_size)) {
		index_mem.resize(index_size / 8 + 1);
		if (!sframe_validate_index(&sec, elf.text_lo,
					   elf.text_hi - elf.text_lo,
					   index_mem.data(), index_size))
			idx = (const sframe_index *)index_mem.data();
	}

	int lerr = 0;
	void *ctx = lsf.decode(elf.sframe.data(), elf.sframe.size(), &lerr);
	if (!ctx) {
		diff("libsframe refused the section: " +
		     std::string(lsf.errmsg(lerr)));
		return 1;
	}

	// The FDEs, field by field.
	std::vector<sframe_fde> fdes(sec.num_fdes);
	std::vector<lsfdl::Fde> theirs(sec.num_fdes);
	uint32_t n_flex = 0, n_signal = 0, n_mask = 0;
	bool fdes_ok = true;
	if (lsf.num_fdes(ctx) != sec.num_fdes) {
		diff("FDE count: this decoder " + std::to_string(sec.num_fdes) +
		     ", libsframe " + std::to_string(lsf.num_fdes(ctx)));
		fdes_ok = false;
	}
	for (uint32_t i = 0; fdes_ok && i < sec.num_fdes; i++) {
		int r = sframe_get_fde(&sec, i, &fdes[i]);
		bool t = lsf.fde(ctx, i, elf.sframe_addr, &theirs[i]);
		if (r || !t) {
			diff("FDE " + std::to_string(i) + ": this decoder " +
			     std::to_string(r) + ", libsframe " +
			     (t ? "ok" : "failed"));
			fdes_ok = false;
			break;
		}
		const sframe_fde &a = fdes[i];
		const lsfdl::Fde &b = theirs[i];
		if (a.func_start != b.start || a.func_size != b.size ||
		    a.num_fres != b.num_fres || a.fre_type != b.fre_type ||
		    (a.pc_type == SFRAME_PC_MASK) != b.pc_mask ||
		    (a.pc_type == SFRAME_PC_MASK && a.rep_size != b.rep_size) ||
		    (bool)a.flex != b.flex || a.signal_frame != b.signal)
			diff("FDE " + std::to_string(i) + ": this decoder " +
			     fde_str(a) + "; libsframe " + fde_str(b));
		n_flex += a.flex;
		n_signal += a.signal_frame;
		n_mask += a.pc_type == SFRAME_PC_MASK;
	}
	if (!fdes_ok) {
		lsf.free_ctx(ctx);
		return 1;
	}

	// Every byte address from the lowest to the highest of the text and
	// the FDEs.
	uint64_t lo = elf.text_lo, hi = elf.text_hi;
	for (const sframe_fde &f : fdes) {
		lo = std::min(lo, f.func_start);
		hi = std::max(hi, f.func_start + f.func_size);
	}
	uint64_t pcs = 0, pcs_row = 0, pcs_norow = 0, outside = 0;
	size_t next = 0; // first FDE not wholly below pc
	for (uint64_t pc = lo; pc < hi; pc++) {
		while (next < fdes.size() &&
		       fdes[next].func_start + fdes[next].func_size <= pc)
			next++;
		bool in = next < fdes.size() && fdes[next].func_start <= pc;
		uint32_t type = in && fdes[next].flex ? LSFDL_FDE_TYPE_FLEX :
							LSFDL_FDE_TYPE_DEFAULT;
		sframe_row row, irow;
		int r = sframe_find_row(&sec, pc, &row);
		if (idx) {
			int ri = sframe_find_row_indexed(&sec, idx, pc, &irow,
							 nullptr);
			if (ri != r || (!r && !lsfdl::row_same(lsfdl::row_of(row),
							       lsfdl::row_of(irow))))
				diff("pc " + hex(pc) +
				     ": this decoder's index differs from its "
				     "search");
		}
		lsfdl::Row mine, their;
		if (!r)
			mine = lsfdl::row_of(row);
		int t = lsf.find(ctx, (int64_t)(pc - elf.sframe_addr), type,
				 &their);
		std::string where = "pc " + hex(pc) +
				    (in ? " (FDE " + std::to_string(next) +
						  " +" + hex(pc - fdes[next].func_start) +
						  ")" :
					  " (no FDE)");
		if (in)
			pcs++;
		else
			outside++;
		if (r && r != -ENOENT) {
			diff(where + ": this decoder failed " +
			     std::to_string(r) +
			     (t ? "; libsframe: no row" :
				  "; libsframe " + lsfdl::row_str(their)));
			continue;
		}
		if ((r == 0) != (t == 0)) {
			diff(where + ": this decoder " +
			     (r ? std::string("no row") :
				  lsfdl::row_str(mine)) +
			     "; libsframe " +
			     (t ? std::string("no row") :
				  lsfdl::row_str(their)));
			continue;
		}
		if (r) {
			if (in)
				pcs_norow++;
			continue;
		}
		if (!lsfdl::row_same(mine, their))
			diff(where + ": this decoder " + lsfdl::row_str(mine) +
			     "; libsframe " + lsfdl::row_str(their));
		else if (in)
			pcs_row++;
	}
	lsf.free_ctx(ctx);

	std::printf("%s: SFrame v%u, %u FDEs (%u flexible, %u signal, %u "
		    "PC-mask), %u FREs; %" PRIu64 " PCs in FDEs (%" PRIu64
		    " with a row, %" PRIu64 " without, both), %" PRIu64
		    " outside; %" PRIu64 " differences\n",
		    path.c_str(), sec.version, sec.num_fdes, n_flex, n_signal,
		    n_mask, sec.num_fres, pcs, pcs_row, pcs_norow, outside,
		    diffs.count - before);
	tot.sections++;
	tot.fdes += sec.num_fdes;
	tot.pcs += pcs;
	tot.pcs_row += pcs_row;
	tot.pcs_norow += pcs_norow;
	tot.pcs_outside += outside;
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	std::string lib = "libsframe.so.3";
	int want_version = 0;
	size_t max_diffs = 20;
	std::vector<std::string> files;
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		if (a == "--libsframe" && i + 1 < argc)
			lib = argv[++i];
		else if (a == "--version" && i + 1 < argc)
			want_version = std::atoi(argv[++i]);
		else if (a == "--max-diffs" && i + 1 < argc)
			max_diffs = std::strtoul(argv[++i], nullptr, 0);
		else if (!a.empty() && a[0] == '-') {
			std::fprintf(stderr,
				     "usage: %s [--libsframe PATH] [--version N] "
				     "[--max-diffs N] ELF...\n",
				     argv[0]);
			return 2;
		} else
			files.push_back(a);
	}
	if (files.empty()) {
		std::printf("libsframe_diff: FAIL: no ELF file given: compared "
			    "nothing\n");
		return 1;
	}

	lsfdl::Libsframe lsf;
	std::string err = lsf.load(lib);
	if (!err.empty()) {
		std::printf("libsframe_diff: FAIL: cannot load %s: %s\n",
			    lib.c_str(), err.c_str());
		return 1;
	}
	std::printf("libsframe_diff: this decoder against %s\n",
		    lsf.name().c_str());
	if (!lsf.v3_api()) {
		std::printf("libsframe_diff: FAIL: %s has the old ABI, which "
			    "gives no FDE types (flexible FDEs) and reads no "
			    "SFrame version 3\n", lib.c_str());
		return 1;
	}

	Totals tot;
	Diffs diffs{ max_diffs };
	int failed_files = 0;
	for (const std::string &f : files)
		failed_files += compare_file(f, lsf, want_version, tot, diffs);

	std::printf("libsframe_diff: compared %" PRIu64 " sections, %" PRIu64
		    " FDEs, %" PRIu64 " PCs in FDEs (%" PRIu64 " with a row, %"
		    PRIu64 " without in both) and %" PRIu64
		    " PCs outside FDEs: %" PRIu64 " differences\n",
		    tot.sections, tot.fdes, tot.pcs, tot.pcs_row, tot.pcs_norow,
		    tot.pcs_outside, diffs.count);
	if (failed_files || diffs.count) {
		std::printf("libsframe_diff: FAIL: %d of %zu files not compared, "
			    "%" PRIu64 " differences\n",
			    failed_files, files.size(), diffs.count);
		return 1;
	}
	if (!tot.sections || !tot.fdes || !tot.pcs || !tot.pcs_row) {
		std::printf("libsframe_diff: FAIL: compared nothing (%" PRIu64
			    " sections, %" PRIu64 " FDEs, %" PRIu64
			    " PCs with a row)\n",
			    tot.sections, tot.fdes, tot.pcs_row);
		return 1;
	}
	std::printf("libsframe_diff: PASS: every PC agrees\n");
	return 0;
}
