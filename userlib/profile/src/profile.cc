#include "sframe_profile/profile.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>

#include "sframe_client/error.h"

namespace sframe {
namespace {

constexpr const char kMagic[] = "sframe-prof";

// A name on one line: no line breaks.
std::string one_line(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

void append_hex_list(std::string* out, const std::vector<uint64_t>& ips) {
  char b[24];
  for (size_t i = 0; i < ips.size(); i++) {
    std::snprintf(b, sizeof(b), i ? ",%" PRIx64 : "%" PRIx64, ips[i]);
    *out += b;
  }
}

struct LineError {
  std::string what;
};

uint64_t parse_u64(const std::string& tok, int base, const char* field) {
  if (tok.empty() || tok[0] == '-' || tok[0] == '+' || tok[0] == ' ')
    throw LineError{std::string("bad ") + field + " '" + tok + "'"};
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(tok.c_str(), &end, base);
  if (errno != 0 || end == tok.c_str() || *end != '\0')
    throw LineError{std::string("bad ") + field + " '" + tok + "'"};
  return v;
}

pid_t parse_pid(const std::string& tok, const char* field) {
  const uint64_t v = parse_u64(tok, 10, field);
  if (v > INT32_MAX) throw LineError{std::string("bad ") + field + " '" + tok + "'"};
  return static_cast<pid_t>(v);
}

// Splits at single spaces: the first `n` fields, and the rest (which may
// hold spaces) as field n + 1 when rest is true.
std::vector<std::string> fields(const std::string& line, size_t n, bool rest) {
  std::vector<std::string> out;
  size_t at = 0;
  while (out.size() < n && at <= line.size()) {
    size_t sp = line.find(' ', at);
    if (sp == std::string::npos) sp = line.size();
    out.push_back(line.substr(at, sp - at));
    at = sp + 1;
  }
  if (rest && at <= line.size()) out.push_back(line.substr(at));
  return out;
}

std::vector<uint64_t> parse_list(const std::string& tok, const char* prefix) {
  const size_t plen = std::strlen(prefix);
  if (tok.compare(0, plen, prefix) != 0)
    throw LineError{std::string("expected ") + prefix + "ADDR,... instead of '" + tok + "'"};
  std::vector<uint64_t> out;
  const std::string list = tok.substr(plen);
  size_t at = 0;
  while (at < list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    out.push_back(parse_u64(list.substr(at, comma - at), 16, "address"));
    at = comma + 1;
    if (comma + 1 == list.size()) throw LineError{"trailing ',' in '" + tok + "'"};
  }
  return out;
}

void parse_line(const std::string& line, ProfileHandler* h) {
  const std::string type = line.substr(0, line.find(' '));
  if (type == "mmap") {
    // mmap PID START END OFFSET PATH
    auto f = fields(line, 5, true);
    if (f.size() != 6 || f[5].empty()) throw LineError{"expected mmap PID START END OFFSET PATH"};
    ProfileMapping m;
    m.pid = parse_pid(f[1], "pid");
    m.start = parse_u64(f[2], 16, "start");
    m.end = parse_u64(f[3], 16, "end");
    m.offset = parse_u64(f[4], 16, "offset");
    m.path = f[5];
    if (m.end <= m.start) throw LineError{"mapping ends before it starts"};
    h->on_mapping(m);
  } else if (type == "comm") {
    auto f = fields(line, 2, true);
    if (f.size() != 3) throw LineError{"expected comm PID NAME"};
    h->on_comm(parse_pid(f[1], "pid"), f[2]);
  } else if (type == "sample") {
    // sample TIME PID TID CPU FLAGS STOP k=... u=...
    auto f = fields(line, 10, false);
    if (f.size() != 9)
      throw LineError{"expected sample TIME PID TID CPU FLAGS STOP k=ADDR,... u=ADDR,..."};
    Sample s;
    s.time = parse_u64(f[1], 10, "time");
    s.pid = static_cast<uint32_t>(parse_pid(f[2], "pid"));
    s.tid = static_cast<uint32_t>(parse_pid(f[3], "tid"));
    const uint64_t cpu = parse_u64(f[4], 10, "cpu");
    const uint64_t flags = parse_u64(f[5], 16, "flags");
    const uint64_t stop = parse_u64(f[6], 10, "stop");
    if (cpu > UINT32_MAX || flags > UINT32_MAX || stop > UINT32_MAX)
      throw LineError{"cpu, flags or stop out of range"};
    s.cpu = static_cast<uint32_t>(cpu);
    s.flags = static_cast<uint32_t>(flags);
    s.user_stop = static_cast<StopReason>(stop);
    s.kernel = parse_list(f[7], "k=");
    s.user = parse_list(f[8], "u=");
    h->on_sample(s);
  } else if (type == "lost") {
    auto f = fields(line, 3, false);
    if (f.size() != 2) throw LineError{"expected lost N"};
    h->on_lost(parse_u64(f[1], 10, "count"));
  } else if (type == "meta") {
    auto f = fields(line, 2, true);
    if (f.size() < 2 || f[1].empty()) throw LineError{"expected meta KEY VALUE"};
    h->on_meta(f[1], f.size() > 2 ? f[2] : std::string());
  }
  // Other types: later additions, skipped.
}

}  // namespace

ProfileWriter::ProfileWriter(const std::string& path) : path_(path) {
  f_ = std::fopen(path.c_str(), "we");
  if (!f_) throw Error(errno, op::kWriteProfile, path);
  std::fprintf(f_, "%s %d\n", kMagic, kProfileFormatVersion);
  check();
}

ProfileWriter::~ProfileWriter() {
  if (f_) std::fclose(f_);
}

void ProfileWriter::check() {
  if (!f_) throw Error(EBADF, op::kWriteProfile, path_, "closed");
  if (std::ferror(f_)) throw Error(errno ? errno : EIO, op::kWriteProfile, path_);
}

void ProfileWriter::meta(const std::string& key, const std::string& value) {
  std::fprintf(f_, "meta %s %s\n", one_line(key).c_str(), one_line(value).c_str());
}

void ProfileWriter::mapping(const ProfileMapping& m) {
  std::fprintf(f_, "mmap %d %" PRIx64 " %" PRIx64 " %" PRIx64 " %s\n", static_cast<int>(m.pid),
               m.start, m.end, m.offset, one_line(m.path).c_str());
}

void ProfileWriter::comm(pid_t pid, const std::string& name) {
  std::fprintf(f_, "comm %d %s\n", static_cast<int>(pid), one_line(name).c_str());
}

void ProfileWriter::sample(const Sample& s) {
  char head[160];
  std::snprintf(head, sizeof(head),
                "sample %" PRIu64 " %" PRIu32 " %" PRIu32 " %" PRIu32 " %" PRIx32 " %" PRIu32 " k=",
                s.time, s.pid, s.tid, s.cpu, s.flags, static_cast<uint32_t>(s.user_stop));
  std::string line = head;
  append_hex_list(&line, s.kernel);
  line += " u=";
  append_hex_list(&line, s.user);
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), f_);
}

void ProfileWriter::lost(uint64_t count) { std::fprintf(f_, "lost %" PRIu64 "\n", count); }

void ProfileWriter::flush() {
  check();
  if (std::fflush(f_) != 0) throw Error(errno, op::kWriteProfile, path_);
}

void ProfileWriter::close() {
  check();
  FILE* f = f_;
  f_ = nullptr;
  if (std::fclose(f) != 0) throw Error(errno, op::kWriteProfile, path_);
}

void read_profile(const std::string& path, ProfileHandler* handler) {
  errno = 0;
  std::ifstream in(path);
  if (!in) throw Error(errno ? errno : ENOENT, op::kOpen, path);
  read_profile(in, path, handler);
  if (in.bad()) throw Error(EIO, op::kReadProfile, path);
}

void read_profile(std::istream& in, const std::string& name, ProfileHandler* handler) {
  std::string line;
  size_t lineno = 0;
  bool header = false;
  auto fail = [&](const std::string& what) {
    throw Error(EBADMSG, op::kReadProfile, name + ":" + std::to_string(lineno), what);
  };
  while (std::getline(in, line)) {
    lineno++;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (!header) {
      const std::string magic = std::string(kMagic) + " ";
      if (line.compare(0, magic.size(), magic) != 0)
        fail("not an sframe-prof data file (no 'sframe-prof VERSION' line first)");
      const std::string version = line.substr(magic.size());
      if (version != std::to_string(kProfileFormatVersion))
        fail("format version '" + version + "'; this sframe-prof reads version " +
             std::to_string(kProfileFormatVersion));
      header = true;
      continue;
    }
    try {
      parse_line(line, handler);
    } catch (const LineError& e) {
      fail(e.what);
    }
  }
  if (!header) fail("empty: no 'sframe-prof VERSION' line");
}

StackFolder::StackFolder(Symbolizer* user, const KernelSymbolizer* kernel)
    : user_(user), kernel_(kernel && kernel->usable() ? kernel : nullptr) {}

void StackFolder::on_mapping(const ProfileMapping& m) {
  flush(m.pid);
  user_->add_mapping(m.pid, m.start, m.end, m.offset, m.path);
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
