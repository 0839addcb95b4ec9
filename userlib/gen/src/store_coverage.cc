#include "sframe_gen/store_coverage.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <climits>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "sframe_client/error.h"
#include "sframe_client/fd.h"
#include "sframe_client/sframe_format.h"
#include "sframe_gen/supply.h"
#include "sframe_object/elf_file.h"

namespace sframe {
namespace {

int64_t mtime_ns_of(const struct stat& st) {
  return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// The part of an error's message after "OBJECT: " (the object is the
// file's line already): what a reader of `sframe-client coverage` needs.
std::string reason_of(const Error& e) {
  if (e.err() == ENODATA && e.op() == op::kGenerate &&
      std::string(e.what()).find("can be said") == std::string::npos) {
    return "no .eh_frame";
  }
  const std::string what = e.what();
  const std::string prefix = e.object() + ": ";
  const size_t at = e.object().empty() ? std::string::npos : what.find(prefix);
  return at == std::string::npos ? what : what.substr(at + prefix.size());
}

// Paths and reasons are one line each in the status file.
std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      const char c = s[++i];
      out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
    } else {
      out += s[i];
    }
  }
  return out;
}

StoreFile::State state_of(const std::string& s) {
  if (s == "covered") return StoreFile::State::kCovered;
  if (s == "dropped") return StoreFile::State::kDropped;
  if (s == "failed") return StoreFile::State::kFailed;
  throw std::invalid_argument(s);
}

}  // namespace

const char* to_string(StoreFile::State s) {
  switch (s) {
    case StoreFile::State::kCovered:
      return "covered";
    case StoreFile::State::kDropped:
      return "dropped";
    case StoreFile::State::kFailed:
      break;
  }
  return "failed";
}

StoreCoverage::StoreCoverage(const Device& dev, SframeCache* cache) : dev_(dev), cache_(cache) {}

bool StoreCoverage::settled(const struct stat& st) const {
  const auto it = files_.find({uint64_t(st.st_dev), uint64_t(st.st_ino)});
  if (it == files_.end()) return false;
  const StoreFile& f = it->second;
  // A dropped entry's file is covered again at its next mapping; a changed
  // file (another size or mtime) is another file.
  return f.state != StoreFile::State::kDropped && f.size == uint64_t(st.st_size) &&
         f.mtime_ns == mtime_ns_of(st);
}

uint64_t StoreCoverage::find_entry(const struct stat& st) const {
  for (const FileInfo& e : listing_) {
    if (e.ino == uint64_t(st.st_ino) && e.file_size == uint64_t(st.st_size)) return e.id;
  }
  return 0;
}

const StoreFile& StoreCoverage::cover(const ObjectFile& object) {
  const int fd = object.elf().fd();
  struct stat st;
  if (::fstat(fd, &st) != 0) throw Error(errno, op::kReadElf, object.name(), "fstat");
  StoreFile f;
  f.dev = st.st_dev;
  f.ino = st.st_ino;
  f.size = st.st_size;
  f.mtime_ns = mtime_ns_of(st);
  f.path = object.name();
  try {
    std::vector<uint8_t> own;
    const std::vector<uint8_t>* bytes = nullptr;
    uint64_t vaddr = 0;
    std::shared_ptr<const GeneratedSframe> g;
    if (object.layout().has_sframe) {
      FileSframe s = read_sframe_from_file(object);
      own = std::move(s.bytes);
      bytes = &own;
      vaddr = s.address;
      f.source = "own .sframe";
    } else {
      g = cache_->get(object);  // EAGAIN: the gate said not now (thrown on)
      bytes = &g->bytes;
      vaddr = g->section_vaddr;
      f.source = "generated";
      // A section made now has its counts; one read from the cache has
      // none (the cache keeps the section alone): its FDEs say whether any
      // row could be said.
      const GenerateStats& gs = g->stats;
      const std::optional<SectionHeader> h = parse_header(g->bytes.data(), g->bytes.size());
      const bool made_now = gs.fde_bytes != 0;
      f.rows_permille = made_now ? uint32_t(gs.covered_bytes * 1000 / gs.fde_bytes)
                                 : StoreFile::kRowsUnknown;
      if (made_now ? gs.covered_bytes == 0 : (!h || h->num_fdes == 0)) {
        throw Error(ENODATA, op::kGenerate, object.name(),
                    "no row of its .eh_frame can be said in SFrame");
      }
    }
    f.sframe_bytes = bytes->size();
    try {
      f.id = dev_.supply_file(fd, bytes->data(), bytes->size(), vaddr, false, object.name());
      stats_.supplied++;
      stats_.supplied_bytes += bytes->size();
    } catch (const Error& e) {
      if (e.err() != EEXIST) throw;
      // Supplied before (by this service before a restart, or another
      // supplier): the entry is the file's as it is now, or the module
      // would have dropped it.
      listing_ = dev_.list_files();
      f.id = find_entry(st);
      stats_.present++;
    }
    f.state = StoreFile::State::kCovered;
  } catch (const Error& e) {
    if (e.err() == EAGAIN && e.op() == op::kGenerate) throw;
    f.state = StoreFile::State::kFailed;
    f.reason = e.err() == EDQUOT || e.err() == ENOSPC
                   ? "the store is full (" + errno_name(e.err()) + ": module parameter file_max_kb)"
                   : reason_of(e);
    stats_.failed++;
  }
  StoreFile& kept = files_[{f.dev, f.ino}];
  kept = std::move(f);
  return kept;
}

size_t StoreCoverage::sync() {
  const FileStoreStats s = dev_.file_store_stats();
  if (synced_ && s.invalidated == invalidated_) return 0;
  synced_ = true;
  invalidated_ = s.invalidated;
  listing_ = dev_.list_files();
  stats_.syncs++;
  std::set<uint64_t> live;
  for (const FileInfo& e : listing_) live.insert(e.id);
  size_t dropped = 0;
  for (auto& kv : files_) {
    StoreFile& f = kv.second;
    if (f.state != StoreFile::State::kCovered || live.count(f.id)) continue;
    f.state = StoreFile::State::kDropped;
    f.reason = f.id ? "file changed or deleted since it was covered (the module dropped its entry)"
                    : "entry not found in the store";
    dropped++;
  }
  stats_.dropped += dropped;
  return dropped;
}

// ---- status file --------------------------------------------------------------

uint64_t CoverageStatus::counter(const std::string& name) const {
  for (const auto& kv : counters) {
    if (kv.first == name) return kv.second;
  }
  return 0;
}

// Format: "# sframe-coverd status 1" then "# name=value ..." then one line
// per file: state dev ino id source-with-underscores bytes permille
// reason<TAB>path (fields separated by tabs).
void write_coverage_status(const std::string& path, const CoverageStatus& status, mode_t mode) {
  std::ostringstream o;
  o << "# sframe-coverd status 1\n#";
  for (const auto& [name, value] : status.counters) o << ' ' << name << '=' << value;
  o << '\n';
  for (const StoreFile& f : status.files) {
    o << to_string(f.state) << '\t' << f.dev << '\t' << f.ino << '\t' << f.id << '\t'
      << (f.source.empty() ? "-" : escape(f.source)) << '\t' << f.sframe_bytes << '\t'
      << (f.rows_permille == StoreFile::kRowsUnknown ? std::string("-")
                                                     : std::to_string(f.rows_permille))
      << '\t' << (f.reason.empty() ? "-" : escape(f.reason)) << '\t'
      << escape(f.path) << '\n';
  }
  const std::string tmp = path + ".tmp";
  const std::string data = o.str();
  ::unlink(tmp.c_str());  // a left-over of another mode
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd) throw Error(errno, op::kWriteCache, tmp);
  if (::fchmod(fd.get(), mode) != 0) throw Error(errno, op::kWriteCache, tmp);  // the umask's
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(n < 0 ? errno : EIO, op::kWriteCache, tmp);
    done += size_t(n);
  }
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw Error(errno, op::kWriteCache, path);
}

CoverageStatus read_coverage_status(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(errno ? errno : EIO, op::kOpen, path);
  CoverageStatus st;
  std::string line;
  if (!std::getline(in, line) || line != "# sframe-coverd status 1") {
    throw Error(EBADMSG, op::kOpen, path, "not a status file of sframe-coverd");
  }
  if (std::getline(in, line) && !line.empty() && line[0] == '#') {
    std::istringstream words(line.substr(1));
    std::string w;
    while (words >> w) {
      const size_t eq = w.find('=');
      if (eq == std::string::npos) continue;
      st.counters.emplace_back(w.substr(0, eq), std::strtoull(w.c_str() + eq + 1, nullptr, 10));
    }
  }
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    size_t at = 0;
    for (int i = 0; i < 8; i++) {
      const size_t tab = line.find('\t', at);
      if (tab == std::string::npos) break;
      fields.push_back(line.substr(at, tab - at));
      at = tab + 1;
    }
    if (fields.size() != 8) throw Error(EBADMSG, op::kOpen, path, "bad line: " + line);
    StoreFile f;
    try {
      f.state = state_of(fields[0]);
    } catch (const std::invalid_argument&) {
      throw Error(EBADMSG, op::kOpen, path, "bad state: " + fields[0]);
    }
    f.dev = std::strtoull(fields[1].c_str(), nullptr, 10);
    f.ino = std::strtoull(fields[2].c_str(), nullptr, 10);
    f.id = std::strtoull(fields[3].c_str(), nullptr, 10);
    f.source = fields[4] == "-" ? "" : unescape(fields[4]);
    f.sframe_bytes = std::strtoull(fields[5].c_str(), nullptr, 10);
    f.rows_permille = fields[6] == "-" ? StoreFile::kRowsUnknown
                                       : uint32_t(std::strtoul(fields[6].c_str(), nullptr, 10));
    f.reason = fields[7] == "-" ? "" : unescape(fields[7]);
    f.path = unescape(line.substr(at));
    st.files.push_back(std::move(f));
  }
  return st;
}

pid_t coverage_service_pid(const std::string& dir) {
  uint64_t pid = 0;
  // The summary; the status (root's) too, which a service also writes.
  for (const char* name : {"/summary", "/status"}) {
    try {
      pid = read_coverage_status(dir + name).counter("pid");
      break;
    } catch (const Error&) {
    }
  }
  if (pid == 0 || pid > uint64_t(INT32_MAX)) return 0;
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  if (!std::getline(comm, name) || name != "sframe-coverd") return 0;
  return pid_t(pid);
}

}  // namespace sframe
