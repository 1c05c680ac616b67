// The compiler's vector paths against the scalar contract: the streaming
// compile (vector row statistics and quantization, and for the materialized
// optimized pattern the uint16 table built row by row without the packed
// weight) must produce the bytes of quantize_table -> lower -> fold/fuse.
#include <gtest/gtest.h>

#include <cstring>

#include "qemb/compiler.h"
#include "qemb/lowering.h"
#include "qemb/passes.h"
#include "support/test_util.h"

namespace qemb {
namespace {

TargetVersion target(const char* v) {
  TargetVersion t;
  t.version = SdkVersion::parse(v).value();
  t.source = "explicit (--qnn-sdk-version)";
  return t;
}

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
          expect_same_static_bytes(c->runtime_graph, reference_graph(table, rows, dim, scheme, version, mode));
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
  ASSERT_EQ(c->lowered.ops.size(), 2u);  // Convert + Gather, as lowered
  const Tensor* w = nullptr;
  for (const Tensor& t : c->lowered.tensors)
    if (t.kind == TensorKind::kStatic) w = &t;
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{9, 4}));
  EXPECT_TRUE(w->encoding.is_per_axis());
  EXPECT_EQ(w->data, nullptr);  // released: the uint16 table was built row by row
}

}  // namespace
}  // namespace qemb
