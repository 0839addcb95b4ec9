#include "sframe_object/elf_file.h"

#include <elf.h>
#include <fcntl.h>
#include <gelf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "sframe_client/error.h"

namespace sframe::internal {

ElfFile::ElfFile(const std::string& path) : path_(path) {
  if (elf_version(EV_CURRENT) == EV_NONE) {
    throw Error(ENOSYS, op::kReadElf, path, "libelf version mismatch");
  }
  try {
    fd_ = UniqueFd::open(path, O_RDONLY);
  } catch (const Error& e) {
    throw Error(e.err(), op::kReadElf, path);
  }
  begin();
}

ElfFile::ElfFile(UniqueFd fd, const std::string& name) : path_(name), fd_(std::move(fd)) {
  if (elf_version(EV_CURRENT) == EV_NONE) {
    throw Error(ENOSYS, op::kReadElf, name, "libelf version mismatch");
  }
  begin();
}

void ElfFile::begin() {
  elf_.reset(elf_begin(fd_.get(), ELF_C_READ_MMAP, nullptr));
  if (!elf_ || elf_kind(elf_.get()) != ELF_K_ELF) {
    throw Error(ENOEXEC, op::kReadElf, path_, "not an ELF file");
  }
}

// PT_GNU_SFRAME (objects.h has it too, but pulls in the device API, which
// the fuzzer's build of this file has no include path for).
constexpr uint32_t kPtGnuSframeSegment = 0x6474e554;

ElfLayout read_elf_layout(const ElfFile& elf) {
  size_t phnum = 0;
  if (elf_getphdrnum(elf.get(), &phnum) != 0) {
    throw Error(ENOEXEC, op::kReadElf, elf.path(), "no program headers");
  }
  ElfLayout l;
  bool have_load = false;
  uint64_t lowest_load = UINT64_MAX;
  l.text_lo = UINT64_MAX;
  for (size_t i = 0; i < phnum; i++) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf.get(), static_cast<int>(i), &ph) == nullptr) continue;
    if (ph.p_type == kPtGnuSframeSegment && ph.p_memsz != 0) l.has_sframe = true;
    if (ph.p_type != PT_LOAD) continue;
    if (ph.p_vaddr < lowest_load) {
      lowest_load = ph.p_vaddr;
      l.image_vaddr = ph.p_vaddr - ph.p_offset;
      have_load = true;
    }
    if ((ph.p_flags & PF_X) && ph.p_memsz != 0) {
      l.text_lo = std::min<uint64_t>(l.text_lo, ph.p_vaddr);
      l.text_hi = std::max<uint64_t>(l.text_hi, ph.p_vaddr + ph.p_memsz);
    }
  }
  if (!have_load || l.text_hi <= l.text_lo) {
    throw Error(ENOEXEC, op::kReadElf, elf.path(), "no executable PT_LOAD segment");
  }
  return l;
}

namespace {

// The NT_GNU_BUILD_ID descriptor in a block of notes, in hex, or empty.
std::string build_id_in(Elf_Data* data) {
  if (data == nullptr) return {};
  GElf_Nhdr nh;
  size_t off = 0, name_off, desc_off, next;
  while ((next = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
    const char* base = static_cast<const char*>(data->d_buf);
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
        std::memcmp(base + name_off, "GNU", 4) == 0) {
      static const char kHex[] = "0123456789abcdef";
      std::string hex;
      for (size_t i = 0; i < nh.n_descsz; i++) {
        const auto b = static_cast<uint8_t>(base[desc_off + i]);
        hex += kHex[b >> 4];
        hex += kHex[b & 15];
      }
      return hex;
    }
    off = next;
  }
  return {};
}

}  // namespace

ElfDependencies elf_dependencies(const ElfFile& elf) {
  ElfDependencies d;
  size_t phnum = 0;
  if (elf_getphdrnum(elf.get(), &phnum) == 0) {
    for (size_t i = 0; i < phnum; i++) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf.get(), static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_INTERP)
        continue;
      Elf_Data* data = elf_getdata_rawchunk(elf.get(), static_cast<int64_t>(ph.p_offset),
                                            ph.p_filesz, ELF_T_BYTE);
      if (data && data->d_buf && data->d_size) {
        const char* p = static_cast<const char*>(data->d_buf);
        d.interpreter.assign(p, strnlen(p, data->d_size));
      }
    }
  }
  for (Elf_Scn* scn = elf_nextscn(elf.get(), nullptr); scn; scn = elf_nextscn(elf.get(), scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type != SHT_DYNAMIC) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    for (size_t i = 0; data && sh.sh_entsize && i < sh.sh_size / sh.sh_entsize; i++) {
      GElf_Dyn dyn;
      if (gelf_getdyn(data, static_cast<int>(i), &dyn) == nullptr) break;
      if (dyn.d_tag != DT_NEEDED) continue;
      const char* name = elf_strptr(elf.get(), sh.sh_link, dyn.d_un.d_val);
      if (name) d.needed.emplace_back(name);
    }
  }
  return d;
}

std::string elf_build_id(const ElfFile& elf) {
  size_t phnum = 0;
  if (elf_getphdrnum(elf.get(), &phnum) == 0) {
    for (size_t i = 0; i < phnum; i++) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf.get(), static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_NOTE)
        continue;
      std::string id = build_id_in(elf_getdata_rawchunk(
          elf.get(), static_cast<int64_t>(ph.p_offset), ph.p_filesz, ELF_T_NHDR));
      if (!id.empty()) return id;
    }
  }
  for (Elf_Scn* scn = elf_nextscn(elf.get(), nullptr); scn; scn = elf_nextscn(elf.get(), scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type != SHT_NOTE) continue;
    std::string id = build_id_in(elf_getdata(scn, nullptr));
    if (!id.empty()) return id;
  }
  return {};
}

}  // namespace sframe::internal
