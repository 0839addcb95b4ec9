// SPDX-License-Identifier: GPL-2.0
// A section in memory plus the decoder state over it, for the tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "sframe_decode.h"
#include "sframe_source_mem.h"

namespace sftest {

// Header field offsets (sframe_header, include/sframe.h).
enum {
	HDR_VERSION = 2,
	HDR_FLAGS = 3,
	HDR_ABI = 4,
	HDR_FIXED_FP = 5,
	HDR_FIXED_RA = 6,
	HDR_AUXLEN = 7,
	HDR_NUM_FDES = 8,
	HDR_NUM_FRES = 12,
	HDR_FRE_LEN = 16,
	HDR_FDEOFF = 20,
	HDR_FREOFF = 24,
};

inline void poke32(std::vector<uint8_t> &b, size_t at, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[at + i] = (uint8_t)(v >> (8 * i));
}

inline uint32_t peek32(const std::vector<uint8_t> &b, size_t at)
{
	return b[at] | (b[at + 1] << 8) | (b[at + 2] << 16) |
	       ((uint32_t)b[at + 3] << 24);
}

inline bool loc_eq(const sframe_loc &a, const sframe_loc &b)
{
	return a.kind == b.kind && a.reg == b.reg && a.deref == b.deref &&
	       a.offset == b.offset;
}

// Field by field: the decoder does not promise anything about padding.
inline bool row_eq(const sframe_row &a, const sframe_row &b)
{
	return a.start_off == b.start_off && a.cfa_reg == b.cfa_reg &&
	       a.cfa_deref == b.cfa_deref && a.cfa_offset == b.cfa_offset &&
	       a.cfa_addend == b.cfa_addend &&
	       loc_eq(a.ra, b.ra) && loc_eq(a.fp, b.fp) &&
	       a.outermost == b.outermost &&
	       a.signal_frame == b.signal_frame;
}

struct Decoder {
	std::vector<uint8_t> data;
	sframe_source src;
	sframe_section sec;
	sframe_mem_stats stats;

	explicit Decoder(std::vector<uint8_t> d) : data(std::move(d))
	{
		sframe_source_mem_init(&src, data.data(), data.size());
		std::memset(&stats, 0, sizeof(stats));
		src.stats = &stats;
		std::memset(&sec, 0, sizeof(sec));
	}
	Decoder(const Decoder &) = delete;
	Decoder &operator=(const Decoder &) = delete;

	int init(uint64_t sec_addr, uint64_t size)
	{
		return sframe_section_init(&sec, &src, sec_addr, size);
	}
	int init(uint64_t sec_addr)
	{
		return init(sec_addr, data.size());
	}
	void reset_stats()
	{
		std::memset(&stats, 0, sizeof(stats));
	}
};

} // namespace sftest
