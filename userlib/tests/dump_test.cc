// `sframe-client dump` and `sections --fdes` (userlib/tools) on a section
// with an FDE the module skips (issue 28: more FREs than
// SFRAME_MAX_FRES_PER_FDE, no rows): for each SFrame version, ordinary
// functions around one of 9,814 FREs (as many as the gcc -O2 function of
// the issue), written as the ELF file `gen` writes.  The dump prints that
// FDE with its mark, no rows, and goes on with the next one.  (gcc's own
// such function, SFrame v1: tests/host, sframe_client_dump_marks_skipped_*.)
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>

#include "sframe_decode.h"
#include "sframe_gen/section_builder.h"
#include "sframe_gen/sframe_cache.h"

namespace {

constexpr uint64_t kText = 0x401000;
constexpr uint32_t kLongFres = 9814;

// A row: CFA = SP (or FP) + cfa, the caller's FP at CFA + fp if given.
sframe::FreSpec row(uint32_t start, bool sp, int32_t cfa, std::optional<int32_t> fp = {}) {
  sframe::FreSpec f;
  f.start_off = start;
  f.cfa_base_sp = sp;
  f.cfa_offset = cfa;
  f.fp_offset = fp;
  return f;
}

struct ToolRun {
  int status = -1;
  std::string out;
};

// Runs the tool with args, its standard output collected.
ToolRun run_tool(const std::string& args) {
  ToolRun r;
  FILE* p = popen((std::string(SFRAME_CLIENT_BIN) + " " + args).c_str(), "r");
  if (!p) return r;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  r.status = pclose(p);
  return r;
}

class DumpSkipped : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sframe-dump-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/skipped.sframe";

    sframe::SectionBuilder b(static_cast<uint8_t>(GetParam()), GetParam() != 1);
    sframe::FdeSpec before;
    before.func_start = kText;
    before.func_size = 0x20;
    before.fres = {row(0, true, 8), row(1, true, 16)};
    sframe::FdeSpec long_fn;
    long_fn.func_start = kText + 0x100;
    long_fn.func_size = kLongFres + 16;
    for (uint32_t j = 0; j < kLongFres; j++) {
      long_fn.fres.push_back(row(j, true, j % 2 ? 16 : 8));
    }
    sframe::FdeSpec after;
    after.func_start = kText + 0x3000;
    after.func_size = 0x30;
    after.fres = {row(0, true, 8), row(4, false, 16, -16)};
    b.add_fde(before).add_fde(long_fn).add_fde(after);

    sframe::GeneratedSframe g;
    g.section_vaddr = kText;
    g.bytes = b.build(g.section_vaddr);
    g.text_vaddr = kText;
    g.text_len = 0x4000;
    g.version = static_cast<uint8_t>(GetParam());
    sframe::write_sframe_file(path_, g, sframe::SourceIdentity{});
  }
  void TearDown() override {
    if (!path_.empty()) unlink(path_.c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
  }
  std::string dir_, path_;
};

TEST_P(DumpSkipped, MarksTheFdeAndGoesOn) {
  const ToolRun r = run_tool("dump " + path_);
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.status << "\n" << r.out;
  const std::string mark = "\n    func idx [1]: pc = 0x401100, size = 9830 bytes"
                           "\n    skipped: 9814 FREs > 8192 (SFRAME_MAX_FRES_PER_FDE): no rows\n";
  EXPECT_NE(r.out.find(mark), std::string::npos) << r.out.substr(0, 2000);
  // The next FDE follows the mark, whole.
  const std::string next =
      mark +
      "\n    func idx [2]: pc = 0x404000, size = 48 bytes"
      "\n    STARTPC         CFA       FP        RA           "
      "\n    0000000000404000  sp+8      u         u            "
      "\n    0000000000404004  fp+16     c-16      u            \n";
  EXPECT_NE(r.out.find(next), std::string::npos) << r.out.substr(0, 2000);
  // And the one before it, with its rows.
  EXPECT_NE(r.out.find("\n    func idx [0]: pc = 0x401000, size = 32 bytes"
                       "\n    STARTPC         CFA       FP        RA           "
                       "\n    0000000000401000  sp+8      u         u            "
                       "\n    0000000000401001  sp+16     u         u            \n"),
            std::string::npos)
      << r.out.substr(0, 2000);
  // Not one row of the long function: the whole dump is a few lines.
  EXPECT_LT(r.out.size(), 2000u);
}

TEST_P(DumpSkipped, SectionsSaysWhichFdeIsSkipped) {
  const ToolRun r = run_tool("sections --fdes " + path_);
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.status << "\n" << r.out;
  EXPECT_NE(r.out.find("  FDE 1: 0x401100 size 9830, 9814 FREs, skipped (no rows)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  FDE 2: 0x404000 size 48, 2 FREs\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FDE 0: 0x401000 size 32, 2 FREs, skipped"), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(V, DumpSkipped, ::testing::Values(1, 2, 3));

}  // namespace
