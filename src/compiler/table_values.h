// What the compiler checks and measures in a float table's values before it
// quantizes them: emptiness, finiteness and the activation range.
#pragma once

#include <cstdint>
#include <vector>

#include "qemb/compiler.h"

namespace qemb {

// The error for a NaN or Inf at (row, col).
Error non_finite_error(float v, int64_t row, int64_t col);

// The error for a table with no rows or no columns.
Status empty_table_error(int64_t rows, int64_t dim);

// The activation encoding observed on the calibration rows only (the error
// names a token outside the table's rows), of `bits`-bit activations.
Result<ActivationEncoding> calibration_encoding_of(const RowSource& src, const std::vector<int64_t>& tokens,
                                                  int bits = 16);

}  // namespace qemb
