// sframe-gen: SectionBuilder writes an SFrame section (AMD64, version 1, 2
// or 3) from a list of functions and their frame rows, for the generator,
// tools and tests.  It writes exactly what it is told, so it can also write
// wrong sections.
#ifndef SFRAME_GEN_SECTION_BUILDER_H
#define SFRAME_GEN_SECTION_BUILDER_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "sframe_client/sframe_format.h"

namespace sframe {

// One frame row entry (AMD64): CFA = (SP or FP) + cfa_offset, RA at CFA-8,
// caller's FP at CFA + fp_offset if given.  ra_undefined writes an FRE with
// no offsets: the outermost frame (versions 2 and 3).
//
// In a version 3 flexible FDE (FdeSpec::flex) the FRE is written as pairs of
// a control word and an offset (CFA, then RA as a padding word when the FP
// follows, then FP), and can also say:
//  - cfa_reg: CFA = DWARF register cfa_reg + cfa_offset (default: RSP or RBP
//    as cfa_base_sp says), loaded from that address if cfa_deref;
//  - cfa_addend (with cfa_deref): added after the load, written with this
//    project's extension (the section gets kFlagXCfaAddend);
//  - fp_reg (with fp_offset): the caller's FP is fp_reg + *fp_offset, loaded
//    from that address if fp_deref (e.g. DRAP's *(RBP + 0)); without fp_reg
//    it is saved at CFA + *fp_offset as in default FDEs.
// These fields are ignored outside flexible FDEs.
struct FreSpec {
  uint32_t start_off = 0;
  bool cfa_base_sp = true;
  int32_t cfa_offset = 8;
  std::optional<int32_t> fp_offset;
  bool ra_undefined = false;
  std::optional<uint8_t> cfa_reg = std::nullopt;
  bool cfa_deref = false;
  std::optional<uint8_t> fp_reg = std::nullopt;
  bool fp_deref = true;
  int32_t cfa_addend = 0;  // (last: aggregate initializers list the others)
  // Version 3 flexible FDEs only: the return address in register ra_reg
  // (glibc's __vfork pops it into RDI around the system call), or saved at
  // CFA + ra_cfa_offset other than the fixed -8.  Neither: the fixed rule.
  std::optional<uint8_t> ra_reg = std::nullopt;
  std::optional<int32_t> ra_cfa_offset = std::nullopt;
};

struct FdeSpec {
  uint64_t func_start = 0;  // absolute address
  uint32_t func_size = 0;
  std::vector<FreSpec> fres;
  bool pc_mask = false;  // SFRAME_FDE_TYPE_PCMASK (PLT-like)
  uint8_t rep_size = 0;  // versions 2 and 3
  // FRE start-offset width: 0 = ADDR1, 1 = ADDR2, 2 = ADDR4; nullopt: the
  // smallest that holds func_size.
  std::optional<uint8_t> fre_type;
  // Version 3 only: a flexible FDE (SFRAME_FDE_TYPE_FLEX, see FreSpec), and
  // the signal-frame bit of the attribute record's info byte.
  bool flex = false;
  bool signal_frame = false;
};

class SectionBuilder {
 public:
  // version 1, 2 or 3 (others are written as version 2 with this number).
  // flags default to SFRAME_F_FDE_SORTED, plus SFRAME_F_FDE_FUNC_START_PCREL
  // if pcrel.
  explicit SectionBuilder(uint8_t version, bool pcrel = false);

  SectionBuilder& add_fde(FdeSpec fde);
  // Overrides of header fields, to write unusual or wrong sections.
  SectionBuilder& set_flags(uint8_t flags);
  SectionBuilder& set_abi_arch(uint8_t abi) {
    abi_arch_ = abi;
    return *this;
  }
  SectionBuilder& set_fixed_offsets(int8_t fp, int8_t ra) {
    fixed_fp_ = fp;
    fixed_ra_ = ra;
    return *this;
  }
  SectionBuilder& set_aux_len(uint8_t aux_len) {
    aux_len_ = aux_len;
    return *this;
  }
  // Keep FDEs in insertion order (default: sorted by func_start).
  SectionBuilder& keep_order(bool keep = true) {
    keep_order_ = keep;
    return *this;
  }

  uint8_t version() const { return version_; }
  // As set; the section written also carries kFlagXCfaAddend when an FRE
  // of a flexible FDE has a cfa_addend.
  uint8_t flags() const { return flags_; }
  bool uses_cfa_addend() const;
  bool pcrel() const { return (flags_ & kFlagFuncStartPcrel) != 0; }

  // Bytes the section takes (does not depend on its address).
  size_t size() const;
  // Write the section for address section_addr into dst (size() bytes).
  void build_into(void* dst, uint64_t section_addr) const;
  std::vector<uint8_t> build(uint64_t section_addr) const;

 private:
  std::vector<FdeSpec> ordered() const;
  size_t fde_size() const;
  static uint8_t fre_type_of(const FdeSpec& fde);
  size_t fre_bytes(const FdeSpec& fde, const FreSpec& fre) const;

  uint8_t version_;
  uint8_t flags_;
  uint8_t abi_arch_ = kSframeAbiAmd64;
  int8_t fixed_fp_ = 0;
  int8_t fixed_ra_ = -8;
  uint8_t aux_len_ = 0;
  bool keep_order_ = false;
  std::vector<FdeSpec> fdes_;
};

}  // namespace sframe

#endif  // SFRAME_GEN_SECTION_BUILDER_H
