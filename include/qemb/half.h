// IEEE binary16 (F16) and bfloat16 (BF16) <-> float32, bit-exact.
// float -> half rounds to nearest, ties to even (what PyTorch, NumPy and the
// safetensors producers do); NaN stays a quiet NaN with its sign, values too
// large for the format become infinity, tiny ones become subnormals or zero.
#pragma once

#include <cstdint>
#include <cstring>

namespace qemb {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return bits_to_float(sign | 0x7F800000u | (mantissa << 13));  // inf/NaN
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in float32.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return bits_to_float(sign | float_bits(magnitude));
  }
  return bits_to_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline uint16_t float_to_f16(float f) {
  const uint32_t x = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) {  // NaN: keep it quiet and keep the top payload bits
    return static_cast<uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));
  }
  if (abs >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 2^16 (and inf)
  if (abs < 0x38800000u) {
    // Below the smallest normal half (2^-14): the result is m * 2^-24.
    const uint32_t exponent = abs >> 23;
    if (exponent < 102) return sign;  // < 2^-25: rounds to zero
    const uint32_t mantissa = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14..24
    uint32_t m = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (m & 1u))) ++m;  // may carry into the smallest normal
    return static_cast<uint16_t>(sign | m);
  }
  // Normal: rebias the exponent; a rounding carry may ripple into the exponent
  // and up to infinity, which is the correct result.
  uint32_t h = ((abs >> 23) - 112u) << 10 | ((abs >> 13) & 0x3FFu);
  const uint32_t rest = abs & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

inline float bf16_to_float(uint16_t b) { return bits_to_float(static_cast<uint32_t>(b) << 16); }

inline uint16_t float_to_bf16(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) {  // NaN: truncating could make it inf; force quiet
    return static_cast<uint16_t>((x >> 16) | 0x0040u);
  }
  const uint32_t rounding = 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

}  // namespace qemb
