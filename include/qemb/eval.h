// What quantization cost: accuracy metrics of the deployed lookup against the
// float table, for each scheme and both lowering patterns; a text table, a JSON
// object and a self-contained HTML report; and the "fake-quantized" checkpoint
// whose embedding holds exactly what the deployed lookup returns.
//
// Definitions (docs/eval.md has the long form). x is a float table value, y
// the deployed dequantized output for it, per pattern (docs/numeric-contract.md, "The two lowerings"):
//   optimized  y = dequantize_activation(optimized_output(s_r, q, act), act)
//   legacy     y = dequantize_activation(legacy_output(s_r, q, s_max, qmax, act), act)
// and w the dequantized weight the activation quantizer receives:
//   optimized  w = s_r * q            legacy  w = s_max * qi
// The error y - x splits into a weight part (w - x) and an activation part
// (y - w). Sums are in float within a row and in double across rows, in a
// fixed order (docs/eval.md, "Streaming, threads and determinism"): the same
// bits on any thread count and ISA.
//   SQNR (dB)   10 * log10(sum x^2 / sum (y - x)^2); +inf when y == x
//               everywhere (JSON: null), -inf when the signal is all zero but
//               the error is not (JSON: null).
//   cosine      per row, dot(x, y) / (|x| |y|); 1 when both rows are zero, 0
//               when exactly one is.
//   p1          1st percentile of the per-row cosines, nearest rank: the
//               ceil(0.01 * N)-th smallest of N.
//   collapsed   a row whose float values are not all equal but whose outputs
//               are all one uint16 level.
//   clipped     a table value farther than half a step outside the activation
//               encoding's representable range [s_a * -zp, s_a * (65535 - zp)],
//               i.e. one whose error is more than rounding.
//   row error   |y - x| / |x| over the row (relative RMS error); 0 when both
//               are zero, +inf when only x is.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qemb/compiler.h"
#include "qemb/pattern.h"
#include "qemb/quantize.h"
#include "qemb/sdk_version.h"

namespace qemb {

// ---- deployed values ---------------------------------------------------------

// The float values the deployed lookup returns for rows [row_begin, row_end)
// of `table`, per pattern (optimized or legacy; auto is an error): the
// formulas above, bit for bit what EmbeddingRuntime::lookup_dequantized
// returns for an artifact compiled with the same scheme, pattern and `act`.
// `out` holds (row_end - row_begin) * table.dim floats.
Status deployed_rows(const PcqTable& table, const ActivationEncoding& act, Pattern pattern,
                     int64_t row_begin, int64_t row_end, float* out);

// ---- metrics -----------------------------------------------------------------

struct RowError {
  int64_t row = 0;
  float row_scale = 0.0f;  // s_r of the scheme
  double rel_err = 0.0;    // |y - x| / |x| over the row
  double max_abs_err = 0.0;
  double cos = 1.0;
};

// Counts over equal-width bins of [lo, hi); values outside land in below/above.
struct Histogram {
  double lo = 0.0, hi = 1.0;
  std::vector<uint64_t> counts;
  uint64_t below = 0, above = 0;
  uint64_t zeros = 0;  // error histograms: exact (zero-error) values, not binned
  void add(double v);
  uint64_t total() const;
};

struct EvalResult {
  Scheme scheme = Scheme::k16a4w;
  Pattern pattern = Pattern::kOptimized;  // optimized | legacy (a weight-only scheme: optimized only)
  bool deployed = false;                  // the pattern a compile for the target picks
  // The scheme's activation encoding (bits 16 or 8; bits 0 for a weight-only
  // scheme, whose y is the dequantized weight) and its stored bits per value,
  // the row scales included: schemes compare at equal bytes.
  ActivationEncoding act;
  double bits_per_value = 0.0;
  double sqnr_db = 0.0;
  double cos_mean = 0.0, cos_p1 = 0.0, cos_min = 0.0;
  double max_abs_err = 0.0, mean_abs_err = 0.0, rms_err = 0.0;
  // The error split: weight quantization (w - x) and activation quantization (y - w).
  double weight_max_abs_err = 0.0, weight_mean_abs_err = 0.0, weight_sqnr_db = 0.0;
  double act_max_abs_err = 0.0, act_mean_abs_err = 0.0, act_sqnr_db = 0.0;
  int64_t collapsed_rows = 0;
  double collapsed_fraction = 0.0;
  int64_t clipped_values = 0;  // the same for every result (it depends on the encoding only)
  double clipped_fraction = 0.0;
  std::vector<RowError> worst_rows;  // highest rel_err first (ties: lower id first)
  // The evaluated rows in evaluation order: all of them up to
  // EvalOptions::row_sample, else every k-th (k = ceil(N / row_sample)), so
  // the report's size does not grow with the table.
  std::vector<RowError> rows;
  Histogram error_histogram;  // log10 |y - x|, zeros counted apart
  Histogram cos_histogram;    // log10(1 - cos) per row, rows with cos == 1 counted apart
  Histogram scale_histogram;  // log10 s_r of the evaluated rows (the same for both patterns)
  float max_scale = 0.0f;     // s_max over every row of the table
};

struct EvalOptions {
  std::string tensor;  // checkpoints: empty = detect the embedding by name
  std::vector<Scheme> schemes = {Scheme::k16a4w, Scheme::k16a8w};  // "all": every scheme (all_schemes())
  std::string qnn_sdk_version;  // marks the pattern a compile would deploy
  // Rows whose values define the activation range (docs/numeric-contract.md, "Activation"); nullopt = all.
  std::optional<std::vector<int64_t>> calibration_tokens;
  std::string calibration_source;  // e.g. the tokens file, for the report
  // Rows to evaluate (the distinct ids, ascending); nullopt = every row.
  std::optional<std::vector<int64_t>> tokens;
  std::string tokens_source;
  size_t worst_rows = 10;
  size_t row_sample = 4000;  // EvalResult::rows keeps at most this many
  int threads = 0;           // 0 = one per core; results do not depend on it
  // Called with ("scan" | "eval", rows done, rows in the pass), as compile's progress.
  std::function<void(const char* phase, int64_t rows_done, int64_t rows_total)> progress;
  int error_histogram_bins_per_decade = 8;
  int error_histogram_decades = 8;
  int value_histogram_bins = 80;
};

struct EvalReport {
  std::string file, tensor, dtype;  // where the table came from
  // The source was block-quantized (GGUF Q8_0, Q4_K, ...): the "float" table is
  // its exact dequantization, so the metrics measure re-quantization only.
  bool source_quantized = false;
  int64_t vocab_size = 0, dim = 0;
  int64_t rows_evaluated = 0;
  std::string rows_source;  // "all rows" or the --tokens source
  ActivationEncoding act;
  double act_range_lo = 0.0, act_range_hi = 0.0;  // s_a * -zp, s_a * (65535 - zp)
  std::string calibration_source;                 // "all table values" or the tokens source
  int64_t calibration_tokens = 0;                 // 0 = the whole table
  TargetVersion target;
  bool has_deployed_pattern = false;  // false when no pattern validates for the target
  Pattern deployed_pattern = Pattern::kLegacy;
  std::string deployed_reason;
  double value_min = 0.0, value_max = 0.0;  // over the evaluated rows
  Histogram value_histogram;                // evaluated table values
  std::vector<EvalResult> results;          // per scheme: optimized, then legacy
};

// What eval recommends for the target: among the evaluated results of the
// pattern the target deploys, the smallest scheme (fewest bytes a value) that
// collapses no row and keeps the 1st-percentile row cosine >= 0.99; when none
// does, the most accurate, saying what falls short and what would help (a
// newer SDK's optimized pattern, a wider scheme).
inline constexpr double kRecommendMinCosP1 = 0.99;
struct EvalRecommendation {
  bool found = false;  // false when no pattern validates for the target
  Scheme scheme = Scheme::k16a4w;
  Pattern pattern = Pattern::kOptimized;
  std::string text;  // one sentence: which, and why
};
EvalRecommendation recommend(const EvalReport& report);
// CI gates over every deployed result: SQNR >= min_sqnr_db and collapsed rows
// <= max_collapsed_pct percent of the evaluated rows. kValidationError naming
// each result that fails (EvalOptions.min_sqnr_db / max_collapsed_pct, the
// CLI's --min-sqnr / --max-collapsed-pct).
Status check_eval_gates(const EvalReport& report, std::optional<double> min_sqnr_db,
                        std::optional<double> max_collapsed_pct);

// Schemes from "16a4w", "16a8w" or "all" (both).
Result<std::vector<Scheme>> parse_eval_schemes(const std::string& text);

// Evaluates a row-major float table. Fails on NaN/Inf, an empty table, an
// empty scheme list, or ids (calibration or evaluation) outside [0, rows).
Result<EvalReport> evaluate_table(const float* table, int64_t rows, int64_t dim, const EvalOptions& options,
                                  const TargetVersion& target, const TableSource& source = {});
// The same over rows read on demand (two passes, chunk by chunk on
// options.threads threads): memory stays bounded whatever the table's size.
Result<EvalReport> evaluate_rows(const RowSource& rows, const EvalOptions& options, const TargetVersion& target,
                                 const TableSource& source = {});
// Reads the embedding (options.tensor or detected) from a safetensors
// checkpoint, discovers the target version (options.qnn_sdk_version, else
// QNN_SDK_ROOT; unknown means legacy is deployed) and evaluates it.
Result<EvalReport> evaluate_checkpoint(const std::string& checkpoint, const EvalOptions& options);

// The --json object, keys in this order: {"tensor", "dtype", "file", "vocab_size", "dim",
// "rows_evaluated", "activation": {...}, "target": {...}, "results": [{"scheme",
// "pattern", "deployed", "sqnr_db", "cos_mean", "cos_p1", "cos_min",
// "max_abs_err", "mean_abs_err", "rms_err", "weight_*", "act_*",
// "collapsed_rows", "collapsed_fraction", "clipped_values",
// "clipped_fraction", "worst_rows": [{"id", "row_scale", "rel_err",
// "max_abs_err", "cos"}]}], "recommendation": {"scheme", "pattern",
// "reason"}}. Non-finite numbers are null.
nlohmann::ordered_json eval_report_json(const EvalReport& report);
// The readable table `qemb eval` prints.
std::string format_eval_report(const EvalReport& report);
// One self-contained HTML page (inline CSS and SVG; no scripts, no fetched
// resources): the metrics table, per-row error against row scale (log-log
// scatter, both patterns), error histograms, the activation range over the
// value distribution, and the worst rows. Every plot is an <svg class="plot">
// with an id: scatter-<scheme>, errhist-<scheme>, act-range.
std::string render_html_report(const EvalReport& report);
Status write_html_report(const EvalReport& report, const std::string& path);

// ---- write-back ----------------------------------------------------------------

struct FakeQuantOptions {
  std::string tensor;  // empty = detect the embedding by name
  Scheme scheme = Scheme::k16a4w;
  Pattern pattern = Pattern::kAuto;
  std::string qnn_sdk_version;  // empty = discover from QNN_SDK_ROOT
  std::optional<std::vector<int64_t>> calibration_tokens;
  // A folder (or index) in: hard-link the unchanged shards into the output
  // folder instead of copying them, where the file system allows it.
  bool link = false;
};

struct FakeQuantResult {
  std::string tensor, dtype;
  int64_t rows = 0, dim = 0;
  Pattern pattern = Pattern::kLegacy;
  std::string pattern_reason;
  ActivationEncoding act;
  bool folder = false;       // the output is a checkpoint folder
  int64_t linked_files = 0;  // shards hard-linked rather than copied (--link)
  // Folder output: entries of the checkpoint folder not copied, each as
  // "relative/path (why)": links to folders (never followed), dangling links,
  // FIFOs, sockets, devices.
  std::vector<std::string> skipped;
};

// The deployed lookup's values for every row of a row-major float table (what
// fakequant writes back), into out[rows * dim]; `out` may be `table` itself.
// result.tensor and result.dtype stay empty.
Result<FakeQuantResult> fakequant_table(const float* table, int64_t rows, int64_t dim,
                                        const FakeQuantOptions& options, const TargetVersion& target, float* out);
// Opens `checkpoint` (any form Checkpoint::open takes except GGUF),
// fake-quantizes its embedding and writes the copy to `out_path` (F16/BF16
// rounded to nearest even; everything else byte-identical). A lone file gives
// a file. A folder or an index gives a complete new folder at `out_path`: the
// shard holding the embedding rewritten, every other file (shards, the
// index, config.json, tokenizer files) copied unchanged, or for shards
// hard-linked with options.link. Atomic (the folder appears complete or not at
// all); refuses out_path == checkpoint and an existing output folder.
Result<FakeQuantResult> fakequant_checkpoint(const std::string& checkpoint, const FakeQuantOptions& options,
                                             const std::string& out_path);

}  // namespace qemb
