// SFrame made from .eh_frame (libsframe-client's generator), supplied to the
// module by sframe::ProcessCoverage: stacks through libc, which carries no
// .sframe, and through programs and libraries built without it.
//
// As root the suite runs with discovery off (the test program's own .sframe
// is then supplied from its file), as a user with it on (discovered).
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "libs/chain_lib.h"
#include "sessions.h"
#include "sframe_gen/coverage.h"
#include "sframe_gen/sframe_cache.h"
#include "sframe_profile/symbolizer.h"

#ifndef SFRAME_CLIENT_TOOL_REL
#error "SFRAME_CLIENT_TOOL_REL (sframe-client, relative to this program's directory) must be defined"
#endif

namespace {

using sframe::StopReason;
using vmtest::Chain;
using vmtest::ChildResult;
using vmtest::RunChild;

const bool kDiscoveryOffWhenRoot = vmtest::DiscoveryOffWhenRoot();

struct UnwindReq {
  const sframe::Device* dev;
  sframe::UnwindResult result;
  bool done = false;
};

// Every frame from `from` up to (not including) the first frame named
// `until` lies in libc; there is at least one.
::testing::AssertionResult LibcFramesBetween(const Chain& c, size_t from,
                                             const std::string& until) {
  size_t i = from, n = 0;
  for (; i < c.frames.size() && c.frames[i].function != until; i++, n++) {
    if (c.frames[i].where.find("libc.so.6") == std::string::npos) {
      return ::testing::AssertionFailure()
             << "frame " << i << " is not in libc: " << c.frames[i].where << "\n"
             << c.Describe();
    }
  }
  if (i == c.frames.size()) {
    return ::testing::AssertionFailure() << "no frame " << until << "\n" << c.Describe();
  }
  if (n == 0) return ::testing::AssertionFailure() << "no libc frame\n" << c.Describe();
  return ::testing::AssertionSuccess() << n << " libc frames";
}

size_t IndexOf(const Chain& c, const std::string& function) {
  for (size_t i = 0; i < c.frames.size(); i++) {
    if (c.frames[i].function == function) return i;
  }
  return c.frames.size();
}

}  // namespace

// The comparison callback walks its own stack, once: up through libc's
// qsort (msort_with_tmp, qsort_r) to qsort_caller and main.
static int qsort_cb(const void* a, const void* b) {
  static UnwindReq* req;
  if (a == nullptr) {  // set up by qsort_caller
    req = static_cast<UnwindReq*>(const_cast<void*>(b));
    return 0;
  }
  if (!req->done) {
    req->result = req->dev->unwind_self(128, SFRAME_UNWIND_F_SFRAME);
    req->done = true;
  }
  VMTEST_BARRIER();
  const int x = *static_cast<const int*>(a), y = *static_cast<const int*>(b);
  return (x > y) - (x < y);
}

VMTEST_NOIPA static int qsort_caller(UnwindReq* r) {
  int v[64];
  for (int i = 0; i < 64; i++) v[i] = (i * 37) % 64;
  qsort_cb(nullptr, r);
  r->done = false;
  qsort(v, 64, sizeof(v[0]), qsort_cb);
  VMTEST_BARRIER();
  return v[0];
}

VMTEST_CHILD(qsort_chain) {
  (void)arg;
  sframe::Device dev(vmtest::DevicePath());
  UnwindReq req{&dev, {}};
  // Before anything is supplied: the walk stops in libc.
  qsort_caller(&req);
  vmtest::EmitUnwind("uncovered", req.result);

  sframe::SframeCache cache(vmtest::FreshCacheDir());
  sframe::ProcessCoverage cov(dev, 0, &cache);
  const sframe::CoverageUpdate u = cov.refresh();
  for (const auto& [object, why] : u.failed)
    std::printf("failed %s: %s\n", object.c_str(), why.c_str());
  const auto has = [](const std::vector<std::string>& v, const char* part) {
    return std::any_of(v.begin(), v.end(),
                       [&](const std::string& s) { return s.find(part) != std::string::npos; });
  };
  vmtest::EmitValue("libc_generated", has(u.generated, "libc.so.6"));
  vmtest::EmitValue("self_covered",
                    has(u.discovered, "ehframe_vmtest") || has(u.from_file, "ehframe_vmtest"));
  vmtest::EmitValue("supplied_bytes", u.supplied_bytes);
  qsort_caller(&req);
  vmtest::EmitUnwind("covered", req.result);
  // A second refresh finds nothing new; a second cache reads what the first
  // stored.
  vmtest::EmitValue("second_refresh", cov.refresh().generated.size());
  sframe::CacheResult how;
  cache.get("/lib/x86_64-linux-gnu/libc.so.6", &how);
  vmtest::EmitValue("cache_hit", how == sframe::CacheResult::kHit);
  return 0;
}

TEST(EhFrameTest, GeneratedSframeWalksThroughLibcQsort) {
  ChildResult r = RunChild("qsort_chain");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(r.values["libc_generated"], 1u) << r.output;
  EXPECT_EQ(r.values["self_covered"], 1u) << r.output;
  EXPECT_GT(r.values["supplied_bytes"], 100000u) << "libc's section is about 180 KB";
  EXPECT_EQ(r.values["second_refresh"], 0u);
  EXPECT_EQ(r.values["cache_hit"], 1u);

  const Chain& before = r.chains["uncovered"];
  EXPECT_EQ(IndexOf(before, "main"), before.frames.size()) << "without SFrame for libc\n"
                                                           << before.Describe();
  EXPECT_EQ(before.stop, StopReason::kNoCoverage);

  const Chain& c = r.chains["covered"];
  ASSERT_GE(c.frames.size(), 3u) << c.Describe();
  EXPECT_EQ(c.frames[0].function, vmtest::kUnwindSelf);
  EXPECT_EQ(c.frames[1].function, "qsort_cb");
  EXPECT_TRUE(LibcFramesBetween(c, 2, "qsort_caller"));
  const size_t caller = IndexOf(c, "qsort_caller");
  std::vector<std::string> tail = {"qsort_caller"};
  for (const auto& f : vmtest::ChildTail("qsort_chain")) tail.push_back(f);
  ASSERT_LT(caller, c.frames.size());
  for (size_t i = 0; i < tail.size(); i++) {
    ASSERT_LT(caller + i, c.frames.size()) << c.Describe();
    if (tail[i] == vmtest::kLibcStartCallMain) {
      EXPECT_EQ(c.frames[caller + i].pc, r.main_return) << c.Describe();
    } else {
      EXPECT_EQ(c.frames[caller + i].function, tail[i]) << c.Describe();
    }
  }
  EXPECT_EQ(c.nr_fp, 0u);
}

// A library without .sframe, dlopen()ed after the first refresh: the next
// refresh makes and supplies its SFrame.
static void plain_cb(void* arg) {
  auto* r = static_cast<UnwindReq*>(arg);
  r->result = r->dev->unwind_self(128, SFRAME_UNWIND_F_SFRAME);
  VMTEST_BARRIER();
}

VMTEST_NOIPA static int exe_calls_plain(dl_chain_fn fn, UnwindReq* r) {
  int v = fn(&plain_cb, r);
  VMTEST_BARRIER();
  return v + 1;
}

VMTEST_CHILD(dlopen_plain) {
  (void)arg;
  sframe::Device dev(vmtest::DevicePath());
  sframe::SframeCache cache(vmtest::FreshCacheDir());
  sframe::ProcessCoverage cov(dev, 0, &cache);
  cov.refresh();
  const std::string path = vmtest::NextToSelf("libvmtest_dl_plain.so");
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::printf("dlopen %s: %s\n", path.c_str(), dlerror());
    return 4;
  }
  auto fn = reinterpret_cast<dl_chain_fn>(dlsym(handle, "dl_chain_a"));
  UnwindReq req{&dev, {}};
  exe_calls_plain(fn, &req);
  vmtest::EmitUnwind("before", req.result);
  const sframe::CoverageUpdate u = cov.refresh();
  vmtest::EmitValue("generated", u.generated.size());
  vmtest::EmitValue(
      "lib_generated",
      u.generated.size() == 1 && u.generated[0].find("libvmtest_dl_plain.so") != std::string::npos);
  exe_calls_plain(fn, &req);
  vmtest::EmitUnwind("after", req.result);
  dlclose(handle);
  return 0;
}

TEST(EhFrameTest, ALibraryDlopenedLaterIsCoveredByTheNextRefresh) {
  ChildResult r = RunChild("dlopen_plain");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(r.values["lib_generated"], 1u) << r.output;
  const std::vector<std::string> inner = {vmtest::kUnwindSelf, "plain_cb", "dl_chain_b"};
  EXPECT_TRUE(vmtest::ChainIs(r.chains["before"], inner)) << "the library is not covered yet";
  std::vector<std::string> all = inner;
  all.push_back("dl_chain_a");
  all.push_back("exe_calls_plain");
  for (const auto& f : vmtest::ChildTail("dlopen_plain")) all.push_back(f);
  EXPECT_TRUE(vmtest::ChainStartsWith(r.chains["after"], all, r.main_return));
}

// ld.so's lazy binding: the first call of an IFUNC through a library's PLT
// runs its resolver under _dl_runtime_resolve_* and _dl_fixup.  The
// trampoline keeps its CFA in RBX (its frame realigned and sized at run
// time); below the topmost frame the walk knows no RBX and stopped there
// (BAD_FRAME: 1 to 2 % of the samples of as and ld, issue 30).  SFrame made
// by this generator writes the call to _dl_fixup with the rule of where
// _dl_fixup saves RBX (a call bridge): the walk reaches main.
static void lazy_cb(void* arg) {
  auto* r = static_cast<UnwindReq*>(arg);
  r->result = r->dev->unwind_self(128, SFRAME_UNWIND_F_SFRAME);
  r->done = true;  // not plain_cb's code: the linker would fold the two
  VMTEST_BARRIER();
}

VMTEST_NOIPA static int exe_calls_lazy(dl_chain_fn fn, UnwindReq* r) {
  int v = fn(&lazy_cb, r);
  VMTEST_BARRIER();
  return v + 1;
}

VMTEST_CHILD(lazy_ifunc) {
  (void)arg;
  if (getenv("LD_BIND_NOW") != nullptr) {
    std::printf("LD_BIND_NOW is set: no lazy binding\n");
    return 3;
  }
  sframe::Device dev(vmtest::DevicePath());
  // The ioctl's own PLT slot bound before the resolver needs it.
  UnwindReq req{&dev, {}};
  lazy_cb(&req);
  sframe::SframeCache cache(vmtest::FreshCacheDir());
  sframe::ProcessCoverage cov(dev, 0, &cache);
  const std::string path = vmtest::NextToSelf("libvmtest_lazy.so");
  void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (!handle) {
    std::printf("dlopen %s: %s\n", path.c_str(), dlerror());
    return 4;
  }
  const sframe::CoverageUpdate u = cov.refresh();
  for (const auto& [object, why] : u.failed)
    std::printf("failed %s: %s\n", object.c_str(), why.c_str());
  auto fn = reinterpret_cast<dl_chain_fn>(dlsym(handle, "lazy_call_target"));
  if (!fn) return 5;
  req.result = {};
  const int v = exe_calls_lazy(fn, &req);
  vmtest::EmitValue("returned", uint64_t(v));
  vmtest::EmitUnwind("lazy", req.result);
  dlclose(handle);
  return 0;
}

TEST(EhFrameTest, LazyBindingsResolverWalksThroughTheTrampolineToMain) {
  ChildResult r = RunChild("lazy_ifunc");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(r.values["returned"], 43u) << "lazy_target() + 1 + 1";
  const Chain& c = r.chains["lazy"];
  ASSERT_GE(c.frames.size(), 3u) << c.Describe();
  EXPECT_EQ(c.frames[0].function, vmtest::kUnwindSelf) << c.Describe();
  EXPECT_EQ(c.frames[1].function, "lazy_cb") << c.Describe();
  // The resolver, named by the IFUNC symbol whose value it is.
  size_t resolver = IndexOf(c, "lazy_target");
  if (resolver == c.frames.size()) resolver = IndexOf(c, "resolve_lazy_target");
  const size_t caller = IndexOf(c, "lazy_call_target");
  ASSERT_LT(resolver, c.frames.size()) << "the resolver is not in the chain\n" << c.Describe();
  ASSERT_LT(caller, c.frames.size())
      << "the walk did not get past ld.so's trampoline\n" << c.Describe();
  // _dl_fixup and the trampoline: two frames of ld.so between them.
  ASSERT_EQ(caller, resolver + 3) << c.Describe();
  for (size_t i = resolver + 1; i < caller; i++) {
    EXPECT_NE(c.frames[i].where.find("ld-linux"), std::string::npos)
        << "frame " << i << " is not in ld.so\n" << c.Describe();
  }
  std::vector<std::string> tail = {"lazy_call_target", "exe_calls_lazy"};
  for (const auto& f : vmtest::ChildTail("lazy_ifunc")) tail.push_back(f);
  for (size_t i = 0; i < tail.size(); i++) {
    ASSERT_LT(caller + i, c.frames.size()) << c.Describe();
    if (tail[i] == vmtest::kLibcStartCallMain) {
      EXPECT_EQ(c.frames[caller + i].pc, r.main_return) << c.Describe();
    } else {
      EXPECT_EQ(c.frames[caller + i].function, tail[i]) << c.Describe();
    }
  }
  EXPECT_EQ(c.nr_fp, 0u);
}

// ---- the profiler's case: a program built with neither -----------------------------

class EhFrameSessionTest : public vmtest::SessionTest {};

// qsort_workload is built without frame pointers and without .sframe, and
// spends its time in a callback of libc's qsort.  Covered the way
// `sframe-client record` covers its target, sampled at 10 kHz: the stitched
// user stacks of the samples in the callback pass through libc and reach
// main.
TEST_F(EhFrameSessionTest, QsortCallbackSamplesReachMainThroughLibc) {
  SKIP_WITHOUT_PERF();
  std::string err;
  auto w = vmtest::Workload::Start({"0"}, &err, "qsort_workload");
  ASSERT_TRUE(w) << err;
  sym_.load_process(w->pid());
  sframe::SframeCache cache(vmtest::FreshCacheDir());
  sframe::ProcessCoverage cov(dev(), w->pid(), &cache);
  const sframe::CoverageUpdate u = cov.refresh();
  const auto has = [&](const char* part) {
    return std::any_of(u.generated.begin(), u.generated.end(),
                       [&](const std::string& s) { return s.find(part) != std::string::npos; });
  };
  EXPECT_TRUE(has("qsort_workload")) << "the program's own .eh_frame";
  EXPECT_TRUE(has("libc.so.6"));
  EXPECT_TRUE(u.failed.empty()) << u.failed.front().first << ": " << u.failed.front().second;

  sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(10000));
  sframe::Session s = sframe::Session::start(sframe::Target::kProcess, w->pid(), SframeOnly());
  vmtest::Collected c = vmtest::Collect(&s, &ev, 2000);
  w->Kill();

  size_t in_callback = 0, complete = 0;
  std::string first_bad;
  for (const sframe::Sample* smp : c.Samples()) {
    if (smp->user.empty()) continue;
    const std::vector<sframe::Symbol> user = User(*smp);
    const std::vector<std::string> names = vmtest::Names(user);
    if (names.empty() || names[0] != "qw_compare") continue;
    in_callback++;
    // qw_compare, <libc>..., qw_sort_round, main, <libc>
    const auto round = std::find(names.begin(), names.end(), "qw_sort_round");
    const bool through_libc = names.size() > 2 && names[1] == vmtest::kLibc;
    const bool ok = through_libc && round != names.end() && round + 1 != names.end() &&
                    *(round + 1) == "main" &&
                    std::all_of(names.begin() + 1, round,
                                [](const std::string& n) { return n == vmtest::kLibc; });
    if (ok) {
      complete++;
    } else if (first_bad.empty()) {
      first_bad = vmtest::Describe(*smp, user);
    }
  }
  RecordProperty("complete", std::to_string(complete) + "/" + std::to_string(in_callback));
  ASSERT_GE(in_callback, 500u) << "too few samples in the callback";
  EXPECT_GE(complete * 100, in_callback * 99)
      << complete << " of " << in_callback << " complete; e.g.\n"
      << first_bad;
  EXPECT_EQ(c.stats.lost, 0u);
}

// The same through the command-line profiler: `sframe-client record --
// qsort_workload` covers the command as it execs and maps its libraries
// (SFrame made before the exec, supplied by refreshes every 10 ms at
// first).  Samples taken before the last supply (a window of some tens of
// milliseconds under emulation, recorded as a property) may stop early;
// of those after it, 99 % must be complete.
TEST_F(EhFrameSessionTest, RecordToolCoversTheCommandItStarts) {
  SKIP_WITHOUT_PERF();
  const std::string cmd = vmtest::BuildTreeFile(SFRAME_CLIENT_TOOL_REL) + " record -u -F 2000 -- " +
                          vmtest::NextToSelf("qsort_workload") + " 3 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out, block;
  std::vector<std::pair<double, bool>> callback_samples;  // time, complete
  std::string first_bad;
  char buf[1024];
  auto judge = [&] {
    double time = 0;
    if (std::sscanf(block.c_str(), "pid %*u tid %*u cpu %*u time %lf", &time) != 1) return;
    // "  u ADDR qw_compare+0x.. (qsort_workload)", then libc frames, then
    // qw_sort_round and main.
    std::istringstream lines(block);
    std::vector<std::string> u;
    for (std::string l; std::getline(lines, l);) {
      if (l.rfind("  u ", 0) == 0) u.push_back(l);
    }
    if (u.empty() || u[0].find(" qw_compare+") == std::string::npos) return;
    size_t i = 1;
    while (i < u.size() && u[i].find("(libc.so.6)") != std::string::npos) i++;
    const bool ok = i > 1 && i + 1 < u.size() &&
                    u[i].find(" qw_sort_round+") != std::string::npos &&
                    u[i + 1].find(" main+") != std::string::npos;
    callback_samples.emplace_back(time, ok);
    if (!ok && first_bad.empty()) first_bad = block;
  };
  std::string all;
  while (std::fgets(buf, sizeof(buf), p)) {
    const std::string line = buf;
    all += line;
    if (line.find("sframe-client record:") != std::string::npos) out += line;
    if (line == "\n") {
      judge();
      block.clear();
    } else {
      block += line;
    }
  }
  judge();
  const int status = pclose(p);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  // The time of the last supply (its stderr line may land inside a stdout
  // line: look anywhere).
  double covered_at = 0;
  const std::string key = "supplied SFrame for ";
  for (size_t at = all.find(key); at != std::string::npos; at = all.find(key, at + 1)) {
    const size_t t = all.find(" at ", at);
    double v = 0;
    if (t != std::string::npos && std::sscanf(all.c_str() + t + 4, "%lf", &v) == 1)
      covered_at = std::max(covered_at, v);
  }
  ASSERT_GT(covered_at, 0) << "no supply reported\n" << out;
  size_t after = 0, complete = 0, before = 0;
  double first = 0;
  for (const auto& [time, ok] : callback_samples) {
    if (first == 0) first = time;
    if (time < covered_at) {
      before++;
      continue;
    }
    after++;
    complete += ok;
  }
  RecordProperty("complete_after_coverage", std::to_string(complete) + "/" + std::to_string(after));
  RecordProperty("callback_samples_before_coverage", std::to_string(before));
  RecordProperty("coverage_ms_after_first_callback_sample",
                 std::to_string(static_cast<int>((covered_at - first) * 1000)));
  ASSERT_GE(after, 500u) << out;
  EXPECT_GE(complete * 100, after * 99) << complete << " of " << after << " complete; e.g.\n"
                                        << first_bad << out;
}
