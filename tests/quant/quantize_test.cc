// The numeric contract (docs/numeric-contract.md), checked bit for bit against values
// derived by hand. Scales are powers of two wherever possible so that every
// product and quotient below is exact in float32 and the expected integers
// follow from plain arithmetic (shown in the comments).
#include "qemb/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace qemb {
namespace {

// The eps floor written out independently of kEps.
const float kEpsByHand = 0.0001f / 65535.0f;  // ~1.5259022e-09

// ---------------------------------------------------------------------------
// Scheme helpers.

TEST(SchemeTest, BitsQmaxAndNames) {
  EXPECT_EQ(weight_bits(Scheme::k16a8w), 8);
  EXPECT_EQ(weight_bits(Scheme::k16a4w), 4);
  EXPECT_EQ(weight_qmax(Scheme::k16a8w), 127);
  EXPECT_EQ(weight_qmax(Scheme::k16a4w), 7);
  EXPECT_STREQ(to_string(Scheme::k16a8w), "16a8w");
  EXPECT_STREQ(to_string(Scheme::k16a4w), "16a4w");
  ASSERT_TRUE(parse_scheme("16a8w").ok());
  EXPECT_EQ(parse_scheme("16a8w").value(), Scheme::k16a8w);
  ASSERT_TRUE(parse_scheme("16a4w").ok());
  EXPECT_EQ(parse_scheme("16a4w").value(), Scheme::k16a4w);
}

TEST(SchemeTest, UnknownSchemeIsInvalidArgumentNamingTheText) {
  Result<Scheme> r = parse_scheme("8a3w");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("'8a3w'"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("16a4w"), std::string::npos) << r.error().message;
}

TEST(EpsTest, MatchesTheDesignConstant) {
  EXPECT_EQ(kEps, kEpsByHand);
  EXPECT_NEAR(kEps, 1.5259022e-09, 1e-15);
}

TEST(RneTest, RoundsHalfToEven) {
  EXPECT_EQ(rne(0.5f), 0.0f);
  EXPECT_EQ(rne(1.5f), 2.0f);
  EXPECT_EQ(rne(2.5f), 2.0f);
  EXPECT_EQ(rne(3.5f), 4.0f);
  EXPECT_EQ(rne(-0.5f), -0.0f);
  EXPECT_EQ(rne(-1.5f), -2.0f);
  EXPECT_EQ(rne(-2.5f), -2.0f);
  EXPECT_EQ(rne(2.4999998f), 2.0f);
  EXPECT_EQ(rne(2.5000002f), 3.0f);
  EXPECT_EQ(inv(0.0625f), 16.0f);
}

// ---------------------------------------------------------------------------
// Row scale: s_r = max(amax_r / qmax, eps).

TEST(WeightRowScaleTest, EightBitPowerOfTwo) {
  // amax = 7.9375 = 127 * 2^-4  ->  s = 7.9375 / 127 = 0.0625 exactly.
  const float row[] = {1.0f, -7.9375f, 0.5f};
  EXPECT_EQ(weight_row_scale(row, 3, 127), 0.0625f);
}

TEST(WeightRowScaleTest, FourBitUsesAbsoluteValueOfTheNegativeMax) {
  // amax = |-3.5| = 3.5 = 7 * 0.5  ->  s = 0.5.
  const float row[] = {1.0f, -3.5f, 2.0f, 0.0f};
  EXPECT_EQ(weight_row_scale(row, 4, 7), 0.5f);
}

TEST(WeightRowScaleTest, NonPowerOfTwoIsTheFloat32Quotient) {
  // amax = 1 -> s = fl32(1 / 127) = 0.007874016 (not exact; the float32 quotient).
  const float row[] = {-0.25f, 1.0f};
  const float s = weight_row_scale(row, 2, 127);
  EXPECT_EQ(s, 1.0f / 127.0f);
  EXPECT_NEAR(s, 0.0078740157, 1e-9);
}

TEST(WeightRowScaleTest, AllZeroRowGetsTheEpsFloor) {
  const float zeros[] = {0.0f, -0.0f, 0.0f};
  EXPECT_EQ(weight_row_scale(zeros, 3, 127), kEpsByHand);
  EXPECT_EQ(weight_row_scale(zeros, 3, 7), kEpsByHand);
}

TEST(WeightRowScaleTest, TinyRowGetsTheEpsFloor) {
  // amax / qmax = 1e-10 / 7 ~ 1.4e-11 < eps ~ 1.5e-9.
  const float tiny[] = {1e-10f, -5e-11f};
  EXPECT_EQ(weight_row_scale(tiny, 2, 7), kEpsByHand);
  // Just above the floor: amax = 127 * 2^-28 -> s = 2^-28 ~ 3.7e-9 > eps.
  const float small[] = {127.0f * std::ldexp(1.0f, -28)};
  EXPECT_EQ(weight_row_scale(small, 1, 127), std::ldexp(1.0f, -28));
}

TEST(WeightRowScaleTest, EmptyRowGetsTheEpsFloor) {
  EXPECT_EQ(weight_row_scale(nullptr, 0, 127), kEpsByHand);
}

// ---------------------------------------------------------------------------
// Weight quantization: q = clamp(rne(w * inv(s)), -qmax, qmax).

TEST(QuantizeWeightTest, EightBitTiesRoundHalfToEven) {
  const float s = 0.0625f;  // inv(s) = 16, so w * 16 is exact below
  EXPECT_EQ(quantize_weight(7.9375f, s, 127), 127);    // 127.0
  EXPECT_EQ(quantize_weight(-7.9375f, s, 127), -127);  // -127.0
  EXPECT_EQ(quantize_weight(1.03125f, s, 127), 16);    // 16.5 -> 16 (even)
  EXPECT_EQ(quantize_weight(1.09375f, s, 127), 18);    // 17.5 -> 18 (even)
  EXPECT_EQ(quantize_weight(-1.03125f, s, 127), -16);  // -16.5 -> -16
  EXPECT_EQ(quantize_weight(-1.09375f, s, 127), -18);  // -17.5 -> -18
  EXPECT_EQ(quantize_weight(0.03125f, s, 127), 0);     // 0.5 -> 0
  EXPECT_EQ(quantize_weight(0.09375f, s, 127), 2);     // 1.5 -> 2
  EXPECT_EQ(quantize_weight(-0.09375f, s, 127), -2);   // -1.5 -> -2
  EXPECT_EQ(quantize_weight(0.1f, s, 127), 2);         // 1.6 -> 2
  EXPECT_EQ(quantize_weight(0.0f, s, 127), 0);
}

TEST(QuantizeWeightTest, FourBitTiesRoundHalfToEven) {
  const float s = 0.125f;  // inv(s) = 8
  EXPECT_EQ(quantize_weight(0.875f, s, 7), 7);     // 7.0
  EXPECT_EQ(quantize_weight(-0.875f, s, 7), -7);   // -7.0
  EXPECT_EQ(quantize_weight(0.0625f, s, 7), 0);    // 0.5 -> 0
  EXPECT_EQ(quantize_weight(0.1875f, s, 7), 2);    // 1.5 -> 2
  EXPECT_EQ(quantize_weight(0.3125f, s, 7), 2);    // 2.5 -> 2
  EXPECT_EQ(quantize_weight(-0.3125f, s, 7), -2);  // -2.5 -> -2
  EXPECT_EQ(quantize_weight(0.4375f, s, 7), 4);    // 3.5 -> 4
  EXPECT_EQ(quantize_weight(-0.4375f, s, 7), -4);  // -3.5 -> -4
  EXPECT_EQ(quantize_weight(0.8125f, s, 7), 6);    // 6.5 -> 6
}

TEST(QuantizeWeightTest, ClampsAtPlusMinusQmaxNeverMinusQmaxMinusOne) {
  // 100 * 16 = 1600 -> 127; -1600 -> -127 (never -128: the range is symmetric).
  EXPECT_EQ(quantize_weight(100.0f, 0.0625f, 127), 127);
  EXPECT_EQ(quantize_weight(-100.0f, 0.0625f, 127), -127);
  // 8.0625 * 16 = 129 -> 127; -128 -> -127.
  EXPECT_EQ(quantize_weight(8.0625f, 0.0625f, 127), 127);
  EXPECT_EQ(quantize_weight(-8.0f, 0.0625f, 127), -127);
  // 4-bit: 1.0 * 8 = 8 -> 7; -8 -> -7.
  EXPECT_EQ(quantize_weight(1.0f, 0.125f, 7), 7);
  EXPECT_EQ(quantize_weight(-1.0f, 0.125f, 7), -7);
  // 7.5 is a tie that rounds to 8 and is then clamped to 7.
  EXPECT_EQ(quantize_weight(0.9375f, 0.125f, 7), 7);
  EXPECT_EQ(quantize_weight(-0.9375f, 0.125f, 7), -7);
  // Huge values stay defined.
  EXPECT_EQ(quantize_weight(3e38f, 1e-30f, 127), 127);
  EXPECT_EQ(quantize_weight(-3e38f, 1e-30f, 127), -127);
}

TEST(QuantizeWeightTest, EpsScaledRowQuantizesToZeros) {
  // An all-zero row has s = eps; 0 * inv(eps) = 0.
  EXPECT_EQ(quantize_weight(0.0f, kEpsByHand, 127), 0);
  EXPECT_EQ(quantize_weight(0.0f, kEpsByHand, 7), 0);
}

// ---------------------------------------------------------------------------
// quantize_table / quantize_rows over whole tables.

TEST(QuantizeTableTest, EightBitTableByHand) {
  // Row 0: amax 7.9375 -> s 0.0625 (x16): 1.03125->16.5->16, -7.9375->-127, 0.09375->1.5->2
  // Row 1: all zero -> s eps, q 0
  // Row 2: amax 127 -> s 1 (x1): 2.5->2, -127->-127, 0.5->0
  const std::vector<float> w = {1.03125f, -7.9375f, 0.09375f,  //
                                0.0f,     0.0f,     0.0f,      //
                                2.5f,     -127.0f,  0.5f};
  PcqTable t = quantize_table(w.data(), 3, 3, Scheme::k16a8w);
  EXPECT_EQ(t.rows, 3);
  EXPECT_EQ(t.dim, 3);
  EXPECT_EQ(t.scheme, Scheme::k16a8w);
  EXPECT_EQ(t.scales, (std::vector<float>{0.0625f, kEpsByHand, 1.0f}));
  EXPECT_EQ(t.q, (std::vector<int8_t>{16, -127, 2, 0, 0, 0, 2, -127, 0}));
  EXPECT_EQ(t.max_scale(), 1.0f);
}

TEST(QuantizeTableTest, FourBitTableByHand) {
  // Row 0: amax 0.875 -> s 0.125 (x8): 0.3125->2.5->2, 0.4375->3.5->4, -0.875->-7, 0.0625->0.5->0
  // Row 1: amax 3.5 -> s 0.5 (x2): -1.25->-2.5->-2, 0.75->1.5->2, 3.5->7, -0.2->-0.4->0
  const std::vector<float> w = {0.3125f, 0.4375f, -0.875f, 0.0625f,  //
                                -1.25f,  0.75f,   3.5f,    -0.2f};
  PcqTable t = quantize_table(w.data(), 2, 4, Scheme::k16a4w);
  EXPECT_EQ(t.scales, (std::vector<float>{0.125f, 0.5f}));
  EXPECT_EQ(t.q, (std::vector<int8_t>{2, 4, -7, 0, -2, 2, 7, 0}));
  EXPECT_EQ(t.max_scale(), 0.5f);
}

TEST(QuantizeTableTest, QuantizeRowsTouchesOnlyItsRange) {
  const std::vector<float> w = {0.875f, -0.4375f,  // s 0.125: 7, -3.5 -> -4
                                3.5f, 1.25f};      // s 0.5: 7, 2.5 -> 2
  PcqTable t;
  t.rows = 2;
  t.dim = 2;
  t.scheme = Scheme::k16a4w;
  t.scales.assign(2, -1.0f);
  t.q.assign(4, 99);
  quantize_rows(w.data(), 1, 2, t);
  EXPECT_EQ(t.scales, (std::vector<float>{-1.0f, 0.5f}));
  EXPECT_EQ(t.q, (std::vector<int8_t>{99, 99, 7, 2}));
  quantize_rows(w.data(), 0, 1, t);
  EXPECT_EQ(t.scales, (std::vector<float>{0.125f, 0.5f}));
  EXPECT_EQ(t.q, (std::vector<int8_t>{7, -4, 7, 2}));
}

TEST(MinMaxTest, FindsExtremesAndHandlesEmpty) {
  const float v[] = {0.5f, -3.0f, 2.0f, 7.25f, -1.0f};
  float lo = 0, hi = 0;
  min_max(v, 5, lo, hi);
  EXPECT_EQ(lo, -3.0f);
  EXPECT_EQ(hi, 7.25f);
  min_max(v, 0, lo, hi);
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 0.0f);
}

// ---------------------------------------------------------------------------
// Activation encoding: lo = min(0, min), hi = max(0, max),
// s_a = max((hi - lo) / 65535, eps), zp_a = clamp(-(int)rne(lo / s_a), 0, 65535).
//
// 65535 / 256 = 255.99609375, so a range of exactly that width gives s_a = 2^-8.

TEST(ActivationEncodingTest, PowerOfTwoScaleAndZeroPoint) {
  // lo = -64, hi = 191.99609375: width 255.99609375 -> s = 2^-8; -64 * 256 = -16384 -> zp 16384.
  ActivationEncoding a = activation_encoding(-64.0f, 191.99609375f);
  EXPECT_EQ(a.scale, 0.00390625f);
  EXPECT_EQ(a.zero_point, 16384);
  EXPECT_EQ(a.offset(), -16384);  // backend convention offset = -zero_point
}

TEST(ActivationEncodingTest, ZeroPointTiesRoundHalfToEven) {
  // lo = -16384.5 / 256 = -64.001953125, hi = lo + 255.99609375 = 191.994140625.
  // lo / s = -16384.5 -> rne -16384 -> zp 16384 (half away from zero would say 16385).
  ActivationEncoding a = activation_encoding(-64.001953125f, 191.994140625f);
  EXPECT_EQ(a.scale, 0.00390625f);
  EXPECT_EQ(a.zero_point, 16384);
  // lo = -16385.5 / 256 = -64.005859375, hi = 191.990234375: -16385.5 -> -16386 -> zp 16386.
  ActivationEncoding b = activation_encoding(-64.005859375f, 191.990234375f);
  EXPECT_EQ(b.scale, 0.00390625f);
  EXPECT_EQ(b.zero_point, 16386);
}

TEST(ActivationEncodingTest, PositiveRangeIsWidenedToZero) {
  // Observed [1, 255.99609375] -> lo 0: s = 2^-8, zp = 0 (the clamp's lower end).
  ActivationEncoding a = activation_encoding(1.0f, 255.99609375f);
  EXPECT_EQ(a.scale, 0.00390625f);
  EXPECT_EQ(a.zero_point, 0);
  EXPECT_EQ(a.offset(), 0);
}

TEST(ActivationEncodingTest, NegativeRangeIsWidenedToZero) {
  // Observed [-255.99609375, -1] -> hi 0: s = 2^-8, lo / s = -65535 -> zp 65535 (upper end).
  ActivationEncoding a = activation_encoding(-255.99609375f, -1.0f);
  EXPECT_EQ(a.scale, 0.00390625f);
  EXPECT_EQ(a.zero_point, 65535);
  EXPECT_EQ(a.offset(), -65535);
}

TEST(ActivationEncodingTest, ZeroPointStaysInsideTheUint16Range) {
  // With finite input |lo / s_a| <= 65535 (plus float rounding), so the clamp
  // can only bind for degenerate input; it must still give a value in range.
  ActivationEncoding inf_lo = activation_encoding(-std::numeric_limits<float>::infinity(), 1.0f);
  EXPECT_GE(inf_lo.zero_point, 0);
  EXPECT_LE(inf_lo.zero_point, 65535);
  ActivationEncoding huge = activation_encoding(-3.0e38f, 0.0f);
  EXPECT_EQ(huge.zero_point, 65535);  // -3e38 / (3e38 / 65535) = -65535 (+- rounding)
}

TEST(ActivationEncodingTest, CheckedFormRefusesARangeTooWideForFloat32) {
  // +-2e38 are finite, but hi - lo = 4e38 is not: the scale was Inf and every
  // dequantized output NaN.
  auto wide = checked_activation_encoding(-2e38f, 2e38f);
  ASSERT_FALSE(wide.ok());
  EXPECT_EQ(wide.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(wide.error().message,
            "the table's values span [-2e+38, 2e+38], wider than float32 can hold (hi - lo overflows past "
            "3.40282e+38), so no uint16 activation scale exists; rescale the table or check it for corrupt values");
  // BF16 near its maximum, one side only: hi - lo is finite, but the largest
  // dequantized output s_a * 65535 is not.
  const float bf16_max = 3.3895314e38f;
  EXPECT_FALSE(checked_activation_encoding(-bf16_max, bf16_max).ok());
  // The widest ranges that work agree with the unchecked form.
  for (auto [lo, hi] : {std::pair{-3.0e38f, 0.0f}, std::pair{-1.5e38f, 1.5e38f}, std::pair{-1.0f, 3.0f}}) {
    auto a = checked_activation_encoding(lo, hi);
    ASSERT_TRUE(a.ok()) << lo << " " << hi;
    EXPECT_EQ(a->scale, activation_encoding(lo, hi).scale);
    EXPECT_EQ(a->zero_point, activation_encoding(lo, hi).zero_point);
    EXPECT_TRUE(std::isfinite(a->scale * 65535.0f));
  }
}

TEST(ActivationEncodingTest, AllZeroTableGetsTheEpsFloor) {
  ActivationEncoding a = activation_encoding(0.0f, 0.0f);
  EXPECT_EQ(a.scale, kEpsByHand);
  EXPECT_EQ(a.zero_point, 0);
  // A range narrower than 65535 * eps also floors: 1e-6 / 65535 ~ 1.5e-11 < eps.
  ActivationEncoding tiny = activation_encoding(0.0f, 1e-6f);
  EXPECT_EQ(tiny.scale, kEpsByHand);
  EXPECT_EQ(tiny.zero_point, 0);
}

TEST(ActivationEncodingTest, NonPowerOfTwoScaleIsTheFloat32Quotient) {
  // [-1, 3]: s = fl32(4 / 65535) ~ 6.1036e-5; -1 / s ~ -16383.75 -> rne -16384 -> zp 16384.
  ActivationEncoding a = activation_encoding(-1.0f, 3.0f);
  EXPECT_EQ(a.scale, 4.0f / 65535.0f);
  EXPECT_EQ(a.zero_point, 16384);
}

// ---------------------------------------------------------------------------
// q16(x) = clamp((int)rne(x * inv(s_a)) + zp_a, 0, 65535) and y = s_a * (q16 - zp_a).

ActivationEncoding Act256() {  // s_a = 2^-8, zp_a = 16384
  ActivationEncoding a;
  a.scale = 0.00390625f;
  a.zero_point = 16384;
  return a;
}

TEST(Q16Test, ValuesAndTies) {
  const ActivationEncoding a = Act256();
  EXPECT_EQ(q16(0.0f, a), 16384);              // 0 + 16384
  EXPECT_EQ(q16(1.0f, a), 16640);              // 256 + 16384
  EXPECT_EQ(q16(-1.0f, a), 16128);             // -256 + 16384
  EXPECT_EQ(q16(0.001953125f, a), 16384);      // 0.5 -> 0
  EXPECT_EQ(q16(0.005859375f, a), 16386);      // 1.5 -> 2
  EXPECT_EQ(q16(0.009765625f, a), 16386);      // 2.5 -> 2
  EXPECT_EQ(q16(-0.005859375f, a), 16382);     // -1.5 -> -2
  EXPECT_EQ(q16(-0.009765625f, a), 16382);     // -2.5 -> -2
  EXPECT_EQ(q16(0.0068359375f, a), 16386);     // 1.75 -> 2
}

TEST(Q16Test, ClampsAt0And65535) {
  const ActivationEncoding a = Act256();
  EXPECT_EQ(q16(191.99609375f, a), 65535);  // 49151 + 16384 = 65535 exactly
  EXPECT_EQ(q16(192.0f, a), 65535);         // 49152 + 16384 = 65536 -> 65535
  EXPECT_EQ(q16(1.0e30f, a), 65535);
  EXPECT_EQ(q16(-64.0f, a), 0);             // -16384 + 16384 = 0 exactly
  EXPECT_EQ(q16(-64.00390625f, a), 0);      // -16385 + 16384 = -1 -> 0
  EXPECT_EQ(q16(-1.0e30f, a), 0);
  EXPECT_EQ(q16(-64.001953125f, a), 0);     // -16384.5 -> -16384 -> 0 (no clamp needed)
  EXPECT_EQ(q16(-63.998046875f, a), 0);     // -16383.5 -> -16384 (even) -> 0
}

TEST(Q16Test, DequantizedOutput) {
  const ActivationEncoding a = Act256();
  EXPECT_EQ(dequantize_activation(16640, a), 1.0f);           // 2^-8 * 256
  EXPECT_EQ(dequantize_activation(16384, a), 0.0f);
  EXPECT_EQ(dequantize_activation(0, a), -64.0f);             // 2^-8 * -16384
  EXPECT_EQ(dequantize_activation(65535, a), 191.99609375f);  // 2^-8 * 49151
  EXPECT_EQ(dequantize_activation(16386, a), 0.0078125f);     // 2^-8 * 2
}

// ---------------------------------------------------------------------------
// optimized_output = q16(s_r * q).

TEST(OptimizedOutputTest, ByHand) {
  const ActivationEncoding a = Act256();
  EXPECT_EQ(optimized_output(0.0625f, 127, a), 18416);  // 7.9375 * 256 = 2032 + 16384
  EXPECT_EQ(optimized_output(0.125f, -7, a), 16160);    // -0.875 * 256 = -224 + 16384
  EXPECT_EQ(optimized_output(0.25f, 1, a), 16448);      // 64 + 16384
  EXPECT_EQ(optimized_output(kEpsByHand, 0, a), 16384);
  // s_r = 2^-9: s_r * q * 256 = q / 2, so odd q land on ties.
  EXPECT_EQ(optimized_output(0.001953125f, 1, a), 16384);   // 0.5 -> 0
  EXPECT_EQ(optimized_output(0.001953125f, 3, a), 16386);   // 1.5 -> 2
  EXPECT_EQ(optimized_output(0.001953125f, 5, a), 16386);   // 2.5 -> 2
  EXPECT_EQ(optimized_output(0.001953125f, -3, a), 16382);  // -1.5 -> -2
  EXPECT_EQ(optimized_output(0.001953125f, -5, a), 16382);  // -2.5 -> -2
  // Clamps: 2 * 127 * 256 = 65024 + 16384 > 65535; 1 * -127 * 256 = -32512 + 16384 < 0.
  EXPECT_EQ(optimized_output(2.0f, 127, a), 65535);
  EXPECT_EQ(optimized_output(1.0f, -127, a), 0);
}

// ---------------------------------------------------------------------------
// legacy_intermediate = clamp(rne((s_r * q) * inv(s_max)), -qmax, qmax),
// legacy_output = q16(s_max * qi).

TEST(LegacyTest, IntermediateEightBitByHand) {
  // s_r = 0.25, s_max = 1: qi = rne(q / 4).
  EXPECT_EQ(legacy_intermediate(0.25f, 6, 1.0f, 127), 2);     // 1.5 -> 2
  EXPECT_EQ(legacy_intermediate(0.25f, 10, 1.0f, 127), 2);    // 2.5 -> 2
  EXPECT_EQ(legacy_intermediate(0.25f, 14, 1.0f, 127), 4);    // 3.5 -> 4
  EXPECT_EQ(legacy_intermediate(0.25f, -6, 1.0f, 127), -2);   // -1.5 -> -2
  EXPECT_EQ(legacy_intermediate(0.25f, -10, 1.0f, 127), -2);  // -2.5 -> -2
  EXPECT_EQ(legacy_intermediate(0.25f, 2, 1.0f, 127), 0);     // 0.5 -> 0: the row's resolution is lost
  EXPECT_EQ(legacy_intermediate(0.25f, 1, 1.0f, 127), 0);     // 0.25 -> 0
  EXPECT_EQ(legacy_intermediate(0.25f, 127, 1.0f, 127), 32);  // 31.75 -> 32
  EXPECT_EQ(legacy_intermediate(1.0f, -127, 1.0f, 127), -127);  // the max-scale row is exact
}

TEST(LegacyTest, IntermediateFourBitByHand) {
  // s_r = 0.5, s_max = 1: qi = rne(q / 2).
  EXPECT_EQ(legacy_intermediate(0.5f, 5, 1.0f, 7), 2);    // 2.5 -> 2
  EXPECT_EQ(legacy_intermediate(0.5f, 7, 1.0f, 7), 4);    // 3.5 -> 4
  EXPECT_EQ(legacy_intermediate(0.5f, -7, 1.0f, 7), -4);  // -3.5 -> -4
  EXPECT_EQ(legacy_intermediate(0.5f, 1, 1.0f, 7), 0);    // 0.5 -> 0
  EXPECT_EQ(legacy_intermediate(0.5f, 3, 1.0f, 7), 2);    // 1.5 -> 2
}

TEST(LegacyTest, IntermediateClampsAtPlusMinusQmax) {
  // Only reachable when s_r > s_max (not for s_max = max_r s_r), but the formula clamps.
  EXPECT_EQ(legacy_intermediate(2.0f, 100, 1.0f, 127), 127);    // 200 -> 127
  EXPECT_EQ(legacy_intermediate(2.0f, -100, 1.0f, 127), -127);  // -200 -> -127
  EXPECT_EQ(legacy_intermediate(2.0f, 5, 1.0f, 7), 7);          // 10 -> 7
  EXPECT_EQ(legacy_intermediate(2.0f, -5, 1.0f, 7), -7);        // -10 -> -7
}

TEST(LegacyTest, OutputByHandAndAgainstOptimized) {
  const ActivationEncoding a = Act256();
  // qi = 2 -> 1.0 * 2 = 2.0 -> 512 + 16384. Optimized: 0.25 * 6 = 1.5 -> 384 + 16384.
  EXPECT_EQ(legacy_output(0.25f, 6, 1.0f, 127, a), 16896);
  EXPECT_EQ(optimized_output(0.25f, 6, a), 16768);
  // qi = 0 -> 16384. Optimized: 0.25 -> 64 + 16384.
  EXPECT_EQ(legacy_output(0.25f, 1, 1.0f, 127, a), 16384);
  EXPECT_EQ(optimized_output(0.25f, 1, a), 16448);
  // qi = 32 -> 32 * 256 = 8192 + 16384.
  EXPECT_EQ(legacy_output(0.25f, 127, 1.0f, 127, a), 24576);
  // 4-bit: qi = rne(-3.5) = -4 -> -4 * 256 = -1024 + 16384.
  EXPECT_EQ(legacy_output(0.5f, -7, 1.0f, 7, a), 15360);
  // The max-scale row is the same in both patterns: 1 * 100 * 256 = 25600 + 16384.
  EXPECT_EQ(legacy_output(1.0f, 100, 1.0f, 127, a), 41984);
  EXPECT_EQ(optimized_output(1.0f, 100, a), 41984);
  // Clamp through the output: s_max = 2, qi = 127 -> 254 * 256 = 65024 + 16384 -> 65535.
  EXPECT_EQ(legacy_output(2.0f, 127, 2.0f, 127, a), 65535);
  EXPECT_EQ(legacy_output(2.0f, -127, 2.0f, 127, a), 0);
}

}  // namespace
}  // namespace qemb
