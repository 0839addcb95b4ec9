// What `sframe-prof record -a` supplies: SFrame made from .eh_frame for the
// objects of every process it samples, the ones that start while it records
// included, within bounds on the work and memory it spends.
//
// The processes running when the recording starts are covered first (a
// /proc scan); a process started since is covered when a scan (every
// 100 ms) or a sample first shows it, so only its samples taken before that
// may stop early; a sampled process's maps are read again at
// most every 250 ms (exec, dlopen), every 20 ms in its first 500 ms.  Each
// object is opened once for the recording, through the first process seen
// mapping it (ObjectTable: map_files, or its root), and its section is made
// once per file, whatever the number of processes that map it (SframeCache
// keeps the sections in memory, bounded in bytes, and on disk by build id).
#ifndef SFRAME_TOOLS_MACHINE_COVERAGE_H
#define SFRAME_TOOLS_MACHINE_COVERAGE_H

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "launch.h"
#include "sframe_client/sframe_client.hpp"
#include "sframe_gen/coverage.h"
#include "sframe_gen/sframe_cache.h"
#include "sframe_object/object_table.h"

namespace tools {

struct MachineCoverageLimits {
  uint64_t max_processes = 4096;        // processes covered at once at most (the rest counted)
  uint64_t generations_per_second = 20; // .eh_frame generations (a burst of as many)
  uint64_t memory_bytes = sframe::SframeCache::kDefaultMemoryLimit;  // sections held
  uint64_t refresh_ms = 250;            // a sampled process's maps read again at most this often
  uint64_t eager_ms = 500;              // ... but in its first eager_ms (exec, loader) every
  uint64_t eager_refresh_ms = 20;       //     eager_refresh_ms
  uint64_t pass_ms = 50;                // one refresh() call starts no generation after this
  uint64_t scan_ms = 100;               // /proc read again for new processes this often
};

// What was done, for the summary.
struct MachineCoverageStats {
  uint64_t processes_seen = 0;     // distinct processes looked at
  uint64_t processes_covered = 0;  // with at least one object supplied (or already covered)
  uint64_t supplies = 0;           // sections supplied (objects x processes)
  uint64_t supplied_bytes = 0;
  uint64_t deferred = 0;  // generations put off by the bounds (done in a later pass)
  // Distinct objects (files) supplied, and of those: made from .eh_frame
  // (then generated or read from the cache), with their own .sframe.
  std::set<std::string> objects, generated_objects, own_sframe_objects;
  std::map<std::string, uint64_t> skipped;  // reason -> objects or processes
  uint64_t via_map_files = 0, via_root = 0;  // how the objects were opened
};

class MachineCoverage {
 public:
  // objects: the recording's table (must outlive this).
  MachineCoverage(const std::string& tool, bool verbose, sframe::ObjectTable* objects,
                  MachineCoverageLimits limits = {});
  // The processes running now (from /proc): the new ones are due for
  // coverage, the ones gone are forgotten.  Also every limits.scan_ms by
  // refresh(): a process started since is covered within that time even
  // before its first sample is read (which may come 250 ms after it).
  void scan();
  // Covers the processes running now before the recording starts, for at
  // most budget_ms (the rest is done while it records): first the SFrame of
  // the objects the most processes map, then process by process.
  void prepare(uint64_t budget_ms);
  // A sample of pid was read: a new process becomes due, a known one due
  // again once its refresh_ms have passed.
  void note_sample(pid_t pid);
  // Covers what is due, for at most limits.pass_ms.  Never throws.
  void refresh();
  // Whether processes are waiting to be covered (the caller polls sooner).
  bool busy() const { return !urgent_.empty() || !backlog_.empty(); }
  const MachineCoverageStats& stats() const { return stats_; }
  // "covered N processes, M objects (...), skipped S: reasons".
  std::string summary() const;

 private:
  struct Proc {
    std::unique_ptr<sframe::ProcessCoverage> coverage;
    uint64_t first_ms = 0;  // when first seen
    uint64_t next_ms = 0;   // not refreshed again before
    bool next_ms_is_retry = false;  // generations were put off: again at next_ms unasked
    bool in_urgent = false, in_backlog = false;
    bool urgent = false;    // last taken from urgent_ (its retries go there too)
    bool counted = false;   // in processes_covered
  };
  Proc* add(pid_t pid);  // null when not to be covered
  void enqueue(pid_t pid, Proc* p, bool urgent);
  bool take_generation();
  void skip(const std::string& reason) { stats_.skipped[reason]++; }
  void cover(pid_t pid, Proc* p);

  std::string tool_;
  bool verbose_;
  MachineCoverageLimits limits_;
  sframe::Device dev_;
  sframe::ObjectTable* objects_;
  sframe::SframeCache cache_;
  std::map<pid_t, Proc> procs_;
  std::set<pid_t> refused_;  // over max_processes, or not coverable (kernel threads)
  // Due for coverage: sampled or new since the start first, then the
  // processes running at the start; and the ones whose generations wait.
  std::deque<pid_t> urgent_, backlog_;
  std::set<pid_t> retry_;
  tools::RateBound generations_;
  uint64_t next_scan_ms_ = 0;
  uint64_t pass_deadline_ns_ = 0;  // generations refused after it
  pid_t self_;
  MachineCoverageStats stats_;
};

}  // namespace tools

#endif  // SFRAME_TOOLS_MACHINE_COVERAGE_H
