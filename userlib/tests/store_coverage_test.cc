// sframe-coverd's status file and how a tool finds the service (no module
// needed): the round trip of every field, paths with tabs and newlines, a
// file that is not one, and a summary naming a process that is not the
// service.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "sframe_gen/store_coverage.h"
#include "sframe_test/errno_of.h"

namespace {

class StatusDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/coverd-status-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

TEST_F(StatusDir, EveryFieldSurvivesTheRoundTrip) {
  sframe::CoverageStatus s;
  s.counters = {{"pid", 42}, {"covered", 2}, {"cpu_ms", 1234567890123ull}};
  sframe::StoreFile a;
  a.state = sframe::StoreFile::State::kCovered;
  a.dev = 2049;
  a.ino = 1234567;
  a.id = 17;
  a.source = "own .sframe";
  a.sframe_bytes = 4096;
  a.rows_permille = 998;
  a.path = "/usr/lib/with\ttab and\nnewline\\back";
  sframe::StoreFile b;
  b.state = sframe::StoreFile::State::kFailed;
  b.dev = 1;
  b.ino = 2;
  b.reason = "no .eh_frame";
  b.path = "/bin/x";
  sframe::StoreFile c = b;
  c.state = sframe::StoreFile::State::kDropped;
  c.reason = "file changed";
  s.files = {a, b, c};
  const std::string path = dir_ + "/status";
  sframe::write_coverage_status(path, s, 0600);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const sframe::CoverageStatus r = sframe::read_coverage_status(path);
  EXPECT_EQ(r.counters, s.counters);
  EXPECT_EQ(r.counter("cpu_ms"), 1234567890123ull);
  EXPECT_EQ(r.counter("absent"), 0u);
  ASSERT_EQ(r.files.size(), 3u);
  EXPECT_EQ(r.files[0].state, a.state);
  EXPECT_EQ(r.files[0].dev, a.dev);
  EXPECT_EQ(r.files[0].ino, a.ino);
  EXPECT_EQ(r.files[0].id, a.id);
  EXPECT_EQ(r.files[0].source, a.source);
  EXPECT_EQ(r.files[0].sframe_bytes, a.sframe_bytes);
  EXPECT_EQ(r.files[0].rows_permille, a.rows_permille);
  EXPECT_EQ(r.files[0].path, a.path);
  EXPECT_EQ(r.files[1].state, sframe::StoreFile::State::kFailed);
  EXPECT_EQ(r.files[1].reason, "no .eh_frame");
  EXPECT_EQ(r.files[1].source, "");
  EXPECT_EQ(r.files[2].state, sframe::StoreFile::State::kDropped);
  // Written again with another mode: the new mode, whatever was there.
  sframe::write_coverage_status(path, s, 0644);
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST_F(StatusDir, WhatIsNotAStatusFileIsEbadmsg) {
  EXPECT_EQ(sframe::errno_of([&] { sframe::read_coverage_status(dir_ + "/none"); }), ENOENT);
  std::ofstream(dir_ + "/junk") << "pid=1\n";
  EXPECT_EQ(sframe::errno_of([&] { sframe::read_coverage_status(dir_ + "/junk"); }), EBADMSG);
  std::ofstream(dir_ + "/bad") << "# sframe-coverd status 1\n# pid=1\ncovered\t1\t2\n";
  EXPECT_EQ(sframe::errno_of([&] { sframe::read_coverage_status(dir_ + "/bad"); }), EBADMSG);
  std::ofstream(dir_ + "/state") << "# sframe-coverd status 1\n# pid=1\nweird\t1\t2\t3\t-\t0\t0\t-\t/x\n";
  EXPECT_EQ(sframe::errno_of([&] { sframe::read_coverage_status(dir_ + "/state"); }), EBADMSG);
}

// A summary naming a live process that is not sframe-coverd (this test),
// or no process, or garbage: no service.
TEST_F(StatusDir, TheServiceIsFoundOnlyWhenItsPidIsALiveSframeCoverd) {
  EXPECT_EQ(sframe::coverage_service_pid(dir_), 0);
  sframe::CoverageStatus s;
  s.counters = {{"pid", uint64_t(getpid())}};
  sframe::write_coverage_status(dir_ + "/summary", s, 0644);
  EXPECT_EQ(sframe::coverage_service_pid(dir_), 0) << "this test is not the service";
  s.counters = {{"pid", 0}};
  sframe::write_coverage_status(dir_ + "/summary", s, 0644);
  EXPECT_EQ(sframe::coverage_service_pid(dir_), 0);
  s.counters = {{"pid", ~uint64_t{0}}};
  sframe::write_coverage_status(dir_ + "/summary", s, 0644);
  EXPECT_EQ(sframe::coverage_service_pid(dir_), 0);
}

}  // namespace
