// The C API (sframe_client/sframe_client.h): a thin layer over the C++ classes.
// Every function catches everything at the boundary: no exception ever
// reaches a C caller (or a Go or Rust one).  The errno goes back as the
// return value and the message into a thread-local string.
#include "sframe_client/sframe_client.h"

#include <cxxabi.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "sframe_client/device.h"
#include "sframe_client/error.h"
#include "sframe_client/objects.h"
#include "sframe_client/session.h"

#ifndef SFRAME_CLIENT_VERSION_STRING
#error "SFRAME_CLIENT_VERSION_STRING must be defined (the project's version, see userlib/CMakeLists.txt)"
#endif

struct sframe_client_device {
  sframe::Device dev;
};

struct sframe_client_session {
  sframe::Session session;
  // Records of the last read not yet passed to a callback (one stopped).
  std::vector<sframe::Record> pending;
  size_t next = 0;
};

namespace {

// The first version's size of each struct: offset of the end of its last
// field in 0.1.0.  These never change; the structs may only grow at the end.
#define SFRAME_CLIENT_END_OF(type, field) (offsetof(type, field) + sizeof(((type*)nullptr)->field))
static_assert(SFRAME_CLIENT_END_OF(sframe_client_stats, user_session_bytes_limit) ==
              SFRAME_CLIENT_STATS_SZ_VER0);
static_assert(SFRAME_CLIENT_END_OF(sframe_client_section_info, nr_fdes_skipped) ==
              SFRAME_CLIENT_SECTION_INFO_SZ_VER0);
static_assert(SFRAME_CLIENT_END_OF(sframe_client_unwind_result, nr_fp) ==
              SFRAME_CLIENT_UNWIND_RESULT_SZ_VER0);
static_assert(SFRAME_CLIENT_END_OF(sframe_client_session_opts, reserved) ==
              SFRAME_CLIENT_SESSION_OPTS_SZ_VER0);
static_assert(SFRAME_CLIENT_END_OF(sframe_client_session_stats, unwinds) ==
              SFRAME_CLIENT_SESSION_STATS_SZ_VER0);
// No padding anywhere: SFRAME_CLIENT_OPTS's initializer then zeroes every
// byte the library reads.
static_assert(sizeof(sframe_client_stats) == SFRAME_CLIENT_STATS_SZ_VER0);
static_assert(sizeof(sframe_client_section_info) == SFRAME_CLIENT_SECTION_INFO_SZ_VER0);
static_assert(sizeof(sframe_client_unwind_result) == SFRAME_CLIENT_UNWIND_RESULT_SZ_VER0);
static_assert(sizeof(sframe_client_session_opts) == SFRAME_CLIENT_SESSION_OPTS_SZ_VER0);
static_assert(sizeof(sframe_client_session_stats) == SFRAME_CLIENT_SESSION_STATS_SZ_VER0);
static_assert(SFRAME_CLIENT_END_OF(sframe_client_record, lost) == sizeof(sframe_client_record));
// 0.2.0's structs, the same way.
static_assert(SFRAME_CLIENT_END_OF(sframe_client_file_info, reserved0) ==
              SFRAME_CLIENT_FILE_INFO_SZ_VER0);
static_assert(SFRAME_CLIENT_END_OF(sframe_client_file_store_stats, invalidated) ==
              SFRAME_CLIENT_FILE_STORE_STATS_SZ_VER0);
static_assert(sizeof(sframe_client_file_info) == SFRAME_CLIENT_FILE_INFO_SZ_VER0);
static_assert(sizeof(sframe_client_file_store_stats) == SFRAME_CLIENT_FILE_STORE_STATS_SZ_VER0);

thread_local std::string t_errmsg;

// Records a failure of operation op and returns -err.
int fail(int err, const char* op, const std::string& detail) {
  try {
    t_errmsg = sframe::Error(err, op, "", detail).what();
  } catch (...) {
    // No memory for the message: the errno still goes back.
  }
  return -err;
}

int fail_invalid(const char* fn, const char* what) { return fail(EINVAL, fn, what); }

// A copy of the thread's message (empty if there is no memory for one).
std::string saved_errmsg() noexcept {
  try {
    return t_errmsg;
  } catch (...) {
    return {};
  }
}

// Runs f (returning int >= 0, or int < 0 after fail()) and turns every
// exception into a negative errno with its message.
// Always inlined (with its lambda) into the entry point: in
// sframe_client_unwind_self, no frame of its own lies between the caller's
// and Device::unwind_self's.
template <typename F>
inline __attribute__((always_inline)) int guarded(const char* fn, F&& f) {
  try {
    return f();
  } catch (const sframe::Error& e) {
    try {
      t_errmsg = e.what();
    } catch (...) {
    }
    return e.err() > 0 ? -e.err() : -EIO;
  } catch (const std::bad_alloc&) {
    return fail(ENOMEM, fn, "out of memory");
  } catch (const abi::__forced_unwind&) {
    throw;  // thread cancellation (in poll()) must go on unwinding
  } catch (const std::exception& e) {
    return fail(EIO, fn, std::string("unexpected error: ") + e.what());
  } catch (...) {
    return fail(EIO, fn, "unexpected exception");
  }
}

// The caller's sz of a struct the library writes: at least ver0.  The
// library writes `known` bytes of its own and zeroes the rest up to sz.
bool out_size_ok(size_t sz, size_t ver0) { return sz >= ver0; }

template <typename T>
void copy_out(const T& mine, T* theirs) {
  const size_t sz = theirs->sz;
  const size_t n = sz < sizeof(T) ? sz : sizeof(T);
  // sz first, as the caller set it; then the fields, then zeroes.
  std::memcpy(reinterpret_cast<char*>(theirs) + sizeof(size_t),
              reinterpret_cast<const char*>(&mine) + sizeof(size_t), n - sizeof(size_t));
  if (sz > sizeof(T)) std::memset(reinterpret_cast<char*>(theirs) + sizeof(T), 0, sz - sizeof(T));
}

// A struct the library reads: bytes beyond what it knows must be zero.
bool tail_is_zero(const void* s, size_t sz, size_t known) {
  const auto* p = static_cast<const unsigned char*>(s);
  for (size_t i = known; i < sz; i++) {
    if (p[i] != 0) return false;
  }
  return true;
}

// The file open at fd, for a message: its path, else "fd N".
std::string fd_object(int fd) {
  char link[64], path[4096];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  const ssize_t n = fd >= 0 ? readlink(link, path, sizeof(path) - 1) : -1;
  if (n <= 0) return "fd " + std::to_string(fd);
  return std::string(path, static_cast<size_t>(n));
}

// Runs f, a call of the file store that names no file, and names the file
// open at fd in its error: the path is looked up on failure only.
template <typename F>
void naming_fd(int fd, F&& f) {
  try {
    f();
  } catch (const sframe::Error& e) {
    throw sframe::Error(e.err(), e.op(), fd_object(fd));
  }
}

// Names of errnos, as static strings (interned once): the C++ errno_name()
// returns std::string.
const std::map<int, std::string>& errno_names() {
  static const std::map<int, std::string>* names = [] {
    auto* m = new std::map<int, std::string>;
    // 1..4095: the kernel's errno range (MAX_ERRNO).
    for (int e = 1; e < 4096; e++) {
      std::string n = sframe::errno_name(e);
      if (n != "E" + std::to_string(e)) m->emplace(e, std::move(n));
    }
    return m;
  }();
  return *names;
}

void fill_record(const sframe::Record& r, sframe_client_record* out) {
  std::memset(out, 0, sizeof(*out));
  out->sz = sizeof(*out);
  out->type = r.type;
  if (r.is_sample()) {
    const sframe::Sample& s = r.sample;
    out->pid = s.pid;
    out->tid = s.tid;
    out->cpu = s.cpu;
    out->time = s.time;
    out->cookie = s.cookie;
    out->flags = s.flags;
    out->user_stop = static_cast<uint32_t>(s.user_stop);
    out->nr_kernel = static_cast<uint32_t>(s.kernel.size());
    out->nr_user = static_cast<uint32_t>(s.user.size());
    out->kernel = s.kernel.empty() ? nullptr : s.kernel.data();
    out->user = s.user.empty() ? nullptr : s.user.data();
  } else if (r.is_lost()) {
    out->lost = r.lost;
  }
}

// Passes records[*next, end) to fn.  Returns fn's first non-zero value
// (*next then points after that record), else 0; *delivered counts.
int deliver(const std::vector<sframe::Record>& records, size_t* next, sframe_client_record_fn fn,
            void* ctx, int* delivered) {
  while (*next < records.size()) {
    sframe_client_record rec;
    fill_record(records[*next], &rec);
    ++*next;
    ++*delivered;
    if (int ret = fn(ctx, &rec)) return ret;
  }
  return 0;
}

}  // namespace

extern "C" {

const char* sframe_client_errmsg(void) { return t_errmsg.c_str(); }

const char* sframe_client_errno_name(int err) {
  // -INT_MIN does not exist: count it as unnamed.
  const int e = err == INT_MIN ? INT_MIN : (err < 0 ? -err : err);
  try {
    const auto& names = errno_names();
    auto it = names.find(e);
    if (it != names.end()) return it->second.c_str();
  } catch (...) {
    // No memory for the table: the number below still says it.
  }
  static thread_local char unnamed[24];
  if (e == INT_MIN) {
    std::snprintf(unnamed, sizeof(unnamed), "E%u", 0x80000000u);
  } else {
    std::snprintf(unnamed, sizeof(unnamed), "E%d", e);
  }
  return unnamed;
}

const char* sframe_client_version(void) { return SFRAME_CLIENT_VERSION_STRING; }

// ---- the device ---------------------------------------------------------------

int sframe_client_open(const char* path, sframe_client_device** out) {
  static const char kFn[] = "sframe_client_open";
  if (out == nullptr) return fail_invalid(kFn, "out is NULL");
  *out = nullptr;
  return guarded(kFn, [&] {
    *out = new sframe_client_device{path ? sframe::Device(path) : sframe::Device()};
    return 0;
  });
}

void sframe_client_close(sframe_client_device* dev) { delete dev; }

int sframe_client_fd(const sframe_client_device* dev) {
  if (dev == nullptr) return fail_invalid("sframe_client_fd", "dev is NULL");
  return dev->dev.fd();
}

int sframe_client_register(sframe_client_device* dev, uint64_t sframe_addr, uint64_t sframe_len,
                           uint64_t text_start, uint64_t text_len) {
  static const char kFn[] = "sframe_client_register";
  if (dev == nullptr) return fail_invalid(kFn, "dev is NULL");
  return guarded(kFn, [&] {
    dev->dev.register_section(sframe_addr, sframe_len, text_start, text_len);
    return 0;
  });
}

int sframe_client_unregister(sframe_client_device* dev, uint64_t text_start) {
  static const char kFn[] = "sframe_client_unregister";
  if (dev == nullptr) return fail_invalid(kFn, "dev is NULL");
  return guarded(kFn, [&] {
    dev->dev.unregister_section(text_start);
    return 0;
  });
}

int sframe_client_supply(sframe_client_device* dev, pid_t pid, const void* data, uint64_t len,
                         uint64_t sframe_addr, uint64_t text_start, uint64_t text_len) {
  static const char kFn[] = "sframe_client_supply";
  if (dev == nullptr) return fail_invalid(kFn, "dev is NULL");
  return guarded(kFn, [&] {
    dev->dev.supply_section(pid, data, len, sframe_addr, text_start, text_len);
    return 0;
  });
}

int sframe_client_unregister_pid(sframe_client_device* dev, pid_t pid, uint64_t text_start) {
  static const char kFn[] = "sframe_client_unregister_pid";
  if (dev == nullptr) return fail_invalid(kFn, "dev is NULL");
  return guarded(kFn, [&] {
    dev->dev.unregister_section_of(pid, text_start);
    return 0;
  });
}

int sframe_client_list_sections(sframe_client_device* dev, pid_t pid,
                                sframe_client_section_info* entries, size_t entry_sz,
                                size_t max_entries) {
  static const char kFn[] = "sframe_client_list_sections";
  if (dev == nullptr) return fail_invalid(kFn, "dev is NULL");
  if (max_entries != 0 && entries == nullptr) {
    return fail_invalid(kFn, "entries is NULL with max_entries not 0");
  }
  if (max_entries != 0 && entry_sz < SFRAME_CLIENT_SECTION_INFO_SZ_VER0) {
    return fail_invalid(kFn, "entry_sz below SFRAME_CLIENT_SECTION_INFO_SZ_VER0");
  }
  return guarded(kFn, [&] {
    const std::vector<sframe::SectionInfo> all = dev->dev.list_sections(pid);
    auto* out = reinterpret_cast<unsigned char*>(entries);
    for (size_t i = 0; i < all.size() && i < max_entries; i++) {
      sframe_client_section_info e{};
      e.text_start = all[i].text_start;
      e.text_len = all[i].text_len;
      e.sframe_addr = all[i].sframe_addr;
      e.sframe_len = all[i].sframe_len;
      e.covered_bytes = all[i].covered_bytes;
      e.source = static_cast<uint32_t>(all[i].source);
      e.version = all[i].version;
      e.nr_fdes = all[i].nr_fdes;
      e.nr_fdes_skipped = all[i].nr_fdes_skipped;
      unsigned char* at = out + i * entry_sz;
      const size_t n = entry_sz < sizeof(e) ? entry_sz : sizeof(e);
      std::memcpy(at, &e, n);
      if (entry_sz > sizeof(e)) std::memset(at + sizeof(e), 0, entry_sz - sizeof(e));
    }
    // At most SFRAME_MAX_SECTIONS_PER_MM (4096) entries.
    return all.size() > static_cast<size_t>(INT_MAX) ? INT_MAX : static_cast<int>(all.size());
  });
}

int sframe_client_get_stats(sframe_client_device* dev, sframe_client_stats* st) {
  static const char kFn[] = "sframe_client_get_stats";
  if (dev == nullptr) return fail_invalid(kFn, "dev is NULL");
  if (st == nullptr) return fail_invalid(kFn, "st is NULL");
  if (!out_size_ok(st->sz, SFRAME_CLIENT_STATS_SZ_VER0)) {
    return fail_invalid(kFn, "st->sz below SFRAME_CLIENT_STATS_SZ_VER0");
  }
  return guarded(kFn, [&] {
    const sframe::Stats s = dev->dev.stats();
    sframe_client_stats c{};
    c.abi_version = s.abi_version;
    c.sections = s.sections;
    c.processes = s.processes;
    c.registrations = s.registrations;
    c.registrations_rejected = s.registrations_rejected;
    c.unwinds = s.unwinds;
    c.frames_sframe = s.frames_sframe;
    c.frames_fp = s.frames_fp;
    c.unwind_faults = s.unwind_faults;
    c.unwind_bad_frames = s.unwind_bad_frames;
    c.mm_sections = s.mm_sections;
    c.samples_deferred = s.samples_deferred;
    c.samples_nmi = s.samples_nmi;
    c.sections_discovered = s.sections_discovered;
    c.supplied_bytes = s.supplied_bytes;
    c.forks_inherited = s.forks_inherited;
    c.forks_not_inherited = s.forks_not_inherited;
    c.walks_budget_exhausted = s.walks_budget_exhausted;
    c.samples_timed_out = s.samples_timed_out;
    c.user_supplied_bytes = s.user_supplied_bytes;
    c.user_supplied_limit = s.user_supplied_limit;
    c.user_sessions = s.user_sessions;
    c.user_sessions_limit = s.user_sessions_limit;
    c.user_session_bytes = s.user_session_bytes;
    c.user_session_bytes_limit = s.user_session_bytes_limit;
    copy_out(c, st);
    return 0;
  });
}

// ---- the file store --------------------------------------------------------------

int sframe_client_file_supply(sframe_client_device* dev, int fd, const void* data, uint64_t len,
                              uint64_t sframe_vaddr, uint32_t flags, uint64_t* id) {
  static const char kFn[] = "sframe_client_file_supply";
  if (dev == nullptr) return fail_invalid(kFn, "dev is NULL");
  if (flags & ~static_cast<uint32_t>(SFRAME_FILE_F_REPLACE)) {
    return fail_invalid(kFn, "flags other than SFRAME_FILE_F_REPLACE");
  }
  return guarded(kFn, [&] {
    uint64_t got = 0;
    naming_fd(fd, [&] {
      got = dev->dev.supply_file(fd, data, len, sframe_vaddr,
                                 (flags & SFRAME_FILE_F_REPLACE) != 0, std::string());
    });
    if (id != nullptr) *id = got;
    return 0;
  });
}

int sframe_client_file_remove(sframe_client_device* dev, uint64_t id) {
  static const char kFn[] = "sframe_client_file_remove";
  if (dev == nullptr) return fail_invalid(kFn, "dev is NULL");
  // The ioctl reads id 0 as "the entry of fd", which is not this call.
  if (id == 0) return fail_invalid(kFn, "id is 0 (no entry has it)");
  return guarded(kFn, [&] {
    dev->dev.remove_file(id);
    return 0;
  });
}

int sframe_client_file_remove_fd(sframe_client_device* dev, int fd) {
  static const char kFn[] = "sframe_client_file_remove_fd";
  if (dev == nullptr) return fail_invalid(kFn, "dev is NULL");
  return guarded(kFn, [&] {
    naming_fd(fd, [&] { dev->dev.remove_file_of(fd, std::string()); });
    return 0;
  });
}

int sframe_client_file_list(sframe_client_device* dev, sframe_client_file_info* entries,
                            size_t entry_sz, size_t max_entries) {
  static const char kFn[] = "sframe_client_file_list";
  if (dev == nullptr) return fail_invalid(kFn, "dev is NULL");
  if (max_entries != 0 && entries == nullptr) {
    return fail_invalid(kFn, "entries is NULL with max_entries not 0");
  }
  if (max_entries != 0 && entry_sz < SFRAME_CLIENT_FILE_INFO_SZ_VER0) {
    return fail_invalid(kFn, "entry_sz below SFRAME_CLIENT_FILE_INFO_SZ_VER0");
  }
  return guarded(kFn, [&] {
    const std::vector<sframe::FileInfo> all = dev->dev.list_files();
    auto* out = reinterpret_cast<unsigned char*>(entries);
    for (size_t i = 0; i < all.size() && i < max_entries; i++) {
      sframe_client_file_info e{};
      e.id = all[i].id;
      e.dev = all[i].dev;
      e.ino = all[i].ino;
      e.file_size = all[i].file_size;
      e.sframe_len = all[i].sframe_len;
      e.sframe_vaddr = all[i].sframe_vaddr;
      e.text_vaddr = all[i].text_vaddr;
      e.text_len = all[i].text_len;
      e.covered_bytes = all[i].covered_bytes;
      e.attaches = all[i].attaches;
      e.version = all[i].version;
      e.nr_fdes = all[i].nr_fdes;
      e.nr_fdes_skipped = all[i].nr_fdes_skipped;
      unsigned char* at = out + i * entry_sz;
      const size_t n = entry_sz < sizeof(e) ? entry_sz : sizeof(e);
      std::memcpy(at, &e, n);
      if (entry_sz > sizeof(e)) std::memset(at + sizeof(e), 0, entry_sz - sizeof(e));
    }
    // At most SFRAME_FILE_MAX_ENTRIES (65536) entries.
    return all.size() > static_cast<size_t>(INT_MAX) ? INT_MAX : static_cast<int>(all.size());
  });
}

int sframe_client_file_store_get_stats(sframe_client_device* dev,
                                       sframe_client_file_store_stats* st) {
  static const char kFn[] = "sframe_client_file_store_get_stats";
  if (dev == nullptr) return fail_invalid(kFn, "dev is NULL");
  if (st == nullptr) return fail_invalid(kFn, "st is NULL");
  if (!out_size_ok(st->sz, SFRAME_CLIENT_FILE_STORE_STATS_SZ_VER0)) {
    return fail_invalid(kFn, "st->sz below SFRAME_CLIENT_FILE_STORE_STATS_SZ_VER0");
  }
  return guarded(kFn, [&] {
    const sframe::FileStoreStats s = dev->dev.file_store_stats();
    sframe_client_file_store_stats c{};
    c.entries = s.entries;
    c.bytes = s.bytes;
    c.bytes_limit = s.bytes_limit;
    c.attaches = s.attaches;
    c.invalidated = s.invalidated;
    copy_out(c, st);
    return 0;
  });
}

int sframe_client_perf_callchain_get_stats(sframe_client_device* dev,
                                           sframe_client_perf_callchain_stats* st) {
  static const char kFn[] = "sframe_client_perf_callchain_get_stats";
  if (dev == nullptr) return fail_invalid(kFn, "dev is NULL");
  if (st == nullptr) return fail_invalid(kFn, "st is NULL");
  if (!out_size_ok(st->sz, SFRAME_CLIENT_PERF_CALLCHAIN_STATS_SZ_VER0)) {
    return fail_invalid(kFn, "st->sz below SFRAME_CLIENT_PERF_CALLCHAIN_STATS_SZ_VER0");
  }
  return guarded(kFn, [&] {
    const sframe::PerfCallchainStats s = dev->dev.perf_callchain_stats();
    sframe_client_perf_callchain_stats c{};
    c.served = s.served;
    c.declined = s.declined;
    c.frames = s.frames;
    c.fp_continued = s.fp_continued;
    c.truncated = s.truncated;
    c.discoveries = s.discoveries;
    c.discoveries_dropped = s.discoveries_dropped;
    copy_out(c, st);
    return 0;
  });
}

// noinline, and something after the call: frames[1] is then a return
// address inside this function (see the header).
__attribute__((noinline)) int sframe_client_unwind_self(sframe_client_device* dev,
                                                         uint64_t* frames, uint32_t max_frames,
                                                         uint32_t flags,
                                                         sframe_client_unwind_result* res) {
  static const char kFn[] = "sframe_client_unwind_self";
  if (dev == nullptr) return fail_invalid(kFn, "dev is NULL");
  if (frames == nullptr) return fail_invalid(kFn, "frames is NULL");
  if (res != nullptr && !out_size_ok(res->sz, SFRAME_CLIENT_UNWIND_RESULT_SZ_VER0)) {
    return fail_invalid(kFn, "res->sz below SFRAME_CLIENT_UNWIND_RESULT_SZ_VER0");
  }
  return guarded(kFn, [&]() __attribute__((always_inline)) {
    const sframe::UnwindResult r = dev->dev.unwind_self(max_frames, flags);
    const size_t n = r.frames.size() <= max_frames ? r.frames.size() : max_frames;
    if (n) std::memcpy(frames, r.frames.data(), n * sizeof(uint64_t));
    if (res != nullptr) {
      sframe_client_unwind_result c{};
      c.nr_frames = static_cast<uint32_t>(n);
      c.stop_reason = static_cast<uint32_t>(r.stop_reason);
      c.nr_sframe = r.nr_sframe;
      c.nr_fp = r.nr_fp;
      copy_out(c, res);
    }
    return static_cast<int>(n);  // at most SFRAME_MAX_FRAMES
  });
}

int sframe_client_register_loaded_objects(sframe_client_device* dev, size_t* nr_registered) {
  static const char kFn[] = "sframe_client_register_loaded_objects";
  if (dev == nullptr) return fail_invalid(kFn, "dev is NULL");
  return guarded(kFn, [&] {
    // On a failure the Registrations made so far unregister as the
    // exception unwinds; on success they are released: registered for good.
    std::vector<sframe::Registration> regs = sframe::register_loaded_objects(dev->dev);
    for (sframe::Registration& r : regs) r.release();
    if (nr_registered != nullptr) *nr_registered = regs.size();
    return 0;
  });
}

int sframe_client_register_object_containing(sframe_client_device* dev, const void* addr,
                                             uint64_t* text_start) {
  static const char kFn[] = "sframe_client_register_object_containing";
  if (dev == nullptr) return fail_invalid(kFn, "dev is NULL");
  return guarded(kFn, [&] {
    sframe::Registration r = sframe::register_object_containing(dev->dev, addr);
    if (text_start != nullptr) *text_start = r.text_start();
    r.release();
    return 0;
  });
}

// ---- sessions -------------------------------------------------------------------

int sframe_client_session_start(uint32_t target_type, pid_t target_id,
                                const sframe_client_session_opts* opts,
                                sframe_client_session** out) {
  static const char kFn[] = "sframe_client_session_start";
  if (out == nullptr) return fail_invalid(kFn, "out is NULL");
  *out = nullptr;
  if (opts != nullptr) {
    if (opts->sz < SFRAME_CLIENT_SESSION_OPTS_SZ_VER0) {
      return fail_invalid(kFn, "opts->sz below SFRAME_CLIENT_SESSION_OPTS_SZ_VER0");
    }
    if (opts->reserved != 0) return fail_invalid(kFn, "opts->reserved not 0");
    if (!tail_is_zero(opts, opts->sz, sizeof(*opts))) {
      return fail(E2BIG, kFn, "opts has non-zero fields this library does not know");
    }
  }
  return guarded(kFn, [&] {
    sframe::SessionOptions o;
    if (opts != nullptr) {
      o.max_user_frames = opts->max_user_frames;
      o.max_kernel_frames = opts->max_kernel_frames;
      o.buffer_size = opts->buffer_size;
      o.unwind_flags = opts->unwind_flags;
      o.wakeup_bytes = opts->wakeup_bytes;
      if (opts->device != nullptr) o.device = opts->device;
    }
    auto* s = new sframe_client_session;
    try {
      s->session = sframe::Session::start(static_cast<sframe::Target>(target_type), target_id, o);
    } catch (...) {
      delete s;
      throw;
    }
    *out = s;
    return 0;
  });
}

void sframe_client_session_close(sframe_client_session* sess) { delete sess; }

int sframe_client_session_fd(const sframe_client_session* sess) {
  if (sess == nullptr) return fail_invalid("sframe_client_session_fd", "sess is NULL");
  return sess->session.fd();
}

uint32_t sframe_client_session_out_flags(const sframe_client_session* sess) {
  return sess ? sess->session.out_flags() : 0;
}

int sframe_client_session_get_stats(const sframe_client_session* sess,
                                sframe_client_session_stats* st) {
  static const char kFn[] = "sframe_client_session_get_stats";
  if (sess == nullptr) return fail_invalid(kFn, "sess is NULL");
  if (st == nullptr) return fail_invalid(kFn, "st is NULL");
  if (!out_size_ok(st->sz, SFRAME_CLIENT_SESSION_STATS_SZ_VER0)) {
    return fail_invalid(kFn, "st->sz below SFRAME_CLIENT_SESSION_STATS_SZ_VER0");
  }
  return guarded(kFn, [&] {
    const sframe::SessionStats s = sess->session.stats();
    sframe_client_session_stats c{};
    c.samples = s.samples;
    c.records = s.records;
    c.lost = s.lost;
    c.lost_capture = s.lost_capture;
    c.unwinds = s.unwinds;
    copy_out(c, st);
    return 0;
  });
}

int sframe_client_session_poll(sframe_client_session* sess, int timeout_ms) {
  static const char kFn[] = "sframe_client_session_poll";
  if (sess == nullptr) return fail_invalid(kFn, "sess is NULL");
  if (sess->next < sess->pending.size()) return 1;
  return guarded(kFn, [&] { return sess->session.wait(timeout_ms) ? 1 : 0; });
}

int sframe_client_session_read(sframe_client_session* sess, sframe_client_record_fn fn,
                               void* ctx) {
  static const char kFn[] = "sframe_client_session_read";
  if (sess == nullptr) return fail_invalid(kFn, "sess is NULL");
  if (fn == nullptr) return fail_invalid(kFn, "fn is NULL");
  int delivered = 0;
  // Kept from a call that fn stopped: those first, and no read.
  if (sess->next < sess->pending.size()) {
    int ret = deliver(sess->pending, &sess->next, fn, ctx, &delivered);
    return ret ? ret : delivered;
  }
  sess->pending.clear();
  sess->next = 0;
  std::string before = saved_errmsg();
  int err = guarded(kFn, [&] {
    sess->session.read(&sess->pending);
    return 0;
  });
  // Records before a malformed one were appended: they go to fn first.
  int ret = deliver(sess->pending, &sess->next, fn, ctx, &delivered);
  if (ret) {
    // fn stopped before the error: this call did not fail.
    if (err) t_errmsg.swap(before);
    return ret;
  }
  return err ? err : delivered;
}

int sframe_client_parse_records(const void* buf, size_t len, sframe_client_record_fn fn,
                                void* ctx) {
  static const char kFn[] = "sframe_client_parse_records";
  if (fn == nullptr) return fail_invalid(kFn, "fn is NULL");
  if (buf == nullptr && len != 0) return fail_invalid(kFn, "buf is NULL with len not 0");
  // A read(2) returns less than 2 GiB; more would overflow the count.
  if (len > static_cast<size_t>(INT_MAX)) return fail_invalid(kFn, "len above INT_MAX");
  std::vector<sframe::Record> records;
  std::string before = saved_errmsg();
  int err = guarded(kFn, [&] {
    sframe::parse_records(buf, len, &records);
    return 0;
  });
  size_t next = 0;
  int delivered = 0;
  int ret = deliver(records, &next, fn, ctx, &delivered);
  if (ret) {
    // fn stopped before the malformed record: this call did not fail.
    if (err) t_errmsg.swap(before);
    return ret;
  }
  return err ? err : delivered;
}

}  // extern "C"
