// sframe-gen, internal: a reader of .eh_frame and an interpreter of
// the DWARF call-frame programs of its FDEs (DWARF 5 section 6.4, with the
// .eh_frame conventions of the LSB: CIE id 0, relative CIE pointers, 'z'
// augmentations and DW_EH_PE pointer encodings).
//
// The interpreter turns each FDE into rows: maximal address ranges over
// which the rules that matter to SFrame on AMD64 do not change (the CFA,
// the return-address column, RBP and RSP).  Rules of other registers are
// read and dropped.  It reads the section bytes only; nothing here knows
// about ELF or SFrame.
#ifndef SFRAME_GEN_SRC_CFI_H
#define SFRAME_GEN_SRC_CFI_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace sframe::internal {

// DWARF register numbers on AMD64.
inline constexpr uint32_t kDwarfRbp = 6;
inline constexpr uint32_t kDwarfRsp = 7;
inline constexpr uint32_t kDwarfRip = 16;  // the return-address column
// No register tracked (EhFrameReader::read_fde).
inline constexpr uint64_t kNoTrackedReg = ~uint64_t{0};

// A DWARF expression inside the section (not owned).
struct CfiExpr {
  const uint8_t* data = nullptr;
  uint32_t len = 0;
  bool operator==(const CfiExpr& o) const { return data == o.data && len == o.len; }
};

// The rule of one register of the caller (DWARF 5 6.4.1).
struct RegRule {
  enum Kind : uint8_t {
    kUnspecified,  // no rule given: the ABI's default (callee-saved: same value)
    kUndefined,
    kSameValue,
    kOffset,     // saved at CFA + value
    kValOffset,  // is CFA + value
    kRegister,   // is in register value
    kExpression,
    kValExpression,
  };
  Kind kind = kUnspecified;
  int64_t value = 0;
  CfiExpr expr;
  bool operator==(const RegRule& o) const {
    return kind == o.kind && value == o.value && expr == o.expr;
  }
};

struct CfaRule {
  enum Kind : uint8_t { kUndefined, kRegOffset, kExpression };
  Kind kind = kUndefined;  // until the CIE defines it
  uint64_t reg = 0;
  int64_t offset = 0;
  CfiExpr expr;
  bool operator==(const CfaRule& o) const {
    return kind == o.kind && reg == o.reg && offset == o.offset && expr == o.expr;
  }
};

// The rule of one more register, for a reader that asks for it
// (EhFrameReader::read_fde): whether it is saved at a CFA offset.  Kept to
// eight bytes, since every row of every FDE carries it.
struct TrackedRule {
  enum Kind : uint8_t {
    kSame,   // no rule, or the same value: still in the register
    kAtCfa,  // saved at CFA + offset
    kOther,  // any other rule, or an offset beyond 32 bits
  };
  Kind kind = kSame;
  int32_t offset = 0;
  bool operator==(const TrackedRule& o) const { return kind == o.kind && offset == o.offset; }
};

// What SFrame needs of the state at one PC.
struct CfiState {
  CfaRule cfa;
  RegRule ra;  // the CIE's return-address column
  RegRule rbp;
  RegRule rsp;
  TrackedRule tracked;  // read_fde()'s register; kSame everywhere in read_all()
  bool operator==(const CfiState& o) const {
    return cfa == o.cfa && ra == o.ra && rbp == o.rbp && rsp == o.rsp && tracked == o.tracked;
  }
  bool operator!=(const CfiState& o) const { return !(*this == o); }
};

// [start, end): one state.  A row with a non-null stop reason has no state:
// the program could not be followed from its start on (an unknown opcode,
// DW_CFA_restore_state with nothing remembered, a location going back, a
// CFA offset change on an expression CFA), as for a DWARF consumer.
struct CfiRow {
  uint64_t start = 0;
  uint64_t end = 0;
  CfiState state;
  const char* stop = nullptr;
};

struct CfiFde {
  uint64_t offset = 0;  // of the FDE in the section
  uint64_t pc_begin = 0;
  uint64_t pc_end = 0;        // pc_begin + pc_range (saturated)
  bool signal_frame = false;  // the CIE's 'S' augmentation
  uint64_t ra_column = kDwarfRip;
  // Rows of the FDE: [first_row, first_row + num_rows) of the row vector
  // passed to read_all().
  size_t first_row = 0;
  size_t num_rows = 0;
};

// Reads every FDE of an .eh_frame section and interprets its program.
// Malformed bytes (entries or operands past their end, a CIE pointer to no
// CIE, a bad pointer encoding, LEB128 values over 64 bits) throw
// sframe::Error(EBADMSG, op::kGenerate, object); well-formed features this
// reader does not handle (CIE versions other than 1, 3 and 4, pointer
// encodings other than absolute and PC-relative, augmentations without 'z'
// other than the empty one) throw EOPNOTSUPP.
class EhFrameReader {
 public:
  // data: the section's size bytes, which the program sees at vaddr.
  EhFrameReader(const uint8_t* data, size_t size, uint64_t vaddr, std::string object);

  // Appends every FDE to fdes and its rows (in address order, identical
  // neighbours merged) to rows.  A zero-length entry ends the section, as
  // it does for libgcc's unwinder.
  void read_all(std::vector<CfiFde>& fdes, std::vector<CfiRow>& rows);

  // The rows of one FDE that read_all() gave, read again with the rule of
  // register reg tracked (CfiState::tracked; the rows split where it
  // changes), appended to rows.  Throws as read_all().
  void read_fde(const CfiFde& fde, uint64_t reg, std::vector<CfiRow>& rows);

 private:
  // Interprets the FDE whose entry starts at off, appending its rows;
  // tracked_reg as read_fde() (kNoTrackedReg: none).
  CfiFde interpret(uint64_t off, uint64_t tracked_reg, std::vector<CfiRow>& rows,
                   std::vector<CfiState>& stack, uint64_t& budget);
  struct Cie {
    uint8_t fde_encoding = 0;  // DW_EH_PE_absptr
    bool has_z = false;
    bool signal_frame = false;
    uint64_t code_align = 1;
    int64_t data_align = 1;
    uint64_t ra_column = kDwarfRip;
    const uint8_t* insns = nullptr;
    const uint8_t* insns_end = nullptr;
  };

  const Cie& cie_at(uint64_t offset);
  [[noreturn]] void malformed(uint64_t offset, const std::string& what) const;
  [[noreturn]] void unsupported(uint64_t offset, const std::string& what) const;

  const uint8_t* data_;
  size_t size_;
  uint64_t vaddr_;
  std::string object_;
  std::unordered_map<uint64_t, Cie> cies_;
};

}  // namespace sframe::internal

#endif  // SFRAME_GEN_SRC_CFI_H
