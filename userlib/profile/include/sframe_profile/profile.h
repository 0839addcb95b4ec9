// sframe-profile: the data file of sframe-prof (docs/sframe-prof-format.md)
// and what `sframe-prof report` makes of it.
//
//   ProfileWriter w("sframe-prof.data");   // a temporary file, mode 0600
//   w.mapping({pid, start, end, offset, path, build_id});  // before samples needing it
//   w.comm(pid, "name");
//   w.sample(sample);                       // a session's Sample
//   w.close();                              // now at sframe-prof.data (.old: the previous)
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
#include <functional>
#include <istream>
#include <map>
#include <memory>
#include <set>
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

// The format version this library writes; it reads this one and version 1
// (the text format of earlier sframe-prof).
inline constexpr int kProfileFormatVersion = 2;
// The most frames of one list (user or kernel) of a sample in a file: the
// writer keeps the first (leaf side) kProfileMaxFrames, a reader rejects
// deeper stacks.  SFRAME_MAX_FRAMES of the uapi.
inline constexpr size_t kProfileMaxFrames = 4096;
// The largest record of a file (a reader rejects larger length fields).
inline constexpr size_t kProfileMaxRecord = size_t{1} << 20;

// An `mmap` line: an executable file mapping of a process.
struct ProfileMapping {
  pid_t pid = 0;
  uint64_t start = 0, end = 0, offset = 0;
  std::string path;
  std::string build_id;  // lowercase hex of NT_GNU_BUILD_ID; empty if unknown
};

// Writes a data file (version kProfileFormatVersion) in a temporary file of
// path's directory, mode 0600 (it holds kernel addresses and command lines),
// that close() puts in place: path itself is untouched until then, so a
// recording that fails, or a writer destroyed without close(), leaves the
// previous file as it was (and no temporary file behind).  Not copyable.
class ProfileWriter {
 public:
  // Creates the temporary file (O_TMPFILE; where the file system has none,
  // ".NAME.XXXXXX" next to path) and writes the header.  Throws
  // sframe::Error(op::kWriteProfile, path): EISDIR for a directory, the
  // errno of open().
  explicit ProfileWriter(const std::string& path);
  ~ProfileWriter();
  ProfileWriter(const ProfileWriter&) = delete;
  ProfileWriter& operator=(const ProfileWriter&) = delete;

  // Each writes one record (buffered).
  void meta(const std::string& key, const std::string& value);
  void mapping(const ProfileMapping& m);
  void comm(pid_t pid, const std::string& name);
  void sample(const Sample& s);
  void lost(uint64_t count);

  // Throw sframe::Error(op::kWriteProfile, path) on a write error.
  void flush();
  // Writes the end record, syncs, renames an existing path to "path.old"
  // (replacing that) and links the file in at path.
  void close();

 private:
  struct Encoder;
  void check();
  void record(int type, const std::string& payload);
  std::string path_;
  std::string temp_path_;  // the mkstemp name; empty for an O_TMPFILE file
  FILE* f_ = nullptr;
  bool committed_ = false;
  std::unique_ptr<Encoder> enc_;
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

// Reads a data file of version 2 or 1.  Throws sframe::Error: op::kOpen with
// the errno for a file that cannot be opened; EBADMSG (op::kReadProfile,
// "FILE at offset N" for version 2, "FILE:LINE" for version 1) for a
// missing or wrong header, another format version, a malformed, oversized
// or truncated record (a version 2 file ends with an end record).  Records
// (lines) of unknown types are skipped (later minor additions).  The
// handler may have received the records before a bad one.
void read_profile(const std::string& path, ProfileHandler* handler);
void read_profile(std::istream& in, const std::string& name, ProfileHandler* handler);

// Whether the file at a recorded mapping's path is the one recorded: the
// same build id.  Each file's build id is read once.
class BuildIdCheck {
 public:
  // Warnings go to stderr ("sframe-prof: warning: ...") unless set_warn().
  BuildIdCheck();
  explicit BuildIdCheck(std::function<void(const std::string&)> warn);
  void set_warn(std::function<void(const std::string&)> warn) { warn_ = std::move(warn); }
  // Gives sym the recorded mapping m, to be symbolized with the file at its
  // path only when matches(m): every consumer of a data file (StackFolder,
  // PprofBuilder, PerfScriptWriter) hands its mappings over this way.
  void add_mapping(Symbolizer* sym, const ProfileMapping& m);
  // True when m has no recorded build id, when no file can be read at its
  // path (nothing can be symbolized with it anyway), or when the file has
  // m.build_id (read through sym, from the object its symbols come from).
  // False when it has another or none: warn() is called once per (path,
  // recorded build id).
  bool matches(Symbolizer* sym, const ProfileMapping& m);

 private:
  std::function<void(const std::string&)> warn_;
  std::map<std::string, std::pair<bool, std::string>> files_;  // path: (readable, id)
  std::set<std::pair<std::string, std::string>> warned_;  // (path, recorded id)
};

// Turns samples into stacks of frame names, root first: the process name
// (its `comm`, else "pid N"), the user frames outermost first, then the
// kernel frames, the leaf last.  User frames: the function (demangled,
// without parameters), "[object]" (the file's name) where the file has no
// symbol for it, "[unknown]" outside every known mapping.  Kernel frames:
// "name_[k]" through kernel (when given and usable), else one "[kernel]".
// A mapping whose recorded build id differs from the file now at its path
// is not symbolized with that file (BuildIdCheck): its frames are
// "[object]" (and a warning goes to the warning sink, once per object).
//
// Samples are counted by their addresses first; a distinct stack of
// addresses is symbolized once, before its process's next mmap or comm
// record changes what the addresses mean, or at folded().
class StackFolder : public ProfileHandler {
 public:
  // user: gets the file's mappings (add_mapping); kernel may be null.
  // Warnings go to stderr ("sframe-prof: warning: ...") unless set_warning_sink().
  StackFolder(Symbolizer* user, const KernelSymbolizer* kernel);
  void set_warning_sink(std::function<void(const std::string&)> sink);

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
  BuildIdCheck build_ids_;
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
