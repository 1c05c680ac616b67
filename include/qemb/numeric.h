// The numeric contract (docs/numeric-contract.md): per-row symmetric weights,
// a per-tensor uint16 activation encoding, and the per-element results of both
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

struct ActivationEncoding {
  float scale = 1.0f;
  int32_t zero_point = 0;
  int32_t offset() const { return -zero_point; }  // backend convention
};
// From the observed range; lo/hi are widened to include 0.
ActivationEncoding activation_encoding(float observed_min, float observed_max);
// The same for a table's observed range, refusing a range too wide for float32:
// finite values beyond +-1.7e38 (BF16 near its maximum) make hi - lo overflow
// to Inf, and every output would be NaN.
Result<ActivationEncoding> checked_activation_encoding(float observed_min, float observed_max);

inline uint16_t q16(float x, const ActivationEncoding& a) {
  // (int)rne(x * inv(s_a)) + zp_a, clamped to [0, 65535]. The intermediate
  // clamp keeps the int conversion defined without changing any result.
  int32_t r = clamp_to_int(rne(x * inv(a.scale)), -(1 << 20), 1 << 20);
  int32_t v = r + a.zero_point;
  return static_cast<uint16_t>(v < 0 ? 0 : (v > 65535 ? 65535 : v));
}
inline float dequantize_activation(uint16_t q, const ActivationEncoding& a) {
  return a.scale * static_cast<float>(static_cast<int32_t>(q) - a.zero_point);
}

// Optimized pattern: q16(s_r * q).
inline uint16_t optimized_output(float row_scale, int q, const ActivationEncoding& a) {
  return q16(row_scale * static_cast<float>(q), a);
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
// Legacy pattern, both ops: q16(s_max * qi).
inline uint16_t legacy_output(float row_scale, int q, float max_scale, int qmax,
                              const ActivationEncoding& a) {
  return q16(max_scale * static_cast<float>(legacy_intermediate(row_scale, q, max_scale, qmax)), a);
}

}  // namespace qemb
