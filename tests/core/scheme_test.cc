// The scheme descriptor (qemb/scheme.h): every scheme of the table, its
// properties and names, and the parser's errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/ir.h"
#include "qemb/scheme.h"

namespace qemb {
namespace {

TEST(Scheme, TheTable) {
  struct Want {
    const char* name;
    int weight_bits, weight_qmax, activation_bits;
    int32_t activation_qmax;
  };
  const Want want[] = {{"16a4w", 4, 7, 16, 65535}, {"16a8w", 8, 127, 16, 65535}, {"16a2w", 2, 1, 16, 65535},
                       {"8a4w", 4, 7, 8, 255},     {"8a8w", 8, 127, 8, 255},     {"8a2w", 2, 1, 8, 255},
                       {"w4", 4, 7, 0, 0},         {"w8", 8, 127, 0, 0},         {"w2", 2, 1, 0, 0}};
  ASSERT_EQ(all_schemes().size(), std::size(want));
  for (size_t i = 0; i < std::size(want); ++i) {
    const Scheme s = all_schemes()[i];
    SCOPED_TRACE(want[i].name);
    EXPECT_STREQ(s.name(), want[i].name);
    EXPECT_STREQ(to_string(s), want[i].name);
    EXPECT_EQ(s.weight_bits(), want[i].weight_bits);
    EXPECT_EQ(s.weight_qmax(), want[i].weight_qmax);
    EXPECT_EQ(s.activation_bits(), want[i].activation_bits);
    EXPECT_EQ(s.activation_qmax(), want[i].activation_qmax);
    EXPECT_EQ(s.weight_only(), want[i].activation_bits == 0);
    Result<Scheme> parsed = parse_scheme(want[i].name);
    ASSERT_TRUE(parsed.ok());
    EXPECT_TRUE(*parsed == s);
    Result<Scheme> found = find_scheme(want[i].weight_bits, want[i].activation_bits);
    ASSERT_TRUE(found.ok());
    EXPECT_TRUE(*found == s);
    // The weight format every scheme stores is in the storage format table,
    // with the scheme's range.
    const StorageFormat* f = find_storage_format(DataType::kSFixedPoint8, s.weight_bits());
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->qmax, s.weight_qmax());
    EXPECT_EQ(f->qmin, -s.weight_qmax());
  }
  EXPECT_TRUE(Scheme() == Scheme::k16a4w);  // the default, as before
}

TEST(Scheme, BytesAndBitsPerValue) {
  EXPECT_EQ(Scheme::kW2.packed_row_bytes(5), 2u);    // four values a byte
  EXPECT_EQ(Scheme::k8a4w.packed_row_bytes(5), 3u);  // two a byte
  EXPECT_EQ(Scheme::k16a8w.packed_row_bytes(5), 5u);
  // The row's float32 scale counts: 128 values of 2 bits + 32 bits = 288 bits.
  EXPECT_DOUBLE_EQ(Scheme::k16a2w.bits_per_value(128), 288.0 / 128.0);
  EXPECT_DOUBLE_EQ(Scheme::kW4.bits_per_value(128), (64.0 * 8 + 32) / 128.0);
  EXPECT_DOUBLE_EQ(Scheme::k8a8w.bits_per_value(3), (3.0 * 8 + 32) / 3.0);
  EXPECT_DOUBLE_EQ(Scheme::kW2.bits_per_value(0), 0.0);
}

TEST(Scheme, ParseErrorsListTheSchemes) {
  const std::string names = "16a4w, 16a8w, 16a2w, 8a4w, 8a8w, 8a2w, w4, w8, w2";
  EXPECT_EQ(scheme_names(), names);
  Result<Scheme> bad = parse_scheme("16a3w");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.error().message, "unknown scheme '16a3w': expected one of " + names);
  Result<Scheme> grouped = parse_scheme("w4-g32");
  ASSERT_FALSE(grouped.ok());
  EXPECT_EQ(grouped.error().message,
            "unknown scheme 'w4-g32' (group-wise scales (-g<B>) and asymmetric rows (-asym) are not served yet: "
            "every scheme here is per-row symmetric): expected one of " + names);
  EXPECT_FALSE(parse_scheme("").ok());
  EXPECT_FALSE(parse_scheme("W4").ok());  // names are exact
  Result<Scheme> none = find_scheme(3, 16);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message, "no scheme has 3-bit weights and 16-bit activations; the schemes are " + names);
  EXPECT_EQ(find_scheme(4, 0)->name(), std::string("w4"));
}

TEST(StorageFormat, Int2PacksFourToAByte) {
  const StorageFormat& f = *find_storage_format(DataType::kSFixedPoint8, 2);
  EXPECT_EQ(f.row_bytes(1), 1u);
  EXPECT_EQ(f.row_bytes(4), 1u);
  EXPECT_EQ(f.row_bytes(5), 2u);
  uint8_t row[2] = {0xFF, 0xFF};
  const int values[5] = {-1, 0, 1, -2, 1};  // -2: the one two's-complement value outside the range
  for (int j = 0; j < 5; ++j) f.store(row, j, values[j]);
  // Column 4k + i in bits 2i, 2i + 1: -1 = 0b11, 0 = 0b00, 1 = 0b01, -2 = 0b10.
  EXPECT_EQ(row[0], 0b10'01'00'11);
  EXPECT_EQ(row[1] & 0b11, 0b01);
  EXPECT_EQ(row[1] >> 2, 0b111111);  // the other fields are untouched
  for (int j = 0; j < 5; ++j) EXPECT_EQ(f.load(row, j), values[j]) << j;
}

TEST(StorageFormat, Uint8IsUnsigned) {
  const StorageFormat& f = *find_storage_format(DataType::kUFixedPoint8, 0);
  EXPECT_EQ(f.bits, 8);
  EXPECT_EQ(f.qmin, 0);
  EXPECT_EQ(f.qmax, 255);
  uint8_t row[2];
  f.store(row, 0, 255);
  f.store(row, 1, 128);
  EXPECT_EQ(f.load(row, 0), 255);
  EXPECT_EQ(f.load(row, 1), 128);
  // The int8 format reads the same byte signed.
  EXPECT_EQ(find_storage_format(DataType::kSFixedPoint8, 8)->load(row, 0), -1);
  EXPECT_EQ(to_string(DataType::kUFixedPoint8), std::string("UFIXED_POINT_8"));
  EXPECT_TRUE(parse_data_type("UFIXED_POINT_8").ok());
  EXPECT_EQ(storage_widths(DataType::kSFixedPoint8), "2, 4 or 8");
}

}  // namespace
}  // namespace qemb
