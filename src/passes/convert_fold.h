// The fold of the optimized pattern's Convert (a STATIC per-row weight into
// a uint16 / uint8 / float32 tensor of the same shape) in a form that runs chunk by chunk, so a
// streaming compile folds rows while they are in cache and
// fold_static_converts folds a whole weight through the same code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "core/ir.h"
#include "kernels/kernels.h"

namespace qemb {

class ConvertFold {
 public:
  // The fold of Convert(in) -> out when `in` is a per-row (axis 0, zero
  // offsets) weight of a format weight_kernels() knows and `out` a per-tensor
  // uint16 / uint8 [rows, dim] activation, or a FLOAT_32 one (a weight-only
  // scheme's dequantized table), that is not a graph output; else nullopt.
  // Only shapes and encodings are read: the weight's bytes may not exist yet.
  static std::optional<ConvertFold> of(const Tensor& in, const Tensor& out);
  // The first Convert in `graph` that folds so; *op is its index.
  static std::optional<ConvertFold> find(const Graph& graph, size_t* op);

  // Folds n rows of the weight (plain layout, rows back to back) with their
  // scales into n rows of the output (out_row_bytes() each), bit-identical
  // to requantize_row.
  void fold_rows(const uint8_t* weights, const float* row_scales, int64_t n, void* out) const;
  size_t out_row_bytes() const { return static_cast<size_t>(dim_) * out_value_bytes_; }

 private:
  ConvertFold(int64_t dim, ActivationEncoding act, GatherKernel kernel, size_t out_value_bytes)
      : dim_(dim), act_(act), kernel_(kernel), out_value_bytes_(out_value_bytes) {}
  int64_t dim_;
  ActivationEncoding act_;
  GatherKernel kernel_;  // the optimized (or weight-only) gather into the output's form
  size_t out_value_bytes_;
};

// Replaces graph.ops[op], a Convert of a STATIC input, by its output made
// STATIC holding `data`, drops tensors nothing uses, and checks the graph.
Status replace_with_constant(Graph& graph, size_t op, std::shared_ptr<const Buffer> data);

}  // namespace qemb
