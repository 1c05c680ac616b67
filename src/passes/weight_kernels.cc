#include "passes/weight_kernels.h"

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

}  // namespace

const WeightKernels* weight_kernels(const StorageFormat* format) {
  static const WeightKernels kTable[] = {
      {find_storage_format(DataType::kSFixedPoint8, 4), quantize_s4, quantize_s4_bf16, quantize_own_s4_bf16,
       &KernelSet::requant_gather_s4_u16},
      {find_storage_format(DataType::kSFixedPoint8, 8), quantize_s8, quantize_s8_bf16, quantize_own_s8_bf16,
       &KernelSet::requant_gather_s8_u16},
  };
  if (format == nullptr) return nullptr;
  for (const WeightKernels& k : kTable)
    if (k.format == format) return &k;
  return nullptr;
}

}  // namespace qemb
