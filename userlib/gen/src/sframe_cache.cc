#include "sframe_gen/sframe_cache.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "sframe_client/error.h"
#include "sframe_client/fd.h"
#include "sframe_object/elf_file.h"

namespace sframe {
namespace {

constexpr uint32_t kShtGnuSframe = 0x6ffffff4;  // SHT_GNU_SFRAME
constexpr char kNoteName[] = "sframe-unwind";   // 13 bytes + NUL
constexpr uint32_t kNoteType = 1;
// Also the generator's revision: an entry of another version is made anew,
// so a cache filled by an older generator gets what the newer one covers.
// 2: CFA = *(reg + off) + c rows (kFlagXCfaAddend).
// 3: the return address in a register or not at CFA-8 (v3: glibc's __vfork).
// 4: call bridges (a CFA in a callee-saved register across a call: glibc's
//    lazy-binding trampolines).
constexpr uint32_t kNoteVersion = 4;

// The note's descriptor: what a generated section describes and what it was
// made from.  Little-endian, like the ELF file around it.
struct NoteDesc {
  uint32_t version;
  uint32_t build_id_len;  // hex characters in build_id
  uint64_t text_vaddr, text_len;
  uint64_t dev, ino, size;
  int64_t mtime_ns;
  char build_id[128];
};

constexpr size_t align4(size_t n) { return (n + 3) & ~size_t{3}; }

std::vector<uint8_t> make_note(const GeneratedSframe& g, const SourceIdentity& src) {
  NoteDesc d{};
  d.version = kNoteVersion;
  d.build_id_len = static_cast<uint32_t>(std::min(g.build_id.size(), sizeof(d.build_id)));
  std::memcpy(d.build_id, g.build_id.data(), d.build_id_len);
  d.text_vaddr = g.text_vaddr;
  d.text_len = g.text_len;
  d.dev = src.dev;
  d.ino = src.ino;
  d.size = src.size;
  d.mtime_ns = src.mtime_ns;
  Elf64_Nhdr nh{};
  nh.n_namesz = sizeof(kNoteName);
  nh.n_descsz = sizeof(d);
  nh.n_type = kNoteType;
  std::vector<uint8_t> out(sizeof(nh) + align4(sizeof(kNoteName)) + align4(sizeof(d)));
  std::memcpy(out.data(), &nh, sizeof(nh));
  std::memcpy(out.data() + sizeof(nh), kNoteName, sizeof(kNoteName));
  std::memcpy(out.data() + sizeof(nh) + align4(sizeof(kNoteName)), &d, sizeof(d));
  return out;
}

// Appends a section to e with the given bytes (which must outlive
// elf_update()).
Elf_Scn* add_section(Elf* e, uint32_t name, uint32_t type, uint64_t flags, uint64_t addr,
                     uint64_t align, void* bytes, size_t size) {
  Elf_Scn* scn = elf_newscn(e);
  Elf_Data* data = scn ? elf_newdata(scn) : nullptr;
  GElf_Shdr sh;
  if (!data || !gelf_getshdr(scn, &sh)) return nullptr;
  data->d_buf = bytes;
  data->d_size = size;
  data->d_type = ELF_T_BYTE;
  data->d_align = align;
  sh.sh_name = name;
  sh.sh_type = type;
  sh.sh_flags = flags;
  sh.sh_addr = addr;
  sh.sh_addralign = align;
  return gelf_update_shdr(scn, &sh) ? scn : nullptr;
}

std::string sanitize_key(std::string s) {
  for (char& c : s) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  return s;
}

}  // namespace

const char* to_string(CacheResult r) {
  switch (r) {
    case CacheResult::kHit:
      return "cached";
    case CacheResult::kGenerated:
      return "generated";
    case CacheResult::kRegenerated:
      return "regenerated";
    case CacheResult::kUncached:
      return "generated (not cached)";
  }
  return "?";
}

SourceIdentity identify_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw Error(errno, op::kReadElf, path);
  return source_identity(st);
}

void write_sframe_file(const std::string& path, const GeneratedSframe& g,
                       const SourceIdentity& source) {
  if (elf_version(EV_CURRENT) == EV_NONE) {
    throw Error(ENOSYS, op::kWriteCache, path, "libelf version mismatch");
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  UniqueFd fd;
  try {
    fd = UniqueFd::open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  } catch (const Error& e) {
    throw Error(e.err(), op::kWriteCache, tmp);
  }
  std::vector<uint8_t> sframe = g.bytes;
  std::vector<uint8_t> note = make_note(g, source);
  // Offsets into it are the section names.
  static const char kStrtab[] = "\0.sframe\0.note.sframe-unwind\0.shstrtab";
  std::vector<char> strtab(kStrtab, kStrtab + sizeof(kStrtab));

  std::unique_ptr<Elf, decltype(&elf_end)> e(elf_begin(fd.get(), ELF_C_WRITE, nullptr), &elf_end);
  Elf64_Ehdr* eh = e ? elf64_newehdr(e.get()) : nullptr;
  bool ok = eh != nullptr;
  if (ok) {
    eh->e_ident[EI_DATA] = ELFDATA2LSB;
    eh->e_type = ET_REL;
    eh->e_machine = EM_X86_64;
    eh->e_version = EV_CURRENT;
    ok = add_section(e.get(), 1, kShtGnuSframe, SHF_ALLOC, g.section_vaddr, 8, sframe.data(),
                     sframe.size()) &&
         add_section(e.get(), 9, SHT_NOTE, 0, 0, 4, note.data(), note.size());
    Elf_Scn* str =
        ok ? add_section(e.get(), 29, SHT_STRTAB, 0, 0, 1, strtab.data(), strtab.size()) : nullptr;
    ok = str != nullptr;
    if (ok) eh->e_shstrndx = static_cast<Elf64_Half>(elf_ndxscn(str));
    ok = ok && elf_update(e.get(), ELF_C_WRITE) >= 0;
  }
  if (!ok) {
    std::string msg = elf_errmsg(-1);
    ::unlink(tmp.c_str());
    throw Error(EIO, op::kWriteCache, path, msg);
  }
  e.reset();
  // No fsync(): a file cut short by a crash does not parse, and is made
  // again.
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(err, op::kWriteCache, path);
  }
}

StoredSframe read_sframe_file(const std::string& path) {
  internal::ElfFile elf(path);
  size_t shstrndx;
  if (elf_getshdrstrndx(elf.get(), &shstrndx) != 0) {
    throw Error(ENODATA, op::kReadElf, path, "no section names");
  }
  StoredSframe out;
  bool have_sframe = false, have_note = false;
  for (Elf_Scn* scn = elf_nextscn(elf.get(), nullptr); scn; scn = elf_nextscn(elf.get(), scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    const char* name = elf_strptr(elf.get(), shstrndx, sh.sh_name);
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!name || !data || !data->d_buf) continue;
    if (std::strcmp(name, ".sframe") == 0) {
      const auto* b = static_cast<const uint8_t*>(data->d_buf);
      out.sframe.bytes.assign(b, b + data->d_size);
      out.sframe.section_vaddr = sh.sh_addr;
      out.sframe.version = data->d_size > 2 ? b[2] : 0;
      have_sframe = true;
    } else if (std::strcmp(name, ".note.sframe-unwind") == 0) {
      const size_t at = sizeof(Elf64_Nhdr) + align4(sizeof(kNoteName));
      Elf64_Nhdr nh;
      NoteDesc d;
      if (data->d_size < at + sizeof(d)) continue;
      std::memcpy(&nh, data->d_buf, sizeof(nh));
      std::memcpy(&d, static_cast<const uint8_t*>(data->d_buf) + at, sizeof(d));
      if (nh.n_type != kNoteType || nh.n_descsz != sizeof(d) || d.version != kNoteVersion ||
          d.build_id_len > sizeof(d.build_id))
        continue;
      out.sframe.text_vaddr = d.text_vaddr;
      out.sframe.text_len = d.text_len;
      out.sframe.build_id.assign(d.build_id, d.build_id_len);
      out.source.dev = d.dev;
      out.source.ino = d.ino;
      out.source.size = d.size;
      out.source.mtime_ns = d.mtime_ns;
      have_note = true;
    }
  }
  if (!have_sframe || !have_note) {
    throw Error(ENODATA, op::kReadElf, path, "not a generated SFrame file");
  }
  return out;
}

std::string default_cache_dir() {
  if (::geteuid() == 0) return "/var/cache/sframe-unwind";
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && xdg[0] == '/') return std::string(xdg) + "/sframe-unwind";
  const char* home = std::getenv("HOME");
  return std::string(home && home[0] ? home : "/tmp") + "/.cache/sframe-unwind";
}

SframeCache::SframeCache(std::string dir, uint64_t memory_limit)
    : dir_(std::move(dir)), memory_limit_(memory_limit) {}

std::string SframeCache::entry_for(const std::string& path) const {
  return entry_for(ObjectFile::open(path));
}

std::string SframeCache::entry_for(const ObjectFile& object) const {
  std::string id = object.build_id();
  if (id.empty()) {
    // No build id: the file itself (a path means nothing across mount
    // namespaces).
    const SourceIdentity& s = object.identity();
    char buf[96];
    std::snprintf(buf, sizeof(buf), "file-%llx-%llx-%llx", (unsigned long long)s.dev,
                  (unsigned long long)s.ino, (unsigned long long)s.size);
    id = buf;
  }
  return dir_ + "/" + sanitize_key(id) + ".sframe";
}

GeneratedSframe SframeCache::get(const std::string& path, CacheResult* result) {
  return *get(ObjectFile::open(path), result);
}

void SframeCache::remember(const std::string& key, std::shared_ptr<const GeneratedSframe> g) {
  const uint64_t size = g->bytes.size();
  if (size > memory_limit_) return;
  while (stats_.memory_bytes + size > memory_limit_ && !lru_.empty()) {
    auto old = memory_.find(lru_.back());
    stats_.memory_bytes -= old->second.first->bytes.size();
    memory_.erase(old);
    lru_.pop_back();
    stats_.evicted++;
  }
  lru_.push_front(key);
  memory_[key] = {std::move(g), lru_.begin()};
  stats_.memory_bytes += size;
}

std::shared_ptr<const GeneratedSframe> SframeCache::get(const ObjectFile& object,
                                                        CacheResult* result) {
  const std::string key = object.content_key();
  if (auto it = memory_.find(key); it != memory_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.second);
    stats_.memory_hits++;
    if (result) *result = CacheResult::kHit;
    return it->second.first;
  }
  const SourceIdentity& now = object.identity();
  const std::string entry = entry_for(object);
  bool stale = false;
  try {
    StoredSframe s = read_sframe_file(entry);
    if (s.source == now && s.sframe.build_id == object.build_id()) {
      auto g = std::make_shared<const GeneratedSframe>(std::move(s.sframe));
      remember(key, g);
      stats_.disk_hits++;
      if (result) *result = CacheResult::kHit;
      return g;
    }
    stale = true;
  } catch (const Error&) {
    // Not there, or not readable: made anew below.
  }
  if (gate_ && !gate_()) {
    stats_.refused++;
    throw Error(EAGAIN, op::kGenerate, object.name(), "generation budget spent for now");
  }
  auto g = std::make_shared<const GeneratedSframe>(generate_sframe(object));
  stats_.generated++;
  CacheResult r = stale ? CacheResult::kRegenerated : CacheResult::kGenerated;
  try {
    // mkdir -p of the cache directory (its parents may not exist yet).
    for (size_t i = 1; i <= dir_.size(); i++) {
      if (i == dir_.size() || dir_[i] == '/') ::mkdir(dir_.substr(0, i).c_str(), 0755);
    }
    write_sframe_file(entry, *g, now);
  } catch (const Error&) {
    r = CacheResult::kUncached;
  }
  remember(key, g);
  if (result) *result = r;
  return g;
}

}  // namespace sframe
