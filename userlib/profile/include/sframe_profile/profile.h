// sframe-profile: the data file of sframe-prof (docs/sframe-prof-format.md)
// and what `sframe-prof report` makes of it.
//
//   ProfileWriter w("sframe-prof.data");            // header "sframe-prof 1"
//   w.mapping({pid, start, end, offset, path});      // before samples needing it
//   w.comm(pid, "name");
//   w.sample(sample);                                // a session's Sample
//   w.close();
//
//   sframe::Symbolizer sym;
//   sframe::StackFolder folder(&sym, kernel_symbolizer_or_null);
//   sframe::read_profile("sframe-prof.data", &folder);
//   std::string text = sframe::format_folded(folder.folded());
#ifndef SFRAME_PROFILE_PROFILE_H
#define SFRAME_PROFILE_PROFILE_H

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <istream>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "sframe_profile/flamegraph.h"
#include "sframe_client/session.h"
#include "sframe_profile/symbolizer.h"

namespace sframe {

namespace op {
inline constexpr const char kReadProfile[] = "read profile";
inline constexpr const char kWriteProfile[] = "write profile";
}  // namespace op

// The format version this library writes and reads.
inline constexpr int kProfileFormatVersion = 1;

// An `mmap` line: an executable file mapping of a process.
struct ProfileMapping {
  pid_t pid = 0;
  uint64_t start = 0, end = 0, offset = 0;
  std::string path;
  std::string build_id;  // lowercase hex of NT_GNU_BUILD_ID; empty if unknown
};

// Writes a data file.  Not copyable; closes the file on destruction (errors
// there are lost: call close() to see them).
class ProfileWriter {
 public:
  // Creates (or truncates) path and writes the header line.  Throws
  // sframe::Error(op::kWriteProfile, path).
  explicit ProfileWriter(const std::string& path);
  ~ProfileWriter();
  ProfileWriter(const ProfileWriter&) = delete;
  ProfileWriter& operator=(const ProfileWriter&) = delete;

  // Each writes one line (buffered).  meta: key without spaces.
  void meta(const std::string& key, const std::string& value);
  void mapping(const ProfileMapping& m);
  void comm(pid_t pid, const std::string& name);
  void sample(const Sample& s);
  void lost(uint64_t count);

  // Throw sframe::Error(op::kWriteProfile, path) on a write error.
  void flush();
  void close();

 private:
  void check();
  std::string path_;
  FILE* f_ = nullptr;
};

// What read_profile() hands over, line by line in file order.
class ProfileHandler {
 public:
  virtual ~ProfileHandler() = default;
  virtual void on_meta(const std::string& /*key*/, const std::string& /*value*/) {}
  virtual void on_mapping(const ProfileMapping& /*m*/) {}
  virtual void on_comm(pid_t /*pid*/, const std::string& /*name*/) {}
  virtual void on_sample(const Sample& /*s*/) {}
  virtual void on_lost(uint64_t /*count*/) {}
};

// Reads a data file.  Throws sframe::Error: op::kOpen with the errno for a
// file that cannot be opened; EBADMSG (op::kReadProfile, "FILE:LINE") for a
// missing or wrong header, another format version, or a malformed line.
// Lines of unknown types are skipped (later minor additions).
void read_profile(const std::string& path, ProfileHandler* handler);
void read_profile(std::istream& in, const std::string& name, ProfileHandler* handler);

// Turns samples into stacks of frame names, root first: the process name
// (its `comm`, else "pid N"), the user frames outermost first, then the
// kernel frames, the leaf last.  User frames: the function (demangled,
// without parameters), "[object]" (the file's name) where the file has no
// symbol for it, "[unknown]" outside every known mapping.  Kernel frames:
// "name_[k]" through kernel (when given and usable), else one "[kernel]".
//
// Samples are counted by their addresses first; a distinct stack of
// addresses is symbolized once, before its process's next mmap or comm
// record changes what the addresses mean, or at folded().
class StackFolder : public ProfileHandler {
 public:
  // user: gets the file's mappings (add_mapping); kernel may be null.
  StackFolder(Symbolizer* user, const KernelSymbolizer* kernel);

  void on_mapping(const ProfileMapping& m) override;
  void on_comm(pid_t pid, const std::string& name) override;
  void on_sample(const Sample& s) override;
  void on_lost(uint64_t count) override { lost_ += count; }

  std::vector<std::string> frames(const Sample& s) { return fold(s.pid, s.kernel, s.user); }
  // Unique stacks sorted by frames.
  FoldedStacks folded() const;
  uint64_t samples() const { return samples_; }
  uint64_t lost() const { return lost_; }

 private:
  // A sample's addresses: user frames, then kernel frames, then the number
  // of user frames.
  using Addresses = std::vector<uint64_t>;
  struct AddressesHash {
    size_t operator()(const Addresses& a) const;
  };
  std::vector<std::string> fold(uint32_t pid, const std::vector<uint64_t>& kernel,
                                const std::vector<uint64_t>& user) const;
  // Symbolizes pid's pending stacks into stacks_.
  void flush(pid_t pid) const;

  Symbolizer* user_;
  const KernelSymbolizer* kernel_;
  std::map<pid_t, std::string> comm_;
  mutable std::map<pid_t, std::unordered_map<Addresses, uint64_t, AddressesHash>> pending_;
  mutable std::map<std::vector<std::string>, uint64_t> stacks_;
  uint64_t samples_ = 0, lost_ = 0;
};

// "root;...;leaf COUNT\n" per stack: the folded format of stackcollapse,
// read by flamegraph.pl, speedscope and inferno.  ';' and line breaks in a
// frame name become ':' and ' '.
std::string format_folded(const FoldedStacks& folded);

// Per function (frame name, root frames left out): samples where it is the
// leaf (self), and samples where it is anywhere in the stack (total, once
// per sample however often it recurs).
struct FunctionCount {
  std::string name;
  uint64_t self = 0;
  uint64_t total = 0;
};
uint64_t total_samples(const FoldedStacks& folded);
// The n functions with the most self samples (by_total: the most total
// samples), ties by the other count, then by name.
std::vector<FunctionCount> top_functions(const FoldedStacks& folded, size_t n, bool by_total);

}  // namespace sframe

#endif  // SFRAME_PROFILE_PROFILE_H
