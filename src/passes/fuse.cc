#include "passes/passes.h"

namespace qemb {
namespace {

bool is_static_per_axis(const Tensor* t) {
  return t != nullptr && t->kind == TensorKind::kStatic && t->encoding.is_per_axis() &&
         t->dtype == DataType::kSFixedPoint8;
}

// Index of the single op reading `tensor`, or -1.
int only_consumer(const Graph& g, const std::string& tensor) {
  int found = -1;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    for (const auto& in : g.ops[i].inputs) {
      if (in != tensor) continue;
      if (found >= 0) return -1;
      found = static_cast<int>(i);
    }
  }
  return found;
}

Op requant_gather(const std::string& name, const std::string& weight, const std::string& indices,
                  const std::string& out) {
  Op op;
  op.type = OpType::kRequantGather;
  op.name = name;
  op.inputs = {weight, indices};
  op.outputs = {out};
  return op;
}

}  // namespace

Status fuse_requant_gathers(Graph& graph) {
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const Op first = graph.ops[i];
    if (!is_static_per_axis(graph.find_tensor(first.inputs[0]))) continue;
    const int next = only_consumer(graph, first.outputs[0]);
    if (next < 0) continue;
    const Op second = graph.ops[static_cast<size_t>(next)];
    Op fused;
    if (first.type == OpType::kConvert && second.type == OpType::kGather &&
        second.inputs[0] == first.outputs[0] && second.axis == 0) {
      // Optimized: Convert(W) -> Gather.
      fused = requant_gather(second.name, first.inputs[0], second.inputs[1], second.outputs[0]);
    } else if (first.type == OpType::kGather && first.axis == 0 && second.type == OpType::kConvert) {
      // Legacy: Gather(W) -> per-tensor intermediate -> Convert.
      fused = requant_gather(second.outputs[0], first.inputs[0], first.inputs[1], second.outputs[0]);
      fused.intermediate = graph.find_tensor(first.outputs[0])->encoding;
    } else {
      continue;
    }
    graph.ops[i] = fused;
    graph.ops.erase(graph.ops.begin() + next);
  }
  graph.remove_unused_tensors();
  return graph.check();
}

}  // namespace qemb
