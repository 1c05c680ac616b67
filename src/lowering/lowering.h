// Lowering of embedding(weight, indices) into backend ops (internal; the
// pattern users choose is in qemb/pattern.h), gated by the target
// SDK version (docs/numeric-contract.md: "The two lowerings", "SDK version
// gating").
#pragma once

#include <optional>
#include <string>

#include "core/ir.h"
#include "qemb/pattern.h"
#include "qemb/quantize.h"
#include "qemb/sdk_version.h"

namespace qemb {

// Validates that `graph` only uses op/encoding combinations the target SDK
// supports. An unknown target (nullopt) accepts everything a known target
// would (the caller chose the pattern knowingly). Errors name the op, the
// combination, the version it needs and the target's version.
Status validate_for_target(const Graph& graph, const std::optional<SdkVersion>& target);

struct EmbeddingLoweringOptions {
  std::string name = "embedding";  // node name N
  Pattern pattern = Pattern::kAuto;
  // What the weight holds and the lookup returns: the weight's bit width, and
  // uint16 / uint8 activations in `act` or (weight-only) FLOAT_32 outputs.
  Scheme scheme = Scheme::k16a4w;
};

struct LoweredEmbedding {
  Graph graph;
  Pattern pattern = Pattern::kLegacy;  // optimized | legacy (never auto)
  std::string reason;                  // why this pattern, for the user
};

// Builds the graph for a per-row quantized table. Tensor names: N_weight
// (STATIC), N_indices (APP_WRITE, INT_32), N (APP_READ); the optimized pattern
// adds N_convert, the legacy one N_intermediate. Shapes with a leading 0 are
// set per call (the batch). Copies the table's values into the weight tensor
// (packed for 4-bit).
Result<LoweredEmbedding> lower_embedding(const PcqTable& table, const ActivationEncoding& act,
                                         const TargetVersion& target,
                                         const EmbeddingLoweringOptions& options);

// The same from an already-quantized weight tensor in storage layout (what
// make_pcq_weight_tensor builds, or a streaming compile fills row by row).
Result<LoweredEmbedding> lower_embedding(Tensor weight, const ActivationEncoding& act,
                                         const TargetVersion& target,
                                         const EmbeddingLoweringOptions& options);

// A per-tensor (non-PCQ) weight lowers to a single Gather "N" that
// requantizes into the activation encoding.
Result<LoweredEmbedding> lower_per_tensor_embedding(const std::vector<int8_t>& q, int64_t rows,
                                                    int64_t dim, int bitwidth, float scale,
                                                    const ActivationEncoding& act,
                                                    const EmbeddingLoweringOptions& options);

// The weight tensor of a PCQ table in storage layout (per-axis, axis 0).
Tensor make_pcq_weight_tensor(const std::string& name, const PcqTable& table);

}  // namespace qemb
