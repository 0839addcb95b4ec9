// Support for the VM test programs (*_vmtest): the device fixture, child
// scenarios and exact frame-chain expectations.
//
// Why child processes: a chain is "exact" only if every frame from the
// system call up to main is covered.  Inside a TEST body the stack also holds
// GoogleTest's own frames (libgtest.a is built without --gsframe), so the
// chains that must reach main run in a fresh copy of the program:
// RunChild("name", "arg") executes /proc/self/exe --vmtest-child=name
// --vmtest-arg=arg, whose main() calls vmtest::RunChildScenario(), which
// calls the scenario registered under that name.  Such a chain therefore
// ends with
//   ..., <scenario>, vmtest::RunChildScenario, main, __libc_start_call_main
// and the walk stops with SFRAME_STOP_NO_COVERAGE in libc, which has no
// .sframe.  The child prints each unwind (EmitUnwind) and the parent
// compares.
#ifndef SFRAME_VMTEST_H
#define SFRAME_VMTEST_H

#include <gtest/gtest.h>

#include <pthread.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "sframe_client/sframe_client.hpp"

// For the functions that make up a chain: not inlined, not cloned, not
// merged, not analysed across calls (so the symbol names are exact).
#define VMTEST_NOIPA __attribute__((noipa))
// After a call: nothing may move across it, so the call is no tail call.
#define VMTEST_BARRIER() asm volatile("" ::: "memory")

namespace vmtest {

// $SFRAME_VM_DEVICE (set by the VM rig), else SFRAME_UNWIND_DEVICE.
std::string DevicePath();

// A new, empty directory for an SframeCache private to one test (made
// with mkdtemp under /tmp; /tmp itself if that fails).
std::string FreshCacheDir();

// Writes value to /sys/module/sframe_unwind/parameters/name (root only).
bool SetModuleParam(const char* name, const char* value);

// Whether the module discovers .sframe sections by itself (its
// `discovery` parameter, readable by everyone).
bool DiscoveryEnabled();

// For suites about explicit registration: run as root, the program turns
// discovery off for its whole run (and back after); run as another user,
// discovery stays as the module has it (on by default).  So the rig's two
// runs of such a suite test both, and its tests branch on
// DiscoveryEnabled().  Call once, from a static initializer.
bool DiscoveryOffWhenRoot();

// Sets a module parameter for the life of the object and puts the old
// value back after; ok() says whether the write worked (root only).
class ScopedModuleParam {
 public:
  ScopedModuleParam(const char* name, const char* value);
  ~ScopedModuleParam();
  ScopedModuleParam(const ScopedModuleParam&) = delete;
  ScopedModuleParam& operator=(const ScopedModuleParam&) = delete;
  bool ok() const { return ok_; }

 private:
  std::string name_, old_;
  bool ok_ = false;
};

// The FDE index (module/fde_index.c) keeps a registered section's rows in
// kernel memory, so walks through it read nothing of the section and no
// decoding is done at length.  Tests of what happens when a walk does read
// the section (a fault on an unmapped one, the decoding budget) need a
// section without an index, which a user gets once its index_max_user_kb
// is used up: as root, this sets that bound to 0 for the life of the
// result; as any other user (who cannot) it returns nullptr, and the test
// checks the indexed walk instead.
std::unique_ptr<ScopedModuleParam> NoFdeIndexIfRoot();

// Opens the device or fails the test with the library's message, e.g.
// "cannot open /dev/sframe_unwind: No such file or directory (ENOENT)".
class DeviceTest : public ::testing::Test {
 protected:
  void SetUp() override;
  const sframe::Device& dev() const { return *dev_; }

  std::optional<sframe::Device> dev_;
};

// DeviceTest plus self_: the test program itself as a loaded object, whose
// own .sframe (the assembler's) the test registers, copies or corrupts.
class SelfSectionTest : public DeviceTest {
 protected:
  void SetUp() override;
  sframe::LoadedObject self_;
};

// Registers the .sframe of every loaded object that has one; fails the test
// (returns empty) on error.
std::vector<sframe::Registration> RegisterLoaded(const sframe::Device& dev);

// ---- child scenarios ------------------------------------------------------

using ChildFn = int (*)(const std::string& arg);

struct ChildRegistrar {
  ChildRegistrar(const char* name, ChildFn fn);
};

// Defines a child scenario: a static function `int name(const std::string&
// arg)` that becomes a frame of the chains it makes.
#define VMTEST_CHILD(name)                                        \
  VMTEST_NOIPA static int name(const std::string& arg);           \
  static ::vmtest::ChildRegistrar name##_registrar(#name, &name); \
  VMTEST_NOIPA static int name(const std::string& arg)

// Called by main() for --vmtest-child=NAME; returns the exit status.
int RunChildScenario(int argc, char** argv);

// The address main() returns to (in libc's __libc_start_call_main), saved by
// main() for the child's chain checks.
extern uint64_t g_main_return;

// In the child: prints an unwind for the parent to parse.
void EmitUnwind(const std::string& label, const sframe::UnwindResult& r);
// In the child: prints a named value (e.g. an expected address).
void EmitValue(const std::string& key, uint64_t value);

// One frame as the parent sees it.
struct Frame {
  uint64_t pc = 0;
  std::string function;  // demangled, without parameters; "?" if unknown
  std::string where;     // Symbol::to_string(), for messages
};

struct Chain {
  std::vector<Frame> frames;
  sframe::StopReason stop = sframe::StopReason::kNone;
  uint32_t nr_sframe = 0;
  uint32_t nr_fp = 0;
  std::string Describe() const;
  std::vector<std::string> Functions() const;
};

struct ChildResult {
  int exit_status = -1;  // exit code, or 128 + signal
  std::string output;    // stdout and stderr
  std::map<std::string, Chain> chains;
  std::map<std::string, uint64_t> values;
  uint64_t main_return = 0;
};

// Runs this program as a child scenario and parses what it printed.
ChildResult RunChild(const std::string& name, const std::string& arg = "");

// The symbolized form of an unwind, made in the process that unwound.
Chain Symbolize(const sframe::UnwindResult& r);

// Expectation for a frame in libc: __libc_start_call_main (what main returns
// into) or start_thread (what a thread's function returns into).
inline constexpr const char kLibcStartCallMain[] = "__libc_start_call_main";
inline constexpr const char kStartThread[] = "start_thread";

// frames[i].function == expected[i] for all i, and as many frames.  A libc
// entry matches a frame at libc_pc when libc has no symbols ("?").
::testing::AssertionResult ChainIs(const Chain& chain, const std::vector<std::string>& expected,
                                   uint64_t libc_pc = 0);
// Only the first expected.size() frames.
::testing::AssertionResult ChainStartsWith(const Chain& chain,
                                           const std::vector<std::string>& expected,
                                           uint64_t libc_pc = 0);

// The frame of Device::unwind_self, first in every chain.
inline constexpr const char kUnwindSelf[] = "sframe::Device::unwind_self";

// The tail of every chain of a child scenario named scenario.
std::vector<std::string> ChildTail(const std::string& scenario);

// Path of a file next to this program (test libraries).
std::string NextToSelf(const std::string& name);

// A shell command line run to its end: its exit status (128 + the signal
// when one killed it; -1 when it could not be started) and its stdout and
// stderr together.
struct ShellResult {
  int status = -1;
  std::string output;
};
ShellResult RunShell(const std::string& cmd);

// Each thread of process pid: its tid, state and wait channel, and its
// kernel stack where the reader may see it (root).  For the message of a
// test that saw a workload stall: where its threads were.
std::string TaskStates(pid_t pid);

// Path of a file of the build tree (a tool, the audit library) given by its
// path relative to this program's directory (CMake computes it, see
// sframe_vmtest_tool_path in tests/vm/CMakeLists.txt), made normal ("a/../b"
// is "b").  Never an absolute path compiled in: the rig runs the programs
// from a view of the build tree that uid 65534 can reach, which is not where
// the tree is on the host (tests/vm/rig/README.md).
std::string BuildTreeFile(const std::string& relative);

// The module's stats once its registries are back to before's (sections,
// processes and supplied bytes), or as they are after timeout_ms: registries
// go with their address spaces, some after a grace period.
sframe::Stats WaitForRegistriesBack(const sframe::Device& dev, const sframe::Stats& before,
                                    int timeout_ms = 10000);

// Sum of active objects of the kmalloc caches (kmalloc-*, kmalloc-cg-*, ...)
// and maple_node (the registry is a maple tree), from /proc/slabinfo.  -1
// if unreadable (it is readable by root only).
long SlabObjects();
// The same caches one by one: name -> active objects.  Empty if
// /proc/slabinfo is unreadable.
std::map<std::string, long> SlabCounts();

// A thread of this process spinning on CPU 0, where qemu's NMIs land
// (tests/vm/rig/README.md), in a known chain until destroyed:
// NmiSpinLeaf < NmiSpinMiddle < NmiSpinThread < start_thread.
class CpuZeroSpinner {
 public:
  CpuZeroSpinner();   // returns once it spins
  ~CpuZeroSpinner();  // stops and joins it
  CpuZeroSpinner(const CpuZeroSpinner&) = delete;
  CpuZeroSpinner& operator=(const CpuZeroSpinner&) = delete;
  pid_t tid() const { return tid_; }
  // The functions of the chain an interruption of the spinner sees: from
  // the leaf's loop, or from the middle's, between two calls.
  static const std::vector<std::string>& FromLeaf();
  static const std::vector<std::string>& FromMiddle();

 private:
  pthread_t thread_{};
  pid_t tid_ = 0;
};

// Asks the host for count NMIs, interval_ms apart, and waits until qemu
// raised them (every vCPU gets each one: qemu's monitor command `nmi`;
// tests/vm/rig/README.md).  Root or uid 65534, inside the rig only.
::testing::AssertionResult InjectNmis(int count, int interval_ms);

// The length of the x86-64 call instruction that ends exactly at the end
// of the n bytes at `before` (a return address's preceding bytes), or 0:
// E8 rel32, or FF /2 with any ModRM, SIB and displacement (an indirect
// call through a register or memory; a REX or notrack prefix before it
// does not move its end).  A plausibility check: bytes that merely look
// like a call's end pass.
size_t CallEndingAt(const uint8_t* before, size_t n);

// Whether return address ra of live process pid follows a call
// instruction, read from /proc/pid/mem (root, or the process's owner).
// Sets *why when it does not, or cannot be read.
bool FollowsCall(pid_t pid, uint64_t ra, std::string* why);

}  // namespace vmtest

#endif  // SFRAME_VMTEST_H
