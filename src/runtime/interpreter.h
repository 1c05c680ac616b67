// The scalar reference runtime: executes any runtime graph op by op with the
// reference semantics of reference_ops.h. Slow and general; every fast kernel
// is tested against it.
#pragma once

#include <cstdint>
#include <span>

#include "qemb/ir.h"

namespace qemb {

struct GraphSignature {
  const Tensor* indices = nullptr;  // the APP_WRITE INT_32 input
  const Tensor* output = nullptr;   // the APP_READ output
  int64_t vocab = 0;
  int64_t dim = 0;
};

// Finds the graph's single input and output and the table size.
Result<GraphSignature> graph_signature(const Graph& graph);

// Runs the graph for already-checked ids; writes n * dim values in the
// output's storage layout into `out` (uint16 for UFIXED_POINT_16).
Status interpret_graph(const Graph& graph, const GraphSignature& sig,
                       std::span<const int64_t> ids, uint8_t* out);

}  // namespace qemb
