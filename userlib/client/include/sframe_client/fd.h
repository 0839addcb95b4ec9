// libsframe-client: owners of file descriptors and memory mappings.
#ifndef SFRAME_CLIENT_FD_H
#define SFRAME_CLIENT_FD_H

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "sframe_client/export.h"

namespace sframe {

// Owns one file descriptor; closes it on destruction.  Movable, not copyable.
class SFRAME_CLIENT_API UniqueFd {
 public:
  UniqueFd() noexcept = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1) noexcept;

  // open(2) with O_CLOEXEC added; throws sframe::Error(op::kOpen, path).
  static UniqueFd open(const std::string& path, int flags, mode_t mode = 0);

 private:
  int fd_ = -1;
};

// Owns one mmap(2)ed range; unmaps it on destruction.  Movable, not copyable.
class SFRAME_CLIENT_API MappedRegion {
 public:
  MappedRegion() noexcept = default;
  // Takes ownership of [addr, addr + size), which must come from mmap.
  MappedRegion(void* addr, size_t size) noexcept : addr_(addr), size_(size) {}
  ~MappedRegion() { reset(); }
  MappedRegion(MappedRegion&& other) noexcept : addr_(other.addr_), size_(other.size_) {
    other.addr_ = nullptr;
    other.size_ = 0;
  }
  MappedRegion& operator=(MappedRegion&& other) noexcept;
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;

  // mmap(hint, size, prot, flags, fd, offset); throws sframe::Error(op::kMmap).
  static MappedRegion map(size_t size, int prot, int flags, int fd = -1, off_t offset = 0,
                          void* hint = nullptr);
  // An anonymous private mapping of size bytes within +-1 GiB of near (so
  // that 32-bit offsets from it reach near), or throws ENOMEM.
  static MappedRegion map_near(const void* near, size_t size, int prot);

  void* data() const noexcept { return addr_; }
  uint8_t* bytes() const noexcept { return static_cast<uint8_t*>(addr_); }
  uint64_t address() const noexcept { return reinterpret_cast<uint64_t>(addr_); }
  size_t size() const noexcept { return size_; }
  explicit operator bool() const noexcept { return addr_ != nullptr; }

  // mprotect(2) the whole range; throws sframe::Error(op::kMmap).
  void protect(int prot) const;
  // Unmaps now (idempotent).
  void reset() noexcept;
  // Gives up ownership without unmapping.
  void* release() noexcept {
    void* a = addr_;
    addr_ = nullptr;
    size_ = 0;
    return a;
  }

 private:
  void* addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace sframe

#endif  // SFRAME_CLIENT_FD_H
