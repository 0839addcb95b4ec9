#include "sframe_object/object_file.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <utility>

#include "sframe_client/error.h"
#include "sframe_client/fd.h"
#include "sframe_object/elf_file.h"

namespace sframe {

namespace {

// O_NONBLOCK and O_NOCTTY: a path may name a FIFO or a terminal by now
// (the file at a recorded path, a process's root); opening must not hang
// or take a controlling terminal.  A regular file ignores both.
constexpr int kObjectOpenFlags = O_RDONLY | O_NOCTTY | O_NONBLOCK;

int64_t ns_of(const struct timespec& t) { return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec; }

// fstat() into file->st.  Throws sframe::Error(op, file->opened_as).
void stat_opened(OpenedFile* file, const char* op) {
  if (::fstat(file->fd.get(), &file->st) != 0) throw Error(errno, op, file->opened_as);
}

}  // namespace

SourceIdentity source_identity(const struct stat& st) {
  SourceIdentity id;
  id.dev = st.st_dev;
  id.ino = st.st_ino;
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = ns_of(st.st_mtim);
  return id;
}

OpenedFile open_object_file(const std::string& path) {
  OpenedFile f;
  f.opened_as = path;
  f.via = MappedVia::kPath;
  try {
    f.fd = UniqueFd::open(path, kObjectOpenFlags);
  } catch (const Error& e) {
    throw Error(e.err(), op::kReadElf, path);
  }
  stat_opened(&f, op::kReadElf);
  return f;
}

OpenedFile open_mapped_file(pid_t pid, uint64_t start, uint64_t end, const std::string& path,
                            uint64_t ino) {
  const std::string proc = "/proc/" + (pid ? std::to_string(pid) : std::string("self"));
  char range[48];
  std::snprintf(range, sizeof(range), "/%" PRIx64 "-%" PRIx64, start, end);
  OpenedFile f;
  f.opened_as = proc + "/map_files" + range;
  f.via = MappedVia::kMapFiles;
  int err = 0;
  try {
    f.fd = UniqueFd::open(f.opened_as, kObjectOpenFlags);
  } catch (const Error& e) {
    err = e.err();
  }
  if (err == EPERM || err == EACCES) {
    // No CAP_SYS_ADMIN / CAP_CHECKPOINT_RESTORE: the path in the process's
    // own root and mount namespace.
    f.opened_as = proc + "/root" + path;
    f.via = MappedVia::kRoot;
    try {
      f.fd = UniqueFd::open(f.opened_as, kObjectOpenFlags);
    } catch (const Error& e) {
      throw Error(e.err(), op::kFindObject, f.opened_as,
                  e.err() == EACCES ? "not allowed to read the process's files (ptrace-read rule)"
                                    : std::string());
    }
  } else if (err != 0) {
    throw Error(err, op::kFindObject, f.opened_as,
                err == ENOENT ? "unmapped meanwhile, or the process is gone" : std::string());
  }
  stat_opened(&f, op::kReadElf);
  if (f.via == MappedVia::kRoot && ino != 0 && f.st.st_ino != ino) {
    throw Error(ESTALE, op::kFindObject, f.opened_as,
                "not the file mapped at " + std::string(range + 1) + " (inode " +
                    std::to_string(f.st.st_ino) + ", mapped " + std::to_string(ino) + ")");
  }
  return f;
}

ObjectFile ObjectFile::read(OpenedFile file, const std::string& name) {
  if (!S_ISREG(file.st.st_mode)) {
    throw Error(ENOEXEC, op::kReadElf, file.opened_as, "not a regular file");
  }
  ObjectFile o;
  o.name_ = name;
  o.opened_as_ = file.opened_as;
  o.via_ = file.via;
  o.identity_ = source_identity(file.st);
  o.ctime_ns_ = ns_of(file.st.st_ctim);
  o.elf_ = std::make_shared<const internal::ElfFile>(std::move(file.fd), o.opened_as_);
  try {
    const internal::ElfLayout l = internal::read_elf_layout(*o.elf_);
    o.layout_.text_lo = l.text_lo;
    o.layout_.text_hi = l.text_hi;
    o.layout_.image_vaddr = l.image_vaddr;
    o.layout_.has_sframe = l.has_sframe;
  } catch (const Error& e) {
    // Not every object runs code (a debug file, data): only layout() needs it.
    o.layout_error_ = e;
  }
  o.build_id_ = internal::elf_build_id(*o.elf_);
  return o;
}

ObjectFile ObjectFile::open(const std::string& path) {
  ObjectFile o = read(open_object_file(path), path);
  (void)o.layout();  // an object without executable code is refused, as it always was here
  return o;
}

ObjectFile ObjectFile::open_mapped(pid_t pid, uint64_t start, uint64_t end,
                                   const std::string& path, uint64_t ino) {
  ObjectFile o = read(open_mapped_file(pid, start, end, path, ino), path);
  (void)o.layout();  // as open()
  return o;
}

const ObjectLayout& ObjectFile::layout() const {
  if (layout_error_) throw *layout_error_;
  return layout_;
}

std::string ObjectFile::content_key() const {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "@%" PRIx64 ":%" PRIx64 ":%" PRIx64 ":%" PRIx64, identity_.dev,
                identity_.ino, identity_.size, static_cast<uint64_t>(identity_.mtime_ns));
  return build_id_ + buf;
}

bool ObjectFile::unchanged() const {
  struct stat st;
  if (::fstat(elf_->fd(), &st) != 0) return false;
  return source_identity(st) == identity_ && ns_of(st.st_ctim) == ctime_ns_;
}

std::string read_build_id(const std::string& path) {
  return ObjectFile::read(open_object_file(path), path).build_id();
}

}  // namespace sframe
