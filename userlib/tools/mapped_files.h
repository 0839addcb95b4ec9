// sframe-coverd's list of the files it covered because a process mapped
// them (programs, plugins, libraries outside the linker's paths), kept in
// the SFrame cache's directory across restarts and reboots.  The next start
// covers them before any process maps them again, so a program run before
// is unwound from its first instruction, not from the moment the service
// has seen its mapping and supplied its section (cc1plus's first samples,
// node's static constructors: issue 30).  It is a cache: deleting it loses
// nothing but that head start.
#ifndef SFRAME_TOOLS_MAPPED_FILES_H
#define SFRAME_TOOLS_MAPPED_FILES_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tools {

class MappedFileList {
 public:
  // The most paths kept: the ones mapped longest ago go first.  (A
  // development machine maps some 600 files in a day of builds.)
  static constexpr size_t kMaxFiles = 4096;
  // The list is written at most this often (and at exit).
  static constexpr uint64_t kSaveEveryMs = 60'000;

  explicit MappedFileList(std::string path) : path_(std::move(path)) {}

  // Reads the list (none: empty; lines it cannot read are skipped).
  // Returns its paths, the most recently mapped first.
  std::vector<std::string> load();

  // path (absolute, no newline) was mapped at now_s (seconds since the
  // epoch).
  void note(const std::string& path, uint64_t now_s);

  // Writes the list when it changed and kSaveEveryMs have passed since the
  // last write (force: whenever it changed), through a temporary file and
  // rename(), mode 0600 (it names other users' files).  Throws
  // sframe::Error.
  void save(uint64_t now_ms, bool force);

  size_t size() const { return last_seen_.size(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::map<std::string, uint64_t> last_seen_;
  bool dirty_ = false;
  uint64_t saved_at_ms_ = 0;
};

}  // namespace tools

#endif  // SFRAME_TOOLS_MAPPED_FILES_H
