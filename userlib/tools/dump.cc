// sframe-client dump FILE: the .sframe section of an ELF file, in the shape
// of binutils 2.40's `readelf --sframe` (so the two can be diffed for the
// version 1 sections that readelf reads), for every version the module
// reads.  Rows readelf cannot show (version 3 flexible rows, the outermost
// frame) get notations of their own.  An FDE the module skips (more than
// SFRAME_MAX_FRES_PER_FDE FREs: it gives no rows) is shown with a mark
// instead of its rows, and the dump goes on.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "sframe_client/error.h"
#include "sframe_client/objects.h"
#include "sframe_decode.h"
#include "sframe_source_mem.h"
#include "sframe_gen/supply.h"

namespace {

const char* version_name(uint8_t v) {
  switch (v) {
    case 1:
      return "SFRAME_VERSION_1";
    case 2:
      return "SFRAME_VERSION_2";
    case 3:
      return "SFRAME_VERSION_3";
  }
  return "NULL";
}

std::string flags_string(uint8_t flags) {
  if (!flags) return "NONE";
  std::string s;
  const struct {
    uint8_t bit;
    const char* name;
  } names[] = {{SFRAME_F_FDE_SORTED, "SFRAME_F_FDE_SORTED"},
               {SFRAME_F_FRAME_POINTER, "SFRAME_F_FRAME_POINTER"},
               {SFRAME_F_FDE_FUNC_START_PCREL, "SFRAME_F_FDE_FUNC_START_PCREL"},
               {SFRAME_F_X_CFA_ADDEND, "SFRAME_F_X_CFA_ADDEND"}};
  for (const auto& n : names) {
    if (!(flags & n.bit)) continue;
    if (!s.empty()) s += ",";
    s += n.name;
  }
  return s;
}

const char* reg_name(uint8_t reg) {
  switch (reg) {
    case SFRAME_REG_RSP:
      return "sp";
    case SFRAME_REG_RBP:
      return "fp";
  }
  return nullptr;
}

// "sp+16", "fp-8", "r10+0", with "*(...)" around a dereference.
std::string reg_offset(uint8_t reg, int32_t offset, bool deref) {
  char buf[48];
  const char* name = reg_name(reg);
  if (name) {
    std::snprintf(buf, sizeof(buf), "%s%+d", name, offset);
  } else {
    std::snprintf(buf, sizeof(buf), "r%u%+d", reg, offset);
  }
  return deref ? "*(" + std::string(buf) + ")" : std::string(buf);
}

// A register's location as readelf writes it: "c-16" (saved at CFA-16),
// "u" (not saved: unchanged).
std::string location(const sframe_loc& loc) {
  char buf[48];
  switch (loc.kind) {
    case SFRAME_LOC_CFA_OFFSET:
      std::snprintf(buf, sizeof(buf), "c%+d", loc.offset);
      return buf;
    case SFRAME_LOC_REG_OFFSET:
      return reg_offset(loc.reg, loc.offset, loc.deref);
    case SFRAME_LOC_UNDEFINED:
      return "U";
  }
  return "u";
}

int dump_function(const sframe_section& sec, uint32_t i) {
  sframe_fde fde;
  int ret = sframe_get_fde(&sec, i, &fde);
  if (ret) return ret;
  const bool mask = fde.pc_type == SFRAME_PC_MASK;
  std::printf("\n    func idx [%" PRIu32 "]: pc = 0x%" PRIx64 ", size = %" PRIu32 " bytes", i,
              fde.func_start, fde.func_size);
  if (sframe_fde_skipped(&fde)) {
    // The module takes the section and gives this function no rows; its
    // FREs are not read (nor checked) here either.
    std::printf("\n    skipped: %" PRIu32 " FREs > %u (SFRAME_MAX_FRES_PER_FDE): no rows\n",
                fde.num_fres, static_cast<unsigned>(SFRAME_MAX_FRES_PER_FDE));
    return 0;
  }
  std::printf("\n    %-7s%-8s %-10s%-10s%-13s", "STARTPC", mask ? "[m]" : "   ", "CFA", "FP", "RA");
  for (uint32_t j = 0; j < fde.num_fres; j++) {
    sframe_row row;
    ret = sframe_get_fre(&sec, &fde, j, &row);
    if (ret) return ret;
    const uint64_t pc = mask ? row.start_off : fde.func_start + row.start_off;
    // An outermost row has no CFA; readelf 2.40 never meets one.
    std::string cfa =
        row.outermost ? "U" : reg_offset(row.cfa_reg, row.cfa_offset, row.cfa_deref);
    if (!row.outermost && row.cfa_addend != 0) {
      char add[16];
      std::snprintf(add, sizeof(add), "%+d", row.cfa_addend);
      cfa += add;  // "*(sp+16)+8": this project's extension
    }
    // The RA at its fixed place is what readelf 2.40 shows as "u".
    std::string ra = row.outermost ? "U" : "u";
    if (row.ra.kind == SFRAME_LOC_REG_OFFSET) ra = location(row.ra);
    ra += "   ";
    std::printf("\n    %016" PRIx64 "  %-10s%-10s%-13s", pc, cfa.c_str(), location(row.fp).c_str(),
                ra.c_str());
  }
  std::printf("\n");
  return 0;
}

}  // namespace

int cmd_dump(int argc, char** argv) {
  if (argc != 1) {
    std::fprintf(stderr, "usage: sframe-client dump FILE\n");
    return 2;
  }
  sframe::FileSframe f = sframe::read_sframe_from_file(argv[0]);
  sframe_source src;
  sframe_source_mem_init(&src, f.bytes.data(), f.bytes.size());
  sframe_section sec;
  int ret = sframe_section_init(&sec, &src, f.address, f.bytes.size());
  if (ret) {
    throw sframe::Error(-ret, sframe::op::kReadElf, f.path, ".sframe section not readable");
  }
  std::printf("Contents of the SFrame section .sframe:\n");
  std::printf("  Header :\n\n");
  std::printf("    Version: %s\n", version_name(sec.version));
  std::printf("    Flags: %s\n", flags_string(sec.flags).c_str());
  std::printf("    Num FDEs: %" PRIu32 "\n", sec.num_fdes);
  std::printf("    Num FREs: %" PRIu32 "\n", sec.num_fres);
  std::printf("\n  Function Index :\n");
  for (uint32_t i = 0; i < sec.num_fdes; i++) {
    ret = dump_function(sec, i);
    if (ret) {
      std::fflush(stdout);
      throw sframe::Error(-ret, sframe::op::kReadElf, f.path,
                          "FDE " + std::to_string(i) + " not readable");
    }
  }
  return 0;
}
