// fakequant writes back exactly what the deployed lookup returns: the
// runtime's lookup_dequantized over every id of the compiled artifact, bit for
// bit (F32) or rounded to nearest even into the checkpoint's dtype (F16,
// BF16), and leaves every other byte of the checkpoint as it was.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <numeric>

#include "io/param_store.h"
#include "qemb/eval.h"
#include "qemb/half.h"
#include "qemb/runtime.h"
#include "qemb/safetensors.h"
#include "support/test_util.h"

namespace qemb {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kRows = 300, kDim = 24;
constexpr const char* kEmbedding = "model.embed_tokens.weight";

std::vector<uint8_t> encode(const std::vector<float>& values, const std::string& dtype) {
  auto bytes = floats_to_dtype_bytes(values.data(), values.size(), dtype);
  EXPECT_TRUE(bytes.ok());
  return *bytes;
}

// The embedding in `dtype` between other tensors, with metadata.
std::string write_checkpoint(const qemb::testing::TempDir& dir, const std::string& dtype) {
  const std::string path = dir.file("model-" + dtype + ".safetensors");
  std::vector<SafetensorsTensorData> tensors;
  tensors.push_back({"model.layers.0.mlp.up_proj.weight", "BF16", {4, 8},
                     encode(qemb::testing::spread_table(4, 8, 7), "BF16")});
  tensors.push_back({kEmbedding, dtype, {kRows, kDim}, encode(qemb::testing::spread_table(kRows, kDim, 11), dtype)});
  tensors.push_back({"model.norm.weight", "F32", {8}, encode(std::vector<float>(8, 1.0f), "F32")});
  EXPECT_TRUE(write_safetensors(path, {{"format", "pt"}, {"origin", "fakequant_test"}}, tensors).ok());
  return path;
}

// The runtime's dequantized output for every id, from a compiled artifact.
std::vector<float> runtime_output(const std::string& checkpoint, const CompileOptions& options,
                                  const std::string& artifact) {
  auto compiled = compile_checkpoint(checkpoint, options, artifact);
  EXPECT_TRUE(compiled.ok()) << compiled.error().to_string();
  auto rt = EmbeddingRuntime::load(artifact);
  EXPECT_TRUE(rt.ok()) << rt.error().to_string();
  std::vector<int64_t> ids(kRows);
  std::iota(ids.begin(), ids.end(), 0);
  std::vector<float> out(static_cast<size_t>(kRows * kDim));
  EXPECT_TRUE((*rt)->lookup_dequantized(ids, out.data()).ok());
  return out;
}

// What the runtime's floats become in the checkpoint's dtype.
std::vector<uint8_t> expected_bytes(const std::vector<float>& values, const std::string& dtype) {
  std::vector<uint8_t> out;
  for (float v : values) {
    if (dtype == "F32") {
      uint8_t b[4];
      std::memcpy(b, &v, 4);
      out.insert(out.end(), b, b + 4);
    } else {
      const uint16_t h = dtype == "F16" ? float_to_f16(v) : float_to_bf16(v);
      out.push_back(static_cast<uint8_t>(h & 0xFF));
      out.push_back(static_cast<uint8_t>(h >> 8));
    }
  }
  return out;
}

struct Case {
  std::string dtype;
  Scheme scheme;
  std::string sdk;  // 2.37: legacy, 2.48: optimized
  bool calibrate;
  CompileMode mode;
};

class FakeQuantMatchesRuntime : public ::testing::TestWithParam<Case> {};

TEST_P(FakeQuantMatchesRuntime, BitForBitAndNothingElseChanges) {
  const Case& c = GetParam();
  qemb::testing::TempDir dir;
  const std::string checkpoint = write_checkpoint(dir, c.dtype);
  const std::vector<int64_t> calibration = {3, 17, 150, 299};

  CompileOptions co;
  co.scheme = c.scheme;
  co.qnn_sdk_version = c.sdk;
  co.mode = c.mode;
  if (c.calibrate) co.calibration_tokens = calibration;
  const std::vector<float> runtime = runtime_output(checkpoint, co, dir.file("model.qemb"));

  FakeQuantOptions fo;
  fo.scheme = c.scheme;
  fo.qnn_sdk_version = c.sdk;
  if (c.calibrate) fo.calibration_tokens = calibration;
  const std::string out = dir.file("fakequant.safetensors");
  auto result = fakequant_checkpoint(checkpoint, fo, out);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(result->tensor, kEmbedding);
  EXPECT_EQ(result->dtype, c.dtype);
  EXPECT_EQ(result->pattern, c.sdk == "2.48" ? Pattern::kOptimized : Pattern::kLegacy);

  const std::string source = qemb::testing::read_text(checkpoint);
  const std::string written = qemb::testing::read_text(out);
  ASSERT_EQ(source.size(), written.size());
  auto file = SafetensorsFile::open(checkpoint);
  ASSERT_TRUE(file.ok());
  const SafetensorsTensor* t = file->find(kEmbedding);
  ASSERT_NE(t, nullptr);
  // Header, metadata and every other tensor: byte-identical.
  EXPECT_EQ(source.compare(0, t->begin, written, 0, t->begin), 0);
  EXPECT_EQ(source.compare(t->end, std::string::npos, written, t->end, std::string::npos), 0);
  // The embedding: the runtime's values in the tensor's dtype.
  const std::vector<uint8_t> expected = expected_bytes(runtime, c.dtype);
  ASSERT_EQ(expected.size(), t->byte_size());
  size_t mismatches = 0;
  for (size_t i = 0; i < expected.size(); ++i)
    mismatches += static_cast<uint8_t>(written[t->begin + i]) != expected[i];
  EXPECT_EQ(mismatches, 0u);
  // And the float values the store reads back are the runtime's (exactly for F32).
  if (c.dtype == "F32") {
    auto store = ParamStore::open(out);
    ASSERT_TRUE(store.ok());
    EXPECT_EQ(store->get(kEmbedding)->values, runtime);
  }
}

INSTANTIATE_TEST_SUITE_P(
    DtypesSchemesPatterns, FakeQuantMatchesRuntime,
    ::testing::Values(Case{"F32", Scheme::k16a4w, "2.48", false, CompileMode::kMaterialize},
                      Case{"F32", Scheme::k16a4w, "2.37", false, CompileMode::kMaterialize},
                      Case{"F32", Scheme::k16a8w, "2.48", false, CompileMode::kFused},
                      Case{"F32", Scheme::k16a8w, "2.37", true, CompileMode::kFused},
                      Case{"F16", Scheme::k16a4w, "2.48", true, CompileMode::kMaterialize},
                      Case{"F16", Scheme::k16a8w, "2.37", false, CompileMode::kMaterialize},
                      Case{"BF16", Scheme::k16a4w, "2.37", false, CompileMode::kFused},
                      Case{"BF16", Scheme::k16a8w, "2.48", false, CompileMode::kMaterialize},
                      Case{"BF16", Scheme::k16a4w, "2.48", true, CompileMode::kMaterialize}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string name = info.param.dtype + "_" + to_string(info.param.scheme) + "_" +
                         (info.param.sdk == "2.48" ? "optimized" : "legacy") +
                         (info.param.calibrate ? "_calibrated" : "") + "_" + to_string(info.param.mode);
      return name;
    });

TEST(FakeQuant, ForcedPatternsAndTheirValidation) {
  qemb::testing::TempDir dir;
  const std::string checkpoint = write_checkpoint(dir, "F32");
  FakeQuantOptions o;
  o.pattern = Pattern::kLegacy;
  o.qnn_sdk_version = "2.48";
  auto legacy = fakequant_checkpoint(checkpoint, o, dir.file("legacy.safetensors"));
  ASSERT_TRUE(legacy.ok()) << legacy.error().to_string();
  EXPECT_EQ(legacy->pattern, Pattern::kLegacy);
  EXPECT_THAT(legacy->pattern_reason, HasSubstr("requested; target SDK"));

  // Forcing optimized on an older target fails as compile does, and writes nothing.
  o.pattern = Pattern::kOptimized;
  o.qnn_sdk_version = "2.37";
  const std::string out = dir.file("optimized.safetensors");
  auto refused = fakequant_checkpoint(checkpoint, o, out);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kValidationError);
  EXPECT_THAT(refused.error().message, HasSubstr("needs QNN SDK >= 2.48, but the target is 2.37"));
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(FakeQuant, TensorPathErrorsNameTheMissingComponent) {
  qemb::testing::TempDir dir;
  const std::string checkpoint = write_checkpoint(dir, "F32");
  FakeQuantOptions o;
  o.qnn_sdk_version = "2.48";
  o.tensor = "model.embed.weight";
  auto r = fakequant_checkpoint(checkpoint, o, dir.file("out.safetensors"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(r.error().message, HasSubstr("'model' has no member 'embed'; closest existing names: 'model.embed_tokens'"));

  o.tensor = "model.norm.weight";  // 1-D
  auto one_d = fakequant_checkpoint(checkpoint, o, dir.file("out.safetensors"));
  ASSERT_FALSE(one_d.ok());
  EXPECT_EQ(one_d.error().code, ErrorCode::kUnsupported);
  EXPECT_THAT(one_d.error().message, HasSubstr("2-D"));

  // An explicit dotted path to another 2-D tensor works and rewrites only it.
  o.tensor = "model.layers.0.mlp.up_proj.weight";
  auto other = fakequant_checkpoint(checkpoint, o, dir.file("other.safetensors"));
  ASSERT_TRUE(other.ok()) << other.error().to_string();
  EXPECT_EQ(other->tensor, "model.layers.0.mlp.up_proj.weight");
  auto store = ParamStore::open(dir.file("other.safetensors"));
  ASSERT_TRUE(store.ok());
  auto original = ParamStore::open(checkpoint);
  EXPECT_EQ(store->get(kEmbedding)->values, original->get(kEmbedding)->values);
}

TEST(FakeQuant, RefusesToOverwriteTheCheckpoint) {
  qemb::testing::TempDir dir;
  const std::string checkpoint = write_checkpoint(dir, "BF16");
  const std::string before = qemb::testing::read_text(checkpoint);
  FakeQuantOptions o;
  o.qnn_sdk_version = "2.48";
  auto r = fakequant_checkpoint(checkpoint, o, checkpoint);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(r.error().message, HasSubstr("is the input checkpoint"));
  EXPECT_EQ(qemb::testing::read_text(checkpoint), before);
}

TEST(DeployedRows, MatchesTheQuantizeFormulasAndRejectsAuto) {
  const std::vector<float> table = qemb::testing::spread_table(5, 3, 1);
  const PcqTable pcq = quantize_table(table.data(), 5, 3, Scheme::k16a8w);
  const ActivationEncoding act = activation_encoding(-2.0f, 3.0f);
  std::vector<float> out(6);
  ASSERT_TRUE(deployed_rows(pcq, act, Pattern::kLegacy, 2, 4, out.data()).ok());
  for (int64_t r = 2; r < 4; ++r)
    for (int64_t j = 0; j < 3; ++j)
      EXPECT_EQ(out[(r - 2) * 3 + j],
                dequantize_activation(legacy_output(pcq.scales[r], pcq.q[r * 3 + j], pcq.max_scale(), 127, act), act));
  EXPECT_EQ(deployed_rows(pcq, act, Pattern::kAuto, 0, 1, out.data()).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(deployed_rows(pcq, act, Pattern::kOptimized, 4, 6, out.data()).code(), ErrorCode::kOutOfRange);
}

}  // namespace
}  // namespace qemb
