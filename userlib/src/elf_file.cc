#include "elf_file.h"

#include <fcntl.h>

#include <cerrno>

#include "sframe_client/error.h"

namespace sframe::internal {

ElfFile::ElfFile(const std::string& path) : path_(path) {
  if (elf_version(EV_CURRENT) == EV_NONE) {
    throw Error(ENOSYS, op::kReadElf, path, "libelf version mismatch");
  }
  try {
    fd_ = UniqueFd::open(path, O_RDONLY);
  } catch (const Error& e) {
    throw Error(e.err(), op::kReadElf, path);
  }
  elf_.reset(elf_begin(fd_.get(), ELF_C_READ_MMAP, nullptr));
  if (!elf_ || elf_kind(elf_.get()) != ELF_K_ELF) {
    throw Error(ENOEXEC, op::kReadElf, path, "not an ELF file");
  }
}

}  // namespace sframe::internal
