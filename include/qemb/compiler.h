// The compile pipeline: float table -> PCQ quantization -> lowering chosen by
// the target SDK -> passes (fold or fuse) -> .qemb artifact.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qemb/artifact.h"
#include "qemb/pattern.h"
#include "qemb/quantize.h"
#include "qemb/sdk_version.h"

namespace qemb {

enum class CompileMode { kMaterialize, kFused, kAuto };
const char* to_string(CompileMode m);  // "materialize", "fused", "auto"
Result<CompileMode> parse_compile_mode(const std::string& s);
inline constexpr uint64_t kDefaultMemoryBudget = 256ull << 20;

struct CompileOptions {
  std::string tensor;  // empty = detect the embedding by name (docs/numeric-contract.md, "Checkpoints and names")
  Scheme scheme = Scheme::k16a4w;
  Pattern pattern = Pattern::kAuto;
  std::string qnn_sdk_version;  // empty = discover from QNN_SDK_ROOT
  // Rows whose float values define the activation range; nullopt = all rows.
  std::optional<std::vector<int64_t>> calibration_tokens;
  std::string calibration_source;  // for provenance, e.g. the tokens file
  CompileMode mode = CompileMode::kAuto;
  uint64_t memory_budget = kDefaultMemoryBudget;  // auto: fused above this
  std::string node_name = "embedding";
  // Threads that quantize rows; 0 = one per core.
  int threads = 0;
  // The legacy pattern's per-tensor approximation wipes out rows whose scale
  // is under s_max / (2 qmax) (CompiledEmbedding::collapsed_rows). -1 = any
  // number (they are reported); N >= 0 = the compile fails, writing nothing,
  // when more than N rows collapse.
  int64_t max_collapsed_rows = -1;
  // Called now and then from the calling thread while rows are processed
  // (phase is "scan" or "quantize"); the library itself prints nothing.
  std::function<void(const char* phase, int64_t rows_done, int64_t rows_total)> progress;
};

struct CompiledEmbedding {
  // The graphs (the internal IR, src/core/ir.h; opaque here). As lowered,
  // before passes: for the materialized optimized pattern the weight tensor
  // keeps its shape and encoding but not its data (the packed weight is
  // dropped once it is folded into the uint16 table).
  std::shared_ptr<const Graph> lowered;
  std::shared_ptr<const Graph> runtime_graph;  // after fold/fuse: what the artifact holds
  Pattern pattern = Pattern::kLegacy;
  std::string pattern_reason;
  CompileMode mode = CompileMode::kMaterialize;
  std::string mode_reason;
  TargetVersion target;
  ActivationEncoding act;
  // Rows the deployed pattern collapses to a constant (legacy pattern only;
  // 0 for the optimized one), out of the table's rows; also in metadata
  // ("collapsed_rows").
  int64_t collapsed_rows = 0;
  nlohmann::json metadata;  // provenance written into the artifact
};

// "the legacy pattern collapses N of V rows (P%) of this SCHEME table to a
// constant (...); target QNN SDK >= 2.48 ..." : what compile and eval say
// when the deployed pattern wipes rows out (option names as CompileOptions
// fields; the CLI and Python print their own flags).
std::string collapse_message(int64_t collapsed, int64_t rows, Scheme scheme);

// Where a float table came from, for provenance.
struct TableSource {
  std::string file;
  std::string tensor;
  std::string dtype;
  std::string format;  // the checkpoint's form ("safetensors", "gguf", "pytorch", "npy", ...); may be empty
};

// The `bits`-bit activation encoding (16 | 8) from the whole table or from
// the calibration rows. Ids outside [0, rows) fail, naming the position and value.
Result<ActivationEncoding> observe_activation(const float* table, int64_t rows, int64_t dim,
                                              const std::optional<std::vector<int64_t>>& tokens, int bits = 16);

// Rejects NaN/Inf (naming row and column) and empty tables.
Status check_table(const float* table, int64_t rows, int64_t dim);

// Float rows on demand, so a table never has to be in memory whole.
class RowSource {
 public:
  virtual ~RowSource() = default;
  virtual int64_t rows() const = 0;
  virtual int64_t dim() const = 0;
  // Writes rows [begin, end) as float32 into out (row-major). Thread-safe.
  virtual Status read(int64_t begin, int64_t end, float* out) const = 0;
  // Hints that rows [begin, end) will not be needed again soon.
  virtual void release(int64_t begin, int64_t end) const {}
  // Rows [begin, end) where the source already holds them as float32 (an
  // array, a mapped F32 tensor at a float's alignment), so a reader can skip
  // the copy; nullptr otherwise (then use read).
  virtual const float* rows_in_place(int64_t begin, int64_t end) const { return nullptr; }
  // Row `row` in place as little-endian BF16 (2 * dim() bytes, valid while
  // the source lives), or nullptr where the rows are not stored so: the
  // compiler then reads BF16 without converting it to float32 first.
  virtual const uint8_t* bf16_row(int64_t row) const { return nullptr; }
};

Result<CompiledEmbedding> compile_table(const float* table, int64_t rows, int64_t dim,
                                        const CompileOptions& options, const TargetVersion& target,
                                        const TableSource& source = {});
// The streaming form: one parallel pass over the rows (range, row scales and
// the packed rows), holding only a few rows per thread in float. The
// materialized optimized pattern then folds the packed rows, kept in memory
// (0.5 or 1 byte a value), into the uint16 table: that fold needs the whole
// table's range, known only after the last row.
Result<CompiledEmbedding> compile_rows(const RowSource& rows, const CompileOptions& options,
                                       const TargetVersion& target, const TableSource& source = {});
// Reads the checkpoint (safetensors, memory-mapped and streamed), discovers the target SDK version
// (options.qnn_sdk_version, else QNN_SDK_ROOT), compiles and writes `out_path`
// atomically, the table streamed into the file as it is produced (the
// returned graphs hold shapes and encodings; the table's bytes are in the
// file only). Refuses an output path that is the checkpoint itself.
Result<CompiledEmbedding> compile_checkpoint(const std::string& checkpoint,
                                             const CompileOptions& options,
                                             const std::string& out_path);
// The same compile kept in memory (nothing written): the graphs hold their
// tables, e.g. for an exporter to another format.
Result<CompiledEmbedding> compile_checkpoint(const std::string& checkpoint, const CompileOptions& options);

// Compiles a row-major [rows, dim] table already in memory (a NumPy array, a
// generated table), read in place, and writes `out_path` atomically as
// compile_checkpoint does. `dtype` is "F32", "F16" or "BF16" (the elements'
// encoding, as in safetensors); `source` is recorded as provenance (file
// defaults to "<memory>", dtype to `dtype`). Rejects NaN/Inf and empty tables.
Result<CompiledEmbedding> compile_array(const void* data, const std::string& dtype, int64_t rows, int64_t dim,
                                        const CompileOptions& options, const std::string& out_path,
                                        TableSource source = {});

// Several tables in one artifact, each with its own options: tables[i].tensor
// names the checkpoint tensor (required), tables[i].node_name the table's name
// in the artifact (unique; what EmbeddingRuntime::find_table and
// `qemb run --table` take), and its scheme, pattern, mode and calibration are
// its own. The tables are read and written one after another, each streamed
// as compile_checkpoint streams one. One entry gives exactly
// compile_checkpoint's artifact; several give a format-2 artifact whose META
// is {"qemb_version", "tables": [each table's metadata with its "name"]}.
Result<std::vector<CompiledEmbedding>> compile_checkpoint_tables(const std::string& checkpoint,
                                                                 const std::vector<CompileOptions>& tables,
                                                                 const std::string& out_path);

}  // namespace qemb
