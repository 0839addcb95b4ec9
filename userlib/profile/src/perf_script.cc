#include "sframe_profile/perf_script.h"

#include <cinttypes>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

namespace sframe {

PerfScriptWriter::PerfScriptWriter(FILE* out, Symbolizer* user, const KernelSymbolizer* kernel)
    : out_(out), user_(user), kernel_(kernel && kernel->usable() ? kernel : nullptr) {}

void PerfScriptWriter::on_meta(const std::string& key, const std::string& value) {
  if (key == "event" && !value.empty()) {
    event_ = value;
  } else if (key == "hz") {
    // perf's clock events count nanoseconds: a sample every 1e9/hz.
    const uint64_t hz = std::strtoull(value.c_str(), nullptr, 10);
    if (hz > 0) period_ = 1000000000ull / hz;
  }
}

void PerfScriptWriter::on_mapping(const ProfileMapping& m) {
  build_ids_.add_mapping(user_, m);
  for (auto it = stacks_.begin(); it != stacks_.end();) {
    it = it->first[0] == static_cast<uint64_t>(m.pid) ? stacks_.erase(it) : std::next(it);
  }
}

size_t PerfScriptWriter::StackKeyHash::operator()(const StackKey& k) const {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ k.size();
  for (uint64_t v : k) h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return static_cast<size_t>(h);
}

std::string PerfScriptWriter::frame_lines(const Sample& s) {
  std::string out;
  char buf[64];
  for (uint64_t ip : s.kernel) {
    Symbol k;
    if (kernel_) k = kernel_->symbolize(ip);
    std::snprintf(buf, sizeof(buf), "\t%16" PRIx64 " ", ip);
    out += buf;
    if (k.found()) {
      std::snprintf(buf, sizeof(buf), "+0x%" PRIx64 " (", k.offset);
      out += k.name + buf + (k.object == "[kernel]" ? "[kernel.kallsyms]" : k.object) + ")\n";
    } else {
      out += "[unknown] ([kernel.kallsyms])\n";
    }
  }
  const std::vector<Symbol> user = user_->symbolize_frames(static_cast<pid_t>(s.pid), s.user);
  for (const Symbol& u : user) {
    std::snprintf(buf, sizeof(buf), "\t%16" PRIx64 " ", u.address);
    out += buf;
    if (u.found()) {
      std::snprintf(buf, sizeof(buf), "+0x%" PRIx64 " (", u.offset);
      out += u.function() + buf + u.object + ")\n";
    } else {
      out += "[unknown] (" + (u.object.empty() ? std::string("[unknown]") : u.object) + ")\n";
    }
  }
  return out;
}

void PerfScriptWriter::on_comm(pid_t pid, const std::string& name) { comm_[pid] = name; }

void PerfScriptWriter::on_sample(const Sample& s) {
  samples_++;
  const pid_t pid = static_cast<pid_t>(s.pid);
  auto c = comm_.find(pid);
  // A line break in a name would end the sample's header.
  std::string comm = c != comm_.end() ? c->second : ":" + std::to_string(pid);
  for (char& ch : comm) {
    if (ch == '\n' || ch == '\r') ch = ' ';
  }
  std::fprintf(out_, "%s %7" PRIu32 "/%-7" PRIu32 " [%03" PRIu32 "] %5" PRIu64 ".%06" PRIu64
                     ": %10" PRIu64 " %s: \n",
               comm.c_str(), s.pid, s.tid, s.cpu, s.time / uint64_t{1000000000},
               s.time % uint64_t{1000000000} / 1000, period_, event_.c_str());
  StackKey key;
  key.reserve(s.user.size() + s.kernel.size() + 2);
  key.push_back(s.pid);
  key.insert(key.end(), s.user.begin(), s.user.end());
  key.insert(key.end(), s.kernel.begin(), s.kernel.end());
  key.push_back(s.user.size());
  auto it = stacks_.find(key);
  if (it == stacks_.end()) {
    if (stacks_.size() >= kMaxCachedStacks) stacks_.clear();
    it = stacks_.emplace(std::move(key), frame_lines(s)).first;
  }
  std::fwrite(it->second.data(), 1, it->second.size(), out_);
  std::fputc('\n', out_);
}

}  // namespace sframe
