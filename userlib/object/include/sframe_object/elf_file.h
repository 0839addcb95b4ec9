// sframe-object: the ELF view of an open file, through libelf.
//
// Internal to the userlib layers (gen and profile read sections through
// it; the tools do not): an ObjectFile (object_file.h) holds one, and
// everyone who needs the object's sections, notes or symbols reads them
// from it.  libelf maps the whole file read-only (ELF_C_READ_MMAP:
// PROT_READ, MAP_PRIVATE) and unmaps it at elf_end(), which the
// destructor calls; the descriptor is owned here too.
#ifndef SFRAME_OBJECT_ELF_FILE_H
#define SFRAME_OBJECT_ELF_FILE_H

#include <libelf.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sframe_client/fd.h"

namespace sframe::internal {

class ElfFile {
 public:
  // Throws sframe::Error(op::kReadElf, path): open()'s errno, ENOEXEC for a
  // file that is not ELF, ENOSYS for a libelf that does not work.  For
  // files that are not objects of a process (the SFrame cache's own);
  // objects are opened through ObjectFile or ObjectTable.
  explicit ElfFile(const std::string& path);
  // A file already open (e.g. /proc/PID/map_files/..., the very file a
  // process maps whatever its mount namespace); name is for errors.
  ElfFile(UniqueFd fd, const std::string& name);

  Elf* get() const noexcept { return elf_.get(); }
  const std::string& path() const noexcept { return path_; }
  int fd() const noexcept { return fd_.get(); }

 private:
  void begin();
  std::string path_;
  UniqueFd fd_;
  std::unique_ptr<Elf, decltype(&elf_end)> elf_{nullptr, &elf_end};
};

// What a profiler needs of an ELF file's program headers, in the file's own
// virtual addresses.
struct ElfLayout {
  uint64_t text_lo = 0, text_hi = 0;  // hull of the PF_X PT_LOADs
  uint64_t image_vaddr = 0;           // the address of file offset 0
  bool has_sframe = false;            // a PT_GNU_SFRAME segment
};

// Throws sframe::Error(op::kReadElf, path): ENOEXEC without program headers
// or an executable PT_LOAD.
ElfLayout read_elf_layout(const ElfFile& elf);

// The program interpreter (PT_INTERP, a path) and the DT_NEEDED names of
// the file, as the dynamic loader will look for them; empty if none.
struct ElfDependencies {
  std::string interpreter;
  std::vector<std::string> needed;
};
ElfDependencies elf_dependencies(const ElfFile& elf);

// The NT_GNU_BUILD_ID of the file, in hex (from its PT_NOTE segments, or
// its note sections if it has no program headers); empty if none.
std::string elf_build_id(const ElfFile& elf);

}  // namespace sframe::internal

#endif  // SFRAME_OBJECT_ELF_FILE_H
