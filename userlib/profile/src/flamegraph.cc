// Folded stacks and their SVG flame graph (see flamegraph.h).
#include "sframe_profile/flamegraph.h"

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "sframe_client/error.h"

namespace sframe {
namespace {

constexpr const char kParseFolded[] = "parse folded";

[[noreturn]] void bad_line(size_t line, const char* why) {
  throw Error(EINVAL, kParseFolded, "line " + std::to_string(line), why);
}

bool parse_count(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = uint64_t(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// --- SVG ---------------------------------------------------------------------

// Layout, in pixels (flamegraph.pl's).
constexpr double kPad = 10;          // left and right of the frames
constexpr double kFrameHeight = 16;  // one level, a 1 px gap included
constexpr double kFontSize = 12;
constexpr double kFontWidth = 0.59;             // of a character, in font sizes (Verdana-ish)
constexpr double kTop = kFontSize * 3;          // above the frames
constexpr double kBottom = kFontSize * 2 + 10;  // below: the details line

constexpr const char kRootName[] = "all";

// One frame of the merged tree, in depth-first order (a frame's children
// follow it, in name order); start and count in samples.
struct Frame {
  const std::string* name;
  uint32_t depth;
  uint64_t start;
  uint64_t count;
};

bool is_kernel(const std::string& name) {
  static constexpr std::string_view kMark = "_[k]";
  return name.size() >= kMark.size() &&
         std::string_view(name).substr(name.size() - kMark.size()) == kMark;
}

// flamegraph.pl's "hot" palette (and "aqua" for the kernel), the shade from
// a hash of the name.
void append_color(std::string& out, const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  const double v1 = double(h & 0xff) / 255, v2 = double((h >> 8) & 0xff) / 255,
               v3 = double((h >> 16) & 0xff) / 255;
  int r, g, b;
  if (is_kernel(name)) {
    r = int(50 + 60 * v1);
    g = int(165 + 55 * v1);
    b = int(200 + 55 * v2);
  } else {
    r = int(205 + 50 * v3);
    g = int(230 * v1);
    b = int(55 * v2);
  }
  char buf[40];
  std::snprintf(buf, sizeof(buf), "rgb(%d,%d,%d)", r, g, b);
  out += buf;
}

// Length of the valid UTF-8 sequence at s[i] (0 if none).
size_t utf8_len(std::string_view s, size_t i) {
  const unsigned char c = s[i];
  size_t n;
  uint32_t min;
  if (c < 0x80) return 1;
  if ((c & 0xe0) == 0xc0) {
    n = 2;
    min = 0x80;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3;
    min = 0x800;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  uint32_t cp = c & (0x7f >> n);
  for (size_t k = 1; k < n; k++) {
    const unsigned char cc = s[i + k];
    if ((cc & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  // U+FFFE and U+FFFF are not XML characters.
  if (cp == 0xfffe || cp == 0xffff) return 0;
  return n;
}

// s as XML character data or attribute value; at most max_chars characters
// (code points) of it.
void append_escaped(std::string& out, std::string_view s, size_t max_chars = SIZE_MAX) {
  size_t chars = 0;
  for (size_t i = 0; i < s.size() && chars < max_chars; chars++) {
    const char c = s[i];
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t') {
          out += '?';
        } else {
          const size_t n = utf8_len(s, i);
          if (n == 0) {
            out += '?';
          } else {
            out.append(s.data() + i, n);
            i += n;
            continue;
          }
        }
    }
    i++;
  }
}

size_t utf8_chars(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

// The label of a box w pixels wide: the name, or as much as fits followed by
// "..", or nothing (the page's script does the same after a zoom).
void append_label(std::string& out, const std::string& name, double w) {
  const double fit = (w - 6) / (kFontSize * kFontWidth);
  if (fit < 3) return;
  const size_t n = size_t(fit);
  if (utf8_chars(name) <= n) {
    append_escaped(out, name);
  } else {
    append_escaped(out, name, n - 2);
    out += "..";
  }
}

void appendf(std::string& out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string& out, const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n > 0) out.append(buf, std::min(size_t(n), sizeof(buf) - 1));
}

// The page's script.  Frames are the children of #frames, in the depth-first
// order of the tree, each <g class="f" data-s=START data-c=COUNT> holding a
// <title> ("NAME (N samples, P%)"), a <rect> and a <text>.  It must not
// contain "]]>".
constexpr const char kScript[] = R"JS(
"use strict";
var fg = { frames: [], matched: null };
function fg_el(id) { return document.getElementById(id); }
function fg_label(f, w) {
  var fit = Math.floor((w - 6) / (CFG.font * CFG.fontw));
  if (fit < 3) return "";
  var chars = Array.from(f.name);
  return chars.length <= fit ? f.name : chars.slice(0, fit - 2).join("") + "..";
}
function fg_place(f, x, w) {
  f.r.setAttribute("x", x.toFixed(2));
  f.r.setAttribute("width", w.toFixed(2));
  f.t.setAttribute("x", (x + 3).toFixed(2));
  f.t.textContent = fg_label(f, w);
}
function fg_init() {
  var svg = document.documentElement;
  var gs = fg_el("frames").children;
  for (var i = 0; i < gs.length; i++) {
    var g = gs[i];
    var title = g.getElementsByTagName("title")[0].textContent;
    var r = g.getElementsByTagName("rect")[0];
    var f = { g: g, r: r, t: g.getElementsByTagName("text")[0], title: title,
              name: title.substring(0, title.lastIndexOf(" (")),
              s: Number(g.getAttribute("data-s")), c: Number(g.getAttribute("data-c")),
              d: Math.round((CFG.ybase - Number(r.getAttribute("y"))) / CFG.fh) - 1,
              fill: r.getAttribute("fill") };
    g.fg_i = i;
    fg.frames.push(f);
  }
  var fr = fg_el("frames");
  function frame_of(e) {
    for (var n = e; n && n !== fr; n = n.parentNode)
      if (n.fg_i !== undefined) return fg.frames[n.fg_i];
    return null;
  }
  fr.addEventListener("mouseover", function (e) {
    var f = frame_of(e.target);
    if (f) fg_el("details").textContent = f.title;
  });
  fr.addEventListener("mouseout", function (e) { fg_el("details").textContent = " "; });
  fr.addEventListener("click", function (e) {
    var f = frame_of(e.target);
    if (f) fg_zoom(f);
  });
  fg_el("unzoom").addEventListener("click", fg_unzoom);
  fg_el("search").addEventListener("click", function () {
    var re = window.prompt("Search (a JavaScript regular expression)",
                           fg.matched === null ? "" : fg.matched);
    if (re === null) return;
    if (re === "") fg_clear(); else fg_search(re);
  });
  fg_el("clear").addEventListener("click", fg_clear);
  window.addEventListener("hashchange", fg_hash);
  fg_hash();
  svg.setAttribute("data-ready", "1");
}
// The URL fragment: search=REGEX and zoom=REGEX (the first frame, depth
// first, that REGEX matches), URI-encoded, separated by '&'.
function fg_hash() {
  var h = window.location.hash.substring(1), parts = h ? h.split("&") : [];
  for (var i = 0; i < parts.length; i++) {
    var eq = parts[i].indexOf("="), v;
    if (eq < 0) continue;
    try { v = decodeURIComponent(parts[i].substring(eq + 1)); } catch (e) { continue; }
    var k = parts[i].substring(0, eq);
    if (k === "search") fg_search(v);
    else if (k === "zoom") fg_zoom_to(v);
  }
}
function fg_zoom_to(src) {
  var re;
  try { re = new RegExp(src); } catch (e) { return; }
  for (var i = 1; i < fg.frames.length; i++) {
    if (re.test(fg.frames[i].name)) { fg_zoom(fg.frames[i]); return; }
  }
}
function fg_zoom(z) {
  if (z.d === 0) { fg_unzoom(); return; }
  var W = CFG.width, end = z.s + z.c;
  for (var i = 0; i < fg.frames.length; i++) {
    var f = fg.frames[i], fend = f.s + f.c;
    if (f.d < z.d && f.s <= z.s && fend >= end) {
      f.g.classList.remove("hide");
      f.g.classList.add("parent");
      fg_place(f, CFG.pad, W);
    } else if (f.d >= z.d && f.s >= z.s && fend <= end) {
      f.g.classList.remove("hide", "parent");
      fg_place(f, CFG.pad + (f.s - z.s) / z.c * W, f.c / z.c * W);
    } else {
      f.g.classList.add("hide");
    }
  }
  fg_el("unzoom").classList.remove("hide");
  document.documentElement.setAttribute("data-zoomed", z.name);
}
function fg_unzoom() {
  var W = CFG.width, T = CFG.total;
  for (var i = 0; i < fg.frames.length; i++) {
    var f = fg.frames[i];
    f.g.classList.remove("hide", "parent");
    fg_place(f, CFG.pad + f.s / T * W, f.c / T * W);
  }
  fg_el("unzoom").classList.add("hide");
  document.documentElement.removeAttribute("data-zoomed");
}
function fg_clear() {
  var svg = document.documentElement;
  for (var i = 0; i < fg.frames.length; i++) {
    var f = fg.frames[i];
    f.r.setAttribute("fill", f.fill);
    f.g.classList.remove("m");
  }
  fg.matched = null;
  fg_el("matched").textContent = " ";
  fg_el("clear").classList.add("hide");
  svg.removeAttribute("data-matched");
  svg.removeAttribute("data-matched-pct");
}
function fg_search(src) {
  var re;
  try { re = new RegExp(src); } catch (e) {
    fg_el("matched").textContent = "Bad regex: " + src;
    return;
  }
  fg_clear();
  // Frames come in depth-first order, so starts never decrease: the union
  // of the matching frames' sample ranges in one pass.
  var n = 0, sum = 0, end = -1;
  for (var i = 0; i < fg.frames.length; i++) {
    var f = fg.frames[i];
    if (f.d === 0 || !re.test(f.name)) continue;
    f.r.setAttribute("fill", "rgb(230,0,230)");
    f.g.classList.add("m");
    n++;
    var fend = f.s + f.c;
    if (f.s >= end) { sum += f.c; end = fend; }
    else if (fend > end) { sum += fend - end; end = fend; }
  }
  var pct = (CFG.total > 0 ? 100 * sum / CFG.total : 0).toFixed(2);
  var svg = document.documentElement;
  svg.setAttribute("data-matched", String(n));
  svg.setAttribute("data-matched-pct", pct);
  fg_el("matched").textContent = "Matched: " + pct + "%";
  fg_el("clear").classList.remove("hide");
  fg.matched = src;
}
window.addEventListener("load", fg_init);
)JS";

constexpr const char kStyle[] = R"CSS(
text { font-family: Verdana, sans-serif; font-size: 12px; fill: rgb(0,0,0); }
#title { text-anchor: middle; font-size: 17px; }
#nosamples { text-anchor: middle; font-size: 14px; }
.ctl { cursor: pointer; fill: rgb(0,0,160); }
.ctl:hover { text-decoration: underline; }
#matched { text-anchor: end; }
#frames g { cursor: pointer; }
#frames g:hover rect { stroke: rgb(0,0,0); stroke-width: 0.5; }
#frames text { pointer-events: none; }
.hide { display: none; }
.parent { opacity: 0.5; }
)CSS";

}  // namespace

FoldedStacks parse_folded(std::istream& in) {
  FoldedStacks out;
  std::string line;
  size_t lineno = 0;
  while (std::getline(in, line)) {
    lineno++;
    std::string_view l(line);
    while (!l.empty() && (l.back() == '\r' || l.back() == ' ' || l.back() == '\t'))
      l.remove_suffix(1);
    if (l.find_first_not_of(" \t") == std::string_view::npos) continue;
    const size_t sp = l.find_last_of(" \t");
    if (sp == std::string_view::npos) bad_line(lineno, "no sample count");
    uint64_t count = 0;
    if (!parse_count(l.substr(sp + 1), &count)) bad_line(lineno, "bad sample count");
    std::string_view stack = l.substr(0, sp);
    while (!stack.empty() && (stack.back() == ' ' || stack.back() == '\t')) stack.remove_suffix(1);
    if (stack.empty()) bad_line(lineno, "no frames");
    std::vector<std::string> frames;
    for (size_t pos = 0;;) {
      const size_t semi = stack.find(';', pos);
      const std::string_view f =
          stack.substr(pos, semi == std::string_view::npos ? semi : semi - pos);
      if (f.empty()) bad_line(lineno, "empty frame name");
      frames.emplace_back(f);
      if (semi == std::string_view::npos) break;
      pos = semi + 1;
    }
    out.stacks.emplace_back(std::move(frames), count);
  }
  if (in.bad()) throw Error(EIO, kParseFolded, "line " + std::to_string(lineno + 1));
  return out;
}

std::string render_flamegraph_svg(const FoldedStacks& folded, const FlamegraphOptions& opts) {
  static const std::string kRoot = kRootName;
  const auto& stacks = folded.stacks;

  // The merged tree, depth first: the stacks in name order, each opening
  // the frames it does not share with the one before.
  std::vector<size_t> order;
  order.reserve(stacks.size());
  for (size_t i = 0; i < stacks.size(); i++) {
    if (stacks[i].second != 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return stacks[a].first < stacks[b].first; });
  std::vector<Frame> frames{{&kRoot, 0, 0, 0}};
  std::vector<size_t> open{0};
  const std::vector<std::string>* prev = nullptr;
  uint64_t x = 0;
  for (size_t i : order) {
    const std::vector<std::string>& s = stacks[i].first;
    const uint64_t c = stacks[i].second;
    size_t common = 0;
    if (prev) {
      const size_t m = std::min(s.size(), prev->size());
      while (common < m && s[common] == (*prev)[common]) common++;
    }
    open.resize(common + 1);
    for (size_t d = common; d < s.size(); d++) {
      frames.push_back({&s[d], uint32_t(d + 1), x, 0});
      open.push_back(frames.size() - 1);
    }
    for (size_t f : open) frames[f].count += c;
    x += c;
    prev = &s;
  }
  const uint64_t total = x;

  const double width = opts.width > 2 * kPad + 100 ? opts.width : 2 * kPad + 100;
  const double plot = width - 2 * kPad;
  const double scale = total ? plot / double(total) : 0;
  uint64_t drawn = 0, pruned = 0;
  uint32_t max_depth = 0;
  for (const Frame& f : frames) {
    if (total && double(f.count) * scale >= opts.min_width_px) {
      drawn++;
      max_depth = std::max(max_depth, f.depth);
    } else if (total) {
      pruned++;
    }
  }
  const double height = kTop + kBottom + kFrameHeight * (total ? max_depth + 1 : 2);
  const double ybase = height - kBottom;

  std::string out;
  out.reserve(4096 + drawn * 200);
  out += "<?xml version=\"1.0\" standalone=\"no\"?>\n";
  appendf(out,
          "<svg version=\"1.1\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
          "xmlns=\"http://www.w3.org/2000/svg\" data-samples=\"%llu\" data-frames=\"%llu\" "
          "data-pruned=\"%llu\">\n",
          width, height, width, height, (unsigned long long)total, (unsigned long long)drawn,
          (unsigned long long)pruned);
  appendf(out,
          "<!-- flame graph of sframe-profile: %llu samples, %llu frames drawn, %llu "
          "narrower than %g px not drawn -->\n",
          (unsigned long long)total, (unsigned long long)drawn, (unsigned long long)pruned,
          opts.min_width_px);
  out +=
      "<defs><linearGradient id=\"background\" y1=\"0\" y2=\"1\" x1=\"0\" x2=\"0\">"
      "<stop stop-color=\"#eeeeee\" offset=\"5%\"/><stop stop-color=\"#eeeeb0\" "
      "offset=\"95%\"/></linearGradient></defs>\n";
  out += "<style type=\"text/css\"><![CDATA[";
  out += kStyle;
  out += "]]></style>\n<script type=\"text/ecmascript\"><![CDATA[\n";
  appendf(out,
          "var CFG = { pad: %g, width: %.6f, fh: %g, ybase: %.6f, font: %g, fontw: %g, total: "
          "%llu };",
          kPad, plot, kFrameHeight, ybase, kFontSize, kFontWidth, (unsigned long long)total);
  out += kScript;
  out += "]]></script>\n";
  appendf(out, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"url(#background)\"/>\n",
          width, height);
  appendf(out, "<text id=\"title\" x=\"%.2f\" y=\"24\">", width / 2);
  append_escaped(out, opts.title);
  out += "</text>\n";
  appendf(out, "<text id=\"details\" x=\"%g\" y=\"%.2f\"> </text>\n", kPad, height - 17);
  appendf(out, "<text id=\"unzoom\" class=\"ctl hide\" x=\"%g\" y=\"24\">Reset Zoom</text>\n",
          kPad);
  appendf(out, "<text id=\"search\" class=\"ctl\" x=\"%.2f\" y=\"24\">Search</text>\n",
          width - kPad - 100);
  appendf(out, "<text id=\"clear\" class=\"ctl hide\" x=\"%.2f\" y=\"24\">Clear</text>\n",
          width - kPad - 40);
  appendf(out, "<text id=\"matched\" x=\"%.2f\" y=\"%.2f\"> </text>\n", width - kPad, height - 17);
  if (!total) {
    appendf(out, "<text id=\"nosamples\" x=\"%.2f\" y=\"%.2f\">no samples</text>\n", width / 2,
            kTop + kFrameHeight);
  }
  out += "<g id=\"frames\">\n";
  for (const Frame& f : frames) {
    if (!total) break;
    const double w = double(f.count) * scale;
    if (w < opts.min_width_px) continue;
    const double fx = kPad + double(f.start) * scale;
    const double fy = ybase - (f.depth + 1) * kFrameHeight;
    appendf(out, "<g class=\"f\" data-s=\"%llu\" data-c=\"%llu\"><title>",
            (unsigned long long)f.start, (unsigned long long)f.count);
    append_escaped(out, *f.name);
    appendf(out,
            " (%llu samples, %.2f%%)</title><rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" "
            "height=\"%.0f\" fill=\"",
            (unsigned long long)f.count, 100.0 * double(f.count) / double(total), fx, fy, w,
            kFrameHeight - 1);
    if (f.depth == 0) {
      out += "rgb(200,200,200)";
    } else {
      append_color(out, *f.name);
    }
    appendf(out, "\" rx=\"2\" ry=\"2\"/><text x=\"%.2f\" y=\"%.1f\">", fx + 3,
            fy + kFrameHeight - 4.5);
    append_label(out, *f.name, w);
    out += "</text></g>\n";
  }
  out += "</g>\n</svg>\n";
  return out;
}

}  // namespace sframe
