// libsframe-client: sessions of /dev/sframe_unwind (SFRAME_IOC_SESSION_START):
// the stitched kernel + user stacks of perf samples, read as records.
//
//   sframe::PerfEvent ev = sframe::PerfEvent::open_process(pid, {10000});
//   sframe::Session s = sframe::Session::start(sframe::Target::kProcess, pid);
//   ev.enable();
//   std::vector<sframe::Record> recs;
//   while (s.wait(100)) s.read(&recs);      // or s.poll_read(&recs, 100)
//
// or, without read()'s copy, through the mapped buffer (ABI 3):
//
//   sframe::SessionRing ring = sframe::SessionRing::map(s);
//   while (s.wait(100)) ring.read(&recs);   // or write ring.unread() out
//
// A session sees the samples of the perf events owned by the process that
// started it (see uapi/sframe_unwind.h); PerfEvent (perf_event.h) opens one.
#ifndef SFRAME_CLIENT_SESSION_H
#define SFRAME_CLIENT_SESSION_H

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sframe_client/export.h"
#include "sframe_client/device.h"
#include "sframe_client/fd.h"
#include "sframe_unwind.h"

namespace sframe {

namespace op {
inline constexpr const char kSessionStart[] = "session start";
inline constexpr const char kSessionStats[] = "session stats";
inline constexpr const char kSessionRead[] = "session read";
inline constexpr const char kSessionPoll[] = "session poll";
inline constexpr const char kSessionMap[] = "session map";
}  // namespace op

enum class Target : uint32_t {
  kThread = SFRAME_TARGET_THREAD,
  kProcess = SFRAME_TARGET_PROCESS,
  kAll = SFRAME_TARGET_ALL,
  kEvents = SFRAME_TARGET_EVENTS,  // whatever task this process's events sample (ABI 2)
};

// The optional fields of SFRAME_IOC_SESSION_START (0: the module's default).
struct SessionOptions {
  uint32_t max_user_frames = 0;    // at most SFRAME_MAX_FRAMES
  uint32_t max_kernel_frames = 0;  // at most SFRAME_SESSION_MAX_KERNEL_FRAMES
  uint32_t buffer_size = 0;        // bytes
  uint32_t unwind_flags = 0;       // SFRAME_UNWIND_F_*; 0: all methods
  uint32_t wakeup_bytes = 0;       // wake readers at this many bytes; 0: every record
  std::string device = SFRAME_UNWIND_DEVICE;
};

// One SFRAME_RECORD_SAMPLE, copied out of the read buffer.
struct Sample {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t time = 0;  // CLOCK_MONOTONIC ns
  uint64_t cookie = 0;
  uint32_t cpu = 0;
  uint32_t flags = 0;  // SFRAME_SAMPLE_F_*
  StopReason user_stop = StopReason::kNone;
  std::vector<uint64_t> kernel;  // the sampled kernel PC first
  std::vector<uint64_t> user;    // the user PC first

  bool has(uint32_t flag) const { return (flags & flag) != 0; }
};

// "USER_MODE|KERNEL_HIDDEN", "0" for none; unknown bits as hex.
SFRAME_CLIENT_API std::string sample_flags_string(uint32_t flags);

// A record read from a session: a sample, or a count of dropped samples.
// Records of types this library does not know are skipped by the parser.
struct Record {
  uint16_t type = 0;  // SFRAME_RECORD_SAMPLE or SFRAME_RECORD_LOST
  Sample sample;      // type == SFRAME_RECORD_SAMPLE
  uint64_t lost = 0;  // type == SFRAME_RECORD_LOST

  bool is_sample() const { return type == SFRAME_RECORD_SAMPLE; }
  bool is_lost() const { return type == SFRAME_RECORD_LOST; }
};

// Parses the records in buf[0, len) (what one read() returned) and appends
// them to out.  Every field is checked before it is used: header.size at
// least the header, a multiple of 8 and within the buffer; a sample record
// large enough for its fixed part and for nr_kernel + nr_user ips; a lost
// record large enough for its count.  Records of an unknown type are
// skipped by their size.  Returns the number of records appended; throws
// sframe::Error(op::kSessionRead, ..., EBADMSG) with what is wrong and at
// which offset on malformed input (records before it are appended).
SFRAME_CLIENT_API size_t parse_records(const void* buf, size_t len, std::vector<Record>* out);

// SFRAME_IOC_SESSION_STATS.
struct SessionStats {
  uint64_t samples = 0;
  uint64_t records = 0;
  uint64_t lost = 0;
  uint64_t lost_capture = 0;
  uint64_t unwinds = 0;
};

// A session: its own open file of the device (one session per file; closing
// it ends the session).  Movable, not copyable.
class SFRAME_CLIENT_API Session {
 public:
  Session() = default;
  Session(Session&&) noexcept = default;
  Session& operator=(Session&&) noexcept = default;

  // Opens options.device (O_RDWR | O_NONBLOCK | O_CLOEXEC) and issues
  // SFRAME_IOC_SESSION_START.  target_id: a tid (kThread), a pid
  // (kProcess), 0 (kAll, kEvents).  Throws sframe::Error: op::kOpen for the device,
  // op::kSessionStart with the uapi's errnos (ENOTTY from a module without
  // sessions).
  static Session start(Target target, pid_t target_id, const SessionOptions& options = {});

  bool active() const noexcept { return static_cast<bool>(fd_); }
  int fd() const noexcept { return fd_.get(); }
  // out_flags of SFRAME_IOC_SESSION_START.
  uint32_t out_flags() const noexcept { return out_flags_; }
  bool kernel_visible() const noexcept { return (out_flags_ & SFRAME_SESSION_KERNEL_VISIBLE) != 0; }
  Target target() const noexcept { return target_; }
  pid_t target_id() const noexcept { return target_id_; }

  // SFRAME_IOC_SESSION_STATS.  Throws sframe::Error(op::kSessionStats).
  SessionStats stats() const;

  // poll() for records: true when readable, false after timeout_ms
  // (negative: no timeout).  EINTR restarts.  Throws sframe::Error
  // (op::kSessionPoll) on POLLERR/POLLNVAL or a failing poll().
  bool wait(int timeout_ms) const;

  // One read() of whatever is there, parsed into out (appended).  Returns
  // the records appended; 0 when nothing was there (EAGAIN or 0 bytes).
  // The buffer is large enough for the largest record of this session, and
  // doubled (up to 16 MiB) if the module still says EINVAL.  Throws
  // sframe::Error(op::kSessionRead).
  size_t read(std::vector<Record>* out);

  // wait(timeout_ms), then read() if readable.
  size_t poll_read(std::vector<Record>* out, int timeout_ms);

  // Bytes returned by read() so far (for bytes-per-sample figures).
  uint64_t bytes_read() const noexcept { return bytes_read_; }

  // Ends the session now (closes the file).
  void close() noexcept { fd_.reset(); }

 private:
  UniqueFd fd_;
  std::string path_;
  Target target_ = Target::kProcess;
  pid_t target_id_ = 0;
  uint32_t out_flags_ = 0;
  std::vector<uint8_t> buf_;
  uint64_t bytes_read_ = 0;
};

// A session's buffer mapped into this process (ABI 3; "mapped" in the
// uapi header): records are consumed in place, as perf record consumes its
// ring, and can be written to a file with no copy in between.  Once a
// session's buffer has been mapped, Session::read() fails with EBUSY.  The
// mapping does not keep the session open: destroy the ring first, or keep
// the Session alive as long.  Movable, not copyable; one thread at a time.
class SFRAME_CLIENT_API SessionRing {
 public:
  SessionRing() = default;

  // Maps session's buffer (the control page first, to learn its size).
  // Throws sframe::Error(op::kSessionMap): ENODEV from a module before
  // ABI 3, EBADMSG for a control page of another version, mmap(2)'s errnos.
  static SessionRing map(const Session& session);

  // A piece of the ring: the unread bytes are one piece, or two where they
  // wrap from the ring's end to its start.
  struct Span {
    const uint8_t* data = nullptr;
    size_t size = 0;
  };
  // The bytes written and not yet consumed, [data_tail, data_head), as
  // spans[0] and spans[1]; returns how many spans (0: nothing).  Whole
  // records: the kernel publishes data_head after each one.
  size_t unread(Span spans[2]) const;
  // Gives n bytes, from the first unread one, back to the kernel; n at
  // most what unread() showed (whole records, for a reader to come).
  // Throws sframe::Error(EINVAL) beyond that.
  void consume(uint64_t n);

  // Parses the unread records into out (appended; see parse_records()) and
  // consumes them.  Returns the number of records appended.
  size_t read(std::vector<Record>* out);

  size_t data_size() const noexcept { return data_size_; }
  // Bytes consumed so far (for bytes-per-sample figures).
  uint64_t bytes_read() const noexcept { return bytes_read_; }
  explicit operator bool() const noexcept { return static_cast<bool>(map_); }

 private:
  const sframe_session_mmap_page* control() const noexcept {
    return static_cast<const sframe_session_mmap_page*>(map_.data());
  }

  MappedRegion map_;
  size_t data_offset_ = 0;
  size_t data_size_ = 0;
  uint64_t bytes_read_ = 0;
  std::vector<uint8_t> buf_;  // a wrapped stretch, made contiguous
};

}  // namespace sframe

#endif  // SFRAME_CLIENT_SESSION_H
