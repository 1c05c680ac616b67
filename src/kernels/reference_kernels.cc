// The reference kernels: plain loops over the numeric.h inline functions.
// Every vector kernel is tested against these, bit for bit.
#include <cstring>

#include "qemb/half.h"
#include "core/ir.h"
#include "kernels/kernels.h"
#include "qemb/numeric.h"

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

template <bool kBF16>
uint16_t to_half(float y) {
  return kBF16 ? float_to_bf16(y) : float_to_f16(y);
}

template <bool kBF16>
void reference_gather_u16_half(const uint16_t* table, size_t dim, const ActivationEncoding& act,
                               const int64_t* ids, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) {
    const uint16_t* row = table + static_cast<size_t>(ids[i]) * dim;
    for (size_t j = 0; j < dim; ++j) out[i * dim + j] = to_half<kBF16>(dequantize_activation(row[j], act));
  }
}

enum class Pattern { kOptimized, kLegacy };

// The quantized weight q[r][j] in storage layout.
template <int kBits>
int weight_at(const RequantGatherParams& p, size_t r, size_t j) {
  const size_t row_bytes = kBits == 4 ? (p.dim + 1) / 2 : p.dim;
  const uint8_t* row = p.weights + r * (p.row_stride ? p.row_stride : row_bytes);
  if constexpr (kBits == 4) {
    return unpack_int4(row, static_cast<int64_t>(j));
  } else {
    return static_cast<int8_t>(row[j]);
  }
}

float scale_at(const RequantGatherParams& p, size_t r) {
  if (p.scale_stride == 0) return p.row_scales[r];
  float s;
  std::memcpy(&s, reinterpret_cast<const uint8_t*>(p.row_scales) + r * p.scale_stride, sizeof(s));
  return s;
}

template <Pattern kPattern, int kBits>
uint16_t reference_output(const RequantGatherParams& p, size_t r, size_t j) {
  const int q = weight_at<kBits>(p, r, j);
  const float s = scale_at(p, r);
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

template <Pattern kPattern, int kBits, bool kBF16>
void reference_requant_half(const RequantGatherParams& p, const int64_t* ids, size_t n,
                            uint16_t* out) {
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < p.dim; ++j) {
      out[i * p.dim + j] = to_half<kBF16>(dequantize_activation(
          reference_output<kPattern, kBits>(p, static_cast<size_t>(ids[i]), j), p.act));
    }
  }
}

// The pooled reduction, literally as docs/numeric-contract.md states it; y(r, j)
// is the deployed lookup's dequantized value.
template <typename Id, typename RowValue>
void reference_bag(size_t dim, const Id* ids, const BagParams& bag, float* out, RowValue y) {
  for (size_t b = 0; b < bag.bags; ++b) {
    float* o = out + b * bag.out_stride;
    for (size_t j = 0; j < dim; ++j) {
      float acc = +0.0f;
      int64_t count = 0;
      for (int64_t i = bag.offsets[b]; i < bag.offsets[b + 1]; ++i) {
        const int64_t id = ids[i];
        if (id == bag.padding_idx) continue;
        const float v = y(static_cast<size_t>(id), j);
        if (bag.weights) {
          const float product = bag.weights[i] * v;
          acc = acc + product;
        } else {
          acc = acc + v;
        }
        ++count;
      }
      if (bag.mean) acc = count > 0 ? acc / static_cast<float>(count) : +0.0f;
      o[j] = acc;
    }
  }
}

template <typename Id>
void reference_bag_u16(const RequantGatherParams& p, const Id* ids, const BagParams& bag,
                       float* out) {
  const uint16_t* table = reinterpret_cast<const uint16_t*>(p.weights);
  reference_bag(p.dim, ids, bag, out, [&](size_t r, size_t j) {
    return dequantize_activation(table[r * p.dim + j], p.act);
  });
}

template <Pattern kPattern, int kBits, typename Id>
void reference_requant_bag(const RequantGatherParams& p, const Id* ids, const BagParams& bag,
                           float* out) {
  reference_bag(p.dim, ids, bag, out, [&](size_t r, size_t j) {
    return dequantize_activation(reference_output<kPattern, kBits>(p, r, j), p.act);
  });
}

KernelSet make_reference_set() {
  KernelSet set;
  set.isa = "REFERENCE";
  set.hwy_target = 0;
  set.gather_u16 = &reference_gather_u16;
  set.gather_u16_f32 = &reference_gather_u16_f32;
  set.gather_u16_f16 = &reference_gather_u16_half<false>;
  set.gather_u16_bf16 = &reference_gather_u16_half<true>;
  set.requant_gather_s4_u16 = &reference_requant_u16<Pattern::kOptimized, 4>;
  set.requant_gather_s4_f32 = &reference_requant_f32<Pattern::kOptimized, 4>;
  set.requant_gather_s4_f16 = &reference_requant_half<Pattern::kOptimized, 4, false>;
  set.requant_gather_s4_bf16 = &reference_requant_half<Pattern::kOptimized, 4, true>;
  set.requant_gather_s8_u16 = &reference_requant_u16<Pattern::kOptimized, 8>;
  set.requant_gather_s8_f32 = &reference_requant_f32<Pattern::kOptimized, 8>;
  set.requant_gather_s8_f16 = &reference_requant_half<Pattern::kOptimized, 8, false>;
  set.requant_gather_s8_bf16 = &reference_requant_half<Pattern::kOptimized, 8, true>;
  set.legacy_gather_s4_u16 = &reference_requant_u16<Pattern::kLegacy, 4>;
  set.legacy_gather_s4_f32 = &reference_requant_f32<Pattern::kLegacy, 4>;
  set.legacy_gather_s4_f16 = &reference_requant_half<Pattern::kLegacy, 4, false>;
  set.legacy_gather_s4_bf16 = &reference_requant_half<Pattern::kLegacy, 4, true>;
  set.legacy_gather_s8_u16 = &reference_requant_u16<Pattern::kLegacy, 8>;
  set.legacy_gather_s8_f32 = &reference_requant_f32<Pattern::kLegacy, 8>;
  set.legacy_gather_s8_f16 = &reference_requant_half<Pattern::kLegacy, 8, false>;
  set.legacy_gather_s8_bf16 = &reference_requant_half<Pattern::kLegacy, 8, true>;
  set.bag_u16_i32 = &reference_bag_u16<int32_t>;
  set.bag_u16_i64 = &reference_bag_u16<int64_t>;
  set.requant_bag_s4_i32 = &reference_requant_bag<Pattern::kOptimized, 4, int32_t>;
  set.requant_bag_s4_i64 = &reference_requant_bag<Pattern::kOptimized, 4, int64_t>;
  set.requant_bag_s8_i32 = &reference_requant_bag<Pattern::kOptimized, 8, int32_t>;
  set.requant_bag_s8_i64 = &reference_requant_bag<Pattern::kOptimized, 8, int64_t>;
  set.legacy_bag_s4_i32 = &reference_requant_bag<Pattern::kLegacy, 4, int32_t>;
  set.legacy_bag_s4_i64 = &reference_requant_bag<Pattern::kLegacy, 4, int64_t>;
  set.legacy_bag_s8_i32 = &reference_requant_bag<Pattern::kLegacy, 8, int32_t>;
  set.legacy_bag_s8_i64 = &reference_requant_bag<Pattern::kLegacy, 8, int64_t>;
  return set;
}

}  // namespace

const KernelSet& scalar_reference_kernels() {
  static const KernelSet set = make_reference_set();
  return set;
}

}  // namespace qemb
