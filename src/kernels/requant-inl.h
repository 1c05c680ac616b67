// Vector forms of the numeric.h formulas, one copy per Highway target.
// Each is bit-identical to its scalar counterpart; the comments say why.
//
// Included by kernels/gather_kernels.cc, kernels/quantize_kernels.cc and
// eval/metric_kernels.cc once per target (foreach_target.h), so
// it uses Highway's per-target include guard instead of #pragma once.
#if defined(QEMB_KERNELS_REQUANT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QEMB_KERNELS_REQUANT_INL_H_
#undef QEMB_KERNELS_REQUANT_INL_H_
#else
#define QEMB_KERNELS_REQUANT_INL_H_
#endif

#include <cstring>

#include "hwy/highway.h"
#include "qemb/numeric.h"

HWY_BEFORE_NAMESPACE();
namespace qemb {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// rne(): round half to even, like nearbyintf under the default rounding mode.
template <class DF>
HWY_INLINE hn::Vec<DF> RoundHalfEven(DF df, hn::Vec<DF> v) {
#if HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
  // Highway 1.0.3's emulated Round adds 0.5 and truncates, which rounds
  // 0.49999997f up to 1. Adding and removing 2^23 (same sign as v) rounds
  // exactly once, in the FPU's round-to-nearest-even mode.
  const auto mantissa_end = hn::Set(df, 8388608.0f);
  const auto large = hn::CopySignToAbs(mantissa_end, v);
  const auto rounded = hn::Sub(hn::Add(large, v), large);
  return hn::IfThenElse(hn::Lt(hn::Abs(v), mantissa_end), rounded, v);  // keeps NaN, huge
#else
  (void)df;
  return hn::Round(v);  // roundps / frintn: round to nearest even
#endif
}

// A constant broadcast once per kernel call. SVE vectors are sizeless and
// cannot be data members, so there the scalar is kept and broadcast where it
// is used (a loop-invariant dup the compiler hoists).
template <class D>
class Broadcast {
 public:
  Broadcast(D d, hn::TFromD<D> value)
#if HWY_HAVE_SCALABLE
      : value_(value) {
    (void)d;
  }
  HWY_INLINE hn::Vec<D> operator()() const { return hn::Set(D(), value_); }

 private:
  hn::TFromD<D> value_;
#else
      : value_(hn::Set(d, value)) {
  }
  HWY_INLINE hn::Vec<D> operator()() const { return value_; }

 private:
  hn::Vec<D> value_;
#endif
};

// The activation encoding.
template <class DF>
struct ActivationVec {
  ActivationVec(DF df, const ActivationEncoding& a)
      : scale(df, a.scale),
        inv_scale(df, inv(a.scale)),
        zero_point(df, static_cast<float>(a.zero_point)) {}
  Broadcast<DF> scale;
  Broadcast<DF> inv_scale;
  Broadcast<DF> zero_point;
};

// max(v, lo) where NaN yields lo, as clamp_to_int's `!(r >= lo)` test does.
template <class DF>
HWY_INLINE hn::Vec<DF> MaxOrLowerIfNaN(hn::Vec<DF> v, hn::Vec<DF> lo) {
#if HWY_ARCH_X86
  // maxps returns its second operand when either is NaN: one instruction.
  return hn::Max(v, lo);
#else
  return hn::IfThenElse(hn::Ge(v, lo), v, lo);
#endif
}

// q16(x) as an integer-valued float in [0, 65535].
// numeric.h computes clamp(clamp_to_int(rne(x * inv_sa), -2^20, 2^20) + zp,
// 0, 65535) in int32. Here r + zp is added in float and clamped in float:
//  - for |r + zp| < 2^24 the float sum is the exact integer;
//  - beyond the inner ±2^20 clamp (or for ±inf) both forms saturate to the
//    same end, since 0 <= zp <= 65535 and float rounding is monotone;
//  - NaN becomes 0, as clamp_to_int maps NaN to -2^20.
template <class DF>
HWY_INLINE hn::Vec<DF> Q16(DF df, hn::Vec<DF> x, const ActivationVec<DF>& a) {
  const auto r = RoundHalfEven(df, hn::Mul(x, a.inv_scale()));
  const auto v = hn::Add(r, a.zero_point());
  return hn::Min(MaxOrLowerIfNaN<DF>(v, hn::Zero(df)), hn::Set(df, 65535.0f));
}

// q16(x) as int32 lanes in [0, 65535], for kernels that then narrow with
// a saturating demotion: the same value as Q16, in fewer operations.
// t = x * inv_sa is clamped to [-2^22, 2^22] (NaN to -2^22, as Q16 maps it
// to 0); then t + 1.5 * 2^23 lies in [2^23, 2^24], where the float spacing is
// 1, so the FPU's addition rounds t to nearest even and the sum's bits minus
// those of 1.5 * 2^23 are rne(t) as an integer. Adding zp in int32 and
// saturating to [0, 65535] matches numeric.h: beyond its inner +-2^20 clamp
// both forms reach the same end, since 0 <= zp <= 65535.
template <class DF>
struct Q16IntVec {
  Q16IntVec(DF df, const ActivationEncoding& a)
      : inv_scale(df, inv(a.scale)),
        limit(df, 4194304.0f),
        neg_limit(df, -4194304.0f),
        magic(df, 12582912.0f),
        bias(hn::RebindToSigned<DF>(), a.zero_point - 0x4B400000) {}
  Broadcast<DF> inv_scale, limit, neg_limit, magic;
  Broadcast<hn::RebindToSigned<DF>> bias;
};

// rne(x * inv_sa) + zp as int32, not yet clamped to [0, 65535].
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> Q16Unclamped(DF df, hn::Vec<DF> x, const Q16IntVec<DF>& q) {
  const hn::RebindToSigned<DF> di;
  const auto t = hn::Min(MaxOrLowerIfNaN<DF>(hn::Mul(x, q.inv_scale()), q.neg_limit()), q.limit());
  (void)df;
  return hn::Add(hn::BitCast(di, hn::Add(t, q.magic())), q.bias());
}

// The bits of v + 2^23 for an integer-valued v in [0, 65535]: the sum is
// exact and its low 16 bits are v, so truncating gives the uint16 (cheaper
// than a float->int conversion with its out-of-range fix-up).
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> Q16Bits(DF df, hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du;
  return hn::BitCast(du, hn::Add(v, hn::Set(df, 8388608.0f)));
}

// dequantize_activation(): s_a * (float)(q16 - zp). v and zp are integers
// below 2^16, so the float subtraction is exact, as the int one is.
template <class DF>
HWY_INLINE hn::Vec<DF> DequantizeQ16(hn::Vec<DF> v, const ActivationVec<DF>& a) {
  return hn::Mul(a.scale(), hn::Sub(v, a.zero_point()));
}

// float_to_bf16() (qemb/half.h) in the low 16 bits of each lane: round to
// nearest even by integer addition; NaN stays a quiet NaN with its sign.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> BF16Bits(DF df, hn::Vec<DF> v) {
  (void)df;
  const hn::RebindToUnsigned<DF> du;
  const auto x = hn::BitCast(du, v);
  const auto high = hn::ShiftRight<16>(x);
  const auto rounding = hn::Add(hn::Set(du, 0x7FFFu), hn::And(high, hn::Set(du, 1u)));
  const auto rounded = hn::ShiftRight<16>(hn::Add(x, rounding));
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), hn::Or(high, hn::Set(du, 0x40u)), rounded);
}

// float_to_f16() (qemb/half.h) in the low 16 bits of each lane, on every
// target alike (Highway's emulated DemoteTo does not round subnormals as the
// scalar code does). Normal results round by integer addition (a carry may
// reach the exponent and up to infinity, which is right); subnormal ones by
// one float addition of 0.5, whose ulp is the binary16 subnormal step, so the
// FPU rounds to nearest even; NaN keeps its sign and top payload bits, quiet.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> F16Bits(DF df, hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const auto x = hn::BitCast(du, v);
  const auto abs = hn::And(x, hn::Set(du, 0x7FFFFFFFu));
  const auto abs_i = hn::BitCast(di, abs);  // < 2^31: signed compares are exact
  const auto subnormal = hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(df, abs), hn::Set(df, 0.5f))),
                                 hn::Set(du, 0x3F000000u));
  const auto odd = hn::And(hn::ShiftRight<13>(abs), hn::Set(du, 1u));
  // Rebias the exponent (-112 << 23, as a wrapping add) and round.
  const auto normal = hn::ShiftRight<13>(hn::Add(hn::Add(abs, hn::Set(du, 0xC8000FFFu)), odd));
  const auto nan = hn::Or(hn::Set(du, 0x7E00u), hn::And(hn::ShiftRight<13>(abs), hn::Set(du, 0x3FFu)));
  const auto is_nan = hn::RebindMask(du, hn::Gt(abs_i, hn::Set(di, 0x7F800000)));
  const auto huge = hn::RebindMask(du, hn::Gt(abs_i, hn::Set(di, 0x477FFFFF)));  // >= 2^16: infinity
  const auto tiny = hn::RebindMask(du, hn::Lt(abs_i, hn::Set(di, 0x38800000)));  // < 2^-14
  auto h = hn::IfThenElse(huge, hn::IfThenElse(is_nan, nan, hn::Set(du, 0x7C00u)), normal);
  h = hn::IfThenElse(tiny, subnormal, h);
  return hn::Or(h, hn::And(hn::ShiftRight<16>(x), hn::Set(du, 0x8000u)));
}

// The legacy pattern's per-tensor intermediate, before the final q16.
template <class DF>
struct LegacyVec {
  LegacyVec(DF df, float max_scale, int qmax)
      : max_scale(df, max_scale),
        inv_max_scale(df, inv(max_scale)),
        qmax(df, static_cast<float>(qmax)),
        neg_qmax(df, static_cast<float>(-qmax)) {}
  Broadcast<DF> max_scale;
  Broadcast<DF> inv_max_scale;
  Broadcast<DF> qmax;
  Broadcast<DF> neg_qmax;
};

// s_max * legacy_intermediate(): x is the dequantized weight s_r * q. The
// clamp runs in float on an integer-valued float with clamp_to_int's order
// (NaN -> -qmax), so qi is exactly the int8 the scalar code produces.
template <class DF>
HWY_INLINE hn::Vec<DF> LegacyRequantized(DF df, hn::Vec<DF> x, const LegacyVec<DF>& l) {
  (void)df;
  const auto r = RoundHalfEven(df, hn::Mul(x, l.inv_max_scale()));
  const auto qi = hn::Min(MaxOrLowerIfNaN<DF>(r, l.neg_qmax()), l.qmax());
  return hn::Mul(l.max_scale(), qi);
}

// quantize_weight for dim values: clamp(rne(w * inv(s)), -qmax, qmax). The
// product is clamped first (NaN -> -qmax, clamp_to_int's order); as qmax is an
// integer, rounding after the clamp gives the same value. Then t + 1.5 * 2^23
// lies where the float spacing is 1, so the FPU's addition rounds t to nearest
// even and the sum's bits minus those of 1.5 * 2^23 are rne(t) as an integer:
// no rounding instruction and no float->int conversion with its fix-up.
// A row is float32, or the little-endian bits of BF16 (uint16_t), which read
// as float32 exactly (a BF16 is the top half of one): the compiler quantizes a
// BF16 checkpoint's mapped rows without writing a float copy first.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadRowF32(DF df, const float* HWY_RESTRICT p) {
  return hn::LoadU(df, p);
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadRowF32(DF df, const uint16_t* HWY_RESTRICT p) {
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint16_t, DF> du16;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
}
HWY_INLINE float RowValueF32(const float* p) { return *p; }
HWY_INLINE float RowValueF32(const uint16_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <typename T>
HWY_INLINE void QuantizeToInt8(const T* HWY_RESTRICT row, size_t dim, float row_scale, int qmax,
                               int8_t* HWY_RESTRICT out) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t N = hn::Lanes(df);
  const float inv_scale = inv(row_scale);
  const auto vinv = hn::Set(df, inv_scale);
  const auto vhi = hn::Set(df, static_cast<float>(qmax));
  const auto vlo = hn::Set(df, static_cast<float>(-qmax));
  const auto magic = hn::Set(df, 12582912.0f);  // 1.5 * 2^23
  const auto magic_bits = hn::Set(di, 0x4B400000);
  size_t j = 0;
  for (; j + N <= dim; j += N) {
    const auto t = hn::Min(MaxOrLowerIfNaN<decltype(df)>(hn::Mul(LoadRowF32(df, row + j), vinv), vlo), vhi);
    const auto q = hn::Sub(hn::BitCast(di, hn::Add(t, magic)), magic_bits);
    hn::StoreU(hn::DemoteTo(d8, q), d8, out + j);
  }
  for (; j < dim; ++j) out[j] = quantize_weight(RowValueF32(row + j), row_scale, qmax);
}

}  // namespace HWY_NAMESPACE
}  // namespace qemb
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
