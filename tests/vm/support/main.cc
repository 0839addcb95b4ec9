// main() of every *_vmtest program: GoogleTest, or a child scenario when
// started with --vmtest-child=NAME (see vmtest.h).  Compiled with the
// program's own flags, so main is covered by the program's .sframe (or has a
// frame pointer in the frame-pointer program).
#include <cstring>

#include "vmtest.h"

int main(int argc, char** argv) {
  // main returns into libc's __libc_start_call_main: the last frame of every
  // complete chain of a child.
  vmtest::g_main_return = reinterpret_cast<uint64_t>(__builtin_return_address(0));
  if (argc >= 2 && std::strncmp(argv[1], "--vmtest-child=", 15) == 0) {
    int rc = vmtest::RunChildScenario(argc, argv);
    VMTEST_BARRIER();
    return rc;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
