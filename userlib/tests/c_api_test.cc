// Host tests of the C API (sframe_client/sframe_client.h) that need no
// module: the program links the shared libsframe-client.so, so what is
// tested is what the library exports.  Every errno the C layer gives by
// itself (NULL arguments, sizes), the errnos of a missing device and of a
// file that is not the device, the record parser's EBADMSG for each
// malformation the C++ parser checks (session_test.cc), the callback's
// stop value, the messages and the errno names.  The paths that need the
// module are tests/vm/c_api_vmtest.cc.
#include "sframe_client/sframe_client.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "sframe_test/records.h"

extern "C" int c_api_from_c(void);

namespace {

constexpr char kMissing[] = "/nonexistent/sframe_unwind";

// ---- records: what the parser is given ------------------------------------

using sframe_test::AddLost;
using sframe_test::AddSample;

// A record as the callback saw it, copied out (its pointers die with the call).
struct Seen {
  sframe_client_record rec{};
  std::vector<uint64_t> kernel, user;
};

struct Collector {
  std::vector<Seen> seen;
  int stop_after = -1;  // return stop_value after this many records
  int stop_value = 0;
};

int Collect(void* ctx, const sframe_client_record* rec) {
  auto* c = static_cast<Collector*>(ctx);
  Seen s;
  s.rec = *rec;
  if (rec->nr_kernel) s.kernel.assign(rec->kernel, rec->kernel + rec->nr_kernel);
  if (rec->nr_user) s.user.assign(rec->user, rec->user + rec->nr_user);
  c->seen.push_back(std::move(s));
  if (c->stop_after >= 0 && static_cast<int>(c->seen.size()) == c->stop_after) {
    return c->stop_value;
  }
  return 0;
}

int Parse(const std::vector<uint8_t>& buf, Collector* c) {
  return sframe_client_parse_records(buf.data(), buf.size(), Collect, c);
}

std::string ErrMsg() { return sframe_client_errmsg(); }

// ---- the C translation unit ---------------------------------------------------

TEST(CApi, HeaderCompilesAsC11AndWorksFromC) { EXPECT_EQ(c_api_from_c(), 0); }

TEST(CApi, VersionIsTheProjectVersion) {
  EXPECT_STREQ(sframe_client_version(), SFRAME_TEST_PROJECT_VERSION);
}

// ---- errors, messages, names -----------------------------------------------------

TEST(CApiErrors, ErrnoNamesOfNegativeAndPositiveValues) {
  EXPECT_STREQ(sframe_client_errno_name(-EEXIST), "EEXIST");
  EXPECT_STREQ(sframe_client_errno_name(EEXIST), "EEXIST");
  EXPECT_STREQ(sframe_client_errno_name(-EBADMSG), "EBADMSG");
  EXPECT_STREQ(sframe_client_errno_name(ENOTTY), "ENOTTY");
  // Named ones are static: the same pointer every time, and still valid
  // after other calls.
  const char* eexist = sframe_client_errno_name(EEXIST);
  sframe_client_errno_name(4000);
  EXPECT_EQ(sframe_client_errno_name(-EEXIST), eexist);
  EXPECT_STREQ(eexist, "EEXIST");
}

TEST(CApiErrors, ErrnoNamesOfUnknownValues) {
  EXPECT_STREQ(sframe_client_errno_name(4000), "E4000");
  EXPECT_STREQ(sframe_client_errno_name(-4000), "E4000");
  EXPECT_STREQ(sframe_client_errno_name(0), "E0");
  EXPECT_STREQ(sframe_client_errno_name(INT_MAX), "E2147483647");
  EXPECT_STREQ(sframe_client_errno_name(INT_MIN), "E2147483648");
}

TEST(CApiErrors, MessageIsPerThreadAndKeptBySuccessfulCalls) {
  sframe_client_device* dev = nullptr;
  ASSERT_EQ(sframe_client_open(kMissing, &dev), -ENOENT);
  const std::string mine = ErrMsg();
  EXPECT_EQ(mine, std::string("cannot open ") + kMissing +
                      ": No such file or directory (ENOENT)");
  std::string other_before, other_after;
  std::thread t([&] {
    other_before = ErrMsg();
    sframe_client_parse_records(nullptr, 1, Collect, nullptr);
    other_after = ErrMsg();
  });
  t.join();
  EXPECT_EQ(other_before, "") << "a new thread has no message yet";
  EXPECT_EQ(other_after, "sframe_client_parse_records: buf is NULL with len not 0 (EINVAL)");
  EXPECT_EQ(ErrMsg(), mine) << "another thread's failure is not this thread's";
  // A successful call leaves the message alone.
  Collector c;
  EXPECT_EQ(sframe_client_parse_records(nullptr, 0, Collect, &c), 0);
  EXPECT_EQ(ErrMsg(), mine);
}

// ---- the device -------------------------------------------------------------------

TEST(CApiDevice, MissingDeviceIsEnoent) {
  sframe_client_device* dev = reinterpret_cast<sframe_client_device*>(&dev);
  EXPECT_EQ(sframe_client_open(kMissing, &dev), -ENOENT);
  EXPECT_EQ(dev, nullptr) << "*out is cleared on failure";
  EXPECT_EQ(sframe_client_open(nullptr, nullptr), -EINVAL);
  EXPECT_EQ(ErrMsg(), "sframe_client_open: out is NULL (EINVAL)");
}

TEST(CApiDevice, DefaultPathIsTheDevice) {
  if (access(SFRAME_UNWIND_DEVICE, F_OK) == 0) {
    GTEST_SKIP() << SFRAME_UNWIND_DEVICE " exists on this host: the default path opens";
  }
  sframe_client_device* dev = nullptr;
  EXPECT_EQ(sframe_client_open(nullptr, &dev), -ENOENT);
  EXPECT_EQ(ErrMsg(), "cannot open " SFRAME_UNWIND_DEVICE ": No such file or directory (ENOENT)");
}

// /dev/null opens, and every ioctl on it is ENOTTY.
class NotTheDevice : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(sframe_client_open("/dev/null", &dev_), 0) << ErrMsg(); }
  void TearDown() override { sframe_client_close(dev_); }
  sframe_client_device* dev_ = nullptr;
};

TEST_F(NotTheDevice, EveryIoctlIsEnotty) {
  EXPECT_GE(sframe_client_fd(dev_), 0);
  sframe_client_stats st{};
  st.sz = sizeof(st);
  EXPECT_EQ(sframe_client_get_stats(dev_, &st), -ENOTTY);
  EXPECT_EQ(ErrMsg(), "stats /dev/null: Inappropriate ioctl for device (ENOTTY)");
  EXPECT_EQ(sframe_client_register(dev_, 0x1000, 0x100, 0x401000, 0x1000), -ENOTTY);
  EXPECT_EQ(ErrMsg(), "register text 0x401000-0x402000: Inappropriate ioctl for device (ENOTTY)");
  EXPECT_EQ(sframe_client_unregister(dev_, 0x401000), -ENOTTY);
  const uint8_t bytes[64] = {};
  EXPECT_EQ(sframe_client_supply(dev_, 0, bytes, sizeof(bytes), 0x1000, 0x401000, 0x1000),
            -ENOTTY);
  EXPECT_EQ(sframe_client_unregister_pid(dev_, getpid(), 0x401000), -ENOTTY);
  EXPECT_EQ(sframe_client_list_sections(dev_, 0, nullptr, 0, 0), -ENOTTY);
  uint64_t frames[8];
  sframe_client_unwind_result res{};
  res.sz = sizeof(res);
  EXPECT_EQ(sframe_client_unwind_self(dev_, frames, 8, SFRAME_UNWIND_F_SFRAME, &res), -ENOTTY);
  EXPECT_EQ(ErrMsg(), "unwind_self /dev/null: Inappropriate ioctl for device (ENOTTY)");
}

TEST_F(NotTheDevice, RegisteringLoadedObjectsFailsOnTheFirstObjectAndNamesIt) {
  // This program links libsframe-client.so, which has a PT_GNU_SFRAME.
  size_t n = 12345;
  EXPECT_EQ(sframe_client_register_loaded_objects(dev_, &n), -ENOTTY);
  EXPECT_EQ(n, 12345u) << "untouched on failure";
  EXPECT_NE(ErrMsg().find("register /"), std::string::npos) << ErrMsg();
  EXPECT_NE(ErrMsg().find("(ENOTTY)"), std::string::npos) << ErrMsg();
}

TEST_F(NotTheDevice, RegisterObjectContaining) {
  uint64_t text_start = 7;
  // No object holds it.
  EXPECT_EQ(sframe_client_register_object_containing(dev_, reinterpret_cast<void*>(16),
                                                     &text_start),
            -ENOENT);
  EXPECT_NE(ErrMsg().find("find object address 0x10: no loaded object holds it (ENOENT)"),
            std::string::npos)
      << ErrMsg();
  // Debian's libc has no .sframe.
  EXPECT_EQ(sframe_client_register_object_containing(
                dev_, reinterpret_cast<const void*>(&::getpid), &text_start),
            -ENODATA)
      << ErrMsg();
  EXPECT_NE(ErrMsg().find("object has no PT_GNU_SFRAME segment (ENODATA)"), std::string::npos)
      << ErrMsg();
  // The library itself has one: the module (here, /dev/null) is asked.
  EXPECT_EQ(sframe_client_register_object_containing(
                dev_, reinterpret_cast<const void*>(&sframe_client_open), &text_start),
            -ENOTTY);
  EXPECT_NE(ErrMsg().find("libsframe-client.so"), std::string::npos) << ErrMsg();
  EXPECT_EQ(text_start, 7u);
}

TEST_F(NotTheDevice, SizesBelowTheFirstVersionAreEinvalBeforeAnyIoctl) {
  sframe_client_stats st{};
  st.sz = SFRAME_CLIENT_STATS_SZ_VER0 - 1;
  EXPECT_EQ(sframe_client_get_stats(dev_, &st), -EINVAL);
  EXPECT_EQ(ErrMsg(), "sframe_client_get_stats: st->sz below SFRAME_CLIENT_STATS_SZ_VER0 (EINVAL)");
  st.sz = 0;
  EXPECT_EQ(sframe_client_get_stats(dev_, &st), -EINVAL);

  uint64_t frames[4];
  sframe_client_unwind_result res{};
  res.sz = SFRAME_CLIENT_UNWIND_RESULT_SZ_VER0 - 1;
  EXPECT_EQ(sframe_client_unwind_self(dev_, frames, 4, SFRAME_UNWIND_F_SFRAME, &res), -EINVAL);
  res.sz = sizeof(size_t);
  EXPECT_EQ(sframe_client_unwind_self(dev_, frames, 4, SFRAME_UNWIND_F_SFRAME, &res), -EINVAL);

  sframe_client_section_info info[2];
  EXPECT_EQ(sframe_client_list_sections(dev_, 0, info, SFRAME_CLIENT_SECTION_INFO_SZ_VER0 - 1, 2),
            -EINVAL);
  EXPECT_EQ(ErrMsg(),
            "sframe_client_list_sections: entry_sz below SFRAME_CLIENT_SECTION_INFO_SZ_VER0 "
            "(EINVAL)");
  EXPECT_EQ(sframe_client_list_sections(dev_, 0, info, 0, 2), -EINVAL);
  // A larger element size of a newer caller gets to the ioctl.
  EXPECT_EQ(sframe_client_list_sections(dev_, 0, info, sizeof(info[0]) + 8, 1), -ENOTTY);
}

TEST_F(NotTheDevice, NullArgumentsAreEinval) {
  EXPECT_EQ(sframe_client_get_stats(dev_, nullptr), -EINVAL);
  EXPECT_EQ(ErrMsg(), "sframe_client_get_stats: st is NULL (EINVAL)");
  EXPECT_EQ(sframe_client_unwind_self(dev_, nullptr, 8, SFRAME_UNWIND_F_SFRAME, nullptr), -EINVAL);
  EXPECT_EQ(ErrMsg(), "sframe_client_unwind_self: frames is NULL (EINVAL)");
  EXPECT_EQ(sframe_client_list_sections(dev_, 0, nullptr, sizeof(sframe_client_section_info), 1),
            -EINVAL);
  EXPECT_EQ(ErrMsg(), "sframe_client_list_sections: entries is NULL with max_entries not 0 (EINVAL)");
  // res NULL is fine: the ioctl is made.
  uint64_t frames[4];
  EXPECT_EQ(sframe_client_unwind_self(dev_, frames, 4, SFRAME_UNWIND_F_SFRAME, nullptr), -ENOTTY);
  // So is nr_registered / text_start NULL.
  EXPECT_EQ(sframe_client_register_loaded_objects(dev_, nullptr), -ENOTTY);
}

// The file store's calls: what the library refuses itself, then the ioctl
// (ENOTTY here), whose message names the file by its path.
TEST_F(NotTheDevice, FileStoreArgumentsAndItsIoctls) {
  const uint8_t bytes[64] = {};
  uint64_t id = 7;
  EXPECT_EQ(sframe_client_file_supply(dev_, 0, bytes, sizeof(bytes), 0x1000, 0x2, &id), -EINVAL);
  EXPECT_EQ(ErrMsg(), "sframe_client_file_supply: flags other than SFRAME_FILE_F_REPLACE (EINVAL)");
  EXPECT_EQ(id, 7u) << "untouched on failure";
  EXPECT_EQ(sframe_client_file_remove(dev_, 0), -EINVAL);
  EXPECT_EQ(ErrMsg(), "sframe_client_file_remove: id is 0 (no entry has it) (EINVAL)");

  sframe_client_file_info info[2];
  EXPECT_EQ(sframe_client_file_list(dev_, nullptr, sizeof(info[0]), 1), -EINVAL);
  EXPECT_EQ(ErrMsg(), "sframe_client_file_list: entries is NULL with max_entries not 0 (EINVAL)");
  EXPECT_EQ(sframe_client_file_list(dev_, info, SFRAME_CLIENT_FILE_INFO_SZ_VER0 - 1, 2), -EINVAL);
  EXPECT_EQ(ErrMsg(),
            "sframe_client_file_list: entry_sz below SFRAME_CLIENT_FILE_INFO_SZ_VER0 (EINVAL)");
  // Counting only, and a newer caller's larger elements, get to the ioctl.
  EXPECT_EQ(sframe_client_file_list(dev_, nullptr, 0, 0), -ENOTTY);
  EXPECT_EQ(sframe_client_file_list(dev_, info, sizeof(info[0]) + 8, 1), -ENOTTY);
  EXPECT_EQ(ErrMsg(), "list file entries /dev/null: Inappropriate ioctl for device (ENOTTY)");

  EXPECT_EQ(sframe_client_file_store_get_stats(dev_, nullptr), -EINVAL);
  EXPECT_EQ(ErrMsg(), "sframe_client_file_store_get_stats: st is NULL (EINVAL)");
  sframe_client_file_store_stats st{};
  st.sz = SFRAME_CLIENT_FILE_STORE_STATS_SZ_VER0 - 1;
  EXPECT_EQ(sframe_client_file_store_get_stats(dev_, &st), -EINVAL);
  EXPECT_EQ(ErrMsg(),
            "sframe_client_file_store_get_stats: st->sz below "
            "SFRAME_CLIENT_FILE_STORE_STATS_SZ_VER0 (EINVAL)");
  st.sz = sizeof(st);
  EXPECT_EQ(sframe_client_file_store_get_stats(dev_, &st), -ENOTTY);

  EXPECT_EQ(sframe_client_perf_callchain_get_stats(dev_, nullptr), -EINVAL);
  EXPECT_EQ(ErrMsg(), "sframe_client_perf_callchain_get_stats: st is NULL (EINVAL)");
  sframe_client_perf_callchain_stats cst{};
  cst.sz = SFRAME_CLIENT_PERF_CALLCHAIN_STATS_SZ_VER0 - 1;
  EXPECT_EQ(sframe_client_perf_callchain_get_stats(dev_, &cst), -EINVAL);
  EXPECT_EQ(ErrMsg(),
            "sframe_client_perf_callchain_get_stats: st->sz below "
            "SFRAME_CLIENT_PERF_CALLCHAIN_STATS_SZ_VER0 (EINVAL)");
  cst.sz = sizeof(cst);
  EXPECT_EQ(sframe_client_perf_callchain_get_stats(dev_, &cst), -ENOTTY);
  EXPECT_EQ(sizeof(cst), size_t{SFRAME_CLIENT_PERF_CALLCHAIN_STATS_SZ_VER0});

  // The file is named by its path, or by its number when it has none.
  const int fd = sframe_client_fd(dev_);
  EXPECT_EQ(sframe_client_file_supply(dev_, fd, bytes, sizeof(bytes), 0x1000, 0, &id), -ENOTTY);
  EXPECT_EQ(ErrMsg(), "supply for file /dev/null: Inappropriate ioctl for device (ENOTTY)");
  EXPECT_EQ(id, 7u);
  EXPECT_EQ(sframe_client_file_supply(dev_, -1, bytes, sizeof(bytes), 0x1000,
                                      SFRAME_FILE_F_REPLACE, nullptr),
            -ENOTTY);
  EXPECT_EQ(ErrMsg(), "supply for file fd -1: Inappropriate ioctl for device (ENOTTY)");
  EXPECT_EQ(sframe_client_file_remove_fd(dev_, fd), -ENOTTY);
  EXPECT_EQ(ErrMsg(), "remove file entry /dev/null: Inappropriate ioctl for device (ENOTTY)");
  EXPECT_EQ(sframe_client_file_remove(dev_, 12), -ENOTTY);
  EXPECT_NE(ErrMsg().find(" id 12: Inappropriate ioctl for device (ENOTTY)"), std::string::npos)
      << ErrMsg();
}

TEST_F(NotTheDevice, MaxFramesAboveTheLibrarysLimit) {
  uint64_t frames[1];
  // Refused before any buffer of that size is made (the C++ layer's bound).
  EXPECT_EQ(sframe_client_unwind_self(dev_, frames, 0xffffffffu, SFRAME_UNWIND_F_SFRAME, nullptr),
            -EINVAL);
  EXPECT_NE(ErrMsg().find("max_frames above the library's limit"), std::string::npos) << ErrMsg();
}

TEST(CApiDevice, NullHandlesAreEinval) {
  const uint8_t bytes[8] = {};
  uint64_t frames[4];
  sframe_client_stats st{};
  st.sz = sizeof(st);
  size_t n = 0;
  EXPECT_EQ(sframe_client_fd(nullptr), -EINVAL);
  EXPECT_EQ(sframe_client_register(nullptr, 1, 2, 3, 4), -EINVAL);
  EXPECT_EQ(ErrMsg(), "sframe_client_register: dev is NULL (EINVAL)");
  EXPECT_EQ(sframe_client_unregister(nullptr, 3), -EINVAL);
  EXPECT_EQ(sframe_client_supply(nullptr, 0, bytes, 8, 1, 2, 3), -EINVAL);
  EXPECT_EQ(sframe_client_unregister_pid(nullptr, 1, 2), -EINVAL);
  EXPECT_EQ(sframe_client_list_sections(nullptr, 0, nullptr, 0, 0), -EINVAL);
  EXPECT_EQ(sframe_client_get_stats(nullptr, &st), -EINVAL);
  EXPECT_EQ(sframe_client_unwind_self(nullptr, frames, 4, SFRAME_UNWIND_F_SFRAME, nullptr), -EINVAL);
  EXPECT_EQ(sframe_client_register_loaded_objects(nullptr, &n), -EINVAL);
  EXPECT_EQ(sframe_client_register_object_containing(nullptr, &n, nullptr), -EINVAL);
  uint64_t id = 7;
  EXPECT_EQ(sframe_client_file_supply(nullptr, 0, bytes, 8, 0x1000, 0, &id), -EINVAL);
  EXPECT_EQ(ErrMsg(), "sframe_client_file_supply: dev is NULL (EINVAL)");
  EXPECT_EQ(id, 7u);
  EXPECT_EQ(sframe_client_file_remove(nullptr, 1), -EINVAL);
  EXPECT_EQ(sframe_client_file_remove_fd(nullptr, 0), -EINVAL);
  EXPECT_EQ(sframe_client_file_list(nullptr, nullptr, 0, 0), -EINVAL);
  EXPECT_EQ(ErrMsg(), "sframe_client_file_list: dev is NULL (EINVAL)");
  sframe_client_file_store_stats fst{};
  fst.sz = sizeof(fst);
  EXPECT_EQ(sframe_client_file_store_get_stats(nullptr, &fst), -EINVAL);
  sframe_client_perf_callchain_stats cst{};
  cst.sz = sizeof(cst);
  EXPECT_EQ(sframe_client_perf_callchain_get_stats(nullptr, &cst), -EINVAL);
  EXPECT_EQ(ErrMsg(), "sframe_client_perf_callchain_get_stats: dev is NULL (EINVAL)");
  sframe_client_close(nullptr);  // nothing to do, no crash
}

// ---- sessions without the module ------------------------------------------------------

TEST(CApiSession, NullHandlesAreEinval) {
  sframe_client_session_stats st{};
  st.sz = sizeof(st);
  EXPECT_EQ(sframe_client_session_fd(nullptr), -EINVAL);
  EXPECT_EQ(sframe_client_session_out_flags(nullptr), 0u);
  EXPECT_EQ(sframe_client_session_get_stats(nullptr, &st), -EINVAL);
  EXPECT_EQ(sframe_client_session_poll(nullptr, 0), -EINVAL);
  Collector c;
  EXPECT_EQ(sframe_client_session_read(nullptr, Collect, &c), -EINVAL);
  EXPECT_EQ(ErrMsg(), "sframe_client_session_read: sess is NULL (EINVAL)");
  EXPECT_EQ(sframe_client_session_start(SFRAME_TARGET_PROCESS, getpid(), nullptr, nullptr),
            -EINVAL);
  sframe_client_session_close(nullptr);
}

TEST(CApiSession, MissingDeviceIsAnOpenError) {
  sframe_client_session_opts o{};
  o.sz = sizeof(o);
  o.device = kMissing;
  sframe_client_session* s = reinterpret_cast<sframe_client_session*>(&o);
  EXPECT_EQ(sframe_client_session_start(SFRAME_TARGET_PROCESS, getpid(), &o, &s), -ENOENT);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(ErrMsg(), std::string("cannot open ") + kMissing +
                          ": No such file or directory (ENOENT)");
}

TEST(CApiSession, NotTheDeviceIsEnotty) {
  sframe_client_session_opts o{};
  o.sz = sizeof(o);
  o.device = "/dev/null";
  sframe_client_session* s = nullptr;
  EXPECT_EQ(sframe_client_session_start(SFRAME_TARGET_PROCESS, getpid(), &o, &s), -ENOTTY);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(ErrMsg().find("session start process "), std::string::npos) << ErrMsg();
}

TEST(CApiSession, OptionSizesAndReservedFields) {
  sframe_client_session* s = nullptr;
  sframe_client_session_opts o{};
  o.device = kMissing;
  o.sz = SFRAME_CLIENT_SESSION_OPTS_SZ_VER0 - 1;
  EXPECT_EQ(sframe_client_session_start(SFRAME_TARGET_PROCESS, getpid(), &o, &s), -EINVAL);
  EXPECT_EQ(ErrMsg(),
            "sframe_client_session_start: opts->sz below SFRAME_CLIENT_SESSION_OPTS_SZ_VER0 "
            "(EINVAL)");
  o.sz = 0;
  EXPECT_EQ(sframe_client_session_start(SFRAME_TARGET_PROCESS, getpid(), &o, &s), -EINVAL);
  o.sz = sizeof(o);
  o.reserved = 1;
  EXPECT_EQ(sframe_client_session_start(SFRAME_TARGET_PROCESS, getpid(), &o, &s), -EINVAL);
  EXPECT_EQ(ErrMsg(), "sframe_client_session_start: opts->reserved not 0 (EINVAL)");

  // A newer caller's larger struct: E2BIG with a field set that this
  // library does not know, accepted with a zero tail (then the open fails).
  struct {
    sframe_client_session_opts o;
    uint64_t newer[2];
  } big{};
  big.o.sz = sizeof(big);
  big.o.device = kMissing;
  big.newer[1] = 1;
  EXPECT_EQ(sframe_client_session_start(SFRAME_TARGET_PROCESS, getpid(), &big.o, &s), -E2BIG);
  EXPECT_EQ(ErrMsg(),
            "sframe_client_session_start: opts has non-zero fields this library does not know "
            "(E2BIG)");
  big.newer[1] = 0;
  EXPECT_EQ(sframe_client_session_start(SFRAME_TARGET_PROCESS, getpid(), &big.o, &s), -ENOENT);
  EXPECT_EQ(s, nullptr);
}

// ---- parsing records -------------------------------------------------------------------

TEST(CApiParse, SamplesAndLostRecordsInOrder) {
  std::vector<uint8_t> buf;
  AddSample(&buf, {0xffffffff81000010, 0xffffffff81000020}, {0x401000, 0x401100, 0x401200});
  AddLost(&buf, 42);
  AddSample(&buf, {}, {0x401000});
  Collector c;
  ASSERT_EQ(Parse(buf, &c), 3) << ErrMsg();
  ASSERT_EQ(c.seen.size(), 3u);
  const sframe_client_record& s = c.seen[0].rec;
  EXPECT_EQ(s.sz, sizeof(sframe_client_record));
  EXPECT_EQ(s.type, static_cast<uint32_t>(SFRAME_RECORD_SAMPLE));
  EXPECT_EQ(s.pid, 10u);
  EXPECT_EQ(s.tid, 11u);
  EXPECT_EQ(s.time, 12345u);
  EXPECT_EQ(s.cookie, 77u);
  EXPECT_EQ(s.cpu, 1u);
  EXPECT_EQ(s.flags, static_cast<uint32_t>(SFRAME_SAMPLE_F_USER_MODE));
  EXPECT_EQ(s.user_stop, static_cast<uint32_t>(SFRAME_STOP_NO_COVERAGE));
  EXPECT_EQ(s.nr_kernel, 2u);
  EXPECT_EQ(s.nr_user, 3u);
  EXPECT_EQ(s.lost, 0u);
  EXPECT_EQ(c.seen[0].kernel, (std::vector<uint64_t>{0xffffffff81000010, 0xffffffff81000020}));
  EXPECT_EQ(c.seen[0].user, (std::vector<uint64_t>{0x401000, 0x401100, 0x401200}));
  const sframe_client_record& l = c.seen[1].rec;
  EXPECT_EQ(l.type, static_cast<uint32_t>(SFRAME_RECORD_LOST));
  EXPECT_EQ(l.lost, 42u);
  EXPECT_EQ(l.pid, 0u);
  EXPECT_EQ(l.nr_kernel + l.nr_user, 0u);
  EXPECT_EQ(c.seen[2].rec.nr_kernel, 0u);
  EXPECT_EQ(c.seen[2].rec.kernel, nullptr) << "no array for no frames";
  EXPECT_EQ(c.seen[2].user, std::vector<uint64_t>{0x401000});
}

TEST(CApiParse, EmptyBufferIsNoRecords) {
  Collector c;
  EXPECT_EQ(sframe_client_parse_records(nullptr, 0, Collect, &c), 0);
  uint8_t one = 0;
  EXPECT_EQ(sframe_client_parse_records(&one, 0, Collect, &c), 0);
  EXPECT_TRUE(c.seen.empty());
}

TEST(CApiParse, BadArgumentsAreEinval) {
  std::vector<uint8_t> buf;
  AddLost(&buf, 1);
  EXPECT_EQ(sframe_client_parse_records(buf.data(), buf.size(), nullptr, nullptr), -EINVAL);
  EXPECT_EQ(ErrMsg(), "sframe_client_parse_records: fn is NULL (EINVAL)");
  Collector c;
  EXPECT_EQ(sframe_client_parse_records(nullptr, 16, Collect, &c), -EINVAL);
  EXPECT_EQ(sframe_client_parse_records(buf.data(), size_t{INT_MAX} + 1, Collect, &c), -EINVAL);
  EXPECT_EQ(ErrMsg(), "sframe_client_parse_records: len above INT_MAX (EINVAL)");
  EXPECT_TRUE(c.seen.empty());
}

TEST(CApiParse, UnknownTypesAreSkippedBySize) {
  std::vector<uint8_t> buf(24, 0);
  sframe_record_header h{99, 0, 24};
  std::memcpy(buf.data(), &h, sizeof(h));
  AddLost(&buf, 1);
  Collector c;
  EXPECT_EQ(Parse(buf, &c), 1);
  ASSERT_EQ(c.seen.size(), 1u);
  EXPECT_EQ(c.seen[0].rec.type, static_cast<uint32_t>(SFRAME_RECORD_LOST));
}

// Each malformation parse_records() checks (session_test.cc), after one good
// record: EBADMSG, the message says what and where, and the good record
// was passed to the callback first.
TEST(CApiParse, MalformedRecordsAreEbadmsg) {
  struct Case {
    const char* what;
    std::vector<uint8_t> bad;
    const char* message;
  };
  std::vector<Case> cases;
  cases.push_back({"shorter than a header", std::vector<uint8_t>(4, 0), "truncated header"});
  {
    std::vector<uint8_t> b;
    AddSample(&b, {}, {1, 2}, 4);
    cases.push_back({"size below the header", b, "size below the header's"});
  }
  {
    std::vector<uint8_t> b;
    AddSample(&b, {}, {1, 2}, sizeof(sframe_sample_record) + 12);
    cases.push_back({"size not a multiple of 8", b, "not a multiple of 8"});
  }
  {
    std::vector<uint8_t> b;
    AddSample(&b, {}, {1, 2}, sizeof(sframe_sample_record) + 64);
    cases.push_back({"size beyond the buffer", b, "beyond the"});
  }
  {
    std::vector<uint8_t> b;
    AddSample(&b, {}, {1, 2}, 0, 3);
    cases.push_back({"counts beyond the size", b, "ips do not fit in size"});
  }
  {
    std::vector<uint8_t> b;
    AddSample(&b, {}, {}, 16);
    cases.push_back({"sample smaller than its fixed part", b, "sample record too small"});
  }
  {
    std::vector<uint8_t> b(8, 0);
    sframe_record_header h{SFRAME_RECORD_LOST, 0, 8};
    std::memcpy(b.data(), &h, sizeof(h));
    cases.push_back({"lost record without its count", b, "lost record too small"});
  }
  for (const Case& k : cases) {
    std::vector<uint8_t> buf;
    AddLost(&buf, 5);
    buf.insert(buf.end(), k.bad.begin(), k.bad.end());
    Collector c;
    EXPECT_EQ(Parse(buf, &c), -EBADMSG) << k.what;
    const std::string msg = ErrMsg();
    EXPECT_EQ(msg.rfind("session read record at offset 16: malformed record: ", 0), 0u)
        << k.what << ": " << msg;
    EXPECT_NE(msg.find(k.message), std::string::npos) << k.what << ": " << msg;
    EXPECT_NE(msg.find("(EBADMSG)"), std::string::npos) << k.what << ": " << msg;
    ASSERT_EQ(c.seen.size(), 1u) << k.what;
    EXPECT_EQ(c.seen[0].rec.lost, 5u) << k.what;
  }
}

TEST(CApiParse, CallbackStopValueIsReturnedAndStopsTheParse) {
  std::vector<uint8_t> buf;
  AddLost(&buf, 1);
  AddLost(&buf, 2);
  AddLost(&buf, 3);
  for (int value : {1, 42, -1, -EEXIST, INT_MIN}) {
    Collector c;
    c.stop_after = 2;
    c.stop_value = value;
    EXPECT_EQ(Parse(buf, &c), value);
    ASSERT_EQ(c.seen.size(), 2u) << "no record after the one that stopped";
    EXPECT_EQ(c.seen[1].rec.lost, 2u);
  }
  // A stop before a malformed record wins over its EBADMSG: the parse
  // never got there.
  std::vector<uint8_t> bad = buf;
  bad.resize(bad.size() + 4);
  Collector c;
  c.stop_after = 1;
  c.stop_value = 7;
  EXPECT_EQ(Parse(bad, &c), 7);
  EXPECT_EQ(c.seen.size(), 1u);
}

}  // namespace
