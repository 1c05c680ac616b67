// `qemb bench ART --report OUT.html`: a batch-size sweep, hot and cold, of the
// artifact's kernel and the memcpy roofline, on one self-contained page
// (structure always; rendering in headless Chromium where it is installed).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "qemb/bench.h"
#include "qemb/compiler.h"
#include "qemb/runtime.h"
#include "qemb/safetensors.h"
#include "support/test_util.h"

namespace qemb {
namespace {

using qemb::testing::run_command;
using qemb::testing::TempDir;

const std::string kQemb = QEMB_CLI_PATH;

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + needle.size())) ++n;
  return n;
}

class BenchReport : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string ckpt = dir_.file("model.safetensors");
    auto table = qemb::testing::spread_table(300, 24, 3);
    std::vector<uint8_t> bytes(table.size() * 4);
    std::memcpy(bytes.data(), table.data(), bytes.size());
    ASSERT_TRUE(write_safetensors(ckpt, {}, {{"model.embed_tokens.weight", "F32", {300, 24}, bytes}}).ok());
    CompileOptions options;
    options.qnn_sdk_version = "2.48";
    options.mode = CompileMode::kFused;
    art_ = dir_.file("t<&>.qemb");  // a name the page must escape
    ASSERT_TRUE(compile_checkpoint(ckpt, options, art_).ok());
  }

  BenchSweep sweep(std::vector<size_t> batches) {
    auto rt = EmbeddingRuntime::load(art_);
    EXPECT_TRUE(rt.ok());
    BenchOptions o;
    o.min_seconds = 0.003;
    auto s = run_bench_sweep(**rt, o, batches, art_);
    EXPECT_TRUE(s.ok()) << s.error().to_string();
    return *s;
  }

  TempDir dir_;
  std::string art_;
};

TEST_F(BenchReport, SweepMeasuresEveryBatchHotAndCold) {
  const BenchSweep s = sweep({16, 1, 4});
  ASSERT_EQ(s.hot.size(), 3u);
  ASSERT_EQ(s.cold.size(), 3u);
  const size_t want[] = {1, 4, 16};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(s.hot[i].batch, want[i]);
    EXPECT_FALSE(s.hot[i].cold);
    EXPECT_EQ(s.cold[i].batch, want[i]);
    EXPECT_TRUE(s.cold[i].cold);
    EXPECT_GT(s.hot[i].rows_per_s, 0);
    EXPECT_GT(s.cold[i].baseline_rows_per_s, 0);
  }
  EXPECT_EQ(s.kernel.rfind("requant_gather_s4_u16[", 0), 0u) << s.kernel;
  EXPECT_EQ(s.vocab, 300);
  EXPECT_EQ(s.dim, 24);
  EXPECT_EQ(s.row_bytes_read, 16u);  // the fused row-interleaved record: its scale and 12 bytes of nibbles
  EXPECT_EQ(default_sweep_batches(), (std::vector<size_t>{1, 4, 16, 64, 256, 1024, 4096, 16384}));
}

TEST_F(BenchReport, PageHasTheFourSeriesAndTheTable) {
  const std::string html = render_bench_report(sweep({1, 4, 16, 64}));
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(count(html, "<svg"), 1u);
  EXPECT_EQ(count(html, "<path class=\"series\""), 4u);
  for (const char* id : {"kernel-hot", "memcpy-hot", "kernel-cold", "memcpy-cold"})
    EXPECT_NE(html.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  EXPECT_EQ(count(html, "<circle"), 4u * 4);
  EXPECT_EQ(count(html, "<tr>"), 1u + 4);  // header and one row a batch size
  EXPECT_EQ(count(html, "<text"), count(html, "</text>"));
  EXPECT_EQ(count(html, "<circle"), count(html, "</circle>"));
  EXPECT_EQ(count(html, "\""), 2 * (count(html, "=\"")));  // every attribute value is closed
  EXPECT_NE(html.find("t&lt;&amp;&gt;.qemb"), std::string::npos);
  EXPECT_EQ(html.find("t<&>.qemb"), std::string::npos);
  EXPECT_EQ(html.find("http://", 0), html.find("http://www.w3.org/2000/svg"));  // nothing fetched
}

TEST_F(BenchReport, CommandWritesThePageAndPrintsTheSweep) {
  const std::string page = dir_.file("speed.html");
  auto r = run_command(kQemb + " bench '" + art_ + "' --seconds 0.002 --report " + page);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("report:   " + page), std::string::npos) << r.out;
  EXPECT_EQ(count(r.out, "x "), 8u * 1) << r.out;  // a hot ratio per batch size (the cold one ends the line)
  const std::string html = qemb::testing::read_text(page);
  EXPECT_EQ(count(html, "<circle"), 4u * 8);
  r = run_command(kQemb + " bench '" + art_ + "' --seconds 0.002 --json --report " + dir_.file("b.html"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["hot"].size(), 8u);
  EXPECT_EQ(j["cold"][7]["batch"], 16384);
  EXPECT_EQ(j["cold"][7]["cold"], true);
}

// Half-precision outputs are measured as the kernels write them: 2 bytes a value.
TEST_F(BenchReport, BenchMeasuresHalfOutputs) {
  for (const char* dtype : {"f16", "bf16"}) {
    auto r = run_command(kQemb + " bench '" + art_ + "' --seconds 0.002 --dequantize --out-dtype " + dtype + " --json");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["row_bytes_written"], 2 * 24) << dtype;
    EXPECT_GT(j["rows_per_s"].get<double>(), 0.0);
    // The kernel named is the one that ran: the half-precision form's.
    EXPECT_EQ(j["kernel"].get<std::string>().rfind(std::string("requant_gather_s4_") + dtype + "[", 0), 0u) << j["kernel"];
  }
  auto r = run_command(kQemb + " bench '" + art_ + "' --seconds 0.002 --dequantize --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["row_bytes_written"], 4 * 24);
  EXPECT_EQ(nlohmann::json::parse(r.out)["kernel"].get<std::string>().rfind("requant_gather_s4_f32[", 0), 0u) << r.out;
}

// Renders the page in headless Chromium, isolated from the network and from
// any profile.
TEST_F(BenchReport, RendersInChromium) {
  const char* chromium = "/usr/bin/chromium";
  if (!std::filesystem::exists(chromium)) GTEST_SKIP() << chromium << " is not installed";
  const std::string page = dir_.file("speed.html");
  ASSERT_TRUE(write_bench_report(sweep({1, 16, 256}), page).ok());
  const std::string base = std::string("timeout 120 ") + chromium +
                           " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                           " --disable-background-networking --disable-component-update --disable-sync";
  auto dom = run_command(base + " --user-data-dir=" + dir_.file("p1") + " --dump-dom file://" + page);
  ASSERT_EQ(dom.exit_code, 0) << dom.out;
  EXPECT_NE(dom.out.find("id=\"rows-vs-batch\""), std::string::npos);
  EXPECT_EQ(count(dom.out, "<path class=\"series\""), 4u);
  EXPECT_EQ(count(dom.out, "<circle"), 4u * 3);
  const std::string png = dir_.file("speed.png");
  auto shot = run_command(base + " --user-data-dir=" + dir_.file("p2") + " --window-size=1100,900 --screenshot=" +
                          png + " file://" + page);
  ASSERT_EQ(shot.exit_code, 0) << shot.out;
  const std::string bytes = qemb::testing::read_text(png);
  ASSERT_GT(bytes.size(), 10000u) << "a page with a plot and a table makes a larger PNG";
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

}  // namespace
}  // namespace qemb
