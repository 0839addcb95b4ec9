// The attack of issue 10, finding 1, under the bounds: what an unprivileged
// process can make the module decode.  Shared by
// tests/vm/adversary_bounds_vmtest.cc and bench/bounds_vmbench.cc.
//
// One anonymous mapping holds, in this order:
//   text     kFdes functions of kFuncSize bytes (executable); function 0
//            starts with two stubs that are really executed:
//              syscall stub: (fd, cmd, arg, rbp) -> ioctl(fd, cmd, arg)
//                            made with RBP = rbp
//              spin stub:    (rbp, n) -> loops n times with RBP = rbp
//   section  an SFrame v2 section (read-only) with one FDE per function,
//            each with SFRAME_MAX_FRES_PER_FDE FREs, one per byte, all
//            saying "CFA = RBP + 16, RA at CFA - 8, FP at CFA - 16": the
//            frame-pointer rule, which the crafted stack follows.
// The crafted stack (a frame chain on the caller's stack, above its SP)
// has kChainFrames frames whose return addresses all fall near the end of
// functions 1..kFdes-1, each at a different PC: every frame misses the row
// cache and its lookup reads nearly SFRAME_MAX_FRES_PER_FDE FREs.
#ifndef SFRAME_BOUNDS_ATTACK_H
#define SFRAME_BOUNDS_ATTACK_H

#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <vector>

#include "sframe_unwind.h"

namespace bounds {

constexpr uint32_t kCap = SFRAME_MAX_FRES_PER_FDE;
constexpr uint32_t kFdes = 16;
constexpr uint32_t kFuncSize = kCap + 256;  // room past the last FRE
constexpr uint32_t kChainFrames = SFRAME_MAX_FRAMES;
constexpr uint64_t kPage = 4096;

inline uint64_t RoundUp(uint64_t v) { return (v + kPage - 1) & ~(kPage - 1); }

inline uint64_t NowNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}

inline void Put(std::vector<uint8_t>* b, uint64_t v, int n) {
  for (int i = 0; i < n; i++) b->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// An SFrame v2 section at sec_addr for nfdes functions of func_size bytes
// from text, each with nfres FREs (starts 0, 1, ...) of the FP rule.
inline std::vector<uint8_t> BuildSection(uint64_t sec_addr, uint64_t text, uint32_t nfdes,
                                         uint32_t func_size, uint32_t nfres) {
  const int fre_type = func_size <= 0xff ? 0 : func_size <= 0xffff ? 1 : 2;
  const uint32_t asize = 1u << fre_type;
  const uint32_t fre_bytes = asize + 1 + 2;  // start, info, two 1-byte words
  std::vector<uint8_t> b;
  Put(&b, 0xdee2, 2);
  Put(&b, 2, 1);     // version 2
  Put(&b, 1, 1);     // SFRAME_F_FDE_SORTED
  Put(&b, 3, 1);     // AMD64, little endian
  Put(&b, 0, 1);     // no fixed FP offset
  Put(&b, 0xf8, 1);  // RA at CFA - 8
  Put(&b, 0, 1);     // no auxiliary header
  Put(&b, nfdes, 4);
  Put(&b, static_cast<uint64_t>(nfdes) * nfres, 4);
  Put(&b, static_cast<uint64_t>(nfdes) * nfres * fre_bytes, 4);
  Put(&b, 0, 4);           // FDEs right after the header
  Put(&b, nfdes * 20, 4);  // then the FREs
  for (uint32_t i = 0; i < nfdes; i++) {
    const uint64_t start = text + static_cast<uint64_t>(i) * func_size;
    Put(&b, static_cast<uint32_t>(static_cast<int32_t>(start - sec_addr)), 4);
    Put(&b, func_size, 4);
    Put(&b, static_cast<uint64_t>(i) * nfres * fre_bytes, 4);
    Put(&b, nfres, 4);
    Put(&b, static_cast<uint64_t>(fre_type), 1);  // PC increments
    Put(&b, 0, 1);
    Put(&b, 0, 2);
  }
  for (uint32_t i = 0; i < nfdes; i++) {
    for (uint32_t j = 0; j < nfres; j++) {
      Put(&b, j, static_cast<int>(asize));
      Put(&b, 0x04, 1);  // CFA from FP, two 1-byte words
      Put(&b, 16, 1);    // CFA = RBP + 16
      Put(&b, 0xf0, 1);  // FP saved at CFA - 16
    }
  }
  return b;
}

// Machine code of the stubs (see the header comment).
// syscall stub, SysV (rdi fd, rsi cmd, rdx arg, rcx rbp):
//   push %rbp; mov %rcx,%rbp; mov $16,%eax; syscall; pop %rbp; ret
constexpr uint8_t kSyscallStub[] = {0x55, 0x48, 0x89, 0xcd, 0xb8, 0x10, 0x00,
                                    0x00, 0x00, 0x0f, 0x05, 0x5d, 0xc3};
// spin stub (rdi rbp, rsi n): push %rbp; mov %rdi,%rbp;
//   1: dec %rsi; jnz 1b; pop %rbp; ret
constexpr uint8_t kSpinStub[] = {0x55, 0x48, 0x89, 0xfd, 0x48, 0xff,
                                 0xce, 0x75, 0xfb, 0x5d, 0xc3};
constexpr uint32_t kSpinStubOffset = 64;
// touch stub (rdi rbp, rsi addr, rdx n): push %rbp; mov %rdi,%rbp;
//   1: movb $1,(%rsi); add $4096,%rsi; dec %rdx; jnz 1b; pop %rbp; ret
// Placed near the end of function 0, so that the row of its store (a page
// fault's PC) is found only after a scan of nearly kCap FREs.
constexpr uint8_t kTouchStub[] = {0x55, 0x48, 0x89, 0xfd, 0xc6, 0x06, 0x01, 0x48, 0x81,
                                  0xc6, 0x00, 0x10, 0x00, 0x00, 0x48, 0xff, 0xca, 0x75,
                                  0xf1, 0x5d, 0xc3};
constexpr uint32_t kTouchStubOffset = kCap - 64;
constexpr uint32_t kTouchStoreOffset = kTouchStubOffset + 4;  // the movb

using SyscallFn = long (*)(long fd, unsigned long cmd, void* arg, void* rbp);
using SpinFn = void (*)(void* rbp, unsigned long n);
using TouchFn = void (*)(void* rbp, void* addr, unsigned long pages);

struct Attack {
  uint8_t* map = nullptr;
  uint64_t map_len = 0;
  uint64_t text = 0, text_len = 0;
  uint64_t sec = 0, sec_len = 0;
  SyscallFn syscall_stub = nullptr;
  SpinFn spin_stub = nullptr;
  TouchFn touch_stub = nullptr;

  Attack() = default;
  Attack(const Attack&) = delete;
  Attack& operator=(const Attack&) = delete;
  ~Attack() {
    if (map) munmap(map, map_len);
  }

  // Maps text and section; false with errno on failure.
  bool Build(uint32_t nfres = kCap) {
    text_len = RoundUp(static_cast<uint64_t>(kFdes) * kFuncSize);
    // The section's size depends only on the counts: build it once to
    // learn it, then again at its address.
    sec_len = BuildSection(0, 0, kFdes, kFuncSize, nfres).size();
    map_len = text_len + RoundUp(sec_len);
    void* p = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    map = static_cast<uint8_t*>(p);
    text = reinterpret_cast<uint64_t>(map);
    sec = text + text_len;
    std::memset(map, 0xcc, text_len);  // int3 wherever no stub is
    std::memcpy(map, kSyscallStub, sizeof(kSyscallStub));
    std::memcpy(map + kSpinStubOffset, kSpinStub, sizeof(kSpinStub));
    std::memcpy(map + kTouchStubOffset, kTouchStub, sizeof(kTouchStub));
    std::vector<uint8_t> s = BuildSection(sec, text, kFdes, kFuncSize, nfres);
    std::memcpy(map + text_len, s.data(), s.size());
    if (mprotect(map, text_len, PROT_READ | PROT_EXEC) != 0) return false;
    if (mprotect(map + text_len, RoundUp(sec_len), PROT_READ) != 0) return false;
    syscall_stub = reinterpret_cast<SyscallFn>(map);
    spin_stub = reinterpret_cast<SpinFn>(map + kSpinStubOffset);
    touch_stub = reinterpret_cast<TouchFn>(map + kTouchStubOffset);
    return true;
  }

  // SFRAME_IOC_REGISTER of the section for the text: 0 or -errno.
  long Register(int fd) const {
    sframe_register r{};
    r.size = sizeof(r);
    r.sframe_addr = sec;
    r.sframe_len = sec_len;
    r.text_start = text;
    r.text_len = text_len;
    return ioctl(fd, SFRAME_IOC_REGISTER, &r) == 0 ? 0 : -errno;
  }
  long Unregister(int fd) const {
    sframe_unregister u{};
    u.size = sizeof(u);
    u.text_start = text;
    return ioctl(fd, SFRAME_IOC_UNREGISTER, &u) == 0 ? 0 : -errno;
  }

  // The PC of crafted frame i: near the end of function 1 + i % 15, each
  // frame at its own offset, so no two frames share a row.  i may go up
  // to kMaxFrameIndex (offsets stay above the middle of the function).
  static constexpr uint32_t kMaxFrameIndex = (kFdes - 1) * (kCap / 2);
  uint64_t FramePc(uint32_t i) const {
    const uint32_t fn = 1 + i % (kFdes - 1);
    const uint32_t off = kCap - 1 - i / (kFdes - 1);
    return text + static_cast<uint64_t>(fn) * kFuncSize + off;
  }

  // Fills chain (2 * kChainFrames words, on the caller's stack) with the
  // crafted frames: frame i is {RBP of frame i + 1, return address of
  // FramePc(base + i)}.  Returns the RBP the walk starts from.
  void* Chain(uint64_t* chain, uint32_t base = 0) const {
    for (uint32_t i = 0; i < kChainFrames; i++) {
      chain[2 * i] = i + 1 < kChainFrames ? reinterpret_cast<uint64_t>(&chain[2 * i + 2]) : 0;
      // A return address: the PC after a call.
      chain[2 * i + 1] = FramePc((base + i) % kMaxFrameIndex) + 1;
    }
    return chain;
  }
};

// SFRAME_IOC_UNWIND_SELF made from the syscall stub with RBP at the crafted
// chain, with the methods flags (SFRAME_UNWIND_F_*).  Returns the ioctl's
// result (0 or -errno); ns gets its duration.
inline long UnwindThroughChain(const Attack& a, int fd, sframe_unwind_self* req,
                               std::vector<uint64_t>* frames, uint64_t* ns,
                               uint32_t flags = SFRAME_UNWIND_F_ALL) {
  // On this function's stack, above the stub's SP, as a real stack is.
  static_assert(kChainFrames * 16 <= 128 * 1024, "the chain fits a stack frame");
  uint64_t chain[2 * kChainFrames];
  void* rbp = a.Chain(chain);
  frames->assign(SFRAME_MAX_FRAMES, 0);
  std::memset(req, 0, sizeof(*req));
  req->size = sizeof(*req);
  req->flags = flags;
  req->frames = reinterpret_cast<uint64_t>(frames->data());
  req->max_frames = SFRAME_MAX_FRAMES;
  const uint64_t t0 = NowNs();
  long ret = a.syscall_stub(fd, SFRAME_IOC_UNWIND_SELF, req, rbp);
  *ns = NowNs() - t0;
  asm volatile("" ::"r"(chain) : "memory");  // the chain lives until here
  return ret;
}

// Spins in the spin stub with RBP at the crafted chain for about ms
// milliseconds of wall time, in slices of 2^18 iterations.  Each slice
// moves the chain's first frames to PCs not used before (up to
// kMaxFrameIndex), so the rows a walk of the last slice cached are no use
// to the next: every sample's walk decodes.
inline void SpinThroughChain(const Attack& a, unsigned ms) {
  uint64_t chain[2 * kChainFrames];
  const uint64_t end = NowNs() + static_cast<uint64_t>(ms) * 1000000ull;
  for (uint32_t base = 0; NowNs() < end; base += 128) {
    void* rbp = a.Chain(chain, base);
    a.spin_stub(rbp, 1u << 18);
  }
  asm volatile("" ::"r"(chain) : "memory");
}

// The module's global counters (SFRAME_IOC_GET_STATS); false on error.
inline bool GetStats(int fd, sframe_stats* st) {
  std::memset(st, 0, sizeof(*st));
  st->size = sizeof(*st);
  return ioctl(fd, SFRAME_IOC_GET_STATS, st) == 0;
}

}  // namespace bounds

#endif  // SFRAME_BOUNDS_ATTACK_H
