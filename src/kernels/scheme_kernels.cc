// The kernels of the list's `generic` rows (kernels/kernels.h): every
// scheme beyond the tuned 16-bit-activation kernels of gather_kernels.cc —
// 2-bit weights, uint8 activations, weight-only float outputs — written once
// over (family, weight bits, activation bits, output form) and compiled for
// every Highway target. Each is bit-identical to the reference kernels
// (numeric.h's formulas); the comments say why.
//
// Highway recompiles this file once per target (foreach_target.h); the
// HWY_ONCE part exports the kernels and fills their KernelSet fields for
// gather_kernels.cc, which builds the sets.
#include <algorithm>
#include <cstring>
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/scheme_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "core/ir.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/kernels.h"
#include "kernels/requant-inl.h"
#include "qemb/half.h"
#include "qemb/numeric.h"

HWY_BEFORE_NAMESPACE();
namespace qemb {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace scheme {

// Rows are random reads: start loading row i + kAheadRows while row i is
// processed (as the tuned gathers do).
constexpr size_t kAheadRows = 16;
constexpr size_t kCacheLine = 64;
constexpr size_t kMaxPrefetchBytes = 512;
// Columns unpacked at a time into a stack buffer of int8 values.
constexpr size_t kChunk = 256;

// The stored bytes of one row of `dim` values of a table of weight bits W
// (32: the float table; 8: int8 rows or the uint8 table).
template <int W>
constexpr size_t RowBytes(size_t dim) {
  return (dim * static_cast<size_t>(W) + 7) / 8;
}

HWY_INLINE const uint8_t* RowAt(const RequantGatherParams& p, size_t r, size_t row_bytes) {
  return p.weights + r * (p.row_stride ? p.row_stride : row_bytes);
}
HWY_INLINE float ScaleAt(const RequantGatherParams& p, size_t r) {
  if (p.scale_stride == 0) return p.row_scales[r];
  float s;
  std::memcpy(&s, reinterpret_cast<const uint8_t*>(p.row_scales) + r * p.scale_stride, sizeof(s));
  return s;
}

HWY_INLINE void PrefetchBytes(const uint8_t* first, size_t bytes) {
  bytes = std::min(bytes, kMaxPrefetchBytes);
  const uintptr_t begin = reinterpret_cast<uintptr_t>(first) & ~uintptr_t{kCacheLine - 1};
  const uintptr_t last = reinterpret_cast<uintptr_t>(first) + (bytes ? bytes - 1 : 0);
  for (uintptr_t line = begin; line <= last; line += kCacheLine)
    hwy::Prefetch(reinterpret_cast<const uint8_t*>(line));
}

// The lines of row r (and its scale, for the per-row families).
template <KernelFamily F>
HWY_INLINE void PrefetchRow(const RequantGatherParams& p, size_t r, size_t row_bytes) {
  const uint8_t* w = RowAt(p, r, row_bytes);
  if constexpr (F == KernelFamily::kMaterialized) {
    PrefetchBytes(w, row_bytes);
  } else if (p.scale_stride != 0 && p.scale_stride == p.row_stride) {
    // Row-interleaved: the scale precedes the values in one record.
    const uint8_t* s = reinterpret_cast<const uint8_t*>(p.row_scales) + r * p.scale_stride;
    const uint8_t* lo = std::min(s, w);
    PrefetchBytes(lo, static_cast<size_t>(std::max(s + sizeof(float), w + row_bytes) - lo));
  } else {
    PrefetchBytes(w, row_bytes);
    hwy::Prefetch(p.scale_stride ? reinterpret_cast<const uint8_t*>(p.row_scales) + r * p.scale_stride
                                 : reinterpret_cast<const uint8_t*>(p.row_scales + r));
  }
}

// The int8 values of every packed byte, in column order: the four 2-bit
// fields (bits 2i, 2i + 1 hold column i) or the two nibbles (low first),
// each sign-extended: the unpacking of a row's last bytes.
template <int W>
struct UnpackTable {
  static constexpr int kPerByte = 8 / W;
  alignas(64) int8_t v[256][kPerByte];
};
template <int W>
constexpr UnpackTable<W> MakeUnpackTable() {
  UnpackTable<W> t{};
  for (int b = 0; b < 256; ++b) {
    for (int i = 0; i < 8 / W; ++i) {
      const int field = (b >> (W * i)) & ((1 << W) - 1);
      t.v[b][i] = static_cast<int8_t>(field >= (1 << (W - 1)) ? field - (1 << W) : field);
    }
  }
  return t;
}
template <int W>
inline constexpr UnpackTable<W> kUnpack = MakeUnpackTable<W>();

// Columns [j0, j0 + m) of a packed row as int8 values; j0 is a multiple of
// kChunk, so every chunk starts on a byte boundary. 16 packed bytes at a
// time: each nibble's value (or its two 2-bit fields) looked up by a byte
// shuffle, then the fields interleaved into column order (bytes, then
// 16-bit pairs for 2-bit fields). The compiler's own vectorization of a scalar loop
// inserted bytes one at a time (0.8 ns a value, 10M rows/s at D = 128 on the
// Zen 5 development VM).
template <int W>
HWY_INLINE void Unpack(const uint8_t* HWY_RESTRICT row, size_t j0, size_t m, int8_t* HWY_RESTRICT q) {
  if constexpr (W == 8) {
    std::memcpy(q, row + j0, m);
  } else {
    constexpr size_t kPerByte = 8 / W;
    const uint8_t* b = row + j0 / kPerByte;
    size_t i = 0;
#if HWY_TARGET != HWY_SCALAR
    // Each nibble's fields looked up with a byte shuffle: a nibble is one
    // 4-bit value, or two 2-bit fields (its low and high pairs of bits).
    const hn::Full128<int8_t> d;
    const hn::Full128<uint8_t> du;
    alignas(16) static constexpr int8_t kNibble[16] = {0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1};
    alignas(16) static constexpr int8_t kPairLo[16] = {0, 1, -2, -1, 0, 1, -2, -1, 0, 1, -2, -1, 0, 1, -2, -1};
    alignas(16) static constexpr int8_t kPairHi[16] = {0, 0, 0, 0, 1, 1, 1, 1, -2, -2, -2, -2, -1, -1, -1, -1};
    constexpr size_t kValues = 16 * kPerByte;  // from 16 bytes
    const auto low_mask = hn::Set(du, 0x0F);
    for (; i + kValues <= m; i += kValues, b += 16) {
      const auto v = hn::LoadU(du, b);
      const auto lo = hn::BitCast(d, hn::And(v, low_mask));
      const auto hi = hn::BitCast(d, hn::ShiftRight<4>(v));
      if constexpr (W == 4) {
        const auto table = hn::Load(d, kNibble);
        const auto f0 = hn::TableLookupBytes(table, lo), f1 = hn::TableLookupBytes(table, hi);
        hn::StoreU(hn::InterleaveLower(d, f0, f1), d, q + i);
        hn::StoreU(hn::InterleaveUpper(d, f0, f1), d, q + i + 16);
      } else {
        const hn::Repartition<int16_t, decltype(d)> d16;
        const auto pair_lo = hn::Load(d, kPairLo), pair_hi = hn::Load(d, kPairHi);
        const auto f0 = hn::TableLookupBytes(pair_lo, lo), f1 = hn::TableLookupBytes(pair_hi, lo);
        const auto f2 = hn::TableLookupBytes(pair_lo, hi), f3 = hn::TableLookupBytes(pair_hi, hi);
        const auto a = hn::BitCast(d16, hn::InterleaveLower(d, f0, f1));  // bytes 0..7: (f0 f1) pairs
        const auto c = hn::BitCast(d16, hn::InterleaveLower(d, f2, f3));
        const auto e = hn::BitCast(d16, hn::InterleaveUpper(d, f0, f1));  // bytes 8..15
        const auto g = hn::BitCast(d16, hn::InterleaveUpper(d, f2, f3));
        hn::StoreU(hn::BitCast(d, hn::InterleaveLower(d16, a, c)), d, q + i);
        hn::StoreU(hn::BitCast(d, hn::InterleaveUpper(d16, a, c)), d, q + i + 16);
        hn::StoreU(hn::BitCast(d, hn::InterleaveLower(d16, e, g)), d, q + i + 32);
        hn::StoreU(hn::BitCast(d, hn::InterleaveUpper(d16, e, g)), d, q + i + 48);
      }
    }
#endif
    for (; i + kPerByte <= m; i += kPerByte, ++b)
      for (size_t k = 0; k < kPerByte; ++k) q[i + k] = kUnpack<W>.v[*b][k];
    for (size_t k = 0; i < m; ++i, ++k) q[i] = kUnpack<W>.v[*b][k];  // the row's last, partial byte
  }
}

// Columns [j0, j0 + m) of a row as int8 values: int8 rows in place, packed
// ones unpacked into `buffer` (a copy of int8 rows cost a memcpy call a row).
template <int W>
HWY_INLINE const int8_t* Values(const uint8_t* HWY_RESTRICT row, size_t j0, size_t m, int8_t* HWY_RESTRICT buffer) {
  if constexpr (W == 8) {
    (void)m;
    (void)buffer;
    return reinterpret_cast<const int8_t*>(row) + j0;
  } else {
    Unpack<W>(row, j0, m, buffer);
    return buffer;
  }
}

// What a gather of form K stores per value: the activation (uint8 for A = 8,
// uint16 for A = 16), float32, or the bits of a binary16 / bfloat16.
template <int A, KernelForm K>
using OutT = std::conditional_t<K == KernelForm::kF32, float,
                                std::conditional_t<K == KernelForm::kU8, uint8_t, uint16_t>>;

// The constants of one call, broadcast once.
template <class DF>
struct Consts {
  Consts(DF df, const RequantGatherParams& p, int weight_qmax)
      : act(p.act),
        max_scale(p.max_scale),
        weight_qmax(weight_qmax),
        a(df, p.act),
        legacy(df, p.max_scale, weight_qmax),
        q(df, p.act),
        act_qmax(hn::RebindToSigned<DF>(), p.act.qmax()) {}
  ActivationEncoding act;
  float max_scale;
  int weight_qmax;
  ActivationVec<DF> a;
  LegacyVec<DF> legacy;
  Q16IntVec<DF> q;
  Broadcast<hn::RebindToSigned<DF>> act_qmax;
};

// The scalar value of one column, by numeric.h: the activation q_A, or y.
template <KernelFamily F>
HWY_INLINE int32_t ScalarAct(float s, int q, const ActivationEncoding& act, float max_scale, int weight_qmax) {
  if constexpr (F == KernelFamily::kLegacy) {
    return legacy_output(s, q, max_scale, weight_qmax, act);
  } else {
    return optimized_output(s, q, act);
  }
}

template <int A, KernelForm K>
HWY_INLINE OutT<A, K> ScalarOut(int32_t v, const ActivationEncoding& act) {
  if constexpr (K == KernelForm::kU8 || K == KernelForm::kU16) {
    return static_cast<OutT<A, K>>(v);
  } else if constexpr (K == KernelForm::kF32) {
    return dequantize_activation(v, act);
  } else if constexpr (K == KernelForm::kF16) {
    return float_to_f16(dequantize_activation(v, act));
  } else {
    return float_to_bf16(dequantize_activation(v, act));
  }
}
template <KernelForm K>
HWY_INLINE OutT<0, K> ScalarFloatOut(float y) {
  if constexpr (K == KernelForm::kF32) {
    return y;
  } else if constexpr (K == KernelForm::kF16) {
    return float_to_f16(y);
  } else {
    return float_to_bf16(y);
  }
}

// Stores the float vector y (a dequantized output) in form K.
template <KernelForm K, class DF, typename T>
HWY_INLINE void StoreFloat(DF df, hn::Vec<DF> y, T* HWY_RESTRICT o) {
  if constexpr (K == KernelForm::kF32) {
    hn::StoreU(y, df, o);
  } else {
    const hn::Rebind<uint16_t, DF> du16;
    const auto bits = K == KernelForm::kF16 ? F16Bits(df, y) : BF16Bits(df, y);
    hn::StoreU(hn::TruncateTo(du16, bits), du16, o);
  }
}

// Where a row's float y goes: stored (a gather's output, form K), or, for
// the pooled kernels, added into the bag's row `o` in float32 (times the
// id's weight first when weighted: two roundings, never fused), the
// contract's accumulation step.
struct Accumulate {
  bool weighted = false;
  float w = 1.0f;
};
struct Store {};

template <KernelForm K, class DF, typename T, class Sink>
HWY_INLINE void EmitFloat(DF df, hn::Vec<DF> y, T* HWY_RESTRICT o, const Sink& sink) {
  if constexpr (std::is_same_v<Sink, Accumulate>) {
    if (sink.weighted) y = hn::Mul(hn::Set(df, sink.w), y);
    hn::StoreU(hn::Add(hn::LoadU(df, o), y), df, o);
  } else {
    StoreFloat<K>(df, y, o);
  }
}
template <KernelForm K, typename T, class Sink>
HWY_INLINE void EmitScalar(float y, T* HWY_RESTRICT o, const Sink& sink) {
  if constexpr (std::is_same_v<Sink, Accumulate>) {
    if (sink.weighted) {
      const float product = sink.w * y;
      *o = *o + product;
    } else {
      *o = *o + y;
    }
  } else {
    *o = ScalarFloatOut<K>(y);
  }
}

// The arithmetic of a per-row family on NF int8 values, for the gathers and
// the bags alike: x = s_r * q, through the legacy intermediate for that
// pattern, then the activation level and its y. The constants are copied out
// of `c` once (Broadcast keeps them in registers, or scalars on SVE): a uint8
// store may alias anything, so constants read through `c` could be loaded
// again after every store.
template <KernelFamily F, class DF>
struct YMath {
  explicit YMath(const Consts<DF>& c)
      : inv_sa(c.q.inv_scale), limit(c.q.limit), neg_limit(c.q.neg_limit), magic(c.q.magic), bias(c.q.bias),
        act_qmax(c.act_qmax), sa(c.a.scale), zp(c.a.zero_point), smax(c.legacy.max_scale),
        inv_smax(c.legacy.inv_max_scale), wq(c.legacy.qmax), neg_wq(c.legacy.neg_qmax) {}
  // x = s_r * q, through the legacy intermediate (LegacyRequantized: the
  // per-tensor s_max approximation, clamped in float with clamp_to_int's
  // order, NaN -> -qmax).
  HWY_INLINE hn::Vec<DF> X(DF df, const int8_t* HWY_RESTRICT q, hn::Vec<DF> vs) const {
    const hn::RebindToSigned<DF> di;
    const hn::Rebind<int8_t, DF> d8;
    auto x = hn::Mul(vs, hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, q))));
    if constexpr (F == KernelFamily::kLegacy) {
      const auto r = RoundHalfEven(df, hn::Mul(x, inv_smax()));
      x = hn::Mul(smax(), hn::Min(MaxOrLowerIfNaN<DF>(r, neg_wq()), wq()));
    }
    return x;
  }
  // The activation: rne(x * inv_sa) + zp as int32 (requant-inl.h's
  // Q16Unclamped: t clamped to +-2^22, NaN to -2^22, rounded by the magic
  // addition), then clamped to [0, 2^A - 1] in int32, which gives numeric.h's
  // quantize_activation: beyond its inner +-2^20 clamp both forms reach the
  // same end, since 0 <= zp <= 2^A - 1; NaN gives 0 in both. (Highway 1.0.3's
  // int32 -> uint8 DemoteTo did not saturate here on x86: 276 came out as 20
  // on AVX3 and AVX2. Hence the clamp before it.)
  HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> Level(DF df, hn::Vec<DF> x) const {
    const hn::RebindToSigned<DF> di;
    (void)df;
    const auto t = hn::Min(MaxOrLowerIfNaN<DF>(hn::Mul(x, inv_sa()), neg_limit()), limit());
    const auto unclamped = hn::Add(hn::BitCast(di, hn::Add(t, magic())), bias());
    return hn::Min(hn::Max(unclamped, hn::Zero(di)), act_qmax());
  }
  // y = s_a * (float)(q - zp): q and zp are integers below 2^16, so the
  // float subtraction is exact, as the scalar int one is.
  HWY_INLINE hn::Vec<DF> Y(DF df, hn::Vec<hn::RebindToSigned<DF>> level) const {
    return hn::Mul(sa(), hn::Sub(hn::ConvertTo(df, level), zp()));
  }
  // The dequantized output of NF values: x itself for weight-only.
  HWY_INLINE hn::Vec<DF> operator()(DF df, const int8_t* HWY_RESTRICT q, hn::Vec<DF> vs) const {
    const auto x = X(df, q, vs);
    if constexpr (F == KernelFamily::kWeightOnly) {
      return x;
    } else {
      return Y(df, Level(df, x));
    }
  }
  Broadcast<DF> inv_sa, limit, neg_limit, magic;
  Broadcast<hn::RebindToSigned<DF>> bias, act_qmax;
  Broadcast<DF> sa, zp, smax, inv_smax, wq, neg_wq;
};

// One row's columns from its int8 values q (m of them, from column j0 of
// the output row o), for the per-row families: x = s_r * q (the dequantized
// weight), through the legacy intermediate for that pattern; weight-only
// stores x; the others q_A(x), as the activation or dequantized again.
template <KernelFamily F, int A, KernelForm K, class DF, class Sink = Store>
HWY_INLINE void RowFromValues(DF df, const int8_t* HWY_RESTRICT q, size_t m, float s, const Consts<DF>& c,
                              OutT<A, K>* HWY_RESTRICT o, const Sink& sink = Sink()) {
  const size_t NF = hn::Lanes(df);
  const auto vs = hn::Set(df, s);
  const YMath<F, DF> ym(c);
  size_t j = 0;
  for (; j + NF <= m; j += NF) {
    const auto x = ym.X(df, q + j, vs);
    if constexpr (F == KernelFamily::kWeightOnly) {
      EmitFloat<K>(df, x, o + j, sink);
    } else {
      const auto level = ym.Level(df, x);
      if constexpr (K == KernelForm::kU8 || K == KernelForm::kU16) {
        const hn::Rebind<OutT<A, K>, DF> dn;
        hn::StoreU(hn::DemoteTo(dn, level), dn, o + j);  // exact: level is in [0, 2^A - 1]
      } else {
        EmitFloat<K>(df, ym.Y(df, level), o + j, sink);
      }
    }
  }
  for (; j < m; ++j) {
    if constexpr (F == KernelFamily::kWeightOnly) {
      EmitScalar<K>(dequantize_weight(s, q[j]), o + j, sink);
    } else if constexpr (std::is_same_v<Sink, Accumulate>) {
      EmitScalar<K>(dequantize_activation(ScalarAct<F>(s, q[j], c.act, c.max_scale, c.weight_qmax), c.act), o + j, sink);
    } else {
      o[j] = ScalarOut<A, K>(ScalarAct<F>(s, q[j], c.act, c.max_scale, c.weight_qmax), c.act);
    }
  }
}

// A materialized table's row (uint8 activations, or floats) in form K.
template <int W, KernelForm K, class DF, class Sink = Store>
HWY_INLINE void RowFromTable(DF df, const uint8_t* HWY_RESTRICT row, size_t dim, const Consts<DF>& c,
                             OutT<(W == 32 ? 0 : 8), K>* HWY_RESTRICT o, const Sink& sink = Sink()) {
  const size_t NF = hn::Lanes(df);
  if constexpr (((W == 8 && K == KernelForm::kU8) || (W == 32 && K == KernelForm::kF32)) &&
                std::is_same_v<Sink, Store>) {
    std::memcpy(o, row, RowBytes<W>(dim));
  } else if constexpr (W == 8) {
    const hn::RebindToSigned<DF> di;
    const hn::Rebind<uint8_t, DF> du8;
    const auto zp = hn::Set(di, c.act.zero_point);
    size_t j = 0;
    for (; j + NF <= dim; j += NF) {
      // (float)(q - zp) with the subtraction in int32, exactly as the scalar.
      const auto q = hn::Sub(hn::PromoteTo(di, hn::LoadU(du8, row + j)), zp);
      EmitFloat<K>(df, hn::Mul(c.a.scale(), hn::ConvertTo(df, q)), o + j, sink);
    }
    for (; j < dim; ++j) {
      if constexpr (std::is_same_v<Sink, Accumulate>) EmitScalar<K>(dequantize_activation(row[j], c.act), o + j, sink);
      else o[j] = ScalarOut<8, K>(row[j], c.act);
    }
  } else {
    static_assert(W == 32);
    const float* f = reinterpret_cast<const float*>(row);
    size_t j = 0;
    for (; j + NF <= dim; j += NF) EmitFloat<K>(df, hn::LoadU(df, f + j), o + j, sink);
    for (; j < dim; ++j) {
      float y;
      std::memcpy(&y, row + 4 * j, 4);
      EmitScalar<K>(y, o + j, sink);
    }
  }
}

template <KernelFamily F, int W>
constexpr int WeightQmax() {
  return F == KernelFamily::kMaterialized ? 0 : (1 << (W - 1)) - 1;
}

template <KernelFamily F, int W, int A, KernelForm K>
void Gather(const RequantGatherParams& p, const int64_t* ids, size_t n, OutT<A, K>* out) {
  using DF = hn::ScalableTag<float>;
  const DF df;
  const size_t dim = p.dim;
  const size_t row_bytes = RowBytes<W>(dim);
  const Consts<DF> c(df, p, WeightQmax<F, W>());
  alignas(64) int8_t q[kChunk];
  for (size_t i = 0; i < n; ++i) {
    if (i + kAheadRows < n) PrefetchRow<F>(p, static_cast<size_t>(ids[i + kAheadRows]), row_bytes);
    const size_t r = static_cast<size_t>(ids[i]);
    const uint8_t* row = RowAt(p, r, row_bytes);
    OutT<A, K>* o = out + i * dim;
    if constexpr (F == KernelFamily::kMaterialized) {
      RowFromTable<W, K>(df, row, dim, c, o);
    } else {
      const float s = ScaleAt(p, r);
      for (size_t j0 = 0; j0 < dim; j0 += kChunk) {
        const size_t m = std::min(kChunk, dim - j0);
        RowFromValues<F, A, K>(df, Values<W>(row, j0, m, q), m, s, c, o + j0);
      }
    }
  }
}

// Pooled lookups (docs/numeric-contract.md): each bag's output row is the
// accumulator, zeroed, then each counted id's y added column by column in
// index order (the weighted product rounded before the add: two
// operations, never fused), then divided by the count for mean. Each y is
// made with the gather's own arithmetic (so the same bits) and added
// straight into the bag's row.
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
// Bags of rows of exactly kV vectors of columns: each bag's sums stay in
// kV registers across its ids (one load and one add a vector an id), then
// are stored once, instead of a load and a store of the bag's row for each
// id. The same float32 operations in the same order: the same bits.
template <size_t kV, KernelFamily F, int W, int A, typename Id>
HWY_NOINLINE void BagInRegisters(const RequantGatherParams& p, const Id* HWY_RESTRICT ids, const BagParams& bag,
                                 float* HWY_RESTRICT out, const Consts<hn::ScalableTag<float>>& c) {
  using DF = hn::ScalableTag<float>;
  const DF df;
  const size_t NF = hn::Lanes(df);
  const size_t dim = p.dim;
  const size_t row_bytes = RowBytes<W>(dim);
  const YMath<F, DF> y(c);
  const bool weighted = bag.weights != nullptr;
  const size_t ahead_end = std::max(bag.lookahead_end, static_cast<size_t>(bag.bags ? bag.offsets[bag.bags] : 0));
  alignas(64) int8_t q[kChunk];
  for (size_t b = 0; b < bag.bags; ++b) {
    hn::Vec<DF> acc[kV];
    for (size_t v = 0; v < kV; ++v) acc[v] = hn::Zero(df);
    int64_t count = 0;
    const size_t end = static_cast<size_t>(bag.offsets[b + 1]);
    for (size_t i = static_cast<size_t>(bag.offsets[b]); i < end; ++i) {
      if (i + kAheadRows < ahead_end) PrefetchRow<F>(p, static_cast<size_t>(ids[i + kAheadRows]), row_bytes);
      const int64_t id = ids[i];
      if (id == bag.padding_idx) continue;
      ++count;
      const size_t r = static_cast<size_t>(id);
      const int8_t* values = Values<W>(RowAt(p, r, row_bytes), 0, dim, q);
      const auto vs = hn::Set(df, ScaleAt(p, r));
      if (weighted) {
        const auto vw = hn::Set(df, bag.weights[i]);
        for (size_t v = 0; v < kV; ++v) acc[v] = hn::Add(acc[v], hn::Mul(vw, y(df, values + v * NF, vs)));
      } else {
        for (size_t v = 0; v < kV; ++v) acc[v] = hn::Add(acc[v], y(df, values + v * NF, vs));
      }
    }
    float* o = out + b * bag.out_stride;
    if (bag.mean && count > 0) {
      const auto vc = hn::Set(df, static_cast<float>(count));
      for (size_t v = 0; v < kV; ++v) acc[v] = hn::Div(acc[v], vc);
    }
    for (size_t v = 0; v < kV; ++v) hn::StoreU(acc[v], df, o + v * NF);
  }
}
#endif

template <KernelFamily F, int W, int A, typename Id>
void Bag(const RequantGatherParams& p, const Id* ids, const BagParams& bag, float* out) {
  using DF = hn::ScalableTag<float>;
  const DF df;
  const size_t NF = hn::Lanes(df);
  const size_t dim = p.dim;
  const size_t row_bytes = RowBytes<W>(dim);
  const Consts<DF> c(df, p, WeightQmax<F, W>());
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
  if constexpr (F != KernelFamily::kMaterialized) {
    // D = 4, 8 or 16 vectors: 64 / 128 / 256 columns on AVX-512, 32 / 64 /
    // 128 on AVX2 and 16 / 32 / 64 on 128-bit targets.
    switch (dim % NF == 0 ? dim / NF : 0) {
      case 4: return BagInRegisters<4, F, W, A>(p, ids, bag, out, c);
      case 8: return BagInRegisters<8, F, W, A>(p, ids, bag, out, c);
      case 16: return BagInRegisters<16, F, W, A>(p, ids, bag, out, c);
      default: break;
    }
  }
#endif
  const bool weighted = bag.weights != nullptr;
  const size_t ahead_end = std::max(bag.lookahead_end, static_cast<size_t>(bag.bags ? bag.offsets[bag.bags] : 0));
  alignas(64) int8_t q[kChunk];
  constexpr KernelForm kY = KernelForm::kF32;
  for (size_t b = 0; b < bag.bags; ++b) {
    float* o = out + b * bag.out_stride;
    std::fill(o, o + dim, +0.0f);
    int64_t count = 0;
    const size_t end = static_cast<size_t>(bag.offsets[b + 1]);
    for (size_t i = static_cast<size_t>(bag.offsets[b]); i < end; ++i) {
      if (i + kAheadRows < ahead_end) PrefetchRow<F>(p, static_cast<size_t>(ids[i + kAheadRows]), row_bytes);
      const int64_t id = ids[i];
      if (id == bag.padding_idx) continue;
      ++count;
      const size_t r = static_cast<size_t>(id);
      const uint8_t* row = RowAt(p, r, row_bytes);
      const Accumulate sink{weighted, weighted ? bag.weights[i] : 1.0f};
      const float s = F == KernelFamily::kMaterialized ? 0.0f : ScaleAt(p, r);
      for (size_t j0 = 0; j0 < dim; j0 += kChunk) {
        const size_t m = std::min(kChunk, dim - j0);
        float* acc = o + j0;
        if constexpr (F == KernelFamily::kMaterialized) {
          RowFromTable<W, kY>(df, row + (W == 32 ? 4 : 1) * j0, m, c, acc, sink);
        } else {
          RowFromValues<F, A, kY>(df, Values<W>(row, j0, m, q), m, s, c, acc, sink);
        }
      }
    }
    if (bag.mean && count > 0) {
      const float cnt = static_cast<float>(count);
      const auto vc = hn::Set(df, cnt);
      size_t j = 0;
      for (; j + NF <= dim; j += NF) hn::StoreU(hn::Div(hn::LoadU(df, o + j), vc), df, o + j);
      for (; j < dim; ++j) o[j] = o[j] / cnt;
    }
  }
}

}  // namespace scheme

// One function per `generic` row of the list, by its form.
#define QEMB_SCHEME_GATHER(name, family, wbits, abits, form, T)                                         \
  void name(const RequantGatherParams& p, const int64_t* ids, size_t n, T* out) {                       \
    scheme::Gather<KernelFamily::family, wbits, abits, KernelForm::form>(p, ids, n, out);                \
  }
#define QEMB_SCHEME_DEF_kU8(name, f, w, a) QEMB_SCHEME_GATHER(name, f, w, a, kU8, uint8_t)
#define QEMB_SCHEME_DEF_kU16(name, f, w, a) QEMB_SCHEME_GATHER(name, f, w, a, kU16, uint16_t)
#define QEMB_SCHEME_DEF_kF32(name, f, w, a) QEMB_SCHEME_GATHER(name, f, w, a, kF32, float)
#define QEMB_SCHEME_DEF_kF16(name, f, w, a) QEMB_SCHEME_GATHER(name, f, w, a, kF16, uint16_t)
#define QEMB_SCHEME_DEF_kBF16(name, f, w, a) QEMB_SCHEME_GATHER(name, f, w, a, kBF16, uint16_t)
#define QEMB_SCHEME_DEF_kBagI32(name, f, w, a)                                                          \
  void name(const RequantGatherParams& p, const int32_t* ids, const BagParams& bag, float* out) {       \
    scheme::Bag<KernelFamily::f, w, a, int32_t>(p, ids, bag, out);                                       \
  }
#define QEMB_SCHEME_DEF_kBagI64(name, f, w, a)                                                          \
  void name(const RequantGatherParams& p, const int64_t* ids, const BagParams& bag, float* out) {       \
    scheme::Bag<KernelFamily::f, w, a, int64_t>(p, ids, bag, out);                                       \
  }
#define QEMB_SCHEME_DEF(name, type, family, wbits, abits, form, impl) \
  QEMB_KERNEL_IMPL_generic_##impl(QEMB_SCHEME_DEF_##form(name, family, wbits, abits)                   \
                                  static_assert(std::is_same_v<decltype(&name), type>);)
QEMB_GATHER_KERNELS(QEMB_SCHEME_DEF)

}  // namespace HWY_NAMESPACE
}  // namespace qemb
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/dispatch.h"

namespace qemb {

#define QEMB_EXPORT_SCHEME_KERNEL(name, type, family, wbits, abits, form, impl) \
  QEMB_KERNEL_IMPL_generic_##impl(HWY_EXPORT(name);)
QEMB_GATHER_KERNELS(QEMB_EXPORT_SCHEME_KERNEL)
#undef QEMB_EXPORT_SCHEME_KERNEL

// Fills the generic rows' fields of `set` for Highway target `target`;
// false when one is missing. Called by gather_kernels.cc's make_kernel_set.
bool fill_scheme_kernels(int64_t target, KernelSet& set) {
  const size_t index = dispatch_index(target);
  bool complete = true;
#define QEMB_FILL_SCHEME_KERNEL(name, type, family, wbits, abits, form, impl) \
  QEMB_KERNEL_IMPL_generic_##impl(set.name = HWY_DISPATCH_TABLE(name)[index];   \
                                  complete = complete && set.name != nullptr;)
  QEMB_GATHER_KERNELS(QEMB_FILL_SCHEME_KERNEL)
#undef QEMB_FILL_SCHEME_KERNEL
  return complete;
}

}  // namespace qemb
#endif  // HWY_ONCE
