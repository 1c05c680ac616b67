#include "passes/weight_kernels.h"

#include <algorithm>

#include "qemb/half.h"
#include "qemb/numeric.h"

namespace qemb {

namespace {

void quantize_s4(const QuantizeKernelSet& set, const float* row, size_t dim, float scale, uint8_t* out) {
  set.quantize_row_s4(row, dim, scale, out);
}

void quantize_s8(const QuantizeKernelSet& set, const float* row, size_t dim, float scale, uint8_t* out) {
  set.quantize_row_s8(row, dim, scale, reinterpret_cast<int8_t*>(out));
}

void quantize_s4_bf16(const QuantizeKernelSet& set, const uint8_t* row, size_t dim, float scale, uint8_t* out) {
  set.quantize_row_s4_bf16(row, dim, scale, out);
}

void quantize_s8_bf16(const QuantizeKernelSet& set, const uint8_t* row, size_t dim, float scale, uint8_t* out) {
  set.quantize_row_s8_bf16(row, dim, scale, reinterpret_cast<int8_t*>(out));
}

void quantize_own_s4_bf16(const QuantizeKernelSet& set, const uint8_t* row, size_t dim, float scale, uint8_t* out) {
  set.quantize_row_s4_bf16_own_scale(row, dim, scale, out);
}

void quantize_own_s8_bf16(const QuantizeKernelSet& set, const uint8_t* row, size_t dim, float scale, uint8_t* out) {
  set.quantize_row_s8_bf16_own_scale(row, dim, scale, reinterpret_cast<int8_t*>(out));
}

// 2-bit rows, by the contract's scalar formula (quantize_weight at qmax 1)
// and packed four to a byte: no vector quantizer is written for them yet.
template <typename Load>
void quantize_s2_with(size_t dim, float scale, uint8_t* out, Load load) {
  std::fill(out, out + (dim + 3) / 4, uint8_t{0});
  for (size_t j = 0; j < dim; ++j) pack_int2(out, static_cast<int64_t>(j), quantize_weight(load(j), scale, 1));
}

void quantize_s2(const QuantizeKernelSet&, const float* row, size_t dim, float scale, uint8_t* out) {
  quantize_s2_with(dim, scale, out, [&](size_t j) { return row[j]; });
}

void quantize_s2_bf16(const QuantizeKernelSet&, const uint8_t* row, size_t dim, float scale, uint8_t* out) {
  quantize_s2_with(dim, scale, out, [&](size_t j) {
    return bf16_to_float(static_cast<uint16_t>(row[2 * j] | (row[2 * j + 1] << 8)));
  });
}

}  // namespace

const WeightKernels* weight_kernels(const StorageFormat* format) {
  static const WeightKernels kTable[] = {
      {find_storage_format(DataType::kSFixedPoint8, 2), quantize_s2, quantize_s2_bf16, quantize_s2_bf16},
      {find_storage_format(DataType::kSFixedPoint8, 4), quantize_s4, quantize_s4_bf16, quantize_own_s4_bf16},
      {find_storage_format(DataType::kSFixedPoint8, 8), quantize_s8, quantize_s8_bf16, quantize_own_s8_bf16},
  };
  if (format == nullptr) return nullptr;
  for (const WeightKernels& k : kTable)
    if (k.format == format) return &k;
  return nullptr;
}

}  // namespace qemb
