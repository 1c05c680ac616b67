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
  int n = 1;
  // Set by prepare_error_bins: the slots kept, [slot_base, slot_base +
  // slot_span) in units of the bits of |e| shifted right by kErrorSlotShift;
  // slots below hold values below lo, those above values at or above hi, and
  // are counted with the first and the last one.
  int32_t slot_base = 0, slot_span = 1;
};
// Fills slot_base and slot_span from lo, hi and n.
void prepare_error_bins(ErrorBins& bins);

// Error counts: kErrorCopies copies of slot_span + 1 entries (0: e == 0, then
// the slots), which error_categories adds up; column j counts in copy j %
// kErrorCopies, so runs of equal slots do not wait on one counter's store.
inline constexpr size_t kErrorCopies = 4;
inline size_t error_counts_size(const ErrorBins& b) { return kErrorCopies * static_cast<size_t>(b.slot_span + 1); }

// The count index of |e| = a: 0 for 0, else 1 + its slot's place.
inline size_t error_count_index(float a, const ErrorBins& b) {
  if (a == 0.0f) return 0;
  uint32_t bits;
  std::memcpy(&bits, &a, sizeof bits);
  const int32_t slot = static_cast<int32_t>(bits >> kErrorSlotShift) - b.slot_base;
  return static_cast<size_t>(std::clamp<int32_t>(slot, 0, b.slot_span - 1)) + 1;
}

// One row of one pattern, in float (see above): e = y - x, we = w - x,
// ae = y - w; ey sums e * (x + y), from which eval gets sum y^2 = sum x^2 +
// ey and sum x y = sum x^2 + (ey - e2) / 2 without the cancellation of
// 1 - cos in direct sums.
struct PatternRow {
  double e2 = 0, abs_e = 0, we2 = 0, abs_we = 0, ae2 = 0, abs_ae = 0, ey = 0;  // sums
  float max_e = 0, max_we = 0, max_ae = 0;
};

// What a row's y and w are made of: the pattern, the row scale, the
// largest row scale (legacy), qmax and the activation encoding.
struct PatternParams {
  bool legacy = false;
  float row_scale = 0, max_scale = 0;
  int qmax = 7;
  ActivationEncoding act;
};

// Fills `out` for the float row x and its weights q (in [-qmax, qmax]), whose
// y and w the kernel computes by the numeric.h formulas, and adds one to
// counts[(j % kErrorCopies) * (slot_span + 1) + error_count_index(|e_j|)]
// for each column j (bins prepared by prepare_error_bins).
using PatternRowFn = void (*)(const float* x, const int8_t* q, size_t dim, const PatternParams& p,
                              const ErrorBins& bins, PatternRow* out, uint64_t* counts);

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
inline int error_category(float a, const ErrorBins& b) {
  return a == 0.0f ? b.n + 2 : exact_error_category(error_slot_value(a), b);
}

// Adds the counts of every copy into categories (n + 3 entries: 0 below,
// 1 + bin, n + 1 above, n + 2 zero).
void error_categories(const ErrorBins& bins, const uint64_t* counts, uint64_t* categories);

}  // namespace qemb
