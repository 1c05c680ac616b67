#include "qemb/tokens.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>
#include <type_traits>

#include "qemb/npy.h"

#include "support/temp_dir.h"

namespace qemb {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string test_dir() { return qemb::testing::per_test_dir("qemb_io_tokens_"); }

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

void expect_error(const Result<std::vector<int64_t>>& r, ErrorCode code, const std::string& substring) {
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << substring;
  EXPECT_EQ(r.error().code, code) << r.error().to_string();
  EXPECT_THAT(r.error().message, HasSubstr(substring));
}

TEST(ParseTokenList, CommasAndWhitespace) {
  EXPECT_THAT(*parse_token_list("1,2,3"), ElementsAre(1, 2, 3));
  EXPECT_THAT(*parse_token_list("1 2\t3\n4"), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(*parse_token_list(" 1 , 2 ,3\n, 4 "), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(*parse_token_list("-5, +7, 0, -0"), ElementsAre(-5, 7, 0, 0));
  EXPECT_THAT(*parse_token_list("9223372036854775807,-9223372036854775808"), ElementsAre(INT64_MAX, INT64_MIN));
  EXPECT_THAT(*parse_token_list("# ids\n1, 2 # two\n3#three\n"), ElementsAre(1, 2, 3));
  EXPECT_THAT(*parse_token_list("1\r\n2\r\n"), ElementsAre(1, 2));
}

TEST(ParseTokenList, EmptyTextGivesNoIds) {
  EXPECT_THAT(*parse_token_list(""), IsEmpty());
  EXPECT_THAT(*parse_token_list("  \n\t"), IsEmpty());
  EXPECT_THAT(*parse_token_list("# nothing here\n"), IsEmpty());
}

TEST(ParseTokenList, EmptyItems) {
  expect_error(parse_token_list("1,,2"), ErrorCode::kParseError, "token list item 1 is empty");
  expect_error(parse_token_list("1, ,2"), ErrorCode::kParseError, "token list item 1 is empty");
  expect_error(parse_token_list(",1"), ErrorCode::kParseError, "token list item 0 is empty");
  expect_error(parse_token_list("1,2,"), ErrorCode::kParseError,
               "token list item 2 is empty (the list ends with a comma)");
  expect_error(parse_token_list(","), ErrorCode::kParseError, "token list item 0 is empty");
}

TEST(ParseTokenList, NonNumericText) {
  expect_error(parse_token_list("1, x, 3"), ErrorCode::kParseError, "token list item 1 'x' is not an integer");
  expect_error(parse_token_list("1 2.5"), ErrorCode::kParseError, "token list item 1 '2.5' is not an integer");
  expect_error(parse_token_list("12abc"), ErrorCode::kParseError, "token list item 0 '12abc'");
  expect_error(parse_token_list("0x10"), ErrorCode::kParseError, "item 0 '0x10'");
  expect_error(parse_token_list("--1"), ErrorCode::kParseError, "item 0 '--1'");
  expect_error(parse_token_list("+-1"), ErrorCode::kParseError, "item 0 '+-1'");
  expect_error(parse_token_list("+"), ErrorCode::kParseError, "item 0 '+'");
  expect_error(parse_token_list("[1, 2]"), ErrorCode::kParseError, "item 0 '[1'");
  expect_error(parse_token_list("1, 2\n3, abc"), ErrorCode::kParseError, "token list item 3 (line 2) 'abc'");
  expect_error(parse_token_list(std::string(100, 'z')), ErrorCode::kParseError, std::string(40, 'z') + "...'");
}

TEST(ParseTokenList, Overflow) {
  expect_error(parse_token_list("1, 9223372036854775808"), ErrorCode::kParseError,
               "token list item 1 '9223372036854775808' does not fit in a 64-bit integer");
  expect_error(parse_token_list("-9223372036854775809"), ErrorCode::kParseError, "does not fit");
}

TEST(ReadTokenFile, Text) {
  const std::string dir = test_dir();
  write_text(dir + "/ids.txt", "# prompt\n1, 17, 42\n99 128\n");
  auto ids = read_token_file(dir + "/ids.txt");
  ASSERT_TRUE(ids.ok()) << ids.error().to_string();
  EXPECT_THAT(*ids, ElementsAre(1, 17, 42, 99, 128));

  write_text(dir + "/bad.txt", "1, 2\nthree\n");
  auto bad = read_token_file(dir + "/bad.txt");
  expect_error(bad, ErrorCode::kParseError, "token file '" + dir + "/bad.txt': token list item 2 (line 2) 'three'");

  write_text(dir + "/empty.txt", "");
  EXPECT_THAT(*read_token_file(dir + "/empty.txt"), IsEmpty());
  expect_error(read_token_file(dir + "/missing.txt"), ErrorCode::kNotFound, "missing.txt");
}

template <typename T>
std::vector<uint8_t> le_bytes(const std::vector<T>& values) {
  std::vector<uint8_t> out;
  for (T v : values) {
    auto u = static_cast<std::make_unsigned_t<T>>(v);
    for (size_t b = 0; b < sizeof(T); ++b) out.push_back(static_cast<uint8_t>(u >> (8 * b)));
  }
  return out;
}

TEST(ReadTokenFile, NpyIntegerDtypesRankZeroToTwo) {
  const std::string dir = test_dir();
  ASSERT_TRUE(write_npy(dir + "/i4.npy", "<i4", {2, 2}, le_bytes<int32_t>({1, -2, 3, 2147483647})).ok());
  EXPECT_THAT(*read_token_file(dir + "/i4.npy"), ElementsAre(1, -2, 3, 2147483647));
  ASSERT_TRUE(write_npy(dir + "/i8.npy", "<i8", {3}, le_bytes<int64_t>({5, INT64_MIN, 7})).ok());
  EXPECT_THAT(*read_token_file(dir + "/i8.npy"), ElementsAre(5, INT64_MIN, 7));
  ASSERT_TRUE(write_npy(dir + "/i2.npy", "<i2", {1, 2}, le_bytes<int16_t>({-1, 300})).ok());
  EXPECT_THAT(*read_token_file(dir + "/i2.npy"), ElementsAre(-1, 300));
  ASSERT_TRUE(write_npy(dir + "/u2.npy", "<u2", {2}, le_bytes<uint16_t>({65535, 0})).ok());
  EXPECT_THAT(*read_token_file(dir + "/u2.npy"), ElementsAre(65535, 0));
  ASSERT_TRUE(write_npy(dir + "/u4.npy", "<u4", {1}, le_bytes<uint32_t>({4000000000u})).ok());
  EXPECT_THAT(*read_token_file(dir + "/u4.npy"), ElementsAre(4000000000ll));
  ASSERT_TRUE(write_npy(dir + "/u1.npy", "|u1", {2}, std::vector<uint8_t>{200, 3}).ok());
  EXPECT_THAT(*read_token_file(dir + "/u1.npy"), ElementsAre(200, 3));
  ASSERT_TRUE(write_npy(dir + "/i1.npy", "|i1", {2}, std::vector<uint8_t>{0xFF, 3}).ok());
  EXPECT_THAT(*read_token_file(dir + "/i1.npy"), ElementsAre(-1, 3));
  ASSERT_TRUE(write_npy(dir + "/big.npy", ">i4", {2}, std::vector<uint8_t>{0, 0, 1, 2, 0xFF, 0xFF, 0xFF, 0xFE}).ok());
  EXPECT_THAT(*read_token_file(dir + "/big.npy"), ElementsAre(258, -2));
  ASSERT_TRUE(write_npy(dir + "/empty.npy", "<i8", {0}, std::vector<uint8_t>{}).ok());
  EXPECT_THAT(*read_token_file(dir + "/empty.npy"), IsEmpty());
}

// Ids are [N] or [batch, sequence]; a 3-D array is some other array (issue #5).
TEST(ReadTokenFile, NpyOfRankThreeIsRefused) {
  const std::string dir = test_dir();
  ASSERT_TRUE(write_npy(dir + "/cube.npy", "<i2", {1, 1, 2}, le_bytes<int16_t>({-1, 300})).ok());
  auto ids = read_token_file(dir + "/cube.npy");
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.error().code, ErrorCode::kUnsupported);
  EXPECT_EQ(ids.error().message, "token file '" + dir + "/cube.npy' holds a 3-D array; token ids must be a 1-D or "
                                 "2-D array ([N] or [batch, sequence])");
  ASSERT_TRUE(write_npy(dir + "/scalar.npy", "<i8", {}, le_bytes<int64_t>({7})).ok());
  EXPECT_THAT(*read_token_file(dir + "/scalar.npy"), ElementsAre(7));
}

TEST(ReadTokenFile, NpyFortranOrderIsFlattenedInCOrder) {
  NpyArray array;
  array.dtype = "<i4";
  array.shape = {2, 3};
  array.fortran_order = true;
  array.data = le_bytes<int32_t>({1, 4, 2, 5, 3, 6});
  auto ids = tokens_from_npy(array, "f.npy");
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST(ReadTokenFile, NpyNonIntegerOrTooLarge) {
  const std::string dir = test_dir();
  ASSERT_TRUE(write_npy(dir + "/f.npy", "<f4", {1}, std::vector<uint8_t>(4)).ok());
  expect_error(read_token_file(dir + "/f.npy"), ErrorCode::kUnsupported,
               "holds dtype '<f4'; token ids must be integers");
  ASSERT_TRUE(write_npy(dir + "/b.npy", "|b1", {1}, std::vector<uint8_t>{1}).ok());
  expect_error(read_token_file(dir + "/b.npy"), ErrorCode::kUnsupported, "'|b1'");
  ASSERT_TRUE(write_npy(dir + "/u8.npy", "<u8", {2}, le_bytes<uint64_t>({1, 1ull << 63})).ok());
  expect_error(read_token_file(dir + "/u8.npy"), ErrorCode::kOutOfRange,
               "id 9223372036854775808 at position 1 does not fit");
  // A file with the magic but a broken header is an .npy error, not a text one.
  write_text(dir + "/broken.npy", std::string("\x93NUMPY\x01\x00\x05\x00{'a'", 14));
  expect_error(read_token_file(dir + "/broken.npy"), ErrorCode::kParseError, ".npy file");
}

// Issue 37, 7: `run --tokens-file ids.npy` held about 32 bytes an id. A
// TokenStream reads a regular-file .npy through its mapping, a piece at a
// time, and gives exactly what read_token_batch gives; other inputs are read
// whole, with read_token_batch's checks and messages.
TEST(TokenStream, ReadsWhatReadTokenBatchReadsInPieces) {
  const std::string dir = test_dir();
  ASSERT_TRUE(write_npy(dir + "/i4.npy", "<i4", {2, 3}, le_bytes<int32_t>({1, -2, 3, 2147483647, 5, 6})).ok());
  ASSERT_TRUE(write_npy(dir + "/big.npy", ">i4", {2}, std::vector<uint8_t>{0, 0, 1, 2, 0xFF, 0xFF, 0xFF, 0xFE}).ok());
  ASSERT_TRUE(write_npy(dir + "/u1.npy", "|u1", {3}, std::vector<uint8_t>{200, 3, 0}).ok());
  ASSERT_TRUE(write_npy(dir + "/one.npy", "<i8", {}, le_bytes<int64_t>({9})).ok());
  write_text(dir + "/ids.txt", "4, 5\n6 # comment\n");
  for (const char* name : {"i4.npy", "big.npy", "u1.npy", "one.npy", "ids.txt"}) {
    SCOPED_TRACE(name);
    auto whole = read_token_batch(dir + "/" + name);
    auto stream = TokenStream::open(dir + "/" + name);
    ASSERT_TRUE(whole.ok() && stream.ok());
    EXPECT_EQ((*stream)->shape(), whole->shape);
    ASSERT_EQ((*stream)->size(), whole->ids.size());
    std::vector<int64_t> got((*stream)->size());
    for (size_t first = 0; first < got.size(); first += 2) {  // in pieces of 2
      const size_t count = std::min<size_t>(2, got.size() - first);
      ASSERT_TRUE((*stream)->read(first, count, got.data() + first).ok());
    }
    EXPECT_EQ(got, whole->ids);
  }
  ASSERT_TRUE(write_npy(dir + "/u8.npy", "<u8", {3}, le_bytes<uint64_t>({1, 2, 1ull << 63})).ok());
  auto u8 = TokenStream::open(dir + "/u8.npy");
  ASSERT_TRUE(u8.ok());
  int64_t two[2];
  EXPECT_TRUE((*u8)->read(0, 2, two).ok());
  const Status s = (*u8)->read(1, 2, two);
  EXPECT_EQ(s.code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(s.message(), "token file '" + dir + "/u8.npy': id 9223372036854775808 at position 2 does not fit in a "
                         "64-bit signed integer");
  ASSERT_TRUE(write_npy(dir + "/f.npy", "<f4", {1}, std::vector<uint8_t>(4)).ok());
  auto f = TokenStream::open(dir + "/f.npy");
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.error().message, HasSubstr("holds dtype '<f4'; token ids must be integers"));
}

// Lookups come out as the ids' shape + [dim]: the batch keeps its shape.
TEST(ReadTokenBatch, KeepsTheShapeOfTheIds) {
  const std::string dir = test_dir();
  ASSERT_TRUE(write_npy(dir + "/bs.npy", "<i4", {2, 3}, le_bytes<int32_t>({1, 2, 3, 4, 5, 6})).ok());
  ASSERT_TRUE(write_npy(dir + "/one.npy", "<i8", {}, le_bytes<int64_t>({9})).ok());
  write_text(dir + "/ids.txt", "4, 5\n6 # comment\n");
  auto bs = read_token_batch(dir + "/bs.npy");
  ASSERT_TRUE(bs.ok()) << bs.error().message;
  EXPECT_THAT(bs->shape, ElementsAre(2, 3));
  EXPECT_THAT(bs->ids, ElementsAre(1, 2, 3, 4, 5, 6));
  auto one = read_token_batch(dir + "/one.npy");
  ASSERT_TRUE(one.ok()) << one.error().message;
  EXPECT_THAT(one->shape, IsEmpty());
  EXPECT_THAT(one->ids, ElementsAre(9));
  auto text = read_token_batch(dir + "/ids.txt");
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_THAT(text->shape, ElementsAre(3));
  EXPECT_THAT(text->ids, ElementsAre(4, 5, 6));
  std::filesystem::remove_all(dir);
}

// Token files are read once, so a FIFO works; it was "not a regular file".
TEST(ReadTokenBatch, ReadsAFifo) {
  const std::string dir = test_dir();
  const std::string fifo = dir + "/ids";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { write_text(fifo, "7 8 9"); });
  auto batch = read_token_batch(fifo);
  writer.join();
  ASSERT_TRUE(batch.ok()) << batch.error().message;
  EXPECT_THAT(batch->ids, ElementsAre(7, 8, 9));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace qemb
