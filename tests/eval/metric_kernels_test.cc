// Every metric kernel set (one per instruction set this machine runs) against
// a plain scalar restatement: the same bits for every sum (the fixed column
// partials), every maximum and table entry, and every error's histogram bin
// as std::log10 puts it, at sizes around the vector widths.
#include "eval/metric_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "qemb/quantize.h"
#include "qemb/eval.h"
#include "kernels/quantize_kernels.h"
#include "support/test_util.h"

namespace qemb {
namespace {

std::vector<float> test_row(size_t dim, uint64_t seed) {
  qemb::testing::Rng rng(seed);
  std::vector<float> x(dim);
  const float scale = 0.02f * std::exp(1.5f * rng.normal());
  for (size_t j = 0; j < dim; ++j) x[j] = j % 11 == 3 ? 0.0f : scale * rng.normal();
  return x;
}

struct Reference {
  PatternRow row;
  std::vector<uint64_t> categories;  // n + 3: below, bins, above, zero
};

Reference reference_pattern_row(const std::vector<float>& x, const std::vector<int8_t>& q, int qmax,
                                const float* y_tab, const float* w_tab, const ErrorBins& bins) {
  Reference r;
  r.categories.assign(static_cast<size_t>(bins.n) + 3, 0);
  double p[8][kRowPartials] = {};
  r.row.y_min = INFINITY;
  r.row.y_max = -INFINITY;
  for (size_t j = 0; j < x.size(); ++j) {
    const int k = q[j] + qmax;
    const double xv = x[j], yv = y_tab[k], wv = w_tab[k];
    const double e = yv - xv, we = wv - xv, ae = yv - wv;
    const double terms[8] = {e * e, std::abs(e), we * we, std::abs(we), ae * ae, std::abs(ae), xv * yv, yv * yv};
    for (int s = 0; s < 8; ++s) p[s][j % kRowPartials] += terms[s];
    r.row.max_e = std::max(r.row.max_e, std::abs(e));
    r.row.max_we = std::max(r.row.max_we, std::abs(we));
    r.row.max_ae = std::max(r.row.max_ae, std::abs(ae));
    r.row.y_min = std::min(r.row.y_min, y_tab[k]);
    r.row.y_max = std::max(r.row.y_max, y_tab[k]);
    ++r.categories[static_cast<size_t>(error_category(std::abs(e), bins))];
  }
  double* sums[8] = {&r.row.e2, &r.row.abs_e, &r.row.we2, &r.row.abs_we,
                     &r.row.ae2, &r.row.abs_ae, &r.row.dot, &r.row.y2};
  for (int s = 0; s < 8; ++s) *sums[s] = add_partials(p[s]);
  return r;
}

TEST(MetricKernels, EverySetMatchesTheScalarDefinitionBitForBit) {
  const ActivationEncoding act = activation_encoding(-0.2f, 0.25f);
  const std::vector<MetricKernelSet> sets = all_metric_kernel_sets();
  ASSERT_FALSE(sets.empty());
  for (const MetricKernelSet& k : sets) {
    for (size_t dim : {1u, 7u, 8u, 9u, 15u, 16u, 17u, 24u, 33u, 64u, 1000u, 1024u}) {
      for (int qmax : {7, 127}) {
        SCOPED_TRACE(std::string(k.isa) + " dim " + std::to_string(dim) + " qmax " + std::to_string(qmax));
        const std::vector<float> x = test_row(dim, dim * 131 + static_cast<uint64_t>(qmax));
        float amax = 0.0f;
        for (float v : x) amax = std::max(amax, std::fabs(v));
        const float s = row_scale_from_amax(amax, qmax);
        const float max_scale = s * 40.0f;  // small rows lose levels in the legacy pattern
        std::vector<int8_t> q(dim);
        k.quantize_row(x.data(), dim, s, qmax, q.data());
        for (size_t j = 0; j < dim; ++j) ASSERT_EQ(q[j], quantize_weight(x[j], s, qmax)) << j;
        for (bool legacy : {false, true}) {
          std::vector<float> y(kPatternTableSize), w(kPatternTableSize);
          k.pattern_tables(legacy, s, max_scale, qmax, act, y.data(), w.data());
          for (int v = -qmax; v <= qmax; ++v) {
            const size_t i = static_cast<size_t>(v + qmax);
            const uint16_t level = legacy ? legacy_output(s, v, max_scale, qmax, act) : optimized_output(s, v, act);
            ASSERT_EQ(y[i], dequantize_activation(level, act)) << v;
            const float wv = legacy ? max_scale * static_cast<float>(legacy_intermediate(s, v, max_scale, qmax))
                                    : s * static_cast<float>(v);
            ASSERT_EQ(static_cast<double>(w[i]), static_cast<double>(wv)) << v;  // -0 and +0 alike
          }
          ErrorBins bins;
          bins.lo = -9.0;
          bins.hi = -1.0;
          bins.n = 64;
          prepare_error_bins(bins);
          std::vector<uint64_t> counts(error_counts_size(bins), 0);
          PatternRow got;
          k.pattern_row(x.data(), q.data(), dim, qmax, y.data(), w.data(), bins, &got, counts.data());
          const Reference want = reference_pattern_row(x, q, qmax, y.data(), w.data(), bins);
          EXPECT_EQ(got.e2, want.row.e2);
          EXPECT_EQ(got.abs_e, want.row.abs_e);
          EXPECT_EQ(got.we2, want.row.we2);
          EXPECT_EQ(got.abs_we, want.row.abs_we);
          EXPECT_EQ(got.ae2, want.row.ae2);
          EXPECT_EQ(got.abs_ae, want.row.abs_ae);
          EXPECT_EQ(got.dot, want.row.dot);
          EXPECT_EQ(got.y2, want.row.y2);
          EXPECT_EQ(got.max_e, want.row.max_e);
          EXPECT_EQ(got.max_we, want.row.max_we);
          EXPECT_EQ(got.max_ae, want.row.max_ae);
          EXPECT_EQ(got.y_min, want.row.y_min);
          EXPECT_EQ(got.y_max, want.row.y_max);
          std::vector<uint64_t> cats(static_cast<size_t>(bins.n) + 3, 0);
          error_categories(bins, counts.data(), cats.data());
          EXPECT_EQ(cats, want.categories);
        }
      }
    }
  }
}

// A value's error bin is that of its slot value (|e| with the mantissa cut to
// kErrorMantissaBits bits) as std::log10 puts it: checked for every set at the
// slot values next to each bin edge and just below them, at values over the
// whole float range, and for coarse, fine and out-of-range bins.
TEST(MetricKernels, ErrorBinsAreThoseOfTheSlotValues) {
  struct Config {
    double lo, hi;
    int n;
  };
  const Config configs[] = {{-9, -1, 64}, {-6, 2, 64}, {-3, 2, 5}, {-6, 0, 600}, {-46, -38, 64}, {0.5, 0.75, 3}};
  // The slot value at or below v, and the next one up.
  auto slot_of = [](double v) { return error_slot_value(v); };
  auto next_slot = [](double v) {
    uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    b += uint64_t{1} << (52 - kErrorMantissaBits);
    std::memcpy(&v, &b, sizeof b);
    return v;
  };
  for (const MetricKernelSet& k : all_metric_kernel_sets()) {
    for (const Config& cfg : configs) {
      SCOPED_TRACE(std::string(k.isa) + " bins [" + std::to_string(cfg.lo) + ", " + std::to_string(cfg.hi) + ") n " +
                   std::to_string(cfg.n));
      ErrorBins bins;
      bins.lo = cfg.lo;
      bins.hi = cfg.hi;
      bins.n = cfg.n;
      prepare_error_bins(bins);
      std::vector<float> values;
      for (int i = 0; i <= cfg.n; ++i) {
        const double edge = std::pow(10.0, cfg.lo + (cfg.hi - cfg.lo) * i / cfg.n);
        if (edge > 3e38 || edge < 1e-44) continue;  // no float there
        // The slot at or below the edge, the one above, and the floats next
        // to each slot value.
        for (double sv : {slot_of(edge), next_slot(slot_of(edge))}) {
          float f = static_cast<float>(sv);
          for (int step = 0; step < 2; ++step) f = std::nextafter(f, 0.0f);
          for (int step = 0; step < 5; ++step, f = std::nextafter(f, INFINITY)) values.push_back(f);
        }
      }
      qemb::testing::Rng rng(static_cast<uint64_t>(cfg.n) * 977 + 5);
      for (int i = 0; i < 2000; ++i) values.push_back(std::ldexp(1.0f + 0.5f * std::fabs(rng.normal()), -150 + i % 277));
      values.push_back(0.0f);
      values.push_back(1e-45f);
      values.push_back(3e38f);
      const std::vector<float> y(kPatternTableSize, 0.0f), w(kPatternTableSize, 0.0f);
      const std::vector<int8_t> q(8, 0);
      for (float v : values) {
        if (!std::isfinite(v)) continue;
        const std::vector<float> x(8, v);  // one vector of the value: no scalar tail
        std::vector<uint64_t> counts(error_counts_size(bins), 0);
        PatternRow row;
        k.pattern_row(x.data(), q.data(), x.size(), 7, y.data(), w.data(), bins, &row, counts.data());
        std::vector<uint64_t> cats(static_cast<size_t>(cfg.n) + 3, 0);
        error_categories(bins, counts.data(), cats.data());
        const double a = std::fabs(static_cast<double>(v));
        const size_t want = static_cast<size_t>(error_category(a, bins));
        ASSERT_EQ(cats[want], 8u) << "value " << v << " category " << want;
        // The definition itself: the slot value's std::log10 bin.
        if (a > 0) {
          Histogram h;
          h.lo = cfg.lo;
          h.hi = cfg.hi;
          h.counts.assign(static_cast<size_t>(cfg.n), 0);
          h.add(std::log10(slot_of(a)));
          const size_t plain = h.below ? 0 : h.above ? static_cast<size_t>(cfg.n) + 1
                               : static_cast<size_t>(std::find(h.counts.begin(), h.counts.end(), 1u) - h.counts.begin()) + 1;
          ASSERT_EQ(want, plain) << "value " << v;
        }
      }
    }
  }
}

TEST(MetricKernels, RowValuesMatchTheScalarDefinition) {
  for (const MetricKernelSet& k : all_metric_kernel_sets()) {
    for (size_t dim : {1u, 5u, 8u, 13u, 64u, 1023u}) {
      SCOPED_TRACE(std::string(k.isa) + " dim " + std::to_string(dim));
      std::vector<float> x = test_row(dim, dim + 7);
      ValueBins bins;
      bins.lo = -0.03;
      bins.hi = 0.05;
      bins.n = 80;
      bins.clip_lo = -0.02;
      bins.clip_hi = 0.02;
      std::vector<uint64_t> counts(static_cast<size_t>(bins.n) + 2, 0);
      RowValues got;
      k.row_values(x.data(), dim, bins, &got, counts.data());
      double p[kRowPartials] = {};
      int64_t clipped = 0;
      float amax = 0.0f;
      std::vector<uint64_t> want(counts.size(), 0);
      for (size_t j = 0; j < dim; ++j) {
        const double v = x[j];
        p[j % kRowPartials] += v * v;
        amax = std::max(amax, std::fabs(x[j]));
        if (v < bins.clip_lo || v > bins.clip_hi) ++clipped;
        Histogram h;
        h.lo = bins.lo;
        h.hi = bins.hi;
        h.counts.assign(static_cast<size_t>(bins.n), 0);
        h.add(v);
        want[0] += h.below;
        want[want.size() - 1] += h.above;
        for (size_t b = 0; b < h.counts.size(); ++b) want[b + 1] += h.counts[b];
      }
      EXPECT_EQ(got.x2, add_partials(p));
      EXPECT_EQ(got.clipped, clipped);
      EXPECT_EQ(got.amax, amax);
      EXPECT_EQ(got.constant, dim == 1);
      EXPECT_EQ(counts, want);
      std::vector<float> same(dim, 0.5f);
      k.row_values(same.data(), dim, bins, &got, counts.data());
      EXPECT_TRUE(got.constant);
    }
  }
}

}  // namespace
}  // namespace qemb
