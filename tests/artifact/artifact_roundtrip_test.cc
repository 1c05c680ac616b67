// Writing then loading a .qemb artifact gives back the same graph, encodings
// (bit-exact), op fields, metadata and data bytes; the data are used in place.
#include <sys/stat.h>

#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "artifact/artifact_test_util.h"
#include "artifact/artifact_io.h"
#include "core/file.h"

namespace qemb {
namespace {

using namespace artifact_test;

std::vector<uint32_t> float_bits(const std::vector<float>& v) {
  std::vector<uint32_t> bits(v.size());
  if (!v.empty()) std::memcpy(bits.data(), v.data(), v.size() * 4);
  return bits;
}

uint32_t float_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

void expect_same_encoding(const Encoding& a, const Encoding& b, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.bitwidth, b.bitwidth);
  EXPECT_EQ(float_bits(a.scale), float_bits(b.scale));
  EXPECT_EQ(a.offset, b.offset);
  if (a.is_per_axis()) {
    EXPECT_EQ(a.axis, b.axis);
  }
  EXPECT_EQ(float_bits(a.scales), float_bits(b.scales));
  EXPECT_EQ(a.offsets, b.offsets);
}

void expect_same_graph(const Graph& want, const Graph& got, const LoadedArtifact& loaded) {
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  for (size_t i = 0; i < want.tensors.size(); ++i) {
    const Tensor& w = want.tensors[i];
    const Tensor& g = got.tensors[i];
    SCOPED_TRACE("tensor " + w.name);
    EXPECT_EQ(g.name, w.name);
    EXPECT_EQ(g.kind, w.kind);
    EXPECT_EQ(g.dtype, w.dtype);
    EXPECT_EQ(g.shape, w.shape);
    expect_same_encoding(w.encoding, g.encoding, w.name);
    ASSERT_EQ(static_cast<bool>(g.data), static_cast<bool>(w.data));
    if (!w.data) continue;
    ASSERT_EQ(g.data->size(), w.data->size());
    if (w.data->size() > 0) {
      EXPECT_EQ(0, std::memcmp(g.data->data(), w.data->data(), w.data->size()));
    }
    // In place: aligned, inside the loaded bytes, not a copy.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(g.data->data()) % 64, 0u);
    EXPECT_GE(g.data->data(), loaded.bytes);
    EXPECT_LE(g.data->data() + g.data->size(), loaded.bytes + loaded.file_size);
  }
  ASSERT_EQ(got.ops.size(), want.ops.size());
  for (size_t i = 0; i < want.ops.size(); ++i) {
    const Op& w = want.ops[i];
    const Op& g = got.ops[i];
    SCOPED_TRACE("op " + w.name);
    EXPECT_EQ(g.type, w.type);
    EXPECT_EQ(g.name, w.name);
    EXPECT_EQ(g.inputs, w.inputs);
    EXPECT_EQ(g.outputs, w.outputs);
    EXPECT_EQ(g.axis, w.axis);
    ASSERT_EQ(g.intermediate.has_value(), w.intermediate.has_value());
    if (w.intermediate) expect_same_encoding(*w.intermediate, *g.intermediate, w.name + " intermediate");
  }
}

TEST(ArtifactRoundTrip, EveryDtypeAndOpComesBackIdentical) {
  ScopedTempDir dir;
  const std::string path = dir.file("model.qemb");
  const Graph graph = make_test_graph();
  ASSERT_TRUE(graph.check().ok());
  Status written = write_artifact(path, graph, test_metadata(), ArtifactWriteOptions{2});
  ASSERT_TRUE(written.ok()) << written.message();
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"model.qemb"});  // no temporary left behind

  for (Verify verify : {Verify::kFull, Verify::kHeader}) {
    auto loaded = load_artifact(path, verify);
    ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
    EXPECT_EQ(loaded->format_version, 2u);  // four outputs: four tables
    EXPECT_EQ(loaded->metadata, test_metadata());
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(loaded->file_size, static_cast<size_t>(st.st_size));
    expect_same_graph(graph, *loaded->graph, *loaded);
    EXPECT_EQ(loaded->graph->dump(), graph.dump());
    for (const auto& s : loaded->sections)
      EXPECT_EQ(s.verified, verify == Verify::kFull || s.kind != SectionKind::kData) << s.name;
  }
}

TEST(ArtifactRoundTrip, DataOutlivesTheLoadedArtifactAndIsTheMapping) {
  ScopedTempDir dir;
  const std::string path = dir.file("a.qemb");
  ASSERT_TRUE(write_artifact(path, make_test_graph(), json::object()).ok());
  std::shared_ptr<const Buffer> weights;
  {
    auto loaded = load_artifact(path);
    ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
    weights = loaded->graph->find_tensor("w4")->data;
    // The backing is the file mapping itself.
    auto mapping = std::static_pointer_cast<const MappedFile>(loaded->backing);
    EXPECT_EQ(mapping->data(), loaded->bytes);
    EXPECT_EQ(mapping->size(), loaded->file_size);
  }
  // The view keeps the mapping alive after the LoadedArtifact is gone.
  const Graph expected = make_test_graph();
  const auto& want = *expected.find_tensor("w4")->data;
  ASSERT_EQ(weights->size(), want.size());
  EXPECT_EQ(0, std::memcmp(weights->data(), want.data(), want.size()));
}

TEST(ArtifactRoundTrip, AlignedBytesAreUsedInPlaceUnalignedAreCopiedAligned) {
  ScopedTempDir dir;
  const std::string path = dir.file("a.qemb");
  ASSERT_TRUE(write_artifact(path, make_test_graph(), test_metadata()).ok());
  const std::vector<uint8_t> file = read_bytes(path);

  auto aligned = std::make_shared<AlignedBytes>(file);
  auto in_place = load_artifact_from_bytes(aligned, Verify::kFull);
  ASSERT_TRUE(in_place.ok()) << in_place.error().to_string();
  EXPECT_EQ(in_place->bytes, aligned->data());
  expect_same_graph(make_test_graph(), *in_place->graph, *in_place);

  // A buffer starting one byte past an aligned address.
  std::vector<uint8_t> shifted(file.size() + 1);
  std::memcpy(shifted.data() + 1, file.data(), file.size());
  auto holder = std::make_shared<AlignedBytes>(shifted);
  class Offset1 final : public Buffer {
   public:
    explicit Offset1(std::shared_ptr<const Buffer> b) : b_(std::move(b)) {}
    const uint8_t* data() const override { return b_->data() + 1; }
    size_t size() const override { return b_->size() - 1; }

   private:
    std::shared_ptr<const Buffer> b_;
  };
  auto copied = load_artifact_from_bytes(std::make_shared<Offset1>(holder), Verify::kFull);
  ASSERT_TRUE(copied.ok()) << copied.error().to_string();
  EXPECT_NE(copied->bytes, holder->data() + 1);
  expect_same_graph(make_test_graph(), *copied->graph, *copied);
}

// The byte layout is the documented one (docs/artifact-format.md).
TEST(ArtifactLayout, HeaderTableAndSectionsFollowTheDocument) {
  ScopedTempDir dir;
  const std::string path = dir.file("a.qemb");
  const Graph graph = make_test_graph();
  ASSERT_TRUE(write_artifact(path, graph, test_metadata(), ArtifactWriteOptions{2}).ok());
  const std::vector<uint8_t> f = read_bytes(path);
  ASSERT_GE(f.size(), 64u);
  EXPECT_EQ(0, std::memcmp(f.data(), "QEMB\x89\r\n\x1a", 8));
  EXPECT_EQ(get_u32(f, 8), 2u);                 // format version: the graph has several outputs (tables)
  EXPECT_EQ(get_u64(f, 16), f.size());          // file size
  EXPECT_EQ(get_u64(f, 24), 64u);               // table right after the header
  EXPECT_EQ(get_u32(f, 40), 96u);               // entry size
  EXPECT_EQ(get_u32(f, 44), 0u);                // flags
  for (size_t i = 48; i < 64; ++i) EXPECT_EQ(f[i], 0) << i;
  std::vector<uint8_t> zeroed(f.begin(), f.begin() + 64 + get_u32(f, 12) * 96);
  put_u64(zeroed, 32, 0);
  EXPECT_EQ(get_u64(f, 32), XXH3_64bits(zeroed.data(), zeroed.size()));

  // Sections: META, GRAPH, then per tensor: data (STATIC), scales, offsets
  // (per-axis); then per op: intermediate scales/offsets (per-axis only).
  const std::vector<std::pair<uint32_t, std::string>> want = {
      {1, "META"},        {2, "GRAPH"},       {3, "tensor:w8"}, {3, "scales:w8"}, {3, "offsets:w8"},
      {3, "tensor:w4"},   {3, "scales:w4"},   {3, "offsets:w4"}, {3, "tensor:t16"}, {3, "tensor:f32"}};
  ASSERT_EQ(get_u32(f, 12), want.size());
  const auto sections = split_raw(f);
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].second);
    const size_t e = 64 + i * 96;
    EXPECT_EQ(sections[i].kind, want[i].first);
    EXPECT_EQ(sections[i].name, want[i].second);
    EXPECT_EQ(get_u32(f, e + 4), 0u);
    EXPECT_EQ(get_u64(f, e + 8) % 64, 0u);
    EXPECT_EQ(get_u64(f, e + 24), XXH3_64bits(sections[i].bytes.data(), sections[i].bytes.size()));
  }
  // META is the metadata JSON; tensor data are the storage-layout bytes
  // (w4: two nibbles a byte, column 2k low, rows padded); scales float32 LE,
  // offsets int32 LE.
  EXPECT_EQ(json::parse(sections[0].bytes.begin(), sections[0].bytes.end()), test_metadata());
  const Tensor& w4 = *graph.find_tensor("w4");
  ASSERT_EQ(sections[5].bytes.size(), static_cast<size_t>(kRows * 4));
  EXPECT_EQ(0, std::memcmp(sections[5].bytes.data(), w4.data->data(), w4.data->size()));
  EXPECT_EQ(unpack_int4(sections[5].bytes.data(), 2), static_cast<int8_t>(static_cast<int8_t>(sections[5].bytes[1] << 4) >> 4));
  EXPECT_EQ(unpack_int4(sections[5].bytes.data(), 3), static_cast<int8_t>(static_cast<int8_t>(sections[5].bytes[1]) >> 4));
  for (int64_t r = 0; r < kRows; ++r) {
    EXPECT_EQ(get_u32(sections[6].bytes, r * 4), float_bits(w4.encoding.scales[r]));
    EXPECT_EQ(static_cast<int32_t>(get_u32(sections[4].bytes, r * 4)), graph.find_tensor("w8")->encoding.offsets[r]);
  }
  // GRAPH refers to those sections by index.
  const json g = json::parse(sections[1].bytes.begin(), sections[1].bytes.end());
  EXPECT_EQ(g["tensors"][1]["name"], "w4");
  EXPECT_EQ(g["tensors"][1]["data_section"], 5);
  EXPECT_EQ(g["tensors"][1]["encoding"]["scales_section"], 6);
  EXPECT_EQ(g["tensors"][1]["encoding"]["offsets_section"], 7);
  EXPECT_EQ(g["tensors"][1]["encoding"]["count"], kRows);
  EXPECT_EQ(g["ops"][2]["intermediate"]["type"], "per_tensor");
  // Nothing after the last section.
  EXPECT_EQ(get_u64(f, 64 + 9 * 96 + 8) + get_u64(f, 64 + 9 * 96 + 16), f.size());
}

TEST(ArtifactRoundTrip, PerAxisIntermediateAndEmptyTensorsRoundTrip) {
  ScopedTempDir dir;
  Graph g;
  g.add_tensor({"w", TensorKind::kStatic, DataType::kSFixedPoint8, {0, 4},
                Encoding::per_axis(0, {}, {}, 8), owned({})});
  g.add_tensor({"ids", TensorKind::kAppWrite, DataType::kInt32, {0}, Encoding{}, nullptr});
  g.add_tensor({"out", TensorKind::kAppRead, DataType::kUFixedPoint16, {0, 4}, Encoding::per_tensor(1.0f, 0, 16), nullptr});
  g.add_op({OpType::kRequantGather, "out", {"w", "ids"}, {"out"}, 0,
            Encoding::per_axis(1, {0.5f, 0.25f}, {3, -4}, 8)});
  const std::string path = dir.file("e.qemb");
  Status written = write_artifact(path, g, json::object());
  ASSERT_TRUE(written.ok()) << written.message();
  auto loaded = load_artifact(path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
  expect_same_graph(g, *loaded->graph, *loaded);
  EXPECT_EQ(loaded->metadata, json::object());
  EXPECT_NE(describe_sections(*loaded).find("op_scales:out"), std::string::npos);
}

TEST(ArtifactInspect, DescribeSectionsListsEverySection) {
  ScopedTempDir dir;
  const std::string path = dir.file("a.qemb");
  ASSERT_TRUE(write_artifact(path, make_test_graph(), test_metadata(), ArtifactWriteOptions{2}).ok());
  auto loaded = load_artifact(path, Verify::kHeader);
  ASSERT_TRUE(loaded.ok());
  const std::string text = describe_sections(*loaded);
  EXPECT_NE(text.find("format 2, " + std::to_string(loaded->file_size) + " bytes, 10 sections"), std::string::npos)
      << text;
  for (const auto& s : loaded->sections) EXPECT_NE(text.find(s.name), std::string::npos) << s.name;
  EXPECT_NE(text.find("META"), std::string::npos);
  EXPECT_NE(text.find("tensor:w4"), std::string::npos);
  EXPECT_EQ(std::string(to_string(SectionKind::kData)), "DATA");
}

TEST(ArtifactWrite, LongTensorNamesAreTruncatedInTheTableOnly) {
  ScopedTempDir dir;
  Graph g = make_small_graph();
  const std::string long_name(100, 'n');
  g.tensors[0].name = long_name;
  g.ops[0].inputs[0] = long_name;
  const std::string path = dir.file("a.qemb");
  ASSERT_TRUE(write_artifact(path, g, json::object()).ok());
  auto loaded = load_artifact(path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
  EXPECT_EQ(loaded->graph->tensors[0].name, long_name);
  EXPECT_EQ(loaded->sections[2].name, ("tensor:" + long_name).substr(0, 63));
}

// A failed write leaves no file and never clobbers an existing one.
TEST(ArtifactWrite, MissingFolderFailsAndLeavesNothing) {
  ScopedTempDir dir;
  const std::string path = dir.file("no/such/folder/a.qemb");
  Status s = write_artifact(path, make_small_graph(), json::object());
  EXPECT_EQ(s.code(), ErrorCode::kIoError);
  EXPECT_NE(s.message().find("a.qemb"), std::string::npos) << s.message();
  EXPECT_TRUE(dir.entries().empty());
}

TEST(ArtifactWrite, InvalidGraphDoesNotClobberAnExistingFile) {
  ScopedTempDir dir;
  const std::string path = dir.file("a.qemb");
  ASSERT_TRUE(write_artifact(path, make_small_graph(), test_metadata()).ok());
  const std::vector<uint8_t> before = read_bytes(path);

  Graph bad = make_small_graph();
  bad.ops[0].inputs[1] = "missing";
  Status s = write_artifact(path, bad, json::object());
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("invalid graph: op 'out' reads unknown tensor 'missing'"), std::string::npos)
      << s.message();

  Graph short_data = make_small_graph();
  short_data.tensors[0].data = owned({1, 2, 3});
  s = write_artifact(path, short_data, json::object());
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("holds 3 bytes, its shape needs 6"), std::string::npos) << s.message();

  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.qemb"});
}

TEST(ArtifactWrite, RefusesWhatTheFormatCannotHold) {
  ScopedTempDir dir;
  const std::string path = dir.file("a.qemb");
  auto expect_refused = [&](const Graph& g, const json& meta, const std::string& text) {
    Status s = write_artifact(path, g, meta);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << text;
    EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
    EXPECT_TRUE(dir.entries().empty());
  };
  expect_refused(make_small_graph(), json::array(), "metadata must be a JSON object, got array");
  // A legal file name that is not UTF-8 is provenance, not an error: its odd
  // bytes are recorded as U+FFFD.
  ASSERT_TRUE(write_artifact(path, make_small_graph(), json{{"file", "a\xff\xfe.safetensors"}}).ok());
  auto loaded = load_artifact(path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ(loaded->metadata["file"], "a\xef\xbf\xbd\xef\xbf\xbd.safetensors");
  std::filesystem::remove(path);
  Graph bad_name = make_small_graph();
  bad_name.tensors[0].name = "w\xff";
  bad_name.ops[0].inputs[0] = "w\xff";
  expect_refused(bad_name, json::object(), "a tensor or op name is not valid UTF-8");

  Graph g = make_small_graph();
  g.tensors[1].data = owned({0, 0, 0, 0, 0, 0, 0, 0});
  expect_refused(g, json::object(), "tensor 'ids' is APP_WRITE but carries data");

  g = make_small_graph();
  g.tensors[0].encoding.scales[1] = std::numeric_limits<float>::infinity();
  expect_refused(g, json::object(), "tensor 'w' has a non-finite per-axis scale at index 1");

  g = make_small_graph();
  g.tensors[2].encoding.scale = std::numeric_limits<float>::quiet_NaN();
  expect_refused(g, json::object(), "tensor 'out' has a non-finite scale");

  g = make_small_graph();
  g.tensors[0].encoding.bitwidth = 9;
  expect_refused(g, json::object(),
                 "tensor 'w' (SFIXED_POINT_8) has bitwidth 9; qemb stores SFIXED_POINT_8 at 2, 4 or 8 bits");
  // Within 1..8 but not a format qemb stores: once written with the 8-bit range.
  g = make_small_graph();
  g.tensors[0].encoding.bitwidth = 3;
  expect_refused(g, json::object(),
                 "tensor 'w' (SFIXED_POINT_8) has bitwidth 3; qemb stores SFIXED_POINT_8 at 2, 4 or 8 bits");

  g = make_small_graph();
  g.tensors[2].shape = {int64_t{1} << 40, int64_t{1} << 40};
  expect_refused(g, json::object(), "tensor 'out' has more elements than fit in 64 bits");

  g = make_small_graph();
  g.ops[0].intermediate = Encoding::per_axis(0, {1.0f}, {}, 8);
  expect_refused(g, json::object(), "op 'out' intermediate encoding has 1 per-axis scales but 0 offsets");
}

}  // namespace
}  // namespace qemb
