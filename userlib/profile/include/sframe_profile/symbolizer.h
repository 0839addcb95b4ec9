// sframe-profile: addresses to object + symbol + offset, for tests and
// tools.
//
// The object comes from dl_iterate_phdr(); the symbol from the object's ELF
// symbol tables read with libelf, the file opened through an ObjectTable
// (object_table.h; by path, so found there when coverage of the same
// recording opened it): .symtab where the file has one (so static
// and other non-exported functions of unstripped programs are named), else
// the .symtab of its separate debug file, found by build ID under
// /usr/lib/debug/.build-id (e.g. Debian's libc6-dbg for libc) or by its
// .gnu_debuglink (DIR/NAME, DIR/.debug/NAME, /usr/lib/debug/DIR/NAME, where
// the CRC matches), else .dynsym.  Names lose their symbol version
// ("memcpy@GLIBC_2.14", "__libc_start_main@@GLIBC_2.34" -> the name before
// '@': some .symtab carry it, and it would keep stacks of two hosts apart).
// C++ names are demangled, once per symbol.
//
// Each object's table is sorted once: a lookup is a binary search, then a
// walk up the symbols that enclose it (nested symbols: at most their
// nesting depth).  Addresses of a process that fall in none of its file
// mappings are looked up in perf's JIT map /tmp/perf-PID.map when it exists
// (and belongs to this user or root), as perf does.
#ifndef SFRAME_PROFILE_SYMBOLIZER_H
#define SFRAME_PROFILE_SYMBOLIZER_H

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace sframe {

struct Symbol {
  uint64_t address = 0;        // the address looked up
  std::string object;          // path of the object holding it; empty if none
  uint64_t object_offset = 0;  // address - the object's load bias
  std::string name;            // demangled symbol name; empty if unknown
  uint64_t symbol_start = 0;   // run-time address of that symbol
  uint64_t offset = 0;         // address - symbol_start
  // function_of(name), filled in by Symbolizer (which makes it once per
  // symbol); empty otherwise.
  std::string function_name;

  bool found() const { return !name.empty(); }
  // name without its parameter list, qualifiers and clone suffix:
  // "sframe::Device::unwind_self" for
  // "sframe::Device::unwind_self(unsigned int, unsigned int) const".
  std::string function() const;
  // "name+0x1a (libfoo.so)", or "libfoo.so+0x1234" when the name is unknown,
  // or "0x7f... (?)" when not even the object is.
  std::string to_string() const;
};

// A mapping of a file (path starting with '/') of a process.
struct FileMapping {
  uint64_t start = 0, end = 0, offset = 0;
  bool executable = false;
  std::string path;  // as the process names it (MapsEntry::name())
};

// The file mappings of pid (0: this process) from /proc/PID/maps
// (read_maps(), maps.h); false when that cannot be read (the process is
// gone, or not ours).
bool read_file_mappings(pid_t pid, std::vector<FileMapping>* out);

// Strips the parameter list and what follows it from a demangled name.
std::string function_of(const std::string& demangled);

class ObjectTable;

// Thread-safe; caches each object's symbol table.
class Symbolizer {
 public:
  // objects: where the files are opened (a recording's table, shared with
  // its coverage), which must outlive this and be used by no other thread;
  // null: a table of its own.
  explicit Symbolizer(ObjectTable* objects = nullptr);
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  Symbol symbolize(uint64_t address);
  Symbol symbolize(const void* address) { return symbolize(reinterpret_cast<uint64_t>(address)); }

  // For an unwound chain: frames[0] is a PC, the others are return addresses,
  // which are looked up at address - 1 (the call instruction: a call can be
  // the last instruction of its function).  Symbol::address stays the frame.
  std::vector<Symbol> symbolize_frames(const std::vector<uint64_t>& frames);

  // Whether the symbols of object come from a full .symtab (its own or its
  // debug file's), so that local functions are named.
  bool has_full_symbols(const std::string& object);

  // The build id (lowercase hex, empty if none) of the file at path, from
  // the object its symbols come from; false when it cannot be read as an
  // object (missing, not ELF).
  bool file_build_id(const std::string& path, std::string* id);

  // Addresses of another process (or of this one through /proc): the object
  // from /proc/PID/maps (file offset of the mapping, then the ELF's PT_LOAD
  // headers give the address relative to the load bias), the symbol as
  // above; an address in no file mapping from /tmp/perf-PID.map (object
  // "/tmp/perf-PID.map", read once per pid) when that file is there.  The maps are read on first use and again when an address falls
  // in no known file mapping; load_process() reads them now (e.g. before
  // the process exits or execs), forget_process() drops them.
  Symbol symbolize(pid_t pid, uint64_t address);
  std::vector<Symbol> symbolize_frames(pid_t pid, const std::vector<uint64_t>& frames);
  bool load_process(pid_t pid);
  void forget_process(pid_t pid);

  // The same from recorded data instead of /proc (e.g. a profile read after
  // the process is gone): one file mapping [start, end) of pid at file
  // offset `offset`, replacing those of pid it overlaps.  A pid given
  // mappings this way is never looked up in /proc.  symbols false: the
  // file at path is not the one recorded (its build id differs), so its
  // addresses get the object and offset, never a name from that file.
  void add_mapping(pid_t pid, uint64_t start, uint64_t end, uint64_t offset,
                   const std::string& path, bool symbols = true);

  // Where perf's JIT map of pid is looked for ("/tmp" by default): tests.
  void set_jit_map_dir(const std::string& dir);

 private:
  struct Table;
  struct JitMap;
  struct Mapping {
    uint64_t start, end, offset;
    std::string path;
    Table* table;  // tables_[path], set on first use
    bool symbols = true;  // false: object and offset only (add_mapping)
  };
  Table& table_for(const std::string& path);
  Symbol lookup(Table& t, const std::string& path, uint64_t address, uint64_t bias);
  bool load_process_locked(pid_t pid);
  Mapping* find_mapping(pid_t pid, uint64_t address);
  const JitMap& jit_map_for(pid_t pid);

  std::mutex mu_;
  std::unique_ptr<ObjectTable> own_objects_;  // when none was given
  ObjectTable* objects_;
  std::map<std::string, std::unique_ptr<Table>> tables_;
  std::map<pid_t, std::vector<Mapping>> maps_;  // each sorted by start, disjoint
  std::set<pid_t> from_data_;  // pids whose maps come from add_mapping()
  std::map<pid_t, std::unique_ptr<JitMap>> jit_;
  std::string jit_dir_ = "/tmp";
};

// The symbol name without its ELF symbol version: "memcpy@GLIBC_2.14" and
// "__libc_start_main@@GLIBC_2.34" give "memcpy" and "__libc_start_main".
std::string unversioned(const std::string& name);

// Kernel addresses to symbols through /proc/kallsyms (sorted; a symbol
// covers everything up to the next).  usable() is false when the file is
// unreadable or shows only zero addresses (kptr_restrict).
class KernelSymbolizer {
 public:
  KernelSymbolizer();  // reads /proc/kallsyms
  explicit KernelSymbolizer(const std::string& path);
  bool usable() const { return !syms_.empty(); }
  // object "[kernel]" or "[<module>]"; name empty below the first symbol.
  Symbol symbolize(uint64_t address) const;

 private:
  struct Sym {
    uint64_t addr;
    std::string name;
    std::string module;
  };
  std::vector<Sym> syms_;
};

}  // namespace sframe

#endif  // SFRAME_PROFILE_SYMBOLIZER_H
