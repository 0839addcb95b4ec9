#include "sframe_profile/build_ids.h"

#include "sframe_client/error.h"
#include "sframe_object/object_file.h"

namespace sframe {

MappedObjectIds::MappedObjectIds(ObjectTable* objects)
    : own_objects_(objects ? nullptr : std::make_unique<ObjectTable>()),
      objects_(objects ? objects : own_objects_.get()) {}

template <typename Open>
std::string MappedObjectIds::build_id_of(Open&& open) {
  const uint64_t opened = objects_->stats().opened;
  std::string id;
  try {
    id = open()->build_id();
  } catch (const Error&) {
    // Gone, not ELF, or unreadable: unknown.
  }
  reads_ += objects_->stats().opened - opened;
  return id;
}

std::string MappedObjectIds::of_mapping(pid_t pid, const MapsEntry& m) {
  return build_id_of([&] { return objects_->open_mapped(pid, m); });
}

std::string MappedObjectIds::of_mapping(pid_t pid, uint64_t start, uint64_t end,
                                        const std::string& path) {
  return build_id_of([&] { return objects_->open_mapped(pid, start, end, path); });
}

}  // namespace sframe
