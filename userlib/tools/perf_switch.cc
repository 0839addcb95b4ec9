// sframe-client perf on|off|status: the module's perf_callchain parameter,
// which makes stock perf's user callchains (perf record -g, BPF's user
// stacks; on 7.x also perf record --call-graph fp,defer) walked with SFrame
// (module/perf_callchain.c, module/perf_deferred.c).
//
// The switch is the parameter itself, not an ioctl: it is root's (mode
// 0644 in sysfs), as perf's own settings in /proc/sys/kernel are, and a
// write that cannot hook the kernel function fails with the kernel's
// error, which is told here by name.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "sframe_client/device.h"
#include "sframe_client/error.h"
#include "sframe_client/fd.h"

namespace {

const char kParam[] = "/sys/module/sframe_unwind/parameters/perf_callchain";
const char kEnabled[] = "/sys/kernel/tracing/enabled_functions";
const char kHooked[] = "perf_callchain_user";
// perf's deferred user callchains (7.x), hooked with the other where the
// kernel has it.
const char kHookedDeferred[] = "unwind_user";
const char kModprobeConf[] = "/etc/modprobe.d/sframe-unwind-perf.conf";

int perf_usage(FILE* out) {
  std::fprintf(out,
               "usage: sframe-client perf on|off|status\n"
               "  on      perf's user callchains (perf record -g, BPF's user stacks) walked\n"
               "          with SFrame by the module (root)\n"
               "  off     perf's own frame-pointer walk again (root)\n"
               "  status  the switch, and whether %s is replaced now\n",
               kHooked);
  return out == stdout ? 0 : 2;
}

// What a failed access to the parameter means, for the message.
std::string why(int err, bool writing) {
  switch (err) {
    case ENOENT:
      return "the module sframe_unwind is not loaded, or is older than the switch (modprobe "
             "sframe_unwind)";
    case EACCES:
    case EPERM:
      return writing ? "only root may switch it" : "not readable";
    case EBUSY:
      return std::string("another ftrace user that modifies the instruction pointer (a "
                         "livepatch?) holds ") +
             kHooked + " or " + kHookedDeferred;
    default:
      return std::strerror(err);
  }
}

// The parameter's value: 1 on, 0 off, -errno when it cannot be read.
int read_switch() {
  const sframe::UniqueFd fd(open(kParam, O_RDONLY | O_CLOEXEC));
  if (!fd) return -errno;
  char c = 0;
  const ssize_t n = read(fd.get(), &c, 1);
  if (n != 1) return n < 0 ? -errno : -EIO;
  return c == 'Y' ? 1 : 0;
}

// 0, or -errno: the kernel's refusal of the write comes back from write(2).
int write_switch(bool on) {
  const sframe::UniqueFd fd(open(kParam, O_WRONLY | O_CLOEXEC));
  if (!fd) return -errno;
  const char v = on ? 'Y' : 'N';
  const ssize_t n = write(fd.get(), &v, 1);
  if (n != 1) return n < 0 ? -errno : -EIO;
  return 0;
}

// Whether ftrace lists the function fn as hooked: "yes", "no", or why it
// cannot tell (tracefs is root's).
std::string hooked_now(const std::string& fn) {
  std::ifstream in(kEnabled);
  if (!in) {
    return std::string("unknown (") + kEnabled + ": " + std::strerror(errno) + ")";
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, fn.size(), fn) == 0 && (line.size() == fn.size() || line[fn.size()] == ' ')) {
      return "yes";
    }
  }
  return "no";
}

int status() {
  const int v = read_switch();
  if (v < 0) {
    std::fprintf(stderr, "sframe-client perf: %s: %s (%s)\n", kParam, why(-v, false).c_str(),
                 sframe::errno_name(-v).c_str());
    return 1;
  }
  std::printf("perf_callchain: %s (%s)\n", v ? "on" : "off", kParam);
  std::printf("%s replaced by the module: %s\n", kHooked, hooked_now(kHooked).c_str());
  // Switched on, the module hooks both or neither (the switch fails): on
  // and not hooked, the kernel has no unwind_user() (before 7.x).
  std::string deferred = hooked_now(kHookedDeferred);
  if (v && deferred == "no") deferred += " (this kernel has none: 7.x only)";
  std::printf("%s (--call-graph fp,defer) replaced by the module: %s\n", kHookedDeferred,
              deferred.c_str());
  std::printf(
      "%s: perf record -g, --call-graph fp,defer (7.x) and BPF's user stacks are walked by %s\n"
      "to keep it on after a reboot: echo 'options sframe_unwind perf_callchain=1' > %s\n",
      v ? "on" : "off", v ? "the module, with SFrame" : "perf, by frame pointers", kModprobeConf);
  // What the hook did since the module was loaded (all processes).
  try {
    const sframe::PerfCallchainStats c = sframe::Device().perf_callchain_stats();
    std::printf("since the module was loaded: %" PRIu64 " callchains walked by the module (%" PRIu64
                " return addresses, %" PRIu64 " went on by frame pointers, %" PRIu64
                " ended by perf's max_stack), %" PRIu64 " left to perf's own walk\n",
                c.served, c.frames, c.fp_continued, c.truncated, c.declined);
  } catch (const sframe::Error& e) {
    std::printf("since the module was loaded: unknown (%s)\n", e.what());
  }
  return 0;
}

int set(bool on) {
  const int ret = write_switch(on);
  if (ret < 0) {
    std::fprintf(stderr, "sframe-client perf %s: %s: %s (%s)\n", on ? "on" : "off", kParam,
                 why(-ret, true).c_str(), sframe::errno_name(-ret).c_str());
    return 1;
  }
  std::printf("perf_callchain: %s\n", on ? "on" : "off");
  return 0;
}

}  // namespace

int cmd_perf(int argc, char** argv) {
  if (argc != 1) return perf_usage(stderr);
  const std::string what = argv[0];
  if (what == "status") return status();
  if (what == "on") return set(true);
  if (what == "off") return set(false);
  if (what == "-h" || what == "--help") return perf_usage(stdout);
  return perf_usage(stderr);
}
