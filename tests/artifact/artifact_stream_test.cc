// ArtifactStream: tensors written into the file while they are produced, in
// chunks from several threads, must load exactly like write_artifact's file;
// every way a stream can go wrong fails cleanly and leaves no file.
#include <atomic>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "artifact/artifact_test_util.h"
#include "artifact/artifact_io.h"

namespace qemb {
namespace {

using namespace artifact_test;

// Writes `bytes` into `region` in `chunk`-byte pieces claimed in order by
// `threads` threads, as the compiler does.
void stream_in_chunks(StreamedData& region, const uint8_t* bytes, size_t chunk, int threads) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t begin; (begin = next.fetch_add(chunk)) < region.size();) {
        const size_t n = std::min(chunk, region.size() - begin);
        Status s = region.write(begin, bytes + begin, n);
        EXPECT_TRUE(s.ok()) << s.message();
      }
    });
  }
  for (auto& th : pool) th.join();
}

// The test graph with every STATIC tensor's data streamed instead of held.
Graph streamed_copy(const Graph& graph, ArtifactStream& stream) {
  Graph g = graph;
  for (Tensor& t : g.tensors) {
    if (t.kind != TensorKind::kStatic) continue;
    auto region = stream.reserve(t.data->size());
    stream_in_chunks(*region, t.data->data(), 7, 3);
    t.data = region;
  }
  return g;
}

TEST(ArtifactStream, StreamedTensorsLoadLikeWrittenOnes) {
  ScopedTempDir dir;
  const Graph graph = make_test_graph();
  auto stream = ArtifactStream::create(dir.file("streamed.qemb"));
  ASSERT_TRUE(stream.ok()) << stream.error().to_string();
  const Graph streamed = streamed_copy(graph, **stream);
  EXPECT_TRUE(dir.entries().empty());  // the artifact has no name until it is finished
  Status finished = (*stream)->finish(streamed, test_metadata());
  ASSERT_TRUE(finished.ok()) << finished.message();
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"streamed.qemb"});

  ASSERT_TRUE(write_artifact(dir.file("written.qemb"), graph, test_metadata()).ok());
  auto a = load_artifact(dir.file("streamed.qemb"), Verify::kFull);
  auto b = load_artifact(dir.file("written.qemb"), Verify::kFull);
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_EQ(a->graph->dump(), b->graph->dump());
  EXPECT_EQ(a->metadata, b->metadata);
  ASSERT_EQ(a->sections.size(), b->sections.size());
  for (size_t i = 0; i < a->sections.size(); ++i) {
    EXPECT_EQ(a->sections[i].name, b->sections[i].name);
    EXPECT_EQ(a->sections[i].checksum, b->sections[i].checksum) << a->sections[i].name;
    EXPECT_EQ(std::memcmp(a->bytes + a->sections[i].offset, b->bytes + b->sections[i].offset, a->sections[i].size), 0);
  }
  // The streamed tensors come first, from offset 64; the table comes last.
  const std::vector<uint8_t> file = read_bytes(dir.file("streamed.qemb"));
  uint64_t first = UINT64_MAX, last_end = 0;
  for (const auto& s : a->sections) {
    first = std::min(first, s.offset);
    last_end = std::max(last_end, s.offset + s.size);
  }
  EXPECT_EQ(first, kArtifactHeaderSize);
  EXPECT_GE(get_u64(file, 24), last_end);
  EXPECT_EQ(get_u64(file, 24) + a->sections.size() * kArtifactSectionEntrySize, file.size());
}

TEST(ArtifactStream, AnAbortedRangeFailsLaterWritesButNotEarlierOnes) {
  ScopedTempDir dir;
  auto stream = ArtifactStream::create(dir.file("out.qemb"));
  ASSERT_TRUE(stream.ok());
  auto region = (*stream)->reserve(300);
  const std::vector<uint8_t> bytes(300, 7);
  // A writer of bytes 200.. waits for 100..200, whose producer gives up.
  Status late;
  std::thread waiter([&] { late = region->write(200, bytes.data(), 100); });
  ASSERT_TRUE(region->write(0, bytes.data(), 100).ok());
  region->abort(100, "row 12 holds NaN");
  waiter.join();
  EXPECT_EQ(late.code(), ErrorCode::kIoError);
  EXPECT_EQ(late.message(), "row 12 holds NaN");
  EXPECT_EQ(region->write(100, bytes.data(), 100).code(), ErrorCode::kIoError);

  Graph g = make_small_graph();
  for (Tensor& t : g.tensors)
    if (t.kind == TensorKind::kStatic) t.data = region;
  Status finished = (*stream)->finish(g, test_metadata());
  EXPECT_FALSE(finished.ok());
  stream->reset();
  EXPECT_TRUE(dir.entries().empty());
}

TEST(ArtifactStream, MisuseIsAnErrorAndLeavesNoFile) {
  ScopedTempDir dir;
  const std::string path = dir.file("out.qemb");
  write_bytes(path, text_bytes("previous"));
  const Graph small = make_small_graph();
  const Tensor* weight = nullptr;
  for (const Tensor& t : small.tensors)
    if (t.kind == TensorKind::kStatic) weight = &t;
  ASSERT_NE(weight, nullptr);
  const size_t size = weight->data->size();
  auto with_data = [&](std::shared_ptr<Buffer> data) {
    Graph g = small;
    for (Tensor& t : g.tensors)
      if (t.name == weight->name) t.data = std::move(data);
    return g;
  };
  {  // outside the region, overlapping, incomplete
    auto stream = ArtifactStream::create(path);
    ASSERT_TRUE(stream.ok());
    auto region = (*stream)->reserve(size);
    EXPECT_EQ(region->write(size, weight->data->data(), 1).code(), ErrorCode::kInvalidArgument);
    ASSERT_TRUE(region->write(0, weight->data->data(), 1).ok());
    Status overlap = region->write(0, weight->data->data(), 1);
    EXPECT_EQ(overlap.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(overlap.message().find("overlaps bytes already written"), std::string::npos);
    Status incomplete = (*stream)->finish(with_data(region), test_metadata());
    EXPECT_EQ(incomplete.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(incomplete.message().find("is incomplete: 1 of " + std::to_string(size) + " bytes written"),
              std::string::npos)
        << incomplete.message();
  }
  {  // a reserved region no tensor holds would be unchecked bytes in the file
    auto stream = ArtifactStream::create(path);
    ASSERT_TRUE(stream.ok());
    auto region = (*stream)->reserve(size);
    ASSERT_TRUE(region->write(0, weight->data->data(), size).ok());
    Status unused = (*stream)->finish(small, test_metadata());
    EXPECT_EQ(unused.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(unused.message().find("is the data of 0 tensors"), std::string::npos) << unused.message();
  }
  {  // data streamed into another artifact
    auto one = ArtifactStream::create(dir.file("one.qemb"));
    auto other = ArtifactStream::create(path);
    ASSERT_TRUE(one.ok() && other.ok());
    auto region = (*one)->reserve(size);
    ASSERT_TRUE(region->write(0, weight->data->data(), size).ok());
    Status foreign = (*other)->finish(with_data(region), test_metadata());
    EXPECT_NE(foreign.message().find("streamed into another artifact"), std::string::npos) << foreign.message();
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"out.qemb"});
  EXPECT_EQ(read_bytes(path), text_bytes("previous"));

  {  // a finished stream is closed to writes and to a second finish
    auto stream = ArtifactStream::create(path);
    ASSERT_TRUE(stream.ok());
    auto region = (*stream)->reserve(size);
    ASSERT_TRUE(region->write(0, weight->data->data(), size).ok());
    const Graph g = with_data(region);
    ASSERT_TRUE((*stream)->finish(g, test_metadata()).ok());
    EXPECT_EQ((*stream)->finish(g, test_metadata()).code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(region->write(0, weight->data->data(), 1).code(), ErrorCode::kInvalidArgument);
    auto loaded = load_artifact(path, Verify::kFull);
    ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
    EXPECT_EQ(loaded->graph->dump(), small.dump());
  }
}

}  // namespace
}  // namespace qemb
