#include "sframe_client/fd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "sframe_client/error.h"

namespace sframe {

void UniqueFd::reset(int fd) noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

UniqueFd UniqueFd::open(const std::string& path, int flags, mode_t mode) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw Error(errno, op::kOpen, path);
  return UniqueFd(fd);
}

MappedRegion& MappedRegion::operator=(MappedRegion&& other) noexcept {
  if (this != &other) {
    reset();
    addr_ = other.addr_;
    size_ = other.size_;
    other.addr_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

MappedRegion MappedRegion::map(size_t size, int prot, int flags, int fd, off_t offset, void* hint) {
  void* p = ::mmap(hint, size, prot, flags, fd, offset);
  if (p == MAP_FAILED) {
    char what[64];
    std::snprintf(what, sizeof(what), "%zu bytes", size);
    throw Error(errno, op::kMmap, what);
  }
  return MappedRegion(p, size);
}

MappedRegion MappedRegion::map_near(const void* near, size_t size, int prot) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t target = reinterpret_cast<uint64_t>(near) & ~(page - 1);
  constexpr uint64_t kStep = 16ull << 20;  // 16 MiB
  constexpr uint64_t kReach = 1ull << 30;  // 1 GiB
  for (uint64_t dist = kStep; dist < kReach; dist += kStep) {
    for (int sign = -1; sign <= 1; sign += 2) {
      if (sign < 0 && target < dist + page) continue;
      uint64_t hint = sign < 0 ? target - dist : target + dist;
      void* p = ::mmap(reinterpret_cast<void*>(hint), size, prot,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (p == MAP_FAILED) continue;
      // Kernels before 4.17 ignore MAP_FIXED_NOREPLACE and may map elsewhere.
      if (reinterpret_cast<uint64_t>(p) != hint) {
        ::munmap(p, size);
        continue;
      }
      return MappedRegion(p, size);
    }
  }
  char what[64];
  std::snprintf(what, sizeof(what), "%zu bytes near %p", size, near);
  throw Error(ENOMEM, op::kMmap, what, "no free range within 1 GiB");
}

void MappedRegion::protect(int prot) const {
  if (::mprotect(addr_, size_, prot) != 0) {
    char what[64];
    std::snprintf(what, sizeof(what), "mprotect %p", addr_);
    throw Error(errno, op::kMmap, what);
  }
}

void MappedRegion::reset() noexcept {
  if (addr_ != nullptr) ::munmap(addr_, size_);
  addr_ = nullptr;
  size_ = 0;
}

}  // namespace sframe
