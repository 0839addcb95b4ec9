// The file store (SFRAME_IOC_FILE_SUPPLY, _FILE_REMOVE, _FILE_LIST): one
// section per file, for every mapping of it in every process.
//
// The library under test is libvmtest_wldl_nosframe.so: session_workload's
// dlspin library built as Debian builds its libraries (no .sframe, no frame
// pointers), copied to a directory of the test's own so that it can be
// written, renamed over and deleted.  Its section is made from its
// .eh_frame by the project's generator.  Without the store a SFrame-only
// walk stops in it; with it, the walk crosses it to main.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "sessions.h"
#include "vmtest.h"
#include "sframe_client/fd.h"
#include "sframe_gen/eh_frame.h"
#include "sframe_test/errno_of.h"

namespace {

using sframe::FileInfo;
using sframe::Source;
using vmtest::ChainCheck;
using vmtest::CheckChain;
using vmtest::Collect;
using vmtest::Collected;
using vmtest::IsRoot;
using vmtest::kLibc;
using vmtest::MostlyComplete;

const std::vector<std::string> kDlChain = {"wl_dl_leaf", "wl_dl_spin", "wl_dlspin_a", "main",
                                           kLibc};

std::string ProgramDir() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return ".";
  self[n] = 0;
  std::string path(self);
  return path.substr(0, path.rfind('/'));
}

// A fresh copy of the library (a new inode) in a directory of its own,
// removed with the directory at the end.
class LibraryCopy {
 public:
  explicit LibraryCopy(const std::string& name = "libvmtest_wldl_nosframe.so") {
    char tmpl[] = "/tmp/file-store-XXXXXX";
    if (!mkdtemp(tmpl)) return;
    dir_ = tmpl;
    chmod(dir_.c_str(), 0755);  // the workload may run as another user
    path_ = dir_ + "/libwl.so";
    Copy(ProgramDir() + "/" + name, path_);
  }
  ~LibraryCopy() {
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }
  LibraryCopy(const LibraryCopy&) = delete;
  LibraryCopy& operator=(const LibraryCopy&) = delete;

  static bool Copy(const std::string& from, const std::string& to) {
    std::ifstream in(from, std::ios::binary);
    std::ofstream out(to, std::ios::binary | std::ios::trunc);
    out << in.rdbuf();
    return in && out && chmod(to.c_str(), 0755) == 0;
  }
  const std::string& path() const { return path_; }
  const std::string& dir() const { return dir_; }
  bool ok() const { return !path_.empty() && access(path_.c_str(), R_OK) == 0; }

 private:
  std::string dir_, path_;
};

int IoctlErrno(int fd, unsigned long cmd, void* arg) {
  return ioctl(fd, cmd, arg) == 0 ? 0 : errno;
}

bool Listed(const std::vector<FileInfo>& files, uint64_t id) {
  for (const FileInfo& f : files) {
    if (f.id == id) return true;
  }
  return false;
}

class FileStoreTest : public vmtest::SessionTest {
 protected:
  // Supplies the generated section of path; its id.
  uint64_t Supply(const std::string& path, bool replace = false) {
    sframe::GeneratedSframe g = sframe::generate_sframe(path);
    sframe::UniqueFd fd = sframe::UniqueFd::open(path, O_RDONLY);
    bytes_ = g.bytes.size();
    return dev().supply_file(fd.get(), g.bytes.data(), g.bytes.size(), g.section_vaddr, replace,
                             path);
  }
  int SupplyErrno(int fd, const void* data, uint64_t len, uint64_t vaddr) {
    return sframe::errno_of([&] { dev().supply_file(fd, data, len, vaddr, false, "test"); });
  }
  // Waits up to 2 s for entry id to leave the store.
  bool Gone(uint64_t id) {
    for (int i = 0; i < 200; i++) {
      if (!Listed(dev().list_files(), id)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // dlspin with the copy at path, sampled for ms: the chain check.
  ChainCheck Sample(vmtest::Workload* w, int ms) {
    sframe::PerfEvent ev = sframe::PerfEvent::open_process(w->pid(), PerfOptions(10000));
    sframe::Session s = sframe::Session::start(sframe::Target::kProcess, w->pid(), SframeOnly());
    Collected c = Collect(&s, &ev, ms);
    ChainCheck check;
    for (const sframe::Sample* smp : c.Samples()) CheckChain(*smp, User(*smp), kDlChain, &check);
    return check;
  }
  std::unique_ptr<vmtest::Workload> StartDlspin(const std::string& lib) {
    setenv("SFRAME_WORKLOAD_NO_REGISTER", "1", 1);
    setenv("SFRAME_WORKLOAD_DL_PATH", lib.c_str(), 1);
    auto w = StartWorkload({"dlspin", "0"});
    unsetenv("SFRAME_WORKLOAD_NO_REGISTER");
    unsetenv("SFRAME_WORKLOAD_DL_PATH");
    if (!w) return w;
    // Let it load the library before the symbolizer reads its maps.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    sym_.forget_process(w->pid());
    sym_.load_process(w->pid());
    return w;
  }
  size_t FileEntriesOf(pid_t pid) {
    size_t n = 0;
    for (const sframe::SectionInfo& e : dev().list_sections(pid)) n += e.source == Source::kFile;
    return n;
  }
  uint64_t bytes_ = 0;
};

// ---- who may ------------------------------------------------------------------------------

TEST_F(FileStoreTest, OnlyCapSysAdminSuppliesOrRemovesAndEveryoneLists) {
  LibraryCopy lib;
  ASSERT_TRUE(lib.ok());
  if (IsRoot()) {
    const uint64_t id = Supply(lib.path());
    EXPECT_TRUE(Listed(dev().list_files(), id));
    dev().remove_file(id);
    EXPECT_FALSE(Listed(dev().list_files(), id));
    return;
  }
  sframe::UniqueFd fd = sframe::UniqueFd::open(lib.path(), O_RDONLY);
  uint8_t byte = 0;
  EXPECT_EQ(SupplyErrno(fd.get(), &byte, 1, 0), EPERM);
  EXPECT_EQ(sframe::errno_of([&] { dev().remove_file(1); }), EPERM);
  EXPECT_EQ(sframe::errno_of([&] { dev().list_files(); }), 0);
}

// ---- coverage -----------------------------------------------------------------------------

// A running process whose walks stop in the library (no .sframe, no frame
// pointers) is covered the moment the file gets its section, by one kernel
// copy; a write to the file ends that at once, and the walk stops in the
// library again: never the old section for the file's new bytes.
TEST_F(FileStoreTest, ARunningProcessIsCoveredFromTheStoreUntilItsFileIsWritten) {
  if (!IsRoot()) GTEST_SKIP() << "supplying for a file needs CAP_SYS_ADMIN; the user run checks EPERM";
  vmtest::ScopedModuleParam discovery("discovery", "Y");
  LibraryCopy lib;
  ASSERT_TRUE(lib.ok());
  auto w = StartDlspin(lib.path());
  ASSERT_TRUE(w);

  // Before: the walk stops in the library.
  ChainCheck before = Sample(w.get(), 1000);
  RecordProperty("before", std::to_string(before.complete) + "/" + std::to_string(before.considered));
  EXPECT_GE(before.considered, 100u);
  EXPECT_EQ(before.complete, 0u) << "complete chains through a library nothing covers";

  const sframe::FileStoreStats st0 = dev().file_store_stats();
  const uint64_t supplied0 = dev().stats().supplied_bytes;
  const uint64_t id = Supply(lib.path());
  const sframe::FileStoreStats st1 = dev().file_store_stats();
  EXPECT_EQ(st1.entries, st0.entries + 1);
  EXPECT_EQ(st1.bytes, st0.bytes + bytes_);
  EXPECT_EQ(sframe::errno_of([&] { Supply(lib.path()); }), EEXIST);

  // With the store: complete, from an entry of source "file".
  ChainCheck with = Sample(w.get(), 2000);
  RecordProperty("with", std::to_string(with.complete) + "/" + std::to_string(with.considered));
  EXPECT_TRUE(MostlyComplete(with, 0.99, 500));
  EXPECT_EQ(FileEntriesOf(w->pid()), 1u);
  const sframe::FileStoreStats st2 = dev().file_store_stats();
  EXPECT_GE(st2.attaches, st1.attaches + 1);
  EXPECT_EQ(st2.bytes, st1.bytes) << "a mapping made a copy";
  EXPECT_EQ(dev().stats().supplied_bytes, supplied0) << "counted as per-process supply";

  // A write (here: one byte appended) ends the entry, and the process's
  // entry with it.
  {
    sframe::UniqueFd out = sframe::UniqueFd::open(lib.path(), O_WRONLY | O_APPEND);
    ASSERT_EQ(write(out.get(), "x", 1), 1);
  }
  EXPECT_TRUE(Gone(id));
  EXPECT_GE(dev().file_store_stats().invalidated, st2.invalidated + 1);
  EXPECT_EQ(FileEntriesOf(w->pid()), 0u);
  ChainCheck after = Sample(w.get(), 1000);
  RecordProperty("after", std::to_string(after.complete) + "/" + std::to_string(after.considered));
  EXPECT_GE(after.considered, 100u);
  EXPECT_EQ(after.complete, 0u) << "the dropped section was still used";
  EXPECT_EQ(dev().file_store_stats().bytes, st0.bytes) << "the dropped entry's bytes are held";
  w->Kill();
}

// Ten processes of one program: one copy in the kernel, an entry of source
// "file" in each.
TEST_F(FileStoreTest, ProcessesOfOneLibraryShareOneCopy) {
  if (!IsRoot()) GTEST_SKIP() << "supplying for a file needs CAP_SYS_ADMIN";
  vmtest::ScopedModuleParam discovery("discovery", "Y");
  LibraryCopy lib;
  ASSERT_TRUE(lib.ok());
  const uint64_t id = Supply(lib.path());
  const sframe::FileStoreStats st0 = dev().file_store_stats();
  constexpr int kProcesses = 10;
  std::vector<std::unique_ptr<vmtest::Workload>> ws;
  for (int i = 0; i < kProcesses; i++) {
    ws.push_back(StartDlspin(lib.path()));
    ASSERT_TRUE(ws.back());
  }
  size_t covered = 0;
  for (auto& w : ws) {
    ChainCheck c = Sample(w.get(), 300);
    covered += c.complete > 0 && FileEntriesOf(w->pid()) == 1;
  }
  EXPECT_EQ(covered, size_t{kProcesses});
  const sframe::FileStoreStats st1 = dev().file_store_stats();
  EXPECT_EQ(st1.bytes, st0.bytes) << "processes made copies";
  EXPECT_GE(st1.attaches, st0.attaches + kProcesses);
  for (const FileInfo& f : dev().list_files()) {
    if (f.id == id) EXPECT_GE(f.attaches, uint64_t{kProcesses});
  }
  for (auto& w : ws) w->Kill();
  dev().remove_file(id);
}

// The executable mappings of path in process pid, from its maps.
std::vector<std::pair<uint64_t, uint64_t>> ExecMappings(pid_t pid, const std::string& path) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long lo = 0, hi = 0;
    char perms[5] = {};
    if (sscanf(line.c_str(), "%lx-%lx %4s", &lo, &hi, perms) != 3) continue;
    if (perms[2] == 'x' && line.size() >= path.size() &&
        line.compare(line.size() - path.size(), path.size(), path) == 0)
      out.emplace_back(lo, hi);
  }
  return out;
}

// A file whose text lies in two executable segments with a hole between
// them, as node's does: the hole is not the file's executable text (ld.so
// maps it PROT_NONE), so no entry may claim it.  Each segment the walk
// reaches gets an entry of its own from the one copy, inside that segment's
// mapping, and the walk crosses the far segment to main.  (With one entry
// for the whole span, its insertion failed and no chain was complete.)
TEST_F(FileStoreTest, EachExecutableSegmentOfAFileIsCoveredByItsOwnEntry) {
  if (!IsRoot()) GTEST_SKIP() << "supplying for a file needs CAP_SYS_ADMIN";
  vmtest::ScopedModuleParam discovery("discovery", "Y");
  LibraryCopy lib("libvmtest_wldl_twoseg.so");
  ASSERT_TRUE(lib.ok());
  auto w = StartDlspin(lib.path());
  ASSERT_TRUE(w);
  const auto exec_maps = ExecMappings(w->pid(), lib.path());
  ASSERT_EQ(exec_maps.size(), 2u) << "the library is not mapped as two executable segments";
  ASSERT_GE(exec_maps[1].first, exec_maps[0].second + (1u << 20)) << "no hole between them";

  const uint64_t id = Supply(lib.path());
  ChainCheck with = Sample(w.get(), 2000);
  RecordProperty("with", std::to_string(with.complete) + "/" + std::to_string(with.considered));
  EXPECT_TRUE(MostlyComplete(with, 0.99, 500));

  size_t entries = 0;
  for (const sframe::SectionInfo& e : dev().list_sections(w->pid())) {
    if (e.source != Source::kFile) continue;
    entries++;
    bool inside = false;
    for (const auto& [lo, hi] : exec_maps)
      inside |= e.text_start >= lo && e.text_start + e.text_len <= hi;
    EXPECT_TRUE(inside) << "an entry of [" << std::hex << e.text_start << ", "
                        << e.text_start + e.text_len << ") is not inside one executable mapping";
    EXPECT_LE(e.covered_bytes, e.text_len) << "the entry lists another segment's coverage";
  }
  EXPECT_GE(entries, 1u);
  w->Kill();
  dev().remove_file(id);
}

// ---- the file changes ---------------------------------------------------------------------

TEST_F(FileStoreTest, EveryWayAFileChangesDropsItsEntry) {
  if (!IsRoot()) GTEST_SKIP() << "supplying for a file needs CAP_SYS_ADMIN";
  struct Change {
    const char* what;
    void (*act)(const LibraryCopy&);
  };
  const Change changes[] = {
      {"opened for writing",
       [](const LibraryCopy& l) { close(open(l.path().c_str(), O_RDWR)); }},
      {"truncated", [](const LibraryCopy& l) { (void)!truncate(l.path().c_str(), 4096); }},
      {"deleted", [](const LibraryCopy& l) { unlink(l.path().c_str()); }},
      {"renamed over", [](const LibraryCopy& l) {
         LibraryCopy::Copy(l.path(), l.dir() + "/other.so");
         rename((l.dir() + "/other.so").c_str(), l.path().c_str());
       }},
  };
  for (const Change& c : changes) {
    LibraryCopy lib;
    ASSERT_TRUE(lib.ok());
    const uint64_t invalidated = dev().file_store_stats().invalidated;
    const uint64_t id = Supply(lib.path());
    c.act(lib);
    EXPECT_TRUE(Gone(id)) << c.what;
    EXPECT_EQ(dev().file_store_stats().invalidated, invalidated + 1) << c.what;
  }
  // A rename of the file itself keeps its bytes, and its entry.
  LibraryCopy lib;
  ASSERT_TRUE(lib.ok());
  const uint64_t id = Supply(lib.path());
  ASSERT_EQ(rename(lib.path().c_str(), (lib.dir() + "/moved.so").c_str()), 0);
  EXPECT_TRUE(Listed(dev().list_files(), id)) << "moved";
  dev().remove_file(id);
}

// ---- bad requests -------------------------------------------------------------------------

TEST_F(FileStoreTest, BadRequestsGetTheirErrnoAndLeaveTheStoreAsItWas) {
  if (!IsRoot()) GTEST_SKIP() << "supplying for a file needs CAP_SYS_ADMIN; the user run checks EPERM";
  LibraryCopy lib;
  ASSERT_TRUE(lib.ok());
  sframe::GeneratedSframe g = sframe::generate_sframe(lib.path());
  const size_t entries = dev().list_files().size();
  sframe::UniqueFd rd = sframe::UniqueFd::open(lib.path(), O_RDONLY);

  // Not readable, not a regular file, not ELF.
  {
    sframe::UniqueFd path_only = sframe::UniqueFd::open(lib.path(), O_PATH);
    EXPECT_EQ(SupplyErrno(path_only.get(), g.bytes.data(), g.bytes.size(), g.section_vaddr),
              EBADF);
    sframe::UniqueFd dir = sframe::UniqueFd::open(lib.dir(), O_RDONLY | O_DIRECTORY);
    EXPECT_EQ(SupplyErrno(dir.get(), g.bytes.data(), g.bytes.size(), g.section_vaddr), EINVAL);
    const std::string text = lib.dir() + "/text";
    std::ofstream(text) << "not an ELF file, long enough to hold an ELF header and more";
    sframe::UniqueFd t = sframe::UniqueFd::open(text, O_RDONLY);
    EXPECT_EQ(SupplyErrno(t.get(), g.bytes.data(), g.bytes.size(), g.section_vaddr), ENOEXEC);
    EXPECT_EQ(SupplyErrno(-1, g.bytes.data(), g.bytes.size(), g.section_vaddr), EBADF);
  }
  // Bad section bytes, lengths and addresses.
  std::vector<uint8_t> garbage(g.bytes.size(), 0x5a);
  EXPECT_NE(SupplyErrno(rd.get(), garbage.data(), garbage.size(), g.section_vaddr), 0);
  EXPECT_EQ(SupplyErrno(rd.get(), g.bytes.data(), 0, g.section_vaddr), EINVAL);
  EXPECT_EQ(SupplyErrno(rd.get(), g.bytes.data(), uint64_t{SFRAME_MAX_SECTION_SIZE} + 1,
                        g.section_vaddr),
            E2BIG);
  EXPECT_EQ(SupplyErrno(rd.get(), nullptr, g.bytes.size(), g.section_vaddr), EFAULT);
  EXPECT_NE(SupplyErrno(rd.get(), g.bytes.data(), g.bytes.size(), g.section_vaddr + 0x100000), 0)
      << "FDEs outside the file's text";
  EXPECT_EQ(SupplyErrno(rd.get(), g.bytes.data(), g.bytes.size(), ~uint64_t{0} - 16), EINVAL);
  // Open for writing somewhere.
  {
    sframe::UniqueFd w = sframe::UniqueFd::open(lib.path(), O_WRONLY);
    EXPECT_EQ(SupplyErrno(rd.get(), g.bytes.data(), g.bytes.size(), g.section_vaddr), ETXTBSY);
  }
  // Flags and reserved fields.
  sframe_file_supply req{};
  req.size = sizeof(req);
  req.fd = rd.get();
  req.sframe_data = reinterpret_cast<uintptr_t>(g.bytes.data());
  req.sframe_len = g.bytes.size();
  req.sframe_vaddr = g.section_vaddr;
  req.flags = 0x80;
  EXPECT_EQ(IoctlErrno(dev().fd(), SFRAME_IOC_FILE_SUPPLY, &req), EINVAL) << "flags";
  req.flags = 0;
  req.reserved[1] = 1;
  EXPECT_EQ(IoctlErrno(dev().fd(), SFRAME_IOC_FILE_SUPPLY, &req), EINVAL) << "reserved";
  EXPECT_EQ(sframe::errno_of([&] { dev().remove_file(~uint64_t{0}); }), ENOENT);
  EXPECT_EQ(dev().list_files().size(), entries);

  // Replacing: a new id, the old one gone, one entry.
  const uint64_t first = dev().supply_file(rd.get(), g.bytes.data(), g.bytes.size(),
                                           g.section_vaddr, false, lib.path());
  const uint64_t second = dev().supply_file(rd.get(), g.bytes.data(), g.bytes.size(),
                                            g.section_vaddr, true, lib.path());
  EXPECT_NE(first, second);
  EXPECT_FALSE(Listed(dev().list_files(), first));
  EXPECT_TRUE(Listed(dev().list_files(), second));
  dev().remove_file_of(rd.get(), lib.path());
  EXPECT_EQ(dev().list_files().size(), entries);
}

}  // namespace
