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

// The definition: float errors, products and sums, column j in partial j %
// kRowPartials, the partials added by add_partials.
Reference reference_pattern_row(const std::vector<float>& x, const std::vector<int8_t>& q, int qmax,
                                const float* y_tab, const float* w_tab, const ErrorBins& bins) {
  Reference r;
  r.categories.assign(static_cast<size_t>(bins.n) + 3, 0);
  float p[7][kRowPartials] = {};
  for (size_t j = 0; j < x.size(); ++j) {
    const int k = q[j] + qmax;
    const float xv = x[j], yv = y_tab[k], wv = w_tab[k];
    const float e = yv - xv, we = wv - xv, ae = yv - wv;
    const float terms[7] = {e * e, std::fabs(e), we * we, std::fabs(we), ae * ae, std::fabs(ae), e * (xv + yv)};
    for (int s = 0; s < 7; ++s) p[s][j % kRowPartials] += terms[s];
    r.row.max_e = std::max(r.row.max_e, std::fabs(e));
    r.row.max_we = std::max(r.row.max_we, std::fabs(we));
    r.row.max_ae = std::max(r.row.max_ae, std::fabs(ae));
    ++r.categories[static_cast<size_t>(error_category(std::fabs(e), bins))];
  }
  double* sums[7] = {&r.row.e2, &r.row.abs_e, &r.row.we2, &r.row.abs_we, &r.row.ae2, &r.row.abs_ae, &r.row.ey};
  for (int s = 0; s < 7; ++s) *sums[s] = add_partials(p[s]);
  return r;
}

// The same sums over the columns in another order differ: the fixed order is
// what the kernels must follow, and the test above can tell.
TEST(MetricKernels, FloatSumsDependOnTheColumnOrder) {
  const std::vector<float> x = test_row(1024, 5);
  float p[kRowPartials] = {};
  float plain = 0.0f;
  for (size_t j = 0; j < x.size(); ++j) {
    p[j % kRowPartials] += x[j] * x[j];
    plain += x[j] * x[j];
  }
  EXPECT_NE(add_partials(p), static_cast<double>(plain));
}

TEST(MetricKernels, EverySetMatchesTheScalarDefinitionBitForBit) {
  const ActivationEncoding act = activation_encoding(-0.2f, 0.25f);
  const std::vector<MetricKernelSet> sets = all_metric_kernel_sets();
  ASSERT_FALSE(sets.empty());
  for (const MetricKernelSet& k : sets) {
    for (size_t dim : {1u, 7u, 8u, 9u, 15u, 16u, 17u, 24u, 33u, 64u, 255u, 256u, 257u, 300u, 1000u, 1024u}) {
      for (int qmax : {7, 127}) {
        SCOPED_TRACE(std::string(k.isa) + " dim " + std::to_string(dim) + " qmax " + std::to_string(qmax));
        const std::vector<float> x = test_row(dim, dim * 131 + static_cast<uint64_t>(qmax));
        float amax = 0.0f;
        for (float v : x) amax = std::max(amax, std::fabs(v));
        const float s = row_scale_from_amax(amax, qmax);
        const float max_scale = s * 40.0f;  // small rows lose levels in the legacy pattern
        std::vector<int8_t> q(dim);
        for (size_t j = 0; j < dim; ++j) q[j] = quantize_weight(x[j], s, qmax);
        SchemeParams params;
        params.row_scale = s;
        params.max_scale = max_scale;
        params.qmax = qmax;
        params.act = act;
        ErrorBins bins;
        bins.lo = -9.0;
        bins.hi = -1.0;
        bins.n = 64;
        std::vector<uint64_t> counts[2] = {std::vector<uint64_t>(kErrorCountsSize, 0),
                                           std::vector<uint64_t>(kErrorCountsSize, 0)};
        uint64_t* count_ptrs[2] = {counts[0].data(), counts[1].data()};
        PatternRow got[2];
        k.scheme_row(x.data(), dim, params, got, count_ptrs);
        for (bool legacy : {false, true}) {
          SCOPED_TRACE(legacy ? "legacy" : "optimized");
          // The level tables: the kernel's and the numeric.h functions'.
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
          const PatternRow& g = got[legacy ? 1 : 0];
          const Reference want = reference_pattern_row(x, q, qmax, y.data(), w.data(), bins);
          EXPECT_EQ(g.e2, want.row.e2);
          EXPECT_EQ(g.abs_e, want.row.abs_e);
          EXPECT_EQ(g.we2, want.row.we2);
          EXPECT_EQ(g.abs_we, want.row.abs_we);
          EXPECT_EQ(g.ae2, want.row.ae2);
          EXPECT_EQ(g.abs_ae, want.row.abs_ae);
          EXPECT_EQ(g.ey, want.row.ey);
          EXPECT_EQ(g.max_e, want.row.max_e);
          EXPECT_EQ(g.max_we, want.row.max_we);
          EXPECT_EQ(g.max_ae, want.row.max_ae);
          std::vector<uint64_t> cats(static_cast<size_t>(bins.n) + 3, 0);
          error_categories(bins, counts[legacy ? 1 : 0].data(), cats.data());
          EXPECT_EQ(cats, want.categories);
        }
      }
    }
  }
}

// A value's error bin is that of its slot value (|e| with the mantissa cut to
// kErrorMantissaBits bits) as std::log10 puts it: every set counts each value
// at its count index (error_count_index, in the column's copy) and
// error_categories turns that index into the slot value's bin, checked at the
// slot values next to each bin edge and just below them, at values over the
// whole float range, and for coarse, fine and out-of-range bins.
TEST(MetricKernels, ErrorBinsAreThoseOfTheSlotValues) {
  struct Config {
    double lo, hi;
    int n;
  };
  const Config configs[] = {{-9, -1, 64}, {-6, 2, 64}, {-3, 2, 5}, {-6, 0, 600}, {-46, -38, 64}, {0.5, 0.75, 3}};
  // The slot value at or below v, and the next one up.
  auto slot_of = [](float v) { return error_slot_value(v); };
  auto next_slot = [](float v) {
    uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    b += uint32_t{1} << kErrorSlotShift;
    std::memcpy(&v, &b, sizeof b);
    return v;
  };
  for (const Config& cfg : configs) {
    SCOPED_TRACE("bins [" + std::to_string(cfg.lo) + ", " + std::to_string(cfg.hi) + ") n " + std::to_string(cfg.n));
    ErrorBins bins;
    bins.lo = cfg.lo;
    bins.hi = cfg.hi;
    bins.n = cfg.n;
    std::vector<float> values;
    for (int i = 0; i <= cfg.n; ++i) {
      const double edge = std::pow(10.0, cfg.lo + (cfg.hi - cfg.lo) * i / cfg.n);
      if (edge > 3e38 || edge < 1e-44) continue;  // no float there
      // The slot at or below the edge, the one above, and the floats next
      // to each slot value.
      const float edge_f = static_cast<float>(edge);
      for (float sv : {slot_of(edge_f), next_slot(slot_of(edge_f))}) {
        float f = sv;
        for (int step = 0; step < 2; ++step) f = std::nextafter(f, 0.0f);
        for (int step = 0; step < 5; ++step, f = std::nextafter(f, INFINITY)) values.push_back(f);
      }
    }
    qemb::testing::Rng rng(static_cast<uint64_t>(cfg.n) * 977 + 5);
    for (int i = 0; i < 2000; ++i) values.push_back(std::ldexp(1.0f + 0.5f * std::fabs(rng.normal()), -150 + i % 277));
    values.push_back(0.0f);
    values.push_back(1e-45f);
    values.push_back(3e38f);

    // error_categories: the category of each value's count index, in any copy.
    std::vector<uint64_t> one(kErrorCountsSize, 0);
    for (size_t i = 0; i < values.size(); ++i) {
      const float v = values[i], a = std::fabs(v);
      const size_t want = static_cast<size_t>(error_category(a, bins));
      const size_t index = (i % kErrorCopies) * kErrorCountStride + error_count_index(a);
      one[index] = 1;
      std::vector<uint64_t> cats(static_cast<size_t>(cfg.n) + 3, 0);
      error_categories(bins, one.data(), cats.data());
      one[index] = 0;
      ASSERT_EQ(cats[want], 1u) << "value " << v << " category " << want;
      // The definition itself: the slot value's std::log10 bin.
      if (a > 0) {
        Histogram h;
        h.lo = cfg.lo;
        h.hi = cfg.hi;
        h.counts.assign(static_cast<size_t>(cfg.n), 0);
        h.add(std::log10(static_cast<double>(slot_of(a))));
        const size_t plain = h.below ? 0 : h.above ? static_cast<size_t>(cfg.n) + 1
                             : static_cast<size_t>(std::find(h.counts.begin(), h.counts.end(), 1u) - h.counts.begin()) + 1;
        ASSERT_EQ(want, plain) << "value " << v;
      }
    }

    // The kernels: each value counted at its index, in the column's copy,
    // for both patterns. Row scale 0: y = w = 0 for every level, so e = -x.
    SchemeParams params;
    params.row_scale = 0.0f;
    params.max_scale = 1.0f;
    params.act = activation_encoding(-1.0f, 1.0f);
    for (const MetricKernelSet& k : all_metric_kernel_sets()) {
      SCOPED_TRACE(k.isa);
      // Counts start at zero for each value: the ones it set are cleared
      // after it, and the buffers must be all zero at the end.
      std::vector<uint64_t> counts[2] = {std::vector<uint64_t>(kErrorCountsSize, 0),
                                         std::vector<uint64_t>(kErrorCountsSize, 0)};
      uint64_t* count_ptrs[2] = {counts[0].data(), counts[1].data()};
      const size_t columns = kRowPartials + 3;  // one step of vectors and a scalar tail
      for (float v : values) {
        const std::vector<float> x(columns, v);
        PatternRow rows[2];
        k.scheme_row(x.data(), x.size(), params, rows, count_ptrs);
        const size_t index = error_count_index(std::fabs(v));
        for (size_t copy = 0; copy < kErrorCopies; ++copy) {
          const uint64_t in_copy = (columns - copy + kErrorCopies - 1) / kErrorCopies;
          for (std::vector<uint64_t>& c : counts) {
            ASSERT_EQ(c[copy * kErrorCountStride + index], in_copy) << "value " << v << " copy " << copy;
            c[copy * kErrorCountStride + index] = 0;
          }
        }
      }
      for (const std::vector<uint64_t>& c : counts)
        EXPECT_EQ(std::count(c.begin(), c.end(), uint64_t{0}), static_cast<std::ptrdiff_t>(c.size()));
    }
  }
}

// Histogram::add's category of v (0 below, 1 + bin, n + 1 above).
size_t value_category(double v, const ValueBins& bins) {
  Histogram h;
  h.lo = bins.lo;
  h.hi = bins.hi;
  h.counts.assign(static_cast<size_t>(bins.n), 0);
  h.add(v);
  if (h.below) return 0;
  if (h.above) return static_cast<size_t>(bins.n) + 1;
  return static_cast<size_t>(std::find(h.counts.begin(), h.counts.end(), 1u) - h.counts.begin()) + 1;
}

// Rows partly outside the bins and the clip bounds, and rows inside them
// (the kernels' short way) with values at and next to every bin edge.
TEST(MetricKernels, RowValuesMatchTheScalarDefinition) {
  struct Config {
    double lo, hi;
    int n;
    double clip_lo, clip_hi;
  };
  const Config configs[] = {{-0.03, 0.05, 80, -0.02, 0.02}, {-1.0, 1.0, 80, -2.0, 2.0}, {-0.3, 0.7, 7, -1.0, 1.0},
                            {1e-9, 1.0, 3, -1.0, 1.0}};
  for (const MetricKernelSet& k : all_metric_kernel_sets()) {
    for (const Config& cfg : configs) {
      for (size_t dim : {1u, 5u, 8u, 13u, 16u, 64u, 257u, 1023u}) {
        SCOPED_TRACE(std::string(k.isa) + " dim " + std::to_string(dim) + " bins [" + std::to_string(cfg.lo) + ", " +
                     std::to_string(cfg.hi) + ")");
        std::vector<float> x = test_row(dim, dim + 7);
        ValueBins bins;
        bins.lo = cfg.lo;
        bins.hi = cfg.hi;
        bins.n = cfg.n;
        bins.clip_lo = cfg.clip_lo;
        bins.clip_hi = cfg.clip_hi;
        if (cfg.lo >= -1.0 && cfg.hi <= 1.0 && cfg.n < 80) {
          // Values at and next to the bin edges, inside [lo, hi).
          for (size_t j = 0; j < dim; ++j) {
            const double edge = cfg.lo + (cfg.hi - cfg.lo) * static_cast<double>(j % (cfg.n + 1)) / cfg.n;
            float f = static_cast<float>(edge);
            if (j % 3 == 1) f = std::nextafter(f, INFINITY);
            if (j % 3 == 2) f = std::nextafter(f, -INFINITY);
            x[j] = std::clamp(f, static_cast<float>(cfg.lo) < cfg.lo ? std::nextafter(static_cast<float>(cfg.lo), 1.0f)
                                                                      : static_cast<float>(cfg.lo),
                              std::nextafter(static_cast<float>(cfg.hi), -INFINITY));
          }
        }
        std::vector<uint64_t> counts(value_counts_size(bins), 0);
        RowValues got;
        k.row_values(x.data(), dim, bins, &got, counts.data());
        float p[kRowPartials] = {};
        int64_t clipped = 0;
        float amax = 0.0f, lo = INFINITY, hi = -INFINITY;
        std::vector<uint64_t> want(static_cast<size_t>(bins.n) + 2, 0);
        for (size_t j = 0; j < dim; ++j) {
          const float v = x[j];
          p[j % kRowPartials] += v * v;
          amax = std::max(amax, std::fabs(v));
          lo = std::min(lo, v);
          hi = std::max(hi, v);
          if (v < bins.clip_lo || v > bins.clip_hi) ++clipped;
          ++want[value_category(v, bins)];
        }
        std::vector<uint64_t> total(want.size(), 0);
        for (size_t copy = 0; copy < kValueCopies; ++copy)
          for (size_t c = 0; c < total.size(); ++c) total[c] += counts[copy * total.size() + c];
        EXPECT_EQ(got.x2, add_partials(p));
        EXPECT_EQ(got.clipped, clipped);
        EXPECT_EQ(got.amax, amax);
        EXPECT_EQ(got.x_min, lo);
        EXPECT_EQ(got.x_max, hi);
        EXPECT_EQ(got.constant, dim == 1);
        EXPECT_EQ(total, want);
        std::vector<float> same(dim, 0.5f);
        k.row_values(same.data(), dim, bins, &got, counts.data());
        EXPECT_TRUE(got.constant);
      }
    }
  }
}

}  // namespace
}  // namespace qemb
