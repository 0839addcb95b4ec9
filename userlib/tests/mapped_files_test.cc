// sframe-coverd's list of the files processes mapped (tools/mapped_files.h):
// kept across a save and a load, newest first, bounded, private, and
// tolerant of a damaged file.
#include "mapped_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

using tools::MappedFileList;

class MappedFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mapped_files_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/coverd-mapped-files";
  }
  void TearDown() override {
    ::unlink(path_.c_str());
    ::unlink((path_ + ".new").c_str());
    ::rmdir(dir_.c_str());
  }
  std::string dir_, path_;
};

TEST_F(MappedFiles, SavedAndLoadedNewestFirstAndPrivate) {
  MappedFileList l(path_);
  EXPECT_TRUE(l.load().empty()) << "no file yet";
  l.note("/usr/bin/old", 1000);
  l.note("/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus", 3000);
  l.note("/opt/with space/prog", 2000);
  l.note("relative/path", 4000);      // refused: not absolute
  l.note("/bad\nnewline", 4000);      // refused: would break the line format
  EXPECT_EQ(l.size(), 3u);
  l.save(100, true);
  struct stat st;
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "it names other users' files";
  EXPECT_NE(::access((path_ + ".new").c_str(), F_OK), 0) << "the temporary file is left";

  MappedFileList again(path_);
  const std::vector<std::string> paths = again.load();
  const std::vector<std::string> want{"/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus",
                                      "/opt/with space/prog", "/usr/bin/old"};
  EXPECT_EQ(paths, want);
}

TEST_F(MappedFiles, WrittenWhenChangedAndAtMostEveryMinute) {
  MappedFileList l(path_);
  l.note("/a", 86400 * 10);
  l.save(MappedFileList::kSaveEveryMs, false);
  ASSERT_EQ(::access(path_.c_str(), F_OK), 0) << "the first change is written";
  ::unlink(path_.c_str());
  l.note("/b", 86400 * 10);
  l.save(MappedFileList::kSaveEveryMs + 1000, false);
  EXPECT_NE(::access(path_.c_str(), F_OK), 0) << "written again within a minute";
  l.save(2 * MappedFileList::kSaveEveryMs, false);
  EXPECT_EQ(::access(path_.c_str(), F_OK), 0) << "not written a minute later";
  ::unlink(path_.c_str());
  // A file mapped again the same day is no change worth a write.
  l.note("/a", 86400 * 10 + 60);
  l.save(10 * MappedFileList::kSaveEveryMs, true);
  EXPECT_NE(::access(path_.c_str(), F_OK), 0);
  l.note("/a", 86400 * 11);
  l.save(11 * MappedFileList::kSaveEveryMs, true);
  EXPECT_EQ(::access(path_.c_str(), F_OK), 0) << "a new day's mapping is not written";
}

TEST_F(MappedFiles, BoundedWithTheOldestDroppedFirst) {
  MappedFileList l(path_);
  for (size_t i = 0; i < MappedFileList::kMaxFiles + 10; i++) {
    l.note("/f/" + std::to_string(i), 1000 + i);
  }
  EXPECT_EQ(l.size(), MappedFileList::kMaxFiles);
  l.save(0, true);
  MappedFileList again(path_);
  const std::vector<std::string> paths = again.load();
  ASSERT_EQ(paths.size(), MappedFileList::kMaxFiles);
  EXPECT_EQ(paths.front(), "/f/" + std::to_string(MappedFileList::kMaxFiles + 9));
  EXPECT_EQ(paths.back(), "/f/10") << "the ten oldest are the ones dropped";
}

TEST_F(MappedFiles, DamagedLinesAreSkipped) {
  {
    std::ofstream out(path_);
    out << "# a comment\n"
        << "\n"
        << "12 /ok/one\n"
        << "x /not/a/time\n"
        << "13 relative\n"
        << "14\n"
        << "99999999999999999999999 /too/large\n"
        << "15 /ok/two";  // no final newline
  }
  MappedFileList l(path_);
  const std::vector<std::string> want{"/ok/two", "/ok/one"};
  EXPECT_EQ(l.load(), want);
}

}  // namespace
