// sframe-gen: SFrame made from .eh_frame.
//
// generate_sframe() reads the .eh_frame of an AMD64 ELF file, interprets the
// DWARF call-frame program of every FDE and writes an SFrame section (version
// 2, or 3 where a row needs a flexible FDE) that gives, for every PC it
// covers, the same CFA, return-address and frame-pointer rules as the DWARF.
//
// What SFrame cannot say is left uncovered, never approximated: a PC whose
// DWARF row has no SFrame equivalent is outside every SFrame FDE (an FDE of
// .eh_frame becomes several SFrame FDEs around such rows), so an unwinder
// falls back there instead of being lied to.  A row is covered when
//   - the CFA is RSP or RBP plus an offset (version 3 also: another register
//     plus an offset, or a value loaded from register plus offset, as with
//     DRAP's CFA = *(RBP - 16)), or the PLT's rsp + 8 + ((rip & 15) >= 11) * 8
//     expression (a PCMASK FDE, as ld writes for the PLT).  A CFA loaded and
//     then offset, *(RSP + N) + 8 as OpenSSL's perlasm says after realigning
//     the stack, has no SFrame v3 rule (its flexible CFA rules add nothing
//     after the load) and stays uncovered;
//   - the return address is saved at CFA - 8, or is undefined (the outermost
//     frame: an FRE without offsets);
//   - RBP is unchanged or saved at CFA + offset (version 3 also: saved at
//     register plus offset, as DRAP's *(RBP + 0), or held in a register);
//   - RSP has no rule of its own (the caller's SP is the CFA);
//   - the FDE is no signal frame ('S'), or the version is 3 (its signal bit).
// Every other row is counted in GenerateStats::uncovered_reasons.
//
// One rule is made from more than the row: a frame whose CFA is in a
// callee-saved register (RBX, R12 to R15) across a direct call, as glibc's
// lazy-binding trampolines keep theirs in RBX around `call _dl_fixup`, gets
// for the PCs of the call a rule from where the callee saves that register
// (GenerateStats::call_bridges); the callee's rows before that save are
// left uncovered.
#ifndef SFRAME_GEN_EH_FRAME_H
#define SFRAME_GEN_EH_FRAME_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sframe {

struct GenerateOptions {
  // 2 by default; 3 makes a version 3 section whatever the rows need.
  uint8_t version = 2;
  // With version 2: switch the whole section to version 3 when a row needs
  // a v3 flexible FDE or the signal-frame bit.  False leaves such rows
  // uncovered (reasons ending in "(v3 only)").
  bool allow_v3 = true;
  // Rows whose CFA is *(register + offset) + constant (OpenSSL's perlasm)
  // are written with this project's extension of version 3
  // (kFlagXCfaAddend, read by the module, refused by libsframe).  False
  // leaves them uncovered, and the section readable by every reader.
  bool cfa_addend = true;
};

struct GenerateStats {
  uint64_t fdes = 0;            // FDEs in .eh_frame
  uint64_t fdes_covered = 0;    // every row expressible (FDEs without rows too)
  uint64_t fdes_partial = 0;    // some rows not
  uint64_t fdes_uncovered = 0;  // no row expressible
  // Rows: the address ranges of an FDE over which the CFA, RA, RBP and RSP
  // rules do not change (consecutive DWARF rows with the same such rules
  // count once).
  uint64_t rows = 0, rows_uncovered = 0;
  // Covered rows written with the CFA-addend extension (GenerateOptions).
  uint64_t rows_cfa_addend = 0;
  uint64_t fde_bytes = 0;      // text bytes inside .eh_frame FDEs (summed over FDEs)
  uint64_t covered_bytes = 0;  // of those, bytes with an SFrame row
  // reason -> uncovered rows, e.g. "RA not at CFA-8".
  std::map<std::string, uint64_t> uncovered_reasons;
  // reason -> text bytes of those rows.
  std::map<std::string, uint64_t> uncovered_reason_bytes;
  // Every uncovered row, in .eh_frame order: [start, end) ELF-virtual, the
  // start of the .eh_frame FDE it belongs to, and why (a key of the maps).
  struct UncoveredRow {
    uint64_t start = 0, end = 0, fde_start = 0;
    std::string reason;
  };
  std::vector<UncoveredRow> uncovered_rows;
  // Rows written for a call that a frame makes while its CFA is in a
  // callee-saved register (eh_frame.cc, "Calls from a frame whose CFA is in
  // a callee-saved register"): [start, end) ELF-virtual (the call's bytes
  // after its first), the callee, the register, and where the callee saves
  // it (CFA + save_offset); the row says CFA = *(RSP + save_offset) +
  // cfa_offset.
  struct CallBridge {
    uint64_t start = 0, end = 0, callee = 0;
    uint8_t reg = 0;
    int32_t save_offset = 0, cfa_offset = 0;
  };
  std::vector<CallBridge> call_bridges;
  // The section made: its FDEs and FREs, and the size of the .eh_frame read.
  uint64_t sframe_fdes = 0, sframe_fres = 0;
  uint64_t eh_frame_size = 0;
};

struct GeneratedSframe {
  std::vector<uint8_t> bytes;  // the section
  // The ELF-virtual address the section is built for (FDE start addresses
  // are relative to it): text_vaddr.  A copy placed elsewhere needs
  // relocate_section() (sframe_format.h).
  uint64_t section_vaddr = 0;
  // The executable text (hull of the PF_X PT_LOADs), ELF-virtual.
  uint64_t text_vaddr = 0, text_len = 0;
  uint8_t version = 0;
  std::string build_id;  // hex of NT_GNU_BUILD_ID, empty if none
  GenerateStats stats;
};

// Throws sframe::Error:
//   op::kReadElf, path: the errno of open(); ENOEXEC for a file that is not
//     ELF.
//   op::kGenerate, path:
//     EINVAL      options.version is not 2 or 3
//     EOPNOTSUPP  not a 64-bit x86-64 executable or shared object (ET_REL
//                 included), or an .eh_frame feature this reader does not
//                 handle (CIE version, pointer encoding)
//     ENODATA     no .eh_frame (neither the section nor PT_GNU_EH_FRAME), no
//                 FDE in it, or no executable PT_LOAD
//     EBADMSG     malformed .eh_frame or .eh_frame_hdr (entries, CIE
//                 pointers, operands or the section's bytes out of bounds)
//     E2BIG       its CFA programs run more instructions than the bound
//                 (4 per byte of .eh_frame + 2^20: a CIE's instructions run
//                 again for each of its FDEs)
// An FDE whose program nests DW_CFA_remember_state deeper than 64 or runs
// more than 2^20 instructions is covered up to there; the rest of its rows
// are uncovered with that reason (GenerateStats::uncovered_reasons).
// The .eh_frame is found by its section header, or without section headers
// through PT_GNU_EH_FRAME (.eh_frame_hdr's eh_frame_ptr).
//
// Made from an object already open (object.name() in errors, op::kReadElf
// when its ELF view cannot be read): what a profiler covering a process
// uses, its objects taken from an ObjectTable, so that the section is made
// from the very file whose layout and build id it read.
class ObjectFile;
GeneratedSframe generate_sframe(const ObjectFile& object, const GenerateOptions& opts = {});

// The same for the file at elf_path (opened here, once: ObjectFile::read()
// of open_object_file()), for a command line's file and for tests.
GeneratedSframe generate_sframe(const std::string& elf_path, const GenerateOptions& opts = {});

// Bytes of the executable text as the program sees them at vaddr: what
// .eh_frame alone cannot say (the target of a call).
struct TextBytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
  uint64_t vaddr = 0;
};

// The same from .eh_frame bytes already in memory: data[0, size) as the
// program sees them at eh_frame_vaddr, for the executable text [text_vaddr,
// text_vaddr + text_len), whose bytes text gives where known (without
// them, no call is looked at: GenerateStats::call_bridges stays empty).
// object names the source in errors.  build_id is left empty.  Throws as
// generate_sframe() (op::kGenerate, object).  For tests and fuzzing.
GeneratedSframe generate_sframe_from_eh_frame(const uint8_t* data, size_t size,
                                              uint64_t eh_frame_vaddr, uint64_t text_vaddr,
                                              uint64_t text_len, const GenerateOptions& opts = {},
                                              const std::string& object = {},
                                              const std::vector<TextBytes>& text = {});

}  // namespace sframe

#endif  // SFRAME_GEN_EH_FRAME_H
