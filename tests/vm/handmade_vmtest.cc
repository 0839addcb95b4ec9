// SFrame versions 1, 2 and 3 through the real module.  Debian 12's assembler
// writes only version 1, so this test writes its own sections
// (sframe::SectionBuilder) for the assembly functions of
// libvmtest_handmade.so, whose frame layouts are known exactly, registers
// them instead of an assembler's section, and expects the exact chain back:
//
//   handmade_caller -> handmade_sp_frame (SP-based CFA, 2-byte offset 0x1010)
//     -> handmade_fp_frame (FP-based CFA, FP saved) -> handmade_cb -> unwind
//   handmade_caller_stub -> block 2 of handmade_pcmask_stubs (a PC-mask FDE,
//     like a PLT) -> handmade_cb -> unwind
//   handmade_caller_outermost -> handmade_outermost (RA undefined: v2, v3)
//
// Variants: v1; v2 and v3 with start addresses relative to the section or
// (SFRAME_F_FDE_FUNC_START_PCREL) to the field; v3 with the section more
// than 4 GiB away from the text (64-bit start offsets).
#include <sys/mman.h>

#include <memory>
#include <string>
#include <vector>

#include "libs/handmade.h"
#include "sframe_gen/section_builder.h"
#include "vmtest.h"

namespace {

using sframe::FdeSpec;
using sframe::FreSpec;
using sframe::StopReason;
using vmtest::ChainIs;
using vmtest::ChildResult;
using vmtest::ChildTail;
using vmtest::kUnwindSelf;

struct UnwindReq {
  const sframe::Device* dev;
  sframe::UnwindResult result;
};

uint64_t Addr(void (*fn)()) { return reinterpret_cast<uint64_t>(fn); }
template <typename F>
uint64_t Addr(F* fn) {
  return reinterpret_cast<uint64_t>(fn);
}

// The section describing the four functions.
sframe::SectionBuilder HandmadeSection(uint8_t version, bool pcrel) {
  const uint32_t* L = handmade_layout;
  sframe::SectionBuilder b(version, pcrel);
  b.add_fde(FdeSpec{Addr(&handmade_sp_frame),
                    L[kSpSize],
                    {FreSpec{0, true, 8, {}}, FreSpec{L[kSpAfterSub], true, 0x1010, {}},
                     FreSpec{L[kSpAfterAdd], true, 8, {}}},
                    false,
                    0,
                    {}});
  b.add_fde(FdeSpec{Addr(&handmade_fp_frame),
                    L[kFpSize],
                    {FreSpec{0, true, 8, {}}, FreSpec{L[kFpAfterPush], true, 16, -16},
                     FreSpec{L[kFpAfterMov], false, 16, -16}, FreSpec{L[kFpAfterPop], true, 8, {}}},
                    false,
                    0,
                    {}});
  if (version >= 2) {
    // "RA undefined" (an FRE without offsets) exists from version 2 on.
    b.add_fde(FdeSpec{Addr(&handmade_outermost),
                      L[kOutSize],
                      {FreSpec{0, true, 16, {}, /*ra_undefined=*/true}},
                      false,
                      0,
                      {}});
  }
  if (version >= 3) {
    // The return address in a register: a v3 flexible FDE.
    FreSpec popped{L[kRaAfterPop], true, 0, {}};
    popped.ra_reg = 10;
    FdeSpec ra{Addr(&handmade_ioctl_ra_in_r10),
               L[kRaSize],
               {FreSpec{0, true, 8, {}}, popped, FreSpec{L[kRaAfterPush], true, 8, {}}},
               false,
               0,
               {}};
    ra.flex = true;
    b.add_fde(ra);
  }
  // Version 1 has no repetition size: the module assumes 16-byte blocks
  // (AMD64 PLT entries), which these are.
  b.add_fde(FdeSpec{Addr(&handmade_pcmask_stubs),
                    L[kStubsSize],
                    {FreSpec{0, true, 8, {}}, FreSpec{L[kStubAfterSub], true, 16, {}},
                     FreSpec{L[kStubAfterAdd], true, 8, {}}},
                    /*pc_mask=*/true,
                    /*rep_size=*/static_cast<uint8_t>(version >= 2 ? 16 : 0),
                    {}});
  return b;
}

// An anonymous mapping more than 4 GiB from addr (so that only 64-bit
// offsets reach it).
sframe::MappedRegion MapFar(uint64_t addr, size_t size) {
  for (uint64_t gib = 8; gib < 64; gib++) {
    for (int sign = -1; sign <= 1; sign += 2) {
      uint64_t hint =
          sign < 0 ? (addr & ~0xfffull) - (gib << 30) : (addr & ~0xfffull) + (gib << 30);
      void* p = mmap(reinterpret_cast<void*>(hint), size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (p == MAP_FAILED) continue;
      if (reinterpret_cast<uint64_t>(p) == hint) return sframe::MappedRegion(p, size);
      munmap(p, size);
    }
  }
  throw sframe::Error(ENOMEM, sframe::op::kMmap, "far mapping");
}

}  // namespace

static void handmade_cb(void* arg) {
  auto* r = static_cast<UnwindReq*>(arg);
  r->result = r->dev->unwind_self(64, SFRAME_UNWIND_F_SFRAME);
  VMTEST_BARRIER();
}

VMTEST_NOIPA static int handmade_caller(UnwindReq* r) {
  handmade_sp_frame(&handmade_cb, r);
  VMTEST_BARRIER();
  return 1;
}

VMTEST_NOIPA static int handmade_caller_stub(UnwindReq* r) {
  // Enter the third block, as a call through a PLT entry would.
  auto stub = reinterpret_cast<handmade_stub>(Addr(&handmade_pcmask_stubs) + 2 * 16);
  stub(r, &handmade_cb);
  VMTEST_BARRIER();
  return 2;
}

// UNWIND_SELF made from handmade_ioctl_ra_in_r10: the topmost frame's
// return address is in R10 and its CFA is the SP itself.
VMTEST_NOIPA static int handmade_caller_ra_in_reg(UnwindReq* r) {
  // Static, and nothing to destroy: the function stays simple enough for
  // binutils 2.40 to give it an SFrame FDE (it is a frame of the chain).
  static uint64_t frames[64];
  static sframe_unwind_self req;
  req = sframe_unwind_self{};
  req.size = sizeof(req);
  req.flags = SFRAME_UNWIND_F_SFRAME;
  req.frames = reinterpret_cast<uint64_t>(frames);
  req.max_frames = 64;
  const long ret = handmade_ioctl_ra_in_r10(r->dev->fd(), SFRAME_IOC_UNWIND_SELF, &req);
  VMTEST_BARRIER();
  if (ret < 0) return static_cast<int>(ret);
  r->result.frames.assign(frames, frames + (req.nr_frames < 64 ? req.nr_frames : 64));
  r->result.stop_reason = static_cast<StopReason>(req.stop_reason);
  r->result.nr_sframe = req.nr_sframe;
  r->result.nr_fp = req.nr_fp;
  return 4;
}

VMTEST_NOIPA static int handmade_caller_outermost(UnwindReq* r) {
  handmade_outermost(&handmade_cb, r);
  VMTEST_BARRIER();
  return 3;
}

// Everything the scenario needs, set up outside the scenario function: that
// function is a frame of the chains, and must stay simple enough for
// binutils 2.40 to give it an SFrame FDE (see device.h).
struct Handmade {
  explicit Handmade(const std::string& path) : dev(path) {}
  sframe::Device dev;
  sframe::Registration exe, lib;
  sframe::MappedRegion mem;
  UnwindReq req{nullptr, {}};
  uint8_t version = 0;
};

// arg: "<version>[p][far]": p = PC-relative start addresses, far = the
// section more than 4 GiB from the text.
VMTEST_NOIPA static std::unique_ptr<Handmade> SetUpHandmade(const std::string& arg) {
  auto h = std::make_unique<Handmade>(vmtest::DevicePath());
  h->version = static_cast<uint8_t>(arg.at(0) - '0');
  const bool pcrel = arg.find('p') != std::string::npos;
  const bool far = arg.find("far") != std::string::npos;
  h->req.dev = &h->dev;
  // The program's own (assembler, version 1) section covers the callers.
  h->exe = sframe::register_object_containing(h->dev, reinterpret_cast<void*>(&handmade_caller));
  auto lib = sframe::loaded_object_containing(reinterpret_cast<void*>(&handmade_sp_frame));
  if (!lib || lib->has_sframe()) {
    throw sframe::Error(ENOENT, "find", "libvmtest_handmade.so",
                        "not loaded, or it has a .sframe of its own");
  }
  sframe::SectionBuilder b = HandmadeSection(h->version, pcrel);
  h->mem = far ? MapFar(lib->text_start, b.size())
               : sframe::MappedRegion::map_near(reinterpret_cast<void*>(lib->text_start), b.size(),
                                                PROT_READ | PROT_WRITE);
  b.build_into(h->mem.data(), h->mem.address());
  h->mem.protect(PROT_READ);  // like a loaded .sframe
  const uint64_t at = h->mem.address();
  vmtest::EmitValue("distance", at > lib->text_start ? at - lib->text_start : lib->text_start - at);
  h->lib = h->dev.register_scoped(at, b.size(), lib->text_start, lib->text_len, "handmade v" + arg);
  return h;
}

VMTEST_CHILD(handmade) {
  std::unique_ptr<Handmade> h = SetUpHandmade(arg);
  handmade_caller(&h->req);
  vmtest::EmitUnwind("frames", h->req.result);
  handmade_caller_stub(&h->req);
  vmtest::EmitUnwind("pcmask", h->req.result);
  if (h->version >= 2) {
    handmade_caller_outermost(&h->req);
    vmtest::EmitUnwind("outermost", h->req.result);
  }
  if (h->version >= 3) {
    const int ret = handmade_caller_ra_in_reg(&h->req);
    if (ret < 0) return 10;
    vmtest::EmitUnwind("ra_in_reg", h->req.result);
  }
  return 0;
}

class HandmadeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HandmadeTest, ExactChainThroughHandWrittenFrames) {
  ChildResult r = vmtest::RunChild("handmade", GetParam());
  ASSERT_EQ(r.exit_status, 0) << r.output;
  std::vector<std::string> want = {kUnwindSelf, "handmade_cb", "handmade_fp_frame",
                                   "handmade_sp_frame", "handmade_caller"};
  for (const auto& s : ChildTail("handmade")) want.push_back(s);
  const vmtest::Chain& c = r.chains["frames"];
  EXPECT_TRUE(ChainIs(c, want, r.main_return));
  EXPECT_EQ(c.stop, StopReason::kNoCoverage) << c.Describe();
  EXPECT_EQ(c.nr_sframe, c.frames.size() - 1);
  if (GetParam().find("far") != std::string::npos) {
    EXPECT_GT(r.values["distance"], 4ull << 30);
  }
}

TEST_P(HandmadeTest, PcMaskBlockInTheChain) {
  ChildResult r = vmtest::RunChild("handmade", GetParam());
  ASSERT_EQ(r.exit_status, 0) << r.output;
  std::vector<std::string> want = {kUnwindSelf, "handmade_cb", "handmade_pcmask_stubs",
                                   "handmade_caller_stub"};
  for (const auto& s : ChildTail("handmade")) want.push_back(s);
  const vmtest::Chain& c = r.chains["pcmask"];
  EXPECT_TRUE(ChainIs(c, want, r.main_return));
  EXPECT_EQ(c.stop, StopReason::kNoCoverage) << c.Describe();
}

// Version 1 has no RA-undefined FRE: versions 2 and 3 only.
class HandmadeOutermostTest : public HandmadeTest {};

TEST_P(HandmadeOutermostTest, RaUndefinedIsTheOutermostFrame) {
  ChildResult r = vmtest::RunChild("handmade", GetParam());
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const vmtest::Chain& c = r.chains["outermost"];
  EXPECT_TRUE(ChainIs(c, {kUnwindSelf, "handmade_cb", "handmade_outermost"}));
  EXPECT_EQ(c.stop, StopReason::kOutermost) << c.Describe();
  EXPECT_EQ(c.nr_sframe, 2u);
}

// Version 3 only: the return address in a register (glibc's __vfork keeps
// it in RDI around its system call), the CFA at the SP itself.  Before the
// module allowed that one step at the top, the walk stopped there
// (BAD_FRAME: the SP did not move up).
class HandmadeRaInRegisterTest : public HandmadeTest {};

TEST_P(HandmadeRaInRegisterTest, ReturnAddressInARegisterAtTheTop) {
  ChildResult r = vmtest::RunChild("handmade", GetParam());
  ASSERT_EQ(r.exit_status, 0) << r.output;
  std::vector<std::string> want = {"handmade_ioctl_ra_in_r10", "handmade_caller_ra_in_reg"};
  for (const auto& s : ChildTail("handmade")) want.push_back(s);
  const vmtest::Chain& c = r.chains["ra_in_reg"];
  EXPECT_TRUE(ChainIs(c, want, r.main_return));
  EXPECT_EQ(c.stop, StopReason::kNoCoverage) << c.Describe();
  EXPECT_EQ(c.nr_sframe, c.frames.size() - 1) << c.Describe();
}

std::string VersionName(const ::testing::TestParamInfo<std::string>& info) {
  return "v" + info.param;
}

INSTANTIATE_TEST_SUITE_P(Versions, HandmadeTest,
                         ::testing::Values("1", "2", "2p", "3", "3p", "3pfar", "3far"),
                         VersionName);
INSTANTIATE_TEST_SUITE_P(Versions, HandmadeOutermostTest, ::testing::Values("2", "2p", "3", "3p"),
                         VersionName);
INSTANTIATE_TEST_SUITE_P(Versions, HandmadeRaInRegisterTest,
                         ::testing::Values("3", "3p", "3far"), VersionName);
