// Version 1 of the data file: the text format of earlier sframe-prof, read
// (not written) so that their recordings can still be reported.
#include "profile_v1.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "sframe_client/error.h"

namespace sframe {
namespace {

constexpr const char kMagic[] = "sframe-prof";

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

void read_profile_v1(std::istream& in, const std::string& name, ProfileHandler* handler) {
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
      if (version != "1")
        fail("format version '" + version + "' in a text file; this sframe-prof reads text "
             "version 1 and binary version " + std::to_string(kProfileFormatVersion));
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

}  // namespace sframe
