#include "sframe_profile/symbolizer.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sframe_client/fd.h"
#include "sframe_client/objects.h"

namespace sframe {

namespace {
struct SymbolEntry {
  uint64_t value;  // st_value: relative to the load bias
  uint64_t size;
  int rank;  // lower is preferred: global, weak, local
  std::string name;
};
}  // namespace

namespace {
struct LoadSegment {
  uint64_t offset, vaddr, filesz;
};
}  // namespace

struct Symbolizer::Table {
  using Entry = SymbolEntry;
  bool full = false;               // from a .symtab
  std::vector<Entry> entries;      // sorted by value
  std::vector<LoadSegment> loads;  // PT_LOAD headers
};

namespace {

using ElfPtr = std::unique_ptr<Elf, decltype(&elf_end)>;

struct OpenElf {
  UniqueFd fd;
  ElfPtr elf{nullptr, &elf_end};
};

bool open_elf(const std::string& path, OpenElf* out) {
  if (elf_version(EV_CURRENT) == EV_NONE) return false;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out->fd.reset(fd);
  out->elf.reset(elf_begin(fd, ELF_C_READ_MMAP, nullptr));
  return out->elf && elf_kind(out->elf.get()) == ELF_K_ELF;
}

Elf_Scn* find_section(Elf* elf, uint32_t type) {
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) && shdr.sh_type == type) return scn;
  }
  return nullptr;
}

// The GNU build ID of elf as lowercase hex, or "".
std::string build_id(Elf* elf) {
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data) continue;
    size_t off = 0, name_off, desc_off;
    GElf_Nhdr nhdr;
    while ((off = gelf_getnote(data, off, &nhdr, &name_off, &desc_off)) > 0) {
      const char* name = static_cast<const char*>(data->d_buf) + name_off;
      if (nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_namesz == 4 &&
          std::memcmp(name, "GNU", 4) == 0) {
        const auto* d = static_cast<const uint8_t*>(data->d_buf) + desc_off;
        std::string hex;
        char b[3];
        for (size_t i = 0; i < nhdr.n_descsz; i++) {
          std::snprintf(b, sizeof(b), "%02x", d[i]);
          hex += b;
        }
        return hex;
      }
    }
  }
  return "";
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
    out->push_back({sym.st_value, sym.st_size, rank, name});
  }
}

std::string demangle(const std::string& name) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> d(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  return (status == 0 && d) ? std::string(d.get()) : name;
}

}  // namespace

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

std::string Symbol::function() const { return function_of(name); }

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

Symbolizer::Symbolizer() = default;
Symbolizer::~Symbolizer() = default;

const Symbolizer::Table& Symbolizer::table_for(const std::string& path) {
  auto it = tables_.find(path);
  if (it != tables_.end()) return *it->second;
  auto table = std::make_unique<Table>();
  OpenElf file;
  if (open_elf(path, &file)) {
    Elf* elf = file.elf.get();
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
      std::string id = build_id(elf);
      OpenElf debug;
      if (id.size() > 2 &&
          open_elf("/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug",
                   &debug)) {
        if (Elf_Scn* dsym = find_section(debug.elf.get(), SHT_SYMTAB)) {
          read_symbols(debug.elf.get(), dsym, &table->entries);
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
  std::sort(table->entries.begin(), table->entries.end(),
            [](const Table::Entry& a, const Table::Entry& b) {
              if (a.value != b.value) return a.value < b.value;
              if (a.rank != b.rank) return a.rank < b.rank;
              return a.name < b.name;
            });
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

Symbol Symbolizer::lookup(const Table& t, const std::string& path, uint64_t address,
                          uint64_t bias) {
  Symbol s;
  s.address = address;
  s.object = path;
  s.object_offset = address - bias;
  const uint64_t off = s.object_offset;
  // The best symbol whose [value, value + size) holds off; size-0 symbols
  // (hand-written assembly without .size) only when nothing sized does.
  const Table::Entry* best = nullptr;
  const Table::Entry* unsized = nullptr;
  auto end = std::upper_bound(t.entries.begin(), t.entries.end(), off,
                              [](uint64_t v, const Table::Entry& e) { return v < e.value; });
  for (auto it = t.entries.begin(); it != end; ++it) {
    const Table::Entry& e = *it;
    if (e.size != 0 && off - e.value < e.size) {
      if (!best || e.value > best->value || (e.value == best->value && e.rank < best->rank)) {
        best = &e;
      }
    } else if (e.size == 0) {
      unsized = &e;
    }
  }
  if (!best) best = unsized;
  if (best) {
    s.name = demangle(best->name);
    s.symbol_start = bias + best->value;
    s.offset = address - s.symbol_start;
  }
  return s;
}

bool Symbolizer::load_process(pid_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  return load_process_locked(pid);
}

void Symbolizer::forget_process(pid_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  maps_.erase(pid);
  from_data_.erase(pid);
}

void Symbolizer::add_mapping(pid_t pid, uint64_t start, uint64_t end, uint64_t offset,
                             const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  from_data_.insert(pid);
  std::vector<Mapping>& maps = maps_[pid];
  maps.erase(std::remove_if(maps.begin(), maps.end(),
                            [&](const Mapping& m) { return m.start < end && start < m.end; }),
             maps.end());
  maps.push_back({start, end, offset, path});
}

bool read_file_mappings(pid_t pid, std::vector<FileMapping>* out) {
  out->clear();
  FILE* f = std::fopen(
      ("/proc/" + (pid ? std::to_string(pid) : std::string("self")) + "/maps").c_str(), "re");
  if (!f) return false;
  char line[4096 + 128];
  while (std::fgets(line, sizeof(line), f)) {
    unsigned long long start, end, offset;
    char perms[8];
    int path_at = 0;
    if (std::sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &offset, &path_at) <
            4 ||
        path_at == 0) {
      continue;
    }
    std::string path = line + path_at;
    while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.pop_back();
    if (path.empty() || path[0] != '/') continue;  // anonymous, [vdso], [stack]
    out->push_back({start, end, offset, std::strchr(perms, 'x') != nullptr, path});
  }
  std::fclose(f);
  return true;
}

bool Symbolizer::load_process_locked(pid_t pid) {
  std::vector<FileMapping> files;
  if (!read_file_mappings(pid, &files) || files.empty()) return false;
  std::vector<Mapping> maps;
  for (FileMapping& m : files) maps.push_back({m.start, m.end, m.offset, std::move(m.path)});
  maps_[pid] = std::move(maps);
  return true;
}

const Symbolizer::Mapping* Symbolizer::find_mapping(pid_t pid, uint64_t address) {
  for (int attempt = 0; attempt < 2; attempt++) {
    auto it = maps_.find(pid);
    if (it != maps_.end()) {
      for (const Mapping& m : it->second) {
        if (address >= m.start && address < m.end) return &m;
      }
    }
    if (attempt == 0 && (from_data_.count(pid) || !load_process_locked(pid))) break;
  }
  return nullptr;
}

Symbol Symbolizer::symbolize(pid_t pid, uint64_t address) {
  std::lock_guard<std::mutex> lock(mu_);
  const Mapping* m = find_mapping(pid, address);
  if (!m) {
    Symbol s;
    s.address = address;
    return s;
  }
  const std::string path = m->path;
  const uint64_t file_off = address - m->start + m->offset;
  const Table& t = table_for(path);
  for (const LoadSegment& l : t.loads) {
    if (file_off >= l.offset && file_off - l.offset < l.filesz) {
      const uint64_t vaddr = file_off - l.offset + l.vaddr;
      return lookup(t, path, address, address - vaddr);
    }
  }
  Symbol s;
  s.address = address;
  s.object = path;
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

}  // namespace sframe
