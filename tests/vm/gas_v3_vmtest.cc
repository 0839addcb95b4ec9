// Issue 28, point 3: a program whose own .sframe was made by the guest's
// gas, profiled with nothing supplied, in the guest that has that gas
// (Debian sid: binutils 2.47, whose gas makes SFrame version 3 with
// SFRAME_F_FDE_FUNC_START_PCREL; gcc 16; a 7.x kernel).
//
// The workload (workloads/gas_v3_workload.c, copied next to this program
// by CMake) is compiled IN THE GUEST with the guest's gcc and gas:
//   gcc -O2 -fomit-frame-pointer -Wa,--gsframe gas_v3_workload.c
// into the test's working directory.  Its call chain main -> g3_round ->
// g3_big -> g3_vla -> g3_realign -> g3_saver -> g3_leaf has frames of
// every shape gcc makes (a 4 KiB frame, a frame pointer for a
// variable-length array, stack realignment through a DRAP register, which
// gas 2.47 describes with a v3 flexible FDE, pushes, a leaf); its hot loop
// stays in its own code (libc has no .sframe on sid, no frame pointers
// either: a sample in it cannot reach main).
//
// 1. Gas3Section: the binary's .sframe is version 3 with
//    SFRAME_F_FDE_FUNC_START_PCREL and a PT_GNU_SFRAME segment, decoded
//    and validated by this project's decoder (host build of
//    module/sframe_decode.c), every function of the chain has its FDE,
//    g3_realign's is flexible; the guest's own readelf says the same.
// 2. SessionWithNothingSupplied: a session through libsframe-client on a
//    perf event of the workload (as session_vmtest does), SFrame only
//    (no frame-pointer fallback), nothing registered nor supplied: the
//    module must find the section itself (discovery, PT_GNU_SFRAME).
//    Every sample whose leaf PC lies in the workload's own code must reach
//    main through exactly the expected frames; the module's list for the
//    process shows the workload's section as discovered, version 3.
// 3. SframeProfLeavesTheOwnSectionToDiscovery: the tree's sframe-prof,
//    which has no option to supply nothing: it makes SFrame from
//    .eh_frame for the objects WITHOUT .sframe (ld.so, libc), and leaves
//    an object with its own .sframe to the module's discovery (it would
//    supply that section from the file only where discovery is off, which
//    it is not here: checked, and every "supplied" line of -v must count
//    only objects made from .eh_frame).  The same 100 %.
// 4. EveryInstructionOfOneCallReachesMain: under TCG a timer sample lands
//    only where a translation block starts, so 2 and 3 see some two dozen
//    PCs; here the workload is single-stepped through one call of g3_big
//    and each step is a sample (a tracepoint event on the step's SIGTRAP),
//    so every row of every FDE on the path is a leaf's once.
//
// What is not counted against the module, each counted apart and printed:
// samples whose leaf is in another object (ld.so, libc, the vDSO), in the
// C runtime's code of the program (_start, _init, ...: before or after
// main), and in the two instructions of g3_realign's epilogue after
// `pop %rbp`, where gcc's CFI (so gas's SFrame) still says the caller's
// RBP is at *(RBP) although RBP was already restored (DrapWindow: a gcc
// bug, seen with gcc 12 and 16; test 4 steps on them and shows the walk
// faulting one frame up, in g3_vla, whose CFA is RBP + 16).
//
// Skips: a guest whose gas is older than 2.47 (Debian 12's 2.40 makes
// version 1) skips all four, saying which gas it found; as uid 65534 with
// perf_event_paranoid 3 (Debian's kernels) 2 to 4 skip: perf is refused
// (1 runs: compiling needs no privilege).
#include <elf.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "prof_tool.h"
#include "sessions.h"
#include "sframe_decode.h"
#include "sframe_profile/profile.h"
#include "sframe_profile/symbolizer.h"
#include "sframe_source_mem.h"
#include "sframe_test/profile_contents.h"
#include "vmtest.h"

#ifndef PT_GNU_SFRAME
#define PT_GNU_SFRAME 0x6474e554
#endif

namespace {

using sframe::Sample;
using sframe::Symbol;
using vmtest::RunShell;
using vmtest::ShellResult;
using vmtest::TracepointId;

constexpr char kSource[] = "gas_v3_workload.c";
constexpr char kProgram[] = "gas_v3_workload";
// What gcc is given, besides -o and the source (issue 28, point 3).
constexpr char kFlags[] = "-O2 -fomit-frame-pointer -Wa,--gsframe";
// CPU seconds the workload spins.
constexpr int kSeconds = 3;
// Samples per second of its CPU time.
constexpr int kHz = 2000;
// Fewest samples in the workload's own code for a verdict.
constexpr uint64_t kMinOwn = 300;

// The chain, leaf first, down to main.
const std::vector<std::string> kChain = {"g3_leaf", "g3_saver", "g3_realign", "g3_vla",
                                         "g3_big",  "g3_round", "main"};

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// ---- the guest's toolchain ------------------------------------------------------------

struct Toolchain {
  std::string as_line;   // first line of `as --version`
  std::string gcc_line;  // first line of `gcc --version`
  int major = 0, minor = 0;
  bool found = false;
};

// "GNU assembler (GNU Binutils for Debian) 2.47.50.20261021": the last
// word that starts with a digit.
bool ParseGasVersion(const std::string& line, int* major, int* minor) {
  std::istringstream words(line);
  std::string w, version;
  while (words >> w) {
    if (!w.empty() && w[0] >= '0' && w[0] <= '9') version = w;
  }
  return !version.empty() && std::sscanf(version.c_str(), "%d.%d", major, minor) == 2;
}

const Toolchain& GuestToolchain() {
  static const Toolchain t = [] {
    Toolchain r;
    const ShellResult as = RunShell("as --version");
    const ShellResult gcc = RunShell("gcc --version");
    r.as_line = as.status == 0 ? FirstLine(as.output) : "(as: " + Trim(as.output) + ")";
    r.gcc_line = gcc.status == 0 ? FirstLine(gcc.output) : "(gcc: " + Trim(gcc.output) + ")";
    r.found = as.status == 0 && ParseGasVersion(r.as_line, &r.major, &r.minor);
    return r;
  }();
  return t;
}

// Empty if the guest's gas makes SFrame v3 (2.47 or later), else why not.
std::string WhyNotV3() {
  const Toolchain& t = GuestToolchain();
  if (!t.found) return "no usable gas in this guest: " + t.as_line;
  if (t.major > 2 || (t.major == 2 && t.minor >= 47)) return "";
  return "the guest's gas is " + std::to_string(t.major) + "." + std::to_string(t.minor) + " (" +
         t.as_line +
         "): this test needs a system whose gas makes SFrame version 3 with "
         "SFRAME_F_FDE_FUNC_START_PCREL (binutils 2.47 or later, e.g. the Debian sid image, "
         "SFRAME_KVER=7.2.13+deb14-amd64)";
}

// ---- the workload, compiled here ------------------------------------------------------

struct Built {
  bool ok = false;
  std::string path;  // absolute
  std::string command, log;
};

// Compiled once per run of this program, into its working directory.
const Built& Build() {
  static const Built b = [] {
    Built r;
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof(cwd))) {
      r.log = "getcwd failed";
      return r;
    }
    r.path = std::string(cwd) + "/" + kProgram;
    r.command = std::string("gcc ") + kFlags + " -o " + r.path + " " + vmtest::NextToSelf(kSource);
    const ShellResult c = RunShell(r.command);
    r.log = c.output;
    r.ok = c.status == 0 && access(r.path.c_str(), X_OK) == 0;
    std::printf("compiled in the guest: %s\n  %s\n  %s\n%s", r.command.c_str(),
                GuestToolchain().gcc_line.c_str(), GuestToolchain().as_line.c_str(),
                r.log.c_str());
    return r;
  }();
  return b;
}

// ---- the ELF file and its .sframe -----------------------------------------------------

struct ElfSframe {
  std::string error;  // empty: parsed
  std::vector<uint8_t> file;
  uint64_t sframe_addr = 0, sframe_off = 0, sframe_size = 0;
  bool pt_gnu_sframe = false;
  uint64_t pt_vaddr = 0, pt_memsz = 0;
  uint64_t text_lo = UINT64_MAX, text_hi = 0;  // executable PT_LOADs
  struct Function {
    std::string name;
    uint64_t size = 0;
  };
  std::map<uint64_t, Function> functions;  // STT_FUNC of .symtab by address
  struct Range {
    uint64_t addr = 0, size = 0, offset = 0;  // file offset of addr
    std::string name;
  };
  std::vector<Range> exec_sections;  // SHF_EXECINSTR sections
  std::vector<Range> exec_loads;     // executable PT_LOADs (file bytes)

  // The byte at file address va, or -1.
  int Byte(uint64_t va) const {
    for (const Range& l : exec_loads) {
      if (va >= l.addr && va < l.addr + l.size && l.offset + (va - l.addr) < file.size())
        return file[l.offset + (va - l.addr)];
    }
    return -1;
  }
};

template <typename T>
bool ReadAt(const std::vector<uint8_t>& f, uint64_t off, T* out) {
  if (off > f.size() || f.size() - off < sizeof(T)) return false;
  std::memcpy(out, f.data() + off, sizeof(T));
  return true;
}

ElfSframe ReadElf(const std::string& path) {
  ElfSframe e;
  std::ifstream in(path, std::ios::binary);
  e.file.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  Elf64_Ehdr eh;
  if (!ReadAt(e.file, 0, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64) {
    e.error = "not a 64-bit ELF file";
    return e;
  }
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    if (!ReadAt(e.file, eh.e_phoff + uint64_t(i) * eh.e_phentsize, &ph)) break;
    if (ph.p_type == PT_GNU_SFRAME) {
      e.pt_gnu_sframe = true;
      e.pt_vaddr = ph.p_vaddr;
      e.pt_memsz = ph.p_memsz;
    }
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
      e.text_lo = std::min<uint64_t>(e.text_lo, ph.p_vaddr);
      e.text_hi = std::max<uint64_t>(e.text_hi, ph.p_vaddr + ph.p_memsz);
      e.exec_loads.push_back({ph.p_vaddr, ph.p_filesz, ph.p_offset, ""});
    }
  }
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  for (unsigned i = 0; i < eh.e_shnum; i++) {
    if (!ReadAt(e.file, eh.e_shoff + uint64_t(i) * eh.e_shentsize, &sh[i])) {
      e.error = "truncated section headers";
      return e;
    }
  }
  if (eh.e_shstrndx >= sh.size()) {
    e.error = "no section name table";
    return e;
  }
  auto str = [&](const Elf64_Shdr& tab, uint32_t at) -> std::string {
    const uint64_t off = tab.sh_offset + at;
    if (off >= e.file.size()) return "";
    return std::string(reinterpret_cast<const char*>(e.file.data() + off),
                       strnlen(reinterpret_cast<const char*>(e.file.data() + off),
                               e.file.size() - off));
  };
  bool found = false;
  for (const Elf64_Shdr& s : sh) {
    const std::string name = str(sh[eh.e_shstrndx], s.sh_name);
    if (name == ".sframe") {
      found = true;
      e.sframe_addr = s.sh_addr;
      e.sframe_off = s.sh_offset;
      e.sframe_size = s.sh_size;
    }
    if (s.sh_flags & SHF_EXECINSTR) e.exec_sections.push_back({s.sh_addr, s.sh_size, 0, name});
    if (s.sh_type == SHT_SYMTAB && s.sh_link < sh.size() && s.sh_entsize == sizeof(Elf64_Sym)) {
      for (uint64_t k = 0; k < s.sh_size / sizeof(Elf64_Sym); k++) {
        Elf64_Sym sym;
        if (!ReadAt(e.file, s.sh_offset + k * sizeof(Elf64_Sym), &sym)) break;
        if (ELF64_ST_TYPE(sym.st_info) == STT_FUNC && sym.st_value)
          e.functions[sym.st_value] = {str(sh[s.sh_link], sym.st_name), sym.st_size};
      }
    }
  }
  if (!found) e.error = "no .sframe section";
  if (found && (e.sframe_off > e.file.size() || e.file.size() - e.sframe_off < e.sframe_size))
    e.error = ".sframe beyond the end of the file";
  return e;
}

std::string FlagNames(uint8_t flags) {
  std::string s;
  auto add = [&](uint8_t bit, const char* name) {
    if (!(flags & bit)) return;
    s += (s.empty() ? "" : "|") + std::string(name);
    flags &= uint8_t(~bit);
  };
  add(SFRAME_F_FDE_SORTED, "FDE_SORTED");
  add(SFRAME_F_FRAME_POINTER, "FRAME_POINTER");
  add(SFRAME_F_FDE_FUNC_START_PCREL, "FDE_FUNC_START_PCREL");
  if (flags) {
    char b[16];
    std::snprintf(b, sizeof(b), "0x%x", flags);
    s += (s.empty() ? "" : "|") + std::string(b);
  }
  return s.empty() ? "0" : s;
}

std::string RegName(uint8_t reg) {
  if (reg == SFRAME_REG_RSP) return "sp";
  if (reg == SFRAME_REG_RBP) return "fp";
  return "r" + std::to_string(reg);
}

std::string CfaRule(const sframe_row& row) {
  char off[16];
  std::snprintf(off, sizeof(off), "%+d", row.cfa_offset);
  std::string s = RegName(row.cfa_reg) + off;
  return row.cfa_deref ? "*(" + s + ")" : s;
}

// One FRE as the project's decoder reads it.
struct RowInfo {
  uint32_t start = 0;  // offset in the function
  std::string cfa;     // "sp+8", "fp+16", "r10+0", "*(fp-16)"
  bool fp_at_rbp = false;  // the caller's RBP is loaded from RBP + offset
};

// One FDE.
struct FdeInfo {
  std::string function;  // the symbol at func_start, "?" if none
  uint64_t start = 0;    // file address
  uint32_t size = 0;
  bool flex = false;
  std::vector<RowInfo> rows;

  bool Has(const std::function<bool(const RowInfo&)>& pred) const {
    return std::any_of(rows.begin(), rows.end(), pred);
  }
  // The row covering file address pc, or -1.
  int RowOf(uint64_t pc) const {
    if (pc < start || pc >= start + size) return -1;
    int r = -1;
    for (size_t j = 0; j < rows.size(); j++) {
      if (start + rows[j].start <= pc) r = int(j);
    }
    return r;
  }
};

struct Decoded {
  int init = 0, validate = 0;  // 0 or a negative errno
  uint8_t version = 0, flags = 0;
  uint32_t num_fdes = 0, num_fres = 0;
  std::vector<FdeInfo> fdes;
  std::string error;

  const FdeInfo* Find(const std::string& function) const {
    for (const FdeInfo& f : fdes) {
      if (f.function == function) return &f;
    }
    return nullptr;
  }
};

Decoded Decode(const ElfSframe& e) {
  Decoded d;
  sframe_source src;
  sframe_source_mem_init(&src, e.file.data() + e.sframe_off, e.sframe_size);
  sframe_section sec;
  d.init = sframe_section_init(&sec, &src, e.sframe_addr, e.sframe_size);
  if (d.init) return d;
  d.version = sec.version;
  d.flags = sec.flags;
  d.num_fdes = sec.num_fdes;
  d.num_fres = sec.num_fres;
  d.validate = sframe_validate(&sec, e.text_lo, e.text_hi - e.text_lo);
  for (uint32_t i = 0; i < sec.num_fdes && d.error.empty(); i++) {
    sframe_fde fde;
    if (int rc = sframe_get_fde(&sec, i, &fde)) {
      d.error = "FDE " + std::to_string(i) + ": error " + std::to_string(rc);
      break;
    }
    FdeInfo f;
    auto sym = e.functions.find(fde.func_start);
    f.function = sym == e.functions.end() ? "?" : sym->second.name;
    f.start = fde.func_start;
    f.size = fde.func_size;
    f.flex = fde.flex;
    for (uint32_t j = 0; j < fde.num_fres; j++) {
      sframe_row row;
      if (int rc = sframe_get_fre(&sec, &fde, j, &row)) {
        d.error = "FDE " + std::to_string(i) + " FRE " + std::to_string(j) + ": error " +
                  std::to_string(rc);
        break;
      }
      f.rows.push_back({row.start_off, CfaRule(row),
                        row.fp.kind == SFRAME_LOC_REG_OFFSET && row.fp.deref &&
                            row.fp.reg == SFRAME_REG_RBP});
    }
    d.fdes.push_back(f);
  }
  return d;
}

std::string Describe(const ElfSframe& e, const Decoded& d) {
  std::ostringstream o;
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                ".sframe at 0x%" PRIx64 ", %" PRIu64 " bytes: version %u, flags 0x%x (%s), "
                "%u FDEs, %u FREs; PT_GNU_SFRAME %s (0x%" PRIx64 ", %" PRIu64 " bytes)\n",
                e.sframe_addr, e.sframe_size, d.version, d.flags, FlagNames(d.flags).c_str(),
                d.num_fdes, d.num_fres, e.pt_gnu_sframe ? "yes" : "NO", e.pt_vaddr, e.pt_memsz);
  o << buf;
  o << "  FUNCTION          START    SIZE FRES  KIND  CFA RULES (row order; ^: RBP at *(RBP+k))\n";
  for (const FdeInfo& f : d.fdes) {
    std::snprintf(buf, sizeof(buf), "  %-16s %#7" PRIx64 " %5u %4zu  %-5s", f.function.c_str(),
                  f.start, f.size, f.rows.size(), f.flex ? "flex" : "std");
    o << buf;
    for (const RowInfo& r : f.rows) o << " " << r.cfa << (r.fp_at_rbp ? "^" : "");
    o << "\n";
  }
  return o.str();
}

// ---- the program's own text ---------------------------------------------------------------

// The C runtime's code in the program (crt1.o, crti.o, crtbegin.o,
// crtend.o: gcc's and glibc's objects, without .sframe): it runs before
// main is called (_start; frame_dummy and _init from ld.so) or after main
// returned (the destructors), so no sample in it can reach main.
const std::set<std::string> kRuntime = {"_start",
                                        "_init",
                                        "_fini",
                                        "frame_dummy",
                                        "register_tm_clones",
                                        "deregister_tm_clones",
                                        "__do_global_dtors_aux",
                                        "<.init>",
                                        "<.fini>"};

struct Program {
  std::string path;
  ElfSframe elf;
  Decoded sframe;
  // gcc's CFI bug in g3_realign's epilogue (see DrapWindow): file
  // addresses [drap_lo, drap_hi), and what was found.
  uint64_t drap_lo = 0, drap_hi = 0;
  std::string drap_note;
  bool InDrapWindow(uint64_t pc) const { return pc >= drap_lo && pc < drap_hi; }

  // The function holding file address pc (by its symbol's size), else
  // "<section>" (".plt", ".plt.sec", ...: the PLT has no symbols), else "?".
  std::string Name(uint64_t pc) const {
    auto it = elf.functions.upper_bound(pc);
    if (it != elf.functions.begin()) {
      --it;
      if (pc < it->first + std::max<uint64_t>(it->second.size, 1)) return it->second.name;
    }
    for (const ElfSframe::Range& r : elf.exec_sections) {
      if (pc >= r.addr && pc < r.addr + r.size) return "<" + r.name + ">";
    }
    return "?";
  }
};

// gcc realigns g3_realign's stack through R10 (DRAP) and describes RBP,
// saved at [RBP] after `push %rbp; mov %rsp,%rbp`, with a DWARF expression
// (DW_CFA_expression rbp: DW_OP_breg6 0), which gas 2.47 turns into the
// flexible FDE's "FP at *(RBP + 0)".  Its epilogue ends
//   pop %rbp; lea -0x8(%r10),%rsp; ret
// with no .cfi_restore for RBP after the pop (gcc 12 and gcc 16 alike;
// `readelf --debug-dump=frames-interp` shows rbp "exp" down to the ret), so
// after the pop, down to the ret, the rule still says "the caller's RBP is at
// *(RBP)" while RBP already is the caller's: an unwinder (this module, as
// any DWARF unwinder would) reads the caller's RBP from the wrong place,
// and g3_vla's CFA (RBP + 16) goes wrong.  Those instructions are found
// here (the byte pattern, and the rows over them still saying FP at
// *(RBP + k)); samples there are counted apart, not against the module.
void DrapWindow(Program* p) {
  const FdeInfo* f = p->sframe.Find("g3_realign");
  if (!f || f->rows.empty()) {
    p->drap_note = "g3_realign: no FDE";
    return;
  }
  // The last row starts at the ret, after `lea -0x8(%r10),%rsp`; the
  // `pop %rbp` is a little before (gcc may schedule an instruction or two
  // between them).
  const uint64_t ret = f->start + f->rows.back().start;
  static const int kLea[] = {0x49, 0x8d, 0x62, 0xf8, 0xc3};  // lea -0x8(%r10),%rsp; ret
  bool match = true;
  for (int i = 0; i < 5; i++) match &= p->elf.Byte(ret - 4 + uint64_t(i)) == kLea[i];
  uint64_t pop = 0;
  for (uint64_t at = ret - 5; match && at + 16 > ret && at > f->start; at--) {
    if (p->elf.Byte(at) == 0x5d) {
      pop = at;
      break;
    }
  }
  char b[240];
  if (!pop) {
    std::snprintf(b, sizeof(b),
                  "g3_realign: no `pop %%rbp; ...; lea -0x8(%%r10),%%rsp; ret` before 0x%" PRIx64,
                  ret);
    p->drap_note = b;
    return;
  }
  // The window only where the rows over it still say RBP is at *(RBP + k).
  bool stale = true;
  for (uint64_t pc = pop + 1; pc <= ret; pc++) {
    const int r = f->RowOf(pc);
    stale &= r >= 0 && f->rows[size_t(r)].fp_at_rbp;
  }
  if (stale) {
    p->drap_lo = pop + 1;
    p->drap_hi = ret + 1;
  }
  std::snprintf(b, sizeof(b),
                "g3_realign: `pop %%rbp` at 0x%" PRIx64 "; from 0x%" PRIx64 " to the ret at 0x%" PRIx64
                " the rows %s say the caller's RBP is at *(RBP + k)%s",
                pop, pop + 1, ret, stale ? "still" : "no longer",
                stale ? " (gcc's CFI keeps it after the pop): samples there counted apart" : "");
  p->drap_note = b;
}

Program LoadProgram(const std::string& path) {
  Program p;
  p.path = path;
  p.elf = ReadElf(path);
  if (p.elf.error.empty()) p.sframe = Decode(p.elf);
  DrapWindow(&p);
  return p;
}

// ---- the verdict on samples -------------------------------------------------------------

struct Tally {
  uint64_t samples = 0;
  uint64_t no_user = 0;                         // no user frame at all
  std::map<std::string, uint64_t> excluded;     // leaf in another object -> samples
  std::map<std::string, uint64_t> runtime;      // leaf in the C runtime's code -> samples
  uint64_t drap = 0, drap_reached = 0;          // leaf in the DRAP window (reached main)
  uint64_t own = 0;                             // leaf in the workload's own code
  uint64_t reach_main = 0;                      // ... whose chain has main
  uint64_t exact = 0;                           // ... through exactly the expected frames
  std::map<std::string, uint64_t> own_leaf;     // leaf function -> samples
  std::set<uint64_t> own_pcs;                   // distinct leaf PCs (file addresses)
  std::set<uint64_t> caller_pcs;                // call sites in caller frames (file addresses)
  std::map<std::string, uint64_t> own_stop;     // user_stop -> samples
  std::map<std::string, uint64_t> failed_leaf;  // leaf function of those not reaching main
  std::vector<std::string> failures;            // the first few, described
};

std::string Base(const std::string& path) { return path.substr(path.rfind('/') + 1); }

void Classify(const Sample& s, const std::vector<Symbol>& syms, const Program& prog, Tally* t) {
  t->samples++;
  if (syms.empty()) {
    t->no_user++;
    return;
  }
  const Symbol& leaf = syms[0];
  if (leaf.object != prog.path) {
    t->excluded[leaf.object.empty() ? "no file (the vDSO)" : Base(leaf.object)]++;
    return;
  }
  const uint64_t leaf_pc = leaf.object_offset;
  const std::string leaf_fn = prog.Name(leaf_pc);
  if (kRuntime.count(leaf_fn)) {
    t->runtime[leaf_fn]++;
    return;
  }
  // Own frames by the program's symbols (the call site of a caller:
  // its return address - 1); main is the first own frame named so.
  std::vector<std::string> names{leaf_fn};
  size_t main_at = leaf_fn == "main" ? 0 : syms.size();
  for (size_t i = 1; i < syms.size(); i++) {
    const bool own = syms[i].object == prog.path;
    names.push_back(own ? prog.Name(syms[i].object_offset - 1)
                        : syms[i].found() ? syms[i].function() : "?");
    if (own && main_at == syms.size() && names.back() == "main") main_at = i;
  }
  if (prog.InDrapWindow(leaf_pc)) {
    t->drap++;
    if (main_at < syms.size()) t->drap_reached++;
    return;
  }
  t->own++;
  t->own_leaf[leaf_fn]++;
  t->own_pcs.insert(leaf_pc);
  t->own_stop[sframe::to_string(s.user_stop)]++;
  for (size_t i = 1; i <= std::min(main_at, syms.size() - 1); i++) {
    if (syms[i].object == prog.path) t->caller_pcs.insert(syms[i].object_offset - 1);
  }
  if (main_at == syms.size()) {
    t->failed_leaf[leaf_fn]++;
    if (t->failures.size() < 8) {
      char b[160];
      std::snprintf(b, sizeof(b), "  leaf 0x%" PRIx64 " = file address 0x%" PRIx64 " (%s)\n",
                    leaf.address, leaf_pc, leaf_fn.c_str());
      t->failures.push_back(b + vmtest::Describe(s, syms));
    }
    return;
  }
  t->reach_main++;
  // Exactly the chain's frames from the leaf's function down to main, for
  // a leaf in the chain; a leaf elsewhere (a PLT stub) must be followed by
  // main at once.
  auto it = std::find(kChain.begin(), kChain.end(), leaf_fn);
  const std::vector<std::string> want = it != kChain.end()
                                            ? std::vector<std::string>(it, kChain.end())
                                            : std::vector<std::string>{leaf_fn, "main"};
  const std::vector<std::string> got(names.begin(), names.begin() + long(main_at) + 1);
  if (got == want) {
    t->exact++;
  } else if (t->failures.size() < 8) {
    std::string w;
    for (const std::string& n : want) w += " " + n;
    t->failures.push_back("  reaches main, but not through" + w + "\n" +
                          vmtest::Describe(s, syms));
  }
}

std::string Percent(uint64_t part, uint64_t whole) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.2f %%", whole ? 100.0 * double(part) / double(whole) : 0.0);
  return b;
}

std::string Summary(const std::string& how, const Program& prog, const Tally& t) {
  std::ostringstream o;
  o << how << ": " << t.samples << " samples; " << t.own
    << " with the leaf in the workload's own code, of which " << t.reach_main << " reach main ("
    << Percent(t.reach_main, t.own) << "), " << t.exact << " through exactly the expected frames ("
    << Percent(t.exact, t.own) << ")\n";
  o << "  excluded: " << t.samples - t.own << " =";
  const char* sep = " ";
  for (const auto& [object, n] : t.excluded) {
    o << sep << n << " in " << object;
    sep = "; ";
  }
  for (const auto& [fn, n] : t.runtime) {
    o << sep << n << " in " << fn << " (the C runtime's code, before or after main)";
    sep = "; ";
  }
  if (t.no_user) {
    o << sep << t.no_user << " without a user frame";
    sep = "; ";
  }
  if (t.drap) {
    o << sep << t.drap << " in g3_realign's epilogue after `pop %rbp` (gcc's CFI bug; "
      << t.drap_reached << " of them reached main anyway)";
  }
  o << "\n  leaf functions in own code (" << t.own_pcs.size() << " distinct PCs):";
  for (const auto& [fn, n] : t.own_leaf) o << " " << fn << " " << n << ";";
  o << "\n  user_stop of those:";
  for (const auto& [why, n] : t.own_stop) o << " " << why << " " << n << ";";
  o << "\n";
  if (!t.failed_leaf.empty()) {
    o << "  NOT reaching main, by leaf function:";
    for (const auto& [fn, n] : t.failed_leaf) o << " " << fn << " " << n << ";";
    o << "\n";
  }
  // Which FREs of the chain's functions the samples used: the row of each
  // distinct leaf PC, and the row of each call site in a caller frame.
  o << "  FREs used (leaf PCs / call sites / FREs of the function):\n";
  for (const FdeInfo& f : prog.sframe.fdes) {
    if (std::find(kChain.begin(), kChain.end(), f.function) == kChain.end()) continue;
    std::set<int> leaf_rows, caller_rows;
    for (uint64_t pc : t.own_pcs) {
      if (int r = f.RowOf(pc); r >= 0) leaf_rows.insert(r);
    }
    for (uint64_t pc : t.caller_pcs) {
      if (int r = f.RowOf(pc); r >= 0) caller_rows.insert(r);
    }
    o << "    " << f.function << ": " << leaf_rows.size() << " / " << caller_rows.size() << " / "
      << f.rows.size() << " ";
    for (size_t j = 0; j < f.rows.size(); j++) {
      char b[80];
      std::snprintf(b, sizeof(b), " [+%#x %s%s%s]", f.rows[j].start, f.rows[j].cfa.c_str(),
                    leaf_rows.count(int(j)) ? " leaf" : "",
                    caller_rows.count(int(j)) ? " caller" : "");
      o << b;
    }
    o << "\n";
  }
  return o.str();
}

// Every sample in own code reaches main, exactly, and there are enough.
void ExpectAllReachMain(const Tally& t, uint64_t min_own) {
  std::string examples;
  for (const std::string& f : t.failures) examples += f;
  EXPECT_GE(t.own, min_own) << "too few samples in the workload's own code";
  EXPECT_EQ(t.reach_main, t.own) << "samples in the workload's own code that do not reach main:\n"
                                 << examples;
  EXPECT_EQ(t.exact, t.own) << examples;
}

// Waits until pid is stopped (state T in /proc/PID/stat), 20 s at most.
bool WaitStopped(pid_t pid) {
  const std::string stat = "/proc/" + std::to_string(pid) + "/stat";
  for (uint64_t end = vmtest::NowMs() + 20000; vmtest::NowMs() < end;) {
    std::ifstream in(stat);
    std::string line;
    std::getline(in, line);
    const size_t paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'T')
      return true;
    usleep(10000);
  }
  return false;
}

// ---- the fixture ------------------------------------------------------------------------

class GasV3Test : public vmtest::SessionTest {
 protected:
  void SetUp() override {
    const std::string why = WhyNotV3();
    if (!why.empty()) GTEST_SKIP() << why;
    vmtest::SessionTest::SetUp();
  }

  // The workload, compiled (fails the test when it does not compile).
  const Built* Workload() {
    const Built& b = Build();
    EXPECT_TRUE(b.ok) << b.command << "\n" << b.log;
    return b.ok ? &b : nullptr;
  }

  // Discovery must be on: nothing else gives the module the section.
  // Root turns it on for the test if it is off; another user cannot.
  bool NeedDiscovery() {
    if (vmtest::DiscoveryEnabled()) return true;
    if (vmtest::IsRoot()) {
      discovery_ = std::make_unique<vmtest::ScopedModuleParam>("discovery", "1");
      if (discovery_->ok() && vmtest::DiscoveryEnabled()) return true;
    }
    ADD_FAILURE() << "the module's discovery is off and cannot be turned on by uid " << geteuid();
    return false;
  }

  std::unique_ptr<vmtest::ScopedModuleParam> discovery_;
};

// ---- 1. the section gas made ------------------------------------------------------------

TEST_F(GasV3Test, Gas3Section) {
  const Built* b = Workload();
  ASSERT_TRUE(b);
  const Program p = LoadProgram(b->path);
  const ElfSframe& e = p.elf;
  ASSERT_EQ(e.error, "") << b->path;
  // The header as the format defines it (preamble: magic, version, flags;
  // then the ABI), read from the bytes themselves.
  ASSERT_GE(e.sframe_size, uint64_t(SFRAME_HDR_SIZE));
  const uint8_t* h = e.file.data() + e.sframe_off;
  const uint16_t magic = uint16_t(h[0] | h[1] << 8);
  const uint8_t version = h[2], flags = h[3], abi = h[4];
  char line[200];
  std::snprintf(line, sizeof(line), "%s: magic 0x%04x, version %u, flags 0x%02x (%s), abi/arch %u",
                kProgram, magic, version, flags, FlagNames(flags).c_str(), abi);
  std::printf("%s\n", line);
  RecordProperty("sframe_header", line);
  EXPECT_EQ(magic, SFRAME_MAGIC);
  EXPECT_EQ(version, 3) << "the guest's gas made SFrame version " << unsigned(version);
  EXPECT_TRUE(flags & SFRAME_F_FDE_FUNC_START_PCREL) << FlagNames(flags);
  EXPECT_EQ(abi, SFRAME_ABI_AMD64_ENDIAN_LITTLE);
  // What discovery reads: PT_GNU_SFRAME over the section.
  EXPECT_TRUE(e.pt_gnu_sframe);
  EXPECT_EQ(e.pt_vaddr, e.sframe_addr);
  EXPECT_LT(e.text_lo, e.text_hi);

  // The project's decoder (module/sframe_decode.c) reads and validates it
  // whole, with each func_start PC-relative to its own FDE.
  const Decoded& d = p.sframe;
  ASSERT_EQ(d.init, 0) << "sframe_section_init";
  EXPECT_EQ(d.validate, 0) << "sframe_validate";
  EXPECT_EQ(d.error, "");
  const std::string table = Describe(e, d);
  std::printf("%s%s\n", table.c_str(), p.drap_note.c_str());
  for (const std::string& fn : kChain) EXPECT_TRUE(d.Find(fn)) << "no FDE for " << fn << "\n" << table;
  if (const FdeInfo* f = d.Find("g3_realign")) {
    EXPECT_TRUE(f->flex) << "g3_realign (DRAP) is not a flexible FDE\n" << table;
    EXPECT_TRUE(f->Has([](const RowInfo& r) { return r.cfa.rfind("*(fp", 0) == 0; }))
        << "no CFA = *(RBP - k) row in g3_realign\n" << table;
    EXPECT_TRUE(f->Has([](const RowInfo& r) { return r.cfa.rfind("r10", 0) == 0; }))
        << "no CFA = R10 row in g3_realign\n" << table;
  }
  if (const FdeInfo* f = d.Find("g3_vla")) {
    EXPECT_TRUE(f->Has([](const RowInfo& r) { return r.cfa == "fp+16"; }))
        << "no CFA = RBP + 16 row in g3_vla\n" << table;
  }

  // The guest's own readelf (binutils' libsframe) agrees.
  const ShellResult re = RunShell("readelf --sframe " + b->path);
  std::istringstream lines(re.output);
  std::string header;
  for (std::string l; std::getline(lines, l) && l.find("Function Index") == std::string::npos;)
    header += l + "\n";
  std::printf("readelf --sframe (%s):\n%s", FirstLine(RunShell("readelf --version").output).c_str(),
              header.c_str());
  EXPECT_EQ(re.status, 0) << re.output;
  EXPECT_NE(header.find("SFRAME_VERSION_3"), std::string::npos) << header;
  EXPECT_NE(header.find("SFRAME_F_FDE_FUNC_START_PCREL"), std::string::npos) << header;
}

// ---- 2. a session, nothing supplied -----------------------------------------------------

TEST_F(GasV3Test, SessionWithNothingSupplied) {
  SKIP_WITHOUT_PERF();
  const Built* b = Workload();
  ASSERT_TRUE(b);
  ASSERT_TRUE(NeedDiscovery());
  const Program prog = LoadProgram(b->path);
  const sframe::Stats before = dev().stats();
  std::string err;
  // It stops itself after "ready"; continued once sampling is set up, so
  // that its kSeconds are all sampled.
  auto w = vmtest::Workload::Start({std::to_string(kSeconds), "stop"}, &err, b->path);
  ASSERT_TRUE(w) << err;
  ASSERT_TRUE(WaitStopped(w->pid())) << w->output();
  sym_.load_process(w->pid());
  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(kHz));
  sframe::Session s = sframe::Session::start(sframe::Target::kProcess, w->pid(), SframeOnly());
  ASSERT_EQ(kill(w->pid(), SIGCONT), 0);
  const uint64_t t0 = vmtest::NowMs();
  std::vector<sframe::SectionInfo> listed;
  std::string list_error;
  // Until the workload is done (kSeconds of CPU and a margin); the list
  // of the module's entries for it halfway, while it runs.
  vmtest::Collected c = vmtest::Collect(&s, &ev, kSeconds * 1000 + 2000, [&] {
    try {
      listed = dev().list_sections(w->pid());
    } catch (const std::exception& x) {
      list_error = x.what();
    }
  });
  EXPECT_EQ(w->Wait(), 0) << w->output();
  const sframe::Stats after = dev().stats();
  std::printf("%zu records in %.1f s at -F %d (perf took %" PRIu64 " samples), %" PRIu64
              " lost\n",
              c.Samples().size(), double(vmtest::NowMs() - t0) / 1000.0, kHz,
              uint64_t(ev.counts().samples), uint64_t(c.stats.lost + c.LostRecords()));

  Tally t;
  for (const Sample* smp : c.Samples()) Classify(*smp, User(*smp), prog, &t);
  std::printf("%s", Summary("session, SFrame only, nothing supplied", prog, t).c_str());
  RecordProperty("samples", std::to_string(t.samples));
  RecordProperty("own_code", std::to_string(t.own));
  RecordProperty("reach_main", std::to_string(t.reach_main) + "/" + std::to_string(t.own));
  RecordProperty("lost", std::to_string(c.stats.lost + c.LostRecords()));
  ExpectAllReachMain(t, kMinOwn);

  // The module found the section itself: the entry over the workload's
  // text is "discovered", version 3, and nothing was registered or
  // supplied for the process.
  ASSERT_EQ(list_error, "");
  std::printf("the module's entries for pid %d halfway:\n", w->pid());
  bool discovered_v3 = false;
  for (const sframe::SectionInfo& e : listed) {
    std::printf("  %#" PRIx64 "-%#" PRIx64 " %-10s v%u %u FDEs\n", e.text_start,
                e.text_start + e.text_len, sframe::to_string(e.source).c_str(), e.version,
                e.nr_fdes);
    EXPECT_NE(e.source, sframe::Source::kSupplied);
    EXPECT_NE(e.source, sframe::Source::kRegistered);
    if (e.source == sframe::Source::kDiscovered && e.version == 3 &&
        e.nr_fdes == prog.sframe.num_fdes)
      discovered_v3 = true;
  }
  EXPECT_TRUE(discovered_v3) << "no discovered version 3 section of " << prog.sframe.num_fdes
                             << " FDEs in the module's list";
  EXPECT_GE(after.sections_discovered, before.sections_discovered + 1);
}

// ---- 3. sframe-prof ---------------------------------------------------------------------

TEST_F(GasV3Test, SframeProfLeavesTheOwnSectionToDiscovery) {
  SKIP_WITHOUT_PERF();
  const Built* b = Workload();
  ASSERT_TRUE(b);
  ASSERT_TRUE(NeedDiscovery());
  const Program prog = LoadProgram(b->path);
  const ShellResult rec = vmtest::Prof("record -v -F " + std::to_string(kHz) +
                                       " -o gas_v3.data -- " + b->path + " " +
                                       std::to_string(kSeconds));
  std::printf("sframe-prof record -v:\n%s", rec.output.c_str());
  ASSERT_EQ(rec.status, 0) << rec.output;
  // "supplied SFrame for N objects (M made from .eh_frame)": N == M, so no
  // object's own section was supplied from its file.
  std::istringstream lines(rec.output);
  unsigned supplies = 0;
  for (std::string l; std::getline(lines, l);) {
    const size_t at = l.find("supplied SFrame for ");
    if (at == std::string::npos) continue;
    unsigned n = 0, m = 0;
    ASSERT_EQ(std::sscanf(l.c_str() + at, "supplied SFrame for %u objects (%u made", &n, &m), 2)
        << l;
    EXPECT_EQ(n, m) << "an object's own .sframe was supplied: " << l;
    supplies++;
  }
  EXPECT_GT(supplies, 0u) << "ld.so and libc have no .sframe: SFrame made from .eh_frame expected";

  sframe::ProfileContents contents;
  sframe::read_profile("gas_v3.data", &contents);
  sframe::Symbolizer sym;
  for (const sframe::ProfileMapping& m : contents.maps)
    sym.add_mapping(m.pid, m.start, m.end, m.offset, m.path);
  Tally t;
  for (const Sample& smp : contents.samples)
    Classify(smp, sym.symbolize_frames(pid_t(smp.pid), smp.user), prog, &t);
  std::printf("%s",
              Summary("sframe-prof record (default: --call-graph auto)", prog, t).c_str());
  RecordProperty("samples", std::to_string(t.samples));
  RecordProperty("own_code", std::to_string(t.own));
  RecordProperty("reach_main", std::to_string(t.reach_main) + "/" + std::to_string(t.own));
  RecordProperty("lost", std::to_string(contents.lost));
  ExpectAllReachMain(t, kMinOwn);
}

// ---- 4. every instruction of one call down the chain ----------------------------------

// Under TCG a timer sample is taken only where a translation block starts
// (qemu looks at interrupts between blocks): the tests above sample some
// two dozen PCs, function entries and the instructions after calls, so
// the rows that begin inside a prologue or an epilogue (after each push,
// g3_realign's CFA = R10 rows) are never a sample's leaf there.  Here the
// workload is single-stepped with ptrace through one call of g3_big from
// g3_round, returns included, and each step is a sample: the SIGTRAP of a
// step is generated in the workload's own context, where a
// signal:signal_generate tracepoint event on it (sample_period 1, no ring:
// the module takes the sample) hands its user registers to the session.
// Every step in the workload's own code must reach main, but the two
// instructions of gcc's CFI bug (DrapWindow), counted apart; every PC
// stepped on there must have been a sample's leaf, g3_realign's CFA = R10
// rows among them.
TEST_F(GasV3Test, EveryInstructionOfOneCallReachesMain) {
  SKIP_WITHOUT_PERF();
  if (!vmtest::IsRoot()) GTEST_SKIP() << "the tracepoint's id is in tracefs, root's only";
  const Built* b = Workload();
  ASSERT_TRUE(b);
  ASSERT_TRUE(NeedDiscovery());
  const Program prog = LoadProgram(b->path);
  const uint64_t tp = TracepointId("signal/signal_generate");
  ASSERT_NE(tp, 0u) << "no signal:signal_generate in tracefs";
  std::string err;
  auto w = vmtest::Workload::Start({"60", "stop"}, &err, b->path);
  ASSERT_TRUE(w) << err;
  const pid_t pid = w->pid();
  ASSERT_TRUE(WaitStopped(pid)) << w->output();
  sym_.load_process(pid);
  sframe::Session s = sframe::Session::start(sframe::Target::kProcess, pid, SframeOnly());
  perf_event_attr a{};
  a.size = sizeof(a);
  a.type = PERF_TYPE_TRACEPOINT;
  a.config = tp;
  a.sample_period = 1;
  a.sample_type = PERF_SAMPLE_TID;
  sframe::UniqueFd ev(
      static_cast<int>(syscall(SYS_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC)));
  ASSERT_TRUE(ev) << "perf_event_open(signal:signal_generate): " << std::strerror(errno);
  ASSERT_EQ(ptrace(PTRACE_ATTACH, pid, nullptr, nullptr), 0) << std::strerror(errno);

  std::vector<sframe::Record> recs;
  uint64_t steps = 0, own_steps = 0;
  std::set<uint64_t> stepped;  // own-code PCs stepped on (file addresses)
  std::string state = "to g3_big";
  int st = 0;
  constexpr uint64_t kMaxSteps = 50000;
  for (; steps < kMaxSteps; steps++) {
    if (waitpid(pid, &st, __WALL) != pid || !WIFSTOPPED(st)) break;
    // The SIGTRAP of each step and the SIGSTOPs (its own, the attach's)
    // are swallowed; anything else is passed on.
    const int sig = WSTOPSIG(st) == SIGTRAP || WSTOPSIG(st) == SIGSTOP ? 0 : WSTOPSIG(st);
    user_regs_struct regs{};
    if (ptrace(PTRACE_GETREGS, pid, nullptr, &regs) != 0) break;
    const Symbol at = sym_.symbolize(pid, regs.rip);
    if (at.object == b->path) {
      const uint64_t pc = at.object_offset;
      const std::string fn = prog.Name(pc);
      if (fn != "?") {
        if (!kRuntime.count(fn) && !prog.InDrapWindow(pc)) stepped.insert(pc);
        own_steps++;
        if (state == "to g3_big" && fn == "g3_big") state = "in g3_big";
        if (state == "in g3_big" && fn == "g3_round") {
          state = "back in g3_round";
          break;
        }
      }
    }
    if (steps % 64 == 0) s.read(&recs);
    if (ptrace(PTRACE_SINGLESTEP, pid, nullptr, reinterpret_cast<void*>(intptr_t(sig))) != 0)
      break;
  }
  ptrace(PTRACE_DETACH, pid, nullptr, nullptr);
  w->Kill();
  w->Wait();
  for (uint64_t quiet = vmtest::NowMs(); vmtest::NowMs() - quiet < 500;) {
    if (s.poll_read(&recs, 100)) quiet = vmtest::NowMs();
  }
  EXPECT_EQ(state, "back in g3_round") << steps << " steps";

  Tally t;
  for (const sframe::Record& r : recs) {
    if (r.is_sample() && r.sample.tid == uint32_t(pid))
      Classify(r.sample, User(r.sample), prog, &t);
  }
  std::printf("single-stepped %" PRIu64 " instructions (%" PRIu64 " in the workload's text, %zu "
              "distinct PCs of its own code)\n%s\n",
              steps, own_steps, stepped.size(), prog.drap_note.c_str());
  std::printf("%s", Summary("signal:signal_generate at each step, SFrame only, nothing supplied",
                            prog, t)
                        .c_str());
  RecordProperty("steps", std::to_string(steps));
  RecordProperty("reach_main", std::to_string(t.reach_main) + "/" + std::to_string(t.own));
  ExpectAllReachMain(t, 1);
  // Each PC stepped on in the workload's own code was a sample's leaf.
  std::vector<uint64_t> missing;
  for (uint64_t pc : stepped) {
    if (!t.own_pcs.count(pc)) missing.push_back(pc);
  }
  EXPECT_TRUE(missing.empty()) << missing.size() << " of " << stepped.size()
                               << " stepped PCs never were a sample's leaf, e.g. 0x" << std::hex
                               << (missing.empty() ? 0 : missing[0]) << " ("
                               << (missing.empty() ? "" : prog.Name(missing[0])) << ")";
  // g3_realign's CFA = R10 rows (the flexible FDE's rows that only the
  // interrupted registers can serve) were a leaf's.
  if (const FdeInfo* f = prog.sframe.Find("g3_realign")) {
    bool r10_leaf = false;
    for (uint64_t pc : t.own_pcs) {
      const int r = f->RowOf(pc);
      r10_leaf |= r >= 0 && f->rows[size_t(r)].cfa.rfind("r10", 0) == 0;
    }
    EXPECT_TRUE(r10_leaf) << "no sample's leaf in g3_realign's CFA = R10 rows";
  }
}

}  // namespace
