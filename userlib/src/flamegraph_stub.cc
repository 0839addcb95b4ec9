// A stand-in for the flame-graph renderer (flamegraph.h), so that the
// library builds without it: one bar per root frame (process), its width its
// share of the samples.  To be replaced by src/flamegraph.cc.
#include <cstdio>
#include <map>

#include "sframe_client/flamegraph.h"

namespace sframe {
namespace {

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

std::string render_flamegraph_svg(const FoldedStacks& folded, const FlamegraphOptions& options) {
  std::map<std::string, uint64_t> roots;
  uint64_t total = 0;
  for (const auto& [frames, count] : folded.stacks) {
    roots[frames.empty() ? std::string("[unknown]") : frames.front()] += count;
    total += count;
  }
  const double width = 1200;
  std::string svg =
      "<?xml version=\"1.0\" standalone=\"no\"?>\n"
      "<svg version=\"1.1\" width=\"1200\" height=\"60\" "
      "xmlns=\"http://www.w3.org/2000/svg\">\n<text x=\"10\" y=\"16\">" +
      escape_xml(options.title) + "</text>\n";
  double x = 0;
  char buf[128];
  for (const auto& [name, count] : roots) {
    const double w = total ? width * double(count) / double(total) : 0;
    std::snprintf(buf, sizeof(buf),
                  "<rect x=\"%.1f\" y=\"30\" width=\"%.1f\" height=\"16\" "
                  "fill=\"rgb(230,120,50)\"/>",
                  x, w);
    svg += "<g><title>" + escape_xml(name) + " (" + std::to_string(count) + " samples)</title>" +
           buf + "</g>\n";
    x += w;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace sframe
