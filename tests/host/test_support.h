// SPDX-License-Identifier: GPL-2.0
// Helpers for the host tests: ELF section extraction and a parser for the
// text of `readelf --sframe` (binutils 2.40 and later).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sftest {

std::vector<uint8_t> read_file(const std::string &path);

struct ElfFunc {
	std::string name;
	uint64_t addr;
	uint64_t size;
};

struct ElfInfo {
	std::vector<uint8_t> sframe;	// contents of .sframe
	uint64_t sframe_addr = 0;	// its sh_addr
	uint64_t text_lo = 0;		// lowest executable section address
	uint64_t text_hi = 0;		// end of the highest one
	std::vector<ElfFunc> funcs;	// STT_FUNC symbols with a size
};

// Parse a 64-bit little-endian ELF file.  Returns an error text, or "".
std::string load_elf(const std::string &path, ElfInfo &out);

// One row of readelf's dump.
struct ReadelfFre {
	uint64_t pc = 0;	// absolute, or the raw offset for [m] FDEs
	bool ra_undefined = false;
	bool cfa_sp = false;	// base register: sp (true) or fp
	int64_t cfa_off = 0;
	bool fp_saved = false;	// "c+N" (true) or "u"
	int64_t fp_off = 0;
	char ra = 'u';		// 'u' (not in the FRE), 'f' (fixed), 'c'
	int64_t ra_off = 0;
};

struct ReadelfFde {
	uint64_t pc = 0;
	uint64_t size = 0;
	bool pcmask = false;	// STARTPC[m]
	std::vector<ReadelfFre> fres;
};

struct ReadelfDump {
	int version = 0;
	unsigned num_fdes = 0;
	unsigned num_fres = 0;
	std::vector<ReadelfFde> fdes;
};

// Parse the text; returns an error text, or "".
std::string parse_readelf_sframe(const std::string &text, ReadelfDump &out);

} // namespace sftest
