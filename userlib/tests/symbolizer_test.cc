#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sframe_client/objects.h"
#include "sframe_profile/symbolizer.h"

namespace {

// Not exported: only .symtab names it.
__attribute__((noipa)) int hidden_helper(int x) { return x * 5 + 3; }

namespace inner {
__attribute__((noipa)) long templated_sum(const std::vector<int>& v) {
  long s = 0;
  for (int x : v) s += x;
  return s;
}
}  // namespace inner

void* thread_return_address(void*) { return __builtin_return_address(0); }

TEST(SymbolizerTest, NamesStaticFunctionsOfTheProgram) {
  sframe::Symbolizer sym;
  const auto addr = reinterpret_cast<uint64_t>(&hidden_helper);
  sframe::Symbol s = sym.symbolize(addr + 2);
  ASSERT_TRUE(s.found()) << s.to_string();
  EXPECT_EQ(s.name, "(anonymous namespace)::hidden_helper(int)");
  EXPECT_EQ(s.function(), "(anonymous namespace)::hidden_helper");
  EXPECT_EQ(s.offset, 2u);
  EXPECT_EQ(s.symbol_start, addr);
  EXPECT_EQ(s.object, sframe::self_exe_path());
  EXPECT_TRUE(sym.has_full_symbols(s.object));
}

TEST(SymbolizerTest, DemanglesAndStripsParameters) {
  sframe::Symbolizer sym;
  sframe::Symbol s = sym.symbolize(reinterpret_cast<const void*>(&inner::templated_sum));
  EXPECT_EQ(s.function(), "(anonymous namespace)::inner::templated_sum");
  EXPECT_EQ(sframe::function_of("sframe::Device::unwind_self(unsigned int, unsigned int) const"),
            "sframe::Device::unwind_self");
  EXPECT_EQ(sframe::function_of("foo [clone .constprop.0]"), "foo");
  EXPECT_EQ(sframe::function_of("std::vector<int, std::allocator<int> >::push_back(int const&)"),
            "std::vector<int, std::allocator<int> >::push_back");
  EXPECT_EQ(sframe::function_of("main"), "main");
}

TEST(SymbolizerTest, ReturnAddressesAreLookedUpAtTheCall) {
  sframe::Symbolizer sym;
  const auto start = reinterpret_cast<uint64_t>(&hidden_helper);
  // A return address right past the end of a function belongs to it.
  sframe::Symbol end = sym.symbolize(start);
  std::vector<sframe::Symbol> frames = sym.symbolize_frames({start, start + 1});
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].address, start);
  EXPECT_EQ(frames[0].function(), "(anonymous namespace)::hidden_helper");
  EXPECT_EQ(frames[1].address, start + 1);
  EXPECT_EQ(frames[1].offset, 1u);
  EXPECT_EQ(frames[1].name, end.name);
}

TEST(SymbolizerTest, LibcExportsAndLocalsWithDebugSymbols) {
  sframe::Symbolizer sym;
  sframe::Symbol w = sym.symbolize(reinterpret_cast<const void*>(&pthread_create));
  EXPECT_NE(w.object.find("libc.so.6"), std::string::npos) << w.to_string();
  EXPECT_TRUE(w.found());

  // A thread's first function returns into libc's start_thread, a local
  // symbol: named only with libc's debug file (Debian: libc6-dbg).
  pthread_t t;
  void* ret = nullptr;
  ASSERT_EQ(pthread_create(&t, nullptr, thread_return_address, nullptr), 0);
  ASSERT_EQ(pthread_join(t, &ret), 0);
  sframe::Symbol s = sym.symbolize_frames({0, reinterpret_cast<uint64_t>(ret)})[1];
  EXPECT_NE(s.object.find("libc.so.6"), std::string::npos);
  if (!sym.has_full_symbols(s.object)) {
    GTEST_SKIP() << "no debug symbols for " << s.object << " (install libc6-dbg)";
  }
  EXPECT_EQ(s.function(), "start_thread") << s.to_string();
}

TEST(SymbolizerTest, UnknownAddresses) {
  sframe::Symbolizer sym;
  sframe::Symbol s = sym.symbolize(uint64_t{16});
  EXPECT_FALSE(s.found());
  EXPECT_TRUE(s.object.empty());
  EXPECT_EQ(s.to_string(), "0x10 (?)");
}

TEST(SymbolizerTest, UnversionedNames) {
  EXPECT_EQ(sframe::unversioned("__libc_start_main@@GLIBC_2.34"), "__libc_start_main");
  EXPECT_EQ(sframe::unversioned("memcpy@GLIBC_2.2.5"), "memcpy");
  EXPECT_EQ(sframe::unversioned("main"), "main");
}

// libsymver.so's .symtab names vfunc "vfunc@VERS_1" and "vfunc@@VERS_2"
// (progs/symver_lib.c): both come out as "vfunc".
TEST(SymbolizerTest, VersionedSymtabNamesLoseTheirVersion) {
  void* h = dlopen(SFRAME_SYMVER_LIB, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  void* v1 = dlvsym(h, "vfunc", "VERS_1");
  void* v2 = dlvsym(h, "vfunc", "VERS_2");
  ASSERT_NE(v1, nullptr);
  ASSERT_NE(v2, nullptr);
  ASSERT_NE(v1, v2);
  sframe::Symbolizer sym;
  EXPECT_EQ(sym.symbolize(v1).name, "vfunc");
  EXPECT_EQ(sym.symbolize(v2).name, "vfunc");
  EXPECT_TRUE(sym.has_full_symbols(SFRAME_SYMVER_LIB));
}

using HelperGetter = int (*(*)())(int);

// The stripped copy has no .symtab and no debug file under the build-id
// path: its local function is named through .gnu_debuglink
// (DIR/.debug/NAME), and not when the debug file's CRC differs.
TEST(SymbolizerTest, GnuDebuglinkWithItsCrc) {
  void* h = dlopen(SFRAME_SYMVER_STRIPPED, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto get = reinterpret_cast<HelperGetter>(dlsym(h, "symver_local_helper"));
  ASSERT_NE(get, nullptr);
  sframe::Symbolizer sym;
  sframe::Symbol s = sym.symbolize(reinterpret_cast<const void*>(get()));
  EXPECT_EQ(s.object, SFRAME_SYMVER_STRIPPED);
  EXPECT_EQ(s.name, "local_helper") << s.to_string();
  EXPECT_TRUE(sym.has_full_symbols(SFRAME_SYMVER_STRIPPED));

  // A copy beside a debug file of the same name that is one byte longer.
  char dir[] = "/tmp/symbolizer_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string lib = std::string(dir) + "/libsymver.so";
  const std::string debug = std::string(dir) + "/libsymver.so.debug";
  const std::string stripped_dir =
      std::string(SFRAME_SYMVER_STRIPPED).substr(0, std::string(SFRAME_SYMVER_STRIPPED).rfind('/'));
  {
    std::ifstream in(SFRAME_SYMVER_STRIPPED, std::ios::binary);
    std::ofstream(lib, std::ios::binary) << in.rdbuf();
    std::ifstream din(stripped_dir + "/.debug/libsymver.so.debug", std::ios::binary);
    std::ofstream dout(debug, std::ios::binary);
    dout << din.rdbuf() << '\0';
  }
  sframe::Symbolizer other;
  EXPECT_FALSE(other.has_full_symbols(lib));
  unlink(lib.c_str());
  unlink(debug.c_str());
  rmdir(dir);
}

// perf's JIT map: an address in no file mapping of the pid is looked up in
// /tmp/perf-PID.map (here in a directory of the test's).
TEST(SymbolizerTest, JitSymbolsFromPerfMap) {
  char dir[] = "/tmp/symbolizer_jit.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const pid_t pid = 999999;
  const std::string map = std::string(dir) + "/perf-" + std::to_string(pid) + ".map";
  std::ofstream(map) << "7f0000001000 100 LazyCompile:*fib /srv/app.js:3\n"
                        "0x7f0000002000 0x40 Builtin:ArgumentsAdaptorTrampoline\n"
                        "7f0000001000 80 LazyCompile:*fib2 /srv/app.js:9\n"
                        "garbage line\n";
  sframe::Symbolizer sym;
  sym.set_jit_map_dir(dir);
  // Mappings from recorded data: the pid is not looked up in /proc.
  sym.add_mapping(pid, 0x400000, 0x401000, 0, "/nonexistent/prog");
  sframe::Symbol s = sym.symbolize(pid, 0x7f0000001010);
  EXPECT_EQ(s.name, "LazyCompile:*fib2 /srv/app.js:9");  // the later line
  EXPECT_EQ(s.offset, 0x10u);
  EXPECT_EQ(s.object, map);
  s = sym.symbolize(pid, 0x7f000000203f);
  EXPECT_EQ(s.name, "Builtin:ArgumentsAdaptorTrampoline");
  EXPECT_FALSE(sym.symbolize(pid, 0x7f0000001080).found());  // past fib2's 0x80 bytes
  EXPECT_FALSE(sym.symbolize(pid, 0x7f0000002040).found());
  // In a file mapping: not the JIT map's.
  EXPECT_EQ(sym.symbolize(pid, 0x400010).object, "/nonexistent/prog");
  unlink(map.c_str());
  rmdir(dir);
}

// The binary search over libc's table: every 7th byte of 256 KiB around
// pthread_create is named by a symbol starting at or below it, unversioned.
TEST(SymbolizerTest, LookupsAcrossLibcNameASymbolAtOrBelow) {
  sframe::Symbolizer sym;
  const sframe::Symbol some = sym.symbolize(reinterpret_cast<const void*>(&pthread_create));
  ASSERT_FALSE(some.object.empty());
  size_t named = 0;
  for (uint64_t a = some.symbol_start - (128 << 10); a < some.symbol_start + (128 << 10); a += 7) {
    const sframe::Symbol s = sym.symbolize(a);
    if (!s.found()) continue;
    named++;
    EXPECT_LE(s.symbol_start, a);
    EXPECT_EQ(s.offset, a - s.symbol_start);
    EXPECT_EQ(s.name.find('@'), std::string::npos) << s.name;
  }
  EXPECT_GT(named, 1000u);
}

}  // namespace
