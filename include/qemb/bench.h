// `qemb bench`: the artifact's own runtime kernel on random ids (plain or
// pooled lookups), measured in the same run as a memcpy gather of the same
// stored row bytes (the roofline).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "qemb/runtime.h"

namespace qemb {

struct BenchOptions {
  size_t batch = 2048;
  bool cold = false;        // fresh random ids over the whole table every batch
  bool dequantize = false;  // float32 output
  double min_seconds = 0.5;  // per measurement
  uint64_t seed = 42;
  size_t hot_set = 1024;  // distinct ids a hot run cycles through
  // > 0: pooled lookups (embedding_bags, sum) of `batch` bags of this many ids
  // each; rates then count ids pooled, and the output is float32.
  size_t pooling = 0;
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
  nlohmann::json to_json() const;
};

// The runtime's thread count is used for both the kernel and the baseline.
Result<BenchResult> run_bench(const EmbeddingRuntime& runtime, const BenchOptions& options);

}  // namespace qemb
