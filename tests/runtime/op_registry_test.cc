// The runtime's op registry: one entry per op type of the IR, looked up by
// type or by name; and the plans it leads to for the graph shapes the
// compiler writes and for chains no kernel runs.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "qemb/artifact.h"
#include "core/ir.h"
#include "qemb/runtime.h"
#include "runtime/interpreter.h"
#include "runtime/op_registry.h"
#include "support/graph_util.h"

namespace qemb {
namespace {

TEST(OpRegistry, EveryOpTypeHasExactlyOneEntry) {
  const std::span<const OpRegistration> registry = op_registry();
  EXPECT_EQ(registry.size(), std::size(kAllOpTypes));
  for (OpType type : kAllOpTypes) {
    int entries = 0;
    for (const OpRegistration& r : registry) entries += r.type == type;
    EXPECT_EQ(entries, 1) << to_string(type);
    const OpRegistration* found = find_op(type);
    ASSERT_NE(found, nullptr) << to_string(type);
    EXPECT_EQ(found->type, type);
    EXPECT_NE(found->check, nullptr);
    EXPECT_NE(found->reference, nullptr);
    EXPECT_NE(found->select, nullptr);
    Result<const OpRegistration*> by_name = find_op(std::string(to_string(type)));
    ASSERT_TRUE(by_name.ok()) << to_string(type);
    EXPECT_EQ(*by_name, found);
  }
  EXPECT_TRUE(find_op(OpType::kGather)->gathers_ids);
  EXPECT_TRUE(find_op(OpType::kRequantGather)->gathers_ids);
  EXPECT_FALSE(find_op(OpType::kConvert)->gathers_ids);
}

TEST(OpRegistry, AnUnknownOpIsRefusedWithTheReadersMessage) {
  Result<const OpRegistration*> r = find_op(std::string("Embedding"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kParseError);
  EXPECT_EQ(r.error().message, "unknown op type 'Embedding'");
  EXPECT_EQ(find_op(static_cast<OpType>(std::size(kAllOpTypes))), nullptr);
}

TEST(OpRegistry, ArityComesFromTheIrList) {
  EXPECT_EQ(op_input_count(OpType::kGather), 2);
  EXPECT_EQ(op_input_count(OpType::kConvert), 1);
  EXPECT_EQ(op_input_count(OpType::kRequantGather), 2);
  for (OpType type : kAllOpTypes) EXPECT_EQ(op_output_count(type), 1) << to_string(type);
}

// Graphs of a 4 x 2 table, built by hand.
constexpr int64_t kVocab = 4, kDim = 2;
const Encoding kAct = Encoding::per_tensor(0.001f, -100, 16);

Tensor make(const std::string& name, TensorKind kind, DataType dtype, std::vector<int64_t> shape, Encoding e) {
  return qemb::testing::graph_tensor(name, kind, dtype, std::move(shape), std::move(e), 1);
}
using qemb::testing::graph_op;

Graph base(bool u16_table) {
  Graph g;
  if (u16_table) {
    g.add_tensor(make("table", TensorKind::kStatic, DataType::kUFixedPoint16, {kVocab, kDim}, kAct));
  } else {
    g.add_tensor(make("table", TensorKind::kStatic, DataType::kSFixedPoint8, {kVocab, kDim},
                      Encoding::per_axis(0, {0.5f, 0.25f, 1.0f, 0.75f}, {0, 0, 0, 0}, 4)));
  }
  g.add_tensor(make("ids", TensorKind::kAppWrite, DataType::kInt32, {0}, Encoding{}));
  g.add_tensor(make("out", TensorKind::kAppRead, DataType::kUFixedPoint16, {0, kDim}, kAct));
  return g;
}

std::string kernel_stem_of(Graph g) {
  LoadedArtifact a;
  a.graph = std::make_shared<const Graph>(std::move(g));
  RuntimeOptions options;
  options.threads = 1;
  auto rt = EmbeddingRuntime::from_artifact(std::move(a), options);
  if (!rt.ok()) return "error: " + rt.error().message;
  const std::string name = (*rt)->kernel_name();
  return name.substr(0, name.find('['));
}

TEST(OpRegistry, PlansTheThreeShapesTheCompilerWritesOnTheirKernels) {
  Graph materialized = base(true);
  materialized.add_op(graph_op(OpType::kGather, "g", {"table", "ids"}, "out"));
  EXPECT_EQ(kernel_stem_of(materialized), "gather_u16");

  Graph fused = base(false);
  fused.add_op(graph_op(OpType::kRequantGather, "g", {"table", "ids"}, "out"));
  EXPECT_EQ(kernel_stem_of(fused), "requant_gather_s4_u16");

  Graph fused_legacy = base(false);
  Op legacy = graph_op(OpType::kRequantGather, "g", {"table", "ids"}, "out");
  legacy.intermediate = Encoding::per_tensor(1.0f, 0, 4);  // the max row scale
  fused_legacy.add_op(legacy);
  EXPECT_EQ(kernel_stem_of(fused_legacy), "legacy_gather_s4_u16");

  Graph lowered_legacy = base(false);
  lowered_legacy.add_tensor(make("inter", TensorKind::kNative, DataType::kSFixedPoint8, {0, kDim},
                                 Encoding::per_tensor(1.0f, 0, 4)));
  lowered_legacy.add_op(graph_op(OpType::kGather, "g", {"table", "ids"}, "inter"));
  lowered_legacy.add_op(graph_op(OpType::kConvert, "c", {"inter"}, "out"));
  EXPECT_EQ(kernel_stem_of(lowered_legacy), "legacy_gather_s4_u16");
}

TEST(OpRegistry, ChainsNoKernelRunsGoToTheInterpreter) {
  // A legacy intermediate that is not the max row scale.
  Graph off_scale = base(false);
  Op legacy = graph_op(OpType::kRequantGather, "g", {"table", "ids"}, "out");
  legacy.intermediate = Encoding::per_tensor(0.5f, 0, 4);
  off_scale.add_op(legacy);
  EXPECT_EQ(kernel_stem_of(off_scale), "reference_interpreter");

  // A Convert after the materialized gather.
  Graph converted = base(true);
  converted.add_tensor(make("mid", TensorKind::kNative, DataType::kUFixedPoint16, {0, kDim}, kAct));
  converted.add_op(graph_op(OpType::kGather, "g", {"table", "ids"}, "mid"));
  converted.add_op(graph_op(OpType::kConvert, "c", {"mid"}, "out"));
  EXPECT_EQ(kernel_stem_of(converted), "reference_interpreter");

  // The lowered legacy pattern with one Convert too many.
  Graph twice = base(false);
  twice.add_tensor(make("inter", TensorKind::kNative, DataType::kSFixedPoint8, {0, kDim},
                        Encoding::per_tensor(1.0f, 0, 4)));
  twice.add_tensor(make("mid", TensorKind::kNative, DataType::kUFixedPoint16, {0, kDim}, kAct));
  twice.add_op(graph_op(OpType::kGather, "g", {"table", "ids"}, "inter"));
  twice.add_op(graph_op(OpType::kConvert, "c", {"inter"}, "mid"));
  twice.add_op(graph_op(OpType::kConvert, "c2", {"mid"}, "out"));
  EXPECT_EQ(kernel_stem_of(twice), "reference_interpreter");
}

TEST(OpRegistry, AGraphWithAnOpTypeOutsideTheListIsRefused) {
  Graph g = base(true);
  g.add_op(graph_op(static_cast<OpType>(std::size(kAllOpTypes)), "g", {"table", "ids"}, "out"));
  EXPECT_EQ(kernel_stem_of(g), "error: op 'g' has an unknown op type");
}

}  // namespace
}  // namespace qemb
