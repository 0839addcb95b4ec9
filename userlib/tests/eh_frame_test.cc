// SFrame generated from .eh_frame (sframe::generate_sframe) against libdw's
// reading of the same CFI, PC by PC, on Debian 12's libc, libstdc++, ld.so
// and python3.11 and on test programs, and against gas's own .sframe of the
// test programs (built with -Wa,--gsframe).
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <ostream>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "eh_frame_check.h"
#include "sframe_gen/eh_frame.h"
#include "sframe_client/error.h"
#include "sframe_source_mem.h"

namespace {

using sframe::GeneratedSframe;
using sframe::GenerateOptions;

bool exists(const std::string& path) { return ::access(path.c_str(), R_OK) == 0; }

std::string prog(const char* name) { return std::string(SFRAME_GEN_PROG_DIR) + "/" + name; }

double pct(uint64_t part, uint64_t whole) { return whole ? 100.0 * part / whole : 100.0; }

void print_stats(const std::string& what, const GeneratedSframe& g) {
  const sframe::GenerateStats& s = g.stats;
  std::printf("[ stats    ] %s: v%u, %zu bytes (.eh_frame %" PRIu64 "); FDEs %" PRIu64 ": %" PRIu64
              " covered (%.2f%%), %" PRIu64 " partial, %" PRIu64
              " uncovered; text bytes %.3f%% covered (%" PRIu64 " of %" PRIu64 "); rows %" PRIu64
              ", %" PRIu64 " uncovered\n",
              what.c_str(), g.version, g.bytes.size(), s.eh_frame_size, s.fdes, s.fdes_covered,
              pct(s.fdes_covered, s.fdes), s.fdes_partial, s.fdes_uncovered,
              pct(s.covered_bytes, s.fde_bytes), s.covered_bytes, s.fde_bytes, s.rows,
              s.rows_uncovered);
  for (const auto& [why, n] : s.uncovered_reasons) {
    std::printf("[ stats    ]   %" PRIu64 " rows uncovered: %s\n", n, why.c_str());
  }
}

void expect_agreement(const std::string& path, const GeneratedSframe& g,
                      const sftest::DwarfCheck& c, uint64_t stride) {
  EXPECT_EQ(c.init, 0);
  EXPECT_EQ(c.validate, 0);
  EXPECT_EQ(c.disagreements, 0u);
  EXPECT_EQ(c.sframe_only, 0u);
  EXPECT_EQ(c.lookup_errors, 0u);
  for (const std::string& e : c.examples) ADD_FAILURE() << path << ": " << e;
  if (stride == 1) {
    // Every PC looked at: the section covers exactly the bytes it says.
    EXPECT_EQ(c.covered_pcs, g.stats.covered_bytes);
    EXPECT_EQ(c.dwarf_pcs, g.stats.fde_bytes);
  }
  std::printf("[ check    ] %s: %" PRIu64 " PCs (stride %" PRIu64 "), %" PRIu64
              " with DWARF, %" PRIu64 " with SFrame (%" PRIu64 " outermost, %" PRIu64
              " PC-mask, %" PRIu64 " flexible); %" PRIu64 " disagreements\n",
              path.c_str(), c.pcs, stride, c.dwarf_pcs, c.covered_pcs, c.outermost_pcs,
              c.pcmask_pcs, c.flex_pcs, c.disagreements);
}

// --- Debian 12's binaries -------------------------------------------------

class SystemBinary : public ::testing::TestWithParam<const char*> {};

// Every byte of every FDE: the row of the generated SFrame, where there is
// one, is the DWARF row.  The sanitized build checks ld.so only.
TEST_P(SystemBinary, EveryPcAgreesWithDwarf) {
  const std::string path = GetParam();
  if (!exists(path)) GTEST_SKIP() << path << " not present";
  const auto t0 = std::chrono::steady_clock::now();
  const GeneratedSframe g = sframe::generate_sframe(path);
  const auto t1 = std::chrono::steady_clock::now();
  print_stats(path, g);
  std::printf("[ stats    ]   generated in %.1f ms\n",
              std::chrono::duration<double, std::milli>(t1 - t0).count());
  EXPECT_EQ(g.build_id.size(), 40u);  // Debian links with --build-id=sha1
  EXPECT_GT(g.text_len, 0u);
  EXPECT_EQ(g.section_vaddr, g.text_vaddr);
  const sftest::DwarfCheck c = sftest::check_against_dwarf(path, g, 1);
  expect_agreement(path, g, c, 1);
  // The goal: at least 99% of the FDEs entirely covered, or all but the
  // pushes before a call bridge's callee saves its register (ld.so's
  // _dl_fixup and two others: LdSoTrampolinesBridgeTheirCallToDlFixup).
  std::set<uint64_t> bridge_callees;
  for (const auto& r : g.stats.uncovered_rows) {
    if (r.reason.find("a call bridge's callee") != std::string::npos) {
      bridge_callees.insert(r.fde_start);
    }
  }
  EXPECT_GE(pct(g.stats.fdes_covered + bridge_callees.size(), g.stats.fdes), 99.0);
  EXPECT_GE(pct(g.stats.covered_bytes, g.stats.fde_bytes), 99.9);
}

#ifdef SFRAME_GEN_SANITIZED
INSTANTIATE_TEST_SUITE_P(Debian12, SystemBinary, ::testing::Values("/lib64/ld-linux-x86-64.so.2"));
#else
INSTANTIATE_TEST_SUITE_P(Debian12, SystemBinary,
                         ::testing::Values("/lib/x86_64-linux-gnu/libc.so.6",
                                           "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
                                           "/lib64/ld-linux-x86-64.so.2", "/usr/bin/python3.11"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string n = info.param;
                           n = n.substr(n.rfind('/') + 1);
                           std::string out;
                           for (char ch : n)
                             out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return out;
                         });
#endif

// OpenSSL's libraries (Debian 12's 3.0): the perlasm of SHA, AES, ChaCha and
// bignum realigns the stack and says CFA = *(RSP + N) + 8 (or RBP-based, or
// + 64), which no SFrame v3 rule can say: those rows are written with this
// project's extension; bignum's indexed CFA (*(RSP + 8 + R9 * 8) + 8) stays
// uncovered and is counted under its own reason; at every other PC of every
// FDE (every byte) the generated row is libdw's.  (Not in the sanitized build: too slow
// there, and the same code runs for the system binaries.)
#ifndef SFRAME_GEN_SANITIZED
class OpensslLibrary : public ::testing::TestWithParam<const char*> {};

TEST_P(OpensslLibrary, EveryCoveredPcAgreesWithDwarf) {
  const std::string path = GetParam();
  if (!exists(path)) GTEST_SKIP() << path << " not present";
  const GeneratedSframe g = sframe::generate_sframe(path);
  print_stats(path, g);
  const sftest::DwarfCheck c = sftest::check_against_dwarf(path, g, 1);
  expect_agreement(path, g, c, 1);
  EXPECT_GE(pct(g.stats.fdes_covered, g.stats.fdes), 99.0);
  uint64_t rows = 0;
  for (const auto& [why, n] : g.stats.uncovered_reasons) {
    EXPECT_EQ(why, "CFA expression of another form");
    rows += n;
  }
  EXPECT_EQ(rows, g.stats.uncovered_rows.size());
  uint64_t bytes = 0;
  for (const auto& r : g.stats.uncovered_rows) bytes += r.end - r.start;
  EXPECT_EQ(bytes + g.stats.covered_bytes, g.stats.fde_bytes);
}

INSTANTIATE_TEST_SUITE_P(Debian12, OpensslLibrary,
                         ::testing::Values("/usr/lib/x86_64-linux-gnu/libcrypto.so.3",
                                           "/usr/lib/x86_64-linux-gnu/libssl.so.3"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return info.index == 0 ? std::string("libcrypto") : "libssl";
                         });
#endif

// The PLT of libc becomes a PC-mask FDE.  libc needs version 3 for one
// function: __vfork keeps its return address in RDI around the system call
// (a flexible FDE); without v3 those rows alone stay uncovered.
TEST(SystemBinaryDetails, LibcPltIsPcMaskAndVforkNeedsVersion3) {
  const std::string path = "/lib/x86_64-linux-gnu/libc.so.6";
  if (!exists(path)) GTEST_SKIP();
  const GeneratedSframe g = sframe::generate_sframe(path);
  EXPECT_EQ(g.version, 3);
  GenerateOptions no3;
  no3.allow_v3 = false;
  const GeneratedSframe g2 = sframe::generate_sframe(path, no3);
  EXPECT_EQ(g2.version, 2);
  const auto it = g2.stats.uncovered_reasons.find("RA in a register or not at CFA-8 (v3 only)");
  ASSERT_NE(it, g2.stats.uncovered_reasons.end());
  EXPECT_GT(it->second, 0u);
  EXPECT_EQ(g.stats.rows_uncovered + it->second, g2.stats.rows_uncovered);
  // Every 16th PC and every FRE boundary is enough to see the PLT.
  const sftest::DwarfCheck c = sftest::check_against_dwarf(path, g, 16);
  EXPECT_EQ(c.disagreements, 0u);
  EXPECT_GT(c.pcmask_pcs, 0u);
  EXPECT_GT(c.outermost_pcs, 0u);  // clone's and clone3's child: RA undefined
}

// Forcing version 3 changes the encoding, not the rows.
TEST(SystemBinaryDetails, Version3ForcedCoversTheSame) {
  const std::string path = "/lib/x86_64-linux-gnu/libc.so.6";
  if (!exists(path)) GTEST_SKIP();
  const GeneratedSframe v2 = sframe::generate_sframe(path);
  GenerateOptions o;
  o.version = 3;
  const GeneratedSframe v3 = sframe::generate_sframe(path, o);
  EXPECT_EQ(v3.version, 3);
  EXPECT_EQ(v3.stats.covered_bytes, v2.stats.covered_bytes);
  EXPECT_EQ(v3.stats.rows_uncovered, v2.stats.rows_uncovered);
  const sftest::DwarfCheck c = sftest::check_against_dwarf(path, v3, 13);
  expect_agreement(path + " (v3)", v3, c, 13);
}

// ld.so realigns its stack in _dl_runtime_resolve_* and _dl_tlsdesc_dynamic_*
// (CFA = RBX + 56, a v3 flexible FDE); without v3 those rows stay uncovered
// and say why.
TEST(SystemBinaryDetails, LdSoNeedsVersion3ForItsTrampolines) {
  const std::string path = "/lib64/ld-linux-x86-64.so.2";
  if (!exists(path)) GTEST_SKIP();
  const GeneratedSframe v3 = sframe::generate_sframe(path);
  EXPECT_EQ(v3.version, 3);
  const sftest::DwarfCheck c3 = sftest::check_against_dwarf(path, v3, 1);
  EXPECT_GT(c3.flex_pcs, 0u);
  GenerateOptions o;
  o.allow_v3 = false;
  const GeneratedSframe v2 = sframe::generate_sframe(path, o);
  print_stats(path + " (no v3)", v2);
  EXPECT_EQ(v2.version, 2);
  EXPECT_LT(v2.stats.covered_bytes, v3.stats.covered_bytes);
  uint64_t v3_only = 0;
  for (const auto& [why, n] : v2.stats.uncovered_reasons) {
    if (why.find("(v3 only)") != std::string::npos) v3_only += n;
  }
  // v3 also leaves _dl_fixup's pushes before RBX uncovered (the call
  // bridges' callee: LdSoTrampolinesBridgeTheirCallToDlFixup).
  const auto prologue = v3.stats.uncovered_reasons.find(
      "before the save of a register its caller's CFA is in (a call bridge's callee)");
  ASSERT_NE(prologue, v3.stats.uncovered_reasons.end());
  EXPECT_EQ(v2.stats.rows_uncovered - v3_only, v3.stats.rows_uncovered - prologue->second);
  const sftest::DwarfCheck c2 = sftest::check_against_dwarf(path, v2, 1);
  expect_agreement(path + " (no v3)", v2, c2, 1);
  EXPECT_EQ(c2.flex_pcs, 0u);
}

// ld.so's lazy-binding trampolines (_dl_runtime_resolve_fxsave, _xsave and
// _xsavec) keep CFA = RBX + 32 across `call _dl_fixup`, which pushes RBX in
// its prologue: each call gets a bridge (CFA = *(RSP + k) + 32 for the
// call's last four bytes, k where _dl_fixup saves RBX), all to the same
// callee, and libdw agrees with every bridge PC and with the callee's save.
TEST(SystemBinaryDetails, LdSoTrampolinesBridgeTheirCallToDlFixup) {
  const std::string path = "/lib64/ld-linux-x86-64.so.2";
  if (!exists(path)) GTEST_SKIP();
  const GeneratedSframe g = sframe::generate_sframe(path);
  ASSERT_GE(g.stats.call_bridges.size(), 3u);
  std::set<uint64_t> callees;
  for (const auto& b : g.stats.call_bridges) {
    std::printf("[ bridge   ] 0x%" PRIx64 "..0x%" PRIx64 " -> 0x%" PRIx64
                ": CFA = *(RSP%+d) + %d (r%u)\n",
                b.start, b.end, b.callee, b.save_offset, b.cfa_offset, b.reg);
    EXPECT_EQ(b.end - b.start, 4u);
    EXPECT_EQ(b.reg, 3);
    EXPECT_LT(b.save_offset, 0);
    if (b.cfa_offset == 32) callees.insert(b.callee);
  }
  EXPECT_EQ(callees.size(), 1u) << "the three resolvers call one _dl_fixup";
  const sftest::DwarfCheck c = sftest::check_against_dwarf(path, g, 1);
  EXPECT_EQ(c.bridge_pcs, 4 * g.stats.call_bridges.size());
  expect_agreement(path, g, c, 1);
}

// The VM test's realigning assembly (tests/vm/workloads/realign_asm.S):
// CFA = *(RSP + 40), GCC's DRAP CFA = *(RBP - 8) and perlasm's
// *(RSP + 40) + 8 (with this project's extension) become v3 flexible rows
// that agree with libdw at every PC.  Without the extension perlasm's row is
// the one left, counted with its reason and its bytes.
TEST(CfaExpressions, RealignedAssemblyAgreesWithDwarf) {
  const std::string path = prog("gen_realign");
  const GeneratedSframe x = sframe::generate_sframe(path);
  print_stats("gen_realign", x);
  EXPECT_EQ(x.version, 3);
  const sftest::DwarfCheck cx = sftest::check_against_dwarf(path, x, 1);
  expect_agreement(path, x, cx, 1);
  EXPECT_GT(cx.flex_pcs, 0u);
  EXPECT_EQ(x.stats.rows_uncovered, 0u);
  EXPECT_EQ(x.stats.rows_cfa_addend, 1u);
  EXPECT_EQ(x.stats.covered_bytes, x.stats.fde_bytes);

  sframe::GenerateOptions standard;
  standard.cfa_addend = false;
  const GeneratedSframe g = sframe::generate_sframe(path, standard);
  EXPECT_EQ(g.version, 3);
  const sftest::DwarfCheck c = sftest::check_against_dwarf(path, g, 1);
  expect_agreement(path, g, c, 1);
  const char* why = "CFA = *(register + offset) + constant (v3 with this project's extension only)";
  ASSERT_EQ(g.stats.uncovered_rows.size(), 1u);
  EXPECT_EQ(g.stats.uncovered_rows[0].reason, why);
  EXPECT_EQ(g.stats.uncovered_reasons.at(why), 1u);
  EXPECT_EQ(g.stats.rows_uncovered, 1u);
  EXPECT_EQ(g.stats.fdes_partial, 1u);
  EXPECT_EQ(g.stats.covered_bytes + (g.stats.uncovered_rows[0].end - g.stats.uncovered_rows[0].start),
            g.stats.fde_bytes);
}

// --- Test programs: libdw and gas ---------------------------------------

struct Prog {
  const char* name;
  uint8_t version;  // expected
  // PCs where gas's (here ld's) section is wrong: the IBT PLT of ld 2.40.
  uint64_t ld_wrong = 0;
};

void PrintTo(const Prog& p, std::ostream* os) { *os << p.name; }

class TestProgram : public ::testing::TestWithParam<Prog> {};

TEST_P(TestProgram, AgreesWithDwarfAndWithGas) {
  const std::string path = prog(GetParam().name);
  const GeneratedSframe g = sframe::generate_sframe(path);
  print_stats(GetParam().name, g);
  EXPECT_EQ(g.version, GetParam().version);
  const sftest::DwarfCheck c = sftest::check_against_dwarf(path, g, 1);
  expect_agreement(path, g, c, 1);
  EXPECT_EQ(g.stats.fdes_covered, g.stats.fdes);

  const sftest::AsCompare a = sftest::compare_with_assembler(path, g);
  ASSERT_EQ(a.init, 0);
  std::printf("[ gas      ] %s: %" PRIu64 " text PCs, %" PRIu64 " covered by both (%" PRIu64
              " disagree), %" PRIu64 " by the generated section only, %" PRIu64 " by gas's only\n",
              GetParam().name, a.pcs, a.both, a.disagreements, a.generated_only, a.as_only);
  for (const auto& [fn, n] : a.generated_only_functions) {
    std::printf("[ gas      ]   generated only: %s (%" PRIu64 " bytes)\n", fn.c_str(), n);
  }
  for (const auto& [fn, n] : a.as_only_functions) {
    std::printf("[ gas      ]   gas only: %s (%" PRIu64 " bytes)\n", fn.c_str(), n);
  }
  if (GetParam().ld_wrong == 0) {
    for (const std::string& e : a.examples) ADD_FAILURE() << e;
  }
  EXPECT_EQ(a.disagreements, GetParam().ld_wrong);
  // Only in the PLT sections, which have no symbols.
  for (const auto& [fn, n] : a.disagreement_functions) EXPECT_EQ(fn, "(no symbol)") << n;
  EXPECT_GT(a.both, 0u);
  // gas covers nothing the generator does not: everything it writes comes
  // from the same CFI.
  EXPECT_EQ(a.as_only, 0u);
}

// ld 2.40 writes the IBT PLT's SFrame with the non-IBT threshold (11
// instead of 9: offsets 9 and 10 of its 4 entries), and PLT0's rows for the
// first 16 bytes of .plt.sec, where the CFA is RSP + 8 (endbr64; jmp).  The
// generated rows there are libdw's, and the code's.
INSTANTIATE_TEST_SUITE_P(
    Gas, TestProgram,
    ::testing::Values(Prog{"gen_shapes_O2", 2}, Prog{"gen_shapes_fp", 2}, Prog{"gen_shapes_O0", 2},
                      Prog{"gen_shapes_so", 2}, Prog{"gen_shapes_ibt", 2, 4 * 2 + 16},
                      Prog{"gen_many_funcs", 2}, Prog{"gen_drap", 3}, Prog{"gen_cxx", 2}),
    [](const ::testing::TestParamInfo<Prog>& info) { return std::string(info.param.name); });

// What gas 2.40 leaves out and the generator covers, function by function.
TEST(TestProgramDetails, GeneratorCoversWhatGasSkips) {
  {
    const std::string path = prog("gen_drap");
    const GeneratedSframe g = sframe::generate_sframe(path);
    const sftest::AsCompare a = sftest::compare_with_assembler(path, g);
    // DRAP (CFA in R10, then *(RBP - 16)) and .cfi_escape.
    EXPECT_GT(a.generated_only_functions.count("drap_vla"), 0u);
    EXPECT_GT(a.generated_only_functions.count("drap_calls"), 0u);
    EXPECT_GT(a.generated_only_functions.count("escaped"), 0u);
    // _start: crt1.o has CFI but no .sframe; its RA is undefined.
    EXPECT_GT(a.generated_only_functions.count("_start"), 0u);
    const sftest::DwarfCheck c = sftest::check_against_dwarf(path, g, 1);
    EXPECT_GT(c.flex_pcs, 0u);
    EXPECT_GT(c.outermost_pcs, 0u);
    EXPECT_EQ(g.build_id, "0123456789abcdef0123456789abcdef01234567");
  }
  {
    const std::string path = prog("gen_cxx");
    const GeneratedSframe g = sframe::generate_sframe(path);
    const sftest::AsCompare a = sftest::compare_with_assembler(path, g);
    // DW_CFA_GNU_args_size around the calls with stack arguments.
    EXPECT_GT(a.generated_only_functions.count("_Z14with_args_sizel"), 0u);
  }
}

}  // namespace
