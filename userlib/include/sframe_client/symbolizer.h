// libsframe-client: addresses to object + symbol + offset, for tests and
// tools.
//
// The object comes from dl_iterate_phdr(); the symbol from the object's ELF
// symbol tables read with libelf: .symtab where the file has one (so static
// and other non-exported functions of unstripped programs are named), else
// the .symtab of its separate debug file found by build ID under
// /usr/lib/debug/.build-id (e.g. Debian's libc6-dbg for libc), else .dynsym.
// C++ names are demangled.
#ifndef SFRAME_CLIENT_SYMBOLIZER_H
#define SFRAME_CLIENT_SYMBOLIZER_H

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
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

  bool found() const { return !name.empty(); }
  // name without its parameter list, qualifiers and clone suffix:
  // "sframe::Device::unwind_self" for
  // "sframe::Device::unwind_self(unsigned int, unsigned int) const".
  std::string function() const;
  // "name+0x1a (libfoo.so)", or "libfoo.so+0x1234" when the name is unknown,
  // or "0x7f... (?)" when not even the object is.
  std::string to_string() const;
};

// Strips the parameter list and what follows it from a demangled name.
std::string function_of(const std::string& demangled);

// Thread-safe; caches each object's symbol table.
class Symbolizer {
 public:
  Symbolizer();
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

 private:
  struct Table;
  const Table& table_for(const std::string& path);

  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Table>> tables_;
};

}  // namespace sframe

#endif  // SFRAME_CLIENT_SYMBOLIZER_H
