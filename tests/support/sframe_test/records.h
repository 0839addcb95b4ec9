// Test helper: session read() buffers written by hand, for the record
// parsers of the C++ and the C API (userlib/tests).
#ifndef SFRAME_TEST_RECORDS_H
#define SFRAME_TEST_RECORDS_H

#include <cstdint>
#include <cstring>
#include <vector>

#include "sframe_unwind.h"

namespace sframe_test {

// Appends a sample record (pid 10, tid 11, time 12345, cookie 77, cpu 1,
// USER_MODE, user walk stopped at NO_COVERAGE) with the given ips and,
// optionally, a lying size or kernel count.
inline void AddSample(std::vector<uint8_t>* buf, const std::vector<uint64_t>& kernel,
                      const std::vector<uint64_t>& user, uint32_t size_override = 0,
                      int nr_kernel_override = -1) {
  sframe_sample_record r{};
  r.header.type = SFRAME_RECORD_SAMPLE;
  r.header.size = size_override
                      ? size_override
                      : static_cast<uint32_t>(sizeof(r) + 8 * (kernel.size() + user.size()));
  r.pid = 10;
  r.tid = 11;
  r.time = 12345;
  r.cookie = 77;
  r.cpu = 1;
  r.flags = SFRAME_SAMPLE_F_USER_MODE;
  r.nr_kernel =
      static_cast<uint16_t>(nr_kernel_override >= 0 ? nr_kernel_override : kernel.size());
  r.nr_user = static_cast<uint16_t>(user.size());
  r.user_stop = SFRAME_STOP_NO_COVERAGE;
  const size_t at = buf->size();
  buf->resize(at + sizeof(r));
  std::memcpy(buf->data() + at, &r, sizeof(r));
  for (const std::vector<uint64_t>* ips : {&kernel, &user}) {
    for (uint64_t ip : *ips) {
      const auto* b = reinterpret_cast<const uint8_t*>(&ip);
      buf->insert(buf->end(), b, b + 8);
    }
  }
}

// Appends a LOST record of lost samples.
inline void AddLost(std::vector<uint8_t>* buf, uint64_t lost) {
  sframe_lost_record r{};
  r.header.type = SFRAME_RECORD_LOST;
  r.header.size = sizeof(r);
  r.lost = lost;
  const size_t at = buf->size();
  buf->resize(at + sizeof(r));
  std::memcpy(buf->data() + at, &r, sizeof(r));
}

}  // namespace sframe_test

#endif  // SFRAME_TEST_RECORDS_H
