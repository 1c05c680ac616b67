// Reference semantics of every op (docs/numeric-contract.md, "Op semantics"): dequantize each input with its
// encoding, compute in float32, quantize into the output's encoding. Both the
// fold pass and the scalar reference runtime use these, so "folded" and
// "executed" cannot drift apart.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ir.h"

namespace qemb {

// Integer range of a quantized dtype: SFIXED_POINT_8 is symmetric
// [-(2^(b-1)-1), 2^(b-1)-1]; UFIXED_POINT_16 is [0, 65535].
void quantized_range(DataType dtype, int bitwidth, int32_t& lo, int32_t& hi);

// real = scale * (q + offset), with the scale/offset of slice `row` for a
// per-axis (axis 0) encoding.
float dequantize_value(int32_t q, const Encoding& e, int64_t row);
// q = clamp(rne(x * inv(scale)) - offset, lo, hi).
int32_t quantize_value(float x, const Encoding& e, int64_t row, int32_t lo, int32_t hi);

// Reads/writes element `col` of a row in storage layout as an integer.
int32_t load_quantized(const uint8_t* row, DataType dtype, int bitwidth, int64_t col);
void store_quantized(uint8_t* row, DataType dtype, int bitwidth, int64_t col, int32_t q);

// Requantizes one row of `dim` values from (in_dtype, in_enc, source row
// in_row) into (out_dtype, out_enc, destination row out_row). Copies bytes
// when the two sides are the same type and encoding.
void requantize_row(const uint8_t* in, const Tensor& in_t, int64_t in_row, uint8_t* out,
                    const Tensor& out_t, int64_t out_row, int64_t dim);

}  // namespace qemb
