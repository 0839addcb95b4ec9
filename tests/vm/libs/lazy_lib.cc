// libvmtest_lazy.so: dlopen()ed with RTLD_LAZY by ehframe_vmtest, built
// without .sframe and linked -z lazy.  lazy_call_target() calls the
// exported IFUNC lazy_target through the library's own PLT; its first call
// goes through ld.so's lazy binding (_dl_runtime_resolve_*, which keeps its
// CFA in RBX across `call _dl_fixup`), and _dl_fixup calls the resolver,
// which calls the test's hook: a stack main -> lazy_call_target ->
// trampoline -> _dl_fixup -> resolver -> hook.
#include "chain_lib.h"

extern "C" {

int lazy_call_target(vmtest_callback cb, void* arg);
int lazy_target(void);

static vmtest_callback lazy_hook;
static void* lazy_hook_arg;

static int lazy_target_impl(void) { return 41; }

// Called by ld.so with no arguments: the hook is what lazy_call_target
// left in the statics.
static void* resolve_lazy_target(void) {
  if (lazy_hook) lazy_hook(lazy_hook_arg);
  asm volatile("" ::: "memory");
  return reinterpret_cast<void*>(&lazy_target_impl);
}

int lazy_target(void) __attribute__((ifunc("resolve_lazy_target")));

__attribute__((noipa)) int lazy_call_target(vmtest_callback cb, void* arg) {
  lazy_hook = cb;
  lazy_hook_arg = arg;
  const int r = lazy_target();  // lazy_target@PLT: bound at this first call
  lazy_hook = nullptr;
  asm volatile("" ::: "memory");
  return r + 1;
}

}  // extern "C"
