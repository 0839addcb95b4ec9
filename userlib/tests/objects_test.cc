#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "sframe_client/error.h"
#include "sframe_client/objects.h"
#include "sframe_client/sframe_format.h"
#include "sframe_test/errno_of.h"
#include "sframe_gen/supply.h"

extern "C" __attribute__((noipa)) int objects_test_marker(int x) { return x * 3 + 1; }

namespace {

sframe::LoadedObject self_object() {
  auto obj = sframe::loaded_object_containing(reinterpret_cast<const void*>(&objects_test_marker));
  EXPECT_TRUE(obj.has_value());
  return obj ? *obj : sframe::LoadedObject{};
}

TEST(ObjectsTest, TestProgramHasInMemorySframe) {
  sframe::LoadedObject obj = self_object();
  EXPECT_EQ(obj.path, sframe::self_exe_path());
  ASSERT_TRUE(obj.has_sframe());
  ASSERT_TRUE(obj.has_text());
  EXPECT_TRUE(obj.contains_text(reinterpret_cast<uint64_t>(&objects_test_marker)));

  auto h = sframe::parse_header(reinterpret_cast<const void*>(obj.sframe_addr), obj.sframe_len);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->version, 1) << "Debian 12's binutils 2.40 writes SFrame version 1";
  EXPECT_EQ(h->abi_arch, sframe::kSframeAbiAmd64);
  EXPECT_EQ(h->fixed_ra_offset, -8);
  EXPECT_TRUE(h->flags & sframe::kFlagFdeSorted);
  EXPECT_GT(h->num_fdes, 0u);
  EXPECT_EQ(h->used_size(), obj.sframe_len);
}

TEST(ObjectsTest, EveryFdeOfTheProgramLiesInItsText) {
  sframe::LoadedObject obj = self_object();
  ASSERT_TRUE(obj.has_sframe());
  const void* data = reinterpret_cast<const void*>(obj.sframe_addr);
  auto h = sframe::parse_header(data, obj.sframe_len);
  ASSERT_TRUE(h.has_value());
  bool found_marker = false;
  for (uint32_t i = 0; i < h->num_fdes; i++) {
    auto start = sframe::fde_func_start(data, obj.sframe_len, obj.sframe_addr, i);
    ASSERT_TRUE(start.has_value());
    EXPECT_TRUE(obj.contains_text(*start)) << "FDE " << i;
    if (*start == reinterpret_cast<uint64_t>(&objects_test_marker)) found_marker = true;
  }
  EXPECT_TRUE(found_marker) << "no FDE starts at objects_test_marker";
}

TEST(ObjectsTest, LoadedObjectsListsTheProgramAndLibc) {
  bool self = false, libc = false;
  for (const auto& obj : sframe::loaded_objects()) {
    if (obj.path == sframe::self_exe_path()) self = obj.has_sframe();
    if (obj.path.find("libc.so.6") != std::string::npos) {
      libc = true;
      EXPECT_FALSE(obj.has_sframe()) << "Debian's libc has no .sframe";
      EXPECT_TRUE(obj.has_text());
    }
  }
  EXPECT_TRUE(self);
  EXPECT_TRUE(libc);
}

TEST(ObjectsTest, NoObjectAtNull) {
  EXPECT_FALSE(sframe::loaded_object_containing(nullptr).has_value());
}

TEST(ObjectsTest, FileSectionEqualsLoadedSection) {
  sframe::LoadedObject obj = self_object();
  ASSERT_TRUE(obj.has_sframe());
  sframe::FileSframe f = sframe::read_sframe_from_file(obj.path);
  EXPECT_EQ(f.address + obj.base, obj.sframe_addr);
  ASSERT_GE(f.bytes.size(), obj.sframe_len);
  EXPECT_EQ(0, std::memcmp(f.bytes.data(), reinterpret_cast<const void*>(obj.sframe_addr),
                           obj.sframe_len));
}

TEST(ObjectsTest, FileErrors) {
  auto err_of = [](const std::string& path) {
    return sframe::errno_of([&] { sframe::read_sframe_from_file(path); });
  };
  EXPECT_EQ(err_of("/nonexistent/file"), ENOENT);

  char tmpl[] = "/tmp/userlib_test_XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "not an ELF file", 15), 15);
  close(fd);
  EXPECT_EQ(err_of(tmpl), ENOEXEC);
  unlink(tmpl);

  for (const auto& obj : sframe::loaded_objects()) {
    if (obj.path.find("libc.so.6") == std::string::npos) continue;
    try {
      sframe::read_sframe_from_file(obj.path);
      FAIL() << obj.path << " has a .sframe section";
    } catch (const sframe::Error& e) {
      EXPECT_EQ(e.err(), ENODATA);
      EXPECT_EQ(std::string(e.what()), "read ELF " + obj.path + ": no .sframe section (ENODATA)");
    }
  }
}

}  // namespace
