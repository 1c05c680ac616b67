#include <algorithm>
#include <vector>

#include "passes/passes.h"
#include "core/reference_ops.h"
#include "core/parallel_rows.h"
#include "passes/convert_fold.h"
#include "passes/weight_kernels.h"

namespace qemb {

std::optional<ConvertFold> ConvertFold::of(const Tensor& in, const Tensor& out) {
  if (in.kind != TensorKind::kStatic || !in.encoding.is_per_axis() || in.encoding.axis != 0 || in.interleaved() ||
      in.shape.size() != 2 || out.shape != in.shape || out.kind == TensorKind::kAppRead)
    return std::nullopt;
  const bool floats = out.dtype == DataType::kFloat32 && out.encoding.type == Encoding::Type::kNone;
  const bool act = (out.dtype == DataType::kUFixedPoint16 || out.dtype == DataType::kUFixedPoint8) &&
                   out.encoding.is_per_tensor() && out.format() != nullptr;
  if (!floats && !act) return std::nullopt;
  const int64_t rows = in.shape[0];
  if (in.encoding.scales.size() != static_cast<size_t>(rows) ||
      !std::all_of(in.encoding.offsets.begin(), in.encoding.offsets.end(), [](int32_t o) { return o == 0; }))
    return std::nullopt;
  if (weight_kernels(in.format()) == nullptr) return std::nullopt;
  ActivationEncoding a;
  if (act) {
    a.scale = out.encoding.scale;
    a.zero_point = -out.encoding.offset;
    a.bits = out.bitwidth();
  }
  const std::optional<GatherKernel> k =
      floats ? find_kernel(KernelFamily::kWeightOnly, in.bitwidth(), 0, KernelForm::kF32)
             : find_kernel(KernelFamily::kOptimized, in.bitwidth(), a.bits, a.bits == 8 ? KernelForm::kU8 : KernelForm::kU16);
  if (!k) return std::nullopt;
  return ConvertFold(in.shape[1], a, *k, floats ? 4 : static_cast<size_t>(a.bits / 8));
}

std::optional<ConvertFold> ConvertFold::find(const Graph& graph, size_t* op) {
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const Op& o = graph.ops[i];
    if (o.type != OpType::kConvert || o.inputs.size() != 1 || o.outputs.size() != 1) continue;
    const Tensor* in = graph.find_tensor(o.inputs[0]);
    const Tensor* out = graph.find_tensor(o.outputs[0]);
    if (in == nullptr || out == nullptr) continue;
    if (std::optional<ConvertFold> f = of(*in, *out)) {
      *op = i;
      return f;
    }
  }
  return std::nullopt;
}

void ConvertFold::fold_rows(const uint8_t* weights, const float* row_scales, int64_t n, void* out) const {
  // The gather over ids 0..n-1 of these rows is the Convert of each row.
  thread_local std::vector<int64_t> ids;
  if (ids.size() < static_cast<size_t>(n)) {
    const size_t old = ids.size();
    ids.resize(static_cast<size_t>(n));
    for (size_t i = old; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
  }
  RequantGatherParams params;
  params.weights = weights;
  params.row_scales = row_scales;
  params.dim = static_cast<size_t>(dim_);
  params.act = act_;
  const KernelSet& k = best_kernels();
  switch (kernel_row(kernel_).form) {
    case KernelForm::kU16:
      kernel_fn<RequantGatherU16Fn>(k, kernel_)(params, ids.data(), static_cast<size_t>(n), static_cast<uint16_t*>(out));
      break;
    case KernelForm::kU8:
      kernel_fn<RequantGatherU8Fn>(k, kernel_)(params, ids.data(), static_cast<size_t>(n), static_cast<uint8_t*>(out));
      break;
    default:
      kernel_fn<RequantGatherF32Fn>(k, kernel_)(params, ids.data(), static_cast<size_t>(n), static_cast<float*>(out));
      break;
  }
}

Status replace_with_constant(Graph& graph, size_t op, std::shared_ptr<const Buffer> data) {
  Tensor* out = graph.find_tensor(graph.ops[op].outputs[0]);
  out->kind = TensorKind::kStatic;
  out->data = std::move(data);
  graph.ops.erase(graph.ops.begin() + static_cast<std::ptrdiff_t>(op));
  graph.remove_unused_tensors();
  return graph.check();
}

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
    if (in->data == nullptr || in->data->data() == nullptr)  // e.g. streamed into a file
      return make_error(ErrorCode::kInternal, "cannot fold '" + op.name + "': its input's data are not in memory");
    // The folds below read plain rows and encoding.scales: a row-interleaved
    // table (a loaded format-3 artifact) is folded from its plain copy.
    Tensor plain;
    if (in->interleaved()) {
      plain = deinterleave_rows(*in);
      in = &plain;
    }
    const int64_t rows = in->shape[0], dim = in->shape[1];
    const size_t in_row = row_storage_bytes(in->dtype, in->bitwidth(), dim);
    const size_t out_row = row_storage_bytes(out->dtype, out->bitwidth(), dim);
    std::vector<uint8_t> data(out_row * static_cast<size_t>(rows), 0);
    const uint8_t* weights = in->data->data();
    if (const std::optional<ConvertFold> fold = ConvertFold::of(*in, *out)) {
      // Large tables on every core, small ones on the caller.
      const int threads = rows * dim < (int64_t{1} << 20) ? 1 : default_threads(0);
      QEMB_RETURN_IF_ERROR(parallel_rows(rows, row_chunk(dim), threads, "fold", nullptr,
                                         [&](int, int64_t begin, int64_t end) {
        fold->fold_rows(weights + static_cast<size_t>(begin) * in_row, in->encoding.scales.data() + begin,
                        end - begin, data.data() + static_cast<size_t>(begin) * out_row);
        return Status::Ok();
      }));
    } else {
      for (int64_t r = 0; r < rows; ++r)
        requantize_row(weights + static_cast<size_t>(r) * in_row, *in, r, data.data() + static_cast<size_t>(r) * out_row,
                       *out, r, dim);
    }
    QEMB_RETURN_IF_ERROR(replace_with_constant(graph, i, std::make_shared<OwnedBuffer>(std::move(data))));
  }
  graph.remove_unused_tensors();
  return graph.check();
}

}  // namespace qemb
