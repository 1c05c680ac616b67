#include "core/reference_ops.h"

#include <cstring>

#include "qemb/numeric.h"

namespace qemb {

void quantized_range(DataType dtype, int bitwidth, int32_t& lo, int32_t& hi) {
  const StorageFormat* f = find_storage_format(dtype, bitwidth);
  lo = f ? f->qmin : INT32_MIN;
  hi = f ? f->qmax : INT32_MAX;
}

// The sum is taken in 64 bits: an artifact may carry any int32 offset, and
// q + offset must not overflow (for the offsets compile writes it is exact in
// either width, so the value is the same).
float dequantize_value(int32_t q, const Encoding& e, int64_t row) {
  const int64_t offset = e.is_per_axis() ? e.offsets[static_cast<size_t>(row)] : e.offset;
  const float scale = e.is_per_axis() ? e.scales[static_cast<size_t>(row)] : e.scale;
  return scale * static_cast<float>(static_cast<int64_t>(q) + offset);
}

int32_t quantize_value(float x, const Encoding& e, int64_t row, int32_t lo, int32_t hi) {
  float scale = e.is_per_axis() ? e.scales[static_cast<size_t>(row)] : e.scale;
  int32_t offset = e.is_per_axis() ? e.offsets[static_cast<size_t>(row)] : e.offset;
  int32_t r = clamp_to_int(rne(x * inv(scale)), -(1 << 30), 1 << 30);
  int64_t v = static_cast<int64_t>(r) - offset;
  return static_cast<int32_t>(v < lo ? lo : (v > hi ? hi : v));
}

int32_t load_quantized(const uint8_t* row, DataType dtype, int bitwidth, int64_t col) {
  const StorageFormat* f = find_storage_format(dtype, bitwidth);
  return f ? f->load(row, col) : 0;
}

void store_quantized(uint8_t* row, DataType dtype, int bitwidth, int64_t col, int32_t q) {
  if (const StorageFormat* f = find_storage_format(dtype, bitwidth)) f->store(row, col, q);
}

void requantize_row(const uint8_t* in, const Tensor& in_t, int64_t in_row, uint8_t* out,
                    const Tensor& out_t, int64_t out_row, int64_t dim) {
  const int in_bw = in_t.bitwidth(), out_bw = out_t.bitwidth();
  if (in_t.dtype == out_t.dtype && in_bw == out_bw && in_t.encoding == out_t.encoding &&
      !in_t.encoding.is_per_axis()) {
    std::memcpy(out, in, row_storage_bytes(in_t.dtype, in_bw, dim));
    return;
  }
  int32_t lo, hi;
  quantized_range(out_t.dtype, out_bw, lo, hi);
  for (int64_t j = 0; j < dim; ++j) {
    float x;
    if (in_t.dtype == DataType::kFloat32) {
      std::memcpy(&x, in + 4 * j, 4);
    } else {
      x = dequantize_value(load_quantized(in, in_t.dtype, in_bw, j), in_t.encoding, in_row);
    }
    if (out_t.dtype == DataType::kFloat32) {
      std::memcpy(out + 4 * j, &x, 4);
    } else {
      store_quantized(out, out_t.dtype, out_bw, j, quantize_value(x, out_t.encoding, out_row, lo, hi));
    }
  }
}

}  // namespace qemb
