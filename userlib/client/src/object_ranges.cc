// describe_object(): the .sframe and text ranges of a loaded object from its
// program headers.  A file of its own (no libelf, no dl_iterate_phdr), so
// that libsframe-audit.so links it without the rest of objects.cc.
#include <link.h>

#include <algorithm>
#include <cstdint>

#include "sframe_client/objects.h"
#include "sframe_client/sframe_format.h"

namespace sframe {

LoadedObject describe_object(uint64_t base, const ElfW(Phdr) * phdr, size_t phnum) noexcept {
  LoadedObject obj;
  obj.base = base;
  uint64_t text_lo = UINT64_MAX, text_hi = 0;
  uint64_t sframe_memsz = 0;
  for (size_t i = 0; i < phnum; i++) {
    const ElfW(Phdr)& ph = phdr[i];
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && ph.p_memsz != 0) {
      text_lo = std::min<uint64_t>(text_lo, base + ph.p_vaddr);
      text_hi = std::max<uint64_t>(text_hi, base + ph.p_vaddr + ph.p_memsz);
    } else if (ph.p_type == kPtGnuSframe && ph.p_memsz != 0) {
      obj.sframe_addr = base + ph.p_vaddr;
      sframe_memsz = ph.p_memsz;
    }
  }
  if (text_hi > text_lo) {
    obj.text_start = text_lo;
    obj.text_len = text_hi - text_lo;
  }
  if (sframe_memsz != 0) {
    // The segment may be longer than the section (binutils 2.40 rounds it
    // up); the section's own length is what the header says it uses.
    obj.sframe_len = sframe_memsz;
    auto h = parse_header(reinterpret_cast<const void*>(obj.sframe_addr), sframe_memsz);
    if (h && h->used_size() <= sframe_memsz) obj.sframe_len = h->used_size();
  }
  return obj;
}

}  // namespace sframe
