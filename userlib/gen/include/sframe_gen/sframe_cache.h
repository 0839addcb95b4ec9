// sframe-gen: generated SFrame sections in files of their own, and a
// cache of them keyed by the ELF build id.
//
// A generated section is stored as a small ELF file: its .sframe section at
// the address it was built for (so `readelf --sframe` and `sframe-client
// dump` read it like any other), and a note that says which text it
// describes and which file, as it was then, it was made from.  The cache
// keeps one such file per build id and makes it anew when the file it was
// made from has changed (device, inode, size or modification time differ).
// In memory it also keeps the sections it handed out lately (bounded in
// bytes, least recently used out first), so that the processes mapping one
// file (50 processes using libc) cost one generation or one read.
#ifndef SFRAME_GEN_SFRAME_CACHE_H
#define SFRAME_GEN_SFRAME_CACHE_H

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>

#include "sframe_gen/eh_frame.h"
#include "sframe_object/object_file.h"

namespace sframe {

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

// What an SframeCache did since it was made.
struct CacheStats {
  uint64_t memory_hits = 0;   // sections handed out again from memory
  uint64_t disk_hits = 0;     // read from the cache directory
  uint64_t generated = 0;     // made from .eh_frame (kGenerated, kRegenerated, kUncached)
  uint64_t refused = 0;       // generations the gate refused (EAGAIN)
  uint64_t evicted = 0;       // sections dropped from memory for the byte bound
  uint64_t memory_bytes = 0;  // section bytes held in memory now
};

class SframeCache {
 public:
  // Sections kept in memory by default: 64 MiB (libc's is 150 KiB).
  static constexpr uint64_t kDefaultMemoryLimit = uint64_t{64} << 20;

  explicit SframeCache(std::string dir = default_cache_dir(),
                       uint64_t memory_limit = kDefaultMemoryLimit);

  // The SFrame of an object already open (a recording's come from its
  // ObjectTable): read from memory or the cache directory (keyed by the
  // object's build id, checked against its identity) when its entry was
  // made from the file as it is now, else made from the very file open,
  // never from a path (and stored, if the cache directory can be written).
  // Throws what generate_sframe() throws, and sframe::Error(EAGAIN,
  // op::kGenerate) when a generation is due and the gate refuses it.
  std::shared_ptr<const GeneratedSframe> get(const ObjectFile& object,
                                             CacheResult* result = nullptr);
  // The same for the ELF file at path (ObjectFile::open(), once), for
  // tests.
  GeneratedSframe get(const std::string& path, CacheResult* result = nullptr);

  // The cache file for an object (keyed by its build id, else its
  // identity).
  std::string entry_for(const ObjectFile& object) const;
  // ... for the file at path (ObjectFile::open()).  Throws
  // sframe::Error(op::kReadElf, path).
  std::string entry_for(const std::string& path) const;

  // Asked before every generation; false refuses it (a profiler's bound on
  // the work it spends).  Empty: always allowed.
  void set_generation_gate(std::function<bool()> gate) { gate_ = std::move(gate); }

  const CacheStats& stats() const { return stats_; }
  const std::string& dir() const { return dir_; }

 private:
  void remember(const std::string& key, std::shared_ptr<const GeneratedSframe> g);

  std::string dir_;
  uint64_t memory_limit_;
  std::function<bool()> gate_;
  CacheStats stats_;
  // content_key() -> section, and the keys, most recently used first.
  std::list<std::string> lru_;
  std::map<std::string,
           std::pair<std::shared_ptr<const GeneratedSframe>, std::list<std::string>::iterator>>
      memory_;
};

}  // namespace sframe

#endif  // SFRAME_GEN_SFRAME_CACHE_H
