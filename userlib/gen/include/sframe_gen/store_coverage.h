// sframe-gen: covering files in the module's file store (SFRAME_IOC_FILE_*),
// the way sframe-coverd keeps a machine covered.
//
// A file given here gets one entry in the module: its own .sframe, or SFrame
// made from its .eh_frame (through an SframeCache), supplied for the file
// open (never for a path: the entry is the inode's whose bytes were read).
// Every mapping of that inode, in every process, is then covered by the
// module itself (discovery attaches the entry), with no per-process copy.
//
// StoreCoverage remembers what it did per file (device, inode as fstat()
// shows them; size and mtime as well): a file covered or failed is not
// looked at again while it is unchanged.  The module drops an entry when its
// file is written, truncated or deleted (its counter `file_invalidated`
// moves); sync() then lists the store and forgets the files whose entries
// are gone, so that their next mapping covers them anew.
//
// The status file (write_coverage_status(), read_coverage_status()) is how
// the service tells `sframe-client coverage` and sframe-prof what it did:
// a header line of counters, then one line per file.
#ifndef SFRAME_GEN_STORE_COVERAGE_H
#define SFRAME_GEN_STORE_COVERAGE_H

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sframe_client/device.h"
#include "sframe_gen/sframe_cache.h"
#include "sframe_object/object_file.h"

namespace sframe {

// What is known of one file.
struct StoreFile {
  enum class State { kCovered, kFailed, kDropped };
  State state = State::kFailed;
  uint64_t dev = 0, ino = 0;  // as fstat() of the file shows them
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t id = 0;            // the module's entry (kCovered; 0 if not known)
  std::string source;         // "generated", "own .sframe" (kCovered)
  uint64_t sframe_bytes = 0;  // the section supplied
  // Text bytes inside .eh_frame FDEs that have an SFrame row, per mille
  // (1000 for a file's own .sframe; kRowsUnknown for a section read from
  // the cache, which keeps no generation counts).
  static constexpr uint32_t kRowsUnknown = ~0u;
  uint32_t rows_permille = 1000;
  std::string reason;  // why not covered (kFailed, kDropped)
  std::string path;    // the path a process named it by
};

const char* to_string(StoreFile::State s);

// What StoreCoverage did since it was made.
struct StoreCoverageStats {
  uint64_t supplied = 0;     // entries made
  uint64_t present = 0;      // the store had one already (EEXIST)
  uint64_t failed = 0;       // files that could not be covered
  uint64_t dropped = 0;      // entries the module dropped (file changed) that sync() saw
  uint64_t supplied_bytes = 0;
  uint64_t syncs = 0;        // store listings
};

class StoreCoverage {
 public:
  // dev: an open device (the supplier needs CAP_SYS_ADMIN); cache: where
  // generated sections come from (must outlive this).
  StoreCoverage(const Device& dev, SframeCache* cache);

  // Whether the file st describes was covered, or failed, as it is now:
  // nothing to do for it.
  bool settled(const struct stat& st) const;

  // Covers the object: supplies its own .sframe, else SFrame made from its
  // .eh_frame, for the file open.  Never throws except sframe::Error
  // (EAGAIN) when the cache's gate refuses a generation for now; every
  // other failure is the file's state (kFailed and why).
  const StoreFile& cover(const ObjectFile& object);

  // When the module's invalidation counter moved since the last look (or
  // on the first call): lists the store and marks the files whose entries
  // are gone kDropped.  Returns how many were.  One ioctl when nothing
  // moved.  Throws sframe::Error (op::kGetStats, op::kFileList).
  size_t sync();

  // Every file looked at, by (dev, ino).
  const std::map<std::pair<uint64_t, uint64_t>, StoreFile>& files() const { return files_; }
  const StoreCoverageStats& stats() const { return stats_; }

 private:
  // The id of the store's entry for the file st describes, found by inode
  // and size in a listing (the module keys by the real inode, which
  // fstat() through an overlay may show under another device); 0 if none.
  uint64_t find_entry(const struct stat& st) const;

  const Device& dev_;
  SframeCache* cache_;
  std::map<std::pair<uint64_t, uint64_t>, StoreFile> files_;
  std::vector<FileInfo> listing_;  // the store's entries at the last sync()
  uint64_t invalidated_ = 0;
  bool synced_ = false;
  StoreCoverageStats stats_;
};

// ---- The service's status file ---------------------------------------------

// The header's counters, name -> value, in the order written.
using CoverageCounters = std::vector<std::pair<std::string, uint64_t>>;

struct CoverageStatus {
  CoverageCounters counters;
  std::vector<StoreFile> files;
  // The counter of that name; 0 if absent.
  uint64_t counter(const std::string& name) const;
};

// Writes the status to path through a temporary file and rename(), with
// the file mode given.  Throws sframe::Error(op::kWriteCache, path).
void write_coverage_status(const std::string& path, const CoverageStatus& status,
                           mode_t mode = 0600);
// Reads it back.  Throws sframe::Error(op::kOpen, path): the errno of
// open(); EBADMSG when it is not such a file.
CoverageStatus read_coverage_status(const std::string& path);

// Where the service keeps its files: `pid` (mode 0600, locked while it
// runs: only root can open it, so no user can hold a lock that keeps the
// service from starting), `status` (mode 0600: it names the files other
// users' processes map, which /proc shows only to them and to root) and
// `summary` (mode 0644: the status's counters alone, for everyone).
inline constexpr const char kCoverageStateDir[] = "/run/sframe-coverd";

// The pid of the coverage service running with state directory dir, or 0
// when none does: the pid its summary names, if that process is alive and
// is sframe-coverd (a summary left by a service gone names no such
// process).
pid_t coverage_service_pid(const std::string& dir = kCoverageStateDir);

}  // namespace sframe

#endif  // SFRAME_GEN_STORE_COVERAGE_H
