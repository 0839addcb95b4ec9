// Synthetic text and sections for tests that need many distinct or
// deliberately broken registrations: an executable anonymous mapping cut
// into chunks (int3 bytes), and next to it (within 32-bit reach) one small
// valid section per chunk, each with one FDE covering its chunk.
#ifndef SFRAME_VMTEST_SYNTHETIC_H
#define SFRAME_VMTEST_SYNTHETIC_H

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sframe_client/sframe_client.hpp"
#include "sframe_gen/section_builder.h"

namespace vmtest {

class SyntheticSections {
 public:
  // count chunks of chunk bytes; sections in SFrame version `version`.
  SyntheticSections(size_t count, size_t chunk = 16, uint8_t version = 2);

  size_t count() const { return count_; }
  size_t chunk() const { return chunk_; }
  uint64_t text(size_t i) const { return text_.address() + i * chunk_; }
  uint64_t section(size_t i) const { return sections_.address() + i * stride_; }
  size_t section_len() const { return len_; }
  const sframe::MappedRegion& text_region() const { return text_; }

  // A section describing one function [start, start + size), built at a
  // fresh place near the text (kept alive by this object).
  struct Built {
    uint64_t addr;
    size_t len;
  };
  // (The section is mapped within 1 GiB of near, default: the text.)
  Built Build(const sframe::SectionBuilder& b, uint64_t near = 0);
  Built BuildFor(uint64_t start, uint32_t size, uint8_t version = 2);

 private:
  size_t count_, chunk_, stride_, len_;
  sframe::MappedRegion text_;
  sframe::MappedRegion sections_;
  std::vector<sframe::MappedRegion> extra_;
};

// A copy of a loaded object's .sframe, relocated to a fresh writable mapping
// near its text, to be corrupted by tests.
struct SectionCopy {
  sframe::MappedRegion mem;
  size_t len = 0;
  uint64_t addr() const { return mem.address(); }
  uint8_t* bytes() const { return mem.bytes(); }
};
SectionCopy CopySection(const sframe::LoadedObject& obj, size_t extra = 0);

// One FDE of one valid section with a single SP-based row.
sframe::SectionBuilder OneFunction(uint64_t start, uint32_t size, uint8_t version = 2);

}  // namespace vmtest

#endif  // SFRAME_VMTEST_SYNTHETIC_H
