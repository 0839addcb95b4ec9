// libsframe-client: everything.
#ifndef SFRAME_CLIENT_SFRAME_CLIENT_H
#define SFRAME_CLIENT_SFRAME_CLIENT_H

#include "sframe_client/coverage.h"
#include "sframe_client/device.h"
#include "sframe_client/eh_frame.h"
#include "sframe_client/error.h"
#include "sframe_client/fd.h"
#include "sframe_client/flamegraph.h"
#include "sframe_client/objects.h"
#include "sframe_client/perf_event.h"
#include "sframe_client/profile.h"
#include "sframe_client/session.h"
#include "sframe_client/sframe_cache.h"
#include "sframe_client/sframe_format.h"
#include "sframe_client/supply.h"
#include "sframe_client/symbolizer.h"

#endif  // SFRAME_CLIENT_SFRAME_CLIENT_H
