// sframe-object: the objects of a recording, each file opened once.
//
// A recording meets the same file many times: every process maps libc,
// coverage opens it to supply its SFrame, the mapping records want its
// build id, the symbolizer its symbols.  The table keeps each object it
// opened (ObjectFile: descriptor, identity, build id, ELF view) keyed by
// the file's (device, inode), so that all of them take it from there and
// the file is opened once.
//
// A mapping of a process is looked up by the (device, inode) its maps line
// names; a path by the (device, inode) stat() gives.  Before a file is
// opened, the way to it is stat()ed (a mapping's map_files entry, else the
// path in the process's root): the same file may show another device
// there (overlayfs gives a path in the overlay a device of its own, or one
// per layer, while on older kernels, Debian 12's 6.1, a mapping's maps
// line and map_files entry name the layer's file).  So an object is also found by its inode,
// size, mtime and ctime to the nanosecond whatever the device (two files
// alike in all four are the same file, or a snapshot of it not written
// since: the same bytes), and every key that led to it leads there from
// then on.  Only when the table has no such object is the file opened,
// through the process (open_mapped_file(): its map_files entry, else the
// path in its root with the inode checked) or by path.
//
// Kept with each object: its identity and ctime when opened.  An object
// whose file changed since (rewritten in place: another size, mtime or
// ctime on fstat() of its descriptor) is another object: it is opened
// again.  Failures are kept too: a file that was opened but is no object
// (not ELF, not regular) by its key, for everyone; a way into it that
// failed (the mapping gone, ptrace refused, the path now naming another
// inode) by that way (pid and range): another process may still reach it.
//
// The table holds at most max_held objects open (descriptor and mapping),
// the least recently used let go first; one let go is opened again when
// asked for (counted in stats().evicted).  Not thread-safe: one thread
// uses a table (a recording's loop, or a Symbolizer under its lock).
#ifndef SFRAME_OBJECT_OBJECT_TABLE_H
#define SFRAME_OBJECT_OBJECT_TABLE_H

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "sframe_client/error.h"
#include "sframe_object/maps.h"
#include "sframe_object/object_file.h"

namespace sframe {

// What the table did since it was made.
struct ObjectTableStats {
  uint64_t opened = 0;      // files opened (open() that succeeded)
  uint64_t reused = 0;      // requests answered with an object the table held
  uint64_t failed = 0;      // opens that failed (each failure then kept)
  uint64_t refused = 0;     // requests answered with a kept failure
  uint64_t changed = 0;     // objects whose file changed since they were opened
  uint64_t evicted = 0;     // objects let go for the bound on held objects
  uint64_t duplicates = 0;  // opens that found the file held after all (not stat()able first)
};

class ObjectTable {
 public:
  // Objects held open at most by default: a process's libraries, many
  // times over, within the descriptors a tool keeps spare (sframe-prof).
  static constexpr size_t kDefaultMaxHeld = 128;

  explicit ObjectTable(size_t max_held = kDefaultMaxHeld);
  ObjectTable(const ObjectTable&) = delete;
  ObjectTable& operator=(const ObjectTable&) = delete;

  // The object process pid (0: this one) maps as m (a file mapping: its
  // range names the map_files entry, its device and inode the file): held
  // under that key, else under what stat() of the way in shows, else
  // opened (open_mapped_file()).  Throws sframe::Error as
  // open_mapped_file() and ObjectFile::read(), or the failure kept from
  // the first attempt.
  std::shared_ptr<const ObjectFile> open_mapped(pid_t pid, const MapsEntry& m);

  // The object pid maps at [start, end) from path, without its maps line
  // at hand (perf's side-band records carry no inode through
  // libsframe-client): found by stat() of its map_files entry where that
  // is allowed, else by its line read from /proc/PID/maps (the inode to
  // check); when the mapping or the process is gone, the file at path in
  // this process's namespace (open_path()).  Throws as open_mapped() and
  // open_path().
  std::shared_ptr<const ObjectFile> open_mapped(pid_t pid, uint64_t start, uint64_t end,
                                                const std::string& path);

  // The file at path, as this process sees it: held under what stat()
  // shows, else opened (open_object_file()).  Throws sframe::Error
  // (op::kReadElf, path) as open_object_file() and ObjectFile::read().
  std::shared_ptr<const ObjectFile> open_path(const std::string& path);

  const ObjectTableStats& stats() const { return stats_; }
  // Objects held open now.
  size_t held() const { return held_.size(); }

 private:
  // (st_dev, st_ino), or (makedev(major, minor), inode) of a maps line.
  using FileKey = std::pair<uint64_t, uint64_t>;
  // (inode, size, mtime ns, ctime ns): the same file seen through another
  // device (see above).
  using ContentKey = std::tuple<uint64_t, uint64_t, int64_t, int64_t>;
  // A way into a file: the file, the process and the range it maps.
  using Route = std::tuple<FileKey, pid_t, uint64_t, uint64_t>;
  struct Held {
    std::shared_ptr<const ObjectFile> object;
    std::vector<FileKey> keys;  // every key of index_ that leads here
    ContentKey content;
  };
  using HeldList = std::list<Held>;  // most recently used first

  // The held object under key, unchanged since it was opened, made the
  // most recently used; held_.end() when none (one that changed is let go).
  HeldList::iterator lookup(const FileKey& key);
  // The held object of the file st describes: by its (st_dev, st_ino),
  // else by its ContentKey (then (st_dev, st_ino) leads there too).
  HeldList::iterator lookup(const struct stat& st);
  // key leads to h from now on.
  void add_key(HeldList::iterator h, const FileKey& key);
  // The object in file, just opened for key (stats().opened counted): the
  // one held for the same file if the table has it by now, else read and
  // held under key and the file's own key.
  std::shared_ptr<const ObjectFile> adopt(OpenedFile file, const std::string& name,
                                          const FileKey& key);
  void hold(std::shared_ptr<const ObjectFile> object, std::vector<FileKey> keys);
  void let_go(HeldList::iterator h);
  // The kept failure for key or route (thrown, counted in refused).
  void throw_if_failed(const FileKey& key, const Route* route);
  void keep_file_failure(const FileKey& key, const Error& e);
  void keep_route_failure(const Route& route, const Error& e);

  size_t max_held_;
  HeldList held_;
  std::map<FileKey, HeldList::iterator> index_;
  std::map<ContentKey, HeldList::iterator> by_content_;
  std::map<FileKey, Error> file_failures_;
  std::map<Route, Error> route_failures_;
  ObjectTableStats stats_;
};

}  // namespace sframe

#endif  // SFRAME_OBJECT_OBJECT_TABLE_H
