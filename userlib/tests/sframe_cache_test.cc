// Generated SFrame in files of their own, and the cache keyed by build id.
#include "sframe_gen/sframe_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "sframe_client/error.h"
#include "sframe_client/objects.h"
#include "sframe_test/errno_of.h"
#include "sframe_gen/eh_frame.h"
#include "sframe_gen/supply.h"

namespace {

const char kLibc[] = "/lib/x86_64-linux-gnu/libc.so.6";

class TempDir {
 public:
  TempDir() {
    char d[] = "/tmp/sframe-cache-test-XXXXXX";
    if (mkdtemp(d)) path_ = d;
  }
  ~TempDir() {
    if (!path_.empty()) std::system(("rm -rf '" + path_ + "'").c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void Copy(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary);
  out << in.rdbuf();
}

TEST(SframeFileTest, WhatIsWrittenIsReadBack) {
  TempDir dir;
  const sframe::GeneratedSframe g = sframe::generate_sframe(kLibc);
  const sframe::SourceIdentity id = sframe::identify_file(kLibc);
  const std::string file = dir.path() + "/libc.sframe";
  sframe::write_sframe_file(file, g, id);

  const sframe::StoredSframe s = sframe::read_sframe_file(file);
  EXPECT_EQ(s.sframe.bytes, g.bytes);
  EXPECT_EQ(s.sframe.section_vaddr, g.section_vaddr);
  EXPECT_EQ(s.sframe.text_vaddr, g.text_vaddr);
  EXPECT_EQ(s.sframe.text_len, g.text_len);
  EXPECT_EQ(s.sframe.version, g.version);
  EXPECT_EQ(s.sframe.build_id, g.build_id);
  EXPECT_FALSE(g.build_id.empty()) << "Debian's libc has a build id";
  EXPECT_TRUE(s.source == id);
  // An ordinary ELF reader finds the section where it was built for.
  const sframe::FileSframe f = sframe::read_sframe_from_file(file);
  EXPECT_EQ(f.address, g.section_vaddr);
  EXPECT_EQ(f.bytes, g.bytes);
}

TEST(SframeFileTest, OtherFilesAreRefused) {
  EXPECT_EQ(sframe::errno_of([] { sframe::read_sframe_file(kLibc); }), ENODATA);
  EXPECT_EQ(sframe::errno_of([] { sframe::read_sframe_file("/etc/hostname"); }), ENOEXEC);
  EXPECT_EQ(sframe::errno_of([] { sframe::read_sframe_file("/nonexistent"); }), ENOENT);
  EXPECT_EQ(
      sframe::errno_of([] { sframe::write_sframe_file("/nonexistent/dir/x.sframe", {}, {}); }),
      ENOENT);
}

TEST(SframeCacheTest, GeneratedOnceThenRead) {
  TempDir dir;
  sframe::SframeCache cache(dir.path() + "/a/b");  // made on first use
  sframe::CacheResult r;
  const sframe::GeneratedSframe first = cache.get(kLibc, &r);
  EXPECT_EQ(r, sframe::CacheResult::kGenerated);
  const std::string entry = cache.entry_for(kLibc);
  EXPECT_EQ(entry, dir.path() + "/a/b/" + first.build_id + ".sframe");
  struct stat st;
  EXPECT_EQ(::stat(entry.c_str(), &st), 0);
  const sframe::GeneratedSframe second = cache.get(kLibc, &r);
  EXPECT_EQ(r, sframe::CacheResult::kHit);
  EXPECT_EQ(second.bytes, first.bytes);
  EXPECT_EQ(second.text_vaddr, first.text_vaddr);
}

// A file that changes (same build id or not) is made again.
TEST(SframeCacheTest, AChangedFileIsMadeAgain) {
  TempDir dir;
  const std::string elf = dir.path() + "/libcopy.so";
  Copy(kLibc, elf);
  sframe::SframeCache cache(dir.path() + "/cache");
  sframe::CacheResult r;
  cache.get(elf, &r);
  EXPECT_EQ(r, sframe::CacheResult::kGenerated);
  cache.get(elf, &r);
  EXPECT_EQ(r, sframe::CacheResult::kHit);
  // Touched: a new modification time.
  struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, elf.c_str(), times, 0), 0);
  cache.get(elf, &r);
  EXPECT_EQ(r, sframe::CacheResult::kRegenerated);
  cache.get(elf, &r);
  EXPECT_EQ(r, sframe::CacheResult::kHit);
}

TEST(SframeCacheTest, AnUnwritableCacheStillGenerates) {
  sframe::SframeCache cache("/etc/hostname/not-a-dir");
  sframe::CacheResult r;
  const sframe::GeneratedSframe g = cache.get(kLibc, &r);
  EXPECT_EQ(r, sframe::CacheResult::kUncached);
  EXPECT_FALSE(g.bytes.empty());
}

TEST(SframeCacheTest, DefaultDirectory) {
  const std::string d = sframe::default_cache_dir();
  if (geteuid() == 0) {
    EXPECT_EQ(d, "/var/cache/sframe-unwind");
  } else {
    EXPECT_NE(d.find("sframe-unwind"), std::string::npos);
  }
}

}  // namespace
