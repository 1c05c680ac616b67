// The three renderings of an evaluation: JSON, the text table and the
// self-contained HTML report (structure always; rendering in headless
// Chromium where /usr/bin/chromium is installed).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "qemb/eval.h"
#include "support/test_util.h"

namespace qemb {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TargetVersion version(const std::string& v) { return *discover_target_version_from(v, nullptr); }

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + needle.size())) ++n;
  return n;
}

// The text of the element <svg ... id="ID" ...> ... </svg>.
std::string svg_with_id(const std::string& html, const std::string& id) {
  const size_t at = html.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t begin = html.rfind("<svg", at);
  const size_t end = html.find("</svg>", at);
  return html.substr(begin, end + 6 - begin);
}

EvalReport evaluate_spread(int64_t rows, int64_t dim, EvalOptions options = {}) {
  const std::vector<float> table = qemb::testing::spread_table(rows, dim, 5);
  auto r = evaluate_table(table.data(), rows, dim, options, version("2.48"),
                          TableSource{"model.safetensors", "model.embed_tokens.weight", "BF16"});
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  return *r;
}

TEST(EvalJson, HasTheDocumentedShape) {
  EvalOptions o;
  o.worst_rows = 3;
  const nlohmann::ordered_json j = eval_report_json(evaluate_spread(64, 8, o));
  EXPECT_EQ(j["tensor"], "model.embed_tokens.weight");
  EXPECT_EQ(j["dtype"], "BF16");
  EXPECT_EQ(j["vocab_size"], 64);
  EXPECT_EQ(j["dim"], 8);
  EXPECT_EQ(j["rows_evaluated"], 64);
  EXPECT_EQ(j["activation"]["calibration"], "all table values");
  EXPECT_EQ(j["target"]["sdk_version"], "2.48");
  EXPECT_EQ(j["target"]["deployed_pattern"], "optimized");
  ASSERT_EQ(j["results"].size(), 4u);
  const char* keys[] = {"scheme", "pattern", "deployed", "sqnr_db", "cos_mean", "cos_p1", "cos_min", "max_abs_err",
                        "mean_abs_err", "rms_err", "weight_max_abs_err", "weight_mean_abs_err", "weight_sqnr_db",
                        "act_max_abs_err", "act_mean_abs_err", "act_sqnr_db", "collapsed_rows",
                        "collapsed_fraction", "clipped_values", "clipped_fraction", "worst_rows"};
  for (const auto& r : j["results"]) {
    for (const char* k : keys) EXPECT_TRUE(r.contains(k)) << k;
    EXPECT_TRUE(r["sqnr_db"].is_number());
    ASSERT_EQ(r["worst_rows"].size(), 3u);
    for (const char* k : {"id", "row_scale", "rel_err", "max_abs_err", "cos"}) EXPECT_TRUE(r["worst_rows"][0].contains(k));
  }
  EXPECT_EQ(j["results"][0]["scheme"], "16a4w");
  EXPECT_EQ(j["results"][0]["pattern"], "optimized");
  EXPECT_EQ(j["results"][0]["deployed"], true);
  EXPECT_EQ(j["results"][1]["pattern"], "legacy");
  EXPECT_EQ(j["results"][1]["deployed"], false);
  EXPECT_EQ(j["results"][2]["scheme"], "16a8w");
}

TEST(EvalJson, AnExactResultHasNullSqnr) {
  const std::vector<float> zeros(6, 0.0f);
  EvalOptions o;
  o.schemes = {Scheme::k16a8w};
  auto report = evaluate_table(zeros.data(), 3, 2, o, version("2.37"));
  ASSERT_TRUE(report.ok());
  const nlohmann::ordered_json j = eval_report_json(*report);
  for (const auto& r : j["results"]) {
    EXPECT_TRUE(r["sqnr_db"].is_null());
    EXPECT_EQ(r["cos_min"], 1.0);  // both rows zero
    EXPECT_EQ(r["max_abs_err"], 0.0);
    EXPECT_EQ(r["collapsed_rows"], 0);  // constant rows never count as collapsed
  }
  EXPECT_EQ(j["target"]["deployed_pattern"], "legacy");
  const std::string text = format_eval_report(*report);
  EXPECT_THAT(text, HasSubstr("16a8w  optimized  24.000          inf  1.000000"));
}

TEST(EvalText, ListsEveryResultAndTheWorstRows) {
  const std::string text = format_eval_report(evaluate_spread(64, 8));
  EXPECT_THAT(text, HasSubstr("tensor      model.embed_tokens.weight BF16 [64 x 8] from model.safetensors\n"));
  EXPECT_THAT(text, HasSubstr("rows        64 of 64 (all rows)\n"));
  EXPECT_THAT(text, HasSubstr("-> deployed pattern: optimized\n"));
  // Bits per value at D = 8: (4 bytes + the 4-byte scale) * 8 / 8 = 8 for
  // 16a4w, (8 + 4) * 8 / 8 = 12 for 16a8w.
  EXPECT_THAT(text, HasSubstr("\n16a4w  optimized   8.000 *  "));
  EXPECT_THAT(text, HasSubstr("\n16a4w  legacy      8.000    "));
  EXPECT_THAT(text, HasSubstr("\n16a8w  optimized  12.000 *  "));
  EXPECT_THAT(text, HasSubstr("\n16a8w  legacy     12.000    "));
  EXPECT_EQ(count(text, "worst rows, "), 4u);
}

TEST(HtmlReport, HasItsPlotsAndFetchesNothing) {
  const EvalReport report = evaluate_spread(300, 16);
  const std::string html = render_html_report(report);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* id : {"scatter-16a4w", "scatter-16a8w", "errhist-16a4w", "errhist-16a8w", "act-range",
                         "scales-16a4w", "scales-16a8w", "cos-cdf-16a4w", "cos-cdf-16a8w", "sqnr-bars"})
    EXPECT_THAT(html, HasSubstr(std::string("<svg class=\"plot\" id=\"") + id + "\"")) << id;
  EXPECT_EQ(count(html, "<svg"), 10u);
  EXPECT_EQ(count(html, "</svg>"), 10u);
  EXPECT_THAT(html, HasSubstr("<table class=\"metrics\" id=\"metrics\">"));
  EXPECT_EQ(count(html, "<tr class=\"deployed\">"), 2u);  // optimized, for each scheme
  EXPECT_EQ(count(html, "<table class=\"worst-rows\">"), 4u);

  // Self-contained: no scripts, no external resources of any kind. The only
  // URL is the SVG namespace name, which is never fetched.
  for (const char* banned : {"<script", "src=", "href=", "url(", "@import", "@font-face", "<link", "<iframe"})
    EXPECT_THAT(html, Not(HasSubstr(banned))) << banned;
  EXPECT_EQ(count(html, "http"), count(html, "xmlns=\"http://www.w3.org/2000/svg\""));

  // One dot per row and pattern; both patterns in each scatter.
  const std::string scatter = svg_with_id(html, "scatter-16a4w");
  EXPECT_EQ(count(scatter, "<circle"), 600u);
  EXPECT_THAT(scatter, HasSubstr("<g class=\"points legacy\""));
  EXPECT_THAT(scatter, HasSubstr("<g class=\"points optimized\""));
  // Histograms: one filled step path per pattern.
  const std::string hist = svg_with_id(html, "errhist-16a8w");
  EXPECT_EQ(count(hist, "<path class=\"hist "), 2u);
  // The activation range: bars and both bounds.
  const std::string act = svg_with_id(html, "act-range");
  EXPECT_GT(count(act, "<rect x="), 10u);
  EXPECT_EQ(count(act, "class=\"act-bound\""), 2u);
}

// The row-scale histogram counts every evaluated row and marks where the
// legacy pattern collapses rows: s_max / (2 qmax).
TEST(HtmlReport, RowScalesShowTheLegacyCollapseThreshold) {
  EvalOptions o;
  o.schemes = {Scheme::k16a4w};
  const EvalReport report = evaluate_spread(300, 16, o);
  const EvalResult& r = report.results[0];
  EXPECT_EQ(r.scale_histogram.total(), 300u);
  EXPECT_EQ(r.scale_histogram.below + r.scale_histogram.above, 0u);
  EXPECT_EQ(report.results[1].scale_histogram.counts, r.scale_histogram.counts);  // one per scheme
  float smax = 0;
  for (const RowError& row : r.rows) smax = std::max(smax, row.row_scale);
  EXPECT_EQ(r.max_scale, smax);
  const std::string svg = svg_with_id(render_html_report(report), "scales-16a4w");
  EXPECT_EQ(count(svg, "class=\"collapse-threshold\""), 1u);
  char label[64];
  std::snprintf(label, sizeof label, "s_max/(2·qmax) = %.3g", smax / 14.0);
  EXPECT_THAT(svg, HasSubstr(label));
  EXPECT_GT(count(svg, "<rect x="), 3u);
}

// The cosine CDF: one line per pattern, ending at every row; the SQNR bars:
// one per scheme and pattern.
TEST(HtmlReport, CosineCdfAndSqnrBars) {
  const EvalReport report = evaluate_spread(300, 16);
  for (const EvalResult& r : report.results) EXPECT_EQ(r.cos_histogram.total(), 300u);
  const std::string html = render_html_report(report);
  const std::string cdf = svg_with_id(html, "cos-cdf-16a8w");
  EXPECT_EQ(count(cdf, "<path class=\"cdf "), 2u);
  EXPECT_THAT(cdf, HasSubstr("<path class=\"cdf optimized\""));
  const std::string bars = svg_with_id(html, "sqnr-bars");
  EXPECT_EQ(count(bars, "class=\"sqnr-bar optimized\""), 2u);
  EXPECT_EQ(count(bars, "class=\"sqnr-bar legacy\""), 2u);
}

// Plots sit two to a row in every section, so one scheme fills the page's
// width as two do.
TEST(HtmlReport, PlotsComeInPairsWhateverTheSchemes) {
  for (auto schemes : {std::vector<Scheme>{Scheme::k16a8w}, std::vector<Scheme>{Scheme::k16a4w, Scheme::k16a8w}}) {
    EvalOptions o;
    o.schemes = schemes;
    const std::string html = render_html_report(evaluate_spread(40, 8, o));
    EXPECT_THAT(html, HasSubstr("grid-template-columns: repeat(auto-fill, minmax(560px, 1fr))"));
    size_t grids = 0;
    for (size_t at = html.find("<div class=\"plots\">"); at != std::string::npos;
         at = html.find("<div class=\"plots\">", at + 1), ++grids) {
      const std::string grid = html.substr(at, html.find("</div>", at) - at);
      EXPECT_EQ(count(grid, "<svg") % 2, 0u) << schemes.size() << " scheme(s)";
      EXPECT_GE(count(grid, "<svg"), 2u);
    }
    EXPECT_EQ(grids, 3u);
  }
}

TEST(HtmlReport, CalibrationShowsClippedZones) {
  EvalOptions o;
  o.calibration_tokens = std::vector<int64_t>{0, 1, 2};
  const EvalReport report = evaluate_spread(200, 8, o);
  EXPECT_GT(report.results[0].clipped_values, 0);
  const std::string act = svg_with_id(render_html_report(report), "act-range");
  EXPECT_GE(count(act, "class=\"clipped-zone\""), 1u);
}

TEST(HtmlReport, OneSchemeGivesOnePlotOfEachKind) {
  EvalOptions o;
  o.schemes = {Scheme::k16a8w};
  const std::string html = render_html_report(evaluate_spread(40, 8, o));
  EXPECT_EQ(count(html, "<svg"), 6u);
  EXPECT_THAT(html, HasSubstr("id=\"scatter-16a8w\""));
  EXPECT_THAT(html, Not(HasSubstr("id=\"scatter-16a4w\"")));
}

TEST(HtmlReport, LargeVocabulariesAreSampledButKeepTheWorstRows) {
  EvalOptions o;
  o.schemes = {Scheme::k16a4w};
  const EvalReport report = evaluate_spread(10000, 4, o);
  const std::string scatter = svg_with_id(render_html_report(report), "scatter-16a4w");
  const size_t dots = count(scatter, "<circle");
  EXPECT_LE(dots, 2u * (4000 + 10));
  EXPECT_GE(dots, 2u * 3000);
}

TEST(HtmlReport, EscapesNames) {
  const std::vector<float> table = {1, 2, 3, 4};
  auto report = evaluate_table(table.data(), 2, 2, EvalOptions{}, version("2.48"),
                               TableSource{"a&b.safetensors", "<script>alert(1)</script>", "F32"});
  ASSERT_TRUE(report.ok());
  const std::string html = render_html_report(*report);
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_THAT(html, HasSubstr("a&amp;b.safetensors"));
}

TEST(HtmlReport, WriteIsAtomicAndReportsBadPaths) {
  qemb::testing::TempDir dir;
  const EvalReport report = evaluate_spread(20, 4);
  ASSERT_TRUE(write_html_report(report, dir.file("r.html")).ok());
  EXPECT_EQ(qemb::testing::read_text(dir.file("r.html")), render_html_report(report));
  Status bad = write_html_report(report, dir.file("no/such/folder/r.html"));
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(bad.message(), HasSubstr("no/such/folder"));
}

// Renders the report in headless Chromium, isolated from the network and from
// any profile, and checks the browser's DOM has the plots.
class HtmlReportInChromium : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kChromium)) GTEST_SKIP() << kChromium << " is not installed";
    report_ = dir_.file("report.html");
    ASSERT_TRUE(write_html_report(evaluate_spread(256, 16), report_).ok());
  }
  std::string chromium(const std::string& args) {
    const std::string profile = dir_.file("profile-" + std::to_string(runs_++));
    const std::string command =
        std::string("timeout 120 ") + kChromium +
        " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking"
        " --disable-component-update --disable-sync --user-data-dir=" + profile + " " + args + " file://" + report_;
    auto r = qemb::testing::run_command(command);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return r.out;
  }

  static constexpr const char* kChromium = "/usr/bin/chromium";
  qemb::testing::TempDir dir_;
  std::string report_;
  int runs_ = 0;
};

TEST_F(HtmlReportInChromium, TheDomHasThePlots) {
  const std::string dom = chromium("--dump-dom");
  for (const char* id : {"scatter-16a4w", "scatter-16a8w", "errhist-16a4w", "errhist-16a8w", "act-range",
                         "scales-16a4w", "scales-16a8w", "cos-cdf-16a4w", "cos-cdf-16a8w", "sqnr-bars"})
    EXPECT_THAT(dom, HasSubstr(std::string("id=\"") + id + "\"")) << id;
  EXPECT_EQ(count(dom, "<svg"), 10u);
  EXPECT_EQ(count(dom, "<path class=\"cdf"), 4u);
  EXPECT_EQ(count(dom, "<circle"), 2u * 2 * 256);  // two schemes, two patterns, every row
  EXPECT_EQ(count(dom, "<path class=\"hist"), 4u);
  EXPECT_THAT(dom, HasSubstr("What quantization cost"));
}

TEST_F(HtmlReportInChromium, ScreenshotRenders) {
  const std::string png = dir_.file("report.png");
  chromium("--window-size=1400,2400 --screenshot=" + png);
  const std::string bytes = qemb::testing::read_text(png);
  ASSERT_GT(bytes.size(), 50000u) << "a page with five plots makes a larger PNG";
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

}  // namespace
}  // namespace qemb
