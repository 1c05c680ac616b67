// `qemb eval` and `qemb fakequant` end to end, through the real binary.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "qemb/half.h"
#include "qemb/npy.h"
#include "qemb/safetensors.h"
#include "support/test_util.h"

namespace qemb {
namespace {

const std::string kQemb = QEMB_CLI_PATH;
constexpr const char* kEmbedding = "model.embed_tokens.weight";

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

qemb::testing::CommandResult qemb(const std::string& args) { return qemb::testing::run_command(kQemb + " " + args); }

// stdout only (the JSON), stderr dropped.
qemb::testing::CommandResult qemb_stdout(const std::string& args) {
  return qemb::testing::run_command("(" + kQemb + " " + args + " 2>/dev/null)");
}

std::vector<uint8_t> encode(const std::vector<float>& v, const std::string& dtype) {
  return *floats_to_dtype_bytes(v.data(), v.size(), dtype);
}

// The bundled example (BF16 [512, 64]) when its generator was built next to
// qemb; otherwise a checkpoint of the same shape written here.
std::string example_checkpoint(const qemb::testing::TempDir& dir) {
  const std::string path = dir.file("example.safetensors");
  const auto generator = std::filesystem::path(kQemb).parent_path() / "qemb_make_example";
  if (std::filesystem::exists(generator) &&
      qemb::testing::run_command(generator.string() + " " + path).exit_code == 0)
    return path;
  std::vector<SafetensorsTensorData> tensors = {
      {kEmbedding, "BF16", {512, 64}, encode(qemb::testing::spread_table(512, 64, 3), "BF16")},
      {"lm_head.weight", "BF16", {512, 64}, encode(qemb::testing::spread_table(512, 64, 4), "BF16")}};
  EXPECT_TRUE(write_safetensors(path, {{"format", "pt"}}, tensors).ok());
  return path;
}

std::string f32_checkpoint(const qemb::testing::TempDir& dir) {
  const std::string path = dir.file("f32.safetensors");
  std::vector<SafetensorsTensorData> tensors = {
      {"model.norm.weight", "F32", {4}, encode({1, 1, 1, 1}, "F32")},
      {kEmbedding, "F32", {200, 16}, encode(qemb::testing::spread_table(200, 16, 9), "F32")}};
  EXPECT_TRUE(write_safetensors(path, {{"format", "pt"}, {"k", "v"}}, tensors).ok());
  return path;
}

std::string all_ids_file(const qemb::testing::TempDir& dir, int64_t rows) {
  const std::string path = dir.file("ids.txt");
  std::ofstream out(path);
  for (int64_t i = 0; i < rows; ++i) out << i << "\n";
  return path;
}

TEST(EvalCli, JsonOnTheExample) {
  qemb::testing::TempDir dir;
  const std::string ckpt = example_checkpoint(dir);
  auto r = qemb_stdout("eval " + ckpt + " --json --scheme all --qnn-sdk-version 2.48");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["tensor"], kEmbedding);
  EXPECT_EQ(j["vocab_size"], 512);
  EXPECT_EQ(j["dim"], 64);
  // Every scheme: both patterns of the six activation schemes, then the one
  // result of each weight-only scheme, each with its bits per value (D = 64).
  ASSERT_EQ(j["results"].size(), 15u);
  const struct {
    const char* scheme;
    int act_bits;
    double bits_per_value;
  } want[] = {{"16a4w", 16, 4.5}, {"16a8w", 16, 8.5}, {"16a2w", 16, 2.5}, {"8a4w", 8, 4.5}, {"8a8w", 8, 8.5},
              {"8a2w", 8, 2.5},   {"w4", 0, 4.5},     {"w8", 0, 8.5},     {"w2", 0, 2.5}};
  size_t i = 0;
  for (const auto& w : want) {
    SCOPED_TRACE(w.scheme);
    const auto& opt = j["results"][i++];
    EXPECT_EQ(opt["scheme"], w.scheme);
    EXPECT_EQ(opt["pattern"], "optimized");
    EXPECT_EQ(opt["deployed"], true);
    EXPECT_EQ(opt["act_bits"], w.act_bits);
    EXPECT_EQ(opt["bits_per_value"], w.bits_per_value);
    EXPECT_EQ(opt["worst_rows"].size(), 10u);
    if (w.act_bits == 0) {
      EXPECT_EQ(opt["act_mean_abs_err"], 0.0);  // no activation step
      continue;
    }
    const auto& leg = j["results"][i++];
    EXPECT_EQ(leg["scheme"], w.scheme);
    EXPECT_EQ(leg["pattern"], "legacy");
    EXPECT_GE(opt["sqnr_db"].get<double>(), leg["sqnr_db"].get<double>());
  }
  EXPECT_GT(j["results"][1]["collapsed_rows"].get<int64_t>(), 0);  // 16a4w legacy loses small rows
}

// --tensor takes a glob as compile does, when it matches one tensor.
TEST(EvalCli, TensorGlobMatchingOne) {
  qemb::testing::TempDir dir;
  const std::string ckpt = example_checkpoint(dir);
  auto r = qemb_stdout("eval " + ckpt + " --tensor 'model.embed_*' --scheme w4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["tensor"], kEmbedding);
  ASSERT_EQ(j["results"].size(), 1u);
  EXPECT_EQ(j["results"][0]["scheme"], "w4");
  // A glob matching several tables is refused, naming them.
  auto many = qemb("eval " + ckpt + " --tensor '[lm][mo]*[sd].weight' --scheme w4");
  EXPECT_EQ(many.exit_code, 1) << many.out;
  EXPECT_TRUE(contains(many.out, "qemb: error: invalid argument: --tensor '[lm][mo]*[sd].weight' matches 2 ")) << many.out;
  EXPECT_TRUE(contains(many.out, "tensors (model.embed_tokens.weight, lm_head.weight)")) << many.out;
  EXPECT_TRUE(contains(many.out, "); this command reads one table: name it, or give a glob that matches one"))
      << many.out;
}

TEST(EvalCli, TableAndReport) {
  qemb::testing::TempDir dir;
  const std::string ckpt = example_checkpoint(dir);
  const std::string report = dir.file("report.html");
  auto r = qemb("eval " + ckpt + " --qnn-sdk-version 2.37 --scheme 16a4w --report " + report);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "-> deployed pattern: legacy")) << r.out;
  EXPECT_TRUE(contains(r.out, "16a4w  legacy      4.500 *")) << r.out;
  EXPECT_FALSE(contains(r.out, "16a8w")) << r.out;
  EXPECT_TRUE(contains(r.out, "wrote report " + report)) << r.out;
  const std::string html = qemb::testing::read_text(report);
  EXPECT_TRUE(contains(html, "id=\"scatter-16a4w\""));
  EXPECT_TRUE(contains(html, "id=\"act-range\""));
}

TEST(EvalCli, TokensAndCalibrationFiles) {
  qemb::testing::TempDir dir;
  const std::string ckpt = example_checkpoint(dir);
  std::ofstream(dir.file("some.txt")) << "5, 5, 9, 300\n";
  std::ofstream(dir.file("calib.txt")) << "1 2 3\n";
  auto r = qemb_stdout("eval " + ckpt + " --json --qnn-sdk-version 2.48 --tokens " + dir.file("some.txt") +
                       " --calibration-tokens " + dir.file("calib.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_EQ(j["rows_evaluated"], 3);
  EXPECT_EQ(j["activation"]["calibration_tokens"], 3);
  EXPECT_EQ(j["activation"]["calibration"], dir.file("calib.txt"));

  std::ofstream(dir.file("bad.txt")) << "1 2 512\n";
  auto bad = qemb("eval " + ckpt + " --calibration-tokens " + dir.file("bad.txt"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(contains(bad.out, "calibration token 512 at position 2 is outside the table's rows [0, 512)")) << bad.out;
}

TEST(EvalCli, ErrorsAreClear) {
  qemb::testing::TempDir dir;
  const std::string ckpt = example_checkpoint(dir);
  auto missing = qemb("eval " + ckpt + " --tensor model.embed.weight");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(contains(missing.out, "qemb: error: not found: no tensor 'model.embed.weight'")) << missing.out;
  EXPECT_TRUE(contains(missing.out, "'model' has no member 'embed'; closest existing names: 'model.embed_tokens'"))
      << missing.out;
  auto scheme = qemb("eval " + ckpt + " --scheme 8a16w");
  EXPECT_EQ(scheme.exit_code, 2);  // a usage error
  EXPECT_TRUE(contains(scheme.out, "unknown scheme '8a16w': expected one of 16a4w, 16a8w, 16a2w, 8a4w, 8a8w, 8a2w, w4, w8, w2, or all")) << scheme.out;
  auto no_scheme = qemb("fakequant " + ckpt + " -o " + dir.file("x.safetensors"));
  EXPECT_EQ(no_scheme.exit_code, 2);
  EXPECT_TRUE(contains(no_scheme.out, "--scheme")) << no_scheme.out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.safetensors")));
  const std::string before = qemb::testing::read_text(ckpt);
  auto self = qemb("fakequant " + ckpt + " --scheme 16a4w --qnn-sdk-version 2.48 -o " + ckpt);
  EXPECT_EQ(self.exit_code, 1);
  EXPECT_TRUE(contains(self.out, "is the input checkpoint")) << self.out;
  EXPECT_EQ(qemb::testing::read_text(ckpt), before);
}

// fakequant == `qemb run --dequantize` over every id, in the checkpoint's
// dtype, and every other byte of the checkpoint unchanged.
void expect_fakequant_equals_run(const qemb::testing::TempDir& dir, const std::string& ckpt,
                                 const std::string& flags) {
  SCOPED_TRACE(ckpt + " " + flags);
  auto file = SafetensorsFile::open(ckpt);
  ASSERT_TRUE(file.ok());
  const SafetensorsTensor* t = file->find(kEmbedding);
  ASSERT_NE(t, nullptr);
  const std::string artifact = dir.file("a.qemb"), lookups = dir.file("y.npy"), out = dir.file("fq.safetensors");
  auto c = qemb("compile " + ckpt + " " + flags + " -o " + artifact);
  ASSERT_EQ(c.exit_code, 0) << c.out;
  auto run = qemb("run " + artifact + " --dequantize --tokens-file " + all_ids_file(dir, t->shape[0]) + " -o " + lookups);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  auto fq = qemb("fakequant " + ckpt + " " + flags + " -o " + out);
  ASSERT_EQ(fq.exit_code, 0) << fq.out;
  EXPECT_TRUE(contains(fq.out, "wrote " + out)) << fq.out;

  auto y = read_npy(lookups);
  ASSERT_TRUE(y.ok());
  ASSERT_EQ(y->dtype, "<f4");
  ASSERT_EQ(y->num_elements(), t->num_elements());
  std::vector<float> values(static_cast<size_t>(y->num_elements()));
  std::memcpy(values.data(), y->data.data(), values.size() * 4);
  auto expected = floats_to_dtype_bytes(values.data(), values.size(), t->dtype);  // RNE for F16/BF16
  ASSERT_TRUE(expected.ok());
  const std::string source = qemb::testing::read_text(ckpt), written = qemb::testing::read_text(out);
  ASSERT_EQ(source.size(), written.size());
  EXPECT_EQ(written.compare(t->begin, t->byte_size(),
                            std::string(expected->begin(), expected->end())), 0);
  EXPECT_EQ(source.compare(0, t->begin, written, 0, t->begin), 0);
  EXPECT_EQ(source.compare(t->end, std::string::npos, written, t->end, std::string::npos), 0);
}

TEST(FakeQuantCli, EqualsRunDequantizeOnTheExample) {
  qemb::testing::TempDir dir;
  const std::string ckpt = example_checkpoint(dir);
  expect_fakequant_equals_run(dir, ckpt, "--scheme 16a4w --qnn-sdk-version 2.48");
  expect_fakequant_equals_run(dir, ckpt, "--scheme 16a8w --qnn-sdk-version 2.37");
  std::ofstream(dir.file("calib.txt")) << "1, 17, 42, 99\n";
  expect_fakequant_equals_run(dir, ckpt,
                              "--scheme 16a4w --pattern legacy --qnn-sdk-version 2.48 --calibration-tokens " +
                                  dir.file("calib.txt"));
}

TEST(FakeQuantCli, EqualsRunDequantizeOnF32) {
  qemb::testing::TempDir dir;
  expect_fakequant_equals_run(dir, f32_checkpoint(dir), "--scheme 16a8w --qnn-sdk-version 2.48");
  expect_fakequant_equals_run(dir, f32_checkpoint(dir), "--scheme 16a4w --tensor model.embed_tokens.weight");
}

}  // namespace
}  // namespace qemb
