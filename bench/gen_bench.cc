// gen_bench: how long generate_sframe() takes and how big its sections are,
// against the .eh_frame they come from.  Host only; prints, never asserts.
//
//   gen_bench [-n RUNS] [-v] [FILE...]
//
// Without files: libc, libstdc++, ld.so and python3.11 of Debian 12.  For
// each file: the median and minimum wall time of RUNS generations (default
// 11) of version 2 (3 where rows need it), the .eh_frame size, the section
// size and its ratio to .eh_frame, the SFrame FDEs and FREs, and the share
// of .eh_frame FDEs and text bytes covered.  -v adds the uncovered reasons.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sframe_gen/eh_frame.h"
#include "sframe_client/error.h"

namespace {

const char* const kDefaultFiles[] = {
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
    "/lib64/ld-linux-x86-64.so.2",
    "/usr/bin/python3.11",
};

double pct(uint64_t part, uint64_t whole) { return whole ? 100.0 * part / whole : 100.0; }

}  // namespace

int main(int argc, char** argv) {
  int runs = 11;
  bool verbose = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; i++) {
    if (std::strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "-v") == 0) {
      verbose = true;
    } else {
      files.emplace_back(argv[i]);
    }
  }
  if (files.empty()) files.assign(std::begin(kDefaultFiles), std::end(kDefaultFiles));

  std::printf("%-42s %9s %9s %9s %6s %3s %7s %7s %8s %8s\n", "file", "median", "min", ".eh_frame",
              "sframe", "ver", "ratio", "FDEs", "FDEs%", "bytes%");
  int status = 0;
  for (const std::string& path : files) {
    try {
      std::vector<double> ms;
      sframe::GeneratedSframe g;
      for (int r = 0; r < runs; r++) {
        auto t0 = std::chrono::steady_clock::now();
        g = sframe::generate_sframe(path);
        auto t1 = std::chrono::steady_clock::now();
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
      std::sort(ms.begin(), ms.end());
      const sframe::GenerateStats& s = g.stats;
      std::printf("%-42s %7.2fms %7.2fms %9" PRIu64 " %6zu %3u %6.2fx %7" PRIu64
                  " %7.2f%% %7.2f%%\n",
                  path.c_str(), ms[ms.size() / 2], ms[0], s.eh_frame_size, g.bytes.size(),
                  g.version, static_cast<double>(g.bytes.size()) / s.eh_frame_size, s.fdes,
                  pct(s.fdes_covered, s.fdes), pct(s.covered_bytes, s.fde_bytes));
      if (verbose) {
        std::printf("    FDEs: %" PRIu64 " covered, %" PRIu64 " partial, %" PRIu64
                    " uncovered; rows %" PRIu64 ", uncovered %" PRIu64 "; SFrame FDEs %" PRIu64
                    ", FREs %" PRIu64 "; text bytes %" PRIu64 " of %" PRIu64 " covered\n",
                    s.fdes_covered, s.fdes_partial, s.fdes_uncovered, s.rows, s.rows_uncovered,
                    s.sframe_fdes, s.sframe_fres, s.covered_bytes, s.fde_bytes);
        for (const auto& [why, n] : s.uncovered_reasons) {
          std::printf("    %6" PRIu64 " rows: %s\n", n, why.c_str());
        }
      }
    } catch (const sframe::Error& e) {
      std::fprintf(stderr, "gen_bench: %s\n", e.what());
      status = 1;
    }
  }
  return status;
}
