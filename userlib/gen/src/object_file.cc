#include "sframe_gen/object_file.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <utility>

#include "elf_file.h"
#include "sframe_client/error.h"
#include "sframe_client/fd.h"

namespace sframe {

namespace {

SourceIdentity identity_of(int fd, const std::string& name) {
  struct stat st;
  if (::fstat(fd, &st) != 0) throw Error(errno, op::kReadElf, name);
  return source_identity(st);
}

}  // namespace

SourceIdentity source_identity(const struct stat& st) {
  SourceIdentity id;
  id.dev = st.st_dev;
  id.ino = st.st_ino;
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  return id;
}

void ObjectFile::read(const std::string& name) {
  name_ = name;
  identity_ = identity_of(elf_->fd(), opened_as_);
  const internal::ElfLayout l = internal::read_elf_layout(*elf_);
  layout_.text_lo = l.text_lo;
  layout_.text_hi = l.text_hi;
  layout_.image_vaddr = l.image_vaddr;
  layout_.has_sframe = l.has_sframe;
  build_id_ = internal::elf_build_id(*elf_);
}

ObjectFile ObjectFile::open(const std::string& path) {
  ObjectFile o;
  o.opened_as_ = path;
  o.via_ = MappedVia::kPath;
  o.elf_ = std::make_shared<const internal::ElfFile>(path);
  o.read(path);
  return o;
}

ObjectFile ObjectFile::open_mapped(pid_t pid, uint64_t start, uint64_t end,
                                   const std::string& path, uint64_t ino) {
  const std::string proc = "/proc/" + (pid ? std::to_string(pid) : std::string("self"));
  char range[48];
  std::snprintf(range, sizeof(range), "/%" PRIx64 "-%" PRIx64, start, end);
  ObjectFile o;
  UniqueFd fd;
  o.opened_as_ = proc + "/map_files" + range;
  o.via_ = MappedVia::kMapFiles;
  int err = 0;
  try {
    fd = UniqueFd::open(o.opened_as_, O_RDONLY);
  } catch (const Error& e) {
    err = e.err();
  }
  if (err == EPERM || err == EACCES) {
    // No CAP_SYS_ADMIN / CAP_CHECKPOINT_RESTORE: the path in the process's
    // own root and mount namespace.
    o.opened_as_ = proc + "/root" + path;
    o.via_ = MappedVia::kRoot;
    try {
      fd = UniqueFd::open(o.opened_as_, O_RDONLY);
    } catch (const Error& e) {
      throw Error(e.err(), op::kFindObject, o.opened_as_,
                  e.err() == EACCES ? "not allowed to read the process's files (ptrace-read rule)"
                                    : std::string());
    }
  } else if (err != 0) {
    throw Error(err, op::kFindObject, o.opened_as_,
                err == ENOENT ? "unmapped meanwhile, or the process is gone" : std::string());
  }
  const SourceIdentity id = identity_of(fd.get(), o.opened_as_);
  if (o.via_ == MappedVia::kRoot && ino != 0 && id.ino != ino) {
    throw Error(ESTALE, op::kFindObject, o.opened_as_,
                "not the file mapped at " + std::string(range + 1) + " (inode " +
                    std::to_string(id.ino) + ", mapped " + std::to_string(ino) + ")");
  }
  o.elf_ = std::make_shared<const internal::ElfFile>(std::move(fd), o.opened_as_);
  o.read(path);
  return o;
}

std::string ObjectFile::content_key() const {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "@%" PRIx64 ":%" PRIx64 ":%" PRIx64 ":%" PRIx64, identity_.dev,
                identity_.ino, identity_.size, static_cast<uint64_t>(identity_.mtime_ns));
  return build_id_ + buf;
}

}  // namespace sframe
