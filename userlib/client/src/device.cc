#include "sframe_client/device.h"

#include <fcntl.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>

#include "sframe_client/error.h"

namespace sframe {
namespace {

std::string range_name(const char* what, uint64_t start, uint64_t len) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%s 0x%" PRIx64 "-0x%" PRIx64, what, start, start + len);
  return buf;
}

std::string address_name(const char* what, uint64_t addr) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s 0x%" PRIx64, what, addr);
  return buf;
}

int do_ioctl(int fd, unsigned long request, void* arg) {
  int ret;
  do {
    ret = ::ioctl(fd, request, arg);
  } while (ret < 0 && errno == EINTR);
  return ret < 0 ? errno : 0;
}

int unregister_fd(int fd, uint64_t text_start, pid_t pid = 0, uint32_t flags = 0) {
  sframe_unregister req{};
  req.size = sizeof(req);
  req.flags = flags;
  req.text_start = text_start;
  req.pid = pid;
  return do_ioctl(fd, SFRAME_IOC_UNREGISTER, &req);
}

// SFRAME_IOC_GET_STATS, the whole struct: a module of an older ABI
// writes the fields it has, and the others stay 0.
sframe_stats get_stats(int fd, const std::string& path) {
  sframe_stats st{};
  st.size = sizeof(st);
  if (int err = do_ioctl(fd, SFRAME_IOC_GET_STATS, &st)) {
    throw Error(err, op::kGetStats, path);
  }
  return st;
}

std::string process_name(pid_t pid) {
  return pid ? "process " + std::to_string(pid) : std::string("this process");
}

}  // namespace

std::string to_string(StopReason reason) {
  switch (reason) {
    case StopReason::kNone:
      return "NONE";
    case StopReason::kOutermost:
      return "OUTERMOST";
    case StopReason::kNoCoverage:
      return "NO_COVERAGE";
    case StopReason::kFault:
      return "FAULT";
    case StopReason::kLimit:
      return "LIMIT";
    case StopReason::kBadFrame:
      return "BAD_FRAME";
  }
  return "STOP(" + std::to_string(static_cast<uint32_t>(reason)) + ")";
}

std::string to_string(Source source) {
  switch (source) {
    case Source::kRegistered:
      return "registered";
    case Source::kDiscovered:
      return "discovered";
    case Source::kSupplied:
      return "supplied";
    case Source::kNone:
      return "none";
    case Source::kFile:
      return "file";
  }
  return "source(" + std::to_string(static_cast<uint32_t>(source)) + ")";
}

Device::Device() : Device(SFRAME_UNWIND_DEVICE) {}

Device::Device(const std::string& path)
    : fd_(std::make_shared<const UniqueFd>(UniqueFd::open(path, O_RDWR))), path_(path) {}

void Device::register_section(uint64_t sframe_addr, uint64_t sframe_len, uint64_t text_start,
                              uint64_t text_len, const std::string& object) const {
  sframe_register req{};
  req.size = sizeof(req);
  req.sframe_addr = sframe_addr;
  req.sframe_len = sframe_len;
  req.text_start = text_start;
  req.text_len = text_len;
  if (int err = do_ioctl(fd(), SFRAME_IOC_REGISTER, &req)) {
    throw Error(err, op::kRegister,
                object.empty() ? range_name("text", text_start, text_len) : object);
  }
}

Registration Device::register_scoped(uint64_t sframe_addr, uint64_t sframe_len, uint64_t text_start,
                                     uint64_t text_len, const std::string& object) const {
  register_section(sframe_addr, sframe_len, text_start, text_len, object);
  Registration r;
  r.fd_ = fd_;
  r.sframe_addr_ = sframe_addr;
  r.sframe_len_ = sframe_len;
  r.text_start_ = text_start;
  r.text_len_ = text_len;
  r.object_ = object.empty() ? range_name("text", text_start, text_len) : object;
  return r;
}

void Device::unregister_section(uint64_t text_start, const std::string& object) const {
  if (int err = unregister_fd(fd(), text_start)) {
    throw Error(err, op::kUnregister,
                object.empty() ? address_name("text start", text_start) : object);
  }
}

void Device::supply_section(pid_t pid, const void* data, uint64_t len, uint64_t sframe_addr,
                            uint64_t text_start, uint64_t text_len,
                            const std::string& object) const {
  sframe_supply req{};
  req.size = sizeof(req);
  req.pid = pid;
  req.sframe_data = reinterpret_cast<uintptr_t>(data);
  req.sframe_len = len;
  req.sframe_addr = sframe_addr;
  req.text_start = text_start;
  req.text_len = text_len;
  if (int err = do_ioctl(fd(), SFRAME_IOC_SUPPLY, &req)) {
    throw Error(err, op::kSupply,
                (object.empty() ? range_name("text", text_start, text_len) : object) + " of " +
                    process_name(pid));
  }
}

void Device::unregister_section_of(pid_t pid, uint64_t text_start,
                                   const std::string& object) const {
  if (int err = unregister_fd(fd(), text_start, pid, SFRAME_UNREGISTER_F_PID)) {
    throw Error(err, op::kUnregister,
                (object.empty() ? address_name("text start", text_start) : object) + " of " +
                    process_name(pid));
  }
}

// nr_fdes_skipped went into what was SectionInfo's tail padding.
static_assert(sizeof(SectionInfo) == 56, "SectionInfo's size is part of the ABI");

std::vector<SectionInfo> Device::list_sections(pid_t pid) const {
  std::vector<sframe_section_info> raw;
  sframe_list_sections req{};
  // The registry may grow between the count and the copy: ask again.
  for (;;) {
    req = {};
    req.size = sizeof(req);
    req.pid = pid;
    req.max_entries = static_cast<uint32_t>(raw.size());
    req.entries = reinterpret_cast<uintptr_t>(raw.data());
    if (int err = do_ioctl(fd(), SFRAME_IOC_LIST_SECTIONS, &req)) {
      throw Error(err, op::kListSections, process_name(pid));
    }
    if (req.nr_entries <= raw.size()) break;
    raw.resize(req.nr_entries + 8);
  }
  std::vector<SectionInfo> out;
  out.reserve(req.nr_entries);
  for (uint32_t i = 0; i < req.nr_entries; i++) {
    const sframe_section_info& r = raw[i];
    SectionInfo info;
    info.text_start = r.text_start;
    info.text_len = r.text_len;
    info.sframe_addr = r.sframe_addr;
    info.sframe_len = r.sframe_len;
    info.covered_bytes = r.covered_bytes;
    info.source = static_cast<Source>(r.source);
    info.version = r.version;
    info.nr_fdes = r.nr_fdes;
    info.nr_fdes_skipped = r.nr_fdes_skipped;
    out.push_back(info);
  }
  return out;
}

uint64_t Device::supply_file(int file_fd, const void* data, uint64_t len, uint64_t sframe_vaddr,
                             bool replace, const std::string& object) const {
  sframe_file_supply req{};
  req.size = sizeof(req);
  req.flags = replace ? SFRAME_FILE_F_REPLACE : 0;
  req.fd = file_fd;
  req.sframe_data = reinterpret_cast<uintptr_t>(data);
  req.sframe_len = len;
  req.sframe_vaddr = sframe_vaddr;
  if (int err = do_ioctl(fd(), SFRAME_IOC_FILE_SUPPLY, &req)) {
    throw Error(err, op::kFileSupply, object);
  }
  return req.id;
}

void Device::remove_file(uint64_t id) const {
  sframe_file_remove req{};
  req.size = sizeof(req);
  req.id = id;
  // Id 0 asks the module for the entry of the file at req.fd (0 here: this
  // process's standard input), which is remove_file_of()'s request.
  if (id == 0) throw Error(EINVAL, op::kFileRemove, "id 0", "ids start at 1");
  if (int err = do_ioctl(fd(), SFRAME_IOC_FILE_REMOVE, &req)) {
    throw Error(err, op::kFileRemove, "id " + std::to_string(id));
  }
}

void Device::remove_file_of(int file_fd, const std::string& object) const {
  sframe_file_remove req{};
  req.size = sizeof(req);
  req.fd = file_fd;
  if (int err = do_ioctl(fd(), SFRAME_IOC_FILE_REMOVE, &req)) {
    throw Error(err, op::kFileRemove, object);
  }
}

std::vector<FileInfo> Device::list_files() const {
  std::vector<FileInfo> raw;
  sframe_file_list req{};
  // The store may grow between the count and the copy: ask again.
  for (;;) {
    req = {};
    req.size = sizeof(req);
    req.max_entries = static_cast<uint32_t>(raw.size());
    req.entries = reinterpret_cast<uintptr_t>(raw.data());
    if (int err = do_ioctl(fd(), SFRAME_IOC_FILE_LIST, &req)) {
      throw Error(err, op::kFileList, path_);
    }
    if (req.nr_entries <= raw.size()) break;
    raw.resize(req.nr_entries + 8);
  }
  raw.resize(req.nr_entries);
  return raw;
}

FileStoreStats Device::file_store_stats() const {
  const sframe_stats st = get_stats(fd(), path_);
  FileStoreStats s;
  s.entries = st.file_entries;
  s.bytes = st.file_bytes;
  s.bytes_limit = st.file_bytes_limit;
  s.attaches = st.file_attaches;
  s.invalidated = st.file_invalidated;
  return s;
}

PerfCallchainStats Device::perf_callchain_stats() const {
  const sframe_stats st = get_stats(fd(), path_);
  PerfCallchainStats s;
  s.served = st.callchain_served;
  s.declined = st.callchain_declined;
  s.frames = st.callchain_frames;
  s.fp_continued = st.callchain_fp_continued;
  s.truncated = st.callchain_truncated;
  s.discoveries = st.callchain_discoveries;
  s.discoveries_dropped = st.callchain_discoveries_dropped;
  return s;
}

Stats Device::stats() const {
  const sframe_stats st = get_stats(fd(), path_);
  Stats s;
  s.abi_version = st.abi_version;
  s.sections = st.sections;
  s.processes = st.processes;
  s.registrations = st.registrations;
  s.registrations_rejected = st.registrations_rejected;
  s.unwinds = st.unwinds;
  s.frames_sframe = st.frames_sframe;
  s.frames_fp = st.frames_fp;
  s.unwind_faults = st.unwind_faults;
  s.unwind_bad_frames = st.unwind_bad_frames;
  s.mm_sections = st.mm_sections;
  s.samples_deferred = st.samples_deferred;
  s.samples_nmi = st.samples_nmi;
  s.sections_discovered = st.sections_discovered;
  s.supplied_bytes = st.supplied_bytes;
  s.forks_inherited = st.forks_inherited;
  s.forks_not_inherited = st.forks_not_inherited;
  s.walks_budget_exhausted = st.walks_budget_exhausted;
  s.samples_timed_out = st.samples_timed_out;
  s.user_supplied_bytes = st.user_supplied_bytes;
  s.user_supplied_limit = st.user_supplied_limit;
  s.user_sessions = st.user_sessions;
  s.user_sessions_limit = st.user_sessions_limit;
  s.user_session_bytes = st.user_session_bytes;
  s.user_session_bytes_limit = st.user_session_bytes_limit;
  return s;
}

Registration& Registration::operator=(Registration&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::move(other.fd_);
    sframe_addr_ = other.sframe_addr_;
    sframe_len_ = other.sframe_len_;
    text_start_ = other.text_start_;
    text_len_ = other.text_len_;
    object_ = std::move(other.object_);
    other.fd_.reset();
  }
  return *this;
}

int Registration::reset() noexcept {
  if (!fd_) return 0;
  int err = unregister_fd(fd_->get(), text_start_);
  fd_.reset();
  return err;
}

}  // namespace sframe
