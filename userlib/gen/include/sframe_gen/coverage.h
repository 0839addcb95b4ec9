// sframe-gen: covering a process's code for the module, the way a
// profiler does before and while it samples the process.
//
// Every executable file mapping of the process is looked at once (per file
// and load address), through the file the process maps, taken from an
// ObjectTable (object_table.h: found by the (device, inode) of its maps
// line, else opened through its map_files entry, or the path in its root,
// so a process in a container gets the SFrame of its own files, not of the
// host's at the same path): a file without .sframe gets SFrame made from
// its .eh_frame (through an SframeCache) and supplied to the module for
// that process (SFRAME_IOC_SUPPLY); a file with its own .sframe is left to
// the module's discovery, or, where discovery is off, its section is
// supplied from the file.  refresh() again picks up what was mapped since
// (dlopen).  The coverages of one recording share one table, so that a file
// many processes map is opened once.
#ifndef SFRAME_GEN_COVERAGE_H
#define SFRAME_GEN_COVERAGE_H

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sframe_client/device.h"
#include "sframe_gen/sframe_cache.h"
#include "sframe_object/maps.h"
#include "sframe_object/object_file.h"
#include "sframe_object/object_table.h"

namespace sframe {

// One object supplied to the module for a process.
struct CoveredObject {
  std::string path;      // as the process names it
  std::string build_id;  // hex, empty if none
  std::string key;       // ObjectFile::content_key(): the same file, whichever process maps it
  bool generated = false;                    // made from .eh_frame (else the file's .sframe)
  CacheResult cache = CacheResult::kHit;     // for generated ones: made now, or cached
  MappedVia via = MappedVia::kPath;          // how the file was opened (by whoever opened it)
};

struct CoverageUpdate {
  std::vector<std::string> generated;                       // supplied, made from .eh_frame
  std::vector<std::string> from_file;                       // supplied, the file's own .sframe
  std::vector<std::string> discovered;                      // own .sframe, left to discovery
  std::vector<std::string> present;                         // already covered (EEXIST)
  std::vector<std::pair<std::string, std::string>> failed;  // object, why
  std::vector<CoveredObject> covered;                       // generated + from_file, in detail
  uint64_t deferred = 0;  // objects whose generation the cache's gate refused: tried again
  uint64_t supplied_bytes = 0;
};

class ProcessCoverage {
 public:
  // cache may be null: sections are then made every time.  objects: the
  // recording's table, which must outlive this; null: one of its own.
  ProcessCoverage(const Device& dev, pid_t pid, SframeCache* cache,
                  ObjectTable* objects = nullptr);

  // Covers the executable file mappings not seen before (all of them again
  // after the process exec'd).  One object's failure (no .eh_frame, a
  // refusal of the module) goes to `failed` and does not stop the others;
  // a text range not (yet) mapped whole is tried again next time.  Throws
  // sframe::Error(op::kFindObject) when the process's maps cannot be read
  // (ESRCH: it is gone; EACCES).
  CoverageUpdate refresh();

  // Makes (into the cache) the SFrame of a program about to be started and
  // of what it will load first: its interpreter and its DT_NEEDED libraries
  // found in the system's library directories, so that the refresh after
  // its exec only supplies.  They are opened by path into the table, where
  // the refresh after its exec finds them by the (device, inode) it maps.
  // Best effort: failures are left for refresh().
  void prepare(const std::string& program);

 private:
  // Covers the file whose offset 0 the process maps as m (its object from
  // the table).
  void cover(const MapsEntry& m, CoverageUpdate* u);

  const Device& dev_;
  pid_t pid_;
  SframeCache* cache_;
  std::unique_ptr<ObjectTable> own_objects_;  // when none was given
  ObjectTable* objects_;
  bool discovery_;                                   // the module's parameter
  std::pair<uint64_t, uint64_t> exe_{0, 0};          // (dev, ino) of its program
  std::set<std::pair<std::string, uint64_t>> seen_;  // (file, address of offset 0)
};

// Whether the module discovers .sframe by itself (its `discovery`
// parameter); true if that cannot be read.
bool module_discovery_enabled();

}  // namespace sframe

#endif  // SFRAME_GEN_COVERAGE_H
