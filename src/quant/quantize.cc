#include "qemb/quantize.h"

#include <algorithm>
#include <cstdio>
#include <limits>

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

float weight_row_scale(const float* row, int64_t dim, int qmax) {
  float amax = 0.0f;
  for (int64_t j = 0; j < dim; ++j) amax = std::max(amax, std::fabs(row[j]));
  return std::max(amax / static_cast<float>(qmax), kEps);
}

ActivationEncoding activation_encoding(float observed_min, float observed_max) {
  float lo = std::min(0.0f, observed_min);
  float hi = std::max(0.0f, observed_max);
  ActivationEncoding a;
  a.scale = std::max((hi - lo) / 65535.0f, kEps);
  int32_t zp = -clamp_to_int(rne(lo / a.scale), -(1 << 30), 1 << 30);
  a.zero_point = std::clamp(zp, 0, 65535);
  return a;
}

Result<ActivationEncoding> checked_activation_encoding(float observed_min, float observed_max) {
  const float lo = std::min(0.0f, observed_min), hi = std::max(0.0f, observed_max);
  const ActivationEncoding a = activation_encoding(lo, hi);
  // Dequantized outputs reach s_a * 65535: that must stay finite too.
  if (!std::isfinite(hi - lo) || !std::isfinite(a.scale * 65535.0f)) {
    char text[400];
    std::snprintf(text, sizeof(text),
                  "the table's values span [%g, %g], wider than float32 can hold (hi - lo overflows past %g), so "
                  "no uint16 activation scale exists; rescale the table or check it for corrupt values",
                  static_cast<double>(lo), static_cast<double>(hi),
                  static_cast<double>(std::numeric_limits<float>::max()));
    return make_error(ErrorCode::kInvalidArgument, text);
  }
  return a;
}

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
