#include "sframe_profile/profile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <unordered_map>

#include "profile_v1.h"
#include "sframe_client/error.h"

namespace sframe {
namespace {

// The format (docs/sframe-prof-format.md): a 12-byte header, then records
// of a type byte, a ULEB128 payload length and the payload.
constexpr char kMagic[8] = {'\x89', 'S', 'F', 'P', 'R', 'O', 'F', '\n'};
constexpr size_t kHeaderSize = 12;

enum RecordType : uint8_t {
  kRecMeta = 1,
  kRecMapping = 2,
  kRecComm = 3,
  kRecSample = 4,
  kRecLost = 5,
  kRecEnd = 6,
};

// The most stack nodes a reader keeps (16 bytes each): 512 MiB.
constexpr size_t kMaxNodes = size_t{1} << 25;
// The longest build id a mapping record may hold.
constexpr size_t kMaxBuildId = 64;

void put_uvarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

// b - a as a signed difference (modulo 2^64: every pair has one).
void put_delta(std::string* out, uint64_t a, uint64_t b) {
  put_uvarint(out, zigzag(static_cast<int64_t>(b - a)));
}

void put_string(std::string* out, const std::string& s) {
  put_uvarint(out, s.size());
  out->append(s);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "0a1b..." to bytes; empty for a string that is not even-length hex.
std::string hex_to_bytes(const std::string& hex) {
  std::string out;
  if (hex.size() % 2 != 0 || hex.size() / 2 > kMaxBuildId) return out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = hex_digit(hex[i]), lo = hex_digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::string();
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

std::string bytes_to_hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// A stack node: a frame and the node of the frames above it (its caller
// side).  Node 0 is the empty stack.
struct NodeKey {
  uint32_t parent;
  bool kernel;
  uint64_t address;
  bool operator==(const NodeKey& o) const {
    return parent == o.parent && kernel == o.kernel && address == o.address;
  }
};
struct NodeKeyHash {
  size_t operator()(const NodeKey& k) const {
    uint64_t h = k.address * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t{k.parent} << 1 | k.kernel) + 0x7f4a7c159e3779b9ull + (h << 6) + (h >> 2);
    return static_cast<size_t>(h);
  }
};

}  // namespace

// The writer's state: the stack nodes written so far, the last sample's time.
struct ProfileWriter::Encoder {
  std::unordered_map<NodeKey, uint32_t, NodeKeyHash> nodes;
  std::vector<uint64_t> address{0};  // per node id
  uint64_t last_time = 0;
  uint64_t samples = 0;
  std::string payload;
  std::string record;

  uint32_t child(uint32_t parent, bool kernel, uint64_t address_) {
    auto it = nodes.find({parent, kernel, address_});
    return it == nodes.end() ? 0 : it->second;
  }
  uint32_t add(uint32_t parent, bool kernel, uint64_t address_) {
    const uint32_t id = static_cast<uint32_t>(address.size());
    nodes.emplace(NodeKey{parent, kernel, address_}, id);
    address.push_back(address_);
    return id;
  }
};

ProfileWriter::ProfileWriter(const std::string& path) : path_(path), enc_(new Encoder) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw Error(EISDIR, op::kWriteProfile, path);
  }
  const std::string dir = dir_of(path);
  int fd = open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    // No O_TMPFILE here: a named temporary file, removed unless committed.
    const size_t slash = path.rfind('/');
    std::string name = dir + "/." + (slash == std::string::npos ? path : path.substr(slash + 1)) +
                       ".XXXXXX";
    fd = mkostemp(&name[0], O_CLOEXEC);  // mode 0600
    if (fd >= 0) temp_path_ = name;
  }
  if (fd < 0) throw Error(errno, op::kWriteProfile, path);
  f_ = fdopen(fd, "w");
  if (!f_) {
    const int err = errno;
    ::close(fd);
    if (!temp_path_.empty()) unlink(temp_path_.c_str());
    throw Error(err, op::kWriteProfile, path);
  }
  char header[kHeaderSize];
  std::memcpy(header, kMagic, sizeof(kMagic));
  const uint32_t v = kProfileFormatVersion;
  for (int i = 0; i < 4; i++) header[8 + i] = static_cast<char>(v >> (8 * i));
  std::fwrite(header, 1, sizeof(header), f_);
  check();
}

ProfileWriter::~ProfileWriter() {
  if (f_) std::fclose(f_);
  if (!committed_ && !temp_path_.empty()) unlink(temp_path_.c_str());
}

void ProfileWriter::check() {
  if (!f_) throw Error(EBADF, op::kWriteProfile, path_, "closed");
  if (std::ferror(f_)) throw Error(errno ? errno : EIO, op::kWriteProfile, path_);
}

void ProfileWriter::record(int type, const std::string& payload) {
  if (!f_) throw Error(EBADF, op::kWriteProfile, path_, "closed");
  std::string& r = enc_->record;
  r.clear();
  r.push_back(static_cast<char>(type));
  put_uvarint(&r, payload.size());
  r += payload;
  std::fwrite(r.data(), 1, r.size(), f_);
}

// Strings longer than a record allows are cut (paths and names are far
// shorter).
static std::string bounded(const std::string& s) {
  return s.size() > kProfileMaxRecord / 4 ? s.substr(0, kProfileMaxRecord / 4) : s;
}

void ProfileWriter::meta(const std::string& key, const std::string& value) {
  std::string& p = enc_->payload;
  p.clear();
  put_string(&p, bounded(key));
  put_string(&p, bounded(value));
  record(kRecMeta, p);
}

void ProfileWriter::mapping(const ProfileMapping& m) {
  if (m.end <= m.start) return;
  std::string& p = enc_->payload;
  p.clear();
  put_uvarint(&p, static_cast<uint32_t>(m.pid));
  put_uvarint(&p, m.start);
  put_uvarint(&p, m.end - m.start);
  put_uvarint(&p, m.offset);
  put_string(&p, bounded(m.path));
  put_string(&p, hex_to_bytes(m.build_id));
  record(kRecMapping, p);
}

void ProfileWriter::comm(pid_t pid, const std::string& name) {
  std::string& p = enc_->payload;
  p.clear();
  put_uvarint(&p, static_cast<uint32_t>(pid));
  put_string(&p, bounded(name));
  record(kRecComm, p);
}

void ProfileWriter::sample(const Sample& s) {
  Encoder& e = *enc_;
  std::string& p = e.payload;
  p.clear();
  put_delta(&p, e.last_time, s.time);
  e.last_time = s.time;
  put_uvarint(&p, s.pid);
  put_delta(&p, s.pid, s.tid);
  put_uvarint(&p, s.cpu);
  put_uvarint(&p, s.flags);
  put_uvarint(&p, static_cast<uint32_t>(s.user_stop));
  // Root first: the user frames outermost first, then the kernel's; the
  // longest prefix already written is referred to, the rest follows.
  const size_t nu = std::min(s.user.size(), kProfileMaxFrames);
  const size_t nk = std::min(s.kernel.size(), kProfileMaxFrames);
  auto user_at = [&](size_t i) { return s.user[nu - 1 - i]; };
  auto kernel_at = [&](size_t i) { return s.kernel[nk - 1 - i]; };
  uint32_t node = 0;
  size_t u = 0, k = 0;
  for (; u < nu; u++) {
    const uint32_t c = e.child(node, false, user_at(u));
    if (!c) break;
    node = c;
  }
  if (u == nu) {
    for (; k < nk; k++) {
      const uint32_t c = e.child(node, true, kernel_at(k));
      if (!c) break;
      node = c;
    }
  }
  put_uvarint(&p, node);
  put_uvarint(&p, nu - u);
  put_uvarint(&p, nk - k);
  uint64_t prev = e.address[node];
  for (; u < nu; u++) {
    put_delta(&p, prev, user_at(u));
    prev = user_at(u);
    node = e.add(node, false, prev);
  }
  for (; k < nk; k++) {
    put_delta(&p, prev, kernel_at(k));
    prev = kernel_at(k);
    node = e.add(node, true, prev);
  }
  e.samples++;
  record(kRecSample, p);
}

void ProfileWriter::lost(uint64_t count) {
  std::string& p = enc_->payload;
  p.clear();
  put_uvarint(&p, count);
  record(kRecLost, p);
}

void ProfileWriter::flush() {
  check();
  if (std::fflush(f_) != 0) throw Error(errno, op::kWriteProfile, path_);
}

void ProfileWriter::close() {
  check();
  std::string& p = enc_->payload;
  p.clear();
  put_uvarint(&p, enc_->samples);
  record(kRecEnd, p);
  flush();
  if (fsync(fileno(f_)) != 0) throw Error(errno, op::kWriteProfile, path_);
  // The previous file is kept as FILE.old (as perf does), then this one
  // takes its name.
  const std::string old = path_ + ".old";
  if (std::rename(path_.c_str(), old.c_str()) != 0 && errno != ENOENT) {
    throw Error(errno, op::kWriteProfile, old);
  }
  if (temp_path_.empty()) {
    // An O_TMPFILE file gets its name through /proc (linkat's AT_EMPTY_PATH
    // needs CAP_DAC_READ_SEARCH).
    const std::string self = "/proc/self/fd/" + std::to_string(fileno(f_));
    if (linkat(AT_FDCWD, self.c_str(), AT_FDCWD, path_.c_str(), AT_SYMLINK_FOLLOW) != 0 &&
        linkat(fileno(f_), "", AT_FDCWD, path_.c_str(), AT_EMPTY_PATH) != 0) {
      throw Error(errno, op::kWriteProfile, path_);
    }
  } else if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    throw Error(errno, op::kWriteProfile, path_);
  }
  committed_ = true;
  FILE* f = f_;
  f_ = nullptr;
  if (std::fclose(f) != 0) throw Error(errno, op::kWriteProfile, path_);
}

namespace {

struct BadRecord {
  uint64_t offset;
  std::string what;
};

// A record's payload, read field by field; every read is bounded by it.
class Fields {
 public:
  Fields(const std::string& data, uint64_t file_offset) : data_(data), base_(file_offset) {}
  uint64_t uvarint(const char* field) {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (at_ >= data_.size()) fail(std::string("record ends inside ") + field);
      const uint8_t b = static_cast<uint8_t>(data_[at_++]);
      if (shift == 63 && b > 1) fail(std::string(field) + " does not fit 64 bits");
      v |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return v;
    }
  }
  uint32_t u32(const char* field) {
    const uint64_t v = uvarint(field);
    if (v > UINT32_MAX) fail(std::string(field) + " " + std::to_string(v) + " out of range");
    return static_cast<uint32_t>(v);
  }
  pid_t pid(const char* field) {
    const uint64_t v = uvarint(field);
    if (v > INT32_MAX) fail(std::string(field) + " " + std::to_string(v) + " out of range");
    return static_cast<pid_t>(v);
  }
  uint64_t after(uint64_t base, const char* field) {
    return base + static_cast<uint64_t>(unzigzag(uvarint(field)));
  }
  std::string string(const char* field, size_t max) {
    const uint64_t n = uvarint(field);
    if (n > data_.size() - at_) fail(std::string(field) + " longer than its record");
    if (n > max) fail(std::string(field) + " longer than " + std::to_string(max) + " bytes");
    std::string s = data_.substr(at_, n);
    at_ += n;
    return s;
  }
  [[noreturn]] void fail(const std::string& what) const { throw BadRecord{base_ + at_, what}; }

 private:
  const std::string& data_;
  uint64_t base_;
  size_t at_ = 0;
};

// The reader's stack nodes: a frame, its parent, and how many user and
// kernel frames the stack ending there holds (kernel frames follow the user
// ones, so a node is a kernel frame when kernel_depth > 0).
struct Node {
  uint64_t address;
  uint32_t parent;
  uint16_t user_depth, kernel_depth;
};

void read_profile_v2(std::istream& in, const std::string& name, ProfileHandler* h) {
  uint64_t offset = 0;
  auto fail = [&](uint64_t at, const std::string& what) {
    throw Error(EBADMSG, op::kReadProfile, name + " at offset " + std::to_string(at), what);
  };
  char header[kHeaderSize];
  in.read(header, sizeof(header));
  if (in.gcount() != static_cast<std::streamsize>(sizeof(header)) ||
      std::memcmp(header, kMagic, sizeof(kMagic)) != 0) {
    fail(0, "not an sframe-prof data file (no header)");
  }
  uint32_t version = 0;
  for (int i = 0; i < 4; i++) version |= uint32_t{static_cast<uint8_t>(header[8 + i])} << (8 * i);
  if (version != static_cast<uint32_t>(kProfileFormatVersion)) {
    fail(8, "format version " + std::to_string(version) + "; this sframe-prof reads versions 1 and " +
                std::to_string(kProfileFormatVersion));
  }
  offset = kHeaderSize;
  std::vector<Node> nodes{Node{0, 0, 0, 0}};
  std::string payload;
  uint64_t last_time = 0, samples = 0;
  bool ended = false;
  Sample s;
  for (;;) {
    const uint64_t record_at = offset;
    const int type = in.get();
    if (type == std::char_traits<char>::eof()) {
      if (!ended) fail(offset, "truncated: no end record (the recording did not finish)");
      break;
    }
    if (ended) fail(offset, "data after the end record");
    offset++;
    uint64_t len = 0;
    for (int shift = 0;; shift += 7) {
      const int b = in.get();
      if (b == std::char_traits<char>::eof()) fail(offset, "truncated record length");
      offset++;
      if (shift == 63 && b > 1) fail(offset - 1, "record length does not fit 64 bits");
      len |= uint64_t{static_cast<uint8_t>(b) & 0x7fu} << shift;
      if (!(b & 0x80)) break;
    }
    if (len > kProfileMaxRecord) {
      fail(record_at, "record length " + std::to_string(len) + " above the limit of " +
                          std::to_string(kProfileMaxRecord));
    }
    payload.resize(len);
    in.read(&payload[0], static_cast<std::streamsize>(len));
    if (static_cast<uint64_t>(in.gcount()) != len) {
      fail(offset + static_cast<uint64_t>(in.gcount()),
           "truncated: record of " + std::to_string(len) + " bytes ends after " +
               std::to_string(in.gcount()));
    }
    Fields f(payload, offset);
    offset += len;
    try {
      switch (type) {
        case kRecMeta: {
          const std::string key = f.string("meta key", kProfileMaxRecord);
          if (key.empty()) f.fail("empty meta key");
          h->on_meta(key, f.string("meta value", kProfileMaxRecord));
          break;
        }
        case kRecMapping: {
          ProfileMapping m;
          m.pid = f.pid("pid");
          m.start = f.uvarint("start");
          const uint64_t size = f.uvarint("size");
          if (size == 0 || size > UINT64_MAX - m.start) f.fail("mapping size out of range");
          m.end = m.start + size;
          m.offset = f.uvarint("offset");
          m.path = f.string("path", kProfileMaxRecord);
          if (m.path.empty()) f.fail("empty path");
          m.build_id = bytes_to_hex(f.string("build id", kMaxBuildId));
          h->on_mapping(m);
          break;
        }
        case kRecComm: {
          const pid_t pid = f.pid("pid");
          h->on_comm(pid, f.string("name", kProfileMaxRecord));
          break;
        }
        case kRecSample: {
          s.time = last_time = f.after(last_time, "time");
          s.pid = static_cast<uint32_t>(f.pid("pid"));
          const uint64_t tid = f.after(s.pid, "tid");
          if (tid > INT32_MAX) f.fail("tid out of range");
          s.tid = static_cast<uint32_t>(tid);
          s.cpu = f.u32("cpu");
          s.flags = f.u32("flags");
          s.user_stop = static_cast<StopReason>(f.u32("stop"));
          const uint64_t prefix = f.uvarint("stack node");
          if (prefix >= nodes.size()) {
            f.fail("stack node " + std::to_string(prefix) + " not defined (" +
                   std::to_string(nodes.size() - 1) + " are)");
          }
          const uint64_t new_user = f.uvarint("user frame count");
          const uint64_t new_kernel = f.uvarint("kernel frame count");
          uint32_t node = static_cast<uint32_t>(prefix);
          if (new_user && nodes[node].kernel_depth) f.fail("user frames after kernel frames");
          if (new_user > kProfileMaxFrames - nodes[node].user_depth ||
              new_kernel > kProfileMaxFrames - nodes[node].kernel_depth) {
            f.fail("a stack deeper than " + std::to_string(kProfileMaxFrames) + " frames");
          }
          if (new_user + new_kernel > kMaxNodes - nodes.size()) {
            f.fail("more than " + std::to_string(kMaxNodes) + " stack nodes");
          }
          uint64_t prev = nodes[node].address;
          for (uint64_t i = 0; i < new_user + new_kernel; i++) {
            prev = f.after(prev, "address");
            const Node& parent = nodes[node];
            const bool kernel = i >= new_user;
            nodes.push_back({prev, node, static_cast<uint16_t>(parent.user_depth + !kernel),
                             static_cast<uint16_t>(parent.kernel_depth + kernel)});
            node = static_cast<uint32_t>(nodes.size() - 1);
          }
          // Leaf first, as a session gives them.
          const Node& leaf = nodes[node];
          s.user.assign(leaf.user_depth, 0);
          s.kernel.assign(leaf.kernel_depth, 0);
          for (uint32_t n = node; n != 0; n = nodes[n].parent) {
            const Node& x = nodes[n];
            if (x.kernel_depth) {
              s.kernel[leaf.kernel_depth - x.kernel_depth] = x.address;
            } else {
              s.user[leaf.user_depth - x.user_depth] = x.address;
            }
          }
          samples++;
          h->on_sample(s);
          break;
        }
        case kRecLost:
          h->on_lost(f.uvarint("count"));
          break;
        case kRecEnd: {
          const uint64_t n = f.uvarint("sample count");
          if (n != samples) {
            f.fail("the end record counts " + std::to_string(n) + " samples, the file has " +
                   std::to_string(samples));
          }
          ended = true;
          break;
        }
        default:
          break;  // a later addition: skipped
      }
    } catch (const BadRecord& e) {
      fail(e.offset, e.what);
    }
  }
}

}  // namespace

void read_profile(const std::string& path, ProfileHandler* handler) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(errno ? errno : ENOENT, op::kOpen, path);
  read_profile(in, path, handler);
  if (in.bad()) throw Error(EIO, op::kReadProfile, path);
}

void read_profile(std::istream& in, const std::string& name, ProfileHandler* handler) {
  // Version 1 is text: "sframe-prof 1", possibly after comments and empty
  // lines; version 2 starts with a byte no text line does.
  if (in.peek() == static_cast<unsigned char>(kMagic[0])) {
    read_profile_v2(in, name, handler);
  } else {
    read_profile_v1(in, name, handler);
  }
}

BuildIdCheck::BuildIdCheck()
    : warn_([](const std::string& w) { std::fprintf(stderr, "sframe-prof: warning: %s\n", w.c_str()); }) {}

BuildIdCheck::BuildIdCheck(std::function<void(const std::string&)> warn)
    : warn_(std::move(warn)) {}

void BuildIdCheck::add_mapping(Symbolizer* sym, const ProfileMapping& m) {
  sym->add_mapping(m.pid, m.start, m.end, m.offset, m.path, matches(sym, m));
}

bool BuildIdCheck::matches(Symbolizer* sym, const ProfileMapping& m) {
  if (m.build_id.empty()) return true;
  auto it = files_.find(m.path);
  if (it == files_.end()) {
    // Missing or not ELF: not readable, and the symbolizer cannot use it
    // either.  Read from the object the symbols then come from.
    std::pair<bool, std::string> found{false, std::string()};
    found.first = sym->file_build_id(m.path, &found.second);
    it = files_.emplace(m.path, found).first;
  }
  if (!it->second.first || it->second.second == m.build_id) return true;
  if (warned_.insert({m.path, m.build_id}).second && warn_) {
    warn_(m.path + " has build id " +
          (it->second.second.empty() ? std::string("none") : it->second.second) +
          ", the recording saw " + m.build_id + ": its frames are not symbolized (shown as [" +
          m.path.substr(m.path.rfind('/') + 1) + "])");
  }
  return false;
}

StackFolder::StackFolder(Symbolizer* user, const KernelSymbolizer* kernel)
    : user_(user), kernel_(kernel && kernel->usable() ? kernel : nullptr) {}

void StackFolder::set_warning_sink(std::function<void(const std::string&)> sink) {
  build_ids_.set_warn(std::move(sink));
}

void StackFolder::on_mapping(const ProfileMapping& m) {
  flush(m.pid);
  build_ids_.add_mapping(user_, m);
}

void StackFolder::on_comm(pid_t pid, const std::string& name) {
  flush(pid);
  comm_[pid] = name;
}

std::vector<std::string> StackFolder::fold(uint32_t spid, const std::vector<uint64_t>& kernel,
                                           const std::vector<uint64_t>& user_frames) const {
  std::vector<std::string> out;
  const pid_t pid = static_cast<pid_t>(spid);
  auto c = comm_.find(pid);
  out.push_back(c != comm_.end() ? c->second : "pid " + std::to_string(pid));
  const std::vector<Symbol> user = user_->symbolize_frames(pid, user_frames);
  for (auto it = user.rbegin(); it != user.rend(); ++it) {
    if (it->found()) {
      out.push_back(it->function());
    } else if (!it->object.empty()) {
      out.push_back("[" + it->object.substr(it->object.rfind('/') + 1) + "]");
    } else {
      out.push_back("[unknown]");
    }
  }
  for (auto it = kernel.rbegin(); it != kernel.rend(); ++it) {
    std::string name = "[kernel]";
    if (kernel_) {
      const Symbol k = kernel_->symbolize(*it);
      if (k.found()) name = k.name + "_[k]";
    }
    if (name == "[kernel]" && out.back() == name) continue;
    out.push_back(name);
  }
  return out;
}

size_t StackFolder::AddressesHash::operator()(const Addresses& a) const {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ a.size();
  for (uint64_t v : a) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  }
  return static_cast<size_t>(h);
}

void StackFolder::on_sample(const Sample& s) {
  samples_++;
  Addresses key;
  key.reserve(s.user.size() + s.kernel.size() + 1);
  key.insert(key.end(), s.user.begin(), s.user.end());
  key.insert(key.end(), s.kernel.begin(), s.kernel.end());
  key.push_back(s.user.size());
  pending_[static_cast<pid_t>(s.pid)][std::move(key)]++;
}

void StackFolder::flush(pid_t pid) const {
  auto it = pending_.find(pid);
  if (it == pending_.end()) return;
  for (const auto& [key, count] : it->second) {
    const size_t nuser = static_cast<size_t>(key.back());
    const std::vector<uint64_t> user(key.begin(), key.begin() + static_cast<ptrdiff_t>(nuser));
    const std::vector<uint64_t> kernel(key.begin() + static_cast<ptrdiff_t>(nuser), key.end() - 1);
    stacks_[fold(static_cast<uint32_t>(pid), kernel, user)] += count;
  }
  pending_.erase(it);
}

FoldedStacks StackFolder::folded() const {
  while (!pending_.empty()) flush(pending_.begin()->first);
  FoldedStacks f;
  f.stacks.assign(stacks_.begin(), stacks_.end());
  return f;
}

std::string format_folded(const FoldedStacks& folded) {
  std::string out;
  for (const auto& [frames, count] : folded.stacks) {
    for (size_t i = 0; i < frames.size(); i++) {
      if (i) out += ';';
      for (char c : frames[i]) out += c == ';' ? ':' : (c == '\n' || c == '\r') ? ' ' : c;
    }
    out += ' ';
    out += std::to_string(count);
    out += '\n';
  }
  return out;
}

uint64_t total_samples(const FoldedStacks& folded) {
  uint64_t n = 0;
  for (const auto& st : folded.stacks) n += st.second;
  return n;
}

std::vector<FunctionCount> top_functions(const FoldedStacks& folded, size_t n, bool by_total) {
  std::map<std::string, FunctionCount> counts;
  for (const auto& [frames, count] : folded.stacks) {
    if (frames.size() < 2) continue;  // the process only
    std::set<std::string> seen;
    for (size_t i = 1; i < frames.size(); i++) {
      FunctionCount& fc = counts[frames[i]];
      fc.name = frames[i];
      if (seen.insert(frames[i]).second) fc.total += count;
    }
    counts[frames.back()].self += count;
  }
  std::vector<FunctionCount> out;
  for (auto& kv : counts) out.push_back(std::move(kv.second));
  std::sort(out.begin(), out.end(), [by_total](const FunctionCount& a, const FunctionCount& b) {
    const uint64_t a1 = by_total ? a.total : a.self, b1 = by_total ? b.total : b.self;
    const uint64_t a2 = by_total ? a.self : a.total, b2 = by_total ? b.self : b.total;
    if (a1 != b1) return a1 > b1;
    if (a2 != b2) return a2 > b2;
    return a.name < b.name;
  });
  if (out.size() > n) out.resize(n);
  return out;
}

}  // namespace sframe
