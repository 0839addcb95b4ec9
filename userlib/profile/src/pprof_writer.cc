#include "sframe_profile/pprof_writer.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "profile.pb.h"  // generated from pprof's profile.proto (CMake)
#include "sframe_client/error.h"
#include "sframe_client/fd.h"

namespace sframe {

namespace {

constexpr const char kKernelMapping[] = "[kernel.kallsyms]";

bool is_clock_event(const std::string& event) {
  return event.empty() || event == "cpu-clock" || event == "task-clock";
}

}  // namespace

std::string user_frame_name(const Symbol& s) {
  if (s.found()) return s.function();
  if (!s.object.empty()) return "[" + s.object.substr(s.object.rfind('/') + 1) + "]";
  return "[unknown]";
}

PprofBuilder::PprofBuilder(Symbolizer* user, const KernelSymbolizer* kernel)
    : user_(user), kernel_(kernel && kernel->usable() ? kernel : nullptr) {}

PprofBuilder::~PprofBuilder() = default;

void PprofBuilder::on_meta(const std::string& key, const std::string& value) {
  if (key == "hz") {
    hz_ = std::strtoull(value.c_str(), nullptr, 10);
  } else if (key == "event") {
    event_ = value;
  } else if (key == "target") {
    target_ = value;
  }
}

void PprofBuilder::on_comm(pid_t pid, const std::string& name) {
  flush(pid);
  comm_[pid] = name;
}

int64_t PprofBuilder::str(const std::string& s) {
  auto [it, inserted] = string_ids_.emplace(s, static_cast<int64_t>(strings_.size()));
  if (inserted) strings_.push_back(s);
  return it->second;
}

void PprofBuilder::on_mapping(const ProfileMapping& m) {
  flush(m.pid);
  build_ids_.add_mapping(user_, m);
  auto key = std::make_tuple(m.start, m.end, m.offset, m.path, m.build_id);
  auto [it, inserted] = mapping_ids_.emplace(key, mappings_.size() + 1);
  if (inserted) mappings_.push_back({m.start, m.end, m.offset, m.path, m.build_id});
  // The same replacement as Symbolizer::add_mapping: a mapping replaces
  // those of its pid it overlaps.
  std::vector<PidMapping>& maps = pid_maps_[m.pid];
  maps.erase(std::remove_if(maps.begin(), maps.end(),
                            [&](const PidMapping& p) { return p.start < m.end && m.start < p.end; }),
             maps.end());
  auto at = std::lower_bound(maps.begin(), maps.end(), m.start,
                             [](const PidMapping& p, uint64_t v) { return p.start < v; });
  maps.insert(at, PidMapping{m.start, m.end, it->second});
}

uint64_t PprofBuilder::mapping_id(pid_t pid, uint64_t address) {
  auto it = pid_maps_.find(pid);
  if (it == pid_maps_.end()) return 0;
  const std::vector<PidMapping>& maps = it->second;
  auto m = std::upper_bound(maps.begin(), maps.end(), address,
                            [](uint64_t v, const PidMapping& p) { return v < p.start; });
  if (m == maps.begin() || address >= (m - 1)->end) return 0;
  return (m - 1)->id;
}

uint64_t PprofBuilder::function(const std::string& name, const std::string& system_name) {
  auto [it, inserted] = function_ids_.emplace(name, functions_.size() + 1);
  if (inserted) functions_.push_back({str(name), str(system_name.empty() ? name : system_name)});
  return it->second;
}

size_t PprofBuilder::LocationKeyHash::operator()(const LocationKey& k) const {
  uint64_t h = k.address * 0x9e3779b97f4a7c15ull;
  h ^= (k.mapping + (static_cast<uint64_t>(k.pid) << 32)) + 0x7f4a7c15ull + (h << 6) + (h >> 2);
  return static_cast<size_t>(h ^ (h >> 29));
}

uint64_t PprofBuilder::user_location(pid_t pid, uint64_t lookup_at) {
  const uint64_t mapping = mapping_id(pid, lookup_at);
  // Within a mapping (the same file at the same place) an address is the
  // same code in every process; outside every mapping only in its own.
  const LocationKey key{mapping, mapping ? pid_t{0} : pid, lookup_at};
  auto it = location_ids_.find(key);
  if (it != location_ids_.end()) return it->second;
  const Symbol s = user_->symbolize(pid, lookup_at);
  const uint64_t fn = function(user_frame_name(s), s.name);
  locations_.push_back({mapping, lookup_at, fn});
  unnamed_kernel_.push_back(false);
  return location_ids_[key] = locations_.size();
}

uint64_t PprofBuilder::kernel_location(uint64_t address, bool* unnamed) {
  if (!kernel_mapping_) {
    mappings_.push_back({0, 0, 0, kKernelMapping, ""});
    kernel_mapping_ = mappings_.size();
  }
  kernel_lo_ = std::min(kernel_lo_, address);
  kernel_hi_ = std::max(kernel_hi_, address);
  const LocationKey key{kernel_mapping_, 0, address};
  auto it = location_ids_.find(key);
  if (it != location_ids_.end()) {
    *unnamed = unnamed_kernel_[it->second - 1];
    return it->second;
  }
  std::string name = "[kernel]", system_name;
  if (kernel_) {
    const Symbol k = kernel_->symbolize(address);
    if (k.found()) {
      name = k.name + "_[k]";
      system_name = k.name;
    }
  }
  *unnamed = name == "[kernel]";
  locations_.push_back({kernel_mapping_, address, function(name, system_name)});
  unnamed_kernel_.push_back(*unnamed);
  return location_ids_[key] = locations_.size();
}

size_t PprofBuilder::AddressesHash::operator()(const Addresses& a) const {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ a.size();
  for (uint64_t v : a) h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return static_cast<size_t>(h);
}

void PprofBuilder::on_sample(const Sample& s) {
  samples_++;
  first_time_ = std::min(first_time_, s.time);
  last_time_ = std::max(last_time_, s.time);
  Addresses key;
  key.reserve(s.user.size() + s.kernel.size() + 2);
  key.push_back(s.tid);
  key.insert(key.end(), s.user.begin(), s.user.end());
  key.insert(key.end(), s.kernel.begin(), s.kernel.end());
  key.push_back(s.user.size());
  pending_[static_cast<pid_t>(s.pid)][std::move(key)]++;
}

void PprofBuilder::flush(pid_t pid) {
  auto p = pending_.find(pid);
  if (p == pending_.end()) return;
  auto c = comm_.find(pid);
  const int64_t comm = str(c != comm_.end() ? c->second : "pid " + std::to_string(pid));
  for (const auto& [key, count] : p->second) {
    const uint32_t tid = static_cast<uint32_t>(key.front());
    const size_t nuser = static_cast<size_t>(key.back());
    const uint64_t* user = key.data() + 1;
    const uint64_t* kernel = user + nuser;
    const size_t nkernel = key.size() - 2 - nuser;
    std::vector<uint64_t> locs;
    locs.reserve(nkernel + nuser);
    // Leaf first: the kernel frames, then the user ones.  A run of unnamed
    // kernel frames is one frame, as in report.
    bool prev_unnamed = false;
    for (size_t i = nkernel; i-- > 0;) {
      bool unnamed = false;
      const uint64_t loc = kernel_location(kernel[i], &unnamed);
      if (unnamed && prev_unnamed) continue;
      prev_unnamed = unnamed;
      locs.push_back(loc);
    }
    std::reverse(locs.begin(), locs.end());
    for (size_t i = 0; i < nuser; i++) {
      // A return address is looked up in its call (see Symbolizer).
      const uint64_t at = (i == 0 || user[i] == 0) ? user[i] : user[i] - 1;
      locs.push_back(user_location(pid, at));
    }
    counts_[std::make_tuple(std::move(locs), static_cast<uint32_t>(pid), tid, comm)] += count;
  }
  pending_.erase(p);
}

std::string PprofBuilder::serialized() {
  while (!pending_.empty()) flush(pending_.begin()->first);
  // The labels', types' and comments' strings join a copy of the table.
  std::vector<std::string> strings = strings_;
  std::unordered_map<std::string, int64_t> ids = string_ids_;
  auto str = [&](const std::string& s) {
    auto [it, inserted] = ids.emplace(s, static_cast<int64_t>(strings.size()));
    if (inserted) strings.push_back(s);
    return it->second;
  };
  perftools::profiles::Profile p;
  const bool clock = is_clock_event(event_) && hz_ > 0;
  const int64_t period_ns = clock ? static_cast<int64_t>(1000000000ull / hz_) : 0;
  auto value_type = [&](perftools::profiles::ValueType* vt, const char* type, const char* unit) {
    vt->set_type(str(type));
    vt->set_unit(str(unit));
  };
  value_type(p.add_sample_type(), "samples", "count");
  if (clock) {
    value_type(p.add_sample_type(), "cpu", "nanoseconds");
    value_type(p.mutable_period_type(), "cpu", "nanoseconds");
    p.set_period(period_ns);
  } else {
    value_type(p.mutable_period_type(), event_.empty() ? "samples" : event_.c_str(), "count");
    p.set_period(1);
  }
  const int64_t k_pid = str("pid"), k_tid = str("tid"), k_comm = str("comm");
  for (const auto& [key, count] : counts_) {
    perftools::profiles::Sample* smp = p.add_sample();
    for (uint64_t loc : std::get<0>(key)) smp->add_location_id(loc);
    smp->add_value(static_cast<int64_t>(count));
    if (clock) smp->add_value(static_cast<int64_t>(count) * period_ns);
    perftools::profiles::Label* l = smp->add_label();
    l->set_key(k_pid);
    l->set_num(std::get<1>(key));
    l = smp->add_label();
    l->set_key(k_tid);
    l->set_num(std::get<2>(key));
    l = smp->add_label();
    l->set_key(k_comm);
    l->set_str(std::get<3>(key));
  }
  for (size_t i = 0; i < mappings_.size(); i++) {
    const PMapping& m = mappings_[i];
    perftools::profiles::Mapping* pm = p.add_mapping();
    pm->set_id(i + 1);
    if (i + 1 == kernel_mapping_) {
      pm->set_memory_start(kernel_lo_);
      pm->set_memory_limit(kernel_hi_ + 1);
    } else {
      pm->set_memory_start(m.start);
      pm->set_memory_limit(m.end);
      pm->set_file_offset(m.offset);
    }
    pm->set_filename(str(m.path));
    if (!m.build_id.empty()) pm->set_build_id(str(m.build_id));
    pm->set_has_functions(true);
  }
  for (size_t i = 0; i < locations_.size(); i++) {
    perftools::profiles::Location* pl = p.add_location();
    pl->set_id(i + 1);
    pl->set_mapping_id(locations_[i].mapping_id);
    pl->set_address(locations_[i].address);
    pl->add_line()->set_function_id(locations_[i].function_id);
  }
  for (size_t i = 0; i < functions_.size(); i++) {
    perftools::profiles::Function* pf = p.add_function();
    pf->set_id(i + 1);
    pf->set_name(functions_[i].name);
    pf->set_system_name(functions_[i].system_name);
  }
  if (samples_ > 0) {
    p.set_duration_nanos(static_cast<int64_t>(last_time_ - first_time_) + period_ns);
  }
  if (!target_.empty()) p.add_comment(str("sframe-prof target: " + target_));
  if (lost_) p.add_comment(str("lost samples: " + std::to_string(lost_)));
  for (const std::string& s : strings) p.add_string_table(s);
  std::string out;
  if (!p.SerializeToString(&out)) throw Error(EINVAL, op::kWritePprof, "profile", "serialize");
  return out;
}

std::string PprofBuilder::gzipped() {
  const std::string raw = serialized();
  if (raw.size() > UINT32_MAX / 2) throw Error(EFBIG, op::kWritePprof, "profile");
  z_stream z{};
  // windowBits 15 + 16: a gzip header and trailer, not zlib's.
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw Error(ENOMEM, op::kWritePprof, "profile", "deflateInit2");
  std::string out(deflateBound(&z, raw.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(&out[0]);
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  const uLong n = z.total_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw Error(EIO, op::kWritePprof, "profile", "deflate");
  out.resize(n);
  return out;
}

void write_file(const std::string& path, const std::string& data) {
  UniqueFd owned;
  int fd = STDOUT_FILENO;
  if (path != "-") {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) throw Error(errno, op::kOpen, path);
    owned.reset(fd);
  }
  for (size_t at = 0; at < data.size();) {
    const ssize_t n = ::write(fd, data.data() + at, data.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(n < 0 ? errno : EIO, "write", path == "-" ? "standard output" : path);
    at += static_cast<size_t>(n);
  }
  if (owned.get() >= 0 && ::close(owned.release()) != 0) throw Error(errno, "write", path);
}

}  // namespace sframe
