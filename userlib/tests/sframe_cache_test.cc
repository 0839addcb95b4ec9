// Generated SFrame in files of their own, and the cache keyed by build id.
#include "sframe_gen/sframe_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <string>

#include "sframe_client/error.h"
#include "sframe_client/objects.h"
#include "sframe_test/errno_of.h"
#include "sframe_gen/eh_frame.h"
#include "sframe_gen/supply.h"
#include "sframe_object/object_file.h"

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

// An object opened once: through the process's mapping, it is the file the
// path names here (same identity, build id and layout).
struct MappedLine {
  uint64_t start = 0, end = 0, ino = 0;
  std::string path;
};

MappedLine LibcMapping() {
  std::ifstream in("/proc/self/maps");
  MappedLine m;
  for (std::string line; std::getline(in, line);) {
    uint64_t start, end, off, ino;
    int name_at = 0;
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64 " %*s %" SCNu64 " %n",
                    &start, &end, &off, &ino, &name_at) < 4 ||
        name_at == 0 || off != 0 || line.find("/libc.so.6") == std::string::npos)
      continue;
    m = {start, end, ino, line.substr(name_at)};
    break;
  }
  return m;
}

TEST(ObjectFileTest, TheMappedFileIsTheOneItsPathNamesHere) {
  const MappedLine m = LibcMapping();
  ASSERT_FALSE(m.path.empty());
  const sframe::ObjectFile by_path = sframe::ObjectFile::open(m.path);
  const sframe::ObjectFile mapped = sframe::ObjectFile::open_mapped(0, m.start, m.end, m.path, m.ino);
  EXPECT_EQ(mapped.name(), m.path);
  EXPECT_NE(mapped.opened_as().find("/proc/self/"), std::string::npos) << mapped.opened_as();
  EXPECT_TRUE(mapped.identity() == by_path.identity());
  EXPECT_EQ(mapped.build_id(), by_path.build_id());
  EXPECT_FALSE(mapped.build_id().empty());
  EXPECT_EQ(mapped.layout().text_lo, by_path.layout().text_lo);
  EXPECT_EQ(mapped.layout().image_vaddr, by_path.layout().image_vaddr);
  EXPECT_EQ(mapped.content_key(), by_path.content_key());
  // Made from either, the same section.
  EXPECT_EQ(sframe::generate_sframe(mapped).bytes, sframe::generate_sframe(m.path).bytes);
}

// Without CAP_SYS_ADMIN and CAP_CHECKPOINT_RESTORE (dropped in a child if
// this runs as root), map_files cannot be opened: the file is opened
// through /proc/PID/root, and must be the mapped inode.
TEST(ObjectFileTest, WithoutMapFilesThePathInTheProcessRootIsCheckedByInode) {
  const MappedLine m = LibcMapping();
  ASSERT_FALSE(m.path.empty());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct d[2]{};
    if (syscall(SYS_capget, &h, d) != 0) _exit(10);
    for (int cap : {CAP_SYS_ADMIN, 40 /* CAP_CHECKPOINT_RESTORE */}) {
      d[cap / 32].effective &= ~(1u << (cap % 32));
    }
    if (syscall(SYS_capset, &h, d) != 0) _exit(11);
    try {
      const auto o = sframe::ObjectFile::open_mapped(0, m.start, m.end, m.path, m.ino);
      if (o.via() != sframe::MappedVia::kRoot) _exit(12);
      if (o.opened_as() != "/proc/self/root" + m.path) _exit(13);
    } catch (const sframe::Error&) {
      _exit(14);
    }
    const int err = sframe::errno_of(
        [&] { sframe::ObjectFile::open_mapped(0, m.start, m.end, m.path, m.ino + 1); });
    _exit(err == ESTALE ? 0 : 15);
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "10-11: capabilities, 12-13: not through the root, "
                                   "14: failed, 15: another inode taken";
}

// 50 processes mapping libc: one generation, then the same section from
// memory.
TEST(SframeCacheTest, TheSameFileIsMadeOnceAndServedFromMemory) {
  TempDir dir;
  sframe::SframeCache cache(dir.path());
  const sframe::ObjectFile libc = sframe::ObjectFile::open(kLibc);
  sframe::CacheResult r;
  const auto first = cache.get(libc, &r);
  EXPECT_EQ(r, sframe::CacheResult::kGenerated);
  for (int i = 0; i < 49; i++) {
    EXPECT_EQ(cache.get(sframe::ObjectFile::open(kLibc), &r).get(), first.get());
    EXPECT_EQ(r, sframe::CacheResult::kHit);
  }
  EXPECT_EQ(cache.stats().generated, 1u);
  EXPECT_EQ(cache.stats().memory_hits, 49u);
  EXPECT_EQ(cache.stats().disk_hits, 0u);
  EXPECT_EQ(cache.stats().memory_bytes, first->bytes.size());
}

// Bounded in bytes: what does not fit is read from the cache directory.
TEST(SframeCacheTest, TheMemoryBoundHoldsAndTheDirectoryServesTheRest) {
  TempDir dir;
  sframe::SframeCache cache(dir.path(), /*memory_limit=*/1024);
  const sframe::ObjectFile libc = sframe::ObjectFile::open(kLibc);
  cache.get(libc);
  EXPECT_EQ(cache.stats().memory_bytes, 0u);
  sframe::CacheResult r;
  cache.get(libc, &r);
  EXPECT_EQ(r, sframe::CacheResult::kHit);
  EXPECT_EQ(cache.stats().disk_hits, 1u);
  EXPECT_EQ(cache.stats().generated, 1u);
}

// The gate (a profiler's bound on generations) refuses with EAGAIN; nothing
// is made until it allows.
TEST(SframeCacheTest, TheGenerationGateRefusesWithEagain) {
  TempDir dir;
  sframe::SframeCache cache(dir.path());
  bool allow = false;
  cache.set_generation_gate([&] { return allow; });
  const sframe::ObjectFile libc = sframe::ObjectFile::open(kLibc);
  EXPECT_EQ(sframe::errno_of([&] { cache.get(libc); }), EAGAIN);
  EXPECT_EQ(cache.stats().refused, 1u);
  EXPECT_EQ(cache.stats().generated, 0u);
  allow = true;
  EXPECT_FALSE(cache.get(libc)->bytes.empty());
  EXPECT_EQ(cache.stats().generated, 1u);
  // Served from memory: the gate is not asked again.
  allow = false;
  EXPECT_NO_THROW(cache.get(libc));
}

}  // namespace
