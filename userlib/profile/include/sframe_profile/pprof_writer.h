// sframe-profile: a data file as a pprof profile (profile.proto of
// github.com/google/pprof, gzip-compressed), what `sframe-prof report
// --format pprof` writes and what pprof, Grafana Pyroscope
// (/ingest?format=pprof) and Parca read.
//
//   sframe::Symbolizer sym;
//   sframe::PprofBuilder pprof(&sym, kernel_symbolizer_or_null);
//   sframe::read_profile("sframe-prof.data", &pprof);
//   sframe::write_file("out.pb.gz", pprof.gzipped());
//
// The profile: sample types samples/count and, for a clock event sampled at
// a known frequency, cpu/nanoseconds (count x period); one Sample per
// distinct (stack, pid, tid, process name), with labels "pid", "tid" (num)
// and "comm" (str); Locations leaf first, one per (mapping, address), the
// address of a return address taken 1 byte back, in its call instruction;
// Mappings with their file offset, path and build id (ProfileMapping's), a
// "[kernel.kallsyms]" mapping for kernel frames; Functions named as
// `report` names frames (StackFolder: the function without parameters,
// "[object]", "[unknown]", "name_[k]", "[kernel]"), so that pprof's top
// functions are report's.  Consecutive unnamed kernel frames count once, as
// in report.
#ifndef SFRAME_PROFILE_PPROF_WRITER_H
#define SFRAME_PROFILE_PPROF_WRITER_H

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "sframe_profile/profile.h"
#include "sframe_profile/symbolizer.h"

namespace sframe {

// The frame name report gives a user frame (StackFolder's rule).
std::string user_frame_name(const Symbol& s);

class PprofBuilder : public ProfileHandler {
 public:
  // user gets the file's mappings (add_mapping); kernel may be null (or
  // unusable): every kernel frame is then "[kernel]".
  PprofBuilder(Symbolizer* user, const KernelSymbolizer* kernel);
  ~PprofBuilder() override;

  void on_meta(const std::string& key, const std::string& value) override;
  void on_mapping(const ProfileMapping& m) override;
  void on_comm(pid_t pid, const std::string& name) override;
  void on_sample(const Sample& s) override;
  void on_lost(uint64_t count) override { lost_ += count; }

  uint64_t samples() const { return samples_; }
  // The Profile message, serialized; gzipped(): that, gzip-compressed (the
  // form pprof files have on disk).  After the last record (they resolve
  // the stacks not resolved yet).  Throw sframe::Error(op::kWritePprof).
  std::string serialized();
  std::string gzipped();

 private:
  struct PMapping {
    uint64_t start, end, offset;
    std::string path, build_id;
  };
  struct PidMapping {
    uint64_t start, end, id;
  };
  struct PLocation {
    uint64_t mapping_id, address, function_id;
  };
  struct PFunction {
    int64_t name, system_name;
  };
  int64_t str(const std::string& s);
  uint64_t mapping_id(pid_t pid, uint64_t address);
  uint64_t user_location(pid_t pid, uint64_t lookup_at);
  uint64_t kernel_location(uint64_t address, bool* unnamed);
  uint64_t function(const std::string& name, const std::string& system_name);
  // Samples are counted by their addresses first (tid, user frames, kernel
  // frames, number of user frames); a distinct stack of addresses is
  // resolved to locations once, before its process's next mmap or comm
  // record, or at the end.
  using Addresses = std::vector<uint64_t>;
  struct AddressesHash {
    size_t operator()(const Addresses& a) const;
  };
  void flush(pid_t pid);
  std::map<pid_t, std::unordered_map<Addresses, uint64_t, AddressesHash>> pending_;

  Symbolizer* user_;
  BuildIdCheck build_ids_;  // a mapping of another file than recorded: not symbolized
  const KernelSymbolizer* kernel_;
  std::vector<std::string> strings_{""};
  std::unordered_map<std::string, int64_t> string_ids_{{"", 0}};
  std::vector<PMapping> mappings_;  // id - 1
  std::map<std::tuple<uint64_t, uint64_t, uint64_t, std::string, std::string>, uint64_t>
      mapping_ids_;
  std::map<pid_t, std::vector<PidMapping>> pid_maps_;  // sorted by start, disjoint
  uint64_t kernel_mapping_ = 0;                        // its id, 0 until a kernel frame
  uint64_t kernel_lo_ = UINT64_MAX, kernel_hi_ = 0;
  std::vector<PLocation> locations_;  // id - 1
  // (mapping id, or 0 and the pid for an address in no mapping, address)
  struct LocationKey {
    uint64_t mapping;
    pid_t pid;
    uint64_t address;
    bool operator==(const LocationKey& o) const {
      return mapping == o.mapping && pid == o.pid && address == o.address;
    }
  };
  struct LocationKeyHash {
    size_t operator()(const LocationKey& k) const;
  };
  std::unordered_map<LocationKey, uint64_t, LocationKeyHash> location_ids_;
  std::vector<bool> unnamed_kernel_;  // per location
  std::vector<PFunction> functions_;  // id - 1
  std::unordered_map<std::string, uint64_t> function_ids_;
  std::map<pid_t, std::string> comm_;
  // (locations leaf first, pid, tid, comm string) -> samples
  std::map<std::tuple<std::vector<uint64_t>, uint32_t, uint32_t, int64_t>, uint64_t> counts_;
  uint64_t samples_ = 0, lost_ = 0;
  uint64_t first_time_ = UINT64_MAX, last_time_ = 0;
  uint64_t hz_ = 0;
  std::string event_, target_;
};

namespace op {
inline constexpr const char kWritePprof[] = "write pprof";
}  // namespace op

// Writes data to path (created 0600, as the data file: kernel addresses;
// or truncated); "-": standard output.
// Throws sframe::Error with the errno.
void write_file(const std::string& path, const std::string& data);

}  // namespace sframe

#endif  // SFRAME_PROFILE_PPROF_WRITER_H
