// For the VM suites that run sframe-prof (prof, cli, outputs, children):
// the tool of this build tree, wherever the rig shows the tree, and a run
// of it.  Their targets define SFRAME_PROF_TOOL_REL
// (sframe_vmtest_tool_path in tests/vm/CMakeLists.txt).
#ifndef SFRAME_VMTEST_PROF_TOOL_H
#define SFRAME_VMTEST_PROF_TOOL_H

#include <unistd.h>

#include <string>

#include "sframe_client/perf_event.h"
#include "vmtest.h"

#ifndef SFRAME_PROF_TOOL_REL
#error "SFRAME_PROF_TOOL_REL (sframe-prof, relative to this program's directory) must be defined"
#endif

namespace vmtest {

inline std::string ProfTool() { return BuildTreeFile(SFRAME_PROF_TOOL_REL); }

// sframe-prof ARGS (a shell command line), stdout and stderr together.
inline ShellResult Prof(const std::string& args) { return RunShell(ProfTool() + " " + args); }

// Whether this user may open the perf events sframe-prof needs on its own
// processes (the VM runs at perf_event_paranoid 3: root only).
inline bool CanProfile() { return geteuid() == 0 || sframe::perf_event_paranoid() <= 2; }

}  // namespace vmtest

#endif  // SFRAME_VMTEST_PROF_TOOL_H
