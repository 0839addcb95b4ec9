#include <pthread.h>

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

}  // namespace
