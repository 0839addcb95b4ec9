// report_bench: what `sframe-prof report` spends on a large profile: a data
// file of SAMPLES samples (default 1,000,000) of 20 user frames each, all in
// a large C++ library (Debian 12's libstdc++.so.6, its ~5,000 functions of
// .dynsym; the program's own copy, so the mappings are real), drawn from
// STACKS distinct stacks (default 10,000: 200,000 distinct addresses, each
// a random function at a random offset inside it).  Prints the time of each
// step and ns per frame; asserts nothing.
//
//   build/bench/report_bench [SAMPLES] [STACKS]
//
// Steps: reading the file alone (a handler that does nothing), report's
// folding (read + symbolize + fold: StackFolder, what --top, --folded and
// --svg do before formatting), then --format pprof (PprofBuilder + gzip)
// and --format perf-script (to /dev/null).
#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "sframe_client/objects.h"
#include "sframe_profile/perf_script.h"
#include "sframe_profile/pprof_writer.h"
#include "sframe_profile/profile.h"
#include "sframe_profile/symbolizer.h"

namespace {

struct Func {
  uint64_t value, size;
};

// The sized functions of path's .dynsym.
std::vector<Func> dynsym_functions(const std::string& path) {
  std::vector<Func> out;
  elf_version(EV_CURRENT);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  for (Elf_Scn* scn = elf ? elf_nextscn(elf, nullptr) : nullptr; scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || sh.sh_entsize == 0) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; i++) {
      GElf_Sym sym;
      if (gelf_getsym(data, static_cast<int>(i), &sym) && GELF_ST_TYPE(sym.st_info) == STT_FUNC &&
          sym.st_shndx != SHN_UNDEF && sym.st_size > 1) {
        out.push_back({sym.st_value, sym.st_size});
      }
    }
  }
  if (elf) elf_end(elf);
  close(fd);
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Null : sframe::ProfileHandler {
  uint64_t n = 0;
  void on_sample(const sframe::Sample& s) override { n += s.user.size(); }
};

}  // namespace

int main(int argc, char** argv) {
  const uint64_t samples = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000000;
  const size_t stacks = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 10000;
  constexpr size_t kFrames = 20;

  // libstdc++ as this process has it mapped.
  void* terminate = dlsym(RTLD_DEFAULT, "_ZSt9terminatev");
  auto obj = terminate ? sframe::loaded_object_containing(terminate) : std::nullopt;
  if (!obj) {
    std::fprintf(stderr, "report_bench: libstdc++ not found in this process\n");
    return 1;
  }
  const std::vector<Func> funcs = dynsym_functions(obj->path);
  std::vector<sframe::FileMapping> maps;
  sframe::read_file_mappings(0, &maps);
  if (funcs.empty() || maps.empty()) {
    std::fprintf(stderr, "report_bench: no functions in %s\n", obj->path.c_str());
    return 1;
  }

  const std::string path = "/tmp/report_bench." + std::to_string(getpid()) + ".data";
  const pid_t pid = getpid();
  std::mt19937_64 rng(42);
  std::vector<std::vector<uint64_t>> distinct(stacks);
  for (auto& st : distinct) {
    for (size_t i = 0; i < kFrames; i++) {
      const Func& f = funcs[rng() % funcs.size()];
      st.push_back(obj->base + f.value + 1 + rng() % (f.size - 1));
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  {
    sframe::ProfileWriter w(path);
    w.meta("hz", "4000");
    for (const sframe::FileMapping& m : maps) {
      if (m.path == obj->path && m.executable) {
        w.mapping({pid, m.start, m.end, m.offset, m.path, ""});
      }
    }
    w.comm(pid, "report_bench");
    sframe::Sample s;
    s.pid = s.tid = static_cast<uint32_t>(pid);
    for (uint64_t i = 0; i < samples; i++) {
      s.time = 1000000000 + i * 250000;
      s.user = distinct[rng() % distinct.size()];
      w.sample(s);
    }
    w.close();
  }
  const double t_write = seconds_since(t0);
  const double frames = double(samples) * kFrames;
  std::printf("report_bench: %" PRIu64 " samples x %zu frames from %zu distinct stacks in %s "
              "(%zu functions)\n",
              samples, kFrames, stacks, obj->path.c_str(), funcs.size());
  std::printf("%-34s %10s %12s\n", "step", "seconds", "ns/frame");
  auto row = [&](const char* what, double s) {
    std::printf("%-34s %10.3f %12.1f\n", what, s, s * 1e9 / frames);
  };
  row("write the data file", t_write);

  t0 = std::chrono::steady_clock::now();
  Null null;
  sframe::read_profile(path, &null);
  const double t_read = seconds_since(t0);
  row("read the data file alone", t_read);

  t0 = std::chrono::steady_clock::now();
  {
    sframe::Symbolizer sym;
    sframe::StackFolder folder(&sym, nullptr);
    sframe::read_profile(path, &folder);
    const sframe::FoldedStacks folded = folder.folded();
    const auto top = sframe::top_functions(folded, 20, false);
    if (top.empty()) std::printf("(no functions)\n");
  }
  const double t_report = seconds_since(t0);
  row("report (read + symbolize + fold)", t_report);
  row("  of which symbolize + fold", t_report - t_read);

  t0 = std::chrono::steady_clock::now();
  size_t pprof_bytes = 0;
  {
    sframe::Symbolizer sym;
    sframe::PprofBuilder pprof(&sym, nullptr);
    sframe::read_profile(path, &pprof);
    pprof_bytes = pprof.gzipped().size();
  }
  row("report --format pprof", seconds_since(t0));

  t0 = std::chrono::steady_clock::now();
  {
    FILE* devnull = std::fopen("/dev/null", "we");
    sframe::Symbolizer sym;
    sframe::PerfScriptWriter script(devnull, &sym, nullptr);
    sframe::read_profile(path, &script);
    std::fclose(devnull);
  }
  row("report --format perf-script", seconds_since(t0));
  std::printf("pprof: %zu bytes gzipped\n", pprof_bytes);
  unlink(path.c_str());
  return 0;
}
