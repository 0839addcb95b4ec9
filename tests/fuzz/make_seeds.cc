// SPDX-License-Identifier: GPL-2.0
// Writes version 2 and 3 sections (the toolchain here only makes v1) into
// a directory, as seeds for fuzz_sframe.
#include <cstdio>
#include <string>

#include "sframe_builder.h"

using namespace sftest;

static BSection sample(uint8_t version, uint8_t flags, bool skipped)
{
	BSection s;
	s.version = version;
	s.flags = flags;
	s.sec_addr = 0x500000;
	BFde plt;
	plt.start = 0x401010;
	plt.size = 48;
	plt.pcmask = true;
	plt.rep_size = 16;
	plt.fres = { fre(0, true, 8), fre(11, true, 16) };
	BFde f1;
	f1.start = 0x401100;
	f1.size = 0x40;
	f1.fres = { fre_outermost(0), fre_fp(1, true, 16, -16),
		    fre_fp(4, false, 16, -16), fre_fp(0x3e, true, 8, -16) };
	BFde f2;
	f2.start = 0x401140;
	f2.size = 0x20000;
	f2.fres = { fre(0, true, 8), fre(0x200, true, 100000),
		    fre(0x1ffff, true, 8) };
	s.fdes = { plt, f1, f2 };
	if (skipped) {
		// One FRE above SFRAME_MAX_FRES_PER_FDE (8192): the decoder
		// skips this FDE, its function has no row.
		BFde lf;
		lf.start = 0x430000;
		lf.size = 8193 + 16;
		for (uint32_t j = 0; j < 8193; j++)
			lf.fres.push_back(fre(j, true, 8 + 8 * (j & 1)));
		s.fdes.push_back(lf);
	}
	if (version == 3) {
		BFde fx;
		fx.start = 0x421200;
		fx.size = 0x40;
		fx.flex = true;
		fx.signal = true;
		BFre a, b;
		a.words = { flex_ctl(7, false, true), 8 };
		b.start = 0x10;
		b.words = { flex_ctl(6, true, true), -8, flex_ctl(11, 0, 1),
			    0, flex_ctl(0, true, false), -16 };
		fx.fres = { a, b };
		s.fdes.push_back(fx);
	}
	return s;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		std::fprintf(stderr, "usage: make_seeds DIR\n");
		return 2;
	}
	const struct {
		const char *name;
		uint8_t version, flags;
		bool skipped;
	} seeds[] = {
		{ "v2_sorted", 2, 1, false },
		{ "v2_pcrel", 2, 1 | 4, false },
		{ "v3_sorted", 3, 1, false },
		{ "v3_pcrel", 3, 1 | 4, false },
		{ "v2_skipped_fde", 2, 1, true },
		{ "v3_skipped_fde", 3, 1 | 4, true },
	};
	for (const auto &s : seeds) {
		std::vector<uint8_t> b =
			build(sample(s.version, s.flags, s.skipped));
		std::string path = std::string(argv[1]) + "/" + s.name;
		FILE *f = std::fopen(path.c_str(), "wb");
		if (!f || std::fwrite(b.data(), 1, b.size(), f) != b.size() ||
		    std::fclose(f)) {
			std::perror(path.c_str());
			return 1;
		}
	}
	return 0;
}
