// libsframe-audit.so (userlib/audit/): children of this program started with
// LD_AUDIT pointing at it get the .sframe of their program and libraries
// registered at start, of a dlopen()ed library at dlopen() and dropped again
// at dlclose(), with nothing done by the program itself.
//
// As root the suite runs with the module's discovery off, so that only the
// audit library's registrations cover anything (and a child without it has
// nothing registered: the tests are not vacuous).  As uid 65534 discovery is
// on: the audit library's registrations must still be made and counted, and
// no section needs discovering for the chains.
//
// Built with -O2 -fomit-frame-pointer -Wa,--gsframe like chain_vmtest; every
// chain function is noipa and does something after each call.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "chains.h"
#include "libs/chain_lib.h"
#include "vmtest.h"
#include "sframe_test/errno_of.h"

#ifndef SFRAME_AUDIT_LIB_REL
#error "SFRAME_AUDIT_LIB_REL (libsframe-audit.so, relative to this program's directory) must be defined"
#endif

namespace {

using sframe::StopReason;
using vmtest::Chain;
using vmtest::ChainIs;
using vmtest::ChildResult;
using vmtest::ChildTail;
using vmtest::kUnwindSelf;

const bool kDiscoveryOffWhenRoot = vmtest::DiscoveryOffWhenRoot();

// The loaded objects (of the program's namespace) that have a .sframe to
// register: what the audit library must have registered.
std::vector<sframe::LoadedObject> SframeObjects() {
  std::vector<sframe::LoadedObject> out;
  for (const sframe::LoadedObject& o : sframe::loaded_objects()) {
    if (o.has_sframe() && o.has_text()) out.push_back(o);
  }
  return out;
}

}  // namespace

// ---- the children ----------------------------------------------------------

// What was registered at start; chains through the program and through a
// linked library; then every object is unregistered by the text start
// loaded_objects() computes for it, which works only if the audit library
// registered exactly that range.
VMTEST_CHILD(audit_start) {
  (void)arg;
  sframe::Device dev(vmtest::DevicePath());
  // Before any unwind, so nothing can have been discovered yet.
  vmtest::EmitValue("mm_sections", dev.stats().mm_sections);
  const std::vector<sframe::LoadedObject> objs = SframeObjects();
  vmtest::EmitValue("sframe_objects", objs.size());
  const uint64_t discovered = dev.stats().sections_discovered;
  UnwindReq req{&dev, SFRAME_UNWIND_F_SFRAME, 512, {}};
  exe_a(&req);
  vmtest::EmitUnwind("exe", req.result);
  exe_calls_lib(&req);
  vmtest::EmitUnwind("lib", req.result);
  vmtest::EmitValue("discovered", dev.stats().sections_discovered - discovered);
  uint64_t unregistered = 0;
  for (const sframe::LoadedObject& o : objs) {
    int err = sframe::errno_of([&] { dev.unregister_section(o.text_start, o.path); });
    if (err == 0) {
      unregistered++;
    } else {
      std::printf("unregister %s: %s\n", o.path.c_str(), sframe::errno_name(err).c_str());
    }
  }
  vmtest::EmitValue("unregistered", unregistered);
  return 0;
}

// arg: a library next to this program, with "thread:" in front to dlopen()
// and dlclose() it in another thread.  mm_sections before dlopen, after it,
// after dlclose; a chain through the library's dl_chain_a if it has one.
VMTEST_CHILD(audit_dlopen) {
  sframe::Device dev(vmtest::DevicePath());
  vmtest::EmitValue("mm_before", dev.stats().mm_sections);
  const bool in_thread = arg.rfind("thread:", 0) == 0;
  const std::string path = vmtest::NextToSelf(in_thread ? arg.substr(7) : arg);
  // la_objopen and la_objclose run in the thread that calls dlopen/dlclose.
  auto run = [in_thread](auto&& f) {
    if (in_thread) {
      std::thread(f).join();
    } else {
      f();
    }
  };
  void* handle = nullptr;
  run([&] { handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL); });
  if (!handle) {
    std::printf("dlopen %s: %s\n", path.c_str(), dlerror());
    return 4;
  }
  vmtest::EmitValue("mm_open", dev.stats().mm_sections);
  uint64_t text_start = 0;
  if (auto fn = reinterpret_cast<dl_chain_fn>(dlsym(handle, "dl_chain_a"))) {
    auto obj = sframe::loaded_object_containing(reinterpret_cast<void*>(fn));
    if (obj) {
      vmtest::EmitValue("has_sframe", obj->has_sframe());
      text_start = obj->text_start;
    }
    const uint64_t discovered = dev.stats().sections_discovered;
    UnwindReq req{&dev, SFRAME_UNWIND_F_SFRAME, 512, {}};
    exe_calls_dl(fn, &req);
    vmtest::EmitUnwind("dl", req.result);
    vmtest::EmitValue("discovered", dev.stats().sections_discovered - discovered);
  }
  int closed = -1;
  run([&] { closed = dlclose(handle); });
  if (closed != 0) {
    std::printf("dlclose failed\n");
    return 4;
  }
  // Really gone (so la_objclose was called)?
  void* again = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  vmtest::EmitValue("unloaded", again == nullptr);
  if (again) dlclose(again);
  vmtest::EmitValue("mm_closed", dev.stats().mm_sections);
  if (text_start != 0) {
    // la_objclose unregistered it: nothing is left to unregister.
    int err = sframe::errno_of([&] { dev.unregister_section(text_start); });
    vmtest::EmitValue("unregister_after_close", err);
  }
  return 0;
}

// ---- the parent -------------------------------------------------------------

namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

// Runs a child scenario with these environment variables set (and puts the
// parent's environment back afterwards).
ChildResult RunWith(const Env& env, const std::string& name, const std::string& arg = "") {
  std::vector<std::pair<std::string, std::optional<std::string>>> old;
  for (const auto& [key, value] : env) {
    const char* v = std::getenv(key.c_str());
    old.emplace_back(key, v ? std::optional<std::string>(v) : std::nullopt);
    setenv(key.c_str(), value.c_str(), 1);
  }
  ChildResult r = vmtest::RunChild(name, arg);
  for (const auto& [key, value] : old) {
    if (value) {
      setenv(key.c_str(), value->c_str(), 1);
    } else {
      unsetenv(key.c_str());
    }
  }
  return r;
}

// libsframe-audit.so of this build tree, wherever the rig shows the tree.
std::string AuditLib() { return vmtest::BuildTreeFile(SFRAME_AUDIT_LIB_REL); }

const Env kAudit = {{"LD_AUDIT", AuditLib()}};

Env With(Env env, const std::string& key, const std::string& value) {
  env.emplace_back(key, value);
  return env;
}

// The lines the audit library printed.
std::vector<std::string> AuditLines(const std::string& output) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < output.size()) {
    size_t end = output.find('\n', pos);
    if (end == std::string::npos) end = output.size();
    std::string line = output.substr(pos, end - pos);
    if (line.rfind("sframe-audit:", 0) == 0) out.push_back(line);
    pos = end + 1;
  }
  return out;
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const std::vector<std::string> kExeChain =
    Cat({kUnwindSelf, "DoUnwind", "exe_c", "exe_b", "exe_a"}, ChildTail("audit_start"));
const std::vector<std::string> kLibChain =
    Cat({kUnwindSelf, "DoUnwind", "lib_callback", "lib_chain_b", "lib_chain_a", "exe_calls_lib"},
        ChildTail("audit_start"));
const std::vector<std::string> kDlChain =
    Cat({kUnwindSelf, "DoUnwind", "dl_callback", "dl_chain_b", "dl_chain_a", "exe_calls_dl"},
        ChildTail("audit_dlopen"));

class AuditTest : public vmtest::DeviceTest {
 protected:
  void SetUp() override {
    DeviceTest::SetUp();
    ASSERT_EQ(access(AuditLib().c_str(), R_OK), 0) << AuditLib() << " is not readable";
  }
};

// (a) The program and libvmtest_chain.so are registered before main runs;
// both chains are whole, walked with SFrame only.
TEST_F(AuditTest, ProgramAndLinkedLibrariesAreRegisteredAtStart) {
  ChildResult r = RunWith(kAudit, "audit_start");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(r.values["sframe_objects"], 2u) << "the program and libvmtest_chain.so\n" << r.output;
  EXPECT_EQ(r.values["mm_sections"], r.values["sframe_objects"]) << r.output;
  const std::vector<std::pair<std::string, std::vector<std::string>>> chains = {{"exe", kExeChain},
                                                                                {"lib", kLibChain}};
  for (const auto& [label, want] : chains) {
    SCOPED_TRACE(label);
    const Chain& c = r.chains[label];
    EXPECT_TRUE(ChainIs(c, want, r.main_return));
    EXPECT_EQ(c.stop, StopReason::kNoCoverage) << c.Describe();
    EXPECT_EQ(c.nr_sframe, c.frames.size() - 1) << c.Describe();
  }
  // Discovery (if on) found nothing the audit library had not registered.
  EXPECT_EQ(r.values["discovered"], 0u) << r.output;
  // Registered with exactly the text ranges loaded_objects() computes.
  EXPECT_EQ(r.values["unregistered"], r.values["sframe_objects"]) << r.output;
  EXPECT_TRUE(AuditLines(r.output).empty()) << r.output;
}

// (b) dlopen() registers the library's .sframe, dlclose() drops it.
TEST_F(AuditTest, DlopenRegistersAndDlcloseUnregisters) {
  ChildResult r = RunWith(kAudit, "audit_dlopen", "libvmtest_dl.so");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(r.values["has_sframe"], 1u);
  EXPECT_EQ(r.values["mm_before"], 2u) << r.output;
  EXPECT_EQ(r.values["mm_open"], r.values["mm_before"] + 1) << r.output;
  const Chain& c = r.chains["dl"];
  EXPECT_TRUE(ChainIs(c, kDlChain, r.main_return));
  EXPECT_EQ(c.stop, StopReason::kNoCoverage) << c.Describe();
  EXPECT_EQ(c.nr_sframe, c.frames.size() - 1) << c.Describe();
  EXPECT_EQ(r.values["discovered"], 0u);
  EXPECT_EQ(r.values["unloaded"], 1u) << "dlclose() did not unload the library";
  EXPECT_EQ(r.values["mm_closed"], r.values["mm_before"]) << r.output;
  EXPECT_EQ(r.values["unregister_after_close"], static_cast<uint64_t>(ENOENT));
  EXPECT_TRUE(AuditLines(r.output).empty()) << r.output;
}

// dlopen() and dlclose() in a thread other than the main one: the audit
// library runs there (its libc's errno and stdio in that thread).
TEST_F(AuditTest, DlopenAndDlcloseInAnotherThread) {
  ChildResult r =
      RunWith(With(kAudit, "SFRAME_AUDIT_VERBOSE", "1"), "audit_dlopen", "thread:libvmtest_dl.so");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(r.values["mm_open"], r.values["mm_before"] + 1) << r.output;
  EXPECT_TRUE(ChainIs(r.chains["dl"], kDlChain, r.main_return));
  EXPECT_EQ(r.values["unloaded"], 1u);
  EXPECT_EQ(r.values["mm_closed"], r.values["mm_before"]) << r.output;
  EXPECT_EQ(r.values["unregister_after_close"], static_cast<uint64_t>(ENOENT));
  EXPECT_TRUE(AuditLines(r.output).empty()) << r.output;
}

// The line SFRAME_AUDIT_VERBOSE=2 prints for registering the object whose
// name ends with name, or "" (fails the test unless there is exactly one).
std::string RegisteredLine(const std::string& output, const std::string& name) {
  std::string found;
  int n = 0;
  for (const std::string& line : AuditLines(output)) {
    const std::string prefix = "sframe-audit: registered ";
    if (line.rfind(prefix, 0) != 0) continue;
    const std::string object = line.substr(prefix.size(), line.find(": .sframe") - prefix.size());
    if (object.size() >= name.size() &&
        object.compare(object.size() - name.size(), name.size(), name) == 0) {
      found = line;
      n++;
    }
  }
  EXPECT_EQ(n, 1) << "registrations of " << name << " in\n" << output;
  return found;
}

// A library linked at a nonzero address (0x10000000) has no ELF header at
// its load bias l_addr (ld.so maps it at its link address if it can: l_addr
// 0).  The loader's record of its program headers has them all the same;
// without it (SFRAME_AUDIT_NO_DLINFO=1, as on glibc before 2.36) the audit
// library reads them from the file.
TEST_F(AuditTest, LibraryLinkedAtNonzeroAddress) {
  for (const char* no_dlinfo : {"0", "1"}) {
    SCOPED_TRACE(testing::Message() << "SFRAME_AUDIT_NO_DLINFO=" << no_dlinfo);
    Env env = With(With(kAudit, "SFRAME_AUDIT_VERBOSE", "2"), "SFRAME_AUDIT_NO_DLINFO", no_dlinfo);
    ChildResult r = RunWith(env, "audit_dlopen", "libvmtest_audit_based.so");
    ASSERT_EQ(r.exit_status, 0) << r.output;
    EXPECT_TRUE(Contains(
        RegisteredLine(r.output, "/libvmtest_audit_based.so"),
        std::string("(program headers from ") + (no_dlinfo[0] == '1' ? "file)" : "loader)")));
    EXPECT_EQ(r.values["has_sframe"], 1u);
    EXPECT_EQ(r.values["mm_open"], r.values["mm_before"] + 1) << r.output;
    EXPECT_TRUE(ChainIs(r.chains["dl"], kDlChain, r.main_return));
    EXPECT_EQ(r.values["discovered"], 0u);
    EXPECT_EQ(r.values["mm_closed"], r.values["mm_before"]) << r.output;
    EXPECT_EQ(r.values["unregister_after_close"], static_cast<uint64_t>(ENOENT));
  }
}

// A library without .sframe (libvmtest_handmade.so) is not registered.
TEST_F(AuditTest, DlopenOfLibraryWithoutSframeRegistersNothing) {
  ChildResult r = RunWith(kAudit, "audit_dlopen", "libvmtest_handmade.so");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(r.values["mm_open"], r.values["mm_before"]) << r.output;
  EXPECT_EQ(r.values["mm_closed"], r.values["mm_before"]) << r.output;
  EXPECT_TRUE(AuditLines(r.output).empty()) << r.output;
}

// (c) Without the audit library nothing is registered: with discovery off
// the walk cannot leave unwind_self; with it on, discovery does the work
// the audit library did above.
TEST_F(AuditTest, WithoutAuditNothingIsRegistered) {
  ChildResult r = vmtest::RunChild("audit_start");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(r.values["mm_sections"], 0u) << r.output;
  EXPECT_EQ(r.values["sframe_objects"], 2u) << r.output;
  const Chain& c = r.chains["exe"];
  if (vmtest::DiscoveryEnabled()) {
    EXPECT_TRUE(ChainIs(c, kExeChain, r.main_return));
    EXPECT_TRUE(ChainIs(r.chains["lib"], kLibChain, r.main_return));
    EXPECT_EQ(r.values["discovered"], 2u) << r.output;
  } else {
    EXPECT_TRUE(ChainIs(c, {kUnwindSelf}));
    EXPECT_TRUE(ChainIs(r.chains["lib"], {kUnwindSelf}));
    EXPECT_EQ(r.values["discovered"], 0u);
    EXPECT_EQ(r.values["unregistered"], 0u) << r.output;
  }
  EXPECT_EQ(c.stop, StopReason::kNoCoverage) << c.Describe();
}

TEST_F(AuditTest, DlopenWithoutAuditRegistersNothing) {
  ChildResult r = vmtest::RunChild("audit_dlopen", "libvmtest_dl.so");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(r.values["mm_before"], 0u) << r.output;
  EXPECT_EQ(r.values["mm_open"], 0u) << r.output;
  if (!vmtest::DiscoveryEnabled()) {
    EXPECT_TRUE(ChainIs(r.chains["dl"], {kUnwindSelf}));
  }
}

// (d) The device missing: the program runs as without the library, and the
// library says nothing unless asked to.
TEST_F(AuditTest, MissingDeviceIsSilent) {
  const Env env = With(kAudit, "SFRAME_AUDIT_DEVICE", "/nonexistent/sframe_unwind");
  ChildResult r = RunWith(env, "audit_start");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(AuditLines(r.output).empty()) << r.output;
  EXPECT_EQ(r.values["mm_sections"], 0u) << r.output;
  if (!vmtest::DiscoveryEnabled()) {
    EXPECT_TRUE(ChainIs(r.chains["exe"], {kUnwindSelf}));
  }

  // Verbose: one line, once (not once per object).
  r = RunWith(With(env, "SFRAME_AUDIT_VERBOSE", "1"), "audit_start");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  std::vector<std::string> lines = AuditLines(r.output);
  ASSERT_EQ(lines.size(), 1u) << r.output;
  EXPECT_TRUE(Contains(lines[0], "/nonexistent/sframe_unwind")) << lines[0];
  EXPECT_TRUE(Contains(lines[0], "No such file or directory")) << lines[0];
}

// Also (d): a file that is not the device (every ioctl fails with ENOTTY),
// through a dlopen() and dlclose() as well.
TEST_F(AuditTest, WrongDeviceIsSilent) {
  const Env env = With(kAudit, "SFRAME_AUDIT_DEVICE", "/dev/null");
  ChildResult r = RunWith(env, "audit_dlopen", "libvmtest_dl.so");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(AuditLines(r.output).empty()) << r.output;
  EXPECT_EQ(r.values["mm_open"], 0u) << r.output;

  // Verbose: one line per object that could not be registered.
  r = RunWith(With(env, "SFRAME_AUDIT_VERBOSE", "1"), "audit_dlopen", "libvmtest_dl.so");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  std::vector<std::string> lines = AuditLines(r.output);
  ASSERT_EQ(lines.size(), 3u) << "the program, libvmtest_chain.so, libvmtest_dl.so\n" << r.output;
  for (const std::string& line : lines) {
    EXPECT_TRUE(Contains(line, "register ")) << line;
    EXPECT_TRUE(Contains(line, "Inappropriate ioctl for device")) << line;
  }
  EXPECT_TRUE(Contains(lines[2], "libvmtest_dl.so")) << lines[2];
}

// SFRAME_AUDIT_VERBOSE=2 names each registration, and only the objects with
// .sframe; la_objclose at exit finds them gone (the child unregistered them)
// and says nothing about that.  The program headers come from the loader's
// record (glibc 2.36).
TEST_F(AuditTest, VerboseListsRegistrations) {
  ChildResult r = RunWith(With(kAudit, "SFRAME_AUDIT_VERBOSE", "2"), "audit_start");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  std::vector<std::string> lines = AuditLines(r.output);
  ASSERT_EQ(lines.size(), 2u) << r.output;
  EXPECT_TRUE(Contains(lines[0], "registered main program: .sframe 0x")) << lines[0];
  EXPECT_TRUE(Contains(lines[0], "(program headers from loader)")) << lines[0];
  EXPECT_TRUE(Contains(lines[1], "/libvmtest_chain.so: .sframe 0x")) << lines[1];
  EXPECT_TRUE(Contains(lines[1], "(program headers from loader)")) << lines[1];
  EXPECT_EQ(r.values["mm_sections"], 2u);
}

// Without the loader's record (as on glibc before 2.36): the main program's
// program headers from the kernel's AT_PHDR, a library's from its file, and
// everything (a) checks still holds.
TEST_F(AuditTest, FallbacksWithoutDlinfo) {
  Env env = With(With(kAudit, "SFRAME_AUDIT_VERBOSE", "2"), "SFRAME_AUDIT_NO_DLINFO", "1");
  ChildResult r = RunWith(env, "audit_start");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  std::vector<std::string> lines = AuditLines(r.output);
  ASSERT_EQ(lines.size(), 2u) << r.output;
  EXPECT_TRUE(Contains(lines[0], "registered main program: .sframe 0x")) << lines[0];
  EXPECT_TRUE(Contains(lines[0], "(program headers from auxv)")) << lines[0];
  EXPECT_TRUE(Contains(lines[1], "/libvmtest_chain.so: .sframe 0x")) << lines[1];
  EXPECT_TRUE(Contains(lines[1], "(program headers from file)")) << lines[1];
  EXPECT_EQ(r.values["mm_sections"], 2u);
  EXPECT_TRUE(ChainIs(r.chains["exe"], kExeChain, r.main_return));
  EXPECT_TRUE(ChainIs(r.chains["lib"], kLibChain, r.main_return));
  EXPECT_EQ(r.values["discovered"], 0u);
  EXPECT_EQ(r.values["unregistered"], 2u) << r.output;
}

}  // namespace
