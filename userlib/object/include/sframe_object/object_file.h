// sframe-object: an object file, opened once.
//
// Everything the layers above need of one object (its identity, its build
// id, its layout and, through its ELF view, its .eh_frame, .sframe and
// symbols) is read from ONE open file: every open by path is a chance to
// read a different file (an upgrade in between, or, for a process in a
// container, the host's file at the same path).  The file a process maps
// is opened through /proc/PID/map_files/START-END when the profiler may
// (the very file of the mapping, whatever the process's mount namespace),
// else through /proc/PID/root/PATH (the path in the process's root and
// mount namespace), checked against the inode its maps line names.
//
// An ObjectFile is opened on its own by the functions here (one-off users:
// a command line's file); a recording takes its objects from an
// ObjectTable (object_table.h), which opens each file once.
#ifndef SFRAME_OBJECT_OBJECT_FILE_H
#define SFRAME_OBJECT_OBJECT_FILE_H

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "sframe_client/error.h"
#include "sframe_client/fd.h"

namespace sframe {

namespace internal {
class ElfFile;
}

// A file as it is now: what says that it changed.  (The SFrame cache
// stores it with every section it made, so it holds what the cache
// compares; ObjectFile keeps the ctime beside it.)
struct SourceIdentity {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const SourceIdentity& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns;
  }
  bool operator!=(const SourceIdentity& o) const { return !(*this == o); }
};

// The identity of the file st describes (of stat() or fstat()).
SourceIdentity source_identity(const struct stat& st);

// What a profiler needs of an ELF file's program headers, in the file's own
// virtual addresses.
struct ObjectLayout {
  uint64_t text_lo = 0, text_hi = 0;  // hull of the PF_X PT_LOADs
  uint64_t image_vaddr = 0;           // the address of file offset 0
  bool has_sframe = false;            // a PT_GNU_SFRAME segment
};

// How the file was reached.
enum class MappedVia {
  kPath,      // by path in this process's namespace
  kMapFiles,  // /proc/PID/map_files/START-END
  kRoot,      // /proc/PID/root/PATH
};

// A file opened for reading as an object, before anything of it is read:
// the first step of opening one, apart so that a table can tell a failure
// to reach the file (the process, its mapping, the path: another way may
// work) from a failure of the file itself (not ELF: no way will).
struct OpenedFile {
  UniqueFd fd;
  std::string opened_as;  // the path open() was given (a /proc path through a process)
  MappedVia via = MappedVia::kPath;
  struct stat st {};  // fstat() of fd
};

// The file at path, as this process sees it: open(O_RDONLY | O_CLOEXEC |
// O_NOCTTY | O_NONBLOCK; a path that names a FIFO or a device now must not
// hang the caller), then fstat().  Throws sframe::Error(op::kReadElf,
// path) with open()'s errno.
OpenedFile open_object_file(const std::string& path);

// The file that process pid (0: this one) maps at [start, end), named path
// with inode ino in its maps.  /proc/PID/map_files/START-END first: opening
// it needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE in the initial user
// namespace (fs/proc/base.c, proc_map_files_get_link(); its lookup needs
// ptrace-read access), so without them (EPERM) the file is opened as
// /proc/PID/root/PATH (ptrace-read access), which must have inode ino
// (else ESTALE: replaced since it was mapped; ino 0 is not checked).  Only
// the inode is compared, not the device: /proc/PID/maps shows the device
// of the file system that holds the inode (overlayfs's lower layer, a
// btrfs volume), which fstat() may show as another.  Throws
// sframe::Error(op::kFindObject): ESRCH, EACCES, ESTALE, ENOENT, or
// open()'s errno.
OpenedFile open_mapped_file(pid_t pid, uint64_t start, uint64_t end, const std::string& path,
                            uint64_t ino);

class ObjectFile {
 public:
  // The ELF file at path, as this process sees it.  Throws
  // sframe::Error(op::kReadElf, path): open()'s errno, ENOEXEC for a file
  // that is not ELF or has no executable PT_LOAD.
  static ObjectFile open(const std::string& path);

  // The file that process pid maps at [start, end) (open_mapped_file()).
  // Throws sframe::Error: op::kFindObject as open_mapped_file(), or
  // op::kReadElf as open().
  static ObjectFile open_mapped(pid_t pid, uint64_t start, uint64_t end, const std::string& path,
                                uint64_t ino);

  // The object in a file already open; name: the path a process names it by
  // (for messages and profiles).  Reads its identity, build id and layout;
  // requires no executable PT_LOAD (layout() throws then).  Throws
  // sframe::Error(op::kReadElf, file.opened_as): ENOEXEC for a file that
  // is not regular or not ELF, ENOSYS for a libelf that does not work.
  static ObjectFile read(OpenedFile file, const std::string& name);

  // The path the process names it by (for messages and profiles).
  const std::string& name() const { return name_; }
  // What was opened (a /proc path through a process).
  const std::string& opened_as() const { return opened_as_; }
  MappedVia via() const { return via_; }
  const SourceIdentity& identity() const { return identity_; }
  // st_ctime in ns when opened: also changes when the file is renamed over,
  // unlinked or chmod'ed.
  int64_t ctime_ns() const { return ctime_ns_; }
  // NT_GNU_BUILD_ID in lowercase hex; empty if none.
  const std::string& build_id() const { return build_id_; }
  // Whether it has an executable PT_LOAD (what layout() needs).
  bool has_layout() const { return !layout_error_; }
  // Throws the sframe::Error(op::kReadElf, opened_as(), ENOEXEC) that says
  // why it has none (no program headers, no executable PT_LOAD).
  const ObjectLayout& layout() const;
  // What identifies the file's content: its build id and identity (a cache
  // key: the same for every process that maps this file).
  std::string content_key() const;
  // Whether the open file still has the identity and ctime it had when it
  // was opened (fstat() of its descriptor; false if that fails): a file
  // rewritten in place is another object.
  bool unchanged() const;

  const internal::ElfFile& elf() const { return *elf_; }

 private:
  ObjectFile() = default;

  std::shared_ptr<const internal::ElfFile> elf_;
  std::string name_, opened_as_;
  MappedVia via_ = MappedVia::kPath;
  SourceIdentity identity_;
  int64_t ctime_ns_ = 0;
  std::string build_id_;
  ObjectLayout layout_;
  std::optional<Error> layout_error_;
};

// The NT_GNU_BUILD_ID of the ELF file at path, in lowercase hex; empty if
// it has none.  Throws sframe::Error(op::kReadElf, path): open()'s errno,
// ENOEXEC for a file that is not ELF.
std::string read_build_id(const std::string& path);

}  // namespace sframe

#endif  // SFRAME_OBJECT_OBJECT_FILE_H
