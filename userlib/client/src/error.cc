#include "sframe_client/error.h"

#include <cerrno>
#include <cstring>

namespace sframe {
namespace {

struct ErrnoName {
  int value;
  const char* name;
};

constexpr ErrnoName kErrnoNames[] = {
    {EPERM, "EPERM"},
    {ENOENT, "ENOENT"},
    {ESRCH, "ESRCH"},
    {EINTR, "EINTR"},
    {EIO, "EIO"},
    {ENXIO, "ENXIO"},
    {E2BIG, "E2BIG"},
    {ENOEXEC, "ENOEXEC"},
    {EBADF, "EBADF"},
    {ECHILD, "ECHILD"},
    {EAGAIN, "EAGAIN"},
    {ENOMEM, "ENOMEM"},
    {EACCES, "EACCES"},
    {EFAULT, "EFAULT"},
    {EBUSY, "EBUSY"},
    {EEXIST, "EEXIST"},
    {ENODEV, "ENODEV"},
    {ENOTDIR, "ENOTDIR"},
    {EISDIR, "EISDIR"},
    {EINVAL, "EINVAL"},
    {ENFILE, "ENFILE"},
    {EMFILE, "EMFILE"},
    {ENOTTY, "ENOTTY"},
    {EFBIG, "EFBIG"},
    {ENOSPC, "ENOSPC"},
    {EDQUOT, "EDQUOT"},
    {EROFS, "EROFS"},
    {ERANGE, "ERANGE"},
    {ENOSYS, "ENOSYS"},
    {EOVERFLOW, "EOVERFLOW"},
    {EOPNOTSUPP, "EOPNOTSUPP"},
    {ENAMETOOLONG, "ENAMETOOLONG"},
    {ELOOP, "ELOOP"},
    {ENODATA, "ENODATA"},
    {EBADMSG, "EBADMSG"},
};

struct Description {
  const char* op;
  int err;
  const char* text;
};

// The errno tables of uapi/sframe_unwind.h, in the words of a message.
constexpr Description kDescriptions[] = {
    {op::kRegister, EINVAL,
     "invalid request or inconsistent .sframe header/tables (size, flags, reserved fields, "
     "lengths, or offsets/counts/FDEs that do not fit)"},
    {op::kRegister, E2BIG,
     ".sframe section larger than SFRAME_MAX_SECTION_SIZE, or unknown non-zero struct tail (from "
     "an older module also: an FDE with more than SFRAME_MAX_FRES_PER_FDE FREs, which a current "
     "module skips)"},
    {op::kRegister, ENOEXEC, "not an SFrame section (bad magic)"},
    {op::kRegister, EOPNOTSUPP, "SFrame version, flags or ABI/arch not supported by the module"},
    {op::kRegister, EFAULT, ".sframe section or text range not mapped"},
    {op::kRegister, EACCES, "text range mapped but not executable"},
    {op::kRegister, EEXIST, ".sframe text range overlaps a registered one"},
    {op::kRegister, ENOSPC, "process already has SFRAME_MAX_SECTIONS_PER_MM sections"},
    {op::kRegister, ENOMEM, "out of kernel memory"},
    {op::kRegister, EINTR, "interrupted by a fatal signal during validation"},
    {op::kUnregister, ENOENT, "no section registered with this text start"},
    {op::kUnregister, EINVAL, "invalid request (size, flags or reserved fields)"},
    {op::kUnregister, ESRCH, "no such process"},
    {op::kUnregister, EPERM, "not allowed to ptrace-attach to the process"},
    {op::kSupply, EINVAL,
     "invalid request or inconsistent .sframe header/tables (size, flags, reserved fields, "
     "lengths, or offsets/counts/FDEs that do not fit)"},
    {op::kSupply, E2BIG,
     ".sframe section larger than SFRAME_MAX_SECTION_SIZE, or unknown non-zero struct tail (from "
     "an older module also: an FDE with more than SFRAME_MAX_FRES_PER_FDE FREs, which a current "
     "module skips)"},
    {op::kSupply, ENOEXEC, "not an SFrame section (bad magic)"},
    {op::kSupply, EOPNOTSUPP, "SFrame version, flags or ABI/arch not supported by the module"},
    {op::kSupply, EFAULT, "section bytes unreadable, or the target's text range not mapped"},
    {op::kSupply, EACCES, "the target's text range is mapped but not executable"},
    {op::kSupply, EEXIST, "text range overlaps a section registered or supplied before"},
    {op::kSupply, ENOSPC, "the target already has SFRAME_MAX_SECTIONS_PER_MM entries"},
    {op::kSupply, ESRCH, "no such process"},
    {op::kSupply, EPERM, "not allowed to ptrace-attach to the process"},
    {op::kSupply, EDQUOT,
     "supplied sections would exceed the per-process or total bound (module parameters "
     "supply_max_process_kb, supply_max_total_kb)"},
    {op::kSupply, ENOMEM, "out of kernel memory"},
    {op::kListSections, ESRCH, "no such process"},
    {op::kListSections, EPERM, "not allowed to ptrace-read the process"},
    {op::kListSections, EINVAL, "invalid request (size, flags, reserved fields, max_entries)"},
    {op::kUnwindSelf, EINVAL,
     "invalid request (size, flags, reserved fields, or max_frames 0 or above "
     "SFRAME_MAX_FRAMES)"},
    {op::kUnwindSelf, EFAULT, "request or frames buffer not writable"},
    {op::kUnwindSelf, EINTR, "interrupted by a fatal signal"},
    {op::kGetStats, EINVAL, "invalid request (size)"},
    {"session start", EINVAL, "invalid request (size, flags, reserved, target_type or limits)"},
    {"session start", E2BIG, "unknown non-zero struct tail"},
    {"session start", ESRCH, "no such target"},
    {"session start", EACCES, "perf_event_paranoid forbids it"},
    {"session start", EPERM, "the target belongs to someone the caller may not trace"},
    {"session start", EDQUOT,
     "the user has as many sessions or as much session buffer memory as it may "
     "(module parameters session_max_user, session_max_user_kb)"},
    {"session start", EINTR, "interrupted while waiting for the target's exec to finish"},
    {"session start", EBUSY, "this file already is a session"},
    {"session start", ENOTTY, "the module has no sessions (SFRAME_IOC_SESSION_START unknown)"},
    {"session start", ENOMEM, "out of kernel memory"},
    {"session stats", ENOTTY, "the module has no sessions"},
    {"session stats", EINVAL, "not a session, or invalid request (size)"},
    {"session read", EINVAL, "buffer too small for the next record, or not a session"},
    {"session read", EBUSY, "the session's buffer is mapped: read it through the mapping"},
    {"session map", ENODEV, "not a session, or a module before ABI 3 (no mapped buffer)"},
    {"session map", EINVAL, "a length other than the control page or the whole buffer"},
    {"session map", EBADMSG, "the control page is not one this library knows"},
};

}  // namespace

std::string errno_name(int err) {
  for (const auto& n : kErrnoNames) {
    if (n.value == err) return n.name;
  }
  return "E" + std::to_string(err);
}

std::string describe_errno(const std::string& op, int err) {
  for (const auto& d : kDescriptions) {
    if (d.err == err && op == d.op) return d.text;
  }
  return std::strerror(err);
}

static std::string format_message(int err, const std::string& op, const std::string& object,
                                  const std::string& detail) {
  std::string msg = op == op::kOpen ? "cannot open" : op;
  if (!object.empty()) msg += " " + object;
  msg += ": ";
  msg += detail.empty() ? describe_errno(op, err) : detail;
  msg += " (" + errno_name(err) + ")";
  return msg;
}

Error::Error(int err, std::string op, std::string object, std::string detail)
    : std::system_error(err, std::generic_category()),
      op_(std::move(op)),
      object_(std::move(object)),
      message_(format_message(err, op_, object_, detail)) {}

}  // namespace sframe
