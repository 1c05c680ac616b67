// Vector kernels for eval's metric pass: per row, the value statistics and,
// per (scheme, pattern), the error sums and the error histogram's bins. One set
// per Highway target, chosen at run time; every set gives the same bits.
//
// Sums over a row are split by column into kRowPartials partial sums (column
// j goes to partial j % kRowPartials, in column order) and the partials are
// added in a fixed tree, so neither the vector width nor the thread count
// changes a result.
#pragma once

#include <cstddef>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "qemb/quantize.h"

namespace qemb {

inline constexpr size_t kRowPartials = 8;

// ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7)).
inline double add_partials(const double* p) {
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

// The value histogram's bins (Histogram::add on each value: below lo, equal
// bins of [lo, hi), at or above hi) and the clip bounds.
struct ValueBins {
  double lo = 0, hi = 1;
  int n = 1;
  double clip_lo = 0, clip_hi = 0;  // a value below clip_lo or above clip_hi is clipped
};

struct RowValues {
  double x2 = 0;         // sum of x^2
  int64_t clipped = 0;   // values outside [clip_lo, clip_hi]
  float amax = 0;        // max |x|
  bool constant = true;  // every value equals the first
};

// counts has n + 2 entries: 0 below, 1 + bin, n + 1 above.
using RowValuesFn = void (*)(const float* x, size_t dim, const ValueBins& bins, RowValues* out, uint64_t* counts);

// The error histogram: n equal bins of log10 |e| over [lo, hi).
struct ErrorBins {
  double lo = 0, hi = 1;
  int n = 1;
};
// Error categories: 0 below lo, 1 + bin, n + 1 at or above hi, n + 2 exact
// (e == 0); counts holds kErrorCopies copies of n + 4 entries (the last of
// each copy is unused), which the caller adds up.
inline constexpr size_t kErrorCopies = 8;
inline size_t error_counts_size(int n) { return kErrorCopies * (static_cast<size_t>(n) + 4); }

// One row of one pattern: x the float row, q its weights (in [-qmax, qmax]),
// y_tab and w_tab the pattern's y and w for q + qmax.
struct PatternRow {
  double e2 = 0, abs_e = 0, we2 = 0, abs_we = 0, ae2 = 0, abs_ae = 0, dot = 0, y2 = 0;  // sums
  double max_e = 0, max_we = 0, max_ae = 0;
  float y_min = 0, y_max = 0;  // one output level iff equal (y is one-to-one in the level)
};
// Fills `out`, adds each value's error category to counts, except the columns
// whose category a vector log cannot settle (within a hair of a bin edge, a
// tail, extreme magnitudes): those are written to slow[] (at most dim) and
// their number returned, for the caller to bin with std::log10.
using PatternRowFn = size_t (*)(const float* x, const int8_t* q, size_t dim, int qmax, const float* y_tab,
                                const float* w_tab, const ErrorBins& bins, PatternRow* out, uint64_t* counts,
                                uint32_t* slow);

// y and w of a pattern for q = -qmax .. qmax at index q + qmax, exactly the
// numeric.h formulas; y and w hold kPatternTableSize floats.
inline constexpr size_t kPatternTableSize = 256 + 64;
using PatternTablesFn = void (*)(bool legacy, float row_scale, float max_scale, int qmax,
                                 const ActivationEncoding& act, float* y, float* w);

// out[j] = quantize_weight(x[j], row_scale, qmax), one int8 per value.
using QuantizeRowFn = void (*)(const float* x, size_t dim, float row_scale, int qmax, int8_t* out);

struct MetricKernelSet {
  const char* isa = "";
  RowValuesFn row_values = nullptr;
  PatternRowFn pattern_row = nullptr;
  PatternTablesFn pattern_tables = nullptr;
  QuantizeRowFn quantize_row = nullptr;
};

const MetricKernelSet& best_metric_kernels();
std::vector<MetricKernelSet> all_metric_kernel_sets();

// The category Histogram::add(std::log10(a)) gives a > 0 (0 below, 1 + bin,
// n + 1 above): the plain computation the kernels defer to.
inline int exact_error_category(double a, const ErrorBins& b) {
  const double v = std::log10(a);
  if (v < b.lo) return 0;
  if (v >= b.hi) return b.n + 1;
  const auto bin = static_cast<size_t>((v - b.lo) / (b.hi - b.lo) * static_cast<double>(b.n));
  return static_cast<int>(std::min(bin, static_cast<size_t>(b.n) - 1)) + 1;
}

}  // namespace qemb
