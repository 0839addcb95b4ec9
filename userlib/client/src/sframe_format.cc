#include "sframe_client/sframe_format.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "sframe_internal/little_endian.h"

namespace sframe {
namespace {

using internal::get16;
using internal::get32;
using internal::get64;
using internal::put32;
using internal::put64;

// Where FDE i's start-address field is, and how wide (4 or 8 bytes).
struct FdeField {
  size_t offset;
  size_t width;
};

std::optional<FdeField> fde_field(const SectionHeader& h, size_t len, uint32_t i) {
  if (h.fde_size() == 0 || i >= h.num_fdes) return std::nullopt;
  uint64_t off = uint64_t{h.header_size()} + h.fde_off + uint64_t{i} * h.fde_size();
  size_t width = h.version == 3 ? 8 : 4;
  if (off + width > len) return std::nullopt;
  return FdeField{static_cast<size_t>(off), width};
}

}  // namespace

std::optional<SectionHeader> parse_header(const void* data, size_t len) {
  if (data == nullptr || len < kSframeHeaderSize) return std::nullopt;
  const auto* p = static_cast<const uint8_t*>(data);
  if (get16(p) != kSframeMagic) return std::nullopt;
  SectionHeader h;
  h.version = p[hdr::kVersion];
  h.flags = p[hdr::kFlags];
  h.abi_arch = p[hdr::kAbiArch];
  h.fixed_fp_offset = static_cast<int8_t>(p[hdr::kFixedFp]);
  h.fixed_ra_offset = static_cast<int8_t>(p[hdr::kFixedRa]);
  h.aux_len = p[hdr::kAuxLen];
  h.num_fdes = get32(p + hdr::kNumFdes);
  h.num_fres = get32(p + hdr::kNumFres);
  h.fre_len = get32(p + hdr::kFreLen);
  h.fde_off = get32(p + hdr::kFdeOff);
  h.fre_off = get32(p + hdr::kFreOff);
  return h;
}

std::optional<uint64_t> fde_func_start(const void* data, size_t len, uint64_t addr, uint32_t i) {
  auto h = parse_header(data, len);
  if (!h) return std::nullopt;
  auto f = fde_field(*h, len, i);
  if (!f) return std::nullopt;
  const auto* p = static_cast<const uint8_t*>(data) + f->offset;
  int64_t rel = f->width == 8 ? static_cast<int64_t>(get64(p))
                              : static_cast<int64_t>(static_cast<int32_t>(get32(p)));
  uint64_t base = (h->version >= 2 && (h->flags & kFlagFuncStartPcrel)) ? addr + f->offset : addr;
  return base + static_cast<uint64_t>(rel);
}

std::optional<uint32_t> fde_func_size(const void* data, size_t len, uint32_t i) {
  auto h = parse_header(data, len);
  if (!h) return std::nullopt;
  auto f = fde_field(*h, len, i);
  if (!f || f->offset + f->width + 4 > len) return std::nullopt;
  return get32(static_cast<const uint8_t*>(data) + f->offset + f->width);
}

bool fde_covers(const void* data, size_t len, uint64_t addr, uint64_t pc) {
  auto h = parse_header(data, len);
  if (!h) return false;
  for (uint32_t i = 0; i < h->num_fdes; i++) {
    auto start = fde_func_start(data, len, addr, i);
    auto size = fde_func_size(data, len, i);
    if (!start || !size) return false;
    if (pc >= *start && pc - *start < *size) return true;
  }
  return false;
}

bool relocate_section(void* data, size_t len, uint64_t old_addr, uint64_t new_addr) {
  auto h = parse_header(data, len);
  if (!h || h->fde_size() == 0) return false;
  auto* p = static_cast<uint8_t*>(data);
  // Both encodings (section-relative and field-relative) move with the
  // section: every field grows by old_addr - new_addr.
  const int64_t delta = static_cast<int64_t>(old_addr - new_addr);
  std::vector<int64_t> values(h->num_fdes);
  for (uint32_t i = 0; i < h->num_fdes; i++) {
    auto f = fde_field(*h, len, i);
    if (!f) return false;
    const uint8_t* q = p + f->offset;
    int64_t v = f->width == 8 ? static_cast<int64_t>(get64(q))
                              : static_cast<int64_t>(static_cast<int32_t>(get32(q)));
    v += delta;
    if (f->width == 4 &&
        (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())) {
      return false;
    }
    values[i] = v;
  }
  for (uint32_t i = 0; i < h->num_fdes; i++) {
    auto f = fde_field(*h, len, i);
    uint8_t* q = p + f->offset;
    if (f->width == 8) {
      put64(q, static_cast<uint64_t>(values[i]));
    } else {
      put32(q, static_cast<uint32_t>(static_cast<int32_t>(values[i])));
    }
  }
  return true;
}

}  // namespace sframe
