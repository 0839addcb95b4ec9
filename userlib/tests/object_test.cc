// sframe-object: the opened object (identity, build id, ELF view), the
// /proc/PID/maps parser and the table that opens each file once.
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <link.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "sframe_client/error.h"
#include "sframe_object/elf_file.h"
#include "sframe_object/maps.h"
#include "sframe_object/object_file.h"
#include "sframe_object/object_table.h"
#include "sframe_test/errno_of.h"

namespace {

using sframe::MapsEntry;
using sframe::ObjectFile;
using sframe::ObjectTable;

std::string self_exe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

struct stat stat_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st;
}

// The GNU build id of this program as the loader mapped it (its PT_NOTE
// segments in memory): another reading than the one under test.
std::string loaded_build_id() {
  std::string id;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) -> int {
        auto* id = static_cast<std::string*>(out);
        for (int i = 0; i < info->dlpi_phnum; i++) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE) continue;
          const auto* p = reinterpret_cast<const uint8_t*>(info->dlpi_addr + ph.p_vaddr);
          for (size_t at = 0; at + sizeof(ElfW(Nhdr)) <= ph.p_memsz;) {
            ElfW(Nhdr) nh;
            std::memcpy(&nh, p + at, sizeof(nh));
            const size_t name_at = at + sizeof(nh);
            const size_t desc_at = name_at + ((nh.n_namesz + 3) & ~3u);
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
                std::memcmp(p + name_at, "GNU", 4) == 0) {
              char b[3];
              for (size_t j = 0; j < nh.n_descsz; j++) {
                std::snprintf(b, sizeof(b), "%02x", p[desc_at + j]);
                *id += b;
              }
              return 1;
            }
            at = desc_at + ((nh.n_descsz + 3) & ~3u);
          }
        }
        return 1;  // the first object is the program itself
      },
      &id);
  return id;
}

// readelf's reading of a file's build id; "" without readelf.
std::string readelf_build_id(const std::string& path) {
  FILE* p = popen(("readelf -n '" + path + "' 2>/dev/null").c_str(), "r");
  if (!p) return "";
  char line[512];
  std::string id;
  while (std::fgets(line, sizeof(line), p)) {
    const char* at = std::strstr(line, "Build ID: ");
    if (!at) continue;
    id = at + std::strlen("Build ID: ");
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  }
  pclose(p);
  return id;
}

// Descriptors of this process open on the file st describes.
int descriptors_on(const struct stat& want) {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (const dirent* e = readdir(d)) {
    struct stat st;
    if (e->d_name[0] == '.' ||
        stat(("/proc/self/fd/" + std::string(e->d_name)).c_str(), &st) != 0)
      continue;
    if (st.st_dev == want.st_dev && st.st_ino == want.st_ino) n++;
  }
  closedir(d);
  return n;
}

// This process's mapping of offset 0 of the file whose path ends in suffix.
MapsEntry first_mapping_of(const std::string& suffix) {
  for (const MapsEntry& m : sframe::read_maps(0)) {
    if (m.is_file() && m.offset == 0 && m.path.size() >= suffix.size() &&
        m.path.compare(m.path.size() - suffix.size(), suffix.size(), suffix) == 0)
      return m;
  }
  ADD_FAILURE() << "no mapping of " << suffix;
  return {};
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/object_test_" + std::to_string(getpid()) + "_" + name;
}

void copy_file(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  out << in.rdbuf();
}

// --- the maps parser ----------------------------------------------------------

TEST(MapsParser, FixedText) {
  const std::string text =
      "5650ca8d9000-5650ca8db000 r--p 00000000 fe:00 247134                     /usr/bin/cat\n"
      "7f01c74ab000-7f01c756f000 rw-p 00000000 00:00 0 \n"
      "5650fbae8000-5650fbb09000 rw-p 00000000 00:00 0                          [heap]\n"
      "7f0000001000-7f0000002000 r-xp 0001a000 103:0a 42                        "
      "/tmp/a b/lib x.so (deleted)\n"
      "7f0000003000-7f0000004000 rw-s 00000000 00:05 7                          "
      "[anon:two words]\n"
      "not a line of maps\n"
      "7f0000005000 r-xp 00000000 00:00 0\n"
      "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]";
  const std::vector<MapsEntry> m = sframe::parse_maps(text);
  ASSERT_EQ(m.size(), 6u);

  EXPECT_EQ(m[0].start, 0x5650ca8d9000u);
  EXPECT_EQ(m[0].end, 0x5650ca8db000u);
  EXPECT_STREQ(m[0].perms, "r--p");
  EXPECT_TRUE(m[0].readable());
  EXPECT_FALSE(m[0].executable());
  EXPECT_EQ(m[0].offset, 0u);
  EXPECT_EQ(m[0].dev_major, 0xfeu);
  EXPECT_EQ(m[0].dev_minor, 0u);
  EXPECT_EQ(m[0].inode, 247134u);
  EXPECT_EQ(m[0].path, "/usr/bin/cat");
  EXPECT_TRUE(m[0].is_file());
  EXPECT_FALSE(m[0].deleted);
  EXPECT_EQ(m[0].name(), "/usr/bin/cat");

  EXPECT_EQ(m[1].path, "");  // anonymous, with the kernel's trailing space
  EXPECT_FALSE(m[1].is_file());
  EXPECT_TRUE(m[1].writable());

  EXPECT_EQ(m[2].path, "[heap]");
  EXPECT_FALSE(m[2].is_file());

  EXPECT_EQ(m[3].offset, 0x1a000u);
  EXPECT_EQ(m[3].dev_major, 0x103u);
  EXPECT_EQ(m[3].dev_minor, 0x0au);
  EXPECT_EQ(m[3].dev(), makedev(0x103, 0x0a));
  EXPECT_EQ(m[3].inode, 42u);
  EXPECT_EQ(m[3].path, "/tmp/a b/lib x.so");  // spaces kept
  EXPECT_TRUE(m[3].deleted);
  EXPECT_EQ(m[3].name(), "/tmp/a b/lib x.so (deleted)");
  EXPECT_TRUE(m[3].executable());

  EXPECT_EQ(m[4].path, "[anon:two words]");
  EXPECT_TRUE(m[4].shared());
  EXPECT_FALSE(m[4].deleted);

  EXPECT_EQ(m[5].start, 0xffffffffff600000u);
  EXPECT_EQ(m[5].path, "[vsyscall]");

  MapsEntry e;
  EXPECT_FALSE(sframe::parse_maps_line("", &e));
  EXPECT_FALSE(sframe::parse_maps_line("2000-1000 r--p 00000000 00:00 0", &e));  // end < start
  EXPECT_FALSE(sframe::parse_maps_line("1000-2000 r--p 00000000 00:00 12x /a", &e));
}

// An image's load address is the offset-0 mapping just below its first
// executable mapping: a lower read-only mapping of the whole file (a
// reader's mmap(), as a process that covers itself holds) is not it; a file
// mapped from its middle only has none.
TEST(MapsParser, ImageBases) {
  const std::string text =
      "7f0000000000-7f0000200000 r--p 00000000 fe:00 9 /usr/lib/libc.so.6\n"
      "7f1000000000-7f1000026000 r--p 00000000 fe:00 9 /usr/lib/libc.so.6\n"
      "7f1000026000-7f100017c000 r-xp 00026000 fe:00 9 /usr/lib/libc.so.6\n"
      "7f100017c000-7f10001d0000 r--p 0017c000 fe:00 9 /usr/lib/libc.so.6\n"
      "7f2000000000-7f2000001000 r-xp 00001000 fe:00 10 /usr/lib/middle.so\n"
      "7f3000000000-7f3000001000 r--p 00000000 fe:00 11 /usr/lib/data.bin\n";
  const std::vector<MapsEntry> m = sframe::parse_maps(text);
  ASSERT_EQ(m.size(), 6u);
  const std::map<std::string, const MapsEntry*> bases = sframe::image_bases(m);
  ASSERT_EQ(bases.size(), 1u);
  ASSERT_EQ(bases.count("/usr/lib/libc.so.6"), 1u);
  EXPECT_EQ(bases.at("/usr/lib/libc.so.6"), &m[1]);
}

TEST(MapsParser, ThisProcess) {
  EXPECT_EQ(sframe::maps_path(0), "/proc/self/maps");
  EXPECT_EQ(sframe::maps_path(42), "/proc/42/maps");
  const std::vector<MapsEntry> maps = sframe::read_maps(0);
  ASSERT_FALSE(maps.empty());
  const auto containing = [&](const void* p) {
    const auto a = reinterpret_cast<uint64_t>(p);
    for (const MapsEntry& m : maps) {
      if (a >= m.start && a < m.end) return m;
    }
    return MapsEntry{};
  };
  // This function's code: a file mapping of this program, executable, with
  // its device and inode.
  const MapsEntry code = containing(reinterpret_cast<const void*>(&self_exe));
  const struct stat self = stat_of(self_exe());
  EXPECT_EQ(code.path, self_exe());
  EXPECT_TRUE(code.executable());
  EXPECT_EQ(code.inode, self.st_ino);
  EXPECT_EQ(code.dev(), self.st_dev);
  int local = 0;
  EXPECT_EQ(containing(&local).path, "[stack]");
  // In order, disjoint.
  for (size_t i = 1; i < maps.size(); i++) EXPECT_LE(maps[i - 1].end, maps[i].start);

  const int err = sframe::errno_of([] { sframe::read_maps(999999999); });
  EXPECT_EQ(err, ENOENT);
  try {
    sframe::read_maps(999999999);
  } catch (const sframe::Error& e) {
    EXPECT_EQ(e.op(), sframe::op::kFindObject);
    EXPECT_EQ(e.object(), "/proc/999999999/maps");
  }
}

// --- the opened object ------------------------------------------------------------

TEST(OpenedObject, ThisProgram) {
  const std::string path = self_exe();
  const ObjectFile o = ObjectFile::read(sframe::open_object_file(path), path);
  const struct stat st = stat_of(path);
  EXPECT_EQ(o.name(), path);
  EXPECT_EQ(o.opened_as(), path);
  EXPECT_EQ(o.via(), sframe::MappedVia::kPath);
  EXPECT_EQ(o.identity().dev, st.st_dev);
  EXPECT_EQ(o.identity().ino, st.st_ino);
  EXPECT_EQ(o.identity().size, uint64_t(st.st_size));
  EXPECT_EQ(o.identity().mtime_ns, int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec);
  EXPECT_EQ(o.ctime_ns(), int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec);
  const std::string loaded = loaded_build_id();
  ASSERT_FALSE(loaded.empty()) << "the test program has no build id";
  EXPECT_EQ(o.build_id(), loaded);
  ASSERT_TRUE(o.has_layout());
  EXPECT_LT(o.layout().text_lo, o.layout().text_hi);
  EXPECT_TRUE(o.unchanged());
  // The ELF view is the file: the same bytes at offset 0.
  size_t size = 0;
  const char* raw = elf_rawfile(o.elf().get(), &size);
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(size, size_t(st.st_size));
  EXPECT_EQ(std::memcmp(raw, ELFMAG, SELFMAG), 0);
  EXPECT_EQ(sframe::read_build_id(path), loaded);
}

TEST(OpenedObject, BinLsAgainstReadelf) {
  const std::string id = readelf_build_id("/bin/ls");
  if (id.empty()) GTEST_SKIP() << "no readelf, or /bin/ls has no build id";
  const ObjectFile o = ObjectFile::open("/bin/ls");
  EXPECT_EQ(o.build_id(), id);
  const struct stat st = stat_of("/bin/ls");
  EXPECT_EQ(o.identity().ino, st.st_ino);
  EXPECT_EQ(o.identity().size, uint64_t(st.st_size));
}

TEST(OpenedObject, WhatIsNoObject) {
  auto err_of = [](const std::string& path) {
    return sframe::errno_of([&] { ObjectFile::read(sframe::open_object_file(path), path); });
  };
  EXPECT_EQ(err_of("/nonexistent/file"), ENOENT);
  EXPECT_EQ(err_of("/etc/hostname"), ENOEXEC);  // not ELF
  EXPECT_EQ(err_of("/"), ENOEXEC);              // not a regular file
  try {
    ObjectFile::read(sframe::open_object_file("/nonexistent/file"), "/nonexistent/file");
  } catch (const sframe::Error& e) {
    EXPECT_EQ(e.op(), sframe::op::kReadElf);
    EXPECT_EQ(e.object(), "/nonexistent/file");
  }
}

// An ELF file without program headers (a bare header): an object, with a
// build id of none, but no layout; ObjectFile::open() refuses it.
TEST(OpenedObject, WithoutExecutableCodeNoLayout) {
  const std::string path = temp_path("bare.elf");
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_DYN;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_ehsize = sizeof(eh);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(&eh), sizeof(eh));
  const ObjectFile o = ObjectFile::read(sframe::open_object_file(path), path);
  EXPECT_FALSE(o.has_layout());
  EXPECT_EQ(o.build_id(), "");
  EXPECT_EQ(sframe::errno_of([&] { o.layout(); }), ENOEXEC);
  EXPECT_EQ(sframe::errno_of([&] { ObjectFile::open(path); }), ENOEXEC);
  unlink(path.c_str());
}

// --- the table ----------------------------------------------------------------

// However it is asked for (by path, through this process's mapping with or
// without its maps line), a file is one object, opened once: one
// descriptor on it.
TEST(ObjectTable, OneOpenPerFile) {
  ObjectTable table;
  const std::string self = self_exe();
  const MapsEntry m = first_mapping_of(self);
  const auto a = table.open_path(self);
  const auto b = table.open_path(self);
  const auto c = table.open_mapped(0, m);
  const auto d = table.open_mapped(getpid(), m.start, m.end, m.name());
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(a.get(), c.get());
  EXPECT_EQ(a.get(), d.get());
  EXPECT_EQ(table.stats().opened, 1u);
  EXPECT_EQ(table.stats().reused, 3u);
  EXPECT_EQ(descriptors_on(stat_of(self)), 1);
  // libc: every mapping of it, one object; first through a mapping.
  const MapsEntry libc = first_mapping_of("/libc.so.6");
  size_t libc_mappings = 0;
  std::shared_ptr<const ObjectFile> first;
  for (const MapsEntry& e : sframe::read_maps(0)) {
    if (e.inode != libc.inode || e.dev() != libc.dev()) continue;
    const auto o = table.open_mapped(0, e);
    if (!first) first = o;
    EXPECT_EQ(o.get(), first.get());
    libc_mappings++;
  }
  EXPECT_GT(libc_mappings, 1u);
  EXPECT_EQ(table.open_path(libc.path).get(), first.get());
  EXPECT_EQ(table.stats().opened, 2u);
  EXPECT_EQ(descriptors_on(stat_of(libc.path)), 1);
  EXPECT_EQ(first->name(), libc.path);
  EXPECT_EQ(table.held(), 2u);
}

// A file that is no object is opened once: the failure is kept.
TEST(ObjectTable, KeepsWhatFailed) {
  ObjectTable table;
  EXPECT_EQ(sframe::errno_of([&] { table.open_path("/etc/hostname"); }), ENOEXEC);
  EXPECT_EQ(sframe::errno_of([&] { table.open_path("/etc/hostname"); }), ENOEXEC);
  EXPECT_EQ(table.stats().opened, 1u);
  EXPECT_EQ(table.stats().failed, 1u);
  EXPECT_EQ(table.stats().refused, 1u);
  EXPECT_EQ(descriptors_on(stat_of("/etc/hostname")), 0);
  // A way in that failed (no such process) is kept for that way only:
  // the same file through this process opens.
  const MapsEntry libc = first_mapping_of("/libc.so.6");
  EXPECT_EQ(sframe::errno_of([&] { table.open_mapped(999999999, libc); }), ENOENT);
  EXPECT_EQ(sframe::errno_of([&] { table.open_mapped(999999999, libc); }), ENOENT);
  EXPECT_EQ(table.stats().failed, 2u);
  EXPECT_EQ(table.stats().refused, 2u);
  EXPECT_NE(table.open_mapped(0, libc), nullptr);
  EXPECT_EQ(table.stats().opened, 2u);
}

// A file rewritten in place (same inode) is another object.
TEST(ObjectTable, AChangedFileIsOpenedAgain) {
  const std::string path = temp_path("ls");
  copy_file("/bin/ls", path);
  ObjectTable table;
  const auto before = table.open_path(path);
  {
    std::ofstream(path, std::ios::binary | std::ios::app) << '\n';
  }
  const auto after = table.open_path(path);
  EXPECT_NE(before.get(), after.get());
  EXPECT_EQ(before->identity().ino, after->identity().ino);
  EXPECT_EQ(after->identity().size, before->identity().size + 1);
  EXPECT_EQ(table.stats().opened, 2u);
  EXPECT_EQ(table.stats().changed, 1u);
  EXPECT_EQ(table.open_path(path).get(), after.get());
  unlink(path.c_str());
}

// At most max_held objects are held open, the least recently used let go.
TEST(ObjectTable, HoldsAtMostItsBound) {
  ObjectTable table(2);
  const std::string self = self_exe();
  const std::string libc = first_mapping_of("/libc.so.6").path;
  table.open_path(self);
  table.open_path(libc);
  table.open_path(self);  // self now the most recent
  table.open_path("/bin/ls");
  EXPECT_EQ(table.held(), 2u);
  EXPECT_EQ(table.stats().evicted, 1u);
  EXPECT_EQ(descriptors_on(stat_of(libc)), 0);
  EXPECT_EQ(descriptors_on(stat_of(self)), 1);
  table.open_path(libc);  // opened again
  EXPECT_EQ(table.stats().opened, 4u);
}

// A maps line whose device is not the one stat() shows (the file system
// holding the inode, under a layer): the way in is stat()ed before
// anything is opened, and finds the object held; the line's key leads
// there from then on.
TEST(ObjectTable, AnotherDeviceForTheSameInodeFindsTheHeldObject) {
  ObjectTable table;
  MapsEntry m = first_mapping_of("/libc.so.6");
  const auto by_path = table.open_path(m.path);
  m.dev_major = 0xfff;
  m.dev_minor = 0x1;
  EXPECT_EQ(table.open_mapped(0, m).get(), by_path.get());
  EXPECT_EQ(table.open_mapped(0, m).get(), by_path.get());
  EXPECT_EQ(table.stats().opened, 1u);
  EXPECT_EQ(table.stats().reused, 2u);
  EXPECT_EQ(descriptors_on(stat_of(m.path)), 1);
}

// overlayfs: a file opened by its path in the overlay shows the overlay's
// device; on older kernels (Debian 12's 6.1) its mapping's maps line and
// map_files entry name the lower layer's file.  It is one object, found by
// inode, size, mtime and ctime: opened once.  Needs root and a mount
// namespace, and such a kernel (skipped otherwise: newer ones show the
// overlay's file everywhere).
TEST(ObjectTable, AFileSeenThroughAnOverlayIsOneObject) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for a mount namespace";
  const std::string base = temp_path("ovl");
  for (const char* d : {"", "/lower", "/upper", "/work", "/merged"}) {
    ASSERT_EQ(mkdir((base + d).c_str(), 0755), 0) << base + d;
  }
  copy_file("/bin/ls", base + "/lower/ls");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (unshare(CLONE_NEWNS) != 0) _exit(77);
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) _exit(77);
    const std::string options = "lowerdir=" + base + "/lower,upperdir=" + base +
                                "/upper,workdir=" + base + "/work";
    if (mount("overlay", (base + "/merged").c_str(), "overlay", 0, options.c_str()) != 0) {
      _exit(77);
    }
    const std::string path = base + "/merged/ls";
    ObjectTable table;
    const auto by_path = table.open_path(path);
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    void* p = fd >= 0 ? mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    if (p == MAP_FAILED) _exit(10);
    MapsEntry m;
    for (const MapsEntry& e : sframe::read_maps(0)) {
      if (reinterpret_cast<uint64_t>(p) >= e.start && reinterpret_cast<uint64_t>(p) < e.end) m = e;
    }
    if (m.inode == 0) _exit(11);
    char map_file[96];
    std::snprintf(map_file, sizeof(map_file), "/proc/self/map_files/%lx-%lx",
                  static_cast<unsigned long>(m.start), static_cast<unsigned long>(m.end));
    struct stat lower {};
    if (stat(map_file, &lower) != 0) _exit(11);
    // One device everywhere: nothing to show here.
    if (m.dev() == by_path->identity().dev && lower.st_dev == by_path->identity().dev) {
      std::fprintf(stderr, "overlay file, its maps line and map_files all on device %#lx\n",
                   static_cast<unsigned long>(lower.st_dev));
      _exit(78);
    }
    // By its maps line, and by its map_files entry (a side-band record).
    if (table.open_mapped(0, m).get() != by_path.get()) _exit(12);
    if (table.open_mapped(getpid(), m.start, m.end, m.name()).get() != by_path.get()) _exit(12);
    _exit(table.stats().opened == 1 ? 0 : 13);
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  std::system(("rm -rf '" + base + "'").c_str());
  ASSERT_TRUE(WIFEXITED(st));
  if (WEXITSTATUS(st) == 77) GTEST_SKIP() << "no mount namespace or overlayfs here";
  if (WEXITSTATUS(st) == 78) {
    GTEST_SKIP() << "maps and map_files show the overlay's own file on this kernel";
  }
  EXPECT_EQ(WEXITSTATUS(st), 0) << "10-11: mapping, 12: another object, 13: opened twice";
}

// Without CAP_SYS_ADMIN and CAP_CHECKPOINT_RESTORE (dropped in a child if
// this runs as root), the file is opened through /proc/PID/root and must
// have the mapped inode; a mapping's line that names another is not that
// object, and that is kept.
TEST(ObjectTable, WithoutMapFilesTheInodeIsChecked) {
  const MapsEntry libc = first_mapping_of("/libc.so.6");
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
    ObjectTable table;
    MapsEntry other = libc;
    other.inode++;
    if (sframe::errno_of([&] { table.open_mapped(0, other); }) != ESTALE) _exit(12);
    if (sframe::errno_of([&] { table.open_mapped(0, other); }) != ESTALE) _exit(13);
    if (table.stats().failed != 1 || table.stats().refused != 1) _exit(14);
    try {
      const auto o = table.open_mapped(0, libc);
      if (o->via() != sframe::MappedVia::kRoot) _exit(15);
      if (o->opened_as() != "/proc/self/root" + libc.path) _exit(16);
      // Without its maps line: the inode comes from /proc/PID/maps.
      if (table.open_mapped(getpid(), libc.start, libc.end, libc.path).get() != o.get()) _exit(17);
    } catch (const sframe::Error&) {
      _exit(18);
    }
    _exit(table.stats().opened == 1 ? 0 : 19);
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "10-11: capabilities, 12-14: another inode taken or not kept, "
                                   "15-16: not through the root, 17: reopened, 18: failed, "
                                   "19: opened more than once";
}

}  // namespace
