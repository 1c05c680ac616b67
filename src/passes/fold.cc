#include <vector>

#include "qemb/passes.h"
#include "qemb/reference_ops.h"

namespace qemb {

Status fold_static_converts(Graph& graph) {
  for (size_t i = 0; i < graph.ops.size();) {
    Op& op = graph.ops[i];
    const Tensor* in = op.type == OpType::kConvert ? graph.find_tensor(op.inputs[0]) : nullptr;
    if (in == nullptr || in->kind != TensorKind::kStatic) {
      ++i;
      continue;
    }
    Tensor* out = graph.find_tensor(op.outputs[0]);
    if (out == nullptr || out->shape != in->shape || in->shape.size() != 2)
      return make_error(ErrorCode::kInternal, "cannot fold '" + op.name + "': shapes differ");
    if (out->kind == TensorKind::kAppRead)
      return make_error(ErrorCode::kUnsupported,
                        "cannot fold '" + op.name + "': its output is a graph output");
    const int64_t rows = in->shape[0], dim = in->shape[1];
    const size_t in_row = row_storage_bytes(in->dtype, in->bitwidth(), dim);
    const size_t out_row = row_storage_bytes(out->dtype, out->bitwidth(), dim);
    std::vector<uint8_t> data(out_row * static_cast<size_t>(rows), 0);
    for (int64_t r = 0; r < rows; ++r) {
      requantize_row(in->data->data() + static_cast<size_t>(r) * in_row, *in, r,
                     data.data() + static_cast<size_t>(r) * out_row, *out, r, dim);
    }
    out->kind = TensorKind::kStatic;
    out->data = std::make_shared<OwnedBuffer>(std::move(data));
    graph.ops.erase(graph.ops.begin() + static_cast<std::ptrdiff_t>(i));
  }
  graph.remove_unused_tensors();
  return graph.check();
}

}  // namespace qemb
