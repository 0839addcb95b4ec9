// libsframe-client: small helpers on the SFrame format (AMD64, versions 1 to
// 3, as binutils' sframe-spec describes them, plus this project's extension
// flag kFlagXCfaAddend).
//
//  - parse_header(): the fixed header, to size a section and check it.
//  - fde_func_start(), fde_func_size(), fde_covers(): read FDEs.
//  - relocate_section(): fix the FDE start-address fields of a copy of a
//    section placed at another address (the fields are relative to the
//    section or to themselves, never absolute).
#ifndef SFRAME_CLIENT_SFRAME_FORMAT_H
#define SFRAME_CLIENT_SFRAME_FORMAT_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "sframe_client/export.h"

namespace sframe {

inline constexpr uint16_t kSframeMagic = 0xdee2;
inline constexpr size_t kSframeHeaderSize = 28;
inline constexpr uint8_t kSframeAbiAmd64 = 3;

inline constexpr uint8_t kFlagFdeSorted = 0x1;
inline constexpr uint8_t kFlagFramePointer = 0x2;
inline constexpr uint8_t kFlagFuncStartPcrel = 0x4;
// This project's extension of version 3 (SFRAME_F_X_CFA_ADDEND of the
// module's decoder): flexible FREs may add a constant to the CFA
// after its load.  libsframe refuses sections that carry it.
inline constexpr uint8_t kFlagXCfaAddend = 0x80;

// Byte offsets of the fixed header's fields.
namespace hdr {
inline constexpr size_t kMagic = 0;
inline constexpr size_t kVersion = 2;
inline constexpr size_t kFlags = 3;
inline constexpr size_t kAbiArch = 4;
inline constexpr size_t kFixedFp = 5;
inline constexpr size_t kFixedRa = 6;
inline constexpr size_t kAuxLen = 7;
inline constexpr size_t kNumFdes = 8;
inline constexpr size_t kNumFres = 12;
inline constexpr size_t kFreLen = 16;
inline constexpr size_t kFdeOff = 20;
inline constexpr size_t kFreOff = 24;
}  // namespace hdr

struct SectionHeader {
  uint8_t version = 0;
  uint8_t flags = 0;
  uint8_t abi_arch = 0;
  int8_t fixed_fp_offset = 0;
  int8_t fixed_ra_offset = 0;
  uint8_t aux_len = 0;
  uint32_t num_fdes = 0;
  uint32_t num_fres = 0;
  uint32_t fre_len = 0;
  uint32_t fde_off = 0;
  uint32_t fre_off = 0;

  // Header plus auxiliary header: where the offsets count from.
  size_t header_size() const { return kSframeHeaderSize + aux_len; }
  // Bytes of one FDE (v3: of one index entry); 0 for an unknown version.
  size_t fde_size() const { return version == 1 ? 17 : version == 2 ? 20 : version == 3 ? 16 : 0; }
  // Bytes the tables use from the section's start (its real length).
  uint64_t used_size() const { return uint64_t{header_size()} + fre_off + fre_len; }
};

// The header at data, or nullopt if len is too short or the magic is wrong.
SFRAME_CLIENT_API std::optional<SectionHeader> parse_header(const void* data, size_t len);

// Absolute start address of FDE i of the section at data (len bytes), which
// lives at address addr.  nullopt if i or the version is out of range.
SFRAME_CLIENT_API std::optional<uint64_t> fde_func_start(const void* data, size_t len,
                                                         uint64_t addr, uint32_t i);

// Function size of FDE i, or nullopt.
SFRAME_CLIENT_API std::optional<uint32_t> fde_func_size(const void* data, size_t len, uint32_t i);

// Whether an FDE of the section at data (len bytes, at address addr) covers
// pc.  A linear scan: for diagnostics and tests, not for unwinding.
SFRAME_CLIENT_API bool fde_covers(const void* data, size_t len, uint64_t addr, uint64_t pc);

// The section at data (len bytes) was copied from old_addr to new_addr:
// rewrite every FDE start-address field so that the copy describes the same
// functions.  Returns false (and changes nothing) for a section it cannot
// read or whose new offsets do not fit their fields (v1/v2: 32 bits).
SFRAME_CLIENT_API bool relocate_section(void* data, size_t len, uint64_t old_addr,
                                        uint64_t new_addr);

}  // namespace sframe

#endif  // SFRAME_CLIENT_SFRAME_FORMAT_H
