#include "sframe_object/maps.h"

#include <fcntl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>

#include "sframe_client/error.h"
#include "sframe_client/fd.h"

namespace sframe {

namespace {

constexpr char kDeleted[] = " (deleted)";
constexpr size_t kDeletedLen = sizeof(kDeleted) - 1;

}  // namespace

dev_t MapsEntry::dev() const { return makedev(dev_major, dev_minor); }

std::string MapsEntry::name() const { return deleted ? path + kDeleted : path; }

bool parse_maps_line(const std::string& line, MapsEntry* out) {
  MapsEntry e;
  unsigned major = 0, minor = 0;
  int after_inode = 0;
  if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 "%n",
                  &e.start, &e.end, e.perms, &e.offset, &major, &minor, &e.inode,
                  &after_inode) != 7 ||
      after_inode == 0 || e.end < e.start) {
    return false;
  }
  e.dev_major = major;
  e.dev_minor = minor;
  size_t at = static_cast<size_t>(after_inode);
  if (at < line.size() && line[at] != ' ') return false;  // the inode runs on
  while (at < line.size() && line[at] == ' ') at++;
  e.path = line.substr(at);
  // Only a file's path gets the suffix (d_path() of an unlinked dentry).
  if (e.is_file() && e.path.size() > kDeletedLen &&
      e.path.compare(e.path.size() - kDeletedLen, kDeletedLen, kDeleted) == 0) {
    e.path.resize(e.path.size() - kDeletedLen);
    e.deleted = true;
  }
  *out = std::move(e);
  return true;
}

std::vector<MapsEntry> parse_maps(const std::string& text) {
  std::vector<MapsEntry> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    MapsEntry e;
    if (parse_maps_line(text.substr(at, nl - at), &e)) out.push_back(std::move(e));
    at = nl + 1;
  }
  return out;
}

std::map<std::string, const MapsEntry*> image_bases(const std::vector<MapsEntry>& maps) {
  struct File {
    const MapsEntry* last_zero = nullptr;  // the latest offset-0 mapping seen
    bool exec = false;
  };
  std::map<std::string, File> files;
  std::map<std::string, const MapsEntry*> bases;
  for (const MapsEntry& e : maps) {  // in address order
    if (!e.is_file()) continue;
    const std::string name = e.name();
    File& f = files[name];
    if (e.offset == 0) f.last_zero = &e;
    if (e.executable() && !f.exec) {
      f.exec = true;
      if (f.last_zero) bases[name] = f.last_zero;
    }
  }
  return bases;
}

std::string maps_path(pid_t pid) {
  return "/proc/" + (pid ? std::to_string(pid) : std::string("self")) + "/maps";
}

std::string map_files_path(pid_t pid, uint64_t start, uint64_t end) {
  char range[48];
  std::snprintf(range, sizeof(range), "/%" PRIx64 "-%" PRIx64, start, end);
  return "/proc/" + (pid ? std::to_string(pid) : std::string("self")) + "/map_files" + range;
}

std::vector<MapsEntry> read_maps(pid_t pid) {
  const std::string path = maps_path(pid);
  UniqueFd fd;
  try {
    fd = UniqueFd::open(path, O_RDONLY);
  } catch (const Error& e) {
    throw Error(e.err(), op::kFindObject, path,
                e.err() == EACCES ? "not allowed to read the process's maps (ptrace-read rule)"
                                  : std::string());
  }
  // Read whole, in large reads, before parsing: the kernel walks the
  // mappings anew at each read(), so the fewer reads, the fewer changes
  // of the process's mappings fall in between.
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(errno, op::kFindObject, path);
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return parse_maps(text);
}

}  // namespace sframe
