#include "qemb/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace qemb {
namespace {

float pow2(int e) { return std::ldexp(1.0f, e); }

TEST(F16, ConvertsExactValues) {
  EXPECT_EQ(float_to_f16(0.0f), 0x0000);
  EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(float_to_f16(-2.0f), 0xC000);
  EXPECT_EQ(float_to_f16(0.5f), 0x3800);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7BFF);             // largest finite half
  EXPECT_EQ(float_to_f16(pow2(-14)), 0x0400);            // smallest normal
  EXPECT_EQ(float_to_f16(pow2(-24)), 0x0001);            // smallest subnormal
  EXPECT_EQ(float_to_f16(1023.0f * pow2(-24)), 0x03FF);  // largest subnormal
}

TEST(F16, RoundsToNearestEven) {
  // Halfway between 1 and 1 + 2^-10: ties go to the even mantissa.
  EXPECT_EQ(float_to_f16(1.0f + pow2(-11)), 0x3C00);
  EXPECT_EQ(float_to_f16(1.0f + 3 * pow2(-11)), 0x3C02);
  EXPECT_EQ(float_to_f16(1.0f + pow2(-11) + pow2(-20)), 0x3C01);  // just above the tie
  EXPECT_EQ(float_to_f16(1.0f + pow2(-11) - pow2(-23)), 0x3C00);  // just below
  // 0.1f -> 0x2E66 (0.0999755859375).
  EXPECT_EQ(float_to_f16(0.1f), 0x2E66);
}

TEST(F16, SubnormalsRoundToNearestEven) {
  EXPECT_EQ(float_to_f16(pow2(-25)), 0x0000);  // tie between 0 and the smallest subnormal
  EXPECT_EQ(float_to_f16(std::nextafter(pow2(-25), 1.0f)), 0x0001);
  EXPECT_EQ(float_to_f16(3 * pow2(-25)), 0x0002);        // tie between 1 and 2 -> 2
  EXPECT_EQ(float_to_f16(5 * pow2(-25)), 0x0002);        // tie between 2 and 3 -> 2
  EXPECT_EQ(float_to_f16(1023.5f * pow2(-24)), 0x0400);  // carries into the smallest normal
  EXPECT_EQ(float_to_f16(pow2(-30)), 0x0000);
  EXPECT_EQ(float_to_f16(-pow2(-24)), 0x8001);
  EXPECT_EQ(float_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(F16, OverflowAndSpecials) {
  EXPECT_EQ(float_to_f16(65519.996f), 0x7BFF);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7C00);  // tie above the largest finite -> inf
  EXPECT_EQ(float_to_f16(1e10f), 0x7C00);
  EXPECT_EQ(float_to_f16(-1e10f), 0xFC00);
  EXPECT_EQ(float_to_f16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(float_to_f16(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_EQ(float_to_f16(bits_to_float(0x7FC00000u)), 0x7E00);
  EXPECT_EQ(float_to_f16(bits_to_float(0xFFC00000u)), 0xFE00);
  // A signalling NaN whose payload lives only in the low bits stays a NaN.
  const uint16_t h = float_to_f16(bits_to_float(0x7F800001u));
  EXPECT_EQ(h & 0x7C00, 0x7C00);
  EXPECT_NE(h & 0x03FF, 0);
}

TEST(F16, ToFloat) {
  EXPECT_EQ(f16_to_float(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_float(0x0001), pow2(-24));
  EXPECT_EQ(f16_to_float(0x03FF), 1023.0f * pow2(-24));
  EXPECT_EQ(f16_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_float(0xC000), -2.0f);
  EXPECT_TRUE(std::signbit(f16_to_float(0x8000)));
  EXPECT_EQ(f16_to_float(0x8000), 0.0f);
  EXPECT_EQ(f16_to_float(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_to_float(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_float(0x7E00)));
  EXPECT_TRUE(std::isnan(f16_to_float(0x7C01)));
  EXPECT_EQ(f16_to_float(0x2E66), 0.0999755859375f);
}

TEST(F16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const float f = f16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_EQ(float_to_f16(f) & 0x7FFF, (h & 0x7FFF) | 0x0200) << std::hex << h;  // quieted
      continue;
    }
    ASSERT_EQ(float_to_f16(f), h) << std::hex << h;
  }
}

#if defined(__aarch64__)
using CompilerHalf = __fp16;  // GCC 12 has no _Float16 in C++ on Arm; this is IEEE half there
#define QEMB_HAVE_COMPILER_HALF 1
#elif defined(__FLT16_MAX__)
using CompilerHalf = _Float16;
#define QEMB_HAVE_COMPILER_HALF 1
#endif

#if QEMB_HAVE_COMPILER_HALF
// The compiler's own float -> half conversion rounds to nearest even.
TEST(F16, MatchesCompilerConversionOnSampledFloats) {
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 997) {
    const float f = bits_to_float(static_cast<uint32_t>(bits));
    if (std::isnan(f)) continue;
    const CompilerHalf expected = static_cast<CompilerHalf>(f);
    uint16_t expected_bits;
    std::memcpy(&expected_bits, &expected, sizeof(expected_bits));
    ASSERT_EQ(float_to_f16(f), expected_bits) << std::hex << bits;
  }
}
#endif

TEST(BF16, ConvertsAndRoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(-2.0f), 0xC000);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16(1.0f + pow2(-8)), 0x3F80);      // tie -> even
  EXPECT_EQ(float_to_bf16(1.0f + 3 * pow2(-8)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(float_to_bf16(1.0f + pow2(-8) + pow2(-20)), 0x3F81);
  EXPECT_EQ(float_to_bf16(0.1f), 0x3DCD);  // 0x3DCCCCCD rounds up
  EXPECT_EQ(float_to_bf16(bits_to_float(0x7F7F7FFFu)), 0x7F7F);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds to inf
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
}

TEST(BF16, SubnormalsAndNaN) {
  EXPECT_EQ(float_to_bf16(bits_to_float(0x00000001u)), 0x0000);
  EXPECT_EQ(float_to_bf16(bits_to_float(0x00008000u)), 0x0000);  // tie -> even 0
  EXPECT_EQ(float_to_bf16(bits_to_float(0x00018000u)), 0x0002);  // tie -> even 2
  EXPECT_EQ(float_to_bf16(bits_to_float(0x00010001u)), 0x0001);
  EXPECT_EQ(float_to_bf16(bits_to_float(0x7FC00000u)), 0x7FC0);
  EXPECT_EQ(float_to_bf16(bits_to_float(0xFFC00000u)), 0xFFC0);
  // Truncating 0x7F800001 would give inf; it must stay NaN.
  EXPECT_EQ(float_to_bf16(bits_to_float(0x7F800001u)), 0x7FC0);
  EXPECT_EQ(float_to_bf16(bits_to_float(0x7FFFFFFFu)), 0x7FFF);
}

TEST(BF16, ToFloatAndEveryValueRoundTrips) {
  EXPECT_EQ(bf16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_float(0x0001), bits_to_float(0x00010000u));
  EXPECT_TRUE(std::isnan(bf16_to_float(0x7FC0)));
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const float f = bf16_to_float(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_EQ(float_to_bf16(f), b | 0x0040) << std::hex << b;
      continue;
    }
    ASSERT_EQ(float_to_bf16(f), b) << std::hex << b;
  }
}

}  // namespace
}  // namespace qemb
