// The GGUF reader: layout (v2 and v3, alignment, dims innermost first),
// ggml's exact dequantization of Q8_0 and Q4_0 on hand-made blocks (every
// type against ggml's own output: gguf_types_test.cc), and refusal of hostile files.
#include "qemb/gguf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string_view>
#include <type_traits>

#include <cstring>

#include "qemb/half.h"
#include "support/expect_error.h"
#include "support/checkpoints.h"
#include "support/temp_dir.h"

namespace qemb {
namespace {

using ::testing::HasSubstr;
using namespace qemb::testing;

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> read_all(const GgufFile& f, const std::string& name) {
  const GgufTensor* t = f.find(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  std::vector<float> out(static_cast<size_t>(t->shape[0] * t->shape[1]));
  auto s = f.read_rows_float(*t, 0, t->shape[0], out.data());
  EXPECT_TRUE(s.ok()) << s.error().to_string();
  return out;
}

TEST(Gguf, LayoutDimsAndAlignment) {
  TempDir dir;
  const auto table = spread_table(5, 3, 1);
  for (uint32_t version : {2u, 3u}) {
    for (uint32_t alignment : {32u, 64u, 8u}) {
      const std::string path = dir.file("m.gguf");
      ASSERT_TRUE(write_gguf(path, {{"general.architecture", "llama"}},
                             {{"output_norm.weight", 0, {3}, f32_bytes({1, 2, 3})},
                              {"token_embd.weight", 0, {5, 3}, f32_bytes(table)}},
                             alignment, version)
                      .ok());
      auto f = GgufFile::open(path);
      ASSERT_TRUE(f.ok()) << f.error().to_string();
      EXPECT_EQ(f->version(), version);
      EXPECT_EQ(f->alignment(), alignment);
      EXPECT_EQ(f->data_offset() % alignment, 0u);
      ASSERT_EQ(f->tensors().size(), 2u);
      const GgufTensor& t = f->tensors()[1];
      EXPECT_EQ(t.name, "token_embd.weight");
      EXPECT_EQ(t.type, "F32");
      EXPECT_EQ(t.dims, (std::vector<int64_t>{3, 5}));   // innermost first, as stored
      EXPECT_EQ(t.shape, (std::vector<int64_t>{5, 3}));  // rows first
      EXPECT_EQ((t.begin - f->data_offset()) % alignment, 0u);
      EXPECT_EQ(f->metadata().at("general.architecture").s, "llama");
      // Issue 37, 8: metadata strings were copied about 4 times (six 64 MiB
      // strings took 1.58 GB); they are views of the file's own bytes, and
      // stay valid in a moved or copied GgufFile (which shares the bytes).
      static_assert(std::is_same_v<decltype(GgufValue::s), std::string_view>);
      const GgufFile copy = *f;
      EXPECT_EQ(copy.metadata().at("general.architecture").s, "llama");
      EXPECT_EQ(read_all(*f, "token_embd.weight"), table);
      // A row range reads the same values.
      std::vector<float> rows(6);
      ASSERT_TRUE(f->read_rows_float(t, 2, 4, rows.data()).ok());
      EXPECT_EQ(rows, std::vector<float>(table.begin() + 6, table.begin() + 12));
      expect_error(f->read_rows_float(t, 4, 6, rows.data()), ErrorCode::kOutOfRange, "rows [4, 6)");
      expect_error(f->read_rows_float(f->tensors()[0], 0, 1, rows.data()), ErrorCode::kUnsupported, "2-D");
    }
  }
}

TEST(Gguf, HalfTypesDecodeExactly) {
  TempDir dir;
  const auto table = spread_table(4, 8, 3);
  auto f16 = encode_floats(table, "F16"), bf16 = encode_floats(table, "BF16");
  ASSERT_TRUE(write_gguf(dir.file("h.gguf"), {},
                         {{"a", 1, {4, 8}, f16}, {"b", 30, {4, 8}, bf16}})
                  .ok());
  auto f = GgufFile::open(dir.file("h.gguf"));
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  const auto a = read_all(*f, "a"), b = read_all(*f, "b");
  for (size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(a[i], f16_to_float(static_cast<uint16_t>(f16[2 * i] | (f16[2 * i + 1] << 8))));
    EXPECT_EQ(b[i], bf16_to_float(static_cast<uint16_t>(bf16[2 * i] | (bf16[2 * i + 1] << 8))));
  }
}

// ggml's definitions, written out on hand-made blocks.
TEST(Gguf, Q8_0AndQ4_0FollowGgml) {
  std::vector<uint8_t> q8(34), q4(18);
  const uint16_t d8 = float_to_f16(0.0625f), d4 = float_to_f16(-0.5f);
  std::memcpy(q8.data(), &d8, 2);
  std::memcpy(q4.data(), &d4, 2);
  for (int j = 0; j < 32; ++j) q8[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128));
  for (int j = 0; j < 16; ++j) q4[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  TempDir dir;
  ASSERT_TRUE(write_gguf(dir.file("q.gguf"), {}, {{"q8", 8, {1, 32}, q8}, {"q4", 2, {1, 32}, q4}}).ok());
  auto f = GgufFile::open(dir.file("q.gguf"));
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  const auto v8 = read_all(*f, "q8"), v4 = read_all(*f, "q4");
  for (int j = 0; j < 32; ++j) EXPECT_EQ(v8[j], static_cast<float>(j * 8 - 128) * 0.0625f) << j;
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(v4[j], static_cast<float>(j - 8) * -0.5f) << j;              // low nibbles: the first half
    EXPECT_EQ(v4[j + 16], static_cast<float>(15 - j - 8) * -0.5f) << j;    // high nibbles: the second half
  }
}

// ---- hostile files --------------------------------------------------------

struct Spec {
  uint32_t version = 3;
  int64_t tensor_count = -1, kv_count = -1;  // -1: the true counts
  uint64_t key_length = 0;                   // 0: the true length
  uint32_t value_type = 8;                   // string
  uint32_t ggml_type = 0;                    // F32
  uint64_t offset = 0;
  std::vector<uint64_t> dims = {6, 40};
  size_t data_bytes = 960;
};

void put(std::string& b, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string build(const Spec& s) {
  std::string b = "GGUF";
  put(b, s.version, 4);
  put(b, s.tensor_count < 0 ? 1 : static_cast<uint64_t>(s.tensor_count), 8);
  put(b, s.kv_count < 0 ? 1 : static_cast<uint64_t>(s.kv_count), 8);
  const std::string key = "general.architecture";
  put(b, s.key_length ? s.key_length : key.size(), 8);
  b += key;
  put(b, s.value_type, 4);
  put(b, 5, 8);
  b += "llama";
  const std::string name = "token_embd.weight";
  put(b, name.size(), 8);
  b += name;
  put(b, s.dims.size(), 4);
  for (uint64_t d : s.dims) put(b, d, 8);
  put(b, s.ggml_type, 4);
  put(b, s.offset, 8);
  b.resize((b.size() + 31) / 32 * 32, '\0');
  b += std::string(s.data_bytes, '\x01');
  return b;
}

Status parse(const std::string& bytes) {
  return GgufFile::from_bytes(std::vector<uint8_t>(bytes.begin(), bytes.end()), "bad.gguf").status();
}

TEST(Gguf, HostileFilesAreRefusedWithClearMessages) {
  ASSERT_TRUE(parse(build({})).ok()) << parse(build({})).error().to_string();
  const std::string good = build({});
  expect_error(parse("GGML" + good.substr(4)), ErrorCode::kParseError, "does not start with the magic \"GGUF\"");
  expect_error(parse(""), ErrorCode::kParseError, "magic");
  expect_error(parse(good.substr(0, 60)), ErrorCode::kParseError, "the file is truncated or corrupt");
  expect_error(parse(good.substr(0, good.size() - 10)), ErrorCode::kParseError, "past the end of the 950-byte data region");
  Spec v1;
  v1.version = 1;
  expect_error(parse(build(v1)), ErrorCode::kUnsupported, "has version 1; qemb reads GGUF versions 2 and 3");
  Spec lying;
  lying.tensor_count = 1ll << 40;
  expect_error(parse(build(lying)), ErrorCode::kParseError, "claims 1099511627776 tensors");
  Spec lying_kv;
  lying_kv.kv_count = 1ll << 50;
  expect_error(parse(build(lying_kv)), ErrorCode::kParseError, "key/value pairs, more than");
  Spec more_kv;
  more_kv.kv_count = 3;  // the tensor info is read as pairs until it runs out
  expect_error(parse(build(more_kv)), ErrorCode::kParseError, "bad.gguf");
  Spec huge;
  huge.key_length = 1ull << 62;
  expect_error(parse(build(huge)), ErrorCode::kParseError, "over the 67108864-byte limit");
  Spec long_key;
  long_key.key_length = 5000;
  expect_error(parse(build(long_key)), ErrorCode::kParseError, "needs 5000 bytes but only");
  Spec value_type;
  value_type.value_type = 99;
  expect_error(parse(build(value_type)), ErrorCode::kParseError, "has value type 99");
  Spec ggml_type;
  ggml_type.ggml_type = 77;
  expect_error(parse(build(ggml_type)), ErrorCode::kParseError, "has ggml type 77, which qemb does not know");
  Spec misaligned;
  misaligned.offset = 4;
  expect_error(parse(build(misaligned)), ErrorCode::kParseError, "not a multiple of the alignment 32");
  Spec past;
  past.offset = 1 << 20;
  expect_error(parse(build(past)), ErrorCode::kParseError, "occupies data bytes [1048576, 1049536)");
  Spec wrapping;
  wrapping.offset = ~0ull - 31;
  expect_error(parse(build(wrapping)), ErrorCode::kParseError, "past the end");
  Spec rank;
  rank.dims = {1, 1, 1, 1, 1};
  expect_error(parse(build(rank)), ErrorCode::kParseError, "has 5 dimensions; GGUF tensors have 1 to 4");
  Spec overflow;
  overflow.dims = {1ull << 40, 1ull << 40};
  expect_error(parse(build(overflow)), ErrorCode::kParseError, "overflows");
  Spec blocks;
  blocks.ggml_type = 8;  // Q8_0 needs whole 32-value blocks per row
  expect_error(parse(build(blocks)), ErrorCode::kParseError, "6 values a row, not a multiple of the 32-value blocks");
}

TEST(Gguf, TypesItCannotReadAreNamed) {
  Spec k;
  k.ggml_type = 16;  // IQ2_XXS: 256-value blocks of 66 bytes
  k.dims = {256, 2};
  k.data_bytes = 132;
  auto f = GgufFile::from_bytes([&] {
    const std::string b = build(k);
    return std::vector<uint8_t>(b.begin(), b.end());
  }());
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  std::vector<float> out(512);
  expect_error(f->read_rows_float(f->tensors()[0], 0, 2, out.data()), ErrorCode::kUnsupported,
               "has GGUF type IQ2_XXS; qemb reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, "
               "Q5_K, Q6_K, IQ4_NL and IQ4_XS");
}

}  // namespace
}  // namespace qemb
