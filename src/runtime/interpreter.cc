#include "runtime/interpreter.h"

#include <cstring>
#include <map>
#include <vector>

#include "core/reference_ops.h"
#include "runtime/op_registry.h"

namespace qemb {

Result<GraphSignature> graph_signature(const Graph& graph) {
  GraphSignature sig;
  for (const Tensor& t : graph.tensors) {
    if (t.kind == TensorKind::kAppWrite) {
      if (sig.indices) return make_error(ErrorCode::kUnsupported, "the graph has more than one input");
      if (t.dtype != DataType::kInt32)
        return make_error(ErrorCode::kUnsupported, "graph input '" + t.name + "' is not INT_32 indices");
      sig.indices = &t;
    } else if (t.kind == TensorKind::kAppRead) {
      if (sig.output) return make_error(ErrorCode::kUnsupported, "the graph has more than one output");
      // An activation-quantized output (uint16 / uint8, per-tensor), or the
      // float output of a weight-only scheme (no encoding).
      const bool activation = (t.dtype == DataType::kUFixedPoint16 || t.dtype == DataType::kUFixedPoint8) &&
                              t.encoding.is_per_tensor() && t.format() != nullptr;
      const bool floats = t.dtype == DataType::kFloat32 && t.encoding.type == Encoding::Type::kNone;
      if (t.shape.size() != 2 || !(activation || floats))
        return make_error(ErrorCode::kUnsupported,
                          "graph output '" + t.name +
                              "' is not a [N, D] UFIXED_POINT_16 or UFIXED_POINT_8 tensor with a per-tensor "
                              "encoding, nor a FLOAT_32 one");
      sig.output = &t;
    }
  }
  if (!sig.indices || !sig.output)
    return make_error(ErrorCode::kUnsupported, "the graph has no INT_32 input or no output");
  // zero_point = -offset must be a value of the output type (and -INT32_MIN
  // does not exist).
  if (const StorageFormat* f = sig.output->format(); f != nullptr && sig.output->dtype != DataType::kFloat32 &&
      (sig.output->encoding.offset > 0 || sig.output->encoding.offset < -f->qmax))
    return make_error(ErrorCode::kUnsupported, "graph output '" + sig.output->name + "' has offset " +
                                                   std::to_string(sig.output->encoding.offset) + "; a " + f->name +
                                                   " output needs an offset in [-" + std::to_string(f->qmax) +
                                                   ", 0]");
  sig.dim = sig.output->shape[1];
  // The table is the first op's STATIC input.
  for (const Op& op : graph.ops) {
    const Tensor* t = graph.find_tensor(op.inputs[0]);
    if (t && t->kind == TensorKind::kStatic && t->shape.size() == 2) {
      sig.vocab = t->shape[0];
      if (t->shape[1] != sig.dim)
        return make_error(ErrorCode::kUnsupported, "table width differs from the output width");
      break;
    }
  }
  if (sig.vocab <= 0 || sig.dim <= 0)
    return make_error(ErrorCode::kUnsupported, "the graph has no non-empty STATIC [V, D] table");
  // The interpreter moves every op's data as rows of `dim` values and looks
  // per-axis scales up by row: refuse a graph that breaks either, rather than
  // read past a buffer (a checksummed but hostile artifact reached this).
  for (const Op& op : graph.ops) {
    for (const std::string* name : {&op.inputs[0], &op.outputs[0]}) {
      const Tensor* t = graph.find_tensor(*name);
      if (t->shape.size() != 2 || t->shape[1] != sig.dim)
        return make_error(ErrorCode::kUnsupported, "op '" + op.name + "' uses tensor '" + t->name +
                                                       "', which is not [rows, " + std::to_string(sig.dim) + "]");
      if (t->encoding.is_per_axis() && (t->kind != TensorKind::kStatic || t->encoding.axis != 0))
        return make_error(ErrorCode::kUnsupported, "tensor '" + t->name +
                                                       "' has a per-axis encoding the runtime cannot apply "
                                                       "(only STATIC tables quantized along axis 0)");
    }
    if (graph.find_tensor(op.outputs[0])->kind == TensorKind::kStatic)
      return make_error(ErrorCode::kUnsupported, "op '" + op.name + "' writes the STATIC tensor '" +
                                                     op.outputs[0] + "'");
    if (op.intermediate && !op.intermediate->is_per_tensor())
      return make_error(ErrorCode::kUnsupported,
                        "op '" + op.name + "' has an intermediate encoding that is not per-tensor");
  }
  // What a lookup is, for the kernels and the interpreter alike (the kernels
  // only run graphs this accepts): a chain of ops from a STATIC table to the
  // output that gathers the input ids exactly once, along axis 0.
  if (graph.ops.empty()) return make_error(ErrorCode::kUnsupported, "the graph has no ops");
  int gathers = 0;
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const Op& op = graph.ops[i];
    if (i == 0 && graph.find_tensor(op.inputs[0])->kind != TensorKind::kStatic)
      return make_error(ErrorCode::kUnsupported,
                        "the first op '" + op.name + "' reads '" + op.inputs[0] + "', not a STATIC table");
    if (i > 0 && op.inputs[0] != graph.ops[i - 1].outputs[0])
      return make_error(ErrorCode::kUnsupported, "op '" + op.name + "' reads '" + op.inputs[0] +
                                                     "', not the output of the op before it");
    if (op.outputs[0] == sig.indices->name)
      return make_error(ErrorCode::kUnsupported, "op '" + op.name + "' writes the graph input '" +
                                                     sig.indices->name + "'");
    const OpRegistration* reg = find_op(op.type);
    if (reg == nullptr) return make_error(ErrorCode::kUnsupported, "op '" + op.name + "' has an unknown op type");
    if (!reg->gathers_ids) continue;
    QEMB_RETURN_IF_ERROR(reg->check(op, sig));
    ++gathers;
  }
  if (gathers != 1)
    return make_error(ErrorCode::kUnsupported, "the graph gathers the input ids " + std::to_string(gathers) +
                                                   " times; a lookup gathers them exactly once");
  if (graph.ops.back().outputs[0] != sig.output->name)
    return make_error(ErrorCode::kUnsupported, "the last op '" + graph.ops.back().name + "' writes '" +
                                                   graph.ops.back().outputs[0] + "', not the graph output '" +
                                                   sig.output->name + "'");
  return sig;
}

namespace {

// A tensor's rows during interpretation: STATIC data in place, or owned.
struct Value {
  const uint8_t* data = nullptr;
  std::vector<uint8_t> owned;
  int64_t rows = 0;
};

// Row r of a tensor as requantize_row reads it: a row-interleaved table's
// record becomes its values and a one-row plain encoding holding its scale.
class SourceRows {
 public:
  SourceRows(const Tensor& t, const uint8_t* data, size_t row_bytes) : t_(t), data_(data), row_bytes_(row_bytes) {
    if (!t.interleaved()) return;
    one_row_.dtype = t.dtype;
    one_row_.encoding = Encoding::per_axis(0, {0.0f}, {0}, t.encoding.bitwidth);
  }
  const uint8_t* row(int64_t r) {
    if (!t_.interleaved()) return data_ + r * row_bytes_;
    one_row_.encoding.scales[0] = t_.row_scale(r);
    return t_.row_values(r);
  }
  // The tensor and row index whose encoding applies to the last row().
  const Tensor& tensor() const { return t_.interleaved() ? one_row_ : t_; }
  int64_t encoding_row(int64_t r) const { return t_.interleaved() ? 0 : r; }

 private:
  const Tensor& t_;
  const uint8_t* data_;
  size_t row_bytes_;
  Tensor one_row_;
};

size_t row_bytes(const Tensor& t, int64_t dim) { return row_storage_bytes(t.dtype, t.bitwidth(), dim); }

// Gathers the ids' rows of input 0, requantized into the output's encoding,
// through `intermediate` first when there is one (the fused legacy pattern).
Status gather_rows(const Op& op, const ReferenceStep& step, const Encoding* intermediate) {
  const int64_t dim = step.sig->dim;
  const int64_t n = static_cast<int64_t>(step.ids.size());
  const Tensor& in_t = *step.in_t;
  const Tensor& out_t = *step.out_t;
  if (op.inputs[1] != step.sig->indices->name || op.axis != 0)
    return make_error(ErrorCode::kUnsupported, "op '" + op.name + "' is not a gather of the input ids");
  const size_t out_rb = row_bytes(out_t, dim);
  SourceRows source(in_t, step.in_data, row_bytes(in_t, dim));
  *step.out_rows = n;
  step.out->assign(out_rb * static_cast<size_t>(n), 0);
  Tensor inter;
  std::vector<uint8_t> inter_row;
  if (intermediate) {
    inter.dtype = in_t.dtype;
    inter.encoding = *intermediate;
    inter_row.assign(row_bytes(inter, dim), 0);
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = step.ids[static_cast<size_t>(i)];
    if (r >= step.in_rows)  // ids were checked against the vocabulary, not against this tensor
      return make_error(ErrorCode::kUnsupported, "op '" + op.name + "' gathers row " + std::to_string(r) +
                                                     " of '" + op.inputs[0] + "', which has " +
                                                     std::to_string(step.in_rows) + " rows");
    const uint8_t* src = source.row(r);
    const Tensor& src_t = source.tensor();
    const int64_t src_row = source.encoding_row(r);
    uint8_t* dst = step.out->data() + i * out_rb;
    if (intermediate) {
      requantize_row(src, src_t, src_row, inter_row.data(), inter, 0, dim);
      requantize_row(inter_row.data(), inter, 0, dst, out_t, i, dim);
    } else {
      requantize_row(src, src_t, src_row, dst, out_t, i, dim);
    }
  }
  return Status::Ok();
}

}  // namespace

Status reference_gather(const Op& op, const ReferenceStep& step) { return gather_rows(op, step, nullptr); }

Status reference_requant_gather(const Op& op, const ReferenceStep& step) {
  return gather_rows(op, step, op.intermediate ? &*op.intermediate : nullptr);
}

Status reference_convert(const Op& op, const ReferenceStep& step) {
  const int64_t dim = step.sig->dim;
  const size_t out_rb = row_bytes(*step.out_t, dim);
  SourceRows source(*step.in_t, step.in_data, row_bytes(*step.in_t, dim));
  *step.out_rows = step.in_rows;
  step.out->assign(out_rb * static_cast<size_t>(step.in_rows), 0);
  for (int64_t r = 0; r < step.in_rows; ++r) {
    const uint8_t* src = source.row(r);
    requantize_row(src, source.tensor(), source.encoding_row(r), step.out->data() + r * out_rb, *step.out_t, r, dim);
  }
  return Status::Ok();
}

Status interpret_graph(const Graph& graph, const GraphSignature& sig,
                       std::span<const int64_t> ids, uint8_t* out) {
  std::map<std::string, Value> values;
  auto lookup = [&](const std::string& name) -> Value* {
    auto it = values.find(name);
    if (it != values.end()) return &it->second;
    const Tensor* t = graph.find_tensor(name);
    if (t && t->kind == TensorKind::kStatic) {
      Value& v = values[name];
      v.data = t->data->data();
      v.rows = t->shape.empty() ? 1 : t->shape[0];
      return &v;
    }
    return nullptr;
  };
  const int64_t n = static_cast<int64_t>(ids.size());
  for (const Op& op : graph.ops) {
    const Tensor& out_t = *graph.find_tensor(op.outputs[0]);
    const Tensor& in_t = *graph.find_tensor(op.inputs[0]);
    Value* in = lookup(op.inputs[0]);
    if (in == nullptr)
      return make_error(ErrorCode::kUnsupported, "op '" + op.name + "' reads a tensor never produced");
    const OpRegistration* reg = find_op(op.type);
    if (reg == nullptr) return make_error(ErrorCode::kUnsupported, "op '" + op.name + "' has an unknown op type");
    Value result;
    const ReferenceStep step{&sig, ids, &in_t, in->data, in->rows, &out_t, &result.owned, &result.rows};
    QEMB_RETURN_IF_ERROR(reg->reference(op, step));
    result.data = result.owned.data();
    values[op.outputs[0]] = std::move(result);
    values[op.outputs[0]].data = values[op.outputs[0]].owned.data();
  }
  Value* final_value = lookup(sig.output->name);
  if (final_value == nullptr || final_value->rows != n)
    return make_error(ErrorCode::kUnsupported, "the graph never writes its output");
  std::memcpy(out, final_value->data,
              static_cast<size_t>(n) * row_storage_bytes(sig.output->dtype, sig.output->bitwidth(), sig.dim));
  return Status::Ok();
}

}  // namespace qemb
