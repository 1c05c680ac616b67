// Export of a compiled embedding to the deployment toolchains: an ONNX model
// in QDQ form (QuantizeLinear/DequantizeLinear around float ops) for either
// lowering pattern, and the quantization encodings as AIMET-format JSON for
// the QNN converter's quantization overrides. Format and graphs:
// docs/onnx-export.md.
//
// Built over the public compile API: a checkpoint is compiled in memory with
// the same options as `qemb compile`, an artifact is read as written.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qemb/artifact.h"
#include "qemb/compiler.h"
#include "qemb/pattern.h"
#include "qemb/quantize.h"
#include "qemb/status.h"

namespace qemb {

// False when this build has no ONNX support (libonnx-dev was not found);
// export_onnx then fails with kUnsupported, saying so.
bool onnx_export_available();

// The opsets the exporter writes. uint16 QuantizeLinear/DequantizeLinear and
// the INT4 type arrived in opset 21; opset 22 left them unchanged.
inline constexpr int kOnnxDefaultOpset = 21;
inline constexpr int kOnnxMinOpset = 21;
inline constexpr int kOnnxMaxOpset = 22;
// The newest ai.onnx opset this exporter knows of; above it an opset is unknown.
inline constexpr int kOnnxNewestKnownOpset = 23;
// Protobuf refuses messages of 2 GiB and more; the exporter writes no
// external data, so a model must fit in one message.
inline constexpr uint64_t kOnnxMaxModelBytes = (uint64_t{2} << 30) - 1;

// The quantized embedding as the exporter needs it, from a compile or from an
// artifact: the per-row weights and their scales (absent when an artifact
// holds only the folded uint16 table), the legacy per-tensor scale, the
// activation encoding and the folded table (when an artifact holds it).
struct QuantizedEmbedding {
  std::string node = "embedding";  // the lowering's node name N
  Scheme scheme = Scheme::k16a4w;
  Pattern pattern = Pattern::kOptimized;  // optimized | legacy
  int64_t rows = 0, dim = 0;
  std::vector<float> row_scales;  // empty when only `folded` is known
  std::vector<int8_t> q;          // rows * dim, one value per element
  float max_scale = 0.0f;         // legacy: s_max of the intermediate
  ActivationEncoding act;
  // act.bits: 16 or 8 (the scheme's activation), 0 for a weight-only scheme.
  std::vector<uint16_t> folded;   // rows * dim, when read from a folded artifact (16-bit activations)
  std::vector<uint8_t> folded_u8;   // the same of an 8-bit activation scheme
  std::vector<float> folded_f32;    // the same of a weight-only scheme (y = s_r * q)
  nlohmann::json provenance;      // the compile's metadata
  bool has_weights() const { return !q.empty(); }
  bool has_folded() const { return !folded.empty() || !folded_u8.empty() || !folded_f32.empty(); }
};

// From a compile (its lowered graph holds the weight; compile with
// CompileMode::kFused so the weight bytes are kept) or an artifact's graph.
Result<QuantizedEmbedding> quantized_embedding(const CompiledEmbedding& compiled);
Result<QuantizedEmbedding> quantized_embedding(const LoadedArtifact& artifact);

struct OnnxExportOptions {
  int opset = kOnnxDefaultOpset;
  // Optimized pattern only: a uint16 table initializer -> Gather ->
  // DequantizeLinear instead of the weight -> DQ -> Q -> DQ -> Gather chain.
  bool folded = false;
  bool int32_indices = false;  // the `indices` input is int32 instead of int64
  bool int4_weights = false;   // 4-bit weights as an INT4 initializer (opset >= 21)
};

// The uint16 table the optimized pattern folds into (q16(s_r * q) per element),
// or the folded table itself when that is all `e` holds.
std::vector<uint16_t> folded_table(const QuantizedEmbedding& e);
// The same for an 8-bit activation scheme (q8 per element) and for a
// weight-only one (its float y = s_r * q per element).
std::vector<uint8_t> folded_table_u8(const QuantizedEmbedding& e);
std::vector<float> folded_table_f32(const QuantizedEmbedding& e);

// Checks that `options` can express `e` (opset, pattern, folded, INT4) before
// anything is built, with errors that say what to change.
Status check_onnx_export(const QuantizedEmbedding& e, const OnnxExportOptions& options);

// The serialized ModelProto. Input `indices` (int64 or int32, [N]), output
// `embedding` (float32, [N, D]); node and tensor names follow the lowering's.
Result<std::string> onnx_model_bytes(const QuantizedEmbedding& e, const OnnxExportOptions& options);

// Several tables (of one artifact) as one model: table e's input is
// onnx_table_input(e) ("N_indices") and its output onnx_table_output(e)
// ("N_embedding"), N its node (table) name; everything else as for one table.
// One table gives the one-table model above.
Result<std::string> onnx_model_bytes(const std::vector<QuantizedEmbedding>& tables, const OnnxExportOptions& options);
inline std::string onnx_table_input(const QuantizedEmbedding& e) { return e.node + "_indices"; }
inline std::string onnx_table_output(const QuantizedEmbedding& e) { return e.node + "_embedding"; }

// The tables of an artifact: every one (`table` empty), or the one named
// `table` (kNotFound listing them). A one-table artifact gives its table.
Result<std::vector<QuantizedEmbedding>> quantized_embeddings(const LoadedArtifact& artifact,
                                                             const std::string& table = "");

// The encodings (AIMET format, version "0.6.1") of the tensors the model
// names: the per-channel weight as a param encoding, the activations.
nlohmann::json onnx_encodings(const QuantizedEmbedding& e, const OnnxExportOptions& options);
// The same JSON as text (onnx_encodings(e, options).dump(2) and a newline,
// byte for byte), handed to `sink` in pieces as it is made: the per-row list
// is never held whole, so memory does not grow with the table's rows.
Status write_onnx_encodings(const QuantizedEmbedding& e, const OnnxExportOptions& options,
                            const std::function<Status(std::string_view)>& sink);
// The encodings of the several-table model: every table's, each table's
// output under its onnx_table_output name; streamed the same way.
Status write_onnx_encodings(const std::vector<QuantizedEmbedding>& tables, const OnnxExportOptions& options,
                            const std::function<Status(std::string_view)>& sink);

// True when the file starts with the .qemb magic (else it is read as a
// checkpoint).
bool looks_like_artifact(const std::string& path);

struct OnnxExportRequest {
  std::string input;  // a checkpoint or a .qemb artifact
  // For a checkpoint: how to compile it (the mode is ignored). An artifact was
  // compiled already: any of these set is an error.
  CompileOptions compile;
  bool compile_options_given = false;
  OnnxExportOptions onnx;
  std::string out_path;        // .onnx
  std::string encodings_path;  // empty = no encodings file
  // An artifact of several tables: export the table of this name, or (with
  // all_tables) every table as one model; one of them is needed there.
  std::string table;
  bool all_tables = false;
};

struct OnnxExportSummary {
  QuantizedEmbedding embedding;  // its tables cleared (the first, with all_tables)
  std::vector<QuantizedEmbedding> tables;  // all_tables: each, its tables cleared
  bool from_artifact = false;
  size_t model_bytes = 0;
};

// Reads the input, exports, and writes the model (and the encodings) each
// atomically: on any error neither file appears and an existing one is kept.
// Refuses an output that is the input or that names the same file twice.
Result<OnnxExportSummary> export_onnx(const OnnxExportRequest& request);

// The `qemb export-onnx` command line that exports an artifact.
std::string onnx_export_command(const std::string& artifact_path, const LoadedArtifact& artifact);

}  // namespace qemb
