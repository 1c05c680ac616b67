#include "qemb/npy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "support/temp_dir.h"

namespace qemb {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string test_dir() { return qemb::testing::per_test_dir("qemb_io_npy_"); }

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// A .npy file with the given version and header text, written by hand.
std::vector<uint8_t> make_npy(int major, const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out(kNpyMagic, kNpyMagic + 6);
  out.push_back(static_cast<uint8_t>(major));
  out.push_back(0);
  const int length_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < length_bytes; ++i) out.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Result<NpyArray> parse(const std::vector<uint8_t>& bytes) { return parse_npy(bytes.data(), bytes.size(), "t.npy"); }

void expect_error(const Result<NpyArray>& r, ErrorCode code, const std::string& substring) {
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << substring;
  EXPECT_EQ(r.error().code, code) << r.error().to_string();
  EXPECT_THAT(r.error().message, HasSubstr(substring));
}

TEST(NpyWrite, U16MatchesNumpyLayoutAndRoundTrips) {
  const std::string path = test_dir() + "/out.npy";
  const uint16_t values[6] = {0, 1, 2, 65535, 300, 7};
  ASSERT_TRUE(write_npy_u16(path, values, 2, 3).ok());
  const std::vector<uint8_t> bytes = read_all(path);
  // As numpy writes it: the data starts at a 64-byte boundary (here 128).
  ASSERT_EQ(bytes.size(), 128u + 12u);
  EXPECT_EQ(std::memcmp(bytes.data(), "\x93NUMPY\x01\x00", 8), 0);
  EXPECT_EQ(bytes[8] | (bytes[9] << 8), 118);
  const std::string header(bytes.begin() + 10, bytes.begin() + 128);
  const std::string dict = "{'descr': '<u2', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(header, dict + std::string(118 - dict.size() - 1, ' ') + "\n");

  auto array = read_npy(path);
  ASSERT_TRUE(array.ok()) << array.error().to_string();
  EXPECT_EQ(array->dtype, "<u2");
  EXPECT_THAT(array->shape, ElementsAre(2, 3));
  EXPECT_FALSE(array->fortran_order);
  EXPECT_EQ(array->num_elements(), 6);
  EXPECT_EQ(array->item_size(), 2);
  ASSERT_EQ(array->data.size(), 12u);
  EXPECT_EQ(std::memcmp(array->data.data(), values, 12), 0);
}

TEST(NpyWrite, F32AndGenericShapes) {
  const std::string dir = test_dir();
  const float values[4] = {1.5f, -0.0f, 3.0e-38f, 1e30f};
  ASSERT_TRUE(write_npy_f32(dir + "/f.npy", values, 1, 4).ok());
  auto f = read_npy(dir + "/f.npy");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->dtype, "<f4");
  EXPECT_THAT(f->shape, ElementsAre(1, 4));
  EXPECT_EQ(std::memcmp(f->data.data(), values, 16), 0);

  const std::vector<uint8_t> five = {1, 2, 3, 4, 5};
  ASSERT_TRUE(write_npy(dir + "/v.npy", "|u1", {5}, five).ok());
  const std::vector<uint8_t> raw = read_all(dir + "/v.npy");
  EXPECT_THAT(std::string(raw.begin() + 10, raw.end()), HasSubstr("'shape': (5,), }"));
  auto v = read_npy(dir + "/v.npy");
  ASSERT_TRUE(v.ok());
  EXPECT_THAT(v->shape, ElementsAre(5));
  EXPECT_EQ(v->data, five);

  const std::vector<uint8_t> scalar = {42, 0, 0, 0, 0, 0, 0, 0};
  ASSERT_TRUE(write_npy(dir + "/s.npy", "<i8", {}, scalar).ok());
  auto s = read_npy(dir + "/s.npy");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->num_elements(), 1);
  EXPECT_EQ(s->data, scalar);

  ASSERT_TRUE(write_npy(dir + "/e.npy", "<f4", {0, 3}, std::vector<uint8_t>{}).ok());
  auto e = read_npy(dir + "/e.npy");
  ASSERT_TRUE(e.ok());
  EXPECT_THAT(e->shape, ElementsAre(0, 3));
}

TEST(NpyWrite, RejectsWrongByteCountAndDtypeWithoutWriting) {
  const std::string dir = test_dir();
  Status s = write_npy(dir + "/x.npy", "<i4", {2, 2}, std::vector<uint8_t>(12));
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("a <i4 array of shape (2, 2) needs 16 bytes, got 12"));
  s = write_npy(dir + "/x.npy", "<U4", {1}, std::vector<uint8_t>(16));
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(NpyRead, Versions2And3AndHeaderVariants) {
  const std::vector<uint8_t> data = {1, 0, 0, 0, 2, 0, 0, 0};
  auto v2 = parse(make_npy(2, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }\n", data));
  ASSERT_TRUE(v2.ok()) << v2.error().to_string();
  EXPECT_THAT(v2->shape, ElementsAre(2));
  auto v3 = parse(make_npy(3, "{\"shape\": [1, 2], \"descr\": \"<i4\", \"fortran_order\": True}", data));
  ASSERT_TRUE(v3.ok()) << v3.error().to_string();
  EXPECT_THAT(v3->shape, ElementsAre(1, 2));
  EXPECT_TRUE(v3->fortran_order);
  auto huge_empty =
      parse(make_npy(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4)}", {}));
  ASSERT_TRUE(huge_empty.ok()) << huge_empty.error().to_string();
  EXPECT_EQ(huge_empty->num_elements(), 0);
  EXPECT_TRUE(npy_c_order_data(*huge_empty).empty());
  auto py2 = parse(make_npy(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2L,), }   \n", data));
  ASSERT_TRUE(py2.ok()) << py2.error().to_string();
  EXPECT_THAT(py2->shape, ElementsAre(2));
}

TEST(NpyRead, BadMagicVersionAndHeader) {
  expect_error(parse({'N', 'U', 'M', 'P', 'Y', 0, 1, 0}), ErrorCode::kParseError, "does not start with the .npy magic");
  expect_error(parse({}), ErrorCode::kParseError, "magic");
  expect_error(parse({0x93, 'N', 'U', 'M', 'P', 'Y', 1}), ErrorCode::kParseError, "truncated inside the header");
  expect_error(parse(make_npy(4, "{}", {})), ErrorCode::kUnsupported, "format version 4.0 is not supported");
  std::vector<uint8_t> long_header = make_npy(1, "{'descr': '<i4'}", {});
  long_header[8] = 0xFF;
  expect_error(parse(long_header), ErrorCode::kParseError, "header length 255 runs past the end of the file");
  expect_error(parse(make_npy(1, "{'descr': '<i4', 'shape': (1,)}", {0, 0, 0, 0})), ErrorCode::kParseError,
               "header must contain 'descr', 'fortran_order' and 'shape'");
  expect_error(parse(make_npy(1, "{'descr': '<i4', 'fortran_order': 0, 'shape': (1,)}", {0, 0, 0, 0})),
               ErrorCode::kParseError, "'fortran_order' must be True or False");
  expect_error(parse(make_npy(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (-1,)}", {})),
               ErrorCode::kParseError, "'shape' must hold non-negative integers");
  expect_error(parse(make_npy(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), 'x': 1}", {0, 0, 0, 0})),
               ErrorCode::kParseError, "unexpected header key 'x'");
  expect_error(parse(make_npy(1, "{'descr': '<i4', 'fortran_order': False", {})), ErrorCode::kParseError,
               "malformed header dictionary");
  expect_error(parse(make_npy(1, "[1, 2]", {})), ErrorCode::kParseError, "header is not a dictionary");
  expect_error(parse(make_npy(1, std::string(40, '('), {})), ErrorCode::kParseError, "nests too deeply");
}

TEST(NpyRead, WrongDataSize) {
  const std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }\n";
  expect_error(parse(make_npy(1, header, std::vector<uint8_t>(15))), ErrorCode::kParseError,
               "a <i4 array of shape (2, 2) needs 16 data bytes but the file has 15 (truncated)");
  expect_error(parse(make_npy(1, header, std::vector<uint8_t>(17))), ErrorCode::kParseError,
               "needs 16 data bytes but the file has 17");
}

TEST(NpyRead, UnsupportedDtypes) {
  expect_error(parse(make_npy(1, "{'descr': '<U5', 'fortran_order': False, 'shape': (1,), }", {})),
               ErrorCode::kUnsupported, ".npy dtype '<U5' is not supported");
  expect_error(parse(make_npy(1, "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", {})),
               ErrorCode::kUnsupported, "'|O'");
  expect_error(parse(make_npy(1, "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }", {})),
               ErrorCode::kUnsupported, "structured dtypes are not supported");
}

TEST(NpyDtype, ParsesSimpleDescrs) {
  auto d = parse_npy_dtype("<i8");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->byte_order, '<');
  EXPECT_EQ(d->kind, 'i');
  EXPECT_EQ(d->item_size, 8);
  EXPECT_EQ(parse_npy_dtype(">f2")->byte_order, '>');
  EXPECT_EQ(parse_npy_dtype("=u4")->byte_order, '<');
  EXPECT_EQ(parse_npy_dtype("|b1")->kind, 'b');
  EXPECT_EQ(parse_npy_dtype("<c16")->item_size, 16);
  EXPECT_FALSE(parse_npy_dtype("<i3").ok());
  EXPECT_FALSE(parse_npy_dtype("<f1").ok());
  EXPECT_FALSE(parse_npy_dtype("<M8").ok());
  EXPECT_FALSE(parse_npy_dtype("i4").ok());
}

TEST(NpyRead, FortranOrderToCOrder) {
  // [[1, 2, 3], [4, 5, 6]] stored column-major: 1 4 2 5 3 6.
  const std::vector<uint8_t> data = {1, 4, 2, 5, 3, 6};
  auto array = parse(make_npy(1, "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3), }", data));
  ASSERT_TRUE(array.ok());
  EXPECT_THAT(npy_c_order_data(*array), ElementsAre(1, 2, 3, 4, 5, 6));
  array->fortran_order = false;
  EXPECT_EQ(npy_c_order_data(*array), data);
}

TEST(NpyRead, MissingFile) {
  auto r = read_npy(test_dir() + "/missing.npy");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(r.error().message, HasSubstr("missing.npy"));
}

// Written in pieces, the file is the same as written at once; a wrong byte
// count is an error and leaves no file.
TEST(NpyWriter, PiecesMakeTheSameFileAndTheCountIsChecked) {
  const std::string dir = test_dir();
  const std::vector<uint8_t> data = {1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0};
  ASSERT_TRUE(write_npy(dir + "/whole.npy", "<u2", {2, 3}, data).ok());
  {
    auto w = NpyWriter::create(dir + "/pieces.npy", "<u2", {2, 3});
    ASSERT_TRUE(w.ok()) << w.error().message;
    ASSERT_TRUE((*w)->write(data.data(), 5).ok());
    ASSERT_TRUE((*w)->write(data.data() + 5, 7).ok());
    EXPECT_THAT((*w)->write(data.data(), 1).message(), HasSubstr("more than the 12 data bytes its shape holds"));
    ASSERT_TRUE((*w)->finish().ok());
  }
  EXPECT_EQ(read_all(dir + "/pieces.npy"), read_all(dir + "/whole.npy"));
  {
    auto w = NpyWriter::create(dir + "/short.npy", "<u2", {2, 3});
    ASSERT_TRUE(w.ok()) << w.error().message;
    ASSERT_TRUE((*w)->write(data.data(), 10).ok());
    EXPECT_THAT((*w)->finish().message(), HasSubstr("10 of its 12 data bytes were given"));
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/short.npy"));
  auto bad = NpyWriter::create(dir + "/bad.npy", "<u2", {-1, 3});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message, HasSubstr("invalid .npy shape"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace qemb
