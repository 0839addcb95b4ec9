// The in-VM ioctl fuzzer (issue 10): at least 1,000,000 calls on
// /dev/sframe_unwind per run (the rig runs this program as root and as uid
// 65534), made from random structs, sizes, pointers and lengths and from
// valid SFrame sections (v1, v2, v3, and a copy of the program's own) with
// bytes flipped, while other threads munmap, mmap, mprotect and rewrite the
// text and the sections that registrations point to, perf samples feed
// sessions that are read and polled, and forked children exit with what they
// inherited.  And one section is replaced under walks (issue 27, point 1):
// a thread of each worker unregisters a text of its own (T) and supplies
// for it, under one label, a 1 MiB section A (its tables at its end) and a
// 57-byte one B in turn, while the fuzz threads walk crafted chains through
// T (a syscall stub in T, RBP at the chain; A says CFA = RBP + 16, B CFA =
// RBP + 32, and the chain holds what both read).  Before the fix a walk
// holding its copy of A decoded B's kernel copy with A's header, up to
// 1 MiB past its end.
//
// What it asserts:
//  - every ioctl returns 0 or an errno that uapi/sframe_unwind.h documents
//    for it (ENOTTY for unknown numbers); read() on a session EINVAL, EAGAIN
//    or EFAULT; whatever succeeds returns sane results (stop reasons, frame
//    counts, record headers).  Any other result fails the test and prints
//    the request;
//  - every walk through T follows A's rule or B's at each frame, and ends
//    at its frame limit or, where T was not covered at that moment, with
//    SFRAME_STOP_NO_COVERAGE;
//  - the module's global counters (sections, processes, supplied_bytes)
//    come back to their baseline once every worker has exited;
//  - as root, the kmalloc caches the module allocates from (kmalloc-*,
//    kmalloc-cg-* for GFP_KERNEL_ACCOUNT, maple_node for the registry) and
//    vmalloc usage come back to the baseline within a small margin;
//  - the count of calls reaches the target.  The kernel side (a WARN, an
//    oops, a lockup, a hung task, an RCU stall) is judged by the rig: the
//    guest panics on each (tests/vm/rig/README.md).
//
// It prints `fuzz: N ioctl calls (mode M, seed S)` (report.py copies lines
// starting with "fuzz:" into the CI log) and a table of results by errno.
//
// Reproducing: the seed comes from $SFRAME_FUZZ_SEED, else from
// --gtest_random_seed (SFRAME_VM_GTEST_ARGS=--gtest_random_seed=S passes it
// through the rig, which starts programs with an empty environment), else
// from the clock.  Each thread's sequence of requests is a function of the
// seed, its worker and thread number; the interleaving with the mutator
// threads is not.  $SFRAME_FUZZ_CALLS changes the target (default 1000000),
// $SFRAME_FUZZ_SECONDS the time limit (default 230: the rig gives a
// program 300 s, and the warm-up and the checks after take some 15 s).
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bounds_attack.h"
#include "sframe_client/perf_event.h"
#include "sframe_gen/section_builder.h"
#include "synthetic.h"
#include "vmtest.h"

namespace {

// Root runs explore explicit registration only (discovery off, as the other
// registration suites do), so UNWIND_SELF walks through the sections the
// fuzzer registers and the mutator rewrites; uid 65534 runs with discovery
// on, as the module is loaded.
const bool kDiscoveryOffWhenRoot = vmtest::DiscoveryOffWhenRoot();

// ---- what is counted ----------------------------------------------------------

enum Op {
  kRegister,
  kUnregister,
  kUnwindSelf,
  kGetStats,
  kSessionStart,
  kSessionStats,
  kSupply,
  kList,
  kFileSupply,
  kFileRemove,
  kFileList,
  kUnknown,  // numbers the uapi does not define
  kNumIoctlOps,
  kRead = kNumIoctlOps,  // read() on a session file (or a plain one)
  kPoll,
  kNumOps,
};
const char* const kOpNames[kNumOps] = {"REGISTER",      "UNREGISTER", "UNWIND_SELF",
                                       "GET_STATS",     "SESSION_START", "SESSION_STATS",
                                       "SUPPLY",        "LIST_SECTIONS", "FILE_SUPPLY",
                                       "FILE_REMOVE",   "FILE_LIST",     "unknown",
                                       "read",          "poll"};
const unsigned long kCmds[kNumIoctlOps - 1] = {
    SFRAME_IOC_REGISTER,      SFRAME_IOC_UNREGISTER,    SFRAME_IOC_UNWIND_SELF,
    SFRAME_IOC_GET_STATS,     SFRAME_IOC_SESSION_START, SFRAME_IOC_SESSION_STATS,
    SFRAME_IOC_SUPPLY,        SFRAME_IOC_LIST_SECTIONS, SFRAME_IOC_FILE_SUPPLY,
    SFRAME_IOC_FILE_REMOVE,   SFRAME_IOC_FILE_LIST};

// The errnos uapi/sframe_unwind.h documents for each call.  EINVAL, E2BIG
// and EFAULT apply to every ioctl: the size rule of the header comment
// (smaller than VER0, a nonzero unknown tail), and a struct pointer the
// kernel cannot read or write.  Errnos being added in parallel by others
// (issue 10) count as documented: E2BIG (too many FREs), EINTR (fatal
// signal in REGISTER / UNWIND_SELF), EDQUOT (per-user bounds of SUPPLY and
// SESSION_START), EACCES/EPERM/ESRCH (SESSION_START).
bool Documented(int op, int err) {
  if (op == kUnknown) return err == ENOTTY;
  if (op == kRead) return err == EINVAL || err == EAGAIN || err == EFAULT;
  if (op == kPoll) return false;  // poll() on a valid pollfd never fails
  if (err == EINVAL || err == E2BIG || err == EFAULT) return true;
  switch (op) {
    case kRegister:
      return err == ENOEXEC || err == EOPNOTSUPP || err == EACCES || err == EEXIST ||
             err == ENOSPC || err == ENOMEM || err == EINTR;
    case kSupply:
      return err == ENOEXEC || err == EOPNOTSUPP || err == EACCES || err == EEXIST ||
             err == ENOSPC || err == ENOMEM || err == ESRCH || err == EPERM || err == EDQUOT;
    case kUnregister:
      return err == ENOENT || err == ESRCH || err == EPERM;
    case kUnwindSelf:
      return err == EINTR;
    case kGetStats:
    case kSessionStats:
      return false;
    case kSessionStart:
      return err == ESRCH || err == EACCES || err == EPERM || err == EBUSY || err == ENOMEM ||
             err == EDQUOT;
    case kList:
      return err == ESRCH || err == EPERM || err == ENOMEM;
    case kFileSupply:
      return err == EPERM || err == EBADF || err == ENOEXEC || err == EOPNOTSUPP ||
             err == ETXTBSY || err == EEXIST || err == EDQUOT || err == ENOSPC || err == ENOMEM ||
             err == EAGAIN || err == EINTR;
    case kFileRemove:
      return err == EPERM || err == EBADF || err == ENOENT;
    case kFileList:
      return err == ENOMEM || err == EAGAIN;
  }
  return false;
}

constexpr int kErrnoSlots = 160;  // errno values counted one by one; above: the last slot
constexpr int kMaxFailures = 8;

// Shared by the test and its worker processes (MAP_SHARED | MAP_ANONYMOUS).
struct Shared {
  std::atomic<uint64_t> counts[kNumOps][kErrnoSlots];
  std::atomic<uint64_t> ioctls;  // every ioctl, by fuzz threads and children
  std::atomic<uint64_t> children;
  std::atomic<uint64_t> mutations;
  std::atomic<uint64_t> sessions;   // SESSION_START that succeeded
  std::atomic<uint64_t> records;    // records read from sessions
  std::atomic<uint64_t> walked;     // UNWIND_SELF frames unwound with SFrame
  std::atomic<int> perf_ok;         // workers that got a perf event
  std::atomic<int> stop;            // the deadline passed
  std::atomic<int> worker_pids[8];
  std::atomic<long> big[2];  // results of the two 64 MiB supplies
  // The replaced section (see World::replaced): supplies of A and B that
  // succeeded, walks through T, and those that had frames of both rules
  // (the section was replaced during the walk).
  std::atomic<uint64_t> supplied_a, supplied_b, replaced_walks, replaced_mixed;
  std::atomic<int> nfail;
  char fail[kMaxFailures][2048];
};

uint64_t SplitMix(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A small fast generator (xorshift64*), seeded from SplitMix.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(SplitMix(&seed) | 1) {}
  uint64_t Next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545f4914f6cdd1dull;
  }
  uint64_t Below(uint64_t n) { return n ? Next() % n : 0; }
  bool OneIn(uint64_t n) { return Below(n) == 0; }
  template <class T, size_t N>
  T Pick(const T (&a)[N]) {
    return a[Below(N)];
  }
};

size_t Page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

void* MapOrDie(void* hint, size_t len, int prot, int flags) {
  void* p = mmap(hint, len, prot, flags | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "fuzz: mmap %zu bytes: %s\n", len, std::strerror(errno));
    _exit(90);
  }
  return p;
}

// ---- the replaced section (issue 27, point 1) -------------------------------------

// T: text of its own, 32 KiB (room for many return addresses).
constexpr uint32_t kReplaceTextLen = 32 * 1024;
// Frames per walk through T (max_frames).
constexpr uint32_t kReplaceFrames = 64;
// A: 1 MiB, kReplaceBigFres rows, its tables at its end.
constexpr uint64_t kReplaceBigLen = 1u << 20;
constexpr uint32_t kReplaceBigFres = 256;
// The label both count as mapped at (SUPPLY's sframe_addr), from T.
constexpr uint64_t kReplaceLabelOffset = 16u << 20;
// frames[0] of a walk through T: right after the stub's syscall.
constexpr uint64_t kReplaceStubPc = sizeof(bounds::kSyscallStub) - 2;
// The return address of frame k of a chain made with `base`, as A's rule
// and B's find it: slot (base + k) of kReplaceSlots in one half of T or
// the other.  Distinct within a chain; base changes from walk to walk, so
// that most of a walk's rows are not in the row cache (512 entries) and
// its steps look the PC up, where a stale copy of A would be used.  Never
// 16-byte aligned, all past the stub.
constexpr uint32_t kReplaceSlotsStart = 0x100;
constexpr uint32_t kReplaceSlots = (kReplaceTextLen - kReplaceSlotsStart) / 16;
uint64_t ReplaceRa(uint64_t text, bool b, uint32_t k, uint32_t base) {
  const uint64_t slot = (b ? kReplaceSlots : 0) + uint64_t{(base + k) % kReplaceSlots};
  return text + kReplaceSlotsStart + 8 * slot + 3;
}

struct Replaced {
  uint64_t text = 0;   // T, between PROT_NONE pages; never mutated
  uint64_t label = 0;  // sframe_addr of A and B
  bounds::SyscallFn stub = nullptr;
  std::vector<uint8_t> big, small;  // A and B
};

// ---- the memory registrations point to (one set per worker process) --------------

// A valid section of the worker, as a request would name it.
struct Valid {
  uint64_t addr = 0, len = 0, text_start = 0, text_len = 0;
  int version = 0;
};

// A region the mutator unmaps (or replaces), maps again and rewrites; the fuzz threads only
// pass its addresses to the kernel and never touch it themselves.
struct Region {
  uint64_t addr = 0;
  size_t len = 0;
  int prot = 0;         // what it normally has
  int cur_prot = 0;     // what it has now (mutator thread only)
  bool mapped = false;  // (mutator thread only)
  // Replaced in place, never unmapped: UNWIND_SELF writes frames into it,
  // and an unmapped range may be taken by the next mmap() of the process.
  bool stays_mapped = false;
  // A page of it could not be mapped again (something else took its
  // place): the mutator leaves the region alone from then on, so that it
  // never unmaps memory that is not its own.
  bool broken = false;
  std::vector<uint8_t> pristine;  // the bytes it starts with
};

constexpr size_t kTextLen = 64 * 1024;
constexpr size_t kChunks = 4;  // 16 KiB of text per section
constexpr size_t kSectionsLen = 64 * 1024;

struct World {
  Region text;      // int3 bytes, PROT_READ | PROT_EXEC
  Region sections;  // one section per chunk of text: v1, v2, v3, v3 flexible
  Region selfcopy;  // the program's own .sframe, relocated into a writable copy
  std::vector<Valid> valid;
  sframe::LoadedObject self;
  uint64_t hole = 0;       // a PROT_NONE page (kept: an unmapped one would be reused)
  uint64_t readonly = 0;   // a PROT_READ page holding zeros
  int dev = -1;
  pid_t pid = 0;
  // The last child forked (it may be running, exiting or gone): a target
  // for SUPPLY, UNREGISTER, LIST_SECTIONS and sessions racing its exit.
  std::atomic<pid_t> child{0};
  int worker = 0;
  // T and its sections A and B, supplied in turn by Replace().
  Replaced replaced;
};

// One section describing [start, start + size) with several functions and
// rows of each kind the version can express.
sframe::SectionBuilder ChunkSection(uint64_t start, uint32_t size, int version, bool pcrel) {
  sframe::SectionBuilder b(static_cast<uint8_t>(version), pcrel);
  const uint32_t n = 8, fsz = size / n;
  for (uint32_t i = 0; i < n; i++) {
    sframe::FdeSpec f;
    f.func_start = start + i * fsz;
    f.func_size = fsz;
    f.fres.push_back(sframe::FreSpec{0, true, 8, {}});
    f.fres.push_back(sframe::FreSpec{1, true, 16, -16});
    f.fres.push_back(sframe::FreSpec{4, false, 16, -16});
    if (version >= 2 && i == n - 1) f.fres.push_back(sframe::FreSpec{16, true, 8, {}, true});
    if (version >= 2 && i == 1) {
      f.pc_mask = true;
      f.rep_size = 16;
      f.fres.resize(2);
    }
    if (version == 3 && i == 2) {
      f.flex = true;
      f.fres.push_back(sframe::FreSpec{24, true, 32, -24, false, 7, false, std::nullopt, true});
    }
    b.add_fde(f);
  }
  return b;
}

void BuildWorld(World* w) {
  const size_t page = Page();
  auto obj = sframe::loaded_object_containing(reinterpret_cast<void*>(&vmtest::DevicePath));
  if (!obj || !obj->has_sframe()) {
    std::fprintf(stderr, "fuzz: the program has no .sframe of its own\n");
    _exit(91);
  }
  w->self = *obj;

  // Every region the mutator changes is followed by a PROT_NONE guard page
  // that stays when the region is unmapped.  Requests point the kernel's
  // writes (UNWIND_SELF frames, LIST_SECTIONS entries, read() records) into
  // these regions with lengths of up to hundreds of KiB: without the guard
  // such a write is legal and lands in whatever mapping comes next, which
  // may be this program's own memory.
  // Text: int3 everywhere.
  sframe::MappedRegion t = sframe::MappedRegion::map(kTextLen + page, PROT_READ | PROT_WRITE,
                                                     MAP_PRIVATE | MAP_ANONYMOUS);
  std::memset(t.data(), 0xcc, kTextLen);
  mprotect(t.bytes(), kTextLen, PROT_READ | PROT_EXEC);
  mprotect(t.bytes() + kTextLen, page, PROT_NONE);
  w->text.addr = t.address();
  w->text.len = kTextLen;
  w->text.prot = w->text.cur_prot = PROT_READ | PROT_EXEC;
  w->text.mapped = true;
  w->text.pristine.assign(kTextLen, 0xcc);
  t.release();

  // Sections near it (32-bit offsets reach the text).
  sframe::MappedRegion s = sframe::MappedRegion::map_near(
      reinterpret_cast<void*>(w->text.addr), kSectionsLen + page, PROT_READ | PROT_WRITE);
  mprotect(s.bytes() + kSectionsLen, page, PROT_NONE);
  // v1; v2; v3 with PC-relative function starts; v2 with them too.
  const int versions[kChunks] = {1, 2, 3, 2};
  size_t off = 0;
  for (size_t i = 0; i < kChunks; i++) {
    const uint64_t start = w->text.addr + i * (kTextLen / kChunks);
    sframe::SectionBuilder b = ChunkSection(start, kTextLen / kChunks, versions[i], i >= 2);
    b.build_into(s.bytes() + off, s.address() + off);
    w->valid.push_back(Valid{s.address() + off, b.size(), start, kTextLen / kChunks, versions[i]});
    off = (off + b.size() + 63) & ~size_t{63};
  }
  w->sections.addr = s.address();
  w->sections.len = kSectionsLen;
  w->sections.prot = w->sections.cur_prot = PROT_READ | PROT_WRITE;
  w->sections.mapped = true;
  w->sections.pristine.assign(s.bytes(), s.bytes() + kSectionsLen);
  s.release();

  // The program's own section, copied next to its text.
  vmtest::SectionCopy c = vmtest::CopySection(w->self, page);
  w->selfcopy.addr = c.addr();
  w->selfcopy.len = c.mem.size() - page;
  mprotect(c.bytes() + w->selfcopy.len, page, PROT_NONE);
  w->selfcopy.prot = w->selfcopy.cur_prot = PROT_READ | PROT_WRITE;
  w->selfcopy.mapped = true;
  w->selfcopy.stays_mapped = true;
  w->selfcopy.pristine.assign(c.bytes(), c.bytes() + w->selfcopy.len);
  w->valid.push_back(Valid{c.addr(), c.len, w->self.text_start, w->self.text_len, 0});
  c.mem.release();
  // And the original, in the program's read-only segment.
  w->valid.push_back(
      Valid{w->self.sframe_addr, w->self.sframe_len, w->self.text_start, w->self.text_len, 0});

  w->hole = reinterpret_cast<uint64_t>(MapOrDie(nullptr, page, PROT_NONE, 0));
  w->readonly = reinterpret_cast<uint64_t>(MapOrDie(nullptr, page, PROT_READ, 0));
  w->pid = getpid();

  // T (its own mapping: nothing merges with it, discovery's "none" entry
  // for it, made while it is unregistered, covers it exactly), the stub at
  // its start.
  Replaced* rp = &w->replaced;
  uint8_t* rt = static_cast<uint8_t*>(MapOrDie(nullptr, kReplaceTextLen + 2 * page, PROT_NONE, 0));
  rt += page;
  mprotect(rt, kReplaceTextLen, PROT_READ | PROT_WRITE);
  std::memset(rt, 0xcc, kReplaceTextLen);
  std::memcpy(rt, bounds::kSyscallStub, sizeof(bounds::kSyscallStub));
  mprotect(rt, kReplaceTextLen, PROT_READ | PROT_EXEC);
  rp->text = reinterpret_cast<uint64_t>(rt);
  rp->stub = reinterpret_cast<bounds::SyscallFn>(rt);
  rp->label = rp->text + kReplaceLabelOffset;
  // A: v2, one FDE over T with kReplaceBigFres rows of CFA = RBP + 16, FP
  // at CFA - 16, its FDE and FRE tables moved to the end of 1 MiB (the
  // header's offsets at bytes 20 and 24 grow by the filler; function
  // starts count from the section's start and stay).
  sframe::FdeSpec a;
  a.func_start = rp->text;
  a.func_size = kReplaceTextLen;
  for (uint32_t j = 0; j < kReplaceBigFres; j++) {
    a.fres.push_back(sframe::FreSpec{j * (kReplaceTextLen / kReplaceBigFres), false, 16, -16});
  }
  const std::vector<uint8_t> tables = sframe::SectionBuilder(2).add_fde(a).build(rp->label);
  const size_t filler = kReplaceBigLen - tables.size();
  rp->big.assign(tables.begin(), tables.begin() + 28);
  rp->big.resize(28 + filler, 0x5a);
  rp->big.insert(rp->big.end(), tables.begin() + 28, tables.end());
  for (size_t field : {size_t{20}, size_t{24}}) {
    uint32_t off;
    std::memcpy(&off, &rp->big[field], 4);
    off += static_cast<uint32_t>(filler);
    std::memcpy(&rp->big[field], &off, 4);
  }
  // B: v3, one flexible FDE over T (its rows are not kept in the FDE
  // index: every lookup decodes B's bytes), CFA = RBP + 32, FP at CFA - 16.
  sframe::FdeSpec b;
  b.func_start = rp->text;
  b.func_size = kReplaceTextLen;
  b.flex = true;
  b.fres.push_back(sframe::FreSpec{0, false, 32, -16});
  rp->small = sframe::SectionBuilder(3).add_fde(b).build(rp->label);
}

// ioctl(2) made here, not in libc: the system call's PC is then in this
// program's text, which its own .sframe covers, so UNWIND_SELF walks
// frames with SFrame (from libc's wrapper, which has no .sframe and no frame
// pointer, every walk would stop at once).  Returns 0 or -errno.
VMTEST_NOIPA long RawIoctl(int fd, unsigned long cmd, uint64_t arg) {
  long ret;
  asm volatile("syscall"
               : "=a"(ret)
               : "0"(static_cast<long>(SYS_ioctl)), "D"(static_cast<long>(fd)), "S"(cmd), "d"(arg)
               : "rcx", "r11", "memory");
  return ret;
}

// ---- one fuzz thread ------------------------------------------------------------------

struct Thread {
  World* w;
  Shared* sh;
  Rng rng;
  int id;
  uint64_t seed;
  uint64_t calls = 0;
  // Argument arena: kArena bytes read-write, then a PROT_NONE guard page,
  // so a struct can end exactly at the end of a mapping.
  uint8_t* arena = nullptr;
  static constexpr size_t kArena = 3 * 4096;
  // UNWIND_SELF frames and LIST_SECTIONS entries (read-write, guard after).
  uint64_t* frames = nullptr;
  static constexpr size_t kFramesBytes = 4096 * 8;
  sframe_section_info* entries = nullptr;
  static constexpr size_t kEntriesBytes = 4096 * sizeof(sframe_section_info);
  // Mutated copies of valid sections, near the worker's text.
  uint8_t* scratch = nullptr;
  uint64_t scratch_addr = 0;
  static constexpr size_t kScratch = 64 * 1024;
  // Memory no request points the kernel at, checked after every request:
  // pages of their own next to the output buffers (mapped right after
  // them), and a stretch of the arena's first page that no struct or tail
  // reaches (structs start at most 64 bytes in, and are followed by at
  // most 256 bytes of tail).  A kernel write anywhere but where it was
  // asked to write, or a mix-up of pages, shows here.
  uint8_t* sentinel = nullptr;
  static constexpr size_t kSentinelPages = 8;
  static constexpr size_t kCanaryOff = 0x800, kCanaryLen = 64;
  int sess = -1;  // a file of its own for sessions
  int self_exe = -1;  // this program, read-only, for the file store's ioctls
  std::vector<uint64_t> registered;
  std::vector<uint8_t> req;  // the last request's bytes, for failure reports
  bool wild = false;         // this request is malformed at the struct level

  Thread(World* w_, Shared* sh_, uint64_t seed_, int id_)
      : w(w_), sh(sh_), rng(seed_), id(id_), seed(seed_) {
    const size_t page = Page();
    arena = static_cast<uint8_t*>(MapOrDie(nullptr, kArena + page, PROT_READ | PROT_WRITE, 0));
    mprotect(arena + kArena, page, PROT_NONE);
    frames = static_cast<uint64_t*>(
        MapOrDie(nullptr, kFramesBytes + page, PROT_READ | PROT_WRITE, 0));
    mprotect(reinterpret_cast<uint8_t*>(frames) + kFramesBytes, page, PROT_NONE);
    entries = static_cast<sframe_section_info*>(
        MapOrDie(nullptr, kEntriesBytes + page, PROT_READ | PROT_WRITE, 0));
    mprotect(reinterpret_cast<uint8_t*>(entries) + kEntriesBytes, page, PROT_NONE);
    sframe::MappedRegion m = sframe::MappedRegion::map_near(
        reinterpret_cast<void*>(w->text.addr), kScratch, PROT_READ | PROT_WRITE);
    scratch = m.bytes();
    scratch_addr = m.address();
    m.release();
    sentinel = static_cast<uint8_t*>(
        MapOrDie(nullptr, kSentinelPages * page, PROT_READ | PROT_WRITE, 0));
    for (size_t o = 0; o < kSentinelPages * page; o += 8) SetWord(sentinel, o, 1);
    for (size_t o = kCanaryOff; o < kCanaryOff + kCanaryLen; o += 8) SetWord(arena, o, 0);
  }

  // The word at offset o of a region (tag: 0 the arena, 1 the sentinel
  // pages): this worker, thread, region and offset.
  uint64_t Pattern(uint64_t tag, size_t o) const {
    return 0x5e17000000000000ull ^ (uint64_t(w->worker) << 44) ^ (uint64_t(id) << 40) ^
           (tag << 32) ^ o;
  }
  void SetWord(uint8_t* base, size_t o, uint64_t tag) {
    const uint64_t v = Pattern(tag, o);
    std::memcpy(base + o, &v, 8);
  }

  // After each request: the arena's canary whole, and two words of each
  // sentinel page.  A change is reported once (with the first bytes of the
  // page or canary, read twice), then the pattern is written again.
  void CheckUntouched(int op, unsigned long cmd) {
    const size_t page = Page();
    auto check = [&](const char* name, uint8_t* base, size_t o, uint64_t tag, size_t from,
                     size_t len, size_t reset_len) {
      uint64_t v;
      std::memcpy(&v, base + o, 8);
      if (v == Pattern(tag, o)) return true;
      char what[256];
      std::snprintf(what, sizeof(what),
                    "memory no request pointed the kernel at changed: %s at 0x%" PRIx64
                    " holds 0x%016" PRIx64 " (wrote 0x%016" PRIx64 "), seen after this "
                    "thread's %s; the %zu bytes at 0x%" PRIx64,
                    name, reinterpret_cast<uint64_t>(base + o), v, Pattern(tag, o),
                    kOpNames[op], len, reinterpret_cast<uint64_t>(base + from));
      // (The request shown is this thread's last one.)
      Fail(what, op, cmd, reinterpret_cast<uint64_t>(base + o), 0, 0,
           Reply(reinterpret_cast<uint64_t>(base + from), len));
      for (size_t q = from; q < from + reset_len; q += 8) SetWord(base, q, tag);
      return false;
    };
    for (size_t o = kCanaryOff; o < kCanaryOff + kCanaryLen; o += 8) {
      if (!check("the arena's canary", arena, o, 0, kCanaryOff, kCanaryLen, kCanaryLen)) break;
    }
    for (size_t p = 0; p < kSentinelPages; p++) {
      for (size_t o : {p * page + 0x40, p * page + 0x800}) {
        if (!check("a sentinel page", sentinel, o, 1, p * page, 0x60, page)) break;
      }
    }
  }

  void Fail(const char* what, int op, unsigned long cmd, uint64_t arg, long ret, int err,
            const std::vector<uint8_t>& reply = {}) {
    const int slot = sh->nfail.fetch_add(1);
    if (slot >= kMaxFailures) return;
    char* out = sh->fail[slot];
    const size_t cap = sizeof(sh->fail[0]);
    int n = std::snprintf(out, cap,
                          "%s: %s (cmd 0x%lx, arg 0x%" PRIx64 ") returned %ld, errno %d (%s); "
                          "worker %d thread %d call %" PRIu64 ", thread seed 0x%" PRIx64
                          "; request:",
                          what, kOpNames[op], cmd, arg, ret, err, strerrorname_np(err) ?: "?",
                          w->worker, id, calls, seed);
    // Up to 200 bytes of b in hex, leaving room for what follows.
    auto hex = [&](const std::vector<uint8_t>& b, size_t room) {
      for (size_t i = 0; i < b.size() && i < 200 && n > 0 && static_cast<size_t>(n) < cap - room;
           i++) {
        n += std::snprintf(out + n, cap - static_cast<size_t>(n), " %02x", b[i]);
      }
    };
    hex(req, 64);
    if (reply.empty()) return;
    if (n > 0 && static_cast<size_t>(n) < cap - 64) {
      n += std::snprintf(out + n, cap - static_cast<size_t>(n), "; reply:");
    }
    hex(reply, 8);
  }

  // The bytes at a in user memory now, and again a millisecond later (both,
  // one after the other): a result the kernel never wrote reads the same
  // twice, one overwritten after the call may not.
  static std::vector<uint8_t> Reply(uint64_t a, size_t n) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(a);
    std::vector<uint8_t> r(p, p + n);
    timespec ts{0, 1000000};
    nanosleep(&ts, nullptr);
    r.insert(r.end(), p, p + n);
    return r;
  }

  // ---- values -------------------------------------------------------------

  // One of the small synthetic sections mostly; the program's own (some
  // 400 FDEs, read whole by every registration) one time in eight, which is
  // enough to keep it registered for UNWIND_SELF most of the time.
  const Valid& AnyValid() {
    if (rng.OneIn(8)) return w->valid[kChunks + rng.Below(w->valid.size() - kChunks)];
    return w->valid[rng.Below(kChunks)];
  }

  // Where the kernel may write (UNWIND_SELF frames, LIST_SECTIONS entries,
  // read() records): bad addresses, and memory that stays this thread's or
  // stays unwritable for the whole run.  Never the text or the sections
  // regions: the mutator unmaps them, and until it maps them again their
  // addresses are free for the next mmap() of this process (a thread's
  // stack, a malloc arena), where such a write would corrupt the test.
  uint64_t OutAddr() {
    switch (rng.Below(9)) {
      case 0: return 0;
      case 1: return 0xffff888000000000ull + rng.Below(1 << 20) * 8;  // direct map
      case 2: return 0xffffffff81000000ull;                           // kernel text
      case 3: return w->hole + rng.Below(Page());                      // PROT_NONE
      case 4:  // the end of a mapping
        return reinterpret_cast<uint64_t>(arena) + kArena - rng.Below(64);
      case 5: return 0x00007ffffffff000ull + rng.Below(0x1000);       // top of user space
      case 6: return rng.Next();
      case 7: return w->readonly;
      default: return reinterpret_cast<uint64_t>(&::write);  // libc text
    }
  }
  // Where the kernel reads (sections, text ranges): those, and valid
  // addresses and addresses near valid ones.
  uint64_t Addr() {
    const Valid& v = AnyValid();
    const uint64_t k = rng.Below(20);
    if (k < 9) return OutAddr();
    if (k == 9) return w->text.addr + rng.Below(kTextLen);
    if (k == 10) return v.addr + rng.Below(v.len + 1);
    return v.text_start;
  }
  uint64_t Len(uint64_t good) {
    switch (rng.Below(16)) {
      case 0: return 0;
      case 1: return 1;
      case 2: return good + 1 + rng.Below(16);
      case 3: return good > 16 ? good - 1 - rng.Below(16) : good;
      case 4: return 28;  // the header alone
      case 5: return SFRAME_MAX_SECTION_SIZE + rng.Below(2);
      case 6: return ~0ull - rng.Below(4096);
      case 7: return 1ull << (32 + rng.Below(30));
      case 8: return rng.Below(65536);
      default: return good;
    }
  }
  // A struct's size field: mostly right, sometimes every kind of wrong.
  uint32_t Size(uint32_t ver0, uint32_t full) {
    if (!wild) return rng.OneIn(4) ? ver0 : full;
    switch (rng.Below(16)) {
      case 0: return 0;
      case 1: return ver0 - 1;
      case 2: return ver0 - 1 - static_cast<uint32_t>(rng.Below(ver0 - 1));
      case 3: return full + 8 * (1 + static_cast<uint32_t>(rng.Below(8)));  // zero tail (maybe)
      case 4: return 4096;
      case 5: return 4097 + static_cast<uint32_t>(rng.Below(100000));
      case 6: return 0xffffffffu;
      case 7: return static_cast<uint32_t>(rng.Next());
      case 8: case 9: case 10: return ver0;
      default: return full;
    }
  }
  uint32_t Flags(uint32_t good) {
    if (!wild || !rng.OneIn(4)) return good;
    return rng.OneIn(2) ? (1u << rng.Below(32)) : static_cast<uint32_t>(rng.Next());
  }
  uint64_t Reserved() { return wild && rng.OneIn(8) ? (1ull << rng.Below(64)) : 0; }
  pid_t Pid() {
    switch (rng.Below(12)) {
      case 0: return 1;  // init: root's, refused to uid 65534
      case 1: return -1 - static_cast<pid_t>(rng.Below(3));
      case 2: return 0x3fffffff;
      case 3: return static_cast<pid_t>(syscall(SYS_gettid));
      case 4: return w->pid;
      case 5: {
        // The other worker (it may have exited already).
        pid_t p = sh->worker_pids[rng.Below(2)].load();
        return p ? p : 0;
      }
      case 6: return static_cast<pid_t>(rng.Next());
      case 7: {
        const pid_t c = w->child.load();
        return c ? c : 0x3ffffffe;
      }
      default: return 0;
    }
  }

  // A valid section, or a copy of one with bytes flipped (written into
  // scratch, relocated there), as (addr, len).
  std::pair<uint64_t, uint64_t> Section(const Valid& v) {
    if (rng.Below(3) == 0 || v.len > kScratch) return {v.addr, v.len};
    // The source may be unmapped or protected by the mutator: copy from
    // the pristine image, never from the live region.
    const std::vector<uint8_t>* src = nullptr;
    uint64_t base = 0;
    for (const Region* r : {&w->sections, &w->selfcopy}) {
      if (v.addr >= r->addr && v.addr + v.len <= r->addr + r->len) {
        src = &r->pristine;
        base = r->addr;
      }
    }
    if (!src) return {v.addr, v.len};
    std::memcpy(scratch, src->data() + (v.addr - base), v.len);
    sframe::relocate_section(scratch, v.len, v.addr, scratch_addr);
    const int flips = 1 + static_cast<int>(rng.Below(rng.OneIn(4) ? 16 : 3));
    for (int i = 0; i < flips; i++) {
      // Mostly the header and the FDE table, where a flip changes the most.
      const uint64_t at = rng.OneIn(2) ? rng.Below(std::min<uint64_t>(v.len, 28 + 17 * 8))
                                       : rng.Below(v.len);
      scratch[at] ^= static_cast<uint8_t>(1u << rng.Below(8));
      if (rng.OneIn(8)) scratch[at] = static_cast<uint8_t>(rng.Next());
    }
    return {scratch_addr, v.len};
  }

  // Where the struct goes: usually the arena; sometimes misaligned, ending
  // at the guard page, or a bad pointer.
  uint8_t* Place(size_t n, uint64_t* bad) {
    *bad = 0;
    switch (rng.Below(40)) {
      case 0: *bad = 0; return nullptr;
      case 1: *bad = 0xffff888000000000ull; return nullptr;
      case 2: *bad = w->hole; return nullptr;
      case 3: *bad = w->readonly; return nullptr;  // readable, not writable
      case 4: *bad = rng.Next() | 1; return nullptr;
      case 5: case 6: {
        // The struct's last bytes run into the guard page.
        const size_t cut = 1 + rng.Below(std::min<size_t>(n, 64));
        return arena + kArena - n + cut;
      }
      case 7: case 8: return arena + kArena - n;  // ends exactly at the guard
      case 9: return arena + 1 + rng.Below(7);    // misaligned
      default: return arena + 64;
    }
  }

  // ---- one call -------------------------------------------------------------

  // Runs ioctl(fd, cmd, p) and checks the errno against the uapi.  Returns
  // the ioctl's result (0 or -1).
  long Call(int op, int fd, unsigned long cmd, uint64_t arg, size_t reqlen) {
    const long ret = CallUnchecked(op, fd, cmd, arg, reqlen);
    CheckUntouched(op, cmd);
    return ret;
  }
  long CallUnchecked(int op, int fd, unsigned long cmd, uint64_t arg, size_t reqlen) {
    req.assign(reqlen, 0);
    uint8_t* p = reinterpret_cast<uint8_t*>(arg);
    const bool ours = arg >= reinterpret_cast<uint64_t>(arena) &&
                      arg + reqlen <= reinterpret_cast<uint64_t>(arena) + kArena;
    if (ours) std::memcpy(req.data(), p, reqlen);
    else req.clear();
    const long ret = RawIoctl(fd, cmd, arg);
    VMTEST_BARRIER();
    const int err = ret < 0 && ret >= -4095 ? static_cast<int>(-ret) : 0;
    calls++;
    sh->ioctls.fetch_add(1, std::memory_order_relaxed);
    sh->counts[op][std::min(err, kErrnoSlots - 1)].fetch_add(1, std::memory_order_relaxed);
    if (ret > 0 || ret < -4095 || (ret < 0 && !Documented(op, err)) ||
        (ret == 0 && op == kUnknown)) {
      Fail("undocumented result", op, cmd, arg, ret, err);
    }
    return ret < 0 ? -err : 0;
  }

  // The ioctl number: the uapi's constant, or (sometimes) the same number
  // with other direction and size bits, which the module ignores (the
  // struct's size field is the ABI).
  unsigned long Cmd(int op) {
    const unsigned long c = kCmds[op];
    if (!rng.OneIn(16)) return c;
    return _IOC(rng.Below(4), SFRAME_IOC_MAGIC, _IOC_NR(c), rng.Below(1u << _IOC_SIZEBITS));
  }
  int Fd() {
    if (sess >= 0 && rng.OneIn(8)) return sess;
    return w->dev;
  }

  // Writes the struct t (n bytes) and a size-dependent tail: returns the
  // address passed to the kernel.  out_ptr: the offset in T of a pointer
  // the kernel writes through (UNWIND_SELF's frames, LIST_SECTIONS'
  // entries), if any.
  template <class T>
  uint64_t Put(T* t, uint32_t ver0, size_t out_ptr = SIZE_MAX) {
    t->size = Size(ver0, sizeof(T));
    uint64_t bad;
    uint8_t* at = Place(sizeof(T), &bad);
    if (!at) return bad;
    if (at + sizeof(T) > arena + kArena) {
      // Running into the guard: only the part that fits (the kernel faults
      // on the rest).
      const size_t fit = static_cast<size_t>(arena + kArena - at);
      std::memcpy(at, t, std::min(fit, sizeof(T)));
      return reinterpret_cast<uint64_t>(at);
    }
    std::memcpy(at, t, sizeof(T));
    const size_t tail = std::min<size_t>(256, static_cast<size_t>(arena + kArena - at) - sizeof(T));
    std::memset(at + sizeof(T), 0, tail);
    // A nonzero byte in the tail a newer caller's struct would have (E2BIG).
    if (wild && tail && rng.OneIn(4)) at[sizeof(T) + rng.Below(tail)] = 1;
    // Byte flips in the struct itself.
    if (wild && rng.OneIn(4)) {
      size_t byte = rng.Below(sizeof(T));
      unsigned bit = static_cast<unsigned>(rng.Below(8));
      // In a pointer the kernel writes through, only bits that keep it in
      // its page (0-11) or make it no user address (47-63): bits 12-46
      // move it by 4 KiB to 64 TiB, onto any other mapping of this
      // process (the other thread's arena, a thread's stack, the heap,
      // the shared counters), and the kernel rightly writes there.  That
      // corrupted the test itself: a LIST_SECTIONS whose entries pointer
      // had bit 14 flipped wrote two entries over the other thread's
      // arena between its GET_STATS and the check of that result.
      if (byte >= out_ptr && byte < out_ptr + 8) {
        const unsigned b = static_cast<unsigned>(8 * (byte - out_ptr)) + bit;
        if (b >= 12 && b < 47) {
          const unsigned nb = 47 + b % 17;  // 47..63
          byte = out_ptr + nb / 8;
          bit = nb % 8;
        }
      }
      at[byte] ^= static_cast<uint8_t>(1u << bit);
    }
    return reinterpret_cast<uint64_t>(at);
  }

  bool InArena(uint64_t a, size_t n) const {
    return a >= reinterpret_cast<uint64_t>(arena) &&
           a + n <= reinterpret_cast<uint64_t>(arena) + kArena;
  }

  void DoRegister() {
    const Valid& v = AnyValid();
    sframe_register r{};
    auto [addr, len] = Section(v);
    r.flags = Flags(0);
    r.sframe_addr = rng.OneIn(8) ? Addr() : addr;
    r.sframe_len = rng.OneIn(8) ? Len(len) : len;
    r.text_start = rng.OneIn(8) ? Addr() : v.text_start;
    r.text_len = rng.OneIn(8) ? Len(v.text_len) : v.text_len;
    r.reserved[0] = Reserved();
    r.reserved[1] = Reserved();
    const uint64_t arg = Put(&r, SFRAME_REGISTER_SIZE_VER0);
    if (Call(kRegister, Fd(), Cmd(kRegister), arg, sizeof(r)) == 0) {
      registered.push_back(r.text_start);
    }
  }

  void DoUnregister() {
    sframe_unregister u{};
    if (!registered.empty() && rng.Below(4) != 0) {
      const size_t i = rng.Below(registered.size());
      u.text_start = registered[i];
      registered[i] = registered.back();
      registered.pop_back();
    } else {
      u.text_start = rng.OneIn(2) ? AnyValid().text_start : Addr();
    }
    u.flags = Flags(rng.OneIn(4) ? SFRAME_UNREGISTER_F_PID : 0);
    if (u.flags & SFRAME_UNREGISTER_F_PID) u.pid = Pid();
    else if (rng.OneIn(16)) u.pid = Pid();
    u.reserved = static_cast<uint32_t>(Reserved());
    const uint64_t arg = Put(&u, SFRAME_UNREGISTER_SIZE_VER0);
    Call(kUnregister, Fd(), Cmd(kUnregister), arg, sizeof(u));
  }

  void DoUnwindSelf() {
    sframe_unwind_self u{};
    u.flags = Flags(1 + static_cast<uint32_t>(rng.Below(3)));
    static const uint32_t kMax[] = {1, 2, 3, 8, 32, 33, 64, 127, 4096, 4096, 0, 4097, 0xffffffffu};
    u.max_frames = rng.Pick(kMax);
    uint64_t frames_addr = reinterpret_cast<uint64_t>(frames);
    switch (rng.Below(16)) {
      case 0: frames_addr = OutAddr(); break;
      case 1:  // the buffer ends at a guard page before max_frames entries
        frames_addr = reinterpret_cast<uint64_t>(frames) + kFramesBytes -
                      8 * (1 + rng.Below(u.max_frames ? std::min<uint32_t>(u.max_frames, 64) : 1));
        break;
      case 2: frames_addr = reinterpret_cast<uint64_t>(frames) + 1 + rng.Below(7); break;
      case 3:  // into a section the walk may read (never unmapped: see Mutate)
        frames_addr = w->selfcopy.addr + rng.Below(64) * 8;
        break;
      default: break;
    }
    u.frames = frames_addr;
    u.nr_frames = static_cast<uint32_t>(rng.Next());  // outputs: ignored on input
    u.stop_reason = static_cast<uint32_t>(rng.Next());
    u.reserved0 = static_cast<uint32_t>(Reserved());
    u.reserved[0] = Reserved();
    const uint64_t arg = Put(&u, SFRAME_UNWIND_SELF_SIZE_VER0, offsetof(sframe_unwind_self, frames));
    if (Call(kUnwindSelf, Fd(), Cmd(kUnwindSelf), arg, sizeof(u)) == 0 &&
        InArena(arg, SFRAME_UNWIND_SELF_SIZE_VER0)) {
      sframe_unwind_self out;
      std::memcpy(&out, reinterpret_cast<void*>(arg), SFRAME_UNWIND_SELF_SIZE_VER0);
      // frames[0] is the PC after the system call instruction: in
      // RawIoctl, whatever the sections say (they only matter from
      // frames[1] on, and the mutator may make them lie).
      const uint64_t pc0 = out.frames == reinterpret_cast<uint64_t>(frames) ? frames[0] : 0;
      const uint64_t fn = reinterpret_cast<uint64_t>(&RawIoctl);
      if ((pc0 && (pc0 <= fn || pc0 > fn + 64)) ||
          out.nr_frames < 1 || out.nr_frames > out.max_frames || out.stop_reason < 1 ||
          out.stop_reason > SFRAME_STOP_BUDGET ||
          uint64_t{out.nr_sframe} + out.nr_fp > out.nr_frames) {
        char what[256];
        std::snprintf(what, sizeof(what),
                      "impossible UNWIND_SELF result (nr_frames %u of %u, stop %u, sframe %u, "
                      "fp %u, frames[0] 0x%" PRIx64 ", RawIoctl at 0x%" PRIx64 ")",
                      out.nr_frames, out.max_frames, out.stop_reason, out.nr_sframe, out.nr_fp,
                      pc0, fn);
        Fail(what, kUnwindSelf, SFRAME_IOC_UNWIND_SELF, arg, 0, 0,
             Reply(arg, SFRAME_UNWIND_SELF_SIZE_VER0));
      }
      sh->walked.fetch_add(out.nr_sframe, std::memory_order_relaxed);
    }
  }

  void DoGetStats() {
    sframe_stats s{};
    const uint64_t arg = Put(&s, rng.OneIn(2) ? SFRAME_STATS_SIZE_VER0 : SFRAME_STATS_SIZE_VER1);
    if (Call(kGetStats, Fd(), Cmd(kGetStats), arg, sizeof(s)) == 0 && InArena(arg, 8)) {
      uint32_t abi;
      std::memcpy(&abi, reinterpret_cast<uint8_t*>(arg) + 4, 4);
      if (abi != SFRAME_UNWIND_ABI_VERSION) {
        Fail("GET_STATS: wrong abi_version", kGetStats, SFRAME_IOC_GET_STATS, arg, 0, 0,
             Reply(arg, 16));
      }
    }
  }

  void DoSupply() {
    const Valid& v = AnyValid();
    sframe_supply s{};
    auto [data, len] = Section(v);
    s.flags = Flags(0);
    s.pid = rng.OneIn(4) ? Pid() : 0;
    s.reserved0 = static_cast<uint32_t>(Reserved());
    s.sframe_data = rng.OneIn(8) ? Addr() : data;
    // The module allocates sframe_len bytes before it copies them: lengths
    // of megabytes only rarely, so that each call stays cheap.
    s.sframe_len = rng.OneIn(8) ? Len(len) : len;
    if (s.sframe_len > (1u << 20) && s.sframe_len <= SFRAME_MAX_SECTION_SIZE && !rng.OneIn(512)) {
      s.sframe_len = len;
    }
    s.sframe_addr = rng.OneIn(8) ? Addr() : v.addr;
    s.text_start = rng.OneIn(8) ? Addr() : v.text_start;
    s.text_len = rng.OneIn(8) ? Len(v.text_len) : v.text_len;
    s.reserved[rng.Below(2)] = Reserved();
    const uint64_t arg = Put(&s, SFRAME_SUPPLY_SIZE_VER0);
    if (Call(kSupply, Fd(), Cmd(kSupply), arg, sizeof(s)) == 0 && s.pid == 0) {
      registered.push_back(s.text_start);
    }
  }

  void DoList() {
    sframe_list_sections l{};
    l.flags = Flags(0);
    l.pid = rng.OneIn(3) ? Pid() : 0;
    static const uint32_t kMax[] = {0, 1, 2, 8, 64, 4096, 4097, 0xffffffffu};
    l.max_entries = rng.OneIn(64) ? rng.Pick(kMax) : static_cast<uint32_t>(rng.Below(9));
    l.entries = rng.OneIn(8) ? OutAddr() : reinterpret_cast<uint64_t>(entries);
    if (rng.OneIn(8)) {  // ends at the guard page
      l.entries = reinterpret_cast<uint64_t>(entries) + kEntriesBytes -
                  sizeof(sframe_section_info) * (1 + rng.Below(4));
    }
    l.nr_entries = static_cast<uint32_t>(rng.Next());
    l.reserved0 = static_cast<uint32_t>(Reserved());
    l.reserved[0] = Reserved();
    const uint64_t arg =
        Put(&l, SFRAME_LIST_SECTIONS_SIZE_VER0, offsetof(sframe_list_sections, entries));
    if (Call(kList, Fd(), Cmd(kList), arg, sizeof(l)) == 0 &&
        InArena(arg, SFRAME_LIST_SECTIONS_SIZE_VER0)) {
      sframe_list_sections out;
      std::memcpy(&out, reinterpret_cast<void*>(arg), SFRAME_LIST_SECTIONS_SIZE_VER0);
      bool bad = out.nr_entries > SFRAME_MAX_SECTIONS_PER_MM;
      if (out.entries == reinterpret_cast<uint64_t>(entries)) {
        for (uint32_t i = 0; i < std::min(out.nr_entries, out.max_entries) && i < 4096; i++) {
          const sframe_section_info& e = entries[i];
          if (e.source < SFRAME_SOURCE_REGISTERED || e.source > SFRAME_SOURCE_FILE ||
              e.text_len == 0) {
            bad = true;
          }
        }
      }
      if (bad) {
        // The struct as it came back, then the first entry.
        std::vector<uint8_t> reply = Reply(arg, SFRAME_LIST_SECTIONS_SIZE_VER0);
        if (out.entries == reinterpret_cast<uint64_t>(entries)) {
          const std::vector<uint8_t> e = Reply(out.entries, sizeof(sframe_section_info));
          reply.insert(reply.end(), e.begin(), e.end());
        }
        Fail("impossible LIST_SECTIONS result", kList, SFRAME_IOC_LIST_SECTIONS, arg, 0, 0, reply);
      }
    }
  }

  // The file store: as root a supply for this program's own file may
  // succeed (its section then covers every process of it), so an entry
  // made here is removed at once.
  void DoFile() {
    const int op = kFileSupply + static_cast<int>(rng.Below(3));
    if (op == kFileList) {
      sframe_file_list l{};
      l.flags = Flags(0);
      static const uint32_t kMax[] = {0, 1, 2, 8, 65536, 65537, 0xffffffffu};
      l.max_entries = rng.OneIn(16) ? rng.Pick(kMax) : static_cast<uint32_t>(rng.Below(4));
      l.entries = rng.OneIn(4) ? OutAddr() : reinterpret_cast<uint64_t>(entries);
      l.nr_entries = rng.OneIn(8) ? static_cast<uint32_t>(rng.Next()) : 0;
      l.reserved[rng.Below(2)] = Reserved();
      Call(kFileList, Fd(), Cmd(kFileList), Put(&l, SFRAME_FILE_LIST_SIZE_VER0), sizeof(l));
      return;
    }
    // A file: this program (a regular ELF file), the device, none.
    // Opened once: an open() of /proc/self/exe per call took a third of
    // the run's time under emulation.
    if (self_exe < 0) self_exe = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    const int fds[] = {self_exe, w->dev, -1, 1000000};
    const int fd = rng.Pick(fds);
    if (op == kFileRemove) {
      sframe_file_remove r{};
      r.flags = Flags(0);
      r.fd = fd;
      r.reserved0 = static_cast<uint32_t>(Reserved());
      r.id = rng.OneIn(2) ? 0 : rng.OneIn(2) ? rng.Below(64) : rng.Next();
      r.reserved[rng.Below(2)] = Reserved();
      Call(kFileRemove, Fd(), Cmd(kFileRemove), Put(&r, SFRAME_FILE_REMOVE_SIZE_VER0), sizeof(r));
    } else {
      const Valid& v = AnyValid();
      auto [data, len] = Section(v);
      sframe_file_supply f{};
      f.flags = Flags(rng.OneIn(2) ? SFRAME_FILE_F_REPLACE : 0);
      f.fd = fd;
      f.reserved0 = static_cast<uint32_t>(Reserved());
      f.sframe_data = rng.OneIn(8) ? Addr() : data;
      f.sframe_len = rng.OneIn(8) ? Len(len) : len;
      if (f.sframe_len > (1u << 20)) f.sframe_len = len;
      f.sframe_vaddr = rng.OneIn(4) ? Addr() : v.addr;
      f.reserved[rng.Below(2)] = Reserved();
      const uint64_t arg = Put(&f, SFRAME_FILE_SUPPLY_SIZE_VER0);
      if (Call(kFileSupply, Fd(), Cmd(kFileSupply), arg, sizeof(f)) == 0 &&
          InArena(arg, SFRAME_FILE_SUPPLY_SIZE_VER0)) {
        sframe_file_supply out;
        std::memcpy(&out, reinterpret_cast<void*>(arg), SFRAME_FILE_SUPPLY_SIZE_VER0);
        sframe_file_remove r{};
        r.size = sizeof(r);
        r.id = out.id;
        RawIoctl(w->dev, SFRAME_IOC_FILE_REMOVE, reinterpret_cast<uint64_t>(&r));
      }
    }
  }

  void DoSessionStart() {
    if (sess < 0 || rng.OneIn(4)) {
      if (sess >= 0) close(sess);  // ends its session, if it had one
      sess = open(vmtest::DevicePath().c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    }
    sframe_session_start s{};
    s.flags = Flags(0);
    static const uint32_t kTypes[] = {SFRAME_TARGET_THREAD, SFRAME_TARGET_PROCESS,
                                      SFRAME_TARGET_PROCESS, SFRAME_TARGET_ALL,
                                      SFRAME_TARGET_EVENTS,  0, 5, 0xffffffffu};
    s.target_type = rng.Pick(kTypes);
    const bool no_id = s.target_type == SFRAME_TARGET_ALL || s.target_type == SFRAME_TARGET_EVENTS;
    s.target_id = no_id && rng.Below(4) ? 0 : rng.OneIn(2) ? w->pid : Pid();
    static const uint32_t kFrames[] = {0, 1, 16, 127, 4096, 4097};
    s.max_user_frames = rng.Pick(kFrames);
    s.max_kernel_frames = rng.OneIn(4) ? static_cast<uint32_t>(rng.Below(80)) : 0;
    // Buffers of the maximal 64 MiB only rarely: each is vmalloc()ed.
    static const uint32_t kBuf[] = {0, SFRAME_SESSION_MIN_BUFFER, 1, 65537};
    s.buffer_size = rng.OneIn(128) ? (rng.OneIn(2) ? SFRAME_SESSION_MAX_BUFFER : 0xffffffffu)
                                   : rng.Pick(kBuf);
    s.unwind_flags = Flags(static_cast<uint32_t>(rng.Below(4)));
    s.out_flags = static_cast<uint32_t>(rng.Next());
    s.wakeup_bytes = rng.OneIn(4) ? static_cast<uint32_t>(rng.Next()) : 0;
    s.reserved[0] = Reserved();
    const uint64_t arg = Put(&s, SFRAME_SESSION_START_SIZE_VER0);
    const int fd = rng.OneIn(16) ? w->dev : sess;
    if (Call(kSessionStart, fd, Cmd(kSessionStart), arg, sizeof(s)) == 0) {
      sh->sessions.fetch_add(1, std::memory_order_relaxed);
    }
  }

  void DoSessionStats() {
    sframe_session_stats s{};
    s.reserved0 = static_cast<uint32_t>(Reserved());
    const uint64_t arg = Put(&s, SFRAME_SESSION_STATS_SIZE_VER0);
    const int fd = sess >= 0 && !rng.OneIn(4) ? sess : w->dev;
    Call(kSessionStats, fd, Cmd(kSessionStats), arg, sizeof(s));
  }

  void DoUnknown() {
    unsigned long cmd;
    switch (rng.Below(4)) {
      case 0: {
        // The module's magic with a number it does not define.
        const unsigned nr = rng.OneIn(4) ? 0 : 12 + static_cast<unsigned>(rng.Below(244));
        cmd = _IOC(rng.Below(4), SFRAME_IOC_MAGIC, nr, rng.Below(1u << _IOC_SIZEBITS));
        break;
      }
      default: {
        // Another driver's magic (none that the VFS handles itself for
        // every file, such as 'T' FIONBIO, 'X' FIFREEZE, 'f' FS_IOC_*,
        // 0x94 FICLONE or 0 FIBMAP).
        static const unsigned kTypes[] = {0xf4, 0xf6, 0xa5, 0x01, 0xee};
        cmd = _IOC(rng.Below(4), rng.Pick(kTypes), rng.Below(256), rng.Below(1u << _IOC_SIZEBITS));
        break;
      }
    }
    uint64_t bad;
    uint8_t* at = Place(64, &bad);
    Call(kUnknown, Fd(), cmd, at ? reinterpret_cast<uint64_t>(at) : bad, 0);
  }

  void DoRead() {
    static const size_t kLens[] = {0, 1, 7, 8, 24, 64, 512, 4096, 4096, 8192};
    size_t len = rng.Pick(kLens);
    uint64_t buf = reinterpret_cast<uint64_t>(arena);
    if (rng.OneIn(8)) buf = OutAddr();
    if (rng.OneIn(8)) buf = reinterpret_cast<uint64_t>(arena) + kArena - std::min<size_t>(len, 64);
    const int fd = sess >= 0 && !rng.OneIn(8) ? sess : w->dev;
    req.clear();
    const ssize_t n = read(fd, reinterpret_cast<void*>(buf), len);
    const int err = n < 0 ? errno : 0;
    sh->counts[kRead][std::min(err, kErrnoSlots - 1)].fetch_add(1, std::memory_order_relaxed);
    if (n < 0) {
      if (!Documented(kRead, err)) Fail("read", kRead, 0, buf, n, err);
      return;
    }
    if (static_cast<size_t>(n) > len) Fail("read: more than asked", kRead, 0, buf, n, 0);
    // Records read into the arena may cover its canary: written again once
    // they are checked.
    struct CanaryBack {
      Thread* t;
      bool covered;
      ~CanaryBack() {
        if (!covered) return;
        for (size_t o = kCanaryOff; o < kCanaryOff + kCanaryLen; o += 8) t->SetWord(t->arena, o, 0);
      }
    } canary_back{this, n > 0 && buf < reinterpret_cast<uint64_t>(arena) + kCanaryOff + kCanaryLen &&
                            buf + static_cast<uint64_t>(n) > reinterpret_cast<uint64_t>(arena) + kCanaryOff};
    if (!InArena(buf, static_cast<size_t>(n))) return;
    // Whole records, each a header whose size is a multiple of 8.
    size_t off = 0;
    while (off < static_cast<size_t>(n)) {
      sframe_record_header h;
      if (static_cast<size_t>(n) - off < sizeof(h)) break;
      std::memcpy(&h, reinterpret_cast<uint8_t*>(buf) + off, sizeof(h));
      if (h.size < sizeof(h) || h.size % 8 || off + h.size > static_cast<size_t>(n) ||
          (h.type != SFRAME_RECORD_SAMPLE && h.type != SFRAME_RECORD_LOST)) {
        break;
      }
      off += h.size;
      sh->records.fetch_add(1, std::memory_order_relaxed);
    }
    if (off != static_cast<size_t>(n)) {
      req.assign(reinterpret_cast<uint8_t*>(buf), reinterpret_cast<uint8_t*>(buf) + n);
      Fail("read: not whole records", kRead, 0, buf, n, 0);
    }
  }

  void DoPoll() {
    pollfd p{sess >= 0 ? sess : w->dev, static_cast<short>(POLLIN | POLLOUT), 0};
    const int n = poll(&p, 1, 0);
    const int err = n < 0 ? errno : 0;
    sh->counts[kPoll][std::min(err, kErrnoSlots - 1)].fetch_add(1, std::memory_order_relaxed);
    if (n < 0) {
      req.clear();
      Fail("poll", kPoll, 0, 0, n, err);
    }
  }

  // UNWIND_SELF from the stub in T, with RBP at a chain on this
  // function's stack (above the stub's SP).  Record k (4 words at rbp +
  // 32 k) holds what A's rule reads (FP, RA at rbp + 32 k and + 8) and
  // what B's reads (at + 16 and + 24), both leading to record k + 1 with
  // frame k + 1's return address as that rule gives it.  The replacer
  // thread swaps A and B meanwhile: every frame must be one of the two.
  VMTEST_NOIPA void DoUnwindReplaced() {
    const Replaced& rp = w->replaced;
    const uint32_t base = static_cast<uint32_t>(rng.Below(kReplaceSlots));
    uint64_t chain[4 * kReplaceFrames];
    const uint64_t rbp = reinterpret_cast<uint64_t>(chain);
    for (uint32_t k = 0; k + 1 < kReplaceFrames; k++) {
      chain[4 * k] = rbp + 32 * (k + 1);
      chain[4 * k + 1] = ReplaceRa(rp.text, false, k + 1, base);
      chain[4 * k + 2] = rbp + 32 * (k + 1);
      chain[4 * k + 3] = ReplaceRa(rp.text, true, k + 1, base);
    }
    sframe_unwind_self u{};
    u.size = sizeof(u);
    u.flags = SFRAME_UNWIND_F_SFRAME;
    u.frames = reinterpret_cast<uint64_t>(frames);
    u.max_frames = kReplaceFrames;
    req.assign(reinterpret_cast<uint8_t*>(&u), reinterpret_cast<uint8_t*>(&u) + sizeof(u));
    const long ret = rp.stub(w->dev, SFRAME_IOC_UNWIND_SELF, &u, chain);
    asm volatile("" ::"r"(chain) : "memory");  // the chain lives until here
    const int err = ret < 0 && ret >= -4095 ? static_cast<int>(-ret) : 0;
    calls++;
    sh->ioctls.fetch_add(1, std::memory_order_relaxed);
    sh->counts[kUnwindSelf][std::min(err, kErrnoSlots - 1)].fetch_add(1,
                                                                      std::memory_order_relaxed);
    const uint64_t arg = reinterpret_cast<uint64_t>(&u);
    if (ret > 0 || ret < -4095 || (ret < 0 && !Documented(kUnwindSelf, err))) {
      Fail("undocumented result (a walk through the replaced text)", kUnwindSelf,
           SFRAME_IOC_UNWIND_SELF, arg, ret, err);
    }
    CheckUntouched(kUnwindSelf, SFRAME_IOC_UNWIND_SELF);
    if (ret != 0) return;
    sh->replaced_walks.fetch_add(1, std::memory_order_relaxed);
    // frames[0] the stub's; then A's or B's return address for each frame;
    // the limit, or no coverage where T had no section at that moment.
    const uint32_t n = std::min(u.nr_frames, kReplaceFrames);
    uint32_t bad = n >= 1 && frames[0] == rp.text + kReplaceStubPc ? UINT32_MAX : 0;
    bool by_a = false, by_b = false;
    for (uint32_t k = 1; bad == UINT32_MAX && k < n; k++) {
      const bool a = frames[k] == ReplaceRa(rp.text, false, k, base);
      const bool b = frames[k] == ReplaceRa(rp.text, true, k, base);
      by_a |= a;
      by_b |= b;
      if (!a && !b) bad = k;
    }
    const bool end_ok = (u.stop_reason == SFRAME_STOP_LIMIT && u.nr_frames == kReplaceFrames) ||
                        (u.stop_reason == SFRAME_STOP_NO_COVERAGE && u.nr_frames < kReplaceFrames);
    if (bad != UINT32_MAX || !end_ok || u.nr_sframe + 1 != u.nr_frames) {
      const uint32_t k = bad == UINT32_MAX ? n - 1 : bad;
      char what[512];
      std::snprintf(what, sizeof(what),
                    "a walk through the replaced text followed neither section's rule: %u "
                    "frames (%u by SFrame), stop %u; frame %u is 0x%" PRIx64 " (A's rule "
                    "gives 0x%" PRIx64 ", B's 0x%" PRIx64 "; T at 0x%" PRIx64 ", chain base %u)",
                    u.nr_frames, u.nr_sframe, u.stop_reason, k, frames[k],
                    ReplaceRa(rp.text, false, k, base), ReplaceRa(rp.text, true, k, base),
                    rp.text, base);
      Fail(what, kUnwindSelf, SFRAME_IOC_UNWIND_SELF, arg, ret, err);
    }
    if (by_a && by_b) sh->replaced_mixed.fetch_add(1, std::memory_order_relaxed);
  }

  VMTEST_NOIPA static void Deeper(Thread* t, int depth) {
    if (depth <= 0) {
      t->DoUnwindSelf();
    } else {
      Deeper(t, depth - 1);
    }
    VMTEST_BARRIER();  // no tail call: each level keeps its frame
  }

  void Step() {
    // A quarter of the requests are wild at the struct level (sizes,
    // flags, reserved fields, tails, flipped bytes); the others are well
    // formed so that most get past the checks of the struct into the
    // module's real work, with their addresses, lengths and sections still
    // chosen at random.
    wild = rng.OneIn(4);
    // Weights: the cheap validation paths most, walks and registrations
    // often, the expensive or stateful ones (sessions, listing) less.
    const uint64_t r = rng.Below(100);
    if (r < 18) DoRegister();
    else if (r < 30) DoUnregister();
    else if (r < 50) {
      // Now and then from deeper down: walks of hundreds of SFrame frames
      // (and SFRAME_STOP_LIMIT when max_frames is smaller); a quarter of
      // the others through the replaced text.
      if (rng.OneIn(16)) Deeper(this, static_cast<int>(rng.Below(300)));
      else if (rng.OneIn(4)) DoUnwindReplaced();
      else DoUnwindSelf();
    }
    else if (r < 57) DoGetStats();
    else if (r < 70) DoSupply();
    else if (r < 78) DoList();
    else if (r < 81) DoSessionStart();
    else if (r < 85) DoSessionStats();
    else if (r < 89) DoUnknown();
    else if (r < 92) DoFile();
    else if (r < 96) DoRead();
    else DoPoll();
  }

  // Until this thread made n ioctl calls (read() and poll() come on top).
  void Run(uint64_t n) {
    while (calls < n && !sh->stop.load(std::memory_order_relaxed)) Step();
    // What is left registered is unregistered (or left to the exit of the
    // worker, for some: both paths must free everything).
    if (id == 0) {
      for (uint64_t t : registered) {
        sframe_unregister u{};
        u.size = sizeof(u);
        u.text_start = t;
        ioctl(w->dev, SFRAME_IOC_UNREGISTER, &u);
      }
    }
    if (sess >= 0 && rng.OneIn(2)) close(sess);  // the others close at exit
  }
};

// ---- the mutator: the memory under the registrations changes ----------------------

void SleepUs(long us) {
  timespec ts{0, us * 1000};
  nanosleep(&ts, nullptr);
}

// Maps r again at its place with its pristine bytes.  A region that may be
// unmapped is unmapped first and mapped again only if its place is still
// free (else it stays unmapped until later); one that stays mapped gets new
// pages in place of the old in one step (MAP_FIXED), so that its range is
// never free, and reads as zeros until the bytes are copied.
void Remap(Region* r) {
  void* const at = reinterpret_cast<void*>(r->addr);
  if (r->stays_mapped) {
    if (mmap(at, r->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
             0) == MAP_FAILED) {
      r->broken = true;
      return;
    }
  } else {
    if (r->mapped) {
      munmap(at, r->len);
      r->mapped = false;
    }
    void* p = mmap(at, r->len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) return;
    if (p != at) {  // kernels without NOREPLACE
      munmap(p, r->len);
      return;
    }
  }
  std::memcpy(at, r->pristine.data(), r->len);
  mprotect(at, r->len, r->prot);
  r->mapped = true;
  r->cur_prot = r->prot;
}

// A child that inherits the worker's registrations (and maybe a session's
// perf event), makes a few calls and exits.  Only async-signal-safe calls:
// the parent has threads.
void ForkChild(World* w, Shared* sh) {
  const pid_t pid = fork();
  if (pid == 0) {
    uint64_t frames[64];
    sframe_unwind_self u{};
    u.size = sizeof(u);
    u.flags = SFRAME_UNWIND_F_ALL;
    u.frames = reinterpret_cast<uint64_t>(frames);
    u.max_frames = 64;
    const Valid& v = w->valid[static_cast<size_t>(getpid()) % w->valid.size()];
    sframe_register r{};
    r.size = sizeof(r);
    r.sframe_addr = v.addr;
    r.sframe_len = v.len;
    r.text_start = v.text_start;
    r.text_len = v.text_len;
    int bad = 0;
    for (int i = 0; i < 4; i++) {
      long a = ioctl(w->dev, SFRAME_IOC_UNWIND_SELF, &u);
      if (a < 0 && !Documented(kUnwindSelf, errno)) bad = 1;
      sh->counts[kUnwindSelf][a < 0 ? std::min(errno, kErrnoSlots - 1) : 0]++;
      long b = ioctl(w->dev, SFRAME_IOC_REGISTER, &r);
      if (b < 0 && !Documented(kRegister, errno)) bad = 1;
      sh->counts[kRegister][b < 0 ? std::min(errno, kErrnoSlots - 1) : 0]++;
      sh->ioctls += 2;
    }
    // A moment alive, so that the fuzz threads' requests for it race its
    // exit.
    timespec ts{0, 2000000};
    nanosleep(&ts, nullptr);
    if (!bad && getpid() % 4 == 0) {
      // Exec drops the registry with the old address space, as exit does.
      char* const argv[] = {const_cast<char*>("true"), nullptr};
      char* const envp[] = {nullptr};
      execve("/bin/true", argv, envp);
    }
    _exit(bad ? 3 : 0);  // whatever it registered goes with its exit
  }
  if (pid > 0) {
    w->child = pid;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    sh->children++;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      const int slot = sh->nfail.fetch_add(1);
      if (slot < kMaxFailures) {
        std::snprintf(sh->fail[slot], sizeof(sh->fail[0]),
                      "a forked child of worker %d ended with status 0x%x (3: an undocumented "
                      "errno from UNWIND_SELF or REGISTER)",
                      w->worker, st);
      }
    }
  }
}

void Mutate(World* w, Shared* sh, uint64_t seed, std::atomic<bool>* done,
            sframe::PerfEvent* perf) {
  Rng rng(seed);
  Region* regions[] = {&w->text, &w->sections, &w->selfcopy};
  uint64_t n = 0;
  while (!done->load()) {
    Region* r = regions[rng.Below(3)];
    if (r->broken) continue;
    switch (rng.Below(10)) {
      case 0: case 1: case 2:  // flip bytes where walks and validation read
        if (r != &w->text && r->mapped && (r->cur_prot & PROT_WRITE)) {
          uint8_t* b = reinterpret_cast<uint8_t*>(r->addr);
          const size_t span = r == &w->selfcopy ? w->valid[kChunks].len : 2048;
          for (int i = 0, k = 1 + static_cast<int>(rng.Below(8)); i < k; i++) {
            b[rng.Below(span)] ^= static_cast<uint8_t>(1u << rng.Below(8));
          }
          SleepUs(200);
          if (rng.Below(4)) std::memcpy(b, r->pristine.data(), r->len);  // and back
        }
        break;
      case 3: case 4: {  // mprotect
        if (!r->mapped) break;
        static const int kProts[] = {PROT_NONE, PROT_READ, PROT_EXEC, PROT_READ | PROT_EXEC,
                                     PROT_READ | PROT_WRITE};
        const int prot = rng.Pick(kProts);
        if (mprotect(reinterpret_cast<void*>(r->addr), r->len, prot) == 0) r->cur_prot = prot;
        SleepUs(300);
        if (rng.Below(3) &&
            mprotect(reinterpret_cast<void*>(r->addr), r->len, r->prot) == 0) {
          r->cur_prot = r->prot;
        }
        break;
      }
      case 5: {  // munmap, and a new mapping in its place (maybe later)
        if (r->mapped && !r->stays_mapped) {
          munmap(reinterpret_cast<void*>(r->addr), r->len);
          r->mapped = false;
          SleepUs(300);
        }
        if (rng.Below(4)) Remap(r);
        break;
      }
      case 6:  // a page of the text unmapped (the rest keeps its sections)
        if (r == &w->text && r->mapped) {
          const size_t page = Page();
          const uint64_t at = r->addr + rng.Below(r->len / page) * page;
          munmap(reinterpret_cast<void*>(at), page);
          SleepUs(300);
          void* p = mmap(reinterpret_cast<void*>(at), page, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
          if (p == reinterpret_cast<void*>(at)) {
            std::memset(p, 0xcc, page);
            mprotect(p, page, r->cur_prot);
          } else {
            if (p != MAP_FAILED) munmap(p, page);
            r->broken = true;
          }
        }
        break;
      case 7:
        if (rng.OneIn(8)) {
          ForkChild(w, sh);
        } else if (r != &w->text && r->mapped && (r->cur_prot & PROT_WRITE)) {
          // The pages dropped: the section reads as zeros until rewritten.
          madvise(reinterpret_cast<void*>(r->addr), r->len, MADV_DONTNEED);
          SleepUs(200);
          std::memcpy(reinterpret_cast<void*>(r->addr), r->pristine.data(), r->len);
        }
        break;
      default:
        if (perf) perf->drain();
        for (Region* q : regions) {
          if (q->broken) continue;
          if (!q->mapped) Remap(q);
          else if (q->cur_prot != q->prot &&
                   mprotect(reinterpret_cast<void*>(q->addr), q->len, q->prot) == 0) {
            q->cur_prot = q->prot;
          }
        }
        SleepUs(500);
        break;
    }
    n++;
    sh->mutations.fetch_add(1, std::memory_order_relaxed);
  }
  (void)n;
}

// The replacer: unregisters T, supplies B, unregisters T, supplies A, in a
// loop until done, each supply left in place for a millisecond (so that T
// is covered most of the time and walks are under way when it changes).
// Its calls are checked against the uapi and counted in the table by
// errno, not in the total of calls (the target is the fuzz threads').
// Documented failures are expected now and then: EDQUOT while the warm-up's
// 64 MiB supply holds the process's bound, EEXIST or ENOENT if a fuzz
// thread's request happened to name T.
void Replace(World* w, Shared* sh, std::atomic<bool>* done) {
  const Replaced& rp = w->replaced;
  while (!done->load()) {
    for (int step = 0; step < 4 && !done->load(); step++) {
      const bool supply = step % 2 == 1, big = step == 3;
      long ret;
      if (supply) {
        sframe_supply s{};
        s.size = sizeof(s);
        s.sframe_data = reinterpret_cast<uint64_t>(big ? rp.big.data() : rp.small.data());
        s.sframe_len = big ? rp.big.size() : rp.small.size();
        s.sframe_addr = rp.label;
        s.text_start = rp.text;
        s.text_len = kReplaceTextLen;
        ret = RawIoctl(w->dev, SFRAME_IOC_SUPPLY, reinterpret_cast<uint64_t>(&s));
      } else {
        sframe_unregister u{};
        u.size = sizeof(u);
        u.text_start = rp.text;
        ret = RawIoctl(w->dev, SFRAME_IOC_UNREGISTER, reinterpret_cast<uint64_t>(&u));
      }
      const int op = supply ? kSupply : kUnregister;
      const int err = ret < 0 && ret >= -4095 ? static_cast<int>(-ret) : 0;
      sh->counts[op][std::min(err, kErrnoSlots - 1)].fetch_add(1, std::memory_order_relaxed);
      if (ret > 0 || ret < -4095 || (ret < 0 && !Documented(op, err))) {
        const int slot = sh->nfail.fetch_add(1);
        if (slot < kMaxFailures) {
          std::snprintf(sh->fail[slot], sizeof(sh->fail[0]),
                        "undocumented result: the replacer's %s of T (%s) returned %ld",
                        kOpNames[op], supply ? (big ? "A" : "B") : "-", ret);
        }
      }
      if (ret == 0 && supply) (big ? sh->supplied_a : sh->supplied_b).fetch_add(1);
      if (supply) SleepUs(1000);
    }
  }
}

// A worker process: builds its world, runs `threads` fuzz threads, one
// mutator and one replacer, exits.  Never returns.
[[noreturn]] void Worker(Shared* sh, int worker, uint64_t seed, int threads,
                         uint64_t calls_per_thread, bool big_supplies) {
  World w;
  w.worker = worker;
  BuildWorld(&w);
  // O_NONBLOCK: SESSION_START sometimes makes this shared file a session
  // too, and a blocking read() of a session whose target never samples
  // would wait for ever.
  w.dev = open(vmtest::DevicePath().c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (w.dev < 0) {
    std::fprintf(stderr, "fuzz: open %s: %s\n", vmtest::DevicePath().c_str(), std::strerror(errno));
    _exit(92);
  }
  // Samples for the sessions: a software cpu-clock event on this process
  // (its threads inherit it).  Refused to uid 65534 under
  // perf_event_paranoid 3: then the sessions stay empty (and are refused).
  std::unique_ptr<sframe::PerfEvent> perf;
  {
    try {
      sframe::PerfEventOptions o;
      o.frequency = 250;
      o.data_pages_log2 = 1;
      perf = std::make_unique<sframe::PerfEvent>(sframe::PerfEvent::open_process(getpid(), o));
      perf->enable();
      sh->perf_ok++;
    } catch (const sframe::Error&) {
      perf.reset();
    }
  }
  uint64_t s = seed ^ (0x1000193ull * static_cast<uint64_t>(worker + 1));
  std::vector<std::unique_ptr<Thread>> ts;
  for (int t = 0; t < threads; t++) {
    ts.push_back(std::make_unique<Thread>(&w, sh, SplitMix(&s), t));
  }
  // A few maximal supplies, outside the inner loop: 64 MiB
  // (SFRAME_MAX_SECTION_SIZE) copied into kernel memory, a valid section at
  // its start; then the same again, which the per-process bound of 64 MiB
  // must refuse (EDQUOT) unless the first was refused.  What is held is
  // freed when the worker exits (supplied_bytes and vmalloc back to the
  // baseline).
  // (In the warm-up's single worker, before any thread runs: no other
  // process supplies for it or unregisters what it supplied meanwhile.)
  if (big_supplies) {
    sframe::MappedRegion big = sframe::MappedRegion::map_near(
        reinterpret_cast<void*>(w.text.addr), SFRAME_MAX_SECTION_SIZE, PROT_READ | PROT_WRITE);
    long first = 0;
    for (int i = 0; i < 2; i++) {
      // The section of chunk i at the start of the 64 MiB (zeros after it).
      const Valid& v = w.valid[static_cast<size_t>(i)];
      std::memset(big.data(), 0, 4096);
      std::memcpy(big.data(), w.sections.pristine.data() + (v.addr - w.sections.addr), v.len);
      sframe::relocate_section(big.data(), v.len, v.addr, big.address());
      sframe_supply s{};
      s.size = sizeof(s);
      s.sframe_data = big.address();
      s.sframe_len = SFRAME_MAX_SECTION_SIZE;
      s.sframe_addr = big.address();
      // Two different text ranges (chunks 0 and 1), so that the second
      // is no overlap of the first.
      s.text_start = w.text.addr + i * (kTextLen / kChunks);
      s.text_len = kTextLen / kChunks;
      const long ret = RawIoctl(w.dev, SFRAME_IOC_SUPPLY, reinterpret_cast<uint64_t>(&s));
      const int err = ret < 0 ? static_cast<int>(-ret) : 0;
      sh->ioctls++;
      sh->counts[kSupply][std::min(err, kErrnoSlots - 1)]++;
      bool bad = ret > 0 || (ret < 0 && !Documented(kSupply, err));
      if (i == 0) first = ret;
      sh->big[i] = ret;
      if (i == 1 && first == 0 && err != EDQUOT) bad = true;
      if (bad) {
        const int slot = sh->nfail.fetch_add(1);
        if (slot < kMaxFailures) {
          std::snprintf(sh->fail[slot], sizeof(sh->fail[0]),
                        "64 MiB SUPPLY %d (the first returned %ld): returned %ld; expected 0 or "
                        "a documented errno, and EDQUOT for the second if the first held "
                        "64 MiB",
                        i + 1, first, ret);
        }
      }
    }
  }
  std::atomic<bool> done{false};
  std::thread mut(Mutate, &w, sh, SplitMix(&s), &done, perf.get());
  std::thread rep(Replace, &w, sh, &done);
  std::vector<std::thread> run;
  for (auto& t : ts) run.emplace_back([&t, calls_per_thread] { t->Run(calls_per_thread); });
  for (auto& t : run) t.join();
  done = true;
  mut.join();
  rep.join();
  if (perf) perf->disable();
  _exit(0);  // registrations, sessions and the perf event die with the process
}

// ---- the test's side --------------------------------------------------------------

uint64_t EnvU64(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  return std::strtoull(v, nullptr, 0);
}

std::string ErrName(int e) {
  if (e == 0) return "ok";
  if (e == kErrnoSlots - 1) return "errno>=" + std::to_string(e);
  const char* n = strerrorname_np(e);
  return n ? n : std::to_string(e);
}

// VmallocUsed of /proc/meminfo, in KiB (-1 if absent).
long VmallocKb() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long v = 0;
  std::string unit;
  while (in >> key >> v) {
    std::getline(in, unit);
    if (key == "VmallocUsed:") return v;
  }
  return -1;
}

// As root: asks SLUB to give back the empty slabs of the caches counted
// (/sys/kernel/slab/NAME/shrink), so that objects that only sit free in a
// CPU's slab stop counting as active and the counts before and after
// compare what is really allocated.
void ShrinkSlabs() {
  DIR* d = opendir("/sys/kernel/slab");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind("kmalloc-", 0) != 0 && n != "maple_node") continue;
    const int fd = open(("/sys/kernel/slab/" + n + "/shrink").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) continue;
    (void)!write(fd, "1", 1);
    close(fd);
  }
  closedir(d);
}

std::map<std::string, long> ShrunkSlabCounts() {
  ShrinkSlabs();
  return vmtest::SlabCounts();
}

// After a counter did not come back: which live process still has
// supplied or registered sections (every process this user may
// ptrace-read; all of them as root).  None means a registry outlived its
// process: a leak in the module, not in the test.
std::string HoldersOfSections(int dev) {
  std::string out;
  DIR* d = opendir("/proc");
  if (!d) return "(no /proc)";
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (!pid || *end) continue;
    sframe_section_info infos[16]{};
    sframe_list_sections req{};
    req.size = sizeof(req);
    req.pid = static_cast<int32_t>(pid);
    req.entries = reinterpret_cast<uint64_t>(infos);
    req.max_entries = 16;
    if (ioctl(dev, SFRAME_IOC_LIST_SECTIONS, &req) != 0) continue;
    std::string held;
    for (uint32_t i = 0; i < std::min(req.nr_entries, 16u); i++) {
      if (infos[i].source != SFRAME_SOURCE_SUPPLIED && infos[i].source != SFRAME_SOURCE_REGISTERED) {
        continue;
      }
      char line[160];
      std::snprintf(line, sizeof(line), " [%s text 0x%llx+%llu, %llu bytes]",
                    infos[i].source == SFRAME_SOURCE_SUPPLIED ? "supplied" : "registered",
                    static_cast<unsigned long long>(infos[i].text_start),
                    static_cast<unsigned long long>(infos[i].text_len),
                    static_cast<unsigned long long>(infos[i].sframe_len));
      held += line;
    }
    if (held.empty()) continue;
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    std::getline(comm, name);
    out += "pid " + std::to_string(pid) + " (" + name + (pid == getpid() ? ", this test" : "") +
           "):" + held + "\n";
  }
  closedir(d);
  return out.empty() ? "no live process that this user may read holds any" : out;
}

class FuzzTest : public vmtest::DeviceTest {};

TEST_F(FuzzTest, AMillionRandomIoctlsWhileTheMemoryChanges) {
  const char* mode = std::getenv("SFRAME_VM_MODE");
  const std::string m = mode ? mode : (geteuid() == 0 ? "root" : "user");
  uint64_t seed = EnvU64("SFRAME_FUZZ_SEED", 0);
  if (!seed && GTEST_FLAG_GET(random_seed)) {
    seed = static_cast<uint64_t>(GTEST_FLAG_GET(random_seed));
  }
  if (!seed) {
    seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) ^
           (static_cast<uint64_t>(getpid()) << 32);
  }
  const uint64_t target = EnvU64("SFRAME_FUZZ_CALLS", 1000000);
  const uint64_t seconds = EnvU64("SFRAME_FUZZ_SECONDS", 230);
  // Two worker processes (one per vCPU of the VM), two fuzz threads and a
  // mutator in each: calls race in one process and across two.
  constexpr int kWorkers = 2, kThreads = 2;
  std::printf("fuzz: seed %" PRIu64 " (mode %s; SFRAME_FUZZ_SEED=%" PRIu64
              " reproduces the requests), target %" PRIu64 " ioctl calls in %" PRIu64 " s\n",
              seed, m.c_str(), seed, target, seconds);
  std::fflush(stdout);
  RecordProperty("seed", std::to_string(seed));

  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  Shared* sh = new (mem) Shared();
  std::fflush(nullptr);

  auto run_workers = [&](uint64_t calls, uint64_t s, int nworkers, bool big_supplies) {
    std::vector<pid_t> pids;
    for (int i = 0; i < nworkers; i++) {
      const pid_t p = fork();
      if (p == 0) {
        Worker(sh, i, s, kThreads, (calls + nworkers * kThreads - 1) / (nworkers * kThreads),
               big_supplies);
      }
      if (p < 0) ADD_FAILURE() << "fork: " << std::strerror(errno);
      else {
        pids.push_back(p);
        sh->worker_pids[i] = p;
      }
    }
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::seconds(seconds);
    auto progress = start + std::chrono::seconds(15);
    bool killed = false;
    for (pid_t p : pids) {
      int st = 0;
      for (;;) {
        const pid_t r = waitpid(p, &st, WNOHANG);
        if (r == p) break;
        if (r < 0 && errno != EINTR) {
          ADD_FAILURE() << "waitpid " << p << ": " << std::strerror(errno);
          break;
        }
        const auto now = std::chrono::steady_clock::now();
        if (now > deadline) sh->stop = 1;
        // Workers stop at the deadline between two calls; one that has not
        // 30 s later is stuck (in the module, say): killed, so that the
        // test reports it instead of the rig's timeout.
        if (now > deadline + std::chrono::seconds(30) && !killed) {
          ADD_FAILURE() << "workers still running 30 s after the deadline: killed";
          for (pid_t q : pids) kill(q, SIGKILL);
          killed = true;
        }
        if (now > progress) {
          // On stderr: the log shows how far a run got if it hangs.
          std::fprintf(stderr, "fuzz progress: %" PRIu64 " ioctl calls after %.0f s\n",
                       sh->ioctls.load(), std::chrono::duration<double>(now - start).count());
          progress += std::chrono::seconds(15);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
          << "worker " << p << " ended with status 0x" << std::hex << st
          << (WIFSIGNALED(st) ? " (killed by a signal)" : "");
    }
    for (auto& p : sh->worker_pids) p = 0;
  };

  // The module's counters with no worker alive: what they must come back to.
  const sframe::Stats before = dev().stats();
  const auto back_to_baseline = [&] { return vmtest::WaitForRegistriesBack(dev(), before); };

  // Warm-up: the module's caches, the maple tree and the kernel's slabs get
  // to a steady state before the slab baseline is taken.
  // Kernel memory back to the baseline, below: objects are freed after RCU
  // grace periods and by workqueues, so the checks give them time.
  // Margins: what the rest of the guest (the rig's shell, the test's own
  // threads) moves meanwhile.  A leak of one object per thousand calls
  // would be 1,000 objects.
  constexpr long kVmallocMarginKb = 8 * 1024;
  const auto vmalloc_settled = [&](long base) {
    long now = VmallocKb();
    for (int i = 0; i < 100 && now - base > kVmallocMarginKb; i++) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      now = VmallocKb();
    }
    return now;
  };
  const long vmalloc_start = VmallocKb();

  // The warm-up's worker also makes the two 64 MiB supplies.
  run_workers(4000, seed ^ 0x5eed, 1, true);
  if (HasFailure()) return;
  // The 64 MiB supplied are vfree()d lazily: the baseline is taken once
  // they are gone (or fails here if they never go).
  const long vmalloc_warm = vmalloc_settled(vmalloc_start);
  EXPECT_LE(vmalloc_warm - vmalloc_start, kVmallocMarginKb)
      << "VmallocUsed " << vmalloc_start << " kB -> " << vmalloc_warm
      << " kB after the warm-up and its 64 MiB supplies";
  const sframe::Stats warm = back_to_baseline();
  EXPECT_EQ(warm.sections, before.sections) << "after the warm-up";
  EXPECT_EQ(warm.processes, before.processes) << "after the warm-up";
  sh->perf_ok = 0;
  const std::map<std::string, long> slab_before = ShrunkSlabCounts();
  const long vmalloc_before = VmallocKb();
  const uint64_t warm_calls = sh->ioctls.load();

  const auto t0 = std::chrono::steady_clock::now();
  run_workers(target, seed, kWorkers, false);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t calls = sh->ioctls.load() - warm_calls;

  std::printf("fuzz: %" PRIu64 " ioctl calls (mode %s, seed %" PRIu64 ")\n", calls, m.c_str(),
              seed);
  std::printf("fuzz: %.1f s, %.0f calls/s; %" PRIu64 " mutations, %" PRIu64
              " children forked, %" PRIu64 " sessions started, %" PRIu64
              " records read, %" PRIu64 " frames walked with SFrame, perf events in %d of %d "
              "workers\n",
              secs, static_cast<double>(calls) / secs, sh->mutations.load(), sh->children.load(),
              sh->sessions.load(), sh->records.load(), sh->walked.load(), sh->perf_ok.load(),
              kWorkers);
  std::printf("fuzz: replaced text: %" PRIu64 " supplies of A and %" PRIu64
              " of B, %" PRIu64 " walks through it (%" PRIu64
              " with frames of both: replaced during the walk)\n",
              sh->supplied_a.load(), sh->supplied_b.load(), sh->replaced_walks.load(),
              sh->replaced_mixed.load());
  std::printf("fuzz: two 64 MiB supplies returned %s, %s\n",
              ErrName(static_cast<int>(-sh->big[0].load())).c_str(),
              ErrName(static_cast<int>(-sh->big[1].load())).c_str());
  for (int op = 0; op < kNumOps; op++) {
    std::ostringstream line;
    uint64_t total = 0;
    for (int e = 0; e < kErrnoSlots; e++) {
      const uint64_t c = sh->counts[op][e].load();
      if (!c) continue;
      total += c;
      line << " " << ErrName(e) << "=" << c;
    }
    std::printf("fuzz:   %-13s %9" PRIu64 ":%s\n", kOpNames[op], total, line.str().c_str());
  }
  std::fflush(stdout);
  RecordProperty("ioctl_calls", std::to_string(calls));

  const int nfail = sh->nfail.load();
  for (int i = 0; i < std::min(nfail, kMaxFailures); i++) ADD_FAILURE() << sh->fail[i];
  EXPECT_EQ(nfail, 0) << "calls with undocumented results (first " << kMaxFailures << " above)";
  EXPECT_GE(calls, target) << "fewer calls than the target: the time limit (" << seconds
                           << " s) passed first, or a worker died";

  // Every call of the uapi was made, and some of each kind that changes
  // state got through validation (else the fuzzer tests only the front
  // door).
  for (int op = 0; op < kNumOps; op++) {
    uint64_t total = 0;
    for (int e = 0; e < kErrnoSlots; e++) total += sh->counts[op][e].load();
    EXPECT_GT(total, 0u) << kOpNames[op] << " was never called";
  }
  EXPECT_GT(sh->counts[kRegister][0].load(), 0u) << "no REGISTER succeeded";
  EXPECT_GT(sh->counts[kSupply][0].load(), 0u) << "no SUPPLY succeeded";
  EXPECT_GT(sh->counts[kUnwindSelf][0].load(), 0u) << "no UNWIND_SELF succeeded";
  EXPECT_GT(sh->walked.load(), 0u) << "no UNWIND_SELF walked a frame with SFrame";
  EXPECT_GT(sh->children.load(), 0u) << "no child was forked";
  EXPECT_GT(sh->supplied_a.load(), 0u) << "the replacer never supplied A";
  EXPECT_GT(sh->supplied_b.load(), 0u) << "the replacer never supplied B";
  EXPECT_GT(sh->replaced_walks.load(), 0u) << "no walk through the replaced text succeeded";
  if (geteuid() == 0) {
    EXPECT_GT(sh->sessions.load(), 0u) << "root never started a session";
  } else if (sframe::perf_event_paranoid() > 2) {
    // Debian's perf_event_paranoid=3 refuses every session to uid 65534.
    EXPECT_EQ(sh->sessions.load(), 0u);
    EXPECT_GT(sh->counts[kSessionStart][EACCES].load(), 0u);
  }

  // Everything the workers had went with them.
  const sframe::Stats after = back_to_baseline();
  EXPECT_EQ(after.sections, before.sections);
  EXPECT_EQ(after.processes, before.processes);
  EXPECT_EQ(after.supplied_bytes, before.supplied_bytes);
  if (after.sections != before.sections || after.processes != before.processes) {
    std::printf("fuzz: sections left over, held by:\n%s", HoldersOfSections(dev().fd()).c_str());
  }
  std::printf("fuzz: module counters: sections %" PRIu64 " -> %" PRIu64 ", processes %" PRIu64
              " -> %" PRIu64 ", supplied_bytes %" PRIu64 " -> %" PRIu64 "\n",
              before.sections, after.sections, before.processes, after.processes,
              before.supplied_bytes, after.supplied_bytes);

  const long vmalloc_after = vmalloc_settled(vmalloc_before);
  EXPECT_LE(vmalloc_after - vmalloc_before, kVmallocMarginKb)
      << "VmallocUsed " << vmalloc_before << " kB -> " << vmalloc_after << " kB";
  std::printf("fuzz: VmallocUsed %ld kB -> %ld kB\n", vmalloc_before, vmalloc_after);

  if (slab_before.empty()) {
    // /proc/slabinfo is readable by root only: the root run checks slabs.
    ASSERT_NE(geteuid(), 0u) << "/proc/slabinfo not readable as root";
    std::printf("fuzz: slab check: root run only (/proc/slabinfo is mode 0400)\n");
    RecordProperty("slab_check", "root run only");
    return;
  }
  constexpr long kCacheMargin = 1000, kTotalMargin = 2000;
  auto total = [](const std::map<std::string, long>& m) {
    long t = 0;
    for (const auto& [k, v] : m) t += v;
    return t;
  };
  auto over = [&](const std::map<std::string, long>& now) {
    std::vector<std::string> out;
    for (const auto& [k, v] : now) {
      auto it = slab_before.find(k);
      const long b = it == slab_before.end() ? 0 : it->second;
      if (v - b > kCacheMargin) {
        out.push_back(k + " " + std::to_string(b) + " -> " + std::to_string(v));
      }
    }
    return out;
  };
  std::map<std::string, long> slab_after = ShrunkSlabCounts();
  for (int i = 0; i < 100 && (total(slab_after) - total(slab_before) > kTotalMargin ||
                              !over(slab_after).empty());
       i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    slab_after = ShrunkSlabCounts();
  }
  std::printf("fuzz: slab objects (kmalloc-*, kmalloc-cg-*, maple_node) %ld -> %ld\n",
              total(slab_before), total(slab_after));
  for (const auto& [k, v] : slab_after) {
    auto it = slab_before.find(k);
    const long b = it == slab_before.end() ? 0 : it->second;
    if (v != b) std::printf("fuzz:   %-20s %7ld -> %7ld (%+ld)\n", k.c_str(), b, v, v - b);
  }
  RecordProperty("slab_objects_before", std::to_string(total(slab_before)));
  RecordProperty("slab_objects_after", std::to_string(total(slab_after)));
  EXPECT_LE(total(slab_after) - total(slab_before), kTotalMargin);
  for (const std::string& s : over(slab_after)) ADD_FAILURE() << "slab cache grew: " << s;
}

}  // namespace
