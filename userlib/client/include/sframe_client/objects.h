// libsframe-client: the .sframe of the objects loaded in this process
// (dl_iterate_phdr).
#ifndef SFRAME_CLIENT_OBJECTS_H
#define SFRAME_CLIENT_OBJECTS_H

#include <link.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sframe_client/export.h"
#include "sframe_client/device.h"

namespace sframe {

inline constexpr uint32_t kPtGnuSframe = 0x6474e554;  // PT_GNU_SFRAME

// One object loaded in this process, as dl_iterate_phdr() reports it.
struct LoadedObject {
  std::string path;   // the file (the main program's is /proc/self/exe's target)
  uint64_t base = 0;  // dlpi_addr: load bias
  // The in-memory .sframe (PT_GNU_SFRAME): address and length.  The length
  // is the section's own (header plus tables) when that is smaller than the
  // segment's p_memsz.  0 when the object has no PT_GNU_SFRAME.
  uint64_t sframe_addr = 0;
  uint64_t sframe_len = 0;
  // The executable text: the hull of the PT_LOAD segments with PF_X.
  uint64_t text_start = 0;
  uint64_t text_len = 0;

  bool has_sframe() const { return sframe_len != 0; }
  bool has_text() const { return text_len != 0; }
  bool contains_text(uint64_t addr) const {
    return addr >= text_start && addr - text_start < text_len;
  }
};

// Every object loaded now (the main program, shared libraries, the vDSO).
SFRAME_CLIENT_API std::vector<LoadedObject> loaded_objects();

// The ranges of the object with load bias base and program headers
// phdr[0, phnum), as loaded_objects() reports them (path left empty): for
// callers that have the program headers of an object from elsewhere than
// dl_iterate_phdr() (libsframe-audit.so: from the loader's link_map).  The
// object must be mapped: the .sframe header is read for the section's length.
// Allocates nothing, throws nothing.
SFRAME_CLIENT_API LoadedObject describe_object(uint64_t base, const ElfW(Phdr) * phdr,
                                                size_t phnum) noexcept;

// The loaded object with a PT_LOAD segment holding addr, if any.
SFRAME_CLIENT_API std::optional<LoadedObject> loaded_object_containing(const void* addr);

// Registers the in-memory .sframe of every loaded object that has one, for
// that object's executable text.  Objects without PT_GNU_SFRAME (libc and
// every other library built without --gsframe, the vDSO) are skipped.
// Throws sframe::Error(op::kRegister, <path>) on the first failure; the
// sections registered before it are unregistered again.
SFRAME_CLIENT_API std::vector<Registration> register_loaded_objects(const Device& dev);

// Registers the .sframe of the object containing addr (e.g. a function of a
// library just dlopen()ed).  Throws sframe::Error: op::kFindObject with
// ENOENT when no object holds addr, ENODATA when the object has no
// PT_GNU_SFRAME; op::kRegister for the module's refusal.
SFRAME_CLIENT_API Registration register_object_containing(const Device& dev, const void* addr);

// The path of the running executable (readlink /proc/self/exe).
SFRAME_CLIENT_API std::string self_exe_path();

}  // namespace sframe

#endif  // SFRAME_CLIENT_OBJECTS_H
