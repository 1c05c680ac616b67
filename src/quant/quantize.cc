#include "qemb/quantize.h"

#include <algorithm>

namespace qemb {

float PcqTable::max_scale() const {
  float m = 0.0f;
  for (float s : scales) m = std::max(m, s);
  return m;
}

void quantize_rows(const float* table, int64_t row_begin, int64_t row_end, PcqTable& out) {
  const int qmax = weight_qmax(out.scheme);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* w = table + r * out.dim;
    const float s = weight_row_scale(w, out.dim, qmax);
    out.scales[r] = s;
    int8_t* q = out.q.data() + r * out.dim;
    for (int64_t j = 0; j < out.dim; ++j) q[j] = quantize_weight(w[j], s, qmax);
  }
}

PcqTable quantize_table(const float* table, int64_t rows, int64_t dim, Scheme scheme) {
  PcqTable t;
  t.rows = rows;
  t.dim = dim;
  t.scheme = scheme;
  t.scales.resize(static_cast<size_t>(rows));
  t.q.resize(static_cast<size_t>(rows * dim));
  quantize_rows(table, 0, rows, t);
  return t;
}

void min_max(const float* values, size_t count, float& lo, float& hi) {
  lo = count ? values[0] : 0.0f;
  hi = lo;
  for (size_t i = 0; i < count; ++i) {
    lo = std::min(lo, values[i]);
    hi = std::max(hi, values[i]);
  }
}

}  // namespace qemb
