// Vector kernels for eval's metric pass: per row, the value statistics and,
// per (scheme, pattern), the error sums and the error histogram's bins. One set
// per Highway target, chosen at run time; every set gives the same bits.
//
// Within a row, values and errors are float (y - x rounded to float, as the
// squares and products are) and the sums accumulate in float: column j goes
// to partial j % kRowPartials, in column order, each term a product then an
// add (never fused); the partials are converted to double and added in a
// fixed tree (add_partials). Neither the vector width nor the thread count
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

inline constexpr size_t kRowPartials = 16;

// The 16 float partials in double as
// (((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7))) +
// (((p8 + p9) + (p10 + p11)) + ((p12 + p13) + (p14 + p15))).
inline double add_partials(const float* f) {
  double p[kRowPartials];
  for (size_t i = 0; i < kRowPartials; ++i) p[i] = f[i];
  return (((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))) +
         (((p[8] + p[9]) + (p[10] + p[11])) + ((p[12] + p[13]) + (p[14] + p[15])));
}

// The value histogram's bins (Histogram::add on each value: below lo, equal
// bins of [lo, hi), at or above hi) and the clip bounds.
struct ValueBins {
  double lo = 0, hi = 1;
  int n = 1;
  double clip_lo = 0, clip_hi = 0;  // a value below clip_lo or above clip_hi is clipped
};

struct RowValues {
  double x2 = 0;         // sum of x^2 (float partials)
  int64_t clipped = 0;   // values outside [clip_lo, clip_hi]
  float amax = 0;        // max |x|
  float x_min = 0, x_max = 0;
  bool constant = true;  // every value equals the first
};

// counts has kValueCopies copies of n + 2 entries (0 below, 1 + bin, n + 1
// above); column j counts in copy j % kValueCopies, so runs of equal bins do
// not wait on one counter's store. value_counts_size gives the size.
inline constexpr size_t kValueCopies = 4;
inline size_t value_counts_size(const ValueBins& b) { return kValueCopies * (static_cast<size_t>(b.n) + 2); }
using RowValuesFn = void (*)(const float* x, size_t dim, const ValueBins& bins, RowValues* out, uint64_t* counts);

// The error histogram: n equal bins of log10 |e| over [lo, hi), each value
// binned by its *slot*: the float |e| with its mantissa cut to
// kErrorMantissaBits bits after the binary point (error_slot_value), which the
// bits of |e| give with one shift, where a logarithm per value cost half of
// eval's time. A slot's bin is the one std::log10 gives its value
// (exact_error_category), so a bin edge moves up to the next slot value: by
// less than 1/16 of itself (0.026 decades, a fifth of a bin at 8 bins a
// decade).
inline constexpr int kErrorMantissaBits = 4;
inline constexpr int kErrorSlotShift = 23 - kErrorMantissaBits;

inline float error_slot_value(float a) {
  uint32_t bits;
  std::memcpy(&bits, &a, sizeof bits);
  bits &= ~((uint32_t{1} << kErrorSlotShift) - 1);
  std::memcpy(&a, &bits, sizeof bits);
  return a;
}

struct ErrorBins {
  double lo = 0, hi = 1;
  int n = 1;  // at least 1
};

// Error counts: kErrorCopies copies of kErrorCountStride entries, one per
// slot of a non-negative float (its bits shifted right by kErrorSlotShift:
// 0 .. kErrorSlots - 1) and kErrorSlots for e == 0, which error_categories
// adds up; column j counts in copy j % kErrorCopies, so runs of equal slots
// do not wait on one counter's store. Every slot has its counter, so the
// kernels bin a value with one shift and no clamp.
inline constexpr size_t kErrorCopies = 4;
inline constexpr int32_t kErrorSlots = int32_t{1} << (31 - kErrorSlotShift);
inline constexpr size_t kErrorCountStride = static_cast<size_t>(kErrorSlots) + 1;
inline constexpr size_t kErrorCountsSize = kErrorCopies * kErrorCountStride;

// The count index of |e| = a: its slot, kErrorSlots for 0.
inline size_t error_count_index(float a) {
  if (a == 0.0f) return static_cast<size_t>(kErrorSlots);
  uint32_t bits;
  std::memcpy(&bits, &a, sizeof bits);
  return bits >> kErrorSlotShift;
}

// One row of one pattern, in float (see above): e = y - x, we = w - x,
// ae = y - w; ey sums e * (x + y), from which eval gets sum y^2 = sum x^2 +
// ey and sum x y = sum x^2 + (ey - e2) / 2 without the cancellation of
// 1 - cos in direct sums.
struct PatternRow {
  double e2 = 0, abs_e = 0, we2 = 0, abs_we = 0, ae2 = 0, abs_ae = 0, ey = 0;  // sums
  float max_e = 0, max_we = 0, max_ae = 0;
};

// What a row's y and w are made of: the row scale, the largest row scale
// (legacy), qmax and the activation encoding (act.bits == 0: weight-only,
// y = w).
struct SchemeParams {
  float row_scale = 0, max_scale = 0;
  int qmax = 7;
  ActivationEncoding act;
};

// Both patterns of one scheme for the float row x: each value's level q =
// quantize_weight(x, row_scale, qmax), then y and w of q by the numeric.h
// formulas for the optimized pattern into out[0] and for the legacy one into
// out[1], adding one to counts[p][(j % kErrorCopies) * kErrorCountStride +
// error_count_index(|e_j|)] for each column j of pattern p. One pass over
// the row serves both patterns.
using SchemeRowFn = void (*)(const float* x, size_t dim, const SchemeParams& p, PatternRow* out,
                             uint64_t* const* counts);

// y and w of a pattern for q = -qmax .. qmax at index q + qmax, exactly the
// numeric.h formulas; y and w hold kPatternTableSize floats.
inline constexpr size_t kPatternTableSize = 256 + 64;
using PatternTablesFn = void (*)(bool legacy, float row_scale, float max_scale, int qmax,
                                 const ActivationEncoding& act, float* y, float* w);

struct MetricKernelSet {
  const char* isa = "";
  RowValuesFn row_values = nullptr;
  SchemeRowFn scheme_row = nullptr;
  PatternTablesFn pattern_tables = nullptr;
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
inline int error_category(float a, const ErrorBins& b) {
  return a == 0.0f ? b.n + 2 : exact_error_category(error_slot_value(a), b);
}

// Adds the counts of every copy into categories (n + 3 entries: 0 below,
// 1 + bin, n + 1 above, n + 2 zero).
void error_categories(const ErrorBins& bins, const uint64_t* counts, uint64_t* categories);

}  // namespace qemb
