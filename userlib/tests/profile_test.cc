// sframe-prof's data file (profile.h): writer/reader round trip, malformed
// files, folding (order, merging, kernel and unknown frames), top-N, and the
// folded output as flamegraph.pl and speedscope's importer read it.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "sframe_client/sframe_client.hpp"
#include "sframe_object/maps.h"
#include "sframe_object/object_file.h"
#include "sframe_object/object_table.h"
#include "sframe_profile/build_ids.h"
#include "sframe_profile/flamegraph.h"
#include "sframe_profile/profile.h"
#include "sframe_test/profile_contents.h"
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

using Collect = sframe::ProfileContents;

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

// A fresh directory of its own (the writer's temporary files go there).
std::string TempDir(const std::string& name) {
  const std::string dir = TempPath(name);
  EXPECT_EQ(mkdir(dir.c_str(), 0700), 0) << dir;
  return dir;
}

std::vector<std::string> DirEntries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

void RemoveDir(const std::string& dir) {
  for (const std::string& n : DirEntries(dir)) unlink((dir + "/" + n).c_str());
  rmdir(dir.c_str());
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void ExpectSameSample(const sframe::Sample& a, const sframe::Sample& b) {
  EXPECT_EQ(a.pid, b.pid);
  EXPECT_EQ(a.tid, b.tid);
  EXPECT_EQ(a.time, b.time);
  EXPECT_EQ(a.cpu, b.cpu);
  EXPECT_EQ(a.flags, b.flags);
  EXPECT_EQ(a.user_stop, b.user_stop);
  EXPECT_EQ(a.user, b.user);
  EXPECT_EQ(a.kernel, b.kernel);
}

TEST(ProfileFile, RoundTrip) {
  const std::string dir = TempDir("rt");
  const std::string path = dir + "/data";
  std::vector<sframe::Sample> want;
  want.push_back(MakeSample(42, {0x400010, 0x7f0000001234}, {0xffffffff81000010}));
  want.push_back(MakeSample(42, {}, {}));
  // Sharing a prefix, then a longer one, then the same stack: stack nodes
  // are reused and extended.
  want.push_back(MakeSample(42, {0x400020, 0x7f0000001234}, {}));
  want.push_back(MakeSample(42, {0x400030, 0x400020, 0x7f0000001234}, {0xffffffff81000010}));
  want.push_back(MakeSample(42, {0x400030, 0x400020, 0x7f0000001234}, {0xffffffff81000010}));
  // Kernel frames only; extremes of every field; time going backwards.
  sframe::Sample k = MakeSample(0, {}, {0xffffffff81000020, 0xffffffff81000010});
  k.time = 5;
  k.tid = 0;
  k.cpu = UINT32_MAX;
  k.flags = UINT32_MAX;
  want.push_back(k);
  sframe::Sample big = MakeSample(INT32_MAX, {UINT64_MAX, 0, 1}, {0});
  big.time = UINT64_MAX;
  big.tid = 1;
  want.push_back(big);
  {
    sframe::ProfileWriter w(path);
    w.meta("hz", "2000");
    w.meta("empty", "");
    w.mapping({42, 0x400000, 0x401000, 0x1000, "/usr/bin/with space\nand line",
               "0123456789abcdef0123456789abcdef01234567"});
    w.mapping({43, 0x7f0000000000, 0x7f0000002000, 0, "/lib/x.so", ""});
    w.comm(42, "my prog");
    for (const sframe::Sample& s : want) w.sample(s);
    w.lost(7);
    w.close();
  }
  Collect c;
  sframe::read_profile(path, &c);
  ASSERT_EQ(c.meta.size(), 2u);
  EXPECT_EQ(c.meta[0], std::make_pair(std::string("hz"), std::string("2000")));
  EXPECT_EQ(c.meta[1], std::make_pair(std::string("empty"), std::string()));
  ASSERT_EQ(c.maps.size(), 2u);
  EXPECT_EQ(c.maps[0].pid, 42);
  EXPECT_EQ(c.maps[0].start, 0x400000u);
  EXPECT_EQ(c.maps[0].end, 0x401000u);
  EXPECT_EQ(c.maps[0].offset, 0x1000u);
  EXPECT_EQ(c.maps[0].path, "/usr/bin/with space\nand line");
  EXPECT_EQ(c.maps[0].build_id, "0123456789abcdef0123456789abcdef01234567");
  EXPECT_EQ(c.maps[1].build_id, "");
  ASSERT_EQ(c.comms.size(), 1u);
  EXPECT_EQ(c.comms[0].second, "my prog");
  ASSERT_EQ(c.samples.size(), want.size());
  for (size_t i = 0; i < want.size(); i++) {
    SCOPED_TRACE(i);
    ExpectSameSample(c.samples[i], want[i]);
  }
  EXPECT_EQ(c.lost, 7u);
  // The header: magic and version 2, little-endian.
  const std::string bytes = ReadAll(path);
  EXPECT_EQ(bytes.substr(0, 12), std::string("\x89SFPROF\n\x02\0\0\0", 12));
  // Only the data file remains (no temporary file), mode 0600.
  EXPECT_EQ(DirEntries(dir), std::vector<std::string>{"data"});
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  RemoveDir(dir);
}

// Complete stacks of a program that spends its time in a few places: the
// stacks are written once, each sample refers to one.
TEST(ProfileFile, RepeatedStacksAreStoredOnce) {
  const std::string dir = TempDir("size");
  const std::string path = dir + "/data";
  std::vector<uint64_t> outer;
  for (int i = 0; i < 30; i++) outer.push_back(0x555555554000 + 0x1000 * i + 0x37);
  constexpr int kSamples = 10000;
  {
    sframe::ProfileWriter w(path);
    for (int i = 0; i < kSamples; i++) {
      std::vector<uint64_t> user = outer;
      user.insert(user.begin(), 0x7ffff7a00000 + 16 * (i % 64));  // 64 leaf PCs
      sframe::Sample s = MakeSample(4000, user, {0xffffffff81000010, 0xffffffff81000100});
      s.time = 1000000000ull + 1000000ull * i + (i * 7919) % 50000;  // 1 kHz, jitter
      s.tid = 4000 + i % 4;
      w.sample(s);
    }
    w.close();
  }
  const double per_sample = double(ReadAll(path).size()) / kSamples;
  RecordProperty("bytes_per_sample", std::to_string(per_sample));
  // 33 frames a sample; perf --call-graph fp stores 8 bytes a frame.
  EXPECT_LT(per_sample, 20.0);
  Collect c;
  sframe::read_profile(path, &c);
  ASSERT_EQ(c.samples.size(), size_t(kSamples));
  EXPECT_EQ(c.samples[kSamples - 1].user.size(), 31u);
  EXPECT_EQ(c.samples[kSamples - 1].user[0], 0x7ffff7a00000u + 16 * ((kSamples - 1) % 64));
  RemoveDir(dir);
}

TEST(ProfileFile, TheFileAppearsOnlyAtClose) {
  const std::string dir = TempDir("atomic");
  const std::string path = dir + "/data";
  std::ofstream(path) << "previous";
  chmod(path.c_str(), 0644);
  {
    // Destroyed without close(): a recording that failed.
    sframe::ProfileWriter w(path);
    w.sample(MakeSample(1, {1}, {}));
    w.flush();
    EXPECT_EQ(ReadAll(path), "previous");
  }
  EXPECT_EQ(DirEntries(dir), std::vector<std::string>{"data"});
  EXPECT_EQ(ReadAll(path), "previous");
  {
    sframe::ProfileWriter w(path);
    w.close();
  }
  EXPECT_EQ(DirEntries(dir), (std::vector<std::string>{"data", "data.old"}));
  EXPECT_EQ(ReadAll(path + ".old"), "previous");
  Collect c;
  sframe::read_profile(path, &c);
  // Again: data.old is replaced by the previous data.
  const std::string first = ReadAll(path);
  {
    sframe::ProfileWriter w(path);
    w.meta("k", "v");
    w.close();
  }
  EXPECT_EQ(ReadAll(path + ".old"), first);
  EXPECT_EQ(DirEntries(dir), (std::vector<std::string>{"data", "data.old"}));
  // Where it cannot be written: the errno, before anything is recorded.
  EXPECT_EQ(sframe::errno_of([&] { sframe::ProfileWriter w(dir + "/no/such/dir/data"); }), ENOENT);
  EXPECT_EQ(sframe::errno_of([&] { sframe::ProfileWriter w(dir); }), EISDIR);
  RemoveDir(dir);
}

// A valid file of a few records of each type, as bytes.
std::string SmallFile() {
  const std::string dir = TempDir("small");
  const std::string path = dir + "/data";
  {
    sframe::ProfileWriter w(path);
    w.meta("hz", "99");
    w.mapping({7, 0x1000, 0x2000, 0, "/bin/x", "abcd"});
    w.comm(7, "x");
    w.sample(MakeSample(7, {0x1010, 0x1020}, {0xffffffff81000010}));
    w.sample(MakeSample(7, {0x1018, 0x1020}, {}));
    w.lost(3);
    w.close();
  }
  std::string bytes = ReadAll(path);
  RemoveDir(dir);
  return bytes;
}

// The error of reading bytes as a data file: EBADMSG (checked), its text.
std::string BinaryError(const std::string& bytes) {
  std::istringstream in(bytes);
  Collect c;
  try {
    sframe::read_profile(in, "f", &c);
  } catch (const sframe::Error& e) {
    EXPECT_EQ(e.err(), EBADMSG) << e.what();
    return e.object() + ": " + e.what();
  }
  return "";
}

std::string Uvarint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(char((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
  return out;
}

const std::string kHeader("\x89SFPROF\n\x02\0\0\0", 12);
std::string Rec(int type, const std::string& payload) {
  return std::string(1, char(type)) + Uvarint(payload.size()) + payload;
}
const std::string kEnd0 = Rec(6, Uvarint(0));
const std::string kEnd1 = Rec(6, Uvarint(1));

TEST(ProfileFile, TruncatedFilesAreRejected) {
  const std::string bytes = SmallFile();
  EXPECT_EQ(BinaryError(bytes), "");
  // Every prefix: a clear error, never a partial read taken for the whole.
  for (size_t n = 0; n < bytes.size(); n++) {
    SCOPED_TRACE(n);
    EXPECT_NE(BinaryError(bytes.substr(0, n)), "");
  }
  EXPECT_NE(BinaryError(bytes.substr(0, bytes.size() - 3)).find("truncated"), std::string::npos);
  EXPECT_NE(BinaryError(bytes + "x").find("after the end record"), std::string::npos);
}

TEST(ProfileFile, HostileFilesAreRejectedWithTheOffset) {
  // Known good minimal file; unknown record types are skipped.
  EXPECT_EQ(BinaryError(kHeader + Rec(200, "future") + kEnd0), "");
  // Another version.
  EXPECT_NE(BinaryError(std::string("\x89SFPROF\n\x03\0\0\0", 12) + kEnd0)
                .find("f at offset 8: format version 3; this sframe-prof reads versions 1 and 2"),
            std::string::npos);
  EXPECT_NE(BinaryError(std::string("\x89SFPROF\n\x01\0\0\0", 12)).find("format version 1"),
            std::string::npos);
  // A length field of 2^62: refused before anything is allocated.
  EXPECT_NE(BinaryError(kHeader + std::string(1, char(4)) + Uvarint(uint64_t(1) << 62))
                .find("read profile f at offset 12: record length 4611686018427387904 above"),
            std::string::npos)
      << BinaryError(kHeader + std::string(1, char(4)) + Uvarint(uint64_t(1) << 62));
  // A length that does not fit 64 bits.
  EXPECT_NE(BinaryError(kHeader + std::string(1, char(4)) + std::string(10, '\xff') + "\x01")
                .find("does not fit"),
            std::string::npos);
  // A string longer than its record.
  EXPECT_NE(BinaryError(kHeader + Rec(1, Uvarint(100) + "k") + kEnd0)
                .find("read profile f at offset 15: meta key longer than its record"),
            std::string::npos);
  // A sample header, then the stack part.
  const std::string head = Uvarint(2) + Uvarint(7) + Uvarint(0) + Uvarint(0) + Uvarint(1) +
                           Uvarint(0);
  // A stack node not defined yet.
  EXPECT_NE(BinaryError(kHeader + Rec(4, head + Uvarint(1) + Uvarint(0) + Uvarint(0)) + kEnd1)
                .find("stack node 1 not defined"),
            std::string::npos);
  // User frames below kernel frames.
  const std::string kernel_frame =
      Rec(4, head + Uvarint(0) + Uvarint(0) + Uvarint(1) + Uvarint(5));
  EXPECT_NE(BinaryError(kHeader + kernel_frame +
                        Rec(4, head + Uvarint(1) + Uvarint(1) + Uvarint(0) + Uvarint(5)) +
                        Rec(6, Uvarint(2)))
                .find("user frames after kernel frames"),
            std::string::npos);
  // Deeper than the limit: refused before it is built.
  EXPECT_NE(BinaryError(kHeader + Rec(4, head + Uvarint(0) + Uvarint(5000) + Uvarint(0)) + kEnd1)
                .find("deeper than 4096"),
            std::string::npos);
  // Fields out of range.
  EXPECT_NE(BinaryError(kHeader + Rec(3, Uvarint(uint64_t(1) << 40) + Uvarint(0)) + kEnd0)
                .find("pid 1099511627776 out of range"),
            std::string::npos);
  EXPECT_NE(BinaryError(kHeader + Rec(2, Uvarint(1) + Uvarint(10) + Uvarint(0) + Uvarint(0) +
                                             Uvarint(2) + "/x" + Uvarint(0)) +
                        kEnd0)
                .find("mapping size"),
            std::string::npos);
  EXPECT_NE(BinaryError(kHeader + Rec(2, Uvarint(1) + Uvarint(10) + Uvarint(1) + Uvarint(0) +
                                             Uvarint(2) + "/x" + Uvarint(65) +
                                             std::string(65, 'b')) +
                        kEnd0)
                .find("build id longer than 64"),
            std::string::npos);
  // The end record's count must match.
  EXPECT_NE(BinaryError(kHeader + kEnd1).find("the end record counts 1 samples, the file has 0"),
            std::string::npos);
}

// Every byte of a valid file changed: read or refused with EBADMSG, never
// anything else (BinaryError checks the errno).
TEST(ProfileFile, CorruptedBytesAreReadOrRefused) {
  const std::string bytes = SmallFile();
  for (size_t i = 0; i < bytes.size(); i++) {
    for (unsigned char x : {0x01, 0x80, 0xff}) {
      std::string b = bytes;
      b[i] = char(b[i] ^ x);
      BinaryError(b);
    }
  }
}

// The format as documented, read by another program: sframe_prof_data.py
// (written from docs/sframe-prof-format.md, not from this library) prints
// the file in the shape of version 1's lines; every record comes out as
// written.
TEST(ProfileFile, AnIndependentReaderOfTheDocumentReadsIt) {
  if (system("python3 --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  const std::string dir = TempDir("py");
  const std::string path = dir + "/data";
  std::string want = "sframe-prof 1\n";
  {
    sframe::ProfileWriter w(path);
    w.meta("hz", "99");
    want += "meta hz 99\n";
    w.mapping({7, 0x1000, 0x3000, 0x2000, "/bin/x", "00ff"});
    want += "mmap 7 1000 3000 2000 /bin/x build_id=00ff\n";
    w.comm(7, "x y");
    want += "comm 7 x y\n";
    const std::vector<sframe::Sample> samples = {
        MakeSample(7, {0x1010, 0x1020}, {0xffffffff81000010}),
        MakeSample(7, {0x1018, 0x1020}, {}),
        MakeSample(7, {0x1018, 0x1020}, {0xffffffff81000020, 0xffffffff81000010}),
        MakeSample(7, {}, {0xffffffff81000010}),
        MakeSample(9, {0x1018, 0x1020}, {}),
    };
    uint64_t time = 5000;
    for (sframe::Sample s : samples) {
      s.time = time -= 7;
      w.sample(s);
      char head[128];
      std::snprintf(head, sizeof(head), "sample %llu %u %u %u %x %u k=", (unsigned long long)s.time,
                    s.pid, s.tid, s.cpu, s.flags, unsigned(s.user_stop));
      want += head;
      for (size_t i = 0; i < s.kernel.size(); i++) {
        std::snprintf(head, sizeof(head), i ? ",%llx" : "%llx", (unsigned long long)s.kernel[i]);
        want += head;
      }
      want += " u=";
      for (size_t i = 0; i < s.user.size(); i++) {
        std::snprintf(head, sizeof(head), i ? ",%llx" : "%llx", (unsigned long long)s.user[i]);
        want += head;
      }
      want += "\n";
    }
    w.lost(4);
    want += "lost 4\n";
    w.close();
  }
  FILE* p = popen(("python3 " SFRAME_PROF_DATA_PY " " + path + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << out;
  EXPECT_EQ(out, want);
  RemoveDir(dir);
}

// Version 1 (text) files of earlier sframe-prof are still read.
TEST(ProfileFile, ReadsVersion1) {
  std::istringstream in(
      "sframe-prof 1\nmeta hz 99\nmmap 7 1000 2000 0 /bin/x y\ncomm 7 x\n"
      "sample 5 7 8 1 1 2 k=ffffffff81000010 u=1010,1020\nlost 3\n");
  Collect c;
  sframe::read_profile(in, "f", &c);
  ASSERT_EQ(c.maps.size(), 1u);
  EXPECT_EQ(c.maps[0].path, "/bin/x y");
  EXPECT_EQ(c.maps[0].build_id, "");
  ASSERT_EQ(c.samples.size(), 1u);
  EXPECT_EQ(c.samples[0].user, (std::vector<uint64_t>{0x1010, 0x1020}));
  EXPECT_EQ(c.samples[0].kernel, (std::vector<uint64_t>{0xffffffff81000010}));
  EXPECT_EQ(c.lost, 3u);
}

// The error of reading text (version 1) as a data file: EBADMSG and "NAME:LINE".
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
      if (m.executable) folder_.on_mapping({kPid, m.start, m.end, m.offset, m.path, ""});
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
  folder_.on_mapping({kPid, 0x10000, 0x20000, 0, "/etc/hostname", ""});  // not ELF
  EXPECT_EQ(folder_.frames(MakeSample(kPid, {0x10010}, {})),
            (std::vector<std::string>{"proftest", "[hostname]"}));
  // A later mapping replaces the one it overlaps.
  folder_.on_mapping({kPid, 0x18000, 0x30000, 0, "/etc/passwd", ""});
  EXPECT_EQ(folder_.frames(MakeSample(kPid, {0x10010, 0x18010}, {})),
            (std::vector<std::string>{"proftest", "[passwd]", "[unknown]"}));
}

// This test program's own executable mappings, with a build id.
std::vector<sframe::ProfileMapping> OwnMappings(pid_t pid, const std::string& build_id) {
  std::vector<sframe::FileMapping> maps;
  EXPECT_TRUE(sframe::read_file_mappings(0, &maps));
  std::vector<sframe::ProfileMapping> out;
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  EXPECT_GT(n, 0);
  const std::string self(exe, n > 0 ? size_t(n) : 0);
  for (const auto& m : maps) {
    if (m.executable && m.path == self) out.push_back({pid, m.start, m.end, m.offset, m.path, build_id});
  }
  EXPECT_FALSE(out.empty());
  return out;
}

TEST_F(FoldTest, AMappingOfAnotherBuildIsNotSymbolized) {
  const std::string self_id = sframe::read_build_id("/proc/self/exe");
  ASSERT_FALSE(self_id.empty()) << "the test program has no build id";
  std::vector<std::string> warnings;
  sframe::Symbolizer sym;
  sframe::StackFolder folder(&sym, nullptr);
  folder.set_warning_sink([&](const std::string& w) { warnings.push_back(w); });
  folder.on_comm(kPid, "proftest");
  folder.on_comm(kPid + 1, "other");
  // The same build: symbolized, no warning.
  for (const auto& m : OwnMappings(kPid, self_id)) folder.on_mapping(m);
  EXPECT_EQ(folder.frames(MakeSample(kPid, {leaf_, ret_}, {})),
            (std::vector<std::string>{"proftest", "profile_test_caller", "profile_test_leaf"}));
  EXPECT_TRUE(warnings.empty());
  // The recording saw another build at this path: named by the file only,
  // one warning however many mappings and processes.
  const std::string other(40, 'e');
  for (const auto& m : OwnMappings(kPid + 1, other)) folder.on_mapping(m);
  for (const auto& m : OwnMappings(kPid + 2, other)) folder.on_mapping(m);
  const std::vector<sframe::ProfileMapping> own = OwnMappings(kPid, self_id);
  const std::string base = "[" + own[0].path.substr(own[0].path.rfind('/') + 1) + "]";
  EXPECT_EQ(folder.frames(MakeSample(kPid + 1, {leaf_, ret_}, {})),
            (std::vector<std::string>{"other", base, base}));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], own[0].path + " has build id " + self_id + ", the recording saw " +
                             other + ": its frames are not symbolized (shown as " + base + ")");
  // A later mapping of the right build replaces it.
  for (const auto& m : OwnMappings(kPid + 1, self_id)) folder.on_mapping(m);
  EXPECT_EQ(folder.frames(MakeSample(kPid + 1, {leaf_, ret_}, {})),
            (std::vector<std::string>{"other", "profile_test_caller", "profile_test_leaf"}));
  // Without a recorded build id (version 1 files): trusted as before.
  for (const auto& m : OwnMappings(kPid + 3, "")) folder.on_mapping(m);
  EXPECT_EQ(folder.frames(MakeSample(kPid + 3, {leaf_}, {})).back(), "profile_test_leaf");
  EXPECT_EQ(warnings.size(), 1u);
}

TEST(MappedObjectIds, ReadsEachObjectOnce) {
  const std::string self_id = sframe::read_build_id("/proc/self/exe");
  ASSERT_FALSE(self_id.empty());
  sframe::MappedObjectIds ids;
  const auto own = OwnMappings(getpid(), "");
  for (const auto& m : own) EXPECT_EQ(ids.of_mapping(getpid(), m.start, m.end, m.path), self_id);
  // By path alone (the process gone): the same object, not read again.
  EXPECT_EQ(ids.of_mapping(999999999, 1, 2, own[0].path), self_id);
  EXPECT_EQ(ids.reads(), 1u);
  EXPECT_EQ(ids.of_mapping(999999999, 1, 2, "/nonexistent"), "");
  EXPECT_EQ(ids.of_mapping(999999999, 1, 2, "/etc/hostname"), "");  // not ELF
}

// Given the recording's table, the build ids come from the objects it
// holds (opened by coverage, say): nothing is opened again, by maps line,
// by side-band record or by path.
TEST(MappedObjectIds, TakesTheRecordingsObjects) {
  sframe::ObjectTable objects;
  const auto own = OwnMappings(getpid(), "");
  const auto held = objects.open_path(own[0].path);
  sframe::MappedObjectIds ids(&objects);
  for (const sframe::MapsEntry& m : sframe::read_maps(0)) {
    if (m.is_file() && m.executable() && m.path == own[0].path) {
      EXPECT_EQ(ids.of_mapping(getpid(), m), held->build_id());
    }
  }
  for (const auto& m : own) {
    EXPECT_EQ(ids.of_mapping(getpid(), m.start, m.end, m.path), held->build_id());
  }
  EXPECT_EQ(ids.of_mapping(999999999, 1, 2, own[0].path), held->build_id());
  EXPECT_EQ(ids.reads(), 0u);
  EXPECT_EQ(objects.stats().opened, 1u);
}

// A report: the build id check and the symbols of a mapping come from one
// object, the file opened once.
TEST_F(FoldTest, TheBuildIdCheckAndTheSymbolsShareTheObject) {
  const std::string self_id = sframe::read_build_id("/proc/self/exe");
  sframe::ObjectTable objects;
  sframe::Symbolizer sym(&objects);
  sframe::StackFolder folder(&sym, nullptr);
  folder.on_comm(kPid, "proftest");
  for (const auto& m : OwnMappings(kPid, self_id)) folder.on_mapping(m);
  EXPECT_EQ(folder.frames(MakeSample(kPid, {leaf_, ret_}, {})),
            (std::vector<std::string>{"proftest", "profile_test_caller", "profile_test_leaf"}));
  EXPECT_EQ(objects.stats().opened, 1u);
  EXPECT_GE(objects.stats().reused, 1u);
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
