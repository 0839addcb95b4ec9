// sframe-object: /proc/PID/maps, the one parser of it.
//
// A line (fs/proc/task_mmu.c, show_map_vma()):
//
//   7f01c75f5000-7f01c774b000 r-xp 00026000 fe:00 332835     /usr/lib/x86_64-linux-gnu/libc.so.6
//
// start-end (hex), permissions (r/w/x, then p(rivate) or s(hared)), the file
// offset of start (hex), the device major:minor (hex) and inode (decimal)
// of the file, then, after padding, the path: a file ("/...", with
// " (deleted)" appended once it was unlinked), a name in brackets
// ("[heap]", "[vdso]", "[anon:NAME]"), or nothing (anonymous memory).
#ifndef SFRAME_OBJECT_MAPS_H
#define SFRAME_OBJECT_MAPS_H

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sframe {

// One mapping of a process.
struct MapsEntry {
  uint64_t start = 0, end = 0;  // [start, end)
  char perms[5] = {'-', '-', '-', '-', '\0'};  // "r-xp"
  uint64_t offset = 0;                          // the file offset of start
  uint32_t dev_major = 0, dev_minor = 0;        // of the file system holding the inode
  uint64_t inode = 0;                           // 0: no file
  std::string path;  // the path column without " (deleted)"; empty for anonymous memory
  bool deleted = false;  // the file was unlinked (the line ends in " (deleted)")

  bool readable() const { return perms[0] == 'r'; }
  bool writable() const { return perms[1] == 'w'; }
  bool executable() const { return perms[2] == 'x'; }
  bool shared() const { return perms[3] == 's'; }
  // A mapping of a file (its path is absolute), not memory or a [name].
  bool is_file() const { return !path.empty() && path[0] == '/'; }
  // The device as stat() gives st_dev: makedev(dev_major, dev_minor).
  dev_t dev() const;
  // The path column as the kernel wrote it (" (deleted)" included): what a
  // process's mapping is named by in messages and profiles.
  std::string name() const;
};

// One line of a maps file (without its newline) into *out; false when it
// is not such a line.
bool parse_maps_line(const std::string& line, MapsEntry* out);

// Every line of a maps file's text, in order; lines that do not parse are
// skipped.
std::vector<MapsEntry> parse_maps(const std::string& text);

// Per file (by name()), the mapping where the image holding the file's
// first executable mapping starts: the nearest mapping of offset 0 of the
// same file below it (the loader maps an image in one reserved range).  A
// lower mapping of the file at offset 0 is another mapping of it, such as
// a reader's mmap() of the whole file (a process that covers itself holds
// one of every object its ObjectTable read).  A file whose first
// executable mapping has none below it (mapped from its middle) is left
// out: its load address is unknown.  Pointers into maps.
std::map<std::string, const MapsEntry*> image_bases(const std::vector<MapsEntry>& maps);

// "/proc/PID/maps", or "/proc/self/maps" for pid 0.
std::string maps_path(pid_t pid);

// "/proc/PID/map_files/START-END" (pid 0: self): the file a mapping maps,
// whatever namespace it is in (what open_mapped_file() opens first).
std::string map_files_path(pid_t pid, uint64_t start, uint64_t end);

// The mappings of process pid (0: this one) now, read whole at once.
// Throws sframe::Error(op::kFindObject, maps_path(pid)) with the errno of
// open() or read(): ENOENT or ESRCH when the process is gone, EACCES
// without ptrace-read access to it.
std::vector<MapsEntry> read_maps(pid_t pid);

}  // namespace sframe

#endif  // SFRAME_OBJECT_MAPS_H
