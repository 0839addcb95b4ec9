#include "mapped_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "sframe_client/error.h"
#include "sframe_client/fd.h"

namespace tools {
namespace {

constexpr char kHeader[] =
    "# sframe-coverd: files covered when a process mapped them, covered again at its start;\n"
    "# a cache (deleting it loses nothing): seconds since the epoch last mapped, the path\n";

}  // namespace

std::vector<std::string> MappedFileList::load() {
  last_seen_.clear();
  std::ifstream in(path_);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 >= line.size() ||
        line[space + 1] != '/') {
      continue;
    }
    char* end = nullptr;
    errno = 0;
    const unsigned long long t = std::strtoull(line.c_str(), &end, 10);
    if (errno || end != line.c_str() + space) continue;
    note(line.substr(space + 1), t);
  }
  dirty_ = false;
  std::vector<std::pair<uint64_t, std::string>> by_time;
  for (const auto& [p, t] : last_seen_) by_time.emplace_back(t, p);
  std::stable_sort(by_time.begin(), by_time.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& [t, p] : by_time) out.push_back(std::move(p));
  return out;
}

void MappedFileList::note(const std::string& path, uint64_t now_s) {
  if (path.empty() || path[0] != '/' || path.find('\n') != std::string::npos) return;
  auto it = last_seen_.find(path);
  if (it != last_seen_.end()) {
    // Written again only for a new day: a file mapped by every process
    // would otherwise make the list due at every save.
    if (now_s / 86400 != it->second / 86400) dirty_ = true;
    it->second = std::max(it->second, now_s);
    return;
  }
  if (last_seen_.size() >= kMaxFiles) {
    auto oldest = std::min_element(last_seen_.begin(), last_seen_.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
    last_seen_.erase(oldest);
  }
  last_seen_.emplace(path, now_s);
  dirty_ = true;
}

void MappedFileList::save(uint64_t now_ms, bool force) {
  if (!dirty_ || (!force && now_ms - saved_at_ms_ < kSaveEveryMs)) return;
  saved_at_ms_ = now_ms;
  dirty_ = false;
  std::ostringstream text;
  text << kHeader;
  for (const auto& [p, t] : last_seen_) text << t << ' ' << p << '\n';
  const std::string body = text.str();
  const std::string tmp = path_ + ".new";
  {
    sframe::UniqueFd fd =
        sframe::UniqueFd::open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
    if (::fchmod(fd.get(), 0600) != 0 ||
        ::write(fd.get(), body.data(), body.size()) != ssize_t(body.size())) {
      const int err = errno ? errno : EIO;
      ::unlink(tmp.c_str());
      throw sframe::Error(err, sframe::op::kWriteCache, tmp);
    }
  }
  if (::rename(tmp.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw sframe::Error(err, sframe::op::kWriteCache, path_);
  }
}

}  // namespace tools
