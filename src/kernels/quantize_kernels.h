// Quantization microkernels for the compiler (docs/numeric-contract.md, "Weights"): row statistics with
// a finiteness check, and per-row symmetric quantization into the weight's
// storage layout. Each is bit-identical to the scalar contract of
// qemb/numeric.h (weight_row_scale, quantize_weight) and quantize.h (min_max); one set per
// Highway target, chosen at run time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "qemb/numeric.h"

namespace qemb {

// min and max of a row (as min_max computes them; -0 and +0 may come out
// either way round) and amax = max(0, max |w|) exactly as weight_row_scale.
struct RowStats {
  float min = 0.0f;
  float max = 0.0f;
  float amax = 0.0f;
};

// Fills `stats` and returns -1, or returns the first column holding NaN/Inf
// (stats are then unspecified). dim == 0 gives all zeros.
using RowStatsF32Fn = int64_t (*)(const float* row, size_t dim, RowStats* stats);
// out[j] = quantize_weight(row[j], row_scale, 127) for j < dim.
using QuantizeRowS8Fn = void (*)(const float* row, size_t dim, float row_scale, int8_t* out);
// The same with qmax = 7 into ceil(dim/2) bytes of packed nibbles (core/ir.h:
// column 2k low nibble, 2k+1 high nibble); an odd row's padding nibble is 0.
using QuantizeRowS4Fn = void (*)(const float* row, size_t dim, float row_scale, uint8_t* out);
// The same three over a row of little-endian BF16 (2 * dim bytes, any
// alignment), read as the float32 each value is exactly: bit-identical to
// the float forms on the decoded row, without writing it.
using RowStatsBf16Fn = int64_t (*)(const uint8_t* row, size_t dim, RowStats* stats);
using QuantizeRowS8Bf16Fn = void (*)(const uint8_t* row, size_t dim, float row_scale, int8_t* out);
using QuantizeRowS4Bf16Fn = void (*)(const uint8_t* row, size_t dim, float row_scale, uint8_t* out);
// The *_own_scale forms give the same bytes for a finite row whose row_scale
// is row_scale_from_amax(its amax, qmax), as the compiler's are: there the
// clamp to [-qmax, qmax] cannot bind, and they leave it out. Any other scale
// is outside their contract.
struct QuantizeKernelSet {
  const char* isa = "";    // hwy::TargetName, or "REFERENCE"
  int64_t hwy_target = 0;  // 0 for the reference
  RowStatsF32Fn row_stats_f32 = nullptr;
  QuantizeRowS8Fn quantize_row_s8 = nullptr;
  QuantizeRowS4Fn quantize_row_s4 = nullptr;
  RowStatsBf16Fn row_stats_bf16 = nullptr;
  QuantizeRowS8Bf16Fn quantize_row_s8_bf16 = nullptr;
  QuantizeRowS4Bf16Fn quantize_row_s4_bf16 = nullptr;
  QuantizeRowS8Bf16Fn quantize_row_s8_bf16_own_scale = nullptr;
  QuantizeRowS4Bf16Fn quantize_row_s4_bf16_own_scale = nullptr;
};

// weight_row_scale() from a row's amax: max(amax / (float)qmax, eps).
inline float row_scale_from_amax(float amax, int qmax) {
  return std::max(amax / static_cast<float>(qmax), kEps);
}

// The best set this CPU supports, chosen on first use.
const QuantizeKernelSet& best_quantize_kernels();
// One set per instruction set this machine supports and this build compiled,
// best first (tests and benchmarks).
std::vector<QuantizeKernelSet> all_quantize_kernel_sets();
// Plain loops over the numeric.h functions.
const QuantizeKernelSet& reference_quantize_kernels();

}  // namespace qemb
