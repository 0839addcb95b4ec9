// Device::unwind_self: the one place where libsframe-client makes a system
// call without glibc.  See device.h for why.  This file (like the whole
// library) is compiled with -Wa,--gsframe -fasynchronous-unwind-tables
// -fno-omit-frame-pointer: its .sframe lets the module step out of the
// topmost frame, and its frame pointer lets the frame-pointer walk do so.
#include <sys/syscall.h>

#include <cerrno>

#include "sframe_client/device.h"
#include "sframe_client/error.h"

#if !defined(__x86_64__)
#error "libsframe-client's unwind_self is written for x86-64 (AMD64) only"
#endif

namespace sframe {

// Above this, the library refuses max_frames itself rather than allocate a
// buffer of that size (the module allows SFRAME_MAX_FRAMES).
static constexpr uint32_t kMaxBuffer = 1u << 20;

__attribute__((noinline)) UnwindResult Device::unwind_self(uint32_t max_frames,
                                                           uint32_t flags) const {
  if (max_frames > kMaxBuffer) {
    throw Error(EINVAL, op::kUnwindSelf, path_, "max_frames above the library's limit of 2^20");
  }
  UnwindResult result;
  result.frames.resize(max_frames);
  uint64_t dummy = 0;  // a valid buffer address even for max_frames 0

  sframe_unwind_self req{};
  req.size = sizeof(req);
  req.flags = flags;
  req.frames = reinterpret_cast<uint64_t>(max_frames ? result.frames.data() : &dummy);
  req.max_frames = max_frames;

  long ret;
  do {
    // ioctl(fd, SFRAME_IOC_UNWIND_SELF, &req), straight into the kernel.
    // The kernel clobbers rcx (return address) and r11 (flags).
    asm volatile("syscall"
                 : "=a"(ret)
                 : "0"(static_cast<long>(SYS_ioctl)), "D"(static_cast<long>(fd())),
                   "S"(static_cast<unsigned long>(SFRAME_IOC_UNWIND_SELF)), "d"(&req)
                 : "rcx", "r11", "memory");
  } while (ret == -EINTR);
  if (ret < 0) throw Error(static_cast<int>(-ret), op::kUnwindSelf, path_);

  result.frames.resize(req.nr_frames <= max_frames ? req.nr_frames : max_frames);
  result.stop_reason = static_cast<StopReason>(req.stop_reason);
  result.nr_sframe = req.nr_sframe;
  result.nr_fp = req.nr_fp;
  return result;
}

}  // namespace sframe
