// A library with versioned symbols and a local function, for the
// symbolizer's tests (userlib/tests/symbolizer_test.cc).
__attribute__((noinline, used)) static int local_helper(int x) { return x * 3 + 1; }
__attribute__((noinline)) int vfunc_v1(int x) { return local_helper(x) + 1; }
__attribute__((noinline)) int vfunc_v2(int x) { return local_helper(x) + 2; }
__asm__(".symver vfunc_v1, vfunc@VERS_1");
__asm__(".symver vfunc_v2, vfunc@@VERS_2");
int (*symver_local_helper(void))(int) { return local_helper; }
