#include "sframe_client/objects.h"

#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>

#include "sframe_client/error.h"
#include "sframe_client/fd.h"
#include "sframe_client/sframe_format.h"

namespace sframe {
namespace {

std::string address_name(const void* addr) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "address %p", addr);
  return buf;
}

LoadedObject describe(const dl_phdr_info* info) {
  LoadedObject obj = describe_object(info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum);
  // The main program is reported with an empty name.
  obj.path = (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') ? info->dlpi_name
                                                                        : self_exe_path();
  return obj;
}

int collect(dl_phdr_info* info, size_t, void* data) {
  auto* out = static_cast<std::vector<LoadedObject>*>(data);
  out->push_back(describe(info));
  return 0;
}

struct Containing {
  uint64_t addr;
  bool found = false;
  LoadedObject obj;
};

int find_containing(dl_phdr_info* info, size_t, void* data) {
  auto* c = static_cast<Containing*>(data);
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    uint64_t start = info->dlpi_addr + ph.p_vaddr;
    if (c->addr >= start && c->addr - start < ph.p_memsz) {
      c->obj = describe(info);
      c->found = true;
      return 1;
    }
  }
  return 0;
}

Registration register_object(const Device& dev, const LoadedObject& obj) {
  return dev.register_scoped(obj.sframe_addr, obj.sframe_len, obj.text_start, obj.text_len,
                             obj.path);
}

}  // namespace

std::string self_exe_path() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "/proc/self/exe";
  buf[n] = '\0';
  return buf;
}

std::vector<LoadedObject> loaded_objects() {
  std::vector<LoadedObject> out;
  dl_iterate_phdr(collect, &out);
  return out;
}

std::optional<LoadedObject> loaded_object_containing(const void* addr) {
  Containing c;
  c.addr = reinterpret_cast<uint64_t>(addr);
  dl_iterate_phdr(find_containing, &c);
  if (!c.found) return std::nullopt;
  return c.obj;
}

std::vector<Registration> register_loaded_objects(const Device& dev) {
  std::vector<Registration> regs;
  for (const auto& obj : loaded_objects()) {
    if (!obj.has_sframe() || !obj.has_text()) continue;
    regs.push_back(register_object(dev, obj));
  }
  return regs;
}

Registration register_object_containing(const Device& dev, const void* addr) {
  auto obj = loaded_object_containing(addr);
  if (!obj) throw Error(ENOENT, op::kFindObject, address_name(addr), "no loaded object holds it");
  if (!obj->has_sframe()) {
    throw Error(ENODATA, op::kFindObject, obj->path, "object has no PT_GNU_SFRAME segment");
  }
  return register_object(dev, *obj);
}

}  // namespace sframe
