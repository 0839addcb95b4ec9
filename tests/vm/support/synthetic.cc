#include "synthetic.h"
#include "sframe_gen/section_builder.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace vmtest {
namespace {

size_t PageRound(size_t n) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

}  // namespace

sframe::SectionBuilder OneFunction(uint64_t start, uint32_t size, uint8_t version) {
  sframe::SectionBuilder b(version);
  b.add_fde(sframe::FdeSpec{start, size, {sframe::FreSpec{0, true, 8, {}}}, false, 0, {}});
  return b;
}

SyntheticSections::SyntheticSections(size_t count, size_t chunk, uint8_t version)
    : count_(count), chunk_(chunk) {
  text_ = sframe::MappedRegion::map(PageRound(count * chunk), PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS);
  std::memset(text_.data(), 0xcc, text_.size());  // int3
  text_.protect(PROT_READ | PROT_EXEC);
  len_ = OneFunction(0, 1, version).size();
  stride_ = (len_ + 7) & ~size_t{7};
  sections_ = sframe::MappedRegion::map_near(text_.data(), PageRound(count * stride_),
                                             PROT_READ | PROT_WRITE);
  for (size_t i = 0; i < count; i++) {
    OneFunction(text(i), static_cast<uint32_t>(chunk), version)
        .build_into(sections_.bytes() + i * stride_, section(i));
  }
}

SyntheticSections::Built SyntheticSections::Build(const sframe::SectionBuilder& b, uint64_t near) {
  sframe::MappedRegion m =
      sframe::MappedRegion::map_near(near ? reinterpret_cast<void*>(near) : text_.data(),
                                     PageRound(b.size()), PROT_READ | PROT_WRITE);
  b.build_into(m.data(), m.address());
  Built out{m.address(), b.size()};
  extra_.push_back(std::move(m));
  return out;
}

SyntheticSections::Built SyntheticSections::BuildFor(uint64_t start, uint32_t size,
                                                     uint8_t version) {
  return Build(OneFunction(start, size, version), start);
}

SectionCopy CopySection(const sframe::LoadedObject& obj, size_t extra) {
  SectionCopy c;
  c.len = obj.sframe_len;
  c.mem = sframe::MappedRegion::map_near(reinterpret_cast<void*>(obj.text_start),
                                         PageRound(obj.sframe_len + extra), PROT_READ | PROT_WRITE);
  std::memcpy(c.mem.data(), reinterpret_cast<const void*>(obj.sframe_addr), obj.sframe_len);
  if (!sframe::relocate_section(c.mem.data(), c.len, obj.sframe_addr, c.addr())) {
    throw sframe::Error(ERANGE, "relocate", obj.path);
  }
  return c;
}

}  // namespace vmtest
