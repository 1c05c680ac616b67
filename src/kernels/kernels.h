// Lookup microkernels: gathers over a materialized uint16 table, fused
// requantizing gathers over a per-row-quantized (PCQ) table, and pooled
// (EmbeddingBag) reductions over either, each bit-identical to the scalar
// formulas of qemb/numeric.h and docs/numeric-contract.md.
//
// Every kernel processes `n` already-validated row ids (0 <= id < V; checking
// them is the caller's job) and writes `n` rows of `dim` values into a caller
// buffer, row after row. Kernels never allocate and never fail; n == 0 or
// dim == 0 is a no-op.
//
// One KernelSet exists per instruction set (Highway target) this build
// compiled and this CPU supports. best_kernels() picks the best one once, so
// the hot path is a plain function-pointer call with no dispatch decision.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "qemb/numeric.h"

namespace qemb {

// Materialized gather: out[i][:] = table[ids[i]][:] (the folded optimized table).
using GatherU16Fn = void (*)(const uint16_t* table, size_t dim, const int64_t* ids,
                             size_t n, uint16_t* out);
// Materialized gather, dequantized: out[i][j] = dequantize_activation(table[ids[i]][j], act).
using GatherU16F32Fn = void (*)(const uint16_t* table, size_t dim,
                                const ActivationEncoding& act, const int64_t* ids,
                                size_t n, float* out);
// Materialized gather into half precision: the bits of float_to_f16() /
// float_to_bf16() (qemb/half.h) of the dequantized value above.
using GatherU16HalfFn = void (*)(const uint16_t* table, size_t dim,
                                 const ActivationEncoding& act, const int64_t* ids,
                                 size_t n, uint16_t* out);

// The constant inputs of a fused (requantizing) gather.
struct RequantGatherParams {
  // Row-major PCQ weights in storage layout (core/ir.h): int8, `dim` bytes a row
  // (s8 kernels), or packed two's-complement nibbles, ceil(dim/2) bytes a row,
  // column 2k in the low nibble and 2k+1 in the high one (s4 kernels), or
  // 2-bit fields, ceil(dim/4) bytes a row, column 4k+i in bits 2i, 2i+1 (s2).
  // For the materialized uint8 / float tables, the table itself.
  const uint8_t* weights = nullptr;
  const float* row_scales = nullptr;  // s_r, one per row
  size_t dim = 0;
  // Row-interleaved layouts (each row stored next to its scale, so that a
  // cold lookup reads one contiguous run): the bytes from one row's weights
  // to the next, and from one row's scale to the next. 0 means the plain
  // layout (rows back to back, scales an array of floats). The gathers and
  // the pooled kernels and the reference read both.
  size_t row_stride = 0;
  size_t scale_stride = 0;
  ActivationEncoding act;  // output encoding; zero_point must lie in [0, act.qmax()]
  float max_scale = 0.0f;  // s_max = max_r s_r; read by the legacy kernels only
  // The table's row count, or 0 if unknown: how a kernel reads the rows may
  // depend on it (BagParams::row_reads), never what it computes.
  size_t rows = 0;
};

// Optimized pattern: out[i][j] = optimized_output(s_r, q[r][j], act), r = ids[i].
// Legacy pattern:    out[i][j] = legacy_output(s_r, q[r][j], max_scale, qmax, act)
//                    with qmax the weight format's (1 for s2, 7 for s4, 127 for s8).
// Weight-only:       out[i][j] = dequantize_weight(s_r, q[r][j]) (act unused).
// The f32 variants write dequantize_activation() of that uint16 value; the
// f16 / bf16 ones its float_to_f16() / float_to_bf16() bits (qemb/half.h).
using RequantGatherU16Fn = void (*)(const RequantGatherParams& params, const int64_t* ids,
                                    size_t n, uint16_t* out);
using RequantGatherHalfFn = RequantGatherU16Fn;
using RequantGatherF32Fn = void (*)(const RequantGatherParams& params, const int64_t* ids,
                                    size_t n, float* out);

// Pooled (EmbeddingBag) kernels: bags [0, bags) of one table, reduced as
// docs/numeric-contract.md says (float32, index order, from +0.0f, the weighted
// product rounded before the sum). Bag b covers ids[offsets[b] : offsets[b+1]]
// (absolute positions into ids and weights); everything is validated by the
// caller. Bag b's dim floats go to out + b * out_stride. Rows are read packed
// and accumulated in place; no row is materialized.
struct BagParams {
  const int64_t* offsets = nullptr;  // bags + 1, non-decreasing
  size_t bags = 0;
  const float* weights = nullptr;    // one per id (sum only), or nullptr
  int64_t padding_idx = -1;          // in [0, V), or -1 for none
  bool mean = false;
  size_t out_stride = 0;             // floats between bags' rows, >= dim
  // Ids before this position (absolute, as offsets are) may be read to
  // prefetch rows past the last bag, so a call split into tasks keeps its
  // lookahead across their ends; 0 stops at offsets[bags].
  size_t lookahead_end = 0;
  // How the pooled kernels read a PCQ table's rows: straight from the table
  // with prefetches ahead (kDirect), or a block of ids' rows copied at a time
  // into a buffer that stays in L1 and pooled from there (kStaged), so that
  // the copies' misses overlap as a memcpy gather's do instead of waiting
  // behind each row's arithmetic. kAuto stages where that is faster: rows of
  // several cache lines from tables far larger than the caches
  // (RequantGatherParams::rows). Kernels without a staged form read directly.
  // The results are the same bits either way.
  enum class RowReads { kAuto, kDirect, kStaged };
  RowReads row_reads = RowReads::kAuto;
};

// `table` describes the stored rows: for the bag_u16 kernels `weights` points
// at the materialized uint16 table (2 * dim bytes a row) and only dim and act
// are read; for the others it is the PCQ table, as for the fused gathers.
using BagI64Fn = void (*)(const RequantGatherParams& table, const int64_t* ids,
                          const BagParams& bag, float* out);
using BagI32Fn = void (*)(const RequantGatherParams& table, const int32_t* ids,
                          const BagParams& bag, float* out);

// Which plan a kernel serves (the fused gathers' pattern, the weight-only
// dequantizing gather, or a materialized table), and what one call of it
// writes: the activation itself (uint16 / uint8), or the dequantized value
// y as float32 / binary16 / bfloat16, or pooled bags.
enum class KernelFamily { kMaterialized, kOptimized, kLegacy, kWeightOnly };
enum class KernelForm { kU16, kF32, kF16, kBF16, kBagI32, kBagI64, kU8 };

// A gather of activations into uint8 (the 8-bit activation schemes).
using RequantGatherU8Fn = void (*)(const RequantGatherParams& params, const int64_t* ids, size_t n,
                                   uint8_t* out);

// The one list of kernels: KernelSet's fields, GatherKernel's enumerators,
// kernel names, the reference set, the generic tester, the benchmarks and the
// runtime's choice of kernel (find_kernel, kernel_fn) are all generated from it.
//   X(field / name stem, function type, family,
//     weight bits (the table's: 16 the uint16 table, 8 a uint8 table or int8
//     rows, 32 the float table, 4 / 2 packed rows),
//     activation bits (16 | 8, 0: float outputs), form,
//     impl: tuned (gather_kernels.cc) | generic (scheme_kernels.cc))
// Materialized tables and the scheme kernels read their table through
// RequantGatherParams (weights: the table; act: its encoding), except the
// uint16 gathers, which keep their own signatures.
#define QEMB_GATHER_KERNELS(X)                                                               \
  X(gather_u16,                GatherU16Fn,         kMaterialized, 16, 16, kU16,   tuned)    \
  X(gather_u16_f32,            GatherU16F32Fn,      kMaterialized, 16, 16, kF32,   tuned)    \
  X(gather_u16_f16,            GatherU16HalfFn,     kMaterialized, 16, 16, kF16,   tuned)    \
  X(gather_u16_bf16,           GatherU16HalfFn,     kMaterialized, 16, 16, kBF16,  tuned)    \
  X(requant_gather_s4_u16,     RequantGatherU16Fn,  kOptimized,    4,  16, kU16,   tuned)    \
  X(requant_gather_s4_f32,     RequantGatherF32Fn,  kOptimized,    4,  16, kF32,   tuned)    \
  X(requant_gather_s4_f16,     RequantGatherHalfFn, kOptimized,    4,  16, kF16,   tuned)    \
  X(requant_gather_s4_bf16,    RequantGatherHalfFn, kOptimized,    4,  16, kBF16,  tuned)    \
  X(requant_gather_s8_u16,     RequantGatherU16Fn,  kOptimized,    8,  16, kU16,   tuned)    \
  X(requant_gather_s8_f32,     RequantGatherF32Fn,  kOptimized,    8,  16, kF32,   tuned)    \
  X(requant_gather_s8_f16,     RequantGatherHalfFn, kOptimized,    8,  16, kF16,   tuned)    \
  X(requant_gather_s8_bf16,    RequantGatherHalfFn, kOptimized,    8,  16, kBF16,  tuned)    \
  X(legacy_gather_s4_u16,      RequantGatherU16Fn,  kLegacy,       4,  16, kU16,   tuned)    \
  X(legacy_gather_s4_f32,      RequantGatherF32Fn,  kLegacy,       4,  16, kF32,   tuned)    \
  X(legacy_gather_s4_f16,      RequantGatherHalfFn, kLegacy,       4,  16, kF16,   tuned)    \
  X(legacy_gather_s4_bf16,     RequantGatherHalfFn, kLegacy,       4,  16, kBF16,  tuned)    \
  X(legacy_gather_s8_u16,      RequantGatherU16Fn,  kLegacy,       8,  16, kU16,   tuned)    \
  X(legacy_gather_s8_f32,      RequantGatherF32Fn,  kLegacy,       8,  16, kF32,   tuned)    \
  X(legacy_gather_s8_f16,      RequantGatherHalfFn, kLegacy,       8,  16, kF16,   tuned)    \
  X(legacy_gather_s8_bf16,     RequantGatherHalfFn, kLegacy,       8,  16, kBF16,  tuned)    \
  X(bag_u16_i32,               BagI32Fn,            kMaterialized, 16, 16, kBagI32, tuned)   \
  X(bag_u16_i64,               BagI64Fn,            kMaterialized, 16, 16, kBagI64, tuned)   \
  X(requant_bag_s4_i32,        BagI32Fn,            kOptimized,    4,  16, kBagI32, tuned)   \
  X(requant_bag_s4_i64,        BagI64Fn,            kOptimized,    4,  16, kBagI64, tuned)   \
  X(requant_bag_s8_i32,        BagI32Fn,            kOptimized,    8,  16, kBagI32, tuned)   \
  X(requant_bag_s8_i64,        BagI64Fn,            kOptimized,    8,  16, kBagI64, tuned)   \
  X(legacy_bag_s4_i32,         BagI32Fn,            kLegacy,       4,  16, kBagI32, tuned)   \
  X(legacy_bag_s4_i64,         BagI64Fn,            kLegacy,       4,  16, kBagI64, tuned)   \
  X(legacy_bag_s8_i32,         BagI32Fn,            kLegacy,       8,  16, kBagI32, tuned)   \
  X(legacy_bag_s8_i64,         BagI64Fn,            kLegacy,       8,  16, kBagI64, tuned)   \
  /* 2-bit weights, uint16 activations */                                                    \
  X(requant_gather_s2_u16,     RequantGatherU16Fn,  kOptimized,    2,  16, kU16,   generic)  \
  X(requant_gather_s2_f32,     RequantGatherF32Fn,  kOptimized,    2,  16, kF32,   generic)  \
  X(requant_gather_s2_f16,     RequantGatherHalfFn, kOptimized,    2,  16, kF16,   generic)  \
  X(requant_gather_s2_bf16,    RequantGatherHalfFn, kOptimized,    2,  16, kBF16,  generic)  \
  X(legacy_gather_s2_u16,      RequantGatherU16Fn,  kLegacy,       2,  16, kU16,   generic)  \
  X(legacy_gather_s2_f32,      RequantGatherF32Fn,  kLegacy,       2,  16, kF32,   generic)  \
  X(legacy_gather_s2_f16,      RequantGatherHalfFn, kLegacy,       2,  16, kF16,   generic)  \
  X(legacy_gather_s2_bf16,     RequantGatherHalfFn, kLegacy,       2,  16, kBF16,  generic)  \
  X(requant_bag_s2_i32,        BagI32Fn,            kOptimized,    2,  16, kBagI32, generic) \
  X(requant_bag_s2_i64,        BagI64Fn,            kOptimized,    2,  16, kBagI64, generic) \
  X(legacy_bag_s2_i32,         BagI32Fn,            kLegacy,       2,  16, kBagI32, generic) \
  X(legacy_bag_s2_i64,         BagI64Fn,            kLegacy,       2,  16, kBagI64, generic) \
  /* uint8 activations: the materialized uint8 table, and fused over 8/4/2-bit rows */      \
  X(gather_u8,                 RequantGatherU8Fn,   kMaterialized, 8,  8,  kU8,    generic)  \
  X(gather_u8_f32,             RequantGatherF32Fn,  kMaterialized, 8,  8,  kF32,   generic)  \
  X(gather_u8_f16,             RequantGatherHalfFn, kMaterialized, 8,  8,  kF16,   generic)  \
  X(gather_u8_bf16,            RequantGatherHalfFn, kMaterialized, 8,  8,  kBF16,  generic)  \
  X(bag_u8_i32,                BagI32Fn,            kMaterialized, 8,  8,  kBagI32, generic) \
  X(bag_u8_i64,                BagI64Fn,            kMaterialized, 8,  8,  kBagI64, generic) \
  X(requant_gather_s8_u8,      RequantGatherU8Fn,   kOptimized,    8,  8,  kU8,    generic)  \
  X(requant_gather_s8_u8_f32,  RequantGatherF32Fn,  kOptimized,    8,  8,  kF32,   generic)  \
  X(requant_gather_s8_u8_f16,  RequantGatherHalfFn, kOptimized,    8,  8,  kF16,   generic)  \
  X(requant_gather_s8_u8_bf16, RequantGatherHalfFn, kOptimized,    8,  8,  kBF16,  generic)  \
  X(requant_gather_s4_u8,      RequantGatherU8Fn,   kOptimized,    4,  8,  kU8,    generic)  \
  X(requant_gather_s4_u8_f32,  RequantGatherF32Fn,  kOptimized,    4,  8,  kF32,   generic)  \
  X(requant_gather_s4_u8_f16,  RequantGatherHalfFn, kOptimized,    4,  8,  kF16,   generic)  \
  X(requant_gather_s4_u8_bf16, RequantGatherHalfFn, kOptimized,    4,  8,  kBF16,  generic)  \
  X(requant_gather_s2_u8,      RequantGatherU8Fn,   kOptimized,    2,  8,  kU8,    generic)  \
  X(requant_gather_s2_u8_f32,  RequantGatherF32Fn,  kOptimized,    2,  8,  kF32,   generic)  \
  X(requant_gather_s2_u8_f16,  RequantGatherHalfFn, kOptimized,    2,  8,  kF16,   generic)  \
  X(requant_gather_s2_u8_bf16, RequantGatherHalfFn, kOptimized,    2,  8,  kBF16,  generic)  \
  X(legacy_gather_s8_u8,       RequantGatherU8Fn,   kLegacy,       8,  8,  kU8,    generic)  \
  X(legacy_gather_s8_u8_f32,   RequantGatherF32Fn,  kLegacy,       8,  8,  kF32,   generic)  \
  X(legacy_gather_s8_u8_f16,   RequantGatherHalfFn, kLegacy,       8,  8,  kF16,   generic)  \
  X(legacy_gather_s8_u8_bf16,  RequantGatherHalfFn, kLegacy,       8,  8,  kBF16,  generic)  \
  X(legacy_gather_s4_u8,       RequantGatherU8Fn,   kLegacy,       4,  8,  kU8,    generic)  \
  X(legacy_gather_s4_u8_f32,   RequantGatherF32Fn,  kLegacy,       4,  8,  kF32,   generic)  \
  X(legacy_gather_s4_u8_f16,   RequantGatherHalfFn, kLegacy,       4,  8,  kF16,   generic)  \
  X(legacy_gather_s4_u8_bf16,  RequantGatherHalfFn, kLegacy,       4,  8,  kBF16,  generic)  \
  X(legacy_gather_s2_u8,       RequantGatherU8Fn,   kLegacy,       2,  8,  kU8,    generic)  \
  X(legacy_gather_s2_u8_f32,   RequantGatherF32Fn,  kLegacy,       2,  8,  kF32,   generic)  \
  X(legacy_gather_s2_u8_f16,   RequantGatherHalfFn, kLegacy,       2,  8,  kF16,   generic)  \
  X(legacy_gather_s2_u8_bf16,  RequantGatherHalfFn, kLegacy,       2,  8,  kBF16,  generic)  \
  X(requant_bag_s8_u8_i32,     BagI32Fn,            kOptimized,    8,  8,  kBagI32, generic) \
  X(requant_bag_s8_u8_i64,     BagI64Fn,            kOptimized,    8,  8,  kBagI64, generic) \
  X(requant_bag_s4_u8_i32,     BagI32Fn,            kOptimized,    4,  8,  kBagI32, generic) \
  X(requant_bag_s4_u8_i64,     BagI64Fn,            kOptimized,    4,  8,  kBagI64, generic) \
  X(requant_bag_s2_u8_i32,     BagI32Fn,            kOptimized,    2,  8,  kBagI32, generic) \
  X(requant_bag_s2_u8_i64,     BagI64Fn,            kOptimized,    2,  8,  kBagI64, generic) \
  X(legacy_bag_s8_u8_i32,      BagI32Fn,            kLegacy,       8,  8,  kBagI32, generic) \
  X(legacy_bag_s8_u8_i64,      BagI64Fn,            kLegacy,       8,  8,  kBagI64, generic) \
  X(legacy_bag_s4_u8_i32,      BagI32Fn,            kLegacy,       4,  8,  kBagI32, generic) \
  X(legacy_bag_s4_u8_i64,      BagI64Fn,            kLegacy,       4,  8,  kBagI64, generic) \
  X(legacy_bag_s2_u8_i32,      BagI32Fn,            kLegacy,       2,  8,  kBagI32, generic) \
  X(legacy_bag_s2_u8_i64,      BagI64Fn,            kLegacy,       2,  8,  kBagI64, generic) \
  /* weight-only: y = s_r * q as float, from the float table or fused over the rows */      \
  X(gather_f32,                RequantGatherF32Fn,  kMaterialized, 32, 0,  kF32,   generic)  \
  X(gather_f32_f16,            RequantGatherHalfFn, kMaterialized, 32, 0,  kF16,   generic)  \
  X(gather_f32_bf16,           RequantGatherHalfFn, kMaterialized, 32, 0,  kBF16,  generic)  \
  X(bag_f32_i32,               BagI32Fn,            kMaterialized, 32, 0,  kBagI32, generic) \
  X(bag_f32_i64,               BagI64Fn,            kMaterialized, 32, 0,  kBagI64, generic) \
  X(dequant_gather_s8_f32,     RequantGatherF32Fn,  kWeightOnly,   8,  0,  kF32,   generic)  \
  X(dequant_gather_s8_f16,     RequantGatherHalfFn, kWeightOnly,   8,  0,  kF16,   generic)  \
  X(dequant_gather_s8_bf16,    RequantGatherHalfFn, kWeightOnly,   8,  0,  kBF16,  generic)  \
  X(dequant_gather_s4_f32,     RequantGatherF32Fn,  kWeightOnly,   4,  0,  kF32,   generic)  \
  X(dequant_gather_s4_f16,     RequantGatherHalfFn, kWeightOnly,   4,  0,  kF16,   generic)  \
  X(dequant_gather_s4_bf16,    RequantGatherHalfFn, kWeightOnly,   4,  0,  kBF16,  generic)  \
  X(dequant_gather_s2_f32,     RequantGatherF32Fn,  kWeightOnly,   2,  0,  kF32,   generic)  \
  X(dequant_gather_s2_f16,     RequantGatherHalfFn, kWeightOnly,   2,  0,  kF16,   generic)  \
  X(dequant_gather_s2_bf16,    RequantGatherHalfFn, kWeightOnly,   2,  0,  kBF16,  generic)  \
  X(dequant_bag_s8_i32,        BagI32Fn,            kWeightOnly,   8,  0,  kBagI32, generic) \
  X(dequant_bag_s8_i64,        BagI64Fn,            kWeightOnly,   8,  0,  kBagI64, generic) \
  X(dequant_bag_s4_i32,        BagI32Fn,            kWeightOnly,   4,  0,  kBagI32, generic) \
  X(dequant_bag_s4_i64,        BagI64Fn,            kWeightOnly,   4,  0,  kBagI64, generic) \
  X(dequant_bag_s2_i32,        BagI32Fn,            kWeightOnly,   2,  0,  kBagI32, generic) \
  X(dequant_bag_s2_i64,        BagI64Fn,            kWeightOnly,   2,  0,  kBagI64, generic)

// X(...) applied only to the rows of one impl: QEMB_KERNELS_OF(tuned, X).
#define QEMB_KERNEL_IMPL_tuned_tuned(x) x
#define QEMB_KERNEL_IMPL_tuned_generic(x)
#define QEMB_KERNEL_IMPL_generic_tuned(x)
#define QEMB_KERNEL_IMPL_generic_generic(x) x

enum class GatherKernel : int {
#define QEMB_KERNEL_ENUMERATOR(name, ...) name,
  QEMB_GATHER_KERNELS(QEMB_KERNEL_ENUMERATOR)
#undef QEMB_KERNEL_ENUMERATOR
};
inline constexpr int kNumGatherKernels = 0
#define QEMB_KERNEL_COUNT(name, ...) +1
    QEMB_GATHER_KERNELS(QEMB_KERNEL_COUNT)
#undef QEMB_KERNEL_COUNT
    ;

// All kernels of one instruction set.
struct KernelSet {
  // "AVX3", "AVX2", "SSE4", "SSSE3", "NEON", "EMU128", "SCALAR" (hwy::TargetName),
  // or "REFERENCE" for scalar_reference_kernels().
  const char* isa = "";
  int64_t hwy_target = 0;  // the Highway target bit; 0 for the reference
#define QEMB_KERNEL_FIELD(name, type, ...) type name = nullptr;
  QEMB_GATHER_KERNELS(QEMB_KERNEL_FIELD)
#undef QEMB_KERNEL_FIELD
};

// One row of the list, as data.
struct KernelRow {
  GatherKernel kernel;
  KernelFamily family;
  int weight_bits;
  int act_bits;
  KernelForm form;
};
inline constexpr KernelRow kKernelRows[] = {
#define QEMB_KERNEL_ROW(name, type, family, wbits, abits, form, impl) \
  {GatherKernel::name, KernelFamily::family, wbits, abits, KernelForm::form},
    QEMB_GATHER_KERNELS(QEMB_KERNEL_ROW)
#undef QEMB_KERNEL_ROW
};

// The kernel of `family` over a `weight_bits` table (16 for the
// materialized uint16 table, 32 for the float one) with `act_bits` outputs
// (0: float) that writes `form`, from the list above; nullopt when there is none.
constexpr std::optional<GatherKernel> find_kernel(KernelFamily family, int weight_bits, int act_bits,
                                                  KernelForm form) {
  for (const KernelRow& r : kKernelRows)
    if (r.family == family && r.weight_bits == weight_bits && r.act_bits == act_bits && r.form == form)
      return r.kernel;
  return std::nullopt;
}
constexpr const KernelRow& kernel_row(GatherKernel k) { return kKernelRows[static_cast<int>(k)]; }

// Kernel `k` of `set` as its function type Fn, or nullptr when `k` has
// another type: one generated switch instead of a hand-written one per type.
template <typename Fn>
Fn kernel_fn(const KernelSet& set, GatherKernel k) {
  switch (k) {
#define QEMB_KERNEL_CASE(name, type, ...)                          \
  case GatherKernel::name:                                        \
    if constexpr (std::is_same_v<Fn, type>) return set.name;      \
    return nullptr;
    QEMB_GATHER_KERNELS(QEMB_KERNEL_CASE)
#undef QEMB_KERNEL_CASE
  }
  return nullptr;
}

// The best instruction set this CPU supports, chosen on first use.
const KernelSet& best_kernels();
// One set per instruction set this machine supports and this build compiled,
// best first (for tests and benchmarks).
std::vector<KernelSet> all_supported_kernel_sets();
// Every instruction set this build compiled kernels for, best first, whether
// or not this CPU has it (the same names on every machine a binary runs on).
std::vector<std::string> compiled_kernel_isas();
// The set named `isa` (e.g. "AVX2"), or nullptr when unsupported here.
const KernelSet* find_kernel_set(std::string_view isa);
// Plain loops over the numeric.h inline functions: the reference.
const KernelSet& scalar_reference_kernels();

// "requant_gather_s4_u16" etc.
const char* kernel_stem(GatherKernel k);
// "requant_gather_s4_u16[AVX2]": dtype, op and instruction set.
std::string kernel_name(const KernelSet& set, GatherKernel k);

}  // namespace qemb
