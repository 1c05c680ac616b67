// Vector decoders for half-precision checkpoints: BF16 and F16 to float32,
// bit-exactly as qemb/half.h (NaN stays NaN, payload aside). Checkpoint
// readers decode a row at a time while the row is in cache. One set per
// Highway target, chosen at run time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace qemb {

// Widens `count` little-endian BF16 or F16 values (2 bytes each, any
// alignment) to float32.
using DecodeHalfFn = void (*)(const uint8_t* src, size_t count, float* out);

struct HalfKernelSet {
  const char* isa = "";    // hwy::TargetName, or "REFERENCE"
  int64_t hwy_target = 0;  // 0 for the reference
  DecodeHalfFn decode_bf16 = nullptr;
  DecodeHalfFn decode_f16 = nullptr;
};

// The best set this CPU supports, chosen on first use.
const HalfKernelSet& best_half_kernels();
// One set per instruction set this machine supports and this build compiled,
// best first (tests).
std::vector<HalfKernelSet> all_half_kernel_sets();
// Plain loops over qemb/half.h.
const HalfKernelSet& reference_half_kernels();

}  // namespace qemb
