// The reference kernels: plain loops over the quantize.h inline functions.
// Every vector kernel is tested against these, bit for bit.
#include <cstring>

#include "qemb/ir.h"
#include "qemb/kernels.h"
#include "qemb/quantize.h"

namespace qemb {
namespace {

void reference_gather_u16(const uint16_t* table, size_t dim, const int64_t* ids, size_t n,
                          uint16_t* out) {
  for (size_t i = 0; i < n; ++i) {
    const uint16_t* row = table + static_cast<size_t>(ids[i]) * dim;
    for (size_t j = 0; j < dim; ++j) out[i * dim + j] = row[j];
  }
}

void reference_gather_u16_f32(const uint16_t* table, size_t dim, const ActivationEncoding& act,
                              const int64_t* ids, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    const uint16_t* row = table + static_cast<size_t>(ids[i]) * dim;
    for (size_t j = 0; j < dim; ++j) out[i * dim + j] = dequantize_activation(row[j], act);
  }
}

enum class Pattern { kOptimized, kLegacy };

// The quantized weight q[r][j] in storage layout.
template <int kBits>
int weight_at(const RequantGatherParams& p, size_t r, size_t j) {
  if constexpr (kBits == 4) {
    return unpack_int4(p.weights + r * ((p.dim + 1) / 2), static_cast<int64_t>(j));
  } else {
    return static_cast<int8_t>(p.weights[r * p.dim + j]);
  }
}

template <Pattern kPattern, int kBits>
uint16_t reference_output(const RequantGatherParams& p, size_t r, size_t j) {
  const int q = weight_at<kBits>(p, r, j);
  const float s = p.row_scales[r];
  if constexpr (kPattern == Pattern::kOptimized) {
    return optimized_output(s, q, p.act);
  } else {
    return legacy_output(s, q, p.max_scale, kBits == 4 ? 7 : 127, p.act);
  }
}

template <Pattern kPattern, int kBits>
void reference_requant_u16(const RequantGatherParams& p, const int64_t* ids, size_t n,
                           uint16_t* out) {
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < p.dim; ++j) {
      out[i * p.dim + j] = reference_output<kPattern, kBits>(p, static_cast<size_t>(ids[i]), j);
    }
  }
}

template <Pattern kPattern, int kBits>
void reference_requant_f32(const RequantGatherParams& p, const int64_t* ids, size_t n,
                           float* out) {
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < p.dim; ++j) {
      out[i * p.dim + j] = dequantize_activation(
          reference_output<kPattern, kBits>(p, static_cast<size_t>(ids[i]), j), p.act);
    }
  }
}

KernelSet make_reference_set() {
  KernelSet set;
  set.isa = "REFERENCE";
  set.hwy_target = 0;
  set.gather_u16 = &reference_gather_u16;
  set.gather_u16_f32 = &reference_gather_u16_f32;
  set.requant_gather_s4_u16 = &reference_requant_u16<Pattern::kOptimized, 4>;
  set.requant_gather_s4_f32 = &reference_requant_f32<Pattern::kOptimized, 4>;
  set.requant_gather_s8_u16 = &reference_requant_u16<Pattern::kOptimized, 8>;
  set.requant_gather_s8_f32 = &reference_requant_f32<Pattern::kOptimized, 8>;
  set.legacy_gather_s4_u16 = &reference_requant_u16<Pattern::kLegacy, 4>;
  set.legacy_gather_s4_f32 = &reference_requant_f32<Pattern::kLegacy, 4>;
  set.legacy_gather_s8_u16 = &reference_requant_u16<Pattern::kLegacy, 8>;
  set.legacy_gather_s8_f32 = &reference_requant_f32<Pattern::kLegacy, 8>;
  return set;
}

}  // namespace

const KernelSet& scalar_reference_kernels() {
  static const KernelSet set = make_reference_set();
  return set;
}

}  // namespace qemb
