// The metrics of include/qemb/eval.h, checked against numbers worked out by
// hand on tables whose quantization is exact in float (dyadic scales), and
// against a plain re-computation on a random table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "eval/metric_kernels.h"
#include "qemb/eval.h"
#include "qemb/safetensors.h"
#include "support/test_util.h"

namespace qemb {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TargetVersion version(const std::string& v) {
  auto t = discover_target_version_from(v, nullptr);
  EXPECT_TRUE(t.ok());
  return *t;
}

const EvalResult& result(const EvalReport& r, Scheme s, Pattern p) {
  for (const EvalResult& e : r.results)
    if (e.scheme == s && e.pattern == p) return e;
  ADD_FAILURE() << "no result for " << to_string(s) << " " << to_string(p);
  static EvalResult none;
  return none;
}

std::vector<int64_t> ids_of(const std::vector<RowError>& rows) {
  std::vector<int64_t> out;
  for (const RowError& r : rows) out.push_back(r.row);
  return out;
}

double cosine(double dot, double nx2, double ny2) { return dot / std::sqrt(nx2 * ny2); }

// 16a4w (qmax 7), dim 2. Row amax values are 7 * 2^m, so every row scale is a
// power of two and the weight quantization is exact arithmetic. Row 0 alone
// calibrates the activation: lo = -128, hi = 65535/256 - 128, so s_a = 2^-8
// and zp = 32768, and every dequantized weight below is on that grid (the
// activation part of the error is zero). Row 1 makes s_max = 32. Rows 2-5 are
// evaluated.
//   row 2  x = [56, -20]       s = 8     q = [7, -2]  (-2.5 ties to even)
//          optimized y = [56, -16]       legacy qi = rne([1.75, -0.5]) = [2, 0] -> y = [64, 0]
//   row 3  x = [1.75, -0.875]  s = 0.25  q = [7, -4]  (-3.5 ties to even)
//          optimized y = [1.75, -1]      legacy qi = [0, 0] -> y = [0, 0]: collapsed
//   row 4  x = [0, 0]          exact for both; constant, so not collapsed
//   row 5  x = [7, 7]          s = 1     optimized exact; legacy y = [0, 0]:
//                              one level, but the row was constant: not collapsed
class HandTable : public ::testing::Test {
 protected:
  const std::vector<float> table = {-128.0f, 127.99609375f,  // 0: calibration
                                    224.0f,  0.0f,           // 1: s_max = 32
                                    56.0f,   -20.0f,         // 2
                                    1.75f,   -0.875f,        // 3
                                    0.0f,    0.0f,           // 4
                                    7.0f,    7.0f};          // 5
  EvalReport evaluate() {
    EvalOptions o;
    o.schemes = {Scheme::k16a4w};
    o.calibration_tokens = std::vector<int64_t>{0};
    o.tokens = std::vector<int64_t>{5, 2, 3, 4, 2};  // unsorted, with a duplicate
    auto r = evaluate_table(table.data(), 6, 2, o, version("2.37"));
    EXPECT_TRUE(r.ok()) << r.error().to_string();
    return *r;
  }
};

TEST_F(HandTable, ActivationEncodingFromTheCalibrationRow) {
  const EvalReport r = evaluate();
  EXPECT_EQ(r.act.scale, 1.0f / 256.0f);
  EXPECT_EQ(r.act.zero_point, 32768);
  EXPECT_EQ(r.act_range_lo, -128.0);
  EXPECT_EQ(r.act_range_hi, 127.99609375);
  EXPECT_EQ(r.rows_evaluated, 4);
  EXPECT_EQ(r.calibration_tokens, 1);
  EXPECT_EQ(r.value_min, -20.0);
  EXPECT_EQ(r.value_max, 56.0);
  EXPECT_FALSE(r.results.empty());
  EXPECT_EQ(r.deployed_pattern, Pattern::kLegacy);  // SDK 2.37
}

TEST_F(HandTable, Optimized) {
  const EvalReport report = evaluate();
  const EvalResult& r = result(report, Scheme::k16a4w, Pattern::kOptimized);
  EXPECT_FALSE(r.deployed);
  const double signal = 56.0 * 56 + 20 * 20 + 1.75 * 1.75 + 0.875 * 0.875 + 7 * 7 + 7 * 7;  // 3637.828125
  const double noise = 4.0 * 4 + 0.125 * 0.125;                                              // 16.015625
  EXPECT_DOUBLE_EQ(r.sqnr_db, 10.0 * std::log10(signal / noise));
  EXPECT_EQ(r.max_abs_err, 4.0);
  EXPECT_EQ(r.mean_abs_err, (4.0 + 0.125) / 8);
  EXPECT_DOUBLE_EQ(r.rms_err, std::sqrt(noise / 8));
  // All error is weight quantization; the activation grid holds every s_r * q.
  EXPECT_EQ(r.weight_max_abs_err, 4.0);
  EXPECT_EQ(r.weight_mean_abs_err, (4.0 + 0.125) / 8);
  EXPECT_DOUBLE_EQ(r.weight_sqnr_db, r.sqnr_db);
  EXPECT_EQ(r.act_max_abs_err, 0.0);
  EXPECT_EQ(r.act_mean_abs_err, 0.0);
  EXPECT_TRUE(std::isinf(r.act_sqnr_db) && r.act_sqnr_db > 0);

  const double cos2 = cosine(56.0 * 56 + 20 * 16, 56.0 * 56 + 20 * 20, 56.0 * 56 + 16 * 16);
  const double cos3 = cosine(1.75 * 1.75 + 0.875, 1.75 * 1.75 + 0.875 * 0.875, 1.75 * 1.75 + 1);
  EXPECT_DOUBLE_EQ(r.cos_mean, (cos2 + cos3 + 1 + 1) / 4);
  EXPECT_DOUBLE_EQ(r.cos_min, std::min(cos2, cos3));
  EXPECT_DOUBLE_EQ(r.cos_p1, r.cos_min);  // 4 rows: nearest rank ceil(0.04) = 1, the minimum
  EXPECT_EQ(r.collapsed_rows, 0);
  EXPECT_EQ(r.clipped_values, 0);

  // rel err: row 2 sqrt(16/3536), row 3 sqrt(2^-6/3.828125), rows 4, 5 exact.
  EXPECT_THAT(ids_of(r.worst_rows), ElementsAre(2, 3, 4, 5));
  EXPECT_DOUBLE_EQ(r.worst_rows[0].rel_err, std::sqrt(16.0 / 3536));
  EXPECT_EQ(r.worst_rows[0].row_scale, 8.0f);
  EXPECT_EQ(r.worst_rows[0].max_abs_err, 4.0);
  EXPECT_DOUBLE_EQ(r.worst_rows[1].rel_err, std::sqrt(0.015625 / 3.828125));
  EXPECT_EQ(r.worst_rows[1].row_scale, 0.25f);
  EXPECT_EQ(r.worst_rows[3].rel_err, 0.0);
  EXPECT_EQ(r.worst_rows[3].row_scale, 1.0f);
  // Every evaluated row appears once, ascending.
  EXPECT_THAT(ids_of(r.rows), ElementsAre(2, 3, 4, 5));
}

TEST_F(HandTable, Legacy) {
  const EvalReport report = evaluate();
  const EvalResult& r = result(report, Scheme::k16a4w, Pattern::kLegacy);
  EXPECT_TRUE(r.deployed);
  const double signal = 3637.828125;
  const double noise = 8.0 * 8 + 20 * 20 + 1.75 * 1.75 + 0.875 * 0.875 + 7 * 7 + 7 * 7;  // 565.828125
  EXPECT_DOUBLE_EQ(r.sqnr_db, 10.0 * std::log10(signal / noise));
  EXPECT_EQ(r.max_abs_err, 20.0);
  EXPECT_EQ(r.mean_abs_err, (8 + 20 + 1.75 + 0.875 + 7 + 7) / 8);
  EXPECT_EQ(r.weight_mean_abs_err, r.mean_abs_err);
  EXPECT_EQ(r.act_max_abs_err, 0.0);

  const double cos2 = cosine(56.0 * 64, 56.0 * 56 + 20 * 20, 64.0 * 64);
  EXPECT_DOUBLE_EQ(r.cos_mean, (cos2 + 0 + 1 + 0) / 4);  // rows 3 and 5 come out all zero
  EXPECT_EQ(r.cos_min, 0.0);
  EXPECT_EQ(r.cos_p1, 0.0);
  EXPECT_EQ(r.collapsed_rows, 1);  // row 3; row 5 was constant to begin with
  EXPECT_EQ(r.collapsed_fraction, 0.25);

  // Rows 3 and 5 are lost entirely (rel err 1): ties go to the lower id.
  EXPECT_THAT(ids_of(r.worst_rows), ElementsAre(3, 5, 2, 4));
  EXPECT_EQ(r.worst_rows[0].rel_err, 1.0);
  EXPECT_EQ(r.worst_rows[0].cos, 0.0);
  EXPECT_EQ(r.worst_rows[1].rel_err, 1.0);
  EXPECT_DOUBLE_EQ(r.worst_rows[2].rel_err, std::sqrt(464.0 / 3536));
  EXPECT_EQ(r.worst_rows[2].max_abs_err, 20.0);
}

TEST_F(HandTable, ErrorHistogramsCountEveryValue) {
  const EvalReport report = evaluate();
  const EvalResult& opt = result(report, Scheme::k16a4w, Pattern::kOptimized);
  // max |x| = 56 -> the top decade is 10^2, eight decades below it.
  EXPECT_EQ(opt.error_histogram.hi, 2.0);
  EXPECT_EQ(opt.error_histogram.lo, -6.0);
  EXPECT_EQ(opt.error_histogram.counts.size(), 64u);
  EXPECT_EQ(opt.error_histogram.zeros, 6u);
  EXPECT_EQ(opt.error_histogram.total(), 8u);
  // |err| = 4 -> log10 4 = 0.602 -> bin floor((0.602 + 6) * 8) = 52; 0.125 -> bin 40.
  EXPECT_EQ(opt.error_histogram.counts[52], 1u);
  EXPECT_EQ(opt.error_histogram.counts[40], 1u);
  EXPECT_EQ(report.value_histogram.total(), 8u);
  EXPECT_EQ(report.value_histogram.below + report.value_histogram.above, 0u);
}

// s_a = 1 (range [-32768, 32767] from row 0): the activation grid is the
// integers, so y = rne(w) and both parts of the error show.
//   row 1  x = [3.5, -1.75]  s = 0.5  q = [7, -4]  w = [3.5, -2]  y = [4, -2]
//   weight part w - x = [0, -0.25]; activation part y - w = [0.5, 0]
TEST(Metrics, ErrorSplitsIntoWeightAndActivationParts) {
  const std::vector<float> table = {-32768.0f, 32767.0f, 3.5f, -1.75f};
  EvalOptions o;
  o.schemes = {Scheme::k16a4w};
  o.calibration_tokens = std::vector<int64_t>{0};
  o.tokens = std::vector<int64_t>{1};
  auto report = evaluate_table(table.data(), 2, 2, o, version("2.48"));
  ASSERT_TRUE(report.ok()) << report.error().to_string();
  EXPECT_EQ(report->act.scale, 1.0f);
  EXPECT_EQ(report->act.zero_point, 32768);
  const EvalResult& r = result(*report, Scheme::k16a4w, Pattern::kOptimized);
  EXPECT_TRUE(r.deployed);
  EXPECT_EQ(r.max_abs_err, 0.5);
  EXPECT_EQ(r.mean_abs_err, 0.375);
  EXPECT_EQ(r.weight_max_abs_err, 0.25);
  EXPECT_EQ(r.weight_mean_abs_err, 0.125);
  EXPECT_EQ(r.act_max_abs_err, 0.5);
  EXPECT_EQ(r.act_mean_abs_err, 0.25);
  const double signal = 3.5 * 3.5 + 1.75 * 1.75;
  EXPECT_DOUBLE_EQ(r.sqnr_db, 10 * std::log10(signal / (0.25 + 0.0625)));
  EXPECT_DOUBLE_EQ(r.weight_sqnr_db, 10 * std::log10(signal / 0.0625));
  EXPECT_DOUBLE_EQ(r.act_sqnr_db, 10 * std::log10(signal / 0.25));
}

TEST(Metrics, CalibrationOnAFewRowsClipsTheOthers) {
  // Row 0 calibrates [-1, 1]; in row 1, 2 and -3 lie far outside, 0.5 and
  // 0.9 inside.
  const std::vector<float> table = {1, -1, 0, 0, 2, -3, 0.5f, 0.9f};
  EvalOptions o;
  o.schemes = {Scheme::k16a8w};
  o.calibration_tokens = std::vector<int64_t>{0};
  o.tokens = std::vector<int64_t>{1};
  auto report = evaluate_table(table.data(), 2, 4, o, version("2.48"));
  ASSERT_TRUE(report.ok()) << report.error().to_string();
  for (const EvalResult& r : report->results) {
    EXPECT_EQ(r.clipped_values, 2);
    EXPECT_EQ(r.clipped_fraction, 0.5);
  }
  // The whole table as calibration: nothing clips.
  o.calibration_tokens.reset();
  auto all = evaluate_table(table.data(), 2, 4, o, version("2.48"));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->results[0].clipped_values, 0);
  EXPECT_EQ(all->calibration_source, "all table values");
}

// Two rows that the legacy pattern zeroes (cos 0) among copies of one large
// row: with N <= 200 rows the 1st percentile (nearest rank ceil(N/100) <= 2)
// is a zeroed row, with 201 it is the third smallest.
TEST(Metrics, FirstPercentileIsNearestRank) {
  for (int64_t rows : {150, 200, 201}) {
    std::vector<float> table;
    for (int64_t r = 0; r < rows; ++r) {
      if (r == 7 || r == 99) {
        table.insert(table.end(), {0.5f, -0.25f});
      } else {
        table.insert(table.end(), {112.0f, -112.0f});
      }
    }
    EvalOptions o;
    o.schemes = {Scheme::k16a4w};
    auto report = evaluate_table(table.data(), rows, 2, o, version("2.48"));
    ASSERT_TRUE(report.ok());
    const EvalResult& legacy = result(*report, Scheme::k16a4w, Pattern::kLegacy);
    EXPECT_EQ(legacy.collapsed_rows, 2) << rows;
    EXPECT_EQ(legacy.cos_min, 0.0) << rows;
    if (rows <= 200) {
      EXPECT_EQ(legacy.cos_p1, 0.0) << rows;
    } else {
      EXPECT_GT(legacy.cos_p1, 0.999) << rows;
    }
  }
}

// The metrics re-computed here, plainly, from the numeric.h formulas.
TEST(Metrics, MatchAnIndependentComputationOnARandomTable) {
  const int64_t rows = 300, dim = 24;
  const std::vector<float> table = qemb::testing::spread_table(rows, dim, 42);
  EvalOptions o;
  auto report = evaluate_table(table.data(), rows, dim, o, version("2.48"));
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->results.size(), 4u);
  float lo, hi;
  min_max(table.data(), table.size(), lo, hi);
  const ActivationEncoding act = activation_encoding(lo, hi);
  EXPECT_EQ(report->act.scale, act.scale);
  EXPECT_EQ(report->act.zero_point, act.zero_point);
  for (const EvalResult& r : report->results) {
    const PcqTable pcq = quantize_table(table.data(), rows, dim, r.scheme);
    const float smax = pcq.max_scale();
    const int qmax = weight_qmax(r.scheme);
    double sx = 0, se = 0, sabs = 0, emax = 0, cos_sum = 0, cos_min = 2;
    int64_t collapsed = 0;
    for (int64_t i = 0; i < rows; ++i) {
      double dot = 0, nx = 0, ny = 0;
      std::vector<uint16_t> levels;
      for (int64_t j = 0; j < dim; ++j) {
        const float s = pcq.scales[i];
        const int q = pcq.q[i * dim + j];
        const uint16_t level = r.pattern == Pattern::kOptimized ? optimized_output(s, q, act)
                                                                : legacy_output(s, q, smax, qmax, act);
        levels.push_back(level);
        const double x = table[i * dim + j], y = dequantize_activation(level, act);
        sx += x * x;
        se += (y - x) * (y - x);
        sabs += std::abs(y - x);
        emax = std::max(emax, static_cast<double>(std::fabs(static_cast<float>(y) - table[i * dim + j])));
        dot += x * y;
        nx += x * x;
        ny += y * y;
      }
      const double c = ny == 0 ? 0 : dot / std::sqrt(nx * ny);
      cos_sum += c;
      cos_min = std::min(cos_min, c);
      if (std::all_of(levels.begin(), levels.end(), [&](uint16_t l) { return l == levels[0]; })) ++collapsed;
    }
    SCOPED_TRACE(std::string(to_string(r.scheme)) + " " + to_string(r.pattern));
    // Eval sums each row in float (metric_kernels.h): within 1e-6 of these
    // double sums, relative; the cosines within 1e-6 of 1 - cos.
    EXPECT_NEAR(r.sqnr_db, 10 * std::log10(sx / se), 1e-6);
    EXPECT_EQ(r.max_abs_err, emax);  // the float difference y - x
    EXPECT_NEAR(r.mean_abs_err, sabs / (rows * dim), 1e-6 * sabs / (rows * dim));
    EXPECT_NEAR(r.cos_mean, cos_sum / rows, 1e-6 * (1 - cos_sum / rows));
    EXPECT_NEAR(r.cos_min, cos_min, 1e-6 * (1 - cos_min));
    EXPECT_EQ(r.collapsed_rows, collapsed);
    EXPECT_EQ(r.deployed, r.pattern == Pattern::kOptimized);
    EXPECT_EQ(r.worst_rows.size(), 10u);
    for (size_t k = 1; k < r.worst_rows.size(); ++k) EXPECT_GE(r.worst_rows[k - 1].rel_err, r.worst_rows[k].rel_err);
  }
}

// Row scales spread log-normally (sigma 1.5 in natural-log units): the legacy
// approximation requantizes every row to the largest scale and loses the small
// rows, for both schemes, by a wide margin.
TEST(Metrics, LegacyLosesToOptimizedOnLogNormalRowScales) {
  const int64_t rows = 2048, dim = 64;
  qemb::testing::Rng rng(2024);
  std::vector<float> table(static_cast<size_t>(rows * dim));
  for (int64_t r = 0; r < rows; ++r) {
    const float scale = 0.02f * std::exp(1.5f * rng.normal());
    for (int64_t j = 0; j < dim; ++j) table[r * dim + j] = scale * rng.normal();
  }
  auto report = evaluate_table(table.data(), rows, dim, EvalOptions{}, version("2.48"));
  ASSERT_TRUE(report.ok());
  // Measured: 19.1 vs 5.6 dB (16a4w) and 44.4 vs 20.6 dB (16a8w).
  const double margin_db[2] = {10.0, 20.0};  // 16a4w, 16a8w
  const Scheme schemes[2] = {Scheme::k16a4w, Scheme::k16a8w};
  for (int i = 0; i < 2; ++i) {
    const EvalResult& opt = result(*report, schemes[i], Pattern::kOptimized);
    const EvalResult& leg = result(*report, schemes[i], Pattern::kLegacy);
    SCOPED_TRACE(to_string(schemes[i]));
    EXPECT_GT(opt.sqnr_db - leg.sqnr_db, margin_db[i]) << opt.sqnr_db << " vs " << leg.sqnr_db;
    EXPECT_GT(leg.collapsed_rows, 0);
    EXPECT_EQ(opt.collapsed_rows, 0);
    EXPECT_LT(leg.cos_p1, opt.cos_p1);
  }
}

// Eval streams the table in fixed chunks of rows (4096 at D = 8), so the sums
// are chunk partials added in chunk order: the results are the same bits on 1
// thread or many.
TEST(Metrics, ResultsDoNotDependOnTheThreadCount) {
  const int64_t rows = 20000, dim = 8;  // 5 chunks
  const std::vector<float> table = qemb::testing::spread_table(rows, dim, 7);
  EvalOptions one;
  one.threads = 1;
  one.row_sample = 1000;
  EvalOptions many = one;
  many.threads = 3;
  auto a = evaluate_table(table.data(), rows, dim, one, version("2.48"));
  auto b = evaluate_table(table.data(), rows, dim, many, version("2.48"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(eval_report_json(*a).dump(), eval_report_json(*b).dump());
  for (size_t k = 0; k < a->results.size(); ++k) {
    const EvalResult &x = a->results[k], &y = b->results[k];
    EXPECT_EQ(x.sqnr_db, y.sqnr_db);
    EXPECT_EQ(x.cos_mean, y.cos_mean);
    EXPECT_EQ(x.mean_abs_err, y.mean_abs_err);
    EXPECT_EQ(x.error_histogram.counts, y.error_histogram.counts);
    EXPECT_EQ(x.cos_histogram.counts, y.cos_histogram.counts);
    // A fixed sample of every 20th row, in row order.
    ASSERT_EQ(x.rows.size(), 1000u);
    ASSERT_EQ(y.rows.size(), 1000u);
    for (size_t i = 0; i < x.rows.size(); ++i) {
      EXPECT_EQ(x.rows[i].row, static_cast<int64_t>(20 * i));
      EXPECT_EQ(y.rows[i].row, x.rows[i].row);
      EXPECT_EQ(y.rows[i].rel_err, x.rows[i].rel_err);
    }
  }
}

// The streamed pass over a checkpoint gives what the in-memory table gives,
// and every value's error lands in the bin std::log10 puts it in.
TEST(Metrics, CheckpointIsEvaluatedAsTheTable) {
  qemb::testing::TempDir dir;
  const int64_t rows = 5000, dim = 40;
  const std::vector<float> table = qemb::testing::spread_table(rows, dim, 11);
  std::vector<uint8_t> bytes(table.size() * 4);
  std::memcpy(bytes.data(), table.data(), bytes.size());
  const std::string ckpt = dir.file("m.safetensors");
  ASSERT_TRUE(write_safetensors(ckpt, {}, {{"model.embed_tokens.weight", "F32", {rows, dim}, bytes}}).ok());
  EvalOptions o;
  o.qnn_sdk_version = "2.48";
  auto streamed = evaluate_checkpoint(ckpt, o);
  ASSERT_TRUE(streamed.ok()) << streamed.error().message;
  auto in_memory = evaluate_table(table.data(), rows, dim, o, version("2.48"));
  ASSERT_TRUE(in_memory.ok());
  nlohmann::ordered_json a = eval_report_json(*streamed), b = eval_report_json(*in_memory);
  a.erase("file"), b.erase("file"), a.erase("tensor"), b.erase("tensor"), a.erase("dtype"), b.erase("dtype");
  a["target"].erase("sdk_version_source"), b["target"].erase("sdk_version_source");
  EXPECT_EQ(a.dump(), b.dump());
  // The error histogram, recounted with std::log10 per value's slot.
  const EvalResult& r = result(*in_memory, Scheme::k16a4w, Pattern::kLegacy);
  Histogram h = r.error_histogram;
  std::fill(h.counts.begin(), h.counts.end(), 0);
  h.below = h.above = h.zeros = 0;
  const PcqTable pcq = quantize_table(table.data(), rows, dim, Scheme::k16a4w);
  std::vector<float> y(static_cast<size_t>(rows * dim));
  ASSERT_TRUE(deployed_rows(pcq, in_memory->act, Pattern::kLegacy, 0, rows, y.data()).ok());
  for (size_t i = 0; i < y.size(); ++i) {
    const float e = y[i] - table[i];  // a float difference (metric_kernels.h)
    if (e == 0.0f) {
      ++h.zeros;
    } else {
      h.add(std::log10(static_cast<double>(error_slot_value(std::fabs(e)))));  // binned by its slot
    }
  }
  EXPECT_EQ(h.counts, r.error_histogram.counts);
  EXPECT_EQ(h.zeros, r.error_histogram.zeros);
  EXPECT_EQ(h.below, r.error_histogram.below);
}

TEST(Metrics, BadInputIsAClearError) {
  const std::vector<float> table = {1, 2, 3, 4};
  EvalOptions o;
  o.tokens = std::vector<int64_t>{0, 2};
  auto out_of_range = evaluate_table(table.data(), 2, 2, o, version("2.48"));
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_EQ(out_of_range.error().code, ErrorCode::kOutOfRange);
  EXPECT_EQ(out_of_range.error().message, "token 2 at position 1 is outside the table's rows [0, 2)");

  o.tokens = std::vector<int64_t>{};
  EXPECT_EQ(evaluate_table(table.data(), 2, 2, o, version("2.48")).error().code, ErrorCode::kInvalidArgument);

  EvalOptions calib;
  calib.calibration_tokens = std::vector<int64_t>{-1};
  auto bad_calibration = evaluate_table(table.data(), 2, 2, calib, version("2.48"));
  ASSERT_FALSE(bad_calibration.ok());
  EXPECT_EQ(bad_calibration.error().code, ErrorCode::kOutOfRange);
  EXPECT_THAT(bad_calibration.error().message, HasSubstr("calibration token -1 at position 0"));

  EvalOptions none;
  none.schemes.clear();
  EXPECT_EQ(evaluate_table(table.data(), 2, 2, none, version("2.48")).error().code, ErrorCode::kInvalidArgument);

  const std::vector<float> nan_table = {1, NAN, 3, 4};
  auto nan = evaluate_table(nan_table.data(), 2, 2, EvalOptions{}, version("2.48"));
  ASSERT_FALSE(nan.ok());
  EXPECT_THAT(nan.error().message, HasSubstr("row 0, column 1"));
}

TEST(Metrics, ParseSchemes) {
  EXPECT_THAT(*parse_eval_schemes("all"),
              ElementsAre(Scheme::k16a4w, Scheme::k16a8w, Scheme::k16a2w, Scheme::k8a4w, Scheme::k8a8w,
                          Scheme::k8a2w, Scheme::kW4, Scheme::kW8, Scheme::kW2));
  EXPECT_THAT(*parse_eval_schemes("16a8w"), ElementsAre(Scheme::k16a8w));
  EXPECT_THAT(*parse_eval_schemes("w2"), ElementsAre(Scheme::kW2));
  auto bad = parse_eval_schemes("8a3w");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "unknown scheme '8a3w': expected one of 16a4w, 16a8w, 16a2w, 8a4w, 8a8w, 8a2w, w4, w8, w2, or all");
}

TEST(Metrics, DeployedPatternFollowsTheTarget) {
  const std::vector<float> table = {1, 2, 3, 4};
  auto old_sdk = evaluate_table(table.data(), 2, 2, EvalOptions{}, version("2.37"));
  ASSERT_TRUE(old_sdk.ok());
  EXPECT_EQ(old_sdk->deployed_pattern, Pattern::kLegacy);
  EXPECT_THAT(old_sdk->deployed_reason, HasSubstr("< 2.48"));
  auto new_sdk = evaluate_table(table.data(), 2, 2, EvalOptions{}, version("v3.0"));
  ASSERT_TRUE(new_sdk.ok());
  EXPECT_EQ(new_sdk->deployed_pattern, Pattern::kOptimized);
  auto unknown = evaluate_table(table.data(), 2, 2, EvalOptions{}, TargetVersion{std::nullopt, "unknown", "unset"});
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->deployed_pattern, Pattern::kLegacy);
  EXPECT_THAT(unknown->deployed_reason, HasSubstr("unknown"));
}

}  // namespace
}  // namespace qemb
