// libFuzzer target for the SFrame generator's .eh_frame reader and CFA
// interpreter (userlib/gen/src/cfi.cc, userlib/gen/src/eh_frame.cc).
//
// Input: a 21-byte header, then the .eh_frame bytes:
//   [0, 8)   the section's address (little-endian)
//   [8, 16)  the text start
//   [16, 20) the text length
//   [20]     options: bit 0 forces version 3, bit 1 allows it
// The generator must never crash or trip a sanitizer, fail only with
// EBADMSG, EOPNOTSUPP or ENODATA (no FDE), and what it makes must be a
// section the module's decoder validates, with a row at the start and the
// end of every FDE.
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "sframe_gen/eh_frame.h"
#include "sframe_client/error.h"
#include "sframe_decode.h"
#include "sframe_source_mem.h"

namespace {

uint64_t le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kHeader = 21;
  if (size < kHeader) return 0;
  const uint64_t eh_vaddr = le(data, 8);
  const uint64_t text = le(data + 8, 8);
  const uint64_t text_len = le(data + 16, 4);
  if (text_len > ~uint64_t{0} - text) return 0;
  sframe::GenerateOptions o;
  o.version = (data[20] & 1) ? 3 : 2;
  o.allow_v3 = (data[20] & 2) != 0;

  sframe::GeneratedSframe g;
  try {
    g = sframe::generate_sframe_from_eh_frame(data + kHeader, size - kHeader, eh_vaddr, text,
                                              text_len, o, "fuzz");
  } catch (const sframe::Error& e) {
    if (e.err() != EBADMSG && e.err() != EOPNOTSUPP && e.err() != ENODATA) abort();
    return 0;
  }
  const sframe::GenerateStats& s = g.stats;
  if (s.covered_bytes > s.fde_bytes || s.rows_uncovered > s.rows ||
      s.fdes != s.fdes_covered + s.fdes_partial + s.fdes_uncovered) {
    abort();
  }
  if (o.version == 3 && g.version != 3) abort();
  if (!o.allow_v3 && o.version == 2 && g.version != 2) abort();

  sframe_mem_stats stats;
  std::memset(&stats, 0, sizeof(stats));
  sframe_source src;
  sframe_source_mem_init(&src, g.bytes.data(), g.bytes.size());
  src.stats = &stats;
  sframe_section sec;
  if (sframe_section_init(&sec, &src, g.section_vaddr, g.bytes.size()) != 0) abort();
  if (sframe_validate(&sec, g.text_vaddr, g.text_len) != 0) abort();
  if (sec.num_fdes != s.sframe_fdes || sec.num_fres != s.sframe_fres) abort();
  uint64_t covered = 0;
  for (uint32_t i = 0; i < sec.num_fdes; i++) {
    sframe_fde fde;
    sframe_row row;
    if (sframe_get_fde(&sec, i, &fde) != 0) abort();
    covered += fde.func_size;
    if (sframe_find_row(&sec, fde.func_start, &row) != 0) abort();
    if (sframe_find_row(&sec, fde.func_start + fde.func_size - 1, &row) != 0) abort();
  }
  // Overlapping .eh_frame FDEs are left out, so SFrame FDEs never
  // overlap and cover exactly the bytes counted.
  if (covered != s.covered_bytes) abort();
  if (stats.out_of_range) abort();
  return 0;
}
