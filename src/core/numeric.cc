#include "qemb/numeric.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace qemb {

float weight_row_scale(const float* row, int64_t dim, int qmax) {
  float amax = 0.0f;
  for (int64_t j = 0; j < dim; ++j) amax = std::max(amax, std::fabs(row[j]));
  return std::max(amax / static_cast<float>(qmax), kEps);
}

ActivationEncoding activation_encoding(float observed_min, float observed_max, int bits) {
  float lo = std::min(0.0f, observed_min);
  float hi = std::max(0.0f, observed_max);
  ActivationEncoding a;
  a.bits = bits;
  const int32_t qmax = a.qmax();
  a.scale = std::max((hi - lo) / static_cast<float>(qmax), activation_eps(bits));
  int32_t zp = -clamp_to_int(rne(lo / a.scale), -(1 << 30), 1 << 30);
  a.zero_point = std::clamp(zp, 0, qmax);
  return a;
}

Result<ActivationEncoding> checked_activation_encoding(float observed_min, float observed_max, int bits) {
  const float lo = std::min(0.0f, observed_min), hi = std::max(0.0f, observed_max);
  const ActivationEncoding a = activation_encoding(lo, hi, bits);
  // Dequantized outputs reach s_a * (2^A - 1): that must stay finite too.
  if (!std::isfinite(hi - lo) || !std::isfinite(a.scale * static_cast<float>(a.qmax()))) {
    char text[400];
    std::snprintf(text, sizeof(text),
                  "the table's values span [%g, %g], wider than float32 can hold (hi - lo overflows past %g), so "
                  "no uint%d activation scale exists; rescale the table or check it for corrupt values",
                  static_cast<double>(lo), static_cast<double>(hi),
                  static_cast<double>(std::numeric_limits<float>::max()), bits);
    return make_error(ErrorCode::kInvalidArgument, text);
  }
  return a;
}

}  // namespace qemb
