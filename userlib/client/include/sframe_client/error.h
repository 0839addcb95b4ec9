// libsframe-client: the one error type of the library.
//
// Every failing call throws sframe::Error: a std::system_error in the
// generic category (so code().value() is the errno) that also says which
// operation failed and on what object, e.g.
//
//   register /usr/lib/libfoo.so: .sframe text range overlaps a registered one (EEXIST)
//   cannot open /dev/sframe_unwind: No such file or directory (ENOENT)
//
// The description comes from the errno table of uapi/sframe_unwind.h for the
// module's operations, and from strerror() for everything else.
#ifndef SFRAME_CLIENT_ERROR_H
#define SFRAME_CLIENT_ERROR_H

#include <string>
#include <system_error>

#include "sframe_client/export.h"

namespace sframe {

// Operation names used in messages (and accepted by describe_errno()).
namespace op {
inline constexpr const char kOpen[] = "open";
inline constexpr const char kRegister[] = "register";
inline constexpr const char kUnregister[] = "unregister";
inline constexpr const char kSupply[] = "supply";
inline constexpr const char kListSections[] = "list sections";
inline constexpr const char kFileSupply[] = "supply for file";
inline constexpr const char kFileRemove[] = "remove file entry";
inline constexpr const char kFileList[] = "list file entries";
inline constexpr const char kUnwindSelf[] = "unwind_self";
inline constexpr const char kGetStats[] = "stats";
inline constexpr const char kMmap[] = "mmap";
inline constexpr const char kReadElf[] = "read ELF";
inline constexpr const char kFindObject[] = "find object";
inline constexpr const char kGenerate[] = "generate SFrame";
inline constexpr const char kWriteCache[] = "write SFrame file";
}  // namespace op

class SFRAME_CLIENT_API Error : public std::system_error {
 public:
  // err: a positive errno.  op: what was attempted (see sframe::op).  object:
  // what it concerned (a path, a device, an address); may be empty.  detail:
  // overrides the errno's standard description when not empty.
  Error(int err, std::string op, std::string object, std::string detail = {});

  int err() const noexcept { return code().value(); }
  const std::string& op() const noexcept { return op_; }
  const std::string& object() const noexcept { return object_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string op_;
  std::string object_;
  std::string message_;
};

// "EEXIST" for EEXIST, "E123" for an unknown value.
SFRAME_CLIENT_API std::string errno_name(int err);

// What err means for operation op: the uapi's wording for the module's
// ioctls, strerror() otherwise.
SFRAME_CLIENT_API std::string describe_errno(const std::string& op, int err);

}  // namespace sframe

#endif  // SFRAME_CLIENT_ERROR_H
