// The runtime's op registry: for every op type of the IR, in one entry, the
// params it reads, the checks a runnable graph must pass, its reference
// implementation and how it joins the choice of a kernel. graph_signature,
// the interpreter and the kernel plan walk a graph's ops through it, so a
// new op type is one entry here (and one row of QEMB_OP_TYPES in core/ir.h).
#pragma once

#include <span>

#include "kernels/kernels.h"
#include "core/ir.h"
#include "runtime/interpreter.h"

namespace qemb {

// The kernels' view of a graph's op chain so far: a lookup runs on a kernel
// only when the whole chain ends in kMaterialized or kFused.
struct KernelChoice {
  enum class State {
    kStart,           // no op yet
    kMaterialized,    // a gather of a materialized table: gather_u16*, gather_u8*, gather_f32*
    kLegacyGathered,  // a gather into the legacy intermediate; a Convert must follow
    kFused,           // a requantizing gather: requant_*, legacy_* or dequant_*
  };
  State state = State::kStart;
  const Tensor* table = nullptr;  // the materialized table or the PCQ weight
  KernelFamily family = KernelFamily::kMaterialized;
  float max_scale = 0.0f;  // the legacy intermediate's scale
};

struct OpRegistration {
  OpType type;
  // Params: input 1 is the graph's ids, gathered along `axis`.
  bool gathers_ids;
  // What the runtime needs of the op beyond Graph::check (graph_signature
  // runs it on every op that gathers the ids; messages name the op).
  Status (*check)(const Op& op, const GraphSignature& sig);
  // The reference implementation: the scalar interpreter's step.
  Status (*reference)(const Op& op, const ReferenceStep& step);
  // Kernel selection: advances `choice` by this op, or says (false) that no
  // kernel runs the chain, which then runs on the interpreter.
  bool (*select)(const Op& op, const Graph& graph, KernelChoice& choice);
};

// Every entry, one per op type.
std::span<const OpRegistration> op_registry();
// The entry of `type`; nullptr for a value that is no op type.
const OpRegistration* find_op(OpType type);
// The entry of the op type named `name` ("Gather"); an unknown name is the
// artifact reader's error (parse_op_type).
Result<const OpRegistration*> find_op(const std::string& name);

}  // namespace qemb
