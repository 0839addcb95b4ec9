// report's outputs besides folded stacks: pprof (PprofBuilder) read back by
// an independent decoder, pprof-format (npm), and perf-script text
// (PerfScriptWriter) read by speedscope's perf importer; both against what
// report itself makes of the same records (StackFolder, top_functions).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "sframe_client/objects.h"
#include "sframe_object/object_file.h"
#include "sframe_profile/perf_script.h"
#include "sframe_profile/pprof_writer.h"
#include "sframe_profile/profile.h"
#include "sframe_profile/symbolizer.h"

namespace {

__attribute__((noipa)) int leaf_fn(int x) { return x * 7 + 1; }
__attribute__((noipa)) int middle_fn(int x) { return leaf_fn(x) + 2; }
__attribute__((noipa)) int outer_fn(int x) { return middle_fn(x) + 3; }

uint64_t at(int (*f)(int), uint64_t off) { return reinterpret_cast<uint64_t>(f) + off; }

std::string TempPath(const char* what) {
  return "/tmp/outputs_test." + std::to_string(getpid()) + "." + what;
}

// The records of a recording, replayed into any handler.
struct Recording {
  std::vector<std::pair<std::string, std::string>> meta;
  struct Event {
    enum { kMapping, kComm, kSample } type;
    sframe::ProfileMapping mapping;
    pid_t pid = 0;
    std::string comm;
    sframe::Sample sample;
  };
  std::vector<Event> events;

  void replay(sframe::ProfileHandler* h) const {
    for (const auto& [k, v] : meta) h->on_meta(k, v);
    for (const Event& e : events) {
      if (e.type == Event::kMapping) h->on_mapping(e.mapping);
      if (e.type == Event::kComm) h->on_comm(e.pid, e.comm);
      if (e.type == Event::kSample) h->on_sample(e.sample);
    }
    h->on_lost(3);
  }
  void mapping(sframe::ProfileMapping m) {
    events.push_back({Event::kMapping, std::move(m), 0, {}, {}});
  }
  void comm(pid_t pid, std::string name) {
    events.push_back({Event::kComm, {}, pid, std::move(name), {}});
  }
  void sample(uint32_t pid, uint32_t tid, uint64_t time, std::vector<uint64_t> kernel,
              std::vector<uint64_t> user, int times = 1) {
    sframe::Sample s;
    s.pid = pid;
    s.tid = tid;
    s.cpu = tid % 2;
    s.time = time;
    s.kernel = std::move(kernel);
    s.user = std::move(user);
    for (int i = 0; i < times; i++) {
      s.time += 250000;
      events.push_back({Event::kSample, {}, 0, {}, s});
    }
  }
};

constexpr pid_t kPid = 4242, kOther = 4343;
constexpr uint64_t kKernelBase = 0xffffffff81000000;

// This test program's executable mappings as pid kPid's and kOther's (so
// that its functions are named), a library that is not there, kernel
// frames named by a kallsyms of the test's, unnamed ones below it.
// The test program's own build id, which its mapping records carry (a
// mapping recorded with another one is not symbolized).
const std::string& ExeBuildId() {
  static const std::string id = sframe::read_build_id(sframe::self_exe_path());
  return id;
}

Recording MakeRecording() {
  Recording r;
  r.meta = {{"hz", "4000"}, {"target", "command demo"}};
  std::vector<sframe::FileMapping> maps;
  EXPECT_TRUE(sframe::read_file_mappings(0, &maps));
  for (pid_t pid : {kPid, kOther}) {
    for (const sframe::FileMapping& m : maps) {
      if (!m.executable || m.path != sframe::self_exe_path()) continue;
      r.mapping({pid, m.start, m.end, m.offset, m.path, ExeBuildId()});
    }
    r.mapping({pid, 0x7f0000000000, 0x7f0000100000, 0, "/nonexistent/libgone.so", ""});
  }
  r.comm(kPid, "worker");
  const std::vector<uint64_t> user = {at(&leaf_fn, 2), at(&middle_fn, 5), at(&outer_fn, 5)};
  r.sample(kPid, kPid, 1000000000, {kKernelBase + 0x110, kKernelBase + 0x20}, user, 5);
  r.sample(kPid, kPid + 1, 2000000000, {}, user, 3);
  r.sample(kPid, kPid + 1, 2100000000, {}, {at(&middle_fn, 1), at(&outer_fn, 5)}, 2);
  // Unnamed kernel frames (below the first kallsyms symbol): one frame.
  r.sample(kPid, kPid, 2200000000, {0xffffffff80000010, 0xffffffff80000020, kKernelBase + 0x20},
           {at(&outer_fn, 1)}, 4);
  // In the library that is gone, and outside every mapping.
  r.sample(kPid, kPid, 2300000000, {}, {0x7f0000001234, at(&outer_fn, 5)}, 2);
  r.sample(kPid, kPid, 2400000000, {}, {0x10000, at(&outer_fn, 5)}, 1);
  r.comm(kPid, "worker-2");  // an exec
  r.sample(kPid, kPid, 2500000000, {}, user, 2);
  r.comm(kOther, "other");
  r.sample(kOther, kOther, 2600000000, {kKernelBase + 0x110}, {at(&leaf_fn, 2), at(&outer_fn, 5)},
           6);
  return r;
}

struct KallsymsFile {
  std::string path = TempPath("kallsyms");
  KallsymsFile() {
    std::ofstream(path) << "ffffffff81000000 T do_syscall_64\n"
                           "ffffffff81000100 t vfs_read\n"
                           "ffffffff81000200 T schedule\n";
  }
  ~KallsymsFile() { unlink(path.c_str()); }
};

// report's counts per function, all of them.
std::map<std::string, std::pair<uint64_t, uint64_t>> ReportCounts(const Recording& r,
                                                                  uint64_t* total) {
  KallsymsFile ks;
  sframe::KernelSymbolizer kernel(ks.path);
  sframe::Symbolizer sym;
  sframe::StackFolder folder(&sym, &kernel);
  r.replay(&folder);
  const sframe::FoldedStacks folded = folder.folded();
  *total = sframe::total_samples(folded);
  std::map<std::string, std::pair<uint64_t, uint64_t>> out;
  for (const sframe::FunctionCount& f : sframe::top_functions(folded, SIZE_MAX, false)) {
    out[f.name] = {f.self, f.total};
  }
  return out;
}

bool HaveNodePackage(const std::string& dir) {
  return access((dir + "/package.json").c_str(), R_OK) == 0 &&
         system("node --version >/dev/null 2>&1") == 0;
}

std::string RunCommand(const std::string& cmd, int* status) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) {
    *status = -1;
    return "";
  }
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  *status = pclose(p);
  return out;
}

TEST(Pprof, GzipAndProfileShape) {
  KallsymsFile ks;
  sframe::KernelSymbolizer kernel(ks.path);
  sframe::Symbolizer sym;
  sframe::PprofBuilder pprof(&sym, &kernel);
  MakeRecording().replay(&pprof);
  EXPECT_EQ(pprof.samples(), 25u);
  const std::string gz = pprof.gzipped();
  ASSERT_GE(gz.size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);  // gzip's magic
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  const std::string raw = pprof.serialized();
  // The strings the profile must hold.
  EXPECT_FALSE(ExeBuildId().empty());
  for (const std::string& s : {std::string("samples"), std::string("count"), std::string("cpu"),
                        std::string("nanoseconds"), ExeBuildId(),
                        std::string("/nonexistent/libgone.so"), std::string("[kernel.kallsyms]"),
                        std::string("vfs_read_[k]"), std::string("worker-2"),
                        std::string("(anonymous namespace)::leaf_fn")}) {
    EXPECT_NE(raw.find(s), std::string::npos) << s;
  }
}

TEST(Pprof, WriteFileIsPrivate) {
  const std::string path = TempPath("pb.gz");
  sframe::write_file(path, "data");
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 4);
  unlink(path.c_str());
}

// pprof-format decodes the file: the same sample total, every function's
// self and total samples equal to report's, the types, period and
// mappings with their build ids, and no broken reference.
TEST(Pprof, IndependentReaderAgreesWithReport) {
  const std::string dir = SFRAME_PPROF_FORMAT_DIR;
  if (!HaveNodePackage(dir)) {
    GTEST_SKIP() << "node or " << dir << " missing (scripts/install-deps.sh installs it)";
  }
  const Recording rec = MakeRecording();
  uint64_t want_total = 0;
  const auto want = ReportCounts(rec, &want_total);
  ASSERT_EQ(want_total, 25u);

  KallsymsFile ks;
  sframe::KernelSymbolizer kernel(ks.path);
  sframe::Symbolizer sym;
  sframe::PprofBuilder pprof(&sym, &kernel);
  rec.replay(&pprof);
  const std::string path = TempPath("pprof.pb.gz");
  sframe::write_file(path, pprof.gzipped());
  int status = 0;
  const std::string out =
      RunCommand("node " SFRAME_PPROF_READ_SCRIPT " '" + dir + "' '" + path + "'", &status);
  unlink(path.c_str());
  ASSERT_EQ(status, 0) << out;

  std::map<std::string, std::pair<uint64_t, uint64_t>> got;
  std::vector<std::string> types, mappings;
  uint64_t total = 0;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    EXPECT_NE(line.rfind("bad ", 0), 0u) << line;
    std::istringstream l(line);
    std::string kind;
    l >> kind;
    if (kind == "total") {
      l >> total;
    } else if (kind == "type") {
      std::string t, u;
      l >> t >> u;
      types.push_back(t + "/" + u);
    } else if (kind == "func") {
      uint64_t self = 0, tot = 0;
      l >> self >> tot;
      std::string name;
      std::getline(l >> std::ws, name);
      got[name] = {self, tot};
    } else if (kind == "mapping") {
      mappings.push_back(line);
    } else if (kind == "period") {
      std::string p;
      l >> p;
      EXPECT_EQ(p, "250000");
    }
  }
  EXPECT_EQ(total, want_total);
  EXPECT_EQ(got, want);
  EXPECT_EQ(types, (std::vector<std::string>{"samples/count", "cpu/nanoseconds"}));
  // The program's mapping with its build id; the kernel's; the gone library.
  bool exe = false, kernel_map = false, gone = false;
  for (const std::string& m : mappings) {
    exe |= m.find(" " + ExeBuildId() + " " + sframe::self_exe_path()) != std::string::npos;
    kernel_map |= m.find(" [kernel.kallsyms]") != std::string::npos;
    gone |= m.find(" 7f0000000000 7f0000100000 0 - /nonexistent/libgone.so") != std::string::npos;
  }
  EXPECT_TRUE(exe && kernel_map && gone) << out;
}

// speedscope's perf importer takes every sample of the perf-script text,
// with the process, thread and time given, and its frames, read back the
// way stackcollapse-perf.pl names them, are report's stacks.
TEST(PerfScript, SpeedscopeReadsReportsStacks) {
  const std::string dir = SFRAME_SPEEDSCOPE_DIR;
  if (!HaveNodePackage(dir)) {
    GTEST_SKIP() << "node or " << dir << " missing (scripts/install-deps.sh installs it)";
  }
  const Recording rec = MakeRecording();
  KallsymsFile ks;
  sframe::KernelSymbolizer kernel(ks.path);
  std::map<std::vector<std::string>, uint64_t> want;
  {
    sframe::Symbolizer sym;
    sframe::StackFolder folder(&sym, &kernel);
    rec.replay(&folder);
    for (const auto& [frames, count] : folder.folded().stacks) want[frames] += count;
  }
  const std::string path = TempPath("perf-script.txt");
  {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    sframe::Symbolizer sym;
    sframe::PerfScriptWriter script(f, &sym, &kernel);
    rec.replay(&script);
    EXPECT_EQ(script.samples(), 25u);
    ASSERT_EQ(std::fclose(f), 0);
  }
  int status = 0;
  const std::string out =
      RunCommand("node " SFRAME_SPEEDSCOPE_PERF_SCRIPT " '" + dir + "' '" + path + "'", &status);
  unlink(path.c_str());
  ASSERT_EQ(status, 0) << out;

  std::map<std::vector<std::string>, uint64_t> got;
  size_t events = 0;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    std::stringstream st(line);
    for (std::string x; std::getline(st, x, '\t');) f.push_back(x);
    ASSERT_GE(f.size(), 4u) << line;
    events++;
    EXPECT_TRUE(f[1] == std::to_string(kPid) || f[1] == std::to_string(kOther)) << line;
    EXPECT_GT(std::stod(f[3]), 1.0) << line;
    std::vector<std::string> stack = {f[0]};  // the command: report's root
    for (size_t i = 4; i < f.size(); i++) {
      const size_t sep = f[i].find('\x1f');
      ASSERT_NE(sep, std::string::npos) << line;
      const std::string sym = f[i].substr(0, sep), file = f[i].substr(sep + 1);
      std::string name;
      if (file == "[kernel.kallsyms]") {
        name = sym == "[unknown]" ? "[kernel]" : sym + "_[k]";
        if (name == "[kernel]" && stack.back() == name) continue;
      } else if (sym == "[unknown]") {
        name = file == "[unknown]" ? "[unknown]" : "[" + file.substr(file.rfind('/') + 1) + "]";
      } else {
        name = sym;
      }
      stack.push_back(name);
    }
    got[stack]++;
  }
  EXPECT_EQ(events, 25u);
  EXPECT_EQ(got, want);
}

}  // namespace
