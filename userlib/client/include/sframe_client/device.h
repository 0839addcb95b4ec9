// libsframe-client: the /dev/sframe_unwind device (uapi/sframe_unwind.h).
#ifndef SFRAME_CLIENT_DEVICE_H
#define SFRAME_CLIENT_DEVICE_H

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sframe_client/export.h"
#include "sframe_client/fd.h"
#include "sframe_unwind.h"

namespace sframe {

enum class StopReason : uint32_t {
  kNone = 0,  // not set by the module (never returned by a working module)
  kOutermost = SFRAME_STOP_OUTERMOST,
  kNoCoverage = SFRAME_STOP_NO_COVERAGE,
  kFault = SFRAME_STOP_FAULT,
  kLimit = SFRAME_STOP_LIMIT,
  kBadFrame = SFRAME_STOP_BAD_FRAME,
};

// "NO_COVERAGE" etc.; "STOP(<n>)" for unknown values.
SFRAME_CLIENT_API std::string to_string(StopReason reason);

// SFRAME_IOC_GET_STATS, see the uapi header for each counter.
struct Stats {
  uint32_t abi_version = 0;
  uint64_t sections = 0;
  uint64_t processes = 0;
  uint64_t registrations = 0;
  uint64_t registrations_rejected = 0;
  uint64_t unwinds = 0;
  uint64_t frames_sframe = 0;
  uint64_t frames_fp = 0;
  uint64_t unwind_faults = 0;
  uint64_t unwind_bad_frames = 0;
  uint64_t mm_sections = 0;
  uint64_t samples_deferred = 0;     // perf samples captured for sessions
  uint64_t samples_nmi = 0;          // ...of them in NMI context
  uint64_t sections_discovered = 0;  // registered by the module's discovery
  uint64_t supplied_bytes = 0;       // kernel memory held by supplied sections
  uint64_t forks_inherited = 0;      // fork children given their parent's sections
  uint64_t forks_not_inherited = 0;  // ...and those that could not be
  // Zero from a module older than SFRAME_STATS_SIZE_VER1:
  uint64_t walks_budget_exhausted = 0;  // walks ended by SFRAME_STOP_BUDGET
  uint64_t samples_timed_out = 0;       // session samples sent without user stack: task stayed in the kernel
  // Supplied bytes held now for the caller's user (real uid), each kernel
  // copy counted once, and that user's bound (UINT64_MAX: exempt).
  uint64_t user_supplied_bytes = 0;
  uint64_t user_supplied_limit = 0;
  // The user's sessions and their buffer bytes now, and the bounds.
  uint64_t user_sessions = 0;
  uint64_t user_sessions_limit = 0;
  uint64_t user_session_bytes = 0;
  uint64_t user_session_bytes_limit = 0;
};

// Where an entry of a process's registry came from (SFRAME_SOURCE_*).
enum class Source : uint32_t {
  kRegistered = SFRAME_SOURCE_REGISTERED,  // the process registered it
  kDiscovered = SFRAME_SOURCE_DISCOVERED,  // the module found it in a mapped file
  kSupplied = SFRAME_SOURCE_SUPPLIED,      // given by value (SFRAME_IOC_SUPPLY)
  kNone = SFRAME_SOURCE_NONE,              // a mapping discovery found without .sframe
  kFile = SFRAME_SOURCE_FILE,              // the file store's section for the mapped file
};

// The file store (SFRAME_IOC_FILE_*): its counters from SFRAME_IOC_GET_STATS,
// all zero from a module older than SFRAME_STATS_SIZE_VER2.  A struct of its
// own, so that Stats keeps its size (it is part of the ABI).
struct FileStoreStats {
  uint64_t entries = 0;      // files with a section now
  uint64_t bytes = 0;        // kernel memory their sections hold
  uint64_t bytes_limit = 0;  // the bound (module parameter file_max_kb)
  uint64_t attaches = 0;     // mappings covered from the store, ever
  uint64_t invalidated = 0;  // entries dropped because their file changed, ever
};

// perf's own user callchains walked by the module while its parameter
// perf_callchain is on (struct sframe_stats's callchain_*), all processes,
// ever; all zero from a module older than SFRAME_STATS_SIZE_VER3.  A struct
// of its own, so that Stats keeps its size.
struct PerfCallchainStats {
  uint64_t served = 0;               // callchains whose user part the module walked
  uint64_t declined = 0;             // left to perf's own walk (32-bit task, guest, ...)
  uint64_t frames = 0;               // return addresses given to perf
  uint64_t fp_continued = 0;         // walks that went on by frame pointers
  uint64_t truncated = 0;            // walks ended by perf's max_stack
  uint64_t discoveries = 0;          // deferred walks asked for, to find sections
  uint64_t discoveries_dropped = 0;  // ...not asked for: all in flight
};

// One entry of the file store (struct sframe_file_info).
using FileInfo = sframe_file_info;

// "registered", "discovered", "supplied", "none"; "source(<n>)" otherwise.
SFRAME_CLIENT_API std::string to_string(Source source);

// One entry of SFRAME_IOC_LIST_SECTIONS.
struct SectionInfo {
  uint64_t text_start = 0;
  uint64_t text_len = 0;
  uint64_t sframe_addr = 0;  // 0 for Source::kNone
  uint64_t sframe_len = 0;
  uint64_t covered_bytes = 0;  // text bytes its FDEs give rows for
  Source source = Source::kNone;
  uint32_t version = 0;
  uint32_t nr_fdes = 0;  // skipped ones included
  // FDEs the module skips: more than SFRAME_MAX_FRES_PER_FDE FREs, so no
  // rows.  (In what was the struct's tail padding: its size is unchanged.)
  uint32_t nr_fdes_skipped = 0;
};

// SFRAME_IOC_UNWIND_SELF.  frames[0] is the PC right after the system call
// instruction (inside Device::unwind_self), frames[1] the return address
// into unwind_self's caller, and so on.
struct UnwindResult {
  std::vector<uint64_t> frames;
  StopReason stop_reason = StopReason::kNone;
  uint32_t nr_sframe = 0;  // frames unwound with SFrame
  uint32_t nr_fp = 0;      // frames unwound with frame pointers
};

class Registration;

// An open /dev/sframe_unwind.  Movable, not copyable.  The descriptor
// (O_RDWR | O_CLOEXEC) is shared with the Registrations made through this
// Device and closed when the last of them and the Device are gone, so a
// Registration never outlives its descriptor.
class SFRAME_CLIENT_API Device {
 public:
  static constexpr uint32_t kDefaultMaxFrames = 512;

  // Opens SFRAME_UNWIND_DEVICE.  Throws sframe::Error:
  //   "cannot open /dev/sframe_unwind: No such file or directory (ENOENT)".
  Device();
  explicit Device(const std::string& path);
  Device(Device&&) noexcept = default;
  Device& operator=(Device&&) noexcept = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device() = default;

  int fd() const noexcept { return fd_ ? fd_->get() : -1; }
  const std::string& path() const noexcept { return path_; }

  // SFRAME_IOC_REGISTER.  object names the section in error messages
  // (default: the text range).  Throws sframe::Error(op::kRegister).
  void register_section(uint64_t sframe_addr, uint64_t sframe_len, uint64_t text_start,
                        uint64_t text_len, const std::string& object = {}) const;
  // Same, returning an owner that unregisters on destruction.
  Registration register_scoped(uint64_t sframe_addr, uint64_t sframe_len, uint64_t text_start,
                               uint64_t text_len, const std::string& object = {}) const;
  // SFRAME_IOC_UNREGISTER.  Throws sframe::Error(op::kUnregister), ENOENT
  // when no section has this text_start.
  void unregister_section(uint64_t text_start, const std::string& object = {}) const;

  // SFRAME_IOC_SUPPLY: a copy of the section bytes [data, data + len) for
  // the text [text_start, text_start + text_len) of process pid (0: this
  // one), where the section counts as mapped at sframe_addr.  Needs the
  // right to ptrace-attach to pid.  Throws sframe::Error(op::kSupply).
  void supply_section(pid_t pid, const void* data, uint64_t len, uint64_t sframe_addr,
                      uint64_t text_start, uint64_t text_len, const std::string& object = {}) const;
  // SFRAME_IOC_UNREGISTER with SFRAME_UNREGISTER_F_PID: forget the entry
  // of process pid starting at text_start.  Throws
  // sframe::Error(op::kUnregister).
  void unregister_section_of(pid_t pid, uint64_t text_start, const std::string& object = {}) const;
  // SFRAME_IOC_LIST_SECTIONS: process pid's entries (0: this process), in
  // text order.  Throws sframe::Error(op::kListSections).
  std::vector<SectionInfo> list_sections(pid_t pid = 0) const;

  // SFRAME_IOC_GET_STATS.  Throws sframe::Error(op::kGetStats).
  Stats stats() const;
  FileStoreStats file_store_stats() const;
  PerfCallchainStats perf_callchain_stats() const;

  // SFRAME_IOC_FILE_SUPPLY: the section [data, data + len) for the ELF file
  // open at fd, counted as loaded at sframe_vaddr at load bias 0, for every
  // mapping of the file in every process.  CAP_SYS_ADMIN.  Returns the
  // entry's id.  object names the file in errors.  Throws
  // sframe::Error(op::kFileSupply): EEXIST if the file has an entry and
  // replace is false, ETXTBSY if it is open for writing, and see the uapi.
  uint64_t supply_file(int fd, const void* data, uint64_t len, uint64_t sframe_vaddr,
                       bool replace, const std::string& object) const;
  // SFRAME_IOC_FILE_REMOVE: the entry id, or the entry of the file at fd.
  // Throws sframe::Error(op::kFileRemove), ENOENT when there is none, EINVAL
  // for id 0 (not an id: the module reads it as "the file at fd").
  void remove_file(uint64_t id) const;
  void remove_file_of(int fd, const std::string& object) const;
  // SFRAME_IOC_FILE_LIST: the store's entries, in id order.  Throws
  // sframe::Error(op::kFileList).
  std::vector<FileInfo> list_files() const;

  // SFRAME_IOC_UNWIND_SELF: the calling thread's stack, with the methods in
  // flags (SFRAME_UNWIND_F_*).  Throws sframe::Error(op::kUnwindSelf).
  //
  // The system call is NOT made through glibc's ioctl(): the kernel unwinds
  // from the registers saved at the syscall instruction, and glibc's wrapper
  // has neither .sframe nor a frame pointer, so every walk would stop in
  // libc.  This function is noinline, compiled with -Wa,--gsframe and
  // -fno-omit-frame-pointer, and issues the syscall itself with inline
  // assembly, so frames[0] lies in this function (covered by the .sframe of
  // whatever object links libsframe-client, once that object is registered)
  // and frames[1] is the return address into the caller.  Both the SFrame
  // and the frame-pointer method can therefore step out of it.
  //
  // Mind the callers' coverage: binutils 2.40 (Debian 12) writes no SFrame
  // FDE for a function whose CFI needs .cfi_escape.  GCC emits one
  // (DW_CFA_GNU_args_size) for a call that passes arguments on the stack
  // inside an exception region, e.g. register_scoped() with an object name
  // (7 arguments) in a function with destructors to run.  A walk reaching
  // such a function stops there with SFRAME_STOP_NO_COVERAGE.
  UnwindResult unwind_self(uint32_t max_frames = kDefaultMaxFrames,
                           uint32_t flags = SFRAME_UNWIND_F_SFRAME) const;

 private:
  std::shared_ptr<const UniqueFd> fd_;
  std::string path_;
};

// One registered section; unregisters it on destruction (errors ignored:
// the process may already have dropped it).  Movable, not copyable.
class SFRAME_CLIENT_API Registration {
 public:
  Registration() noexcept = default;
  Registration(Registration&& other) noexcept { *this = std::move(other); }
  Registration& operator=(Registration&& other) noexcept;
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;
  ~Registration() { reset(); }

  bool active() const noexcept { return fd_ != nullptr; }
  uint64_t sframe_addr() const noexcept { return sframe_addr_; }
  uint64_t sframe_len() const noexcept { return sframe_len_; }
  uint64_t text_start() const noexcept { return text_start_; }
  uint64_t text_len() const noexcept { return text_len_; }
  const std::string& object() const noexcept { return object_; }

  // Unregisters now; returns 0 or the errno of SFRAME_IOC_UNREGISTER (0 if
  // not active).
  int reset() noexcept;
  // Forgets the section without unregistering it.
  void release() noexcept { fd_.reset(); }

 private:
  friend class Device;
  std::shared_ptr<const UniqueFd> fd_;
  uint64_t sframe_addr_ = 0;
  uint64_t sframe_len_ = 0;
  uint64_t text_start_ = 0;
  uint64_t text_len_ = 0;
  std::string object_;
};

}  // namespace sframe

#endif  // SFRAME_CLIENT_DEVICE_H
