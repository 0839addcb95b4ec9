// sframe-prof report's outputs for other tools (issue 13, item 6), on a real
// recording of the demo (examples/demo_workload: threads, a shared library,
// system calls; no frame pointers, no .sframe):
//   - --format pprof, read back by an independent reader (the npm package
//     pprof-format, run with the host's node, which the guest sees): the
//     same sample total and the same self and total samples for every
//     function as `report --top`;
//   - --format perf-script, read by speedscope's perf importer: every
//     sample, with report's stacks.
// The node checks are tests of their own, skipped (never passed) when node
// or the packages are missing (scripts/install-deps.sh installs them; CMake
// copies them into the build tree, the part of the host the test can name).
// perf is allowed to root only in the VM: the user run skips.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "prof_tool.h"
#include "sessions.h"
#include "vmtest.h"

#ifndef SFRAME_DEMO_WORKLOAD_REL
#error "SFRAME_DEMO_WORKLOAD_REL must be defined"
#endif

namespace {

using Result = vmtest::ShellResult;
using vmtest::CanProfile;
using vmtest::Prof;
using vmtest::ProfTool;
using vmtest::RunShell;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using Counts = std::map<std::string, std::pair<uint64_t, uint64_t>>;  // self, total

// `report --top N`: the header's sample total and the first (self) table,
// every function when N is large enough.
bool ParseTop(const std::string& text, uint64_t* total, Counts* out) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) return false;
  const size_t colon = line.find(": ");
  if (line.rfind("# ", 0) != 0 || colon == std::string::npos) return false;
  *total = std::stoull(line.substr(colon + 2));
  while (std::getline(in, line) && line.find("FUNCTION") == std::string::npos) {
  }
  while (std::getline(in, line) && !line.empty()) {
    double self_pct = 0, total_pct = 0;
    unsigned long long self = 0, tot = 0;
    int name_at = 0;
    if (std::sscanf(line.c_str(), " %lf%% %llu %lf%% %llu  %n", &self_pct, &self, &total_pct, &tot,
                    &name_at) < 4 ||
        name_at == 0) {
      return false;
    }
    (*out)[line.substr(static_cast<size_t>(name_at))] = {self, tot};
  }
  return true;
}

// One recording of the demo, made by the first test that needs it.
class OutputsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!CanProfile()) return;
    recorded_ = Prof("record -F 1000 -o demo.data -- " +
                     vmtest::BuildTreeFile(SFRAME_DEMO_WORKLOAD_REL) + " 150");
    top_ = Prof("report --top 100000 -i demo.data");
  }
  void SetUp() override {
    if (!CanProfile()) GTEST_SKIP() << "perf not allowed to this user (prof_vmtest covers it)";
    ASSERT_EQ(recorded_.status, 0) << recorded_.output;
    ASSERT_EQ(top_.status, 0) << top_.output;
    ASSERT_TRUE(ParseTop(top_.output, &total_, &counts_)) << top_.output;
    ASSERT_GE(total_, 100u) << top_.output;
  }
  // node and a package copied into the build tree next to this program.
  static bool HaveNode(const std::string& package) {
    return RunShell("node --version").status == 0 &&
           access((vmtest::NextToSelf("npm/" + package) + "/package.json").c_str(), R_OK) == 0;
  }

  static Result recorded_, top_;
  uint64_t total_ = 0;
  Counts counts_;
};
Result OutputsTest::recorded_, OutputsTest::top_;

TEST_F(OutputsTest, PprofIsAGzippedProfileWithTheDemosMappings) {
  const Result r = Prof("report --format pprof -i demo.data -o demo.pb.gz");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("(" + std::to_string(total_) + " samples)"), std::string::npos)
      << r.output;
  const std::string gz = ReadFile("demo.pb.gz");
  ASSERT_GE(gz.size(), 100u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  RecordProperty("pprof_bytes", std::to_string(gz.size()));
  RecordProperty("samples", std::to_string(total_));
  // -o is required for the binary format: a usage error (perf's 129)
  // that says so.
  const Result no_file = Prof("report --format pprof -i demo.data");
  EXPECT_EQ(no_file.status, 129);
  EXPECT_NE(no_file.output.find("give it with -o FILE"), std::string::npos) << no_file.output;
}

TEST_F(OutputsTest, PprofReadBackByPprofFormatHasReportsTotalAndTopFunctions) {
  if (!HaveNode("pprof-format")) {
    GTEST_SKIP() << "node or npm/pprof-format missing next to this program "
                    "(scripts/install-deps.sh, then cmake)";
  }
  ASSERT_EQ(Prof("report --format pprof -i demo.data -o demo.pb.gz").status, 0);
  const Result r = RunShell("node " + vmtest::NextToSelf("pprof_read.js") + " " +
                       vmtest::NextToSelf("npm/pprof-format") + " demo.pb.gz");
  ASSERT_EQ(r.status, 0) << r.output;
  uint64_t total = 0;
  Counts got;
  bool build_id = false;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    EXPECT_NE(line.rfind("bad ", 0), 0u) << line;
    std::istringstream l(line);
    std::string kind;
    l >> kind;
    if (kind == "total") {
      l >> total;
    } else if (kind == "func") {
      uint64_t self = 0, tot = 0;
      l >> self >> tot;
      std::string name;
      std::getline(l >> std::ws, name);
      got[name] = {self, tot};
    } else if (kind == "mapping") {
      std::string id, start, limit, offset, bid, file;
      l >> id >> start >> limit >> offset >> bid >> file;
      if (file.find("demo_workload") != std::string::npos && bid != "-") build_id = true;
    }
  }
  EXPECT_EQ(total, total_);
  EXPECT_EQ(got, counts_);
  // The top functions, by self and by total samples, as report ranks them.
  auto top = [](const Counts& c, bool by_total) {
    std::vector<std::pair<uint64_t, std::string>> v;
    for (const auto& [name, n] : c) v.push_back({by_total ? n.second : n.first, name});
    std::sort(v.rbegin(), v.rend());
    v.resize(std::min<size_t>(v.size(), 5));
    return v;
  };
  EXPECT_EQ(top(got, false), top(counts_, false));
  EXPECT_EQ(top(got, true), top(counts_, true));
  RecordProperty("top_self", top(got, false).empty() ? "" : top(got, false)[0].second);
  // Build ids come with the mapping records (when the recorder writes them).
  RecordProperty("demo_mapping_has_build_id", build_id ? "yes" : "no");
}

TEST_F(OutputsTest, PerfScriptReadBySpeedscopeHasEverySampleWithReportsStacks) {
  if (!HaveNode("speedscope")) {
    GTEST_SKIP() << "node or npm/speedscope missing next to this program "
                    "(scripts/install-deps.sh, then cmake)";
  }
  const Result script = Prof("report --format perf-script -i demo.data -o demo.perf.txt");
  ASSERT_EQ(script.status, 0) << script.output;
  const Result folded = Prof("report --folded -i demo.data");
  ASSERT_EQ(folded.status, 0) << folded.output;
  std::map<std::vector<std::string>, uint64_t> want;
  std::istringstream fin(folded.output);
  for (std::string line; std::getline(fin, line);) {
    const size_t sp = line.rfind(' ');
    std::vector<std::string> frames;
    std::stringstream st(line.substr(0, sp));
    for (std::string f; std::getline(st, f, ';');) frames.push_back(f);
    want[frames] += std::stoull(line.substr(sp + 1));
  }
  const Result r = RunShell("node " + vmtest::NextToSelf("speedscope_perf.js") + " " +
                       vmtest::NextToSelf("npm/speedscope") + " demo.perf.txt");
  ASSERT_EQ(r.status, 0) << r.output.substr(0, 2000);
  std::map<std::vector<std::string>, uint64_t> got;
  uint64_t events = 0;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    std::stringstream st(line);
    for (std::string x; std::getline(st, x, '\t');) f.push_back(x);
    ASSERT_GE(f.size(), 4u) << line;
    events++;
    // Read back the way stackcollapse-perf.pl names frames (--kernel).
    std::vector<std::string> stack = {f[0]};
    for (size_t i = 4; i < f.size(); i++) {
      const size_t sep = f[i].find('\x1f');
      ASSERT_NE(sep, std::string::npos) << line;
      const std::string sym = f[i].substr(0, sep), file = f[i].substr(sep + 1);
      std::string name = sym;
      if (file == "[kernel.kallsyms]" || (file != "[unknown]" && file.size() > 2 && file[0] == '[')) {
        name = sym == "[unknown]" ? "[kernel]" : sym + "_[k]";
        if (name == "[kernel]" && stack.back() == name) continue;
      } else if (sym == "[unknown]") {
        name = file == "[unknown]" ? "[unknown]" : "[" + file.substr(file.rfind('/') + 1) + "]";
      }
      stack.push_back(name);
    }
    got[stack]++;
  }
  EXPECT_EQ(events, total_);
  EXPECT_EQ(got, want);
}

}  // namespace
