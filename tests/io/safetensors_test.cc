#include "qemb/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "qemb/half.h"

#include "support/temp_dir.h"

namespace qemb {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A fresh folder per test so tests never see each other's files.
std::string test_dir() { return qemb::testing::per_test_dir("qemb_io_safetensors_"); }

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_all(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// 8-byte length, header text, data.
std::vector<uint8_t> raw_file(const std::string& header, size_t data_bytes = 0, uint64_t length_override = ~0ull) {
  const uint64_t length = length_override == ~0ull ? header.size() : length_override;
  std::vector<uint8_t> out(8 + header.size() + data_bytes, 0xAB);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(length >> (8 * i));
  std::copy(header.begin(), header.end(), out.begin() + 8);
  return out;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<uint8_t> u16_bytes(const std::vector<uint16_t>& v) {
  std::vector<uint8_t> out;
  for (uint16_t h : v) {
    out.push_back(static_cast<uint8_t>(h & 0xFF));
    out.push_back(static_cast<uint8_t>(h >> 8));
  }
  return out;
}

void expect_error(const Result<SafetensorsFile>& r, ErrorCode code, const std::string& substring) {
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << substring;
  EXPECT_EQ(r.error().code, code) << r.error().to_string();
  EXPECT_THAT(r.error().message, HasSubstr(substring));
}

Result<SafetensorsFile> parse(const std::string& header, size_t data_bytes = 0) {
  return SafetensorsFile::from_bytes(raw_file(header, data_bytes), "bad.safetensors");
}

// ---- writing and reading back ----------------------------------------------

TEST(SafetensorsWrite, HeaderIsCompactJsonPaddedToEightBytes) {
  const std::string path = test_dir() + "/one.safetensors";
  ASSERT_TRUE(write_safetensors(path, {}, {{"a", "F32", {1}, f32_bytes({2.5f})}}).ok());
  const std::vector<uint8_t> bytes = read_all(path);
  const std::string expected_header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  ASSERT_EQ(expected_header.size(), 54u);
  ASSERT_EQ(bytes.size(), 8u + 56u + 4u);
  EXPECT_EQ(bytes[0], 56);
  for (int i = 1; i < 8; ++i) EXPECT_EQ(bytes[i], 0);
  EXPECT_EQ(std::string(bytes.begin() + 8, bytes.begin() + 64), expected_header + "  ");
  float value;
  std::memcpy(&value, bytes.data() + 64, 4);
  EXPECT_EQ(value, 2.5f);
}

TEST(SafetensorsWrite, RoundTripsF32F16Bf16Exactly) {
  const std::string path = test_dir() + "/model.safetensors";
  const std::vector<float> f32 = {1.0f, -2.5f, 0.1f, 3.0e-8f, 65536.0f, -0.0f};
  const std::vector<float> f16_source = {1.0f, 0.1f, -65504.0f, 1.0f + std::ldexp(1.0f, -11)};
  const std::vector<float> bf16_source = {1.0f, 0.1f, 1.0f + 3 * std::ldexp(1.0f, -8)};
  auto f16 = floats_to_dtype_bytes(f16_source.data(), f16_source.size(), "F16");
  auto bf16 = floats_to_dtype_bytes(bf16_source.data(), bf16_source.size(), "BF16");
  ASSERT_TRUE(f16.ok() && bf16.ok());
  EXPECT_EQ(*f16, u16_bytes({0x3C00, 0x2E66, 0xFBFF, 0x3C00}));
  EXPECT_EQ(*bf16, u16_bytes({0x3F80, 0x3DCD, 0x3F82}));

  ASSERT_TRUE(write_safetensors(
                  path, {{"format", "pt"}, {"note", "x"}},
                  {{"w32", "F32", {2, 3}, f32_bytes(f32)}, {"w16", "F16", {2, 2}, *f16}, {"wbf", "BF16", {3}, *bf16}})
                  .ok());
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  EXPECT_EQ(file->path(), path);
  EXPECT_EQ(file->header_size() % 8, 0u);
  EXPECT_EQ(file->data_offset(), 8 + file->header_size());
  EXPECT_EQ(file->file_size(), file->data_offset() + 24 + 8 + 6);
  EXPECT_EQ(file->metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"note", "x"}}));
  ASSERT_EQ(file->tensors().size(), 3u);
  EXPECT_EQ(file->tensors()[0].name, "w32");
  EXPECT_EQ(file->tensors()[1].name, "w16");
  EXPECT_EQ(file->tensors()[2].name, "wbf");
  const SafetensorsTensor* w16 = file->find("w16");
  ASSERT_NE(w16, nullptr);
  EXPECT_EQ(w16->dtype, "F16");
  EXPECT_THAT(w16->shape, ElementsAre(2, 2));
  EXPECT_EQ(w16->begin, file->data_offset() + 24);
  EXPECT_EQ(w16->end, file->data_offset() + 32);
  EXPECT_EQ(file->find("missing"), nullptr);

  auto back32 = file->read_float("w32");
  ASSERT_TRUE(back32.ok());
  for (size_t i = 0; i < f32.size(); ++i) EXPECT_EQ(float_bits((*back32)[i]), float_bits(f32[i])) << i;
  auto back16 = file->read_float("w16");
  ASSERT_TRUE(back16.ok());
  EXPECT_THAT(*back16, ElementsAre(1.0f, 0.0999755859375f, -65504.0f, 1.0f));
  auto backbf = file->read_float("wbf");
  ASSERT_TRUE(backbf.ok());
  EXPECT_THAT(*backbf, ElementsAre(1.0f, 0.10009765625f, 1.015625f));

  float rows[3] = {};
  ASSERT_TRUE(file->read_rows_float("w32", 1, 2, rows).ok());
  EXPECT_EQ(rows[0], 3.0e-8f);
  EXPECT_EQ(rows[1], 65536.0f);
  EXPECT_TRUE(std::signbit(rows[2]));
  float rows16[2] = {};
  ASSERT_TRUE(file->read_rows_float("w16", 1, 2, rows16).ok());
  EXPECT_THAT(rows16, ElementsAre(-65504.0f, 1.0f));
  ASSERT_TRUE(file->read_rows_float("w16", 2, 2, rows16).ok());  // empty range is fine
}

TEST(SafetensorsWrite, RejectsBadTensorsAndLeavesNoFile) {
  const std::string dir = test_dir();
  const std::string path = dir + "/x.safetensors";
  Status s = write_safetensors(path, {}, {{"a", "F32", {2}, f32_bytes({1.0f})}});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("has 4 bytes of data, expected 8"));
  s = write_safetensors(path, {}, {{"a", "F32", {1}, f32_bytes({1.0f})}, {"a", "F32", {1}, f32_bytes({1.0f})}});
  EXPECT_THAT(s.message(), HasSubstr("appears twice"));
  s = write_safetensors(path, {}, {{"a", "Q4", {1}, {1}}});
  EXPECT_THAT(s.message(), HasSubstr("unknown dtype 'Q4'"));
  s = write_safetensors(path, {}, {{"__metadata__", "F32", {1}, f32_bytes({1.0f})}});
  EXPECT_THAT(s.message(), HasSubstr("invalid tensor name"));
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(SafetensorsWrite, FloatsToUnsupportedDtype) {
  const float v = 1.0f;
  auto r = floats_to_dtype_bytes(&v, 1, "I8");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);
  EXPECT_THAT(r.error().message, HasSubstr("F32, F16, BF16"));
}

// ---- validation ------------------------------------------------------------

TEST(SafetensorsValidation, FileShorterThanLengthPrefix) {
  expect_error(SafetensorsFile::from_bytes({1, 2, 3, 4, 5}, "tiny.bin"), ErrorCode::kParseError,
               "file is 5 bytes, shorter than the 8-byte header length");
  expect_error(SafetensorsFile::from_bytes({}, "empty.bin"), ErrorCode::kParseError, "'empty.bin'");
}

TEST(SafetensorsValidation, HeaderLengthZeroTooLargeOrPastEnd) {
  expect_error(SafetensorsFile::from_bytes(raw_file("", 16, 0)), ErrorCode::kParseError, "header length is 0");
  expect_error(SafetensorsFile::from_bytes(raw_file("{}", 0, (100ull << 20) + 1)), ErrorCode::kParseError,
               "exceeds the 104857600-byte limit");
  expect_error(SafetensorsFile::from_bytes(raw_file("{}", 0, 3)), ErrorCode::kParseError,
               "header length 3 runs past the end of the file (10 bytes)");
  expect_error(SafetensorsFile::from_bytes(raw_file("{}", 0, ~0ull - 1)), ErrorCode::kParseError, "exceeds");
}

TEST(SafetensorsValidation, HeaderNotJsonObject) {
  expect_error(parse("{not json"), ErrorCode::kParseError, "header is not valid UTF-8 JSON");
  expect_error(parse("{\"a\xff\": 1}"), ErrorCode::kParseError, "header is not valid UTF-8 JSON");
  expect_error(parse("[1, 2]"), ErrorCode::kParseError, "header must be a JSON object, found array");
  expect_error(parse("\"text\""), ErrorCode::kParseError, "found string");
}

TEST(SafetensorsValidation, EmptyHeaderObjectAndTrailingSpacesAreFine) {
  auto r = parse("{}      ");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(r->tensors().empty());
  EXPECT_TRUE(r->metadata().empty());
}

TEST(SafetensorsValidation, EntryFieldsMissingOrIllTyped) {
  expect_error(parse(R"({"t": 5})"), ErrorCode::kParseError, "tensor 't': entry must be an object, found number");
  expect_error(parse(R"({"t": {"shape": [1], "data_offsets": [0, 4]}})", 4), ErrorCode::kParseError,
               "tensor 't': missing \"dtype\"");
  expect_error(parse(R"({"t": {"dtype": 7, "shape": [1], "data_offsets": [0, 4]}})", 4), ErrorCode::kParseError,
               "\"dtype\" must be a string");
  expect_error(parse(R"({"t": {"dtype": "F32", "data_offsets": [0, 4]}})", 4), ErrorCode::kParseError,
               "missing \"shape\"");
  expect_error(parse(R"({"t": {"dtype": "F32", "shape": 1, "data_offsets": [0, 4]}})", 4), ErrorCode::kParseError,
               "\"shape\" must be an array");
  expect_error(parse(R"({"t": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4), ErrorCode::kParseError,
               "shape index 0 is 1.5, not a non-negative integer");
  expect_error(parse(R"({"t": {"dtype": "F32", "shape": [1]}})", 4), ErrorCode::kParseError,
               "missing \"data_offsets\"");
  expect_error(parse(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4), ErrorCode::kParseError,
               "\"data_offsets\" must be [begin, end]");
  expect_error(parse(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4), ErrorCode::kParseError,
               "\"data_offsets\" must be [begin, end]");
  expect_error(parse(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": "0,4"}})", 4), ErrorCode::kParseError,
               "\"data_offsets\" must be [begin, end]");
}

TEST(SafetensorsValidation, NegativeDimension) {
  expect_error(parse(R"({"t": {"dtype": "F32", "shape": [2, -1], "data_offsets": [0, 0]}})"), ErrorCode::kParseError,
               "tensor 't': negative dimension -1 at shape index 1");
}

TEST(SafetensorsValidation, OffsetsOutOfOrderOrPastDataRegion) {
  expect_error(parse(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", 8), ErrorCode::kParseError,
               "data_offsets begin 8 is after end 4");
  expect_error(parse(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4), ErrorCode::kParseError,
               "data_offsets end 8 is past the data region (4 bytes)");
}

TEST(SafetensorsValidation, ByteSizeMustMatchShape) {
  expect_error(parse(R"({"t": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 8]}})", 8), ErrorCode::kParseError,
               "data_offsets cover 8 bytes but BF16[2, 3] needs 12");
  expect_error(parse(R"({"t": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}})", 2), ErrorCode::kParseError,
               "does not fill whole bytes");
  expect_error(parse(R"({"t": {"dtype": "F64", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})"),
               ErrorCode::kParseError, "is too large");
  // Sub-byte and scalar tensors that do fit.
  EXPECT_TRUE(parse(R"({"t": {"dtype": "F4", "shape": [4], "data_offsets": [0, 2]}})", 2).ok());
  EXPECT_TRUE(parse(R"({"s": {"dtype": "I64", "shape": [], "data_offsets": [0, 8]}})", 8).ok());
  // A zero dimension makes the tensor empty however large the others are.
  auto empty = parse(R"({"z": {"dtype": "F32", "shape": [0, 4611686018427387904, 4], "data_offsets": [0, 0]}})");
  ASSERT_TRUE(empty.ok()) << empty.error().to_string();
  EXPECT_EQ(empty->tensors()[0].num_elements(), 0);
}

TEST(SafetensorsValidation, OverlappingTensors) {
  expect_error(parse(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                         "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                     8),
               ErrorCode::kParseError, "tensors 'a' [0, 8) and 'b' [4, 8) overlap");
  // Empty tensors and gaps do not overlap anything.
  auto ok = parse(R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]},
                      "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]},
                      "c": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}})",
                  8);
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  ASSERT_EQ(ok->tensors().size(), 3u);
  EXPECT_EQ(ok->tensors()[0].name, "c");  // sorted by offset
  EXPECT_EQ(ok->tensors()[1].name, "a");
  EXPECT_EQ(ok->tensors()[2].name, "b");
}

TEST(SafetensorsValidation, DuplicateNames) {
  expect_error(parse(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                         "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                     8),
               ErrorCode::kParseError, "header lists tensor 'a' more than once");
  expect_error(parse(R"({"a": {"dtype": "F32", "dtype": "F16", "shape": [1], "data_offsets": [0, 4]}})", 4),
               ErrorCode::kParseError, "repeats the key 'dtype'");
  // The same key in different objects is fine.
  EXPECT_TRUE(
      parse(R"({"__metadata__": {"a": "x"}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 4).ok());
}

TEST(SafetensorsValidation, UnknownDtypeIsUnsupported) {
  expect_error(parse(R"({"t": {"dtype": "F7", "shape": [1], "data_offsets": [0, 1]}})", 1), ErrorCode::kUnsupported,
               "tensor 't' has unknown dtype 'F7'");
}

TEST(SafetensorsValidation, MetadataMustBeStrings) {
  expect_error(parse(R"({"__metadata__": {"n": 3}})"), ErrorCode::kParseError,
               "\"__metadata__\" value for 'n' must be a string");
  expect_error(parse(R"({"__metadata__": [1]})"), ErrorCode::kParseError, "\"__metadata__\" must be an object");
}

TEST(SafetensorsValidation, DeepNestingIsRefusedWhereverItIs) {
  // 100k levels once overflowed the stack while the error message printed
  // the value (compile, eval and fakequant died with SIGSEGV).
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string message = "header nests JSON deeper than 16 levels; the file is corrupt or not a safetensors file";
  expect_error(parse(R"({"__metadata__": {"a": )" + deep + "}}"), ErrorCode::kParseError, message);
  expect_error(parse(R"({"t": {"dtype": "F32", "shape": [1, )" + deep + R"(], "data_offsets": [0, 4]}})", 4),
               ErrorCode::kParseError, message);
  expect_error(parse(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": )" + deep + "}}", 4),
               ErrorCode::kParseError, message);
  // Nested values under the limit are named by type, never printed whole.
  expect_error(parse(R"({"__metadata__": {"a": [[[1]]]}})"), ErrorCode::kParseError,
               "\"__metadata__\" value for 'a' must be a string, found a nested array");
  expect_error(parse(R"({"t": {"dtype": "F32", "shape": [[[2]]], "data_offsets": [0, 8]}})", 8),
               ErrorCode::kParseError, "shape index 0 is a nested array, not a non-negative integer");
  expect_error(parse(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [[0], [4]]}})", 4),
               ErrorCode::kParseError, "\"data_offsets\" must be [begin, end] with non-negative integers, found a nested array");
}

TEST(SafetensorsValidation, TruncatedFileOnDisk) {
  const std::string dir = test_dir();
  const std::string path = dir + "/full.safetensors";
  ASSERT_TRUE(write_safetensors(path, {}, {{"a", "F32", {4}, f32_bytes({1, 2, 3, 4})}}).ok());
  std::vector<uint8_t> bytes = read_all(path);
  bytes.resize(bytes.size() - 3);
  write_all(dir + "/cut.safetensors", bytes);
  auto r = SafetensorsFile::open(dir + "/cut.safetensors");
  expect_error(r, ErrorCode::kParseError, "data_offsets end 16 is past the data region (13 bytes)");
  EXPECT_THAT(r.error().message, HasSubstr("cut.safetensors"));
  expect_error(SafetensorsFile::open(dir + "/nope.safetensors"), ErrorCode::kNotFound, "nope.safetensors");
}

// ---- reading floats --------------------------------------------------------

TEST(SafetensorsRead, ErrorsForDtypeShapeAndRange) {
  std::string header = R"({"ints": {"dtype": "I32", "shape": [2, 2], "data_offsets": [0, 16]},
                           "vec": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]},
                           "mat": {"dtype": "F32", "shape": [2, 2], "data_offsets": [32, 48]}})";
  auto file = parse(header, 48);
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  float out[8];
  Status s = file->read_rows_float("ints", 0, 1, out);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(s.message(),
              HasSubstr("tensor 'ints' in 'bad.safetensors' has dtype I32; supported dtypes are F32, F16, BF16"));
  auto whole = file->read_float("ints");
  ASSERT_FALSE(whole.ok());
  EXPECT_EQ(whole.error().code, ErrorCode::kUnsupported);
  s = file->read_rows_float("vec", 0, 1, out);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(s.message(), HasSubstr("has shape [4]; reading rows needs a 2-D tensor"));
  s = file->read_rows_float("mat", 1, 3, out);
  EXPECT_EQ(s.code(), ErrorCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("rows [1, 3) are outside tensor 'mat' with 2 rows"));
  EXPECT_EQ(file->read_rows_float("mat", -1, 1, out).code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(file->read_rows_float("mat", 2, 1, out).code(), ErrorCode::kOutOfRange);
  s = file->read_rows_float("nope", 0, 1, out);
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("has no tensor 'nope'"));
}

TEST(SafetensorsRead, UnalignedDataRegion) {
  // An unpadded header leaves the F32 data unaligned: reading must not assume alignment.
  const std::string header = R"({"t":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}} )";
  std::vector<uint8_t> bytes = raw_file(header);
  ASSERT_NE(bytes.size() % 4, 0u);
  const std::vector<uint8_t> data = f32_bytes({1.5f, -7.0f});
  bytes.insert(bytes.end(), data.begin(), data.end());
  auto file = SafetensorsFile::from_bytes(bytes);
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  float out[2];
  ASSERT_TRUE(file->read_rows_float("t", 0, 1, out).ok());
  EXPECT_THAT(out, ElementsAre(1.5f, -7.0f));
}

// ---- embedding name detection ---------------------------------------------

std::string entry(const std::string& name, const std::string& shape, uint64_t begin, uint64_t bytes) {
  std::string out = "\"";
  out += name;
  out += "\": {\"dtype\": \"I8\", \"shape\": ";
  out += shape;
  out += ", \"data_offsets\": [" + std::to_string(begin) + ", " + std::to_string(begin + bytes) + "]}";
  return out;
}

// {"a": ..., "b": ...} from entry() strings.
std::string object(std::initializer_list<std::string> entries) {
  std::string out = "{";
  for (const std::string& e : entries) {
    if (out.size() > 1) out += ", ";
    out += e;
  }
  out += "}";
  return out;
}

TEST(FindEmbeddingTensor, AutoPicksTheSingleEmbeddingAmongOthers) {
  auto file =
      parse(object({entry("model.embed_tokens.weight", "[8, 4]", 0, 32), entry("lm_head.weight", "[8, 4]", 32, 32),
                    entry("model.layers.0.q_proj.weight", "[4, 4]", 64, 16), entry("model.norm.weight", "[4]", 80, 4)}),
            84);
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  auto name = find_embedding_tensor(*file, "");
  ASSERT_TRUE(name.ok()) << name.error().to_string();
  EXPECT_EQ(*name, "model.embed_tokens.weight");
  auto explicit_name = find_embedding_tensor(*file, "lm_head.weight");
  ASSERT_TRUE(explicit_name.ok());
  EXPECT_EQ(*explicit_name, "lm_head.weight");
}

TEST(FindEmbeddingTensor, EverySuffixIsRecognised) {
  for (const std::string& suffix : embedding_name_suffixes()) {
    for (const std::string& name : {suffix, "transformer." + suffix}) {
      auto file = parse(object({entry(name, "[2, 2]", 0, 4)}), 4);
      ASSERT_TRUE(file.ok());
      auto found = find_embedding_tensor(*file, "");
      ASSERT_TRUE(found.ok()) << name;
      EXPECT_EQ(*found, name);
    }
  }
}

TEST(FindEmbeddingTensor, NoneFound) {
  // "xwte.weight" does not end with ".wte.weight"; a 3-D "embed_tokens" is not a table.
  auto file =
      parse(object({entry("xwte.weight", "[2, 2]", 0, 4), entry("model.embed_tokens.weight", "[2, 2, 1]", 4, 4)}), 8);
  ASSERT_TRUE(file.ok());
  auto r = find_embedding_tensor(*file, "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(r.error().message, HasSubstr("no embedding table found in 'bad.safetensors'"));
  EXPECT_THAT(r.error().message, HasSubstr("2-D tensors: xwte.weight I8[2, 2]"));
  EXPECT_THAT(r.error().message, HasSubstr("Pass CompileOptions.tensor = NAME"));
}

TEST(FindEmbeddingTensor, SeveralFound) {
  auto file = parse(object({entry("encoder.embed_tokens.weight", "[2, 2]", 0, 4),
                            entry("decoder.embed_tokens.weight", "[2, 2]", 4, 4)}),
                    8);
  ASSERT_TRUE(file.ok());
  auto r = find_embedding_tensor(*file, "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(r.error().message, HasSubstr("encoder.embed_tokens.weight I8[2, 2]"));
  EXPECT_THAT(r.error().message, HasSubstr("decoder.embed_tokens.weight I8[2, 2]"));
  EXPECT_THAT(r.error().message, HasSubstr("Pass CompileOptions.tensor = NAME"));
}

TEST(FindEmbeddingTensor, ExplicitMissingOrNot2D) {
  auto file =
      parse(object({entry("model.embed_tokens.weight", "[2, 2]", 0, 4), entry("model.norm.weight", "[4]", 4, 4)}), 8);
  ASSERT_TRUE(file.ok());
  auto missing = find_embedding_tensor(*file, "model.embed_token.weight");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  // The explanation eval and fakequant give too (ParamStore), closest first.
  EXPECT_EQ(missing.error().message,
            "no tensor 'model.embed_token.weight' in 'bad.safetensors': 'model' has no member 'embed_token'; "
            "closest existing names: 'model.embed_tokens', 'model.norm'");
  auto one_d = find_embedding_tensor(*file, "model.norm.weight");
  ASSERT_FALSE(one_d.ok());
  EXPECT_EQ(one_d.error().code, ErrorCode::kUnsupported);
  EXPECT_THAT(one_d.error().message, HasSubstr("has shape [4]; an embedding table must be 2-D"));
}

// ---- copy with one tensor replaced -----------------------------------------

class CopyWithReplacedTensor : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_dir();
    src_path_ = dir_ + "/src.safetensors";
    ASSERT_TRUE(write_safetensors(src_path_, {{"format", "pt"}},
                                  {{"first", "F32", {3}, f32_bytes({1, 2, 3})},
                                   {"emb", "BF16", {2, 3}, u16_bytes({1, 2, 3, 4, 5, 6})},
                                   {"half", "F16", {4}, u16_bytes({7, 8, 9, 10})},
                                   {"last", "I32", {2}, f32_bytes({4, 5})}})
                    .ok());
    auto file = SafetensorsFile::open(src_path_);
    ASSERT_TRUE(file.ok());
    src_ = std::make_unique<SafetensorsFile>(std::move(file).value());
  }

  // Every byte outside `name`'s data is unchanged.
  void expect_only_tensor_changed(const std::string& out_path, const std::string& name,
                                  const std::vector<uint8_t>& expected_data) {
    const std::vector<uint8_t> before = read_all(src_path_);
    const std::vector<uint8_t> after = read_all(out_path);
    ASSERT_EQ(before.size(), after.size());
    const SafetensorsTensor* t = src_->find(name);
    for (size_t i = 0; i < before.size(); ++i) {
      if (i < t->begin || i >= t->end) {
        ASSERT_EQ(before[i], after[i]) << "byte " << i;
      }
    }
    EXPECT_EQ(std::vector<uint8_t>(after.begin() + t->begin, after.begin() + t->end), expected_data);
  }

  std::string dir_, src_path_;
  std::unique_ptr<SafetensorsFile> src_;
};

TEST_F(CopyWithReplacedTensor, Bf16ValuesAreRoundedToNearestEven) {
  const float ulp = std::ldexp(1.0f, -7);
  const std::vector<float> values = {1.0f + ulp / 2, 1.0f + 3 * ulp / 2, -2.0f, 0.1f, 1.0f + ulp / 2 + 1e-6f, 0.0f};
  const std::string out = dir_ + "/out.safetensors";
  Status s = copy_with_replaced_tensor(*src_, "emb", values.data(), out);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  expect_only_tensor_changed(out, "emb", u16_bytes({0x3F80, 0x3F82, 0xC000, 0x3DCD, 0x3F81, 0x0000}));
  auto copy = SafetensorsFile::open(out);
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(copy->metadata().at("format"), "pt");
  auto back = copy->read_float("emb");
  ASSERT_TRUE(back.ok());
  EXPECT_THAT(*back, ElementsAre(1.0f, 1.015625f, -2.0f, 0.10009765625f, 1.0078125f, 0.0f));
  // Nothing but the output was created (the temporary file was renamed).
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 2);
}

TEST_F(CopyWithReplacedTensor, F16AndF32) {
  const std::vector<float> halves = {1.0f + std::ldexp(1.0f, -11), 65520.0f, std::ldexp(3.0f, -25), -0.5f};
  const std::string out16 = dir_ + "/out16.safetensors";
  ASSERT_TRUE(copy_with_replaced_tensor(*src_, "half", halves.data(), out16).ok());
  expect_only_tensor_changed(out16, "half", u16_bytes({0x3C00, 0x7C00, 0x0002, 0xB800}));

  const std::vector<float> floats = {0.1f, -3.0e-30f, 7.0f};
  const std::string out32 = dir_ + "/out32.safetensors";
  ASSERT_TRUE(copy_with_replaced_tensor(*src_, "first", floats.data(), out32).ok());
  expect_only_tensor_changed(out32, "first", f32_bytes(floats));
}

TEST_F(CopyWithReplacedTensor, RefusesSourceMissingTensorAndNonFloat) {
  const std::vector<uint8_t> before = read_all(src_path_);
  const float values[6] = {};
  Status s = copy_with_replaced_tensor(*src_, "emb", values, src_path_);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("is the input checkpoint"));
  s = copy_with_replaced_tensor(*src_, "emb", values, dir_ + "/./src.safetensors");  // same file, other spelling
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(read_all(src_path_), before);

  s = copy_with_replaced_tensor(*src_, "nope", values, dir_ + "/out.safetensors");
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  s = copy_with_replaced_tensor(*src_, "last", values, dir_ + "/out.safetensors");
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'last' of dtype I32"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/out.safetensors"));
}

}  // namespace
}  // namespace qemb
