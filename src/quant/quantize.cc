#include "qemb/quantize.h"

#include <algorithm>

namespace qemb {

const char* to_string(Scheme s) {
  switch (s) {
    case Scheme::k16a8w: return "16a8w";
    case Scheme::k16a4w: return "16a4w";
  }
  return "?";
}

Result<Scheme> parse_scheme(const std::string& s) {
  if (s == "16a8w") return Scheme::k16a8w;
  if (s == "16a4w") return Scheme::k16a4w;
  return make_error(ErrorCode::kInvalidArgument,
                    "unknown scheme '" + s + "': expected 16a4w or 16a8w");
}

int weight_bits(Scheme s) { return s == Scheme::k16a8w ? 8 : 4; }
int weight_qmax(Scheme s) { return s == Scheme::k16a8w ? 127 : 7; }

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
