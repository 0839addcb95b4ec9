#include <algorithm>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "sframe_client/objects.h"
#include "sframe_client/sframe_format.h"
#include "sframe_gen/section_builder.h"

#ifdef SFRAME_CLIENT_HAVE_DECODER
#include "sframe_source_mem.h"
#endif

extern "C" __attribute__((noipa)) int format_test_marker(int x) { return x + 7; }

namespace {

using sframe::FdeSpec;
using sframe::FreSpec;
using sframe::SectionBuilder;

sframe::LoadedObject self_object() {
  auto obj = sframe::loaded_object_containing(reinterpret_cast<const void*>(&format_test_marker));
  return obj ? *obj : sframe::LoadedObject{};
}

// Two functions: an SP-based leaf-like one and an FP-based one.
SectionBuilder two_functions(uint8_t version, bool pcrel, uint64_t base) {
  SectionBuilder b(version, pcrel);
  // Added out of order: the builder sorts.
  b.add_fde(
      FdeSpec{base + 0x200, 0x2000, {{0, true, 8, {}}, {0x1ff, true, 0x1010, {}}}, false, 0, {}});
  b.add_fde(FdeSpec{base + 0x100,
                    0x40,
                    {{0, true, 8, {}}, {1, true, 16, -16}, {4, false, 16, -16}},
                    false,
                    0,
                    {}});
  return b;
}

TEST(SframeFormatTest, ParseHeaderRejectsShortAndForeignBytes) {
  uint8_t bytes[28] = {0xe2, 0xde, 1, 1, 3};
  EXPECT_TRUE(sframe::parse_header(bytes, sizeof(bytes)).has_value());
  EXPECT_FALSE(sframe::parse_header(bytes, 27).has_value());
  bytes[0] = 0;
  EXPECT_FALSE(sframe::parse_header(bytes, sizeof(bytes)).has_value());
  EXPECT_FALSE(sframe::parse_header(nullptr, 100).has_value());
}

TEST(SframeFormatTest, BuilderLayoutPerVersion) {
  for (uint8_t version : {1, 2, 3}) {
    SCOPED_TRACE(static_cast<int>(version));
    SectionBuilder b = two_functions(version, version > 1, 0x400000);
    std::vector<uint8_t> bytes = b.build(0x500000);
    ASSERT_EQ(bytes.size(), b.size());
    auto h = sframe::parse_header(bytes.data(), bytes.size());
    ASSERT_TRUE(h.has_value());
    EXPECT_EQ(h->version, version);
    EXPECT_EQ(h->num_fdes, 2u);
    EXPECT_EQ(h->num_fres, 5u);
    EXPECT_EQ(h->fde_off, 0u);
    EXPECT_EQ(h->fre_off, 2 * h->fde_size());
    EXPECT_EQ(h->used_size(), bytes.size());
    EXPECT_EQ(h->fixed_ra_offset, -8);
    // Sorted by start address, whatever the insertion order.
    EXPECT_EQ(sframe::fde_func_start(bytes.data(), bytes.size(), 0x500000, 0), 0x400100u);
    EXPECT_EQ(sframe::fde_func_start(bytes.data(), bytes.size(), 0x500000, 1), 0x400200u);
    EXPECT_FALSE(sframe::fde_func_start(bytes.data(), bytes.size(), 0x500000, 2).has_value());
    EXPECT_EQ(sframe::fde_func_size(bytes.data(), bytes.size(), 0), 0x40u);
    EXPECT_EQ(sframe::fde_func_size(bytes.data(), bytes.size(), 1), 0x2000u);
    EXPECT_TRUE(sframe::fde_covers(bytes.data(), bytes.size(), 0x500000, 0x400100));
    EXPECT_TRUE(sframe::fde_covers(bytes.data(), bytes.size(), 0x500000, 0x40013f));
    EXPECT_FALSE(sframe::fde_covers(bytes.data(), bytes.size(), 0x500000, 0x400140));
    EXPECT_TRUE(sframe::fde_covers(bytes.data(), bytes.size(), 0x500000, 0x4021ff));
    EXPECT_FALSE(sframe::fde_covers(bytes.data(), bytes.size(), 0x500000, 0x402200));
  }
}

TEST(SframeFormatTest, RelocatedCopyDescribesTheSameFunctions) {
  for (uint8_t version : {1, 2, 3}) {
    for (bool pcrel : {false, true}) {
      if (version == 1 && pcrel) continue;
      SectionBuilder b = two_functions(version, pcrel, 0x7f0000001000);
      std::vector<uint8_t> bytes = b.build(0x7f0000800000);
      std::vector<uint8_t> copy = bytes;
      ASSERT_TRUE(
          sframe::relocate_section(copy.data(), copy.size(), 0x7f0000800000, 0x7f0010000000));
      for (uint32_t i = 0; i < 2; i++) {
        EXPECT_EQ(sframe::fde_func_start(copy.data(), copy.size(), 0x7f0010000000, i),
                  sframe::fde_func_start(bytes.data(), bytes.size(), 0x7f0000800000, i));
      }
      // v1/v2 offsets are 32 bits: 4 GiB away does not fit.
      std::vector<uint8_t> far = bytes;
      EXPECT_EQ(sframe::relocate_section(far.data(), far.size(), 0x7f0000800000, 0x7f1000000000),
                version == 3);
      if (version != 3) {
        EXPECT_EQ(far, bytes) << "a failed relocation must change nothing";
      }
    }
  }
}

TEST(SframeFormatTest, RelocateTheProgramsOwnSection) {
  sframe::LoadedObject obj = self_object();
  ASSERT_TRUE(obj.has_sframe());
  const auto* src = reinterpret_cast<const uint8_t*>(obj.sframe_addr);
  std::vector<uint8_t> copy(src, src + obj.sframe_len);
  const uint64_t new_addr = obj.sframe_addr + 0x100000;
  ASSERT_TRUE(sframe::relocate_section(copy.data(), copy.size(), obj.sframe_addr, new_addr));
  auto h = sframe::parse_header(copy.data(), copy.size());
  for (uint32_t i = 0; i < h->num_fdes; i++) {
    EXPECT_EQ(sframe::fde_func_start(copy.data(), copy.size(), new_addr, i),
              sframe::fde_func_start(src, obj.sframe_len, obj.sframe_addr, i));
  }
}

#ifdef SFRAME_CLIENT_HAVE_DECODER

struct Decoded {
  sframe_source src;
  sframe_section sec;
  int init;
};

Decoded decode(const std::vector<uint8_t>& bytes, uint64_t addr) {
  Decoded d;
  sframe_source_mem_init(&d.src, bytes.data(), bytes.size());
  d.init = sframe_section_init(&d.sec, &d.src, addr, bytes.size());
  return d;
}

TEST(SframeFormatTest, DecoderReadsBuiltSectionsOfEveryVersion) {
  const uint64_t text = 0x555555554000, addr = 0x555555600000;
  for (uint8_t version : {1, 2, 3}) {
    for (bool pcrel : {false, true}) {
      if (version == 1 && pcrel) continue;
      SCOPED_TRACE(testing::Message() << "v" << int(version) << (pcrel ? " pcrel" : ""));
      std::vector<uint8_t> bytes = two_functions(version, pcrel, text).build(addr);
      Decoded d = decode(bytes, addr);
      ASSERT_EQ(d.init, 0);
      EXPECT_EQ(d.sec.version, version);
      EXPECT_EQ(sframe_validate(&d.sec, text, 0x3000), 0);

      sframe_row row;
      ASSERT_EQ(sframe_find_row(&d.sec, text + 0x100, &row), 0);
      EXPECT_EQ(row.cfa_reg, SFRAME_REG_RSP);
      EXPECT_EQ(row.cfa_offset, 8);
      EXPECT_EQ(row.fp.kind, SFRAME_LOC_SAME);
      ASSERT_EQ(sframe_find_row(&d.sec, text + 0x101, &row), 0);
      EXPECT_EQ(row.cfa_offset, 16);
      EXPECT_EQ(row.fp.kind, SFRAME_LOC_CFA_OFFSET);
      EXPECT_EQ(row.fp.offset, -16);
      ASSERT_EQ(sframe_find_row(&d.sec, text + 0x13f, &row), 0);
      EXPECT_EQ(row.cfa_reg, SFRAME_REG_RBP);
      EXPECT_EQ(row.cfa_offset, 16);
      ASSERT_EQ(sframe_find_row(&d.sec, text + 0x200 + 0x1ff, &row), 0);
      EXPECT_EQ(row.cfa_reg, SFRAME_REG_RSP);
      EXPECT_EQ(row.cfa_offset, 0x1010);
      EXPECT_EQ(sframe_find_row(&d.sec, text + 0x140, &row), -ENOENT);
    }
  }
}

TEST(SframeFormatTest, DecoderSeesRaUndefinedAsOutermost) {
  for (uint8_t version : {2, 3}) {
    SectionBuilder b(version, true);
    b.add_fde(FdeSpec{0x1000, 0x10, {{0, true, 8, {}, /*ra_undefined=*/true}}, false, 0, {}});
    std::vector<uint8_t> bytes = b.build(0x2000);
    Decoded d = decode(bytes, 0x2000);
    ASSERT_EQ(d.init, 0);
    sframe_row row;
    ASSERT_EQ(sframe_find_row(&d.sec, 0x1004, &row), 0);
    EXPECT_TRUE(row.outermost) << "v" << int(version);
  }
}

// Version 3 flexible FDEs: DRAP's CFA = R10 + 0, then CFA = *(RBP - 16)
// with the caller's RBP at *(RBP + 0); a 2-byte control word (register
// 40); an FP kept in a register; the signal-frame bit.  Outside version 3
// the flexible fields are ignored.
TEST(SframeFormatTest, BuilderWritesFlexibleFdes) {
  FreSpec entry;
  FreSpec r10;
  r10.start_off = 4;
  r10.cfa_reg = 10;
  r10.cfa_offset = 0;
  FreSpec drap;
  drap.start_off = 0x10;
  drap.cfa_reg = 6;
  drap.cfa_deref = true;
  drap.cfa_offset = -16;
  drap.fp_reg = 6;
  drap.fp_offset = 0;
  FreSpec saved;
  saved.start_off = 0x20;
  saved.cfa_base_sp = false;
  saved.cfa_offset = 16;
  saved.fp_offset = -16;  // at CFA - 16, written as a control word 2 pair
  FreSpec wide;
  wide.start_off = 0x30;
  wide.cfa_reg = 40;
  wide.cfa_offset = 1000;
  wide.fp_reg = 3;
  wide.fp_deref = false;
  wide.fp_offset = 0;
  FdeSpec flex{0x1000, 0x40, {entry, r10, drap, saved, wide}, false, 0, {}};
  flex.flex = true;
  FdeSpec sig{0x1100, 0x10, {entry}, false, 0, {}};
  sig.signal_frame = true;
  for (uint8_t version : {2, 3}) {
    SCOPED_TRACE(int(version));
    SectionBuilder b(version, true);
    b.add_fde(flex).add_fde(sig);
    std::vector<uint8_t> bytes = b.build(0x2000);
    ASSERT_EQ(bytes.size(), b.size());
    Decoded d = decode(bytes, 0x2000);
    ASSERT_EQ(d.init, 0);
    EXPECT_EQ(sframe_validate(&d.sec, 0x1000, 0x200), 0);
    sframe_fde fde;
    ASSERT_EQ(sframe_find_fde(&d.sec, 0x1000, &fde), 0);
    EXPECT_EQ(fde.flex, version == 3 ? 1 : 0);
    sframe_row row;
    ASSERT_EQ(sframe_find_row(&d.sec, 0x1110, &row), -ENOENT);
    ASSERT_EQ(sframe_find_row(&d.sec, 0x1100, &row), 0);
    EXPECT_EQ(row.signal_frame, version == 3);
    ASSERT_EQ(sframe_find_row(&d.sec, 0x1000, &row), 0);
    EXPECT_EQ(row.cfa_reg, SFRAME_REG_RSP);
    EXPECT_EQ(row.cfa_offset, 8);
    EXPECT_EQ(row.fp.kind, SFRAME_LOC_SAME);
    ASSERT_EQ(sframe_find_row(&d.sec, 0x1020, &row), 0);
    EXPECT_EQ(row.cfa_reg, SFRAME_REG_RBP);
    EXPECT_FALSE(row.cfa_deref);
    EXPECT_EQ(row.cfa_offset, 16);
    EXPECT_EQ(row.ra.kind, SFRAME_LOC_CFA_OFFSET);
    EXPECT_EQ(row.ra.offset, -8);
    EXPECT_EQ(row.fp.kind, SFRAME_LOC_CFA_OFFSET);
    EXPECT_EQ(row.fp.offset, -16);
    if (version != 3) {
      // Default FREs: the CFA falls back to cfa_base_sp, the FP to CFA +
      // fp_offset.
      ASSERT_EQ(sframe_find_row(&d.sec, 0x1004, &row), 0);
      EXPECT_EQ(row.cfa_reg, SFRAME_REG_RSP);
      EXPECT_EQ(row.cfa_offset, 0);
      continue;
    }
    ASSERT_EQ(sframe_find_row(&d.sec, 0x1004, &row), 0);
    EXPECT_EQ(row.cfa_reg, 10);
    EXPECT_FALSE(row.cfa_deref);
    EXPECT_EQ(row.cfa_offset, 0);
    EXPECT_EQ(row.fp.kind, SFRAME_LOC_SAME);
    ASSERT_EQ(sframe_find_row(&d.sec, 0x101f, &row), 0);
    EXPECT_EQ(row.cfa_reg, SFRAME_REG_RBP);
    EXPECT_TRUE(row.cfa_deref);
    EXPECT_EQ(row.cfa_offset, -16);
    EXPECT_EQ(row.ra.kind, SFRAME_LOC_CFA_OFFSET);
    EXPECT_EQ(row.ra.offset, -8);
    EXPECT_EQ(row.fp.kind, SFRAME_LOC_REG_OFFSET);
    EXPECT_EQ(row.fp.reg, SFRAME_REG_RBP);
    EXPECT_TRUE(row.fp.deref);
    EXPECT_EQ(row.fp.offset, 0);
    ASSERT_EQ(sframe_find_row(&d.sec, 0x103f, &row), 0);
    EXPECT_EQ(row.cfa_reg, 40);
    EXPECT_EQ(row.cfa_offset, 1000);
    EXPECT_EQ(row.fp.kind, SFRAME_LOC_REG_OFFSET);
    EXPECT_EQ(row.fp.reg, 3);
    EXPECT_FALSE(row.fp.deref);
  }
}

// FRE bytes of each FDE of a decoded section, in FDE order.  The linker
// may put FREs in another order than the FDEs (it appends the PLT's), so the
// blocks are cut at the sorted FRE offsets.
std::vector<std::vector<uint8_t>> fre_blocks(const std::vector<uint8_t>& bytes,
                                             const sframe_section& sec) {
  std::vector<uint32_t> offs;
  std::vector<sframe_fde> fdes(sec.num_fdes);
  for (uint32_t i = 0; i < sec.num_fdes; i++) {
    EXPECT_EQ(sframe_get_fde(&sec, i, &fdes[i]), 0);
    offs.push_back(fdes[i].fre_off);
  }
  std::sort(offs.begin(), offs.end());
  std::vector<std::vector<uint8_t>> out;
  for (const auto& fde : fdes) {
    auto it = std::upper_bound(offs.begin(), offs.end(), fde.fre_off);
    uint32_t end = it == offs.end() ? sec.fre_len : *it;
    const uint8_t* p = bytes.data() + sec.fre_start + fde.fre_off;
    out.emplace_back(p, p + (end - fde.fre_off));
  }
  return out;
}

// Re-encoding the assembler's (and linker's) version-1 section with
// SectionBuilder gives the same header, FDEs and FRE bytes: the builder
// writes what binutils writes.
TEST(SframeFormatTest, BuilderReproducesTheAssemblersSection) {
  sframe::LoadedObject obj = self_object();
  ASSERT_TRUE(obj.has_sframe());
  const auto* p = reinterpret_cast<const uint8_t*>(obj.sframe_addr);
  std::vector<uint8_t> original(p, p + obj.sframe_len);
  Decoded d = decode(original, obj.sframe_addr);
  ASSERT_EQ(d.init, 0);
  ASSERT_EQ(d.sec.version, 1);

  SectionBuilder b(1);
  b.set_flags(d.sec.flags).keep_order();
  for (uint32_t i = 0; i < d.sec.num_fdes; i++) {
    sframe_fde fde;
    ASSERT_EQ(sframe_get_fde(&d.sec, i, &fde), 0);
    FdeSpec spec;
    spec.func_start = fde.func_start;
    spec.func_size = fde.func_size;
    spec.pc_mask = fde.pc_type == SFRAME_PC_MASK;
    spec.fre_type = fde.fre_type;
    for (uint32_t j = 0; j < fde.num_fres; j++) {
      sframe_row row;
      ASSERT_EQ(sframe_get_fre(&d.sec, &fde, j, &row), 0);
      FreSpec fre;
      fre.start_off = row.start_off;
      fre.cfa_base_sp = row.cfa_reg == SFRAME_REG_RSP;
      fre.cfa_offset = row.cfa_offset;
      if (row.fp.kind == SFRAME_LOC_CFA_OFFSET) fre.fp_offset = row.fp.offset;
      spec.fres.push_back(fre);
    }
    b.add_fde(spec);
  }
  std::vector<uint8_t> rebuilt = b.build(obj.sframe_addr);
  ASSERT_EQ(rebuilt.size(), original.size());
  EXPECT_TRUE(std::equal(original.begin(), original.begin() + 28, rebuilt.begin()))
      << "headers differ";
  Decoded r = decode(rebuilt, obj.sframe_addr);
  ASSERT_EQ(r.init, 0);
  for (uint32_t i = 0; i < d.sec.num_fdes; i++) {
    sframe_fde a, c;
    ASSERT_EQ(sframe_get_fde(&d.sec, i, &a), 0);
    ASSERT_EQ(sframe_get_fde(&r.sec, i, &c), 0);
    EXPECT_EQ(a.func_start, c.func_start) << "FDE " << i;
    EXPECT_EQ(a.func_size, c.func_size) << "FDE " << i;
    EXPECT_EQ(a.num_fres, c.num_fres) << "FDE " << i;
  }
  auto want = fre_blocks(original, d.sec);
  auto got = fre_blocks(rebuilt, r.sec);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); i++) EXPECT_EQ(want[i], got[i]) << "FREs of FDE " << i;
}

#endif  // SFRAME_CLIENT_HAVE_DECODER

}  // namespace
