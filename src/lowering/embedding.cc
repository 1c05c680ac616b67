#include <algorithm>
#include <cstring>

#include "lowering/lowering.h"

#include "lowering/validator.h"

namespace qemb {

SdkVersion optimized_pattern_min_version() { return SdkVersion::parse("2.48").value(); }

const char* to_string(Pattern p) {
  switch (p) {
    case Pattern::kAuto: return "auto";
    case Pattern::kOptimized: return "optimized";
    case Pattern::kLegacy: return "legacy";
  }
  return "?";
}

Result<Pattern> parse_pattern(const std::string& s) {
  if (s == "auto") return Pattern::kAuto;
  if (s == "optimized") return Pattern::kOptimized;
  if (s == "legacy") return Pattern::kLegacy;
  return make_error(ErrorCode::kInvalidArgument,
                    "unknown pattern '" + s + "': expected auto, optimized or legacy");
}

Tensor make_pcq_weight_tensor(const std::string& name, const PcqTable& table) {
  const int bits = weight_bits(table.scheme);
  Tensor w;
  w.name = name;
  w.kind = TensorKind::kStatic;
  w.dtype = DataType::kSFixedPoint8;
  w.shape = {table.rows, table.dim};
  w.encoding = Encoding::per_axis(0, table.scales,
                                  std::vector<int32_t>(static_cast<size_t>(table.rows), 0), bits);
  const StorageFormat& format = *w.format();
  const size_t row_bytes = format.row_bytes(table.dim);
  std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(table.rows), 0);
  for (int64_t r = 0; r < table.rows; ++r) {
    const int8_t* q = table.q.data() + r * table.dim;
    uint8_t* out = bytes.data() + static_cast<size_t>(r) * row_bytes;
    for (int64_t j = 0; j < table.dim; ++j) format.store(out, j, q[j]);
  }
  w.data = std::make_shared<OwnedBuffer>(std::move(bytes));
  return w;
}

namespace {

// The lookup's output (and the optimized pattern's Convert result): uint16
// or uint8 activations in `act`, or float32 for a weight-only scheme.
Tensor activation_tensor(const std::string& name, TensorKind kind, std::vector<int64_t> shape,
                         const ActivationEncoding& act, bool weight_only) {
  Tensor t;
  t.name = name;
  t.kind = kind;
  t.shape = std::move(shape);
  if (weight_only) {
    t.dtype = DataType::kFloat32;
  } else {
    t.dtype = act.bits == 8 ? DataType::kUFixedPoint8 : DataType::kUFixedPoint16;
    t.encoding = Encoding::per_tensor(act.scale, act.offset(), act.bits);
  }
  return t;
}

Tensor indices_tensor(const std::string& name) {
  Tensor t;
  t.name = name + "_indices";
  t.kind = TensorKind::kAppWrite;
  t.dtype = DataType::kInt32;
  t.shape = {0};
  return t;
}

Op gather(const std::string& name, const std::string& table, const std::string& indices,
          const std::string& out) {
  Op op;
  op.type = OpType::kGather;
  op.name = name;
  op.inputs = {table, indices};
  op.outputs = {out};
  op.axis = 0;
  return op;
}

Op convert(const std::string& name, const std::string& in, const std::string& out) {
  Op op;
  op.type = OpType::kConvert;
  op.name = name;
  op.inputs = {in};
  op.outputs = {out};
  return op;
}

Graph optimized_graph(Tensor weight, const ActivationEncoding& act, const std::string& n, bool weight_only) {
  const int64_t rows = weight.shape[0], dim = weight.shape[1];
  Graph g;
  weight.name = n + "_weight";
  g.add_tensor(std::move(weight));
  g.add_tensor(indices_tensor(n));
  g.add_tensor(activation_tensor(n + "_convert", TensorKind::kNative, {rows, dim}, act, weight_only));
  g.add_tensor(activation_tensor(n, TensorKind::kAppRead, {0, dim}, act, weight_only));
  g.add_op(convert(n + "_convert", n + "_weight", n + "_convert"));
  g.add_op(gather(n, n + "_convert", n + "_indices", n));
  return g;
}

Graph legacy_graph(Tensor weight, const ActivationEncoding& act, const std::string& n) {
  const int64_t dim = weight.shape[1];
  const int bits = weight.encoding.bitwidth;
  float max_scale = 0.0f;
  for (float s : weight.encoding.scales) max_scale = std::max(max_scale, s);
  Graph g;
  weight.name = n + "_weight";
  g.add_tensor(std::move(weight));
  g.add_tensor(indices_tensor(n));
  // The per-tensor approximation of the per-axis encoding: max scale and max
  // offset (0 for symmetric weights).
  Tensor inter;
  inter.name = n + "_intermediate";
  inter.kind = TensorKind::kNative;
  inter.dtype = DataType::kSFixedPoint8;
  inter.shape = {0, dim};
  inter.encoding = Encoding::per_tensor(max_scale, 0, bits);
  g.add_tensor(std::move(inter));
  g.add_tensor(activation_tensor(n, TensorKind::kAppRead, {0, dim}, act, false));
  g.add_op(gather(n + "_intermediate", n + "_weight", n + "_indices", n + "_intermediate"));
  g.add_op(convert(n + "_convert", n + "_intermediate", n));
  return g;
}

std::string how_to_get_optimized() {
  return "to get the optimized pattern, target QNN SDK >= " +
         optimized_pattern_min_version().to_string() +
         ": give that version explicitly or set QNN_SDK_ROOT to such an SDK";
}

}  // namespace

Result<PatternChoice> choose_pattern(Pattern requested, const TargetVersion& target, const std::string& name,
                                     Scheme scheme) {
  if (scheme.weight_only()) {
    // Not a QNN pattern at all: y = s_r * q as float, for qemb's runtime and
    // ONNX export (DequantizeLinear -> Gather). The SDK version is not read.
    if (requested == Pattern::kLegacy)
      return make_error(ErrorCode::kInvalidArgument,
                        std::string("the legacy pattern quantizes the lookup's output to a per-tensor activation; "
                                    "weight-only scheme ") +
                            scheme.name() + " has none (its lookups return floats): use --pattern auto or optimized, "
                            "or an activation scheme (16a" + std::to_string(scheme.weight_bits()) + "w, 8a" +
                            std::to_string(scheme.weight_bits()) + "w)");
    PatternChoice out;
    out.pattern = Pattern::kOptimized;
    out.reason = std::string("weight-only scheme ") + scheme.name() +
                 ": float outputs (DequantizeLinear -> Gather), served by qemb's runtime and ONNX export; not a "
                 "QNN pattern (QNN graphs take the activation schemes), so the target SDK version is not consulted";
    return out;
  }
  const SdkVersion needed = optimized_pattern_min_version();
  const std::string version_text =
      target.version ? target.version->to_string() + " [" + target.source + "]" : "unknown";
  PatternChoice out;
  switch (requested) {
    case Pattern::kOptimized:
      if (target.version && *target.version < needed) return convert_needs_newer_sdk(name + "_convert", *target.version);
      out.pattern = Pattern::kOptimized;
      out.reason = "requested; target SDK " + version_text;
      break;
    case Pattern::kLegacy:
      out.pattern = Pattern::kLegacy;
      out.reason = "requested; target SDK " + version_text;
      break;
    case Pattern::kAuto:
      if (!target.version) {
        out.pattern = Pattern::kLegacy;
        out.reason = "target SDK version unknown (" + target.unknown_reason + "); " + how_to_get_optimized();
      } else if (*target.version >= needed) {
        out.pattern = Pattern::kOptimized;
        out.reason = "target SDK " + version_text + " >= " + needed.to_string() +
                     " supports Convert on per-channel weights";
      } else {
        out.pattern = Pattern::kLegacy;
        out.reason = "target SDK " + version_text + " < " + needed.to_string() +
                     ", which the optimized pattern needs; " + how_to_get_optimized();
      }
      break;
  }
  if (scheme.weight_bits() == 2)
    out.reason += "; QNN's op definitions we could read document 2-bit per-channel weights only for "
                  "FullyConnected (a8w2, SDK 2.49): whether a target's Gather and Convert take a 2-bit weight is "
                  "not documented there, so check it on the device";
  return out;
}

Result<LoweredEmbedding> lower_embedding(const PcqTable& table, const ActivationEncoding& act,
                                         const TargetVersion& target,
                                         const EmbeddingLoweringOptions& options) {
  if (table.rows <= 0 || table.dim <= 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "embedding table is empty (" + std::to_string(table.rows) + " x " +
                          std::to_string(table.dim) + ")");
  if (options.name.empty())
    return make_error(ErrorCode::kInvalidArgument, "embedding node name is empty");
  // Checked before make_pcq_weight_tensor reads rows * dim values.
  if (table.scales.size() != static_cast<size_t>(table.rows) ||
      table.q.size() != static_cast<size_t>(table.rows * table.dim))
    return make_error(ErrorCode::kInvalidArgument,
                      "embedding table is inconsistent: " + std::to_string(table.rows) + " x " +
                          std::to_string(table.dim) + " needs " + std::to_string(table.rows) +
                          " scales and " + std::to_string(table.rows * table.dim) +
                          " values, it has " + std::to_string(table.scales.size()) + " and " +
                          std::to_string(table.q.size()));
  EmbeddingLoweringOptions o = options;
  o.scheme = table.scheme;
  return lower_embedding(make_pcq_weight_tensor("weight", table), act, target, o);
}

Result<LoweredEmbedding> lower_embedding(Tensor weight, const ActivationEncoding& act,
                                         const TargetVersion& target,
                                         const EmbeddingLoweringOptions& options) {
  if (options.name.empty())
    return make_error(ErrorCode::kInvalidArgument, "embedding node name is empty");
  if (weight.kind != TensorKind::kStatic || weight.dtype != DataType::kSFixedPoint8 ||
      weight.shape.size() != 2 || !weight.encoding.is_per_axis() || weight.encoding.axis != 0 ||
      weight.encoding.bitwidth != options.scheme.weight_bits())
    return make_error(ErrorCode::kInvalidArgument,
                      "the embedding weight must be a STATIC 2-D SFIXED_POINT_8 tensor with a per-axis "
                      "(axis 0) encoding of the scheme's " + std::to_string(options.scheme.weight_bits()) +
                          " bits (scheme " + options.scheme.name() + ")");
  if (!options.scheme.weight_only() && act.bits != options.scheme.activation_bits())
    return make_error(ErrorCode::kInvalidArgument,
                      "the activation encoding has " + std::to_string(act.bits) + " bits; scheme " +
                          options.scheme.name() + " outputs " + std::to_string(options.scheme.activation_bits()));
  if (weight.shape[0] <= 0 || weight.shape[1] <= 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "embedding table is empty (" + std::to_string(weight.shape[0]) + " x " +
                          std::to_string(weight.shape[1]) + ")");
  const std::string& n = options.name;
  QEMB_ASSIGN_OR_RETURN(const PatternChoice choice, choose_pattern(options.pattern, target, n, options.scheme));
  LoweredEmbedding out;
  out.pattern = choice.pattern;
  out.reason = choice.reason;
  const bool weight_only = options.scheme.weight_only();
  out.graph = out.pattern == Pattern::kOptimized ? optimized_graph(std::move(weight), act, n, weight_only)
                                                 : legacy_graph(std::move(weight), act, n);
  // A weight-only graph is no QNN graph: there is no target to validate for.
  if (!weight_only) QEMB_RETURN_IF_ERROR(validate_for_target(out.graph, target.version));
  QEMB_RETURN_IF_ERROR(out.graph.check());
  return out;
}

Result<LoweredEmbedding> lower_per_tensor_embedding(const std::vector<int8_t>& q, int64_t rows,
                                                    int64_t dim, int bitwidth, float scale,
                                                    const ActivationEncoding& act,
                                                    const EmbeddingLoweringOptions& options) {
  if (rows <= 0 || dim <= 0 || q.size() != static_cast<size_t>(rows * dim))
    return make_error(ErrorCode::kInvalidArgument, "per-tensor table has the wrong size");
  if (find_storage_format(DataType::kSFixedPoint8, bitwidth) == nullptr)
    return make_error(ErrorCode::kInvalidArgument,
                      "weight bitwidth must be " + storage_widths(DataType::kSFixedPoint8));
  if (options.name.empty())
    return make_error(ErrorCode::kInvalidArgument, "embedding node name is empty");
  const std::string& n = options.name;
  Tensor w;
  w.name = n + "_weight";
  w.kind = TensorKind::kStatic;
  w.dtype = DataType::kSFixedPoint8;
  w.shape = {rows, dim};
  w.encoding = Encoding::per_tensor(scale, 0, bitwidth);
  const size_t row_bytes = row_storage_bytes(w.dtype, bitwidth, dim);
  std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(rows), 0);
  const StorageFormat& format = *w.format();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < dim; ++j) format.store(bytes.data() + r * row_bytes, j, q[r * dim + j]);
  w.data = std::make_shared<OwnedBuffer>(std::move(bytes));

  LoweredEmbedding out;
  out.pattern = Pattern::kOptimized;
  out.reason = "per-tensor weights lower to a single Gather on every SDK";
  out.graph.add_tensor(std::move(w));
  out.graph.add_tensor(indices_tensor(n));
  out.graph.add_tensor(activation_tensor(n, TensorKind::kAppRead, {0, dim}, act, false));
  out.graph.add_op(gather(n, n + "_weight", n + "_indices", n));
  QEMB_RETURN_IF_ERROR(out.graph.check());
  return out;
}

}  // namespace qemb
