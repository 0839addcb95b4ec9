#include "sframe_profile/build_ids.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>

#include "sframe_client/error.h"
#include "sframe_client/fd.h"
#include "sframe_gen/build_id.h"

namespace sframe {

std::string MappedObjectIds::of_mapping(pid_t pid, uint64_t start, uint64_t end,
                                        const std::string& path) {
  char map_file[96];
  std::snprintf(map_file, sizeof(map_file), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64,
                static_cast<int>(pid), start, end);
  // One open per mapping: the identity and the build id come from the same
  // file.  O_NONBLOCK: a path that names a FIFO or device now must not hang
  // the recording (it is refused as not regular).
  int fd = pid > 0 ? open(map_file, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) : -1;
  if (fd < 0 && pid > 0 && !path.empty() && path[0] == '/') {
    fd = open(("/proc/" + std::to_string(pid) + "/root" + path).c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  }
  if (fd < 0) fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return std::string();
  UniqueFd file(fd);
  struct stat st;
  if (fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::string();
  const auto key = std::make_tuple(uint64_t(st.st_dev), uint64_t(st.st_ino), uint64_t(st.st_size),
                                   uint64_t(st.st_mtim.tv_sec) * 1000000000u +
                                       uint64_t(st.st_mtim.tv_nsec));
  auto it = ids_.find(key);
  if (it != ids_.end()) return it->second;
  reads_++;
  std::string id;
  try {
    id = read_build_id(std::move(file), path);
  } catch (const Error&) {
    // Not ELF, or unreadable: unknown.
  }
  ids_.emplace(key, id);
  return id;
}

}  // namespace sframe
