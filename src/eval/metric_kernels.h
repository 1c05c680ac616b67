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
#include <cstring>
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

// The error histogram: n equal bins of log10 |e| over [lo, hi), each value
// binned by its *slot*: |e| truncated to kErrorMantissaBits bits after its
// mantissa's binary point (error_slot_value), which the bits of |e| give with
// one shift, where a logarithm per value cost half of eval's time. A slot's
// bin is the one std::log10 gives its value (exact_error_category), so a bin
// edge moves up to the next slot value: by less than 1/16 of itself (0.026
// decades, a fifth of a bin at 8 bins a decade).
inline constexpr int kErrorMantissaBits = 4;

inline double error_slot_value(double a) {
  uint64_t bits;
  std::memcpy(&bits, &a, sizeof bits);
  bits &= ~((uint64_t{1} << (52 - kErrorMantissaBits)) - 1);
  std::memcpy(&a, &bits, sizeof bits);
  return a;
}

struct ErrorBins {
  double lo = 0, hi = 1;
  int n = 1;
  // Set by prepare_error_bins: the slots kept, [slot_base, slot_base +
  // slot_span) in units of the bits of |e| shifted right by 52 -
  // kErrorMantissaBits; slots below hold values below lo, those above values
  // at or above hi, and are counted with the first and the last one.
  int64_t slot_base = 0, slot_span = 1;
};
// Fills slot_base and slot_span from lo, hi and n.
void prepare_error_bins(ErrorBins& bins);

// Error counts: kErrorCopies copies of slot_span + 1 entries (0: e == 0, then
// the slots), which error_categories adds up.
inline constexpr size_t kErrorCopies = 4;
inline size_t error_counts_size(const ErrorBins& b) { return kErrorCopies * static_cast<size_t>(b.slot_span + 1); }

// The count index of |e| = a: 0 for 0, else 1 + its slot's place.
inline size_t error_count_index(double a, const ErrorBins& b) {
  if (a == 0.0) return 0;
  uint64_t bits;
  std::memcpy(&bits, &a, sizeof bits);
  const int64_t slot = static_cast<int64_t>(bits >> (52 - kErrorMantissaBits)) - b.slot_base;
  return static_cast<size_t>(std::clamp<int64_t>(slot, 0, b.slot_span - 1)) + 1;
}

// One row of one pattern: x the float row, q its weights (in [-qmax, qmax]),
// y_tab and w_tab the pattern's y and w for q + qmax.
struct PatternRow {
  double e2 = 0, abs_e = 0, we2 = 0, abs_we = 0, ae2 = 0, abs_ae = 0, dot = 0, y2 = 0;  // sums
  double max_e = 0, max_we = 0, max_ae = 0;
  float y_min = 0, y_max = 0;  // one output level iff equal (y is one-to-one in the level)
};
// Fills `out` and adds one to counts[copy * (slot_span + 1) +
// error_count_index(|e|)] for each value (bins prepared by prepare_error_bins).
using PatternRowFn = void (*)(const float* x, const int8_t* q, size_t dim, int qmax, const float* y_tab,
                              const float* w_tab, const ErrorBins& bins, PatternRow* out, uint64_t* counts);

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
// n + 1 above).
inline int exact_error_category(double a, const ErrorBins& b) {
  const double v = std::log10(a);
  if (v < b.lo) return 0;
  if (v >= b.hi) return b.n + 1;
  const auto bin = static_cast<size_t>((v - b.lo) / (b.hi - b.lo) * static_cast<double>(b.n));
  return static_cast<int>(std::min(bin, static_cast<size_t>(b.n) - 1)) + 1;
}

// A value's category: that of its slot value; n + 2 for an exact zero.
inline int error_category(double a, const ErrorBins& b) {
  return a == 0.0 ? b.n + 2 : exact_error_category(error_slot_value(a), b);
}

// Adds the counts of every copy into categories (n + 3 entries: 0 below,
// 1 + bin, n + 1 above, n + 2 zero).
void error_categories(const ErrorBins& bins, const uint64_t* counts, uint64_t* categories);

}  // namespace qemb
