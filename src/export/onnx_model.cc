// The ONNX model, built with the classes protoc generated from onnx.proto
// (Debian's libonnx-dev). That onnx (1.12) predates opset 21 and the INT4
// type; both are plain numbers in the proto (opset version, data_type), so its
// classes write them unchanged.
#include <cstring>

#include "qemb/export.h"
#include "qemb/version.h"

#ifdef QEMB_HAVE_ONNX
#include <onnx/onnx_pb.h>
#endif

namespace qemb {

#ifndef QEMB_HAVE_ONNX

bool onnx_export_available() { return false; }

Result<std::string> onnx_model_bytes(const QuantizedEmbedding&, const OnnxExportOptions&) {
  return make_error(ErrorCode::kUnsupported,
                    "this qemb was built without ONNX export (QEMB_ONNX_EXPORT=OFF, or libonnx-dev and "
                    "libprotobuf-dev missing); install them and rebuild");
}

Result<std::string> onnx_model_bytes(const std::vector<QuantizedEmbedding>&, const OnnxExportOptions&) {
  return onnx_model_bytes(QuantizedEmbedding{}, OnnxExportOptions{});
}

#else

bool onnx_export_available() { return true; }

namespace {

// onnx.proto numbers; INT4 is newer than the generated enum.
constexpr int32_t kFloat = 1, kUint8 = 2, kUint16 = 4, kInt8 = 3, kInt32 = 6, kInt64 = 7, kInt4 = 22;
// ONNX 1.16 (opset 21) and 1.17 (opset 22) write IR version 10.
constexpr int64_t kIrVersion = 10;

class ModelBuilder {
 public:
  explicit ModelBuilder(onnx::GraphProto* g) : g_(g) {}

  onnx::TensorProto* initializer(const std::string& name, int32_t dtype, std::vector<int64_t> dims,
                                 const void* bytes, size_t size) {
    onnx::TensorProto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(dtype);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(bytes, size);  // little-endian, as onnx.proto specifies
    return t;
  }
  void scalar_f32(const std::string& name, float v) { initializer(name, kFloat, {}, &v, sizeof v); }
  void scalar_u16(const std::string& name, uint16_t v) { initializer(name, kUint16, {}, &v, sizeof v); }
  void scalar_u8(const std::string& name, uint8_t v) { initializer(name, kUint8, {}, &v, sizeof v); }
  void scalar_i8(const std::string& name, int8_t v) { initializer(name, kInt8, {}, &v, sizeof v); }

  onnx::NodeProto* node(const std::string& op, const std::string& name, std::vector<std::string> inputs,
                        const std::string& output) {
    onnx::NodeProto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const std::string& i : inputs) n->add_input(i);
    n->add_output(output);
    return n;
  }
  static void int_attribute(onnx::NodeProto* n, const std::string& name, int64_t v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }

  // Per-tensor QuantizeLinear then DequantizeLinear: x -> x_q -> y.
  void quantize(const std::string& name, const std::string& x, const std::string& scale, const std::string& zp,
                const std::string& quantized) {
    node("QuantizeLinear", name, {x, scale, zp}, quantized);
  }
  void dequantize(const std::string& name, const std::string& q, const std::string& scale, const std::string& zp,
                  const std::string& y) {
    node("DequantizeLinear", name, {q, scale, zp}, y);
  }

  void value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name,
             int32_t dtype, std::vector<std::string> dims) {
    onnx::ValueInfoProto* v = list->Add();
    v->set_name(name);
    onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(dtype);
    for (const std::string& d : dims) {
      auto* dim = t->mutable_shape()->add_dim();
      if (d.empty() || (d[0] >= '0' && d[0] <= '9')) {
        dim->set_dim_value(std::stoll(d));
      } else {
        dim->set_dim_param(d);
      }
    }
  }

 private:
  onnx::GraphProto* g_;
};

// int8 values in [-8, 7] as INT4: two per byte, the first in the low nibble.
std::vector<uint8_t> pack_int4_flat(const std::vector<int8_t>& v) {
  std::vector<uint8_t> out((v.size() + 1) / 2, 0);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint8_t nib = static_cast<uint8_t>(v[i]) & 0x0F;
    out[i / 2] |= static_cast<uint8_t>((i & 1) ? nib << 4 : nib);
  }
  return out;
}

// Adds table `e`'s lookup to the graph: input `indices`, output `output`.
void add_table(ModelBuilder& b, onnx::GraphProto* g, const QuantizedEmbedding& e, const OnnxExportOptions& o,
               const std::string& indices, const std::string& output);

}  // namespace

Result<std::string> onnx_model_bytes(const std::vector<QuantizedEmbedding>& tables, const OnnxExportOptions& o) {
  if (tables.empty()) return make_error(ErrorCode::kInvalidArgument, "no tables to export");
  if (tables.size() == 1) return onnx_model_bytes(tables[0], o);
  uint64_t bytes = 0;
  for (const QuantizedEmbedding& e : tables) {
    Status s = check_onnx_export(e, o);
    if (!s.ok()) return make_error(s.code(), "table '" + e.node + "': " + s.message());
    const uint64_t n = static_cast<uint64_t>(e.rows) * static_cast<uint64_t>(e.dim);
    const uint64_t folded_bytes = e.scheme.weight_only() ? 4 : static_cast<uint64_t>(e.act.bits / 8);
    bytes += (o.folded ? folded_bytes * n : (o.int4_weights ? (n + 1) / 2 : n)) + 16 * static_cast<uint64_t>(e.rows) + 4096;
  }
  if (bytes > kOnnxMaxModelBytes)
    return make_error(ErrorCode::kUnsupported,
                      "the tables (" + std::to_string(bytes) +
                          " bytes as initializers) would make the model exceed protobuf's 2 GiB message limit, and "
                          "this exporter writes no external data; export them one at a time with --table");
  GOOGLE_PROTOBUF_VERIFY_VERSION;
  onnx::ModelProto model;
  model.set_ir_version(kIrVersion);
  model.set_producer_name("qemb");
  model.set_producer_version(QEMB_VERSION);
  model.set_doc_string("qemb embeddings: " + std::to_string(tables.size()) + " tables" +
                       (o.folded ? ", folded" : ""));
  onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(o.opset);
  nlohmann::json provenance = nlohmann::json::array();
  for (const QuantizedEmbedding& e : tables) provenance.push_back(e.provenance);
  onnx::StringStringEntryProto* p = model.add_metadata_props();
  p->set_key("qemb.provenance");
  p->set_value(provenance.dump());
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("qemb_tables");
  ModelBuilder b(g);
  for (const QuantizedEmbedding& e : tables)
    add_table(b, g, e, o, onnx_table_input(e), onnx_table_output(e));
  return model.SerializeAsString();
}

Result<std::string> onnx_model_bytes(const QuantizedEmbedding& e, const OnnxExportOptions& o) {
  QEMB_RETURN_IF_ERROR(check_onnx_export(e, o));
  GOOGLE_PROTOBUF_VERIFY_VERSION;
  onnx::ModelProto model;
  model.set_ir_version(kIrVersion);
  model.set_producer_name("qemb");
  model.set_producer_version(QEMB_VERSION);
  model.set_doc_string(std::string("qemb ") + to_string(e.scheme) + " embedding, " + to_string(e.pattern) +
                       " pattern" + (o.folded ? ", folded" : ""));
  onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(o.opset);
  auto add_meta = [&](const std::string& k, const std::string& v) {
    onnx::StringStringEntryProto* p = model.add_metadata_props();
    p->set_key(k);
    p->set_value(v);
  };
  add_meta("qemb.scheme", to_string(e.scheme));
  add_meta("qemb.pattern", to_string(e.pattern));
  add_meta("qemb.provenance", e.provenance.dump());

  onnx::GraphProto* g = model.mutable_graph();
  g->set_name(e.node);
  ModelBuilder b(g);
  add_table(b, g, e, o, "indices", "embedding");
  return model.SerializeAsString();
}

namespace {

// The per-row weight, dequantized into "N_weight": int8 (or INT4) values, one
// scale per row, zero points 0, then DequantizeLinear along axis 0.
void add_dequantized_weight(ModelBuilder& b, const QuantizedEmbedding& e, const OnnxExportOptions& o) {
  const std::string& n = e.node;
  const size_t count = static_cast<size_t>(e.rows);
  if (o.int4_weights) {
    const std::vector<uint8_t> packed = pack_int4_flat(e.q);
    b.initializer(n + "_weight_quantized", kInt4, {e.rows, e.dim}, packed.data(), packed.size());
    const std::vector<uint8_t> zeros((count + 1) / 2, 0);
    b.initializer(n + "_weight_zero_point", kInt4, {e.rows}, zeros.data(), zeros.size());
  } else {
    b.initializer(n + "_weight_quantized", kInt8, {e.rows, e.dim}, e.q.data(), e.q.size());
    const std::vector<int8_t> zeros(count, 0);
    b.initializer(n + "_weight_zero_point", kInt8, {e.rows}, zeros.data(), zeros.size());
  }
  b.initializer(n + "_weight_scale", kFloat, {e.rows}, e.row_scales.data(), count * sizeof(float));
  ModelBuilder::int_attribute(b.node("DequantizeLinear", n + "_weight_dequantize",
                                     {n + "_weight_quantized", n + "_weight_scale", n + "_weight_zero_point"},
                                     n + "_weight"),
                              "axis", 0);
}

void add_table(ModelBuilder& b, onnx::GraphProto* g, const QuantizedEmbedding& e, const OnnxExportOptions& o,
               const std::string& indices, const std::string& output) {
  const std::string& n = e.node;
  const std::string rows = std::to_string(e.rows), dim = std::to_string(e.dim);
  b.value(g->mutable_input(), indices, o.int32_indices ? kInt32 : kInt64, {"N"});
  b.value(g->mutable_output(), output, kFloat, {"N", dim});

  if (e.scheme.weight_only()) {
    // No activation step: y = s_r * q, the dequantized weight gathered
    // (DequantizeLinear -> Gather), or the folded float table gathered.
    std::string table = n + "_weight";
    if (o.folded) {
      const std::vector<float> t = folded_table_f32(e);
      b.initializer(table, kFloat, {e.rows, e.dim}, t.data(), t.size() * sizeof(float));
    } else {
      add_dequantized_weight(b, e, o);
    }
    ModelBuilder::int_attribute(b.node("Gather", n, {table, indices}, output), "axis", 0);
    return;
  }

  // The activation encoding: y = s_a * (q - zp_a), q uint16 (or uint8 for
  // an 8-bit activation scheme).
  const bool u8 = e.act.bits == 8;
  b.scalar_f32(n + "_act_scale", e.act.scale);
  if (u8) b.scalar_u8(n + "_act_zero_point", static_cast<uint8_t>(e.act.zero_point));
  else b.scalar_u16(n + "_act_zero_point", static_cast<uint16_t>(e.act.zero_point));

  if (o.folded) {
    // The optimized pattern after its Convert is folded: a uint16 (uint8) table.
    if (u8) {
      const std::vector<uint8_t> table = folded_table_u8(e);
      b.initializer(n + "_convert_quantized", kUint8, {e.rows, e.dim}, table.data(), table.size());
    } else {
      const std::vector<uint16_t> table = folded_table(e);
      b.initializer(n + "_convert_quantized", kUint16, {e.rows, e.dim}, table.data(), table.size() * 2);
    }
    ModelBuilder::int_attribute(b.node("Gather", n, {n + "_convert_quantized", indices}, n + "_quantized"), "axis",
                                0);
    b.dequantize(n + "_dequantize", n + "_quantized", n + "_act_scale", n + "_act_zero_point", output);
    return;
  }

  add_dequantized_weight(b, e, o);

  if (e.pattern == Pattern::kOptimized) {
    // Convert "N_convert" into the uint16 activation encoding, then Gather "N".
    b.quantize(n + "_convert", n + "_weight", n + "_act_scale", n + "_act_zero_point", n + "_convert_quantized");
    b.dequantize(n + "_convert_dequantize", n + "_convert_quantized", n + "_act_scale", n + "_act_zero_point",
                 n + "_convert");
    ModelBuilder::int_attribute(b.node("Gather", n, {n + "_convert", indices}, output), "axis", 0);
  } else {
    // The per-tensor s_max approximation of the weight's bitwidth, Gather
    // "N_intermediate", then Convert "N_convert" into the activation encoding.
    // int8 holds 4-bit values too (unless --int4-weights): |s_r * q| <= qmax * s_max
    // keeps them in [-qmax, qmax].
    b.scalar_f32(n + "_intermediate_scale", e.max_scale);
    if (o.int4_weights) {
      const uint8_t zero = 0;
      b.initializer(n + "_intermediate_zero_point", kInt4, {}, &zero, 1);
    } else {
      b.scalar_i8(n + "_intermediate_zero_point", 0);
    }
    b.quantize(n + "_intermediate_quantize", n + "_weight", n + "_intermediate_scale", n + "_intermediate_zero_point",
               n + "_intermediate_table_quantized");
    b.dequantize(n + "_intermediate_dequantize", n + "_intermediate_table_quantized", n + "_intermediate_scale",
                 n + "_intermediate_zero_point", n + "_intermediate_table");
    ModelBuilder::int_attribute(b.node("Gather", n + "_intermediate", {n + "_intermediate_table", indices},
                                       n + "_intermediate"),
                                "axis", 0);
    b.quantize(n + "_convert", n + "_intermediate", n + "_act_scale", n + "_act_zero_point", n + "_quantized");
    b.dequantize(n + "_dequantize", n + "_quantized", n + "_act_scale", n + "_act_zero_point", output);
  }
}

}  // namespace

#endif

}  // namespace qemb
