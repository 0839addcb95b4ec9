#include "sframe_gen/supply.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

#include "sframe_client/error.h"
#include "sframe_client/objects.h"
#include "sframe_object/elf_file.h"
#include "sframe_object/maps.h"
#include "sframe_object/object_file.h"

namespace sframe {
namespace {

FileSframe read_sframe_from_elf(const internal::ElfFile& elf, const std::string& path);

std::string canonical(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) ? std::string(buf) : path;
}

}  // namespace

uint64_t load_bias_in_process(pid_t pid, const std::string& path, uint64_t image_vaddr) {
  // op::kFindObject, with the ptrace-read rule named for EACCES.
  const std::vector<MapsEntry> maps = read_maps(pid);
  const std::string want = canonical(path);
  const std::map<std::string, const MapsEntry*> bases = image_bases(maps);
  if (const auto it = bases.find(want); it != bases.end()) return it->second->start - image_vaddr;
  throw Error(ENOENT, op::kFindObject, want, "not mapped in " + maps_path(pid));
}

SuppliedSection supply_file_sframe(const Device& dev, pid_t pid, const std::string& path) {
  // Opened once: the layout and the section of the same file.
  const ObjectFile object = ObjectFile::open(path);
  const ObjectLayout& layout = object.layout();
  const FileSframe f = read_sframe_from_file(object);
  const uint64_t bias = load_bias_in_process(pid, path, layout.image_vaddr);
  SuppliedSection s;
  s.path = path;
  s.text_start = bias + layout.text_lo;
  s.text_len = layout.text_hi - layout.text_lo;
  s.sframe_addr = bias + f.address;
  s.sframe_len = f.bytes.size();
  dev.supply_section(pid, f.bytes.data(), f.bytes.size(), s.sframe_addr, s.text_start, s.text_len,
                     path);
  return s;
}

FileSframe read_sframe_from_file(const std::string& path) {
  return read_sframe_from_file(ObjectFile::read(open_object_file(path), path));
}

FileSframe read_sframe_from_file(const ObjectFile& object) {
  return read_sframe_from_elf(object.elf(), object.name());
}

namespace {

FileSframe read_sframe_from_elf(const internal::ElfFile& elf, const std::string& path) {
  size_t shstrndx;
  if (elf_getshdrstrndx(elf.get(), &shstrndx) != 0) {
    throw Error(ENOEXEC, op::kReadElf, path, elf_errmsg(-1));
  }
  for (Elf_Scn* scn = elf_nextscn(elf.get(), nullptr); scn != nullptr;
       scn = elf_nextscn(elf.get(), scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr) continue;
    const char* name = elf_strptr(elf.get(), shstrndx, shdr.sh_name);
    if (name == nullptr || std::strcmp(name, ".sframe") != 0) continue;
    if (shdr.sh_type == SHT_NOBITS) {
      throw Error(ENODATA, op::kReadElf, path, ".sframe section has no bytes in the file");
    }
    FileSframe out;
    out.path = path;
    out.address = shdr.sh_addr;
    Elf_Data* data = nullptr;
    while ((data = elf_getdata(scn, data)) != nullptr) {
      const auto* b = static_cast<const uint8_t*>(data->d_buf);
      if (b != nullptr) out.bytes.insert(out.bytes.end(), b, b + data->d_size);
    }
    return out;
  }
  throw Error(ENODATA, op::kReadElf, path, "no .sframe section");
}

}  // namespace

}  // namespace sframe
