// sframe-gen: generated SFrame sections in files of their own, and a
// cache of them keyed by the ELF build id.
//
// A generated section is stored as a small ELF file: its .sframe section at
// the address it was built for (so `readelf --sframe` and `sframe-client
// dump` read it like any other), and a note that says which text it
// describes and which file, as it was then, it was made from.  The cache
// keeps one such file per build id and makes it anew when the file it was
// made from has changed (device, inode, size or modification time differ).
#ifndef SFRAME_GEN_SFRAME_CACHE_H
#define SFRAME_GEN_SFRAME_CACHE_H

#include <cstdint>
#include <string>

#include "sframe_gen/eh_frame.h"

namespace sframe {

// A file as it is now: what says that it changed.
struct SourceIdentity {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const SourceIdentity& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns;
  }
  bool operator!=(const SourceIdentity& o) const { return !(*this == o); }
};

// stat() of path.  Throws sframe::Error(op::kReadElf, path).
SourceIdentity identify_file(const std::string& path);

// Writes g to path (through a temporary file and rename(), so a reader
// never sees half a file).  Throws sframe::Error(op::kWriteCache, path).
void write_sframe_file(const std::string& path, const GeneratedSframe& g,
                       const SourceIdentity& source);

// What write_sframe_file() wrote (stats are not stored).  Throws
// sframe::Error(op::kReadElf, path): ENODATA when it is not such a file.
struct StoredSframe {
  GeneratedSframe sframe;
  SourceIdentity source;
};
StoredSframe read_sframe_file(const std::string& path);

// Where the cache lives: /var/cache/sframe-unwind for root, else
// $XDG_CACHE_HOME/sframe-unwind, else $HOME/.cache/sframe-unwind.
std::string default_cache_dir();

enum class CacheResult {
  kHit,          // read from the cache
  kGenerated,    // made and stored
  kRegenerated,  // the stored one was made from an older file: made again
  kUncached,     // made, but the cache could not store it
};

const char* to_string(CacheResult r);

class SframeCache {
 public:
  explicit SframeCache(std::string dir = default_cache_dir());

  // The SFrame of the ELF file path, from the cache when its entry was made
  // from the file as it is now, else generated (and stored, if the cache
  // directory can be written).  Throws what generate_sframe() throws.
  GeneratedSframe get(const std::string& path, CacheResult* result = nullptr);

  // The cache file for path (keyed by its build id, or by its path when it
  // has none).  Throws sframe::Error(op::kReadElf, path).
  std::string entry_for(const std::string& path) const;

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace sframe

#endif  // SFRAME_GEN_SFRAME_CACHE_H
