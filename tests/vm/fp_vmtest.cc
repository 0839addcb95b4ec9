// The frame-pointer method (SFRAME_UNWIND_F_FP): this program is built with
// -fno-omit-frame-pointer (libsframe-client is too) and registers no
// section, so every frame up to main comes from the frame-pointer walk.
// Only libsframe-client's own code in it carries .sframe: where discovery
// finds it, the first frame (unwind_self) is SFrame's, and the rest of the
// walk falls back as in any partly covered object.
// What follows main's caller (libc, built without frame pointers) is not
// defined, so the chains are checked up to and including that caller.
#include <pthread.h>

#include <string>
#include <vector>

#include "vmtest.h"

namespace {

using sframe::StopReason;
using vmtest::ChainIs;
using vmtest::ChainStartsWith;
using vmtest::ChildResult;
using vmtest::ChildTail;
using vmtest::kUnwindSelf;

// As root the suite runs with discovery off, as a user with it on.
const bool kDiscoveryOffWhenRoot = vmtest::DiscoveryOffWhenRoot();

struct UnwindReq {
  const sframe::Device* dev;
  uint32_t flags;
  sframe::UnwindResult result;
};

}  // namespace

VMTEST_NOIPA static int fp_c(UnwindReq* r) {
  r->result = r->dev->unwind_self(64, r->flags);
  VMTEST_BARRIER();
  return 1;
}

VMTEST_NOIPA static int fp_b(UnwindReq* r) {
  int v = fp_c(r);
  VMTEST_BARRIER();
  return v + 1;
}

VMTEST_NOIPA static int fp_a(UnwindReq* r) {
  int v = fp_b(r);
  VMTEST_BARRIER();
  return v + 1;
}

VMTEST_CHILD(fp_chain) {
  (void)arg;
  sframe::Device dev(vmtest::DevicePath());
  vmtest::EmitValue("mm_sections", dev.stats().mm_sections);
  UnwindReq req{&dev, SFRAME_UNWIND_F_FP, {}};
  fp_a(&req);
  vmtest::EmitUnwind("fp", req.result);
  req.flags = SFRAME_UNWIND_F_ALL;
  fp_a(&req);
  vmtest::EmitUnwind("all", req.result);
  req.flags = SFRAME_UNWIND_F_SFRAME;
  fp_a(&req);
  vmtest::EmitUnwind("sframe", req.result);
  return 0;
}

const std::vector<std::string> kFpChain = {kUnwindSelf, "fp_c", "fp_b", "fp_a"};

std::vector<std::string> FpChildChain() {
  std::vector<std::string> v = kFpChain;
  for (const auto& s : ChildTail("fp_chain")) v.push_back(s);
  return v;
}

TEST(FramePointerTest, ChainUpToMain) {
  ChildResult r = vmtest::RunChild("fp_chain");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(r.values["mm_sections"], 0u) << "nothing may be registered";
  const vmtest::Chain& c = r.chains["fp"];
  EXPECT_TRUE(ChainStartsWith(c, FpChildChain(), r.main_return));
  EXPECT_EQ(c.nr_sframe, 0u);
  EXPECT_GE(c.nr_fp, 7u) << c.Describe();
}

TEST(FramePointerTest, AllMethodsFallBackToFramePointers) {
  ChildResult r = vmtest::RunChild("fp_chain");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const vmtest::Chain& c = r.chains["all"];
  EXPECT_TRUE(ChainStartsWith(c, FpChildChain(), r.main_return));
  EXPECT_EQ(c.nr_sframe, vmtest::DiscoveryEnabled() ? 1u : 0u) << c.Describe();
  EXPECT_GE(c.nr_sframe + c.nr_fp, 7u) << c.Describe();
}

// SFrame only: no registration, so nothing to walk with; with discovery,
// up to the first function without an FDE.
TEST(FramePointerTest, SframeOnlyStopsWhereNoSectionCovers) {
  ChildResult r = vmtest::RunChild("fp_chain");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const vmtest::Chain& c = r.chains["sframe"];
  if (vmtest::DiscoveryEnabled())
    EXPECT_TRUE(ChainIs(c, {kUnwindSelf, "fp_c"}));
  else
    EXPECT_TRUE(ChainIs(c, {kUnwindSelf}));
  EXPECT_EQ(c.stop, StopReason::kNoCoverage);
  EXPECT_EQ(c.nr_fp, 0u);
}

// In a thread: up to start_thread, which the thread function returns into.
namespace {
struct ThreadArg {
  UnwindReq req;
  uint64_t start_thread_pc = 0;
};
}  // namespace

VMTEST_NOIPA static void* fp_thread(void* p) {
  auto* a = static_cast<ThreadArg*>(p);
  a->start_thread_pc = reinterpret_cast<uint64_t>(__builtin_return_address(0));
  fp_a(&a->req);
  VMTEST_BARRIER();
  return nullptr;
}

class FramePointerThreadTest : public vmtest::DeviceTest {};

TEST_F(FramePointerThreadTest, ChainInAThread) {
  ThreadArg a{{&dev(), SFRAME_UNWIND_F_FP, {}}, 0};
  pthread_t t;
  ASSERT_EQ(pthread_create(&t, nullptr, fp_thread, &a), 0);
  pthread_join(t, nullptr);
  std::vector<std::string> want = kFpChain;
  want.push_back("fp_thread");
  want.push_back(vmtest::kStartThread);
  vmtest::Chain c = vmtest::Symbolize(a.req.result);
  EXPECT_TRUE(ChainStartsWith(c, want, a.start_thread_pc));
  EXPECT_EQ(c.nr_sframe, 0u);
}
