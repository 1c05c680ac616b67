// The exporter's format-neutral part: what a compile or an artifact holds, the
// checks an export must pass, the encodings JSON and the file handling.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/ir.h"
#include "qemb/export.h"
#include "qemb/runtime.h"
#include "runtime/runtime_impl.h"
#include "core/file.h"
#include "core/json_text.h"

namespace qemb {

namespace {

Error corrupt_graph(const std::string& what) {
  return make_error(ErrorCode::kUnsupported,
                    "the graph has no " + what + "; it is not an embedding qemb compiled, so it cannot be exported");
}

// Unpacks a SFIXED_POINT_8 tensor's storage (int8, or two nibbles a byte).
std::vector<int8_t> unpack_weight(const Tensor& w, int64_t rows, int64_t dim) {
  const StorageFormat& format = *w.format();  // the reader accepts only widths in the table
  const size_t row_bytes = format.row_bytes(dim);
  std::vector<int8_t> q(static_cast<size_t>(rows * dim));
  const uint8_t* bytes = w.data->data();
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = bytes + static_cast<size_t>(r) * row_bytes;
    int8_t* out = q.data() + static_cast<size_t>(r * dim);
    for (int64_t j = 0; j < dim; ++j) out[j] = static_cast<int8_t>(format.load(row, j));
  }
  return q;
}

Result<QuantizedEmbedding> from_graph(const Graph& g, const nlohmann::json& meta) {
  QuantizedEmbedding e;
  e.provenance = meta;
  if (!meta.is_object() || !meta.contains("scheme") || !meta["scheme"].is_string() || !meta.contains("pattern") ||
      !meta["pattern"].is_string())
    return make_error(ErrorCode::kUnsupported,
                      "the artifact's metadata names no scheme or pattern; recompile it with this qemb");
  QEMB_ASSIGN_OR_RETURN(e.scheme, parse_scheme(meta["scheme"].get<std::string>()));
  QEMB_ASSIGN_OR_RETURN(e.pattern, parse_pattern(meta["pattern"].get<std::string>()));
  if (e.pattern == Pattern::kAuto)
    return make_error(ErrorCode::kUnsupported, "the artifact's pattern is 'auto'; a compiled pattern is never auto");
  if (meta.contains("node") && meta["node"].is_string()) e.node = meta["node"].get<std::string>();

  const Tensor* weight = nullptr;
  const Tensor* folded = nullptr;
  const Tensor* output = nullptr;
  size_t outputs = 0;
  for (const Tensor& t : g.tensors) outputs += t.kind == TensorKind::kAppRead;
  if (outputs > 1)
    return make_error(ErrorCode::kUnsupported,
                      "the graph holds " + std::to_string(outputs) +
                          " tables; export-onnx exports one table: export each from the checkpoint with CompileOptions.tensor");
  // What the scheme's lookup returns, and so what its folded table holds.
  const DataType out_dtype = e.scheme.weight_only()               ? DataType::kFloat32
                             : e.scheme.activation_bits() == 8 ? DataType::kUFixedPoint8
                                                               : DataType::kUFixedPoint16;
  for (const Tensor& t : g.tensors) {
    if (t.kind == TensorKind::kStatic && t.dtype == DataType::kSFixedPoint8 && t.encoding.is_per_axis()) weight = &t;
    if (t.kind == TensorKind::kStatic && t.dtype == out_dtype && t.data && t.data->data()) folded = &t;
    if (t.kind == TensorKind::kAppRead) output = &t;
    if (e.pattern == Pattern::kLegacy && t.kind == TensorKind::kNative && t.dtype == DataType::kSFixedPoint8 &&
        t.encoding.is_per_tensor())
      e.max_scale = t.encoding.scale;
  }
  for (const Op& op : g.ops)
    if (op.type == OpType::kRequantGather && op.intermediate) e.max_scale = op.intermediate->scale;
  // A row-interleaved table (a fused artifact) is read back as values and scales.
  Tensor plain_weight;
  if (weight != nullptr && weight->interleaved() && weight->data && weight->data->data() != nullptr) {
    plain_weight = deinterleave_rows(*weight);
    weight = &plain_weight;
  }
  if (e.scheme.weight_only()) {
    if (output == nullptr || output->dtype != DataType::kFloat32) return corrupt_graph("float32 output");
    e.act.bits = 0;
  } else {
    if (output == nullptr || !output->encoding.is_per_tensor() || output->dtype != out_dtype)
      return corrupt_graph(std::string(to_string(out_dtype)) + " output with a per-tensor encoding");
    e.act.scale = output->encoding.scale;
    e.act.zero_point = -output->encoding.offset;
    e.act.bits = e.scheme.activation_bits();
  }

  const Tensor* table = weight != nullptr ? weight : folded;
  if (table == nullptr) return corrupt_graph("per-row weight or folded table");
  if (table->shape.size() != 2 || table->shape[0] <= 0 || table->shape[1] <= 0)
    return corrupt_graph("2-D table");
  e.rows = table->shape[0];
  e.dim = table->shape[1];
  if (weight != nullptr) {
    if (weight->encoding.bitwidth != weight_bits(e.scheme))
      return make_error(ErrorCode::kUnsupported, "the weight's bitwidth " + std::to_string(weight->encoding.bitwidth) +
                                                     " does not match the scheme " + to_string(e.scheme));
    if (weight->encoding.scales.size() != static_cast<size_t>(e.rows)) return corrupt_graph("scale per weight row");
    if (weight->data && weight->data->data() != nullptr) {
      e.row_scales = weight->encoding.scales;
      e.q = unpack_weight(*weight, e.rows, e.dim);
    }
  }
  if (folded != nullptr && !e.has_weights()) {
    const size_t n = static_cast<size_t>(e.rows * e.dim);
    const size_t value_bytes = out_dtype == DataType::kFloat32 ? 4 : out_dtype == DataType::kUFixedPoint8 ? 1 : 2;
    if (folded->data->size() != n * value_bytes) return corrupt_graph("folded table of the right size");
    const uint8_t* bytes = folded->data->data();
    if (value_bytes == 2) e.folded.assign(reinterpret_cast<const uint16_t*>(bytes), reinterpret_cast<const uint16_t*>(bytes) + n);
    if (value_bytes == 1) e.folded_u8.assign(bytes, bytes + n);
    if (value_bytes == 4) {
      e.folded_f32.resize(n);
      std::memcpy(e.folded_f32.data(), bytes, n * 4);
    }
  }
  if (!e.has_weights() && !e.has_folded())
    return corrupt_graph("per-row weight data or folded table");
  if (e.pattern == Pattern::kLegacy && !(e.max_scale > 0.0f))
    return corrupt_graph("legacy intermediate (per-tensor) encoding");
  return e;
}

// One encoding in the AIMET 0.6.1 layout: real = scale * (q + offset) over an
// unsigned grid [0, 2^bitwidth - 1], so a symmetric signed b-bit encoding has
// offset -2^(b-1).
nlohmann::json aimet_encoding(float scale, int64_t offset, int bitwidth, bool symmetric) {
  const int64_t levels = int64_t{1} << bitwidth;
  return {{"bitwidth", bitwidth},
          {"dtype", "int"},
          {"is_symmetric", symmetric ? "True" : "False"},
          {"max", static_cast<double>(scale) * static_cast<double>(levels - 1 + offset)},
          {"min", static_cast<double>(scale) * static_cast<double>(offset)},
          {"offset", offset},
          {"scale", static_cast<double>(scale)}};
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/+=:,@") ==
                        std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

Result<QuantizedEmbedding> quantized_embedding(const CompiledEmbedding& compiled) {
  return from_graph(*compiled.lowered, compiled.metadata);
}

Result<QuantizedEmbedding> quantized_embedding(const LoadedArtifact& artifact) {
  size_t outputs = 0;
  if (artifact.graph)
    for (const Tensor& t : artifact.graph->tensors) outputs += t.kind == TensorKind::kAppRead;
  if (outputs > 1) {
    auto all = quantized_embeddings(artifact);
    if (!all.ok()) return all.error();
    std::string names;
    for (const QuantizedEmbedding& e : *all) names += (names.empty() ? "" : ", ") + e.node;
    return make_error(ErrorCode::kUnsupported,
                      "the artifact holds " + std::to_string(all->size()) + " tables (" + names +
                          "); export one with OnnxExportRequest.table = NAME, or all as one model with "
                          "OnnxExportRequest.all_tables");
  }
  return from_graph(*artifact.graph, artifact.metadata);
}

Result<std::vector<QuantizedEmbedding>> quantized_embeddings(const LoadedArtifact& artifact,
                                                             const std::string& table) {
  // The runtime cuts each table's part out of the graph, with its metadata.
  RuntimeOptions ro;
  ro.reference = true;  // no kernels are run
  QEMB_ASSIGN_OR_RETURN(auto rt, EmbeddingRuntime::from_artifact(artifact, ro));
  std::vector<QuantizedEmbedding> out;
  if (rt->table_count() == 1 && artifact.metadata.is_object() && artifact.metadata.contains("scheme")) {
    if (!table.empty() && table != rt->table(0).name()) QEMB_RETURN_IF_ERROR(rt->find_table(table).status());
    QEMB_ASSIGN_OR_RETURN(QuantizedEmbedding e, from_graph(*artifact.graph, artifact.metadata));
    out.push_back(std::move(e));
    return out;
  }
  for (size_t i = 0; i < rt->table_count(); ++i) {
    const EmbeddingTable& t = rt->table(i);
    if (!table.empty() && t.name() != table) continue;
    Result<QuantizedEmbedding> e = from_graph(*table_impl(t).graph, t.metadata());
    if (!e.ok()) return make_error(e.error().code, "table '" + t.name() + "': " + e.error().message);
    e->node = t.name();
    out.push_back(std::move(e).value());
  }
  if (out.empty()) QEMB_RETURN_IF_ERROR(rt->find_table(table).status());
  return out;
}

namespace {
// The optimized pattern's folded table of element type T: the activation
// q_A(s_r * q), or a weight-only scheme's s_r * q.
template <typename T>
std::vector<T> folded_values(const QuantizedEmbedding& e, const std::vector<T>& stored) {
  if (!e.has_weights()) return stored;
  std::vector<T> t(e.q.size());
  for (int64_t r = 0; r < e.rows; ++r)
    for (int64_t j = 0; j < e.dim; ++j) {
      const size_t k = static_cast<size_t>(r * e.dim + j);
      const float s = e.row_scales[static_cast<size_t>(r)];
      if constexpr (std::is_same_v<T, float>) t[k] = dequantize_weight(s, e.q[k]);
      else t[k] = static_cast<T>(optimized_output(s, e.q[k], e.act));
    }
  return t;
}
}  // namespace

std::vector<uint16_t> folded_table(const QuantizedEmbedding& e) { return folded_values(e, e.folded); }
std::vector<uint8_t> folded_table_u8(const QuantizedEmbedding& e) { return folded_values(e, e.folded_u8); }
std::vector<float> folded_table_f32(const QuantizedEmbedding& e) { return folded_values(e, e.folded_f32); }

Status check_onnx_export(const QuantizedEmbedding& e, const OnnxExportOptions& o) {
  if (o.opset < 1)
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown opset " + std::to_string(o.opset) + ": ai.onnx opsets are numbered from 1");
  if (o.opset > kOnnxMaxOpset)
    return make_error(ErrorCode::kUnsupported,
                      "unknown opset " + std::to_string(o.opset) + ": this exporter knows opsets " +
                          std::to_string(kOnnxMinOpset) + " to " + std::to_string(kOnnxMaxOpset) +
                          "; use OnnxExportOptions.opset = " + std::to_string(kOnnxDefaultOpset));
  if (o.opset < kOnnxMinOpset)
    return make_error(ErrorCode::kUnsupported,
                      std::string("opset ") + std::to_string(o.opset) + " cannot express scheme " + to_string(e.scheme) +
                          ": its uint16 activation needs QuantizeLinear/DequantizeLinear to uint16, which ONNX "
                          "added in opset 21; use OnnxExportOptions.opset = 21");
  if (o.folded && e.pattern == Pattern::kLegacy)
    return make_error(ErrorCode::kInvalidArgument,
                      "OnnxExportOptions.folded applies to the optimized pattern only: the legacy pattern's Convert "
                      "follows its Gather, so there is no table to fold; drop OnnxExportOptions.folded or use "
                      "CompileOptions.pattern = optimized");
  if (o.int4_weights && weight_bits(e.scheme) != 4)
    return make_error(ErrorCode::kInvalidArgument, std::string("OnnxExportOptions.int4_weights needs 4-bit weights; scheme ") +
                                                       to_string(e.scheme) + " has " +
                                                       std::to_string(weight_bits(e.scheme)) + "-bit weights");
  if (o.int4_weights && o.folded)
    return make_error(ErrorCode::kInvalidArgument,
                      "OnnxExportOptions.int4_weights applies to the weight initializer, which the folded form does not "
                      "have; drop one of OnnxExportOptions.int4_weights and OnnxExportOptions.folded");
  if (!e.has_weights() && !o.folded)
    return make_error(ErrorCode::kUnsupported,
                      "the artifact holds only the folded " +
                          std::string(e.scheme.weight_only() ? "float32" : e.act.bits == 8 ? "uint8" : "uint16") +
                          " table (compiled with the optimized pattern and "
                      "CompileOptions.mode = materialize), not the per-row weights; export it with "
                      "OnnxExportOptions.folded, or export from the checkpoint or an artifact compiled with "
                      "CompileOptions.mode = fused");
  const uint64_t n = static_cast<uint64_t>(e.rows) * static_cast<uint64_t>(e.dim);
  const uint64_t folded_value_bytes = e.scheme.weight_only() ? 4 : static_cast<uint64_t>(e.scheme.activation_bits() / 8);
  const uint64_t table_bytes = o.folded ? folded_value_bytes * n : (o.int4_weights ? (n + 1) / 2 : n);
  if (table_bytes + 16 * static_cast<uint64_t>(e.rows) + 4096 > kOnnxMaxModelBytes)
    return make_error(ErrorCode::kUnsupported,
                      "the table (" + std::to_string(table_bytes) +
                          " bytes as an initializer) would make the model exceed protobuf's 2 GiB message limit, "
                          "and this exporter writes no external data; export a smaller table" +
                          (o.folded ? std::string(" or drop OnnxExportOptions.folded") : std::string()));
  return Status::Ok();
}

namespace {

// Stands for the per-row encodings in the skeleton that write_onnx_encodings
// streams them into; no scale or name can dump to it.
const char kRowsPlaceholder[] = "\x01qemb per-row encodings\x01";

// The encodings JSON; with `rows_placeholder`, the per-row list is the
// placeholder string instead of one object a row.
nlohmann::json encodings_json(const QuantizedEmbedding& e, const OnnxExportOptions& o, bool rows_placeholder,
                              const std::string& output = "embedding", const std::string& placeholder = kRowsPlaceholder) {
  using nlohmann::json;
  const std::string& n = e.node;
  const int bits = weight_bits(e.scheme);
  const int64_t sym_offset = -(int64_t{1} << (bits - 1));
  // A weight-only scheme's output is float: it has no activation encoding.
  const bool weight_only = e.scheme.weight_only();
  json act = json::array({aimet_encoding(e.act.scale, e.act.offset(), e.act.bits, false)});
  json j;
  j["version"] = "0.6.1";
  j["activation_encodings"] = json::object();
  j["param_encodings"] = json::object();
  if (!o.folded) {
    if (rows_placeholder) {
      j["param_encodings"][n + "_weight"] = placeholder;
    } else {
      json per_channel = json::array();
      for (float s : e.row_scales) per_channel.push_back(aimet_encoding(s, sym_offset, bits, true));
      j["param_encodings"][n + "_weight"] = per_channel;
    }
    if (weight_only) {
      // DequantizeLinear -> Gather: only the weight is quantized.
    } else if (e.pattern == Pattern::kOptimized) {
      j["activation_encodings"][n + "_convert"] = act;
    } else {
      json smax = json::array({aimet_encoding(e.max_scale, sym_offset, bits, true)});
      j["activation_encodings"][n + "_intermediate_table"] = smax;
      j["activation_encodings"][n + "_intermediate"] = smax;
    }
  }
  if (!weight_only) j["activation_encodings"][output] = act;
  j["excluded_layers"] = json::array();
  // The 0.6.1 spec types is_symmetric and per_channel_quantization as strings;
  // is_symmetric describes the parameters (the activation is asymmetric). A
  // weight-only scheme's activations stay float: 32 bits.
  j["quantizer_args"] = {{"activation_bitwidth", weight_only ? 32 : e.act.bits},
                         {"dtype", "int"},
                         {"is_symmetric", "True"},
                         {"param_bitwidth", bits},
                         {"per_channel_quantization", "True"},
                         {"quant_scheme", "post_training_tf"}};
  return j;
}

}  // namespace

nlohmann::json onnx_encodings(const QuantizedEmbedding& e, const OnnxExportOptions& o) {
  return encodings_json(e, o, false);
}

namespace {

// One table's per-row weight encodings, the list that stands for its
// placeholder, as dump(2) writes it at that depth (the key's line indented 4
// spaces, each element 6, the closing bracket 4), a MiB at a time.
Status stream_row_encodings(const QuantizedEmbedding& e, const std::function<Status(std::string_view)>& sink) {
  const int bits = weight_bits(e.scheme);
  const int64_t sym_offset = -(int64_t{1} << (bits - 1));
  std::string chunk = "[\n";
  for (size_t r = 0; r < e.row_scales.size(); ++r) {
    const std::string elem = json_text(aimet_encoding(e.row_scales[r], sym_offset, bits, true), 2);
    chunk += "      ";
    for (char c : elem) {
      chunk += c;
      if (c == '\n') chunk += "      ";
    }
    chunk += r + 1 < e.row_scales.size() ? ",\n" : "\n";
    if (chunk.size() >= (1u << 20)) {
      QEMB_RETURN_IF_ERROR(sink(chunk));
      chunk.clear();
    }
  }
  chunk += "    ]";
  return sink(chunk);
}

}  // namespace

Status write_onnx_encodings(const QuantizedEmbedding& e, const OnnxExportOptions& o,
                            const std::function<Status(std::string_view)>& sink) {
  const std::string text = json_text(encodings_json(e, o, true), 2) + "\n";
  const std::string marker = nlohmann::json(kRowsPlaceholder).dump();
  const size_t at = text.find(marker);
  if (at == std::string::npos) return sink(text);  // folded: no per-row list
  QEMB_RETURN_IF_ERROR(sink(std::string_view(text).substr(0, at)));
  QEMB_RETURN_IF_ERROR(stream_row_encodings(e, sink));
  return sink(std::string_view(text).substr(at + marker.size()));
}

Status write_onnx_encodings(const std::vector<QuantizedEmbedding>& tables, const OnnxExportOptions& o,
                            const std::function<Status(std::string_view)>& sink) {
  if (tables.size() == 1) return write_onnx_encodings(tables[0], o, sink);
  // Every table's encodings merged, each per-row list a placeholder of its own
  // streamed in place as for one table.
  nlohmann::json merged;
  std::vector<std::string> markers;
  for (size_t t = 0; t < tables.size(); ++t) {
    const std::string placeholder = std::string(kRowsPlaceholder) + std::to_string(t) + "\x01";
    markers.push_back(nlohmann::json(placeholder).dump());
    const nlohmann::json j = encodings_json(tables[t], o, true, onnx_table_output(tables[t]), placeholder);
    if (merged.is_null()) {
      merged = j;
      continue;
    }
    for (const char* group : {"activation_encodings", "param_encodings"})
      for (auto it = j[group].begin(); it != j[group].end(); ++it) merged[group][it.key()] = it.value();
    merged["quantizer_args"]["param_bitwidth"] = nlohmann::json();  // tables may differ: see each param encoding
  }
  const std::string text = json_text(merged, 2) + "\n";
  std::vector<std::pair<size_t, size_t>> at;  // (position, table)
  for (size_t t = 0; t < tables.size(); ++t) {
    const size_t p = text.find(markers[t]);
    if (p != std::string::npos) at.push_back({p, t});
  }
  std::sort(at.begin(), at.end());
  size_t done = 0;
  for (auto [p, t] : at) {
    QEMB_RETURN_IF_ERROR(sink(std::string_view(text).substr(done, p - done)));
    QEMB_RETURN_IF_ERROR(stream_row_encodings(tables[t], sink));
    done = p + markers[t].size();
  }
  return sink(std::string_view(text).substr(done));
}

bool looks_like_artifact(const std::string& path) {
  // Non-blocking, and only a regular file: a FIFO must not wait for a writer
  // here (the checkpoint reader then refuses it with a clear message).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  char magic[sizeof(kArtifactMagic)] = {};
  const bool is_artifact = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                           ::pread(fd, magic, sizeof magic, 0) == static_cast<ssize_t>(sizeof magic) &&
                           std::memcmp(magic, kArtifactMagic, sizeof magic) == 0;
  ::close(fd);
  return is_artifact;
}

Result<OnnxExportSummary> export_onnx(const OnnxExportRequest& r) {
  if (r.out_path.empty()) return make_error(ErrorCode::kInvalidArgument, "no output path: pass -o OUT.onnx");
  for (const std::string* out : {&r.out_path, &r.encodings_path})
    if (!out->empty() && same_file(r.input, *out))
      return make_error(ErrorCode::kInvalidArgument,
                        "the output '" + *out + "' is the input '" + r.input + "'; choose another path");
  if (!r.encodings_path.empty() && same_file(r.out_path, r.encodings_path))
    return make_error(ErrorCode::kInvalidArgument, "the model and the encodings would both be written to '" +
                                                       r.out_path + "'; give OnnxExportRequest.encodings_path its own path");
  if (!onnx_export_available()) return onnx_model_bytes(QuantizedEmbedding{}, OnnxExportOptions{}).error();  // says how to get it

  OnnxExportSummary summary;
  QuantizedEmbedding e;
  std::vector<QuantizedEmbedding> all;
  if (!r.table.empty() && r.all_tables)
    return make_error(ErrorCode::kInvalidArgument,
                      "OnnxExportRequest.table exports one table and OnnxExportRequest.all_tables every one; "
                      "give one of them");
  if (looks_like_artifact(r.input)) {
    QEMB_ASSIGN_OR_RETURN(LoadedArtifact a, load_artifact(r.input));
    if (!r.table.empty() || r.all_tables) {
      QEMB_ASSIGN_OR_RETURN(all, quantized_embeddings(a, r.table));
      e = all.front();
      if (!r.all_tables) all.clear();
    } else {
      QEMB_ASSIGN_OR_RETURN(e, quantized_embedding(a));
    }
    if (r.compile_options_given)
      return make_error(ErrorCode::kInvalidArgument,
                        "'" + r.input + "' is an artifact, compiled already (scheme " + to_string(e.scheme) +
                            ", pattern " + to_string(e.pattern) +
                            "); CompileOptions.tensor, CompileOptions.scheme, CompileOptions.pattern, "
                            "CompileOptions.qnn_sdk_version and CompileOptions.calibration_tokens apply to a "
                            "checkpoint: drop them, or export from the checkpoint");
    summary.from_artifact = true;
  } else {
    if (!r.table.empty() || r.all_tables)
      return make_error(ErrorCode::kInvalidArgument,
                        "'" + r.input + "' is a checkpoint; OnnxExportRequest.table and OnnxExportRequest.all_tables choose "
                        "tables of an artifact: name the checkpoint's tensor with CompileOptions.tensor, or compile "
                        "it first");
    CompileOptions c = r.compile;
    c.mode = CompileMode::kFused;  // keeps the per-row weights the graph needs
    QEMB_ASSIGN_OR_RETURN(CompiledEmbedding compiled, compile_checkpoint(r.input, c));
    QEMB_ASSIGN_OR_RETURN(e, quantized_embedding(compiled));
  }
  std::string model;
  if (all.size() > 1) {
    QEMB_ASSIGN_OR_RETURN(model, onnx_model_bytes(all, r.onnx));
  } else {
    QEMB_RETURN_IF_ERROR(check_onnx_export(e, r.onnx));
    QEMB_ASSIGN_OR_RETURN(model, onnx_model_bytes(e, r.onnx));
  }

  // Both files are complete under temporary names before either is renamed.
  QEMB_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> model_file, AtomicFileWriter::create(r.out_path));
  QEMB_RETURN_IF_ERROR(model_file->write(model.data(), model.size()));
  std::unique_ptr<AtomicFileWriter> enc_file;
  if (!r.encodings_path.empty()) {
    QEMB_ASSIGN_OR_RETURN(enc_file, AtomicFileWriter::create(r.encodings_path));
    // Written as it is made: one row's encoding at a time, never the whole
    // list in memory (about 1.7 KB a row as JSON objects).
    auto write = [&](std::string_view piece) { return enc_file->write(piece.data(), piece.size()); };
    if (all.size() > 1) QEMB_RETURN_IF_ERROR(write_onnx_encodings(all, r.onnx, write));
    else QEMB_RETURN_IF_ERROR(write_onnx_encodings(e, r.onnx, write));
  }
  // All or none: a failure writing either file publishes neither.
  QEMB_RETURN_IF_ERROR(commit_all({model_file.get(), enc_file.get()}));
  summary.model_bytes = model.size();
  e.q.clear();
  e.folded.clear();
  e.folded_u8.clear();
  e.folded_f32.clear();
  e.row_scales.clear();
  summary.embedding = std::move(e);
  if (all.size() > 1) {
    for (QuantizedEmbedding& t : all) {
      t.q.clear();
      t.folded.clear();
      t.folded_u8.clear();
      t.folded_f32.clear();
      t.row_scales.clear();
    }
    summary.tables = std::move(all);
  }
  return summary;
}

std::string onnx_export_command(const std::string& artifact_path, const LoadedArtifact& artifact) {
  auto e = quantized_embedding(artifact);
  if (!e.ok()) return "";
  std::string stem = artifact_path;
  if (stem.size() > 5 && stem.compare(stem.size() - 5, 5, ".qemb") == 0) stem.resize(stem.size() - 5);
  std::string cmd = "qemb export-onnx " + shell_quote(artifact_path);
  if (!e->has_weights()) cmd += " --folded";
  cmd += " --encodings " + shell_quote(stem + ".encodings.json") + " -o " + shell_quote(stem + ".onnx");
  return cmd;
}

}  // namespace qemb
