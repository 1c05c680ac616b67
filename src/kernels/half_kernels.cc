// Half-precision decoders (kernels/half_kernels.h) for every Highway target this
// build compiles. Highway recompiles this file once per target
// (foreach_target.h); the HWY_ONCE pass exports them and builds the sets.
#include <cstring>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/half_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "qemb/half.h"
#include "kernels/half_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace qemb {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// BF16 is the top half of a float32: widen and shift.
void decode_bf16(const uint8_t* src, size_t count, float* out) {
  const hn::ScalableTag<uint32_t> du32;
  const hn::Rebind<uint16_t, decltype(du32)> du16;
  const hn::RebindToFloat<decltype(du32)> df;
  const size_t N = hn::Lanes(du32);
  const uint16_t* in = reinterpret_cast<const uint16_t*>(src);  // loaded with LoadU only
  size_t i = 0;
  for (; i + N <= count; i += N) {
    const auto wide = hn::PromoteTo(du32, hn::LoadU(du16, in + i));
    hn::StoreU(hn::BitCast(df, hn::ShiftLeft<16>(wide)), df, out + i);
  }
  for (; i < count; ++i) {
    const uint32_t bits = static_cast<uint32_t>(src[2 * i] | (src[2 * i + 1] << 8)) << 16;
    std::memcpy(out + i, &bits, 4);
  }
}

// F16 with integer ops and one exact multiply, on every target alike
// (Highway 1.0.3's emulated PromoteTo turns F16 infinity into 65536): the
// magnitude bits moved up into a float's place, scaled by 2^112, give every
// normal and subnormal half exactly; exponent 31 becomes infinity or NaN.
void decode_f16(const uint8_t* src, size_t count, float* out) {
  const hn::ScalableTag<uint32_t> du32;
  const hn::Rebind<uint16_t, decltype(du32)> du16;
  const hn::RebindToFloat<decltype(du32)> df;
  const size_t N = hn::Lanes(du32);
  const uint16_t* in = reinterpret_cast<const uint16_t*>(src);  // loaded with LoadU only
  const auto magnitude_mask = hn::Set(du32, 0x7FFFu), exponent_mask = hn::Set(du32, 0x7C00u);
  const auto scale = hn::Set(df, 0x1p112f);
  const auto infinity = hn::Set(du32, 0x7F800000u);
  size_t i = 0;
  for (; i + N <= count; i += N) {
    const auto h = hn::PromoteTo(du32, hn::LoadU(du16, in + i));
    const auto magnitude = hn::And(h, magnitude_mask);
    const auto shifted = hn::ShiftLeft<13>(magnitude);
    const auto finite = hn::BitCast(du32, hn::Mul(hn::BitCast(df, shifted), scale));
    const auto special = hn::Or(infinity, shifted);  // exponent 31: inf (mantissa 0) or NaN
    const auto value = hn::IfThenElse(hn::Eq(hn::And(h, exponent_mask), exponent_mask), special, finite);
    const auto sign = hn::ShiftLeft<16>(hn::AndNot(magnitude_mask, h));
    hn::StoreU(hn::BitCast(df, hn::Or(value, sign)), df, out + i);
  }
  for (; i < count; ++i) out[i] = f16_to_float(static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8)));
}

}  // namespace HWY_NAMESPACE
}  // namespace qemb
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/dispatch.h"

namespace qemb {

HWY_EXPORT(decode_bf16);
HWY_EXPORT(decode_f16);

namespace {

std::vector<HalfKernelSet> build_sets() {
  std::vector<HalfKernelSet> sets;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    const size_t index = dispatch_index(target);
    HalfKernelSet set;
    set.isa = hwy::TargetName(target);
    set.hwy_target = target;
    set.decode_bf16 = HWY_DISPATCH_TABLE(decode_bf16)[index];
    set.decode_f16 = HWY_DISPATCH_TABLE(decode_f16)[index];
    if (set.decode_bf16 && set.decode_f16) sets.push_back(set);
  }
  if (sets.empty()) sets.push_back(reference_half_kernels());
  return sets;
}

const std::vector<HalfKernelSet>& sets() {
  static const std::vector<HalfKernelSet> s = build_sets();
  return s;
}

void reference_decode_bf16(const uint8_t* src, size_t count, float* out) {
  for (size_t i = 0; i < count; ++i) out[i] = bf16_to_float(static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8)));
}

void reference_decode_f16(const uint8_t* src, size_t count, float* out) {
  for (size_t i = 0; i < count; ++i) out[i] = f16_to_float(static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8)));
}

}  // namespace

const HalfKernelSet& best_half_kernels() { return sets().front(); }
std::vector<HalfKernelSet> all_half_kernel_sets() { return sets(); }

const HalfKernelSet& reference_half_kernels() {
  static const HalfKernelSet set = [] {
    HalfKernelSet s;
    s.isa = "REFERENCE";
    s.decode_bf16 = reference_decode_bf16;
    s.decode_f16 = reference_decode_f16;
    return s;
  }();
  return set;
}

}  // namespace qemb
#endif  // HWY_ONCE
