#include "runtime/op_registry.h"

#include <algorithm>
#include <string>

namespace qemb {

namespace {

// Input 1 must be the graph's ids, gathered along axis 0.
Status check_gather(const Op& op, const GraphSignature& sig) {
  if (op.inputs[1] != sig.indices->name)
    return make_error(ErrorCode::kUnsupported, "op '" + op.name + "' gathers with '" + op.inputs[1] +
                                                   "', not the graph input '" + sig.indices->name + "'");
  if (op.axis != 0)
    return make_error(ErrorCode::kUnsupported, "op '" + op.name + "' gathers along axis " +
                                                   std::to_string(op.axis) + "; only axis 0 is supported");
  return Status::Ok();
}

Status check_convert(const Op&, const GraphSignature&) { return Status::Ok(); }

bool symmetric_per_axis_weight(const Tensor* t) {
  if (t == nullptr || t->kind != TensorKind::kStatic || t->dtype != DataType::kSFixedPoint8 ||
      !t->encoding.is_per_axis() || t->encoding.axis != 0 || t->shape.size() != 2)
    return false;
  if (t->interleaved()) return true;  // offsets 0 by construction
  return std::all_of(t->encoding.offsets.begin(), t->encoding.offsets.end(),
                     [](int32_t o) { return o == 0; });
}

// The legacy intermediate is the kernels' model only when it is the max-scale,
// zero-offset, same-bitwidth per-tensor approximation.
bool legacy_intermediate_matches(const Encoding& inter, const Tensor& weight) {
  if (!inter.is_per_tensor() || inter.offset != 0 || inter.bitwidth != weight.bitwidth()) return false;
  // The kernels compute the interpreter's result for any per-tensor scale;
  // the max is compared only where it is free (an interleaved table's
  // scales are spread over the whole file, and reading them at load would
  // page in all of it).
  if (weight.interleaved()) return true;
  float max_scale = 0.0f;
  for (float s : weight.encoding.scales) max_scale = std::max(max_scale, s);
  return inter.scale == max_scale;
}

// A gather of the uint16 table already in the output's encoding, or the
// first half of the legacy pattern as lowered (Gather into the per-tensor
// intermediate, then Convert).
bool select_gather(const Op& op, const Graph& g, KernelChoice& c) {
  if (c.state != KernelChoice::State::kStart) return false;
  const Tensor* table = g.find_tensor(op.inputs[0]);
  const Tensor* out = g.find_tensor(op.outputs[0]);
  if (table == nullptr || out == nullptr) return false;
  // A materialized table already in the output's form: uint16 or uint8
  // activations in the output's encoding, or a weight-only scheme's floats.
  const bool same_form = table->dtype == out->dtype && table->encoding == out->encoding &&
                         (table->dtype == DataType::kUFixedPoint16 || table->dtype == DataType::kUFixedPoint8 ||
                          (table->dtype == DataType::kFloat32 && table->encoding.type == Encoding::Type::kNone));
  if (table->kind == TensorKind::kStatic && same_form && table->shape.size() == 2 && !table->interleaved()) {
    c = {KernelChoice::State::kMaterialized, table, KernelFamily::kMaterialized, 0.0f};
    return true;
  }
  if (symmetric_per_axis_weight(table) && out->dtype == DataType::kSFixedPoint8 &&
      legacy_intermediate_matches(out->encoding, *table)) {
    c = {KernelChoice::State::kLegacyGathered, table, KernelFamily::kLegacy, out->encoding.scale};
    return true;
  }
  return false;
}

// Only the legacy pattern's second half: the Convert out of its intermediate.
bool select_convert(const Op&, const Graph&, KernelChoice& c) {
  if (c.state != KernelChoice::State::kLegacyGathered) return false;
  c.state = KernelChoice::State::kFused;
  return true;
}

bool select_requant_gather(const Op& op, const Graph& g, KernelChoice& c) {
  if (c.state != KernelChoice::State::kStart) return false;
  const Tensor* w = g.find_tensor(op.inputs[0]);
  if (!symmetric_per_axis_weight(w)) return false;
  const Tensor* out = g.find_tensor(op.outputs[0]);
  if (out == nullptr) return false;
  if (out->dtype == DataType::kFloat32) {  // weight-only: y = s_r * q, no activation step
    if (op.intermediate) return false;
    c = {KernelChoice::State::kFused, w, KernelFamily::kWeightOnly, 0.0f};
  } else if (!op.intermediate) {
    c = {KernelChoice::State::kFused, w, KernelFamily::kOptimized, 0.0f};
  } else if (legacy_intermediate_matches(*op.intermediate, *w)) {
    c = {KernelChoice::State::kFused, w, KernelFamily::kLegacy, op.intermediate->scale};
  } else {
    return false;
  }
  return true;
}

constexpr OpRegistration kRegistry[] = {
    // type                  gathers_ids  check          reference                  select
    {OpType::kGather,        true,        check_gather,  reference_gather,          select_gather},
    {OpType::kConvert,       false,       check_convert, reference_convert,         select_convert},
    {OpType::kRequantGather, true,        check_gather,  reference_requant_gather,  select_requant_gather},
};

}  // namespace

std::span<const OpRegistration> op_registry() { return kRegistry; }

const OpRegistration* find_op(OpType type) {
  for (const OpRegistration& r : kRegistry)
    if (r.type == type) return &r;
  return nullptr;
}

Result<const OpRegistration*> find_op(const std::string& name) {
  QEMB_ASSIGN_OR_RETURN(OpType type, parse_op_type(name));
  const OpRegistration* r = find_op(type);
  if (r == nullptr)
    return make_error(ErrorCode::kUnsupported, "op type '" + name + "' has no entry in the runtime's op registry");
  return r;
}

}  // namespace qemb
