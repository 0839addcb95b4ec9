// sframe-profile: the build ids of the objects a recording's processes map,
// for its mapping records (a report then knows whether the file it finds
// at a path is the one that ran).
#ifndef SFRAME_PROFILE_BUILD_IDS_H
#define SFRAME_PROFILE_BUILD_IDS_H

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "sframe_object/maps.h"
#include "sframe_object/object_table.h"

namespace sframe {

// Each object's build id, read once: the objects come from the recording's
// ObjectTable, which opens each file once (and the coverage of the same
// recording finds them there, and they it).
class MappedObjectIds {
 public:
  // objects: the recording's table, which must outlive this; null: one of
  // its own.
  explicit MappedObjectIds(ObjectTable* objects = nullptr);

  // The build id (lowercase hex) of the file pid maps as m (its maps line:
  // found by its device and inode, opened through /proc/PID/map_files, else
  // /proc/PID/root/PATH checked against the inode).  Empty when unknown
  // (no such file, not ELF, no build id, the path now names another file).
  std::string of_mapping(pid_t pid, const MapsEntry& m);
  // The same without its maps line (a side-band record), pid mapping
  // [start, end) from path: ObjectTable::open_mapped() finds the file
  // through the process, else (the mapping or the process gone) takes the
  // file at path.
  std::string of_mapping(pid_t pid, uint64_t start, uint64_t end, const std::string& path);
  // Objects read for it (opened by its calls), for tests and -v.
  uint64_t reads() const { return reads_; }

 private:
  template <typename Open>
  std::string build_id_of(Open&& open);

  std::unique_ptr<ObjectTable> own_objects_;
  ObjectTable* objects_;
  uint64_t reads_ = 0;
};

}  // namespace sframe

#endif  // SFRAME_PROFILE_BUILD_IDS_H
