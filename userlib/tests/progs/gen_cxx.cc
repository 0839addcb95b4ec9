// C++ with exceptions, for the tests of the SFrame generator: CIEs with the
// 'zPLR' augmentation (personality, LSDA), DW_CFA_GNU_args_size around calls
// that pass arguments on the stack inside a try region (which binutils 2.40's
// gas leaves out of its .sframe), and throwing through frames.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

volatile long g_sink;

struct Guard {
  explicit Guard(long v) : v_(v) {}
  ~Guard() { g_sink += v_; }
  long v_;
};

__attribute__((noinline)) long nine(long a, long b, long c, long d, long e, long f, long g, long h,
                                    long i) {
  if (a == 12345) throw std::runtime_error("nine");
  return a + b + c + d + e + f + g + h + i;
}

__attribute__((noinline)) long with_args_size(long n) {
  Guard g(n);
  std::vector<long> v(static_cast<size_t>(n % 7 + 1), n);
  long r = nine(n, 1, 2, 3, 4, 5, 6, 7, 8) + nine(v[0], 2, 3, 4, 5, 6, 7, 8, 9);
  return r + static_cast<long>(v.size());
}

__attribute__((noinline)) long catcher(long n) {
  try {
    return with_args_size(n);
  } catch (const std::exception& e) {
    std::puts(e.what());
    return -1;
  }
}

int main(int argc, char**) {
  std::string s(static_cast<size_t>(argc), 'x');
  return static_cast<int>(catcher(argc) + catcher(12345) + static_cast<long>(s.size())) & 1;
}
