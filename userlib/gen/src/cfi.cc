#include "cfi.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <utility>

#include "sframe_client/error.h"

namespace sframe::internal {
namespace {

// Thrown by the byte readers below and turned into sframe::Error, with the
// entry's offset, by read_all().
struct Malformed {
  const char* what;
};
struct Unsupported {
  const char* what;
};
// The object's instruction budget is spent (read_all() says E2BIG).
struct ObjectBudget {};

// DW_EH_PE_* (LSB, "DWARF Exception Header Encoding").
constexpr uint8_t kPeOmit = 0xff;
constexpr uint8_t kPeFormatMask = 0x0f;
constexpr uint8_t kPeApplyMask = 0x70;
constexpr uint8_t kPeIndirect = 0x80;
constexpr uint8_t kPeAbsptr = 0x00;
constexpr uint8_t kPeUleb128 = 0x01;
constexpr uint8_t kPeUdata2 = 0x02;
constexpr uint8_t kPeUdata4 = 0x03;
constexpr uint8_t kPeUdata8 = 0x04;
constexpr uint8_t kPeSleb128 = 0x09;
constexpr uint8_t kPeSdata2 = 0x0a;
constexpr uint8_t kPeSdata4 = 0x0b;
constexpr uint8_t kPeSdata8 = 0x0c;
constexpr uint8_t kPePcrel = 0x10;
constexpr uint8_t kPeAligned = 0x50;

// DW_CFA_* (DWARF 5 7.24, plus the GNU extensions GCC emits).
enum : uint8_t {
  kCfaNop = 0x00,
  kCfaSetLoc = 0x01,
  kCfaAdvanceLoc1 = 0x02,
  kCfaAdvanceLoc2 = 0x03,
  kCfaAdvanceLoc4 = 0x04,
  kCfaOffsetExtended = 0x05,
  kCfaRestoreExtended = 0x06,
  kCfaUndefined = 0x07,
  kCfaSameValue = 0x08,
  kCfaRegister = 0x09,
  kCfaRememberState = 0x0a,
  kCfaRestoreState = 0x0b,
  kCfaDefCfa = 0x0c,
  kCfaDefCfaRegister = 0x0d,
  kCfaDefCfaOffset = 0x0e,
  kCfaDefCfaExpression = 0x0f,
  kCfaExpression = 0x10,
  kCfaOffsetExtendedSf = 0x11,
  kCfaDefCfaSf = 0x12,
  kCfaDefCfaOffsetSf = 0x13,
  kCfaValOffset = 0x14,
  kCfaValOffsetSf = 0x15,
  kCfaValExpression = 0x16,
  kCfaGnuArgsSize = 0x2e,
  kCfaGnuNegativeOffsetExtended = 0x2f,
  kCfaAdvanceLoc = 0x40,  // high two bits
  kCfaOffset = 0x80,
  kCfaRestore = 0xc0,
};

// Reasons rows stop (CfiRow::stop); the generator reports them as given.
constexpr const char kStopUnknownOp[] = "unknown CFA instruction";
constexpr const char kStopRestoreState[] = "DW_CFA_restore_state without remember_state";
constexpr const char kStopLocBack[] = "CFA program location goes back";
constexpr const char kStopCfaNotOffset[] = "CFA offset or register change on a non-offset CFA";
constexpr const char kStopRememberDepth[] =
    "DW_CFA_remember_state nested deeper than 64 (this generator's bound)";
constexpr const char kStopFdeInstructions[] =
    "CFA program of more than 1048576 instructions (this generator's bound)";

// The bounds of what one object's .eh_frame can make the generator spend
// (it runs on files a profiler, often root, finds mapped in any process).
// Compilers nest DW_CFA_remember_state one or two deep; without a bound, a
// crafted 10 MB FDE of remember_state pushed 10 M states (2.2 GB).
constexpr size_t kMaxRememberDepth = 64;
// A CIE's initial instructions run again for every FDE that refers to it,
// so the bytes of the section alone bound nothing: an FDE's programs (its
// CIE's and its own) stop after this many instructions (compilers' run a
// few to a few thousand; the 70000-row function of a host test runs
// 140000), and an object's in all after kObjectInstructionsPerByte per
// byte of its .eh_frame plus this many, which also bounds its rows (at
// most one per instruction) and so the generator's memory.
constexpr uint64_t kMaxFdeInstructions = uint64_t{1} << 20;
constexpr uint64_t kObjectInstructionsPerByte = 4;
static_assert(kMaxRememberDepth == 64 && kMaxFdeInstructions == 1048576,
              "the stop reasons above name these bounds");

// Bounds-checked little-endian reads of [p, end).
class Cursor {
 public:
  Cursor(const uint8_t* p, const uint8_t* end) : p_(p), end_(end) {}

  bool done() const { return p_ >= end_; }
  const uint8_t* pos() const { return p_; }
  size_t left() const { return static_cast<size_t>(end_ - p_); }

  const uint8_t* skip(uint64_t n) {
    if (n > left()) throw Malformed{"field runs past the end of its entry"};
    const uint8_t* at = p_;
    p_ += n;
    return at;
  }
  uint8_t u8() { return *skip(1); }
  uint64_t le(unsigned n) {
    const uint8_t* b = skip(n);
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++) v |= uint64_t{b[i]} << (8 * i);
    return v;
  }
  uint64_t uleb() {
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
      uint8_t b = u8();
      if (shift >= 64 || (shift == 63 && (b & 0x7e) != 0)) {
        throw Malformed{"LEB128 value over 64 bits"};
      }
      v |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return v;
    }
  }
  int64_t sleb() {
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t b;
    do {
      b = u8();
      if (shift >= 64) throw Malformed{"LEB128 value over 64 bits"};
      v |= uint64_t{b & 0x7fu} << shift;
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= ~uint64_t{0} << shift;
    return static_cast<int64_t>(v);
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// The value of a pointer of format enc & 0x0f (no application).
uint64_t read_format(Cursor& c, uint8_t enc) {
  switch (enc & kPeFormatMask) {
    case kPeAbsptr:
    case kPeUdata8:
    case kPeSdata8:
      return c.le(8);
    case kPeUleb128:
      return c.uleb();
    case kPeUdata2:
      return c.le(2);
    case kPeUdata4:
      return c.le(4);
    case kPeSleb128:
      return static_cast<uint64_t>(c.sleb());
    case kPeSdata2:
      return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(c.le(2))));
    case kPeSdata4:
      return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(c.le(4))));
    default:
      throw Malformed{"invalid pointer encoding"};
  }
}

// A code address (FDE initial location, DW_CFA_set_loc) encoded with enc;
// base_vaddr is the address c's data start at in the program.
uint64_t read_address(Cursor& c, uint8_t enc, const uint8_t* base, uint64_t base_vaddr) {
  if (enc == kPeOmit) throw Malformed{"code address encoding is DW_EH_PE_omit"};
  const uint64_t field = base_vaddr + static_cast<uint64_t>(c.pos() - base);
  if (enc & kPeIndirect) throw Unsupported{"indirect code address encoding"};
  switch (enc & kPeApplyMask) {
    case 0:
      return read_format(c, enc);
    case kPePcrel:
      return field + read_format(c, enc);
    default:
      throw Unsupported{"code address encoding relative to text, data, function or alignment"};
  }
}

// Steps over a pointer the generator does not need (the personality
// routine of a 'P' augmentation).
void skip_pointer(Cursor& c, uint8_t enc, const uint8_t* base, uint64_t base_vaddr) {
  if (enc == kPeOmit) return;
  if ((enc & kPeApplyMask) == kPeAligned) {
    const uint64_t at = base_vaddr + static_cast<uint64_t>(c.pos() - base);
    c.skip((8 - at % 8) % 8);
    c.skip(8);
    return;
  }
  read_format(c, enc);
}

int64_t factored(uint64_t v, int64_t factor) {
  int64_t out;
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
      __builtin_mul_overflow(static_cast<int64_t>(v), factor, &out)) {
    throw Malformed{"factored offset overflows"};
  }
  return out;
}

int64_t factored(int64_t v, int64_t factor) {
  int64_t out;
  if (__builtin_mul_overflow(v, factor, &out)) throw Malformed{"factored offset overflows"};
  return out;
}

// Runs CFA programs over one FDE, appending its rows.
class Interpreter {
 public:
  // budget: the instructions the object may still run (see
  // kObjectInstructionsPerByte); each one run takes one, and run() throws
  // ObjectBudget when none is left.
  // tracked_reg: a register whose rule goes to CfiState::tracked, or
  // kNoTrackedReg.
  Interpreter(uint64_t pc_begin, uint64_t pc_end, uint64_t ra_column, uint64_t tracked_reg,
              std::vector<CfiRow>& rows, std::vector<CfiState>& stack, uint64_t& budget)
      : loc_(pc_begin),
        end_(pc_end),
        ra_column_(ra_column),
        tracked_reg_(tracked_reg),
        rows_(rows),
        stack_(stack),
        budget_(budget) {
    first_row_ = rows_.size();
    stack_.clear();
  }

  // Runs the program [p, end) with the given factors; base/base_vaddr
  // place the bytes in the program (for DW_CFA_set_loc).  Returns false
  // once nothing more can change a row of the FDE.
  bool run(const uint8_t* p, const uint8_t* end, uint64_t code_align, int64_t data_align,
           uint8_t fde_encoding, const uint8_t* base, uint64_t base_vaddr) {
    Cursor c(p, end);
    while (!c.done()) {
      if (stopped_ || loc_ >= end_) return false;
      if (budget_ == 0) throw ObjectBudget{};
      budget_--;
      if (++instructions_ > kMaxFdeInstructions) {
        stop(kStopFdeInstructions);
        return false;
      }
      const uint8_t op = c.u8();
      const uint8_t low = op & 0x3f;
      switch (op & 0xc0) {
        case kCfaAdvanceLoc:
          advance(mul_sat(low, code_align));
          continue;
        case kCfaOffset:
          set_rule(low, RegRule::kOffset, factored(c.uleb(), data_align));
          continue;
        case kCfaRestore:
          restore(low);
          continue;
        default:
          break;
      }
      switch (op) {
        case kCfaNop:
          break;
        case kCfaSetLoc: {
          const uint64_t to = read_address(c, fde_encoding, base, base_vaddr);
          if (to < loc_) {
            stop(kStopLocBack);
          } else {
            advance(to - loc_);
          }
          break;
        }
        case kCfaAdvanceLoc1:
          advance(mul_sat(c.le(1), code_align));
          break;
        case kCfaAdvanceLoc2:
          advance(mul_sat(c.le(2), code_align));
          break;
        case kCfaAdvanceLoc4:
          advance(mul_sat(c.le(4), code_align));
          break;
        case kCfaOffsetExtended: {
          const uint64_t reg = c.uleb();
          set_rule(reg, RegRule::kOffset, factored(c.uleb(), data_align));
          break;
        }
        case kCfaRestoreExtended:
          restore(c.uleb());
          break;
        case kCfaUndefined:
          set_rule(c.uleb(), RegRule::kUndefined, 0);
          break;
        case kCfaSameValue:
          set_rule(c.uleb(), RegRule::kSameValue, 0);
          break;
        case kCfaRegister: {
          const uint64_t reg = c.uleb();
          const uint64_t reg2 = c.uleb();
          set_rule(reg, RegRule::kRegister,
                   reg2 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                       ? -1
                       : static_cast<int64_t>(reg2));
          break;
        }
        case kCfaRememberState:
          if (stack_.size() >= kMaxRememberDepth) {
            stop(kStopRememberDepth);
          } else {
            stack_.push_back(state_);
          }
          break;
        case kCfaRestoreState:
          if (stack_.empty()) {
            stop(kStopRestoreState);
          } else {
            state_ = stack_.back();
            stack_.pop_back();
          }
          break;
        case kCfaDefCfa: {
          const uint64_t reg = c.uleb();
          def_cfa(reg, offset_of(c.uleb()));
          break;
        }
        case kCfaDefCfaSf: {
          const uint64_t reg = c.uleb();
          def_cfa(reg, factored(c.sleb(), data_align));
          break;
        }
        case kCfaDefCfaRegister: {
          const uint64_t reg = c.uleb();
          if (state_.cfa.kind != CfaRule::kRegOffset) {
            stop(kStopCfaNotOffset);
          } else {
            state_.cfa.reg = reg;
          }
          break;
        }
        case kCfaDefCfaOffset:
          def_cfa_offset(offset_of(c.uleb()));
          break;
        case kCfaDefCfaOffsetSf:
          def_cfa_offset(factored(c.sleb(), data_align));
          break;
        case kCfaDefCfaExpression: {
          const CfiExpr e = block(c);
          state_.cfa = CfaRule{CfaRule::kExpression, 0, 0, e};
          break;
        }
        case kCfaExpression:
        case kCfaValExpression: {
          const uint64_t reg = c.uleb();
          const CfiExpr e = block(c);
          if (RegRule* r = rule_of(reg)) {
            *r = RegRule{op == kCfaExpression ? RegRule::kExpression : RegRule::kValExpression, 0,
                         e};
          } else if (reg == tracked_reg_) {
            state_.tracked = TrackedRule{TrackedRule::kOther, 0};
          }
          break;
        }
        case kCfaOffsetExtendedSf: {
          const uint64_t reg = c.uleb();
          set_rule(reg, RegRule::kOffset, factored(c.sleb(), data_align));
          break;
        }
        case kCfaValOffset: {
          const uint64_t reg = c.uleb();
          set_rule(reg, RegRule::kValOffset, factored(c.uleb(), data_align));
          break;
        }
        case kCfaValOffsetSf: {
          const uint64_t reg = c.uleb();
          set_rule(reg, RegRule::kValOffset, factored(c.sleb(), data_align));
          break;
        }
        case kCfaGnuArgsSize:
          c.uleb();
          break;
        case kCfaGnuNegativeOffsetExtended: {
          const uint64_t reg = c.uleb();
          const int64_t v = factored(c.uleb(), data_align);
          if (v == std::numeric_limits<int64_t>::min())
            throw Malformed{"factored offset overflows"};
          set_rule(reg, RegRule::kOffset, -v);
          break;
        }
        default:
          // Vendor opcodes of other architectures (DW_CFA_GNU_window_save)
          // and unknown ones: their operands cannot be skipped.
          stop(kStopUnknownOp);
          break;
      }
    }
    return !stopped_ && loc_ < end_;
  }

  // The CIE's initial instructions have run: what DW_CFA_restore restores.
  void snapshot_initial() { initial_ = state_; }

  // Ends the FDE: the last state holds to its end.
  void finish() {
    if (!stopped_) emit(end_);
  }

 private:
  static uint64_t mul_sat(uint64_t a, uint64_t b) {
    uint64_t out;
    return __builtin_mul_overflow(a, b, &out) ? std::numeric_limits<uint64_t>::max() : out;
  }

  static int64_t offset_of(uint64_t v) {
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw Malformed{"CFA offset over 63 bits"};
    }
    return static_cast<int64_t>(v);
  }

  static CfiExpr block(Cursor& c) {
    const uint64_t len = c.uleb();
    if (len > std::numeric_limits<uint32_t>::max()) throw Malformed{"DWARF expression too long"};
    return CfiExpr{c.skip(len), static_cast<uint32_t>(len)};
  }

  RegRule* rule_of(uint64_t reg) {
    if (reg == ra_column_) return &state_.ra;
    if (reg == kDwarfRbp) return &state_.rbp;
    if (reg == kDwarfRsp) return &state_.rsp;
    return nullptr;
  }

  void set_rule(uint64_t reg, RegRule::Kind kind, int64_t value) {
    if (RegRule* r = rule_of(reg)) {
      *r = RegRule{kind, value, {}};
    } else if (reg == tracked_reg_) {
      TrackedRule& t = state_.tracked;
      if (kind == RegRule::kSameValue ||
          (kind == RegRule::kRegister && static_cast<uint64_t>(value) == reg)) {
        t = TrackedRule{};
      } else if (kind == RegRule::kOffset && value >= std::numeric_limits<int32_t>::min() &&
                 value <= std::numeric_limits<int32_t>::max()) {
        t = TrackedRule{TrackedRule::kAtCfa, static_cast<int32_t>(value)};
      } else {
        t = TrackedRule{TrackedRule::kOther, 0};
      }
    }
  }

  void restore(uint64_t reg) {
    if (reg == tracked_reg_) {
      state_.tracked = initial_.tracked;
    } else if (reg == ra_column_) {
      state_.ra = initial_.ra;
    } else if (reg == kDwarfRbp) {
      state_.rbp = initial_.rbp;
    } else if (reg == kDwarfRsp) {
      state_.rsp = initial_.rsp;
    }
  }

  void def_cfa(uint64_t reg, int64_t offset) {
    state_.cfa = CfaRule{CfaRule::kRegOffset, reg, offset, {}};
  }

  void def_cfa_offset(int64_t offset) {
    if (state_.cfa.kind != CfaRule::kRegOffset) {
      stop(kStopCfaNotOffset);
    } else {
      state_.cfa.offset = offset;
    }
  }

  void advance(uint64_t delta) {
    uint64_t to;
    if (__builtin_add_overflow(loc_, delta, &to)) to = std::numeric_limits<uint64_t>::max();
    emit(to);
    loc_ = to;
  }

  // The current state holds over [loc_, to) (clipped to the FDE).
  void emit(uint64_t to) {
    if (to > end_) to = end_;
    if (loc_ >= to) return;
    if (rows_.size() > first_row_) {
      CfiRow& last = rows_.back();
      if (last.stop == nullptr && last.end == loc_ && last.state == state_) {
        last.end = to;
        return;
      }
    }
    rows_.push_back(CfiRow{loc_, to, state_, nullptr});
  }

  // Nothing is known from loc_ on.
  void stop(const char* why) {
    if (loc_ < end_) rows_.push_back(CfiRow{loc_, end_, CfiState{}, why});
    stopped_ = true;
  }

  uint64_t loc_;
  uint64_t end_;
  uint64_t ra_column_;
  uint64_t tracked_reg_;
  std::vector<CfiRow>& rows_;
  std::vector<CfiState>& stack_;
  uint64_t& budget_;
  uint64_t instructions_ = 0;  // of this FDE (its CIE's included)
  size_t first_row_ = 0;
  CfiState state_;
  CfiState initial_;
  bool stopped_ = false;
};

}  // namespace

EhFrameReader::EhFrameReader(const uint8_t* data, size_t size, uint64_t vaddr, std::string object)
    : data_(data), size_(size), vaddr_(vaddr), object_(std::move(object)) {}

void EhFrameReader::malformed(uint64_t offset, const std::string& what) const {
  char at[64];
  std::snprintf(at, sizeof(at), " (.eh_frame entry at offset 0x%" PRIx64 ")", offset);
  throw Error(EBADMSG, op::kGenerate, object_, "malformed .eh_frame: " + what + at);
}

void EhFrameReader::unsupported(uint64_t offset, const std::string& what) const {
  char at[64];
  std::snprintf(at, sizeof(at), " (.eh_frame entry at offset 0x%" PRIx64 ")", offset);
  throw Error(EOPNOTSUPP, op::kGenerate, object_, "unsupported .eh_frame: " + what + at);
}

namespace {

// One entry's frame: [start, end) of the section, the id field.
struct Entry {
  uint64_t start = 0;      // offset of the length field
  uint64_t id_offset = 0;  // offset of the CIE id / CIE pointer field
  uint64_t id = 0;
  uint64_t end = 0;               // offset past the entry
  const uint8_t* body = nullptr;  // after the id field
  bool terminator = false;
};

Entry read_entry(const uint8_t* data, size_t size, uint64_t off) {
  Entry e;
  e.start = off;
  Cursor c(data + off, data + size);
  uint64_t len = c.le(4);
  if (len == 0) {
    e.terminator = true;
    return e;
  }
  unsigned id_size = 4;
  if (len == 0xffffffff) {
    len = c.le(8);
    id_size = 8;
  }
  if (len > c.left()) throw Malformed{"entry runs past the end of the section"};
  if (len < id_size) throw Malformed{"entry too short for its CIE id"};
  e.end = static_cast<uint64_t>(c.pos() - data) + len;
  e.id_offset = static_cast<uint64_t>(c.pos() - data);
  e.id = c.le(id_size);
  e.body = c.pos();
  return e;
}

}  // namespace

const EhFrameReader::Cie& EhFrameReader::cie_at(uint64_t offset) {
  auto it = cies_.find(offset);
  if (it != cies_.end()) return it->second;
  Cie cie;
  try {
    if (offset >= size_) throw Malformed{"CIE pointer outside the section"};
    const Entry e = read_entry(data_, size_, offset);
    if (e.terminator || e.id != 0) throw Malformed{"CIE pointer to an entry that is no CIE"};
    Cursor c(e.body, data_ + e.end);
    const uint8_t version = c.u8();
    if (version != 1 && version != 3 && version != 4) throw Unsupported{"CIE version"};
    const uint8_t* aug = c.pos();
    while (c.u8() != 0) {
    }
    const char* augs = reinterpret_cast<const char*>(aug);
    if (version == 4) {
      if (c.u8() != 8) throw Unsupported{"CIE address size other than 8"};
      if (c.u8() != 0) throw Unsupported{"CIE segment selector size"};
    }
    cie.code_align = c.uleb();
    cie.data_align = c.sleb();
    cie.ra_column = version == 1 ? c.u8() : c.uleb();
    if (augs[0] == 'z') {
      cie.has_z = true;
      const uint64_t aug_len = c.uleb();
      const uint8_t* aug_data = c.skip(aug_len);
      Cursor a(aug_data, aug_data + aug_len);
      // Letters after an unknown one cannot be found in the data; like
      // libgcc, keep what was read and skip the rest ('z' gives its size).
      bool known = true;
      for (const char* l = augs + 1; *l != '\0' && known; l++) {
        switch (*l) {
          case 'L':
            a.u8();
            break;
          case 'P': {
            const uint8_t enc = a.u8();
            skip_pointer(a, enc, data_, vaddr_);
            break;
          }
          case 'R':
            cie.fde_encoding = a.u8();
            break;
          case 'S':
            cie.signal_frame = true;
            break;
          case 'B':  // AArch64 BTI, MTE: no data
          case 'G':
            break;
          default:
            known = false;
            break;
        }
      }
    } else if (augs[0] != '\0') {
      throw Unsupported{"CIE augmentation without 'z'"};
    }
    cie.insns = c.pos();
    cie.insns_end = data_ + e.end;
  } catch (const Malformed& m) {
    malformed(offset, m.what);
  } catch (const Unsupported& u) {
    unsupported(offset, u.what);
  }
  return cies_.emplace(offset, cie).first->second;
}

void EhFrameReader::read_all(std::vector<CfiFde>& fdes, std::vector<CfiRow>& rows) {
  std::vector<CfiState> stack;
  stack.reserve(kMaxRememberDepth);
  uint64_t budget = kMaxFdeInstructions + kObjectInstructionsPerByte * uint64_t{size_};
  uint64_t off = 0;
  while (off < size_) {
    Entry e;
    try {
      e = read_entry(data_, size_, off);
    } catch (const Malformed& m) {
      malformed(off, m.what);
    }
    if (e.terminator) break;
    if (e.id == 0) {
      cie_at(off);
    } else {
      fdes.push_back(interpret(off, kNoTrackedReg, rows, stack, budget));
    }
    off = e.end;
  }
}

void EhFrameReader::read_fde(const CfiFde& fde, uint64_t reg, std::vector<CfiRow>& rows) {
  std::vector<CfiState> stack;
  stack.reserve(kMaxRememberDepth);
  // One FDE's own bound (read_all() has run this program within it once),
  // so that its rows stop for the same reason as there.
  uint64_t budget = kMaxFdeInstructions + 1;
  interpret(fde.offset, reg, rows, stack, budget);
}

CfiFde EhFrameReader::interpret(uint64_t off, uint64_t tracked_reg, std::vector<CfiRow>& rows,
                                std::vector<CfiState>& stack, uint64_t& budget) {
  Entry e;
  try {
    e = read_entry(data_, size_, off);
  } catch (const Malformed& m) {
    malformed(off, m.what);
  }
  if (e.terminator || e.id == 0) malformed(off, "no FDE at this offset");
  if (e.id > e.id_offset) malformed(off, "CIE pointer before the section");
  const Cie& cie = cie_at(e.id_offset - e.id);
  CfiFde fde;
  try {
    Cursor c(e.body, data_ + e.end);
    fde.offset = off;
    fde.signal_frame = cie.signal_frame;
    fde.ra_column = cie.ra_column;
    fde.pc_begin = read_address(c, cie.fde_encoding, data_, vaddr_);
    const uint64_t range = read_format(c, cie.fde_encoding);
    if (__builtin_add_overflow(fde.pc_begin, range, &fde.pc_end)) {
      throw Malformed{"FDE address range wraps"};
    }
    if (cie.has_z) c.skip(c.uleb());
    fde.first_row = rows.size();
    Interpreter in(fde.pc_begin, fde.pc_end, cie.ra_column, tracked_reg, rows, stack, budget);
    bool more = in.run(cie.insns, cie.insns_end, cie.code_align, cie.data_align, cie.fde_encoding,
                       data_, vaddr_);
    in.snapshot_initial();
    if (more) {
      in.run(c.pos(), data_ + e.end, cie.code_align, cie.data_align, cie.fde_encoding, data_,
             vaddr_);
    }
    in.finish();
    fde.num_rows = rows.size() - fde.first_row;
  } catch (const Malformed& m) {
    malformed(off, m.what);
  } catch (const Unsupported& u) {
    unsupported(off, u.what);
  } catch (const ObjectBudget&) {
    char what[160];
    std::snprintf(what, sizeof(what),
                  "its CFA programs run more than %" PRIu64
                  " instructions (%" PRIu64 " per byte of .eh_frame + %" PRIu64
                  ", this generator's bound), at the FDE at offset 0x%" PRIx64,
                  kMaxFdeInstructions + kObjectInstructionsPerByte * uint64_t{size_},
                  kObjectInstructionsPerByte, kMaxFdeInstructions, off);
    throw Error(E2BIG, op::kGenerate, object_, what);
  }
  return fde;
}

}  // namespace sframe::internal
