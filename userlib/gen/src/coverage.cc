#include "sframe_gen/coverage.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>

#include "elf_file.h"
#include "sframe_client/error.h"
#include "sframe_client/sframe_format.h"
#include "sframe_gen/supply.h"

namespace sframe {

bool module_discovery_enabled() {
  std::ifstream in("/sys/module/sframe_unwind/parameters/discovery");
  char c = 'Y';
  in >> c;
  return c != 'N';
}

ProcessCoverage::ProcessCoverage(const Device& dev, pid_t pid, SframeCache* cache)
    : dev_(dev), pid_(pid), cache_(cache), discovery_(module_discovery_enabled()) {}

CoverageUpdate ProcessCoverage::refresh() {
  const std::string proc = "/proc/" + (pid_ ? std::to_string(pid_) : std::string("self"));
  // An exec replaced the address space, and the module's registry with it.
  struct stat exe;
  if (::stat((proc + "/exe").c_str(), &exe) == 0) {
    const std::pair<uint64_t, uint64_t> now{exe.st_dev, exe.st_ino};
    if (now != exe_) seen_.clear();
    exe_ = now;
  }
  const std::string maps = proc + "/maps";
  errno = 0;
  std::ifstream in(maps);
  if (!in) throw Error(errno ? errno : ESRCH, op::kFindObject, maps);
  // Per file: the mapping of its offset 0 (the load address), and whether
  // any of its mappings is executable.
  struct Mapped {
    uint64_t start = 0, end = 0, offset = UINT64_MAX, ino = 0;
    bool exec = false;
  };
  std::map<std::string, Mapped> files;
  std::string line;
  while (std::getline(in, line)) {
    uint64_t start = 0, end = 0, offset = 0, ino = 0;
    char perms[8] = {};
    int name_at = 0;
    if (std::sscanf(line.c_str(),
                    "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %" SCNu64 " %n", &start, &end,
                    perms, &offset, &ino, &name_at) < 5 ||
        name_at == 0 || line[name_at] != '/')
      continue;
    Mapped& m = files[line.substr(name_at)];
    if (offset < m.offset) {
      m.offset = offset;
      m.start = start;
      m.end = end;
      m.ino = ino;
    }
    if (perms[2] == 'x') m.exec = true;
  }
  CoverageUpdate u;
  for (const auto& [path, m] : files) {
    // Files mapped from their middle only have no known load address.  A
    // " (deleted)" file is read through map_files where that is allowed.
    if (!m.exec || m.offset != 0) continue;
    if (!seen_.insert({path, m.start}).second) continue;
    try {
      cover(path, m.start, m.end, m.ino, &u);
    } catch (const Error& e) {
      // EFAULT: the loader is still mapping it; EAGAIN: the cache's gate
      // refused a generation for now.  Again next time.
      if (e.err() == EFAULT || e.err() == EAGAIN) {
        seen_.erase({path, m.start});
        if (e.err() == EAGAIN) u.deferred++;
      } else {
        u.failed.emplace_back(path, e.what());
      }
    }
  }
  return u;
}

void ProcessCoverage::prepare(const std::string& program) {
  if (!cache_) return;
  // Where Debian's loader finds the libraries of a program (ld.so.conf).
  static const char* const kDirs[] = {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                                      "/lib64", "/usr/lib", "/lib"};
  std::vector<std::string> files = {program};
  try {
    const internal::ElfDependencies deps = internal::elf_dependencies(internal::ElfFile(program));
    if (!deps.interpreter.empty()) files.push_back(deps.interpreter);
    for (const std::string& name : deps.needed) {
      for (const char* dir : kDirs) {
        const std::string path = std::string(dir) + "/" + name;
        if (::access(path.c_str(), R_OK) == 0) {
          files.push_back(path);
          break;
        }
      }
    }
  } catch (const Error&) {
    return;
  }
  for (const std::string& f : files) {
    try {
      const ObjectFile object = ObjectFile::open(f);
      if (!object.layout().has_sframe) cache_->get(object);
    } catch (const Error&) {
      // refresh() says what failed, if the process maps it.
    }
  }
}

void ProcessCoverage::cover(const std::string& path, uint64_t start, uint64_t end, uint64_t ino,
                            CoverageUpdate* u) {
  // Opened once: its layout, build id, identity and section all come from
  // this one open file.
  const ObjectFile object = ObjectFile::open_mapped(pid_, start, end, path, ino);
  const ObjectLayout& layout = object.layout();
  const uint64_t bias = start - layout.image_vaddr;
  CoveredObject c;
  c.path = path;
  c.build_id = object.build_id();
  c.key = object.content_key();
  c.via = object.via();
  if (layout.has_sframe) {
    if (discovery_) {
      u->discovered.push_back(path);
      return;
    }
    const FileSframe f = read_sframe_from_file(object);
    try {
      dev_.supply_section(pid_, f.bytes.data(), f.bytes.size(), bias + f.address,
                          bias + layout.text_lo, layout.text_hi - layout.text_lo, path);
      u->from_file.push_back(path);
      u->covered.push_back(c);
      u->supplied_bytes += f.bytes.size();
    } catch (const Error& e) {
      if (e.err() != EEXIST) throw;
      u->present.push_back(path);
    }
    return;
  }
  std::shared_ptr<const GeneratedSframe> made;
  if (cache_) {
    made = cache_->get(object, &c.cache);
  } else {
    made = std::make_shared<const GeneratedSframe>(generate_sframe(object));
    c.cache = CacheResult::kUncached;
  }
  const GeneratedSframe& g = *made;
  const auto header = parse_header(g.bytes.data(), g.bytes.size());
  if (!header || header->num_fdes == 0) {
    throw Error(ENODATA, op::kGenerate, path, "no FDE SFrame can express");
  }
  try {
    dev_.supply_section(pid_, g.bytes.data(), g.bytes.size(), bias + g.section_vaddr,
                        bias + g.text_vaddr, g.text_len, path);
    c.generated = true;
    u->generated.push_back(path);
    u->covered.push_back(c);
    u->supplied_bytes += g.bytes.size();
  } catch (const Error& e) {
    if (e.err() != EEXIST) throw;
    u->present.push_back(path);
  }
}

}  // namespace sframe
