#include <unistd.h>

#include <cstdio>
#include <optional>

#include "cli/cli.h"
#include "core/json_text.h"
#include "core/strings.h"
#include "qemb/eval.h"
#include "core/file.h"
#include "qemb/tokens.h"

namespace qemb::cli {

void add_eval_command(CLI::App& app, Action& run) {
  struct Flags {
    std::string checkpoint, tensor, scheme = "all", sdk_version, calibration, tokens, report;
    size_t worst_rows = 10;
    bool json = false, quiet = false;
    int threads = 0;
    double min_sqnr = 0.0, max_collapsed_pct = 0.0;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "What quantization cost: the deployed lookup against the float table, both patterns");
  cmd->add_option("checkpoint", f->checkpoint, "checkpoint: safetensors file, index JSON, folder or GGUF file")->required();
  cmd->add_option("--tensor", f->tensor, "embedding tensor: a dotted path, or a glob (*, ?, [...]) matching one, as compile takes (default: detected by name)");
  cmd->add_option("--scheme", f->scheme, "a scheme (16a4w, 16a8w, 16a2w, 8a4w, 8a8w, 8a2w, w4, w8, w2) or all of them, each with its bits per value")
      ->capture_default_str()
      ->check(parsed_by(parse_eval_schemes));
  cmd->add_option("--qnn-sdk-version", f->sdk_version,
                  "target QNN SDK version, marks the pattern a compile deploys (default: from QNN_SDK_ROOT)")
      ->check(sdk_version_rule());
  cmd->add_option("--calibration-tokens", f->calibration,
                  "token ids (text or .npy) whose rows define the activation range (default: the whole table)");
  cmd->add_option("--tokens", f->tokens, "evaluate only the rows of these token ids (text or .npy file)");
  cmd->add_option("--worst-rows", f->worst_rows, "how many worst rows to list")
      ->check(count_rule(0, kMaxCount))
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "print one JSON object instead of the table");
  cmd->add_option("--threads", f->threads, "threads that evaluate rows (0 = one per core; results do not depend on it)")
      ->check(count_rule(0, kMaxThreads))
      ->capture_default_str();
  cmd->add_flag("--quiet", f->quiet, "no progress bar");
  cmd->add_option("--report", f->report, "write a self-contained HTML report with plots");
  CLI::Option* min_sqnr = cmd->add_option("--min-sqnr", f->min_sqnr,
                  "for CI: exit 1 (after the report) when a deployed pattern's SQNR is below DB decibels")
      ->check(CLI::Range(-1000.0, 1000.0));
  CLI::Option* max_collapsed = cmd->add_option("--max-collapsed-pct", f->max_collapsed_pct,
                  "for CI: exit 1 (after the report) when a deployed pattern collapses more than P percent of rows")
      ->check(CLI::Range(0.0, 100.0));
  cmd->callback([f, &run, min_sqnr, max_collapsed] {
    const std::optional<double> gate_sqnr = min_sqnr->count() ? std::optional<double>(f->min_sqnr) : std::nullopt;
    const std::optional<double> gate_collapsed =
        max_collapsed->count() ? std::optional<double>(f->max_collapsed_pct) : std::nullopt;
    run = [f, gate_sqnr, gate_collapsed]() -> Status {
      QEMB_RETURN_IF_ERROR(check_outputs_are_not_inputs(
          {{"--report", f->report}}, {{"--calibration-tokens", f->calibration}, {"--tokens", f->tokens}}));
      EvalOptions o;
      o.tensor = f->tensor;
      QEMB_ASSIGN_OR_RETURN(o.schemes, parse_eval_schemes(f->scheme));
      o.qnn_sdk_version = f->sdk_version;
      o.worst_rows = f->worst_rows;
      o.threads = f->threads;
      // Progress only for a person watching a terminal, as compile does.
      if (!f->quiet && ::isatty(STDERR_FILENO)) o.progress = progress_bar();
      if (!f->calibration.empty()) {
        QEMB_ASSIGN_OR_RETURN(o.calibration_tokens, read_token_file(f->calibration));
        o.calibration_source = f->calibration;
      }
      if (!f->tokens.empty()) {
        QEMB_ASSIGN_OR_RETURN(o.tokens, read_token_file(f->tokens));
        o.tokens_source = f->tokens;
      }
      if (f->report == kStdioPath && f->json)
        return make_error(ErrorCode::kInvalidArgument,
                          "--report - and --json both write to standard output: give one of them a file");
      if (!f->report.empty() && same_file(f->report, f->checkpoint))
        return make_error(ErrorCode::kInvalidArgument,
                          "the report path '" + f->report + "' is the input checkpoint; choose another path");
      QEMB_ASSIGN_OR_RETURN(EvalReport report, evaluate_checkpoint(f->checkpoint, o));
      if (!f->report.empty()) QEMB_RETURN_IF_ERROR(write_html_report(report, f->report));
      if (f->json) {
        std::printf("%s\n", json_text(eval_report_json(report), 2).c_str());
      } else {
        std::FILE* out = summary_stream(f->report);
        const std::string text = format_eval_report(report);
        // Through write_stdout when it is standard output, so a failed write
        // names its cause (a full disk) even when the text outgrows stdio's buffer.
        if (out == stdout) {
          QEMB_RETURN_IF_ERROR(write_stdout(text.data(), text.size()));
        } else {
          std::fputs(text.c_str(), out);
        }
        if (!f->report.empty()) std::fprintf(out, "\nwrote report %s\n", escape_control(f->report).c_str());
      }
      return check_eval_gates(report, gate_sqnr, gate_collapsed);
    };
  });
}

}  // namespace qemb::cli
