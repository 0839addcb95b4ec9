// libsframe-client, the C++ API: the device, registration, discovery
// control, supply, unwind_self, sessions and their records.  The C API is
// sframe_client/sframe_client.h.
#ifndef SFRAME_CLIENT_SFRAME_CLIENT_HPP
#define SFRAME_CLIENT_SFRAME_CLIENT_HPP

#include "sframe_client/device.h"
#include "sframe_client/error.h"
#include "sframe_client/fd.h"
#include "sframe_client/objects.h"
#include "sframe_client/perf_event.h"
#include "sframe_client/session.h"
#include "sframe_client/sframe_format.h"

#endif  // SFRAME_CLIENT_SFRAME_CLIENT_HPP
