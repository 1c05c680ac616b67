#include "qemb/inspect.h"

#include <algorithm>
#include <sstream>

#include "core/ir.h"
#include "core/json_text.h"
#include "core/strings.h"

namespace qemb {

namespace {

nlohmann::json encoding_json(const Encoding& e) {
  using nlohmann::json;
  switch (e.type) {
    case Encoding::Type::kNone: return nullptr;
    case Encoding::Type::kPerTensor:
      return {{"type", "per_tensor"}, {"bitwidth", e.bitwidth}, {"scale", e.scale}, {"offset", e.offset}};
    case Encoding::Type::kPerAxis: {
      json j = {{"type", "per_axis"}, {"axis", e.axis}, {"bitwidth", e.bitwidth}, {"num_scales", e.scales.size()}};
      if (!e.scales.empty()) {
        auto [lo, hi] = std::minmax_element(e.scales.begin(), e.scales.end());
        j["scale_min"] = *lo;
        j["scale_max"] = *hi;
      }
      bool symmetric = std::all_of(e.offsets.begin(), e.offsets.end(), [](int32_t o) { return o == 0; });
      j["offsets"] = symmetric ? json("all 0") : json(e.offsets);
      return j;
    }
  }
  return nullptr;
}

}  // namespace

nlohmann::json describe_artifact(const EmbeddingRuntime& runtime) {
  using nlohmann::json;
  const LoadedArtifact& a = runtime.artifact();
  const json& m = runtime.table(0).metadata();
  auto meta = [&](const char* key) { return m.contains(key) ? m[key] : json(); };
  json j;
  j["scheme"] = meta("scheme");
  j["pattern"] = meta("pattern");
  j["pattern_reason"] = meta("pattern_reason");
  j["sdk_version"] = meta("sdk_version");
  j["sdk_version_source"] = meta("sdk_version_source");
  j["mode"] = meta("mode");
  j["mode_reason"] = meta("mode_reason");
  // Rows the deployed pattern collapses (null: compiled before it was recorded).
  j["collapsed_rows"] = meta("collapsed_rows");
  j["vocab_size"] = runtime.vocab_size();
  j["dim"] = runtime.dim();
  // The output: act_bits 16 / 8 (uint16 / uint8 activations in act_scale,
  // act_offset), or 0 for a weight-only table's floats (no encoding: null).
  j["act_bits"] = runtime.activation_bits();
  j["act_scale"] = runtime.activation_bits() ? json(runtime.activation().scale) : json();
  j["act_offset"] = runtime.activation_bits() ? json(runtime.activation().offset()) : json();
  j["source"] = meta("source");
  j["calibration"] = meta("calibration");
  j["kernel"] = runtime.kernel_name();
  j["isa"] = runtime.isa();
  j["format_version"] = a.format_version;
  j["file_size"] = a.file_size;
  json ops = json::array();
  for (const Op& op : a.graph->ops) {
    json o = {{"type", to_string(op.type)}, {"name", op.name}, {"inputs", op.inputs}, {"outputs", op.outputs}};
    if (op.type == OpType::kGather) o["axis"] = op.axis;
    if (op.intermediate) o["intermediate_encoding"] = encoding_json(*op.intermediate);
    ops.push_back(o);
  }
  j["ops"] = ops;
  json tensors = json::array();
  for (const Tensor& t : a.graph->tensors) {
    json tj = {{"name", t.name}, {"kind", to_string(t.kind)}, {"dtype", to_string(t.dtype)},
               {"shape", t.shape}, {"encoding", encoding_json(t.encoding)}};
    if (t.data) tj["bytes"] = t.data->size();
    if (t.interleaved()) {
      // Its scales sit in its rows, spread over the whole table: not read here.
      tj["layout"] = "row_interleaved";
      tj["row_stride"] = t.row_stride;
      tj["encoding"]["num_scales"] = t.shape[0];
      tj["encoding"]["scales"] = "in rows";
      tj["encoding"]["offsets"] = "all 0";
    } else {
      tj["layout"] = "plain";
    }
    tensors.push_back(tj);
  }
  j["tensors"] = tensors;
  json sections = json::array();
  for (const SectionInfo& s : a.sections)
    sections.push_back({{"name", s.name}, {"kind", to_string(s.kind)}, {"offset", s.offset},
                        {"size", s.size}, {"verified", s.verified}});
  j["sections"] = sections;
  // Every table (one for a one-table artifact); the keys above describe the first.
  json tables = json::array();
  for (size_t i = 0; i < runtime.table_count(); ++i) {
    const EmbeddingTable& t = runtime.table(i);
    const json& tm = t.metadata();
    auto tmeta = [&](const char* key) { return tm.contains(key) ? tm[key] : json(); };
    tables.push_back({{"name", t.name()},
                      {"scheme", tmeta("scheme")},
                      {"pattern", tmeta("pattern")},
                      {"pattern_reason", tmeta("pattern_reason")},
                      {"mode", tmeta("mode")},
                      {"collapsed_rows", tmeta("collapsed_rows")},
                      {"vocab_size", t.vocab_size()},
                      {"dim", t.dim()},
                      {"act_bits", t.activation_bits()},
                      {"act_scale", t.activation_bits() ? json(t.activation().scale) : json()},
                      {"act_offset", t.activation_bits() ? json(t.activation().offset()) : json()},
                      {"source", tmeta("source")},
                      {"kernel", t.kernel_name()}});
  }
  j["tables"] = tables;
  return j;
}

std::string describe_artifact_text(const EmbeddingRuntime& runtime) {
  const nlohmann::json j = describe_artifact(runtime);
  // Every string here comes from the file: escape what could drive the terminal.
  auto str = [&](const char* key) {
    return escape_control(j[key].is_string() ? j[key].get<std::string>() : json_text(j[key]));
  };
  auto source = [&](const char* key) {
    const auto it = j["source"].find(key);
    if (it == j["source"].end()) return std::string();
    return escape_control(it->is_string() ? it->get<std::string>() : json_text(*it));
  };
  std::ostringstream os;
  os << "scheme:       " << str("scheme") << "\n"
     << "pattern:      " << str("pattern") << " (" << str("pattern_reason") << ")\n"
     << "sdk version:  " << (j["sdk_version"].is_null() ? "unknown" : str("sdk_version")) << "\n"
     << "mode:         " << str("mode") << " (" << str("mode_reason") << ")\n"
     << "table:        " << runtime.vocab_size() << " x " << runtime.dim() << "\n";
  if (j["collapsed_rows"].is_number_integer() && j["collapsed_rows"].get<int64_t>() > 0)
    os << "collapsed:    " << j["collapsed_rows"].get<int64_t>() << " rows read back as a constant (the legacy "
       << "pattern's max-scale approximation; the optimized pattern, QNN SDK >= 2.48, keeps them)\n";
  if (runtime.activation_bits() == 0)
    os << "activation:   none (weight-only: lookups return y = s_r * q as float)\n";
  else
    os << "activation:   uint" << runtime.activation_bits() << " scale=" << runtime.activation().scale
       << " offset=" << runtime.activation().offset() << "\n";
  os << "kernel:       " << runtime.kernel_name() << "\n";
  for (const Tensor& t : runtime.artifact().graph->tensors)
    if (t.interleaved())
      os << "storage:      '" << escape_control(t.name) << "' row-interleaved, " << t.row_stride
         << " bytes a row (scale, then values)\n";
  if (j["source"].is_object())
    os << "source:       " << source("file") << " : " << source("tensor") << " (" << source("dtype")
       << (source("format").empty() ? "" : ", " + source("format")) << ")\n";
  if (runtime.table_count() > 1 && j["tables"].is_array()) {
    os << "tables:       " << runtime.table_count() << " (the lines above describe the first; each is chosen by its name)\n";
    for (const nlohmann::json& t : j["tables"]) {
      auto field = [&](const char* key) {
        const auto it = t.find(key);
        if (it == t.end()) return std::string("?");
        return escape_control(it->is_string() ? it->get<std::string>() : json_text(*it));
      };
      os << "  " << field("name") << ": " << field("scheme") << " " << field("pattern") << " " << field("mode") << ", "
         << field("vocab_size") << " x " << field("dim") << ", " << field("kernel") << "\n";
    }
  }
  os << "runtime graph:\n" << runtime.artifact().graph->dump();
  return os.str();
}

}  // namespace qemb
