// Never lose accuracy silently: compile says how many rows the deployed
// (legacy) pattern collapses, can refuse them for CI, records them in the
// artifact; eval ends with a recommendation and gates CI on its figures.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "qemb/safetensors.h"
#include "support/test_util.h"

namespace qemb {
namespace {

using qemb::testing::run_command;
using qemb::testing::TempDir;

const std::string kQemb = QEMB_CLI_PATH;

// Six rows whose scales make the legacy pattern's per-tensor approximation
// (s_max = 7/qmax at 4 bits: 1.0) wipe out rows 1, 3 and 5 at 4 bits
// (s_r < s_max / 14) and row 3 at 8 bits; row 4 is zero (constant already,
// not counted).
class Collapse : public ::testing::Test {
 protected:
  void SetUp() override {
    const float table[6][4] = {{7.0f, -3.0f, 1.0f, 0.5f},   {0.4f, -0.1f, 0.2f, 0.0f},
                               {-0.6f, 0.3f, 0.0f, 0.1f},   {0.02f, -0.01f, 0.0f, 0.0f},
                               {0.0f, 0.0f, 0.0f, 0.0f},    {0.49f, 0.2f, -0.3f, 0.1f}};
    std::vector<uint8_t> bytes(sizeof table);
    std::memcpy(bytes.data(), table, sizeof table);
    ckpt_ = dir_.file("model.safetensors");
    ASSERT_TRUE(write_safetensors(ckpt_, {}, {{"model.embed_tokens.weight", "F32", {6, 4}, bytes}}).ok());
  }
  std::string q(const std::string& args) const { return kQemb + " " + args; }
  nlohmann::json inspect(const std::string& art) const {
    auto r = run_command(q("inspect " + art + " --json"));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return nlohmann::json::parse(r.out);
  }
  TempDir dir_;
  std::string ckpt_;
};

TEST_F(Collapse, CompileWarnsAndRecordsTheCollapsedRows) {
  const std::string art = dir_.file("a.qemb");
  auto r = run_command(q("compile " + ckpt_ + " --qnn-sdk-version 2.37 --quiet -o " + art));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out,
            "qemb: warning: the legacy pattern collapses 3 of 6 rows (50.00%) of this 16a4w table to a constant "
            "(their scales are under 1/(2 qmax) of the largest); target QNN SDK >= 2.48 (--qnn-sdk-version 2.48) "
            "for the optimized pattern, which loses none, or use 16a8w, which collapses fewer "
            "(--fail-on-collapse or --max-collapsed-rows N make this an error)\n");
  EXPECT_EQ(inspect(art)["collapsed_rows"], 3);
  EXPECT_EQ(inspect(art)["tables"][0]["collapsed_rows"], 3);
  auto text = run_command(q("inspect " + art));
  EXPECT_NE(text.out.find("collapsed:    3 rows read back as a constant"), std::string::npos) << text.out;

  // 8 bits: only the tiny row.
  r = run_command(q("compile " + ckpt_ + " --qnn-sdk-version 2.37 --scheme 16a8w --quiet -o " + art));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out,
            "qemb: warning: the legacy pattern collapses 1 of 6 rows (16.67%) of this 16a8w table to a constant "
            "(their scales are under 1/(2 qmax) of the largest); target QNN SDK >= 2.48 (--qnn-sdk-version 2.48) "
            "for the optimized pattern, which loses none "
            "(--fail-on-collapse or --max-collapsed-rows N make this an error)\n");
  EXPECT_EQ(inspect(art)["collapsed_rows"], 1);

  // The optimized pattern loses none and says nothing.
  r = run_command(q("compile " + ckpt_ + " --qnn-sdk-version 2.48 --quiet -o " + art));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(inspect(art)["collapsed_rows"], 0);
  // An unknown SDK falls back to legacy, and says what that costs.
  r = run_command("env -u QNN_SDK_ROOT " + q("compile " + ckpt_ + " --quiet --fail-on-collapse -o " + art));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("the legacy pattern collapses 3 of 6 rows (50.00%)"), std::string::npos) << r.out;
}

TEST_F(Collapse, FailOnCollapseWritesNothing) {
  const std::string art = dir_.file("a.qemb");
  const std::string want =
      "qemb: error: validation error: the legacy pattern collapses 3 of 6 rows (50.00%) of this 16a4w table to a "
      "constant (their scales are under 1/(2 qmax) of the largest); target QNN SDK >= 2.48 (--qnn-sdk-version "
      "2.48) for the optimized pattern, which loses none, or use 16a8w, which collapses fewer, more than "
      "--max-collapsed-rows ";
  for (const char* mode : {"materialize", "fused"}) {
    auto r = run_command(q("compile " + ckpt_ + " --qnn-sdk-version 2.37 --mode " + mode + " --fail-on-collapse -o " + art));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(r.out, want + "0; nothing was written\n");
    EXPECT_FALSE(std::filesystem::exists(art)) << mode;
    r = run_command(q("compile " + ckpt_ + " --qnn-sdk-version 2.37 --mode " + mode + " --max-collapsed-rows 2 -o " + art));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(r.out, want + "2; nothing was written\n");
    EXPECT_FALSE(std::filesystem::exists(art)) << mode;
  }
  auto r = run_command(q("compile " + ckpt_ + " --qnn-sdk-version 2.37 --max-collapsed-rows 3 --quiet -o " + art));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(std::filesystem::exists(art));
  // An existing artifact stays as it was when the next compile refuses.
  const std::string before = qemb::testing::read_text(art);
  r = run_command(q("compile " + ckpt_ + " --qnn-sdk-version 2.37 --scheme 16a8w --fail-on-collapse -o " + art));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(qemb::testing::read_text(art), before);
  r = run_command(q("compile " + ckpt_ + " --fail-on-collapse --max-collapsed-rows 1 -o " + art));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--fail-on-collapse excludes --max-collapsed-rows"), std::string::npos) << r.out;
}

TEST_F(Collapse, EvalRecommendsAndGates) {
  auto r = run_command(q("eval " + ckpt_ + " --qnn-sdk-version 2.48 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("recommendation")) << r.out;
  EXPECT_EQ(j["recommendation"]["pattern"], "optimized");
  r = run_command(q("eval " + ckpt_ + " --qnn-sdk-version 2.37"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\nrecommendation: 16a8w with the legacy pattern is the most accurate this target deploys, "
                       "but it falls short (SQNR "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("1 rows collapsed); target QNN SDK >= 2.48 (--qnn-sdk-version 2.48) for the optimized "
                       "pattern: "),
            std::string::npos)
      << r.out;
  // The gates: the report is still printed, then exit 1 naming what failed.
  r = run_command(q("eval " + ckpt_ + " --qnn-sdk-version 2.37 --scheme 16a4w --max-collapsed-pct 10"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("recommendation: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("qemb: error: validation error: 16a4w legacy (deployed): 3 rows collapsed (50.00%), over "
                       "--max-collapsed-pct 10%\n"),
            std::string::npos)
      << r.out;
  r = run_command(q("eval " + ckpt_ + " --qnn-sdk-version 2.48 --scheme 16a4w --max-collapsed-pct 0 --min-sqnr 1"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  r = run_command(q("eval " + ckpt_ + " --qnn-sdk-version 2.48 --scheme 16a4w --min-sqnr 200"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("qemb: error: validation error: 16a4w optimized (deployed): SQNR "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" dB is below --min-sqnr 200\n"), std::string::npos) << r.out;
  // The HTML report paints a deployed pattern that collapses rows red, not green.
  r = run_command(q("eval " + ckpt_ + " --qnn-sdk-version 2.37 --scheme 16a4w --report " + dir_.file("r.html")));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string html = qemb::testing::read_text(dir_.file("r.html"));
  EXPECT_NE(html.find("<tr class=\"deployed collapses\">"), std::string::npos);
  EXPECT_EQ(html.find("<tr class=\"deployed\">"), std::string::npos);
  EXPECT_NE(html.find("<b>Recommendation:</b> "), std::string::npos);
}

}  // namespace
}  // namespace qemb
