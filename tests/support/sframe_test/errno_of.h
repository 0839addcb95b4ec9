// Test helper: the errno a libsframe-client call fails with.
#ifndef SFRAME_TEST_ERRNO_OF_H
#define SFRAME_TEST_ERRNO_OF_H

#include "sframe_client/error.h"

namespace sframe {

// Runs f() and returns 0 if it returns normally, or the errno of the
// sframe::Error it throws (other exceptions propagate).
template <typename F>
int errno_of(F&& f) {
  try {
    f();
    return 0;
  } catch (const Error& e) {
    return e.err();
  }
}

}  // namespace sframe

#endif  // SFRAME_TEST_ERRNO_OF_H
