#include "cli/option_names.h"

#include <string_view>

namespace qemb::cli {

namespace {

struct FieldFlag {
  std::string_view field, flag;
};

// A field followed by " = " names a value to pass ("CompileOptions.mode =
// fused" -> "--mode fused"), so those rows come before the plain fields.
constexpr FieldFlag kFieldFlags[] = {
    {"CompileOptions.mode = ", "--mode "},
    {"CompileOptions.pattern = ", "--pattern "},
    {"CompileOptions.tensor = ", "--tensor "},
    {"CompileOptions.qnn_sdk_version = ", "--qnn-sdk-version "},
    {"CompileOptions.max_collapsed_rows = ", "--max-collapsed-rows "},
    {"OnnxExportOptions.opset = ", "--opset "},
    {"OnnxExportRequest.table = ", "--table "},
    {"CompileOptions.tensor", "--tensor"},
    {"CompileOptions.scheme", "--scheme"},
    {"CompileOptions.pattern", "--pattern"},
    {"CompileOptions.qnn_sdk_version", "--qnn-sdk-version"},
    {"CompileOptions.calibration_tokens", "--calibration-tokens"},
    {"CompileOptions.mode", "--mode"},
    {"CompileOptions.memory_budget", "--memory-budget"},
    {"CompileOptions.node_name", "--name"},
    {"CompileOptions.threads", "--threads"},
    {"CompileOptions.max_collapsed_rows", "--max-collapsed-rows"},
    {"EvalOptions.min_sqnr_db", "--min-sqnr"},
    {"EvalOptions.max_collapsed_pct", "--max-collapsed-pct"},
    {"OnnxExportOptions.opset", "--opset"},
    {"OnnxExportOptions.folded", "--folded"},
    {"OnnxExportOptions.int32_indices", "--int32-indices"},
    {"OnnxExportOptions.int4_weights", "--int4-weights"},
    {"OnnxExportRequest.encodings_path", "--encodings"},
    {"OnnxExportRequest.out_path", "-o"},
    {"OnnxExportRequest.table", "--table"},
    {"OnnxExportRequest.all_tables", "--all-tables"},
    {"BenchOptions.batch", "--batch"},
    {"BenchOptions.table", "--table NAME"},
    // The SDK layer names the field every options struct (and the Python
    // module's keyword) shares.
    {"(qnn_sdk_version)", "(--qnn-sdk-version)"},
};

}  // namespace

std::string with_flag_names(std::string message) {
  for (const FieldFlag& f : kFieldFlags)
    for (size_t at = 0; (at = message.find(f.field, at)) != std::string::npos; at += f.flag.size())
      message.replace(at, f.field.size(), f.flag);
  return message;
}

}  // namespace qemb::cli
