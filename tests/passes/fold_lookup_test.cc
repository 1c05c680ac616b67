// The fold's lookup path (per-row tables of every stored value) against the
// generic per-element requantize_row, byte for byte: 4- and 8-bit weights,
// odd and even dims, a table large enough to fold on several threads, and a
// per-tensor weight encoding.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "passes/passes.h"
#include "core/reference_ops.h"

namespace qemb {
namespace {

// STATIC weight -> Convert -> NATIVE uint16 -> Gather -> APP_READ, by hand.
Graph ConvertGraph(int64_t rows, int64_t dim, int bits, bool per_axis, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor w;
  w.name = "w";
  w.kind = TensorKind::kStatic;
  w.dtype = DataType::kSFixedPoint8;
  w.shape = {rows, dim};
  std::vector<float> scales(static_cast<size_t>(rows));
  for (float& s : scales) s = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, static_cast<int>(rng() % 20) - 14);
  w.encoding = per_axis ? Encoding::per_axis(0, scales, std::vector<int32_t>(scales.size(), 0), bits)
                        : Encoding::per_tensor(scales[0], 0, bits);
  std::vector<uint8_t> bytes(row_storage_bytes(w.dtype, bits, dim) * static_cast<size_t>(rows));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  if (bits == 8)
    for (uint8_t& b : bytes) if (b == 0x80) b = 0x81;  // symmetric range: -128 is never stored
  if (bits == 4) {
    for (uint8_t& b : bytes) {  // no -8 nibbles; padding nibble of odd rows 0
      if ((b & 0x0F) == 0x08) b ^= 0x01;
      if ((b & 0xF0) == 0x80) b ^= 0x10;
    }
    if (dim % 2)
      for (int64_t r = 0; r < rows; ++r) bytes[static_cast<size_t>(r) * ((dim + 1) / 2) + dim / 2] &= 0x0F;
  }
  w.data = std::make_shared<OwnedBuffer>(std::move(bytes));
  Tensor ids;
  ids.name = "ids";
  ids.kind = TensorKind::kAppWrite;
  ids.dtype = DataType::kInt32;
  ids.shape = {4};
  Tensor conv;
  conv.name = "conv";
  conv.kind = TensorKind::kNative;
  conv.dtype = DataType::kUFixedPoint16;
  conv.shape = {rows, dim};
  conv.encoding = Encoding::per_tensor(0.0013f, -30000, 16);
  Tensor outt = conv;
  outt.name = "out";
  outt.kind = TensorKind::kAppRead;
  outt.shape = {4, dim};
  Graph g;
  g.tensors = {w, ids, conv, outt};
  Op c;
  c.type = OpType::kConvert;
  c.name = "conv";
  c.inputs = {"w"};
  c.outputs = {"conv"};
  Op gather;
  gather.type = OpType::kGather;
  gather.name = "out";
  gather.inputs = {"conv", "ids"};
  gather.outputs = {"out"};
  g.ops = {c, gather};
  return g;
}

TEST(FoldLookup, MatchesGenericRequantizeByteForByte) {
  struct Case { int64_t rows, dim; int bits; bool per_axis; };
  const Case cases[] = {{5, 1, 4, true}, {7, 33, 4, true}, {9, 16, 8, true}, {3, 7, 8, false},
                        {6, 5, 4, false}, {600, 2049, 4, true}, {300, 4095, 8, true}};
  for (const Case& k : cases) {
    Graph g = ConvertGraph(k.rows, k.dim, k.bits, k.per_axis, static_cast<uint32_t>(k.dim));
    const Tensor in = *g.find_tensor("w");
    const Tensor out = *g.find_tensor("conv");
    const size_t in_row = row_storage_bytes(in.dtype, k.bits, k.dim), out_row = static_cast<size_t>(k.dim) * 2;
    std::vector<uint8_t> want(out_row * static_cast<size_t>(k.rows));
    for (int64_t r = 0; r < k.rows; ++r)
      requantize_row(in.data->data() + static_cast<size_t>(r) * in_row, in, r,
                     want.data() + static_cast<size_t>(r) * out_row, out, r, k.dim);
    ASSERT_TRUE(fold_static_converts(g).ok());
    const Tensor* folded = g.find_tensor("conv");
    ASSERT_NE(folded, nullptr);
    EXPECT_EQ(folded->kind, TensorKind::kStatic);
    ASSERT_EQ(folded->data->size(), want.size());
    EXPECT_EQ(std::memcmp(folded->data->data(), want.data(), want.size()), 0)
        << k.rows << "x" << k.dim << " bits " << k.bits;
    EXPECT_EQ(g.find_tensor("w"), nullptr);
  }
}

}  // namespace
}  // namespace qemb
