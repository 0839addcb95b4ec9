// sframe-prof's data file (profile.h): writer/reader round trip, malformed
// files, folding (order, merging, kernel and unknown frames), top-N, and the
// folded output as flamegraph.pl and speedscope's importer read it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "sframe_client/sframe_client.hpp"
#include "sframe_profile/flamegraph.h"
#include "sframe_profile/profile.h"
#include "sframe_profile/symbolizer.h"
#include "sframe_test/errno_of.h"

namespace {

extern "C" __attribute__((noinline)) int profile_test_leaf(int n) {
  volatile int x = 0;
  for (int i = 0; i < n; i++) x = x + i;
  return x;
}
extern "C" __attribute__((noinline)) void profile_test_caller() {
  profile_test_leaf(3);
  asm volatile("");
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/profile_test." + std::to_string(getpid()) + "." + name;
}

struct Collect : sframe::ProfileHandler {
  std::vector<std::pair<std::string, std::string>> meta;
  std::vector<sframe::ProfileMapping> maps;
  std::vector<std::pair<pid_t, std::string>> comms;
  std::vector<sframe::Sample> samples;
  uint64_t lost = 0;
  void on_meta(const std::string& k, const std::string& v) override { meta.emplace_back(k, v); }
  void on_mapping(const sframe::ProfileMapping& m) override { maps.push_back(m); }
  void on_comm(pid_t p, const std::string& n) override { comms.emplace_back(p, n); }
  void on_sample(const sframe::Sample& s) override { samples.push_back(s); }
  void on_lost(uint64_t n) override { lost += n; }
};

sframe::Sample MakeSample(uint32_t pid, std::vector<uint64_t> user, std::vector<uint64_t> kernel) {
  sframe::Sample s;
  s.pid = pid;
  s.tid = pid + 1;
  s.time = 123456789012345;
  s.cpu = 1;
  s.flags = SFRAME_SAMPLE_F_USER_MODE;
  s.user_stop = sframe::StopReason::kNoCoverage;
  s.user = std::move(user);
  s.kernel = std::move(kernel);
  return s;
}

TEST(ProfileFile, RoundTrip) {
  const std::string path = TempPath("rt");
  {
    sframe::ProfileWriter w(path);
    w.meta("hz", "2000");
    w.mapping({42, 0x400000, 0x401000, 0x1000, "/usr/bin/with space"});
    w.comm(42, "my prog");
    w.sample(MakeSample(42, {0x400010, 0x7f0000001234}, {0xffffffff81000010}));
    w.sample(MakeSample(42, {}, {}));
    w.lost(7);
    w.close();
  }
  Collect c;
  sframe::read_profile(path, &c);
  ASSERT_EQ(c.meta.size(), 1u);
  EXPECT_EQ(c.meta[0], std::make_pair(std::string("hz"), std::string("2000")));
  ASSERT_EQ(c.maps.size(), 1u);
  EXPECT_EQ(c.maps[0].pid, 42);
  EXPECT_EQ(c.maps[0].start, 0x400000u);
  EXPECT_EQ(c.maps[0].end, 0x401000u);
  EXPECT_EQ(c.maps[0].offset, 0x1000u);
  EXPECT_EQ(c.maps[0].path, "/usr/bin/with space");
  ASSERT_EQ(c.comms.size(), 1u);
  EXPECT_EQ(c.comms[0].second, "my prog");
  ASSERT_EQ(c.samples.size(), 2u);
  const sframe::Sample& s = c.samples[0];
  EXPECT_EQ(s.pid, 42u);
  EXPECT_EQ(s.tid, 43u);
  EXPECT_EQ(s.time, 123456789012345u);
  EXPECT_EQ(s.cpu, 1u);
  EXPECT_EQ(s.flags, uint32_t{SFRAME_SAMPLE_F_USER_MODE});
  EXPECT_EQ(s.user_stop, sframe::StopReason::kNoCoverage);
  EXPECT_EQ(s.user, (std::vector<uint64_t>{0x400010, 0x7f0000001234}));
  EXPECT_EQ(s.kernel, (std::vector<uint64_t>{0xffffffff81000010}));
  EXPECT_TRUE(c.samples[1].user.empty());
  EXPECT_TRUE(c.samples[1].kernel.empty());
  EXPECT_EQ(c.lost, 7u);
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "sframe-prof 1");
  unlink(path.c_str());
}

// The error of reading text as a data file: EBADMSG and "NAME:LINE".
std::string ReadError(const std::string& text) {
  std::istringstream in(text);
  Collect c;
  try {
    sframe::read_profile(in, "f", &c);
  } catch (const sframe::Error& e) {
    EXPECT_EQ(e.err(), EBADMSG) << e.what();
    return e.object() + ": " + e.what();
  }
  return "";
}

TEST(ProfileFile, MalformedFilesNameTheLine) {
  EXPECT_EQ(ReadError("sframe-prof 1\n# comment\n\nfuture-line whatever\nlost 1\n"), "");
  EXPECT_NE(ReadError("").find("f:0"), std::string::npos);
  EXPECT_NE(ReadError("perf data\n").find("f:1"), std::string::npos);
  EXPECT_NE(ReadError("sframe-prof 2\n").find("format version '2'"), std::string::npos);
  EXPECT_NE(ReadError("sframe-prof 1\nlost 1\nsample 1 2 3\n").find("f:3"), std::string::npos);
  EXPECT_NE(ReadError("sframe-prof 1\nsample 1 2 3 0 1 0 k= u=12,zz\n").find("f:2"),
            std::string::npos);
  EXPECT_NE(ReadError("sframe-prof 1\nsample 1 2 3 0 1 0 k=1, u=\n").find("f:2"),
            std::string::npos);
  EXPECT_NE(ReadError("sframe-prof 1\nsample 1 2 3 0 1 0 u= k=\n").find("f:2"), std::string::npos);
  EXPECT_NE(ReadError("sframe-prof 1\nsample 1 2 3 0 1 0 k= u= extra\n").find("f:2"),
            std::string::npos);
  EXPECT_NE(ReadError("sframe-prof 1\nmmap 1 2000 1000 0 /x\n").find("f:2"), std::string::npos);
  EXPECT_NE(ReadError("sframe-prof 1\nmmap 1 1000 2000 0\n").find("f:2"), std::string::npos);
  EXPECT_NE(ReadError("sframe-prof 1\nlost -1\n").find("f:2"), std::string::npos);
  EXPECT_NE(ReadError("sframe-prof 1\ncomm x name\n").find("f:2"), std::string::npos);
}

TEST(ProfileFile, UnreadableFile) {
  Collect c;
  EXPECT_EQ(sframe::errno_of([&] { sframe::read_profile("/nonexistent/sframe-prof.data", &c); }),
            ENOENT);
}

// A fake kallsyms: two kernel functions.
std::string FakeKallsyms() {
  const std::string path = TempPath("kallsyms");
  std::ofstream(path) << "ffffffff81000000 T fake_syscall\nffffffff81000100 T fake_handler\n";
  return path;
}

class FoldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // This program's mappings, given to a made-up pid.
    std::vector<sframe::FileMapping> maps;
    ASSERT_TRUE(sframe::read_file_mappings(0, &maps));
    for (const auto& m : maps) {
      if (m.executable) folder_.on_mapping({kPid, m.start, m.end, m.offset, m.path});
    }
    folder_.on_comm(kPid, "proftest");
  }
  static constexpr pid_t kPid = 999999;
  sframe::Symbolizer sym_;
  sframe::StackFolder folder_{&sym_, nullptr};
  const uint64_t leaf_ = reinterpret_cast<uint64_t>(&profile_test_leaf) + 2;
  const uint64_t ret_ = reinterpret_cast<uint64_t>(&profile_test_caller) + 4;
};

TEST_F(FoldTest, RootFirstMergedWithUnknownAndKernelFrames) {
  const uint64_t unknown = 0x10;
  folder_.on_sample(MakeSample(kPid, {leaf_, ret_}, {}));
  folder_.on_sample(MakeSample(kPid, {leaf_, ret_}, {}));
  folder_.on_sample(MakeSample(kPid, {leaf_, unknown}, {0xffffffff81000110, 0xffffffff81000010}));
  folder_.on_sample(MakeSample(4242, {unknown}, {}));  // no comm, no mappings
  const sframe::FoldedStacks f = folder_.folded();
  EXPECT_EQ(folder_.samples(), 4u);
  EXPECT_EQ(sframe::total_samples(f), 4u);
  EXPECT_EQ(sframe::format_folded(f),
            "pid 4242;[unknown] 1\n"
            "proftest;[unknown];profile_test_leaf;[kernel] 1\n"
            "proftest;profile_test_caller;profile_test_leaf 2\n");
  // With kernel symbols: the kernel leaf last.
  const std::string kallsyms = FakeKallsyms();
  sframe::KernelSymbolizer k(kallsyms);
  ASSERT_TRUE(k.usable());
  sframe::StackFolder with_k(&sym_, &k);
  with_k.on_comm(kPid, "proftest");
  EXPECT_EQ(
      with_k.frames(MakeSample(kPid, {leaf_, ret_}, {0xffffffff81000110, 0xffffffff81000010})),
      (std::vector<std::string>{"proftest", "profile_test_caller", "profile_test_leaf",
                                "fake_syscall_[k]", "fake_handler_[k]"}));
  unlink(kallsyms.c_str());
}

TEST_F(FoldTest, ObjectWithoutSymbolsIsNamedByItsFile) {
  folder_.on_mapping({kPid, 0x10000, 0x20000, 0, "/etc/hostname"});  // not ELF
  EXPECT_EQ(folder_.frames(MakeSample(kPid, {0x10010}, {})),
            (std::vector<std::string>{"proftest", "[hostname]"}));
  // A later mapping replaces the one it overlaps.
  folder_.on_mapping({kPid, 0x18000, 0x30000, 0, "/etc/passwd"});
  EXPECT_EQ(folder_.frames(MakeSample(kPid, {0x10010, 0x18010}, {})),
            (std::vector<std::string>{"proftest", "[passwd]", "[unknown]"}));
}

TEST(Top, SelfAndTotalCounts) {
  sframe::FoldedStacks f;
  f.stacks = {{{"p", "main", "f", "g"}, 3},
              {{"p", "main", "f"}, 2},
              {{"p", "main", "g", "g"}, 1},
              {{"p"}, 4}};
  EXPECT_EQ(sframe::total_samples(f), 10u);
  auto self = sframe::top_functions(f, 2, false);
  ASSERT_EQ(self.size(), 2u);
  EXPECT_EQ(self[0].name, "g");
  EXPECT_EQ(self[0].self, 4u);
  EXPECT_EQ(self[0].total, 4u);  // recursion counted once per sample
  EXPECT_EQ(self[1].name, "f");
  EXPECT_EQ(self[1].self, 2u);
  EXPECT_EQ(self[1].total, 5u);
  auto total = sframe::top_functions(f, 10, true);
  ASSERT_EQ(total.size(), 3u);  // the root frame is no function
  EXPECT_EQ(total[0].name, "main");
  EXPECT_EQ(total[0].total, 6u);
  EXPECT_EQ(total[0].self, 0u);
  EXPECT_EQ(total[1].name, "f");
  EXPECT_EQ(total[2].name, "g");
}

// Frames as a C++ profile has them.
sframe::FoldedStacks TrickyStacks() {
  sframe::FoldedStacks f;
  f.stacks = {
      {{"my prog", "main", "std::vector<int, std::allocator<int> >::push_back",
        "(anonymous namespace)::Foo::operator()", "[libc.so.6]"},
       12},
      {{"my prog", "main", "a;b", "[unknown]", "do_syscall_64_[k]"}, 3},
      {{"kworker/0:1"}, 1},
  };
  return f;
}

// flamegraph.pl's reading of a line: my ($stack, $samples) =
// (/^(.*)\s+?(\d+(?:\.\d*)?)$/), frames split at ';'.
TEST(Folded, FlamegraphPlReadsIt) {
  const sframe::FoldedStacks f = TrickyStacks();
  std::istringstream in(sframe::format_folded(f));
  const std::regex line_re(R"(^(.*)\s+?(\d+(?:\.\d*)?)$)");
  size_t i = 0;
  for (std::string line; std::getline(in, line); i++) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, line_re)) << line;
    ASSERT_LT(i, f.stacks.size());
    std::vector<std::string> frames;
    std::stringstream st(m[1].str());
    for (std::string fr; std::getline(st, fr, ';');) frames.push_back(fr);
    std::vector<std::string> want = f.stacks[i].first;
    for (std::string& w : want) std::replace(w.begin(), w.end(), ';', ':');
    EXPECT_EQ(frames, want);
    EXPECT_EQ(std::stoull(m[2].str()), f.stacks[i].second);
  }
  EXPECT_EQ(i, f.stacks.size());
}

// speedscope's own importer (the npm package scripts/install-deps.sh puts
// in .cache/npm) reads every line, with the same frames and counts.
TEST(Folded, SpeedscopeReadsIt) {
  const std::string dir = SFRAME_SPEEDSCOPE_DIR;
  if (access((dir + "/package.json").c_str(), R_OK) != 0 ||
      system("node --version >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "node or " << dir << " missing (scripts/install-deps.sh installs it)";
  }
  const sframe::FoldedStacks f = TrickyStacks();
  const std::string path = TempPath("folded");
  std::ofstream(path) << sframe::format_folded(f);
  const std::string cmd = "node " SFRAME_SPEEDSCOPE_SCRIPT " '" + dir + "' '" + path + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << out;
  unlink(path.c_str());
  // What speedscope made of it, in the same JSON shape.
  std::string want = "[";
  for (size_t i = 0; i < f.stacks.size(); i++) {
    if (i) want += ",";
    want += "{\"stack\":[";
    for (size_t j = 0; j < f.stacks[i].first.size(); j++) {
      std::string fr = f.stacks[i].first[j];
      std::replace(fr.begin(), fr.end(), ';', ':');
      want += (j ? ",\"" : "\"") + fr + "\"";
    }
    want += "],\"weight\":" + std::to_string(f.stacks[i].second) + "}";
  }
  want += "]";
  EXPECT_EQ(out, want);
}

}  // namespace
