// Bad input through the real ioctls: each case expects the errno that
// uapi/sframe_unwind.h documents for it.  Requests that should fail but
// succeed are undone, so one failure does not cascade into the next test.
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <vector>

#include "synthetic.h"
#include "vmtest.h"
#include "sframe_test/errno_of.h"
#include "sframe_gen/section_builder.h"

namespace {

using vmtest::CopySection;
using vmtest::SectionCopy;
using vmtest::SyntheticSections;
namespace hdr = sframe::hdr;

void Put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
uint32_t Get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

class ErrorsTest : public vmtest::SelfSectionTest {
 protected:

  int Ioctl(unsigned long request, void* arg) {
    return ::ioctl(dev().fd(), request, arg) == 0 ? 0 : errno;
  }

  // SFRAME_IOC_REGISTER's errno; a registration that should not have
  // succeeded is removed again.
  int Register(uint64_t sframe_addr, uint64_t sframe_len, uint64_t text_start, uint64_t text_len) {
    int err = sframe::errno_of(
        [&] { dev().register_section(sframe_addr, sframe_len, text_start, text_len); });
    if (err == 0) sframe::errno_of([&] { dev().unregister_section(text_start); });
    return err;
  }
  int RegisterRaw(sframe_register* req) {
    int err = Ioctl(SFRAME_IOC_REGISTER, req);
    if (err == 0) sframe::errno_of([&] { dev().unregister_section(req->text_start); });
    return err;
  }
  int RegisterCopy(const SectionCopy& c, size_t len) {
    return Register(c.addr(), len, self_.text_start, self_.text_len);
  }
  sframe_register SelfRequest() {
    sframe_register req{};
    req.size = sizeof(req);
    req.sframe_addr = self_.sframe_addr;
    req.sframe_len = self_.sframe_len;
    req.text_start = self_.text_start;
    req.text_len = self_.text_len;
    return req;
  }

};

// ---- the valid case, and struct versioning ---------------------------------

TEST_F(ErrorsTest, TheProgramsOwnSectionRegisters) {
  sframe::Stats before = dev().stats();
  {
    sframe::Registration r = dev().register_scoped(self_.sframe_addr, self_.sframe_len,
                                                   self_.text_start, self_.text_len);
    sframe::Stats during = dev().stats();
    EXPECT_EQ(during.mm_sections, before.mm_sections + 1);
    EXPECT_GE(during.sections, 1u);
    EXPECT_GE(during.processes, 1u);
    EXPECT_EQ(during.registrations, before.registrations + 1);
    EXPECT_EQ(during.abi_version, static_cast<uint32_t>(SFRAME_UNWIND_ABI_VERSION));
    EXPECT_EQ(r.reset(), 0);
  }
  EXPECT_EQ(dev().stats().mm_sections, before.mm_sections);
}

TEST_F(ErrorsTest, RegisterStructSize) {
  sframe_register req = SelfRequest();
  req.size = 0;
  EXPECT_EQ(RegisterRaw(&req), EINVAL);
  req.size = SFRAME_REGISTER_SIZE_VER0 - 1;
  EXPECT_EQ(RegisterRaw(&req), EINVAL);

  // A newer caller's larger struct: accepted with a zero tail, E2BIG with
  // anything else in it.
  struct {
    sframe_register req;
    uint64_t tail[2];
  } big{};
  big.req = SelfRequest();
  big.req.size = sizeof(big);
  EXPECT_EQ(RegisterRaw(&big.req), 0);
  big.tail[1] = 1;
  EXPECT_EQ(RegisterRaw(&big.req), E2BIG);
}

TEST_F(ErrorsTest, RegisterFlagsAndReservedMustBeZero) {
  sframe_register req = SelfRequest();
  req.flags = 1;
  EXPECT_EQ(RegisterRaw(&req), EINVAL);
  req.flags = 0x80000000u;
  EXPECT_EQ(RegisterRaw(&req), EINVAL);
  req = SelfRequest();
  req.reserved[0] = 1;
  EXPECT_EQ(RegisterRaw(&req), EINVAL);
  req = SelfRequest();
  req.reserved[1] = 1ull << 63;
  EXPECT_EQ(RegisterRaw(&req), EINVAL);
}

// registrations_rejected counts every failed SFRAME_IOC_REGISTER (uapi).
TEST_F(ErrorsTest, RejectedRegistrationsAreCounted) {
  SectionCopy c = CopySection(self_);
  c.bytes()[0] ^= 0xff;
  sframe::Stats before = dev().stats();
  EXPECT_EQ(RegisterCopy(c, c.len), ENOEXEC);
  EXPECT_EQ(dev().stats().registrations_rejected, before.registrations_rejected + 1)
      << "a section the module refuses";
  before = dev().stats();
  EXPECT_EQ(Register(self_.sframe_addr, 0, self_.text_start, self_.text_len), EINVAL);
  EXPECT_EQ(dev().stats().registrations_rejected, before.registrations_rejected + 1)
      << "a zero length";
  before = dev().stats();
  sframe_register req = SelfRequest();
  req.flags = 1;
  EXPECT_EQ(RegisterRaw(&req), EINVAL);
  EXPECT_EQ(dev().stats().registrations_rejected, before.registrations_rejected + 1)
      << "non-zero flags";
  EXPECT_EQ(dev().stats().registrations, before.registrations);
}

// ---- not SFrame, or not a version/ABI the module reads ----------------------

TEST_F(ErrorsTest, GarbageIsNotSframe) {
  SectionCopy c = CopySection(self_);
  std::mt19937 rng(42);
  for (size_t i = 0; i < c.len; i++) c.bytes()[i] = static_cast<uint8_t>(rng());
  c.bytes()[0] = 0x12;  // whatever the generator said, not the magic
  EXPECT_EQ(RegisterCopy(c, c.len), ENOEXEC);
  std::memset(c.bytes(), 0, c.len);
  EXPECT_EQ(RegisterCopy(c, c.len), ENOEXEC);
}

TEST_F(ErrorsTest, ByteSwappedMagic) {
  SectionCopy c = CopySection(self_);
  std::swap(c.bytes()[0], c.bytes()[1]);
  EXPECT_EQ(RegisterCopy(c, c.len), ENOEXEC);
}

TEST_F(ErrorsTest, UnsupportedVersions) {
  SectionCopy c = CopySection(self_);
  for (int v : {0, 4, 5, 0x7f, 0xff}) {
    c.bytes()[hdr::kVersion] = static_cast<uint8_t>(v);
    EXPECT_EQ(RegisterCopy(c, c.len), EOPNOTSUPP) << "version " << v;
  }
}

TEST_F(ErrorsTest, UnsupportedAbiArch) {
  SectionCopy c = CopySection(self_);
  for (int abi : {0, 1, 2, 4, 0xff}) {  // aarch64 BE/LE, s390x, unknown
    c.bytes()[hdr::kAbiArch] = static_cast<uint8_t>(abi);
    EXPECT_EQ(RegisterCopy(c, c.len), EOPNOTSUPP) << "abi/arch " << abi;
  }
}

TEST_F(ErrorsTest, CopyOfTheSectionRegisters) {
  // The baseline of the corruption tests below: the untouched copy is fine.
  SectionCopy c = CopySection(self_);
  EXPECT_EQ(RegisterCopy(c, c.len), 0);
}

// ---- truncated sections and lying headers -----------------------------------

TEST_F(ErrorsTest, TruncatedSections) {
  SectionCopy c = CopySection(self_);
  auto h = sframe::parse_header(c.bytes(), c.len);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(RegisterCopy(c, 1), EINVAL);
  EXPECT_EQ(RegisterCopy(c, sframe::kSframeHeaderSize - 1), EINVAL);
  EXPECT_EQ(RegisterCopy(c, sframe::kSframeHeaderSize), EINVAL);          // tables missing
  EXPECT_EQ(RegisterCopy(c, h->header_size() + h->fre_off / 2), EINVAL);  // in the FDEs
  EXPECT_EQ(RegisterCopy(c, h->header_size() + h->fre_off + 1), EINVAL);  // in the FREs
  EXPECT_EQ(RegisterCopy(c, c.len - 1), EINVAL);
}

TEST_F(ErrorsTest, LyingHeaderCounts) {
  SectionCopy c = CopySection(self_);
  auto h = sframe::parse_header(c.bytes(), c.len);
  ASSERT_TRUE(h.has_value());
  struct Lie {
    const char* what;
    size_t off;
    uint32_t value;
  } lies[] = {
      {"num_fdes huge", hdr::kNumFdes, 0xffffffffu},
      {"num_fdes + 1 (FDE table runs into the FREs)", hdr::kNumFdes, h->num_fdes + 1},
      {"num_fres huge", hdr::kNumFres, 0x7fffffffu},
      {"fre_len + 1", hdr::kFreLen, h->fre_len + 1},
      {"fre_len huge", hdr::kFreLen, 0xfffffff0u},
      {"fde_off beyond the section", hdr::kFdeOff, static_cast<uint32_t>(c.len)},
      {"fre_off beyond the section", hdr::kFreOff, static_cast<uint32_t>(c.len)},
      {"fre_off huge", hdr::kFreOff, 0xffffff00u},
  };
  for (const Lie& lie : lies) {
    uint32_t saved = Get32(c.bytes() + lie.off);
    Put32(c.bytes() + lie.off, lie.value);
    EXPECT_EQ(RegisterCopy(c, c.len), EINVAL) << lie.what;
    Put32(c.bytes() + lie.off, saved);
  }
  c.bytes()[hdr::kAuxLen] = 0xff;  // every offset now counts from elsewhere
  EXPECT_EQ(RegisterCopy(c, c.len), EINVAL) << "aux header of 255 bytes";
}

TEST_F(ErrorsTest, LyingFdes) {
  SectionCopy c = CopySection(self_);
  auto h = sframe::parse_header(c.bytes(), c.len);
  ASSERT_TRUE(h.has_value());
  ASSERT_EQ(h->version, 1);
  ASSERT_GE(h->num_fdes, 3u);
  const size_t fde_size = h->fde_size();  // 17: start s32, size u32, fre_off u32, num u32, info
  uint8_t* fdes = c.bytes() + h->header_size() + h->fde_off;
  auto field = [&](uint32_t i, size_t off) { return fdes + i * fde_size + off; };
  struct Lie {
    const char* what;
    uint32_t fde;
    size_t off;
    uint32_t value;
  };
  const uint32_t last = h->num_fdes - 1;
  std::vector<Lie> lies = {
      {"start 1 MiB before the text", 0, 0, Get32(field(0, 0)) - (1u << 20)},
      {"start past the text", last, 0, Get32(field(last, 0)) + (1u << 30)},
      {"size past the end of the text", last, 4, 0x7fffffffu},
      {"FRE offset beyond the FRE sub-section", 1, 8, h->fre_len + 100},
      {"FRE count beyond the FRE sub-section", 1, 12, 0x00ffffffu},
  };
  for (const Lie& lie : lies) {
    uint32_t saved = Get32(field(lie.fde, lie.off));
    Put32(field(lie.fde, lie.off), lie.value);
    EXPECT_EQ(RegisterCopy(c, c.len), EINVAL) << lie.what;
    Put32(field(lie.fde, lie.off), saved);
  }
  // Unsorted although SFRAME_F_FDE_SORTED says sorted: swap two FDEs (their
  // start fields are relative to the section, so each still names its
  // function).
  std::vector<uint8_t> tmp(fde_size);
  std::memcpy(tmp.data(), field(1, 0), fde_size);
  std::memcpy(field(1, 0), field(2, 0), fde_size);
  std::memcpy(field(2, 0), tmp.data(), fde_size);
  EXPECT_EQ(RegisterCopy(c, c.len), EINVAL) << "unsorted FDEs";
}

TEST_F(ErrorsTest, FdeOutsideTheGivenTextRange) {
  // The whole section for a text range that misses a byte of the first or
  // of the last function.
  const void* data = reinterpret_cast<const void*>(self_.sframe_addr);
  auto h = sframe::parse_header(data, self_.sframe_len);
  ASSERT_TRUE(h.has_value());
  auto first = sframe::fde_func_start(data, self_.sframe_len, self_.sframe_addr, 0);
  auto last = sframe::fde_func_start(data, self_.sframe_len, self_.sframe_addr, h->num_fdes - 1);
  auto last_size = sframe::fde_func_size(data, self_.sframe_len, h->num_fdes - 1);
  ASSERT_TRUE(first && last && last_size);
  const uint64_t end = *last + *last_size;
  ASSERT_LE(end, self_.text_start + self_.text_len);
  EXPECT_EQ(
      Register(self_.sframe_addr, self_.sframe_len, self_.text_start, end - 1 - self_.text_start),
      EINVAL)
      << "last function cut";
  EXPECT_EQ(Register(self_.sframe_addr, self_.sframe_len, *first + 1, end - *first - 1), EINVAL)
      << "first function cut";
  EXPECT_EQ(Register(self_.sframe_addr, self_.sframe_len, *first, end - *first), 0)
      << "exactly the functions";
}

TEST_F(ErrorsTest, FreBeyondItsFunction) {
  SyntheticSections s(2, 16);
  sframe::SectionBuilder b(2);
  b.add_fde(sframe::FdeSpec{
      s.text(0), 16, {{0, true, 8, {}}, {20, true, 16, {}}}, false, 0, {}});  // 20 >= 16
  auto built = s.Build(b);
  EXPECT_EQ(Register(built.addr, built.len, s.text(0), 16), EINVAL);
  // Start offsets that go down.
  sframe::SectionBuilder d(2);
  d.add_fde(sframe::FdeSpec{
      s.text(0), 16, {{0, true, 8, {}}, {8, true, 16, {}}, {4, true, 8, {}}}, false, 0, {}});
  built = s.Build(d);
  EXPECT_EQ(Register(built.addr, built.len, s.text(0), 16), EINVAL);
}

TEST_F(ErrorsTest, OverlappingFdes) {
  SyntheticSections s(1, 64);
  sframe::SectionBuilder b(2);
  b.add_fde(sframe::FdeSpec{s.text(0), 32, {{0, true, 8, {}}}, false, 0, {}});
  b.add_fde(sframe::FdeSpec{s.text(0) + 16, 32, {{0, true, 8, {}}}, false, 0, {}});
  auto built = s.Build(b);
  EXPECT_EQ(Register(built.addr, built.len, s.text(0), 64), EINVAL);
}

TEST_F(ErrorsTest, SyntheticSectionsOfEveryVersionRegister) {
  for (uint8_t v : {1, 2, 3}) {
    SyntheticSections s(1, 64, v);
    EXPECT_EQ(Register(s.section(0), s.section_len(), s.text(0), 64), 0) << "v" << int(v);
  }
}

// ---- lengths and ranges ------------------------------------------------------

TEST_F(ErrorsTest, ZeroLengths) {
  EXPECT_EQ(Register(self_.sframe_addr, 0, self_.text_start, self_.text_len), EINVAL);
  EXPECT_EQ(Register(self_.sframe_addr, self_.sframe_len, self_.text_start, 0), EINVAL);
}

TEST_F(ErrorsTest, SectionAboveTheMaximumSize) {
  // A real mapping that large, the section at its start: only the size is
  // wrong.
  const size_t len = SFRAME_MAX_SECTION_SIZE + 1;
  sframe::MappedRegion big = sframe::MappedRegion::map_near(
      reinterpret_cast<void*>(self_.text_start), len + 4096, PROT_READ | PROT_WRITE);
  std::memcpy(big.data(), reinterpret_cast<void*>(self_.sframe_addr), self_.sframe_len);
  ASSERT_TRUE(
      sframe::relocate_section(big.data(), self_.sframe_len, self_.sframe_addr, big.address()));
  EXPECT_EQ(Register(big.address(), self_.sframe_len, self_.text_start, self_.text_len), 0);
  EXPECT_EQ(Register(big.address(), SFRAME_MAX_SECTION_SIZE, self_.text_start, self_.text_len), 0)
      << "trailing bytes after the tables are allowed";
  EXPECT_EQ(Register(big.address(), len, self_.text_start, self_.text_len), E2BIG);
  EXPECT_EQ(Register(big.address(), ~0ull, self_.text_start, self_.text_len), E2BIG);
}

TEST_F(ErrorsTest, OverflowingAndKernelRanges) {
  EXPECT_EQ(Register(self_.sframe_addr, self_.sframe_len, 0xfffffffffffff000ull, 0x2000), EINVAL);
  EXPECT_EQ(Register(self_.sframe_addr, self_.sframe_len, self_.text_start, ~0ull), EINVAL);
  // Above the user address limit (kernel addresses).  (Not 0x800000000000:
  // with 5-level paging, as under qemu -cpu max, that is a user address.)
  EXPECT_EQ(Register(self_.sframe_addr, self_.sframe_len, 0xffff800000000000ull, 0x1000), EINVAL);
  EXPECT_EQ(Register(self_.sframe_addr, self_.sframe_len, 0xfffffffffffff000ull, 0x1000), EINVAL);
  EXPECT_EQ(Register(0xffffffffffffff00ull, 0x1000, self_.text_start, self_.text_len), EINVAL);
}

// ---- mappings -----------------------------------------------------------------

TEST_F(ErrorsTest, UnmappedText) {
  SyntheticSections s(2, 64);
  // Valid section, but its text is gone.
  uint64_t text = s.text(0);
  munmap(reinterpret_cast<void*>(s.text_region().address()), s.text_region().size());
  EXPECT_EQ(Register(s.section(0), s.section_len(), text, 64), EFAULT);
  // (The region's destructor unmaps again: harmless.)
}

TEST_F(ErrorsTest, TextRangeWithAHole) {
  // Two executable pages with an unmapped page between them.  (Everything
  // else is mapped first: a later mmap could fill the hole.)
  SyntheticSections s(1, 16);
  sframe::MappedRegion m =
      sframe::MappedRegion::map(3 * 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS);
  auto built = s.BuildFor(m.address(), 16);
  munmap(m.bytes() + 4096, 4096);
  EXPECT_EQ(Register(built.addr, built.len, m.address(), 3 * 4096), EFAULT);
  EXPECT_EQ(Register(built.addr, built.len, m.address(), 4096), 0);
}

TEST_F(ErrorsTest, NonExecutableText) {
  for (int prot : {PROT_READ, PROT_READ | PROT_WRITE, PROT_NONE}) {
    sframe::MappedRegion m = sframe::MappedRegion::map(4096, prot, MAP_PRIVATE | MAP_ANONYMOUS);
    SyntheticSections s(1, 16);
    auto built = s.BuildFor(m.address(), 64);
    EXPECT_EQ(Register(built.addr, built.len, m.address(), 4096), EACCES) << "prot " << prot;
  }
}

TEST_F(ErrorsTest, UnmappedOrUnreadableSection) {
  SyntheticSections s(1, 64);
  // The section's pages gone.
  sframe::MappedRegion gone =
      sframe::MappedRegion::map(4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  const uint64_t addr = gone.address();
  gone.reset();
  EXPECT_EQ(Register(addr, s.section_len(), s.text(0), 64), EFAULT);
  // Readable start, but the length runs past the mapping.
  sframe::MappedRegion one =
      sframe::MappedRegion::map(2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  munmap(one.bytes() + 4096, 4096);
  uint8_t* at = one.bytes() + 4096 - s.section_len();
  std::memcpy(at, reinterpret_cast<void*>(s.section(0)), s.section_len());
  // (The copy's FDE offset is now wrong, but the length is checked first:
  // reading past the mapping cannot succeed.)
  EXPECT_EQ(Register(reinterpret_cast<uint64_t>(at), s.section_len() + 64, s.text(0), 64), EFAULT);
  // Mapped but not readable.
  sframe::MappedRegion none = sframe::MappedRegion::map_near(reinterpret_cast<void*>(s.text(0)),
                                                             4096, PROT_READ | PROT_WRITE);
  std::memcpy(none.data(), reinterpret_cast<void*>(s.section(0)), s.section_len());
  ASSERT_TRUE(sframe::relocate_section(none.data(), s.section_len(), s.section(0), none.address()));
  EXPECT_EQ(Register(none.address(), s.section_len(), s.text(0), 64), 0);
  none.protect(PROT_NONE);
  EXPECT_EQ(Register(none.address(), s.section_len(), s.text(0), 64), EFAULT);
}

// ---- overlaps -------------------------------------------------------------------

TEST_F(ErrorsTest, OverlappingTextRanges) {
  sframe::Registration r = dev().register_scoped(self_.sframe_addr, self_.sframe_len,
                                                 self_.text_start, self_.text_len, self_.path);
  try {
    dev().register_section(self_.sframe_addr, self_.sframe_len, self_.text_start, self_.text_len,
                           self_.path);
    FAIL() << "registered twice";
  } catch (const sframe::Error& e) {
    EXPECT_EQ(e.err(), EEXIST);
    EXPECT_EQ(std::string(e.what()),
              "register " + self_.path + ": .sframe text range overlaps a registered one (EEXIST)");
  }

  SyntheticSections s(4, 64);
  sframe::Registration a = dev().register_scoped(s.section(1), s.section_len(), s.text(1), 64);
  // Overlapping the end of chunk 1, or its start, or inside it, or around it.
  auto mid = s.BuildFor(s.text(1) + 32, 64);
  EXPECT_EQ(Register(mid.addr, mid.len, s.text(1) + 32, 64), EEXIST);
  auto before = s.BuildFor(s.text(0) + 32, 64);
  EXPECT_EQ(Register(before.addr, before.len, s.text(0) + 32, 64), EEXIST);
  auto inside = s.BuildFor(s.text(1) + 16, 16);
  EXPECT_EQ(Register(inside.addr, inside.len, s.text(1) + 16, 16), EEXIST);
  auto around = s.BuildFor(s.text(0), 64);
  EXPECT_EQ(Register(around.addr, around.len, s.text(0), 4 * 64), EEXIST);
  // Adjacent ranges are fine.
  EXPECT_EQ(Register(s.section(0), s.section_len(), s.text(0), 64), 0);
  EXPECT_EQ(Register(s.section(2), s.section_len(), s.text(2), 64), 0);
}

// ---- unregister -------------------------------------------------------------------

TEST_F(ErrorsTest, UnregisterUnknown) {
  EXPECT_EQ(sframe::errno_of([&] { dev().unregister_section(self_.text_start); }), ENOENT);
  sframe::Registration r =
      dev().register_scoped(self_.sframe_addr, self_.sframe_len, self_.text_start, self_.text_len);
  // Only the exact text_start names a section.
  EXPECT_EQ(sframe::errno_of([&] { dev().unregister_section(self_.text_start + 16); }), ENOENT);
  EXPECT_EQ(sframe::errno_of([&] { dev().unregister_section(0); }), ENOENT);
  EXPECT_EQ(sframe::errno_of([&] { dev().unregister_section(~0ull); }), ENOENT);
  EXPECT_EQ(r.reset(), 0);
  EXPECT_EQ(sframe::errno_of([&] { dev().unregister_section(self_.text_start); }), ENOENT);
}

TEST_F(ErrorsTest, UnregisterStruct) {
  sframe::Registration r =
      dev().register_scoped(self_.sframe_addr, self_.sframe_len, self_.text_start, self_.text_len);
  sframe_unregister req{};
  req.size = sizeof(req);
  req.text_start = self_.text_start;
  req.flags = 2;  // unknown
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNREGISTER, &req), EINVAL);
  req.flags = 0;
  req.pid = 1;  // a pid without SFRAME_UNREGISTER_F_PID
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNREGISTER, &req), EINVAL);
  req.pid = 0;
  req.reserved = 1;
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNREGISTER, &req), EINVAL);
  req.reserved = 0;
  req.size = SFRAME_UNREGISTER_SIZE_VER0 - 1;
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNREGISTER, &req), EINVAL);
  struct {
    sframe_unregister req;
    uint64_t tail;
  } big{req, 7};
  big.req.size = sizeof(big);
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNREGISTER, &big.req), E2BIG);
  big.tail = 0;
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNREGISTER, &big.req), 0) << "larger struct with a zero tail";
  r.release();
}

// ---- unwind_self ---------------------------------------------------------------------

class UnwindErrorsTest : public ErrorsTest {
 protected:
  sframe_unwind_self Request(uint32_t max_frames = 16) {
    sframe_unwind_self req{};
    req.size = sizeof(req);
    req.flags = SFRAME_UNWIND_F_ALL;
    req.frames = reinterpret_cast<uint64_t>(buf_.data());
    req.max_frames = max_frames;
    return req;
  }
  std::vector<uint64_t> buf_ = std::vector<uint64_t>(SFRAME_MAX_FRAMES + 16);
};

TEST_F(UnwindErrorsTest, MaxFrames) {
  sframe_unwind_self req = Request(0);
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, &req), EINVAL);
  req = Request(SFRAME_MAX_FRAMES + 1);
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, &req), EINVAL);
  req = Request(0xffffffffu);
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, &req), EINVAL);
  req = Request(SFRAME_MAX_FRAMES);
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, &req), 0);
  EXPECT_GE(req.nr_frames, 1u);
  req = Request(1);
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, &req), 0);
  EXPECT_EQ(req.nr_frames, 1u);
  EXPECT_EQ(req.stop_reason, static_cast<uint32_t>(SFRAME_STOP_LIMIT));
  // Through the library too.
  EXPECT_EQ(sframe::errno_of([&] { dev().unwind_self(0); }), EINVAL);
  EXPECT_EQ(sframe::errno_of([&] { dev().unwind_self(SFRAME_MAX_FRAMES + 1); }), EINVAL);
}

TEST_F(UnwindErrorsTest, FlagsSizeAndReserved) {
  sframe_unwind_self req = Request();
  req.flags = 0;
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, &req), EINVAL) << "no method";
  req.flags = SFRAME_UNWIND_F_ALL | 4;
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, &req), EINVAL);
  req.flags = 0x80000000u;
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, &req), EINVAL);
  req = Request();
  req.reserved0 = 1;
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, &req), EINVAL);
  req = Request();
  req.reserved[1] = 1;
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, &req), EINVAL);
  req = Request();
  req.size = SFRAME_UNWIND_SELF_SIZE_VER0 - 8;
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, &req), EINVAL);
  struct {
    sframe_unwind_self req;
    uint64_t tail;
  } big{Request(), 1};
  big.req.size = sizeof(big);
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, &big.req), E2BIG);
  big.tail = 0;
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, &big.req), 0);
}

// The out fields (nr_frames, stop_reason, nr_sframe, nr_fp) are outputs:
// the uapi does not ask callers to clear them, so a request can be issued
// again as it came back.
TEST_F(UnwindErrorsTest, RequestCanBeReissuedAsItCameBack) {
  sframe_unwind_self req = Request();
  ASSERT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, &req), 0);
  ASSERT_GE(req.nr_frames, 1u);
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, &req), 0)
      << "second call with nr_frames=" << req.nr_frames << " stop_reason=" << req.stop_reason
      << " left in the struct";
}

TEST_F(UnwindErrorsTest, UnwritableBuffers) {
  // Frames buffer unmapped.
  sframe::MappedRegion gone =
      sframe::MappedRegion::map(4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  const uint64_t addr = gone.address();
  gone.reset();
  sframe_unwind_self req = Request();
  req.frames = addr;
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, &req), EFAULT);
  // Read-only.
  sframe::MappedRegion ro = sframe::MappedRegion::map(4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS);
  req = Request();
  req.frames = ro.address();
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, &req), EFAULT);
  // A kernel address.
  req = Request();
  req.frames = 0xffff888000000000ull;
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, &req), EFAULT);
  // The request itself in a read-only page: the results cannot be written.
  sframe::MappedRegion page =
      sframe::MappedRegion::map(4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  sframe_unwind_self* in_page = static_cast<sframe_unwind_self*>(page.data());
  *in_page = Request();
  page.protect(PROT_READ);
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, in_page), EFAULT);
  // No request at all.
  EXPECT_EQ(Ioctl(SFRAME_IOC_UNWIND_SELF, nullptr), EFAULT);
}

// ---- stats and unknown requests ---------------------------------------------------------

TEST_F(ErrorsTest, GetStatsSizes) {
  sframe_stats st{};
  st.size = SFRAME_STATS_SIZE_VER0 - 1;
  EXPECT_EQ(Ioctl(SFRAME_IOC_GET_STATS, &st), EINVAL);
  st.size = 0;
  EXPECT_EQ(Ioctl(SFRAME_IOC_GET_STATS, &st), EINVAL);
  st = {};
  st.size = SFRAME_STATS_SIZE_VER0;
  EXPECT_EQ(Ioctl(SFRAME_IOC_GET_STATS, &st), 0);
  EXPECT_EQ(st.abi_version, static_cast<uint32_t>(SFRAME_UNWIND_ABI_VERSION));
  struct {
    sframe_stats st;
    uint64_t tail;
  } big{};
  big.st.size = sizeof(big);
  EXPECT_EQ(Ioctl(SFRAME_IOC_GET_STATS, &big.st), 0);
  EXPECT_EQ(big.tail, 0u);
  EXPECT_EQ(big.st.size, static_cast<uint32_t>(SFRAME_STATS_SIZE_VER3));
  EXPECT_EQ(Ioctl(SFRAME_IOC_GET_STATS, nullptr), EFAULT);
  // A caller built before the perf callchain counters: nothing is written
  // past the size it gave, and it learns the module's.
  static_assert(sizeof(sframe_stats) == SFRAME_STATS_SIZE_VER3, "the uapi's latest size");
  sframe_stats old;
  std::memset(&old, 0xa5, sizeof(old));
  old.size = SFRAME_STATS_SIZE_VER2;
  EXPECT_EQ(Ioctl(SFRAME_IOC_GET_STATS, &old), 0);
  EXPECT_EQ(old.size, static_cast<uint32_t>(SFRAME_STATS_SIZE_VER3));
  EXPECT_EQ(old.callchain_served, 0xa5a5a5a5a5a5a5a5ull);
  EXPECT_EQ(old.callchain_discoveries_dropped, 0xa5a5a5a5a5a5a5a5ull);
}

TEST_F(ErrorsTest, UnknownRequest) {
  uint64_t arg[8] = {};
  EXPECT_EQ(Ioctl(_IOWR(SFRAME_IOC_MAGIC, 99, uint64_t[8]), arg), ENOTTY);
  EXPECT_EQ(Ioctl(_IOWR('x', 1, uint64_t[8]), arg), ENOTTY);
}

}  // namespace
