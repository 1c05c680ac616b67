// Quantization kernels (kernels/quantize_kernels.h) for every Highway target this
// build compiles. Highway recompiles this file once per target
// (foreach_target.h); the HWY_ONCE pass exports them and builds the sets.
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/quantize_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels/requant-inl.h"
#include "core/ir.h"
#include "qemb/numeric.h"
#include "kernels/quantize_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace qemb {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <typename T>
int64_t RowStatsOf(const T* HWY_RESTRICT row, size_t dim, RowStats* stats) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  RowStats s;
  if (dim == 0) {
    *stats = s;
    return -1;
  }
  size_t j = 0;
  float lo = RowValueF32(row), hi = lo, amax = 0.0f;
  if (dim >= N) {
    const auto finite_limit = hn::Set(df, FLT_MAX);
    auto vlo = LoadRowF32(df, row), vhi = vlo, vamax = hn::Zero(df);
    for (; j + N <= dim; j += N) {
      const auto v = LoadRowF32(df, row + j);
      const auto a = hn::Abs(v);
      // |v| <= FLT_MAX fails for NaN and both infinities.
      if (HWY_UNLIKELY(!hn::AllTrue(df, hn::Le(a, finite_limit)))) {
        for (size_t k = j;; ++k)
          if (!std::isfinite(RowValueF32(row + k))) return static_cast<int64_t>(k);
      }
      vlo = hn::Min(vlo, v);
      vhi = hn::Max(vhi, v);
      vamax = hn::Max(vamax, a);
    }
    lo = hn::GetLane(hn::MinOfLanes(df, vlo));
    hi = hn::GetLane(hn::MaxOfLanes(df, vhi));
    amax = hn::GetLane(hn::MaxOfLanes(df, vamax));
  }
  for (; j < dim; ++j) {
    const float v = RowValueF32(row + j);
    if (!std::isfinite(v)) return static_cast<int64_t>(j);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    amax = std::max(amax, std::fabs(v));
  }
  s.min = lo;
  s.max = hi;
  s.amax = amax;
  *stats = s;
  return -1;
}

int64_t row_stats_f32(const float* row, size_t dim, RowStats* stats) { return RowStatsOf(row, dim, stats); }
// BF16 row statistics on the 16-bit values, twice the lanes of a float
// vector: |v| orders as its bits & 0x7FFF (unsigned) and v as the int16 bits
// with the magnitude flipped where the sign is set; a magnitude of 0x7F80 or
// more is infinity or NaN. The values are the float kernel's (a zero min or
// max may carry the other sign, which RowStats allows).
int64_t row_stats_bf16(const uint8_t* bytes, size_t dim, RowStats* stats) {
  const uint16_t* row = reinterpret_cast<const uint16_t*>(bytes);  // loaded with LoadU and memcpy only
  auto bits_at = [&](size_t j) {
    uint16_t b;
    std::memcpy(&b, row + j, 2);
    return b;
  };
  auto key_of = [](uint16_t b) { return static_cast<int16_t>(b & 0x8000 ? b ^ 0x7FFF : b); };
  auto float_of = [](uint16_t b) {
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  RowStats s;
  if (dim == 0) {
    *stats = s;
    return -1;
  }
  const hn::ScalableTag<int16_t> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  const size_t N = hn::Lanes(d);
  size_t j = 0;
  int16_t lo = key_of(bits_at(0)), hi = lo;
  uint16_t mag = 0;
  if (dim >= N) {
    const auto low15 = hn::Set(d, 0x7FFF);
    auto vlo = hn::Set(d, lo), vhi = vlo;
    auto vmag = hn::Zero(du);
    for (; j + N <= dim; j += N) {
      const auto b = hn::BitCast(d, hn::LoadU(du, row + j));
      vmag = hn::Max(vmag, hn::BitCast(du, hn::And(b, low15)));
      const auto key = hn::Xor(b, hn::And(hn::ShiftRight<15>(b), low15));
      vlo = hn::Min(vlo, key);
      vhi = hn::Max(vhi, key);
    }
    HWY_ALIGN int16_t l[HWY_MAX_BYTES / 2], h[HWY_MAX_BYTES / 2];
    HWY_ALIGN uint16_t m[HWY_MAX_BYTES / 2];
    hn::Store(vlo, d, l);
    hn::Store(vhi, d, h);
    hn::Store(vmag, du, m);
    for (size_t k = 0; k < N; ++k) {
      lo = std::min(lo, l[k]);
      hi = std::max(hi, h[k]);
      mag = std::max(mag, m[k]);
    }
  }
  for (; j < dim; ++j) {
    const uint16_t b = bits_at(j);
    lo = std::min(lo, key_of(b));
    hi = std::max(hi, key_of(b));
    mag = std::max(mag, static_cast<uint16_t>(b & 0x7FFF));
  }
  if (mag >= 0x7F80) {
    for (size_t k = 0;; ++k)
      if ((bits_at(k) & 0x7FFF) >= 0x7F80) return static_cast<int64_t>(k);
  }
  s.min = float_of(static_cast<uint16_t>(key_of(static_cast<uint16_t>(lo))));
  s.max = float_of(static_cast<uint16_t>(key_of(static_cast<uint16_t>(hi))));
  s.amax = float_of(mag);
  *stats = s;
  return -1;
}

// Quantizes the leading columns of a BF16 row two at a time without
// separating them: a uint32 lane holds two neighbouring values (little-endian:
// the even column in its low half), which as floats are the lane shifted left
// by 16 and the lane with its low half cleared. Each is quantized where it
// lies (QuantizeToInt8's arithmetic), and the two codes are merged in the lane
// and narrowed once: `merge` puts the odd code above the even one. No int8
// row is stored and reloaded, and no lanes are shuffled. The low bits of
// t + 1.5 * 2^23 are those of rne(t) (the constant's low 22 bits are 0), so
// the subtraction is left out. Returns how many columns were done (even).
// kOwnScale: the caller promises row_scale == row_scale_from_amax(amax of
// this finite row, qmax), so the clamp to [-qmax, qmax] never binds and is
// left out: s >= amax / qmax * (1 - 2^-24) (or s = eps above it), so
// |w| * inv(s) <= qmax * (1 + 2^-24)^2 / (1 - 2^-24) < qmax + 1/2, which
// rounds to at most qmax (every scale and inverse here is a normal float).
template <bool kOwnScale, class DU, class Merge>
HWY_INLINE size_t QuantizeBf16Pairs(DU du, const uint16_t* HWY_RESTRICT row, size_t dim, float row_scale, int qmax,
                                    const Merge& merge) {
  if constexpr (std::endian::native != std::endian::little) return 0;
  const hn::Repartition<float, DU> df;
  const size_t N = hn::Lanes(du);
  const auto vinv = hn::Set(df, inv(row_scale));
  const auto vhi = hn::Set(df, static_cast<float>(qmax));
  const auto vlo = hn::Set(df, static_cast<float>(-qmax));
  const auto magic = hn::Set(df, 12582912.0f);  // 1.5 * 2^23
  const auto high_half = hn::Set(du, 0xFFFF0000u);
  auto code = [&](hn::Vec<DU> bits) {
    const auto w = hn::Mul(hn::BitCast(df, bits), vinv);
    if constexpr (kOwnScale) return hn::BitCast(du, hn::Add(w, magic));
    return hn::BitCast(du, hn::Add(hn::Min(MaxOrLowerIfNaN<decltype(df)>(w, vlo), vhi), magic));
  };
  size_t j = 0;
  for (; j + 2 * N <= dim; j += 2 * N) {
    const auto v = hn::LoadU(du, reinterpret_cast<const uint32_t*>(row + j));
    merge(j, code(hn::ShiftLeft<16>(v)), code(hn::And(v, high_half)));
  }
  return j;
}

void quantize_row_s8(const float* row, size_t dim, float row_scale, int8_t* out) {
  QuantizeToInt8(row, dim, row_scale, 127, out);
}
template <bool kOwnScale>
void QuantizeRowS8Bf16(const uint8_t* bytes, size_t dim, float row_scale, int8_t* out) {
  const uint16_t* row = reinterpret_cast<const uint16_t*>(bytes);  // loaded with LoadU only
  const hn::ScalableTag<uint32_t> du;
  const hn::Rebind<uint16_t, decltype(du)> du16;
  const auto low8 = hn::Set(du, 0xFFu);
  const size_t j = QuantizeBf16Pairs<kOwnScale>(du, row, dim, row_scale, 127, [&](size_t at, auto even, auto odd) {
    // Little-endian: the uint16 (even & 0xFF) | odd << 8 is the two int8 codes
    // (the truncation drops the odd code's upper bits).
    hn::StoreU(hn::TruncateTo(du16, hn::OrAnd(hn::ShiftLeft<8>(odd), even, low8)), du16,
               reinterpret_cast<uint16_t*>(out + at));
  });
  QuantizeToInt8(row + j, dim - j, row_scale, 127, out + j);
}
void quantize_row_s8_bf16(const uint8_t* row, size_t dim, float row_scale, int8_t* out) {
  QuantizeRowS8Bf16<false>(row, dim, row_scale, out);
}
void quantize_row_s8_bf16_own_scale(const uint8_t* row, size_t dim, float row_scale, int8_t* out) {
  QuantizeRowS8Bf16<true>(row, dim, row_scale, out);
}

// Quantizes a block of columns into int8 (in L1), then packs pairs: as a
// little-endian uint16 a pair is q[2k] | q[2k+1] << 8, and its byte is
// (x & 0x0F) | ((x >> 4) & 0xF0).
template <typename T>
void QuantizeRowS4(const T* HWY_RESTRICT row, size_t dim, float row_scale, uint8_t* HWY_RESTRICT out) {
  constexpr size_t kBlock = 1024;  // columns, even
  alignas(64) int8_t q[kBlock + 2];
  const hn::ScalableTag<int16_t> d16;
  const hn::Rebind<uint8_t, decltype(d16)> du8;
  const size_t N16 = hn::Lanes(d16);
  for (size_t begin = 0; begin < dim; begin += kBlock) {
    const size_t cols = std::min(kBlock, dim - begin);
    QuantizeToInt8(row + begin, cols, row_scale, 7, q);
    q[cols] = 0;  // the padding nibble of an odd row
    const size_t pairs = (cols + 1) / 2;
    uint8_t* dst = out + begin / 2;
    size_t k = 0;
    for (; k + N16 <= pairs; k += N16) {
      const auto x = hn::LoadU(d16, reinterpret_cast<const int16_t*>(q) + k);
      const auto b = hn::Or(hn::And(x, hn::Set(d16, 0x0F)),
                            hn::And(hn::ShiftRight<4>(x), hn::Set(d16, 0xF0)));
      hn::StoreU(hn::DemoteTo(du8, b), du8, dst + k);
    }
    for (; k < pairs; ++k)
      dst[k] = static_cast<uint8_t>((q[2 * k] & 0x0F) | ((q[2 * k + 1] & 0x0F) << 4));
  }
}

void quantize_row_s4(const float* row, size_t dim, float row_scale, uint8_t* out) {
  QuantizeRowS4(row, dim, row_scale, out);
}
template <bool kOwnScale>
void QuantizeRowS4Bf16(const uint8_t* bytes, size_t dim, float row_scale, uint8_t* out) {
  const uint16_t* row = reinterpret_cast<const uint16_t*>(bytes);  // loaded with LoadU only
  const hn::ScalableTag<uint32_t> du;
  const hn::Rebind<uint8_t, decltype(du)> du8;
  const auto low4 = hn::Set(du, 0x0Fu);
  const size_t j = QuantizeBf16Pairs<kOwnScale>(du, row, dim, row_scale, 7, [&](size_t at, auto even, auto odd) {
    // The pair's byte, (even & 0x0F) | odd << 4, in the lane's low 8 bits.
    hn::StoreU(hn::TruncateTo(du8, hn::OrAnd(hn::ShiftLeft<4>(odd), even, low4)), du8, out + at / 2);
  });
  QuantizeRowS4(row + j, dim - j, row_scale, out + j / 2);
}
void quantize_row_s4_bf16(const uint8_t* row, size_t dim, float row_scale, uint8_t* out) {
  QuantizeRowS4Bf16<false>(row, dim, row_scale, out);
}
void quantize_row_s4_bf16_own_scale(const uint8_t* row, size_t dim, float row_scale, uint8_t* out) {
  QuantizeRowS4Bf16<true>(row, dim, row_scale, out);
}

}  // namespace HWY_NAMESPACE
}  // namespace qemb
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/dispatch.h"

namespace qemb {

HWY_EXPORT(row_stats_f32);
HWY_EXPORT(quantize_row_s8);
HWY_EXPORT(quantize_row_s4);
HWY_EXPORT(row_stats_bf16);
HWY_EXPORT(quantize_row_s8_bf16);
HWY_EXPORT(quantize_row_s4_bf16);
HWY_EXPORT(quantize_row_s8_bf16_own_scale);
HWY_EXPORT(quantize_row_s4_bf16_own_scale);

namespace {

std::vector<QuantizeKernelSet> build_sets() {
  std::vector<QuantizeKernelSet> sets;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    const size_t index = dispatch_index(target);
    QuantizeKernelSet set;
    set.isa = hwy::TargetName(target);
    set.hwy_target = target;
    set.row_stats_f32 = HWY_DISPATCH_TABLE(row_stats_f32)[index];
    set.quantize_row_s8 = HWY_DISPATCH_TABLE(quantize_row_s8)[index];
    set.quantize_row_s4 = HWY_DISPATCH_TABLE(quantize_row_s4)[index];
    set.row_stats_bf16 = HWY_DISPATCH_TABLE(row_stats_bf16)[index];
    set.quantize_row_s8_bf16 = HWY_DISPATCH_TABLE(quantize_row_s8_bf16)[index];
    set.quantize_row_s4_bf16 = HWY_DISPATCH_TABLE(quantize_row_s4_bf16)[index];
    set.quantize_row_s8_bf16_own_scale = HWY_DISPATCH_TABLE(quantize_row_s8_bf16_own_scale)[index];
    set.quantize_row_s4_bf16_own_scale = HWY_DISPATCH_TABLE(quantize_row_s4_bf16_own_scale)[index];
    if (set.row_stats_f32 && set.quantize_row_s8 && set.quantize_row_s4 && set.row_stats_bf16 &&
        set.quantize_row_s8_bf16 && set.quantize_row_s4_bf16 && set.quantize_row_s8_bf16_own_scale &&
        set.quantize_row_s4_bf16_own_scale)
      sets.push_back(set);
  }
  if (sets.empty()) sets.push_back(reference_quantize_kernels());
  return sets;
}

const std::vector<QuantizeKernelSet>& sets() {
  static const std::vector<QuantizeKernelSet> s = build_sets();
  return s;
}

int64_t reference_row_stats(const float* row, size_t dim, RowStats* stats) {
  for (size_t j = 0; j < dim; ++j)
    if (!std::isfinite(row[j])) return static_cast<int64_t>(j);
  RowStats s;  // min_max's loop (quant layer), restated: kernels link only core
  s.min = s.max = dim ? row[0] : 0.0f;
  for (size_t j = 0; j < dim; ++j) {
    s.min = std::min(s.min, row[j]);
    s.max = std::max(s.max, row[j]);
    s.amax = std::max(s.amax, std::fabs(row[j]));
  }
  *stats = s;
  return -1;
}

void reference_quantize_s8(const float* row, size_t dim, float row_scale, int8_t* out) {
  for (size_t j = 0; j < dim; ++j) out[j] = quantize_weight(row[j], row_scale, 127);
}

void reference_quantize_s4(const float* row, size_t dim, float row_scale, uint8_t* out) {
  std::memset(out, 0, (dim + 1) / 2);
  for (size_t j = 0; j < dim; ++j) pack_int4(out, static_cast<int64_t>(j), quantize_weight(row[j], row_scale, 7));
}

// The BF16 forms: the float reference on the decoded row.
std::vector<float> decoded_bf16(const uint8_t* row, size_t dim) {
  std::vector<float> out(dim);
  for (size_t j = 0; j < dim; ++j) {
    const uint32_t bits = static_cast<uint32_t>(row[2 * j] | (row[2 * j + 1] << 8)) << 16;
    std::memcpy(&out[j], &bits, 4);
  }
  return out;
}

int64_t reference_row_stats_bf16(const uint8_t* row, size_t dim, RowStats* stats) {
  return reference_row_stats(decoded_bf16(row, dim).data(), dim, stats);
}

void reference_quantize_s8_bf16(const uint8_t* row, size_t dim, float row_scale, int8_t* out) {
  reference_quantize_s8(decoded_bf16(row, dim).data(), dim, row_scale, out);
}

void reference_quantize_s4_bf16(const uint8_t* row, size_t dim, float row_scale, uint8_t* out) {
  reference_quantize_s4(decoded_bf16(row, dim).data(), dim, row_scale, out);
}

}  // namespace

const QuantizeKernelSet& best_quantize_kernels() { return sets().front(); }
std::vector<QuantizeKernelSet> all_quantize_kernel_sets() { return sets(); }

const QuantizeKernelSet& reference_quantize_kernels() {
  static const QuantizeKernelSet set = [] {
    QuantizeKernelSet s;
    s.isa = "REFERENCE";
    s.row_stats_f32 = reference_row_stats;
    s.quantize_row_s8 = reference_quantize_s8;
    s.quantize_row_s4 = reference_quantize_s4;
    s.row_stats_bf16 = reference_row_stats_bf16;
    s.quantize_row_s8_bf16 = reference_quantize_s8_bf16;
    s.quantize_row_s4_bf16 = reference_quantize_s4_bf16;
    s.quantize_row_s8_bf16_own_scale = reference_quantize_s8_bf16;  // the clamp costs nothing to keep here
    s.quantize_row_s4_bf16_own_scale = reference_quantize_s4_bf16;
    return s;
  }();
  return set;
}

}  // namespace qemb
#endif  // HWY_ONCE
