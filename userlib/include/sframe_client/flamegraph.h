// libsframe-client: flame graphs of folded stacks, as SVG.
//
// The interface sframe-prof report --svg calls.  The renderer lives in
// src/flamegraph.cc; src/flamegraph_stub.cc is a minimal stand-in (one
// rectangle per root frame) for builds without it.
#ifndef SFRAME_CLIENT_FLAMEGRAPH_H
#define SFRAME_CLIENT_FLAMEGRAPH_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sframe {

// Unique stacks with their sample counts; frames root first (the process
// name, then the outermost user frame, ..., the leaf).
struct FoldedStacks {
  std::vector<std::pair<std::vector<std::string>, uint64_t>> stacks;
};

struct FlamegraphOptions {
  std::string title = "sframe-prof";
};

// A self-contained SVG document.
std::string render_flamegraph_svg(const FoldedStacks& folded, const FlamegraphOptions& options);

}  // namespace sframe

#endif  // SFRAME_CLIENT_FLAMEGRAPH_H
