// Internal to libsframe-client and sframe-gen (not installed): reading and
// writing the little-endian fields of SFrame sections, byte by byte, so that
// neither the host's byte order nor the alignment of a field matters.
#ifndef SFRAME_INTERNAL_LITTLE_ENDIAN_H
#define SFRAME_INTERNAL_LITTLE_ENDIAN_H

#include <cstdint>

namespace sframe::internal {

inline uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t get32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}
inline uint64_t get64(const uint8_t* p) {
  return uint64_t{get32(p)} | (uint64_t{get32(p + 4)} << 32);
}

// Each writes v at p and advances p past it.
inline void put8(uint8_t*& p, uint8_t v) { *p++ = v; }
inline void put16(uint8_t*& p, uint16_t v) {
  *p++ = static_cast<uint8_t>(v);
  *p++ = static_cast<uint8_t>(v >> 8);
}
inline void put32(uint8_t*& p, uint32_t v) {
  put16(p, static_cast<uint16_t>(v));
  put16(p, static_cast<uint16_t>(v >> 16));
}
inline void put64(uint8_t*& p, uint64_t v) {
  put32(p, static_cast<uint32_t>(v));
  put32(p, static_cast<uint32_t>(v >> 32));
}

}  // namespace sframe::internal

#endif  // SFRAME_INTERNAL_LITTLE_ENDIAN_H
