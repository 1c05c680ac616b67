// Pooled lookups end to end: compile -> artifact -> runtime -> embedding_bags,
// for every scheme, pattern and mode, against the contract computed here from
// the plain dequantized lookup, on the fast kernels, the reference
// interpreter, one and two threads, every form of bag boundaries, table-batched
// calls and half outputs; and every kind of bad input, which must fail with
// its exact message and leave the output untouched.
#include <gtest/gtest.h>

#include <cstring>
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

std::unique_ptr<EmbeddingRuntime> make_runtime(const TempDir& dir, const char* file, int64_t rows,
                                               int64_t dim, Scheme scheme, const char* sdk,
                                               CompileMode mode, RuntimeOptions options = {}) {
  const std::vector<float> table = spread_table(rows, dim, 11 + static_cast<uint64_t>(dim));
  CompileOptions o;
  o.scheme = scheme;
  o.mode = mode;
  auto c = compile_table(table.data(), rows, dim, o, target(sdk));
  EXPECT_TRUE(c.ok()) << c.error().to_string();
  const std::string path = dir.file(file);
  EXPECT_TRUE(write_artifact(path, *c->runtime_graph, c->metadata).ok());
  auto rt = EmbeddingRuntime::load(path, options);
  EXPECT_TRUE(rt.ok()) << rt.error().to_string();
  return std::move(rt).value();
}

// The contract, computed from the runtime's own dequantized rows.
std::vector<float> expected_bags(const EmbeddingRuntime& rt, const std::vector<int64_t>& ids,
                                 const std::vector<int64_t>& offsets, const float* weights,
                                 bool mean, int64_t padding) {
  const size_t dim = static_cast<size_t>(rt.dim());
  std::vector<float> rows(ids.size() * dim);
  EXPECT_TRUE(rt.lookup_dequantized(ids, rows.data()).ok());
  const size_t bags = offsets.size() - 1;
  std::vector<float> out(bags * dim);
  for (size_t b = 0; b < bags; ++b) {
    for (size_t j = 0; j < dim; ++j) {
      float acc = +0.0f;
      int count = 0;
      for (int64_t i = offsets[b]; i < offsets[b + 1]; ++i) {
        if (ids[i] == padding) continue;
        const float y = rows[static_cast<size_t>(i) * dim + j];
        if (weights) {
          volatile float product = weights[i] * y;  // rounded before the sum, never fused
          acc = acc + product;
        } else {
          acc = acc + y;
        }
        ++count;
      }
      out[b * dim + j] = mean ? (count > 0 ? acc / static_cast<float>(count) : 0.0f) : acc;
    }
  }
  return out;
}

void expect_same_bits(const std::vector<float>& want, const std::vector<float>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t k = 0; k < want.size(); ++k) {
    ASSERT_EQ(float_bits(want[k]), float_bits(got[k]))
        << what << ": element " << k << " is " << got[k] << ", expected " << want[k];
  }
}

struct Case {
  Scheme scheme;
  const char* sdk;  // 2.37 -> legacy, 2.48 -> optimized
  CompileMode mode;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(to_string(info.param.scheme)) + "_" +
         (std::string(info.param.sdk) == "2.48" ? "optimized" : "legacy") + "_" + to_string(info.param.mode);
}

class EmbeddingBagE2E : public ::testing::TestWithParam<Case> {
 protected:
  static constexpr int64_t kRows = 67, kDim = 37;
  std::unique_ptr<EmbeddingRuntime> runtime(RuntimeOptions options = {}) {
    return make_runtime(dir_, "t.qemb", kRows, kDim, GetParam().scheme, GetParam().sdk, GetParam().mode,
                        options);
  }
  TempDir dir_;
};

// Bags: empty, one id, repeats, a padding id, a long bag.
struct Batch {
  std::vector<int64_t> ids, offsets;
  std::vector<float> weights;
};

Batch make_batch(int64_t rows) {
  Batch b;
  b.offsets = {0};
  const std::vector<int> lengths = {0, 1, 5, 0, 300, 2, 7};
  uint64_t state = 99;
  for (int len : lengths) {
    for (int k = 0; k < len; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      b.ids.push_back(static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(rows)));
      const int w = static_cast<int>((state >> 20) % 9) - 4;  // -4..4: zero and negative
      b.weights.push_back(static_cast<float>(w) * 0.37f);
    }
    b.offsets.push_back(static_cast<int64_t>(b.ids.size()));
  }
  b.ids[3] = b.ids[2];  // a repeat
  b.ids[10] = 5;        // the padding id below
  return b;
}

TEST_P(EmbeddingBagE2E, SumMeanAndWeightsFollowTheContractOnFastAndReferencePaths) {
  const Batch batch = make_batch(kRows);
  const size_t bags = batch.offsets.size() - 1;
  RuntimeOptions ref_options;
  ref_options.reference = true;
  auto fast = runtime();
  auto ref = runtime(ref_options);
  ASSERT_EQ(ref->kernel_name(), "reference_interpreter");
  for (int variant = 0; variant < 3; ++variant) {
    TableBags t;
    t.indices = std::span<const int64_t>(batch.ids);
    t.boundaries = std::span<const int64_t>(batch.offsets);
    t.padding_idx = 5;
    if (variant == 1) t.mode = PoolMode::kMean;
    if (variant == 2) t.per_sample_weights = std::span<const float>(batch.weights);
    const std::vector<float> want = expected_bags(*fast, batch.ids, batch.offsets,
                                                  variant == 2 ? batch.weights.data() : nullptr,
                                                  variant == 1, 5);
    for (const EmbeddingRuntime* rt : {fast.get(), ref.get()}) {
      t.table = rt;
      std::vector<float> got(bags * kDim, -1.0f);
      ASSERT_TRUE(embedding_bag(t, got.data()).ok());
      expect_same_bits(want, got, rt->kernel_name() + " variant " + std::to_string(variant));
    }
  }
}

TEST_P(EmbeddingBagE2E, EveryFormOfBoundariesAndIdWidthGivesTheSameBits) {
  const Batch batch = make_batch(kRows);
  const size_t bags = batch.offsets.size() - 1;
  auto rt = runtime();
  const std::vector<int32_t> ids32(batch.ids.begin(), batch.ids.end());
  const std::vector<int64_t> offsets_b(batch.offsets.begin(), batch.offsets.end() - 1);
  const std::vector<int32_t> offsets32(batch.offsets.begin(), batch.offsets.end());
  const std::vector<int32_t> offsets_b32(offsets_b.begin(), offsets_b.end());
  std::vector<int64_t> lengths;
  for (size_t b = 0; b < bags; ++b) lengths.push_back(batch.offsets[b + 1] - batch.offsets[b]);
  const std::vector<int32_t> lengths32(lengths.begin(), lengths.end());

  TableBags t;
  t.table = rt.get();
  t.indices = std::span<const int64_t>(batch.ids);
  t.boundaries = std::span<const int64_t>(batch.offsets);
  std::vector<float> want(bags * kDim);
  ASSERT_TRUE(embedding_bag(t, want.data()).ok());
  expect_same_bits(expected_bags(*rt, batch.ids, batch.offsets, nullptr, false, -1), want, "B+1 int64");

  struct Form {
    IntSpan ids, bounds;
    BagBoundaries kind;
  };
  const Form forms[] = {
      {std::span<const int32_t>(ids32), std::span<const int32_t>(offsets32), BagBoundaries::kOffsetsWithLast},
      {std::span<const int64_t>(batch.ids), std::span<const int64_t>(offsets_b), BagBoundaries::kOffsets},
      {std::span<const int32_t>(ids32), std::span<const int32_t>(offsets_b32), BagBoundaries::kOffsets},
      {std::span<const int64_t>(batch.ids), std::span<const int64_t>(lengths), BagBoundaries::kLengths},
      {std::span<const int32_t>(ids32), std::span<const int32_t>(lengths32), BagBoundaries::kLengths},
  };
  for (const Form& f : forms) {
    t.indices = f.ids;
    t.boundaries = f.bounds;
    t.kind = f.kind;
    std::vector<float> got(bags * kDim, -1.0f);
    ASSERT_TRUE(embedding_bag(t, got.data()).ok());
    expect_same_bits(want, got, "form " + std::to_string(static_cast<int>(f.kind)));
  }
}

TEST_P(EmbeddingBagE2E, TwoThreadsGiveTheSameBitsAsOne) {
  RuntimeOptions two;
  two.threads = 2;
  auto one_rt = runtime();
  auto two_rt = runtime(two);
  // Enough bags and ids that the call is split into tasks.
  std::vector<int64_t> ids, offsets{0};
  for (int b = 0; b < 1000; ++b) {
    for (int k = 0; k < b % 23; ++k) ids.push_back((b * 31 + k * 7) % kRows);
    offsets.push_back(static_cast<int64_t>(ids.size()));
  }
  TableBags t;
  t.indices = std::span<const int64_t>(ids);
  t.boundaries = std::span<const int64_t>(offsets);
  t.mode = PoolMode::kMean;
  std::vector<float> a(1000 * kDim), b(1000 * kDim);
  t.table = one_rt.get();
  ASSERT_TRUE(embedding_bag(t, a.data()).ok());
  t.table = two_rt.get();
  ASSERT_TRUE(embedding_bag(t, b.data()).ok());
  expect_same_bits(a, b, "2 threads");
  expect_same_bits(expected_bags(*one_rt, ids, offsets, nullptr, true, -1), a, "contract");
}

INSTANTIATE_TEST_SUITE_P(
    AllSchemesPatternsModes, EmbeddingBagE2E,
    ::testing::Values(Case{Scheme::k16a4w, "2.48", CompileMode::kMaterialize},
                      Case{Scheme::k16a4w, "2.48", CompileMode::kFused},
                      Case{Scheme::k16a8w, "2.48", CompileMode::kMaterialize},
                      Case{Scheme::k16a8w, "2.48", CompileMode::kFused},
                      Case{Scheme::k16a4w, "2.37", CompileMode::kMaterialize},
                      Case{Scheme::k16a4w, "2.37", CompileMode::kFused},
                      Case{Scheme::k16a8w, "2.37", CompileMode::kMaterialize},
                      Case{Scheme::k16a8w, "2.37", CompileMode::kFused}),
    case_name);

// Two tables of different dims and schemes: one [B, D0 + D1] output, each
// table's columns equal to its own single-table call.
class TableBatched : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = make_runtime(dir_, "a.qemb", 50, 16, Scheme::k16a4w, "2.48", CompileMode::kFused);
    b_ = make_runtime(dir_, "b.qemb", 30, 9, Scheme::k16a8w, "2.37", CompileMode::kMaterialize);
    ta_.table = a_.get();
    ta_.name = "users";
    ta_.indices = std::span<const int64_t>(ids_a_);
    ta_.boundaries = std::span<const int64_t>(offsets_a_);
    tb_.table = b_.get();
    tb_.name = "items";
    tb_.indices = std::span<const int32_t>(ids_b_);
    tb_.boundaries = std::span<const int32_t>(lengths_b_);
    tb_.kind = BagBoundaries::kLengths;
    tb_.mode = PoolMode::kMean;
  }
  TempDir dir_;
  std::unique_ptr<EmbeddingRuntime> a_, b_;
  std::vector<int64_t> ids_a_{1, 2, 3, 49, 0, 7, 7};
  std::vector<int64_t> offsets_a_{0, 3, 3, 7};
  std::vector<int32_t> ids_b_{29, 4, 4, 4, 0};
  std::vector<int32_t> lengths_b_{1, 0, 4};
  TableBags ta_, tb_;
};

TEST_F(TableBatched, EachTableWritesItsColumnsOfOneOutput) {
  const std::vector<TableBags> tables = {ta_, tb_};
  std::vector<float> out(3 * 25, -1.0f);
  ASSERT_TRUE(embedding_bags(tables, out.data()).ok());
  std::vector<float> a(3 * 16), b(3 * 9);
  ASSERT_TRUE(embedding_bag(ta_, a.data()).ok());
  ASSERT_TRUE(embedding_bag(tb_, b.data()).ok());
  for (size_t r = 0; r < 3; ++r) {
    for (size_t j = 0; j < 16; ++j) EXPECT_EQ(float_bits(out[r * 25 + j]), float_bits(a[r * 16 + j]));
    for (size_t j = 0; j < 9; ++j) EXPECT_EQ(float_bits(out[r * 25 + 16 + j]), float_bits(b[r * 9 + j]));
  }
  // Bag 1 of table a is empty: zeros in its columns only.
  for (size_t j = 0; j < 16; ++j) EXPECT_EQ(float_bits(out[25 + j]), 0u);
}

TEST_F(TableBatched, HalfOutputsRoundTheFloatResultOnce) {
  const std::vector<TableBags> tables = {ta_, tb_};
  std::vector<float> f32(3 * 25);
  ASSERT_TRUE(embedding_bags(tables, f32.data()).ok());
  std::vector<uint16_t> f16(3 * 25), bf16(3 * 25);
  ASSERT_TRUE(embedding_bags(tables, BagOutputType::kFloat16, f16.data()).ok());
  ASSERT_TRUE(embedding_bags(tables, BagOutputType::kBFloat16, bf16.data()).ok());
  for (size_t k = 0; k < f32.size(); ++k) {
    EXPECT_EQ(f16[k], float_to_f16(f32[k])) << k;
    EXPECT_EQ(bf16[k], float_to_bf16(f32[k])) << k;
  }
  EXPECT_EQ(embedding_bags(tables, BagOutputType::kFloat32, f16.data()).message(),
            "a uint16 output holds float16 or bfloat16; pass a float buffer for float32");
}

// Each bad input: its exact message, and not one output value written.
TEST_F(TableBatched, BadInputFailsTheWholeCallAndWritesNothing) {
  struct Bad {
    const char* what;
    std::vector<int64_t> offsets_a;
    std::vector<int64_t> ids_a;
    std::vector<int32_t> lengths_b;
    std::vector<float> weights_a;
    bool mean_a;
    std::optional<int64_t> padding_a;
    ErrorCode code;
    std::string message;
  };
  const std::vector<int64_t> ids = ids_a_;
  const std::vector<int64_t> offs = offsets_a_;
  const std::vector<int32_t> lens = lengths_b_;
  const std::vector<Bad> cases = {
      {"first offset", {1, 3, 3, 7}, ids, lens, {}, false, {}, ErrorCode::kInvalidArgument,
       "table 0 ('users'): offsets[0] = 1; the first offset must be 0"},
      {"decreasing", {0, 3, 2, 7}, ids, lens, {}, false, {}, ErrorCode::kInvalidArgument,
       "table 0 ('users'): offsets[2] = 2 is less than offsets[1] = 3; offsets must not decrease"},
      {"overrun", {0, 3, 9, 7}, ids, lens, {}, false, {}, ErrorCode::kInvalidArgument,
       "table 0 ('users'): offsets[2] = 9 is past the end of the 7 indices"},
      {"last short", {0, 3, 3, 6}, ids, lens, {}, false, {}, ErrorCode::kInvalidArgument,
       "table 0 ('users'): the last offset, offsets[3] = 6, must equal the number of indices (7)"},
      {"length overrun", offs, ids, {1, 0, 5}, {}, false, {}, ErrorCode::kInvalidArgument,
       "table 1 ('items'): lengths[2] = 5 runs past the end of the 5 indices (bag 2 starts at 1)"},
      {"negative length", offs, ids, {1, -1, 5}, {}, false, {}, ErrorCode::kInvalidArgument,
       "table 1 ('items'): lengths[1] = -1 is negative"},
      {"lengths short", offs, ids, {1, 0, 3}, {}, false, {}, ErrorCode::kInvalidArgument,
       "table 1 ('items'): the lengths add up to 4 but there are 5 indices"},
      {"batch sizes", offs, ids, {1, 4}, {}, false, {}, ErrorCode::kInvalidArgument,
       "table 1 ('items') has 2 bags but table 0 ('users') has 3; every table of a call needs the same "
       "number of bags"},
      {"weights length", offs, ids, lens, {1, 2, 3}, false, {}, ErrorCode::kInvalidArgument,
       "table 0 ('users'): 3 per-sample weights for 7 indices; give one weight per index"},
      {"weights with mean", offs, ids, lens, {1, 2, 3, 4, 5, 6, 7}, true, {}, ErrorCode::kInvalidArgument,
       "table 0 ('users'): per-sample weights need pool mode sum (as in PyTorch, mean takes none)"},
      {"padding", offs, ids, lens, {}, false, 50, ErrorCode::kInvalidArgument,
       "table 0 ('users'): padding_idx 50 is outside [-50, 50)"},
      {"id past the end", offs, {1, 2, 3, 49, 0, 50, 7}, lens, {}, false, {}, ErrorCode::kOutOfRange,
       "table 0 ('users'): id 50 at position 5 (bag 2) is past the last row; ids must be in [0, 50)"},
      {"negative id", offs, {1, 2, -3, 49, 0, 5, 7}, lens, {}, false, {}, ErrorCode::kOutOfRange,
       "table 0 ('users'): id -3 at position 2 (bag 0) is negative; ids must be in [0, 50)"},
  };
  for (const Bad& c : cases) {
    TableBags a = ta_, b = tb_;
    a.boundaries = std::span<const int64_t>(c.offsets_a);
    a.indices = std::span<const int64_t>(c.ids_a);
    b.boundaries = std::span<const int32_t>(c.lengths_b);
    if (!c.weights_a.empty()) a.per_sample_weights = std::span<const float>(c.weights_a);
    if (c.mean_a) a.mode = PoolMode::kMean;
    a.padding_idx = c.padding_a;
    const std::vector<TableBags> tables = {a, b};
    std::vector<float> out(3 * 25, -7.0f);
    const Status s = embedding_bags(tables, out.data());
    EXPECT_EQ(s.code(), c.code) << c.what;
    EXPECT_EQ(s.message(), c.message) << c.what;
    for (float v : out) ASSERT_EQ(v, -7.0f) << c.what << ": the output was written";
  }
}

TEST_F(TableBatched, IdErrorsInTheSecondTableNameIt) {
  std::vector<int32_t> bad_ids{29, 4, 4, 30, 0};
  TableBags b = tb_;
  b.indices = std::span<const int32_t>(bad_ids);
  const std::vector<TableBags> tables = {ta_, b};
  std::vector<float> out(3 * 25, -7.0f);
  const Status s = embedding_bags(tables, out.data());
  EXPECT_EQ(s.message(), "table 1 ('items'): id 30 at position 3 (bag 2) is past the last row; ids must be in [0, 30)");
  for (float v : out) ASSERT_EQ(v, -7.0f);
}

TEST_F(TableBatched, NegativePaddingCountsFromTheEndAndUnnamedTablesAreNumbered) {
  TableBags a = ta_;
  a.name.clear();
  a.padding_idx = -1;  // row 49
  std::vector<float> with_negative(3 * 16), with_positive(3 * 16);
  ASSERT_TRUE(embedding_bag(a, with_negative.data()).ok());
  a.padding_idx = 49;
  ASSERT_TRUE(embedding_bag(a, with_positive.data()).ok());
  expect_same_bits(with_positive, with_negative, "padding -1 == 49");
  std::vector<int64_t> none;
  a.boundaries = std::span<const int64_t>(none);
  EXPECT_EQ(embedding_bag(a, with_negative.data()).message(),
            "table 0: offsets that include the last one need B + 1 values, starting with 0; got none");
  EXPECT_EQ(embedding_bags({}, with_negative.data()).message(), "no tables to pool");
  EXPECT_EQ(parse_pool_mode("max").error().message, "unknown pool mode 'max': expected sum or mean");
}

}  // namespace
}  // namespace qemb
