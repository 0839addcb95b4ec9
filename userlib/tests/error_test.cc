#include <cerrno>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "sframe_client/device.h"
#include "sframe_client/error.h"
#include "sframe_test/errno_of.h"
#include "sframe_profile/symbolizer.h"

namespace {

TEST(ErrorTest, RegisterOverlapMessage) {
  sframe::Error e(EEXIST, sframe::op::kRegister, "/usr/lib/libfoo.so");
  EXPECT_STREQ(
      e.what(),
      "register /usr/lib/libfoo.so: .sframe text range overlaps a registered one (EEXIST)");
  EXPECT_EQ(e.code().value(), EEXIST);
  EXPECT_EQ(e.code().category(), std::generic_category());
  EXPECT_EQ(e.err(), EEXIST);
  EXPECT_EQ(e.op(), "register");
  EXPECT_EQ(e.object(), "/usr/lib/libfoo.so");
}

TEST(ErrorTest, EveryRegisterErrnoOfTheUapiHasItsOwnWords) {
  for (int err : {EINVAL, E2BIG, ENOEXEC, EOPNOTSUPP, EFAULT, EACCES, EEXIST, ENOSPC, ENOMEM, EINTR}) {
    std::string d = sframe::describe_errno(sframe::op::kRegister, err);
    EXPECT_NE(d, std::strerror(err)) << sframe::errno_name(err);
  }
  EXPECT_EQ(sframe::describe_errno(sframe::op::kRegister, ENOEXEC),
            "not an SFrame section (bad magic)");
  EXPECT_EQ(sframe::describe_errno(sframe::op::kUnregister, ENOENT),
            "no section registered with this text start");
}

TEST(ErrorTest, OtherErrnosUseStrerror) {
  sframe::Error e(ENOENT, sframe::op::kOpen, "/dev/sframe_unwind");
  EXPECT_STREQ(e.what(), "cannot open /dev/sframe_unwind: No such file or directory (ENOENT)");
}

TEST(ErrorTest, DetailOverridesDescription) {
  sframe::Error e(ENODATA, sframe::op::kReadElf, "/bin/true", "no .sframe section");
  EXPECT_STREQ(e.what(), "read ELF /bin/true: no .sframe section (ENODATA)");
}

TEST(ErrorTest, ErrnoNames) {
  EXPECT_EQ(sframe::errno_name(EOPNOTSUPP), "EOPNOTSUPP");
  EXPECT_EQ(sframe::errno_name(ENOSPC), "ENOSPC");
  EXPECT_EQ(sframe::errno_name(99999), "E99999");
}

TEST(ErrorTest, ErrnoOfReturnsTheThrownErrno) {
  EXPECT_EQ(sframe::errno_of([] {}), 0);
  EXPECT_EQ(sframe::errno_of([] { throw sframe::Error(EACCES, "x", "y"); }), EACCES);
}

TEST(DeviceTest, MissingDeviceGivesAClearError) {
  try {
    sframe::Device dev("/nonexistent/sframe_unwind");
    FAIL() << "opened a device that does not exist";
  } catch (const sframe::Error& e) {
    EXPECT_EQ(e.err(), ENOENT);
    EXPECT_STREQ(e.what(),
                 "cannot open /nonexistent/sframe_unwind: No such file or directory (ENOENT)");
  }
}

// Id 0 is the module's "the entry of the file at fd": asking to remove
// entry 0 must never become a removal of whatever descriptor 0 is.
TEST(DeviceTest, RemoveFileOfIdZeroIsRefusedBeforeTheIoctl) {
  sframe::Device dev("/dev/null");  // an ioctl would give ENOTTY
  EXPECT_EQ(sframe::errno_of([&] { dev.remove_file(0); }), EINVAL);
  EXPECT_EQ(sframe::errno_of([&] { dev.remove_file(1); }), ENOTTY);
}

TEST(DeviceTest, StopReasonNames) {
  EXPECT_EQ(sframe::to_string(sframe::StopReason::kNoCoverage), "NO_COVERAGE");
  EXPECT_EQ(sframe::to_string(sframe::StopReason::kLimit), "LIMIT");
  EXPECT_EQ(sframe::to_string(static_cast<sframe::StopReason>(42)), "STOP(42)");
}

}  // namespace
