// Exact frame chains with the SFrame method (SFRAME_UNWIND_F_SFRAME) through
// the assembler's version-1 sections: in the executable, through a linked
// shared library and its PLT, through a dlopen()ed library, deep recursion,
// and 8 threads at once.
//
// Built with -O2 -fomit-frame-pointer -Wa,--gsframe: without SFrame none of
// these chains could be walked.  Every chain function is noipa and does
// something after each call, so no call is a tail call.
#include <dlfcn.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <sys/mman.h>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chains.h"
#include "libs/chain_lib.h"
#include "sframe_gen/section_builder.h"
#include "vmtest.h"

namespace {

using sframe::StopReason;
using vmtest::Chain;
using vmtest::ChainIs;
using vmtest::ChainStartsWith;
using vmtest::ChildResult;
using vmtest::ChildTail;
using vmtest::kUnwindSelf;
using vmtest::RunChild;

// As root the suite runs with discovery off, as a user with it on.
const bool kDiscoveryOffWhenRoot = vmtest::DiscoveryOffWhenRoot();

}  // namespace

// ---- chains in the executable ---------------------------------------------

VMTEST_CHILD(exe_chain) {
  (void)arg;
  sframe::Device dev(vmtest::DevicePath());
  std::vector<sframe::Registration> regs = sframe::register_loaded_objects(dev);
  UnwindReq req{&dev, SFRAME_UNWIND_F_SFRAME, 512, {}};
  exe_a(&req);
  vmtest::EmitUnwind("sframe", req.result);
  req.flags = SFRAME_UNWIND_F_ALL;
  exe_a(&req);
  vmtest::EmitUnwind("all", req.result);
  // Nothing registered: the walk cannot leave unwind_self.
  regs.clear();
  req.flags = SFRAME_UNWIND_F_SFRAME;
  exe_a(&req);
  vmtest::EmitUnwind("unregistered", req.result);
  return 0;
}

namespace {

// exe_chain's SFrame walk: the whole chain up to libc, every step but the
// one that would leave libc an SFrame step.
void ExpectExeChainBySframe(ChildResult& r) {
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const Chain& c = r.chains["sframe"];
  EXPECT_TRUE(
      ChainIs(c, Cat({kUnwindSelf, "DoUnwind", "exe_c", "exe_b", "exe_a"}, ChildTail("exe_chain")),
              r.main_return));
  EXPECT_EQ(c.stop, StopReason::kNoCoverage) << c.Describe();
  EXPECT_EQ(c.nr_sframe, c.frames.size() - 1);
  EXPECT_EQ(c.nr_fp, 0u);
}

// exe_chain run with the module parameter name at value (root only),
// checked as with the defaults.
void ExpectExeChainWithParam(const char* name, const char* value) {
  ChildResult r;
  {
    vmtest::ScopedModuleParam param(name, value);
    ASSERT_TRUE(param.ok()) << name << "=" << value;
    r = RunChild("exe_chain");
  }
  ExpectExeChainBySframe(r);
}

}  // namespace

TEST(ChainTest, ExecutableSframeOnly) {
  ChildResult r = RunChild("exe_chain");
  ExpectExeChainBySframe(r);
}

// With no room for FDE indexes (index_max_user_kb=0) sections are
// registered without one and every lookup searches the section in user
// memory: the same chain, step for step.
TEST(ChainTest, WithoutFdeIndexesTheChainIsTheSame) {
  if (geteuid() != 0) GTEST_SKIP() << "sets the module parameter index_max_user_kb (root only)";
  ExpectExeChainWithParam("index_max_user_kb", "0");
}

// With the row cache off (row_cache=0) no frame is a cache hit: each one
// below the top takes its rule from the section's FDE index through the
// entry the walk remembered (unwind.c, sframe_unwind_next_indexed()):
// the same chain, step for step.
TEST(ChainTest, WithoutTheRowCacheTheChainIsTheSame) {
  if (geteuid() != 0) GTEST_SKIP() << "sets the module parameter row_cache (root only)";
  ExpectExeChainWithParam("row_cache", "0");
}

TEST(ChainTest, ExecutableAllMethodsStartsTheSame) {
  ChildResult r = RunChild("exe_chain");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const Chain& c = r.chains["all"];
  // Up to libc the chain is SFrame's; what the frame-pointer fallback finds
  // in libc (no frame pointers there) is not defined.
  EXPECT_TRUE(ChainStartsWith(
      c, Cat({kUnwindSelf, "DoUnwind", "exe_c", "exe_b", "exe_a"}, ChildTail("exe_chain")),
      r.main_return));
  EXPECT_GE(c.nr_sframe, 7u) << c.Describe();
}

// Without a registration, only discovery covers the program: with it the
// chain is whole, without it the walk cannot leave unwind_self.
TEST(ChainTest, NothingRegisteredIsCoveredOnlyByDiscovery) {
  ChildResult r = RunChild("exe_chain");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const Chain& c = r.chains["unregistered"];
  if (vmtest::DiscoveryEnabled()) {
    EXPECT_TRUE(ChainIs(
        c, Cat({kUnwindSelf, "DoUnwind", "exe_c", "exe_b", "exe_a"}, ChildTail("exe_chain")),
        r.main_return));
    EXPECT_EQ(c.nr_sframe, c.frames.size() - 1);
  } else {
    EXPECT_TRUE(ChainIs(c, {kUnwindSelf}));
    EXPECT_EQ(c.nr_sframe, 0u);
  }
  EXPECT_EQ(c.stop, StopReason::kNoCoverage);
}

// ---- through a linked shared library and the PLT ---------------------------

VMTEST_CHILD(shared_lib_chain) {
  sframe::Device dev(vmtest::DevicePath());
  std::vector<sframe::Registration> regs;
  if (arg == "exe-only") {
    regs.push_back(sframe::register_object_containing(dev, reinterpret_cast<void*>(&exe_a)));
  } else {
    regs = sframe::register_loaded_objects(dev);
  }
  vmtest::EmitValue("registrations", regs.size());
  UnwindReq req{&dev, SFRAME_UNWIND_F_SFRAME, 512, {}};
  // The first call of lib_chain_a goes through the lazy-binding resolver,
  // the second straight through the resolved PLT slot.
  exe_calls_lib(&req);
  vmtest::EmitUnwind("first", req.result);
  exe_calls_lib(&req);
  vmtest::EmitUnwind("second", req.result);
  return 0;
}

const std::vector<std::string> kLibChain = {kUnwindSelf,   "DoUnwind",    "lib_callback",
                                            "lib_chain_b", "lib_chain_a", "exe_calls_lib"};

TEST(ChainTest, SharedLibraryThroughPlt) {
  ChildResult r = RunChild("shared_lib_chain");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(r.values["registrations"], 2u) << "the program and libvmtest_chain.so\n" << r.output;
  for (const char* label : {"first", "second"}) {
    SCOPED_TRACE(label);
    const Chain& c = r.chains[label];
    EXPECT_TRUE(ChainIs(c, Cat(std::vector<std::string>(kLibChain), ChildTail("shared_lib_chain")),
                        r.main_return));
    EXPECT_EQ(c.stop, StopReason::kNoCoverage);
    EXPECT_EQ(c.nr_sframe, c.frames.size() - 1);
  }
}

// lib_callback returns into lib_chain_b, whose library is not registered:
// discovery covers it, or the walk ends there.
TEST(ChainTest, UnregisteredLibraryIsCoveredOnlyByDiscovery) {
  ChildResult r = RunChild("shared_lib_chain", "exe-only");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const Chain& c = r.chains["second"];
  if (vmtest::DiscoveryEnabled()) {
    EXPECT_TRUE(ChainIs(c, Cat(std::vector<std::string>(kLibChain), ChildTail("shared_lib_chain")),
                        r.main_return));
  } else {
    EXPECT_TRUE(ChainIs(c, {kUnwindSelf, "DoUnwind", "lib_callback", "lib_chain_b"}));
  }
  EXPECT_EQ(c.stop, StopReason::kNoCoverage);
}

// The calls above must really go through PLT stubs: the program has a
// jump-slot relocation for lib_chain_a, the library one for lib_chain_b.
static std::vector<std::string> JumpSlotSymbols(const std::string& path) {
  std::vector<std::string> out;
  elf_version(EV_CURRENT);
  sframe::UniqueFd fd = sframe::UniqueFd::open(path, O_RDONLY);
  std::unique_ptr<Elf, decltype(&elf_end)> owner(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr),
                                                 &elf_end);
  Elf* elf = owner.get();
  if (!elf) return out;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_RELA) continue;
    Elf_Scn* symscn = elf_getscn(elf, shdr.sh_link);
    GElf_Shdr symshdr;
    if (!symscn || !gelf_getshdr(symscn, &symshdr)) continue;
    Elf_Data* rel = elf_getdata(scn, nullptr);
    Elf_Data* syms = elf_getdata(symscn, nullptr);
    for (size_t i = 0; rel && syms && i < shdr.sh_size / shdr.sh_entsize; i++) {
      GElf_Rela rela;
      GElf_Sym sym;
      if (!gelf_getrela(rel, static_cast<int>(i), &rela) ||
          GELF_R_TYPE(rela.r_info) != R_X86_64_JUMP_SLOT ||
          !gelf_getsym(syms, static_cast<int>(GELF_R_SYM(rela.r_info)), &sym)) {
        continue;
      }
      out.push_back(elf_strptr(elf, symshdr.sh_link, sym.st_name));
    }
  }
  return out;
}

TEST(ChainTest, CallsReallyGoThroughThePlt) {
  auto has = [](const std::vector<std::string>& v, const char* s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  EXPECT_TRUE(has(JumpSlotSymbols(sframe::self_exe_path()), "lib_chain_a"));
  EXPECT_TRUE(has(JumpSlotSymbols(vmtest::NextToSelf("libvmtest_chain.so")), "lib_chain_b"));
}

// ---- through a dlopen()ed library ------------------------------------------

VMTEST_CHILD(dlopen_chain) {
  (void)arg;
  sframe::Device dev(vmtest::DevicePath());
  sframe::Registration exe =
      sframe::register_object_containing(dev, reinterpret_cast<void*>(&exe_calls_dl));
  const std::string path = vmtest::NextToSelf("libvmtest_dl.so");
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::printf("dlopen %s: %s\n", path.c_str(), dlerror());
    return 4;
  }
  auto fn = reinterpret_cast<dl_chain_fn>(dlsym(handle, "dl_chain_a"));
  if (!fn) {
    std::printf("dlsym dl_chain_a: %s\n", dlerror());
    return 4;
  }
  UnwindReq req{&dev, SFRAME_UNWIND_F_SFRAME, 512, {}};
  exe_calls_dl(fn, &req);
  vmtest::EmitUnwind("before", req.result);
  {
    sframe::Registration lib = sframe::register_object_containing(dev, reinterpret_cast<void*>(fn));
    vmtest::EmitValue("lib_text_start", lib.text_start());
    exe_calls_dl(fn, &req);
    vmtest::EmitUnwind("registered", req.result);
  }
  exe_calls_dl(fn, &req);
  vmtest::EmitUnwind("after", req.result);
  dlclose(handle);
  return 0;
}

TEST(ChainTest, DlopenedLibrary) {
  ChildResult r = RunChild("dlopen_chain");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const std::vector<std::string> inner = {kUnwindSelf, "DoUnwind", "dl_callback", "dl_chain_b"};
  EXPECT_TRUE(ChainIs(r.chains["registered"],
                      Cat(Cat(inner, {"dl_chain_a", "exe_calls_dl"}), ChildTail("dlopen_chain")),
                      r.main_return));
  EXPECT_EQ(r.chains["registered"].stop, StopReason::kNoCoverage);
  EXPECT_NE(r.values["lib_text_start"], 0u);
  // Before registering and after the registration is gone, the walk stops
  // in the library, unless discovery covers it.
  for (const char* label : {"before", "after"}) {
    SCOPED_TRACE(label);
    if (vmtest::DiscoveryEnabled()) {
      EXPECT_TRUE(
          ChainIs(r.chains[label],
                  Cat(Cat(inner, {"dl_chain_a", "exe_calls_dl"}), ChildTail("dlopen_chain")),
                  r.main_return));
    } else {
      EXPECT_TRUE(ChainIs(r.chains[label], inner));
    }
  }
}

// ---- through JIT code: text with no file behind it ----------------------------

// jit(cb, arg): calls cb(arg) with the stack realigned, as generated code
// would.  Offsets: 0 sub $8,%rsp; 4 mov %rdi,%rax; 7 mov %rsi,%rdi;
// 10 call *%rax; 12 add $8,%rsp; 16 ret.
constexpr uint8_t kJitCode[] = {0x48, 0x83, 0xec, 0x08, 0x48, 0x89, 0xf8, 0x48, 0x89,
                                0xf7, 0xff, 0xd0, 0x48, 0x83, 0xc4, 0x08, 0xc3};
using jit_fn = void (*)(void (*cb)(void*), void* arg);

static void jit_callback(void* arg) {
  DoUnwind(static_cast<UnwindReq*>(arg));
  VMTEST_BARRIER();
}

VMTEST_NOIPA static int exe_calls_jit(jit_fn fn, UnwindReq* r) {
  fn(&jit_callback, r);
  VMTEST_BARRIER();
  return 1;
}

// Generated code and its section: written, then made executable and
// read-only (W^X), as a JIT does.  Outside the chain: binutils 2.40 writes
// no FDE for functions whose CFI needs .cfi_escape, which all this C++ may.
struct JitCode {
  sframe::MappedRegion code, section;
  size_t section_len = 0;
};

VMTEST_NOIPA static JitCode MakeJit() {
  JitCode j;
  j.code = sframe::MappedRegion::map(4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  std::memcpy(j.code.data(), kJitCode, sizeof(kJitCode));
  if (mprotect(j.code.data(), 4096, PROT_READ | PROT_EXEC) != 0) {
    throw sframe::Error(errno, "mprotect", "JIT code");
  }
  sframe::FdeSpec fde;
  fde.func_start = j.code.address();
  fde.func_size = sizeof(kJitCode);
  for (auto [off, cfa] : {std::pair<uint32_t, int32_t>{0, 8}, {4, 16}, {16, 8}}) {
    sframe::FreSpec fre;
    fre.start_off = off;
    fre.cfa_offset = cfa;
    fde.fres.push_back(fre);
  }
  sframe::SectionBuilder b(2);
  b.add_fde(fde);
  j.section = sframe::MappedRegion::map(4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  b.build_into(j.section.data(), j.section.address());
  j.section_len = b.size();
  return j;
}

VMTEST_NOIPA static sframe::Registration RegisterJit(const sframe::Device& dev, const JitCode& j) {
  return dev.register_scoped(j.section.address(), j.section_len, j.code.address(), 4096);
}

VMTEST_CHILD(jit_chain) {
  (void)arg;
  sframe::Device dev(vmtest::DevicePath());
  sframe::Registration exe =
      sframe::register_object_containing(dev, reinterpret_cast<void*>(&exe_calls_jit));
  JitCode j = MakeJit();
  vmtest::EmitValue("jit_start", j.code.address());
  vmtest::EmitValue("jit_len", sizeof(kJitCode));
  auto fn = reinterpret_cast<jit_fn>(j.code.data());
  UnwindReq req{&dev, SFRAME_UNWIND_F_SFRAME, 512, {}};
  exe_calls_jit(fn, &req);
  vmtest::EmitUnwind("unregistered", req.result);
  {
    sframe::Registration jit = RegisterJit(dev, j);
    exe_calls_jit(fn, &req);
    vmtest::EmitUnwind("registered", req.result);
  }
  exe_calls_jit(fn, &req);
  vmtest::EmitUnwind("after", req.result);
  return 0;
}

// Generated code is covered by what its generator registers, and by nothing
// else: discovery has no file to read there.
TEST(ChainTest, JitCodeIsCoveredByItsRegistration) {
  ChildResult r = RunChild("jit_chain");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const uint64_t start = r.values["jit_start"], len = r.values["jit_len"];
  const std::vector<std::string> inner = {kUnwindSelf, "DoUnwind", "jit_callback", "?"};
  for (const char* label : {"unregistered", "registered", "after"}) {
    SCOPED_TRACE(label);
    const Chain& c = r.chains[label];
    ASSERT_GE(c.frames.size(), 4u) << c.Describe();
    EXPECT_GE(c.frames[3].pc, start) << "the JIT frame";
    EXPECT_LT(c.frames[3].pc, start + len);
  }
  EXPECT_TRUE(ChainIs(r.chains["registered"],
                      Cat(Cat(inner, {"exe_calls_jit"}), ChildTail("jit_chain")), r.main_return));
  for (const char* label : {"unregistered", "after"}) {
    SCOPED_TRACE(label);
    EXPECT_TRUE(ChainIs(r.chains[label], inner));
    EXPECT_EQ(r.chains[label].stop, StopReason::kNoCoverage);
  }
}

TEST(ChainTest, ObjectWithoutSframeIsRefusedByTheLibrary) {
  // libc has no PT_GNU_SFRAME: the library says so without asking the module.
  try {
    sframe::Device dev(vmtest::DevicePath());
    sframe::register_object_containing(dev, reinterpret_cast<void*>(&pthread_create));
    FAIL() << "registered libc";
  } catch (const sframe::Error& e) {
    if (e.op() == sframe::op::kOpen) FAIL() << e.what();
    EXPECT_EQ(e.err(), ENODATA) << e.what();
  }
}

// ---- recursion deeper than 128 frames --------------------------------------

VMTEST_NOIPA static int recurse(UnwindReq* r, int n) {
  if (n == 0) {
    r->result = r->dev->unwind_self(r->max_frames, r->flags);
    VMTEST_BARRIER();
    return 0;
  }
  int v = recurse(r, n - 1);
  asm volatile("" : "+r"(v)::"memory");  // no accumulator or tail recursion
  return v + 1;
}

// arg: "DEPTH:MAX_FRAMES"
VMTEST_CHILD(recursion) {
  sframe::Device dev(vmtest::DevicePath());
  std::vector<sframe::Registration> regs = sframe::register_loaded_objects(dev);
  const int depth = std::stoi(arg.substr(0, arg.find(':')));
  UnwindReq req{&dev, SFRAME_UNWIND_F_SFRAME, 512, {}};
  req.max_frames = static_cast<uint32_t>(std::stoul(arg.substr(arg.find(':') + 1)));
  recurse(&req, depth);
  vmtest::EmitUnwind("recursion", req.result);
  return 0;
}

std::vector<std::string> RecursionChain(int depth) {
  std::vector<std::string> v = {kUnwindSelf};
  for (int i = 0; i <= depth; i++) v.push_back("recurse");
  return Cat(v, ChildTail("recursion"));
}

TEST(ChainTest, Recursion300Complete) {
  ChildResult r = RunChild("recursion", "300:512");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const Chain& c = r.chains["recursion"];
  EXPECT_TRUE(ChainIs(c, RecursionChain(300), r.main_return));
  EXPECT_EQ(c.frames.size(), 306u);
  EXPECT_EQ(c.stop, StopReason::kNoCoverage);
  EXPECT_EQ(c.nr_sframe, 305u);
}

TEST(ChainTest, Recursion300WithSmallLimit) {
  ChildResult r = RunChild("recursion", "300:100");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const Chain& c = r.chains["recursion"];
  std::vector<std::string> want = RecursionChain(300);
  want.resize(100);
  EXPECT_TRUE(ChainIs(c, want));
  EXPECT_EQ(c.stop, StopReason::kLimit);
}

TEST(ChainTest, LimitExactlyTheChainLength) {
  // 306 frames fit exactly: max_frames frames were stored, so LIMIT (uapi).
  ChildResult r = RunChild("recursion", "300:306");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(ChainIs(r.chains["recursion"], RecursionChain(300), r.main_return));
  EXPECT_EQ(r.chains["recursion"].stop, StopReason::kLimit);
  // One more slot: the walk ends on its own, in libc.
  r = RunChild("recursion", "300:307");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(ChainIs(r.chains["recursion"], RecursionChain(300), r.main_return));
  EXPECT_EQ(r.chains["recursion"].stop, StopReason::kNoCoverage);
}

TEST(ChainTest, Recursion4000UpToTheMaximumFrames) {
  ChildResult r = RunChild("recursion", "4000:" + std::to_string(SFRAME_MAX_FRAMES));
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const Chain& c = r.chains["recursion"];
  EXPECT_TRUE(ChainIs(c, RecursionChain(4000), r.main_return));
  EXPECT_EQ(c.stop, StopReason::kNoCoverage);
}

// ---- 8 threads, each with its own chain -------------------------------------

namespace {

constexpr int kThreads = 8;
constexpr int kIterations = 1000;

struct ThreadCtx {
  const sframe::Device* dev = nullptr;
  pthread_barrier_t* barrier = nullptr;
  std::vector<int> path;  // which level function at each depth
  uint64_t start_thread_pc = 0;
  sframe::UnwindResult first;
  int mismatches = 0;
  sframe::UnwindResult bad;
  std::string error;
};

using LevelFn = int (*)(ThreadCtx*, size_t, sframe::UnwindResult*);

}  // namespace

extern const LevelFn kLevels[8];

// Each level calls the next of the thread's path, the last one unwinds.
#define VMTEST_LEVEL(k)                                                                 \
  VMTEST_NOIPA static int level##k(ThreadCtx* c, size_t d, sframe::UnwindResult* out) { \
    int v = k;                                                                          \
    if (d + 1 == c->path.size()) {                                                      \
      *out = c->dev->unwind_self(64, SFRAME_UNWIND_F_SFRAME);                           \
    } else {                                                                            \
      v += kLevels[c->path[d + 1]](c, d + 1, out);                                      \
    }                                                                                   \
    VMTEST_BARRIER();                                                                   \
    return v;                                                                           \
  }
VMTEST_LEVEL(0)
VMTEST_LEVEL(1)
VMTEST_LEVEL(2)
VMTEST_LEVEL(3)
VMTEST_LEVEL(4)
VMTEST_LEVEL(5)
VMTEST_LEVEL(6)
VMTEST_LEVEL(7)
const LevelFn kLevels[8] = {level0, level1, level2, level3, level4, level5, level6, level7};

VMTEST_NOIPA static void* thread_main(void* arg) {
  auto* c = static_cast<ThreadCtx*>(arg);
  c->start_thread_pc = reinterpret_cast<uint64_t>(__builtin_return_address(0));
  pthread_barrier_wait(c->barrier);
  for (int i = 0; i < kIterations; i++) {
    sframe::UnwindResult r;
    try {
      kLevels[c->path[0]](c, 0, &r);
    } catch (const sframe::Error& e) {
      c->error = e.what();
      break;
    }
    VMTEST_BARRIER();
    if (i == 0) {
      c->first = r;
    } else if (r.frames != c->first.frames || r.stop_reason != c->first.stop_reason) {
      if (c->mismatches++ == 0) c->bad = r;
    }
  }
  return nullptr;
}

class ThreadChainTest : public vmtest::DeviceTest {};

TEST_F(ThreadChainTest, EightThreadsEachWithItsOwnChain) {
  std::vector<sframe::Registration> regs = vmtest::RegisterLoaded(dev());
  ASSERT_FALSE(regs.empty());
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, nullptr, kThreads);
  std::vector<ThreadCtx> ctx(kThreads);
  std::vector<pthread_t> threads(kThreads);
  for (int t = 0; t < kThreads; t++) {
    ctx[t].dev = &dev();
    ctx[t].barrier = &barrier;
    for (int d = 0; d < 3 + t; d++) ctx[t].path.push_back((t + 3 * d) % 8);
    ASSERT_EQ(pthread_create(&threads[t], nullptr, thread_main, &ctx[t]), 0);
  }
  for (int t = 0; t < kThreads; t++) pthread_join(threads[t], nullptr);
  pthread_barrier_destroy(&barrier);

  std::vector<std::vector<uint64_t>> seen;
  for (int t = 0; t < kThreads; t++) {
    SCOPED_TRACE(testing::Message() << "thread " << t);
    const ThreadCtx& c = ctx[t];
    ASSERT_EQ(c.error, "");
    std::vector<std::string> want = {kUnwindSelf};
    for (size_t d = c.path.size(); d-- > 0;) want.push_back("level" + std::to_string(c.path[d]));
    want.push_back("thread_main");
    want.push_back(vmtest::kStartThread);
    Chain chain = vmtest::Symbolize(c.first);
    EXPECT_TRUE(ChainIs(chain, want, c.start_thread_pc));
    EXPECT_EQ(chain.stop, StopReason::kNoCoverage);
    EXPECT_EQ(c.mismatches, 0) << "e.g.\n" << vmtest::Symbolize(c.bad).Describe();
    for (const auto& other : seen) EXPECT_NE(other, c.first.frames) << "chains must differ";
    seen.push_back(c.first.frames);
  }
}
