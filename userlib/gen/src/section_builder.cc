// SectionBuilder: writes an SFrame section from FDE and FRE specs.
#include "sframe_gen/section_builder.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "sframe_internal/little_endian.h"

namespace sframe {
namespace {

using internal::put16;
using internal::put32;
using internal::put64;
using internal::put8;

// The offset size code (0: 1 byte, 1: 2 bytes, 2: 4 bytes) that holds v.
uint8_t offset_size_code(int32_t v) {
  if (v >= -128 && v <= 127) return 0;
  if (v >= -32768 && v <= 32767) return 1;
  return 2;
}

// The same for an unsigned control word of a flexible FRE.
uint8_t ctl_size_code(uint32_t v) {
  if (v <= 0xff) return 0;
  if (v <= 0xffff) return 1;
  return 2;
}

// A v3 flexible-FDE control word: register, dereference, register-based.
uint32_t flex_ctl(uint32_t reg, bool deref, bool reg_p) {
  return (reg << 3) | (uint32_t{deref} << 1) | uint32_t{reg_p};
}

constexpr uint8_t kDwarfRbp = 6;
constexpr uint8_t kDwarfRsp = 7;

// The data words of an FRE that has some (not ra_undefined): the CFA offset
// and maybe the FP offset, or for a flexible FDE control words and offsets.
struct FreWords {
  int64_t v[7] = {};
  size_t n = 0;
  uint8_t size_code = 0;
  void add_offset(int32_t x) {
    v[n++] = x;
    size_code = std::max(size_code, offset_size_code(x));
  }
  void add_ctl(uint32_t x) {
    v[n++] = x;
    size_code = std::max(size_code, ctl_size_code(x));
  }
};

// flex: a version 3 flexible FDE.
FreWords fre_words(const FreSpec& fre, bool flex) {
  FreWords w;
  if (!flex) {
    w.add_offset(fre.cfa_offset);
    if (fre.fp_offset) w.add_offset(*fre.fp_offset);
    return w;
  }
  const uint8_t cfa_reg = fre.cfa_reg.value_or(fre.cfa_base_sp ? kDwarfRsp : kDwarfRbp);
  // Bit 2 of the CFA's control word: an addend follows (kFlagXCfaAddend).
  const bool addend = fre.cfa_deref && fre.cfa_addend != 0;
  w.add_ctl(flex_ctl(cfa_reg, fre.cfa_deref, true) | (addend ? 4u : 0u));
  w.add_offset(fre.cfa_offset);
  if (addend) w.add_offset(fre.cfa_addend);
  if (fre.ra_reg) {
    w.add_ctl(flex_ctl(*fre.ra_reg, false, true));  // the value of the register
    w.add_offset(0);
  } else if (fre.ra_cfa_offset) {
    w.add_ctl(flex_ctl(0, true, false));  // saved at CFA + offset
    w.add_offset(*fre.ra_cfa_offset);
  } else if (fre.fp_offset) {
    w.add_ctl(0);  // RA: padding, the fixed RA offset applies
  }
  if (fre.fp_offset) {
    w.add_ctl(fre.fp_reg ? flex_ctl(*fre.fp_reg, fre.fp_deref, true) : flex_ctl(0, true, false));
    w.add_offset(*fre.fp_offset);
  }
  return w;
}

}  // namespace

SectionBuilder::SectionBuilder(uint8_t version, bool pcrel)
    : version_(version), flags_(kFlagFdeSorted | (pcrel ? kFlagFuncStartPcrel : 0)) {}

SectionBuilder& SectionBuilder::add_fde(FdeSpec fde) {
  fdes_.push_back(std::move(fde));
  return *this;
}

SectionBuilder& SectionBuilder::set_flags(uint8_t flags) {
  flags_ = flags;
  return *this;
}

bool SectionBuilder::uses_cfa_addend() const {
  if (version_ != 3) return false;
  for (const auto& fde : fdes_) {
    if (!fde.flex) continue;
    for (const auto& fre : fde.fres) {
      if (!fre.ra_undefined && fre.cfa_deref && fre.cfa_addend != 0) return true;
    }
  }
  return false;
}

size_t SectionBuilder::fde_size() const { return version_ == 1 ? 17 : version_ == 3 ? 16 : 20; }

uint8_t SectionBuilder::fre_type_of(const FdeSpec& fde) {
  if (fde.fre_type) return *fde.fre_type;
  if (fde.func_size <= 0x100) return 0;
  if (fde.func_size <= 0x10000) return 1;
  return 2;
}

size_t SectionBuilder::fre_bytes(const FdeSpec& fde, const FreSpec& fre) const {
  size_t start_bytes = size_t{1} << fre_type_of(fde);
  if (fre.ra_undefined) return start_bytes + 1;
  const FreWords w = fre_words(fre, version_ == 3 && fde.flex);
  return start_bytes + 1 + w.n * (size_t{1} << w.size_code);
}

std::vector<FdeSpec> SectionBuilder::ordered() const {
  std::vector<FdeSpec> out = fdes_;
  if (!keep_order_) {
    std::stable_sort(out.begin(), out.end(), [](const FdeSpec& a, const FdeSpec& b) {
      return a.func_start < b.func_start;
    });
  }
  return out;
}

size_t SectionBuilder::size() const {
  size_t n = kSframeHeaderSize + aux_len_ + fdes_.size() * fde_size();
  for (const auto& fde : fdes_) {
    if (version_ == 3) n += 5;
    for (const auto& fre : fde.fres) n += fre_bytes(fde, fre);
  }
  return n;
}

void SectionBuilder::build_into(void* dst, uint64_t section_addr) const {
  const std::vector<FdeSpec> fdes = ordered();
  const size_t hdr_len = kSframeHeaderSize + aux_len_;
  const size_t fde_bytes = fdes.size() * fde_size();
  size_t num_fres = 0;
  size_t fre_len = 0;
  for (const auto& fde : fdes) {
    if (version_ == 3) fre_len += 5;
    for (const auto& fre : fde.fres) fre_len += fre_bytes(fde, fre);
    num_fres += fde.fres.size();
  }

  auto* base = static_cast<uint8_t*>(dst);
  std::memset(base, 0, size());
  uint8_t* p = base;
  put16(p, kSframeMagic);
  put8(p, version_);
  put8(p, flags_ | (uses_cfa_addend() ? kFlagXCfaAddend : 0));
  put8(p, abi_arch_);
  put8(p, static_cast<uint8_t>(fixed_fp_));
  put8(p, static_cast<uint8_t>(fixed_ra_));
  put8(p, aux_len_);
  put32(p, static_cast<uint32_t>(fdes.size()));
  put32(p, static_cast<uint32_t>(num_fres));
  put32(p, static_cast<uint32_t>(fre_len));
  put32(p, 0);                                 // FDEs right after the header
  put32(p, static_cast<uint32_t>(fde_bytes));  // FREs right after the FDEs
  p = base + hdr_len;

  uint8_t* fre_sub = base + hdr_len + fde_bytes;
  uint8_t* q = fre_sub;
  const bool rel_to_field = version_ >= 2 && (flags_ & kFlagFuncStartPcrel);
  for (const auto& fde : fdes) {
    const uint8_t fre_type = fre_type_of(fde);
    const uint8_t info = static_cast<uint8_t>(((fde.pc_mask ? 1 : 0) << 4) | (fre_type & 0xf));
    const bool flex = version_ == 3 && fde.flex;
    const uint64_t field_addr = section_addr + static_cast<uint64_t>(p - base);
    const int64_t start =
        static_cast<int64_t>(fde.func_start - (rel_to_field ? field_addr : section_addr));
    const uint32_t fre_off = static_cast<uint32_t>(q - fre_sub);
    if (version_ == 3) {
      put64(p, static_cast<uint64_t>(start));
      put32(p, fde.func_size);
      put32(p, fre_off);
      put16(q, static_cast<uint16_t>(fde.fres.size()));
      put8(q, static_cast<uint8_t>(info | (fde.signal_frame ? 0x80 : 0)));
      put8(q, flex ? 1 : 0);  // FDE type: flexible or default
      put8(q, fde.rep_size);
    } else {
      put32(p, static_cast<uint32_t>(static_cast<int32_t>(start)));
      put32(p, fde.func_size);
      put32(p, fre_off);
      put32(p, static_cast<uint32_t>(fde.fres.size()));
      put8(p, info);
      if (version_ != 1) {
        put8(p, fde.rep_size);
        put16(p, 0);
      }
    }
    for (const auto& fre : fde.fres) {
      switch (fre_type) {
        case 0:
          put8(q, static_cast<uint8_t>(fre.start_off));
          break;
        case 1:
          put16(q, static_cast<uint16_t>(fre.start_off));
          break;
        default:
          put32(q, fre.start_off);
          break;
      }
      if (fre.ra_undefined) {
        put8(q, fre.cfa_base_sp ? 1 : 0);
        continue;
      }
      const FreWords w = fre_words(fre, flex);
      const bool base_sp = flex && fre.cfa_reg ? *fre.cfa_reg == kDwarfRsp : fre.cfa_base_sp;
      put8(q, static_cast<uint8_t>((w.size_code << 5) | (w.n << 1) | (base_sp ? 1 : 0)));
      for (size_t k = 0; k < w.n; k++) {
        const int64_t v = w.v[k];
        if (w.size_code == 0) {
          put8(q, static_cast<uint8_t>(v));
        } else if (w.size_code == 1) {
          put16(q, static_cast<uint16_t>(v));
        } else {
          put32(q, static_cast<uint32_t>(v));
        }
      }
    }
  }
}

std::vector<uint8_t> SectionBuilder::build(uint64_t section_addr) const {
  std::vector<uint8_t> out(size());
  build_into(out.data(), section_addr);
  return out;
}

}  // namespace sframe
