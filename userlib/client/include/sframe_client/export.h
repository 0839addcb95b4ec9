// libsframe-client: what the shared library exports.  It is built with
// -fvisibility=hidden, and its version script (libsframe-client.map) gives
// the exported names the version node SFRAME_CLIENT_0; everything not marked
// SFRAME_CLIENT_API stays inside the library.
#ifndef SFRAME_CLIENT_EXPORT_H
#define SFRAME_CLIENT_EXPORT_H

#define SFRAME_CLIENT_API __attribute__((visibility("default")))

#endif  // SFRAME_CLIENT_EXPORT_H
