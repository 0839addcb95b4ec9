#include "eh_frame_check.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>

#include "sframe_source_mem.h"
#include "sframe_gen/eh_frame.h"

namespace sftest {
namespace {

// An ELF file open with libelf for libdw; closes both.
class Elf64File {
 public:
  explicit Elf64File(const std::string& path) {
    elf_version(EV_CURRENT);
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ >= 0) elf_ = elf_begin(fd_, ELF_C_READ_MMAP, nullptr);
  }
  ~Elf64File() {
    if (elf_ != nullptr) elf_end(elf_);
    if (fd_ >= 0) ::close(fd_);
  }
  Elf64File(const Elf64File&) = delete;
  Elf64File& operator=(const Elf64File&) = delete;
  Elf* get() const { return elf_; }

 private:
  int fd_ = -1;
  Elf* elf_ = nullptr;
};

// A register location as libdw gives it (dwarf_frame_register), reduced to
// what SFrame can say.
struct Loc {
  enum Kind { kSame, kUndefined, kAtCfa, kValCfa, kAtReg, kInReg, kOther } kind = kOther;
  uint64_t reg = 0;
  int64_t off = 0;
  bool operator==(const Loc& o) const { return kind == o.kind && reg == o.reg && off == o.off; }
};

bool breg_of(const Dwarf_Op& op, uint64_t& reg, int64_t& off) {
  if (op.atom >= DW_OP_breg0 && op.atom <= DW_OP_breg31) {
    reg = op.atom - DW_OP_breg0;
    off = static_cast<int64_t>(op.number);
    return true;
  }
  if (op.atom == DW_OP_bregx) {
    reg = op.number;
    off = static_cast<int64_t>(op.number2);
    return true;
  }
  return false;
}

Loc dwarf_loc(Dwarf_Frame* f, int regno) {
  Dwarf_Op mem[3];
  Dwarf_Op* ops = nullptr;
  size_t n = 0;
  Loc l;
  if (dwarf_frame_register(f, regno, mem, &ops, &n) != 0) return l;
  if (n == 0) {
    l.kind = ops == nullptr ? Loc::kSame : Loc::kUndefined;
    return l;
  }
  if (ops[0].atom == DW_OP_call_frame_cfa) {
    size_t i = 1;
    if (i < n && ops[i].atom == DW_OP_plus_uconst) l.off = static_cast<int64_t>(ops[i++].number);
    const bool value = i < n && ops[i].atom == DW_OP_stack_value;
    if (value) i++;
    if (i == n) {
      l.kind = value ? Loc::kValCfa : Loc::kAtCfa;
      return l;
    }
    // DW_CFA_expression: the CFA is pushed, then [DW_OP_bregN off].
    if (n == 2 && l.off == 0 && breg_of(ops[1], l.reg, l.off)) {
      l.kind = Loc::kAtReg;
      return l;
    }
    l = Loc{};
    return l;
  }
  if (n == 1 && ops[0].atom == DW_OP_regx) {
    l.kind = Loc::kInReg;
    l.reg = ops[0].number;
  }
  return l;
}

std::string loc_str(const Loc& l) {
  char b[64];
  switch (l.kind) {
    case Loc::kSame:
      return "same";
    case Loc::kUndefined:
      return "undefined";
    case Loc::kAtCfa:
      std::snprintf(b, sizeof(b), "*(CFA%+" PRId64 ")", l.off);
      return b;
    case Loc::kValCfa:
      std::snprintf(b, sizeof(b), "CFA%+" PRId64, l.off);
      return b;
    case Loc::kAtReg:
      std::snprintf(b, sizeof(b), "*(r%" PRIu64 "%+" PRId64 ")", l.reg, l.off);
      return b;
    case Loc::kInReg:
      std::snprintf(b, sizeof(b), "r%" PRIu64, l.reg);
      return b;
    default:
      return "other";
  }
}

// The CFA as libdw gives it, evaluated for pc: register + offset, loaded
// from if deref, plus addend after the load.  RIP stands for pc; other
// registers stay symbolic.
struct Cfa {
  bool ok = false;
  uint64_t reg = 0;
  int64_t off = 0;
  bool deref = false;
  int64_t addend = 0;
};

Cfa dwarf_cfa(Dwarf_Frame* f, uint64_t pc) {
  Dwarf_Op* ops = nullptr;
  size_t n = 0;
  Cfa out;
  if (dwarf_frame_cfa(f, &ops, &n) != 0 || n == 0) return out;
  struct Val {
    bool has_reg = false;
    bool deref = false;
    uint64_t reg = 0;
    int64_t c = 0;
    int64_t addend = 0;  // after the load
  };
  std::vector<Val> st;
  for (size_t i = 0; i < n; i++) {
    const Dwarf_Op& op = ops[i];
    uint64_t reg;
    int64_t off;
    if (breg_of(op, reg, off)) {
      if (reg == 16) {
        st.push_back(Val{false, false, 0, static_cast<int64_t>(pc) + off});
      } else {
        st.push_back(Val{true, false, reg, off});
      }
      continue;
    }
    if (op.atom >= DW_OP_lit0 && op.atom <= DW_OP_lit31) {
      st.push_back(Val{false, false, 0, op.atom - DW_OP_lit0});
      continue;
    }
    if (st.empty()) return out;
    Val top = st.back();
    if (op.atom == DW_OP_deref) {
      if (!top.has_reg || top.deref) return out;
      st.back().deref = true;
      continue;
    }
    if (op.atom == DW_OP_plus_uconst) {
      // After a load: this project's extension (kFlagXCfaAddend).
      if (top.deref) {
        st.back().addend += static_cast<int64_t>(op.number);
        continue;
      }
      st.back().c += static_cast<int64_t>(op.number);
      continue;
    }
    if (st.size() < 2) return out;
    st.pop_back();
    Val& a = st.back();
    const Val& b = top;
    if (a.deref || b.deref) return out;
    switch (op.atom) {
      case DW_OP_plus:
        if (a.has_reg && b.has_reg) return out;
        if (b.has_reg) {
          a.has_reg = true;
          a.reg = b.reg;
        }
        a.c += b.c;
        break;
      case DW_OP_and:
        if (a.has_reg || b.has_reg) return out;
        a.c &= b.c;
        break;
      case DW_OP_ge:
        if (a.has_reg || b.has_reg) return out;
        a.c = a.c >= b.c;
        break;
      case DW_OP_shl:
        if (a.has_reg || b.has_reg) return out;
        a.c = static_cast<int64_t>(static_cast<uint64_t>(a.c) << b.c);
        break;
      default:
        return out;
    }
  }
  if (st.size() != 1 || !st[0].has_reg) return out;
  out.ok = true;
  out.reg = st[0].reg;
  out.off = st[0].c;
  out.deref = st[0].deref;
  out.addend = st[0].addend;
  return out;
}

// An SFrame row's rule for the caller's RBP or for the return address, in
// the same terms.
Loc sframe_loc_of(const sframe_loc& loc) {
  Loc l;
  switch (loc.kind) {
    case SFRAME_LOC_SAME:
      l.kind = Loc::kSame;
      break;
    case SFRAME_LOC_CFA_OFFSET:
      l.kind = Loc::kAtCfa;
      l.off = loc.offset;
      break;
    case SFRAME_LOC_REG_OFFSET:
      if (loc.deref) {
        l.kind = Loc::kAtReg;
        l.reg = loc.reg;
        l.off = loc.offset;
      } else if (loc.offset == 0) {
        l.kind = Loc::kInReg;
        l.reg = loc.reg;
      }
      break;
    case SFRAME_LOC_UNDEFINED:
      l.kind = Loc::kUndefined;
      break;
  }
  return l;
}

std::string row_str(const sframe_row& r) {
  if (r.outermost) return "outermost";
  char b[160];
  std::snprintf(b, sizeof(b), "CFA=%s(r%u%+d)%+d RA=%s FP=%s%s", r.cfa_deref ? "*" : "",
                r.cfa_reg, r.cfa_offset, r.cfa_addend, loc_str(sframe_loc_of(r.ra)).c_str(),
                loc_str(sframe_loc_of(r.fp)).c_str(), r.signal_frame ? " signal" : "");
  return b;
}

}  // namespace

DwarfCheck check_against_dwarf(const std::string& path, const sframe::GeneratedSframe& g,
                               uint64_t stride) {
  DwarfCheck out;
  sframe_source src;
  sframe_source_mem_init(&src, g.bytes.data(), g.bytes.size());
  sframe_section sec;
  out.init = sframe_section_init(&sec, &src, g.section_vaddr, g.bytes.size());
  if (out.init != 0) return out;
  out.validate = sframe_validate(&sec, g.text_vaddr, g.text_len);
  if (out.validate != 0) return out;

  Elf64File file(path);
  if (file.get() == nullptr) {
    out.examples.push_back("libelf cannot open " + path);
    out.disagreements++;
    return out;
  }
  std::unique_ptr<Dwarf_CFI, decltype(&dwarf_cfi_end)> cfi_owner(dwarf_getcfi_elf(file.get()),
                                                                 &dwarf_cfi_end);
  Dwarf_CFI* cfi = cfi_owner.get();
  if (cfi == nullptr) {
    out.examples.push_back("libdw has no CFI for " + path);
    out.disagreements++;
    return out;
  }

  // The PCs: all, or a stride through the text plus the first and last
  // byte of every FRE's range (PC-mask FDEs: of every block's rows).
  std::vector<uint64_t> pcs;
  const uint64_t text_end = g.text_vaddr + g.text_len;
  if (stride > 1) {
    std::set<uint64_t> set;
    for (uint64_t pc = g.text_vaddr; pc < text_end; pc += stride) set.insert(pc);
    for (uint32_t i = 0; i < sec.num_fdes; i++) {
      sframe_fde fde;
      if (sframe_get_fde(&sec, i, &fde) != 0) continue;
      const uint64_t end = fde.func_start + fde.func_size;
      std::vector<uint64_t> starts;
      for (uint32_t j = 0; j < fde.num_fres; j++) {
        sframe_row row;
        if (sframe_get_fre(&sec, &fde, j, &row) == 0) starts.push_back(row.start_off);
      }
      const uint64_t block = fde.pc_type == SFRAME_PC_MASK ? fde.rep_size : fde.func_size;
      for (uint64_t base = fde.func_start; base < end; base += block ? block : 1) {
        for (size_t j = 0; j < starts.size(); j++) {
          const uint64_t s = base + starts[j];
          const uint64_t e = j + 1 < starts.size() ? base + starts[j + 1] : base + block;
          if (s < end) set.insert(s);
          if (e - 1 < end) set.insert(e - 1);
        }
        if (fde.pc_type != SFRAME_PC_MASK) break;
      }
      if (fde.func_start > 0) set.insert(fde.func_start - 1);
      set.insert(end);
    }
    for (uint64_t pc : set) {
      if (pc >= g.text_vaddr && pc < text_end) pcs.push_back(pc);
    }
  }

  // A call bridge's PCs (eh_frame.h): DWARF says CFA = R + cfa_offset
  // there, and the section *(RSP + save_offset) + cfa_offset, where
  // save_offset is where DWARF says the callee saves R from its first
  // covered PC on; before that PC the callee has no row.
  auto bridge_at = [&](uint64_t pc) -> const sframe::GenerateStats::CallBridge* {
    for (const auto& b : g.stats.call_bridges) {
      if (pc >= b.start && pc < b.end) return &b;
    }
    return nullptr;
  };
  auto check_bridge = [&](uint64_t pc, const sframe::GenerateStats::CallBridge& b) {
    out.pcs++;
    out.bridge_pcs++;
    std::string why;
    Dwarf_Frame* frame = nullptr;
    sframe_row row;
    if (sframe_find_row(&sec, pc, &row) == 0) out.covered_pcs++;
    if (dwarf_cfi_addrframe(cfi, pc, &frame) != 0) {
      why += " no DWARF frame";
    } else {
      out.dwarf_pcs++;
      std::unique_ptr<Dwarf_Frame, decltype(&std::free)> owner(frame, &std::free);
      const Cfa cfa = dwarf_cfa(frame, pc);
      if (!cfa.ok || cfa.deref || cfa.reg != b.reg || cfa.off != b.cfa_offset) why += " DWARF CFA";
    }
    if (sframe_find_row(&sec, pc, &row) != 0 || row.outermost || row.cfa_reg != SFRAME_REG_RSP ||
        !row.cfa_deref || row.cfa_offset != b.save_offset || row.cfa_addend != b.cfa_offset) {
      why += " SFrame row";
    }
    uint64_t saved_at = b.callee;
    while (saved_at < text_end && sframe_find_row(&sec, saved_at, &row) != 0) saved_at++;
    Dwarf_Frame* cf = nullptr;
    if (saved_at == text_end || dwarf_cfi_addrframe(cfi, saved_at, &cf) != 0) {
      why += " callee";
    } else {
      std::unique_ptr<Dwarf_Frame, decltype(&std::free)> owner(cf, &std::free);
      const Loc saved = dwarf_loc(cf, b.reg);
      if (saved.kind != Loc::kAtCfa || saved.off != b.save_offset) why += " callee's save";
    }
    if (!why.empty()) {
      out.disagreements++;
      if (out.examples.size() < 20) {
        char buf[96];
        std::snprintf(buf, sizeof(buf), "0x%" PRIx64 " (call bridge to 0x%" PRIx64 "):", pc,
                      b.callee);
        out.examples.push_back(buf + why);
      }
    }
  };

  auto check = [&](uint64_t pc) {
    if (const auto* b = bridge_at(pc)) {
      check_bridge(pc, *b);
      return;
    }
    out.pcs++;
    Dwarf_Frame* frame = nullptr;
    const bool have_dwarf = dwarf_cfi_addrframe(cfi, pc, &frame) == 0;
    std::unique_ptr<Dwarf_Frame, decltype(&std::free)> owner(frame, &std::free);
    sframe_row row;
    const int ret = sframe_find_row(&sec, pc, &row);
    if (ret != 0 && ret != -ENOENT) out.lookup_errors++;
    if (!have_dwarf) {
      if (ret == 0) {
        out.sframe_only++;
        if (out.examples.size() < 20) {
          char b[96];
          std::snprintf(b, sizeof(b), "0x%" PRIx64 ": SFrame row, no DWARF frame", pc);
          out.examples.push_back(b);
        }
      }
      return;
    }
    out.dwarf_pcs++;
    if (ret != 0) return;
    out.covered_pcs++;

    sframe_fde fde;
    if (sframe_find_fde(&sec, pc, &fde) == 0) {
      if (fde.flex) out.flex_pcs++;
      if (fde.pc_type == SFRAME_PC_MASK) out.pcmask_pcs++;
    }
    std::string why;
    const Loc ra = dwarf_loc(frame, 16);
    bool signal = false;
    dwarf_frame_info(frame, nullptr, nullptr, &signal);
    if (signal != row.signal_frame) why += " signal-frame bit";
    if (row.outermost) {
      out.outermost_pcs++;
      if (ra.kind != Loc::kUndefined) why += " RA " + loc_str(ra) + " (SFrame: undefined)";
    } else {
      const Cfa cfa = dwarf_cfa(frame, pc);
      if (!cfa.ok || cfa.reg != row.cfa_reg || cfa.off != row.cfa_offset ||
          cfa.deref != row.cfa_deref || cfa.addend != row.cfa_addend) {
        char b[96];
        std::snprintf(b, sizeof(b), " CFA %s%s(r%" PRIu64 "%+" PRId64 ")%+" PRId64,
                      cfa.ok ? "" : "?", cfa.deref ? "*" : "", cfa.reg, cfa.off, cfa.addend);
        why += b;
      }
      // At CFA-8 (SFrame's fixed rule), or in v3 elsewhere or in a register.
      if (!(ra == sframe_loc_of(row.ra))) why += " RA " + loc_str(ra);
      Loc fp = dwarf_loc(frame, 6);
      if (fp.kind == Loc::kInReg && fp.reg == 6) fp = Loc{Loc::kSame, 0, 0};
      if (!(fp == sframe_loc_of(row.fp))) why += " FP " + loc_str(fp);
      const Loc sp = dwarf_loc(frame, 7);
      if (sp.kind != Loc::kValCfa || sp.off != 0) why += " SP " + loc_str(sp);
    }
    if (!why.empty()) {
      out.disagreements++;
      if (out.examples.size() < 20) {
        char b[64];
        std::snprintf(b, sizeof(b), "0x%" PRIx64 ": ", pc);
        out.examples.push_back(b + row_str(row) + " vs DWARF:" + why);
      }
    }
  };
  if (stride > 1) {
    for (uint64_t pc : pcs) check(pc);
  } else {
    for (uint64_t pc = g.text_vaddr; pc < text_end; pc++) check(pc);
  }
  return out;
}

namespace {

// The function symbols of a file (.symtab, else .dynsym), to name PCs.
class Functions {
 public:
  explicit Functions(const std::string& path) {
    Elf64File file(path);
    if (file.get() == nullptr) return;
    for (Elf64_Word want : {SHT_SYMTAB, SHT_DYNSYM}) {
      for (Elf_Scn* scn = elf_nextscn(file.get(), nullptr); scn != nullptr;
           scn = elf_nextscn(file.get(), scn)) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type != want) continue;
        Elf_Data* d = elf_getdata(scn, nullptr);
        for (size_t i = 0; d != nullptr && sh.sh_entsize && i < sh.sh_size / sh.sh_entsize; i++) {
          GElf_Sym s;
          if (gelf_getsym(d, static_cast<int>(i), &s) == nullptr) continue;
          if (GELF_ST_TYPE(s.st_info) != STT_FUNC || s.st_value == 0) continue;
          const char* name = elf_strptr(file.get(), sh.sh_link, s.st_name);
          syms_.push_back({s.st_value, s.st_size, name ? name : "?"});
        }
      }
      if (!syms_.empty()) break;
    }
    std::sort(syms_.begin(), syms_.end(),
              [](const Sym& a, const Sym& b) { return a.start < b.start; });
  }

  std::string name(uint64_t pc) const {
    auto it = std::upper_bound(syms_.begin(), syms_.end(), pc,
                               [](uint64_t v, const Sym& s) { return v < s.start; });
    if (it != syms_.begin()) {
      --it;
      if (pc < it->start + std::max<uint64_t>(it->size, 1)) return it->name;
    }
    return "(no symbol)";
  }

 private:
  struct Sym {
    uint64_t start, size;
    std::string name;
  };
  std::vector<Sym> syms_;
};

// A section's bytes and address, from libelf.
bool read_section(const std::string& path, const char* want, std::vector<uint8_t>& bytes,
                  uint64_t& addr) {
  Elf64File file(path);
  size_t shstrndx = 0;
  if (file.get() == nullptr || elf_getshdrstrndx(file.get(), &shstrndx) != 0) return false;
  for (Elf_Scn* scn = elf_nextscn(file.get(), nullptr); scn != nullptr;
       scn = elf_nextscn(file.get(), scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr) continue;
    const char* name = elf_strptr(file.get(), shstrndx, sh.sh_name);
    if (name == nullptr || std::string(name) != want) continue;
    Elf_Data* d = elf_rawdata(scn, nullptr);
    if (d == nullptr || d->d_buf == nullptr) return false;
    const auto* p = static_cast<const uint8_t*>(d->d_buf);
    bytes.assign(p, p + d->d_size);
    addr = sh.sh_addr;
    return true;
  }
  return false;
}

bool same_row(const sframe_row& a, const sframe_row& b) {
  if (a.outermost || b.outermost) return a.outermost == b.outermost;
  const Loc fa = sframe_loc_of(a.fp), fb = sframe_loc_of(b.fp);
  const Loc ra = sframe_loc_of(a.ra), rb = sframe_loc_of(b.ra);
  return a.cfa_reg == b.cfa_reg && a.cfa_offset == b.cfa_offset && a.cfa_deref == b.cfa_deref &&
         a.cfa_addend == b.cfa_addend && fa == fb && ra == rb;
}

}  // namespace

AsCompare compare_with_assembler(const std::string& path, const sframe::GeneratedSframe& g) {
  AsCompare out;
  std::vector<uint8_t> as_bytes;
  uint64_t as_addr = 0;
  if (!read_section(path, ".sframe", as_bytes, as_addr)) {
    out.init = -ENODATA;
    return out;
  }
  sframe_source as_src, gen_src;
  sframe_source_mem_init(&as_src, as_bytes.data(), as_bytes.size());
  sframe_source_mem_init(&gen_src, g.bytes.data(), g.bytes.size());
  sframe_section as_sec, gen_sec;
  out.init = sframe_section_init(&as_sec, &as_src, as_addr, as_bytes.size());
  if (out.init != 0) return out;
  if (sframe_section_init(&gen_sec, &gen_src, g.section_vaddr, g.bytes.size()) != 0) {
    out.init = -EINVAL;
    return out;
  }
  const Functions fns(path);
  for (uint64_t pc = g.text_vaddr; pc < g.text_vaddr + g.text_len; pc++) {
    out.pcs++;
    sframe_row ra, rg;
    const bool a = sframe_find_row(&as_sec, pc, &ra) == 0;
    const bool b = sframe_find_row(&gen_sec, pc, &rg) == 0;
    if (a && b) {
      out.both++;
      if (!same_row(ra, rg)) {
        out.disagreements++;
        out.disagreement_functions[fns.name(pc)]++;
        if (out.examples.size() < 20) {
          char buf[64];
          std::snprintf(buf, sizeof(buf), "0x%" PRIx64 " ", pc);
          out.examples.push_back(buf + fns.name(pc) + ": gas " + row_str(ra) + ", generated " +
                                 row_str(rg));
        }
      }
    } else if (b) {
      out.generated_only++;
      out.generated_only_functions[fns.name(pc)]++;
    } else if (a) {
      out.as_only++;
      out.as_only_functions[fns.name(pc)]++;
    }
  }
  return out;
}

}  // namespace sftest
