// Every scheme of the descriptor table, compile -> artifact -> runtime, in
// both modes and both patterns (weight-only: its one graph), on the fast
// kernels and the reference interpreter: each lookup form and the pooled
// lookups against the contract's formulas (docs/numeric-contract.md,
// "Schemes") computed here from the float table.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "artifact/artifact_io.h"
#include "qemb/compiler.h"
#include "qemb/embedding_bag.h"
#include "qemb/half.h"
#include "qemb/runtime.h"
#include "support/test_util.h"

namespace qemb {
namespace {

using qemb::testing::spread_table;
using qemb::testing::TempDir;

TargetVersion target(const char* v) { return qemb::testing::sdk_target(v); }

struct Case {
  Scheme scheme;
  const char* sdk;  // 2.37 -> legacy, 2.48 -> optimized
  CompileMode mode;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (Scheme s : all_schemes())
    for (const char* sdk : {"2.48", "2.37"})
      for (CompileMode m : {CompileMode::kMaterialize, CompileMode::kFused}) out.push_back({s, sdk, m});
  return out;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(to_string(info.param.scheme)) + "_sdk" + (std::string(info.param.sdk) == "2.48" ? "248" : "237") +
         "_" + to_string(info.param.mode);
}

class SchemeE2E : public ::testing::TestWithParam<Case> {
 protected:
  static constexpr int64_t kRows = 41, kDim = 29;
  void SetUp() override {
    table_ = spread_table(kRows, kDim, 23);
    CompileOptions o;
    o.scheme = GetParam().scheme;
    o.mode = GetParam().mode;
    auto c = compile_table(table_.data(), kRows, kDim, o, target(GetParam().sdk));
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    compiled_ = std::move(c).value();
    path_ = dir_.file("t.qemb");
    ASSERT_TRUE(write_artifact(path_, *compiled_.runtime_graph, compiled_.metadata).ok());
  }

  // The contract's y for every (row, column), and the activation for the
  // activation schemes.
  void contract(std::vector<int32_t>& act, std::vector<float>& y) const {
    const Scheme s = GetParam().scheme;
    const PcqTable pcq = quantize_table(table_.data(), kRows, kDim, s);
    act.assign(static_cast<size_t>(kRows * kDim), 0);
    y.assign(static_cast<size_t>(kRows * kDim), 0.0f);
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t j = 0; j < kDim; ++j) {
        const size_t k = static_cast<size_t>(r * kDim + j);
        const float sr = pcq.scales[static_cast<size_t>(r)];
        const int q = pcq.q[k];
        if (s.weight_only()) {
          y[k] = sr * static_cast<float>(q);
          continue;
        }
        // Spelled out from the contract rather than through numeric.h's helpers.
        const ActivationEncoding& a = compiled_.act;
        float x = sr * static_cast<float>(q);
        if (compiled_.pattern == Pattern::kLegacy) {
          const float smax = pcq.max_scale();
          const int qmax = s.weight_qmax();
          int qi = static_cast<int>(std::nearbyintf(x * (1.0f / smax)));
          qi = std::min(std::max(qi, -qmax), qmax);
          x = smax * static_cast<float>(qi);
        }
        int32_t v = static_cast<int32_t>(std::nearbyintf(x * (1.0f / a.scale))) + a.zero_point;
        v = std::min(std::max(v, 0), s.activation_qmax());
        act[k] = v;
        y[k] = a.scale * static_cast<float>(v - a.zero_point);
      }
  }

  TempDir dir_;
  std::vector<float> table_;
  CompiledEmbedding compiled_;
  std::string path_;
};

TEST_P(SchemeE2E, CompilesTheSchemesGraph) {
  const Scheme s = GetParam().scheme;
  EXPECT_EQ(compiled_.metadata["scheme"], s.name());
  if (s.weight_only()) {
    // No QNN pattern: the SDK version is not consulted.
    EXPECT_EQ(compiled_.pattern, Pattern::kOptimized);
    EXPECT_NE(compiled_.pattern_reason.find("not a QNN pattern"), std::string::npos) << compiled_.pattern_reason;
    EXPECT_FALSE(compiled_.metadata.contains("act_scale"));
  } else {
    EXPECT_EQ(compiled_.pattern, std::string(GetParam().sdk) == "2.48" ? Pattern::kOptimized : Pattern::kLegacy);
    EXPECT_EQ(compiled_.act.bits, s.activation_bits());
    // The activation range covers the table: s_a * (2^A - 1 - zp) reaches its max.
    EXPECT_LE(compiled_.act.zero_point, s.activation_qmax());
  }
  // The output tensor says what a lookup returns.
  const Tensor* out = nullptr;
  for (const Tensor& t : compiled_.runtime_graph->tensors)
    if (t.kind == TensorKind::kAppRead) out = &t;
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->dtype, s.weight_only() ? DataType::kFloat32
                        : s.activation_bits() == 8 ? DataType::kUFixedPoint8
                                                   : DataType::kUFixedPoint16);
}

TEST_P(SchemeE2E, EveryLookupFormMatchesTheContract) {
  const Scheme s = GetParam().scheme;
  std::vector<int32_t> act;
  std::vector<float> y;
  contract(act, y);
  std::vector<int64_t> ids;
  for (int64_t r = kRows - 1; r >= 0; --r) ids.push_back(r);
  for (int64_t r = 0; r < kRows; r += 3) ids.push_back(r);
  const std::vector<int32_t> ids32(ids.begin(), ids.end());
  const size_t n = ids.size() * kDim;
  for (bool reference : {false, true}) {
    SCOPED_TRACE(reference ? "reference" : "kernels");
    RuntimeOptions ro;
    ro.reference = reference;
    auto rt = EmbeddingRuntime::load(path_, ro);
    ASSERT_TRUE(rt.ok()) << rt.error().to_string();
    EXPECT_EQ((*rt)->activation_bits(), s.activation_bits());
    if (!reference) {
      EXPECT_NE((*rt)->kernel_name(), "reference_interpreter");
    }
    // The native form: uint16 / uint8 activations.
    if (s.activation_bits() == 16) {
      std::vector<uint16_t> got(n), got32(n);
      ASSERT_TRUE((*rt)->lookup(ids, got.data()).ok());
      ASSERT_TRUE((*rt)->lookup(ids32, got32.data()).ok());
      for (size_t i = 0; i < n; ++i) {
        const int32_t want = act[static_cast<size_t>(ids[i / kDim] * kDim) + i % kDim];
        ASSERT_EQ(got[i], want) << "value " << i << " " << (*rt)->kernel_name();
        ASSERT_EQ(got32[i], want) << "value " << i;
      }
    } else if (s.activation_bits() == 8) {
      std::vector<uint8_t> got(n), got32(n);
      ASSERT_TRUE((*rt)->lookup(ids, got.data()).ok());
      ASSERT_TRUE((*rt)->lookup(ids32, got32.data()).ok());
      for (size_t i = 0; i < n; ++i) {
        const int32_t want = act[static_cast<size_t>(ids[i / kDim] * kDim) + i % kDim];
        ASSERT_EQ(got[i], want) << "value " << i << " " << (*rt)->kernel_name();
        ASSERT_EQ(got32[i], want) << "value " << i;
      }
    }
    // The dequantized forms: y, and y rounded once to binary16 / bfloat16.
    std::vector<float> f32(n);
    ASSERT_TRUE((*rt)->lookup_dequantized(ids, f32.data()).ok());
    std::vector<uint16_t> f16(n), bf16(n);
    ASSERT_TRUE((*rt)->lookup_dequantized(ids32, FloatDtype::kF16, f16.data()).ok());
    ASSERT_TRUE((*rt)->lookup_dequantized(ids, FloatDtype::kBF16, bf16.data()).ok());
    for (size_t i = 0; i < n; ++i) {
      const float want = y[static_cast<size_t>(ids[i / kDim] * kDim) + i % kDim];
      ASSERT_EQ(std::memcmp(&f32[i], &want, 4), 0) << "value " << i << ": " << f32[i] << " vs " << want;
      ASSERT_EQ(f16[i], float_to_f16(want)) << "value " << i;
      ASSERT_EQ(bf16[i], float_to_bf16(want)) << "value " << i;
    }
    // Pooled: the contract's sum of y in index order, weighted, mean.
    std::vector<int64_t> offsets = {0, 0, 1, 9, static_cast<int64_t>(ids.size())};
    std::vector<float> weights(ids.size());
    for (size_t i = 0; i < weights.size(); ++i) weights[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
    for (int variant = 0; variant < 3; ++variant) {
      TableBags bags;
      bags.table = rt->get();
      bags.indices = std::span<const int64_t>(ids);
      bags.boundaries = std::span<const int64_t>(offsets);
      if (variant == 1) bags.per_sample_weights = std::span<const float>(weights);
      if (variant == 2) bags.mode = PoolMode::kMean;
      std::vector<float> pooled((offsets.size() - 1) * kDim);
      Status st = embedding_bag(bags, pooled.data());
      ASSERT_TRUE(st.ok()) << st.message();
      for (size_t b = 0; b + 1 < offsets.size(); ++b)
        for (int64_t j = 0; j < kDim; ++j) {
          float acc = +0.0f;
          for (int64_t i = offsets[b]; i < offsets[b + 1]; ++i) {
            const float v = y[static_cast<size_t>(ids[static_cast<size_t>(i)] * kDim + j)];
            if (variant == 1) {
              const float p = weights[static_cast<size_t>(i)] * v;
              acc = acc + p;
            } else {
              acc = acc + v;
            }
          }
          const int64_t count = offsets[b + 1] - offsets[b];
          if (variant == 2 && count > 0) acc = acc / static_cast<float>(count);
          const float got = pooled[b * kDim + static_cast<size_t>(j)];
          ASSERT_EQ(std::memcmp(&got, &acc, 4), 0) << "variant " << variant << " bag " << b << " column " << j;
        }
    }
  }
}

TEST_P(SchemeE2E, TheOtherFormIsRefusedAndWritesNothing) {
  const Scheme s = GetParam().scheme;
  auto rt = EmbeddingRuntime::load(path_);
  ASSERT_TRUE(rt.ok());
  const std::vector<int64_t> ids = {1, 2};
  std::vector<uint16_t> u16(2 * kDim, 0xBEEF);
  std::vector<uint8_t> u8(2 * kDim, 0xAB);
  const Status a = (*rt)->lookup(ids, u16.data());
  const Status b = (*rt)->lookup(ids, u8.data());
  const std::string name = (*rt)->table(0).name();
  if (s.weight_only()) {
    EXPECT_EQ(a.message(), "table '" + name + "' is weight-only (scheme " + s.name() +
                               "): its lookups return floats, not uint16 activations; call lookup_dequantized");
    EXPECT_EQ(b.message(), "table '" + name + "' is weight-only (scheme " + s.name() +
                               "): its lookups return floats, not uint8 activations; call lookup_dequantized");
  } else if (s.activation_bits() == 16) {
    EXPECT_TRUE(a.ok());
    EXPECT_EQ(b.message(), "table '" + name + "' returns uint16 activations (scheme " + s.name() +
                               "), not uint8: pass a uint16_t buffer to lookup, or call lookup_dequantized");
  } else {
    EXPECT_TRUE(b.ok());
    EXPECT_EQ(a.message(), "table '" + name + "' returns uint8 activations (scheme " + s.name() +
                               "), not uint16: pass a uint8_t buffer to lookup, or call lookup_dequantized");
  }
  if (!a.ok()) {
    EXPECT_EQ(a.code(), ErrorCode::kInvalidArgument);
    for (uint16_t v : u16) ASSERT_EQ(v, 0xBEEF);
  }
  if (!b.ok()) {
    EXPECT_EQ(b.code(), ErrorCode::kInvalidArgument);
    for (uint8_t v : u8) ASSERT_EQ(v, 0xAB);
  }
}

INSTANTIATE_TEST_SUITE_P(AllSchemes, SchemeE2E, ::testing::ValuesIn(cases()), case_name);

TEST(SchemeCompile, WeightOnlyRefusesTheLegacyPattern) {
  const std::vector<float> table = spread_table(4, 8, 1);
  CompileOptions o;
  o.scheme = Scheme::kW4;
  o.pattern = Pattern::kLegacy;
  auto c = compile_table(table.data(), 4, 8, o, target("2.48"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(c.error().message,
            "the legacy pattern quantizes the lookup's output to a per-tensor activation; weight-only scheme w4 has "
            "none (its lookups return floats): use --pattern auto or optimized, or an activation scheme (16a4w, 8a4w)");
}

TEST(SchemeCompile, TwoBitWeightsSayWhatIsUnknownAboutQnn) {
  const std::vector<float> table = spread_table(4, 8, 1);
  CompileOptions o;
  o.scheme = Scheme::k16a2w;
  auto c = compile_table(table.data(), 4, 8, o, target("2.48"));
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_NE(c->pattern_reason.find("not documented there, so check it on the device"), std::string::npos)
      << c->pattern_reason;
}

}  // namespace
}  // namespace qemb
