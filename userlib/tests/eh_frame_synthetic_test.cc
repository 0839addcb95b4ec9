// SFrame generation from hand-made .eh_frame bytes (every rule the generator
// maps, every reason it leaves rows uncovered), from malformed .eh_frame and
// ELF files (an errno, never a crash: the sanitized build runs these under
// ASan and UBSan), and the options.
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "sframe_gen/eh_frame.h"
#include "sframe_client/error.h"
#include "sframe_client/sframe_format.h"
#include "sframe_test/errno_of.h"
#include "sframe_source_mem.h"

namespace {

using sframe::GeneratedSframe;
using sframe::GenerateOptions;

// --- A writer of .eh_frame ------------------------------------------------

void uleb(std::vector<uint8_t>& b, uint64_t v) {
  do {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    if (v) byte |= 0x80;
    b.push_back(byte);
  } while (v);
}

void sleb(std::vector<uint8_t>& b, int64_t v) {
  bool more = true;
  while (more) {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    more = !((v == 0 && !(byte & 0x40)) || (v == -1 && (byte & 0x40)));
    if (more) byte |= 0x80;
    b.push_back(byte);
  }
}

void le(std::vector<uint8_t>& b, uint64_t v, int n) {
  for (int i = 0; i < n; i++) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

constexpr uint8_t kDefaultCieInsns[] = {0x0c, 0x07, 0x08, 0x90, 0x01};

struct Cie {
  uint8_t version = 1;
  std::string aug = "zR";
  uint8_t fde_enc = 0x1b;  // pcrel | sdata4
  int64_t data_align = -8;
  uint64_t ra = 16;
  // CFA = RSP + 8, RA at CFA - 8.
  std::vector<uint8_t> insns = std::vector<uint8_t>(kDefaultCieInsns, kDefaultCieInsns + 5);
  std::vector<uint8_t> aug_data;  // overrides what aug implies
  bool length64 = false;
};

struct Fde {
  Fde(uint64_t s, uint64_t n, std::vector<uint8_t> i = {}, size_t c = 0,
      std::vector<uint8_t> a = {})
      : start(s), size(n), insns(std::move(i)), cie(c), aug_data(std::move(a)) {}
  uint64_t start;
  uint64_t size;
  std::vector<uint8_t> insns;
  size_t cie;
  std::vector<uint8_t> aug_data;  // with 'z'
  bool length64 = false;
};

constexpr uint64_t kEhVaddr = 0x20000;
constexpr uint64_t kText = 0x1000;
constexpr uint64_t kTextLen = 0x18000;

std::vector<uint8_t> build(const std::vector<Cie>& cies, const std::vector<Fde>& fdes) {
  std::vector<uint8_t> b;
  std::vector<size_t> cie_off;
  auto entry = [&](bool len64, const std::vector<uint8_t>& body, bool is_cie, size_t cie_at) {
    const size_t start = b.size();
    const size_t id_size = len64 ? 8 : 4;
    const uint64_t len = id_size + body.size();
    if (len64) {
      le(b, 0xffffffff, 4);
      le(b, len, 8);
    } else {
      le(b, len, 4);
    }
    const size_t id_at = b.size();
    le(b, is_cie ? 0 : id_at - cie_at, static_cast<int>(id_size));
    b.insert(b.end(), body.begin(), body.end());
    return start;
  };
  for (const Cie& c : cies) {
    std::vector<uint8_t> body;
    body.push_back(c.version);
    body.insert(body.end(), c.aug.begin(), c.aug.end());
    body.push_back(0);
    uleb(body, 1);
    sleb(body, c.data_align);
    if (c.version == 1) {
      body.push_back(static_cast<uint8_t>(c.ra));
    } else {
      uleb(body, c.ra);
    }
    if (!c.aug.empty() && c.aug[0] == 'z') {
      std::vector<uint8_t> ad = c.aug_data;
      if (ad.empty() && c.aug.find('R') != std::string::npos) ad.push_back(c.fde_enc);
      uleb(body, ad.size());
      body.insert(body.end(), ad.begin(), ad.end());
    }
    body.insert(body.end(), c.insns.begin(), c.insns.end());
    cie_off.push_back(entry(c.length64, body, true, 0));
  }
  for (const Fde& f : fdes) {
    // pc_begin is PC-relative: it needs the field's own address.
    const size_t start = b.size();
    const size_t field = start + (f.length64 ? 12 : 4) + (f.length64 ? 8 : 4);
    std::vector<uint8_t> body;
    le(body, f.start - (kEhVaddr + field), 4);
    le(body, f.size, 4);
    if (!cies[f.cie].aug.empty() && cies[f.cie].aug[0] == 'z') {
      uleb(body, f.aug_data.size());
      body.insert(body.end(), f.aug_data.begin(), f.aug_data.end());
    }
    body.insert(body.end(), f.insns.begin(), f.insns.end());
    entry(f.length64, body, false, cie_off[f.cie]);
  }
  le(b, 0, 4);  // terminator
  return b;
}

GeneratedSframe gen(const std::vector<uint8_t>& eh, const GenerateOptions& o = {}) {
  return sframe::generate_sframe_from_eh_frame(eh.data(), eh.size(), kEhVaddr, kText, kTextLen, o,
                                               "test");
}

int gen_errno(const std::vector<uint8_t>& eh, const GenerateOptions& o = {}) {
  return sframe::errno_of([&] { gen(eh, o); });
}

// The generated section through the module's decoder.
class Decoded {
 public:
  explicit Decoded(const GeneratedSframe& g) : g_(g) {
    sframe_source_mem_init(&src_, g_.bytes.data(), g_.bytes.size());
    init_ = sframe_section_init(&sec_, &src_, g_.section_vaddr, g_.bytes.size());
    if (init_ == 0) valid_ = sframe_validate(&sec_, g_.text_vaddr, g_.text_len);
  }
  bool ok() const { return init_ == 0 && valid_ == 0; }
  std::optional<sframe_row> row(uint64_t pc) const {
    sframe_row r;
    if (sframe_find_row(&sec_, pc, &r) != 0) return std::nullopt;
    return r;
  }
  std::optional<sframe_fde> fde(uint64_t pc) const {
    sframe_fde f;
    if (sframe_find_fde(&sec_, pc, &f) != 0) return std::nullopt;
    return f;
  }
  const sframe_section& sec() const { return sec_; }

 private:
  const GeneratedSframe& g_;
  sframe_source src_;
  sframe_section sec_;
  int init_ = -1;
  int valid_ = -1;
};

void expect_sp(const std::optional<sframe_row>& r, int32_t off, const char* what) {
  ASSERT_TRUE(r.has_value()) << what;
  EXPECT_FALSE(r->outermost) << what;
  EXPECT_EQ(r->cfa_reg, SFRAME_REG_RSP) << what;
  EXPECT_FALSE(r->cfa_deref) << what;
  EXPECT_EQ(r->cfa_offset, off) << what;
}

uint64_t reason(const GeneratedSframe& g, const std::string& why) {
  auto it = g.stats.uncovered_reasons.find(why);
  return it == g.stats.uncovered_reasons.end() ? 0 : it->second;
}

constexpr char kDerefAddend[] =
    "CFA = *(register + offset) + constant (v3 with this project's extension only)";

// Options that leave out this project's extension (kFlagXCfaAddend).
GenerateOptions standard() {
  GenerateOptions o;
  o.cfa_addend = false;
  return o;
}

// --- Rules mapped ----------------------------------------------------------

TEST(GenerateSynthetic, PushFrameAndPop) {
  // push %rbp; mov %rsp,%rbp; ...; pop %rbp; ret
  const Fde f{0x1000,
              0x20,
              {0x41, 0x0e, 0x10, 0x86, 0x02,  // +1: CFA = RSP+16, RBP at CFA-16
               0x43, 0x0d, 0x06,              // +3: CFA = RBP+16
               0x50, 0x0c, 0x07, 0x08}};      // +16: CFA = RSP+8
  const GeneratedSframe g = gen(build({Cie{}}, {f}));
  EXPECT_EQ(g.version, 2);
  EXPECT_EQ(g.stats.fdes, 1u);
  EXPECT_EQ(g.stats.fdes_covered, 1u);
  EXPECT_EQ(g.stats.rows, 4u);
  EXPECT_EQ(g.stats.covered_bytes, 0x20u);
  EXPECT_EQ(g.section_vaddr, kText);
  Decoded d(g);
  ASSERT_TRUE(d.ok());
  expect_sp(d.row(0x1000), 8, "entry");
  EXPECT_EQ(d.row(0x1000)->fp.kind, SFRAME_LOC_SAME);
  expect_sp(d.row(0x1003), 16, "after push");
  EXPECT_EQ(d.row(0x1003)->fp.kind, SFRAME_LOC_CFA_OFFSET);
  EXPECT_EQ(d.row(0x1003)->fp.offset, -16);
  auto body = d.row(0x1010);
  ASSERT_TRUE(body);
  EXPECT_EQ(body->cfa_reg, SFRAME_REG_RBP);
  EXPECT_EQ(body->cfa_offset, 16);
  expect_sp(d.row(0x101f), 8, "after pop");
  EXPECT_FALSE(d.row(0x1020));
  EXPECT_FALSE(d.row(0xfff));
}

TEST(GenerateSynthetic, RememberAndRestoreState) {
  const Fde f{0x1000,
              0x30,
              {0x41, 0x0e, 0x10,  // +1: RSP+16
               0x0a,              // remember
               0x41, 0x0e, 0x08,  // +1: RSP+8 (an early return)
               0x41, 0x0b,        // +1: restore: RSP+16
               0x4a, 0x0e, 0x08}};
  const GeneratedSframe g = gen(build({Cie{}}, {f}));
  Decoded d(g);
  ASSERT_TRUE(d.ok());
  expect_sp(d.row(0x1001), 16, "pushed");
  expect_sp(d.row(0x1002), 8, "early return");
  expect_sp(d.row(0x1003), 16, "restored");
  expect_sp(d.row(0x100c), 16, "restored, end");
  expect_sp(d.row(0x100d), 8, "final");
}

TEST(GenerateSynthetic, UndefinedReturnAddressIsOutermost) {
  const Fde f{0x1000, 0x10, {0x07, 0x10}};  // DW_CFA_undefined rip
  const GeneratedSframe g = gen(build({Cie{}}, {f}));
  EXPECT_EQ(g.stats.fdes_covered, 1u);
  Decoded d(g);
  ASSERT_TRUE(d.ok());
  auto r = d.row(0x1008);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->outermost);
}

// ld's PLT rule: CFA = RSP + 8 + ((RIP & 15) >= 11 ? 8 : 0), here from an
// address that is not 16-aligned: ordinary rows up to the first block, a
// PC-mask FDE from there.
TEST(GenerateSynthetic, PltExpressionBecomesPcMask) {
  const std::vector<uint8_t> plt = {0x0f, 0x0b, 0x77, 0x08, 0x80, 0x00, 0x3f,
                                    0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22};
  const Fde f{0x2004, 0x44, plt};
  const GeneratedSframe g = gen(build({Cie{}}, {f}));
  EXPECT_EQ(g.stats.fdes_covered, 1u);
  Decoded d(g);
  ASSERT_TRUE(d.ok());
  for (uint64_t pc = 0x2004; pc < 0x2048; pc++) {
    expect_sp(d.row(pc), 8 + ((pc & 15) >= 11 ? 8 : 0), "PLT");
  }
  auto head = d.fde(0x2004);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->pc_type, SFRAME_PC_INC);
  auto body = d.fde(0x2010);
  ASSERT_TRUE(body);
  EXPECT_EQ(body->pc_type, SFRAME_PC_MASK);
  EXPECT_EQ(body->rep_size, 16);
  EXPECT_EQ(body->func_start, 0x2010u);
  EXPECT_EQ(body->num_fres, 2u);
  // A last block shorter than the threshold: its FDE has one row (found by
  // the fuzzer: an FRE past the end of its function does not validate).
  const GeneratedSframe g1 = gen(build({Cie{}}, {Fde{0x2004, 0xe, plt}}));
  Decoded d1(g1);
  ASSERT_TRUE(d1.ok());
  for (uint64_t pc = 0x2004; pc < 0x2012; pc++) {
    expect_sp(d1.row(pc), 8 + ((pc & 15) >= 11 ? 8 : 0), "short PLT");
  }
  EXPECT_FALSE(d1.row(0x2012));
  // IBT PLT (threshold 10).
  const std::vector<uint8_t> ibt = {0x0f, 0x0b, 0x77, 0x08, 0x80, 0x00, 0x3f,
                                    0x1a, 0x3a, 0x2a, 0x33, 0x24, 0x22};
  const GeneratedSframe g2 = gen(build({Cie{}}, {Fde{0x3000, 0x40, ibt}}));
  Decoded d2(g2);
  ASSERT_TRUE(d2.ok());
  for (uint64_t pc = 0x3000; pc < 0x3040; pc++) {
    expect_sp(d2.row(pc), 8 + ((pc & 15) >= 10 ? 8 : 0), "IBT PLT");
  }
}

// DRAP: CFA = R10 (v3 flexible), then CFA = *(RBP - 16) with RBP saved at
// *(RBP + 0); the version follows unless v3 is not allowed.
TEST(GenerateSynthetic, DrapNeedsFlexibleFdes) {
  const Fde f{0x1000, 0x40, {0x44, 0x0c, 0x0a, 0x00,              // +4: CFA = R10 + 0
                             0x48, 0x10, 0x06, 0x02, 0x76, 0x00,  // +8: RBP at *(RBP + 0)
                             0x0f, 0x03, 0x76, 0x70, 0x06,        // CFA = *(RBP - 16)
                             0x60, 0x0c, 0x0a, 0x00, 0xc6,        // +32: CFA = R10, RBP restored
                             0x44, 0x0c, 0x07, 0x08}};            // +4: CFA = RSP + 8
  const GeneratedSframe g = gen(build({Cie{}}, {f}));
  EXPECT_EQ(g.version, 3);
  EXPECT_EQ(g.stats.fdes_covered, 1u);
  Decoded d(g);
  ASSERT_TRUE(d.ok());
  auto f0 = d.fde(0x1000);
  ASSERT_TRUE(f0);
  EXPECT_EQ(f0->flex, 1);
  expect_sp(d.row(0x1000), 8, "entry");
  auto r10 = d.row(0x1004);
  ASSERT_TRUE(r10);
  EXPECT_EQ(r10->cfa_reg, 10);
  EXPECT_EQ(r10->cfa_offset, 0);
  EXPECT_FALSE(r10->cfa_deref);
  EXPECT_EQ(r10->fp.kind, SFRAME_LOC_SAME);
  auto body = d.row(0x100c);
  ASSERT_TRUE(body);
  EXPECT_EQ(body->cfa_reg, SFRAME_REG_RBP);
  EXPECT_TRUE(body->cfa_deref);
  EXPECT_EQ(body->cfa_offset, -16);
  EXPECT_EQ(body->ra.kind, SFRAME_LOC_CFA_OFFSET);
  EXPECT_EQ(body->ra.offset, -8);
  EXPECT_EQ(body->fp.kind, SFRAME_LOC_REG_OFFSET);
  EXPECT_EQ(body->fp.reg, SFRAME_REG_RBP);
  EXPECT_TRUE(body->fp.deref);
  EXPECT_EQ(body->fp.offset, 0);
  expect_sp(d.row(0x103f), 8, "epilogue");

  GenerateOptions no3;
  no3.allow_v3 = false;
  const GeneratedSframe g2 = gen(build({Cie{}}, {f}), no3);
  EXPECT_EQ(g2.version, 2);
  EXPECT_EQ(g2.stats.fdes_partial, 1u);
  EXPECT_EQ(reason(g2, "CFA register not RSP/RBP (v3 only)"), 2u);
  EXPECT_EQ(reason(g2, "CFA = *(register + offset) (v3 only)"), 1u);
  Decoded d2(g2);
  ASSERT_TRUE(d2.ok());
  expect_sp(d2.row(0x1000), 8, "v2 entry");
  EXPECT_FALSE(d2.row(0x1004));
  EXPECT_FALSE(d2.row(0x100c));
  expect_sp(d2.row(0x103f), 8, "v2 epilogue");
}

// A CFA loaded from the stack, as stack-realigning assembly writes it with
// .cfi_escape: *(reg + offset) (constants added before the load fold into
// the offset, a zero added after it is no addend) is a v3 flexible row that
// the decoder gives back as it was; *(reg + offset) + 8, OpenSSL's perlasm
// form, has no v3 rule and is counted, row by row, with its bytes.
TEST(GenerateSynthetic, LoadedCfaForms) {
  struct Case {
    std::vector<uint8_t> expr;  // DW_CFA_def_cfa_expression's block
    uint8_t reg;
    int32_t offset;
  };
  const Case covered[] = {
      {{0x77, 0x28, 0x06}, SFRAME_REG_RSP, 40},                    // breg7 40; deref
      {{0x77, 0x20, 0x23, 0x08, 0x06}, SFRAME_REG_RSP, 40},        // breg7 32; +8; deref
      {{0x77, 0x28, 0x06, 0x23, 0x00}, SFRAME_REG_RSP, 40},        // breg7 40; deref; +0
      {{0x76, 0x78, 0x06}, SFRAME_REG_RBP, -8},                    // breg6 -8; deref (gas)
      {{0x77, 0xc0, 0x00, 0x06}, SFRAME_REG_RSP, 64},              // breg7 64 (2 bytes)
      {{0x73, 0x10, 0x06}, 3, 16},                                 // breg3 16; deref
  };
  for (const Case& c : covered) {
    SCOPED_TRACE(::testing::PrintToString(c.expr));
    std::vector<uint8_t> insns = {0x41, 0x0f};
    insns.push_back(static_cast<uint8_t>(c.expr.size()));
    insns.insert(insns.end(), c.expr.begin(), c.expr.end());
    insns.insert(insns.end(), {0x86, 0x03});  // RBP at CFA - 24
    const GeneratedSframe g = gen(build({Cie{}}, {Fde{0x1000, 0x10, insns}}));
    EXPECT_EQ(g.version, 3);
    EXPECT_EQ(g.stats.rows_uncovered, 0u);
    EXPECT_TRUE(g.stats.uncovered_rows.empty());
    Decoded d(g);
    ASSERT_TRUE(d.ok());
    auto f = d.fde(0x1001);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->flex, 1);
    for (uint64_t pc = 0x1001; pc < 0x1010; pc++) {
      auto r = d.row(pc);
      ASSERT_TRUE(r);
      EXPECT_EQ(r->cfa_reg, c.reg);
      EXPECT_TRUE(r->cfa_deref);
      EXPECT_EQ(r->cfa_offset, c.offset);
      EXPECT_EQ(r->ra.kind, SFRAME_LOC_CFA_OFFSET);
      EXPECT_EQ(r->ra.offset, -8);
      EXPECT_EQ(r->fp.kind, SFRAME_LOC_CFA_OFFSET);
      EXPECT_EQ(r->fp.offset, -24);
    }
  }

  // Not without v3.
  GenerateOptions no3;
  no3.allow_v3 = false;
  const GeneratedSframe g2 =
      gen(build({Cie{}}, {Fde{0x1000, 0x10, {0x41, 0x0f, 0x03, 0x77, 0x28, 0x06}}}), no3);
  EXPECT_EQ(reason(g2, "CFA = *(register + offset) (v3 only)"), 1u);

  // perlasm: mov %rsp,%rax (CFA = RAX + 8) ... and $-64,%rsp; mov %rax,16(%rsp)
  // (CFA = *(RSP + 16) + 8) ... mov 16(%rsp),%rsi (CFA = RSI + 8) ... ret.
  const Fde perl{0x2000,
                 0x40,
                 {0x43, 0x0c, 0x00, 0x08,                          // +3: CFA = RAX + 8
                  0x4d, 0x0f, 0x05, 0x77, 0x10, 0x06, 0x23, 0x08,  // +13: *(RSP+16)+8
                  0x60, 0x0c, 0x04, 0x08,                          // +32: CFA = RSI + 8
                  0x48, 0x0c, 0x07, 0x08}};                        // +8: CFA = RSP + 8
  // With the extension every row is covered; the section says so in its
  // header (libsframe refuses it).
  const GeneratedSframe x = gen(build({Cie{}}, {perl}));
  EXPECT_EQ(x.version, 3);
  EXPECT_EQ(x.stats.rows_uncovered, 0u);
  EXPECT_EQ(x.stats.rows_cfa_addend, 1u);
  EXPECT_EQ(x.stats.covered_bytes, 0x40u);
  EXPECT_EQ(x.bytes[3] & sframe::kFlagXCfaAddend, sframe::kFlagXCfaAddend);
  Decoded dx(x);
  ASSERT_TRUE(dx.ok());
  for (uint64_t pc : {0x2010u, 0x202fu}) {
    auto r = dx.row(pc);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->cfa_reg, SFRAME_REG_RSP);
    EXPECT_TRUE(r->cfa_deref);
    EXPECT_EQ(r->cfa_offset, 16);
    EXPECT_EQ(r->cfa_addend, 8);
  }
  EXPECT_EQ(dx.row(0x2030)->cfa_addend, 0);

  // Without it, the row stays uncovered and the header standard.
  const GeneratedSframe g = gen(build({Cie{}}, {perl}), standard());
  EXPECT_EQ(g.version, 3);
  EXPECT_EQ(g.bytes[3] & sframe::kFlagXCfaAddend, 0);
  EXPECT_EQ(g.stats.rows_cfa_addend, 0u);
  EXPECT_EQ(g.stats.fdes_partial, 1u);
  EXPECT_EQ(reason(g, kDerefAddend), 1u);
  EXPECT_EQ(g.stats.uncovered_reason_bytes.at(kDerefAddend), 32u);
  ASSERT_EQ(g.stats.uncovered_rows.size(), 1u);
  EXPECT_EQ(g.stats.uncovered_rows[0].start, 0x2010u);
  EXPECT_EQ(g.stats.uncovered_rows[0].end, 0x2030u);
  EXPECT_EQ(g.stats.uncovered_rows[0].fde_start, 0x2000u);
  EXPECT_EQ(g.stats.uncovered_rows[0].reason, kDerefAddend);
  EXPECT_EQ(g.stats.covered_bytes, 0x40u - 32u);
  Decoded d(g);
  ASSERT_TRUE(d.ok());
  auto rax = d.row(0x2003);
  ASSERT_TRUE(rax);
  EXPECT_EQ(rax->cfa_reg, 0);
  EXPECT_EQ(rax->cfa_offset, 8);
  EXPECT_FALSE(d.row(0x2010));
  EXPECT_FALSE(d.row(0x202f));
  auto rsi = d.row(0x2030);
  ASSERT_TRUE(rsi);
  EXPECT_EQ(rsi->cfa_reg, 4);
  expect_sp(d.row(0x2038), 8, "after the epilogue");
}

TEST(GenerateSynthetic, FramePointerInARegister) {
  const Fde f{0x1000, 0x10, {0x42, 0x09, 0x06, 0x03}};  // +2: RBP in RBX
  const GeneratedSframe g = gen(build({Cie{}}, {f}));
  EXPECT_EQ(g.version, 3);
  Decoded d(g);
  ASSERT_TRUE(d.ok());
  auto r = d.row(0x1004);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->fp.kind, SFRAME_LOC_REG_OFFSET);
  EXPECT_EQ(r->fp.reg, 3);
  EXPECT_FALSE(r->fp.deref);
}

TEST(GenerateSynthetic, SignalFramesNeedVersion3) {
  Cie s;
  s.aug = "zRS";
  const GeneratedSframe g = gen(build({s}, {Fde{0x1000, 0x10, {}}}));
  EXPECT_EQ(g.version, 3);
  Decoded d(g);
  ASSERT_TRUE(d.ok());
  auto r = d.row(0x1000);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->signal_frame);
  GenerateOptions no3;
  no3.allow_v3 = false;
  const GeneratedSframe g2 = gen(build({s}, {Fde{0x1000, 0x10, {}}}), no3);
  EXPECT_EQ(g2.version, 2);
  EXPECT_EQ(reason(g2, "signal frame (v3 only)"), 1u);
  EXPECT_EQ(g2.stats.fdes_uncovered, 1u);
}

TEST(GenerateSynthetic, CieVariants) {
  // Version 3 (ULEB128 RA column), 64-bit lengths, 'zPLR' with an aligned
  // personality pointer and an LSDA in the FDE's augmentation data.
  Cie v3;
  v3.version = 3;
  v3.length64 = true;
  Cie plr;
  plr.aug = "zPLR";
  plr.aug_data = {0x9b, 0x00, 0x00, 0x00, 0x00, 0x1b, 0x1b};  // P: indirect pcrel sdata4
  Fde a{0x1000, 0x10, {0x41, 0x0e, 0x10}, 0};
  a.length64 = true;
  Fde b{0x1100, 0x10, {0x41, 0x0e, 0x10}, 1, {0, 0, 0, 0}};
  const GeneratedSframe g = gen(build({v3, plr}, {a, b}));
  EXPECT_EQ(g.stats.fdes, 2u);
  EXPECT_EQ(g.stats.fdes_covered, 2u);
  Decoded d(g);
  ASSERT_TRUE(d.ok());
  expect_sp(d.row(0x1001), 16, "v3 CIE");
  expect_sp(d.row(0x1101), 16, "zPLR CIE");
  // An unknown augmentation letter after 'z': the rest of the data is
  // skipped, what was read before it ('R') holds.
  Cie odd;
  odd.aug = "zRX";
  odd.aug_data = {0x1b, 0x55};
  const GeneratedSframe g2 = gen(build({odd}, {Fde{0x1000, 0x10, {}}}));
  EXPECT_EQ(g2.stats.fdes_covered, 1u);
}

// --- Rows left uncovered -----------------------------------------------------

TEST(GenerateSynthetic, UncoveredRowsSayWhy) {
  struct Case {
    std::vector<uint8_t> insns;
    const char* why;
  };
  const Case cases[] = {
      {{0x41, 0x90, 0x02}, nullptr},                 // RA at CFA-16: covered (v3)
      {{0x41, 0x08, 0x10}, "RA rule of another form"},  // RA same value
      {{0x41, 0x09, 0x10, 0x11}, "RA rule of another form"},  // RA in xmm0
      {{0x41, 0x14, 0x07, 0x01}, "SP rule"},         // RSP = CFA - 8
      {{0x41, 0x07, 0x06}, "FP undefined"},          // RBP undefined
      {{0x41, 0x14, 0x06, 0x01}, "FP rule"},         // RBP = CFA - 8
      {{0x41, 0x10, 0x06, 0x01, 0x9c}, "FP rule"},   // RBP at DW_OP_call_frame_cfa
      {{0x41, 0x0f, 0x02, 0x77, 0x00}, nullptr},     // CFA = [breg7 0]: covered
      {{0x41, 0x0f, 0x01, 0x9c}, "CFA expression of another form"},  // DW_OP_call_frame_cfa
      // perlasm's .cfi_cfa_expression %rsp+16,deref,+8 (sha256 and others)
      {{0x41, 0x0f, 0x05, 0x77, 0x10, 0x06, 0x23, 0x08}, kDerefAddend},
      // ...and with RBP, +64 (OpenSSL's aesni-gcm, x25519)
      {{0x41, 0x0f, 0x05, 0x76, 0x10, 0x06, 0x23, 0x40}, kDerefAddend},
      // bignum's indexed form: rsp + 8 + r9 * 8, loaded, + 8
      {{0x41, 0x0f, 0x0a, 0x77, 0x08, 0x79, 0x00, 0x38, 0x1e, 0x22, 0x06, 0x23, 0x08},
       "CFA expression of another form"},
      {{0x41, 0x0c, 0x11, 0x08}, "CFA register not a general register"},  // xmm0
      {{0x41, 0x0c, 0x07, 0x80, 0x80, 0x80, 0x80, 0x10}, "offset beyond 32 bits"},
      {{0x41, 0x3f, 0x41, 0x0e, 0x10}, "unknown CFA instruction"},
      {{0x41, 0x0b}, "DW_CFA_restore_state without remember_state"},
      {{0x41, 0x0f, 0x01, 0x9c, 0x0e, 0x10}, "CFA offset or register change on a non-offset CFA"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why ? c.why : "covered");
    const GeneratedSframe g = gen(build({Cie{}}, {Fde{0x1000, 0x10, c.insns}}), standard());
    Decoded d(g);
    ASSERT_TRUE(d.ok());
    expect_sp(d.row(0x1000), 8, "first byte");
    if (c.why == nullptr) {
      EXPECT_EQ(g.stats.rows_uncovered, 0u);
      continue;
    }
    EXPECT_EQ(g.stats.fdes_partial, 1u);
    EXPECT_EQ(reason(g, c.why), 1u);
    EXPECT_EQ(g.stats.covered_bytes, 1u);
    EXPECT_FALSE(d.row(0x1001));
    EXPECT_FALSE(d.row(0x100f));
  }
}

// glibc's __vfork: `pop %rdi` (the return address) around the system
// call, `push %rdi` after it.  Version 3 gives the return address in RDI
// (the module reads it in the topmost frame only) and at CFA-16; version 2
// leaves both uncovered.
TEST(GenerateSynthetic, ReturnAddressInARegisterOrElsewhere) {
  const Fde f{0x1000, 0x20, {0x41, 0x0e, 0x00, 0x09, 0x10, 0x05,  // +1: CFA = RSP, RA in RDI
                             0x47, 0x0e, 0x08, 0x90, 0x01,        // +7: CFA = RSP+8, RA at CFA-8
                             0x44, 0x0e, 0x10, 0x90, 0x02}};      // +4: CFA = RSP+16, RA at CFA-16
  const GeneratedSframe g = gen(build({Cie{}}, {f}));
  EXPECT_EQ(g.version, 3);
  EXPECT_EQ(g.stats.rows_uncovered, 0u);
  Decoded d(g);
  ASSERT_TRUE(d.ok());
  auto f0 = d.fde(0x1000);
  ASSERT_TRUE(f0);
  EXPECT_EQ(f0->flex, 1);
  expect_sp(d.row(0x1000), 8, "entry");
  auto popped = d.row(0x1001);
  ASSERT_TRUE(popped);
  EXPECT_EQ(popped->cfa_reg, SFRAME_REG_RSP);
  EXPECT_EQ(popped->cfa_offset, 0);
  EXPECT_EQ(popped->ra.kind, SFRAME_LOC_REG_OFFSET);
  EXPECT_EQ(popped->ra.reg, 5);
  EXPECT_FALSE(popped->ra.deref);
  EXPECT_EQ(popped->ra.offset, 0);
  EXPECT_EQ(popped->fp.kind, SFRAME_LOC_SAME);
  expect_sp(d.row(0x1008), 8, "pushed back");
  auto far = d.row(0x100c);
  ASSERT_TRUE(far);
  EXPECT_EQ(far->cfa_offset, 16);
  EXPECT_EQ(far->ra.kind, SFRAME_LOC_CFA_OFFSET);
  EXPECT_EQ(far->ra.offset, -16);

  GenerateOptions no3;
  no3.allow_v3 = false;
  const GeneratedSframe g2 = gen(build({Cie{}}, {f}), no3);
  EXPECT_EQ(g2.version, 2);
  EXPECT_EQ(reason(g2, "RA in a register or not at CFA-8 (v3 only)"), 2u);
  Decoded d2(g2);
  ASSERT_TRUE(d2.ok());
  EXPECT_FALSE(d2.row(0x1001));
  expect_sp(d2.row(0x1008), 8, "v2 pushed back");
  EXPECT_FALSE(d2.row(0x100c));
}

// glibc's lazy-binding trampoline in miniature: CFA = RBX + 32 across a
// call to a function that pushes RBX first.  The call's bytes after its
// first get CFA = *(RSP - 16) + 32 (where the callee keeps RBX, from the
// trampoline's SP once the walk has left the callee); the callee's row
// before its push is uncovered.
TEST(GenerateSynthetic, CallFromAFrameWhoseCfaIsInRbx) {
  const Fde trampoline{0x1000, 0x40, {0x0e, 0x18,               // CFA = RSP+24 (the PLT's pushes)
                                      0x41, 0x0e, 0x20, 0x83, 0x04,  // +1: push rbx
                                      0x43, 0x0d, 0x03}};            // +3: CFA = RBX+32
  const Fde callee{0x2000, 0x40, {0x41, 0x0e, 0x10, 0x83, 0x02}};    // +1: push rbx
  const Fde plain{0x3000, 0x40, {0x41, 0x0e, 0x10}};                 // saves nothing
  const std::vector<uint8_t> eh = build({Cie{}}, {trampoline, callee, plain});
  std::vector<uint8_t> text(kTextLen, 0x90);
  auto call = [&](uint64_t at, uint64_t to) {
    const uint32_t rel = static_cast<uint32_t>(to - (at + 5));
    text[at - kText] = 0xe8;
    for (int i = 0; i < 4; i++) text[at - kText + 1 + i] = static_cast<uint8_t>(rel >> (8 * i));
  };
  call(0x1010, 0x2000);  // bridged
  call(0x1020, 0x3000);  // the callee does not save RBX
  call(0x1028, 0x2004);  // not an FDE's start
  const std::vector<sframe::TextBytes> tb{{text.data(), text.size(), kText}};
  auto generate = [&](const GenerateOptions& o, bool with_text) {
    return sframe::generate_sframe_from_eh_frame(eh.data(), eh.size(), kEhVaddr, kText, kTextLen,
                                                 o, "test",
                                                 with_text ? tb : std::vector<sframe::TextBytes>{});
  };
  constexpr char kPrologue[] =
      "before the save of a register its caller's CFA is in (a call bridge's callee)";

  const GeneratedSframe g = generate({}, true);
  EXPECT_EQ(g.version, 3);
  ASSERT_EQ(g.stats.call_bridges.size(), 1u);
  const auto& b = g.stats.call_bridges[0];
  EXPECT_EQ(b.start, 0x1011u);
  EXPECT_EQ(b.end, 0x1015u);
  EXPECT_EQ(b.callee, 0x2000u);
  EXPECT_EQ(b.reg, 3);
  EXPECT_EQ(b.save_offset, -16);
  EXPECT_EQ(b.cfa_offset, 32);
  EXPECT_EQ(reason(g, kPrologue), 1u);
  Decoded d(g);
  ASSERT_TRUE(d.ok());
  auto in_rbx = [&](uint64_t pc) {
    auto r = d.row(pc);
    ASSERT_TRUE(r) << std::hex << pc;
    EXPECT_EQ(r->cfa_reg, 3) << std::hex << pc;
    EXPECT_FALSE(r->cfa_deref) << std::hex << pc;
    EXPECT_EQ(r->cfa_offset, 32) << std::hex << pc;
  };
  in_rbx(0x1004);
  in_rbx(0x1010);  // the call itself: the topmost frame has RBX
  for (uint64_t pc = 0x1011; pc < 0x1015; pc++) {
    auto r = d.row(pc);
    ASSERT_TRUE(r) << std::hex << pc;
    EXPECT_EQ(r->cfa_reg, SFRAME_REG_RSP) << std::hex << pc;
    EXPECT_TRUE(r->cfa_deref) << std::hex << pc;
    EXPECT_EQ(r->cfa_offset, -16) << std::hex << pc;
    EXPECT_EQ(r->cfa_addend, 32) << std::hex << pc;
    EXPECT_EQ(r->ra.kind, SFRAME_LOC_CFA_OFFSET) << std::hex << pc;
    EXPECT_EQ(r->ra.offset, -8) << std::hex << pc;
  }
  in_rbx(0x1015);  // returned: RBX again
  in_rbx(0x1024);  // the call to a callee that does not save RBX
  in_rbx(0x102c);  // the call to no function's start
  EXPECT_FALSE(d.row(0x2000)) << "the callee before its push";
  expect_sp(d.row(0x2001), 16, "the callee after its push");
  expect_sp(d.row(0x3000), 8, "the other callee keeps its rows");

  // Without the text, or without the extension (the rule adds 32 after
  // the load): no bridge, and the callee keeps every row.
  for (const auto& [o, with_text] : {std::make_pair(GenerateOptions{}, false),
                                     std::make_pair(standard(), true)}) {
    const GeneratedSframe n = generate(o, with_text);
    EXPECT_TRUE(n.stats.call_bridges.empty());
    EXPECT_EQ(reason(n, kPrologue), 0u);
    Decoded dn(n);
    ASSERT_TRUE(dn.ok());
    auto r = dn.row(0x1012);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->cfa_reg, 3);
    expect_sp(dn.row(0x2000), 8, "the callee's entry");
  }
}

TEST(GenerateSynthetic, OverlappingAndOutsideFdes) {
  const GeneratedSframe g =
      gen(build({Cie{}}, {Fde{0x1000, 0x20, {}}, Fde{0x1010, 0x20, {}}, Fde{0x1100, 0x10, {}},
                          Fde{0x30000, 0x10, {}}, Fde{0x1200, 0, {}}}));
  EXPECT_EQ(g.stats.fdes, 5u);
  EXPECT_EQ(g.stats.fdes_uncovered, 3u);
  EXPECT_EQ(g.stats.fdes_covered, 2u);  // one real, one empty
  EXPECT_EQ(reason(g, "overlapping FDEs"), 2u);
  EXPECT_EQ(reason(g, "outside executable text"), 1u);
  Decoded d(g);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d.row(0x1000));
  EXPECT_FALSE(d.row(0x1018));
  expect_sp(d.row(0x1100), 8, "alone");
}

// More rows than a v3 attribute record can count, or than the module takes
// in one FDE (SFRAME_MAX_FRES_PER_FDE): several SFrame FDEs.
TEST(GenerateSynthetic, HugeFunctionIsSplit) {
  const uint64_t rows = 70000;
  std::vector<uint8_t> insns;
  for (uint64_t i = 1; i < rows; i++) {
    insns.push_back(0x41);
    insns.push_back(0x0e);
    insns.push_back(i % 2 ? 0x10 : 0x08);
  }
  GenerateOptions o;
  o.version = 3;
  const GeneratedSframe g = gen(build({Cie{}}, {Fde{0x1000, rows, insns}}), o);
  EXPECT_EQ(g.stats.rows, rows);
  const uint64_t cap = SFRAME_MAX_FRES_PER_FDE;
  EXPECT_EQ(g.stats.sframe_fdes, (rows + cap - 1) / cap);
  Decoded d(g);
  ASSERT_TRUE(d.ok());
  for (uint64_t pc : {uint64_t{0}, uint64_t{1}, cap - 1, cap, cap + 1, uint64_t{65534}, uint64_t{65535},
                      uint64_t{65536}, rows - 1}) {
    expect_sp(d.row(0x1000 + pc), pc % 2 ? 16 : 8, "row");
  }
}

// The interpreter's bounds (a crafted FDE once made the generator hold
// 2.2 GB of remembered states).
TEST(GenerateSynthetic, RememberStateDepthIsBounded) {
  // Nested 64 deep, then 65: the 65th stops the FDE there.
  for (const int depth : {64, 65, 10000000}) {
    SCOPED_TRACE(depth);
    std::vector<uint8_t> insns = {0x41, 0x0e, 0x10, 0x41};  // +1: RSP+16, +1
    insns.insert(insns.end(), size_t(depth), 0x0a);         // remember x depth
    insns.insert(insns.end(), {0x41, 0x0e, 0x08});           // +1: RSP+8
    const GeneratedSframe g = gen(build({Cie{}}, {Fde{0x1000, 0x10, insns}}), standard());
    Decoded d(g);
    ASSERT_TRUE(d.ok());
    expect_sp(d.row(0x1000), 8, "first byte");
    expect_sp(d.row(0x1001), 16, "pushed, before the remembers");
    if (depth <= 64) {
      EXPECT_EQ(g.stats.rows_uncovered, 0u);
      expect_sp(d.row(0x1002), 16, "while remembering");
      expect_sp(d.row(0x1003), 8, "after the remembers");
    } else {
      // Unknown from the row the remembers are in.
      EXPECT_EQ(reason(g, "DW_CFA_remember_state nested deeper than 64 (this generator's bound)"),
                1u);
      EXPECT_FALSE(d.row(0x1002));
      EXPECT_FALSE(d.row(0x1003));
    }
  }
}

TEST(GenerateSynthetic, InstructionsPerFdeAreBounded) {
  // 2^20 nops after the first row, then a change the FDE never reaches.
  std::vector<uint8_t> insns = {0x41, 0x0e, 0x10, 0x41};  // +1: RSP+16, +1
  insns.insert(insns.end(), size_t{1} << 20, 0x00);
  insns.insert(insns.end(), {0x41, 0x0e, 0x08});
  const GeneratedSframe g = gen(build({Cie{}}, {Fde{0x1000, 0x10, insns}}), standard());
  Decoded d(g);
  ASSERT_TRUE(d.ok());
  expect_sp(d.row(0x1001), 16, "pushed");
  EXPECT_FALSE(d.row(0x1003));
  EXPECT_EQ(
      reason(g, "CFA program of more than 1048576 instructions (this generator's bound)"), 1u);
  EXPECT_FALSE(d.row(0x1002));
}

TEST(GenerateMalformed, CieProgramRunForEveryFdeIsBounded) {
  // A CIE of 64 KiB of nops, and 200 FDEs referring to it: 13 M
  // instructions from 66 KiB of .eh_frame, beyond 4 per byte + 2^20.
  Cie cie;
  cie.insns.insert(cie.insns.end(), 65536, 0x00);
  std::vector<Fde> fdes;
  for (uint64_t i = 0; i < 200; i++) fdes.push_back(Fde{0x1000 + 16 * i, 16, {0x41, 0x0e, 0x10}});
  EXPECT_EQ(sframe::errno_of([&] { gen(build({cie}, fdes), standard()); }), E2BIG);
  // 10 FDEs: 655 K instructions, within it.
  fdes.erase(fdes.begin() + 10, fdes.end());
  EXPECT_EQ(gen(build({cie}, fdes), standard()).stats.fdes, 10u);
}

// --- Malformed .eh_frame -----------------------------------------------------

TEST(GenerateMalformed, EntriesAndOperands) {
  auto base = [] { return build({Cie{}}, {Fde{0x1000, 0x10, {0x41, 0x0e, 0x10}}}); };
  {
    auto b = base();
    b[0] = 0xf0;  // CIE length past the end
    b[1] = 0xff;
    EXPECT_EQ(gen_errno(b), EBADMSG);
  }
  {
    auto b = build({Cie{}}, {Fde{0x1000, 0x10, {}}, Fde{0x1100, 0x10, {}}});
    // The second FDE's CIE pointer aimed at the first FDE.
    const size_t cie_len = 4 + (b[0] | b[1] << 8);
    const size_t fde1 = cie_len;
    const size_t fde2 = fde1 + 4 + (b[fde1] | b[fde1 + 1] << 8);
    const uint32_t ptr = static_cast<uint32_t>(fde2 + 4 - fde1);
    std::memcpy(&b[fde2 + 4], &ptr, 4);
    EXPECT_EQ(gen_errno(b), EBADMSG);
    const uint32_t far = 0x100000;  // before the section
    std::memcpy(&b[fde2 + 4], &far, 4);
    EXPECT_EQ(gen_errno(b), EBADMSG);
  }
  {
    Cie c;
    c.fde_enc = 0x07;  // no such format
    EXPECT_EQ(gen_errno(build({c}, {Fde{0x1000, 0x10, {}}})), EBADMSG);
    c.fde_enc = 0x3b;  // datarel: not on x86-64
    EXPECT_EQ(gen_errno(build({c}, {Fde{0x1000, 0x10, {}}})), EOPNOTSUPP);
  }
  {
    Cie c;
    c.version = 2;
    EXPECT_EQ(gen_errno(build({c}, {Fde{0x1000, 0x10, {}}})), EOPNOTSUPP);
    c.version = 1;
    c.aug = "eh";
    EXPECT_EQ(gen_errno(build({c}, {Fde{0x1000, 0x10, {}}})), EOPNOTSUPP);
  }
  // An operand cut by the end of the FDE; a LEB128 over 64 bits.
  EXPECT_EQ(gen_errno(build({Cie{}}, {Fde{0x1000, 0x10, {0x41, 0x0c, 0x07}}})), EBADMSG);
  EXPECT_EQ(gen_errno(build({Cie{}}, {Fde{0x1000,
                                          0x10,
                                          {0x0e, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                           0xff, 0xff, 0x01}}})),
            EBADMSG);
  // A trailing partial length field.
  auto b = base();
  b.resize(b.size() - 4);
  b.push_back(1);
  EXPECT_EQ(gen_errno(b), EBADMSG);
}

TEST(GenerateMalformed, NoFde) {
  EXPECT_EQ(gen_errno({}), ENODATA);
  EXPECT_EQ(gen_errno({0, 0, 0, 0}), ENODATA);
  EXPECT_EQ(gen_errno(build({Cie{}}, {})), ENODATA);
}

TEST(GenerateMalformed, Options) {
  auto b = build({Cie{}}, {Fde{0x1000, 0x10, {}}});
  for (uint8_t v : {0, 1, 4, 255}) {
    GenerateOptions o;
    o.version = v;
    EXPECT_EQ(gen_errno(b, o), EINVAL) << int{v};
  }
}

// The .eh_frame of a real program, from libelf.
std::vector<uint8_t> eh_frame_of(const std::string& path, uint64_t* vaddr) {
  std::vector<uint8_t> out;
  elf_version(EV_CURRENT);
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return out;
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  size_t shstrndx = 0;
  if (elf != nullptr && elf_getshdrstrndx(elf, &shstrndx) == 0) {
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr sh;
      if (gelf_getshdr(scn, &sh) == nullptr) continue;
      const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
      if (name == nullptr || std::strcmp(name, ".eh_frame") != 0) continue;
      Elf_Data* d = elf_rawdata(scn, nullptr);
      const auto* p = static_cast<const uint8_t*>(d->d_buf);
      out.assign(p, p + d->d_size);
      *vaddr = sh.sh_addr;
    }
  }
  if (elf != nullptr) elf_end(elf);
  ::close(fd);
  return out;
}

// Whatever the bytes, a section that validates or EBADMSG/EOPNOTSUPP (or
// ENODATA: no FDE).
void expect_sane(const std::vector<uint8_t>& eh, uint64_t vaddr, uint64_t text, uint64_t len,
                 uint64_t* ok) {
  try {
    const GeneratedSframe g =
        sframe::generate_sframe_from_eh_frame(eh.data(), eh.size(), vaddr, text, len);
    Decoded d(g);
    EXPECT_TRUE(d.ok());
    EXPECT_LE(g.stats.covered_bytes, g.stats.fde_bytes);
    EXPECT_EQ(g.stats.fdes, g.stats.fdes_covered + g.stats.fdes_partial + g.stats.fdes_uncovered);
    (*ok)++;
  } catch (const sframe::Error& e) {
    EXPECT_TRUE(e.err() == EBADMSG || e.err() == EOPNOTSUPP || e.err() == ENODATA) << e.what();
  }
}

TEST(GenerateMalformed, EveryPrefixAndRandomDamage) {
  uint64_t vaddr = 0;
  const std::string path = std::string(SFRAME_GEN_PROG_DIR) + "/gen_cxx";
  const std::vector<uint8_t> eh = eh_frame_of(path, &vaddr);
  ASSERT_GT(eh.size(), 64u);
  const GeneratedSframe whole = sframe::generate_sframe(path);
  uint64_t ok = 0;
  for (size_t n = 0; n <= eh.size(); n++) {
    std::vector<uint8_t> cut(eh.begin(), eh.begin() + static_cast<long>(n));
    expect_sane(cut, vaddr, whole.text_vaddr, whole.text_len, &ok);
  }
  EXPECT_GT(ok, 1u);  // the whole, and prefixes that end between FDEs
  uint32_t state = 12345;
  auto rnd = [&] {
    state = state * 1103515245u + 12345u;
    return state >> 8;
  };
  ok = 0;
  const int rounds = 3000;
  for (int i = 0; i < rounds; i++) {
    std::vector<uint8_t> b = eh;
    const int flips = 1 + static_cast<int>(rnd() % 4);
    for (int k = 0; k < flips; k++) b[rnd() % b.size()] ^= static_cast<uint8_t>(1 + rnd() % 255);
    expect_sane(b, vaddr, whole.text_vaddr, whole.text_len, &ok);
  }
  EXPECT_GT(ok, 0u);
}

// --- ELF files -------------------------------------------------------------

std::string temp_file(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<long>(bytes.size()));
  return path;
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

int file_errno(const std::string& path) {
  return sframe::errno_of([&] { sframe::generate_sframe(path); });
}

TEST(GenerateElf, Errors) {
  const std::string prog = std::string(SFRAME_GEN_PROG_DIR) + "/gen_drap";
  EXPECT_EQ(file_errno("/nonexistent/file"), ENOENT);
  EXPECT_EQ(file_errno(temp_file("not_elf", {'h', 'e', 'l', 'l', 'o', '\n'})), ENOEXEC);
  EXPECT_EQ(file_errno(std::string(SFRAME_GEN_PROG_DIR) + "/gen_noeh"), ENODATA);
  try {
    sframe::generate_sframe(std::string(SFRAME_GEN_PROG_DIR) + "/gen_noeh");
  } catch (const sframe::Error& e) {
    EXPECT_EQ(e.op(), sframe::op::kGenerate);
    EXPECT_NE(std::string(e.what()).find("gen_noeh"), std::string::npos);
  }
  const std::vector<uint8_t> elf = file_bytes(prog);
  ASSERT_GT(elf.size(), sizeof(Elf64_Ehdr));
  {
    auto b = elf;
    b[offsetof(Elf64_Ehdr, e_machine)] = EM_AARCH64;
    EXPECT_EQ(file_errno(temp_file("aarch64", b)), EOPNOTSUPP);
  }
  {
    auto b = elf;
    b[offsetof(Elf64_Ehdr, e_type)] = ET_REL;
    EXPECT_EQ(file_errno(temp_file("rel", b)), EOPNOTSUPP);
  }
  {
    // Cut inside .eh_frame: the section header table is gone, and what
    // PT_GNU_EH_FRAME points at is cut.
    uint64_t vaddr = 0;
    const std::vector<uint8_t> eh = eh_frame_of(prog, &vaddr);
    ASSERT_FALSE(eh.empty());
    auto at = std::search(elf.begin(), elf.end(), eh.begin(), eh.end());
    ASSERT_NE(at, elf.end());
    std::vector<uint8_t> cut(elf.begin(), at + static_cast<long>(eh.size() / 2));
    const int err = file_errno(temp_file("cut", cut));
    EXPECT_TRUE(err == EBADMSG || err == ENOEXEC) << err;
  }
  GenerateOptions o;
  o.version = 1;
  EXPECT_EQ(sframe::errno_of([&] { sframe::generate_sframe(prog, o); }), EINVAL);
}

// Without section headers, .eh_frame is found through PT_GNU_EH_FRAME.
TEST(GenerateElf, WithoutSectionHeaders) {
  const std::string prog = std::string(SFRAME_GEN_PROG_DIR) + "/gen_drap";
  std::vector<uint8_t> b = file_bytes(prog);
  ASSERT_GT(b.size(), sizeof(Elf64_Ehdr));
  Elf64_Ehdr eh;
  std::memcpy(&eh, b.data(), sizeof(eh));
  eh.e_shoff = 0;
  eh.e_shnum = 0;
  eh.e_shstrndx = 0;
  std::memcpy(b.data(), &eh, sizeof(eh));
  const GeneratedSframe with = sframe::generate_sframe(prog);
  const GeneratedSframe without = sframe::generate_sframe(temp_file("no_shdrs", b));
  EXPECT_EQ(without.bytes, with.bytes);
  EXPECT_EQ(without.stats.fdes, with.stats.fdes);
  EXPECT_EQ(without.build_id, with.build_id);
  EXPECT_FALSE(with.build_id.empty());
}

}  // namespace
