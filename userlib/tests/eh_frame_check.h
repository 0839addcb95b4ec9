// Checks of generated SFrame sections (sframe::generate_sframe) against
// libdw's reading of the same .eh_frame and against the .sframe that gas
// wrote, both through the module's decoder (host build).
#ifndef SFRAME_CLIENT_TESTS_EH_FRAME_CHECK_H
#define SFRAME_CLIENT_TESTS_EH_FRAME_CHECK_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sframe_gen/eh_frame.h"

namespace sftest {

struct DwarfCheck {
  int init = 0;                // sframe_section_init() of the generated section
  int validate = 0;            // sframe_validate() over the text
  uint64_t pcs = 0;            // PCs looked up
  uint64_t dwarf_pcs = 0;      // of those, with a frame from libdw
  uint64_t covered_pcs = 0;    // of those, with an SFrame row too
  uint64_t sframe_only = 0;    // SFrame row where libdw has no frame (an error)
  uint64_t lookup_errors = 0;  // sframe_find_row() other than 0 and -ENOENT
  uint64_t disagreements = 0;
  uint64_t outermost_pcs = 0, flex_pcs = 0, pcmask_pcs = 0;  // kinds of rows seen
  // PCs of call bridges (GenerateStats::call_bridges; in the counts above
  // too), checked apart from the DWARF row: the
  // caller's CFA register and offset, and the callee's save, from libdw.
  uint64_t bridge_pcs = 0;
  std::vector<std::string> examples;                         // the first disagreements
};

// Looks up every PC of the text (stride 1), or every stride-th plus both
// ends of every SFrame FRE's range (stride > 1), in libdw
// (dwarf_cfi_addrframe on the file's .eh_frame) and in the generated
// section, and compares, where the section covers the PC, the CFA rule, the
// return address location, the caller's RBP and RSP, and the signal-frame
// bit.
DwarfCheck check_against_dwarf(const std::string& path, const sframe::GeneratedSframe& g,
                               uint64_t stride = 1);

struct AsCompare {
  int init = 0;                 // sframe_section_init() of the file's .sframe
  uint64_t pcs = 0;             // text PCs
  uint64_t both = 0;            // covered by both sections
  uint64_t disagreements = 0;   // of those, with different rows
  uint64_t generated_only = 0;  // covered by the generated section only
  uint64_t as_only = 0;         // covered by gas's only
  // The functions (symbols) holding PCs of the last two kinds, with counts.
  std::map<std::string, uint64_t> generated_only_functions, as_only_functions;
  std::map<std::string, uint64_t> disagreement_functions;
  std::vector<std::string> examples;
};

// Compares the generated section with the file's own .sframe (gas's,
// version 1 with binutils 2.40) for every text PC: CFA base register,
// offset and dereference, FP location, outermost frames.
AsCompare compare_with_assembler(const std::string& path, const sframe::GeneratedSframe& g);

}  // namespace sftest

#endif  // SFRAME_CLIENT_TESTS_EH_FRAME_CHECK_H
