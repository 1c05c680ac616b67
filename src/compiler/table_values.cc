#include "compiler/table_values.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "compiler/row_source.h"

namespace qemb {

Error non_finite_error(float v, int64_t row, int64_t col) {
  return make_error(ErrorCode::kInvalidArgument,
                    std::string("the table holds a non-finite value (") + (std::isnan(v) ? "NaN" : "Inf") +
                        ") at row " + std::to_string(row) + ", column " + std::to_string(col) +
                        "; fix the checkpoint before quantizing");
}

Status empty_table_error(int64_t rows, int64_t dim) {
  return make_error(ErrorCode::kInvalidArgument,
                    "the embedding table is empty (" + std::to_string(rows) + " x " + std::to_string(dim) +
                        "); it needs at least one row and one column");
}

// The activation encoding observed on the calibration rows only.
Result<ActivationEncoding> calibration_encoding_of(const RowSource& src, const std::vector<int64_t>& tokens,
                                                  int bits) {
  if (tokens.empty()) return make_error(ErrorCode::kInvalidArgument, "the calibration token list is empty");
  std::vector<float> row(static_cast<size_t>(src.dim()));
  float lo = 0.0f, hi = 0.0f;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= src.rows())
      return make_error(ErrorCode::kOutOfRange,
                        "calibration token " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
                            " is outside the table's rows [0, " + std::to_string(src.rows()) + ")");
    QEMB_RETURN_IF_ERROR(src.read(tokens[i], tokens[i] + 1, row.data()));
    float rlo, rhi;
    min_max(row.data(), row.size(), rlo, rhi);
    lo = std::min(lo, rlo);
    hi = std::max(hi, rhi);
  }
  return checked_activation_encoding(lo, hi, bits);
}

Status check_table(const float* table, int64_t rows, int64_t dim) {
  if (rows <= 0 || dim <= 0) return empty_table_error(rows, dim);
  for (int64_t k = 0; k < rows * dim; ++k)
    if (!std::isfinite(table[k])) return non_finite_error(table[k], k / dim, k % dim);
  return Status::Ok();
}

Result<ActivationEncoding> observe_activation(const float* table, int64_t rows, int64_t dim,
                                              const std::optional<std::vector<int64_t>>& tokens, int bits) {
  if (tokens) return calibration_encoding_of(ArrayRows(table, rows, dim), *tokens, bits);
  float lo, hi;
  min_max(table, static_cast<size_t>(rows * dim), lo, hi);
  return checked_activation_encoding(lo, hi, bits);
}

}  // namespace qemb
