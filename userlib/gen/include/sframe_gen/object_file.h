// sframe-gen: an object file a process maps, opened once.
//
// Everything a profiler needs of one object (its layout, its build id, the
// identity that says whether a cached section was made from it, and its
// .eh_frame or .sframe) is read from ONE open file: every open by path is a
// chance to read a different file (an upgrade in between, or, for a process
// in a container, the host's file at the same path).  The file a process
// maps is opened through /proc/PID/map_files/START-END when the profiler may
// (the very file of the mapping, whatever the process's mount namespace),
// else through /proc/PID/root/PATH (the path in the process's root and mount
// namespace), checked against the inode its maps line names.
#ifndef SFRAME_GEN_OBJECT_FILE_H
#define SFRAME_GEN_OBJECT_FILE_H

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

namespace sframe {

namespace internal {
class ElfFile;
}

// A file as it is now: what says that it changed.
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

// How ObjectFile::open_mapped() reached the file.
enum class MappedVia {
  kPath,      // opened by path in this process's namespace (ObjectFile::open)
  kMapFiles,  // /proc/PID/map_files/START-END
  kRoot,      // /proc/PID/root/PATH
};

class ObjectFile {
 public:
  // The ELF file at path, as this process sees it.  Throws
  // sframe::Error(op::kReadElf, path): open()'s errno, ENOEXEC for a file
  // that is not ELF or has no executable PT_LOAD.
  static ObjectFile open(const std::string& path);

  // The file that process pid (0: this one) maps at [start, end), named
  // path with inode ino in its maps.  /proc/PID/map_files/START-END first:
  // opening it needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE in the initial
  // user namespace (fs/proc/base.c, proc_map_files_get_link(); its lookup
  // needs ptrace-read access), so without them (EPERM) the file is opened
  // as /proc/PID/root/PATH (ptrace-read access), which must have inode ino
  // (else ESTALE: replaced since it was mapped).  Throws sframe::Error:
  // op::kFindObject (ESRCH, EACCES, ESTALE, ENOENT) or as open().
  static ObjectFile open_mapped(pid_t pid, uint64_t start, uint64_t end, const std::string& path,
                                uint64_t ino);

  // The path the process names it by (for messages and profiles).
  const std::string& name() const { return name_; }
  // What was opened (a /proc path for open_mapped()).
  const std::string& opened_as() const { return opened_as_; }
  MappedVia via() const { return via_; }
  const SourceIdentity& identity() const { return identity_; }
  // NT_GNU_BUILD_ID in lowercase hex; empty if none.
  const std::string& build_id() const { return build_id_; }
  const ObjectLayout& layout() const { return layout_; }
  // What identifies the file's content: its build id and identity (a cache
  // key: the same for every process that maps this file).
  std::string content_key() const;

  const internal::ElfFile& elf() const { return *elf_; }

 private:
  ObjectFile() = default;
  void read(const std::string& name);

  std::shared_ptr<const internal::ElfFile> elf_;
  std::string name_, opened_as_;
  MappedVia via_ = MappedVia::kPath;
  SourceIdentity identity_;
  std::string build_id_;
  ObjectLayout layout_;
};

}  // namespace sframe

#endif  // SFRAME_GEN_OBJECT_FILE_H
