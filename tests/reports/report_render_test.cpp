// HTML and Markdown rendering: the plots and tables are there, every string is escaped, empty
// sections say so, and the page asks for nothing outside itself.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "detmoe/report.h"
#include "html_text.h"
#include "sample_report.h"

namespace detmoe::report {
namespace {

std::size_t count(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t p = haystack.find(needle); p != std::string::npos; p = haystack.find(needle, p + needle.size())) ++n;
  return n;
}

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

TEST(ReportHtml, HasEveryPlotAndTable) {
  const std::string html = render_html(testing::full_sample());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* plot : {"throughput-fwd", "throughput-fwd-bwd", "fraction-of-ceiling", "bandwidth"})
    EXPECT_EQ(count(html, std::string("data-plot=\"") + plot + "\""), 1u) << plot;
  // fwd: 3 rows, fwd+bwd: 2 rows, of-ceiling: the 4 rows that have a fraction.
  EXPECT_EQ(count(html, "<rect class=\"bar\""), 9u);
  EXPECT_EQ(count(html, "<rect class=\"cell\""), 4u);  // 2x2 bandwidth heat map
  EXPECT_EQ(count(html, "class=\"reference\""), 3u);   // ceiling line on both throughput plots, 100 % line
  EXPECT_TRUE(contains(html, "id=\"verdict-grid\""));
  EXPECT_TRUE(contains(html, "<th>gpu0</th><th>gpu1</th>"));
  EXPECT_TRUE(contains(html, "class=\"verdict v-Fail\" title=\"rerun 3 differs at out[17,5]\">Fail</td>"));
  EXPECT_TRUE(contains(html, "Per GPU pair: nccl-pair-bandwidth"));
  EXPECT_TRUE(contains(html, "id=\"overall\">FAIL"));
  EXPECT_TRUE(contains(html, "element 133 [2, 5]: expected 0.50390625, got nan"));
  EXPECT_TRUE(contains(html, "380 GB/s"));
}

TEST(ReportHtml, AsksForNothingOutsideItself) {
  const std::string html = render_html(testing::full_sample());
  EXPECT_TRUE(contains(html, "Content-Security-Policy\" content=\"default-src 'none'"));
  EXPECT_FALSE(contains(html, "<script"));
  EXPECT_FALSE(contains(html, "<link"));
  EXPECT_FALSE(contains(html, "<img"));
  EXPECT_FALSE(contains(html, "src="));
  EXPECT_FALSE(contains(html, "url("));
  // The only URL is the SVG namespace name, which is never fetched.
  EXPECT_EQ(count(html, "https:"), 0u);
  EXPECT_EQ(count(html, "http:"), count(html, "xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_EQ(count(html, "//"), count(html, "xmlns=\"http://www.w3.org/2000/svg\""));  // no protocol-relative URL either
}

TEST(ReportHtml, EscapesEveryString) {
  RunReport r = testing::full_sample();
  r.checks[0].name = "<script>alert(1)</script>";
  r.checks[1].detail = "\" onmouseover=\"alert(2)";
  r.benchmarks[1].impl = "mega<b>kernel</b> & co";
  r.benchmarks[0].shape = "<img src=x onerror=alert(3)>";
  r.inventory.gpus[0].name = "H200 'sxm'";
  r.run.host = "</title><script>x</script>";
  const std::string html = render_html(r);
  EXPECT_FALSE(contains(html, "<script"));
  EXPECT_FALSE(contains(html, "<img"));
  EXPECT_FALSE(contains(html, "<b>"));
  EXPECT_FALSE(contains(html, "\" onmouseover"));
  EXPECT_TRUE(contains(html, "&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_TRUE(contains(html, "mega&lt;b&gt;kernel&lt;/b&gt; &amp; co"));  // in the SVG legend and the table
  EXPECT_TRUE(contains(html, "H200 &#39;sxm&#39;"));
  EXPECT_TRUE(contains(html, "&quot; onmouseover=&quot;alert(2)"));
}

TEST(ReportHtml, EmptySectionsSaySo) {
  const std::string html = render_html(testing::empty_sample());
  EXPECT_TRUE(contains(html, "No checks in this run."));
  EXPECT_TRUE(contains(html, "No GPUs in this run: no CUDA device."));
  EXPECT_TRUE(contains(html, "No benchmarks in this run."));
  EXPECT_TRUE(contains(html, "No bandwidth measurement in this run."));
  EXPECT_TRUE(contains(html, "No golden comparisons in this run."));
  EXPECT_FALSE(contains(html, "<svg"));
}

TEST(ReportHtml, UnfinishedRunIsFlagged) {
  RunReport r = testing::full_sample();
  r.run.state = RunState::kRunning;
  EXPECT_TRUE(contains(render_html(r), "This run did not finish"));
  EXPECT_TRUE(contains(render_markdown(r), "This run did not finish"));
  EXPECT_FALSE(contains(render_html(testing::full_sample()), "did not finish"));
}

TEST(ReportHtml, SameReportSameBytes) {
  EXPECT_EQ(render_html(testing::full_sample()), render_html(testing::full_sample()));
}

TEST(ReportHtml, OnlyBenchmarksOfOnePassDrawOnePlot) {
  RunReport r = testing::full_sample();
  r.benchmarks.resize(3);  // forward only
  r.perf_ceiling.reset();
  for (auto& b : r.benchmarks) b.fraction_of_ceiling.reset();
  const std::string html = render_html(r);
  EXPECT_TRUE(contains(html, "data-plot=\"throughput-fwd\""));
  EXPECT_FALSE(contains(html, "data-plot=\"throughput-fwd-bwd\""));
  EXPECT_FALSE(contains(html, "data-plot=\"fraction-of-ceiling\""));
  EXPECT_EQ(count(html, "class=\"reference\""), 0u);
}

TEST(ReportMarkdown, HasTheSameTables) {
  const std::string md = render_markdown(testing::full_sample());
  EXPECT_TRUE(contains(md, "| check | cpu | node | gpu0 | gpu1 |"));
  EXPECT_TRUE(contains(md, "| tiny-layer-rerun |   |   | Pass | **Fail** |"));
  EXPECT_TRUE(contains(md, "**FAIL**: 7 checks — 3 Pass, 2 Fail, 1 Warn, 1 Skip"));
  EXPECT_TRUE(contains(md, "| gpu1 | 120 | — |"));
  EXPECT_TRUE(contains(md, "| megakernel | qwen3-30b-a3b | balanced | fwd | 1 | 3.90 | 3.85–3.95 | 317 | 1.65× torch-grouped-mm | 42 % | 2.25 | 10 |"));
  EXPECT_TRUE(contains(md, "**changed**"));
}

TEST(ReportMarkdown, EscapesCellText) {
  RunReport r = testing::full_sample();
  r.checks[0].name = "a|b <script>";
  r.checks[0].detail = "line1\nline2 *bold*";
  const std::string md = render_markdown(r);
  EXPECT_TRUE(contains(md, "a\\|b &lt;script&gt;"));
  EXPECT_TRUE(contains(md, "line1 line2 \\*bold\\*"));
  EXPECT_FALSE(contains(md, "<script"));
}

TEST(ReportMarkdown, EmptySectionsSaySo) {
  const std::string md = render_markdown(testing::empty_sample());
  EXPECT_TRUE(contains(md, "No checks in this run."));
  EXPECT_TRUE(contains(md, "No benchmarks in this run."));
  EXPECT_TRUE(contains(md, "No bandwidth measurement in this run."));
  EXPECT_TRUE(contains(md, "No golden comparisons in this run."));
}

TEST(ReportText, Utf8IsRepaired) {
  EXPECT_EQ(valid_utf8("ok é ✓ 𝄞"), "ok é ✓ 𝄞");
  EXPECT_EQ(valid_utf8("a\xff" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(valid_utf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");      // overlong '/'
  EXPECT_EQ(valid_utf8("\xED\xA0\x80").size(), 9u);                   // a surrogate: three replacements
  EXPECT_EQ(valid_utf8("\xE2\x9C"), "\xEF\xBF\xBD\xEF\xBF\xBD");      // truncated
}

TEST(ReportText, NumbersKeepThreeFigures) {
  EXPECT_EQ(format_value(0), "0");
  EXPECT_EQ(format_value(192.4), "192");
  EXPECT_EQ(format_value(12.34), "12.3");
  EXPECT_EQ(format_value(1.654), "1.65");
  EXPECT_EQ(format_value(0.0512), "0.0512");
}

// Whatever a name holds, it adds no markup: the page has the same number of '<' as with a plain name.
RC_GTEST_PROP(ReportHtmlProperty, NamesNeverBecomeMarkup, (const std::string& name)) {
  RunReport r = testing::full_sample();
  // A name equal to another check's or impl's merges rows or series, which is meant to change the page.
  for (const CheckResult& c : r.checks) RC_PRE(name != c.name);
  for (const BenchmarkResult& b : r.benchmarks) RC_PRE(name != b.impl);
  auto page = [&](const std::string& n) {
    RunReport copy = r;
    copy.checks[0].name = n;
    copy.benchmarks[1].impl = n.empty() ? "x" : n;
    return render_html(copy);
  };
  const std::string html = page(name);
  RC_ASSERT(std::count(html.begin(), html.end(), '<') == [&] {
    const std::string plain = page("plain");
    return std::count(plain.begin(), plain.end(), '<');
  }());
  RC_ASSERT(valid_utf8(html) == html);
}

RC_GTEST_PROP(ReportHtmlProperty, EscapedTextHasNoMarkupCharacters, (const std::string& s)) {
  const std::string e = html_escape(s);
  RC_ASSERT(e.find_first_of("<>\"'") == std::string::npos);
  RC_ASSERT(valid_utf8(e) == e);
}

// The checked-in example is what the renderer makes of the checked-in JSON (regenerate with
// `build/detmoe report render reports/examples/sample-run.json -o reports/examples/sample-run.html
//  --markdown reports/examples/sample-run.md`).
TEST(ReportExamples, AreCurrent) {
  auto read = [](const std::string& rel) {
    std::ifstream f(std::string(DETMOE_SOURCE_DIR) + "/reports/examples/" + rel, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
  };
  const StatusOr<RunReport> r = parse_run_report(read("sample-run.json"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(render_html(*r) == read("sample-run.html")) << "reports/examples/sample-run.html is stale; regenerate it";
  EXPECT_TRUE(render_markdown(*r) == read("sample-run.md")) << "reports/examples/sample-run.md is stale; regenerate it";
}

}  // namespace
}  // namespace detmoe::report
