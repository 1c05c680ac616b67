// Reference op semantics (docs/numeric-contract.md, "Op semantics"): dequantize with the input's encoding,
// compute in float32, quantize into the output's encoding. Backend convention:
// real = scale * (q + offset), offset = -zero_point. Expected values by hand.
#include "core/reference_ops.h"

#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace qemb {
namespace {

TEST(QuantizedRangeTest, PerDtype) {
  int32_t lo = 0, hi = 0;
  quantized_range(DataType::kSFixedPoint8, 8, lo, hi);
  EXPECT_EQ(lo, -127);  // symmetric: -128 is never produced
  EXPECT_EQ(hi, 127);
  quantized_range(DataType::kSFixedPoint8, 4, lo, hi);
  EXPECT_EQ(lo, -7);
  EXPECT_EQ(hi, 7);
  quantized_range(DataType::kUFixedPoint16, 16, lo, hi);
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 65535);
  quantized_range(DataType::kInt32, 32, lo, hi);
  EXPECT_EQ(lo, INT32_MIN);
  EXPECT_EQ(hi, INT32_MAX);
}

TEST(DequantizeValueTest, PerTensorUsesBackendOffsetConvention) {
  // zero_point 3 -> offset -3: 0.5 * (7 + -3) = 2.
  const Encoding e = Encoding::per_tensor(0.5f, -3, 16);
  EXPECT_EQ(dequantize_value(7, e, 0), 2.0f);
  EXPECT_EQ(dequantize_value(3, e, 0), 0.0f);
  EXPECT_EQ(dequantize_value(0, e, 99), -1.5f);  // the row does not matter per-tensor
}

TEST(DequantizeValueTest, PerAxisUsesTheRowsScaleAndOffset) {
  const Encoding e = Encoding::per_axis(0, {0.5f, 0.25f}, {0, 2}, 8);
  EXPECT_EQ(dequantize_value(3, e, 0), 1.5f);   // 0.5 * (3 + 0)
  EXPECT_EQ(dequantize_value(3, e, 1), 1.25f);  // 0.25 * (3 + 2)
  EXPECT_EQ(dequantize_value(-7, e, 1), -1.25f);
}

TEST(QuantizeValueTest, PerTensorRoundsHalfToEvenAndClamps) {
  // scale 0.25, zero_point 100 (offset -100): q = rne(4x) + 100.
  const Encoding e = Encoding::per_tensor(0.25f, -100, 16);
  EXPECT_EQ(quantize_value(1.0f, e, 0, 0, 65535), 104);
  EXPECT_EQ(quantize_value(0.125f, e, 0, 0, 65535), 100);   // 0.5 -> 0
  EXPECT_EQ(quantize_value(0.375f, e, 0, 0, 65535), 102);   // 1.5 -> 2
  EXPECT_EQ(quantize_value(0.625f, e, 0, 0, 65535), 102);   // 2.5 -> 2
  EXPECT_EQ(quantize_value(-0.375f, e, 0, 0, 65535), 98);   // -1.5 -> -2
  EXPECT_EQ(quantize_value(-25.0f, e, 0, 0, 65535), 0);     // -100 + 100
  EXPECT_EQ(quantize_value(-25.25f, e, 0, 0, 65535), 0);    // -101 + 100 -> 0
  EXPECT_EQ(quantize_value(16358.75f, e, 0, 0, 65535), 65535);  // 65435 + 100
  EXPECT_EQ(quantize_value(16359.0f, e, 0, 0, 65535), 65535);   // 65436 + 100 -> 65535
  EXPECT_EQ(quantize_value(1e30f, e, 0, 0, 65535), 65535);
  EXPECT_EQ(quantize_value(-1e30f, e, 0, 0, 65535), 0);
}

TEST(QuantizeValueTest, PerAxisAndSymmetricRange) {
  const Encoding e = Encoding::per_axis(0, {0.5f, 0.25f}, {0, 2}, 4);
  EXPECT_EQ(quantize_value(1.25f, e, 1, -7, 7), 3);  // rne(5) - 2
  EXPECT_EQ(quantize_value(1.25f, e, 0, -7, 7), 2);  // rne(2.5) = 2
  EXPECT_EQ(quantize_value(10.0f, e, 0, -7, 7), 7);  // 20 -> 7
  EXPECT_EQ(quantize_value(-10.0f, e, 0, -7, 7), -7);
}

TEST(LoadStoreTest, EightBit) {
  uint8_t row[3] = {0x81, 0x7F, 0x00};
  EXPECT_EQ(load_quantized(row, DataType::kSFixedPoint8, 8, 0), -127);
  EXPECT_EQ(load_quantized(row, DataType::kSFixedPoint8, 8, 1), 127);
  store_quantized(row, DataType::kSFixedPoint8, 8, 2, -5);
  EXPECT_EQ(row[2], 0xFB);
  EXPECT_EQ(load_quantized(row, DataType::kSFixedPoint8, 8, 2), -5);
}

TEST(LoadStoreTest, FourBitPacked) {
  uint8_t row[2] = {0, 0};
  store_quantized(row, DataType::kSFixedPoint8, 4, 0, 7);
  store_quantized(row, DataType::kSFixedPoint8, 4, 1, -7);
  store_quantized(row, DataType::kSFixedPoint8, 4, 2, -1);
  EXPECT_EQ(row[0], 0x97);  // column 0 low (7), column 1 high (-7 -> 0x9)
  EXPECT_EQ(row[1], 0x0F);  // column 2 low (-1 -> 0xF)
  EXPECT_EQ(load_quantized(row, DataType::kSFixedPoint8, 4, 0), 7);
  EXPECT_EQ(load_quantized(row, DataType::kSFixedPoint8, 4, 1), -7);
  EXPECT_EQ(load_quantized(row, DataType::kSFixedPoint8, 4, 2), -1);
}

TEST(LoadStoreTest, Uint16AndInt32AreLittleEndian) {
  uint8_t row[8] = {};
  store_quantized(row, DataType::kUFixedPoint16, 16, 1, 0x1234);
  EXPECT_EQ(row[2], 0x34);
  EXPECT_EQ(row[3], 0x12);
  EXPECT_EQ(load_quantized(row, DataType::kUFixedPoint16, 16, 1), 0x1234);
  store_quantized(row, DataType::kUFixedPoint16, 16, 0, 65535);
  EXPECT_EQ(load_quantized(row, DataType::kUFixedPoint16, 16, 0), 65535);  // not -1

  uint8_t ints[4] = {};
  store_quantized(ints, DataType::kInt32, 32, 0, -2);
  EXPECT_EQ(ints[0], 0xFE);
  EXPECT_EQ(ints[3], 0xFF);
  EXPECT_EQ(load_quantized(ints, DataType::kInt32, 32, 0), -2);
}

Tensor MakeTensor(DataType dtype, Encoding e) {
  return Tensor{std::string("t"), TensorKind::kNative, dtype, {}, std::move(e), nullptr};
}

TEST(RequantizeRowTest, PerAxisFourBitToUint16IsTheOptimizedConvert) {
  // Row 1 has scale 0.5; q = {7, -3, 0} -> real {3.5, -1.5, 0}.
  // Output s = 2^-8, zp 16384: {896, -384, 0} + 16384.
  const Tensor in = MakeTensor(DataType::kSFixedPoint8, Encoding::per_axis(0, {0.125f, 0.5f}, {0, 0}, 4));
  const Tensor out = MakeTensor(DataType::kUFixedPoint16, Encoding::per_tensor(0.00390625f, -16384, 16));
  uint8_t src[2] = {0, 0};
  pack_int4(src, 0, 7);
  pack_int4(src, 1, -3);
  pack_int4(src, 2, 0);
  uint8_t dst[6] = {};
  requantize_row(src, in, 1, dst, out, 0, 3);
  EXPECT_EQ(load_quantized(dst, DataType::kUFixedPoint16, 16, 0), 17280);
  EXPECT_EQ(load_quantized(dst, DataType::kUFixedPoint16, 16, 1), 16000);
  EXPECT_EQ(load_quantized(dst, DataType::kUFixedPoint16, 16, 2), 16384);
  // Same bytes read as row 0 (scale 0.125): {0.875, -0.375, 0} -> {224, -96, 0} + 16384.
  requantize_row(src, in, 0, dst, out, 0, 3);
  EXPECT_EQ(load_quantized(dst, DataType::kUFixedPoint16, 16, 0), 16608);
  EXPECT_EQ(load_quantized(dst, DataType::kUFixedPoint16, 16, 1), 16288);
  EXPECT_EQ(load_quantized(dst, DataType::kUFixedPoint16, 16, 2), 16384);
}

TEST(RequantizeRowTest, PerAxisEightBitToPerTensorIsTheLegacyGather) {
  // Row scale 0.25, per-tensor s_max 1: qi = rne(q / 4), clamped to [-127, 127].
  const Tensor in = MakeTensor(DataType::kSFixedPoint8, Encoding::per_axis(0, {1.0f, 0.25f}, {0, 0}, 8));
  const Tensor out = MakeTensor(DataType::kSFixedPoint8, Encoding::per_tensor(1.0f, 0, 8));
  const int8_t src[5] = {6, 10, 127, -6, 1};
  int8_t dst[5] = {};
  requantize_row(reinterpret_cast<const uint8_t*>(src), in, 1, reinterpret_cast<uint8_t*>(dst), out, 0, 5);
  EXPECT_EQ(dst[0], 2);    // 1.5 -> 2
  EXPECT_EQ(dst[1], 2);    // 2.5 -> 2
  EXPECT_EQ(dst[2], 32);   // 31.75 -> 32
  EXPECT_EQ(dst[3], -2);   // -1.5 -> -2
  EXPECT_EQ(dst[4], 0);    // 0.25 -> 0
}

TEST(RequantizeRowTest, SameTypeAndEncodingCopiesBytes) {
  const Tensor t = MakeTensor(DataType::kUFixedPoint16, Encoding::per_tensor(0.5f, -7, 16));
  const uint8_t src[6] = {1, 2, 3, 4, 0xFF, 0xFF};
  uint8_t dst[6] = {};
  requantize_row(src, t, 0, dst, t, 5, 3);
  EXPECT_EQ(std::memcmp(src, dst, 6), 0);
}

TEST(RequantizeRowTest, FloatInAndOut) {
  const Tensor f = MakeTensor(DataType::kFloat32, Encoding{});
  const Tensor u = MakeTensor(DataType::kUFixedPoint16, Encoding::per_tensor(0.00390625f, -16384, 16));
  const float src[3] = {1.0f, -64.00390625f, 0.005859375f};  // 256, -16385, 1.5 -> 2
  uint8_t q[6] = {};
  requantize_row(reinterpret_cast<const uint8_t*>(src), f, 0, q, u, 0, 3);
  EXPECT_EQ(load_quantized(q, DataType::kUFixedPoint16, 16, 0), 16640);
  EXPECT_EQ(load_quantized(q, DataType::kUFixedPoint16, 16, 1), 0);  // clamped
  EXPECT_EQ(load_quantized(q, DataType::kUFixedPoint16, 16, 2), 16386);
  float back[3] = {};
  requantize_row(q, u, 0, reinterpret_cast<uint8_t*>(back), f, 0, 3);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], -64.0f);
  EXPECT_EQ(back[2], 0.0078125f);
}

}  // namespace
}  // namespace qemb
