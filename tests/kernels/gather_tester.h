// A fluent tester for the gather kernels, in the style of XNNPACK's:
//
//   GatherTester().rows(33).dim(17).batch(9).scheme(4).seed(7)
//       .Test(kernel_set, KernelFamily::kOptimized);
//
// builds a random table (scales spread over many magnitudes, tiny and huge,
// activation encodings with the zero point at 0 / 65535 so that outputs
// clamp), random ids including the first and last row and repeats, runs the
// kernel set's uint16 and float32 kernels of the family and the scalar
// reference, and asserts bit-identical outputs (float32 compared by bit
// pattern). It also checks that nothing is written past the n * dim outputs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/ir.h"
#include "kernels/kernels.h"
#include "qemb/quantize.h"

namespace qemb::testing {

// The families are the kernel list's (KernelFamily): kMaterialized over a
// uint16 table, kOptimized and kLegacy over 4- or 8-bit rows, each kernel
// found by its key (find_kernel), as the runtime finds it.
inline const char* to_string(KernelFamily f) {
  switch (f) {
    case KernelFamily::kMaterialized: return "materialized";
    case KernelFamily::kOptimized: return "optimized";
    case KernelFamily::kLegacy: return "legacy";
    case KernelFamily::kWeightOnly: return "weight-only";
  }
  return "?";
}

// A random PCQ table in storage layout, with its encodings.
struct RandomPcqTable {
  size_t rows = 0;
  size_t dim = 0;
  int bits = 4;
  std::vector<uint8_t> weights;  // packed nibbles or int8, storage layout
  std::vector<float> scales;
  ActivationEncoding act;
  float max_scale = 0.0f;

  size_t row_bytes() const { return bits == 4 ? (dim + 1) / 2 : dim; }
  int q(size_t r, size_t j) const {
    const uint8_t* row = weights.data() + r * row_bytes();
    return bits == 4 ? unpack_int4(row, static_cast<int64_t>(j)) : static_cast<int8_t>(row[j]);
  }
  RequantGatherParams params() const {
    RequantGatherParams p;
    p.weights = weights.data();
    p.row_scales = scales.data();
    p.dim = dim;
    p.act = act;
    p.max_scale = max_scale;
    return p;
  }
  // The row-interleaved layout (each row's scale, then its weights, every
  // `stride` bytes; 0 = the tightest multiple of 4) built in `buffer`, whose
  // padding (0xEE) the kernels must not read as data.
  RequantGatherParams interleaved_params(size_t stride, std::vector<uint8_t>& buffer) const {
    if (stride == 0) stride = (4 + row_bytes() + 3) / 4 * 4;
    buffer.assign(rows * stride + 8, 0xEE);
    uint8_t* base = buffer.data() + (4 - reinterpret_cast<uintptr_t>(buffer.data()) % 4) % 4;
    for (size_t r = 0; r < rows; ++r) {
      std::memcpy(base + r * stride, &scales[r], 4);
      std::memcpy(base + r * stride + 4, weights.data() + r * row_bytes(), row_bytes());
    }
    RequantGatherParams p = params();
    p.weights = base + 4;
    p.row_scales = reinterpret_cast<const float*>(base);
    p.row_stride = stride;
    p.scale_stride = stride;
    return p;
  }
};

// Activation encodings that stress the clamps and the rounding: tiny and large
// scales, zero points at both ends and in the middle.
inline ActivationEncoding random_activation(std::mt19937_64& rng) {
  std::uniform_real_distribution<float> exponent(-7.0f, 0.0f);
  ActivationEncoding a;
  switch (rng() % 6) {
    case 0: a.scale = kEps; break;
    case 1: a.scale = std::pow(10.0f, exponent(rng)) * 100.0f; break;
    default: a.scale = std::pow(10.0f, exponent(rng)); break;
  }
  switch (rng() % 5) {
    case 0: a.zero_point = 0; break;
    case 1: a.zero_point = 65535; break;
    case 2: a.zero_point = 32768; break;
    default: a.zero_point = static_cast<int32_t>(rng() % 65536); break;
  }
  return a;
}

// Row scales over many magnitudes: eps, near eps, huge, ties with the
// activation scale (s_r * q * inv(s_a) lands on .5), and the common range.
inline float random_row_scale(std::mt19937_64& rng, const ActivationEncoding& act) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  switch (rng() % 10) {
    case 0: return kEps;
    case 1: return kEps * (1.0f + 100.0f * unit(rng));
    case 2: return std::pow(10.0f, 2.0f + 4.0f * unit(rng));  // huge: outputs saturate
    case 3: return act.scale * 0.5f * static_cast<float>(1 + rng() % 7);  // rounding ties
    default: return std::pow(10.0f, -6.0f + 6.0f * unit(rng));
  }
}

inline RandomPcqTable make_random_pcq_table(size_t rows, size_t dim, int bits, uint64_t seed) {
  std::mt19937_64 rng(seed);
  RandomPcqTable t;
  t.rows = rows;
  t.dim = dim;
  t.bits = bits;
  t.act = random_activation(rng);
  t.scales.resize(rows);
  for (float& s : t.scales) s = random_row_scale(rng, t.act);
  t.max_scale = rows ? *std::max_element(t.scales.begin(), t.scales.end()) : 1.0f;
  const int qmax = bits == 4 ? 7 : 127;
  t.weights.assign(rows * t.row_bytes(), 0);
  for (size_t r = 0; r < rows; ++r) {
    uint8_t* row = t.weights.data() + r * t.row_bytes();
    for (size_t j = 0; j < dim; ++j) {
      // Mostly valid values; now and then the one two's-complement value
      // outside [-qmax, qmax] (-8 / -128), which the kernels must also map
      // exactly as the scalar formulas do.
      int q = static_cast<int>(rng() % (2 * qmax + 1)) - qmax;
      if (rng() % 64 == 0) q = -qmax - 1;
      if (bits == 4) {
        pack_int4(row, static_cast<int64_t>(j), static_cast<int8_t>(q));
      } else {
        row[j] = static_cast<uint8_t>(static_cast<int8_t>(q));
      }
    }
    // Odd dims leave the last byte's high nibble unused; fill it with garbage
    // the kernels must ignore.
    if (bits == 4 && dim % 2 == 1) row[dim / 2] |= static_cast<uint8_t>((rng() % 16) << 4);
  }
  return t;
}

// Random ids in [0, rows) that include the first and the last row and repeats.
inline std::vector<int64_t> random_ids(size_t rows, size_t n, std::mt19937_64& rng) {
  std::vector<int64_t> ids(n);
  for (auto& id : ids) id = static_cast<int64_t>(rng() % rows);
  if (n > 0) ids[0] = 0;
  if (n > 1) ids[n - 1] = static_cast<int64_t>(rows - 1);
  if (n > 3) ids[n / 2] = ids[1];  // a repeat
  return ids;
}

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

class GatherTester {
 public:
  GatherTester& rows(size_t v) { rows_ = v; return *this; }
  GatherTester& dim(size_t d) { dim_ = d; return *this; }
  GatherTester& batch(size_t n) { batch_ = n; return *this; }
  GatherTester& scheme(int weight_bits) { bits_ = weight_bits; return *this; }
  GatherTester& seed(uint64_t s) { seed_ = s; return *this; }
  // Runs the kernels under test on the row-interleaved layout (each row's
  // scale, then its weights, every `stride` bytes; 0 = the tightest multiple
  // of 4), the reference on the plain one.
  GatherTester& interleaved(bool on, size_t stride = 0) { interleaved_ = on; stride_ = stride; return *this; }

  void Test(const KernelSet& set, KernelFamily family) const {
    ASSERT_GT(rows_, 0u);
    ASSERT_TRUE(bits_ == 4 || bits_ == 8);
    std::mt19937_64 rng(seed_ * 0x9E3779B97F4A7C15ull + rows_ * 131 + dim_ * 7 + batch_);
    const std::vector<int64_t> ids = random_ids(rows_, batch_, rng);
    if (family == KernelFamily::kMaterialized) {
      TestMaterialized(set, ids, rng);
    } else {
      TestFused(set, family, ids);
    }
  }

 private:
  static constexpr size_t kGuard = 67;  // outputs past n * dim that must stay untouched
  static constexpr uint16_t kU16Poison = 0xA5A5;
  static constexpr uint32_t kF32Poison = 0x7FC0DEADu;  // a NaN no kernel produces

  std::string Where() const {
    std::ostringstream os;
    os << "rows=" << rows_ << " dim=" << dim_ << " batch=" << batch_ << " bits=" << bits_
       << " seed=" << seed_;
    return os.str();
  }

  void TestMaterialized(const KernelSet& set, const std::vector<int64_t>& ids,
                        std::mt19937_64& rng) const {
    std::vector<uint16_t> table(rows_ * dim_);
    for (auto& v : table) v = static_cast<uint16_t>(rng());
    for (size_t j = 0; j < std::min<size_t>(dim_, 4); ++j) {  // the range ends
      table[j] = 0;
      table[(rows_ - 1) * dim_ + j] = 65535;
    }
    const ActivationEncoding act = random_activation(rng);
    const KernelSet& ref = scalar_reference_kernels();
    const size_t n = ids.size();

    std::vector<uint16_t> want_u16(n * dim_), got_u16(n * dim_ + kGuard, kU16Poison);
    ref.gather_u16(table.data(), dim_, ids.data(), n, want_u16.data());
    set.gather_u16(table.data(), dim_, ids.data(), n, got_u16.data());
    CheckU16(kernel_name(set, GatherKernel::gather_u16), ids, want_u16, got_u16);

    std::vector<float> want_f32(n * dim_), got_f32(n * dim_ + kGuard);
    FillF32Poison(got_f32);
    ref.gather_u16_f32(table.data(), dim_, act, ids.data(), n, want_f32.data());
    set.gather_u16_f32(table.data(), dim_, act, ids.data(), n, got_f32.data());
    CheckF32(kernel_name(set, GatherKernel::gather_u16_f32), ids, want_f32, got_f32, nullptr);

    const struct {
      GatherKernel kernel;
      GatherU16HalfFn ref, got;
    } halves[] = {{GatherKernel::gather_u16_f16, ref.gather_u16_f16, set.gather_u16_f16},
                  {GatherKernel::gather_u16_bf16, ref.gather_u16_bf16, set.gather_u16_bf16}};
    for (const auto& h : halves) {
      std::vector<uint16_t> want(n * dim_), got(n * dim_ + kGuard, kU16Poison);
      h.ref(table.data(), dim_, act, ids.data(), n, want.data());
      h.got(table.data(), dim_, act, ids.data(), n, got.data());
      CheckU16(kernel_name(set, h.kernel), ids, want, got);
    }
  }

  void TestFused(const KernelSet& set, KernelFamily family,
                 const std::vector<int64_t>& ids) const {
    const RandomPcqTable t = make_random_pcq_table(rows_, dim_, bits_, seed_ + 1000003 * dim_);
    const RequantGatherParams p = t.params();
    RequantGatherParams pk = p;  // what the kernel under test reads
    std::vector<uint8_t> rows_buffer;
    if (interleaved_) pk = t.interleaved_params(stride_, rows_buffer);
    auto key = [&](KernelForm form) { return *find_kernel(family, bits_, 16, form); };
    const GatherKernel u16_kernel = key(KernelForm::kU16), f32_kernel = key(KernelForm::kF32);
    const KernelSet& ref = scalar_reference_kernels();
    const size_t n = ids.size();

    std::vector<uint16_t> want_u16(n * dim_), got_u16(n * dim_ + kGuard, kU16Poison);
    kernel_fn<RequantGatherU16Fn>(ref, u16_kernel)(p, ids.data(), n, want_u16.data());
    kernel_fn<RequantGatherU16Fn>(set, u16_kernel)(pk, ids.data(), n, got_u16.data());
    CheckU16(kernel_name(set, u16_kernel), ids, want_u16, got_u16, &t);

    std::vector<float> want_f32(n * dim_), got_f32(n * dim_ + kGuard);
    FillF32Poison(got_f32);
    kernel_fn<RequantGatherF32Fn>(ref, f32_kernel)(p, ids.data(), n, want_f32.data());
    kernel_fn<RequantGatherF32Fn>(set, f32_kernel)(pk, ids.data(), n, got_f32.data());
    CheckF32(kernel_name(set, f32_kernel), ids, want_f32, got_f32, &t);

    for (KernelForm form : {KernelForm::kF16, KernelForm::kBF16}) {
      const GatherKernel k = key(form);
      std::vector<uint16_t> want(n * dim_), got(n * dim_ + kGuard, kU16Poison);
      kernel_fn<RequantGatherHalfFn>(ref, k)(p, ids.data(), n, want.data());
      kernel_fn<RequantGatherHalfFn>(set, k)(pk, ids.data(), n, got.data());
      CheckU16(kernel_name(set, k), ids, want, got, &t);
    }
  }

  static void FillF32Poison(std::vector<float>& v) {
    for (float& f : v) std::memcpy(&f, &kF32Poison, sizeof(f));
  }

  std::string Element(const std::vector<int64_t>& ids, size_t index, const RandomPcqTable* t) const {
    const size_t i = index / dim_, j = index % dim_;
    std::ostringstream os;
    os << "output [" << i << "][" << j << "] (row id " << ids[i] << ")";
    if (t) {
      const size_t r = static_cast<size_t>(ids[i]);
      os << " q=" << t->q(r, j) << " s_r=" << t->scales[r] << " s_max=" << t->max_scale
         << " s_a=" << t->act.scale << " zp=" << t->act.zero_point;
    }
    return os.str();
  }

  void CheckU16(const std::string& kernel, const std::vector<int64_t>& ids,
                const std::vector<uint16_t>& want, const std::vector<uint16_t>& got,
                const RandomPcqTable* t = nullptr) const {
    for (size_t k = 0; k < want.size(); ++k) {
      if (want[k] != got[k]) {
        ADD_FAILURE() << kernel << " " << Where() << ": " << Element(ids, k, t) << " is "
                      << got[k] << ", the reference gives " << want[k];
        return;  // the first difference says enough
      }
    }
    for (size_t k = want.size(); k < got.size(); ++k) {
      if (got[k] != kU16Poison) {
        ADD_FAILURE() << kernel << " " << Where() << " wrote past the output";
        return;
      }
    }
  }

  void CheckF32(const std::string& kernel, const std::vector<int64_t>& ids,
                const std::vector<float>& want, const std::vector<float>& got,
                const RandomPcqTable* t) const {
    for (size_t k = 0; k < want.size(); ++k) {
      if (float_bits(want[k]) != float_bits(got[k])) {
        ADD_FAILURE() << kernel << " " << Where() << ": " << Element(ids, k, t) << " is "
                      << got[k] << " (bits 0x" << std::hex << float_bits(got[k])
                      << "), the reference gives " << std::dec << want[k] << " (bits 0x"
                      << std::hex << float_bits(want[k]) << ")";
        return;
      }
    }
    for (size_t k = want.size(); k < got.size(); ++k) {
      if (float_bits(got[k]) != kF32Poison) {
        ADD_FAILURE() << kernel << " " << Where() << " wrote past the output";
        return;
      }
    }
  }

  size_t rows_ = 1;
  size_t dim_ = 1;
  size_t batch_ = 1;
  int bits_ = 4;
  uint64_t seed_ = 1;
  bool interleaved_ = false;
  size_t stride_ = 0;
};

}  // namespace qemb::testing
