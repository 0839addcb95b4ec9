#include "machine_coverage.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <vector>

#include "launch.h"
#include "sframe_object/maps.h"
#include "sframe_object/object_file.h"

namespace tools {
namespace {

// The reason of a message "OP OBJECT: WHY (EXXX)": WHY (EXXX), without the
// object (so that objects failing alike count together).
std::string reason_of(const std::string& object, const std::string& what) {
  const size_t at = what.find(object + ": ");
  if (at != std::string::npos) return what.substr(at + object.size() + 2);
  const size_t colon = what.rfind(": ");
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

// A kernel thread maps nothing: its maps are empty.
bool is_kernel_thread(pid_t pid) {
  try {
    return sframe::read_maps(pid).empty();
  } catch (const sframe::Error&) {
    return false;  // gone, or not ours: its refresh says so
  }
}

}  // namespace

MachineCoverage::MachineCoverage(const std::string& tool, bool verbose,
                                 sframe::ObjectTable* objects, MachineCoverageLimits limits)
    : tool_(tool),
      verbose_(verbose),
      limits_(limits),
      objects_(objects),
      cache_(sframe::default_cache_dir(), limits.memory_bytes),
      generations_(limits.generations_per_second),
      self_(::getpid()) {
  cache_.set_generation_gate([this] { return take_generation(); });
}

bool MachineCoverage::take_generation() {
  const uint64_t now = now_ns();
  // The pass's time is spent: the rest waits for the next pass (a
  // generation takes milliseconds, tens of them for a large library, more
  // under emulation; samples are read between passes).
  if (now >= pass_deadline_ns_) return false;
  return generations_.take();
}

void MachineCoverage::scan() {
  DIR* d = ::opendir("/proc");
  if (!d) return;
  std::set<pid_t> live;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end || pid <= 0 || pid > INT32_MAX) continue;
    live.insert(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  // The processes gone since the last scan are forgotten (their numbers may
  // come back as other processes); the new ones are due.
  for (auto it = procs_.begin(); it != procs_.end();) {
    it = live.count(it->first) ? std::next(it) : procs_.erase(it);
  }
  for (auto it = refused_.begin(); it != refused_.end();) {
    it = live.count(*it) ? std::next(it) : refused_.erase(it);
  }
  // The processes running at the start wait behind the ones sampled; a
  // process started since (found by a later scan) goes first.
  const bool initial = next_scan_ms_ == 0;
  for (pid_t pid : live) {
    if (procs_.count(pid)) continue;
    if (Proc* p = add(pid)) enqueue(pid, p, !initial);
  }
  next_scan_ms_ = now_ms() + limits_.scan_ms;
}

MachineCoverage::Proc* MachineCoverage::add(pid_t pid) {
  if (pid <= 0 || pid == self_ || refused_.count(pid)) return nullptr;
  auto it = procs_.find(pid);
  if (it != procs_.end()) return &it->second;
  if (procs_.size() >= limits_.max_processes) {
    refused_.insert(pid);
    skip("processes over the bound of " + std::to_string(limits_.max_processes));
    return nullptr;
  }
  stats_.processes_seen++;
  Proc& p = procs_[pid];
  p.first_ms = now_ms();
  return &p;
}

void MachineCoverage::enqueue(pid_t pid, Proc* p, bool urgent) {
  if (urgent && !p->in_urgent) {
    p->in_urgent = true;
    urgent_.push_back(pid);
  } else if (!urgent && !p->in_backlog) {
    p->in_backlog = true;
    backlog_.push_back(pid);
  }
}

void MachineCoverage::note_sample(pid_t pid) {
  Proc* p = add(pid);
  if (p && now_ms() >= p->next_ms) enqueue(pid, p, true);
}

void MachineCoverage::cover(pid_t pid, Proc* p) {
  if (!p->coverage) {
    p->coverage = std::make_unique<sframe::ProcessCoverage>(dev_, pid, &cache_, objects_);
  }
  const uint64_t t0 = now_ns();
  const sframe::CoverageUpdate u = p->coverage->refresh();
  stats_.supplies += u.covered.size();
  stats_.supplied_bytes += u.supplied_bytes;
  stats_.deferred += u.deferred;
  for (const sframe::CoveredObject& c : u.covered) {
    stats_.objects.insert(c.key);
    (c.generated ? stats_.generated_objects : stats_.own_sframe_objects).insert(c.key);
    (c.via == sframe::MappedVia::kMapFiles ? stats_.via_map_files : stats_.via_root)++;
  }
  for (const auto& [object, why] : u.failed) {
    skip(reason_of(object, why));
    if (verbose_) {
      std::fprintf(stderr, "%s: %s not covered in pid %d: %s\n", tool_.c_str(), object.c_str(),
                   static_cast<int>(pid), why.c_str());
    }
  }
  if (!p->counted && (!u.covered.empty() || !u.present.empty() || !u.discovered.empty())) {
    p->counted = true;
    stats_.processes_covered++;
  }
  if (verbose_ && !u.covered.empty()) {
    const uint64_t t1 = now_ns();
    std::fprintf(stderr,
                 "%s: supplied SFrame for %zu objects (%zu made from .eh_frame), %" PRIu64
                 " bytes, at %" PRIu64 ".%09" PRIu64 ", pid %d, in %.1f ms\n",
                 tool_.c_str(), u.covered.size(), u.generated.size(), u.supplied_bytes,
                 t1 / 1000000000u, t1 % 1000000000u, static_cast<int>(pid),
                 double(t1 - t0) / 1e6);
  }
  // Refused generations: again soon.  A process new to us may still be
  // exec'ing or mapping its libraries: read often at first.
  const uint64_t now = now_ms();
  p->next_ms_is_retry = u.deferred != 0;
  p->next_ms = now + (u.deferred                                ? limits_.eager_refresh_ms
                      : now - p->first_ms < limits_.eager_ms ? limits_.eager_refresh_ms
                                                               : limits_.refresh_ms);
}

void MachineCoverage::refresh() {
  if (now_ms() >= next_scan_ms_) scan();
  // Generations put off by the rate bound: again once their time came.
  for (auto it = retry_.begin(); it != retry_.end();) {
    auto p = procs_.find(*it);
    if (p == procs_.end()) {
      it = retry_.erase(it);
    } else if (now_ms() >= p->second.next_ms) {
      enqueue(*it, &p->second, p->second.urgent);
      it = retry_.erase(it);
    } else {
      ++it;
    }
  }
  pass_deadline_ns_ = now_ns() + limits_.pass_ms * 1000000u;
  while ((!urgent_.empty() || !backlog_.empty()) && now_ns() < pass_deadline_ns_) {
    const bool urgent = !urgent_.empty();
    const pid_t pid = urgent ? urgent_.front() : backlog_.front();
    (urgent ? urgent_ : backlog_).pop_front();
    auto it = procs_.find(pid);
    if (it == procs_.end()) continue;  // gone, and forgotten by scan()
    Proc& p = it->second;
    (urgent ? p.in_urgent : p.in_backlog) = false;
    p.urgent = urgent;
    if (now_ms() < p.next_ms) continue;  // done meanwhile, through the other queue
    if (!p.coverage && is_kernel_thread(pid)) {
      procs_.erase(it);
      refused_.insert(pid);
      stats_.processes_seen--;
      continue;
    }
    try {
      cover(pid, &p);
      if (p.next_ms_is_retry) retry_.insert(pid);
    } catch (const sframe::Error& e) {
      // Its maps cannot be read: gone (ESRCH, ENOENT), or not ours (EACCES).
      if (!p.counted) {
        skip(e.err() == EACCES || e.err() == EPERM
                 ? "processes whose maps may not be read (" + sframe::errno_name(e.err()) + ")"
                 : "processes gone before they were covered");
      }
      procs_.erase(it);
    }
  }
}

void MachineCoverage::prepare(uint64_t budget_ms) {
  const uint64_t until_ms = now_ms() + budget_ms;
  scan();
  // The objects most processes map first (libc, the loader): made once,
  // they serve every process, the ones that start later too.
  struct Users {
    pid_t pid = 0;
    sframe::MapsEntry first;  // pid's first executable mapping of it
    std::set<pid_t> pids;
  };
  std::map<std::pair<std::string, uint64_t>, Users> objects;  // (path, inode)
  for (const auto& kv : procs_) {
    std::vector<sframe::MapsEntry> maps;
    try {
      maps = sframe::read_maps(kv.first);
    } catch (const sframe::Error&) {
      continue;  // gone, or not ours: its refresh says so
    }
    for (const sframe::MapsEntry& m : maps) {
      if (!m.executable() || !m.is_file()) continue;
      Users& u = objects[{m.name(), m.inode}];
      if (u.pids.insert(kv.first).second && u.pid == 0) {
        u.pid = kv.first;
        u.first = m;
      }
    }
  }
  std::vector<std::pair<size_t, const std::pair<std::string, uint64_t>*>> order;
  for (const auto& kv : objects) order.emplace_back(kv.second.pids.size(), &kv.first);
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  pass_deadline_ns_ = now_ns() + budget_ms * 1000000u;
  for (const auto& [users, key] : order) {
    if (now_ms() >= until_ms) break;
    const Users& u = objects[*key];
    try {
      // Into the table, where each process's coverage finds it.
      const std::shared_ptr<const sframe::ObjectFile> object =
          objects_->open_mapped(u.pid, u.first);
      if (!object->layout().has_sframe) cache_.get(*object);
    } catch (const sframe::Error&) {
      // Said by the process's refresh, if it matters.
    }
  }
  while (busy() && now_ms() < until_ms) refresh();
}

std::string MachineCoverage::summary() const {
  const sframe::CacheStats& cs = cache_.stats();
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "covered %" PRIu64 " processes, %zu objects (%zu made from .eh_frame: %" PRIu64
                " generated, %" PRIu64 " read from the cache, %" PRIu64
                " reused in memory; %zu with their own .sframe), %" PRIu64 " sections supplied, %" PRIu64
                " bytes; opened via map_files %" PRIu64 ", via the process's root %" PRIu64,
                stats_.processes_covered, stats_.objects.size(), stats_.generated_objects.size(),
                cs.generated, cs.disk_hits, cs.memory_hits, stats_.own_sframe_objects.size(),
                stats_.supplies, stats_.supplied_bytes, stats_.via_map_files, stats_.via_root);
  std::string s = buf;
  uint64_t skipped = 0;
  for (const auto& kv : stats_.skipped) skipped += kv.second;
  s += "; skipped " + std::to_string(skipped);
  const char* sep = ": ";
  for (const auto& [why, n] : stats_.skipped) {
    s += sep + std::to_string(n) + " " + why;
    sep = ", ";
  }
  if (stats_.deferred) {
    s += "; " + std::to_string(stats_.deferred) + " generations put off by the bounds (" +
         std::to_string(limits_.generations_per_second) + "/s, " +
         std::to_string(limits_.pass_ms) + " ms per pass)";
  }
  if (cs.evicted) {
    s += "; " + std::to_string(cs.evicted) + " sections dropped from memory (bound " +
         std::to_string(limits_.memory_bytes >> 20) + " MiB)";
  }
  return s;
}

}  // namespace tools
