// The compiler's vector paths against the scalar contract: the streaming
// compile (vector row statistics and quantization, and for the materialized
// optimized pattern the uint16 table built row by row without the packed
// weight) must produce the bytes of quantize_table -> lower -> fold/fuse.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "qemb/artifact.h"
#include "qemb/compiler.h"
#include "qemb/half.h"
#include "qemb/safetensors.h"
#include "lowering/lowering.h"
#include "passes/passes.h"
#include "support/test_util.h"

namespace qemb {
namespace {

TargetVersion target(const char* v) { return qemb::testing::sdk_target(v, "explicit"); }

// The scalar route: quantize.h functions, lowering, then the passes.
Graph reference_graph(const std::vector<float>& table, int64_t rows, int64_t dim, Scheme scheme,
                      const char* version, CompileMode mode) {
  const PcqTable pcq = quantize_table(table.data(), rows, dim, scheme);
  float lo, hi;
  min_max(table.data(), table.size(), lo, hi);
  EmbeddingLoweringOptions opts;
  opts.name = "embedding";
  auto lowered = lower_embedding(pcq, activation_encoding(lo, hi), target(version), opts);
  EXPECT_TRUE(lowered.ok());
  Graph g = lowered->graph;
  EXPECT_TRUE((mode == CompileMode::kFused ? fuse_requant_gathers(g) : fold_static_converts(g)).ok());
  // A fused compile stores the fused gather's table row-interleaved.
  if (mode == CompileMode::kFused)
    for (const Op& op : g.ops)
      if (op.type == OpType::kRequantGather) {
        Tensor* w = g.find_tensor(op.inputs[0]);
        auto interleaved = interleave_rows(*w);
        EXPECT_TRUE(interleaved.ok());
        if (interleaved.ok()) *w = *interleaved;
      }
  return g;
}

void expect_same_static_bytes(const Graph& got, const Graph& want) {
  ASSERT_EQ(got.dump(), want.dump());
  for (const Tensor& w : want.tensors) {
    if (!w.data) continue;
    const Tensor* g = got.find_tensor(w.name);
    ASSERT_NE(g, nullptr);
    ASSERT_TRUE(g->data);
    ASSERT_EQ(g->data->size(), w.data->size()) << w.name;
    EXPECT_EQ(std::memcmp(g->data->data(), w.data->data(), w.data->size()), 0) << w.name;
  }
}

TEST(CompileKernels, StreamingCompileMatchesScalarRouteByteForByte) {
  for (Scheme scheme : {Scheme::k16a4w, Scheme::k16a8w}) {
    for (const char* version : {"2.48", "2.37"}) {
      for (CompileMode mode : {CompileMode::kMaterialize, CompileMode::kFused}) {
        for (int64_t dim : {1, 7, 16, 33, 130}) {
          const int64_t rows = 37;
          const auto table = qemb::testing::spread_table(rows, dim, static_cast<uint64_t>(dim));
          CompileOptions o;
          o.scheme = scheme;
          o.mode = mode;
          o.threads = 3;
          auto c = compile_table(table.data(), rows, dim, o, target(version));
          ASSERT_TRUE(c.ok()) << c.error().to_string();
          SCOPED_TRACE(std::string(to_string(scheme)) + " " + version + " " + to_string(mode) + " dim " +
                       std::to_string(dim));
          expect_same_static_bytes(*c->runtime_graph, reference_graph(table, rows, dim, scheme, version, mode));
        }
      }
    }
  }
}

TEST(CompileKernels, MaterializedOptimizedKeepsLoweredGraphMetadataWithoutWeightBytes) {
  const auto table = qemb::testing::spread_table(9, 4, 3);
  CompileOptions o;
  o.mode = CompileMode::kMaterialize;
  auto c = compile_table(table.data(), 9, 4, o, target("2.48"));
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->lowered->ops.size(), 2u);  // Convert + Gather, as lowered
  const Tensor* w = nullptr;
  for (const Tensor& t : c->lowered->tensors)
    if (t.kind == TensorKind::kStatic) w = &t;
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{9, 4}));
  EXPECT_TRUE(w->encoding.is_per_axis());
  EXPECT_EQ(w->data, nullptr);  // released: the uint16 table was built row by row
}

// A checkpoint on disk in `dtype` and the floats the compiler reads back.
std::vector<float> write_checkpoint(const std::string& path, int64_t rows, int64_t dim, const char* dtype,
                                    uint64_t seed) {
  auto table = qemb::testing::spread_table(rows, dim, seed);
  auto bytes = floats_to_dtype_bytes(table.data(), table.size(), dtype);
  EXPECT_TRUE(bytes.ok());
  EXPECT_TRUE(write_safetensors(path, {}, {{"model.embed_tokens.weight", dtype, {rows, dim}, *bytes}}).ok());
  for (size_t i = 0; i < table.size(); ++i) {  // what the file holds
    const uint16_t h = static_cast<uint16_t>((*bytes)[2 * i] | ((*bytes)[2 * i + 1] << 8));
    if (std::string(dtype) == "BF16") table[i] = bf16_to_float(h);
    if (std::string(dtype) == "F16") table[i] = f16_to_float(h);
  }
  return table;
}

// compile_checkpoint streams the table into the file chunk by chunk from
// several threads: the artifact must hold exactly the in-memory compile's
// graph and bytes, with many chunks (dim 4096: 16 rows a chunk) and few.
TEST(CompileKernels, CheckpointStreamedIntoTheArtifactMatchesTheInMemoryCompile) {
  qemb::testing::TempDir dir;
  struct Shape {
    int64_t rows, dim;
    const char* dtype;
  };
  for (Shape shape : {Shape{70, 4096, "BF16"}, Shape{2500, 7, "F16"}, Shape{33, 130, "BF16"}, Shape{41, 1027, "BF16"}}) {
    const std::string ckpt = dir.file("model.safetensors"), out = dir.file("model.qemb");
    const auto table = write_checkpoint(ckpt, shape.rows, shape.dim, shape.dtype, static_cast<uint64_t>(shape.dim));
    for (Scheme scheme : {Scheme::k16a4w, Scheme::k16a8w}) {
      for (const char* version : {"2.48", "2.37"}) {
        for (CompileMode mode : {CompileMode::kMaterialize, CompileMode::kFused}) {
          SCOPED_TRACE(std::string(to_string(scheme)) + " " + version + " " + to_string(mode) + " " +
                       std::to_string(shape.rows) + "x" + std::to_string(shape.dim));
          CompileOptions o;
          o.scheme = scheme;
          o.mode = mode;
          o.threads = 3;
          o.qnn_sdk_version = version;
          auto streamed = compile_checkpoint(ckpt, o, out);
          ASSERT_TRUE(streamed.ok()) << streamed.error().to_string();
          auto in_memory = compile_table(table.data(), shape.rows, shape.dim, o, target(version));
          ASSERT_TRUE(in_memory.ok()) << in_memory.error().to_string();
          auto loaded = load_artifact(out, Verify::kFull);
          ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
          expect_same_static_bytes(*loaded->graph, *in_memory->runtime_graph);
          EXPECT_EQ(streamed->runtime_graph->dump(), in_memory->runtime_graph->dump());
          EXPECT_EQ(loaded->metadata, streamed->metadata);
        }
      }
    }
  }
}

// A bad value many chunks in stops every worker (later chunks wait for the
// failed one to be written): the call returns the error, leaves no file and
// keeps what was at the output path.
TEST(CompileKernels, StreamedCompileThatFailsMidwayLeavesTheOldOutputAlone) {
  qemb::testing::TempDir dir;
  const std::string ckpt = dir.file("model.safetensors"), out = dir.file("model.qemb");
  const int64_t rows = 200, dim = 4096;
  auto table = qemb::testing::spread_table(rows, dim, 5);
  table[static_cast<size_t>(151 * dim + 17)] = NAN;
  // F32 is read into float rows, BF16 in place: both stop at the same value.
  for (const char* dtype : {"F32", "BF16"}) {
    SCOPED_TRACE(dtype);
    auto bytes = floats_to_dtype_bytes(table.data(), table.size(), dtype);
    ASSERT_TRUE(bytes.ok());
    ASSERT_TRUE(write_safetensors(ckpt, {}, {{"model.embed_tokens.weight", dtype, {rows, dim}, *bytes}}).ok());
    {
      std::FILE* f = std::fopen(out.c_str(), "wb");
      ASSERT_NE(f, nullptr);
      std::fputs("previous artifact", f);
      std::fclose(f);
    }
    for (CompileMode mode : {CompileMode::kFused, CompileMode::kMaterialize}) {
      CompileOptions o;
      o.mode = mode;
      o.threads = 4;
      o.qnn_sdk_version = "2.48";
      auto c = compile_checkpoint(ckpt, o, out);
      ASSERT_FALSE(c.ok());
      EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);
      EXPECT_NE(c.error().message.find("(NaN) at row 151, column 17"), std::string::npos) << c.error().message;
      EXPECT_EQ(qemb::testing::read_text(out), "previous artifact");
      size_t entries = 0;
      for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
      EXPECT_EQ(entries, 2u);  // the checkpoint and the old output: no temporary left
    }
  }
}

}  // namespace
}  // namespace qemb
