#include "sframe_profile/symbolizer.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sframe_client/error.h"
#include "sframe_client/fd.h"
#include "sframe_client/objects.h"
#include "sframe_object/elf_file.h"
#include "sframe_object/maps.h"
#include "sframe_object/object_file.h"
#include "sframe_object/object_table.h"

namespace sframe {

namespace {
struct SymbolEntry {
  uint64_t value;  // st_value: relative to the load bias
  uint64_t size;
  int rank;          // lower is preferred: global, weak, local
  std::string name;  // as in the file, without its version
};
struct SymbolNames {
  bool made = false;
  std::string demangled, function;
};
struct LoadSegment {
  uint64_t offset, vaddr, filesz;
};
}  // namespace

struct Symbolizer::Table {
  using Entry = SymbolEntry;
  bool full = false;               // from a .symtab
  std::vector<Entry> entries;      // sorted by (value, rank, name)
  std::vector<uint64_t> values;    // entries[i].value: the binary search's
  // Per entry: the last earlier sized entry whose range holds its value
  // (the symbol it is nested in), or -1.  A lookup that misses the entry
  // at or below the address climbs these: any symbol that holds the
  // address and starts before that entry holds that entry's value too.
  std::vector<int32_t> enclosing;
  // Per entry: the last size-0 entry at or before it, or -1.
  std::vector<int32_t> last_unsized;
  // Per entry: its demangled name and function, made on its first lookup.
  std::vector<SymbolNames> names;
  std::vector<LoadSegment> loads;  // PT_LOAD headers

  void index();
  const SymbolNames& names_of(size_t i);
};

namespace {

// The object at path from the table, or null when it cannot be read as
// one (missing, not ELF): a file without symbols.
std::shared_ptr<const ObjectFile> open_object(ObjectTable* objects, const std::string& path) {
  try {
    return objects->open_path(path);
  } catch (const Error&) {
    return nullptr;
  }
}

Elf_Scn* find_section(Elf* elf, uint32_t type) {
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) && shdr.sh_type == type) return scn;
  }
  return nullptr;
}

void read_symbols(Elf* elf, Elf_Scn* scn, std::vector<SymbolEntry>* out) {
  GElf_Shdr shdr;
  if (!gelf_getshdr(scn, &shdr) || shdr.sh_entsize == 0) return;
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data) return;
  const size_t count = shdr.sh_size / shdr.sh_entsize;
  for (size_t i = 0; i < count; i++) {
    GElf_Sym sym;
    if (!gelf_getsym(data, static_cast<int>(i), &sym)) continue;
    const int type = GELF_ST_TYPE(sym.st_info);
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
        sym.st_value == 0) {
      continue;
    }
    const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
    if (!name || !*name) continue;
    const int bind = GELF_ST_BIND(sym.st_info);
    int rank = bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;
    const char* at = std::strchr(name, '@');
    if (at == name) continue;
    out->push_back({sym.st_value, sym.st_size, rank,
                    at ? std::string(name, at) : std::string(name)});
  }
}

std::string demangle(const std::string& name) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> d(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  return (status == 0 && d) ? std::string(d.get()) : name;
}

// The file name and CRC32 of elf's .gnu_debuglink section; false without one.
bool debuglink(Elf* elf, std::string* name, uint32_t* crc) {
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return false;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_PROGBITS) continue;
    const char* sname = elf_strptr(elf, shstrndx, shdr.sh_name);
    if (!sname || std::strcmp(sname, ".gnu_debuglink") != 0) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data || !data->d_buf) return false;
    const char* buf = static_cast<const char*>(data->d_buf);
    // NAME\0, padding to 4 bytes, then the CRC (the file's byte order).
    const size_t len = strnlen(buf, data->d_size);
    const size_t crc_at = (len + 4) & ~size_t{3};
    if (len == 0 || crc_at + 4 > data->d_size) return false;
    name->assign(buf, len);
    if (name->find('/') != std::string::npos) return false;
    Elf_Data src{}, dst{};
    src.d_buf = const_cast<char*>(buf + crc_at);
    src.d_size = 4;
    src.d_type = ELF_T_WORD;
    src.d_version = EV_CURRENT;
    dst.d_buf = crc;
    dst.d_size = 4;
    dst.d_version = EV_CURRENT;
    return gelf_xlatetom(elf, &dst, &src, elf_getident(elf, nullptr)[EI_DATA]) != nullptr;
  }
  return false;
}

// The CRC32 of the whole file (zlib's, as .gnu_debuglink's), over its ELF
// view's image of the file; false if that cannot be had.
bool file_crc32(const ObjectFile& object, uint32_t* out) {
  size_t size = 0;
  const char* image = elf_rawfile(object.elf().get(), &size);
  if (image == nullptr) return false;
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* b = reinterpret_cast<const Bytef*>(image);
  for (size_t at = 0; at < size;) {
    const uInt n = static_cast<uInt>(std::min<size_t>(size - at, size_t{1} << 30));
    crc = crc32(crc, b + at, n);
    at += n;
  }
  *out = static_cast<uint32_t>(crc);
  return true;
}

// The separate debug file that elf (at path) names in .gnu_debuglink, in
// the places gdb looks: DIR/NAME, DIR/.debug/NAME, /usr/lib/debug/DIR/NAME;
// the first whose CRC matches, or null.  Not path itself.
std::shared_ptr<const ObjectFile> open_debuglink(ObjectTable* objects, Elf* elf,
                                                 const std::string& path) {
  std::string name;
  uint32_t crc = 0;
  if (!debuglink(elf, &name, &crc)) return nullptr;
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  for (const std::string& candidate :
       {dir + "/" + name, dir + "/.debug/" + name, "/usr/lib/debug" + dir + "/" + name}) {
    if (candidate == path) continue;
    std::shared_ptr<const ObjectFile> debug = open_object(objects, candidate);
    uint32_t have = 0;
    if (!debug || !file_crc32(*debug, &have) || have != crc) continue;
    return debug;
  }
  return nullptr;
}

}  // namespace

std::string unversioned(const std::string& name) {
  const size_t at = name.find('@');
  return at == std::string::npos ? name : name.substr(0, at);
}

std::string function_of(const std::string& demangled) {
  static const char kAnon[] = "(anonymous namespace)";
  int angle = 0;
  for (size_t i = 0; i < demangled.size(); i++) {
    char c = demangled[i];
    if (c == '<') {
      angle++;
    } else if (c == '>') {
      angle--;
    } else if (c == '(' && angle == 0) {
      if (demangled.compare(i, sizeof(kAnon) - 1, kAnon) == 0) {
        i += sizeof(kAnon) - 2;
        continue;
      }
      if (i >= 8 && demangled.compare(i - 8, 8, "operator") == 0) continue;  // operator()
      return demangled.substr(0, i);
    } else if (c == ' ' && angle == 0 && demangled.compare(i, 8, " [clone ") == 0) {
      return demangled.substr(0, i);
    }
  }
  return demangled;
}

std::string Symbol::function() const {
  return function_name.empty() ? function_of(name) : function_name;
}

std::string Symbol::to_string() const {
  char buf[64];
  std::string base = object.empty() ? "?" : object.substr(object.rfind('/') + 1);
  if (found()) {
    std::snprintf(buf, sizeof(buf), "+0x%" PRIx64, offset);
    return name + buf + " (" + base + ")";
  }
  if (!object.empty()) {
    std::snprintf(buf, sizeof(buf), "+0x%" PRIx64, object_offset);
    return base + buf;
  }
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64 " (?)", address);
  return buf;
}

Symbolizer::Symbolizer(ObjectTable* objects)
    : own_objects_(objects ? nullptr : std::make_unique<ObjectTable>()),
      objects_(objects ? objects : own_objects_.get()) {}

Symbolizer::~Symbolizer() = default;

void Symbolizer::Table::index() {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.value != b.value) return a.value < b.value;
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.size != b.size) return a.size > b.size;
    return a.name < b.name;
  });
  // One entry per (value, size): the preferred name (.symtab and .dynsym
  // aliases, or a symbol listed twice).
  entries.erase(std::unique(entries.begin(), entries.end(),
                            [](const Entry& a, const Entry& b) {
                              return a.value == b.value && a.size == b.size;
                            }),
                entries.end());
  if (entries.size() > INT32_MAX) entries.resize(INT32_MAX);
  enclosing.assign(entries.size(), -1);
  last_unsized.assign(entries.size(), -1);
  names.assign(entries.size(), SymbolNames{});
  values.resize(entries.size());
  for (size_t i = 0; i < entries.size(); i++) values[i] = entries[i].value;
  // The sized entries whose range is still open, innermost on top.
  std::vector<int32_t> open;
  int32_t unsized = -1;
  for (size_t i = 0; i < entries.size(); i++) {
    const Entry& e = entries[i];
    while (!open.empty()) {
      const Entry& o = entries[static_cast<size_t>(open.back())];
      if (e.value - o.value < o.size) break;
      open.pop_back();
    }
    if (!open.empty()) enclosing[i] = open.back();
    if (e.size == 0) {
      unsized = static_cast<int32_t>(i);
    } else {
      open.push_back(static_cast<int32_t>(i));
    }
    last_unsized[i] = unsized;
  }
}

const SymbolNames& Symbolizer::Table::names_of(size_t i) {
  SymbolNames& n = names[i];
  if (!n.made) {
    n.demangled = demangle(entries[i].name);
    n.function = function_of(n.demangled);
    n.made = true;
  }
  return n;
}

Symbolizer::Table& Symbolizer::table_for(const std::string& path) {
  auto it = tables_.find(path);
  if (it != tables_.end()) return *it->second;
  auto table = std::make_unique<Table>();
  if (const std::shared_ptr<const ObjectFile> object = open_object(objects_, path)) {
    Elf* elf = object->elf().get();
    size_t nphdr = 0;
    if (elf_getphdrnum(elf, &nphdr) == 0) {
      for (size_t i = 0; i < nphdr; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD) {
          table->loads.push_back({ph.p_offset, ph.p_vaddr, ph.p_filesz});
        }
      }
    }
    if (Elf_Scn* symtab = find_section(elf, SHT_SYMTAB)) {
      read_symbols(elf, symtab, &table->entries);
      table->full = true;
    } else {
      const std::string& id = object->build_id();
      std::shared_ptr<const ObjectFile> debug;
      if (id.size() > 2) {
        debug = open_object(objects_, "/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" +
                                          id.substr(2) + ".debug");
        if (debug && !find_section(debug->elf().get(), SHT_SYMTAB)) debug = nullptr;
      }
      if (!debug) debug = open_debuglink(objects_, elf, path);
      if (debug) {
        Elf* delf = debug->elf().get();
        if (Elf_Scn* dsym = find_section(delf, SHT_SYMTAB)) {
          read_symbols(delf, dsym, &table->entries);
          table->full = !table->entries.empty();
        }
      }
      if (!table->full) {
        if (Elf_Scn* dynsym = find_section(elf, SHT_DYNSYM)) {
          read_symbols(elf, dynsym, &table->entries);
        }
      }
    }
  }
  table->index();
  return *(tables_[path] = std::move(table));
}

Symbol Symbolizer::symbolize(uint64_t address) {
  auto obj = loaded_object_containing(reinterpret_cast<const void*>(address));
  if (!obj) {
    Symbol s;
    s.address = address;
    return s;
  }
  std::lock_guard<std::mutex> lock(mu_);
  return lookup(table_for(obj->path), obj->path, address, obj->base);
}

Symbol Symbolizer::lookup(Table& t, const std::string& path, uint64_t address, uint64_t bias) {
  Symbol s;
  s.address = address;
  s.object = path;
  s.object_offset = address - bias;
  const uint64_t off = s.object_offset;
  // The innermost sized symbol whose [value, value + size) holds off (of
  // those starting at the same value, the preferred binding: the first);
  // size-0 symbols (hand-written assembly without .size) only when no
  // sized one does.
  auto end = std::upper_bound(t.values.begin(), t.values.end(), off);
  if (end == t.values.begin()) return s;
  const int32_t below = static_cast<int32_t>(end - t.values.begin()) - 1;
  int32_t best = -1;
  for (int32_t i = below; i >= 0; i = t.enclosing[static_cast<size_t>(i)]) {
    const Table::Entry& e = t.entries[static_cast<size_t>(i)];
    if (e.size != 0 && off - e.value < e.size) {
      best = i;
      break;
    }
  }
  if (best >= 0) {
    // Of the symbols at the same value that hold off, the first has the
    // preferred binding.
    const uint64_t value = t.entries[static_cast<size_t>(best)].value;
    for (int32_t j = best - 1; j >= 0 && t.entries[static_cast<size_t>(j)].value == value; j--) {
      const uint64_t size = t.entries[static_cast<size_t>(j)].size;
      if (size != 0 && off - value < size) best = j;
    }
  } else {
    best = t.last_unsized[static_cast<size_t>(below)];
  }
  if (best >= 0) {
    const SymbolNames& n = t.names_of(static_cast<size_t>(best));
    s.name = n.demangled;
    s.function_name = n.function;
    s.symbol_start = bias + t.entries[static_cast<size_t>(best)].value;
    s.offset = address - s.symbol_start;
  }
  return s;
}

// perf's map of JIT-compiled code, /tmp/perf-PID.map: "START SIZE NAME"
// per line, START and SIZE hex (with or without 0x), written by the
// runtime (V8 --perf-basic-prof, the JVM's perf-map-agent, ...).  Read
// only when it is a regular file of this user or root, as perf does: /tmp
// is writable by all.  Of entries starting at one address the last line
// wins (the runtime reused the memory); an address is looked up in the entry starting
// nearest below it.
struct Symbolizer::JitMap {
  struct Entry {
    uint64_t start, size;
    std::string name;
  };
  std::string path;
  std::vector<Entry> entries;  // sorted by start, one per start

  // Bounds on what one file may cost.
  static constexpr size_t kMaxEntries = 4u << 20;
  static constexpr size_t kMaxLine = 8192;

  void read(const std::string& file) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return;
    UniqueFd owned(fd);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (st.st_uid != geteuid() && st.st_uid != 0)) {
      return;
    }
    FILE* f = fdopen(owned.release(), "r");
    if (!f) return;
    path = file;
    std::vector<Entry> raw;
    std::vector<char> line(kMaxLine);
    while (raw.size() < kMaxEntries && std::fgets(line.data(), static_cast<int>(line.size()), f)) {
      char* end = nullptr;
      const uint64_t start = std::strtoull(line.data(), &end, 16);
      if (end == line.data() || *end != ' ') continue;
      char* name_at = nullptr;
      const uint64_t size = std::strtoull(end + 1, &name_at, 16);
      if (name_at == end + 1 || *name_at != ' ' || size == 0 || start + size < start) continue;
      std::string name = name_at + 1;
      while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
      if (name.empty()) continue;
      raw.push_back({start, size, std::move(name)});
    }
    std::fclose(f);
    // By start; of the entries at one start, the last line's (the runtime
    // reused the memory).
    std::stable_sort(raw.begin(), raw.end(),
                     [](const Entry& a, const Entry& b) { return a.start < b.start; });
    for (Entry& e : raw) {
      if (!entries.empty() && entries.back().start == e.start) entries.pop_back();
      entries.push_back(std::move(e));
    }
  }

  Symbol symbolize(uint64_t address) const {
    Symbol s;
    s.address = address;
    auto it = std::upper_bound(entries.begin(), entries.end(), address,
                               [](uint64_t v, const Entry& e) { return v < e.start; });
    if (it == entries.begin()) return s;
    --it;
    if (address - it->start >= it->size) return s;
    s.object = path;
    s.object_offset = address;
    s.name = it->name;
    s.function_name = function_of(it->name);
    s.symbol_start = it->start;
    s.offset = address - it->start;
    return s;
  }
};

const Symbolizer::JitMap& Symbolizer::jit_map_for(pid_t pid) {
  auto it = jit_.find(pid);
  if (it != jit_.end()) return *it->second;
  auto map = std::make_unique<JitMap>();
  if (pid > 0) map->read(jit_dir_ + "/perf-" + std::to_string(pid) + ".map");
  return *(jit_[pid] = std::move(map));
}

bool Symbolizer::load_process(pid_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  return load_process_locked(pid);
}

void Symbolizer::forget_process(pid_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  maps_.erase(pid);
  from_data_.erase(pid);
  jit_.erase(pid);
}

void Symbolizer::add_mapping(pid_t pid, uint64_t start, uint64_t end, uint64_t offset,
                             const std::string& path, bool symbols) {
  std::lock_guard<std::mutex> lock(mu_);
  from_data_.insert(pid);
  std::vector<Mapping>& maps = maps_[pid];
  maps.erase(std::remove_if(maps.begin(), maps.end(),
                            [&](const Mapping& m) { return m.start < end && start < m.end; }),
             maps.end());
  auto at = std::lower_bound(maps.begin(), maps.end(), start,
                             [](const Mapping& m, uint64_t v) { return m.start < v; });
  maps.insert(at, Mapping{start, end, offset, path, nullptr, symbols});
}

void Symbolizer::set_jit_map_dir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  jit_dir_ = dir;
  jit_.clear();
}

bool read_file_mappings(pid_t pid, std::vector<FileMapping>* out) {
  out->clear();
  std::vector<MapsEntry> maps;
  try {
    maps = read_maps(pid);
  } catch (const Error&) {
    return false;
  }
  for (const MapsEntry& m : maps) {
    if (!m.is_file()) continue;  // anonymous, [vdso], [stack]
    out->push_back({m.start, m.end, m.offset, m.executable(), m.name()});
  }
  return true;
}

bool Symbolizer::load_process_locked(pid_t pid) {
  std::vector<FileMapping> files;
  if (!read_file_mappings(pid, &files) || files.empty()) return false;
  std::vector<Mapping> maps;
  for (FileMapping& m : files) {
    maps.push_back(Mapping{m.start, m.end, m.offset, std::move(m.path), nullptr});
  }
  std::sort(maps.begin(), maps.end(),
            [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
  maps_[pid] = std::move(maps);
  return true;
}

Symbolizer::Mapping* Symbolizer::find_mapping(pid_t pid, uint64_t address) {
  for (int attempt = 0; attempt < 2; attempt++) {
    auto it = maps_.find(pid);
    if (it != maps_.end()) {
      std::vector<Mapping>& maps = it->second;
      auto m = std::upper_bound(maps.begin(), maps.end(), address,
                                [](uint64_t v, const Mapping& e) { return v < e.start; });
      if (m != maps.begin() && address < (m - 1)->end) return &*(m - 1);
    }
    if (attempt == 0 && (from_data_.count(pid) || !load_process_locked(pid))) break;
  }
  return nullptr;
}

Symbol Symbolizer::symbolize(pid_t pid, uint64_t address) {
  std::lock_guard<std::mutex> lock(mu_);
  Mapping* m = find_mapping(pid, address);
  if (!m) return jit_map_for(pid).symbolize(address);
  if (!m->symbols) {
    Symbol s;
    s.address = address;
    s.object = m->path;
    s.object_offset = address - m->start + m->offset;
    return s;
  }
  if (!m->table) m->table = &table_for(m->path);
  Table& t = *m->table;
  const uint64_t file_off = address - m->start + m->offset;
  for (const LoadSegment& l : t.loads) {
    if (file_off >= l.offset && file_off - l.offset < l.filesz) {
      const uint64_t vaddr = file_off - l.offset + l.vaddr;
      return lookup(t, m->path, address, address - vaddr);
    }
  }
  Symbol s;
  s.address = address;
  s.object = m->path;
  s.object_offset = file_off;
  return s;
}

std::vector<Symbol> Symbolizer::symbolize_frames(pid_t pid, const std::vector<uint64_t>& frames) {
  std::vector<Symbol> out;
  out.reserve(frames.size());
  for (size_t i = 0; i < frames.size(); i++) {
    uint64_t lookup_at = (i == 0 || frames[i] == 0) ? frames[i] : frames[i] - 1;
    Symbol s = symbolize(pid, lookup_at);
    s.address = frames[i];
    if (s.found()) s.offset = frames[i] - s.symbol_start;
    s.object_offset += frames[i] - lookup_at;
    out.push_back(std::move(s));
  }
  return out;
}

KernelSymbolizer::KernelSymbolizer() : KernelSymbolizer("/proc/kallsyms") {}

KernelSymbolizer::KernelSymbolizer(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "re");
  if (!f) return;
  char line[512];
  bool nonzero = false;
  while (std::fgets(line, sizeof(line), f)) {
    unsigned long long addr;
    char type;
    char name[256];
    char module[128] = "";
    int n = std::sscanf(line, "%llx %c %255s [%127[^]]]", &addr, &type, name, module);
    if (n < 3) continue;
    if (type != 't' && type != 'T' && type != 'w' && type != 'W') continue;
    if (addr != 0) nonzero = true;
    syms_.push_back({addr, name, module});
  }
  std::fclose(f);
  if (!nonzero) {
    syms_.clear();
    return;
  }
  std::stable_sort(syms_.begin(), syms_.end(),
                   [](const Sym& a, const Sym& b) { return a.addr < b.addr; });
}

Symbol KernelSymbolizer::symbolize(uint64_t address) const {
  Symbol s;
  s.address = address;
  auto it = std::upper_bound(syms_.begin(), syms_.end(), address,
                             [](uint64_t v, const Sym& e) { return v < e.addr; });
  if (it == syms_.begin()) return s;
  --it;
  s.object = it->module.empty() ? "[kernel]" : "[" + it->module + "]";
  s.name = it->name;
  s.symbol_start = it->addr;
  s.offset = address - it->addr;
  s.object_offset = s.offset;
  return s;
}

std::vector<Symbol> Symbolizer::symbolize_frames(const std::vector<uint64_t>& frames) {
  std::vector<Symbol> out;
  out.reserve(frames.size());
  for (size_t i = 0; i < frames.size(); i++) {
    uint64_t lookup = (i == 0 || frames[i] == 0) ? frames[i] : frames[i] - 1;
    Symbol s = symbolize(lookup);
    s.address = frames[i];
    if (s.found()) s.offset = frames[i] - s.symbol_start;
    s.object_offset += frames[i] - lookup;
    out.push_back(std::move(s));
  }
  return out;
}

bool Symbolizer::has_full_symbols(const std::string& object) {
  std::lock_guard<std::mutex> lock(mu_);
  return table_for(object).full;
}

bool Symbolizer::file_build_id(const std::string& path, std::string* id) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::shared_ptr<const ObjectFile> object = open_object(objects_, path);
  if (!object) return false;
  *id = object->build_id();
  return true;
}

}  // namespace sframe
