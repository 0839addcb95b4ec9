// sframe-coverd: keeps SFrame for every ELF file the machine runs in the
// module's file store (store_coverage.h), so that every process, from its
// first instruction, is unwound with it by whoever profiles it (sframe-prof,
// perf through the module, any session), with one copy per file.
//
// At start it covers every file mapped executable by a running process (the
// most mapped first), then the files processes mapped before (its list in
// the cache directory, mapped_files.h: a program run before is covered
// before it runs again), then every shared library in the dynamic linker's
// paths; then each new file the moment a process maps it executable.
//
// How it learns of new mappings: perf's PERF_RECORD_MMAP2 side-band
// records, from a system-wide dummy software event on each CPU, the way
// `perf record -a` learns of them.  Chosen over the alternatives the issue
// names:
//   - fanotify's FAN_OPEN_EXEC fires for execve() only: the dynamic loader
//     opens libraries with a plain open() and mmap()s them (and dlopen()
//     too), so libraries would need FAN_OPEN on every file of the machine,
//     most of them never mapped;
//   - a queue of notices in the module would be new kernel code on the
//     mmap path (a hook of our own there, allocations bounded and counted)
//     for what perf already gives on every kernel we support: a per-CPU
//     ring, written without blocking whatever the reader does, a record
//     lost counted (PERF_RECORD_LOST), each record waking the reader.
// A lost record is made good by reading /proc again (every process's maps),
// never by polling.
//
// Budget: one thread; generations from .eh_frame at most
// --generations-per-second (a burst of as many; sections read from the
// on-disk cache are not counted); at most --memory-mib of sections kept in
// memory (the module holds the copies that matter); a file looked at once
// while it is unchanged.  The systemd unit adds CPUQuota and MemoryMax.
#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <linux/capability.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "launch.h"
#include "mapped_files.h"
#include "sframe_client/sframe_client.hpp"
#include "sframe_gen/sframe_cache.h"
#include "sframe_gen/store_coverage.h"
#include "sframe_object/maps.h"
#include "sframe_object/object_file.h"

namespace {

constexpr char kTool[] = "sframe-coverd";

struct Options {
  bool once = false;
  bool cache_only = false;
  bool libraries = true;
  bool verbose = false;
  std::string state_dir = sframe::kCoverageStateDir;
  std::string cache_dir;
  std::vector<std::string> library_dirs;  // empty: the linker's paths
  uint64_t generations_per_second = 10;
  uint64_t memory_mib = 8;
};

int usage(FILE* out) {
  std::fprintf(out,
               "usage: sframe-coverd [--once [--cache-only]] [--no-libraries] [--state-dir DIR]\n"
               "                     [--cache-dir DIR] [--generations-per-second N]\n"
               "                     [--memory-mib N] [--library-dir DIR]... [-v]\n"
               "Keeps SFrame for every ELF file mapped on this machine in the sframe_unwind\n"
               "module's file store.  See sframe-coverd(8).\n");
  return out == stdout ? 0 : 2;
}

bool parse_u64(const char* s, uint64_t* v) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long x = std::strtoull(s, &end, 10);
  if (errno || end == s || *end) return false;
  *v = x;
  return true;
}

// The directories the dynamic linker searches: /etc/ld.so.conf and what it
// includes, then the built-in ones.  Each once (by inode: /lib is /usr/lib
// on a merged /usr).
void read_ld_conf(const std::string& path, int depth, std::vector<std::string>* dirs) {
  if (depth > 8) return;  // includes including themselves
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    const size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos) continue;
    line = line.substr(b, line.find_last_not_of(" \t") - b + 1);
    if (line.rfind("include", 0) == 0 && line.size() > 7 && (line[7] == ' ' || line[7] == '\t')) {
      std::string pattern = line.substr(line.find_first_not_of(" \t", 7));
      if (pattern[0] != '/') pattern = path.substr(0, path.rfind('/') + 1) + pattern;
      glob_t g{};
      if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) read_ld_conf(g.gl_pathv[i], depth + 1, dirs);
      }
      ::globfree(&g);
    } else if (line[0] == '/') {
      dirs->push_back(line);
    }
  }
}

std::vector<std::string> linker_directories() {
  std::vector<std::string> dirs;
  read_ld_conf("/etc/ld.so.conf", 0, &dirs);
  for (const char* d : {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64",
                        "/usr/lib64", "/lib", "/usr/lib"}) {
    dirs.push_back(d);
  }
  std::set<std::pair<dev_t, ino_t>> seen;
  std::vector<std::string> out;
  for (const std::string& d : dirs) {
    struct stat st;
    if (::stat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (seen.insert({st.st_dev, st.st_ino}).second) out.push_back(d);
  }
  return out;
}

// The shared libraries of one directory (names with ".so"; the ELF check is
// the object's).
std::vector<std::string> libraries_in(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    const size_t so = name.find(".so");
    if (so == std::string::npos || (so + 3 != name.size() && name[so + 3] != '.')) continue;
    out.push_back(dir + "/" + name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// A file to look at: mapped by pid at [start, end) (pid 0: only a path).
struct Candidate {
  pid_t pid = 0;
  uint64_t start = 0, end = 0;
  std::string path;
};

class Service {
 public:
  explicit Service(const Options& o)
      : o_(o),
        cache_(o.cache_dir.empty() ? sframe::default_cache_dir() : o.cache_dir,
               o.memory_mib << 20),
        mapped_list_(cache_.dir() + "/coverd-mapped-files"),
        generations_(o.generations_per_second) {
    if (!o.once) cache_.set_generation_gate([this] { return generations_.take(); });
  }

  int run();

 private:
  void lock_state_dir();
  void scan_processes();
  void scan_libraries();
  void read_events();
  // Looks at one candidate; false when a generation was put off.
  bool look_at(const Candidate& c);
  void write_status(bool force);
  // Remembers the path of a file a process mapped, when this process sees
  // the same file by it (st: the mapped file).
  void remember(const Candidate& c, const struct stat& st);
  void save_mapped_list(bool force);
  void log(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

  Options o_;
  sframe::Device dev_;
  sframe::SframeCache cache_;
  tools::MappedFileList mapped_list_;
  std::unique_ptr<sframe::StoreCoverage> store_;
  sframe::PerfEvent events_;
  sframe::UniqueFd pid_file_, signals_;
  // Mapped files first (a process is waiting for them), libraries after.
  std::deque<Candidate> mapped_, libraries_;
  tools::RateBound generations_;
  uint64_t events_seen_ = 0, lost_seen_ = 0, rescans_ = 0, deferred_ = 0, skipped_ = 0;
  uint64_t mapped_before_ = 0;  // candidates from the list at start
  bool list_error_logged_ = false;
  uint64_t started_ = uint64_t(std::time(nullptr));
  uint64_t status_at_ms_ = 0;
  bool dirty_ = true;
  bool stop_ = false;
};

void Service::log(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "%s: ", kTool);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
}

void Service::lock_state_dir() {
  if (::mkdir(o_.state_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    throw sframe::Error(errno, sframe::op::kOpen, o_.state_dir, "cannot make the state directory");
  }
  const std::string path = o_.state_dir + "/pid";
  // Root's alone: a lock another user could take would keep the service
  // from starting.
  pid_file_ = sframe::UniqueFd::open(path, O_RDWR | O_CREAT | O_NOFOLLOW, 0600);
  if (::fchmod(pid_file_.get(), 0600) != 0) throw sframe::Error(errno, sframe::op::kOpen, path);
  if (::flock(pid_file_.get(), LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    throw sframe::Error(err, sframe::op::kOpen, path,
                        err == EWOULDBLOCK ? "another sframe-coverd runs with this state directory"
                                           : "cannot lock it");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(pid_file_.get(), 0) != 0 ||
      ::pwrite(pid_file_.get(), pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
    throw sframe::Error(errno, sframe::op::kWriteCache, path);
  }
}

void Service::scan_processes() {
  // (dev, inode) of a maps line -> its mappings; the files most processes
  // map go first (libc, the loader: one section serves them all).
  std::map<std::pair<uint64_t, uint64_t>, std::vector<Candidate>> files;
  DIR* d = ::opendir("/proc");
  if (!d) return;
  const pid_t self = ::getpid();
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end || pid <= 0 || pid == self) continue;
    std::vector<sframe::MapsEntry> maps;
    try {
      maps = sframe::read_maps(pid_t(pid));
    } catch (const sframe::Error&) {
      continue;  // gone meanwhile
    }
    for (const sframe::MapsEntry& m : maps) {
      if (!m.executable() || !m.is_file()) continue;
      std::vector<Candidate>& c = files[{uint64_t(m.dev()), m.inode}];
      if (c.empty() || c.back().pid != pid_t(pid)) c.push_back({pid_t(pid), m.start, m.end, m.name()});
    }
  }
  ::closedir(d);
  std::vector<const std::vector<Candidate>*> order;
  for (const auto& kv : files) order.push_back(&kv.second);
  std::stable_sort(order.begin(), order.end(),
                   [](auto* a, auto* b) { return a->size() > b->size(); });
  // One candidate per file; a second in case the first process is gone.
  for (const auto* c : order) {
    mapped_.push_back(c->front());
    if (c->size() > 1) mapped_.push_back((*c)[1]);
  }
  rescans_++;
}

// The directories whose libraries are covered at start.
std::vector<std::string> library_directories(const Options& o) {
  return o.library_dirs.empty() ? linker_directories() : o.library_dirs;
}

void Service::scan_libraries() {
  for (const std::string& dir : library_directories(o_)) {
    for (std::string& lib : libraries_in(dir)) libraries_.push_back({0, 0, 0, std::move(lib)});
  }
}

void Service::read_events() {
  std::vector<sframe::TaskEvent> evs;
  events_.read_task_events(&evs);
  for (sframe::TaskEvent& ev : evs) {
    if (ev.kind != sframe::TaskEvent::Kind::kMmap || ev.name.empty() || ev.name[0] != '/') continue;
    events_seen_++;
    dirty_ = true;  // the counters
    mapped_.push_back({pid_t(ev.pid), ev.start, ev.start + ev.len, std::move(ev.name)});
  }
  if (events_.counts().lost != lost_seen_) {
    // The ring overflowed: some mappings were never told.  The processes'
    // maps say what they are.
    log("%" PRIu64 " mmap records lost: reading every process's maps again",
        events_.counts().lost - lost_seen_);
    lost_seen_ = events_.counts().lost;
    scan_processes();
  }
}

bool Service::look_at(const Candidate& c) {
  // The file as the process maps it (its map_files entry: the inode, in
  // whatever namespace); else the path as this process sees it, which
  // covers the file there, whichever it is (the module keys by inode: a
  // section is only ever used for the inode it was made from).
  const std::string way = c.pid ? sframe::map_files_path(c.pid, c.start, c.end) : std::string();
  struct stat st;
  bool via_process = !way.empty() && ::stat(way.c_str(), &st) == 0;
  if (!via_process && ::stat(c.path.c_str(), &st) != 0) {
    skipped_++;
    return true;  // gone
  }
  if (!S_ISREG(st.st_mode)) return true;
  if (c.pid != 0) remember(c, st);
  if (store_->settled(st)) return true;
  std::unique_ptr<sframe::ObjectFile> object;
  try {
    object = std::make_unique<sframe::ObjectFile>(
        via_process ? sframe::ObjectFile::open_mapped(c.pid, c.start, c.end, c.path, st.st_ino)
                    : sframe::ObjectFile::open(c.path));
  } catch (const sframe::Error& e) {
    if (!via_process && c.pid == 0 && e.err() == ENOEXEC) return true;  // a linker script
    if (o_.verbose) log("%s", e.what());
    skipped_++;
    return true;
  }
  try {
    const sframe::StoreFile& f = store_->cover(*object);
    dirty_ = true;
    // A large library's generation takes tens of MB for a moment: given
    // back, not kept in malloc's heap for the service's idle life.
    ::malloc_trim(0);
    if (o_.verbose) {
      if (f.state == sframe::StoreFile::State::kCovered) {
        log("%s: covered (%s, %" PRIu64 " bytes, entry %" PRIu64 ")", f.path.c_str(),
            f.source.c_str(), f.sframe_bytes, f.id);
      } else {
        log("%s: not covered: %s", f.path.c_str(), f.reason.c_str());
      }
    }
  } catch (const sframe::Error& e) {
    if (e.err() != EAGAIN) throw;
    deferred_++;
    return false;
  }
  return true;
}

void Service::remember(const Candidate& c, const struct stat& st) {
  struct stat by_path;
  if (::stat(c.path.c_str(), &by_path) != 0 || by_path.st_dev != st.st_dev ||
      by_path.st_ino != st.st_ino) {
    return;  // another mount namespace's file, or replaced since
  }
  mapped_list_.note(c.path, uint64_t(std::time(nullptr)));
}

void Service::save_mapped_list(bool force) {
  try {
    mapped_list_.save(tools::now_ms(), force);
  } catch (const sframe::Error& e) {
    // Said once: the next start then covers those files when mapped, as
    // without the list.
    if (!list_error_logged_) log("%s", e.what());
    list_error_logged_ = true;
  }
}

void Service::write_status(bool force) {
  const uint64_t now = tools::now_ms();
  if (!force && (!dirty_ || now - status_at_ms_ < 1000)) return;
  status_at_ms_ = now;
  dirty_ = false;
  sframe::CoverageStatus s;
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  uint64_t rss_kb = 0;
  {
    std::ifstream statm("/proc/self/statm");
    uint64_t size = 0, resident = 0;
    if (statm >> size >> resident) rss_kb = resident * uint64_t(::sysconf(_SC_PAGESIZE)) / 1024;
  }
  const sframe::StoreCoverageStats& st = store_->stats();
  const sframe::CacheStats& cs = cache_.stats();
  uint64_t covered = 0, failed = 0, dropped = 0;
  for (const auto& kv : store_->files()) {
    switch (kv.second.state) {
      case sframe::StoreFile::State::kCovered: covered++; break;
      case sframe::StoreFile::State::kFailed: failed++; break;
      case sframe::StoreFile::State::kDropped: dropped++; break;
    }
    s.files.push_back(kv.second);
  }
  s.counters = {{"pid", uint64_t(::getpid())},
                {"started", started_},
                {"written", uint64_t(std::time(nullptr))},
                {"covered", covered},
                {"failed", failed},
                {"dropped", dropped},
                {"supplied", st.supplied},
                {"supplied_bytes", st.supplied_bytes},
                {"present", st.present},
                {"generated", cs.generated},
                {"cache_reads", cs.disk_hits},
                {"deferred", deferred_},
                {"skipped", skipped_},  // mappings gone, or whose file would not open
                {"mmap_records", events_seen_},
                {"mmap_records_lost", lost_seen_},
                {"process_scans", rescans_},
                {"mapped_before", mapped_before_},  // from the list, at start
                {"mapped_list", uint64_t(mapped_list_.size())},
                {"waiting", uint64_t(mapped_.size() + libraries_.size())},
                {"cpu_ms", uint64_t(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
                               uint64_t(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000},
                {"rss_kb", rss_kb},
                {"max_rss_kb", uint64_t(ru.ru_maxrss)}};
  try {
    // The files (other users' paths among them) for root; the counters,
    // which say the service runs, for everyone.
    sframe::write_coverage_status(o_.state_dir + "/status", s, 0600);
    s.files.clear();
    sframe::write_coverage_status(o_.state_dir + "/summary", s, 0644);
  } catch (const sframe::Error& e) {
    log("%s", e.what());
  }
}

// Whether this process has capability cap in its effective set.
bool has_capability(int cap) {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2]{};
  if (::syscall(SYS_capget, &h, d) != 0) return false;
  return (d[cap / 32].effective >> (cap % 32)) & 1;
}

int Service::run() {
  // Said at once, not as a failure per file: every supply would be EPERM.
  if (!has_capability(CAP_SYS_ADMIN)) {
    throw sframe::Error(EPERM, "start", "",
                        "sframe-coverd needs CAP_SYS_ADMIN (run it as root): the module's file "
                        "store takes sections from CAP_SYS_ADMIN only, and the system-wide perf "
                        "events that tell of new mappings need it (or CAP_PERFMON) too");
  }
  lock_state_dir();
  store_ = std::make_unique<sframe::StoreCoverage>(dev_, &cache_);
  if (!o_.once) {
    // Before the scans: a mapping made while they run is told, not missed.
    sframe::PerfEventSpec spec;
    spec.all_tasks = true;
    spec.task_events = true;
    spec.data_pages_log2 = 6;  // 256 KiB per CPU: some 2,000 records
    events_ = sframe::PerfEvent::open(spec);
    events_.enable();
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    ::sigprocmask(SIG_BLOCK, &mask, nullptr);
    signals_.reset(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!signals_) throw sframe::Error(errno, "signalfd", "");
  }
  store_->sync();
  write_status(true);  // the service is there for sframe-prof from now on
  scan_processes();
  const size_t mapped_now = mapped_.size();
  for (std::string& path : mapped_list_.load()) mapped_.push_back({0, 0, 0, std::move(path)});
  mapped_before_ = mapped_.size() - mapped_now;
  if (o_.libraries) scan_libraries();
  log("started: %zu mapped files, %" PRIu64 " mapped before and %zu libraries to look at",
      mapped_now, mapped_before_, libraries_.size());
  bool announced = false;
  uint64_t retry_at_ms = 0;
  while (!stop_) {
    const bool work = !mapped_.empty() || !libraries_.empty();
    if (o_.once && !work) break;
    if (!o_.once) {
      std::vector<pollfd> fds;
      fds.push_back({signals_.get(), POLLIN, 0});
      for (size_t i = 0; i < events_.size(); i++) fds.push_back({events_.fd(i), POLLIN, 0});
      int timeout = -1;
      const uint64_t now = tools::now_ms();
      if (work) timeout = retry_at_ms > now ? int(retry_at_ms - now) : 0;
      if (dirty_) timeout = timeout < 0 ? 1000 : std::min(timeout, 1000);
      // Idle: the store's invalidation counter read every 5 s (one ioctl),
      // so that the status says which entries the module dropped.
      if (timeout < 0) timeout = 5000;
      if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
        throw sframe::Error(errno, "poll", "");
      }
      signalfd_siginfo si;
      while (::read(signals_.get(), &si, sizeof(si)) == ssize_t(sizeof(si))) {
        if (si.ssi_signo == SIGHUP) {
          log("SIGHUP: reading every process's maps and the linker's paths again");
          scan_processes();
          if (o_.libraries) scan_libraries();
        } else {
          stop_ = true;
        }
      }
      read_events();
    }
    // The module dropped entries (a file written or deleted): their files
    // are covered again when mapped next, and the status says so.  (One
    // ioctl when nothing was dropped; on a machine with nothing mapped the
    // next record or `sframe-client coverage`, which lists the store
    // itself, tells.)
    if (store_->sync()) dirty_ = true;
    // Work for at most 50 ms, then read the records again.
    const uint64_t until = tools::now_ms() + 50;
    while (!stop_ && tools::now_ms() < until && (!mapped_.empty() || !libraries_.empty())) {
      if (tools::now_ms() < retry_at_ms) break;
      std::deque<Candidate>& q = !mapped_.empty() ? mapped_ : libraries_;
      const Candidate c = q.front();
      q.pop_front();
      if (!look_at(c)) {
        q.push_front(c);  // its generation waits for a token
        retry_at_ms = tools::now_ms() + 1000 / std::max<uint64_t>(o_.generations_per_second, 1);
        break;
      }
    }
    if (!announced && mapped_.empty()) {
      announced = true;
      write_status(true);
      log("the files mapped at start are covered (and those mapped before): %zu files known",
          store_->files().size());
    }
    write_status(false);
    save_mapped_list(false);
  }
  save_mapped_list(true);
  write_status(true);
  ::unlink((o_.state_dir + "/summary").c_str());  // gone: no reader relies on it
  const sframe::StoreCoverageStats& st = store_->stats();
  log("stopping: %" PRIu64 " sections supplied (%" PRIu64 " bytes), %" PRIu64
      " present already, %" PRIu64 " files not covered",
      st.supplied, st.supplied_bytes, st.present, st.failed);
  return 0;
}

// --once --cache-only: the sections of the linker's libraries made into the
// on-disk cache (after an upgrade: the dpkg trigger), the module untouched.
int fill_cache(const Options& o) {
  sframe::SframeCache cache(o.cache_dir.empty() ? sframe::default_cache_dir() : o.cache_dir,
                            o.memory_mib << 20);
  uint64_t made = 0, read = 0, failed = 0, unstored = 0;
  std::set<std::pair<dev_t, ino_t>> seen;  // a library and its links: once
  for (const std::string& dir : library_directories(o)) {
    for (const std::string& lib : libraries_in(dir)) {
      struct stat st;
      if (::stat(lib.c_str(), &st) != 0 || !seen.insert({st.st_dev, st.st_ino}).second) continue;
      try {
        const sframe::ObjectFile object = sframe::ObjectFile::open(lib);
        if (object.layout().has_sframe) continue;
        sframe::CacheResult r;
        cache.get(object, &r);
        (r == sframe::CacheResult::kHit        ? read
         : r == sframe::CacheResult::kUncached ? unstored
                                               : made)++;
      } catch (const sframe::Error& e) {
        if (e.err() == ENOEXEC) continue;  // linker scripts, not ELF
        failed++;
        if (o.verbose) std::fprintf(stderr, "%s: %s\n", kTool, e.what());
      }
    }
  }
  std::fprintf(stderr, "%s: cache %s: %" PRIu64 " sections made, %" PRIu64
               " up to date, %" PRIu64 " made but not stored (the directory cannot be written), %" PRIu64
               " libraries without SFrame\n",
               kTool, cache.dir().c_str(), made, read, unstored, failed);
  return unstored ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    auto value = [&](uint64_t* v) {
      return i + 1 < argc && parse_u64(argv[++i], v);
    };
    if (a == "--once") {
      o.once = true;
    } else if (a == "--cache-only") {
      o.cache_only = true;
    } else if (a == "--no-libraries") {
      o.libraries = false;
    } else if (a == "-v" || a == "--verbose") {
      o.verbose = true;
    } else if (a == "--state-dir" && i + 1 < argc) {
      o.state_dir = argv[++i];
    } else if (a == "--library-dir" && i + 1 < argc) {
      o.library_dirs.push_back(argv[++i]);
    } else if (a == "--cache-dir" && i + 1 < argc) {
      o.cache_dir = argv[++i];
    } else if (a == "--generations-per-second") {
      if (!value(&o.generations_per_second) || !o.generations_per_second) return usage(stderr);
    } else if (a == "--memory-mib") {
      if (!value(&o.memory_mib) || !o.memory_mib || o.memory_mib > 4096) return usage(stderr);
    } else if (a == "-h" || a == "--help") {
      return usage(stdout);
    } else {
      return usage(stderr);
    }
  }
  if (o.cache_only && !o.once) return usage(stderr);
  try {
    if (o.cache_only) return fill_cache(o);
    Service s(o);
    return s.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kTool, e.what());
    return 1;
  }
}
