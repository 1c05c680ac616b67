// The numeric contract (docs/numeric-contract.md): per-row symmetric weights,
// a per-tensor uint16 or uint8 activation encoding (or none: weight-only), and the per-element results of both
// lowerings. Every kernel, the reference interpreter and the compiler must
// reproduce these functions bit for bit, so they live in core.
#pragma once

#include <cmath>
#include <cstdint>

#include "qemb/status.h"

namespace qemb {

inline constexpr float kEps = 0.0001f / 65535.0f;
inline float rne(float x) { return std::nearbyintf(x); }
inline float inv(float s) { return 1.0f / s; }

// Clamped float->int that stays defined for any float (NaN maps to lo).
inline int32_t clamp_to_int(float r, int32_t lo, int32_t hi) {
  if (!(r >= static_cast<float>(lo))) return lo;
  if (r > static_cast<float>(hi)) return hi;
  return static_cast<int32_t>(r);
}

// Weight row scale: max(amax / qmax, eps).
float weight_row_scale(const float* row, int64_t dim, int qmax);
inline int8_t quantize_weight(float w, float row_scale, int qmax) {
  return static_cast<int8_t>(clamp_to_int(rne(w * inv(row_scale)), -qmax, qmax));
}

// The activation (the lookup's output) encoding: per-tensor affine, uint16
// (the default) or uint8 (docs/numeric-contract.md, "Schemes": the 16-bit
// rule with 2^A - 1 for 65535).
struct ActivationEncoding {
  float scale = 1.0f;
  int32_t zero_point = 0;
  // 16 | 8; 0 marks no activation step at all (a weight-only scheme's
  // output is the dequantized weight), where the quantizing functions below
  // are never called.
  int bits = 16;
  int32_t offset() const { return -zero_point; }  // backend convention
  int32_t qmax() const { return static_cast<int32_t>((1u << bits) - 1u); }  // 65535 | 255
};
// eps_a = 0.0001f / (2^A - 1): kEps for A = 16.
inline float activation_eps(int bits) {
  return bits == 16 ? kEps : 0.0001f / static_cast<float>((1u << bits) - 1u);
}
// From the observed range; lo/hi are widened to include 0.
ActivationEncoding activation_encoding(float observed_min, float observed_max, int bits = 16);
// The same for a table's observed range, refusing a range too wide for float32:
// finite values beyond +-1.7e38 (BF16 near its maximum) make hi - lo overflow
// to Inf, and every output would be NaN.
Result<ActivationEncoding> checked_activation_encoding(float observed_min, float observed_max, int bits = 16);

// q_A(x): (int)rne(x * inv(s_a)) + zp_a, clamped to [0, 2^A - 1]. The
// intermediate clamp keeps the int conversion defined without changing any
// result.
inline int32_t quantize_activation(float x, const ActivationEncoding& a) {
  int32_t r = clamp_to_int(rne(x * inv(a.scale)), -(1 << 20), 1 << 20);
  int32_t v = r + a.zero_point;
  const int32_t hi = a.qmax();
  return v < 0 ? 0 : (v > hi ? hi : v);
}
inline uint16_t q16(float x, const ActivationEncoding& a) {
  return static_cast<uint16_t>(quantize_activation(x, a));
}
inline float dequantize_activation(int32_t q, const ActivationEncoding& a) {
  return a.scale * static_cast<float>(q - a.zero_point);
}

// The dequantized weight s_r * q: a weight-only scheme's output y.
inline float dequantize_weight(float row_scale, int q) { return row_scale * static_cast<float>(q); }
// Optimized pattern: q_A(s_r * q).
inline int32_t optimized_output(float row_scale, int q, const ActivationEncoding& a) {
  return quantize_activation(dequantize_weight(row_scale, q), a);
}
// Legacy pattern, first op: requantize to the per-tensor max scale.
inline int8_t legacy_intermediate(float row_scale, int q, float max_scale, int qmax) {
  return static_cast<int8_t>(
      clamp_to_int(rne((row_scale * static_cast<float>(q)) * inv(max_scale)), -qmax, qmax));
}
// Legacy pattern: a row collapses when even its largest value (q = qmax,
// which every row whose scale is above kEps holds) requantizes to 0 at the
// per-tensor max scale, i.e. s_r < s_max / (2 qmax): every value of the row
// then reads back as the same constant.
inline bool legacy_row_collapses(float row_scale, float max_scale, int qmax) {
  return row_scale > kEps && legacy_intermediate(row_scale, qmax, max_scale, qmax) == 0;
}
// Legacy pattern, both ops: q_A(s_max * qi).
inline int32_t legacy_output(float row_scale, int q, float max_scale, int qmax,
                             const ActivationEncoding& a) {
  return quantize_activation(max_scale * static_cast<float>(legacy_intermediate(row_scale, q, max_scale, qmax)), a);
}

}  // namespace qemb
