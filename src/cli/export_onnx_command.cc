#include <cstdio>

#include "cli/cli.h"
#include "qemb/export.h"
#include "core/file.h"
#include "qemb/tokens.h"

namespace qemb::cli {

void add_export_onnx_command(CLI::App& app, Action& run) {
  struct Flags {
    std::string input, tensor, scheme, pattern, sdk_version, calibration, encodings, out, table;
    int opset = kOnnxDefaultOpset;
    bool folded = false, int32_indices = false, int4_weights = false, quiet = false, all_tables = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "export-onnx", "Write the quantized lookup as an ONNX QDQ model (and its AIMET-format encodings)");
  cmd->add_option("input", f->input, "a checkpoint (file or folder: safetensors, sharded, GGUF, PyTorch, .npy/.npz) or a .qemb artifact")->required();
  cmd->add_option("--tensor", f->tensor, "checkpoint: embedding tensor name (default: detected by name)");
  cmd->add_option("--scheme", f->scheme, "checkpoint: a scheme of compile --scheme (default 16a4w)")->check(parsed_by(parse_scheme));
  cmd->add_option("--pattern", f->pattern, "checkpoint: auto | optimized | legacy (default auto)")
      ->check(parsed_by(parse_pattern));
  cmd->add_option("--qnn-sdk-version", f->sdk_version, "checkpoint: target QNN SDK version (default: from QNN_SDK_ROOT)")
      ->check(sdk_version_rule());
  cmd->add_option("--calibration-tokens", f->calibration,
                  "checkpoint: token ids whose rows define the activation range (default: the whole table)");
  cmd->add_option("--opset", f->opset, "ai.onnx opset: 21 | 22")->capture_default_str()->check(opset_rule());
  cmd->add_flag("--folded", f->folded, "optimized pattern: a uint16 table -> Gather -> DequantizeLinear");
  cmd->add_flag("--int32-indices", f->int32_indices, "the indices input is int32 (default int64)");
  cmd->add_flag("--int4-weights", f->int4_weights, "16a4w: store the weights as an INT4 initializer");
  CLI::Option* table = cmd->add_option(
      "--table", f->table, "artifact of several tables: export the table NAME (see qemb inspect)");
  cmd->add_flag("--all-tables", f->all_tables,
                "artifact of several tables: export every table as one model, table N's input N_indices and "
                "output N_embedding")
      ->excludes(table);
  cmd->add_option("--encodings", f->encodings, "also write the AIMET-format encodings JSON here");
  cmd->add_option("-o,--output", f->out, "output .onnx file")->required();
  cmd->add_flag("--quiet", f->quiet, "print nothing on success");
  cmd->callback([f, &run] {
    run = [f]() -> Status {
      QEMB_RETURN_IF_ERROR(check_outputs_are_not_inputs({{"-o", f->out}, {"--encodings", f->encodings}},
                                                        {{"--calibration-tokens", f->calibration}}));
      OnnxExportRequest r;
      r.input = f->input;
      r.out_path = f->out;
      r.encodings_path = f->encodings;
      r.onnx.opset = f->opset;
      r.onnx.folded = f->folded;
      r.onnx.int32_indices = f->int32_indices;
      r.onnx.int4_weights = f->int4_weights;
      r.table = f->table;
      r.all_tables = f->all_tables;
      CompileOptions& o = r.compile;
      o.tensor = f->tensor;
      if (!f->scheme.empty()) {
        QEMB_ASSIGN_OR_RETURN(o.scheme, parse_scheme(f->scheme));
      }
      if (!f->pattern.empty()) {
        QEMB_ASSIGN_OR_RETURN(o.pattern, parse_pattern(f->pattern));
      }
      o.qnn_sdk_version = f->sdk_version;
      if (!f->calibration.empty()) {
        QEMB_ASSIGN_OR_RETURN(o.calibration_tokens, read_token_file(f->calibration));
        o.calibration_source = f->calibration;
      }
      r.compile_options_given = !f->tensor.empty() || !f->scheme.empty() || !f->pattern.empty() ||
                                !f->sdk_version.empty() || !f->calibration.empty();
      QEMB_ASSIGN_OR_RETURN(OnnxExportSummary s, export_onnx(r));
      if (!f->quiet) {
        // Standard error when either file goes to standard output.
        std::FILE* out = summary_stream(f->encodings == kStdioPath ? f->encodings : f->out);
        const QuantizedEmbedding& e = s.embedding;
        if (!s.tables.empty()) {
          for (const QuantizedEmbedding& t : s.tables)
            std::fprintf(out, "table %s: %s [%lld x %lld], %s pattern%s, input %s, output %s\n", t.node.c_str(),
                         to_string(t.scheme), static_cast<long long>(t.rows), static_cast<long long>(t.dim),
                         to_string(t.pattern), f->folded ? " (folded)" : "", onnx_table_input(t).c_str(),
                         onnx_table_output(t).c_str());
          std::fprintf(out, "artifact: %zu tables as one model, opset %d\n", s.tables.size(), f->opset);
        } else {
          if (!f->table.empty()) std::fprintf(out, "table:    %s\n", e.node.c_str());
          std::fprintf(out, "%s: %s [%lld x %lld], %s pattern%s, opset %d\n",
                       s.from_artifact ? "artifact" : "checkpoint", to_string(e.scheme),
                       static_cast<long long>(e.rows), static_cast<long long>(e.dim), to_string(e.pattern),
                       f->folded ? " (folded)" : "", f->opset);
        }
        if (!s.from_artifact && e.provenance.contains("pattern_reason"))
          std::fprintf(out, "pattern: %s\n", e.provenance["pattern_reason"].get<std::string>().c_str());
        std::fprintf(out, "wrote %s (%zu bytes)\n", f->out.c_str(), s.model_bytes);
        if (!f->encodings.empty()) std::fprintf(out, "wrote %s\n", f->encodings.c_str());
      }
      return Status::Ok();
    };
  });
}

}  // namespace qemb::cli
