// The C API (sframe_client/sframe_client.h) against the module: every errno
// path the C++ layer has (errors_vmtest, supply_vmtest, session_vmtest)
// comes back as the same negative errno with the C++ Error's message, the
// size conventions of the structs, a complete unwind of a C call chain, and
// a session reading the samples of a perf event the program opened on
// itself, and the file store (file_store_vmtest's C++ calls): a section
// supplied for a file as root, listed and removed; -EPERM as a user.
//
// This program links the SHARED libsframe-client.so (sframe_add_vmtest
// SHARED): the frame of sframe::Device::unwind_self, and the C entry point
// sframe_client_unwind_self, lie in the library, which has its own .sframe,
// so sframe_client_register_loaded_objects() covers them.  Chains that must
// be complete run in a child scenario (vmtest.h): registrations there end
// with the child and never reach the other tests.
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "c_api_chain.h"
#include "sessions.h"
#include "sframe_client/sframe_client.h"
#include "synthetic.h"
#include "vmtest.h"

namespace {

using vmtest::ChainIs;
using vmtest::ChildResult;
using vmtest::ChildTail;
using vmtest::CopySection;
using vmtest::IsRoot;
using vmtest::RunAsNobody;
using vmtest::RunChild;
using vmtest::SectionCopy;
using vmtest::SyntheticSections;

// As root the suite runs with discovery off, as a user with it on.
const bool kDiscoveryOffWhenRoot = vmtest::DiscoveryOffWhenRoot();

constexpr pid_t kNoSuchPid = 0x7ffffff0;  // beyond any pid_max

std::string ErrMsg() { return sframe_client_errmsg(); }

// The C handle of the device, and the program's own object (its .sframe).
class CApiTest : public vmtest::SelfSectionTest {
 protected:
  void SetUp() override {
    SelfSectionTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(sframe_client_open(vmtest::DevicePath().c_str(), &cdev_), 0) << ErrMsg();
  }
  void TearDown() override { sframe_client_close(cdev_); }

  // sframe_client_register's result; undone when it should not have worked.
  int Register(uint64_t sframe_addr, uint64_t sframe_len, uint64_t text_start, uint64_t text_len) {
    int ret = sframe_client_register(cdev_, sframe_addr, sframe_len, text_start, text_len);
    if (ret == 0) sframe_client_unregister(cdev_, text_start);
    return ret;
  }
  int RegisterSelf() {
    return sframe_client_register(cdev_, self_.sframe_addr, self_.sframe_len, self_.text_start,
                                  self_.text_len);
  }
  // The section bytes of the program, to supply.
  std::vector<uint8_t> SelfBytes() const {
    const auto* p = reinterpret_cast<const uint8_t*>(self_.sframe_addr);
    return std::vector<uint8_t>(p, p + self_.sframe_len);
  }
  int Supply(pid_t pid, const std::vector<uint8_t>& bytes) {
    return sframe_client_supply(cdev_, pid, bytes.data(), bytes.size(), self_.sframe_addr,
                                self_.text_start, self_.text_len);
  }
  // The entries of pid through the C API.
  std::vector<sframe_client_section_info> List(pid_t pid) {
    int n = sframe_client_list_sections(cdev_, pid, nullptr, 0, 0);
    EXPECT_GE(n, 0) << ErrMsg();
    std::vector<sframe_client_section_info> v(n > 0 ? n + 8 : 8);
    n = sframe_client_list_sections(cdev_, pid, v.data(), sizeof(v[0]), v.size());
    EXPECT_GE(n, 0) << ErrMsg();
    v.resize(n > 0 ? std::min<size_t>(n, v.size()) : 0);
    return v;
  }
  const sframe_client_section_info* Find(const std::vector<sframe_client_section_info>& v,
                                         uint64_t text_start) {
    for (const auto& e : v) {
      if (e.text_start == text_start) return &e;
    }
    return nullptr;
  }

  sframe_client_device* cdev_ = nullptr;
};

// ---- registration -------------------------------------------------------------------

TEST_F(CApiTest, RegisterUnregisterAndStats) {
  sframe_client_stats before{};
  before.sz = sizeof(before);
  ASSERT_EQ(sframe_client_get_stats(cdev_, &before), 0) << ErrMsg();
  EXPECT_EQ(before.abi_version, static_cast<uint32_t>(SFRAME_UNWIND_ABI_VERSION));
  ASSERT_EQ(RegisterSelf(), 0) << ErrMsg();
  sframe_client_stats during{};
  during.sz = sizeof(during);
  ASSERT_EQ(sframe_client_get_stats(cdev_, &during), 0);
  EXPECT_EQ(during.mm_sections, before.mm_sections + 1);
  EXPECT_EQ(during.registrations, before.registrations + 1);
  EXPECT_GE(during.sections, 1u);
  const auto list = List(0);
  const sframe_client_section_info* e = Find(list, self_.text_start);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->source, static_cast<uint32_t>(SFRAME_SOURCE_REGISTERED));
  EXPECT_EQ(e->sframe_addr, self_.sframe_addr);
  EXPECT_EQ(e->text_len, self_.text_len);
  EXPECT_GT(e->nr_fdes, 0u);
  EXPECT_EQ(e->nr_fdes_skipped, 0u);
  EXPECT_EQ(sframe_client_unregister(cdev_, self_.text_start), 0) << ErrMsg();
  sframe_client_stats after{};
  after.sz = sizeof(after);
  ASSERT_EQ(sframe_client_get_stats(cdev_, &after), 0);
  EXPECT_EQ(after.mm_sections, before.mm_sections);
}

// The caller's sz: the first version's size is enough; a larger struct of a
// newer caller gets zeroes beyond what the library knows.
TEST_F(CApiTest, StatsOfOlderAndNewerCallers) {
  struct {
    sframe_client_stats st;
    uint64_t newer[3];
  } big;
  std::memset(&big, 0xa5, sizeof(big));
  big.st.sz = sizeof(big);
  ASSERT_EQ(sframe_client_get_stats(cdev_, &big.st), 0) << ErrMsg();
  EXPECT_EQ(big.st.sz, sizeof(big)) << "sz is left as the caller set it";
  EXPECT_EQ(big.st.abi_version, static_cast<uint32_t>(SFRAME_UNWIND_ABI_VERSION));
  EXPECT_EQ(big.st.reserved0, 0u);
  for (uint64_t v : big.newer) EXPECT_EQ(v, 0u);
  sframe_client_stats exact;
  std::memset(&exact, 0xa5, sizeof(exact));
  exact.sz = SFRAME_CLIENT_STATS_SZ_VER0;
  EXPECT_EQ(sframe_client_get_stats(cdev_, &exact), 0);
  EXPECT_EQ(exact.abi_version, static_cast<uint32_t>(SFRAME_UNWIND_ABI_VERSION));
  exact.sz = SFRAME_CLIENT_STATS_SZ_VER0 - 8;
  EXPECT_EQ(sframe_client_get_stats(cdev_, &exact), -EINVAL);
}

TEST_F(CApiTest, OverlapIsEexistWithTheLibrarysMessage) {
  ASSERT_EQ(RegisterSelf(), 0) << ErrMsg();
  EXPECT_EQ(RegisterSelf(), -EEXIST);
  char range[96];
  std::snprintf(range, sizeof(range), "text 0x%" PRIx64 "-0x%" PRIx64, self_.text_start,
                self_.text_start + self_.text_len);
  EXPECT_EQ(ErrMsg(), std::string("register ") + range +
                          ": .sframe text range overlaps a registered one (EEXIST)");
  EXPECT_STREQ(sframe_client_errno_name(-EEXIST), "EEXIST");
  EXPECT_EQ(sframe_client_unregister(cdev_, self_.text_start), 0);
}

TEST_F(CApiTest, UnregisterUnknownIsEnoent) {
  EXPECT_EQ(sframe_client_unregister(cdev_, self_.text_start), -ENOENT);
  EXPECT_NE(ErrMsg().find("unregister text start 0x"), std::string::npos) << ErrMsg();
  EXPECT_NE(ErrMsg().find("no section registered with this text start (ENOENT)"),
            std::string::npos)
      << ErrMsg();
  ASSERT_EQ(RegisterSelf(), 0);
  EXPECT_EQ(sframe_client_unregister(cdev_, self_.text_start + 16), -ENOENT);
  EXPECT_EQ(sframe_client_unregister(cdev_, self_.text_start), 0);
  EXPECT_EQ(sframe_client_unregister(cdev_, self_.text_start), -ENOENT);
}

// The module's refusals of a section, each as its negative errno.
TEST_F(CApiTest, RegisterRefusals) {
  EXPECT_EQ(Register(self_.sframe_addr, 0, self_.text_start, self_.text_len), -EINVAL)
      << "zero length";
  EXPECT_EQ(Register(self_.sframe_addr, self_.sframe_len, self_.text_start, 0), -EINVAL);
  EXPECT_EQ(Register(self_.sframe_addr, self_.sframe_len, 0xffff800000000000ull, 0x1000), -EINVAL)
      << "kernel text";
  EXPECT_EQ(Register(self_.sframe_addr, self_.sframe_len, self_.text_start, 16), -EINVAL)
      << "FDEs outside the text";

  SectionCopy bad_magic = CopySection(self_);
  bad_magic.bytes()[0] ^= 0xff;
  EXPECT_EQ(Register(bad_magic.addr(), bad_magic.len, self_.text_start, self_.text_len), -ENOEXEC);
  EXPECT_NE(ErrMsg().find("not an SFrame section (bad magic) (ENOEXEC)"), std::string::npos)
      << ErrMsg();

  SectionCopy bad_version = CopySection(self_);
  bad_version.bytes()[sframe::hdr::kVersion] = 0x7f;
  EXPECT_EQ(Register(bad_version.addr(), bad_version.len, self_.text_start, self_.text_len),
            -EOPNOTSUPP);

  // Above SFRAME_MAX_SECTION_SIZE: a real mapping that large.
  const size_t big_len = SFRAME_MAX_SECTION_SIZE + 1;
  sframe::MappedRegion big = sframe::MappedRegion::map_near(
      reinterpret_cast<void*>(self_.text_start), big_len + 4096, PROT_READ | PROT_WRITE);
  std::memcpy(big.data(), reinterpret_cast<void*>(self_.sframe_addr), self_.sframe_len);
  ASSERT_TRUE(
      sframe::relocate_section(big.data(), self_.sframe_len, self_.sframe_addr, big.address()));
  EXPECT_EQ(Register(big.address(), big_len, self_.text_start, self_.text_len), -E2BIG);

  // Text not mapped, not executable; section not mapped.
  SyntheticSections s(2, 64);
  const uint64_t text = s.text(0);
  munmap(reinterpret_cast<void*>(s.text_region().address()), s.text_region().size());
  EXPECT_EQ(Register(s.section(0), s.section_len(), text, 64), -EFAULT);
  sframe::MappedRegion rw =
      sframe::MappedRegion::map(4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  SyntheticSections s2(1, 16);
  auto built = s2.BuildFor(rw.address(), 64);
  EXPECT_EQ(Register(built.addr, built.len, rw.address(), 4096), -EACCES);
  // (Everything else mapped first: a later mmap could take the hole.)
  SyntheticSections s3(1, 64);
  sframe::MappedRegion gone =
      sframe::MappedRegion::map(4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  const uint64_t gone_addr = gone.address();
  gone.reset();
  EXPECT_EQ(Register(gone_addr, s3.section_len(), s3.text(0), 64), -EFAULT);
}

TEST_F(CApiTest, RegisterObjectContaining) {
  uint64_t text_start = 0;
  ASSERT_EQ(sframe_client_register_object_containing(
                cdev_, reinterpret_cast<const void*>(&vmtest::DevicePath), &text_start),
            0)
      << ErrMsg();
  EXPECT_EQ(text_start, self_.text_start);
  EXPECT_EQ(sframe_client_register_object_containing(
                cdev_, reinterpret_cast<const void*>(&vmtest::DevicePath), nullptr),
            -EEXIST);
  EXPECT_NE(ErrMsg().find("register " + self_.path + ": "), std::string::npos) << ErrMsg();
  EXPECT_EQ(sframe_client_unregister(cdev_, text_start), 0) << "it stayed registered";
  EXPECT_EQ(sframe_client_register_object_containing(cdev_, reinterpret_cast<void*>(16), nullptr),
            -ENOENT);
  EXPECT_EQ(sframe_client_register_object_containing(
                cdev_, reinterpret_cast<const void*>(&::getpid), nullptr),
            -ENODATA)
      << "Debian's libc has no .sframe";
}

// ---- supply, another process's entries ------------------------------------------------

TEST_F(CApiTest, SupplyListAndUnregisterForAPid) {
  const std::vector<uint8_t> bytes = SelfBytes();
  ASSERT_EQ(Supply(getpid(), bytes), 0) << ErrMsg();
  const auto list = List(getpid());
  const sframe_client_section_info* e = Find(list, self_.text_start);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->source, static_cast<uint32_t>(SFRAME_SOURCE_SUPPLIED));
  EXPECT_EQ(e->sframe_len, bytes.size());
  EXPECT_EQ(sframe_client_unregister_pid(cdev_, getpid(), self_.text_start), 0) << ErrMsg();
  EXPECT_EQ(sframe_client_unregister_pid(cdev_, getpid(), self_.text_start), -ENOENT);
}

TEST_F(CApiTest, SupplyRefusals) {
  std::vector<uint8_t> bad = SelfBytes();
  bad[0] ^= 0xff;
  EXPECT_EQ(Supply(0, bad), -ENOEXEC);
  bad.assign(bad.begin(), bad.begin() + 16);
  EXPECT_EQ(Supply(0, bad), -EINVAL) << "a truncated header";
  EXPECT_EQ(sframe_client_supply(cdev_, 0, reinterpret_cast<void*>(0x1000), 256,
                                 self_.sframe_addr, self_.text_start, self_.text_len),
            -EFAULT)
      << "data unreadable";
}

TEST_F(CApiTest, NoSuchProcessIsEsrch) {
  const std::vector<uint8_t> bytes = SelfBytes();
  EXPECT_EQ(Supply(kNoSuchPid, bytes), -ESRCH);
  EXPECT_NE(ErrMsg().find(" of process " + std::to_string(kNoSuchPid) + ": no such process (ESRCH)"),
            std::string::npos)
      << ErrMsg();
  EXPECT_EQ(Supply(-5, bytes), -ESRCH);
  EXPECT_EQ(sframe_client_list_sections(cdev_, kNoSuchPid, nullptr, 0, 0), -ESRCH);
  EXPECT_EQ(sframe_client_unregister_pid(cdev_, kNoSuchPid, self_.text_start), -ESRCH);
}

// Run as a user: init is root's.  As root: a child that drops to uid 65534
// tries the same on its root parent.
TEST_F(CApiTest, OnlyWhoMayPtraceAProcessSuppliesForItOrListsIt) {
  const std::vector<uint8_t> bytes = SelfBytes();
  if (!IsRoot()) {
    EXPECT_EQ(Supply(1, bytes), -EPERM);
    EXPECT_EQ(sframe_client_list_sections(cdev_, 1, nullptr, 0, 0), -EPERM);
    EXPECT_EQ(sframe_client_unregister_pid(cdev_, 1, self_.text_start), -EPERM);
    return;
  }
  const pid_t parent = getpid();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int rc = 0;
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(64);
    if (Supply(parent, bytes) != -EPERM) rc |= 1;
    if (sframe_client_list_sections(cdev_, parent, nullptr, 0, 0) != -EPERM) rc |= 2;
    if (sframe_client_unregister_pid(cdev_, parent, self_.text_start) != -EPERM) rc |= 4;
    _exit(rc);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: supply, 2: list, 4: unregister not -EPERM; "
                                       "64: setuid failed";
}

TEST_F(CApiTest, SuppliedBytesBoundIsEdquot) {
  if (!IsRoot()) GTEST_SKIP() << "lowering the bound needs root (module parameters)";
  const std::vector<uint8_t> bytes = SelfBytes();
  const uint64_t kb = (bytes.size() + 1023) / 1024;
  vmtest::ScopedModuleParam per_process("supply_max_process_kb",
                                        std::to_string(kb > 1 ? kb - 1 : 0).c_str());
  ASSERT_TRUE(per_process.ok());
  EXPECT_EQ(Supply(0, bytes), -EDQUOT);
}

TEST_F(CApiTest, ListingCountsAndCopiesWhatFits) {
  SyntheticSections s(3, 64);
  for (size_t i = 0; i < 3; i++) {
    ASSERT_EQ(sframe_client_register(cdev_, s.section(i), s.section_len(), s.text(i), 64), 0)
        << ErrMsg();
  }
  const int total = sframe_client_list_sections(cdev_, 0, nullptr, 0, 0);
  ASSERT_GE(total, 3) << ErrMsg();
  // Room for one: one written, the count of all returned.
  struct Wide {
    sframe_client_section_info info;
    uint64_t newer;
  };
  std::vector<Wide> wide(2);
  std::memset(wide.data(), 0xa5, wide.size() * sizeof(Wide));
  EXPECT_EQ(sframe_client_list_sections(cdev_, 0, &wide[0].info, sizeof(Wide), 1), total);
  EXPECT_EQ(wide[0].newer, 0u) << "a newer caller's fields are zeroed";
  EXPECT_EQ(wide[0].info.nr_fdes_skipped, 0u);
  uint64_t untouched;
  std::memset(&untouched, 0xa5, sizeof(untouched));
  EXPECT_EQ(wide[1].info.text_start, untouched) << "nothing beyond max_entries";
  // Everything, in text order.
  const auto all = List(0);
  ASSERT_EQ(all.size(), static_cast<size_t>(total));
  for (size_t i = 1; i < all.size(); i++) EXPECT_LT(all[i - 1].text_start, all[i].text_start);
  for (size_t i = 0; i < 3; i++) {
    const sframe_client_section_info* e = Find(all, s.text(i));
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->sframe_addr, s.section(i));
    EXPECT_EQ(sframe_client_unregister(cdev_, s.text(i)), 0);
  }
}

// ---- unwind_self -------------------------------------------------------------------------

TEST_F(CApiTest, UnwindSelfRefusals) {
  std::vector<uint64_t> frames(SFRAME_MAX_FRAMES + 1);
  sframe_client_unwind_result res{};
  res.sz = sizeof(res);
  EXPECT_EQ(sframe_client_unwind_self(cdev_, frames.data(), 0, SFRAME_UNWIND_F_ALL, &res), -EINVAL);
  EXPECT_EQ(ErrMsg(),
            "unwind_self " + vmtest::DevicePath() +
                ": invalid request (size, flags, reserved fields, or max_frames 0 or above "
                "SFRAME_MAX_FRAMES) (EINVAL)");
  EXPECT_EQ(sframe_client_unwind_self(cdev_, frames.data(), SFRAME_MAX_FRAMES + 1,
                                      SFRAME_UNWIND_F_ALL, &res),
            -EINVAL);
  EXPECT_EQ(sframe_client_unwind_self(cdev_, frames.data(), 16, 0, &res), -EINVAL) << "no method";
  EXPECT_EQ(sframe_client_unwind_self(cdev_, frames.data(), 16, SFRAME_UNWIND_F_ALL | 4, &res),
            -EINVAL);
}

// (The module's EFAULT for an unwritable frames buffer cannot come back
// through the library, C++ or C: it unwinds into a buffer of its own and
// copies.  errors_vmtest checks the module's EFAULT with the raw ioctl.)
TEST_F(CApiTest, UnwindSelfResultOfANewerCaller) {
  struct {
    sframe_client_unwind_result res;
    uint32_t newer[2];
  } big;
  std::memset(&big, 0xa5, sizeof(big));
  big.res.sz = sizeof(big);
  uint64_t frames[4];
  const int n = sframe_client_unwind_self(cdev_, frames, 1, SFRAME_UNWIND_F_ALL, &big.res);
  ASSERT_EQ(n, 1) << ErrMsg();
  EXPECT_EQ(big.res.nr_frames, 1u);
  EXPECT_EQ(big.res.stop_reason, static_cast<uint32_t>(SFRAME_STOP_LIMIT));
  EXPECT_EQ(big.newer[0], 0u);
  EXPECT_EQ(big.newer[1], 0u);
  // frames[0] lies in the library (sframe::Device::unwind_self).
  auto obj = sframe::loaded_object_containing(reinterpret_cast<void*>(frames[0]));
  ASSERT_TRUE(obj);
  EXPECT_NE(obj->path.find("libsframe-client.so"), std::string::npos) << obj->path;
}

// ---- the file store (0.2.0) -----------------------------------------------------------------

// A copy of this program (a new inode that nothing maps, so that no entry
// reaches another test) open for reading, and the program's own section for
// it: the copy has the same program headers, so the section counts as
// loaded at the program's PT_GNU_SFRAME p_vaddr.
class CApiFileStoreTest : public CApiTest {
 protected:
  void SetUp() override {
    CApiTest::SetUp();
    if (HasFatalFailure()) return;
    char tmpl[] = "/tmp/c-api-file-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr) << std::strerror(errno);
    dir_ = tmpl;
    path_ = dir_ + "/copy";
    {
      std::ifstream in(self_.path, std::ios::binary);
      std::ofstream out(path_, std::ios::binary | std::ios::trunc);
      out << in.rdbuf();
      ASSERT_TRUE(in && out) << self_.path << " -> " << path_;
    }  // closed: a file open for writing is ETXTBSY
    fd_ = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd_, 0) << path_ << ": " << std::strerror(errno);
    vaddr_ = self_.sframe_addr - self_.base;
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
    if (!path_.empty()) unlink(path_.c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
    CApiTest::TearDown();
  }
  int FileSupply(const std::vector<uint8_t>& bytes, uint32_t flags, uint64_t* id) {
    return sframe_client_file_supply(cdev_, fd_, bytes.data(), bytes.size(), vaddr_, flags, id);
  }
  // The store's entries through the C API: the count, then room for them.
  std::vector<sframe_client_file_info> Files() {
    int n = sframe_client_file_list(cdev_, nullptr, 0, 0);
    EXPECT_GE(n, 0) << ErrMsg();
    std::vector<sframe_client_file_info> v(n > 0 ? n + 8 : 8);
    n = sframe_client_file_list(cdev_, v.data(), sizeof(v[0]), v.size());
    EXPECT_GE(n, 0) << ErrMsg();
    v.resize(n > 0 ? std::min<size_t>(n, v.size()) : 0);
    return v;
  }
  static const sframe_client_file_info* FindFile(const std::vector<sframe_client_file_info>& v,
                                                 uint64_t id) {
    for (const auto& e : v) {
      if (e.id == id) return &e;
    }
    return nullptr;
  }
  sframe_client_file_store_stats StoreStats() {
    sframe_client_file_store_stats st{};
    st.sz = sizeof(st);
    EXPECT_EQ(sframe_client_file_store_get_stats(cdev_, &st), 0) << ErrMsg();
    return st;
  }

  std::string dir_, path_;
  int fd_ = -1;
  uint64_t vaddr_ = 0;
};

TEST_F(CApiFileStoreTest, SupplyListAndRemoveAFilesSection) {
  if (!IsRoot()) GTEST_SKIP() << "supplying for a file needs CAP_SYS_ADMIN; the user run checks EPERM";
  const std::vector<uint8_t> bytes = SelfBytes();
  const sframe_client_file_store_stats st0 = StoreStats();
  uint64_t id = 0;
  ASSERT_EQ(FileSupply(bytes, 0, &id), 0) << ErrMsg();
  EXPECT_NE(id, 0u);
  const sframe_client_file_store_stats st1 = StoreStats();
  EXPECT_EQ(st1.entries, st0.entries + 1);
  EXPECT_EQ(st1.bytes, st0.bytes + bytes.size());
  EXPECT_GE(st1.bytes_limit, st1.bytes);

  // The file has an entry: -EEXIST, the message naming the file.
  uint64_t untouched = 7;
  EXPECT_EQ(FileSupply(bytes, 0, &untouched), -EEXIST);
  EXPECT_EQ(untouched, 7u);
  EXPECT_NE(ErrMsg().find("supply for file " + path_ + ": "), std::string::npos) << ErrMsg();
  EXPECT_NE(ErrMsg().find("(EEXIST)"), std::string::npos) << ErrMsg();

  // Listed, describing the file and the section as supplied.
  struct stat sb {};
  ASSERT_EQ(fstat(fd_, &sb), 0);
  {
    const auto files = Files();
    const sframe_client_file_info* e = FindFile(files, id);
    ASSERT_NE(e, nullptr) << "entry " << id << " not listed among " << files.size();
    EXPECT_EQ(e->dev, static_cast<uint64_t>(sb.st_dev));
    EXPECT_EQ(e->ino, static_cast<uint64_t>(sb.st_ino));
    EXPECT_EQ(e->file_size, static_cast<uint64_t>(sb.st_size));
    EXPECT_EQ(e->sframe_len, bytes.size());
    EXPECT_EQ(e->sframe_vaddr, vaddr_);
    EXPECT_EQ(e->text_vaddr, self_.text_start - self_.base);
    EXPECT_EQ(e->text_len, self_.text_len);
    EXPECT_GT(e->covered_bytes, 0u);
    EXPECT_EQ(e->version, bytes[2]) << "the section's preamble";
    EXPECT_GT(e->nr_fdes, 0u);
    EXPECT_EQ(e->reserved0, 0u);
    // Room for none: the count only.  A newer caller's larger elements:
    // zeroes beyond what the library knows.
    const int total = static_cast<int>(files.size());
    EXPECT_EQ(sframe_client_file_list(cdev_, nullptr, 0, 0), total);
    struct Wide {
      sframe_client_file_info info;
      uint64_t newer;
    } wide;
    std::memset(&wide, 0xa5, sizeof(wide));
    EXPECT_EQ(sframe_client_file_list(cdev_, &wide.info, sizeof(wide), 1), total);
    EXPECT_EQ(wide.newer, 0u);
  }

  // Replaced: a new id, the old one gone.
  uint64_t id2 = 0;
  ASSERT_EQ(FileSupply(bytes, SFRAME_FILE_F_REPLACE, &id2), 0) << ErrMsg();
  EXPECT_NE(id2, id);
  EXPECT_EQ(FindFile(Files(), id), nullptr);
  EXPECT_NE(FindFile(Files(), id2), nullptr);
  EXPECT_EQ(StoreStats().entries, st0.entries + 1);
  EXPECT_EQ(sframe_client_file_remove(cdev_, id), -ENOENT) << "the replaced entry";

  // Removed by id, then by file.
  EXPECT_EQ(sframe_client_file_remove(cdev_, id2), 0) << ErrMsg();
  EXPECT_EQ(FindFile(Files(), id2), nullptr);
  EXPECT_EQ(sframe_client_file_remove(cdev_, id2), -ENOENT);
  EXPECT_NE(ErrMsg().find(" id " + std::to_string(id2) + ":"), std::string::npos) << ErrMsg();
  ASSERT_EQ(FileSupply(bytes, 0, nullptr), 0) << ErrMsg();
  EXPECT_EQ(StoreStats().entries, st0.entries + 1);
  EXPECT_EQ(sframe_client_file_remove_fd(cdev_, fd_), 0) << ErrMsg();
  EXPECT_EQ(sframe_client_file_remove_fd(cdev_, fd_), -ENOENT);
  EXPECT_NE(ErrMsg().find("remove file entry " + path_ + ": "), std::string::npos) << ErrMsg();
  EXPECT_EQ(StoreStats().entries, st0.entries);
  // The bytes are held until fsnotify frees the entry's mark, which it
  // does from a delayed work (about a second later): up to 5 s.
  uint64_t bytes_after = 0;
  for (int i = 0; i < 500; i++) {
    bytes_after = StoreStats().bytes;
    if (bytes_after == st0.bytes) break;
    usleep(10000);
  }
  EXPECT_EQ(bytes_after, st0.bytes) << "the removed entries' bytes are still held after 5 s";
}

TEST_F(CApiFileStoreTest, FileRefusals) {
  if (!IsRoot()) GTEST_SKIP() << "supplying for a file needs CAP_SYS_ADMIN; the user run checks EPERM";
  std::vector<uint8_t> bytes = SelfBytes();
  const size_t entries = Files().size();
  // Open for writing somewhere.
  {
    const int w = open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(w, 0);
    EXPECT_EQ(FileSupply(bytes, 0, nullptr), -ETXTBSY);
    close(w);
  }
  EXPECT_EQ(sframe_client_file_supply(cdev_, -1, bytes.data(), bytes.size(), vaddr_, 0, nullptr),
            -EBADF);
  EXPECT_NE(ErrMsg().find("supply for file fd -1: "), std::string::npos) << ErrMsg();
  EXPECT_EQ(sframe_client_file_supply(cdev_, fd_, bytes.data(), 0, vaddr_, 0, nullptr), -EINVAL);
  EXPECT_EQ(sframe_client_file_supply(cdev_, fd_, bytes.data(), bytes.size(), vaddr_, 0x80,
                                      nullptr),
            -EINVAL)
      << "unknown flags";
  EXPECT_EQ(sframe_client_file_supply(cdev_, fd_, reinterpret_cast<void*>(0x1000), 256, vaddr_, 0,
                                      nullptr),
            -EFAULT);
  // The device is no regular file.
  EXPECT_EQ(sframe_client_file_supply(cdev_, sframe_client_fd(cdev_), bytes.data(), bytes.size(),
                                      vaddr_, 0, nullptr),
            -EINVAL);
  bytes[0] ^= 0xff;
  EXPECT_EQ(FileSupply(bytes, 0, nullptr), -ENOEXEC) << "bad magic";
  EXPECT_EQ(sframe_client_file_remove(cdev_, ~uint64_t{0}), -ENOENT);
  EXPECT_EQ(sframe_client_file_remove_fd(cdev_, fd_), -ENOENT);
  EXPECT_EQ(Files().size(), entries) << "a refusal left an entry";
}

// As a user: -EPERM for supplying and removing, before anything else is
// looked at; the list and the counters are open to everyone.  As root: a
// child that drops to uid 65534 tries the same.
TEST_F(CApiFileStoreTest, OnlyCapSysAdminSuppliesOrRemovesAndEveryoneLists) {
  const std::vector<uint8_t> bytes = SelfBytes();
  auto attempt = [&]() -> int {
    int rc = 0;
    uint64_t id = 7;
    if (FileSupply(bytes, 0, &id) != -EPERM || id != 7) rc |= 1;
    if (sframe_client_file_remove(cdev_, 1) != -EPERM) rc |= 2;
    if (sframe_client_file_remove_fd(cdev_, fd_) != -EPERM) rc |= 4;
    if (sframe_client_file_list(cdev_, nullptr, 0, 0) < 0) rc |= 8;
    sframe_client_file_store_stats st{};
    st.sz = sizeof(st);
    if (sframe_client_file_store_get_stats(cdev_, &st) != 0 || st.bytes_limit == 0) rc |= 16;
    return rc;
  };
  const char* const kWhat = "1: supply, 2: remove, 4: remove_fd not -EPERM; 8: list, "
                            "16: stats failed; 64: setuid failed";
  if (!IsRoot()) {
    EXPECT_EQ(attempt(), 0) << kWhat;
    EXPECT_NE(ErrMsg().find("(EPERM)"), std::string::npos) << ErrMsg();
    return;
  }
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(64);
    _exit(attempt());
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << kWhat;
}

}  // namespace

// ---- a complete chain through the C API -------------------------------------------------------

VMTEST_CHILD(c_chain) {
  (void)arg;
  sframe_client_device* dev = nullptr;
  if (sframe_client_open(vmtest::DevicePath().c_str(), &dev) != 0) {
    std::printf("open: %s\n", sframe_client_errmsg());
    return 1;
  }
  size_t nr = 0;
  if (sframe_client_register_loaded_objects(dev, &nr) != 0) {
    std::printf("register_loaded_objects: %s\n", sframe_client_errmsg());
    return 2;
  }
  vmtest::EmitValue("registered", nr);
  // Everything registered again: the first object is refused, nothing else
  // changes.
  size_t again = 99;
  vmtest::EmitValue("again", static_cast<uint64_t>(-sframe_client_register_loaded_objects(dev, &again)));
  vmtest::EmitValue("again_nr", again);
  uint64_t frames[64];
  c_chain_req req{};
  req.dev = dev;
  req.frames = frames;
  req.max_frames = 64;
  req.res.sz = sizeof(req.res);
  for (uint32_t flags : {SFRAME_UNWIND_F_SFRAME, SFRAME_UNWIND_F_ALL}) {
    req.flags = flags;
    c_chain_a(&req);
    if (req.ret < 0) {
      std::printf("unwind_self: %s\n", sframe_client_errmsg());
      return 3;
    }
    sframe::UnwindResult r;
    r.frames.assign(frames, frames + req.ret);
    r.stop_reason = static_cast<sframe::StopReason>(req.res.stop_reason);
    r.nr_sframe = req.res.nr_sframe;
    r.nr_fp = req.res.nr_fp;
    vmtest::EmitValue(flags == SFRAME_UNWIND_F_SFRAME ? "ret_sframe" : "ret_all",
                      static_cast<uint64_t>(req.ret));
    vmtest::EmitValue(flags == SFRAME_UNWIND_F_SFRAME ? "nr_frames_sframe" : "nr_frames_all",
                      req.res.nr_frames);
    vmtest::EmitUnwind(flags == SFRAME_UNWIND_F_SFRAME ? "sframe" : "all", r);
  }
  sframe_client_close(dev);
  return 0;
}

namespace {

TEST(CApiChain, CChainIsCompleteAfterRegisteringTheLoadedObjects) {
  ChildResult r = RunChild("c_chain");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  // The program and libsframe-client.so at least.
  EXPECT_GE(r.values["registered"], 2u) << r.output;
  EXPECT_EQ(r.values["again"], static_cast<uint64_t>(EEXIST)) << r.output;
  EXPECT_EQ(r.values["again_nr"], 99u) << "untouched on failure";
  const std::vector<std::string> head = {vmtest::kUnwindSelf, "sframe_client_unwind_self",
                                         "c_chain_c", "c_chain_b", "c_chain_a"};
  std::vector<std::string> expected = head;
  for (const std::string& f : ChildTail("c_chain")) expected.push_back(f);
  const vmtest::Chain& c = r.chains["sframe"];
  EXPECT_TRUE(ChainIs(c, expected, r.main_return));
  EXPECT_EQ(c.stop, sframe::StopReason::kNoCoverage) << c.Describe();
  EXPECT_EQ(c.nr_sframe, c.frames.size() - 1) << "every step but the one out of libc";
  EXPECT_EQ(c.nr_fp, 0u);
  EXPECT_EQ(r.values["ret_sframe"], c.frames.size()) << "the return value is nr_frames";
  EXPECT_EQ(r.values["nr_frames_sframe"], c.frames.size());
  EXPECT_TRUE(vmtest::ChainStartsWith(r.chains["all"], expected, r.main_return));
}

// ---- sessions ------------------------------------------------------------------------------

// A session on this thread, reading the samples of a cpu-clock perf event
// the child opened on itself while it spins in c_spin_a -> c_spin_b ->
// c_spin_leaf.
struct PerfSelf {
  int fd = -1;
  void* ring = MAP_FAILED;
  size_t ring_len = 0;
  ~PerfSelf() {
    if (ring != MAP_FAILED) munmap(ring, ring_len);
    if (fd >= 0) close(fd);
  }
};

int OpenPerfOnSelf(PerfSelf* p) {
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.freq = 1;
  attr.sample_freq = 1000;
  attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  attr.disabled = 1;
  attr.exclude_kernel = 1;  // user chains only: allowed at perf_event_paranoid 2
  attr.exclude_hv = 1;
  p->fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (p->fd < 0) return errno;
  // perf outputs samples only of an event with a ring buffer: 1 + 64 pages,
  // room for every sample of the run (24 bytes each).
  p->ring_len = (1 + 64) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  p->ring = mmap(nullptr, p->ring_len, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
  return p->ring == MAP_FAILED ? errno : 0;
}

struct SessionCheck {
  size_t samples = 0, lost = 0;
  size_t considered = 0, complete = 0;
  std::vector<std::string> expected;
  uint64_t libc_pc = 0;
  std::string first_bad;
};

int CheckRecord(void* ctx, const sframe_client_record* rec) {
  auto* c = static_cast<SessionCheck*>(ctx);
  if (rec->sz < sizeof(sframe_client_record)) return -1000;
  if (rec->type == SFRAME_RECORD_LOST) {
    c->lost += rec->lost;
    return 0;
  }
  c->samples++;
  sframe::UnwindResult r;
  if (rec->nr_user) r.frames.assign(rec->user, rec->user + rec->nr_user);
  r.stop_reason = static_cast<sframe::StopReason>(rec->user_stop);
  vmtest::Chain chain = vmtest::Symbolize(r);
  if (chain.frames.empty() || chain.frames[0].function != "c_spin_leaf") return 0;
  c->considered++;
  auto ok = ChainIs(chain, c->expected, c->libc_pc);
  if (ok && chain.stop == sframe::StopReason::kNoCoverage) {
    c->complete++;
  } else if (c->first_bad.empty()) {
    c->first_bad = std::string(ok.message()) + chain.Describe();
  }
  return 0;
}

int StopAtOnce(void* ctx, const sframe_client_record*) {
  ++*static_cast<int*>(ctx);
  return 4242;
}

}  // namespace

VMTEST_CHILD(c_session) {
  (void)arg;
  sframe_client_device* dev = nullptr;
  size_t nr = 0;
  if (sframe_client_open(vmtest::DevicePath().c_str(), &dev) != 0 ||
      sframe_client_register_loaded_objects(dev, &nr) != 0) {
    std::printf("device: %s\n", sframe_client_errmsg());
    return 1;
  }
  PerfSelf perf;
  if (int e = OpenPerfOnSelf(&perf)) {
    std::printf("perf_event_open: %s\n", std::strerror(e));
    return 2;
  }
  const std::string device = vmtest::DevicePath();
  sframe_client_session_opts o{};
  o.sz = sizeof(o);
  o.device = device.c_str();
  o.unwind_flags = SFRAME_UNWIND_F_SFRAME;
  o.buffer_size = 4u << 20;
  sframe_client_session* sess = nullptr;
  if (sframe_client_session_start(SFRAME_TARGET_THREAD, static_cast<pid_t>(syscall(SYS_gettid)),
                                  &o, &sess) != 0) {
    std::printf("session start: %s\n", sframe_client_errmsg());
    return 3;
  }
  vmtest::EmitValue("session_fd_ok", sframe_client_session_fd(sess) >= 0);
  vmtest::EmitValue("poll_before", static_cast<uint64_t>(sframe_client_session_poll(sess, 0)));
  ioctl(perf.fd, PERF_EVENT_IOC_ENABLE, 0);
  c_spin_a(2000);
  ioctl(perf.fd, PERF_EVENT_IOC_DISABLE, 0);

  SessionCheck check;
  check.expected = {"c_spin_leaf", "c_spin_b", "c_spin_a"};
  for (const std::string& f : ChildTail("c_session")) check.expected.push_back(f);
  check.libc_pc = vmtest::g_main_return;
  // One record through a callback that stops: its value comes back, and the
  // rest of that read comes first in the next call.
  int stopped_calls = 0;
  int first = 0;
  for (int i = 0; i < 50 && first == 0; i++) {
    if (sframe_client_session_poll(sess, 100) < 0) break;
    first = sframe_client_session_read(sess, StopAtOnce, &stopped_calls);
  }
  vmtest::EmitValue("stop_value", static_cast<uint64_t>(first));
  vmtest::EmitValue("stopped_calls", static_cast<uint64_t>(stopped_calls));
  // The rest until the session stays quiet for 300 ms.
  for (;;) {
    int ready = sframe_client_session_poll(sess, 300);
    if (ready < 0) {
      std::printf("poll: %s\n", sframe_client_errmsg());
      return 4;
    }
    if (ready == 0) break;
    int n = sframe_client_session_read(sess, CheckRecord, &check);
    if (n < 0) {
      std::printf("read: %s\n", sframe_client_errmsg());
      return 5;
    }
  }
  struct {
    sframe_client_session_stats st;
    uint64_t newer;
  } big;
  std::memset(&big, 0xa5, sizeof(big));
  big.st.sz = sizeof(big);
  if (sframe_client_session_get_stats(sess, &big.st) != 0) {
    std::printf("stats: %s\n", sframe_client_errmsg());
    return 6;
  }
  sframe_client_session_stats small{};
  small.sz = SFRAME_CLIENT_SESSION_STATS_SZ_VER0 - 1;
  vmtest::EmitValue("small_stats", static_cast<uint64_t>(-sframe_client_session_get_stats(sess, &small)));
  vmtest::EmitValue("read_nothing",
                    static_cast<uint64_t>(sframe_client_session_read(sess, CheckRecord, &check)));
  vmtest::EmitValue("stats_records", big.st.records);
  vmtest::EmitValue("stats_newer", big.newer);
  vmtest::EmitValue("samples", check.samples + static_cast<size_t>(stopped_calls));
  vmtest::EmitValue("lost", check.lost);
  vmtest::EmitValue("considered", check.considered);
  vmtest::EmitValue("complete", check.complete);
  if (!check.first_bad.empty()) std::printf("first incomplete chain:\n%s\n", check.first_bad.c_str());
  sframe_client_session_close(sess);
  sframe_client_close(dev);
  return 0;
}

namespace {

using vmtest::SessionTest;

TEST_F(SessionTest, CApiSessionReadsSamplesOfItsOwnPerfEvent) {
  SKIP_WITHOUT_PERF();
  ChildResult r = RunChild("c_session");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  std::printf("c_api session: %" PRIu64 " samples, %" PRIu64 " with the leaf in c_spin_leaf, %" PRIu64
              " of them complete\n",
              r.values["samples"], r.values["considered"], r.values["complete"]);
  EXPECT_EQ(r.values["session_fd_ok"], 1u);
  EXPECT_EQ(r.values["poll_before"], 0u) << "nothing to read before the event runs";
  EXPECT_EQ(r.values["stop_value"], 4242u) << r.output;
  EXPECT_EQ(r.values["stopped_calls"], 1u) << "the callback that stopped was called once";
  EXPECT_EQ(r.values["small_stats"], static_cast<uint64_t>(EINVAL));
  EXPECT_EQ(r.values["read_nothing"], 0u);
  EXPECT_EQ(r.values["stats_newer"], 0u) << "a newer caller's field is zeroed";
  EXPECT_EQ(r.values["lost"], 0u);
  EXPECT_EQ(r.values["samples"], r.values["stats_records"])
      << "every record the module wrote was passed to a callback once";
  EXPECT_GE(r.values["considered"], 100u) << r.output;
  EXPECT_GE(r.values["complete"], r.values["considered"] * 99 / 100) << r.output;
}

// What a session start is refused with, in the C API.
std::string StartErrno(uint32_t type, pid_t id, const sframe_client_session_opts* o) {
  sframe_client_session* s = nullptr;
  int ret = sframe_client_session_start(type, id, o, &s);
  sframe_client_session_close(s);
  return sframe_client_errno_name(ret == 0 ? 0 : ret);
}

sframe_client_session_opts DefaultOpts(const std::string& device) {
  sframe_client_session_opts o{};
  o.sz = sizeof(o);
  o.device = device.c_str();
  return o;
}

TEST_F(SessionTest, CApiStartErrors) {
  SKIP_WITHOUT_PERF();
  const std::string device = vmtest::DevicePath();
  sframe_client_session_opts o = DefaultOpts(device);
  EXPECT_EQ(StartErrno(SFRAME_TARGET_PROCESS, kNoSuchPid, &o), "ESRCH");
  EXPECT_NE(ErrMsg().find("session start process " + std::to_string(kNoSuchPid) +
                          ": no such target (ESRCH)"),
            std::string::npos)
      << ErrMsg();
  EXPECT_EQ(StartErrno(9, getpid(), &o), "EINVAL") << "target type";
  sframe_client_session_opts big = o;
  big.max_user_frames = SFRAME_MAX_FRAMES + 1;
  EXPECT_EQ(StartErrno(SFRAME_TARGET_PROCESS, getpid(), &big), "EINVAL");
  sframe_client_session_opts bad_flags = o;
  bad_flags.unwind_flags = 0x80;
  EXPECT_EQ(StartErrno(SFRAME_TARGET_PROCESS, getpid(), &bad_flags), "EINVAL");
  EXPECT_EQ(StartErrno(SFRAME_TARGET_EVENTS, getpid(), &o), "EINVAL") << "EVENTS takes id 0";

  // A working one, with defaults (opts NULL opens SFRAME_UNWIND_DEVICE, the
  // same as DevicePath() under the rig).
  sframe_client_session* s = nullptr;
  ASSERT_EQ(sframe_client_session_start(SFRAME_TARGET_PROCESS, getpid(),
                                        device == SFRAME_UNWIND_DEVICE ? nullptr : &o, &s),
            0)
      << ErrMsg();
  EXPECT_EQ(sframe_client_session_poll(s, 0), 0);
  sframe_client_session_stats st{};
  st.sz = sizeof(st);
  EXPECT_EQ(sframe_client_session_get_stats(s, &st), 0) << ErrMsg();
  EXPECT_EQ(st.lost, 0u);
  EXPECT_EQ(sframe_client_session_read(s, nullptr, nullptr), -EINVAL);
  SessionCheck none;
  EXPECT_EQ(sframe_client_session_read(s, CheckRecord, &none), 0) << "nothing yet";
  // IsRoot: kernel addresses are shown to root.
  if (IsRoot()) {
    EXPECT_EQ(sframe_client_session_out_flags(s) & SFRAME_SESSION_KERNEL_VISIBLE,
              static_cast<uint32_t>(SFRAME_SESSION_KERNEL_VISIBLE));
  }
  sframe_client_session_close(s);
}

// uid 65534: EPERM on root's process at paranoid 2, EACCES for every target
// at paranoid 3 (Debian's default).
std::string NobodyErrors(int paranoid, pid_t roots_process) {
  const std::string device = vmtest::DevicePath();
  sframe_client_session_opts o = DefaultOpts(device);
  std::ostringstream err;
  if (paranoid == 2) {
    std::string e = StartErrno(SFRAME_TARGET_PROCESS, roots_process, &o);
    if (e != "EPERM") err << "root's process: " << e << ", want EPERM\n";
    e = StartErrno(SFRAME_TARGET_ALL, 0, &o);
    if (e != "EACCES") err << "all tasks: " << e << ", want EACCES\n";
  } else {
    for (auto [t, id] : {std::pair<uint32_t, pid_t>{SFRAME_TARGET_PROCESS, getpid()},
                         {SFRAME_TARGET_THREAD, static_cast<pid_t>(syscall(SYS_gettid))},
                         {SFRAME_TARGET_ALL, 0}}) {
      std::string e = StartErrno(t, id, &o);
      if (e != "EACCES") err << "target " << t << ": " << e << ", want EACCES\n";
    }
    if (ErrMsg().find("perf_event_paranoid forbids it (EACCES)") == std::string::npos) {
      err << "message: " << ErrMsg() << "\n";
    }
  }
  return err.str();
}

TEST_F(SessionTest, CApiUnprivilegedStartErrors) {
  if (IsRoot()) {
    const pid_t me = getpid();
    EXPECT_EQ(RunAsNobody(2, [me] { return NobodyErrors(2, me); }), "");
    EXPECT_EQ(RunAsNobody(3, [] { return NobodyErrors(3, 0); }), "");
  } else if (paranoid_ == 2 || paranoid_ > 2) {
    EXPECT_EQ(NobodyErrors(paranoid_ == 2 ? 2 : 3, 1), "");
  } else {
    GTEST_SKIP() << "perf_event_paranoid is " << paranoid_
                 << ": uid " << geteuid() << " is not refused (root checks at 2 and 3)";
  }
}

}  // namespace
