// Every ggml block type qemb reads, against ggml itself: tests/data/gguf holds
// one GGUF per type written by ggml (64 rows of 512 values) and ggml's own
// dequantization of it (see its MANIFEST.txt). The reader must give the same
// float32 bits, whole, by row ranges, and through Checkpoint::table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "qemb/checkpoint.h"
#include "qemb/gguf.h"
#include "support/checkpoints.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qemb {
namespace {

using namespace qemb::testing;

const std::string kData = QEMB_SOURCE_DIR "/tests/data/gguf/";
constexpr int64_t kRows = 64, kCols = 512;
constexpr char kAll[] =
    "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS";

struct Fixture {
  std::string type, file;  // ggml's name ("q4_K") and the .gguf
  uint32_t id = 0;
};

// The manifest's table: every fixture ggml wrote, so a new one is tested
// without touching this file.
std::vector<Fixture> fixtures() {
  std::ifstream in(kData + "MANIFEST.txt");
  EXPECT_TRUE(in) << "cannot read " << kData << "MANIFEST.txt";
  std::vector<Fixture> out;
  std::string line;
  bool table = false;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    Fixture f;
    fields >> f.type >> f.file;
    if (f.type == "type") {  // the header row
      table = true;
      continue;
    }
    if (table && (fields >> f.id)) out.push_back(f);
  }
  return out;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::vector<float> floats_of(const std::string& path) {
  const std::vector<uint8_t> bytes = read_bytes(path);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

// Bit-for-bit: memcmp, so -0.0 and NaN payloads count too; names the first
// differing value.
void expect_same_bits(const float* got, const float* want, size_t count, const std::string& what) {
  if (std::memcmp(got, want, count * sizeof(float)) == 0) return;
  for (size_t i = 0; i < count; ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      ADD_FAILURE() << what << ": value " << i << " (row " << i / kCols << ", column " << i % kCols << ") is "
                    << got[i] << ", ggml gives " << want[i];
      return;
    }
}

TEST(GgufTypes, TheManifestListsEveryTypeQembReads) {
  const std::vector<Fixture> all = fixtures();
  ASSERT_EQ(all.size(), 15u);
  std::string names;
  for (const Fixture& f : all) {
    const GgufTypeInfo* info = gguf_type_info(f.id);
    ASSERT_NE(info, nullptr) << f.type;
    EXPECT_EQ(info->name, upper(f.type));
    EXPECT_NE(info->to_float, nullptr) << f.type;
    EXPECT_TRUE(is_gguf_float_readable(info->name)) << f.type;
    if (!names.empty()) names += ' ';
    names += info->name;
  }
  EXPECT_EQ(names, "F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS");
  EXPECT_EQ(gguf_readable_types(), kAll);
  for (const char* t : {"F32", "F16", "BF16"}) EXPECT_FALSE(is_gguf_quantized(t)) << t;
  for (const char* t : {"Q8_0", "Q4_1", "Q2_K", "Q6_K", "IQ4_NL", "IQ4_XS", "IQ2_XXS"}) EXPECT_TRUE(is_gguf_quantized(t)) << t;
  for (const char* t : {"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M", "TQ1_0", "TQ2_0", "MXFP4",
                        "Q8_1", "Q8_K", "I8", "F64", "Q4_0_4_4", "NOPE"})
    EXPECT_FALSE(is_gguf_float_readable(t)) << t;
}

TEST(GgufTypes, ReadRowsFloatIsBitExactWithGgml) {
  for (const Fixture& fx : fixtures()) {
    SCOPED_TRACE(fx.type);
    auto f = GgufFile::open(kData + fx.file);
    ASSERT_TRUE(f.ok()) << f.error().to_string();
    ASSERT_EQ(f->tensors().size(), 1u);
    const GgufTensor& t = f->tensors()[0];
    EXPECT_EQ(t.name, "token_embd.weight");
    EXPECT_EQ(t.type, upper(fx.type));
    EXPECT_EQ(t.type_id, fx.id);
    ASSERT_EQ(t.shape, (std::vector<int64_t>{kRows, kCols}));
    const std::vector<float> want = floats_of(kData + fx.type + ".f32");
    ASSERT_EQ(want.size(), static_cast<size_t>(kRows * kCols));

    std::vector<float> got(want.size() + 1, 7.0f);  // one sentinel past the end
    ASSERT_TRUE(f->read_rows_float(t, 0, kRows, got.data()).ok());
    expect_same_bits(got.data(), want.data(), want.size(), "all rows");
    EXPECT_EQ(got.back(), 7.0f) << "wrote past the rows asked for";
    // Row ranges start at any row and read only what they are asked.
    for (const auto& [begin, end] : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 2}, {5, 17}, {31, 64}, {63, 64}}) {
      std::vector<float> part(static_cast<size_t>((end - begin) * kCols) + 1, 7.0f);
      ASSERT_TRUE(f->read_rows_float(t, begin, end, part.data()).ok());
      expect_same_bits(part.data(), want.data() + begin * kCols, part.size() - 1,
                       "rows [" + std::to_string(begin) + ", " + std::to_string(end) + ")");
      EXPECT_EQ(part.back(), 7.0f);
    }
    float untouched = 7.0f;
    ASSERT_TRUE(f->read_rows_float(t, 9, 9, &untouched).ok());
    EXPECT_EQ(untouched, 7.0f);
    expect_error(f->read_rows_float(t, 60, 65, got.data()), ErrorCode::kOutOfRange,
                 "rows [60, 65) are outside tensor 'token_embd.weight' with 64 rows");
  }
}

TEST(GgufTypes, CheckpointTableIsBitExactWithGgml) {
  for (const Fixture& fx : fixtures()) {
    SCOPED_TRACE(fx.type);
    auto c = Checkpoint::open(kData + fx.file);
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    EXPECT_EQ(c->format(), CheckpointFormat::kGguf);
    auto name = c->find_embedding("");
    ASSERT_TRUE(name.ok()) << name.error().to_string();
    EXPECT_EQ(*name, "token_embd.weight");
    auto table = c->table(*name);
    ASSERT_TRUE(table.ok()) << table.error().to_string();
    EXPECT_EQ(table->info().dtype, upper(fx.type));
    EXPECT_EQ(table->rows(), kRows);
    EXPECT_EQ(table->dim(), kCols);
    EXPECT_EQ(table->source_quantized(), fx.id != 0 && fx.id != 1 && fx.id != 30);
    const std::vector<float> want = floats_of(kData + fx.type + ".f32");
    std::vector<float> got(want.size());
    ASSERT_TRUE(table->read_rows(0, kRows, got.data()).ok());
    expect_same_bits(got.data(), want.data(), want.size(), "all rows");
    ASSERT_TRUE(table->read_rows(40, 48, got.data()).ok());
    expect_same_bits(got.data(), want.data() + 40 * kCols, 8 * kCols, "rows [40, 48)");
  }
}

// The dequantized tables are what they claim to be: near the float table ggml
// quantized (a wrong layout would scatter values: about 0 dB). Floors a dB or
// two under what each type gives on this table.
TEST(GgufTypes, DequantizedTablesTrackTheirSource) {
  const std::vector<float> source = floats_of(kData + "source.f32");
  ASSERT_EQ(source.size(), static_cast<size_t>(kRows * kCols));
  const std::map<std::string, double> floor_db = {
      {"f16", 70}, {"bf16", 54}, {"q8_0", 40}, {"q4_0", 16}, {"q4_1", 19}, {"q5_0", 22}, {"q5_1", 25}, {"q2_K", 8},
      {"q3_K", 13}, {"q4_K", 20}, {"q5_K", 25}, {"q6_K", 31}, {"iq4_nl", 18}, {"iq4_xs", 18}};
  for (const Fixture& fx : fixtures()) {
    SCOPED_TRACE(fx.type);
    const std::vector<float> q = floats_of(kData + fx.type + ".f32");
    ASSERT_EQ(q.size(), source.size());
    double err = 0.0, energy = 0.0;
    for (size_t i = 0; i < q.size(); ++i) {
      err += (static_cast<double>(q[i]) - source[i]) * (static_cast<double>(q[i]) - source[i]);
      energy += static_cast<double>(source[i]) * source[i];
    }
    if (fx.type == "f32") {
      EXPECT_EQ(err, 0.0);
    } else {
      ASSERT_TRUE(floor_db.count(fx.type));
      EXPECT_GT(10.0 * std::log10(energy / err), floor_db.at(fx.type));
    }
  }
}

// ---- types qemb does not read, and files that lie about their blocks ----------

std::vector<uint8_t> fixture_bytes(const std::string& file) { return read_bytes(kData + file); }

TEST(GgufTypes, OtherTypesAreRefusedByName) {
  TempDir dir;
  struct Refused {
    uint32_t id;
    const char* name;
    uint32_t block_elements, block_bytes;
  };
  for (const Refused r : {Refused{16, "IQ2_XXS", 256, 66}, Refused{17, "IQ2_XS", 256, 74}, Refused{22, "IQ2_S", 256, 82},
                          Refused{18, "IQ3_XXS", 256, 98}, Refused{21, "IQ3_S", 256, 110}, Refused{19, "IQ1_S", 256, 50},
                          Refused{29, "IQ1_M", 256, 56}, Refused{34, "TQ1_0", 256, 54}, Refused{35, "TQ2_0", 256, 66},
                          Refused{39, "MXFP4", 32, 17}, Refused{9, "Q8_1", 32, 36}, Refused{15, "Q8_K", 256, 292},
                          Refused{24, "I8", 1, 1}, Refused{28, "F64", 1, 8}}) {
    SCOPED_TRACE(r.name);
    const GgufTypeInfo* info = gguf_type_info(r.id);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->name, std::string(r.name));
    EXPECT_EQ(info->block_elements, r.block_elements);
    EXPECT_EQ(info->block_bytes, r.block_bytes);
    EXPECT_EQ(info->to_float, nullptr);
    const std::string path = dir.file(std::string(r.name) + ".gguf");
    ASSERT_TRUE(write_gguf(path, {}, {{"token_embd.weight", r.id, {2, 256}, std::vector<uint8_t>(2 * 256 / r.block_elements * r.block_bytes, 0)}}).ok());
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.ok()) << f.error().to_string();
    std::vector<float> out(512);
    expect_error(f->read_rows_float(f->tensors()[0], 0, 2, out.data()), ErrorCode::kUnsupported,
                 "tensor 'token_embd.weight' in '" + path + "' has GGUF type " + r.name + "; qemb reads " + kAll);
    auto c = Checkpoint::open(path);
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    expect_error(c->table("token_embd.weight").status(), ErrorCode::kUnsupported,
                 "tensor 'token_embd.weight' has GGUF type " + std::string(r.name) + "; qemb reads " + kAll + " tables");
  }
}

// A fixture's tensor info patched: the info is the last thing before the
// data region, [type u32][offset u64] right before the alignment padding.
TEST(GgufTypes, BlocksThatDoNotFitAreRefused) {
  // Short data: the last block of the last row cut off.
  std::vector<uint8_t> q6 = fixture_bytes("q6_K.gguf");
  q6.resize(q6.size() - 100);
  expect_error(GgufFile::from_bytes(q6, "short.gguf").status(), ErrorCode::kParseError,
               "GGUF file 'short.gguf': tensor 'token_embd.weight' occupies data bytes [0, 26880), past the end of "
               "the 26780-byte data region; the file is truncated or corrupt");
  // A row that is not whole 256-value blocks: 64 x 512 read as 128 x 256 is
  // fine, as 256 x 128 is not.
  std::vector<uint8_t> q4 = fixture_bytes("q4_K.gguf");
  auto good = GgufFile::from_bytes(q4, "q4_K.gguf");
  ASSERT_TRUE(good.ok());
  const std::string name = "token_embd.weight";
  const size_t dims_at = [&] {
    const auto it = std::search(q4.begin(), q4.end(), name.begin(), name.end());
    return static_cast<size_t>(it - q4.begin()) + name.size() + 4;  // past the name and the rank
  }();
  const auto put64 = [&](std::vector<uint8_t>& b, size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
  };
  std::vector<uint8_t> narrow = q4;
  put64(narrow, dims_at, 128);
  put64(narrow, dims_at + 8, 256);
  expect_error(GgufFile::from_bytes(narrow, "narrow.gguf").status(), ErrorCode::kParseError,
               "tensor 'token_embd.weight' has 128 values a row, not a multiple of the 256-value blocks of Q4_K");
  std::vector<uint8_t> reshaped = q4;
  put64(reshaped, dims_at, 256);
  put64(reshaped, dims_at + 8, 128);
  auto r = GgufFile::from_bytes(reshaped, "reshaped.gguf");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  std::vector<float> row(256);
  ASSERT_TRUE(r->read_rows_float(r->tensors()[0], 3, 4, row.data()).ok());
  const std::vector<float> want = floats_of(kData + "q4_K.f32");
  expect_same_bits(row.data(), want.data() + 3 * 256, 256, "row 3 of 128 x 256");
  // More rows than the data holds: the size the blocks need is checked
  // before anything is read.
  std::vector<uint8_t> tall = q4;
  put64(tall, dims_at + 8, 65);
  expect_error(GgufFile::from_bytes(tall, "tall.gguf").status(), ErrorCode::kParseError,
               "occupies data bytes [0, 18720), past the end of the 18432-byte data region");
}

}  // namespace
}  // namespace qemb
