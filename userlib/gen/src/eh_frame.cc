#include "sframe_gen/eh_frame.h"

#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

#include "cfi.h"
#include "sframe_unwind.h"
#include "sframe_client/error.h"
#include "sframe_client/sframe_format.h"
#include "sframe_gen/section_builder.h"
#include "sframe_object/elf_file.h"
#include "sframe_object/object_file.h"

namespace sframe {
namespace {

using internal::CfaRule;
using internal::CfiExpr;
using internal::CfiFde;
using internal::CfiRow;
using internal::CfiState;
using internal::kDwarfRbp;
using internal::kDwarfRip;
using internal::kDwarfRsp;
using internal::RegRule;
using internal::TrackedRule;

// Why rows are left uncovered (GenerateStats::uncovered_reasons).  The
// interpreter's own (CfiRow::stop) are used as they are.
constexpr char kReasonCfaUndefined[] = "CFA undefined";
constexpr char kReasonCfaExpression[] = "CFA expression of another form";
// OpenSSL's perlasm (`.cfi_cfa_expression %rsp+N,deref,+8`): the saved
// entry RSP is loaded, then 8 is added.  SFrame v3's flexible CFA rules are
// register + offset and *(register + offset), nothing added after the load
// (the spec, 2.46: "Flexible FDE Type Interpretation"; gas translates only
// DW_OP_bregN off; DW_OP_deref), and the caller's SP is the CFA, so no other
// description is exact: such rows are written with this project's extension
// (GenerateOptions::cfa_addend), or left uncovered for this reason.
constexpr char kReasonCfaDerefAddend[] =
    "CFA = *(register + offset) + constant (v3 with this project's extension only)";
constexpr char kReasonCfaRegister[] = "CFA register not RSP/RBP (v3 only)";
constexpr char kReasonCfaBadRegister[] = "CFA register not a general register";
constexpr char kReasonCfaDeref[] = "CFA = *(register + offset) (v3 only)";
constexpr char kReasonOffset[] = "offset beyond 32 bits";
constexpr char kReasonRa[] = "RA rule of another form";
constexpr char kReasonRaV3[] = "RA in a register or not at CFA-8 (v3 only)";
constexpr char kReasonRaColumn[] = "return address column not 16";
constexpr char kReasonFpUndefined[] = "FP undefined";
constexpr char kReasonFpRule[] = "FP rule";
constexpr char kReasonFpV3[] = "FP at register + offset or in a register (v3 only)";
constexpr char kReasonSp[] = "SP rule";
constexpr char kReasonPlt[] = "PLT expression with an FP rule";
constexpr char kReasonSignal[] = "signal frame (v3 only)";
constexpr char kReasonOverlap[] = "overlapping FDEs";
constexpr char kReasonText[] = "outside executable text";
constexpr char kReasonFar[] = "over 1.75 GiB from the text start";
constexpr char kReasonCalleePrologue[] =
    "before the save of a register its caller's CFA is in (a call bridge's callee)";

// Version 2 FDEs give their start as 32-bit offsets from the section, which
// is built for the text start: rows further away are not written.
constexpr uint64_t kMaxReach = 0x70000000;
// The module gives no rows for an FDE with more FREs than
// SFRAME_MAX_FRES_PER_FDE (it skips it, and its function is uncovered;
// the cap is the bound of a lookup's linear scan of the FREs, see
// module/sframe_decode.h), which is also below version 3's 16-bit count:
// longer functions are split into several FDEs, none skipped.
constexpr size_t kMaxFresPerFde = SFRAME_MAX_FRES_PER_FDE;
static_assert(kMaxFresPerFde <= 0xffff, "v3 attribute records count FREs in 16 bits");

// What a covered row says, in SFrame's terms.
struct Rule {
  bool outermost = false;  // RA undefined
  uint8_t cfa_reg = kDwarfRsp;
  bool cfa_deref = false;
  int32_t cfa_offset = 0;
  int32_t cfa_addend = 0;  // after the load (kFlagXCfaAddend)
  enum Fp : uint8_t { kFpSame, kFpAtCfa, kFpReg } fp = kFpSame;
  uint8_t fp_reg = 0;  // kFpReg: fp = fp_reg + fp_offset, loaded if fp_deref
  bool fp_deref = false;
  int32_t fp_offset = 0;
  // The return address: saved at CFA + ra_offset (-8: SFrame's fixed rule),
  // or the value of register ra_reg (ra_in_reg).
  bool ra_in_reg = false;
  uint8_t ra_reg = 0;
  int32_t ra_offset = -8;

  // Why the row needs a v3 flexible FDE, or nullptr.
  const char* flex_reason() const {
    if (outermost) return nullptr;
    if (ra_in_reg || ra_offset != -8) return kReasonRaV3;
    if (cfa_addend != 0) return kReasonCfaDerefAddend;
    if (cfa_deref) return kReasonCfaDeref;
    if (cfa_reg != kDwarfRsp && cfa_reg != kDwarfRbp) return kReasonCfaRegister;
    if (fp == kFpReg) return kReasonFpV3;
    return nullptr;
  }
  bool needs_flex() const { return flex_reason() != nullptr; }
  bool operator==(const Rule& o) const {
    if (outermost || o.outermost) return outermost == o.outermost;
    return cfa_reg == o.cfa_reg && cfa_deref == o.cfa_deref && cfa_offset == o.cfa_offset &&
           cfa_addend == o.cfa_addend && fp == o.fp && fp_reg == o.fp_reg &&
           fp_deref == o.fp_deref && fp_offset == o.fp_offset && ra_in_reg == o.ra_in_reg &&
           ra_reg == o.ra_reg && ra_offset == o.ra_offset;
  }
  bool operator!=(const Rule& o) const { return !(*this == o); }

  FreSpec fre(uint32_t start_off, bool flex) const {
    FreSpec f;
    f.start_off = start_off;
    if (outermost) {
      f.ra_undefined = true;
      return f;
    }
    f.cfa_base_sp = cfa_reg == kDwarfRsp;
    f.cfa_offset = cfa_offset;
    if (flex) {
      f.cfa_reg = cfa_reg;
      f.cfa_deref = cfa_deref;
      f.cfa_addend = cfa_addend;
      if (ra_in_reg) {
        f.ra_reg = ra_reg;
      } else if (ra_offset != -8) {
        f.ra_cfa_offset = ra_offset;
      }
    }
    if (fp == kFpAtCfa) {
      f.fp_offset = fp_offset;
    } else if (fp == kFpReg) {
      f.fp_offset = fp_offset;
      f.fp_reg = fp_reg;
      f.fp_deref = fp_deref;
    }
    return f;
  }
};

// CFA = RSP + base + ((pc % rep) >= threshold ? add : 0): ld's PLT rule.
struct PcMask {
  int32_t base = 0;
  uint32_t rep = 16;
  uint32_t threshold = 0;
  int32_t add = 0;

  int32_t at(uint64_t pc) const { return base + (pc % rep >= threshold ? add : 0); }
};

struct Classified {
  enum Kind : uint8_t { kRule, kPcMask, kUncovered };
  Kind kind = kUncovered;
  // Covered in version 3 only: why (the reason the row is uncovered when
  // version 3 is not allowed).
  const char* needs_v3 = nullptr;
  Rule rule;
  PcMask mask;
  const char* reason = nullptr;
};

Classified uncovered(const char* why) {
  Classified c;
  c.reason = why;
  return c;
}

// --- DWARF expressions ----------------------------------------------------

// DW_OP_* that the recognised expressions use.
constexpr uint8_t kOpDeref = 0x06;
constexpr uint8_t kOpAnd = 0x1a;
constexpr uint8_t kOpPlus = 0x22;
constexpr uint8_t kOpPlusUconst = 0x23;
constexpr uint8_t kOpShl = 0x24;
constexpr uint8_t kOpGe = 0x2a;
constexpr uint8_t kOpLit0 = 0x30;
constexpr uint8_t kOpLit31 = 0x4f;
constexpr uint8_t kOpBreg0 = 0x70;
constexpr uint8_t kOpBreg31 = 0x8f;
constexpr uint8_t kOpBregx = 0x92;

struct Op {
  uint8_t op = 0;  // DW_OP_bregx stands for every breg; DW_OP_lit0 for every lit
  uint64_t reg = 0;
  // breg's offset, lit's number, plus_uconst's operand (at most 2^63 - 1,
  // else the expression is not parsed).
  int64_t value = 0;
};

bool read_uleb(const uint8_t*& p, const uint8_t* end, uint64_t& v) {
  v = 0;
  for (unsigned shift = 0; p < end; shift += 7) {
    const uint8_t b = *p++;
    if (shift >= 64) return false;
    v |= uint64_t{b & 0x7fu} << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

bool read_sleb(const uint8_t*& p, const uint8_t* end, int64_t& v) {
  uint64_t u = 0;
  unsigned shift = 0;
  uint8_t b = 0;
  do {
    if (p >= end || shift >= 64) return false;
    b = *p++;
    u |= uint64_t{b & 0x7fu} << shift;
    shift += 7;
  } while (b & 0x80);
  if (shift < 64 && (b & 0x40)) u |= ~uint64_t{0} << shift;
  v = static_cast<int64_t>(u);
  return true;
}

// The operations of e, if it has at most max of the kinds above.
std::optional<std::vector<Op>> parse_expr(const CfiExpr& e, size_t max) {
  std::vector<Op> ops;
  const uint8_t* p = e.data;
  const uint8_t* end = e.data + e.len;
  while (p < end) {
    if (ops.size() == max) return std::nullopt;
    Op o;
    const uint8_t b = *p++;
    if (b >= kOpBreg0 && b <= kOpBreg31) {
      o.op = kOpBregx;
      o.reg = b - kOpBreg0;
      if (!read_sleb(p, end, o.value)) return std::nullopt;
    } else if (b == kOpBregx) {
      o.op = kOpBregx;
      if (!read_uleb(p, end, o.reg) || !read_sleb(p, end, o.value)) return std::nullopt;
    } else if (b == kOpPlusUconst) {
      o.op = kOpPlusUconst;
      uint64_t u = 0;
      if (!read_uleb(p, end, u) || u > uint64_t{std::numeric_limits<int64_t>::max()}) {
        return std::nullopt;
      }
      o.value = static_cast<int64_t>(u);
    } else if (b >= kOpLit0 && b <= kOpLit31) {
      o.op = kOpLit0;
      o.value = b - kOpLit0;
    } else if (b == kOpDeref || b == kOpAnd || b == kOpPlus || b == kOpShl || b == kOpGe) {
      o.op = b;
    } else {
      return std::nullopt;
    }
    ops.push_back(o);
  }
  return ops;
}

bool fits32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

// A CFA expression of the forms
//   DW_OP_bregN a [DW_OP_plus_uconst b]...                      N + a + b...
//   DW_OP_bregN a [DW_OP_plus_uconst b]... DW_OP_deref [DW_OP_plus_uconst c]...
//                                                  *(N + a + b...) + c...
// (the second as perlasm's `.cfi_cfa_expression %rsp+N,deref,+8` and gas's
// DRAP escapes write it).  SFrame v3 has the first, and the second when
// nothing is added after the load; this project's extension the rest.
struct RegDeref {
  enum Form : uint8_t { kNone, kRegOffset, kDeref, kDerefAddend, kTooFar } form = kNone;
  uint64_t reg = 0;
  int64_t offset = 0;  // before the load
  int64_t addend = 0;  // after it (kDerefAddend)
};

RegDeref reg_deref_form(const std::vector<Op>& o) {
  RegDeref r;
  if (o.empty() || o[0].op != kOpBregx) return r;
  r.reg = o[0].reg;
  r.offset = o[0].value;
  bool deref = false, addend = false, far = !fits32(r.offset);
  for (size_t i = 1; i < o.size(); i++) {
    if (o[i].op == kOpDeref && !deref) {
      deref = true;
    } else if (o[i].op == kOpPlusUconst && !deref) {
      // The sum so far fits 32 bits: adding at most 2^33 cannot overflow.
      if (far || o[i].value > (int64_t{1} << 33)) {
        far = true;
      } else {
        r.offset += o[i].value;
        far = !fits32(r.offset);
      }
    } else if (o[i].op == kOpPlusUconst && deref) {
      // As before the load: the sum stays within 32 bits or is too far.
      if (far || o[i].value > (int64_t{1} << 33)) {
        far = true;
      } else {
        r.addend += o[i].value;
        far = !fits32(r.addend);
      }
      addend = addend || o[i].value != 0;
    } else {
      return RegDeref{};
    }
  }
  if (far) {
    r.form = RegDeref::kTooFar;
  } else if (addend) {
    r.form = RegDeref::kDerefAddend;
  } else {
    r.form = deref ? RegDeref::kDeref : RegDeref::kRegOffset;
  }
  return r;
}

// A register an SFrame v3 control word may name as a base: the general
// registers (DWARF 0 to 15).
bool general_register(uint64_t reg) { return reg <= 15; }

// --- Classification of one row --------------------------------------------

// What the row gives in version 3 (Classified::needs_v3 says whether it
// needs it).
Classified classify(const CfiRow& row, const CfiFde& fde) {
  if (row.stop != nullptr) return uncovered(row.stop);
  if (fde.ra_column != kDwarfRip) return uncovered(kReasonRaColumn);
  const CfiState& s = row.state;
  Classified c;
  c.kind = Classified::kRule;

  // The return address: at CFA-8, or undefined (the outermost frame); in
  // version 3 also saved elsewhere or in a register (glibc's __vfork pops
  // it into RDI around the system call: its child's samples there).  The
  // module reads a register's value in the topmost frame only, and stops a
  // walk cleanly anywhere else.
  if (s.ra.kind == RegRule::kUndefined) {
    c.rule.outermost = true;
    if (fde.signal_frame) c.needs_v3 = kReasonSignal;
    return c;
  }
  if (s.ra.kind == RegRule::kOffset) {
    if (!fits32(s.ra.value)) return uncovered(kReasonOffset);
    c.rule.ra_offset = static_cast<int32_t>(s.ra.value);
  } else if (s.ra.kind == RegRule::kRegister && general_register(s.ra.value) &&
             s.ra.value != kDwarfRsp) {
    c.rule.ra_in_reg = true;
    c.rule.ra_reg = static_cast<uint8_t>(s.ra.value);
  } else {
    return uncovered(kReasonRa);
  }

  // The caller's SP is the CFA in SFrame; DWARF must not say otherwise.
  if (!(s.rsp.kind == RegRule::kUnspecified ||
        (s.rsp.kind == RegRule::kValOffset && s.rsp.value == 0))) {
    return uncovered(kReasonSp);
  }

  // The CFA.
  Rule& r = c.rule;
  uint64_t cfa_reg = 0;
  int64_t cfa_offset = 0;
  bool cfa_deref = false;
  switch (s.cfa.kind) {
    case CfaRule::kUndefined:
      return uncovered(kReasonCfaUndefined);
    case CfaRule::kRegOffset:
      cfa_reg = s.cfa.reg;
      cfa_offset = s.cfa.offset;
      break;
    case CfaRule::kExpression: {
      auto ops = parse_expr(s.cfa.expr, 9);
      if (!ops) return uncovered(kReasonCfaExpression);
      const std::vector<Op>& o = *ops;
      const RegDeref rd = reg_deref_form(o);
      if (rd.form == RegDeref::kRegOffset || rd.form == RegDeref::kDeref ||
          rd.form == RegDeref::kDerefAddend) {
        cfa_reg = rd.reg;
        cfa_offset = rd.offset;
        cfa_deref = rd.form != RegDeref::kRegOffset;
        r.cfa_addend = static_cast<int32_t>(rd.addend);
      } else if (rd.form == RegDeref::kTooFar) {
        return uncovered(kReasonOffset);
      } else if (o.size() == 9 && o[0].op == kOpBregx && o[0].reg == kDwarfRsp &&
                 o[1].op == kOpBregx && o[1].reg == kDwarfRip && o[1].value == 0 &&
                 o[2].op == kOpLit0 && o[3].op == kOpAnd && o[4].op == kOpLit0 &&
                 o[5].op == kOpGe && o[6].op == kOpLit0 && o[7].op == kOpShl &&
                 o[8].op == kOpPlus && ((o[2].value + 1) & o[2].value) == 0 &&
                 o[4].value <= o[2].value && o[6].value < 31 && fits32(o[0].value) &&
                 fits32(o[0].value + (int64_t{1} << o[6].value))) {
        // rsp + A + (((rip & M) >= T) << S), M + 1 a power of two: ld's
        // PLT entries (A = 8, M = 15, T = 11 or 10, S = 3).
        if (s.rbp.kind != RegRule::kUnspecified && s.rbp.kind != RegRule::kSameValue) {
          return uncovered(kReasonPlt);
        }
        // A PC-mask FDE has SFrame's fixed RA rule only.
        if (c.rule.ra_in_reg || c.rule.ra_offset != -8) return uncovered(kReasonRa);
        c.kind = Classified::kPcMask;
        if (fde.signal_frame) c.needs_v3 = kReasonSignal;
        c.mask.base = static_cast<int32_t>(o[0].value);
        c.mask.rep = static_cast<uint32_t>(o[2].value + 1);
        c.mask.threshold = static_cast<uint32_t>(o[4].value);
        c.mask.add = static_cast<int32_t>(int64_t{1} << o[6].value);
        return c;
      } else {
        return uncovered(kReasonCfaExpression);
      }
      break;
    }
  }
  if (!general_register(cfa_reg)) return uncovered(kReasonCfaBadRegister);
  if (!fits32(cfa_offset)) return uncovered(kReasonOffset);
  r.cfa_reg = static_cast<uint8_t>(cfa_reg);
  r.cfa_offset = static_cast<int32_t>(cfa_offset);
  r.cfa_deref = cfa_deref;

  // The caller's RBP.
  switch (s.rbp.kind) {
    case RegRule::kUnspecified:
    case RegRule::kSameValue:
      r.fp = Rule::kFpSame;
      break;
    case RegRule::kOffset:
      if (!fits32(s.rbp.value)) return uncovered(kReasonOffset);
      r.fp = Rule::kFpAtCfa;
      r.fp_offset = static_cast<int32_t>(s.rbp.value);
      break;
    case RegRule::kUndefined:
      return uncovered(kReasonFpUndefined);
    case RegRule::kRegister:
      if (s.rbp.value == kDwarfRbp) {
        r.fp = Rule::kFpSame;
        break;
      }
      if (!general_register(static_cast<uint64_t>(s.rbp.value))) return uncovered(kReasonFpRule);
      r.fp = Rule::kFpReg;
      r.fp_reg = static_cast<uint8_t>(s.rbp.value);
      r.fp_deref = false;
      r.fp_offset = 0;
      break;
    case RegRule::kExpression: {
      // The CFA is pushed first; [DW_OP_bregN off] leaves N + off on top:
      // the address the caller's RBP is saved at.
      auto ops = parse_expr(s.rbp.expr, 1);
      if (!ops || ops->size() != 1 || (*ops)[0].op != kOpBregx ||
          !general_register((*ops)[0].reg)) {
        return uncovered(kReasonFpRule);
      }
      if (!fits32((*ops)[0].value)) return uncovered(kReasonOffset);
      r.fp = Rule::kFpReg;
      r.fp_reg = static_cast<uint8_t>((*ops)[0].reg);
      r.fp_deref = true;
      r.fp_offset = static_cast<int32_t>((*ops)[0].value);
      break;
    }
    default:
      return uncovered(kReasonFpRule);
  }
  c.needs_v3 = r.flex_reason();
  if (c.needs_v3 == nullptr && fde.signal_frame) c.needs_v3 = kReasonSignal;
  return c;
}

// FDEs whose ranges meet another's: sorted by start, an FDE overlaps
// another one exactly when an earlier one ends after its start or the next
// one starts before its end.
std::vector<bool> overlapping(const std::vector<CfiFde>& fdes) {
  std::vector<size_t> order;
  for (size_t i = 0; i < fdes.size(); i++) {
    if (fdes[i].pc_end > fdes[i].pc_begin) order.push_back(i);
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return fdes[a].pc_begin < fdes[b].pc_begin; });
  std::vector<bool> out(fdes.size(), false);
  uint64_t max_end = 0;
  for (size_t k = 0; k < order.size(); k++) {
    const CfiFde& f = fdes[order[k]];
    if (k > 0 && max_end > f.pc_begin) out[order[k]] = true;
    if (k + 1 < order.size() && fdes[order[k + 1]].pc_begin < f.pc_end) out[order[k]] = true;
    max_end = std::max(max_end, f.pc_end);
  }
  return out;
}

// Collects covered rows into SFrame FDEs.
class FdeWriter {
 public:
  FdeWriter(SectionBuilder& b, uint8_t version) : b_(b), version_(version) {}

  void start_fde(bool signal_frame) {
    close();
    signal_ = signal_frame;
  }

  void add(uint64_t start, uint64_t end, const Rule& rule) {
    if (open_ && end_ != start) close();
    if (!open_) {
      open_ = true;
      flex_ = false;
      rules_.clear();
    }
    if (rules_.empty() || rules_.back().second != rule) rules_.emplace_back(start, rule);
    end_ = end;
    flex_ = flex_ || rule.needs_flex();
  }

  void add_pc_mask(uint64_t start, uint64_t end, const PcMask& m) {
    close();
    FdeSpec f;
    f.func_start = start;
    f.func_size = static_cast<uint32_t>(end - start);
    f.pc_mask = true;
    f.rep_size = static_cast<uint8_t>(m.rep);
    f.signal_frame = signal_ && version_ == 3;
    // A second row where the block has one (and the FDE reaches it: an FRE
    // starts inside its function).
    const bool split = m.threshold > 0 && m.threshold < m.rep && m.threshold < f.func_size;
    f.fres.push_back(FreSpec{0, true, m.at(start), {}, false, {}, false, {}, true});
    if (split) {
      f.fres.push_back(FreSpec{m.threshold, true, m.base + m.add, {}, false, {}, false, {}, true});
    }
    fres_ += f.fres.size();
    fdes_++;
    b_.add_fde(std::move(f));
  }

  void close() {
    if (!open_) return;
    open_ = false;
    const bool flex = version_ == 3 && flex_;
    size_t k = 0;
    while (k < rules_.size()) {
      const size_t n = std::min(kMaxFresPerFde, rules_.size() - k);
      const uint64_t s = rules_[k].first;
      const uint64_t e = k + n < rules_.size() ? rules_[k + n].first : end_;
      FdeSpec f;
      f.func_start = s;
      f.func_size = static_cast<uint32_t>(e - s);
      f.flex = flex;
      f.signal_frame = signal_ && version_ == 3;
      f.fres.reserve(n);
      for (size_t j = k; j < k + n; j++) {
        f.fres.push_back(rules_[j].second.fre(static_cast<uint32_t>(rules_[j].first - s), flex));
      }
      fres_ += n;
      fdes_++;
      b_.add_fde(std::move(f));
      k += n;
    }
  }

  uint64_t fdes() const { return fdes_; }
  uint64_t fres() const { return fres_; }

 private:
  SectionBuilder& b_;
  uint8_t version_;
  bool signal_ = false;
  bool open_ = false;
  bool flex_ = false;
  uint64_t end_ = 0;
  std::vector<std::pair<uint64_t, Rule>> rules_;
  uint64_t fdes_ = 0;
  uint64_t fres_ = 0;
};

// --- Calls from a frame whose CFA is in a callee-saved register ----------
//
// glibc's lazy-binding trampolines (_dl_runtime_resolve_xsave and its
// siblings) realign the stack and reserve a save area whose size is known
// only at run time (the CPU's XSAVE size), so they keep their CFA in RBX
// (CFA = RBX + 32) across `call _dl_fixup`.  In the topmost frame the walker
// has every register; below it only SP and FP, so a sample in _dl_fixup or
// deeper (1 to 2 % of the samples of as and ld, which bind lazily) stopped
// there.  But RBX is callee-saved: _dl_fixup saves it in its prologue at a
// fixed offset from its CFA, and its CFA is the trampoline's SP once the
// walk has stepped from it.  So while the call is in progress and the
// callee is past its save, the trampoline's CFA is *(SP + save_offset) + 32,
// a rule of SP alone (v3's dereferenced CFA, with this project's addend).
//
// That rule is written for [call + 1, call + 5) only: the PCs a lookup
// below the top makes for the return address call + 5 (the module looks up
// RA - 1), never an instruction's start, where the topmost frame has the
// register and the row stays as DWARF says.  The callee's rows before its
// save are left uncovered (kReasonCalleePrologue): a walk from there would
// read the slot before it is written.  The call is found by its bytes
// (E8 rel32) and accepted only when its target is the exact start of an FDE
// that saves the register so; bytes that merely look like a call matter only
// if a real return address also lies inside their four bytes.  What no rule
// of the callee shows is a tail call after it has restored the register (a
// jump to another function while the caller's frame is live): _dl_fixup
// returns, and a callee that did so would have the walk read the slot it
// left.

// The registers the ABI says a callee keeps (RBP is the frame pointer,
// known to the walker anyway).
bool callee_saved(uint8_t reg) { return reg == 3 || (reg >= 12 && reg <= 15); }

// Where an FDE keeps register reg: ok when no row says anything of it up to
// one that saves it at CFA + offset (offset < 0), and every row from there
// to the FDE's end says the same; saved_from is that row's start.
struct CalleeSave {
  bool ok = false;
  int32_t offset = 0;
  uint64_t saved_from = 0;
};

CalleeSave callee_save(internal::EhFrameReader& reader, const CfiFde& fde, uint8_t reg) {
  std::vector<CfiRow> rows;
  reader.read_fde(fde, reg, rows);
  CalleeSave out;
  bool saved = false;
  for (const CfiRow& r : rows) {
    if (r.stop != nullptr) return {};
    const TrackedRule& t = r.state.tracked;
    if (!saved) {
      if (t.kind == TrackedRule::kSame) continue;
      if (t.kind != TrackedRule::kAtCfa || t.offset >= 0) return {};
      saved = true;
      out.offset = t.offset;
      out.saved_from = r.start;
    } else if (t.kind != TrackedRule::kAtCfa || t.offset != out.offset) {
      return {};
    }
  }
  out.ok = saved;
  return out;
}

// The text bytes holding [start, end), or nullptr.
const TextBytes* text_holding(const std::vector<TextBytes>& text, uint64_t start, uint64_t end) {
  for (const TextBytes& t : text) {
    if (t.data != nullptr && start >= t.vaddr && end >= start && end - t.vaddr <= t.size) {
      return &t;
    }
  }
  return nullptr;
}

// A call that gets a bridge row, in the row holding it.
struct Bridge {
  uint64_t call = 0;  // the E8 byte
  uint64_t callee = 0;
  Rule rule;
};

// Finds the calls that get bridge rows (by row index), and leaves the
// callees' rows before their saves uncovered in cls.
std::unordered_map<size_t, std::vector<Bridge>> find_call_bridges(
    internal::EhFrameReader& reader, const std::vector<CfiFde>& fdes,
    const std::vector<CfiRow>& rows, const std::vector<bool>& overlaps,
    std::vector<Classified>& cls, const std::vector<TextBytes>& text, const GenerateOptions& opts,
    GenerateStats& st) {
  std::unordered_map<size_t, std::vector<Bridge>> out;
  std::unordered_map<uint64_t, size_t> fde_at;  // pc_begin -> FDE, made when first needed
  std::map<std::pair<size_t, uint8_t>, CalleeSave> saves;
  std::vector<std::pair<size_t, uint64_t>> prologues;  // callee FDE, its save's row start
  for (size_t i = 0; i < fdes.size(); i++) {
    const CfiFde& f = fdes[i];
    for (size_t k = f.first_row; k < f.first_row + f.num_rows; k++) {
      const Classified& c = cls[k];
      const Rule& r = c.rule;
      if (c.kind != Classified::kRule || r.outermost || r.cfa_deref || !callee_saved(r.cfa_reg) ||
          r.ra_in_reg || r.fp == Rule::kFpReg || (r.cfa_offset != 0 && !opts.cfa_addend)) {
        continue;
      }
      const CfiRow& row = rows[k];
      const TextBytes* t = text_holding(text, row.start, row.end);
      if (t == nullptr) continue;
      for (uint64_t x = row.start; row.end - x >= 5;) {
        const uint8_t* p = t->data + (x - t->vaddr);
        if (p[0] != 0xe8) {
          x++;
          continue;
        }
        const int32_t rel = static_cast<int32_t>(uint32_t{p[1]} | uint32_t{p[2]} << 8 |
                                                 uint32_t{p[3]} << 16 | uint32_t{p[4]} << 24);
        const uint64_t target = x + 5 + static_cast<uint64_t>(static_cast<int64_t>(rel));
        if (fde_at.empty()) {
          for (size_t j = 0; j < fdes.size(); j++) {
            if (!overlaps[j]) fde_at.emplace(fdes[j].pc_begin, j);
          }
        }
        const auto callee = fde_at.find(target);
        if (callee == fde_at.end() || callee->second == i) {
          x++;
          continue;
        }
        auto save = saves.find({callee->second, r.cfa_reg});
        if (save == saves.end()) {
          save = saves
                     .emplace(std::make_pair(callee->second, r.cfa_reg),
                              callee_save(reader, fdes[callee->second], r.cfa_reg))
                     .first;
        }
        if (!save->second.ok) {
          x++;
          continue;
        }
        Bridge b;
        b.call = x;
        b.callee = target;
        b.rule = r;
        b.rule.cfa_reg = kDwarfRsp;
        b.rule.cfa_deref = true;
        b.rule.cfa_offset = save->second.offset;
        b.rule.cfa_addend = r.cfa_offset;
        out[k].push_back(b);
        prologues.emplace_back(callee->second, save->second.saved_from);
        x += 5;
      }
    }
  }
  for (const auto& [j, saved_from] : prologues) {
    const CfiFde& f = fdes[j];
    for (size_t k = f.first_row; k < f.first_row + f.num_rows && rows[k].start < saved_from; k++) {
      if (cls[k].kind != Classified::kUncovered) cls[k] = uncovered(kReasonCalleePrologue);
    }
  }
  // A caller's row that is itself some callee's prologue is not written;
  // the others are, in .eh_frame order.
  for (size_t k = 0; k < rows.size(); k++) {
    const auto it = out.find(k);
    if (it == out.end()) continue;
    if (cls[k].kind != Classified::kRule) {
      out.erase(it);
      continue;
    }
    for (const Bridge& b : it->second) {
      st.call_bridges.push_back({b.call + 1, b.call + 5, b.callee, cls[k].rule.cfa_reg,
                                 b.rule.cfa_offset, b.rule.cfa_addend});
    }
  }
  return out;
}

void check_options(const GenerateOptions& opts, const std::string& object) {
  if (opts.version != 2 && opts.version != 3) {
    throw Error(EINVAL, op::kGenerate, object, "SFrame version must be 2 or 3");
  }
}

}  // namespace

GeneratedSframe generate_sframe_from_eh_frame(const uint8_t* data, size_t size,
                                              uint64_t eh_frame_vaddr, uint64_t text_vaddr,
                                              uint64_t text_len, const GenerateOptions& opts,
                                              const std::string& object,
                                              const std::vector<TextBytes>& text) {
  check_options(opts, object);
  std::vector<CfiFde> fdes;
  std::vector<CfiRow> rows;
  internal::EhFrameReader reader(data, size, eh_frame_vaddr, object);
  reader.read_all(fdes, rows);
  // Free Pascal's programs have an empty .eh_frame: nothing to describe.
  if (fdes.empty()) throw Error(ENODATA, op::kGenerate, object, "no FDE in .eh_frame");

  GeneratedSframe out;
  out.section_vaddr = text_vaddr;
  out.text_vaddr = text_vaddr;
  out.text_len = text_len;
  GenerateStats& st = out.stats;
  st.eh_frame_size = size;

  // Classify every row once; the version follows from what they need.
  const bool v3_ok = opts.version == 3 || opts.allow_v3;
  const std::vector<bool> overlaps = overlapping(fdes);
  const uint64_t text_end = text_len > std::numeric_limits<uint64_t>::max() - text_vaddr
                                ? std::numeric_limits<uint64_t>::max()
                                : text_vaddr + text_len;
  std::vector<Classified> cls(rows.size());
  bool need_v3 = false;
  for (size_t i = 0; i < fdes.size(); i++) {
    const CfiFde& f = fdes[i];
    for (size_t k = f.first_row; k < f.first_row + f.num_rows; k++) {
      const CfiRow& row = rows[k];
      if (overlaps[i]) {
        cls[k] = uncovered(kReasonOverlap);
      } else if (row.start < text_vaddr || row.end > text_end) {
        cls[k] = uncovered(kReasonText);
      } else if (row.end - text_vaddr > kMaxReach) {
        cls[k] = uncovered(kReasonFar);
      } else {
        cls[k] = classify(row, f);
        if (cls[k].kind == Classified::kRule && cls[k].rule.cfa_addend != 0 && !opts.cfa_addend) {
          cls[k] = uncovered(kReasonCfaDerefAddend);
        }
        if (cls[k].needs_v3 != nullptr && !v3_ok) cls[k] = uncovered(cls[k].needs_v3);
      }
      need_v3 = need_v3 || cls[k].needs_v3 != nullptr;
    }
  }
  out.version = opts.version == 3 || need_v3 ? 3 : 2;
  // Rows whose CFA is in a callee-saved register need version 3 already.
  const std::unordered_map<size_t, std::vector<Bridge>> bridges =
      out.version == 3 ? find_call_bridges(reader, fdes, rows, overlaps, cls, text, opts, st)
                       : std::unordered_map<size_t, std::vector<Bridge>>{};

  SectionBuilder b(out.version, /*pcrel=*/true);
  FdeWriter w(b, out.version);
  for (size_t i = 0; i < fdes.size(); i++) {
    const CfiFde& f = fdes[i];
    st.fdes++;
    // Saturated: ranges of garbage FDEs can sum past 2^64.
    if (__builtin_add_overflow(st.fde_bytes, f.pc_end - f.pc_begin, &st.fde_bytes)) {
      st.fde_bytes = std::numeric_limits<uint64_t>::max();
    }
    w.start_fde(f.signal_frame);
    uint64_t covered_rows = 0;
    for (size_t k = f.first_row; k < f.first_row + f.num_rows; k++) {
      const CfiRow& row = rows[k];
      const Classified& c = cls[k];
      st.rows++;
      switch (c.kind) {
        case Classified::kUncovered:
          st.rows_uncovered++;
          st.uncovered_reasons[c.reason]++;
          st.uncovered_reason_bytes[c.reason] += row.end - row.start;
          st.uncovered_rows.push_back({row.start, row.end, f.pc_begin, c.reason});
          w.close();
          continue;
        case Classified::kRule: {
          const auto b = bridges.find(k);
          if (b == bridges.end()) {
            w.add(row.start, row.end, c.rule);
          } else {
            uint64_t at = row.start;
            for (const Bridge& x : b->second) {
              w.add(at, x.call + 1, c.rule);
              w.add(x.call + 1, x.call + 5, x.rule);
              at = x.call + 5;
            }
            if (at < row.end) w.add(at, row.end, c.rule);
          }
          if (c.rule.cfa_addend != 0) st.rows_cfa_addend++;
          break;
        }
        case Classified::kPcMask: {
          // Whole blocks from the first aligned address; the bytes before
          // it get ordinary rows (PCMASK FDEs count from their start).
          const uint64_t rep = c.mask.rep;
          const uint64_t rem = row.start % rep;
          const uint64_t aligned =
              rem == 0 ? row.start : std::min(row.end, row.start + (rep - rem));
          for (uint64_t pc = row.start; pc < aligned;) {
            Rule r;
            r.cfa_offset = c.mask.at(pc);
            uint64_t next = pc + 1;
            while (next < aligned && c.mask.at(next) == r.cfa_offset) next++;
            w.add(pc, next, r);
            pc = next;
          }
          if (aligned < row.end) w.add_pc_mask(aligned, row.end, c.mask);
          break;
        }
      }
      covered_rows++;
      st.covered_bytes += row.end - row.start;
    }
    w.close();
    if (covered_rows == f.num_rows) {
      st.fdes_covered++;
    } else if (covered_rows == 0) {
      st.fdes_uncovered++;
    } else {
      st.fdes_partial++;
    }
  }
  st.sframe_fdes = w.fdes();
  st.sframe_fres = w.fres();
  out.bytes = b.build(out.section_vaddr);
  return out;
}

namespace {

struct EhFrameBytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
  uint64_t vaddr = 0;
};

// .eh_frame by its section header; nullopt when there is no such section.
std::optional<EhFrameBytes> eh_frame_section(Elf* elf, const std::string& path) {
  size_t shstrndx;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return std::nullopt;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr) continue;
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (name == nullptr || std::strcmp(name, ".eh_frame") != 0) continue;
    if (sh.sh_type == SHT_NOBITS) {
      throw Error(ENODATA, op::kGenerate, path, ".eh_frame section has no bytes in the file");
    }
    Elf_Data* d = elf_rawdata(scn, nullptr);
    if (d == nullptr || (d->d_size > 0 && d->d_buf == nullptr) || d->d_size != sh.sh_size) {
      throw Error(EBADMSG, op::kGenerate, path,
                  std::string("cannot read .eh_frame: ") + elf_errmsg(-1));
    }
    return EhFrameBytes{static_cast<const uint8_t*>(d->d_buf), d->d_size, sh.sh_addr};
  }
  return std::nullopt;
}

// .eh_frame through PT_GNU_EH_FRAME, for files without section headers:
// .eh_frame_hdr's eh_frame_ptr, up to the end of the PT_LOAD holding it
// (the reader stops at .eh_frame's zero terminator).
std::optional<EhFrameBytes> eh_frame_from_hdr(Elf* elf, const std::vector<GElf_Phdr>& phdrs,
                                              const std::string& path) {
  const GElf_Phdr* hdr = nullptr;
  for (const GElf_Phdr& ph : phdrs) {
    if (ph.p_type == PT_GNU_EH_FRAME) hdr = &ph;
  }
  // objcopy --remove-section=.eh_frame_hdr leaves an empty segment.
  if (hdr == nullptr || hdr->p_filesz == 0) return std::nullopt;
  auto bad = [&](const char* what) {
    return Error(EBADMSG, op::kGenerate, path, std::string("malformed .eh_frame_hdr: ") + what);
  };
  if (hdr->p_filesz < 4 + 8) throw bad("too short");
  Elf_Data* d =
      elf_getdata_rawchunk(elf, static_cast<int64_t>(hdr->p_offset), hdr->p_filesz, ELF_T_BYTE);
  if (d == nullptr || d->d_buf == nullptr) throw bad("outside the file");
  const auto* h = static_cast<const uint8_t*>(d->d_buf);
  const uint8_t version = h[0];
  const uint8_t enc = h[1];
  if (version != 1) throw Error(EOPNOTSUPP, op::kGenerate, path, ".eh_frame_hdr version");
  // eh_frame_ptr: sdata4 or udata8/absptr, absolute or relative to itself
  // or to the header (datarel), as ld and lld write it.
  int64_t v;
  switch (enc & 0x0f) {
    case 0x0b:  // sdata4
      v = static_cast<int32_t>(uint32_t{h[4]} | uint32_t{h[5]} << 8 | uint32_t{h[6]} << 16 |
                               uint32_t{h[7]} << 24);
      break;
    case 0x00:  // absptr
    case 0x04:  // udata8
    case 0x0c: {
      uint64_t u = 0;
      for (int i = 0; i < 8; i++) u |= uint64_t{h[4 + i]} << (8 * i);
      v = static_cast<int64_t>(u);
      break;
    }
    default:
      throw Error(EOPNOTSUPP, op::kGenerate, path, ".eh_frame_hdr eh_frame_ptr encoding");
  }
  uint64_t ptr = static_cast<uint64_t>(v);
  switch (enc & 0x70) {
    case 0x00:
      break;
    case 0x10:  // pcrel
      ptr += hdr->p_vaddr + 4;
      break;
    case 0x30:  // datarel: from the start of .eh_frame_hdr
      ptr += hdr->p_vaddr;
      break;
    default:
      throw Error(EOPNOTSUPP, op::kGenerate, path, ".eh_frame_hdr eh_frame_ptr encoding");
  }
  for (const GElf_Phdr& ph : phdrs) {
    if (ph.p_type != PT_LOAD || ptr < ph.p_vaddr || ptr - ph.p_vaddr >= ph.p_filesz) continue;
    const uint64_t skip = ptr - ph.p_vaddr;
    Elf_Data* e = elf_getdata_rawchunk(elf, static_cast<int64_t>(ph.p_offset + skip),
                                       ph.p_filesz - skip, ELF_T_BYTE);
    if (e == nullptr || e->d_buf == nullptr) throw bad("eh_frame_ptr outside the file");
    return EhFrameBytes{static_cast<const uint8_t*>(e->d_buf), e->d_size, ptr};
  }
  throw bad("eh_frame_ptr outside every PT_LOAD");
}

}  // namespace

namespace {

// What generate_sframe() does, on a file already open (elf_path names it in
// errors).
GeneratedSframe generate_from(const internal::ElfFile& file, const std::string& elf_path,
                              const GenerateOptions& opts) {
  Elf* elf = file.get();
  GElf_Ehdr eh;
  if (gelf_getehdr(elf, &eh) == nullptr) {
    throw Error(ENOEXEC, op::kReadElf, elf_path, elf_errmsg(-1));
  }
  if (gelf_getclass(elf) != ELFCLASS64 || eh.e_machine != EM_X86_64) {
    throw Error(EOPNOTSUPP, op::kGenerate, elf_path, "not a 64-bit x86-64 ELF file");
  }
  if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) {
    throw Error(EOPNOTSUPP, op::kGenerate, elf_path, "not an executable or shared object");
  }
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) {
    throw Error(EBADMSG, op::kGenerate, elf_path,
                std::string("cannot read program headers: ") + elf_errmsg(-1));
  }
  std::vector<GElf_Phdr> phdrs;
  uint64_t text_lo = std::numeric_limits<uint64_t>::max(), text_hi = 0;
  for (size_t i = 0; i < phnum; i++) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, static_cast<int>(i), &ph) == nullptr) {
      throw Error(EBADMSG, op::kGenerate, elf_path,
                  std::string("cannot read program headers: ") + elf_errmsg(-1));
    }
    phdrs.push_back(ph);
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && ph.p_memsz > 0) {
      text_lo = std::min(text_lo, ph.p_vaddr);
      text_hi = std::max(text_hi, ph.p_vaddr + ph.p_memsz);
    }
  }
  if (text_hi <= text_lo) throw Error(ENODATA, op::kGenerate, elf_path, "no executable PT_LOAD");

  std::optional<EhFrameBytes> eh_frame = eh_frame_section(elf, elf_path);
  if (!eh_frame) eh_frame = eh_frame_from_hdr(elf, phdrs, elf_path);
  if (!eh_frame) throw Error(ENODATA, op::kGenerate, elf_path, "no .eh_frame");

  // The executable segments' bytes in the file, for the calls (the part
  // of a segment past its file size is zeros, never code).
  std::vector<TextBytes> text;
  for (const GElf_Phdr& ph : phdrs) {
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) || ph.p_filesz == 0) continue;
    Elf_Data* d =
        elf_getdata_rawchunk(elf, static_cast<int64_t>(ph.p_offset), ph.p_filesz, ELF_T_BYTE);
    if (d != nullptr && d->d_buf != nullptr && d->d_size == ph.p_filesz) {
      text.push_back(TextBytes{static_cast<const uint8_t*>(d->d_buf), d->d_size, ph.p_vaddr});
    }
  }
  GeneratedSframe out =
      generate_sframe_from_eh_frame(eh_frame->data, eh_frame->size, eh_frame->vaddr, text_lo,
                                    text_hi - text_lo, opts, elf_path, text);
  return out;
}

}  // namespace

GeneratedSframe generate_sframe(const std::string& elf_path, const GenerateOptions& opts) {
  check_options(opts, elf_path);  // before the file is opened, as always
  return generate_sframe(ObjectFile::read(open_object_file(elf_path), elf_path), opts);
}

GeneratedSframe generate_sframe(const ObjectFile& object, const GenerateOptions& opts) {
  check_options(opts, object.name());
  GeneratedSframe out = generate_from(object.elf(), object.name(), opts);
  out.build_id = object.build_id();
  return out;
}

}  // namespace sframe
