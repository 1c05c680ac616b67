// Which kernels quantize into and requantize out of each weight format: one
// table keyed on the storage format, so code that picks a kernel asks it
// instead of testing bit widths.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/ir.h"
#include "kernels/kernels.h"
#include "kernels/quantize_kernels.h"

namespace qemb {

struct WeightKernels {
  const StorageFormat* format;
  // Quantizes `dim` floats with `scale` into one row of the format's storage layout.
  void (*quantize_row)(const QuantizeKernelSet& set, const float* row, size_t dim, float scale, uint8_t* out);
  // The same from a row of little-endian BF16 (2 * dim bytes).
  void (*quantize_row_bf16)(const QuantizeKernelSet& set, const uint8_t* row, size_t dim, float scale, uint8_t* out);
  // The same for a finite row whose scale is row_scale_from_amax of its own
  // amax (the *_own_scale kernels: no clamp).
  void (*quantize_own_row_bf16)(const QuantizeKernelSet& set, const uint8_t* row, size_t dim, float scale,
                                uint8_t* out);
};

// The entry for `format`, or nullptr when no kernel stores it (formats that
// are not per-row weights).
const WeightKernels* weight_kernels(const StorageFormat* format);

}  // namespace qemb
