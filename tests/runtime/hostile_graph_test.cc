// Artifacts whose checksums are right but whose graph is hostile: the runtime
// must refuse them at load, or fail the lookup, with a message, and never read
// past a buffer. Found by fuzz/runtime_fuzz.cc (regression inputs are kept in
// fuzz/corpus/runtime/); before the fix, the first case read 4 bytes past the
// end of the mapped file and the second read past the interpreter's own
// intermediate rows (AddressSanitizer).
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artifact/artifact_io.h"
#include "core/ir.h"
#include "qemb/runtime.h"
#include "support/graph_util.h"
#include "support/test_util.h"

namespace qemb {
namespace {

using qemb::testing::TempDir;

constexpr int64_t kVocab = 4, kDim = 3;
const Encoding kAct = Encoding::per_tensor(0.001f, -100, 16);

Tensor tensor(const std::string& name, TensorKind kind, DataType dtype, std::vector<int64_t> shape,
              Encoding encoding = kAct) {
  return qemb::testing::graph_tensor(name, kind, dtype, std::move(shape), std::move(encoding));
}

Tensor table(const std::string& name = "table") {
  return tensor(name, TensorKind::kStatic, DataType::kUFixedPoint16, {kVocab, kDim});
}
Tensor ids() { return tensor("ids", TensorKind::kAppWrite, DataType::kInt32, {0}, Encoding{}); }
Tensor output() { return tensor("out", TensorKind::kAppRead, DataType::kUFixedPoint16, {0, kDim}); }
Tensor native(const std::string& name, std::vector<int64_t> shape, Encoding encoding = kAct) {
  return tensor(name, TensorKind::kNative, DataType::kUFixedPoint16, std::move(shape), std::move(encoding));
}

using qemb::testing::graph_op;

class HostileGraph : public ::testing::Test {
 protected:
  // Writes the graph (it passes Graph::check and the artifact's own checks)
  // and loads it on the kernels and on the reference interpreter.
  std::vector<Result<std::unique_ptr<EmbeddingRuntime>>> load_both(const Graph& g) {
    EXPECT_TRUE(g.check().ok()) << g.check().message();
    const std::string path = dir_.file("hostile.qemb");
    Status written = write_artifact(path, g, nlohmann::json::object());
    EXPECT_TRUE(written.ok()) << written.message();
    std::vector<Result<std::unique_ptr<EmbeddingRuntime>>> out;
    for (bool reference : {false, true}) {
      RuntimeOptions options;
      options.reference = reference;
      out.push_back(EmbeddingRuntime::load(path, options));
    }
    return out;
  }
  void expect_refused(const Graph& g, const std::string& message) {
    for (auto& rt : load_both(g)) {
      ASSERT_FALSE(rt.ok());
      EXPECT_EQ(rt.error().code, ErrorCode::kUnsupported);
      EXPECT_NE(rt.error().message.find(message), std::string::npos) << rt.error().message;
    }
  }
  TempDir dir_;
};

TEST_F(HostileGraph, ConvertOfANarrowStaticTensorIsRefused) {
  Graph g;
  g.add_tensor(table());
  g.add_tensor(ids());
  g.add_tensor(native("x", {0, kDim}));
  g.add_tensor(tensor("narrow", TensorKind::kStatic, DataType::kUFixedPoint16, {1, 1}));
  g.add_tensor(output());
  g.add_op(graph_op(OpType::kGather, "g", {"table", "ids"}, "x"));
  g.add_op(graph_op(OpType::kConvert, "c", {"narrow"}, "out"));
  expect_refused(g, "op 'c' uses tensor 'narrow', which is not [rows, 3]");
}

TEST_F(HostileGraph, GatheringTheIdsTwiceIsRefused) {
  // The second Gather would index the first one's [n, D] result with
  // vocabulary ids (it once read past the interpreter's rows).
  Graph g;
  g.add_tensor(table());
  g.add_tensor(ids());
  g.add_tensor(native("x", {0, kDim}));
  g.add_tensor(output());
  g.add_op(graph_op(OpType::kGather, "g1", {"table", "ids"}, "x"));
  g.add_op(graph_op(OpType::kGather, "g2", {"x", "ids"}, "out"));
  expect_refused(g, "the graph gathers the input ids 2 times; a lookup gathers them exactly once");
}

// One validator decides for the kernels and the interpreter: each graph below
// was served by one of them (or both, wrongly) before.
TEST_F(HostileGraph, ConvertWithoutAGatherIsRefused) {
  // Returned rows 0..V-1 for any V ids, on both paths.
  Graph g;
  g.add_tensor(table());
  g.add_tensor(ids());
  g.add_tensor(tensor("out", TensorKind::kAppRead, DataType::kUFixedPoint16, {kVocab, kDim}));
  g.add_op(graph_op(OpType::kConvert, "c", {"table"}, "out"));
  expect_refused(g, "the graph gathers the input ids 0 times; a lookup gathers them exactly once");
}

TEST_F(HostileGraph, GatherAlongAxisOneIsRefused) {
  Graph g;
  g.add_tensor(table());
  g.add_tensor(ids());
  g.add_tensor(output());
  Op gather = graph_op(OpType::kGather, "g", {"table", "ids"}, "out");
  gather.axis = 1;
  g.add_op(gather);
  expect_refused(g, "op 'g' gathers along axis 1; only axis 0 is supported");
}

TEST_F(HostileGraph, GatherWithAnotherIndexTensorIsRefused) {
  Graph g;
  g.add_tensor(table());
  g.add_tensor(ids());
  g.add_tensor(output());
  g.add_op(graph_op(OpType::kGather, "g", {"table", "table"}, "out"));
  expect_refused(g, "op 'g' gathers with 'table', not the graph input 'ids'");
}

TEST_F(HostileGraph, GatherThatDoesNotWriteTheOutputIsRefused) {
  Graph g;
  g.add_tensor(table());
  g.add_tensor(ids());
  g.add_tensor(native("x", {0, kDim}));
  g.add_tensor(output());
  g.add_op(graph_op(OpType::kGather, "g", {"table", "ids"}, "x"));
  expect_refused(g, "the last op 'g' writes 'x', not the graph output 'out'");
}

TEST_F(HostileGraph, OutputOffsetOutsideUint16IsRefused) {
  // -offset is the zero point: -INT32_MIN overflowed (UndefinedBehaviorSanitizer).
  for (int32_t offset : {std::numeric_limits<int32_t>::min(), -65536, 1}) {
    SCOPED_TRACE(offset);
    Graph g;
    g.add_tensor(tensor("table", TensorKind::kStatic, DataType::kUFixedPoint16, {kVocab, kDim},
                        Encoding::per_tensor(0.001f, offset, 16)));
    g.add_tensor(ids());
    g.add_tensor(tensor("out", TensorKind::kAppRead, DataType::kUFixedPoint16, {0, kDim},
                        Encoding::per_tensor(0.001f, offset, 16)));
    g.add_op(graph_op(OpType::kGather, "g", {"table", "ids"}, "out"));
    expect_refused(g, "graph output 'out' has offset " + std::to_string(offset) +
                          "; a uint16 output needs an offset in [-65535, 0]");
  }
}

TEST_F(HostileGraph, PerAxisEncodingOnAnIntermediateIsRefused) {
  Graph g;
  g.add_tensor(table());
  g.add_tensor(ids());
  g.add_tensor(native("x", {0, kDim}, Encoding::per_axis(0, {}, {}, 16)));  // no scale for any row
  g.add_tensor(output());
  g.add_op(graph_op(OpType::kGather, "g", {"table", "ids"}, "x"));
  g.add_op(graph_op(OpType::kConvert, "c", {"x"}, "out"));
  expect_refused(g, "tensor 'x' has a per-axis encoding the runtime cannot apply");
}

TEST_F(HostileGraph, PerAxisEncodingAlongColumnsIsRefused) {
  Graph g;
  g.add_tensor(tensor("table", TensorKind::kStatic, DataType::kSFixedPoint8, {kVocab, kDim},
                      Encoding::per_axis(1, {0.1f, 0.2f, 0.3f}, {0, 0, 0}, 8)));
  g.add_tensor(ids());
  g.add_tensor(output());
  g.add_op(graph_op(OpType::kRequantGather, "g", {"table", "ids"}, "out"));
  expect_refused(g, "tensor 'table' has a per-axis encoding the runtime cannot apply");
}

TEST_F(HostileGraph, OpWritingAStaticTensorIsRefused) {
  Graph g;
  g.add_tensor(table());
  g.add_tensor(ids());
  g.add_tensor(tensor("constant", TensorKind::kStatic, DataType::kUFixedPoint16, {1, kDim},
                      Encoding::per_axis(0, {0.5f}, {0}, 16)));
  g.add_tensor(output());
  g.add_op(graph_op(OpType::kGather, "g", {"table", "ids"}, "constant"));
  g.add_op(graph_op(OpType::kConvert, "c", {"constant"}, "out"));
  expect_refused(g, "op 'g' writes the STATIC tensor 'constant'");
}

TEST_F(HostileGraph, PerAxisIntermediateOnAFusedGatherIsRefused) {
  Graph g;
  g.add_tensor(tensor("table", TensorKind::kStatic, DataType::kSFixedPoint8, {kVocab, kDim},
                      Encoding::per_axis(0, {0.1f, 0.2f, 0.3f, 0.4f}, {0, 0, 0, 0}, 8)));
  g.add_tensor(ids());
  g.add_tensor(output());
  Op fused = graph_op(OpType::kRequantGather, "g", {"table", "ids"}, "out");
  fused.intermediate = Encoding::per_axis(0, {}, {}, 8);
  g.add_op(fused);
  expect_refused(g, "op 'g' has an intermediate encoding that is not per-tensor");
}

}  // namespace
}  // namespace qemb
