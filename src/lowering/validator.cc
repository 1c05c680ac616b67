#include <string>

#include "lowering/validator.h"
#include "lowering/lowering.h"

namespace qemb {
namespace {

bool is_static_per_axis(const Tensor* t) {
  return t != nullptr && t->kind == TensorKind::kStatic && t->encoding.is_per_axis();
}

}  // namespace

Error convert_needs_newer_sdk(const std::string& op_name, const SdkVersion& target) {
  return make_error(ErrorCode::kValidationError,
                    "op '" + op_name + "' (Convert on a per-channel STATIC weight) needs QNN SDK >= " +
                        optimized_pattern_min_version().to_string() + ", but the target is " + target.to_string() +
                        "; use CompileOptions.pattern = legacy (or auto), or target a newer SDK with "
                        "CompileOptions.qnn_sdk_version");
}

// The model of what each SDK version runs. Gather from per-axis or per-tensor
// weights (4- or 8-bit) and Convert between per-tensor encodings are in every
// version we target; Convert from a per-axis STATIC input arrived in 2.48.
Status validate_for_target(const Graph& graph, const std::optional<SdkVersion>& target) {
  for (const Op& op : graph.ops) {
    if (op.type == OpType::kRequantGather) {
      return make_error(ErrorCode::kValidationError,
                        "op '" + op.name +
                            "': RequantGather is a qemb runtime op; validate the graph before "
                            "the fuse pass");
    }
    if (op.type != OpType::kConvert || op.inputs.empty()) continue;
    if (!is_static_per_axis(graph.find_tensor(op.inputs[0]))) continue;
    if (target && *target < optimized_pattern_min_version()) return convert_needs_newer_sdk(op.name, *target);
  }
  return Status::Ok();
}

}  // namespace qemb
