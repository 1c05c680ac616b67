// `qemb bench`: the artifact's own runtime kernel on random ids (plain or
// pooled lookups), measured in the same run as a memcpy gather of the same
// stored row bytes (the roofline).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qemb/runtime.h"

namespace qemb {

struct BenchOptions {
  size_t batch = 2048;
  bool cold = false;        // fresh random ids over the whole table every batch
  bool dequantize = false;  // dequantized output, in out_dtype
  FloatDtype out_dtype = FloatDtype::kF32;
  double min_seconds = 0.5;  // of each side's time, measured in short alternating turns
  uint64_t seed = 42;
  size_t hot_set = 1024;  // distinct ids a hot run cycles through
  // > 0: pooled lookups (embedding_bags, sum) of `batch` bags of this many ids
  // each; rates then count ids pooled, and the output is float32.
  size_t pooling = 0;
  // The artifact's table to measure; empty: its only table (an artifact of
  // several tables needs a name: the error lists them).
  std::string table;
};

struct BenchResult {
  std::string kernel, isa;
  int threads = 1;
  size_t batch = 0;
  bool cold = false;
  double rows_per_s = 0, bytes_per_s = 0;  // bytes written per second
  double baseline_rows_per_s = 0, baseline_bytes_per_s = 0;
  size_t row_bytes_read = 0, row_bytes_written = 0, baseline_row_bytes = 0;
  double ratio = 0;  // rows_per_s / baseline_rows_per_s
  size_t pooling = 0;  // ids per bag; 0 for plain lookups
  std::string table;   // the table measured
  nlohmann::json to_json() const;
};

// The table BenchOptions.table names, or the only one.
Result<const EmbeddingTable*> bench_table(const EmbeddingRuntime& runtime, const std::string& name);

// The runtime's thread count is used for both the kernel and the baseline.
Result<BenchResult> run_bench(const EmbeddingRuntime& runtime, const BenchOptions& options);

// run_bench over a range of batch sizes, hot and cold: what `qemb bench
// --report` plots. Every point is its own same-run pair (kernel, memcpy).
struct BenchSweep {
  std::string artifact;  // a name for the page, e.g. the artifact's path
  std::string kernel, isa;
  int threads = 1;
  bool dequantize = false;
  FloatDtype out_dtype = FloatDtype::kF32;
  int64_t vocab = 0, dim = 0;
  size_t row_bytes_read = 0;  // stored bytes a row, what the memcpy gather copies
  std::vector<BenchResult> hot, cold;  // one per batch size, in increasing order
  nlohmann::json to_json() const;
};

// Powers of 4 from 1 to 16384.
std::vector<size_t> default_sweep_batches();

// `options.batch` and `options.cold` are set per point; pooled lookups are
// not swept (options.pooling must be 0).
Result<BenchSweep> run_bench_sweep(const EmbeddingRuntime& runtime, const BenchOptions& options,
                                   const std::vector<size_t>& batches, const std::string& artifact_name);

// One self-contained HTML page (inline SVG, nothing fetched): rows/s against
// batch size on log axes for the kernel and its memcpy roofline, hot and
// cold, and the numbers as a table.
std::string render_bench_report(const BenchSweep& sweep);
// Written as every output file is: atomically, and '-' is standard output.
Status write_bench_report(const BenchSweep& sweep, const std::string& path);

}  // namespace qemb
