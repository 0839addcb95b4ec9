// sframe-profile: a data file as the text `perf script` prints for samples
// with call chains, for the tools perf users feed it to (FlameGraph's
// stackcollapse-perf.pl, speedscope's and Firefox Profiler's importers,
// inferno, hotspot's perf text import).  Per sample:
//
//   COMM PID/TID [CPU] SEC.USEC: PERIOD EVENT:
//   \t        ADDR SYMBOL+0xOFF (DSO)        leaf first, kernel then user
//   ...
//   (a blank line)
//
// COMM as perf prints it (":PID" when the process has no name yet), the
// time from the sample's CLOCK_MONOTONIC, PERIOD in the event's unit (ns
// for the clock events at the recording's frequency), EVENT the recorded
// event ("cpu-clock" when the file does not say).  SYMBOL is the function
// as report names it (demangled, without parameters); "[unknown]" with the
// object's path as DSO where the object has no symbol for the address, and
// "[unknown] ([unknown])" outside every mapping: the shapes perf gives and
// its consumers expect.  Kernel frames: the kallsyms name, DSO
// "[kernel.kallsyms]" or "[MODULE]".
#ifndef SFRAME_PROFILE_PERF_SCRIPT_H
#define SFRAME_PROFILE_PERF_SCRIPT_H

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <unordered_map>

#include "sframe_profile/profile.h"
#include "sframe_profile/symbolizer.h"

namespace sframe {

class PerfScriptWriter : public ProfileHandler {
 public:
  // Writes each sample to out as it comes (buffered by out).  user gets the
  // file's mappings; kernel may be null: kernel frames are then
  // "[unknown] ([kernel.kallsyms])".
  PerfScriptWriter(FILE* out, Symbolizer* user, const KernelSymbolizer* kernel);

  void on_meta(const std::string& key, const std::string& value) override;
  void on_mapping(const ProfileMapping& m) override;
  void on_comm(pid_t pid, const std::string& name) override;
  void on_sample(const Sample& s) override;

  uint64_t samples() const { return samples_; }

 private:
  // A sample's frames: pid, user frames, kernel frames, number of user frames.
  using StackKey = std::vector<uint64_t>;
  struct StackKeyHash {
    size_t operator()(const StackKey& k) const;
  };
  std::string frame_lines(const Sample& s);

  // A stack's lines, made once per (pid, addresses) until the pid's next
  // mapping; at most kMaxCachedStacks, then made anew.
  static constexpr size_t kMaxCachedStacks = 1u << 18;
  std::unordered_map<StackKey, std::string, StackKeyHash> stacks_;
  FILE* out_;
  Symbolizer* user_;
  BuildIdCheck build_ids_;  // a mapping of another file than recorded: not symbolized
  const KernelSymbolizer* kernel_;
  std::map<pid_t, std::string> comm_;
  std::string event_ = "cpu-clock";
  uint64_t period_ = 1;
  uint64_t samples_ = 0;
};

}  // namespace sframe

#endif  // SFRAME_PROFILE_PERF_SCRIPT_H
