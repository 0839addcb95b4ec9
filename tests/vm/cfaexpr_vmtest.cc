// Hand-written assembly that realigns the stack and says where its CFA is
// with DWARF expressions (issue 11, section 3), unwound with SFrame made
// from .eh_frame and supplied by sframe::ProcessCoverage.
//
// realign_workload (workloads/realign_workload.c, realign_asm.S) calls three
// such functions, each spinning in its own body and then calling a C leaf:
//   rw_saved_cfa  CFA = *(RSP + 40)         a v3 flexible row, RSP-based
//   rw_drap       CFA = *(RBP - 8), RBP at *(RBP + 0)   GCC's DRAP, RBP-based
//   rw_perlasm    CFA = *(RSP + 40) + 8     OpenSSL's perlasm: no SFrame v3
//                                           rule; this project's extension
//                                           (SFRAME_F_X_CFA_ADDEND)
//   rw_rax_cfa    CFA = RAX + 8             OpenSSL's aesni_gcm_encrypt;
//                                           below its assembly leaf
//                                           rw_rax_leaf RAX is the leaf's
//                                           (the module's guess); and
//                                           rw_rax_cfa_clobbered, whose
//                                           leaf holds a heap address in
//                                           RAX: the walk stops there
// Samples in each, as the topmost frame and below rw_leaf (where RSP is the
// CFA of the frame above and RBP what that frame's rule gave), must reach
// main (the numbers are recorded as properties).
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "sessions.h"
#include "sframe_gen/coverage.h"
#include "sframe_gen/sframe_cache.h"
#include "sframe_profile/symbolizer.h"

namespace {

struct Tally {
  size_t samples = 0, complete = 0;
  std::string first_bad;
};

class CfaExprTest : public vmtest::SessionTest {};

TEST_F(CfaExprTest, RealignedFramesReachMainInEverySample) {
  SKIP_WITHOUT_PERF();
  std::string err;
  auto w = vmtest::Workload::Start({"0"}, &err, "realign_workload");
  ASSERT_TRUE(w) << err;
  sym_.load_process(w->pid());
  sframe::SframeCache cache(vmtest::FreshCacheDir());
  sframe::ProcessCoverage cov(dev(), w->pid(), &cache);
  const sframe::CoverageUpdate u = cov.refresh();
  EXPECT_TRUE(std::any_of(u.generated.begin(), u.generated.end(), [](const std::string& s) {
    return s.find("realign_workload") != std::string::npos;
  })) << "the program's own .eh_frame";
  EXPECT_TRUE(u.failed.empty()) << u.failed.front().first << ": " << u.failed.front().second;

  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(10000));
  sframe::Session s = sframe::Session::start(sframe::Target::kProcess, w->pid(), SframeOnly());
  vmtest::Collected c = vmtest::Collect(&s, &ev, 3000);
  w->Kill();

  // key: "rw_saved_cfa" (topmost) or "rw_leaf<rw_saved_cfa" (below the leaf)
  std::map<std::string, Tally> t;
  // In rw_rax_clobber_leaf RAX holds a heap address: the guess gives a CFA
  // off the stack, and the walk must stop there (BAD_FRAME), with exactly
  // the two frames it knows.  In the leaf's first and last instructions,
  // before RAX is set and after it is restored, the guess is right and the
  // chain complete.  Nothing else: never a frame made up.
  Tally clobbered;  // complete: the samples that stopped
  size_t clobbered_right = 0;
  for (const sframe::Sample* smp : c.Samples()) {
    if (smp->user.empty()) continue;
    const std::vector<sframe::Symbol> user = User(*smp);
    const std::vector<std::string> n = vmtest::Names(user);
    if (n[0] == "rw_rax_clobber_leaf") {
      clobbered.samples++;
      const bool caller = n.size() >= 2 && n[1] == "rw_rax_cfa_clobbered";
      if (caller && n.size() == 2 && smp->user_stop == sframe::StopReason::kBadFrame) {
        clobbered.complete++;
      } else if (caller && n.size() > 3 && n[2] == "rw_round" && n[3] == "main") {
        clobbered_right++;
      } else if (clobbered.first_bad.empty()) {
        clobbered.first_bad = vmtest::Describe(*smp, user);
      }
      continue;
    }
    size_t at = 0;
    if (!n.empty() && (n[0] == "rw_leaf" || n[0] == "rw_rax_leaf")) at = 1;
    // rw_rax_leaf has one caller: a walk that stops in it counts too.
    const bool rax_leaf = at && n[0] == "rw_rax_leaf";
    if (!rax_leaf && (at >= n.size() || n[at].rfind("rw_", 0) != 0 || n[at] == "rw_round")) {
      continue;
    }
    Tally& k = t[rax_leaf ? "rw_rax_leaf<rw_rax_cfa" : at ? n[0] + "<" + n[at] : n[at]];
    k.samples++;
    const bool ok = at + 2 < n.size() && (!rax_leaf || n[at] == "rw_rax_cfa") &&
                    n[at + 1] == "rw_round" && n[at + 2] == "main";
    if (ok) {
      k.complete++;
    } else if (k.first_bad.empty()) {
      k.first_bad = vmtest::Describe(*smp, user);
    }
  }
  for (const auto& [key, k] : t) {
    RecordProperty(key, std::to_string(k.complete) + "/" + std::to_string(k.samples));
  }
  for (const char* key :
       {"rw_saved_cfa", "rw_leaf<rw_saved_cfa", "rw_drap", "rw_leaf<rw_drap", "rw_perlasm",
        "rw_leaf<rw_perlasm", "rw_rax_cfa", "rw_rax_leaf<rw_rax_cfa"}) {
    SCOPED_TRACE(key);
    const Tally& k = t[key];
    EXPECT_GE(k.samples, 100u) << "too few samples";
    EXPECT_GE(k.complete * 100, k.samples * 99)
        << k.complete << " of " << k.samples << " complete; e.g.\n"
        << k.first_bad;
  }
  RecordProperty("rw_rax_clobber_leaf stopped+complete",
                 std::to_string(clobbered.complete) + "+" + std::to_string(clobbered_right) +
                     "/" + std::to_string(clobbered.samples));
  EXPECT_GE(clobbered.complete, 100u) << "too few samples in rw_rax_clobber_leaf's loop";
  EXPECT_EQ(clobbered.complete + clobbered_right, clobbered.samples)
      << "a walk through a wrongly guessed RAX went on; e.g.\n"
      << clobbered.first_bad;
  EXPECT_EQ(c.stats.lost, 0u);
}

}  // namespace
