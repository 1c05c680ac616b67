// A foreign, truncated, corrupted or inconsistent artifact is refused with a
// clear error, and no input makes the loader crash.
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "artifact/artifact_test_util.h"
#include "artifact/artifact_io.h"

namespace qemb {
namespace {

using namespace artifact_test;

constexpr const char* kRecompile = "the file is truncated or corrupted; recompile it";

uint32_t float_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

class ArtifactCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("model.qemb");
    // The format-2 layout (plain tables, offsets written out); format 3's
    // ROWS sections have their own tests below.
    Status s = write_artifact(path_, make_test_graph(), test_metadata(), ArtifactWriteOptions{2});
    ASSERT_TRUE(s.ok()) << s.message();
    file_ = read_bytes(path_);
    auto loaded = load_artifact(path_);
    ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
    sections_ = loaded->sections;
  }

  // Loads `bytes` through a real file and returns the error (test fails if it loads).
  Error refused(const std::vector<uint8_t>& bytes, Verify verify = Verify::kFull) {
    const std::string path = dir_.file("bad.qemb");
    write_bytes(path, bytes);
    auto loaded = load_artifact(path, verify);
    EXPECT_FALSE(loaded.ok());
    return loaded.ok() ? Error(ErrorCode::kOk, "") : loaded.error();
  }

  const SectionInfo& section(const std::string& name) const {
    for (const auto& s : sections_)
      if (s.name == name) return s;
    ADD_FAILURE() << "no section " << name;
    return sections_[0];
  }

  ScopedTempDir dir_;
  std::string path_;
  std::vector<uint8_t> file_;
  std::vector<SectionInfo> sections_;
};

#define EXPECT_MESSAGE_HAS(error, text) \
  EXPECT_NE((error).message.find(text), std::string::npos) << "message: " << (error).message

TEST_F(ArtifactCorruption, ForeignFileIsNotAQembArtifact) {
  std::vector<uint8_t> bad = file_;
  bad[0] = 'X';
  Error e = refused(bad);
  EXPECT_EQ(e.code, ErrorCode::kCorrupt);
  EXPECT_MESSAGE_HAS(e, "bad.qemb': not a qemb artifact (starts with 58 45 4d 42 89 0d 0a 1a");

  e = refused(text_bytes("{\"this is\": \"json, not an artifact\"}\n" + std::string(100, ' ')));
  EXPECT_EQ(e.code, ErrorCode::kCorrupt);
  EXPECT_MESSAGE_HAS(e, "not a qemb artifact");

  e = refused(text_bytes("PK"));  // shorter than the magic, and not its prefix
  EXPECT_MESSAGE_HAS(e, "not a qemb artifact (starts with 50 4b,");
}

TEST_F(ArtifactCorruption, FileShorterThanTheHeaderIsTruncated) {
  for (size_t n : {0, 4, 8, 40, 63}) {
    Error e = refused(std::vector<uint8_t>(file_.begin(), file_.begin() + n));
    EXPECT_EQ(e.code, ErrorCode::kCorrupt) << n;
    EXPECT_MESSAGE_HAS(e, "the file is " + std::to_string(n) + " bytes, smaller than the 64-byte header");
    EXPECT_MESSAGE_HAS(e, kRecompile);
  }
}

TEST_F(ArtifactCorruption, TruncationInTheTableAndInEverySectionIsRefused) {
  std::vector<size_t> cuts = {64, 64 + 50, file_.size() - 1};
  for (const auto& s : sections_) cuts.push_back(s.offset + s.size / 2);
  for (size_t cut : cuts) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    Error e = refused(std::vector<uint8_t>(file_.begin(), file_.begin() + cut), Verify::kHeader);
    EXPECT_EQ(e.code, ErrorCode::kCorrupt);
    EXPECT_MESSAGE_HAS(e, "the header says the file is " + std::to_string(file_.size()) + " bytes but it is " +
                              std::to_string(cut) + " bytes (truncated); " + kRecompile);
  }
}

TEST_F(ArtifactCorruption, ExtraBytesAreASizeMismatch) {
  std::vector<uint8_t> bad = file_;
  bad.resize(bad.size() + 64, 0);
  Error e = refused(bad);
  EXPECT_EQ(e.code, ErrorCode::kCorrupt);
  EXPECT_MESSAGE_HAS(e, "the header says the file is " + std::to_string(file_.size()) + " bytes but it is " +
                            std::to_string(bad.size()) + " bytes; " + kRecompile);
}

TEST_F(ArtifactCorruption, FileSizeFieldMismatchIsRefused) {
  std::vector<uint8_t> bad = file_;
  put_u64(bad, 16, file_.size() + 1000);
  Error e = refused(bad);
  EXPECT_EQ(e.code, ErrorCode::kCorrupt);
  EXPECT_MESSAGE_HAS(e, "the header says the file is " + std::to_string(file_.size() + 1000));
  EXPECT_MESSAGE_HAS(e, "(truncated)");
}

TEST_F(ArtifactCorruption, NewerFormatVersionIsUnsupported) {
  std::vector<uint8_t> bad = file_;
  put_u32(bad, 8, 4);
  Error e = refused(bad);
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
  EXPECT_MESSAGE_HAS(e, "written by a newer qemb (format 4); this build reads formats 1 to 3");

  // A newer format is recognised whatever its layout: even when it is short.
  auto short_future = build_raw({}, 7);
  e = refused(short_future);
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
  EXPECT_MESSAGE_HAS(e, "(format 7)");

  put_u32(bad, 8, 0);
  e = refused(bad);
  EXPECT_EQ(e.code, ErrorCode::kCorrupt);
  EXPECT_MESSAGE_HAS(e, "format version 0 is not valid");
}

TEST_F(ArtifactCorruption, HeaderAndTableFlipsFailTheHeaderChecksum) {
  for (size_t at : {size_t{32}, size_t{50}, size_t{64 + 3}, size_t{64 + 96 + 40}, size_t{64 + 9 * 96 + 95}}) {
    SCOPED_TRACE(at);
    std::vector<uint8_t> bad = file_;
    bad[at] ^= 0x04;
    Error e = refused(bad, Verify::kHeader);
    EXPECT_EQ(e.code, ErrorCode::kCorrupt);
    EXPECT_MESSAGE_HAS(e, "header/section-table checksum mismatch: stored 0x");
    EXPECT_MESSAGE_HAS(e, kRecompile);
  }
}

TEST_F(ArtifactCorruption, FullVerifyCatchesAFlipInEverySection) {
  for (const auto& s : sections_) {
    for (uint64_t at : {s.offset, s.offset + s.size / 2, s.offset + s.size - 1}) {
      SCOPED_TRACE(s.name + " byte " + std::to_string(at));
      std::vector<uint8_t> bad = file_;
      bad[at] ^= 0x01;
      Error e = refused(bad, Verify::kFull);
      EXPECT_EQ(e.code, ErrorCode::kCorrupt);
      EXPECT_MESSAGE_HAS(e, "section " + std::to_string(s.index) + " '" + s.name + "' (" + to_string(s.kind) +
                                ") checksum mismatch: stored 0x");
      EXPECT_MESSAGE_HAS(e, kRecompile);
    }
  }
}

TEST_F(ArtifactCorruption, HeaderVerifyCatchesMetaAndGraphFlipsButNotDataFlips) {
  for (const auto& s : sections_) {
    SCOPED_TRACE(s.name);
    std::vector<uint8_t> bad = file_;
    bad[s.offset] ^= 0x01;  // first byte; for scales the lowest mantissa bit of scale 0
    auto loaded = load_bytes(bad, Verify::kHeader);
    if (s.kind == SectionKind::kData) {
      // Documented trade-off: kHeader does not hash DATA, so this loads.
      ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
      EXPECT_FALSE(loaded->sections[s.index].verified);
      if (s.name.rfind("tensor:", 0) == 0) {
        const Tensor* t = loaded->graph->find_tensor(s.name.substr(7));
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(t->data->data()[0], bad[s.offset]);  // the view shows the file's bytes
      }
    } else {
      ASSERT_FALSE(loaded.ok());
      EXPECT_EQ(loaded.error().code, ErrorCode::kCorrupt);
      EXPECT_MESSAGE_HAS(loaded.error(), "'" + s.name + "' (" + to_string(s.kind) + ") checksum mismatch");
    }
  }
}

TEST_F(ArtifactCorruption, NonZeroPaddingIsRefused) {
  // The gap between the end of META and the 64-byte-aligned GRAPH.
  const SectionInfo& meta = section("META");
  const SectionInfo& graph = section("GRAPH");
  ASSERT_LT(meta.offset + meta.size, graph.offset);
  std::vector<uint8_t> bad = file_;
  bad[meta.offset + meta.size] = 1;
  Error e = refused(bad, Verify::kHeader);
  EXPECT_EQ(e.code, ErrorCode::kCorrupt);
  EXPECT_MESSAGE_HAS(e, "padding byte at offset " + std::to_string(meta.offset + meta.size) + " is not zero");
}

// ---- forged files: checksums right, contents wrong ----

class ArtifactForged : public ArtifactCorruption {
 protected:
  Error refused_graph(const std::function<void(json&)>& edit) {
    auto loaded = load_bytes(with_graph_json(file_, edit));
    EXPECT_FALSE(loaded.ok());
    if (loaded.ok()) return Error(ErrorCode::kOk, "");
    EXPECT_EQ(loaded.error().code, ErrorCode::kCorrupt) << loaded.error().message;
    EXPECT_MESSAGE_HAS(loaded.error(), kRecompile);
    return loaded.error();
  }
};

TEST_F(ArtifactForged, RebuildingUnchangedLoads) {
  // The independent layout writer agrees with the real one byte for byte.
  EXPECT_EQ(build_raw(split_raw(file_), /*version=*/2), file_);  // the test graph's four outputs are four tables
  auto loaded = load_bytes(with_graph_json(file_, [](json&) {}));
  EXPECT_TRUE(loaded.ok()) << loaded.error().to_string();
}

TEST_F(ArtifactForged, JsonSectionsMustBeObjectsOfTheRightShape) {
  auto sections = split_raw(file_);
  auto with = [&](size_t index, const std::string& text) {
    auto copy = sections;
    copy[index].bytes = text_bytes(text);
    auto loaded = load_bytes(build_raw(copy));
    EXPECT_FALSE(loaded.ok());
    return loaded.ok() ? Error() : loaded.error();
  };
  EXPECT_MESSAGE_HAS(with(1, "{\"tensors\": [}"), "section 1 'GRAPH' (GRAPH) is not valid JSON");
  EXPECT_MESSAGE_HAS(with(0, "{} trailing"), "section 0 'META' (META) is not valid JSON");
  EXPECT_MESSAGE_HAS(with(0, "[1, 2]"), "section 0 'META' (META) is JSON array, expected an object");
  EXPECT_MESSAGE_HAS(with(0, ""), "is not valid JSON");
  EXPECT_MESSAGE_HAS(with(0, "{\"a\":\"\xff\"}"), "is not valid JSON");  // invalid UTF-8
  EXPECT_MESSAGE_HAS(with(0, "{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}"),
                     "nests JSON deeper than 64");
  const std::string deep(200000, '[');  // must not blow the stack
  EXPECT_MESSAGE_HAS(with(0, deep + std::string(200000, ']')), "nests JSON deeper than 64");
  EXPECT_MESSAGE_HAS(with(1, "{\"ops\": []}"), "section 1 'GRAPH' (GRAPH) has no 'tensors' field");
  EXPECT_MESSAGE_HAS(with(1, "{\"tensors\": {}, \"ops\": []}"), ".tensors is object, expected an array");
}

TEST_F(ArtifactForged, IllTypedAndOutOfRangeFieldsAreNamed) {
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][0].erase("dtype"); }),
                     "tensors[0] ('w8') has no 'dtype' field");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][0]["dtype"] = "FLOAT_64"; }),
                     "tensors[0] ('w8').dtype: unknown data type 'FLOAT_64'");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][0]["dtype"] = 3; }),
                     "tensors[0] ('w8').dtype is number, expected a string");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][4]["kind"] = "CONSTANT"; }),
                     "tensors[4] ('ids').kind: unknown tensor kind 'CONSTANT'");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["ops"][1]["type"] = "Embedding"; }),
                     "ops[1] ('g8').type: unknown op type 'Embedding'");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][0]["shape"][1] = -7; }),
                     "tensors[0] ('w8').shape[1] is -7, expected 0..");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][0]["shape"][1] = 7.0; }),
                     "tensors[0] ('w8').shape[1] is number, expected an integer");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][0]["shape"][1] = uint64_t{1} << 63; }),
                     "shape[1] is 9223372036854775808, expected 0..9223372036854775807");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][5]["shape"] = {int64_t{1} << 62, 4, 0}; }),
                     "tensor 'w8_convert' has more elements than fit in 64 bits");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][5]["shape"] = json::array({1, 1, 1, 1, 1, 1, 1, 1, 1}); }),
                     "shape has rank 9, at most 8 is supported");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["ops"][0]["inputs"] = {"w8", 5}; }),
                     "ops[0] ('w8_convert').inputs[1] is number, expected a string");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["ops"][0]["axis"] = int64_t{1} << 40; }),
                     "ops[0] ('w8_convert').axis is 1099511627776, expected -2147483648..2147483647");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][2]["encoding"]["offset"] = int64_t{1} << 31; }),
                     "tensors[2] ('t16').encoding.offset is 2147483648");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][2]["encoding"]["scale"] = 1e300; }),
                     "tensors[2] ('t16').encoding.scale is not a finite float32");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][2]["encoding"]["scale"] = "0.5"; }),
                     "tensors[2] ('t16').encoding.scale is string, expected a number");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][2]["encoding"]["type"] = "per_block"; }),
                     "encoding.type is 'per_block', expected none, per_tensor or per_axis");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][0]["encoding"]["bitwidth"] = 16; }),
                     "tensor 'w8' (SFIXED_POINT_8) has bitwidth 16; qemb stores SFIXED_POINT_8 at 2, 4 or 8 bits");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][0]["encoding"]["bitwidth"] = 3; }),
                     "tensor 'w8' (SFIXED_POINT_8) has bitwidth 3; qemb stores SFIXED_POINT_8 at 2, 4 or 8 bits");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][2]["encoding"]["bitwidth"] = 8; }),
                     "tensor 't16' (UFIXED_POINT_16) has bitwidth 8; qemb stores UFIXED_POINT_16 at 16 bits");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["ops"][2]["intermediate"]["bitwidth"] = 3; }),
                     "op 'g4' intermediate encoding has bitwidth 3, expected 2, 4 or 8 (or 0)");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["ops"][2]["intermediate"] = "legacy"; }),
                     "ops[2] ('g4').intermediate is string, expected an object");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["ops"][1]["inputs"] = {"w8_convert"}; }),
                     "the graph is inconsistent: op 'g8' has the wrong number of inputs or outputs");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][6]["name"] = "w8"; }),
                     "the graph is inconsistent: duplicate tensor name 'w8'");
}

TEST_F(ArtifactForged, SectionReferencesAndSizesMustMatch) {
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][0]["data_section"] = 0; }),
                     "tensors[0] ('w8').data_section refers to section 0 'META' (META), expected a DATA section");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][0]["data_section"] = 99; }),
                     "refers to section 99 but the file has 10");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][0]["data_section"] = 5; }),
                     "section 5 'tensor:w4' (DATA) holds 20 bytes, tensor 'w8' (SFIXED_POINT_8, bitwidth 8) needs 35");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][1]["data_section"] = 2; }),
                     "tensors[1] ('w4').data_section refers to section 2 'tensor:w8' (DATA), which is already in use");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][0].erase("data_section"); }),
                     "tensors[0] ('w8') is STATIC but has no data_section");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][4]["data_section"] = 9; }),
                     "tensors[4] ('ids') is APP_WRITE but has a data_section");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) {
                       g["tensors"][3]["kind"] = "NATIVE";
                       g["tensors"][3].erase("data_section");
                     }),
                     "section 9 'tensor:f32' (DATA) is not referenced by the graph");
  // The 4-bit table's bitwidth decides its size: 8 bits would need 35 bytes.
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][1]["encoding"]["bitwidth"] = 8; }),
                     "section 5 'tensor:w4' (DATA) holds 20 bytes, tensor 'w4' (SFIXED_POINT_8, bitwidth 8) needs 35");
  // Per-axis scales must number the axis dimension.
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][0]["encoding"]["count"] = 4; }),
                     "section 3 'scales:w8' (DATA) holds 20 bytes, GRAPH tensors[0] ('w8').encoding needs 4 float32 scales");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) {
                       g["tensors"][0]["shape"][0] = 4;
                       g["tensors"][5]["shape"][0] = 4;
                     }),
                     "tensor 'w8' has 5 per-axis scales but dimension 0 is 4");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][0]["encoding"]["offsets_section"] = 9; }),
                     "section 9 'tensor:f32' (DATA) holds 60 bytes, GRAPH tensors[0] ('w8').encoding needs 5 int32 offsets");
}

TEST_F(ArtifactForged, MisplacedSectionsAreRefused) {
  auto sections = split_raw(file_);
  auto load_with = [&](const std::vector<RawSection>& s) {
    auto loaded = load_bytes(build_raw(s), Verify::kHeader);
    EXPECT_FALSE(loaded.ok());
    return loaded.ok() ? Error() : loaded.error();
  };
  auto moved = sections;
  moved[3].offset = static_cast<int64_t>(section("scales:w8").offset) + 32;  // misaligned DATA
  Error e = load_with(moved);
  EXPECT_EQ(e.code, ErrorCode::kCorrupt);
  EXPECT_MESSAGE_HAS(e, "section 3 'scales:w8' (DATA) starts at offset " + std::to_string(moved[3].offset) +
                            ", not a multiple of 64");

  moved = sections;
  moved[3].offset = static_cast<int64_t>(section("tensor:w8").offset);  // on top of tensor:w8
  e = load_with(moved);
  EXPECT_MESSAGE_HAS(e, "section 2 'tensor:w8' (DATA) overlaps section 3 'scales:w8' (DATA)");

  std::vector<uint8_t> bad = file_;
  put_u64(bad, 64 + 8, 128);  // META inside the table
  rechecksum_header(bad);
  e = load_bytes(bad, Verify::kHeader).error();
  EXPECT_MESSAGE_HAS(e, "section 0 'META' (META) overlaps the section table");

  // An entry pointing past the end of the file.
  bad = file_;
  put_u64(bad, 64 + 2 * 96 + 16, bad.size());
  rechecksum_header(bad);
  auto loaded = load_bytes(bad);
  ASSERT_FALSE(loaded.ok());
  EXPECT_MESSAGE_HAS(loaded.error(), "section 2 'tensor:w8' (DATA) spans bytes " +
                                         std::to_string(section("tensor:w8").offset) + "+" +
                                         std::to_string(bad.size()) + ", outside the " +
                                         std::to_string(bad.size()) + "-byte file");

  // Two META sections; an unknown kind; a table that does not fit.
  moved = sections;
  moved[1].kind = 1;
  EXPECT_MESSAGE_HAS(load_with(moved), "expected exactly one META and one GRAPH section, found 2 and 0");
  moved = sections;
  moved[4].kind = 9;
  EXPECT_MESSAGE_HAS(load_with(moved), "section 4 'offsets:w8' has unknown kind 9");
  bad = build_raw(sections);
  put_u32(bad, 12, 1000000);
  EXPECT_MESSAGE_HAS(load_bytes(bad).error(), "the section table (1000000 entries at offset 64) lies outside");
}

// ---- format 3: row-interleaved tables (ROWS sections) ----

// The test graph with w4 row-interleaved: sections META, GRAPH, tensor:w8,
// scales:w8, offsets:w8 (w8's offsets are not 0), tensor:w4 (ROWS: 5 records
// of 8 bytes, a 7-wide 4-bit row taking 4), tensor:t16, tensor:f32.
class ArtifactRows : public ::testing::Test {
 protected:
  void SetUp() override {
    Graph g = make_test_graph();
    Tensor* w4 = g.find_tensor("w4");
    auto interleaved = interleave_rows(*w4);
    ASSERT_TRUE(interleaved.ok()) << interleaved.error().message;
    *w4 = *interleaved;
    graph_ = g;
    path_ = dir_.file("rows.qemb");
    Status s = write_artifact(path_, g, test_metadata());
    ASSERT_TRUE(s.ok()) << s.message();
    file_ = read_bytes(path_);
    sections_ = split_raw(file_);
  }
  Error refused(const std::vector<uint8_t>& bytes, Verify verify = Verify::kFull) {
    auto loaded = load_bytes(bytes, verify);
    EXPECT_FALSE(loaded.ok());
    if (loaded.ok()) return Error(ErrorCode::kOk, "");
    EXPECT_EQ(loaded.error().code, ErrorCode::kCorrupt);
    EXPECT_MESSAGE_HAS(loaded.error(), kRecompile);
    return loaded.error();
  }
  Error refused_graph(const std::function<void(json&)>& edit) { return refused(with_graph_json(file_, edit)); }
  Error refused_sections(const std::function<void(std::vector<RawSection>&)>& edit, uint32_t version = 3) {
    auto copy = sections_;
    edit(copy);
    return refused(build_raw(copy, version));
  }

  ScopedTempDir dir_;
  Graph graph_;
  std::string path_;
  std::vector<uint8_t> file_;
  std::vector<RawSection> sections_;
};

TEST_F(ArtifactRows, LayoutIsTheDocumentedOne) {
  EXPECT_EQ(get_u32(file_, 8), 3u);
  const std::vector<std::pair<uint32_t, std::string>> want = {
      {1, "META"},        {2, "GRAPH"},     {3, "tensor:w8"},  {3, "scales:w8"},
      {3, "offsets:w8"},  {4, "tensor:w4"}, {3, "tensor:t16"}, {3, "tensor:f32"}};
  ASSERT_EQ(sections_.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(sections_[i].kind, want[i].first) << i;
    EXPECT_EQ(sections_[i].name, want[i].second) << i;
  }
  // Record r: s_r as float32 LE, then the row's packed nibbles.
  const Graph original = make_test_graph();
  const Tensor& plain = *original.find_tensor("w4");
  const auto& rows = sections_[5].bytes;
  ASSERT_EQ(rows.size(), static_cast<size_t>(kRows * 8));
  for (int64_t r = 0; r < kRows; ++r) {
    EXPECT_EQ(get_u32(rows, r * 8), float_bits(plain.encoding.scales[r])) << r;
    EXPECT_EQ(0, std::memcmp(rows.data() + r * 8 + 4, plain.data->data() + r * 4, 4)) << r;
  }
  const json g = json::parse(sections_[1].bytes.begin(), sections_[1].bytes.end());
  EXPECT_EQ(g["tensors"][1]["row_stride"], 8);
  EXPECT_EQ(g["tensors"][1]["data_section"], 5);
  EXPECT_EQ(g["tensors"][1]["encoding"],
            (json{{"type", "per_axis"}, {"bitwidth", 4}, {"axis", 0}, {"count", kRows}}));
  EXPECT_EQ(g["tensors"][0]["encoding"]["offsets_section"], 4);  // w8's offsets are not all 0

  for (Verify verify : {Verify::kFull, Verify::kHeader}) {
    auto loaded = load_bytes(file_, verify);
    ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
    EXPECT_EQ(loaded->format_version, 3u);
    EXPECT_EQ(loaded->sections[5].kind, SectionKind::kRows);
    EXPECT_EQ(loaded->sections[5].verified, verify == Verify::kFull);
    EXPECT_EQ(loaded->graph->dump(), graph_.dump());
    const Tensor* w4 = loaded->graph->find_tensor("w4");
    ASSERT_NE(w4, nullptr);
    EXPECT_EQ(w4->row_stride, 8u);
    for (int64_t r = 0; r < kRows; ++r) EXPECT_EQ(float_bits(w4->row_scale(r)), float_bits(plain.encoding.scales[r]));
    const Tensor back = deinterleave_rows(*w4);
    EXPECT_EQ(back.encoding, plain.encoding);
    EXPECT_EQ(0, std::memcmp(back.data->data(), plain.data->data(), plain.data->size()));
  }
  EXPECT_NE(describe_sections(*load_bytes(file_)).find("ROWS "), std::string::npos);
}

TEST_F(ArtifactRows, TheOldFormatPathWritesThePlainLayoutByteForByte) {
  const std::string a = dir_.file("a.qemb"), b = dir_.file("b.qemb");
  ASSERT_TRUE(write_artifact(a, graph_, test_metadata(), ArtifactWriteOptions{2}).ok());
  ASSERT_TRUE(write_artifact(b, make_test_graph(), test_metadata(), ArtifactWriteOptions{2}).ok());
  EXPECT_EQ(read_bytes(a), read_bytes(b));
  EXPECT_EQ(get_u32(read_bytes(a), 8), 2u);
  Status s = write_artifact(a, graph_, test_metadata(), ArtifactWriteOptions{1});
  EXPECT_EQ(s.message(), "cannot write artifact '" + a + "': format 1 holds one table, the graph has several");
  s = write_artifact(a, make_small_graph(), test_metadata(), ArtifactWriteOptions{2});
  EXPECT_EQ(s.message(), "cannot write artifact '" + a + "': format 2 holds several tables, the graph has one");
  s = write_artifact(a, graph_, test_metadata(), ArtifactWriteOptions{7});
  EXPECT_EQ(s.message(), "cannot write artifact '" + a + "': format 7 is not one this build writes (1 to 3)");
}

TEST_F(ArtifactRows, SymmetricOffsetsAreLeftOutOfNewFilesAndReadFromOldOnes) {
  const std::string v3 = dir_.file("v3.qemb"), v1 = dir_.file("v1.qemb");
  ASSERT_TRUE(write_artifact(v3, make_small_graph(), json::object()).ok());
  ASSERT_TRUE(write_artifact(v1, make_small_graph(), json::object(), ArtifactWriteOptions{1}).ok());
  auto n = load_artifact(v3);
  auto o = load_artifact(v1);
  ASSERT_TRUE(n.ok() && o.ok());
  EXPECT_EQ(n->format_version, 3u);
  EXPECT_EQ(o->format_version, 1u);
  auto names = [](const LoadedArtifact& a) {
    std::vector<std::string> v;
    for (const auto& s : a.sections) v.push_back(s.name);
    return v;
  };
  EXPECT_EQ(names(*n), (std::vector<std::string>{"META", "GRAPH", "tensor:w", "scales:w"}));
  EXPECT_EQ(names(*o), (std::vector<std::string>{"META", "GRAPH", "tensor:w", "scales:w", "offsets:w"}));
  EXPECT_EQ(n->graph->tensors[0].encoding, o->graph->tensors[0].encoding);  // offsets {0, 0} both ways
  // Only format 3 may leave them out.
  auto sections = split_raw(read_bytes(v3));
  auto loaded = load_bytes(build_raw(sections, 2));
  ASSERT_FALSE(loaded.ok());
  EXPECT_MESSAGE_HAS(loaded.error(), "GRAPH tensors[0] ('w').encoding has no 'offsets_section' field");
}

TEST_F(ArtifactRows, MalformedRowsSectionsAreRefused) {
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][1]["row_stride"] = 12; }),
                     "tensor 'w4' has row stride 12, a row of 7 int4 values needs 8");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][1]["row_stride"] = 0; }),
                     "tensors[1] ('w4').row_stride is 0, expected 1..2147483647");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][1]["row_stride"] = "8"; }),
                     "tensors[1] ('w4').row_stride is string, expected an integer");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][1]["encoding"]["scales_section"] = 3; }),
                     "tensors[1] ('w4').encoding has a scales_section, but its tensor is row-interleaved");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][1]["encoding"]["offsets_section"] = 4; }),
                     "tensors[1] ('w4').encoding has a offsets_section, but its tensor is row-interleaved");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][1]["encoding"]["count"] = 4; }),
                     "tensors[1] ('w4').encoding.count is 4, the row-interleaved tensor has 5 rows");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][1]["encoding"]["axis"] = 1; }),
                     "a row-interleaved tensor is quantized along axis 0");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][1]["encoding"] = {{"type", "none"}, {"bitwidth", 4}}; }),
                     "tensors[1] ('w4') has a row_stride but its encoding is not per_axis");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][4]["row_stride"] = 8; }),
                     "tensors[4] ('ids') has a row_stride but is not a STATIC SFIXED_POINT_8 [rows, dim] table");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][2]["row_stride"] = 8; }),
                     "tensors[2] ('t16') has a row_stride but is not a STATIC SFIXED_POINT_8 [rows, dim] table");
  // A plain table on the ROWS section; an interleaved one on a DATA section.
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][0]["data_section"] = 5; }),
                     "tensors[0] ('w8').data_section refers to section 5 'tensor:w4' (ROWS), expected a DATA section");
  EXPECT_MESSAGE_HAS(refused_sections([](std::vector<RawSection>& s) { s[5].kind = 3; }),
                     "tensors[1] ('w4').data_section refers to section 5 'tensor:w4' (DATA), expected a ROWS section");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][1].erase("row_stride"); }),
                     "tensors[1] ('w4').encoding has no 'scales_section' field");
  // Sizes, alignment, kinds and versions.
  EXPECT_MESSAGE_HAS(refused_sections([](std::vector<RawSection>& s) { s[5].bytes.resize(32); }),
                     "section 5 'tensor:w4' (ROWS) holds 32 bytes, tensor 'w4' (SFIXED_POINT_8, bitwidth 4, row "
                     "stride 8) needs 40");
  EXPECT_MESSAGE_HAS(refused_sections([](std::vector<RawSection>& s) { s[5].bytes.resize(44, 0); }),
                     "holds 44 bytes");
  EXPECT_MESSAGE_HAS(refused_sections([](std::vector<RawSection>& s) { s[5].offset = 8192 + 4; }),
                     "section 5 'tensor:w4' (ROWS) starts at offset 8196, not a multiple of 64");
  EXPECT_MESSAGE_HAS(refused_sections([](std::vector<RawSection>&) {}, 2),
                     "section 5 'tensor:w4' has unknown kind 4 (expected 1=META, 2=GRAPH, 3=DATA in format 2)");
  EXPECT_MESSAGE_HAS(refused_sections([](std::vector<RawSection>& s) { s[5].kind = 3; }, 2),
                     "tensors[1] ('w4') has a row_stride, which format 2 does not have");
  EXPECT_MESSAGE_HAS(refused_sections([](std::vector<RawSection>& s) { s[5].kind = 5; }),
                     "section 5 'tensor:w4' has unknown kind 5 (expected 1=META, 2=GRAPH, 3=DATA, 4=ROWS)");
  EXPECT_MESSAGE_HAS(refused_graph([](json& g) { g["tensors"][1].erase("data_section"); g["tensors"][1]["kind"] = "NATIVE"; }),
                     "has a row_stride but is not a STATIC");
}

TEST_F(ArtifactRows, ANonFiniteScaleIsRefusedWhenTheRowsAreVerified) {
  for (uint32_t bits : {0x7f800000u, 0x7fc00001u, 0xff800000u}) {
    auto copy = sections_;
    put_u32(copy[5].bytes, 2 * 8, bits);  // record 2's scale
    const auto bytes = build_raw(copy, 3);
    EXPECT_MESSAGE_HAS(refused(bytes), "section 5 'tensor:w4' (ROWS) row 2 has a scale that is not finite");
    // Not reading the table at open is the point of kHeader; the kernels
    // clamp every float-to-int conversion, so such a scale is harmless.
    auto loaded = load_bytes(bytes, Verify::kHeader);
    ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
    EXPECT_FALSE(loaded->sections[5].verified);
  }
}

// ---- never crash ----

// Every single-byte flip and every truncation of a small artifact is refused
// by full verification; header verification may accept DATA flips but must
// never crash.
TEST(ArtifactNeverCrashes, EveryByteFlipAndTruncationOfASmallArtifact) {
  ScopedTempDir dir;
  const std::string path = dir.file("small.qemb");
  ASSERT_TRUE(write_artifact(path, make_small_graph(), json{{"k", "v"}}).ok());
  const std::vector<uint8_t> file = read_bytes(path);
  ASSERT_LT(file.size(), 2048u);
  size_t header_accepted = 0;
  for (size_t at = 0; at < file.size(); ++at) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xFF}}) {
      std::vector<uint8_t> bad = file;
      bad[at] ^= mask;
      auto full = load_bytes(bad, Verify::kFull);
      ASSERT_FALSE(full.ok()) << "flip " << int(mask) << " at " << at << " was accepted";
      EXPECT_TRUE(full.error().code == ErrorCode::kCorrupt || full.error().code == ErrorCode::kUnsupported)
          << full.error().to_string();
      auto header = load_bytes(bad, Verify::kHeader);
      header_accepted += header.ok();
    }
  }
  // Only flips inside DATA sections (6 data bytes, 8 scale bytes, 8 offset
  // bytes) can pass header verification, minus scale flips that make a scale
  // non-finite.
  EXPECT_GT(header_accepted, 0u);
  EXPECT_LE(header_accepted, (6u + 8u + 8u) * 3u);
  for (size_t n = 0; n < file.size(); ++n) {
    auto loaded = load_bytes(std::vector<uint8_t>(file.begin(), file.begin() + n));
    ASSERT_FALSE(loaded.ok()) << "truncated to " << n;
    EXPECT_EQ(loaded.error().code, ErrorCode::kCorrupt);
  }
  EXPECT_TRUE(load_bytes(file).ok());
}

// Random multi-byte damage (fixed seed): refused unless the bytes are unchanged.
TEST(ArtifactNeverCrashes, RandomDamageWithAFixedSeed) {
  ScopedTempDir dir;
  const std::string path = dir.file("small.qemb");
  ASSERT_TRUE(write_artifact(path, make_small_graph(), json{{"k", "v"}}).ok());
  const std::vector<uint8_t> file = read_bytes(path);
  std::mt19937 rng(20240601);
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> bad = file;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < edits; ++k) bad[rng() % bad.size()] = static_cast<uint8_t>(rng());
    if (rng() % 4 == 0) bad.resize(rng() % (bad.size() + 1));
    auto loaded = load_bytes(bad, iter % 2 ? Verify::kFull : Verify::kHeader);
    if (iter % 2 && bad != file) {
      ASSERT_FALSE(loaded.ok()) << "iteration " << iter;
    }
  }
}

// Semantic fuzzing: the GRAPH JSON is damaged but checksums are made right, so
// every value check is exercised. The loader must return, never crash.
TEST(ArtifactNeverCrashes, RandomGraphJsonValuesWithValidChecksums) {
  ScopedTempDir dir;
  const std::string path = dir.file("a.qemb");
  ASSERT_TRUE(write_artifact(path, make_test_graph(), json::object()).ok());
  const std::vector<uint8_t> file = read_bytes(path);
  std::mt19937 rng(777);
  const std::vector<json> replacements = {
      json(nullptr), json(true), json(-1), json(0), json(1), json(2), json(5), json(9), json(100),
      json(int64_t{1} << 62), json(uint64_t{1} << 63), json(-(int64_t{1} << 62)), json(0.5), json(1e308),
      json("x"), json("STATIC"), json("SFIXED_POINT_8"), json("per_axis"), json("Gather"), json("w8"),
      json::array(), json::array({1, 2}), json::object(), json::array({int64_t{1} << 40, int64_t{1} << 40})};
  size_t accepted = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> forged = with_graph_json(file, [&](json& g) {
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < edits; ++k) {
        // Walk down to a random leaf or container and replace it.
        json* node = &g;
        while ((node->is_object() || node->is_array()) && !node->empty() && rng() % 4 != 0) {
          auto it = node->begin();
          std::advance(it, rng() % node->size());
          node = &*it;
        }
        *node = replacements[rng() % replacements.size()];
      }
    });
    auto loaded = load_bytes(forged, Verify::kFull);
    accepted += loaded.ok();
    if (loaded.ok()) EXPECT_TRUE(loaded->graph->check().ok());
    else EXPECT_EQ(loaded.error().code, ErrorCode::kCorrupt) << loaded.error().message;
  }
  EXPECT_LT(accepted, 3000u);
}

}  // namespace
}  // namespace qemb
