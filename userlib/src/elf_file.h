// libsframe-client, internal: an ELF file opened read-only with libelf.
#ifndef SFRAME_CLIENT_SRC_ELF_FILE_H
#define SFRAME_CLIENT_SRC_ELF_FILE_H

#include <libelf.h>

#include <memory>
#include <string>

#include "sframe_client/fd.h"

namespace sframe::internal {

class ElfFile {
 public:
  // Throws sframe::Error(op::kReadElf, path): open()'s errno, ENOEXEC for a
  // file that is not ELF, ENOSYS for a libelf that does not work.
  explicit ElfFile(const std::string& path);

  Elf* get() const noexcept { return elf_.get(); }
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  UniqueFd fd_;
  std::unique_ptr<Elf, decltype(&elf_end)> elf_{nullptr, &elf_end};
};

}  // namespace sframe::internal

#endif  // SFRAME_CLIENT_SRC_ELF_FILE_H
