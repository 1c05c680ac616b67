// Gather kernels for every Highway target this build compiles, and the
// KernelSets built from their dispatch tables.
//
// Highway recompiles this file once per target (foreach_target.h); each pass
// defines the kernels in namespace qemb::N_<TARGET>. The last pass (HWY_ONCE)
// exports them and reads each target's entry from the dispatch tables once,
// so callers hold plain function pointers.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gather_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/requant-inl.h"
#include "qemb/half.h"
#include "kernels/kernels.h"
#include "qemb/numeric.h"

HWY_BEFORE_NAMESPACE();
namespace qemb {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rows are independent random reads, so the hardware prefetcher cannot see
// them coming: start loading row i + kPrefetchRows while row i is processed.
// 16 rows of at most 4 prefetched lines stay within the L2 miss queue and
// cover ~1 us of latency at the short rows' few ns per row (8 to 32 measured
// the same on the development VM, whose cold misses cost several hundred ns).
constexpr size_t kPrefetchRows = 16;
// Within a row reads are sequential and the hardware prefetcher takes over
// after the first few lines.
constexpr size_t kPrefetchBytesPerRow = 256;
constexpr size_t kCacheLine = 64;

// What a gather writes: the uint16 activation, or its dequantized value
// y = s_a * (q16 - zp) as float32, or as binary16 / bfloat16 rounded to
// nearest even from that float32 (qemb/half.h).
enum class OutKind { kU16, kF32, kF16, kBF16 };
template <OutKind K>
using OutT = std::conditional_t<K == OutKind::kF32, float, uint16_t>;

template <OutKind K>
HWY_INLINE OutT<K> ScalarOut(uint16_t q16, const ActivationEncoding& act) {
  if constexpr (K == OutKind::kU16) {
    return q16;
  } else if constexpr (K == OutKind::kF32) {
    return dequantize_activation(q16, act);
  } else if constexpr (K == OutKind::kF16) {
    return float_to_f16(dequantize_activation(q16, act));
  } else {
    return float_to_bf16(dequantize_activation(q16, act));
  }
}

// The half-precision bits of y, in the low 16 bits of each lane.
template <OutKind K, class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> HalfBits(DF df, hn::Vec<DF> y) {
  if constexpr (K == OutKind::kF16) {
    return F16Bits(df, y);
  } else {
    return BF16Bits(df, y);
  }
}

// kLocality as __builtin_prefetch's: 3 into L1 (hwy::Prefetch), 2 into L2.
// At most kMaxBytes of the row from its start.
template <int kLocality = 3, size_t kMaxBytes = kPrefetchBytesPerRow>
HWY_INLINE void PrefetchRow(const uint8_t* row, size_t row_bytes) {
  const size_t bytes = row_bytes < kMaxBytes ? row_bytes : kMaxBytes;
  const uintptr_t first = reinterpret_cast<uintptr_t>(row) & ~uintptr_t{kCacheLine - 1};
  const uintptr_t last = reinterpret_cast<uintptr_t>(row) + (bytes ? bytes - 1 : 0);
  for (uintptr_t line = first; line <= last; line += kCacheLine) {
    if constexpr (kLocality == 3) {
      hwy::Prefetch(reinterpret_cast<const uint8_t*>(line));
    } else {
      __builtin_prefetch(reinterpret_cast<const uint8_t*>(line), 0, kLocality);
    }
  }
}

// The lines of a long row past the kPrefetchBytesPerRow that PrefetchRow
// requested. A kernel that requantizes reads its rows slower than the
// hardware prefetcher's ramp-up assumes; requested one row ahead, a 4 KiB
// row arrives while the previous one is computed (1.3x the rows/s at
// D=4096 cold on the development VM; a plain copy gains nothing from it).
HWY_INLINE void PrefetchRowTail(const uint8_t* row, size_t row_bytes) {
  if (row_bytes <= kPrefetchBytesPerRow) return;
  const uintptr_t first = (reinterpret_cast<uintptr_t>(row) + kPrefetchBytesPerRow) & ~uintptr_t{kCacheLine - 1};
  const uintptr_t end = reinterpret_cast<uintptr_t>(row) + row_bytes;
  for (uintptr_t line = first; line < end; line += kCacheLine) {
    hwy::Prefetch(reinterpret_cast<const uint8_t*>(line));
  }
}

// Where row r's weights and scale are, in the plain or the row-interleaved
// layout (RequantGatherParams::row_stride / scale_stride).
HWY_INLINE const uint8_t* RowWeights(const RequantGatherParams& p, size_t r, size_t row_bytes) {
  return p.weights + r * (p.row_stride ? p.row_stride : row_bytes);
}
HWY_INLINE float RowScale(const RequantGatherParams& p, size_t r) {
  if (p.scale_stride == 0) return p.row_scales[r];
  float s;
  std::memcpy(&s, reinterpret_cast<const uint8_t*>(p.row_scales) + r * p.scale_stride, sizeof(s));
  return s;
}
// One contiguous run when the scale sits next to its row; else two reads.
template <int kLocality = 3, size_t kMaxBytes = kPrefetchBytesPerRow>
HWY_INLINE void PrefetchPcqRow(const RequantGatherParams& p, size_t r, size_t row_bytes) {
  const uint8_t* w = RowWeights(p, r, row_bytes);
  if (p.scale_stride != 0) {
    const uint8_t* s = reinterpret_cast<const uint8_t*>(p.row_scales) + r * p.scale_stride;
    const uint8_t* first = s < w ? s : w;
    const uint8_t* end = std::max(s + sizeof(float), w + row_bytes);
    PrefetchRow<kLocality, kMaxBytes>(first, static_cast<size_t>(end - first));
  } else {
    PrefetchRow<kLocality, kMaxBytes>(w, row_bytes);
    PrefetchRow<kLocality, kMaxBytes>(reinterpret_cast<const uint8_t*>(p.row_scales + r), sizeof(float));
  }
}

// A row-interleaved record of at most 129 bytes (D <= 248 at 4 bits; 132 if
// 4-aligned, D = 128 at 8 bits) spans at most three cache lines: the ones of
// its first byte, of the byte 64 on (or its last, if shorter) and of its last. Prefetching those three
// addresses takes no loop and no branch, where PrefetchPcqRow's general form
// is about a third of a short-row kernel's instructions. `first` is null
// when the layout does not qualify.
struct ShortRecords {
  ShortRecords(const RequantGatherParams& p, size_t row_bytes) {
    if (p.scale_stride == 0 || p.scale_stride != p.row_stride) return;
    const uint8_t* s = reinterpret_cast<const uint8_t*>(p.row_scales);
    const uint8_t* lo = std::min(s, p.weights);
    const size_t span = static_cast<size_t>(std::max(s + sizeof(float), p.weights + row_bytes) - lo);
    // Records g-byte aligned start at most 64 - g bytes into a line, so up
    // to 128 + g bytes (132 for the 4-aligned D=128 8-bit records) still
    // span three lines at most.
    const uintptr_t bits = reinterpret_cast<uintptr_t>(lo) | p.row_stride | kCacheLine;
    if (span > 2 * kCacheLine + (bits & (~bits + 1))) return;
    first = lo;
    stride = p.row_stride;
    last = span - 1;
    middle = std::min(kCacheLine, last);
  }
  HWY_INLINE void Prefetch(size_t r) const {
    const uint8_t* rec = first + r * stride;
    hwy::Prefetch(rec);
    hwy::Prefetch(rec + middle);
    hwy::Prefetch(rec + last);
  }
  const uint8_t* first = nullptr;
  size_t stride = 0, middle = 0, last = 0;
};

// ---------------------------------------------------------------------------
// Materialized gathers over the uint16 table.

// Copies one row. Short rows are copied with whole vectors (the last one
// overlapping the previous) instead of a memcpy call, whose size dispatch
// costs as much as the copy itself; long rows go to memcpy.
HWY_INLINE void CopyRow(const uint8_t* HWY_RESTRICT src, size_t bytes, uint8_t* HWY_RESTRICT dst) {
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<uint8_t> d8;
  const size_t N = hn::Lanes(d8);
  constexpr size_t kMaxInlineBytes = 1024;
  if (bytes >= N && bytes <= kMaxInlineBytes) {
    size_t k = 0;
    for (; k + N <= bytes; k += N) hn::StoreU(hn::LoadU(d8, src + k), d8, dst + k);
    if (k < bytes) hn::StoreU(hn::LoadU(d8, src + bytes - N), d8, dst + bytes - N);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

void gather_u16(const uint16_t* table, size_t dim, const int64_t* ids, size_t n,
                uint16_t* out) {
  const size_t row_bytes = dim * sizeof(uint16_t);
  const uint8_t* base = reinterpret_cast<const uint8_t*>(table);
  uint8_t* out_bytes = reinterpret_cast<uint8_t*>(out);
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchRows < n) {
      PrefetchRow(base + static_cast<size_t>(ids[i + kPrefetchRows]) * row_bytes, row_bytes);
    }
    CopyRow(base + static_cast<size_t>(ids[i]) * row_bytes, row_bytes, out_bytes + i * row_bytes);
  }
}

template <OutKind K>
HWY_INLINE void GatherU16Dequantized(const uint16_t* table, size_t dim, const ActivationEncoding& act,
                                     const int64_t* ids, size_t n, OutT<K>* HWY_RESTRICT out) {
  using DF = hn::ScalableTag<float>;
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> du16;
  const size_t NF = hn::Lanes(df);
  const ActivationVec<DF> a(df, act);
  const auto zero_point = hn::Set(di, act.zero_point);
  const size_t row_bytes = dim * sizeof(uint16_t);
  const uint8_t* base = reinterpret_cast<const uint8_t*>(table);
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchRows < n) {
      PrefetchRow(base + static_cast<size_t>(ids[i + kPrefetchRows]) * row_bytes, row_bytes);
    }
    const uint16_t* row = table + static_cast<size_t>(ids[i]) * dim;
    OutT<K>* o = out + i * dim;
    size_t j = 0;
    for (; j + NF <= dim; j += NF) {
      // (float)(q - zp) with the subtraction in int32, exactly as the scalar.
      const auto q = hn::Sub(hn::PromoteTo(di, hn::LoadU(du16, row + j)), zero_point);
      const auto y = hn::Mul(a.scale(), hn::ConvertTo(df, q));
      if constexpr (K == OutKind::kF32) {
        hn::StoreU(y, df, o + j);
      } else {
        hn::StoreU(hn::TruncateTo(du16, HalfBits<K>(df, y)), du16, o + j);
      }
    }
    for (; j < dim; ++j) o[j] = ScalarOut<K>(row[j], act);
  }
}

void gather_u16_f32(const uint16_t* table, size_t dim, const ActivationEncoding& act,
                    const int64_t* ids, size_t n, float* out) {
  GatherU16Dequantized<OutKind::kF32>(table, dim, act, ids, n, out);
}
void gather_u16_f16(const uint16_t* table, size_t dim, const ActivationEncoding& act,
                    const int64_t* ids, size_t n, uint16_t* out) {
  GatherU16Dequantized<OutKind::kF16>(table, dim, act, ids, n, out);
}
void gather_u16_bf16(const uint16_t* table, size_t dim, const ActivationEncoding& act,
                     const int64_t* ids, size_t n, uint16_t* out) {
  GatherU16Dequantized<OutKind::kBF16>(table, dim, act, ids, n, out);
}

// ---------------------------------------------------------------------------
// Fused gathers over int8 rows: the arithmetic, vectorized.

// |rne(t)| <= this for every value of a row lets the 8-bit kernels skip the
// clamp to [0, 65535]: the largest |r| with zp + r and zp - r both in range.
HWY_INLINE float UnclampedBound(const ActivationEncoding& act) {
  return static_cast<float>(std::min(act.zero_point, 65535 - act.zero_point));
}

// Whether t = (x * q) * inv(s_a) stays within +-bound for every stored int8 q
// (-128 included), x being the row scale (or s_max for the legacy pattern,
// whose intermediate lies in [-127, 127]). |fl(x * q)| and then |fl(. * inv)|
// are monotone in |q|, and rne in t, so the end value bounds them all; NaN and
// infinite products compare false and keep the clamping loop.
HWY_INLINE bool FitsUnclamped(float x, float inv_sa, float bound) {
  return std::fabs((x * 128.0f) * inv_sa) <= bound;
}

#if HWY_TARGET != HWY_SCALAR
// Columns [0, ...) of one int8 row in pairs of float vectors, for a row that
// FitsUnclamped; returns the next column. Then q16 = zp + rne(t) needs no
// clamp, and no NaN can arise, so each value costs a conversion, the
// contract's two products and one addition: t + 1.5 * 2^23 lies in
// [2^23, 2^24), where the float spacing is 1, so the addition rounds t to
// nearest even and the low 16 bits of the sum are rne(t) mod 2^16. The u16
// output keeps those halves and adds zp in 16 bits (exact, as the sum is in
// [0, 65535]); the float ones subtract 1.5 * 2^23 again, which gives rne(t)
// = q16 - zp as a float exactly, and multiply by s_a (a +0.0f for 0, as the
// scalar (float)(q16 - zp) is).
template <bool kLegacy, OutKind K, class DF>
HWY_INLINE size_t RequantRowS8Unclamped(DF df, const int8_t* HWY_RESTRICT row, size_t dim, hn::Vec<DF> s,
                                        const ActivationVec<DF>& a, const LegacyVec<DF>& legacy,
                                        hn::Vec<hn::Repartition<uint16_t, DF>> zp16, OutT<K>* HWY_RESTRICT o) {
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<int8_t, DF> d8;
  const hn::Repartition<uint16_t, DF> du16;  // two float vectors' worth
  const hn::Rebind<uint16_t, DF> dh16;       // one float vector's worth
  const size_t NF = hn::Lanes(df);
  const auto magic = hn::Set(df, 12582912.0f);
  auto rounded = [&](size_t col) {  // t + 1.5 * 2^23
    auto x = hn::Mul(s, hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, row + col))));
    if constexpr (kLegacy) x = LegacyRequantized(df, x, legacy);
    return hn::Add(hn::Mul(x, a.inv_scale()), magic);
  };
  size_t j = 0;
  for (; j + 2 * NF <= dim; j += 2 * NF) {
    const auto m0 = rounded(j);
    const auto m1 = rounded(j + NF);
    if constexpr (K == OutKind::kU16) {
      const auto v = hn::ConcatEven(du16, hn::BitCast(du16, m1), hn::BitCast(du16, m0));
      hn::StoreU(hn::Add(v, zp16), du16, o + j);
    } else {
      const auto y0 = hn::Mul(a.scale(), hn::Sub(m0, magic));
      const auto y1 = hn::Mul(a.scale(), hn::Sub(m1, magic));
      if constexpr (K == OutKind::kF32) {
        hn::StoreU(y0, df, o + j);
        hn::StoreU(y1, df, o + j + NF);
      } else {
        hn::StoreU(hn::TruncateTo(dh16, HalfBits<K>(df, y0)), dh16, o + j);
        hn::StoreU(hn::TruncateTo(dh16, HalfBits<K>(df, y1)), dh16, o + j + NF);
      }
    }
  }
  return j;
}
#endif

// The constants of RequantRowS8Clamped, broadcast once per call.
template <class DF>
struct S8Consts {
  S8Consts(DF df, const RequantGatherParams& p)
      : act(p.act), max_scale(p.max_scale), a(df, p.act), legacy(df, p.max_scale, 127), q16(df, p.act) {}
  ActivationEncoding act;
  float max_scale;
  ActivationVec<DF> a;
  LegacyVec<DF> legacy;
  Q16IntVec<DF> q16;
};

// Columns [j, dim) of one int8 row with every clamp of the contract.
template <bool kLegacy, OutKind K, class DF>
HWY_NOINLINE void RequantRowS8Clamped(DF df, const int8_t* HWY_RESTRICT row, size_t j, size_t dim, float row_scale,
                                      const S8Consts<DF>& c, OutT<K>* HWY_RESTRICT o) {
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<int8_t, DF> d8;
  const hn::Rebind<uint16_t, DF> du16;
  const size_t NF = hn::Lanes(df);
  const auto s = hn::Set(df, row_scale);
  for (; j + NF <= dim; j += NF) {
    const auto q = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, row + j)));
    auto x = hn::Mul(s, q);  // the dequantized weight s_r * q
    if constexpr (kLegacy) x = LegacyRequantized(df, x, c.legacy);
    const auto r = Q16Unclamped(df, x, c.q16);
    if constexpr (K == OutKind::kU16) {
      hn::StoreU(hn::DemoteTo(du16, r), du16, o + j);  // saturates to [0, 65535]
    } else {
      const auto v = hn::ConvertTo(df, hn::Min(hn::Max(r, hn::Zero(di)), hn::Set(di, 65535)));
      if constexpr (K == OutKind::kF32) {
        hn::StoreU(DequantizeQ16(v, c.a), df, o + j);
      } else {
        hn::StoreU(hn::TruncateTo(du16, HalfBits<K>(df, DequantizeQ16(v, c.a))), du16, o + j);
      }
    }
  }
  for (; j < dim; ++j) {
    const uint16_t v = kLegacy ? legacy_output(row_scale, row[j], c.max_scale, 127, c.act)
                               : optimized_output(row_scale, row[j], c.act);
    o[j] = ScalarOut<K>(v, c.act);
  }
}

#if HWY_TARGET == HWY_AVX3 && HWY_ARCH_X86
// Long int8 rows to uint16, by table: q16 depends only on the row's scale and
// the stored byte, so the row's 256 possible outputs are computed first, with
// the same vector arithmetic as every other row (hence bit-identical), and
// then each value is looked up with AVX-512 VBMI byte permutes: the table's
// low and high bytes are four 64-byte registers each, and 64 values cost
// one single-register permute that spreads the stored bytes over the 128-bit
// lanes, 4 two-register permutes and 2 blends on the sign bit, then 2 in-lane
// unpacks that interleave low and high bytes: 10 operations with the sign
// mask, against about 26 for the arithmetic. (Interleaving with 2 more
// two-register permutes instead of the spread and the unpacks was 0.83x the
// materialized gather at D=4096 on Zen 5, this way 0.88x: the unpacks are
// cheaper than the permutes.) Building the table costs the arithmetic of 256
// values, so it pays only on long rows: on rows in cache, against the
// arithmetic, 0.6x at D=256, 0.87x at 512, 0.98x at 1024, 1.13x at 2048 and
// 1.16x at 4096 (the development VM, a Sapphire Rapids with 2 cores). Compiled into the AVX3
// pass with the extra VBMI flag and taken only where the CPU has it, so the
// target list (and every other kernel's build) stays as it was.
constexpr size_t kS8TableMinDim = 2048;

struct AllInt8 {
  alignas(64) int8_t v[256];
};
constexpr AllInt8 MakeAllInt8() {
  AllInt8 a{};
  for (int b = 0; b < 256; ++b) a.v[b] = static_cast<int8_t>(b < 128 ? b : b - 256);
  return a;
}
// Byte b holds the int8 whose two's-complement bits are b: table entry b is
// the output for a stored byte b.
alignas(64) constexpr AllInt8 kAllInt8 = MakeAllInt8();

struct ByteIndices {
  alignas(64) uint8_t even[64], odd[64], spread[64];
};
constexpr ByteIndices MakeByteIndices() {
  ByteIndices x{};
  for (int i = 0; i < 64; ++i) {
    x.even[i] = static_cast<uint8_t>(2 * i);
    x.odd[i] = static_cast<uint8_t>(2 * i + 1);
  }
  // Lane k's low 8 bytes from values 8k.., its high 8 from 32 + 8k..: the
  // in-lane byte unpacks of the looked-up low and high bytes then give
  // values 0..31 and 32..63 in order.
  for (int k = 0; k < 4; ++k) {
    for (int i = 0; i < 8; ++i) {
      x.spread[16 * k + i] = static_cast<uint8_t>(8 * k + i);
      x.spread[16 * k + 8 + i] = static_cast<uint8_t>(32 + 8 * k + i);
    }
  }
  return x;
}
alignas(64) constexpr ByteIndices kByteIndices = MakeByteIndices();

bool HasVbmi() {
  static const bool has = __builtin_cpu_supports("avx512vbmi");
  return has;
}

// o[j] = table[row[j]] for j < dim, dim >= 64.
__attribute__((target(HWY_TARGET_STR ",avx512vbmi"))) HWY_NOINLINE void LookupRowS8Vbmi(
    const uint16_t* HWY_RESTRICT table, const uint8_t* HWY_RESTRICT row, size_t dim, uint16_t* HWY_RESTRICT o) {
  const __m512i even = _mm512_load_si512(kByteIndices.even);
  const __m512i odd = _mm512_load_si512(kByteIndices.odd);
  const __m512i spread = _mm512_load_si512(kByteIndices.spread);
  __m512i lo[4], hi[4];  // bytes of entries 64k .. 64k + 63
  for (int k = 0; k < 4; ++k) {
    const __m512i a = _mm512_load_si512(table + 64 * k);
    const __m512i b = _mm512_load_si512(table + 64 * k + 32);
    lo[k] = _mm512_permutex2var_epi8(a, even, b);
    hi[k] = _mm512_permutex2var_epi8(a, odd, b);
  }
  // A plain loop, not a lambda: clang does not give a lambda its enclosing
  // function's target attribute, and the VBMI intrinsics need it.
  for (size_t next = 0; next < dim; next += 64) {
    const size_t j = next + 64 <= dim ? next : dim - 64;  // the last 64 again, overlapping: same values
    const __m512i x = _mm512_permutexvar_epi8(spread, _mm512_loadu_si512(row + j));
    const __mmask64 upper = _mm512_movepi8_mask(x);  // byte >= 128: entries 128 .. 255
    const __m512i l = _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(lo[0], x, lo[1]),
                                             _mm512_permutex2var_epi8(lo[2], x, lo[3]));
    const __m512i h = _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(hi[0], x, hi[1]),
                                             _mm512_permutex2var_epi8(hi[2], x, hi[3]));
    _mm512_storeu_si512(o + j, _mm512_unpacklo_epi8(l, h));
    _mm512_storeu_si512(o + j + 32, _mm512_unpackhi_epi8(l, h));
  }
}

// Shorter int8 rows to uint16 with VBMI, by arithmetic in fewer operations
// than RequantRowS8Unclamped's. One byte permute with a zeroing mask puts
// each stored byte in the top byte of a 32-bit lane: q * 2^24 as an int32,
// converted exactly. The row scale is taken times 2^-24, exact while it
// stays normal (|s_r| >= 2^-102, or 0), so s' * (q * 2^24) is the same real
// number as s_r * q and rounds to the same float; then the contract's
// product with 1/s_a. Adding C = 1.5 * 2^23 + zp' (zp' = zp rounded down to
// even) leaves t + C in [2^23, 2^24), where the float spacing is 1, so the
// addition rounds t to nearest even (C is even: ties go the same way) and the
// low 16 bits of the sum are zp' + rne(t) mod 2^16 (1.5 * 2^23 is a multiple
// of 2^16). A two-register byte permute takes those low halves of two
// vectors in column order; an odd zp adds its last 1 in 16 bits, which
// leaves zp + rne(t), in [0, 65535] as the row FitsUnclamped (a -1 before
// it wraps to 0). 64 values cost 4 + 2 permutes and 16 float
// operations (2 more additions for an odd zp), where the permute-and-add
// narrowing takes 28.
struct S8PackIndices {
  alignas(64) uint8_t widen[4][64];  // columns 16k .. 16k + 15 in the top bytes
  alignas(64) uint8_t narrow[64];    // the low 16 bits of 16 + 16 lanes
};
constexpr S8PackIndices MakeS8PackIndices() {
  S8PackIndices x{};
  for (int k = 0; k < 4; ++k) {
    for (int lane = 0; lane < 16; ++lane) {
      for (int b = 0; b < 4; ++b) x.widen[k][4 * lane + b] = static_cast<uint8_t>(16 * k + lane);
    }
  }
  for (int w = 0; w < 32; ++w) {  // word w: lane w % 16 of the first (w < 16) or second register (+64)
    const int src = 4 * (w % 16) + (w < 16 ? 0 : 64);
    x.narrow[2 * w] = static_cast<uint8_t>(src);
    x.narrow[2 * w + 1] = static_cast<uint8_t>(src + 1);
  }
  return x;
}
alignas(64) constexpr S8PackIndices kS8PackIndices = MakeS8PackIndices();

// Whether s_r * 2^-24 is exact: s_r is 0 or at least 2^-102 in magnitude.
HWY_INLINE bool ScalesExactly(float row_scale) {
  return std::fabs(row_scale) >= 0x1p-102f || row_scale == 0.0f;
}

// The float sums t + C for 16 values, t = (s' * (q * 2^24)) * inv.
__attribute__((target(HWY_TARGET_STR ",avx512vbmi"))) HWY_INLINE __m512i RequantSumLanes(__m512i bytes,
                                                                                        __m512i index, __m512 s,
                                                                                        __m512 inv, __m512 c) {
  const __m512i q = _mm512_maskz_permutexvar_epi8(0x8888888888888888ull, index, bytes);
  const __m512 t = _mm512_mul_ps(_mm512_mul_ps(s, _mm512_cvtepi32_ps(q)), inv);
  return _mm512_castps_si512(_mm512_add_ps(t, c));
}

// The optimized uint16 gather for 64 <= dim < kS8TableMinDim: rows that
// FitsUnclamped and ScalesExactly take the arithmetic above (the last 64
// columns again, overlapping, when dim is not a multiple of 64: the same
// values); any other row the clamped path. The whole loop lives here so
// that the constants stay in registers across rows.
template <bool kOddZeroPoint>
__attribute__((target(HWY_TARGET_STR ",avx512vbmi"))) HWY_NOINLINE void RequantGatherS8U16Vbmi(
    const RequantGatherParams& p, const S8Consts<hn::ScalableTag<float>>& consts, const int64_t* ids, size_t n,
    uint16_t* HWY_RESTRICT out) {
  const size_t dim = p.dim;
  const float inv_sa = inv(p.act.scale);
  const float bound = UnclampedBound(p.act);
  const __m512 inv = _mm512_set1_ps(inv_sa);
  const __m512 c = _mm512_set1_ps(static_cast<float>(12582912 + (p.act.zero_point & ~1)));
  const __m512i one = _mm512_set1_epi16(1);
  const __m512i w0 = _mm512_load_si512(kS8PackIndices.widen[0]);
  const __m512i w1 = _mm512_load_si512(kS8PackIndices.widen[1]);
  const __m512i w2 = _mm512_load_si512(kS8PackIndices.widen[2]);
  const __m512i w3 = _mm512_load_si512(kS8PackIndices.widen[3]);
  const __m512i narrow = _mm512_load_si512(kS8PackIndices.narrow);
  const ShortRecords records(p, dim);
  // Rows of at most 128 bytes with their scales apart: the lines of a row's
  // first, 64th and last bytes and of its scale, without PrefetchPcqRow's
  // loops. The layout is read into locals once: the vector stores may alias
  // anything, so fields read through `p` would be loaded again every row.
  const bool short_rows = !records.first && p.scale_stride == 0 && dim <= 2 * kCacheLine;
  const size_t middle = std::min(kCacheLine, dim - 1);
  const bool tail = dim > kPrefetchBytesPerRow;
  const uint8_t* const weights = p.weights;
  const uint8_t* const scales = reinterpret_cast<const uint8_t*>(p.row_scales);
  const size_t row_stride = p.row_stride ? p.row_stride : dim;
  const size_t scale_stride = p.scale_stride ? p.scale_stride : sizeof(float);
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchRows < n) {
      const size_t ahead = static_cast<size_t>(ids[i + kPrefetchRows]);
      if (records.first) {
        records.Prefetch(ahead);
      } else if (short_rows) {
        const uint8_t* w = weights + ahead * row_stride;
        hwy::Prefetch(w);
        hwy::Prefetch(w + middle);
        hwy::Prefetch(w + dim - 1);
        hwy::Prefetch(scales + ahead * scale_stride);
      } else {
        PrefetchPcqRow(p, ahead, dim);
      }
    }
    if (tail && i + 1 < n) PrefetchRowTail(weights + static_cast<size_t>(ids[i + 1]) * row_stride, dim);
    const size_t r = static_cast<size_t>(ids[i]);
    float row_scale;
    std::memcpy(&row_scale, scales + r * scale_stride, sizeof(row_scale));
    const int8_t* row = reinterpret_cast<const int8_t*>(weights + r * row_stride);
    uint16_t* o = out + i * dim;
    if (!FitsUnclamped(row_scale, inv_sa, bound) || !ScalesExactly(row_scale)) {
      RequantRowS8Clamped<false, OutKind::kU16>(hn::ScalableTag<float>(), row, 0, dim, row_scale, consts, o);
      continue;
    }
    const __m512 s = _mm512_set1_ps(row_scale * 0x1p-24f);
    for (size_t next = 0; next < dim; next += 64) {
      const size_t j = next + 64 <= dim ? next : dim - 64;
      const __m512i x = _mm512_loadu_si512(row + j);
      __m512i lo = _mm512_permutex2var_epi8(RequantSumLanes(x, w0, s, inv, c), narrow,
                                            RequantSumLanes(x, w1, s, inv, c));
      __m512i hi = _mm512_permutex2var_epi8(RequantSumLanes(x, w2, s, inv, c), narrow,
                                            RequantSumLanes(x, w3, s, inv, c));
      if constexpr (kOddZeroPoint) {
        lo = _mm512_add_epi16(lo, one);
        hi = _mm512_add_epi16(hi, one);
      }
      _mm512_storeu_si512(o + j, lo);
      _mm512_storeu_si512(o + j + 32, hi);
    }
  }
}
#endif

template <bool kLegacy, OutKind K>
HWY_INLINE void RequantGatherS8(const RequantGatherParams& p, const int64_t* ids, size_t n,
                                OutT<K>* HWY_RESTRICT out) {
  using DF = hn::ScalableTag<float>;
  const DF df;
  const S8Consts<DF> consts(df, p);
  const size_t dim = p.dim;
  const float inv_sa = inv(p.act.scale);
  const float bound = UnclampedBound(p.act);
  // The legacy intermediate is s_max * qi whatever the row: one test a call.
  const bool legacy_fits = kLegacy && FitsUnclamped(p.max_scale, inv_sa, bound);
#if HWY_TARGET != HWY_SCALAR
  const auto zp16 = hn::Set(hn::Repartition<uint16_t, DF>(), static_cast<uint16_t>(p.act.zero_point));
#else
  (void)legacy_fits;
#endif

#if HWY_TARGET == HWY_AVX3 && HWY_ARCH_X86
  const bool by_table = K == OutKind::kU16 && dim >= kS8TableMinDim && HasVbmi();
  if constexpr (!kLegacy && K == OutKind::kU16) {
    if (dim >= 64 && dim < kS8TableMinDim && HasVbmi()) {
      if (p.act.zero_point & 1) RequantGatherS8U16Vbmi<true>(p, consts, ids, n, out);
      else RequantGatherS8U16Vbmi<false>(p, consts, ids, n, out);
      return;
    }
  }
#endif

  const ShortRecords records(p, dim);
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchRows < n) {
      const size_t ahead = static_cast<size_t>(ids[i + kPrefetchRows]);
      if (records.first) records.Prefetch(ahead);
      else PrefetchPcqRow(p, ahead, dim);
    }
    if (i + 1 < n) PrefetchRowTail(RowWeights(p, static_cast<size_t>(ids[i + 1]), dim), dim);
    const size_t r = static_cast<size_t>(ids[i]);
    const float row_scale = RowScale(p, r);
    const int8_t* row = reinterpret_cast<const int8_t*>(RowWeights(p, r, dim));
    OutT<K>* o = out + i * dim;
    size_t j = 0;
#if HWY_TARGET == HWY_AVX3 && HWY_ARCH_X86
    if constexpr (K == OutKind::kU16) {
      if (by_table) {
        alignas(64) uint16_t table[256];
        size_t t = 0;
        if (kLegacy ? legacy_fits : FitsUnclamped(row_scale, inv_sa, bound)) {
          t = RequantRowS8Unclamped<kLegacy, K>(df, kAllInt8.v, 256, hn::Set(df, row_scale), consts.a, consts.legacy,
                                                zp16, table);
        }
        if (t < 256) RequantRowS8Clamped<kLegacy, K>(df, kAllInt8.v, t, 256, row_scale, consts, table);
        LookupRowS8Vbmi(table, reinterpret_cast<const uint8_t*>(row), dim, o);
        continue;
      }
    }
#endif
#if HWY_TARGET != HWY_SCALAR
    if (kLegacy ? legacy_fits : FitsUnclamped(row_scale, inv_sa, bound)) {
      j = RequantRowS8Unclamped<kLegacy, K>(df, row, dim, hn::Set(df, row_scale), consts.a, consts.legacy, zp16, o);
      if (j == dim) continue;
    }
#endif
    RequantRowS8Clamped<kLegacy, K>(df, row, j, dim, row_scale, consts, o);
  }
}

#define QEMB_DEFINE_GATHER_KERNELS(name, impl, legacy)                                              \
  void name##_u16(const RequantGatherParams& p, const int64_t* ids, size_t n, uint16_t* out) {     \
    impl<legacy, OutKind::kU16>(p, ids, n, out);                                                    \
  }                                                                                                 \
  void name##_f32(const RequantGatherParams& p, const int64_t* ids, size_t n, float* out) {        \
    impl<legacy, OutKind::kF32>(p, ids, n, out);                                                    \
  }                                                                                                 \
  void name##_f16(const RequantGatherParams& p, const int64_t* ids, size_t n, uint16_t* out) {     \
    impl<legacy, OutKind::kF16>(p, ids, n, out);                                                    \
  }                                                                                                 \
  void name##_bf16(const RequantGatherParams& p, const int64_t* ids, size_t n, uint16_t* out) {    \
    impl<legacy, OutKind::kBF16>(p, ids, n, out);                                                   \
  }
QEMB_DEFINE_GATHER_KERNELS(requant_gather_s8, RequantGatherS8, false)
QEMB_DEFINE_GATHER_KERNELS(legacy_gather_s8, RequantGatherS8, true)

// ---------------------------------------------------------------------------
// Fused gathers over packed 4-bit rows: a 16-entry lookup table per row.

// Nibble k holds the two's-complement value k < 8 ? k : k - 16.
alignas(64) static constexpr float kNibbleValues[16] = {0,  1,  2,  3,  4,  5,  6,  7,
                                                        -8, -7, -6, -5, -4, -3, -2, -1};

// The 16 outputs of one row, as uint16 and split into low and high bytes
// (byte-shuffle tables).
struct NibbleLut {
  alignas(16) uint8_t lo[16];
  alignas(16) uint8_t hi[16];
  alignas(32) uint16_t u16[16];
};

// The descriptor the per-row lookup tables are computed with: 16 floats.
using LutTag = hn::CappedTag<float, 16>;

// The table holds what the kernel writes: q16, or the half-precision bits of
// its dequantized value (binary16 / bfloat16 outputs cost no more per value).
template <bool kLegacy, OutKind K = OutKind::kU16, bool kBytes = true>
HWY_INLINE void BuildNibbleLut(float row_scale, const ActivationVec<LutTag>& a,
                               const LegacyVec<LutTag>& legacy, NibbleLut& lut) {
  const LutTag df;
  const hn::Rebind<uint8_t, LutTag> du8;
  const hn::Rebind<uint16_t, LutTag> du16;
  const size_t NF = hn::Lanes(df);
  const auto s = hn::Set(df, row_scale);
  for (size_t k = 0; k < 16; k += NF) {
    auto x = hn::Mul(s, hn::Load(df, kNibbleValues + k));  // the dequantized weight s_r * q
    if constexpr (kLegacy) x = LegacyRequantized(df, x, legacy);
    const auto v = Q16(df, x, a);
    hn::Vec<hn::RebindToUnsigned<LutTag>> bits;  // low 16 bits: the output
    if constexpr (K == OutKind::kF16 || K == OutKind::kBF16) {
      bits = HalfBits<K>(df, DequantizeQ16(v, a));
    } else {
      bits = Q16Bits(df, v);
    }
    hn::StoreU(hn::TruncateTo(du16, bits), du16, lut.u16 + k);
    if constexpr (kBytes) {
      hn::StoreU(hn::TruncateTo(du8, bits), du8, lut.lo + k);
      hn::StoreU(hn::TruncateTo(du8, hn::ShiftRight<8>(bits)), du8, lut.hi + k);
    }
  }
}

// The byte-shuffle path needs 128-bit blocks; HWY_SCALAR (the fallback when
// the compiler is too old for EMU128) has one-lane vectors and uses the row's
// table one column at a time.
#undef QEMB_NIBBLE_SHUFFLES
#if HWY_TARGET != HWY_SCALAR
#define QEMB_NIBBLE_SHUFFLES 1
#else
#define QEMB_NIBBLE_SHUFFLES 0
#endif

#if QEMB_NIBBLE_SHUFFLES
// Looks up the 2 * Lanes(d8) values of Lanes(d8) packed bytes and hands the
// results to `sink(part, u16_vector)` as four vectors of Lanes(d8) / 2 values,
// part 0..3 in column order.
//
// Byte shuffles and interleaves work within 128-bit blocks. Block b of the
// input yields, for each part, the 8 columns of its dwords 0..3 respectively.
// So when a vector has B > 1 blocks, the packed dwords are first permuted so
// that input dword 4b + part holds packed dword part * B + b; every part then
// comes out as contiguous columns.
template <class D8, class Sink>
HWY_INLINE void LookupNibbles(D8 d8, hn::Vec<D8> packed, hn::Vec<D8> tab_lo,
                              hn::Vec<D8> tab_hi, Sink&& sink) {
  const hn::RepartitionToWide<D8> d16;
  const auto lo_nibbles = hn::And(packed, hn::Set(d8, 0x0F));
  const auto hi_nibbles = hn::ShiftRight<4>(packed);
  // Column order: column 2k is the low nibble of byte k, 2k + 1 the high one.
  const auto idx_a = hn::InterleaveLower(d8, lo_nibbles, hi_nibbles);
  const auto idx_b = hn::InterleaveUpper(d8, lo_nibbles, hi_nibbles);
  const auto lo_a = hn::TableLookupBytes(tab_lo, idx_a);
  const auto hi_a = hn::TableLookupBytes(tab_hi, idx_a);
  const auto lo_b = hn::TableLookupBytes(tab_lo, idx_b);
  const auto hi_b = hn::TableLookupBytes(tab_hi, idx_b);
  sink(0, hn::ZipLower(d16, lo_a, hi_a));
  sink(1, hn::ZipUpper(d16, lo_a, hi_a));
  sink(2, hn::ZipLower(d16, lo_b, hi_b));
  sink(3, hn::ZipUpper(d16, lo_b, hi_b));
}

// dequantize_activation() constants for u16 vectors of type D16, broadcast
// once per call (the output stores could alias a float read per row).
template <class D16>
struct DequantVec {
  using DF = hn::Repartition<float, D16>;
  using DI = hn::RebindToSigned<DF>;
  explicit DequantVec(const ActivationEncoding& act)
      : scale(DF(), act.scale), zero_point(DI(), act.zero_point) {}
  Broadcast<DF> scale;
  Broadcast<DI> zero_point;
};

// Writes the u16 vector v (holding q16 values) as uint16 or dequantized float.
template <class D16, typename Out>
HWY_INLINE void StoreOutputs(D16 d16, hn::Vec<D16> v, const DequantVec<D16>& dq,
                             Out* HWY_RESTRICT o) {
  if constexpr (sizeof(Out) == sizeof(uint16_t)) {
    hn::StoreU(v, d16, o);
  } else {
    const typename DequantVec<D16>::DF df;
    const typename DequantVec<D16>::DI di;
    const hn::Half<D16> dh16;
    const size_t NF = hn::Lanes(df);
    // (float)(q - zp) with the subtraction in int32, exactly as the scalar.
    const auto q_lo = hn::Sub(hn::PromoteTo(di, hn::LowerHalf(dh16, v)), dq.zero_point());
    const auto q_hi = hn::Sub(hn::PromoteTo(di, hn::UpperHalf(dh16, v)), dq.zero_point());
    hn::StoreU(hn::Mul(dq.scale(), hn::ConvertTo(df, q_lo)), df, o);
    hn::StoreU(hn::Mul(dq.scale(), hn::ConvertTo(df, q_hi)), df, o + NF);
  }
}

// Columns [j, ...) of one row in whole vectors of D8; returns the next column.
template <class D8, typename Out>
HWY_INLINE size_t LookupRowVectors(D8 d8, const uint8_t* HWY_RESTRICT row, size_t j, size_t dim,
                                   const NibbleLut& lut, const uint32_t* transpose,
                                   const DequantVec<hn::RepartitionToWide<D8>>& dq,
                                   Out* HWY_RESTRICT o) {
  using D16 = hn::RepartitionToWide<D8>;
  const D16 d16;
  const hn::Repartition<uint32_t, D8> d32;
  const size_t N = hn::Lanes(d8);
  const bool permute = N > 16;
  const auto transpose_idx = hn::SetTableIndices(d32, transpose);
  const auto tab_lo = hn::LoadDup128(d8, lut.lo);
  const auto tab_hi = hn::LoadDup128(d8, lut.hi);
  for (; j + 2 * N <= dim; j += 2 * N) {
    auto packed = hn::LoadU(d8, row + j / 2);
    if (permute) {
      packed = hn::BitCast(d8, hn::TableLookupLanes(hn::BitCast(d32, packed), transpose_idx));
    }
    LookupNibbles(d8, packed, tab_lo, tab_hi, [&](size_t part, hn::Vec<D16> v) {
      StoreOutputs(d16, v, dq, o + j + part * (N / 2));
    });
  }
  return j;
}
#endif  // QEMB_NIBBLE_SHUFFLES

#undef QEMB_NIBBLE_WORD_PERMUTE
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define QEMB_NIBBLE_WORD_PERMUTE 1
// The row's 16 outputs, twice, fill the 32 uint16 lanes that vpermw indexes
// with the low 5 bits of each index word: an index then needs only its low
// 4 bits right. 32 columns cost a word permute that puts input word
// 8v + c / 4 in lane c, a shift by 4 * (c % 4) that brings column c's nibble
// to the bottom, and the table permute: 3 shuffle-port operations, against
// the byte-shuffle path's 11 for 128 columns plus its byte-table set-up.
// Cold at D=128 this gains only ~2%: the gather is bound by its reads and its
// 256 B of output a row, not by these operations.
struct WordPermuteIndices {
  WordPermuteIndices() {
    alignas(64) uint16_t gather[4][32], shift[32];
    for (int v = 0; v < 4; ++v)
      for (int c = 0; c < 32; ++c) gather[v][c] = static_cast<uint16_t>(8 * v + c / 4);
    for (int c = 0; c < 32; ++c) shift[c] = static_cast<uint16_t>(4 * (c % 4));
    for (int v = 0; v < 4; ++v) words[v] = _mm512_load_si512(gather[v]);
    shifts = _mm512_load_si512(shift);
  }
  __m512i words[4];  // for the 32 columns of bytes [16v, 16v + 16) of a 64-byte load
  __m512i shifts;
};

// Columns [0, ...) of one row in groups of 32; returns the next column.
template <typename Out>
HWY_INLINE size_t LookupRowWordPermute(const uint8_t* HWY_RESTRICT row, size_t dim, const NibbleLut& lut,
                                       const WordPermuteIndices& idx,
                                       const DequantVec<hn::Full512<uint16_t>>& dq, Out* HWY_RESTRICT o) {
  const hn::Full512<uint16_t> d16;
  const __m256i half = _mm256_load_si256(reinterpret_cast<const __m256i*>(lut.u16));
  const __m512i table = _mm512_inserti64x4(_mm512_castsi256_si512(half), half, 1);
  auto lookup = [&](__m512i packed, int v, size_t j) {
    const __m512i nibbles = _mm512_srlv_epi16(_mm512_permutexvar_epi16(idx.words[v], packed), idx.shifts);
    StoreOutputs(d16, hn::Vec512<uint16_t>{_mm512_permutexvar_epi16(nibbles, table)}, dq, o + j);
  };
  size_t j = 0;
  for (; j + 128 <= dim; j += 128) {
    const __m512i packed = _mm512_loadu_si512(row + j / 2);
    for (int v = 0; v < 4; ++v) lookup(packed, v, j + 32 * v);
  }
  for (; j + 32 <= dim; j += 32) {
    lookup(_mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + j / 2))), 0, j);
  }
  return j;
}
#else
#define QEMB_NIBBLE_WORD_PERMUTE 0
#endif

template <bool kLegacy, OutKind K>
HWY_INLINE void RequantGatherS4(const RequantGatherParams& p, const int64_t* ids, size_t n,
                                OutT<K>* HWY_RESTRICT out) {
  // The half outputs' tables hold the output bits, so they store as uint16.
  constexpr OutKind kLut = K == OutKind::kF32 ? OutKind::kU16 : K;
  using Out = OutT<K>;
  const LutTag dlut;
  const ActivationVec<LutTag> lut_act(dlut, p.act);
  const LegacyVec<LutTag> lut_legacy(dlut, p.max_scale, 7);
  const size_t dim = p.dim;
  const size_t row_bytes = (dim + 1) / 2;

#if QEMB_NIBBLE_SHUFFLES && !QEMB_NIBBLE_WORD_PERMUTE
  using D8 = hn::ScalableTag<uint8_t>;
  using D8x16 = hn::Full128<uint8_t>;
  const D8 d8;
  const D8x16 d8x16;
  const size_t N = hn::Lanes(d8);
  // The dword permutation of LookupNibbles (identity for one block).
  const size_t blocks = N / 16;
  alignas(64) uint32_t transpose[hn::MaxLanes(hn::Repartition<uint32_t, D8>())];
  for (size_t b = 0; b < blocks; ++b) {
    for (size_t part = 0; part < 4; ++part) {
      transpose[4 * b + part] = static_cast<uint32_t>(part * blocks + b);
    }
  }
  alignas(16) static constexpr uint32_t kIdentity[4] = {0, 1, 2, 3};
  const DequantVec<hn::RepartitionToWide<D8>> dequant(p.act);
  const DequantVec<hn::RepartitionToWide<D8x16>> dequant_x16(p.act);
#endif

#if QEMB_NIBBLE_WORD_PERMUTE
  const WordPermuteIndices word_permute;
  const DequantVec<hn::Full512<uint16_t>> dequant_words(p.act);
#endif
  NibbleLut lut;
  const ShortRecords records(p, row_bytes);
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchRows < n) {
      const size_t ahead = static_cast<size_t>(ids[i + kPrefetchRows]);
      if (records.first) records.Prefetch(ahead);
      else PrefetchPcqRow(p, ahead, row_bytes);
    }
    const size_t r = static_cast<size_t>(ids[i]);
    BuildNibbleLut<kLegacy, kLut, !QEMB_NIBBLE_WORD_PERMUTE>(RowScale(p, r), lut_act, lut_legacy, lut);
    const uint8_t* row = RowWeights(p, r, row_bytes);
    Out* o = out + i * dim;

    size_t j = 0;  // the next column; even until the scalar tail
#if QEMB_NIBBLE_WORD_PERMUTE
    j = LookupRowWordPermute(row, dim, lut, word_permute, dequant_words, o);
#elif QEMB_NIBBLE_SHUFFLES
    j = LookupRowVectors(d8, row, j, dim, lut, transpose, dequant, o);
    if (N > 16) j = LookupRowVectors(d8x16, row, j, dim, lut, kIdentity, dequant_x16, o);
#endif
    for (; j < dim; ++j) {
      const uint8_t byte = row[j / 2];
      const uint16_t v = lut.u16[(j & 1) ? (byte >> 4) : (byte & 0x0F)];
      if constexpr (K == OutKind::kF32) {
        o[j] = dequantize_activation(v, p.act);
      } else {
        o[j] = v;
      }
    }
  }
}

QEMB_DEFINE_GATHER_KERNELS(requant_gather_s4, RequantGatherS4, false)
QEMB_DEFINE_GATHER_KERNELS(legacy_gather_s4, RequantGatherS4, true)
#undef QEMB_DEFINE_GATHER_KERNELS

#include "kernels/bag_kernels-inl.h"

}  // namespace HWY_NAMESPACE
}  // namespace qemb
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <string>
#include <vector>

#include "kernels/dispatch.h"

namespace qemb {

#define QEMB_EXPORT_KERNEL(name, type, family, wbits, abits, form, impl) \
  QEMB_KERNEL_IMPL_tuned_##impl(HWY_EXPORT(name);)
QEMB_GATHER_KERNELS(QEMB_EXPORT_KERNEL)
#undef QEMB_EXPORT_KERNEL

// The generic rows' kernels (scheme_kernels.cc).
bool fill_scheme_kernels(int64_t target, KernelSet& set);

namespace {

bool make_kernel_set(int64_t target, KernelSet& set) {
  const size_t index = dispatch_index(target);
  set.isa = hwy::TargetName(target);
  set.hwy_target = target;
  bool complete = true;
#define QEMB_FILL_KERNEL(name, type, family, wbits, abits, form, impl) \
  QEMB_KERNEL_IMPL_tuned_##impl(set.name = HWY_DISPATCH_TABLE(name)[index];   \
                                complete = complete && set.name != nullptr;)
  QEMB_GATHER_KERNELS(QEMB_FILL_KERNEL)
#undef QEMB_FILL_KERNEL
  return fill_scheme_kernels(target, set) && complete;
}

std::vector<KernelSet> build_supported_sets() {
  std::vector<KernelSet> sets;
  // Best first: hwy orders targets from the lowest bit, which is the best.
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    KernelSet set;
    if (make_kernel_set(target, set)) sets.push_back(set);
  }
  if (sets.empty()) sets.push_back(scalar_reference_kernels());  // cannot happen on a sane build
  return sets;
}

const std::vector<KernelSet>& supported_sets() {
  static const std::vector<KernelSet> sets = build_supported_sets();
  return sets;
}

}  // namespace

const KernelSet& best_kernels() { return supported_sets().front(); }

std::vector<KernelSet> all_supported_kernel_sets() { return supported_sets(); }

std::vector<std::string> compiled_kernel_isas() {
  std::vector<std::string> isas;
  for (int64_t targets = HWY_TARGETS; targets != 0; targets &= targets - 1) {
    isas.emplace_back(hwy::TargetName(targets & -targets));  // lowest bit: the best left
  }
  return isas;
}

const KernelSet* find_kernel_set(std::string_view isa) {
  for (const KernelSet& set : supported_sets()) {
    if (isa == set.isa) return &set;
  }
  if (isa == scalar_reference_kernels().isa) return &scalar_reference_kernels();
  return nullptr;
}

const char* kernel_stem(GatherKernel k) {
  switch (k) {
#define QEMB_KERNEL_STEM(name, ...) \
  case GatherKernel::name:           \
    return #name;
    QEMB_GATHER_KERNELS(QEMB_KERNEL_STEM)
#undef QEMB_KERNEL_STEM
  }
  return "unknown_kernel";
}

std::string kernel_name(const KernelSet& set, GatherKernel k) {
  return std::string(kernel_stem(k)) + "[" + set.isa + "]";
}

}  // namespace qemb
#endif  // HWY_ONCE
