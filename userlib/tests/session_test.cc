// Host tests of the session side of libsframe-client that need no module:
// parsing of read() buffers, /proc/PID/maps symbolization, kallsyms.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "sframe_client/error.h"
#include "sframe_client/session.h"
#include "sframe_profile/symbolizer.h"
#include "sframe_test/errno_of.h"
#include "sframe_test/records.h"

namespace {

using sframe::Record;

using sframe_test::AddLost;
using sframe_test::AddSample;

int ParseErrno(const std::vector<uint8_t>& buf, std::vector<Record>* out) {
  return sframe::errno_of([&] { sframe::parse_records(buf.data(), buf.size(), out); });
}

TEST(ParseRecords, SamplesAndLostRecordsInOrder) {
  std::vector<uint8_t> buf;
  AddSample(&buf, {0xffffffff81000010, 0xffffffff81000020}, {0x401000, 0x401100, 0x401200});
  AddLost(&buf, 42);
  AddSample(&buf, {}, {0x401000});
  std::vector<Record> out;
  ASSERT_EQ(sframe::parse_records(buf.data(), buf.size(), &out), 3u);
  ASSERT_EQ(out.size(), 3u);
  ASSERT_TRUE(out[0].is_sample());
  const sframe::Sample& s = out[0].sample;
  EXPECT_EQ(s.pid, 10u);
  EXPECT_EQ(s.tid, 11u);
  EXPECT_EQ(s.time, 12345u);
  EXPECT_EQ(s.cookie, 77u);
  EXPECT_EQ(s.cpu, 1u);
  EXPECT_TRUE(s.has(SFRAME_SAMPLE_F_USER_MODE));
  EXPECT_EQ(s.user_stop, sframe::StopReason::kNoCoverage);
  EXPECT_EQ(s.kernel, (std::vector<uint64_t>{0xffffffff81000010, 0xffffffff81000020}));
  EXPECT_EQ(s.user, (std::vector<uint64_t>{0x401000, 0x401100, 0x401200}));
  ASSERT_TRUE(out[1].is_lost());
  EXPECT_EQ(out[1].lost, 42u);
  ASSERT_TRUE(out[2].is_sample());
  EXPECT_TRUE(out[2].sample.kernel.empty());
  EXPECT_EQ(out[2].sample.user, std::vector<uint64_t>{0x401000});
}

TEST(ParseRecords, EmptyBufferIsNoRecords) {
  std::vector<Record> out;
  EXPECT_EQ(sframe::parse_records(nullptr, 0, &out), 0u);
  EXPECT_TRUE(out.empty());
}

TEST(ParseRecords, UnknownTypesAreSkippedBySize) {
  std::vector<uint8_t> buf(24, 0);
  sframe_record_header h{99, 0, 24};
  std::memcpy(buf.data(), &h, sizeof(h));
  AddLost(&buf, 1);
  std::vector<Record> out;
  EXPECT_EQ(sframe::parse_records(buf.data(), buf.size(), &out), 1u);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].is_lost());
}

TEST(ParseRecords, MalformedRecordsAreRefusedWithEbadmsg) {
  std::vector<Record> out;
  {
    std::vector<uint8_t> buf(4, 0);  // shorter than a header
    EXPECT_EQ(ParseErrno(buf, &out), EBADMSG);
  }
  {
    std::vector<uint8_t> buf;
    AddSample(&buf, {}, {1, 2}, 4);  // size below the header
    EXPECT_EQ(ParseErrno(buf, &out), EBADMSG);
  }
  {
    std::vector<uint8_t> buf;
    AddSample(&buf, {}, {1, 2}, sizeof(sframe_sample_record) + 12);  // not a multiple of 8
    EXPECT_EQ(ParseErrno(buf, &out), EBADMSG);
  }
  {
    std::vector<uint8_t> buf;
    AddSample(&buf, {}, {1, 2}, sizeof(sframe_sample_record) + 64);  // beyond the buffer
    EXPECT_EQ(ParseErrno(buf, &out), EBADMSG);
  }
  {
    std::vector<uint8_t> buf;
    AddSample(&buf, {}, {1, 2}, 0, 3);  // counts claim 5 ips in room for 2
    EXPECT_EQ(ParseErrno(buf, &out), EBADMSG);
  }
  {
    std::vector<uint8_t> buf;
    AddSample(&buf, {}, {}, 16);  // a sample smaller than its fixed part
    EXPECT_EQ(ParseErrno(buf, &out), EBADMSG);
  }
  {
    std::vector<uint8_t> buf(8, 0);
    sframe_record_header h{SFRAME_RECORD_LOST, 0, 8};  // no room for the count
    std::memcpy(buf.data(), &h, sizeof(h));
    EXPECT_EQ(ParseErrno(buf, &out), EBADMSG);
  }
  EXPECT_TRUE(out.empty());
}

TEST(ParseRecords, RecordsBeforeTheBadOneAreKept) {
  std::vector<uint8_t> buf;
  AddLost(&buf, 5);
  AddSample(&buf, {}, {1}, 0, 7);
  std::vector<Record> out;
  try {
    sframe::parse_records(buf.data(), buf.size(), &out);
    FAIL() << "accepted";
  } catch (const sframe::Error& e) {
    EXPECT_EQ(e.err(), EBADMSG);
    EXPECT_NE(std::string(e.what()).find("offset 16"), std::string::npos) << e.what();
  }
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].lost, 5u);
}

TEST(SampleFlags, Names) {
  EXPECT_EQ(sframe::sample_flags_string(0), "0");
  EXPECT_EQ(sframe::sample_flags_string(SFRAME_SAMPLE_F_EXITED | SFRAME_SAMPLE_F_NO_USER),
            "EXITED|NO_USER");
  EXPECT_EQ(sframe::sample_flags_string(SFRAME_SAMPLE_F_USER_MODE | 0x10000), "USER_MODE|0x10000");
  EXPECT_EQ(sframe::sample_flags_string(SFRAME_SAMPLE_F_CROSS_TASK | SFRAME_SAMPLE_F_NO_USER),
            "NO_USER|CROSS_TASK");
  EXPECT_EQ(sframe::sample_flags_string(SFRAME_SAMPLE_F_NOT_DUMPABLE | SFRAME_SAMPLE_F_TIMEOUT),
            "TIMEOUT|NOT_DUMPABLE");
}

TEST(SessionErrors, NoDeviceIsAnOpenError) {
  sframe::SessionOptions o;
  o.device = "/nonexistent/sframe_unwind";
  try {
    sframe::Session::start(sframe::Target::kProcess, getpid(), o);
    FAIL() << "started";
  } catch (const sframe::Error& e) {
    EXPECT_EQ(e.err(), ENOENT);
    EXPECT_EQ(e.op(), sframe::op::kOpen);
  }
}

__attribute__((noinline)) int ProcMapsMarker(int x) { return x * 3 + 1; }

TEST(ProcessSymbolizer, AgreesWithTheInProcessSymbolizer) {
  sframe::Symbolizer sym;
  const auto addr = reinterpret_cast<uint64_t>(&ProcMapsMarker) + 1;
  sframe::Symbol a = sym.symbolize(addr);
  sframe::Symbol b = sym.symbolize(getpid(), addr);
  ASSERT_TRUE(a.found());
  ASSERT_TRUE(b.found()) << b.to_string();
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.symbol_start, b.symbol_start);
  EXPECT_EQ(a.object_offset, b.object_offset);
  EXPECT_EQ(b.function(), "(anonymous namespace)::ProcMapsMarker");
  // libc too (maps may name it by another path: /usr/lib vs /lib).
  const auto libc = reinterpret_cast<uint64_t>(&std::strlen);
  sframe::Symbol c = sym.symbolize(getpid(), libc), d = sym.symbolize(libc);
  EXPECT_EQ(c.object.substr(c.object.rfind('/')), d.object.substr(d.object.rfind('/')));
  EXPECT_EQ(c.object_offset, d.object_offset);
  EXPECT_EQ(c.name, d.name);
  // Not a mapping at all.
  EXPECT_FALSE(sym.symbolize(getpid(), 16).found());
  EXPECT_TRUE(sym.symbolize(getpid(), 16).object.empty());
}

TEST(KernelSymbolizer, NearestSymbolBelow) {
  char path[] = "/tmp/kallsyms_test.XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream f(path);
    f << "ffffffff81000000 T _text\n"
         "ffffffff81000100 t do_thing\n"
         "ffffffff81000200 D some_data\n"
         "ffffffffc0001000 t mod_fn\t[sframe_unwind]\n";
  }
  sframe::KernelSymbolizer k(path);
  ASSERT_TRUE(k.usable());
  sframe::Symbol s = k.symbolize(0xffffffff81000180);
  EXPECT_EQ(s.name, "do_thing");
  EXPECT_EQ(s.offset, 0x80u);
  EXPECT_EQ(s.object, "[kernel]");
  EXPECT_EQ(k.symbolize(0xffffffffc0001004).object, "[sframe_unwind]");
  EXPECT_FALSE(k.symbolize(0x1000).found());
  {
    std::ofstream f(path);  // what an unprivileged reader sees
    f << "0000000000000000 T _text\n0000000000000000 t do_thing\n";
  }
  EXPECT_FALSE(sframe::KernelSymbolizer(path).usable());
  unlink(path);
}

}  // namespace
