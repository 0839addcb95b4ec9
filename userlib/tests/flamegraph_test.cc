// Folded stacks and their SVG flame graph (src/flamegraph.cc).  The SVG is
// parsed with libxml2 when the build has it (SFRAME_HAVE_LIBXML2), else only
// checked for balanced tags.  flamegraph_browser_test.sh runs its script.
#include "sframe_profile/flamegraph.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sframe_client/error.h"

#ifdef SFRAME_HAVE_LIBXML2
#include <libxml/parser.h>
#include <libxml/tree.h>
#endif

namespace {

using sframe::FoldedStacks;

FoldedStacks parse(const std::string& text) {
  std::istringstream in(text);
  return sframe::parse_folded(in);
}

// The frames of an SVG, as drawn.
struct DrawnFrame {
  std::string title;  // unescaped
  std::string label;  // unescaped
  double x, y, width;
  std::string fill;
  unsigned long long start, count;
};

std::string unescape(std::string s) {
  static const std::pair<const char*, const char*> kEnt[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}};
  for (const auto& [from, to] : kEnt) {
    for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += std::strlen(to)) {
      s.replace(p, std::strlen(from), to);
    }
  }
  return s;
}

// Each frame group as the renderer writes it (one per line).
std::vector<DrawnFrame> frames_of(const std::string& svg) {
  static const std::regex kFrame(
      "<g class=\"f\" data-s=\"(\\d+)\" data-c=\"(\\d+)\"><title>([^<]*)</title>"
      "<rect x=\"([0-9.]+)\" y=\"([0-9.]+)\" width=\"([0-9.]+)\" height=\"15\" "
      "fill=\"([^\"]+)\" rx=\"2\" ry=\"2\"/><text x=\"[0-9.]+\" y=\"[0-9.]+\">([^<]*)</text></g>");
  std::vector<DrawnFrame> out;
  std::istringstream in(svg);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (line.rfind("<g class=\"f\"", 0) != 0) continue;
    EXPECT_TRUE(std::regex_match(line, m, kFrame)) << line;
    if (m.empty()) continue;
    out.push_back({unescape(m[3]), unescape(m[8]), std::stod(m[4]), std::stod(m[5]),
                   std::stod(m[6]), m[7], std::stoull(m[1]), std::stoull(m[2])});
  }
  return out;
}

std::string root_attr(const std::string& svg, const std::string& name) {
  const std::regex re("<svg [^>]*" + name + "=\"([^\"]*)\"");
  std::smatch m;
  return std::regex_search(svg, m, re) ? std::string(m[1]) : std::string("(none)");
}

#ifdef SFRAME_HAVE_LIBXML2
void count_frame_groups(xmlNode* n, size_t* count, std::vector<std::string>* titles) {
  for (; n; n = n->next) {
    if (n->type != XML_ELEMENT_NODE) continue;
    xmlChar* cls = xmlGetProp(n, BAD_CAST "class");
    if (cls && xmlStrcmp(n->name, BAD_CAST "g") == 0 && xmlStrcmp(cls, BAD_CAST "f") == 0) {
      ++*count;
      for (xmlNode* c = n->children; c; c = c->next) {
        if (c->type == XML_ELEMENT_NODE && xmlStrcmp(c->name, BAD_CAST "title") == 0) {
          xmlChar* t = xmlNodeGetContent(c);
          titles->push_back(reinterpret_cast<const char*>(t));
          xmlFree(t);
        }
      }
    }
    xmlFree(cls);
    count_frame_groups(n->children, count, titles);
  }
}
#endif

// The SVG is well-formed XML with an <svg> root and as many frame groups as
// frames_of() finds (with the same titles).
void expect_well_formed(const std::string& svg) {
#ifdef SFRAME_HAVE_LIBXML2
  xmlDoc* doc =
      xmlReadMemory(svg.data(), int(svg.size()), "flamegraph.svg", nullptr,
                    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_HUGE);
  ASSERT_NE(doc, nullptr) << "not well-formed XML: "
                          << (xmlGetLastError() ? xmlGetLastError()->message : "?");
  xmlNode* root = xmlDocGetRootElement(doc);
  ASSERT_NE(root, nullptr);
  EXPECT_STREQ(reinterpret_cast<const char*>(root->name), "svg");
  ASSERT_NE(root->ns, nullptr);
  EXPECT_STREQ(reinterpret_cast<const char*>(root->ns->href), "http://www.w3.org/2000/svg");
  size_t groups = 0;
  std::vector<std::string> titles;
  count_frame_groups(root, &groups, &titles);
  std::vector<DrawnFrame> frames = frames_of(svg);
  EXPECT_EQ(groups, frames.size());
  for (size_t i = 0; i < titles.size() && i < frames.size(); i++) {
    EXPECT_EQ(titles[i], frames[i].title);
  }
  xmlFreeDoc(doc);
#else
  // Without libxml2: tags balance (outside the CDATA sections).
  std::vector<std::string> open;
  size_t p = svg.find("<svg ");
  ASSERT_NE(p, std::string::npos);
  while ((p = svg.find('<', p)) != std::string::npos) {
    if (svg.compare(p, 9, "<![CDATA[") == 0) {
      p = svg.find("]]>", p);
      ASSERT_NE(p, std::string::npos);
      continue;
    }
    if (svg.compare(p, 4, "<!--") == 0) {
      p = svg.find("-->", p);
      ASSERT_NE(p, std::string::npos);
      continue;
    }
    const size_t e = svg.find('>', p);
    ASSERT_NE(e, std::string::npos);
    const std::string tag = svg.substr(p + 1, e - p - 1);
    if (tag[0] == '/') {
      ASSERT_FALSE(open.empty()) << tag;
      EXPECT_EQ(open.back(), tag.substr(1));
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find(' ')));
    }
    p = e;
  }
  EXPECT_TRUE(open.empty());
#endif
}

// --- parse_folded -------------------------------------------------------------

TEST(ParseFoldedTest, GoodLines) {
  FoldedStacks f = parse(
      "main;parse;std::vector<int>::push_back(int const&) 3\n"
      "\n"
      "main;work 12\r\n"
      "  \t\n"
      "main;operator new(unsigned long)\t7  \n"
      "single 0\n"
      "main;work 18446744073709551615\n");
  ASSERT_EQ(f.stacks.size(), 5u);
  EXPECT_EQ(f.stacks[0].first,
            (std::vector<std::string>{"main", "parse", "std::vector<int>::push_back(int const&)"}));
  EXPECT_EQ(f.stacks[0].second, 3u);
  EXPECT_EQ(f.stacks[1].first, (std::vector<std::string>{"main", "work"}));
  EXPECT_EQ(f.stacks[1].second, 12u);
  EXPECT_EQ(f.stacks[2].first, (std::vector<std::string>{"main", "operator new(unsigned long)"}));
  EXPECT_EQ(f.stacks[2].second, 7u);
  EXPECT_EQ(f.stacks[3].first, (std::vector<std::string>{"single"}));
  EXPECT_EQ(f.stacks[3].second, 0u);
  EXPECT_EQ(f.stacks[4].second, UINT64_MAX);
  EXPECT_TRUE(parse("").stacks.empty());
}

TEST(ParseFoldedTest, BadLines) {
  const std::pair<const char*, const char*> kBad[] = {
      {"main;work", "no sample count"},
      {"main;work x", "bad sample count"},
      {"main;work -1", "bad sample count"},
      {"main;work 1.5", "bad sample count"},
      {"main;work 18446744073709551616", "bad sample count"},
      {"   7", "no frames"},
      {"main;;work 1", "empty frame name"},
      {";work 1", "empty frame name"},
      {"main; 1", "empty frame name"},
  };
  for (const auto& [line, why] : kBad) {
    try {
      parse("ok;fine 1\n\n" + std::string(line) + "\nok 2\n");
      ADD_FAILURE() << "accepted: " << line;
    } catch (const sframe::Error& e) {
      EXPECT_EQ(e.err(), EINVAL) << line;
      EXPECT_EQ(e.op(), "parse folded");
      EXPECT_EQ(e.object(), "line 3") << line;
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

// --- render_flamegraph_svg -----------------------------------------------------

constexpr const char kKnown[] =
    "main;parse;std::vector<int>::push_back 3\n"
    "main;parse;std::map<a&b>::find 2\n"
    "main;work;compute 4\n"
    "main;work;compute;sys_write_[k] 1\n"
    "main 1\n"
    "other;compute 1\n";

TEST(FlamegraphTest, KnownInputFramesAndWidths) {
  const std::string svg = sframe::render_flamegraph_svg(parse(kKnown), {});
  expect_well_formed(svg);
  EXPECT_EQ(root_attr(svg, "data-samples"), "12");
  EXPECT_EQ(root_attr(svg, "data-frames"), "10");
  EXPECT_EQ(root_attr(svg, "data-pruned"), "0");
  std::vector<DrawnFrame> f = frames_of(svg);
  // Depth first, siblings in name order, equal frames merged; 12 samples
  // over 1180 px from x = 10; depth d at y = 100 - 16 d.
  struct Want {
    const char* name;
    int depth;
    unsigned start, count;
  };
  const Want want[] = {
      {"all", 0, 0, 12},
      {"main", 1, 0, 11},
      {"parse", 2, 1, 5},
      {"std::map<a&b>::find", 3, 1, 2},
      {"std::vector<int>::push_back", 3, 3, 3},
      {"work", 2, 6, 5},
      {"compute", 3, 6, 5},
      {"sys_write_[k]", 4, 10, 1},
      {"other", 1, 11, 1},
      {"compute", 2, 11, 1},
  };
  ASSERT_EQ(f.size(), std::size(want));
  for (size_t i = 0; i < f.size(); i++) {
    SCOPED_TRACE(want[i].name);
    char title[200];
    std::snprintf(title, sizeof(title), "%s (%u samples, %.2f%%)", want[i].name, want[i].count,
                  100.0 * want[i].count / 12);
    EXPECT_EQ(f[i].title, title);
    EXPECT_EQ(f[i].label, want[i].name);  // all fit
    EXPECT_EQ(f[i].start, want[i].start);
    EXPECT_EQ(f[i].count, want[i].count);
    EXPECT_NEAR(f[i].x, 10 + 1180.0 * want[i].start / 12, 0.006);
    EXPECT_NEAR(f[i].width, 1180.0 * want[i].count / 12, 0.006);
    EXPECT_EQ(f[i].y, 100 - 16 * want[i].depth);
  }
  // The same name, the same color; a kernel frame in blues, the others warm.
  EXPECT_EQ(f[6].fill, f[9].fill);
  int r, g, b;
  ASSERT_EQ(std::sscanf(f[7].fill.c_str(), "rgb(%d,%d,%d)", &r, &g, &b), 3);
  EXPECT_LT(r, 120);
  EXPECT_GT(b, 190);
  for (size_t i = 1; i < f.size(); i++) {
    if (i == 7) continue;
    ASSERT_EQ(std::sscanf(f[i].fill.c_str(), "rgb(%d,%d,%d)", &r, &g, &b), 3);
    EXPECT_GE(r, 205) << f[i].title;
    EXPECT_LE(b, 55) << f[i].title;
  }
  // Deterministic, and independent of the input's order.
  FoldedStacks rev = parse(kKnown);
  std::reverse(rev.stacks.begin(), rev.stacks.end());
  EXPECT_EQ(sframe::render_flamegraph_svg(rev, {}), svg);
}

TEST(FlamegraphTest, DuplicateStacksAndZeroCountsMerge) {
  FoldedStacks a = parse("a;b 2\na;b 3\na;c 0\n");
  const std::string svg = sframe::render_flamegraph_svg(a, {});
  std::vector<DrawnFrame> f = frames_of(svg);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[2].title, "b (5 samples, 100.00%)");
}

TEST(FlamegraphTest, Escaping) {
  FoldedStacks s;
  s.stacks.push_back({{"operator<<(std::ostream&, \"q\" 'a')", "ok"}, 1});
  s.stacks.push_back({{"bad\x01utf8\xff\xc3(", "caf\xc3\xa9 \xe2\x82\xac"}, 1});
  sframe::FlamegraphOptions o;
  o.title = "<title> & \"more\"";
  const std::string svg = sframe::render_flamegraph_svg(s, o);
  expect_well_formed(svg);
  EXPECT_NE(svg.find("operator&lt;&lt;(std::ostream&amp;, &quot;q&quot; &apos;a&apos;)"),
            std::string::npos);
  EXPECT_NE(svg.find(">&lt;title&gt; &amp; &quot;more&quot;</text>"), std::string::npos);
  std::vector<DrawnFrame> f = frames_of(svg);
  ASSERT_EQ(f.size(), 5u);
  EXPECT_EQ(f[1].title, "bad?utf8?\?( (1 samples, 50.00%)");
  EXPECT_EQ(f[2].title, "caf\xc3\xa9 \xe2\x82\xac (1 samples, 50.00%)");
  EXPECT_EQ(f[3].title, "operator<<(std::ostream&, \"q\" 'a') (1 samples, 50.00%)");
}

TEST(FlamegraphTest, LongNamesAreCutToTheirBox) {
  const std::string name(300, 'x');
  FoldedStacks s;
  s.stacks.push_back({{name}, 1});
  s.stacks.push_back({{"y"}, 99});
  std::vector<DrawnFrame> f = frames_of(sframe::render_flamegraph_svg(s, {}));
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[1].title, name + " (1 samples, 1.00%)");
  EXPECT_EQ(f[1].label, "");  // 11.8 px: no room
  s.stacks[1].second = 1;
  f = frames_of(sframe::render_flamegraph_svg(s, {}));
  ASSERT_EQ(f.size(), 3u);
  // 590 px at 7.08 px a character: 82 characters, the last two "..".
  EXPECT_EQ(f[1].label, std::string(80, 'x') + "..");
}

TEST(FlamegraphTest, NoSamples) {
  for (const FoldedStacks& s : {FoldedStacks{}, parse("a;b 0\nc 0\n")}) {
    const std::string svg = sframe::render_flamegraph_svg(s, {});
    expect_well_formed(svg);
    EXPECT_NE(svg.find(">no samples</text>"), std::string::npos);
    EXPECT_EQ(root_attr(svg, "data-frames"), "0");
    EXPECT_EQ(root_attr(svg, "data-samples"), "0");
    EXPECT_TRUE(frames_of(svg).empty());
  }
}

TEST(FlamegraphTest, NarrowFramesArePrunedAndCounted) {
  // 1180 px for 100000 samples: 1 sample is 0.0118 px, 9 are 0.106 px.
  FoldedStacks s = parse(
      "big;big2 99990\n"
      "small;child;grandchild 1\n"
      "nine;a 9\n");
  const std::string svg = sframe::render_flamegraph_svg(s, {});
  expect_well_formed(svg);
  EXPECT_EQ(root_attr(svg, "data-frames"), "5");  // all big big2 nine a
  EXPECT_EQ(root_attr(svg, "data-pruned"), "3");  // small child grandchild
  std::vector<DrawnFrame> f = frames_of(svg);
  ASSERT_EQ(f.size(), 5u);
  for (const DrawnFrame& d : f) EXPECT_EQ(d.title.find("small"), std::string::npos);
  sframe::FlamegraphOptions o;
  o.min_width_px = 0;
  EXPECT_EQ(root_attr(sframe::render_flamegraph_svg(s, o), "data-frames"), "8");
}

TEST(FlamegraphTest, VeryDeepStack) {
  FoldedStacks s;
  std::vector<std::string> deep;
  for (int i = 0; i < 20000; i++) deep.push_back("f" + std::to_string(i % 7));
  s.stacks.push_back({deep, 5});
  deep.resize(10000);
  s.stacks.push_back({deep, 5});
  const std::string svg = sframe::render_flamegraph_svg(s, {});
  expect_well_formed(svg);
  EXPECT_EQ(root_attr(svg, "data-frames"), "20001");
  EXPECT_EQ(root_attr(svg, "height"), std::to_string(36 + 34 + 16 * 20001));
}

// 100000 distinct stacks, 10 to 40 deep, of 2000 functions, each frame one
// of 3 callees of its caller: a tree, as real profiles are.
TEST(FlamegraphTest, HundredThousandStacks) {
  FoldedStacks s;
  uint64_t rng = 42;
  auto next = [&rng] {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(rng >> 33);
  };
  std::map<std::vector<std::string>, bool> seen;
  while (s.stacks.size() < 100000) {
    std::vector<std::string> st;
    const uint32_t depth = 10 + next() % 31;
    uint32_t fn = 0;
    for (uint32_t d = 0; d < depth; d++) {
      fn = (fn * 2654435761u + 1 + next() % 3) % 2000;
      st.push_back("ns::function_" + std::to_string(fn) + "(int)");
    }
    if (seen.emplace(st, true).second) s.stacks.push_back({std::move(st), 1 + next() % 100});
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::string svg = sframe::render_flamegraph_svg(s, {});
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const unsigned long long drawn = std::stoull(root_attr(svg, "data-frames"));
  const unsigned long long pruned = std::stoull(root_attr(svg, "data-pruned"));
  std::printf("100000 stacks: %.0f ms, %llu frames drawn, %llu pruned, %zu bytes of SVG\n", ms,
              drawn, pruned, svg.size());
  EXPECT_GT(drawn, 1000u);
  EXPECT_GT(pruned, 100000u);
  // About 0.4 s here.  (With min_width_px = 0: 1.5 million frames drawn,
  // 350 MB of SVG, 3.5 s.)
  EXPECT_LT(ms, 30000);
  expect_well_formed(svg);
}

}  // namespace
