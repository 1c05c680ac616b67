// The reference kernels: plain loops over the numeric.h inline functions.
// Every vector kernel is tested against these, bit for bit.
#include <bit>
#include <cstring>
#include <type_traits>

#include "qemb/half.h"
#include "core/ir.h"
#include "kernels/kernels.h"
#include "qemb/numeric.h"

namespace qemb {
namespace {

// The reference of every row of the kernel list, from its key alone:
// family F over a table of weight bits W with activation bits A (0: float
// outputs), writing form K. Plain loops over numeric.h.

float scale_at(const RequantGatherParams& p, size_t r) {
  if (p.scale_stride == 0) return p.row_scales[r];
  float s;
  std::memcpy(&s, reinterpret_cast<const uint8_t*>(p.row_scales) + r * p.scale_stride, sizeof(s));
  return s;
}

// The stored value at (r, j): a weight q of the per-row families, a table's
// activation, or (W = 32) a float table's bits.
template <KernelFamily F, int W>
int32_t stored_at(const RequantGatherParams& p, size_t r, size_t j) {
  static const StorageFormat* const format =
      find_storage_format(F != KernelFamily::kMaterialized ? DataType::kSFixedPoint8
                          : W == 16                       ? DataType::kUFixedPoint16
                          : W == 8                        ? DataType::kUFixedPoint8
                                                          : DataType::kFloat32,
                          W);
  const size_t row_bytes = format->row_bytes(static_cast<int64_t>(p.dim));
  const uint8_t* row = p.weights + r * (p.row_stride ? p.row_stride : row_bytes);
  return format->load(row, static_cast<int64_t>(j));
}

// The activation at (r, j) (A != 0).
template <KernelFamily F, int W>
int32_t act_at(const RequantGatherParams& p, size_t r, size_t j) {
  const int32_t v = stored_at<F, W>(p, r, j);
  if constexpr (F == KernelFamily::kMaterialized) {
    return v;
  } else if constexpr (F == KernelFamily::kLegacy) {
    return legacy_output(scale_at(p, r), v, p.max_scale, (1 << (W - 1)) - 1, p.act);
  } else {
    return optimized_output(scale_at(p, r), v, p.act);
  }
}

// The dequantized output y at (r, j): what the float forms and the bags read.
template <KernelFamily F, int W, int A>
float y_at(const RequantGatherParams& p, size_t r, size_t j) {
  if constexpr (A != 0) {
    return dequantize_activation(act_at<F, W>(p, r, j), p.act);
  } else if constexpr (F == KernelFamily::kMaterialized) {
    return std::bit_cast<float>(stored_at<F, W>(p, r, j));
  } else {
    return dequantize_weight(scale_at(p, r), stored_at<F, W>(p, r, j));
  }
}

template <KernelFamily F, int W, int A, KernelForm K>
auto value_at(const RequantGatherParams& p, size_t r, size_t j) {
  if constexpr (K == KernelForm::kU16) {
    return static_cast<uint16_t>(act_at<F, W>(p, r, j));
  } else if constexpr (K == KernelForm::kU8) {
    return static_cast<uint8_t>(act_at<F, W>(p, r, j));
  } else if constexpr (K == KernelForm::kF32) {
    return y_at<F, W, A>(p, r, j);
  } else if constexpr (K == KernelForm::kF16) {
    return float_to_f16(y_at<F, W, A>(p, r, j));
  } else {
    return float_to_bf16(y_at<F, W, A>(p, r, j));
  }
}

template <KernelFamily F, int W, int A, KernelForm K, typename T>
void gather(const RequantGatherParams& p, const int64_t* ids, size_t n, T* out) {
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < p.dim; ++j) out[i * p.dim + j] = value_at<F, W, A, K>(p, static_cast<size_t>(ids[i]), j);
}

// The pooled reduction, literally as docs/numeric-contract.md states it.
template <KernelFamily F, int W, int A, typename Id>
void bag(const RequantGatherParams& p, const Id* ids, const BagParams& bag, float* out) {
  for (size_t b = 0; b < bag.bags; ++b) {
    float* o = out + b * bag.out_stride;
    for (size_t j = 0; j < p.dim; ++j) {
      float acc = +0.0f;
      int64_t count = 0;
      for (int64_t i = bag.offsets[b]; i < bag.offsets[b + 1]; ++i) {
        const int64_t id = ids[i];
        if (id == bag.padding_idx) continue;
        const float v = y_at<F, W, A>(p, static_cast<size_t>(id), j);
        if (bag.weights) {
          const float product = bag.weights[i] * v;
          acc = acc + product;
        } else {
          acc = acc + v;
        }
        ++count;
      }
      if (bag.mean) acc = count > 0 ? acc / static_cast<float>(count) : +0.0f;
      o[j] = acc;
    }
  }
}

RequantGatherParams table_params(const uint16_t* table, size_t dim, const ActivationEncoding& act) {
  RequantGatherParams p;
  p.weights = reinterpret_cast<const uint8_t*>(table);
  p.dim = dim;
  p.act = act;
  return p;
}

// The reference function of one list row, as its function type Fn.
template <typename Fn, KernelFamily F, int W, int A, KernelForm K>
constexpr Fn reference_kernel() {
  if constexpr (std::is_same_v<Fn, GatherU16Fn>) {
    return [](const uint16_t* table, size_t dim, const int64_t* ids, size_t n, uint16_t* out) {
      gather<F, W, A, K>(table_params(table, dim, {}), ids, n, out);
    };
  } else if constexpr (std::is_same_v<Fn, GatherU16F32Fn>) {
    return [](const uint16_t* table, size_t dim, const ActivationEncoding& act, const int64_t* ids, size_t n,
              float* out) { gather<F, W, A, K>(table_params(table, dim, act), ids, n, out); };
  } else if constexpr (std::is_same_v<Fn, GatherU16HalfFn>) {
    return [](const uint16_t* table, size_t dim, const ActivationEncoding& act, const int64_t* ids, size_t n,
              uint16_t* out) { gather<F, W, A, K>(table_params(table, dim, act), ids, n, out); };
  } else if constexpr (std::is_same_v<Fn, RequantGatherU16Fn>) {  // also RequantGatherHalfFn
    return [](const RequantGatherParams& p, const int64_t* ids, size_t n, uint16_t* out) {
      gather<F, W, A, K>(p, ids, n, out);
    };
  } else if constexpr (std::is_same_v<Fn, RequantGatherU8Fn>) {
    return [](const RequantGatherParams& p, const int64_t* ids, size_t n, uint8_t* out) {
      gather<F, W, A, K>(p, ids, n, out);
    };
  } else if constexpr (std::is_same_v<Fn, RequantGatherF32Fn>) {
    return [](const RequantGatherParams& p, const int64_t* ids, size_t n, float* out) {
      gather<F, W, A, K>(p, ids, n, out);
    };
  } else if constexpr (std::is_same_v<Fn, BagI32Fn>) {
    return [](const RequantGatherParams& p, const int32_t* ids, const BagParams& b, float* out) {
      bag<F, W, A>(p, ids, b, out);
    };
  } else {
    static_assert(std::is_same_v<Fn, BagI64Fn>);
    return [](const RequantGatherParams& p, const int64_t* ids, const BagParams& b, float* out) {
      bag<F, W, A>(p, ids, b, out);
    };
  }
}

KernelSet make_reference_set() {
  KernelSet set;
  set.isa = "REFERENCE";
  set.hwy_target = 0;
#define QEMB_REFERENCE_KERNEL(name, type, family, wbits, abits, form, impl) \
  set.name = reference_kernel<type, KernelFamily::family, wbits, abits, KernelForm::form>();
  QEMB_GATHER_KERNELS(QEMB_REFERENCE_KERNEL)
#undef QEMB_REFERENCE_KERNEL
  return set;
}

}  // namespace

const KernelSet& scalar_reference_kernels() {
  static const KernelSet set = make_reference_set();
  return set;
}

}  // namespace qemb
