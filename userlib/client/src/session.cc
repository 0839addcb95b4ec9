#include "sframe_client/session.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "sframe_client/error.h"

namespace sframe {
namespace {

constexpr size_t kMaxReadBuffer = 16u << 20;

std::string at(size_t off) {
  char b[48];
  std::snprintf(b, sizeof(b), "record at offset %zu", off);
  return b;
}

[[noreturn]] void malformed(size_t off, const std::string& what) {
  throw Error(EBADMSG, op::kSessionRead, at(off), "malformed record: " + what);
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

std::string target_name(Target t, pid_t id) {
  switch (t) {
    case Target::kThread:
      return "thread " + std::to_string(id);
    case Target::kProcess:
      return "process " + std::to_string(id);
    case Target::kEvents:
      return "the tasks of this process's perf events";
    case Target::kAll:
      return "all tasks";
  }
  return "target type " + std::to_string(static_cast<uint32_t>(t)) + " id " + std::to_string(id);
}

}  // namespace

std::string sample_flags_string(uint32_t flags) {
  static const struct {
    uint32_t bit;
    const char* name;
  } kNames[] = {
      {SFRAME_SAMPLE_F_USER_MODE, "USER_MODE"},   {SFRAME_SAMPLE_F_KERNEL_HIDDEN, "KERNEL_HIDDEN"},
      {SFRAME_SAMPLE_F_KTHREAD, "KTHREAD"},       {SFRAME_SAMPLE_F_EXITED, "EXITED"},
      {SFRAME_SAMPLE_F_EXECED, "EXECED"},         {SFRAME_SAMPLE_F_NO_USER, "NO_USER"},
      {SFRAME_SAMPLE_F_TIMEOUT, "TIMEOUT"},       {SFRAME_SAMPLE_F_COMPAT, "COMPAT"},
      {SFRAME_SAMPLE_F_CROSS_TASK, "CROSS_TASK"}, {SFRAME_SAMPLE_F_NOT_DUMPABLE, "NOT_DUMPABLE"},
  };
  if (flags == 0) return "0";
  std::string out;
  for (const auto& n : kNames) {
    if (flags & n.bit) {
      if (!out.empty()) out += "|";
      out += n.name;
      flags &= ~n.bit;
    }
  }
  if (flags) {
    char b[24];
    std::snprintf(b, sizeof(b), "0x%" PRIx32, flags);
    if (!out.empty()) out += "|";
    out += b;
  }
  return out;
}

size_t parse_records(const void* buf, size_t len, std::vector<Record>* out) {
  const auto* p = static_cast<const uint8_t*>(buf);
  size_t off = 0, n = 0;
  while (off < len) {
    const size_t left = len - off;
    if (left < sizeof(sframe_record_header)) malformed(off, "truncated header");
    const auto h = load<sframe_record_header>(p + off);
    if (h.size < sizeof(sframe_record_header)) malformed(off, "size below the header's");
    if (h.size % 8 != 0) malformed(off, "size " + std::to_string(h.size) + " not a multiple of 8");
    if (h.size > left) {
      malformed(off, "size " + std::to_string(h.size) + " beyond the " + std::to_string(left) +
                         " bytes read");
    }
    const uint8_t* r = p + off;
    if (h.type == SFRAME_RECORD_SAMPLE) {
      if (h.size < sizeof(sframe_sample_record)) malformed(off, "sample record too small");
      const auto s = load<sframe_sample_record>(r);
      const uint64_t nr = uint64_t{s.nr_kernel} + s.nr_user;
      if (nr > (h.size - sizeof(sframe_sample_record)) / 8) {
        malformed(off, "nr_kernel " + std::to_string(s.nr_kernel) + " + nr_user " +
                           std::to_string(s.nr_user) + " ips do not fit in size " +
                           std::to_string(h.size));
      }
      Record rec;
      rec.type = SFRAME_RECORD_SAMPLE;
      Sample& smp = rec.sample;
      smp.pid = s.pid;
      smp.tid = s.tid;
      smp.time = s.time;
      smp.cookie = s.cookie;
      smp.cpu = s.cpu;
      smp.flags = s.flags;
      smp.user_stop = static_cast<StopReason>(s.user_stop);
      const uint8_t* ips = r + sizeof(sframe_sample_record);
      smp.kernel.resize(s.nr_kernel);
      if (s.nr_kernel) std::memcpy(smp.kernel.data(), ips, 8u * s.nr_kernel);
      smp.user.resize(s.nr_user);
      if (s.nr_user) std::memcpy(smp.user.data(), ips + 8u * s.nr_kernel, 8u * s.nr_user);
      out->push_back(std::move(rec));
      n++;
    } else if (h.type == SFRAME_RECORD_LOST) {
      if (h.size < sizeof(sframe_lost_record)) malformed(off, "lost record too small");
      Record rec;
      rec.type = SFRAME_RECORD_LOST;
      rec.lost = load<sframe_lost_record>(r).lost;
      out->push_back(std::move(rec));
      n++;
    }
    off += h.size;
  }
  return n;
}

Session Session::start(Target target, pid_t target_id, const SessionOptions& o) {
  Session s;
  s.path_ = o.device;
  s.fd_ = UniqueFd::open(o.device, O_RDWR | O_NONBLOCK);
  s.target_ = target;
  s.target_id_ = target_id;
  sframe_session_start req{};
  req.size = sizeof(req);
  req.target_type = static_cast<uint32_t>(target);
  req.target_id = target_id;
  req.max_user_frames = o.max_user_frames;
  req.max_kernel_frames = o.max_kernel_frames;
  req.buffer_size = o.buffer_size;
  req.unwind_flags = o.unwind_flags;
  req.wakeup_bytes = o.wakeup_bytes;
  int ret;
  do {
    ret = ::ioctl(s.fd_.get(), SFRAME_IOC_SESSION_START, &req);
  } while (ret < 0 && errno == EINTR);
  if (ret < 0) throw Error(errno, op::kSessionStart, target_name(target, target_id));
  s.out_flags_ = req.out_flags;
  // Room for the largest record of this session, and then some.
  const uint32_t user = o.max_user_frames ? o.max_user_frames : SFRAME_SESSION_DEFAULT_USER_FRAMES;
  const uint32_t kern =
      o.max_kernel_frames ? o.max_kernel_frames : SFRAME_SESSION_MAX_KERNEL_FRAMES;
  size_t need = sizeof(sframe_sample_record) + 8u * (size_t{user} + kern);
  size_t size = 64u << 10;
  while (size < 2 * need) size *= 2;
  s.buf_.resize(size);
  return s;
}

SessionStats Session::stats() const {
  sframe_session_stats st{};
  st.size = sizeof(st);
  int ret;
  do {
    ret = ::ioctl(fd_.get(), SFRAME_IOC_SESSION_STATS, &st);
  } while (ret < 0 && errno == EINTR);
  if (ret < 0) throw Error(errno, op::kSessionStats, target_name(target_, target_id_));
  SessionStats s;
  s.samples = st.samples;
  s.records = st.records;
  s.lost = st.lost;
  s.lost_capture = st.lost_capture;
  s.unwinds = st.unwinds;
  return s;
}

bool Session::wait(int timeout_ms) const {
  pollfd pfd{fd_.get(), POLLIN, 0};
  for (;;) {
    int ret = ::poll(&pfd, 1, timeout_ms);
    if (ret < 0 && errno == EINTR) continue;
    if (ret < 0) throw Error(errno, op::kSessionPoll, path_);
    if (ret == 0) return false;
    if (pfd.revents & POLLIN) return true;
    if (pfd.revents & POLLNVAL) throw Error(EBADF, op::kSessionPoll, path_);
    if (pfd.revents & POLLERR) throw Error(EIO, op::kSessionPoll, path_, "POLLERR");
    // POLLHUP without data: nothing more will come.
    return false;
  }
}

size_t Session::read(std::vector<Record>* out) {
  for (;;) {
    ssize_t n = ::read(fd_.get(), buf_.data(), buf_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n < 0 && errno == EINVAL && buf_.size() < kMaxReadBuffer) {
      buf_.resize(buf_.size() * 2);  // a record larger than we thought
      continue;
    }
    if (n < 0) throw Error(errno, op::kSessionRead, path_);
    if (static_cast<size_t>(n) > buf_.size()) {
      throw Error(EOVERFLOW, op::kSessionRead, path_, "read() returned more than asked");
    }
    bytes_read_ += static_cast<uint64_t>(n);
    return parse_records(buf_.data(), static_cast<size_t>(n), out);
  }
}

size_t Session::poll_read(std::vector<Record>* out, int timeout_ms) {
  return wait(timeout_ms) ? read(out) : 0;
}

SessionRing SessionRing::map(const Session& session) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const std::string object = "session fd " + std::to_string(session.fd());
  auto map = [&](size_t len) {
    void* addr = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, session.fd(), 0);
    if (addr == MAP_FAILED) throw Error(errno, op::kSessionMap, object);
    return MappedRegion(addr, len);
  };
  uint64_t size, offset;
  {
    const MappedRegion first = map(page);
    const auto* c = static_cast<const sframe_session_mmap_page*>(first.data());
    size = c->data_size;
    offset = c->data_offset;
    if (c->version != SFRAME_SESSION_MMAP_VERSION || offset != page || size == 0 ||
        (size & (size - 1)) != 0 || size > SFRAME_SESSION_MAX_BUFFER) {
      throw Error(EBADMSG, op::kSessionMap, object,
                  "control page version " + std::to_string(c->version) + ", data_offset " +
                      std::to_string(offset) + ", data_size " + std::to_string(size));
    }
  }
  SessionRing r;
  r.map_ = map(offset + size);
  r.data_offset_ = offset;
  r.data_size_ = size;
  return r;
}

size_t SessionRing::unread(Span spans[2]) const {
  if (!map_) return 0;
  const sframe_session_mmap_page* c = control();
  const uint64_t head = __atomic_load_n(&c->data_head, __ATOMIC_ACQUIRE);
  const uint64_t tail = c->data_tail;  // ours alone to write
  const uint64_t n = head - tail;
  if (n == 0 || n > data_size_) return 0;  // nothing, or a head no kernel wrote
  const uint8_t* ring = map_.bytes() + data_offset_;
  const size_t at = tail & (data_size_ - 1);
  const size_t first = std::min<uint64_t>(n, data_size_ - at);
  spans[0] = {ring + at, first};
  if (first == n) return 1;
  spans[1] = {ring, static_cast<size_t>(n - first)};
  return 2;
}

void SessionRing::consume(uint64_t n) {
  if (!map_) return;
  auto* c = static_cast<sframe_session_mmap_page*>(map_.data());
  const uint64_t head = __atomic_load_n(&c->data_head, __ATOMIC_ACQUIRE);
  const uint64_t tail = c->data_tail;
  if (n > head - tail) {
    throw Error(EINVAL, op::kSessionMap, "ring",
                "consume " + std::to_string(n) + " bytes of " + std::to_string(head - tail) + " unread");
  }
  // Release: our reads of those bytes are done before the kernel reuses them.
  __atomic_store_n(&c->data_tail, tail + n, __ATOMIC_RELEASE);
  bytes_read_ += n;
}

size_t SessionRing::read(std::vector<Record>* out) {
  Span spans[2];
  const size_t k = unread(spans);
  if (k == 0) return 0;
  const uint8_t* p = spans[0].data;
  size_t len = spans[0].size;
  if (k == 2) {
    buf_.assign(spans[0].data, spans[0].data + spans[0].size);
    buf_.insert(buf_.end(), spans[1].data, spans[1].data + spans[1].size);
    p = buf_.data();
    len = buf_.size();
  }
  const size_t n = parse_records(p, len, out);
  consume(len);
  return n;
}

}  // namespace sframe
