// sframe-client: a small command-line front end of libsframe-client.
//
//   sframe-client stats           counters of the module (SFRAME_IOC_GET_STATS)
//   sframe-client record [-F HZ] [-d SECONDS] [-q] [-u] (-p PID | -a | -- COMMAND ...)
//                                 profile through a session: each stitched
//                                 stack symbolized, then a summary (record.cc)
//   sframe-client sections FILE   the .sframe section of an ELF file: size,
//                                 version, flags, FDE and FRE counts
//                                 (with --fdes, one line per FDE)
//   sframe-client dump FILE       every FDE and row of FILE's .sframe, in the
//                                 shape of readelf --sframe
//   sframe-client gen ELF -o FILE [-3] [-v] [--standard]
//                                 SFrame made from ELF's .eh_frame, written
//                                 to FILE (an ELF file `dump` reads); -3
//                                 makes version 3; what stays uncovered is
//                                 counted by reason (rows, text bytes), and
//                                 with -v listed row by row; --standard
//                                 leaves out this project's extension
//                                 (CFA = *(reg + off) + c), for libsframe
//   sframe-client list [PID]      what the module has for a process: each
//                                 entry's text, source (registered,
//                                 discovered, supplied, none), coverage,
//                                 FDEs skipped for too many FREs
//   sframe-client supply PID FILE...
//                                 hand the .sframe of each FILE (as mapped
//                                 in PID) to the module for PID
//   sframe-client file-supply [--replace] FILE...
//                                 make SFrame for each ELF FILE from its
//                                 .eh_frame and keep it in the module's
//                                 file store, for every mapping of FILE
//                                 in every process (CAP_SYS_ADMIN)
//   sframe-client file-remove FILE|ID...
//                                 drop FILE's (or entry ID's) section
//   sframe-client files           the file store's entries
//   sframe-client coverage [--state-dir DIR] [PID]
//                                 what sframe-coverd covers: the store, the
//                                 files not covered and why; with PID,
//                                 each file the process maps executable and
//                                 what covers it (or why nothing does)
//   sframe-client perf on|off|status
//                                 stock perf's user callchains (perf
//                                 record -g, BPF's user stacks) walked
//                                 with SFrame by the module, or not (the
//                                 perf_callchain parameter; perf_switch.cc)
//   sframe-client flamegraph [-t TITLE] [FOLDED_FILE] > out.svg
//                                 an interactive SVG flame graph of folded
//                                 stacks ("a;b;c COUNT" lines, stdin if no
//                                 file; see sframe_client/flamegraph.h)
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "sframe_client/sframe_client.hpp"
#include "sframe_gen/eh_frame.h"
#include "sframe_gen/sframe_cache.h"
#include "sframe_gen/store_coverage.h"
#include "sframe_gen/supply.h"
#include "sframe_object/maps.h"
#include "sframe_object/object_file.h"
#include "sframe_profile/flamegraph.h"
#include "sframe_profile/symbolizer.h"

#ifdef SFRAME_CLIENT_HAVE_DECODER
#include "sframe_source_mem.h"
#endif

int cmd_record(int argc, char** argv);  // record.cc
int cmd_perf(int argc, char** argv);    // perf_switch.cc
#ifdef SFRAME_CLIENT_HAVE_DECODER
int cmd_dump(int argc, char** argv);  // dump.cc
#endif

namespace {

int usage(FILE* out) {
  std::fprintf(out,
               "usage: sframe-client stats [DEVICE]\n"
               "       sframe-client record [-F HZ] [-d SECONDS] [-q] [-u] [-E] "
               "(-p PID | -a | -- COMMAND [ARGS...])\n"
               "       sframe-client list [PID]\n"
               "       sframe-client supply PID FILE...\n"
               "       sframe-client file-supply [--replace] FILE...\n"
               "       sframe-client coverage [--state-dir DIR] [PID]\n"
               "       sframe-client file-remove FILE|ID...\n"
               "       sframe-client files\n"
               "       sframe-client flamegraph [-t TITLE] [FOLDED_FILE] > out.svg\n"
               "       sframe-client perf on|off|status\n"
#ifdef SFRAME_CLIENT_HAVE_DECODER
               "       sframe-client sections [--fdes] FILE\n"
               "       sframe-client dump FILE\n"
               "       sframe-client gen ELF -o FILE [-3] [-v] [--standard]\n"
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
  std::printf("sections_discovered    %" PRIu64 "\n", s.sections_discovered);
  std::printf("supplied_bytes         %" PRIu64 "\n", s.supplied_bytes);
  std::printf("forks_inherited        %" PRIu64 "\n", s.forks_inherited);
  std::printf("forks_not_inherited    %" PRIu64 "\n", s.forks_not_inherited);
  std::printf("walks_budget_exhausted %" PRIu64 "\n", s.walks_budget_exhausted);
  std::printf("samples_timed_out      %" PRIu64 "\n", s.samples_timed_out);
  // What this user holds, against its bounds ("unbounded" when exempt).
  auto held = [](const char* name, uint64_t now, uint64_t limit) {
    if (limit == UINT64_MAX) {
      std::printf("%-22s %" PRIu64 " (unbounded)\n", name, now);
    } else {
      std::printf("%-22s %" PRIu64 " of %" PRIu64 "\n", name, now, limit);
    }
  };
  held("user_supplied_bytes", s.user_supplied_bytes, s.user_supplied_limit);
  held("user_sessions", s.user_sessions, s.user_sessions_limit);
  held("user_session_bytes", s.user_session_bytes, s.user_session_bytes_limit);
  const sframe::FileStoreStats f = dev.file_store_stats();
  std::printf("file_entries           %" PRIu64 "\n", f.entries);
  held("file_bytes", f.bytes, f.bytes_limit);
  std::printf("file_attaches          %" PRIu64 "\n", f.attaches);
  std::printf("file_invalidated       %" PRIu64 "\n", f.invalidated);
  const sframe::PerfCallchainStats c = dev.perf_callchain_stats();
  std::printf("callchain_served       %" PRIu64 "\n", c.served);
  std::printf("callchain_declined     %" PRIu64 "\n", c.declined);
  std::printf("callchain_frames       %" PRIu64 "\n", c.frames);
  std::printf("callchain_fp_continued %" PRIu64 "\n", c.fp_continued);
  std::printf("callchain_truncated    %" PRIu64 "\n", c.truncated);
  std::printf("callchain_discoveries  %" PRIu64 " (dropped %" PRIu64 ")\n", c.discoveries,
              c.discoveries_dropped);
  return 0;
}

int cmd_file_supply(int argc, char** argv) {
  bool replace = false;
  int first = 0;
  if (argc > 0 && std::strcmp(argv[0], "--replace") == 0) {
    replace = true;
    first = 1;
  }
  if (first >= argc) return usage(stderr);
  sframe::Device dev;
  for (int i = first; i < argc; i++) {
    // One open file: the bytes generated are those of the inode supplied.
    sframe::OpenedFile opened = sframe::open_object_file(argv[i]);
    sframe::UniqueFd fd;
    fd.reset(dup(opened.fd.get()));
    if (!fd) throw sframe::Error(errno, sframe::op::kOpen, argv[i]);
    sframe::GeneratedSframe g =
        sframe::generate_sframe(sframe::ObjectFile::read(std::move(opened), argv[i]));
    uint64_t id = dev.supply_file(fd.get(), g.bytes.data(), g.bytes.size(), g.section_vaddr,
                                  replace, argv[i]);
    std::printf("%s: entry %" PRIu64 ", %zu bytes of SFrame\n", argv[i], id, g.bytes.size());
  }
  return 0;
}

int cmd_file_remove(int argc, char** argv) {
  if (argc < 1) return usage(stderr);
  sframe::Device dev;
  for (int i = 0; i < argc; i++) {
    char* end = nullptr;
    unsigned long long id = std::strtoull(argv[i], &end, 10);
    if (end != argv[i] && *end == '\0' && id) {
      dev.remove_file(id);
    } else {
      sframe::UniqueFd fd = sframe::UniqueFd::open(argv[i], O_RDONLY);
      dev.remove_file_of(fd.get(), argv[i]);
    }
  }
  return 0;
}

int cmd_files(int argc, char**) {
  if (argc) return usage(stderr);
  sframe::Device dev;
  std::printf("%6s %-12s %10s %10s %10s %3s %6s %4s %8s\n", "ID", "DEV:INODE", "FILESIZE", "SFRAME",
              "COVERED", "VER", "FDES", "SKIP", "MAPPINGS");
  for (const sframe::FileInfo& f : dev.list_files()) {
    char key[40];
    std::snprintf(key, sizeof(key), "%" PRIx64 ":%" PRIu64, static_cast<uint64_t>(f.dev),
                  static_cast<uint64_t>(f.ino));
    std::printf("%6" PRIu64 " %-12s %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %3" PRIu32
                " %6" PRIu32 " %4" PRIu32 " %8" PRIu64 "\n",
                static_cast<uint64_t>(f.id), key, static_cast<uint64_t>(f.file_size),
                static_cast<uint64_t>(f.sframe_len), static_cast<uint64_t>(f.covered_bytes),
                f.version, f.nr_fdes, f.nr_fdes_skipped, static_cast<uint64_t>(f.attaches));
  }
  return 0;
}

// A pid argument: digits only.
bool parse_pid(const char* arg, pid_t* pid) {
  char* end = nullptr;
  long v = std::strtol(arg, &end, 10);
  if (end == arg || *end != '\0' || v <= 0 || v > INT32_MAX) return false;
  *pid = static_cast<pid_t>(v);
  return true;
}

// What is mapped at addr in process pid, as its maps name it ("" if
// nothing, or the maps cannot be read).
std::string mapped_file(pid_t pid, uint64_t addr) {
  try {
    for (const sframe::MapsEntry& m : sframe::read_maps(pid)) {
      if (addr >= m.start && addr < m.end) return m.name();
    }
  } catch (const sframe::Error&) {
    // Gone, or not ours.
  }
  return {};
}

int cmd_list(int argc, char** argv) {
  pid_t pid = 0;
  if (argc > 1 || (argc == 1 && !parse_pid(argv[0], &pid))) return usage(stderr);
  sframe::Device dev;
  std::vector<sframe::SectionInfo> entries = dev.list_sections(pid);
  uint64_t text = 0, covered = 0, skipped = 0;
  // SKIP: FDEs the module gives no rows (more than SFRAME_MAX_FRES_PER_FDE
  // FREs); their text is not in COVERED.
  std::printf("%-33s %10s %-10s %3s %6s %4s %10s  %s\n", "TEXT", "BYTES", "SOURCE", "VER", "FDES",
              "SKIP", "COVERED", "OBJECT");
  for (const auto& e : entries) {
    char range[40];
    std::snprintf(range, sizeof(range), "%" PRIx64 "-%" PRIx64, e.text_start,
                  e.text_start + e.text_len);
    std::printf("%-33s %10" PRIu64 " %-10s %3" PRIu32 " %6" PRIu32 " %4" PRIu32 " %10" PRIu64
                "  %s\n",
                range, e.text_len, sframe::to_string(e.source).c_str(), e.version, e.nr_fdes,
                e.nr_fdes_skipped, e.covered_bytes, mapped_file(pid, e.text_start).c_str());
    text += e.text_len;
    covered += e.covered_bytes;
    skipped += e.nr_fdes_skipped;
  }
  std::printf("%zu entries, %" PRIu64 " text bytes, %" PRIu64 " covered by FDEs", entries.size(),
              text, covered);
  if (skipped) {
    std::printf("; %" PRIu64 " FDEs skipped (more than %u FREs: no rows)", skipped,
                static_cast<unsigned>(SFRAME_MAX_FRES_PER_FDE));
  }
  std::printf("\n");
  return 0;
}

// ---- coverage: what sframe-coverd did, and what covers a process ---------------

// The service's status, or an empty one (the reason in *why).
// The status names the files of every user's processes: root's alone; the
// summary (its counters) is everyone's.
sframe::CoverageStatus read_status(const std::string& dir, std::string* why) {
  try {
    return sframe::read_coverage_status(dir + "/status");
  } catch (const sframe::Error& e) {
    *why = e.what();
    if (e.err() != EACCES) return {};
  }
  try {
    sframe::CoverageStatus s = sframe::read_coverage_status(dir + "/summary");
    *why = "the files are listed for root only (they name other users' files)";
    return s;
  } catch (const sframe::Error& e) {
    *why = e.what();
    return {};
  }
}

int cmd_coverage(int argc, char** argv) {
  std::string dir = sframe::kCoverageStateDir;
  pid_t pid = 0;
  bool have_pid = false;
  for (int i = 0; i < argc; i++) {
    if (std::strcmp(argv[i], "--state-dir") == 0 && i + 1 < argc) {
      dir = argv[++i];
    } else if (!have_pid && parse_pid(argv[i], &pid)) {
      have_pid = true;
    } else {
      return usage(stderr);
    }
  }
  sframe::Device dev;
  const pid_t service = sframe::coverage_service_pid(dir);
  std::string why;
  const sframe::CoverageStatus status = read_status(dir, &why);
  const sframe::FileStoreStats store = dev.file_store_stats();
  if (service) {
    std::printf("sframe-coverd: running, pid %d%s%s\n", static_cast<int>(service),
                why.empty() ? "" : "; ", why.c_str());
  } else {
    std::printf("sframe-coverd: not running%s%s\n", why.empty() ? "" : "; ", why.c_str());
  }
  std::printf("file store: %" PRIu64 " files, %" PRIu64 " bytes of %" PRIu64
              ", %" PRIu64 " mappings covered from it, %" PRIu64
              " entries dropped as their file changed\n",
              store.entries, store.bytes, store.bytes_limit, store.attaches, store.invalidated);
  // The store now: an entry the status calls covered but the module has
  // dropped since (the service writes its status when it next works) is
  // shown dropped.
  const std::vector<sframe::FileInfo> files = dev.list_files();
  std::set<uint64_t> live;
  for (const sframe::FileInfo& f : files) live.insert(f.id);
  sframe::CoverageStatus now = status;
  for (sframe::StoreFile& f : now.files) {
    if (f.state == sframe::StoreFile::State::kCovered && f.id && !live.count(f.id)) {
      f.state = sframe::StoreFile::State::kDropped;
      f.reason = "file changed or deleted since it was covered (the module dropped its entry)";
    }
  }
  // (dev, ino) -> what the service knows of the file.
  std::map<std::pair<uint64_t, uint64_t>, const sframe::StoreFile*> known;
  for (const sframe::StoreFile& f : now.files) known[{f.dev, f.ino}] = &f;
  if (!have_pid) {
    if (status.counters.empty()) return 0;
    std::printf("service: %" PRIu64 " files covered (%" PRIu64 " with SFrame made from .eh_frame), %"
                PRIu64 " not covered, %" PRIu64 " dropped; %" PRIu64 " mmap records read, %" PRIu64
                " lost; %" PRIu64 " ms of CPU, %" PRIu64 " KiB resident\n",
                status.counter("covered"), status.counter("generated"), status.counter("failed"),
                status.counter("dropped"), status.counter("mmap_records"),
                status.counter("mmap_records_lost"), status.counter("cpu_ms"),
                status.counter("rss_kb"));
    // The files not covered, by reason.
    std::map<std::string, std::vector<std::string>> by_reason;
    for (const sframe::StoreFile& f : now.files) {
      if (f.state != sframe::StoreFile::State::kCovered) {
        by_reason[std::string(sframe::to_string(f.state)) + ": " + f.reason].push_back(f.path);
      }
    }
    for (const auto& [reason, paths] : by_reason) {
      std::printf("%zu %s\n", paths.size(), reason.c_str());
      for (const std::string& p : paths) std::printf("    %s\n", p.c_str());
    }
    // Partly covered: rows of .eh_frame SFrame cannot say.
    for (const sframe::StoreFile& f : now.files) {
      if (f.state == sframe::StoreFile::State::kCovered && f.rows_permille < 1000) {
        std::printf("partly: %s: %.1f %% of its .eh_frame's text has SFrame rows\n",
                    f.path.c_str(), f.rows_permille / 10.0);
      }
    }
    return 0;
  }
  // Each file the process maps executable, and what covers it there.
  const std::vector<sframe::MapsEntry> maps = sframe::read_maps(pid);
  std::vector<sframe::SectionInfo> entries;
  try {
    entries = dev.list_sections(pid);
  } catch (const sframe::Error& e) {
    std::printf("(the module's entries of pid %d: %s)\n", static_cast<int>(pid), e.what());
  }
  std::printf("%-10s %s\n", "COVERED BY", "FILE");
  std::set<std::pair<uint64_t, uint64_t>> shown;
  for (const sframe::MapsEntry& m : maps) {
    if (!m.executable() || !m.is_file()) continue;
    if (!shown.insert({uint64_t(m.dev()), m.inode}).second) continue;
    std::string by;
    for (const sframe::SectionInfo& e : entries) {
      if (m.start < e.text_start + e.text_len && e.text_start < m.end) {
        by = sframe::to_string(e.source);
      }
    }
    // The file as the service and the store see it.
    struct stat st{};
    const std::string way = sframe::map_files_path(pid, m.start, m.end);
    const bool have_st = ::stat(way.c_str(), &st) == 0 || ::stat(m.path.c_str(), &st) == 0;
    bool in_store = false;
    for (const sframe::FileInfo& f : files) {
      in_store = in_store || (have_st && f.ino == uint64_t(st.st_ino) &&
                              f.file_size == uint64_t(st.st_size));
    }
    std::string note;
    const auto k = have_st ? known.find({uint64_t(st.st_dev), uint64_t(st.st_ino)}) : known.end();
    if (by == "none" || by.empty()) {
      if (in_store) {
        note = "in the file store: attached at the process's next sample there";
      } else if (k != known.end() && k->second->state != sframe::StoreFile::State::kCovered) {
        note = std::string(sframe::to_string(k->second->state)) + ": " + k->second->reason;
      } else if (k != known.end()) {
        note = "covered by the service, but not in the store now";
      } else {
        note = service ? "not seen by sframe-coverd yet" : "sframe-coverd does not run";
      }
      by = "nothing";
    } else if (by == "file" && k != known.end() && k->second->rows_permille < 1000) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.1f %% of its .eh_frame's text has rows",
                    k->second->rows_permille / 10.0);
      note = buf;
    }
    std::printf("%-10s %s%s%s\n", by.c_str(), m.name().c_str(), note.empty() ? "" : "  (",
                note.empty() ? "" : (note + ")").c_str());
  }
  return 0;
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

double percent(uint64_t part, uint64_t whole) { return whole ? 100.0 * part / whole : 100.0; }

int cmd_gen(int argc, char** argv) {
  const char *in = nullptr, *out = nullptr;
  bool verbose = false;
  sframe::GenerateOptions opts;
  for (int i = 0; i < argc; i++) {
    if (std::strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else if (std::strcmp(argv[i], "-3") == 0) {
      opts.version = 3;
    } else if (std::strcmp(argv[i], "-v") == 0) {
      verbose = true;
    } else if (std::strcmp(argv[i], "--standard") == 0) {
      opts.cfa_addend = false;
    } else if (!in) {
      in = argv[i];
    } else {
      return usage(stderr);
    }
  }
  if (!in || !out) return usage(stderr);
  const uint64_t t0 = now_ns();
  // Opened once: the section and the identity it is stored with.
  const sframe::ObjectFile object = sframe::ObjectFile::read(sframe::open_object_file(in), in);
  sframe::GeneratedSframe g = sframe::generate_sframe(object, opts);
  const uint64_t t1 = now_ns();
  sframe::write_sframe_file(out, g, object.identity());
  const sframe::GenerateStats& st = g.stats;
  std::printf("%s: SFrame version %u, %zu bytes (.eh_frame %" PRIu64 " bytes), %" PRIu64
              " FDEs, %" PRIu64 " FREs, made in %.1f ms\n",
              in, g.version, g.bytes.size(), st.eh_frame_size, st.sframe_fdes, st.sframe_fres,
              (t1 - t0) / 1e6);
  std::printf("  .eh_frame FDEs: %" PRIu64 ", covered %" PRIu64 " (%.2f%%), partly %" PRIu64
              ", not %" PRIu64 "; text bytes covered %.2f%%\n",
              st.fdes, st.fdes_covered, percent(st.fdes_covered, st.fdes), st.fdes_partial,
              st.fdes_uncovered, percent(st.covered_bytes, st.fde_bytes));
  if (st.rows_cfa_addend != 0) {
    std::printf("  rows with this project's extension (CFA = *(reg + off) + c; libsframe "
                "refuses the section, --standard leaves them out): %" PRIu64 "\n",
                st.rows_cfa_addend);
  }
  for (const auto& b : st.call_bridges) {
    std::printf("  call bridge at 0x%" PRIx64 " (to 0x%" PRIx64
                "): CFA = *(RSP%+d) + %d, where the callee saves r%u (the caller's CFA is "
                "r%u%+d)\n",
                b.start - 1, b.callee, b.save_offset, b.cfa_offset, b.reg, b.reg, b.cfa_offset);
  }
  for (const auto& [why, rows] : st.uncovered_reasons) {
    const auto bytes = st.uncovered_reason_bytes.find(why);
    std::printf("  uncovered rows: %" PRIu64 " %s (%" PRIu64 " text bytes)\n", rows, why.c_str(),
                bytes == st.uncovered_reason_bytes.end() ? 0 : bytes->second);
  }
  if (verbose) {
    // One line per uncovered row, grouped under its .eh_frame FDE.
    uint64_t fde = 0;
    bool first = true;
    for (const sframe::GenerateStats::UncoveredRow& r : st.uncovered_rows) {
      if (first || r.fde_start != fde) {
        std::printf("  FDE at 0x%" PRIx64 ":\n", r.fde_start);
        fde = r.fde_start;
        first = false;
      }
      std::printf("    0x%" PRIx64 "-0x%" PRIx64 " (%" PRIu64 " bytes): %s\n", r.start, r.end,
                  r.end - r.start, r.reason.c_str());
    }
  }
  return 0;
}

int cmd_supply(int argc, char** argv) {
  pid_t pid = 0;
  if (argc < 2 || !parse_pid(argv[0], &pid)) return usage(stderr);
  sframe::Device dev;
  for (int i = 1; i < argc; i++) {
    sframe::SuppliedSection s = sframe::supply_file_sframe(dev, pid, argv[i]);
    std::printf("%s: %" PRIu64 " bytes of .sframe for text %" PRIx64 "-%" PRIx64 "\n",
                s.path.c_str(), s.sframe_len, s.text_start, s.text_start + s.text_len);
  }
  return 0;
}

int cmd_flamegraph(int argc, char** argv) {
  sframe::FlamegraphOptions opts;
  const char* path = nullptr;
  for (int i = 0; i < argc; i++) {
    if (std::strcmp(argv[i], "-t") == 0 && i + 1 < argc) {
      opts.title = argv[++i];
    } else if (!path && (argv[i][0] != '-' || argv[i][1] == '\0')) {
      path = argv[i];
    } else {
      return usage(stderr);
    }
  }
  sframe::FoldedStacks stacks;
  if (!path || std::strcmp(path, "-") == 0) {
    stacks = sframe::parse_folded(std::cin);
  } else {
    std::ifstream in(path);
    if (!in) throw sframe::Error(errno ? errno : ENOENT, "open", path);
    stacks = sframe::parse_folded(in);
  }
  const std::string svg = sframe::render_flamegraph_svg(stacks, opts);
  if (std::fwrite(svg.data(), 1, svg.size(), stdout) != svg.size() || std::fflush(stdout) != 0) {
    std::fprintf(stderr, "sframe-client: writing the SVG: %s\n", std::strerror(errno));
    return 1;
  }
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
      "  version %u, flags 0x%x%s%s%s%s, abi/arch %u, fixed RA offset %d, fixed FP offset %d\n",
      sec.version, sec.flags, (sec.flags & SFRAME_F_FDE_SORTED) ? " FDE_SORTED" : "",
      (sec.flags & SFRAME_F_FRAME_POINTER) ? " FRAME_POINTER" : "",
      (sec.flags & SFRAME_F_FDE_FUNC_START_PCREL) ? " FUNC_START_PCREL" : "",
      (sec.flags & SFRAME_F_X_CFA_ADDEND) ? " X_CFA_ADDEND" : "", sec.abi_arch,
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
      std::printf("  FDE %" PRIu32 ": 0x%" PRIx64 " size %" PRIu32 ", %" PRIu32 " FREs%s%s\n", i,
                  fde.func_start, fde.func_size, fde.num_fres,
                  fde.pc_type == SFRAME_PC_MASK ? ", PC mask" : "",
                  sframe_fde_skipped(&fde) ? ", skipped (no rows)" : "");
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
    if (cmd == "list") return cmd_list(argc - 2, argv + 2);
    if (cmd == "supply") return cmd_supply(argc - 2, argv + 2);
    if (cmd == "file-supply") return cmd_file_supply(argc - 2, argv + 2);
    if (cmd == "file-remove") return cmd_file_remove(argc - 2, argv + 2);
    if (cmd == "files") return cmd_files(argc - 2, argv + 2);
    if (cmd == "coverage") return cmd_coverage(argc - 2, argv + 2);
    if (cmd == "flamegraph") return cmd_flamegraph(argc - 2, argv + 2);
    if (cmd == "perf") return cmd_perf(argc - 2, argv + 2);
#ifdef SFRAME_CLIENT_HAVE_DECODER
    if (cmd == "sections") return cmd_sections(argc - 2, argv + 2);
    if (cmd == "dump") return cmd_dump(argc - 2, argv + 2);
    if (cmd == "gen") return cmd_gen(argc - 2, argv + 2);
#endif
    if (cmd == "-h" || cmd == "--help" || cmd == "help") return usage(stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sframe-client: %s\n", e.what());
    return 1;
  }
  return usage(stderr);
}
