// libsframe-audit.so: an LD_AUDIT library (rtld-audit(7)) that registers the
// .sframe of every object the dynamic loader maps with /dev/sframe_unwind,
// for systems where the module's own discovery is off:
//
//   LD_AUDIT=/usr/lib/x86_64-linux-gnu/sframe-unwind/libsframe-audit.so prog
//
// (where the sframe-tools package installs it).
//
// la_objopen(): the object's segments are mapped (not yet relocated, which
// does not matter: .sframe lives in a read-only PT_LOAD).  Its program
// headers are found (FromLoader, else FromAuxv, else FromFile),
// sframe::describe_object() gives the same .sframe and text ranges as
// sframe::loaded_objects(), and an object with PT_GNU_SFRAME is registered
// (SFRAME_IOC_REGISTER).  Its text start is kept in the loader's per-object
// cookie, and la_objclose() (dlclose(), exit) unregisters it
// (SFRAME_IOC_UNREGISTER).
//
// The library lives in a link-map namespace of its own, with its own libc:
// dl_iterate_phdr() called from here lists that namespace (this library, its
// libc, ld.so), never the program's objects.  Nothing here may abort the
// program: every failure is silent unless SFRAME_AUDIT_VERBOSE is set (1: one
// line on stderr per failure; 2: also one per registration).
// SFRAME_AUDIT_DEVICE overrides the device path (ignored, like every variable
// here, in secure-execution mode).  No exceptions: the only library code
// used, describe_object(), throws nothing.
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sframe_client/objects.h"
#include "sframe_unwind.h"

#define SFRAME_AUDIT_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using Ehdr = ElfW(Ehdr);
using Phdr = ElfW(Phdr);

// As the module's discovery: ld.so allows more, no real object has more.
constexpr size_t kMaxPhdrs = 64;
// RTLD_DI_PHDR (glibc 2.36), an enumerator, not a macro: its value here so
// that the library also builds against older headers.
constexpr int kRtldDiPhdr = 11;

struct AuditState {
  char device[256] = SFRAME_UNWIND_DEVICE;
  int verbose = 0;
  int fd = -1;
  // What fd is, to notice that the program closed it (and maybe reused the
  // number for something else).
  dev_t st_dev = 0;
  ino_t st_ino = 0;
  dev_t st_rdev = 0;
  bool unavailable = false;  // open failed: do not try again
  bool no_dlinfo = false;    // SFRAME_AUDIT_NO_DLINFO=1 (tests the fallbacks)
};

// The loader calls la_objopen and la_objclose with its lock held: one at a
// time.
AuditState g;

__attribute__((format(printf, 2, 3))) void Say(int level, const char* fmt, ...) {
  if (g.verbose < level) return;
  char buf[512];
  int n = std::snprintf(buf, sizeof(buf), "sframe-audit: ");
  va_list ap;
  va_start(ap, fmt);
  int m = std::vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  n += m;
  if (n > static_cast<int>(sizeof(buf)) - 2) n = sizeof(buf) - 2;
  buf[n++] = '\n';
  ssize_t ignored = ::write(STDERR_FILENO, buf, n);
  (void)ignored;
}

const char* NameOf(const link_map* map) {
  return (map->l_name != nullptr && map->l_name[0] != '\0') ? map->l_name : "main program";
}

// The device, opened on first use.  -1 if it cannot be opened.
int DeviceFd() {
  if (g.unavailable) return -1;
  struct stat st;
  if (g.fd >= 0) {
    if (::fstat(g.fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_dev == g.st_dev &&
        st.st_ino == g.st_ino && st.st_rdev == g.st_rdev) {
      return g.fd;
    }
    g.fd = -1;  // not ours any more: never close it
  }
  int fd;
  do {
    fd = ::open(g.device, O_RDWR | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    int err = errno;
    g.unavailable = true;
    Say(1, "cannot open %s: %s; nothing registered", g.device, std::strerror(err));
    return -1;
  }
  if (::fstat(fd, &st) == 0) {
    g.st_dev = st.st_dev;
    g.st_ino = st.st_ino;
    g.st_rdev = st.st_rdev;
  }
  g.fd = fd;
  return fd;
}

int Ioctl(int fd, unsigned long request, void* arg) {
  int ret;
  do {
    ret = ::ioctl(fd, request, arg);
  } while (ret < 0 && errno == EINTR);
  return ret < 0 ? errno : 0;
}

// Whether phdr[0, n) are map's: its dynamic section is where the loader
// says (l_ld) at load bias l_addr.
bool Matches(const link_map* map, const Phdr* phdr, size_t n) {
  bool load = false, dynamic = false;
  for (size_t i = 0; i < n; i++) {
    if (phdr[i].p_type == PT_LOAD) load = true;
    if (phdr[i].p_type == PT_DYNAMIC &&
        map->l_addr + phdr[i].p_vaddr == reinterpret_cast<uintptr_t>(map->l_ld)) {
      dynamic = true;
    }
  }
  return load && dynamic;
}

bool UsableEhdr(const Ehdr& eh) {
  return std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
         eh.e_phentsize == sizeof(Phdr) && eh.e_phnum != 0 && eh.e_phnum <= kMaxPhdrs;
}

// 1. The loader's own record (l_phdr, l_phnum), through dlinfo(RTLD_DI_PHDR)
// of glibc 2.36 and later: right for every object, whatever its layout.
size_t FromLoader(link_map* map, Phdr* out) {
  if (g.no_dlinfo) return 0;
  const Phdr* phdr = nullptr;
  int n = ::dlinfo(map, kRtldDiPhdr, &phdr);  // -1 on an older glibc
  if (n <= 0 || static_cast<size_t>(n) > kMaxPhdrs || phdr == nullptr) return 0;
  std::memcpy(out, phdr, n * sizeof(Phdr));
  return Matches(map, out, n) ? n : 0;
}

// 2. The program the kernel started (or ld.so, when run as a command): the
// kernel's AT_PHDR, which ld.so itself uses for it.
size_t FromAuxv(const link_map* map, Phdr* out) {
  const auto* phdr = reinterpret_cast<const Phdr*>(::getauxval(AT_PHDR));
  size_t n = ::getauxval(AT_PHNUM);
  if (phdr == nullptr || n == 0 || n > kMaxPhdrs || ::getauxval(AT_PHENT) != sizeof(Phdr)) {
    return 0;
  }
  std::memcpy(out, phdr, n * sizeof(Phdr));
  for (size_t i = 0; i < n; i++) {
    if (out[i].p_type != PT_PHDR) continue;
    uintptr_t bias = reinterpret_cast<uintptr_t>(phdr) - out[i].p_vaddr;
    return bias == map->l_addr && Matches(map, out, n) ? n : 0;
  }
  return 0;
}

bool ReadFile(int fd, void* buf, size_t len, off_t pos) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = ::pread(fd, p, len, pos);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    pos += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

// 3. The file.  Not the ELF header at l_addr in memory: an object linked at
// a nonzero address has none there (and reading there could fault).
size_t FromFile(const link_map* map, Phdr* out) {
  const char* path =
      (map->l_name != nullptr && map->l_name[0] != '\0') ? map->l_name : "/proc/self/exe";
  int fd;
  do {
    fd = ::open(path, O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return 0;
  Ehdr eh;
  size_t n = 0;
  if (ReadFile(fd, &eh, sizeof(eh), 0) && UsableEhdr(eh) &&
      ReadFile(fd, out, eh.e_phnum * sizeof(Phdr), static_cast<off_t>(eh.e_phoff)) &&
      Matches(map, out, eh.e_phnum)) {
    n = eh.e_phnum;
  }
  ::close(fd);
  return n;
}

bool IsVdso(const link_map* map) {
  uintptr_t vdso = ::getauxval(AT_SYSINFO_EHDR);
  return vdso != 0 && map->l_addr == vdso;
}

}  // namespace

SFRAME_AUDIT_EXPORT unsigned int la_version(unsigned int version) {
  const char* v = ::secure_getenv("SFRAME_AUDIT_VERBOSE");
  if (v != nullptr) g.verbose = std::atoi(v);
  const char* nd = ::secure_getenv("SFRAME_AUDIT_NO_DLINFO");
  g.no_dlinfo = nd != nullptr && std::strcmp(nd, "1") == 0;
  const char* d = ::secure_getenv("SFRAME_AUDIT_DEVICE");
  if (d != nullptr && d[0] != '\0' && std::strlen(d) < sizeof(g.device)) {
    std::strcpy(g.device, d);
  }
  // Only la_objopen and la_objclose are used, which version 1 has: accept an
  // older loader's version, else ours.
  return version < LAV_CURRENT ? version : LAV_CURRENT;
}

// Returns 0: no la_symbind calls wanted for any object.
SFRAME_AUDIT_EXPORT unsigned int la_objopen(struct link_map* map, Lmid_t lmid, uintptr_t* cookie) {
  (void)lmid;
  *cookie = 0;  // 0: nothing to unregister at la_objclose
  if (IsVdso(map)) return 0;
  Phdr phdr[kMaxPhdrs];
  const char* source = "loader";
  size_t n = FromLoader(map, phdr);
  if (n == 0) {
    source = "auxv";
    n = FromAuxv(map, phdr);
  }
  if (n == 0) {
    source = "file";
    n = FromFile(map, phdr);
  }
  if (n == 0) {
    Say(1, "%s: program headers not found; not registered", NameOf(map));
    return 0;
  }
  const sframe::LoadedObject obj = sframe::describe_object(map->l_addr, phdr, n);
  if (!obj.has_sframe() || !obj.has_text()) return 0;
  int fd = DeviceFd();
  if (fd < 0) return 0;
  sframe_register req{};
  req.size = sizeof(req);
  req.sframe_addr = obj.sframe_addr;
  req.sframe_len = obj.sframe_len;
  req.text_start = obj.text_start;
  req.text_len = obj.text_len;
  if (int err = Ioctl(fd, SFRAME_IOC_REGISTER, &req)) {
    Say(1, "register %s (text 0x%" PRIx64 "-0x%" PRIx64 "): %s", NameOf(map), obj.text_start,
        obj.text_start + obj.text_len, std::strerror(err));
    return 0;
  }
  Say(2,
      "registered %s: .sframe 0x%" PRIx64 " (%" PRIu64 " bytes), text 0x%" PRIx64 "-0x%" PRIx64
      " (program headers from %s)",
      NameOf(map), obj.sframe_addr, obj.sframe_len, obj.text_start, obj.text_start + obj.text_len,
      source);
  *cookie = static_cast<uintptr_t>(obj.text_start);
  return 0;
}

SFRAME_AUDIT_EXPORT unsigned int la_objclose(uintptr_t* cookie) {
  const uint64_t text_start = *cookie;
  if (text_start == 0) return 0;
  *cookie = 0;
  int fd = DeviceFd();
  if (fd < 0) return 0;
  sframe_unregister req{};
  req.size = sizeof(req);
  req.text_start = text_start;
  int err = Ioctl(fd, SFRAME_IOC_UNREGISTER, &req);
  // ENOENT: the process dropped it already, or is a fork()ed child (which
  // starts with no sections).
  if (err != 0 && err != ENOENT) {
    Say(1, "unregister text 0x%" PRIx64 ": %s", text_start, std::strerror(err));
  } else if (err == 0) {
    Say(2, "unregistered text 0x%" PRIx64, text_start);
  }
  return 0;
}
