// sframe-profile: folded stacks, and an interactive SVG flame graph of them.
//
// Folded stacks are the text format of flamegraph.pl's stackcollapse-*
// scripts: one line per distinct stack, its frames root first and separated
// by ';', then a space and the number of samples:
//
//   main;parse;std::vector<int>::push_back 12
//
// render_flamegraph_svg() draws them in the manner of flamegraph.pl: one
// box per frame, as wide as its share of the samples, the root ("all", every
// sample) at the bottom; equal frames of the same parent merged, siblings in
// byte order of their names.  The SVG is self-contained (inline CSS and
// script, nothing fetched) and interactive in a browser:
//
//   - hover: the frame's name, samples and percentage (a <title> tooltip and
//     the details line at the bottom);
//   - click: zoom into the frame (its ancestors stay, dimmed, at full width);
//     "Reset Zoom" (top left), or a click on "all", zooms out;
//   - "Search" (top right): prompts for a JavaScript regular expression; the
//     frames whose name it matches (the root "all" excepted) turn magenta
//     and the share of the samples under them shows bottom right ("Clear"
//     ends the search).
//   - the URL fragment, at load time and when it changes: #search=REGEX
//     searches, #zoom=REGEX zooms into the first frame (depth first, the
//     root excepted) that REGEX matches; both URI-encoded, joined by '&'
//     (#zoom=main&search=malloc).
//
// Kernel frames are those whose name ends in "_[k]" (perf's and
// flamegraph.pl's mark; the name is shown as is): drawn in blues, the others
// in a warm palette, each frame's shade from a hash of its name (the same
// function has the same color in every graph).  Frames narrower than
// FlamegraphOptions::min_width_px are not drawn (nor are their children);
// the root element's attributes data-frames and data-pruned count the frames
// drawn and not drawn, data-samples the samples.  Search and zoom know only
// the frames drawn.
//
// For scripts and tests, the page's script sets data-ready="1" on the root
// element when it has run, and after a search sets data-matched (the number
// of frames matched) and data-matched-pct (e.g. "12.50"), marks each
// matching frame's group with the class "m" (class="f m"; every frame's
// group has the class "f"), and writes "Matched: 12.50%" into the text
// element with the id "matched".  A zoom sets data-zoomed (the frame's
// name) and gives the groups of the frames it hides the class "hide", those
// of the zoomed frame's ancestors the class "parent".
#ifndef SFRAME_PROFILE_FLAMEGRAPH_H
#define SFRAME_PROFILE_FLAMEGRAPH_H

#include <cstdint>
#include <istream>
#include <string>
#include <utility>
#include <vector>

namespace sframe {

struct FoldedStacks {
  // Each stack: its frames, root first, and its number of samples.  The
  // same stack may appear more than once (its samples add up).
  std::vector<std::pair<std::vector<std::string>, uint64_t>> stacks;
};

struct FlamegraphOptions {
  std::string title = "sframe-prof";
  double width = 1200;        // of the image, in pixels
  double min_width_px = 0.1;  // narrower frames are not drawn
};

// The SVG document (UTF-8).  Names are escaped for XML; bytes that are not
// valid UTF-8, and control characters, become '?'.  No samples at all make
// a valid SVG that says "no samples".
std::string render_flamegraph_svg(const FoldedStacks& stacks, const FlamegraphOptions& opts);

// Reads folded stacks: "FRAME;FRAME;... COUNT" per line (a trailing '\r' is
// ignored, blank lines are skipped; COUNT is a decimal integer after the last
// space or tab).  A line without a count, with a count that is not an
// unsigned 64-bit integer, without frames or with an empty frame name throws
// Error(EINVAL, "parse folded", "line N").
FoldedStacks parse_folded(std::istream& in);

}  // namespace sframe

#endif  // SFRAME_PROFILE_FLAMEGRAPH_H
