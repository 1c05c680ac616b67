// Compile -> artifact -> runtime, checked against the contract's formulas for
// every scheme, pattern and mode, on both the fast kernels and the reference
// interpreter.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

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

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(to_string(info.param.scheme)) + "_" +
         (std::string(info.param.sdk) == "2.48" ? "optimized" : "legacy") + "_" + to_string(info.param.mode);
}

class RuntimeE2E : public ::testing::TestWithParam<Case> {
 protected:
  static constexpr int64_t kRows = 67, kDim = 37;
  void SetUp() override {
    table_ = spread_table(kRows, kDim, 11);
    CompileOptions o;
    o.scheme = GetParam().scheme;
    o.mode = GetParam().mode;
    auto c = compile_table(table_.data(), kRows, kDim, o, target(GetParam().sdk));
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    compiled_ = std::move(c).value();
    path_ = dir_.file("t.qemb");
    ASSERT_TRUE(write_artifact(path_, *compiled_.runtime_graph, compiled_.metadata).ok());
  }
  TempDir dir_;
  std::vector<float> table_;
  CompiledEmbedding compiled_;
  std::string path_;
};

TEST_P(RuntimeE2E, EveryRowMatchesTheContractOnFastAndReferencePaths) {
  std::vector<int64_t> ids;
  for (int64_t r = kRows - 1; r >= 0; --r) ids.push_back(r);
  ids.push_back(0);
  ids.push_back(kRows - 1);
  ids.push_back(5);
  ids.push_back(5);
  std::vector<uint16_t> want(ids.size() * kDim);
  const PcqTable pcq = quantize_table(table_.data(), kRows, kDim, GetParam().scheme);
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t j = 0; j < kDim; ++j) {
      const int q = pcq.q[ids[i] * kDim + j];
      want[i * kDim + j] = compiled_.pattern == Pattern::kOptimized
                               ? optimized_output(pcq.scales[ids[i]], q, compiled_.act)
                               : legacy_output(pcq.scales[ids[i]], q, pcq.max_scale(),
                                               weight_qmax(GetParam().scheme), compiled_.act);
    }
  for (bool reference : {false, true}) {
    RuntimeOptions ro;
    ro.reference = reference;
    auto rt = EmbeddingRuntime::load(path_, ro);
    ASSERT_TRUE(rt.ok()) << rt.error().to_string();
    if (reference) {
      EXPECT_EQ((*rt)->kernel_name(), "reference_interpreter");
    } else {
      EXPECT_NE((*rt)->kernel_name(), "reference_interpreter") << "the fast path should cover this graph";
    }
    std::vector<uint16_t> got(ids.size() * kDim);
    ASSERT_TRUE((*rt)->lookup(ids, got.data()).ok());
    EXPECT_EQ(got, want) << (*rt)->kernel_name();
    std::vector<float> deq(ids.size() * kDim);
    ASSERT_TRUE((*rt)->lookup_dequantized(ids, deq.data()).ok());
    for (size_t k = 0; k < want.size(); ++k) {
      const float y = dequantize_activation(want[k], compiled_.act);
      ASSERT_EQ(std::memcmp(&deq[k], &y, 4), 0) << "element " << k;
    }
    std::vector<int32_t> ids32(ids.begin(), ids.end());
    std::vector<uint16_t> got32(ids.size() * kDim);
    ASSERT_TRUE((*rt)->lookup(ids32, got32.data()).ok());
    EXPECT_EQ(got32, want);
    // Half precision: the float32 y rounded to nearest even, from both id types.
    for (FloatDtype dtype : {FloatDtype::kF16, FloatDtype::kBF16}) {
      std::vector<uint16_t> want_half(want.size());
      for (size_t k = 0; k < want.size(); ++k) {
        const float y = dequantize_activation(want[k], compiled_.act);
        want_half[k] = dtype == FloatDtype::kF16 ? float_to_f16(y) : float_to_bf16(y);
      }
      std::vector<uint16_t> half(want.size()), half32(want.size());
      ASSERT_TRUE((*rt)->lookup_dequantized(ids, dtype, half.data()).ok());
      ASSERT_TRUE((*rt)->lookup_dequantized(ids32, dtype, half32.data()).ok());
      EXPECT_EQ(half, want_half) << to_string(dtype) << " " << (*rt)->kernel_name();
      EXPECT_EQ(half32, want_half) << to_string(dtype);
    }
  }
}

// A fused compile is stored row-interleaved (format 3); the same graph
// written in the layout older builds wrote (format 1: values, scales and
// offsets apart) must serve the same bits, on the kernels, the reference
// interpreter and the pooled path.
TEST_P(RuntimeE2E, FormatOneFileOfTheSameGraphServesTheSameBits) {
  const bool fused = GetParam().mode == CompileMode::kFused;
  const std::string old_path = dir_.file("old.qemb");
  ASSERT_TRUE(write_artifact(old_path, *compiled_.runtime_graph, compiled_.metadata, ArtifactWriteOptions{1}).ok());
  std::vector<int64_t> ids;
  for (int64_t r = kRows - 1; r >= 0; --r) ids.push_back(r);
  for (int64_t r = 0; r < kRows; r += 3) ids.push_back(r);
  std::vector<int64_t> offsets = {0, 0, 1, 20, static_cast<int64_t>(ids.size())};  // an empty bag, a bag of 1
  std::vector<float> weights(ids.size());
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  struct Served {
    std::vector<uint16_t> q;
    std::vector<float> y, pooled;
  };
  auto serve = [&](const std::string& path, bool reference, uint32_t* version, bool* rows_section) {
    RuntimeOptions ro;
    ro.reference = reference;
    auto rt = EmbeddingRuntime::load(path, ro);
    EXPECT_TRUE(rt.ok()) << rt.error().to_string();
    Served s;
    if (!rt.ok()) return s;
    *version = (*rt)->artifact().format_version;
    *rows_section = false;
    for (const SectionInfo& info : (*rt)->artifact().sections) *rows_section |= info.kind == SectionKind::kRows;
    s.q.resize(ids.size() * kDim);
    s.y.resize(ids.size() * kDim);
    EXPECT_TRUE((*rt)->lookup(ids, s.q.data()).ok());
    EXPECT_TRUE((*rt)->lookup_dequantized(ids, s.y.data()).ok());
    TableBags bags;
    bags.table = rt->get();
    bags.indices = std::span<const int64_t>(ids);
    bags.boundaries = std::span<const int64_t>(offsets);
    bags.per_sample_weights = std::span<const float>(weights);
    s.pooled.resize((offsets.size() - 1) * kDim);
    Status st = embedding_bag(bags, s.pooled.data());
    EXPECT_TRUE(st.ok()) << st.message();
    return s;
  };
  for (bool reference : {false, true}) {
    SCOPED_TRACE(reference ? "reference" : "kernels");
    uint32_t new_version = 0, old_version = 0;
    bool new_rows = false, old_rows = false;
    const Served now = serve(path_, reference, &new_version, &new_rows);
    const Served old = serve(old_path, reference, &old_version, &old_rows);
    EXPECT_EQ(old_version, 1u);
    EXPECT_FALSE(old_rows);
    EXPECT_EQ(new_rows, fused);
    EXPECT_EQ(new_version, (fused || GetParam().sdk == std::string("2.37")) ? 3u : 1u);
    EXPECT_EQ(now.q, old.q);
    ASSERT_EQ(now.y.size(), old.y.size());
    EXPECT_EQ(0, std::memcmp(now.y.data(), old.y.data(), now.y.size() * sizeof(float)));
    ASSERT_EQ(now.pooled.size(), old.pooled.size());
    EXPECT_EQ(0, std::memcmp(now.pooled.data(), old.pooled.data(), now.pooled.size() * sizeof(float)));
  }
}

TEST_P(RuntimeE2E, BadIdsFailTheWholeCallAndWriteNothing) {
  auto rt = EmbeddingRuntime::load(path_);
  ASSERT_TRUE(rt.ok());
  std::vector<uint16_t> out(3 * kDim, 0xBEEF);
  std::vector<int64_t> ids = {1, 2, kRows};
  Status s = (*rt)->lookup(ids, out.data());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(s.message(), "token id 67 at position 2 is past the last row; ids must be in [0, 67)");
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](uint16_t v) { return v == 0xBEEF; }));
  std::vector<int32_t> neg = {0, -1};
  std::vector<float> fout(2 * kDim, 7.0f);
  s = (*rt)->lookup_dequantized(neg, fout.data());
  EXPECT_EQ(s.message(), "token id -1 at position 1 is negative; ids must be in [0, 67)");
  EXPECT_TRUE(std::all_of(fout.begin(), fout.end(), [](float v) { return v == 7.0f; }));
}

TEST_P(RuntimeE2E, ThreadsAndConcurrentCallersGiveIdenticalResults) {
  RuntimeOptions ro;
  ro.threads = 2;
  auto rt = EmbeddingRuntime::load(path_, ro);
  ASSERT_TRUE(rt.ok());
  auto single = EmbeddingRuntime::load(path_);
  qemb::testing::Rng rng(5);
  std::vector<int64_t> ids(4096);
  for (auto& id : ids) id = static_cast<int64_t>(rng.next() % kRows);
  std::vector<uint16_t> want(ids.size() * kDim), got(ids.size() * kDim);
  ASSERT_TRUE((*single)->lookup(ids, want.data()).ok());
  ASSERT_TRUE((*rt)->lookup(ids, got.data()).ok());
  EXPECT_EQ(got, want);
  std::vector<std::thread> callers;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 6; ++t) {
    callers.emplace_back([&] {
      std::vector<uint16_t> mine(ids.size() * kDim);
      for (int k = 0; k < 5; ++k) {
        if (!(*rt)->lookup(ids, mine.data()).ok() || mine != want) ++mismatches;
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(mismatches.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    AllSchemesPatternsModes, RuntimeE2E,
    ::testing::Values(Case{Scheme::k16a4w, "2.48", CompileMode::kMaterialize},
                      Case{Scheme::k16a4w, "2.48", CompileMode::kFused},
                      Case{Scheme::k16a4w, "2.37", CompileMode::kMaterialize},
                      Case{Scheme::k16a4w, "2.37", CompileMode::kFused},
                      Case{Scheme::k16a8w, "2.48", CompileMode::kMaterialize},
                      Case{Scheme::k16a8w, "2.48", CompileMode::kFused},
                      Case{Scheme::k16a8w, "2.37", CompileMode::kMaterialize},
                      Case{Scheme::k16a8w, "2.37", CompileMode::kFused}),
    case_name);

TEST(RuntimeLoad, TruncatedArtifactIsRefusedCleanly) {
  TempDir dir;
  auto table = spread_table(16, 8, 3);
  auto c = compile_table(table.data(), 16, 8, CompileOptions{}, target("2.48"));
  ASSERT_TRUE(c.ok());
  const std::string path = dir.file("t.qemb");
  ASSERT_TRUE(write_artifact(path, *c->runtime_graph, c->metadata).ok());
  const auto size = std::filesystem::file_size(path);
  for (Verify v : {Verify::kFull, Verify::kHeader}) {
    std::filesystem::resize_file(path, size - 1);
    RuntimeOptions ro;
    ro.verify = v;
    auto rt = EmbeddingRuntime::load(path, ro);
    ASSERT_FALSE(rt.ok());
    EXPECT_EQ(rt.error().code, ErrorCode::kCorrupt) << rt.error().to_string();
  }
}

}  // namespace
}  // namespace qemb
