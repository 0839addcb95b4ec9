// sframe-client: a small command-line front end of libsframe-client.
//
//   sframe-client stats           counters of the module (SFRAME_IOC_GET_STATS)
//   sframe-client record [-F HZ] [-d SECONDS] [-q] [-u] (-p PID | -a | -- COMMAND ...)
//                                 profile through a session: each stitched
//                                 stack symbolized, then a summary (record.cc)
//   sframe-client sections FILE   the .sframe section of an ELF file: size,
//                                 version, flags, FDE and FRE counts
//                                 (with --fdes, one line per FDE)
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "sframe_client/sframe_client.h"

#ifdef SFRAME_CLIENT_HAVE_DECODER
#include "sframe_source_mem.h"
#endif

int cmd_record(int argc, char** argv);  // record.cc

namespace {

int usage(FILE* out) {
  std::fprintf(out,
               "usage: sframe-client stats [DEVICE]\n"
               "       sframe-client record [-F HZ] [-d SECONDS] [-q] [-u] "
               "(-p PID | -a | -- COMMAND [ARGS...])\n"
#ifdef SFRAME_CLIENT_HAVE_DECODER
               "       sframe-client sections [--fdes] FILE\n"
#endif
  );
  return out == stderr ? 2 : 0;
}

int cmd_stats(int argc, char** argv) {
  sframe::Device dev(argc > 0 ? argv[0] : SFRAME_UNWIND_DEVICE);
  sframe::Stats s = dev.stats();
  std::printf("abi_version            %" PRIu32 "\n", s.abi_version);
  std::printf("sections               %" PRIu64 "\n", s.sections);
  std::printf("processes              %" PRIu64 "\n", s.processes);
  std::printf("registrations          %" PRIu64 "\n", s.registrations);
  std::printf("registrations_rejected %" PRIu64 "\n", s.registrations_rejected);
  std::printf("unwinds                %" PRIu64 "\n", s.unwinds);
  std::printf("frames_sframe          %" PRIu64 "\n", s.frames_sframe);
  std::printf("frames_fp              %" PRIu64 "\n", s.frames_fp);
  std::printf("unwind_faults          %" PRIu64 "\n", s.unwind_faults);
  std::printf("unwind_bad_frames      %" PRIu64 "\n", s.unwind_bad_frames);
  std::printf("mm_sections            %" PRIu64 "\n", s.mm_sections);
  std::printf("samples_deferred       %" PRIu64 "\n", s.samples_deferred);
  std::printf("samples_nmi            %" PRIu64 "\n", s.samples_nmi);
  return 0;
}

#ifdef SFRAME_CLIENT_HAVE_DECODER
int cmd_sections(int argc, char** argv) {
  bool fdes = false;
  const char* path = nullptr;
  for (int i = 0; i < argc; i++) {
    if (std::strcmp(argv[i], "--fdes") == 0) {
      fdes = true;
    } else if (!path) {
      path = argv[i];
    } else {
      return usage(stderr);
    }
  }
  if (!path) return usage(stderr);

  sframe::FileSframe f = sframe::read_sframe_from_file(path);
  sframe_source src;
  sframe_source_mem_init(&src, f.bytes.data(), f.bytes.size());
  sframe_section sec;
  int ret = sframe_section_init(&sec, &src, f.address, f.bytes.size());
  std::printf("%s: .sframe at 0x%" PRIx64 ", %zu bytes\n", path, f.address, f.bytes.size());
  if (ret != 0) {
    std::printf("  not readable by the decoder: %s (%s)\n", std::strerror(-ret),
                sframe::errno_name(-ret).c_str());
    return 1;
  }
  std::printf(
      "  version %u, flags 0x%x%s%s%s, abi/arch %u, fixed RA offset %d, fixed FP offset %d\n",
      sec.version, sec.flags, (sec.flags & SFRAME_F_FDE_SORTED) ? " FDE_SORTED" : "",
      (sec.flags & SFRAME_F_FRAME_POINTER) ? " FRAME_POINTER" : "",
      (sec.flags & SFRAME_F_FDE_FUNC_START_PCREL) ? " FUNC_START_PCREL" : "", sec.abi_arch,
      sec.fixed_ra_offset, sec.fixed_fp_offset);
  std::printf("  %" PRIu32 " FDEs, %" PRIu32 " FREs, %" PRIu32 " FRE bytes\n", sec.num_fdes,
              sec.num_fres, sec.fre_len);
  if (fdes) {
    for (uint32_t i = 0; i < sec.num_fdes; i++) {
      sframe_fde fde;
      ret = sframe_get_fde(&sec, i, &fde);
      if (ret != 0) {
        std::printf("  FDE %" PRIu32 ": %s\n", i, std::strerror(-ret));
        return 1;
      }
      std::printf("  FDE %" PRIu32 ": 0x%" PRIx64 " size %" PRIu32 ", %" PRIu32 " FREs%s\n", i,
                  fde.func_start, fde.func_size, fde.num_fres,
                  fde.pc_type == SFRAME_PC_MASK ? ", PC mask" : "");
    }
  }
  return 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(stderr);
  const std::string cmd = argv[1];
  try {
    if (cmd == "stats") return cmd_stats(argc - 2, argv + 2);
    if (cmd == "record") return cmd_record(argc - 2, argv + 2);
#ifdef SFRAME_CLIENT_HAVE_DECODER
    if (cmd == "sections") return cmd_sections(argc - 2, argv + 2);
#endif
    if (cmd == "-h" || cmd == "--help" || cmd == "help") return usage(stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sframe-client: %s\n", e.what());
    return 1;
  }
  return usage(stderr);
}
