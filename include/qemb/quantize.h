// The quantization layer: weight schemes and whole-table quantization, built
// on the numeric contract of qemb/numeric.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qemb/numeric.h"
#include "qemb/scheme.h"
#include "qemb/status.h"

namespace qemb {

// A per-row quantized table, values unpacked (one int8 per value).
struct PcqTable {
  int64_t rows = 0;
  int64_t dim = 0;
  Scheme scheme = Scheme::k16a4w;
  std::vector<float> scales;  // one per row
  std::vector<int8_t> q;      // rows * dim
  float max_scale() const;
};

// Quantizes rows [row_begin, row_end) of a row-major float table into `out`
// (whose scales/q are already sized for the whole table). Lets callers stream
// and parallelise; quantize_table does it all at once.
void quantize_rows(const float* table, int64_t row_begin, int64_t row_end, PcqTable& out);
PcqTable quantize_table(const float* table, int64_t rows, int64_t dim, Scheme scheme);

// Min and max over `count` floats (NaN-free input assumed).
void min_max(const float* values, size_t count, float& lo, float& hi);

}  // namespace qemb
