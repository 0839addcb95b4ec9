// sframe-profile: the build ids of the objects a recording's processes map,
// for its mapping records (a report then knows whether the file it finds
// at a path is the one that ran).
#ifndef SFRAME_PROFILE_BUILD_IDS_H
#define SFRAME_PROFILE_BUILD_IDS_H

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

namespace sframe {

// Reads each object's build id once: objects are told apart by device,
// inode, size and modification time of the file opened.
class MappedObjectIds {
 public:
  // The build id (lowercase hex) of the file pid maps at [start, end) from
  // path, read through /proc/PID/map_files/START-END when that can be
  // opened (the very file mapped, also in another mount namespace; needs
  // CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE), else /proc/PID/root/PATH (the
  // process's root, e.g. a container's), else path.  Empty when unknown
  // (no such file, not ELF, no build id).
  std::string of_mapping(pid_t pid, uint64_t start, uint64_t end, const std::string& path);
  // Objects read (cache misses), for tests and -v.
  uint64_t reads() const { return reads_; }

 private:
  // (dev, ino, size, mtime ns)
  std::map<std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>, std::string> ids_;
  uint64_t reads_ = 0;
};

}  // namespace sframe

#endif  // SFRAME_PROFILE_BUILD_IDS_H
