#include "chains.h"

std::vector<std::string> Cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

VMTEST_NOIPA void DoUnwind(UnwindReq* r) {
  r->result = r->dev->unwind_self(r->max_frames, r->flags);
  VMTEST_BARRIER();
}

VMTEST_NOIPA int exe_c(UnwindReq* r) {
  DoUnwind(r);
  VMTEST_BARRIER();
  return 3;
}

VMTEST_NOIPA int exe_b(UnwindReq* r) {
  int v = exe_c(r);
  VMTEST_BARRIER();
  return v + 1;
}

VMTEST_NOIPA int exe_a(UnwindReq* r) {
  int v = exe_b(r);
  VMTEST_BARRIER();
  return v + 1;
}

VMTEST_NOIPA void lib_callback(void* arg) {
  DoUnwind(static_cast<UnwindReq*>(arg));
  VMTEST_BARRIER();
}

VMTEST_NOIPA int exe_calls_lib(UnwindReq* r) {
  int v = lib_chain_a(&lib_callback, r);  // through the executable's PLT
  VMTEST_BARRIER();
  return v + 1;
}

VMTEST_NOIPA void dl_callback(void* arg) {
  DoUnwind(static_cast<UnwindReq*>(arg));
  VMTEST_BARRIER();
}

VMTEST_NOIPA int exe_calls_dl(dl_chain_fn fn, UnwindReq* r) {
  int v = fn(&dl_callback, r);
  VMTEST_BARRIER();
  return v + 1;
}
