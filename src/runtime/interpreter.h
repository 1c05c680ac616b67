// The scalar reference runtime: executes any runtime graph op by op with the
// reference semantics of reference_ops.h. Slow and general; every fast kernel
// is tested against it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/ir.h"

namespace qemb {

struct GraphSignature {
  const Tensor* indices = nullptr;  // the APP_WRITE INT_32 input
  const Tensor* output = nullptr;   // the APP_READ output
  int64_t vocab = 0;
  int64_t dim = 0;
};

// Finds the graph's single input and output and the table size.
Result<GraphSignature> graph_signature(const Graph& graph);

// One op's step in the interpreter: its input's rows and where its result
// goes (the op registry's reference column).
struct ReferenceStep {
  const GraphSignature* sig = nullptr;
  std::span<const int64_t> ids;
  const Tensor* in_t = nullptr;  // input 0
  const uint8_t* in_data = nullptr;
  int64_t in_rows = 0;
  const Tensor* out_t = nullptr;       // output 0
  std::vector<uint8_t>* out = nullptr;  // the step sizes and fills it
  int64_t* out_rows = nullptr;
};
Status reference_gather(const Op& op, const ReferenceStep& step);
Status reference_requant_gather(const Op& op, const ReferenceStep& step);  // with its intermediate, if any
Status reference_convert(const Op& op, const ReferenceStep& step);

// Runs the graph for already-checked ids; writes n * dim values in the
// output's storage layout into `out` (uint16 for UFIXED_POINT_16).
Status interpret_graph(const Graph& graph, const GraphSignature& sig,
                       std::span<const int64_t> ids, uint8_t* out);

}  // namespace qemb
