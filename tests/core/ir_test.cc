// The graph IR: storage layout (incl. packed 4-bit nibbles), names, structural
// checks and the dump.
#include "core/ir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace qemb {
namespace {

using ::testing::HasSubstr;

Tensor MakeTensor(const std::string& name, TensorKind kind, DataType dtype,
                  std::vector<int64_t> shape, int bitwidth = 0) {
  Tensor t;
  t.name = name;
  t.kind = kind;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.encoding.bitwidth = bitwidth;
  return t;
}

std::shared_ptr<const Buffer> Bytes(size_t n) {
  return std::make_shared<OwnedBuffer>(std::vector<uint8_t>(n, 0));
}

// ---------------------------------------------------------------------------
// Storage sizes.

TEST(StorageBytesTest, RowStorageBytesPerDtype) {
  EXPECT_EQ(row_storage_bytes(DataType::kSFixedPoint8, 8, 5), 5u);
  EXPECT_EQ(row_storage_bytes(DataType::kSFixedPoint8, 4, 5), 3u);  // ceil(5 / 2)
  EXPECT_EQ(row_storage_bytes(DataType::kSFixedPoint8, 4, 4), 2u);
  EXPECT_EQ(row_storage_bytes(DataType::kSFixedPoint8, 4, 1), 1u);
  EXPECT_EQ(row_storage_bytes(DataType::kSFixedPoint8, 4, 0), 0u);
  EXPECT_EQ(row_storage_bytes(DataType::kUFixedPoint16, 16, 5), 10u);
  EXPECT_EQ(row_storage_bytes(DataType::kFloat32, 32, 5), 20u);
  EXPECT_EQ(row_storage_bytes(DataType::kInt32, 32, 5), 20u);
}

TEST(StorageFormatTest, TheTableHoldsExactlyTheFormatsQembStores) {
  struct Row {
    DataType dtype;
    int bitwidth, bits, block;
    int32_t qmin, qmax;
    const char* name;
  };
  for (const Row& r : {Row{DataType::kSFixedPoint8, 2, 2, 4, -1, 1, "int2"},
                       Row{DataType::kSFixedPoint8, 4, 4, 2, -7, 7, "int4"},
                       Row{DataType::kUFixedPoint8, 0, 8, 1, 0, 255, "uint8"},
                       Row{DataType::kSFixedPoint8, 8, 8, 1, -127, 127, "int8"},
                       Row{DataType::kSFixedPoint8, 0, 8, 1, -127, 127, "int8"},
                       Row{DataType::kUFixedPoint16, 16, 16, 1, 0, 65535, "uint16"},
                       Row{DataType::kUFixedPoint16, 0, 16, 1, 0, 65535, "uint16"},
                       Row{DataType::kFloat32, 0, 32, 1, INT32_MIN, INT32_MAX, "float32"},
                       Row{DataType::kInt32, 32, 32, 1, INT32_MIN, INT32_MAX, "int32"}}) {
    const StorageFormat* f = find_storage_format(r.dtype, r.bitwidth);
    ASSERT_NE(f, nullptr) << to_string(r.dtype) << " " << r.bitwidth;
    EXPECT_EQ(f->bits, r.bits);
    EXPECT_EQ(f->block, r.block);
    EXPECT_EQ(f->qmin, r.qmin);
    EXPECT_EQ(f->qmax, r.qmax);
    EXPECT_STREQ(f->name, r.name);
  }
  for (int bw : {1, 3, 5, 6, 7, 9, 16, 32}) EXPECT_EQ(find_storage_format(DataType::kSFixedPoint8, bw), nullptr) << bw;
  EXPECT_EQ(find_storage_format(DataType::kUFixedPoint8, 16), nullptr);
  EXPECT_EQ(find_storage_format(DataType::kUFixedPoint16, 8), nullptr);
  EXPECT_EQ(find_storage_format(DataType::kFloat32, 16), nullptr);
  EXPECT_EQ(storage_widths(DataType::kSFixedPoint8), "2, 4 or 8");
  EXPECT_EQ(storage_widths(DataType::kUFixedPoint16), "16");
  EXPECT_EQ(row_storage_bytes(DataType::kSFixedPoint8, 3, 5), 0u);  // not a format: no bytes, not 8-bit ones
  EXPECT_EQ(row_storage_bytes(DataType::kSFixedPoint8, 2, 5), 2u);  // four 2-bit values a byte
}

TEST(StorageFormatTest, LoadAndStoreRoundTripEveryValue) {
  for (const auto& [dtype, bw, lo, hi] : {std::tuple{DataType::kSFixedPoint8, 4, -8, 7},
                                          std::tuple{DataType::kSFixedPoint8, 8, -128, 127},
                                          std::tuple{DataType::kUFixedPoint16, 16, 0, 65535}}) {
    const StorageFormat* f = find_storage_format(dtype, bw);
    ASSERT_NE(f, nullptr);
    std::vector<uint8_t> row(f->row_bytes(3), 0);
    for (int32_t v = lo; v <= hi; ++v) {
      f->store(row.data(), 1, v);
      EXPECT_EQ(f->load(row.data(), 1), v) << f->name;
      EXPECT_EQ(f->load(row.data(), 0), 0) << f->name;  // the neighbour is untouched
    }
  }
}

TEST(StorageBytesTest, WholeTensors) {
  EXPECT_EQ(storage_bytes(MakeTensor("a", TensorKind::kStatic, DataType::kSFixedPoint8, {3, 5}, 8)), 15u);
  // 4-bit rows are padded to whole bytes: 3 rows * ceil(5 / 2) = 9, not ceil(15 / 2) = 8.
  EXPECT_EQ(storage_bytes(MakeTensor("b", TensorKind::kStatic, DataType::kSFixedPoint8, {3, 5}, 4)), 9u);
  EXPECT_EQ(storage_bytes(MakeTensor("c", TensorKind::kStatic, DataType::kSFixedPoint8, {3, 4}, 4)), 6u);
  EXPECT_EQ(storage_bytes(MakeTensor("d", TensorKind::kStatic, DataType::kUFixedPoint16, {10, 3})), 60u);
  EXPECT_EQ(storage_bytes(MakeTensor("e", TensorKind::kStatic, DataType::kFloat32, {2, 3})), 24u);
  EXPECT_EQ(storage_bytes(MakeTensor("f", TensorKind::kAppWrite, DataType::kInt32, {7})), 28u);
  EXPECT_EQ(storage_bytes(MakeTensor("g", TensorKind::kAppWrite, DataType::kInt32, {})), 4u);  // scalar
  EXPECT_EQ(storage_bytes(MakeTensor("h", TensorKind::kAppRead, DataType::kUFixedPoint16, {0, 3})), 0u);
  EXPECT_EQ(storage_bytes(MakeTensor("i", TensorKind::kStatic, DataType::kSFixedPoint8, {2, 3, 5}, 4)), 18u);
  // No encoding bitwidth: SFIXED_POINT_8 defaults to 8 bits.
  EXPECT_EQ(storage_bytes(MakeTensor("j", TensorKind::kStatic, DataType::kSFixedPoint8, {3, 5})), 15u);
}

TEST(TensorTest, BitwidthAndElementCount) {
  EXPECT_EQ(MakeTensor("a", TensorKind::kStatic, DataType::kSFixedPoint8, {2, 3}, 4).bitwidth(), 4);
  EXPECT_EQ(MakeTensor("a", TensorKind::kStatic, DataType::kSFixedPoint8, {2, 3}).bitwidth(), 8);
  EXPECT_EQ(MakeTensor("a", TensorKind::kStatic, DataType::kUFixedPoint16, {2, 3}).bitwidth(), 16);
  EXPECT_EQ(MakeTensor("a", TensorKind::kStatic, DataType::kFloat32, {2, 3}).bitwidth(), 32);
  EXPECT_EQ(MakeTensor("a", TensorKind::kStatic, DataType::kInt32, {2, 3}).bitwidth(), 32);
  EXPECT_EQ(MakeTensor("a", TensorKind::kStatic, DataType::kInt32, {2, 3, 4}).num_elements(), 24);
  EXPECT_EQ(MakeTensor("a", TensorKind::kStatic, DataType::kInt32, {0, 3}).num_elements(), 0);
  EXPECT_EQ(MakeTensor("a", TensorKind::kStatic, DataType::kInt32, {}).num_elements(), 1);
}

// ---------------------------------------------------------------------------
// Packed 4-bit values.

TEST(Int4Test, RoundTripsEveryValueInBothNibbles) {
  for (int v = -8; v <= 7; ++v) {
    for (int other = -8; other <= 7; ++other) {
      uint8_t row[1] = {0};
      pack_int4(row, 0, static_cast<int8_t>(v));
      pack_int4(row, 1, static_cast<int8_t>(other));
      EXPECT_EQ(unpack_int4(row, 0), v) << "low nibble, other=" << other;
      EXPECT_EQ(unpack_int4(row, 1), other) << "high nibble, v=" << v;
      // Two's complement nibbles: low = v & 0xF, high = other & 0xF.
      EXPECT_EQ(row[0], static_cast<uint8_t>((v & 0x0F) | ((other & 0x0F) << 4)));
    }
  }
}

TEST(Int4Test, NibbleOrderIsColumn2kLow) {
  // Columns [1, -2, 3, -8, 7]: bytes {(-2 -> 0xE) << 4 | 1, (-8 -> 0x8) << 4 | 3, 7}.
  uint8_t row[3] = {0xAA, 0xAA, 0xAA};  // garbage that packing must overwrite nibble by nibble
  const int8_t values[5] = {1, -2, 3, -8, 7};
  for (int j = 0; j < 5; ++j) pack_int4(row, j, values[j]);
  EXPECT_EQ(row[0], 0xE1);
  EXPECT_EQ(row[1], 0x83);
  EXPECT_EQ(row[2], 0xA7);  // the padding nibble (column 5) keeps what was there
  for (int j = 0; j < 5; ++j) EXPECT_EQ(unpack_int4(row, j), values[j]) << j;
  // Reading hand-made bytes: 0x9F = high 0x9 (-7), low 0xF (-1).
  const uint8_t hand[1] = {0x9F};
  EXPECT_EQ(unpack_int4(hand, 0), -1);
  EXPECT_EQ(unpack_int4(hand, 1), -7);
}

TEST(Int4Test, PackingOneNibbleLeavesTheOtherAlone) {
  uint8_t row[1] = {0x5A};
  pack_int4(row, 0, -3);  // low 0xD
  EXPECT_EQ(row[0], 0x5D);
  pack_int4(row, 1, 0);
  EXPECT_EQ(row[0], 0x0D);
}

// ---------------------------------------------------------------------------
// Names of enums.

TEST(NamesTest, ToStringAndParseRoundTrip) {
  EXPECT_STREQ(to_string(TensorKind::kStatic), "STATIC");
  EXPECT_STREQ(to_string(TensorKind::kNative), "NATIVE");
  EXPECT_STREQ(to_string(TensorKind::kAppWrite), "APP_WRITE");
  EXPECT_STREQ(to_string(TensorKind::kAppRead), "APP_READ");
  EXPECT_STREQ(to_string(DataType::kSFixedPoint8), "SFIXED_POINT_8");
  EXPECT_STREQ(to_string(DataType::kUFixedPoint16), "UFIXED_POINT_16");
  EXPECT_STREQ(to_string(DataType::kFloat32), "FLOAT_32");
  EXPECT_STREQ(to_string(DataType::kInt32), "INT_32");
  EXPECT_STREQ(to_string(OpType::kGather), "Gather");
  EXPECT_STREQ(to_string(OpType::kConvert), "Convert");
  EXPECT_STREQ(to_string(OpType::kRequantGather), "RequantGather");
  for (auto k : {TensorKind::kStatic, TensorKind::kNative, TensorKind::kAppWrite, TensorKind::kAppRead})
    EXPECT_EQ(parse_tensor_kind(to_string(k)).value(), k);
  for (auto d : {DataType::kSFixedPoint8, DataType::kUFixedPoint16, DataType::kFloat32, DataType::kInt32})
    EXPECT_EQ(parse_data_type(to_string(d)).value(), d);
  for (auto t : {OpType::kGather, OpType::kConvert, OpType::kRequantGather})
    EXPECT_EQ(parse_op_type(to_string(t)).value(), t);
}

TEST(NamesTest, UnknownNamesAreParseErrorsQuotingTheText) {
  Result<TensorKind> k = parse_tensor_kind("static");
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().code, ErrorCode::kParseError);
  EXPECT_THAT(k.error().message, HasSubstr("'static'"));
  Result<DataType> d = parse_data_type("UINT_16");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code, ErrorCode::kParseError);
  EXPECT_THAT(d.error().message, HasSubstr("'UINT_16'"));
  Result<OpType> o = parse_op_type("Add");
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error().code, ErrorCode::kParseError);
  EXPECT_THAT(o.error().message, HasSubstr("'Add'"));
}

// ---------------------------------------------------------------------------
// Encodings.

TEST(EncodingTest, FactoriesAndEquality) {
  Encoding t = Encoding::per_tensor(0.5f, -3, 16);
  EXPECT_TRUE(t.is_per_tensor());
  EXPECT_FALSE(t.is_per_axis());
  EXPECT_EQ(t.scale, 0.5f);
  EXPECT_EQ(t.offset, -3);
  EXPECT_EQ(t.bitwidth, 16);
  EXPECT_TRUE(t == Encoding::per_tensor(0.5f, -3, 16));
  EXPECT_FALSE(t == Encoding::per_tensor(0.5f, -4, 16));
  EXPECT_FALSE(t == Encoding::per_tensor(0.25f, -3, 16));
  EXPECT_FALSE(t == Encoding::per_tensor(0.5f, -3, 8));

  Encoding a = Encoding::per_axis(0, {0.5f, 0.25f}, {0, 0}, 4);
  EXPECT_TRUE(a.is_per_axis());
  EXPECT_EQ(a.axis, 0);
  EXPECT_EQ(a.scales, (std::vector<float>{0.5f, 0.25f}));
  EXPECT_EQ(a.offsets, (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(a.bitwidth, 4);
  EXPECT_TRUE(a == Encoding::per_axis(0, {0.5f, 0.25f}, {0, 0}, 4));
  EXPECT_FALSE(a == Encoding::per_axis(0, {0.5f, 0.25f}, {0, 0}, 8));
  EXPECT_FALSE(a == Encoding::per_axis(1, {0.5f, 0.25f}, {0, 0}, 4));
  EXPECT_FALSE(a == Encoding::per_axis(0, {0.5f, 0.125f}, {0, 0}, 4));
  EXPECT_FALSE(a == Encoding::per_axis(0, {0.5f, 0.25f}, {0, 1}, 4));
  EXPECT_FALSE(a == t);
  EXPECT_TRUE(Encoding{} == Encoding{});
}

// ---------------------------------------------------------------------------
// Graph: a valid optimized-pattern-shaped graph, then one defect at a time.

Graph ValidGraph() {
  Graph g;
  Tensor w = MakeTensor("emb_weight", TensorKind::kStatic, DataType::kSFixedPoint8, {3, 5}, 4);
  w.encoding = Encoding::per_axis(0, {0.5f, 0.25f, 0.125f}, {0, 0, 0}, 4);
  w.data = Bytes(9);
  g.add_tensor(std::move(w));
  g.add_tensor(MakeTensor("emb_indices", TensorKind::kAppWrite, DataType::kInt32, {0}));
  Tensor c = MakeTensor("emb_convert", TensorKind::kNative, DataType::kUFixedPoint16, {3, 5});
  c.encoding = Encoding::per_tensor(0.01f, -100, 16);
  g.add_tensor(c);
  c.name = "emb";
  c.kind = TensorKind::kAppRead;
  c.shape = {0, 5};
  g.add_tensor(c);
  g.add_op(Op{OpType::kConvert, "emb_convert", {"emb_weight"}, {"emb_convert"}, 0, std::nullopt});
  g.add_op(Op{OpType::kGather, "emb", {"emb_convert", "emb_indices"}, {"emb"}, 0, std::nullopt});
  return g;
}

void ExpectCorrupt(const Graph& g, const std::string& fragment) {
  Status s = g.check();
  ASSERT_FALSE(s.ok()) << "expected an error mentioning " << fragment;
  EXPECT_EQ(s.code(), ErrorCode::kCorrupt);
  EXPECT_THAT(s.message(), HasSubstr(fragment));
}

TEST(GraphTest, ValidGraphPassesAndFindsTensors) {
  Graph g = ValidGraph();
  EXPECT_TRUE(g.check().ok()) << g.check().message();
  ASSERT_NE(g.find_tensor("emb_convert"), nullptr);
  EXPECT_EQ(g.find_tensor("emb_convert")->dtype, DataType::kUFixedPoint16);
  EXPECT_EQ(g.find_tensor("missing"), nullptr);
  const Graph& cg = g;
  ASSERT_NE(cg.find_tensor("emb"), nullptr);
  EXPECT_EQ(cg.find_tensor("emb")->kind, TensorKind::kAppRead);
}

TEST(GraphTest, DuplicateTensorName) {
  Graph g = ValidGraph();
  g.add_tensor(MakeTensor("emb_indices", TensorKind::kAppWrite, DataType::kInt32, {0}));
  ExpectCorrupt(g, "duplicate tensor name 'emb_indices'");
}

TEST(GraphTest, NegativeDimension) {
  Graph g = ValidGraph();
  g.find_tensor("emb_convert")->shape = {3, -5};
  ExpectCorrupt(g, "'emb_convert' has a negative dimension");
}

TEST(GraphTest, StaticWithoutData) {
  Graph g = ValidGraph();
  g.find_tensor("emb_weight")->data.reset();
  ExpectCorrupt(g, "STATIC tensor 'emb_weight' has no data");
}

TEST(GraphTest, StaticWithWrongByteCount) {
  Graph g = ValidGraph();
  g.find_tensor("emb_weight")->data = Bytes(8);  // 3 rows * 3 bytes = 9 needed
  ExpectCorrupt(g, "STATIC tensor 'emb_weight' holds 8 bytes, its shape needs 9");
}

TEST(GraphTest, PerAxisEncodingMismatch) {
  {
    Graph g = ValidGraph();
    g.find_tensor("emb_weight")->encoding.scales.pop_back();  // 2 scales for 3 rows
    g.find_tensor("emb_weight")->encoding.offsets.pop_back();
    ExpectCorrupt(g, "'emb_weight' has a per-axis encoding that does not match its shape");
  }
  {
    Graph g = ValidGraph();
    g.find_tensor("emb_weight")->encoding.offsets.push_back(0);  // 4 offsets, 3 scales
    ExpectCorrupt(g, "'emb_weight' has a per-axis encoding that does not match its shape");
  }
  {
    Graph g = ValidGraph();
    g.find_tensor("emb_weight")->encoding.axis = 2;  // rank 2
    ExpectCorrupt(g, "'emb_weight' has a per-axis encoding that does not match its shape");
  }
  {
    Graph g = ValidGraph();
    g.find_tensor("emb_weight")->encoding.axis = -1;
    ExpectCorrupt(g, "'emb_weight' has a per-axis encoding that does not match its shape");
  }
}

TEST(GraphTest, WrongInputOrOutputCount) {
  {
    Graph g = ValidGraph();
    g.ops[0].inputs.push_back("emb_indices");  // Convert takes one input
    ExpectCorrupt(g, "op 'emb_convert' has the wrong number of inputs or outputs");
  }
  {
    Graph g = ValidGraph();
    g.ops[1].inputs.pop_back();  // Gather takes two
    ExpectCorrupt(g, "op 'emb' has the wrong number of inputs or outputs");
  }
  {
    Graph g = ValidGraph();
    g.ops[1].outputs.clear();
    ExpectCorrupt(g, "op 'emb' has the wrong number of inputs or outputs");
  }
}

TEST(GraphTest, UnknownInputOrOutputTensor) {
  {
    Graph g = ValidGraph();
    g.ops[1].inputs[1] = "ids";
    ExpectCorrupt(g, "op 'emb' reads unknown tensor 'ids'");
  }
  {
    Graph g = ValidGraph();
    g.ops[0].outputs[0] = "converted";
    ExpectCorrupt(g, "op 'emb_convert' writes unknown tensor 'converted'");
  }
}

TEST(GraphTest, RemoveUnusedTensorsKeepsReferencedOnes) {
  Graph g = ValidGraph();
  g.add_tensor(MakeTensor("orphan", TensorKind::kNative, DataType::kFloat32, {2}));
  g.remove_unused_tensors();
  EXPECT_EQ(g.find_tensor("orphan"), nullptr);
  EXPECT_EQ(g.tensors.size(), 4u);
  // Dropping the Convert leaves emb_weight unreferenced.
  g.ops.erase(g.ops.begin());
  g.remove_unused_tensors();
  EXPECT_EQ(g.find_tensor("emb_weight"), nullptr);
  EXPECT_NE(g.find_tensor("emb_convert"), nullptr);
  EXPECT_EQ(g.tensors.size(), 3u);
}

TEST(GraphTest, DumpNamesEveryTensorAndOp) {
  Graph g = ValidGraph();
  Op fused{OpType::kRequantGather, "emb_fused", {"emb_weight", "emb_indices"}, {"emb"}, 0,
           Encoding::per_tensor(0.5f, 0, 4)};
  g.add_op(fused);
  const std::string d = g.dump();
  EXPECT_THAT(d, HasSubstr("emb_weight: STATIC SFIXED_POINT_8 [3, 5] {per-axis axis=0 bw=4 n=3"));
  EXPECT_THAT(d, HasSubstr("scales=[0.125 .. 0.5]"));
  EXPECT_THAT(d, HasSubstr("data=9B"));
  EXPECT_THAT(d, HasSubstr("emb_indices: APP_WRITE INT_32 [0] {none}"));
  EXPECT_THAT(d, HasSubstr("emb_convert: NATIVE UFIXED_POINT_16 [3, 5] {per-tensor bw=16"));
  EXPECT_THAT(d, HasSubstr("offset=-100"));
  EXPECT_THAT(d, HasSubstr("emb: APP_READ UFIXED_POINT_16 [0, 5]"));
  EXPECT_THAT(d, HasSubstr("emb_convert = Convert(emb_weight) -> emb_convert"));
  EXPECT_THAT(d, HasSubstr("emb = Gather(emb_convert, emb_indices) -> emb axis=0"));
  EXPECT_THAT(d, HasSubstr("emb_fused = RequantGather(emb_weight, emb_indices) -> emb "
                           "intermediate={per-tensor bw=4 scale=0.5 offset=0}"));
}

}  // namespace
}  // namespace qemb
