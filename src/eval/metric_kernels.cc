// Eval's metric kernels (eval/metric_kernels.h) for every Highway target this
// build compiles; the HWY_ONCE pass exports them and builds the sets.
#include <cfloat>
#include <cmath>
#include <cstring>

#include <algorithm>
#include <bit>

// The partial sums need a compile-time lane count and arrays of vectors,
// which SVE's sizeless, length-agnostic vectors do not have: an Arm CPU with
// SVE runs the NEON version (every AArch64 CPU has NEON).
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "eval/metric_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "eval/metric_kernels.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernels/requant-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qemb {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// 512-bit x86 targets look small tables up in a register (scheme_row).
#undef QEMB_TABLE_IN_REGISTER
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
#define QEMB_TABLE_IN_REGISTER 1
#else
#define QEMB_TABLE_IN_REGISTER 0
#endif

// The numeric.h formulas in float vectors (requant-inl.h), over
// q = -qmax .. qmax; the lanes past 2 * qmax + 1 are scratch.
void pattern_tables(bool legacy, float row_scale, float max_scale, int qmax, const ActivationEncoding& act,
                    float* y, float* w) {
  using TF = hn::ScalableTag<float>;
  const TF df;
  const hn::RebindToSigned<TF> di;
  const size_t N = hn::Lanes(df);
  const ActivationVec<TF> a(df, act);
  const LegacyVec<TF> l(df, max_scale, qmax);
  const auto s = hn::Set(df, row_scale);
  const size_t count = static_cast<size_t>(2 * qmax + 1);
  for (size_t i = 0; i < count; i += N) {
    // Iota in int32: GCC 12 at -O3 miscompiles Highway 1.0.3's float Iota on AVX-512.
    const auto qf = hn::ConvertTo(df, hn::Iota(di, static_cast<int32_t>(i) - qmax));
    const auto dequantized = hn::Mul(s, qf);  // s_r * (float)q
    auto wv = dequantized;
    if (legacy) wv = LegacyRequantized(df, dequantized, l);
    hn::StoreU(wv, df, w + i);
    if (act.bits == 0) {  // weight-only: y is the dequantized weight itself
      hn::StoreU(wv, df, y + i);
      continue;
    }
    // q_A(w) as an integer-valued float (requant-inl.h's Q16 with 2^A - 1 for 65535).
    const auto r = hn::Add(RoundHalfEven(df, hn::Mul(wv, a.inv_scale())), a.zero_point());
    const auto v = hn::Min(MaxOrLowerIfNaN<TF>(r, hn::Zero(df)), hn::Set(df, static_cast<float>(act.qmax())));
    hn::StoreU(DequantizeQ16(v, a), df, y + i);
  }
}

// At most kRowPartials float lanes, so a vector's lanes are partials.
using DF = hn::CappedTag<float, kRowPartials>;
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using D8 = hn::Rebind<int8_t, DF>;
constexpr size_t kLanes = hn::MaxLanes(DF());
constexpr size_t kGroups = kRowPartials / kLanes;

// Partial sums: group g, lane l holds the columns j with j % kRowPartials ==
// g * kLanes + l, added in column order.
struct Partials {
  float p[kRowPartials] = {};
  void store(const hn::Vec<DF>* acc) {
    for (size_t g = 0; g < kGroups; ++g) hn::StoreU(acc[g], DF(), p + g * kLanes);
  }
};

// Columns per block: a block's count indices are kept, then counted in a
// tight loop apart from the vector work.
constexpr size_t kBlock = 256;

// ++counts[*i] for i in [begin, end): a tight loop of increments, apart from
// the vector work, whose registers it would otherwise spill. Unrolled by 8,
// indices loaded first: the loop's own compare and branch per increment cost
// about a tenth of eval's time.
HWY_INLINE void count_indices(uint64_t* HWY_RESTRICT counts, const int32_t* begin, const int32_t* end) {
  const int32_t* i = begin;
  for (; i + 8 <= end; i += 8) {
    const int32_t a = i[0], b = i[1], c = i[2], d = i[3], e = i[4], f = i[5], g = i[6], h = i[7];
    ++counts[a];
    ++counts[b];
    ++counts[c];
    ++counts[d];
    ++counts[e];
    ++counts[f];
    ++counts[g];
    ++counts[h];
  }
  for (; i < end; ++i) ++counts[*i];
}

// The count indices of 16 columns wait kCountLag steps in a ring before
// they are counted: by then their stores have left the core (a load right
// after a vector store waits for it), and the increments run on the load and
// store ports beside the next steps' vector work.
constexpr size_t kCountLag = 2, kRing = 4;

// Two int32 indices per 64-bit load: the loads, more than the adds, bound
// the increments.
constexpr int kLowHalf = std::endian::native == std::endian::little ? 0 : 32;
constexpr int kHighHalf = 32 - kLowHalf;

// The smallest float >= v and the largest float <= v: for a float x,
// x < v iff x < ceil_float(v), and x > v iff x > floor_float(v).
float ceil_float(double v) {
  float f = static_cast<float>(v);
  if (static_cast<double>(f) < v) f = std::nextafter(f, INFINITY);
  return f;
}
float floor_float(double v) {
  float f = static_cast<float>(v);
  if (static_cast<double>(f) > v) f = std::nextafter(f, -INFINITY);
  return f;
}

// Histogram::add's category of v (0 below, 1 + bin, n + 1 above), in double.
HWY_INLINE size_t value_category(double v, const ValueBins& bins) {
  if (v < bins.lo) return 0;
  if (v >= bins.hi) return static_cast<size_t>(bins.n) + 1;
  const auto bin = static_cast<size_t>((v - bins.lo) / (bins.hi - bins.lo) * static_cast<double>(bins.n));
  return std::min(bin, static_cast<size_t>(bins.n) - 1) + 1;
}

void row_values(const float* x, size_t dim, const ValueBins& bins, RowValues* out, uint64_t* HWY_RESTRICT counts) {
  const DF df;
  const DI di;
  // First the row's range and sum of squares, then the counts: a row wholly
  // inside the bins and the clip bounds (eval's rows always are, with no
  // calibration tokens) skips the outside tests.
  hn::Vec<DF> acc[kGroups];
  for (size_t g = 0; g < kGroups; ++g) acc[g] = hn::Zero(df);
  auto lo = hn::Set(df, INFINITY), hi = hn::Set(df, -INFINITY);
  size_t j = 0;
  for (; j + kRowPartials <= dim; j += kRowPartials) {
    for (size_t g = 0; g < kGroups; ++g) {
      const auto xv = hn::LoadU(df, x + j + g * kLanes);
      lo = hn::Min(lo, xv);
      hi = hn::Max(hi, xv);
      acc[g] = hn::Add(acc[g], hn::Mul(xv, xv));
    }
  }
  const size_t vector_end = j;
  Partials x2;
  x2.store(acc);
  float min_s = vector_end ? hn::GetLane(hn::MinOfLanes(df, lo)) : INFINITY;
  float max_s = vector_end ? hn::GetLane(hn::MaxOfLanes(df, hi)) : -INFINITY;
  for (; j < dim; ++j) {
    x2.p[j % kRowPartials] += x[j] * x[j];
    min_s = std::min(min_s, x[j]);
    max_s = std::max(max_s, x[j]);
  }
  out->x2 = add_partials(x2.p);
  out->x_min = min_s;
  out->x_max = max_s;
  out->amax = std::max(std::fabs(min_s), std::fabs(max_s));
  out->constant = min_s == max_s;  // every value equals the first (-0 == +0)
  const float clip_lo = ceil_float(bins.clip_lo), clip_hi = floor_float(bins.clip_hi);
  int64_t clipped = 0;
  if (min_s < clip_lo || max_s > clip_hi)
    for (size_t k = 0; k < dim; ++k) clipped += x[k] < clip_lo || x[k] > clip_hi;
  out->clipped = clipped;

  // Histogram::add's bin is (size_t)((v - lo) / (hi - lo) * n) in double.
  // In float, t = (x - lo) * (n / (hi - lo)) is within 2^-22 (n + |lo| n /
  // (hi - lo)) of it, so its floor is the same unless t lies within `margin`
  // of an integer (0 and n included): only then (about never) a vector's
  // values go the double way, as do rows not wholly inside the bins and bins
  // too fine for float.
  const double per_unit_d = static_cast<double>(bins.n) / (bins.hi - bins.lo);
  const double margin_d = std::ldexp(static_cast<double>(bins.n) + std::fabs(bins.lo) * per_unit_d + 2.0, -21);
  const bool inside = min_s >= ceil_float(bins.lo) && max_s < ceil_float(bins.hi);
  const bool float_bins = inside && margin_d < 1.0 / 64 && std::isfinite(per_unit_d);
  const auto lo_f = hn::Set(df, static_cast<float>(bins.lo)), per_unit = hn::Set(df, static_cast<float>(per_unit_d));
  const auto margin = hn::Set(df, static_cast<float>(margin_d));
  const auto one_minus_margin = hn::Set(df, 1.0f - static_cast<float>(margin_d));
  const int32_t stride = bins.n + 2;
  const auto copy1 = hn::Add(hn::Mul(hn::And(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(kValueCopies - 1))),
                                     hn::Set(di, stride)),
                             hn::Set(di, 1));
  HWY_ALIGN int32_t cat[kBlock];
  j = 0;
  while (j < vector_end) {
    const size_t block_end = j + std::min(kBlock, vector_end - j);
    int32_t* at = cat;
    for (; j < block_end; j += kRowPartials) {
     for (size_t g = 0; g < kGroups; ++g, at += kLanes) {
      const float* xp = x + j + g * kLanes;
      const auto xv = hn::LoadU(df, xp);
      const auto t = hn::Mul(hn::Sub(xv, lo_f), per_unit);
      const auto ft = hn::Floor(t);
      const auto frac = hn::Sub(t, ft);
      if (HWY_UNLIKELY(!float_bins ||
                       !hn::AllFalse(df, hn::Or(hn::Lt(frac, margin), hn::Gt(frac, one_minus_margin))))) {
        for (size_t l = 0; l < kLanes; ++l)
          at[l] = static_cast<int32_t>((l % kValueCopies) * static_cast<size_t>(stride) + value_category(xp[l], bins));
        continue;
      }
      // Not near 0 or n: the floor is a bin.
      hn::Store(hn::Add(hn::ConvertTo(di, ft), copy1), di, at);
     }
    }
    count_indices(counts, cat, at);
  }
  for (; j < dim; ++j) ++counts[(j % kValueCopies) * static_cast<size_t>(stride) + value_category(x[j], bins)];
}

// The numeric.h formulas per value, the same bits as pattern_tables.
// quantize_weight as QuantizeToInt8 computes it (requant-inl.h): the product
// clamped to [-qmax, qmax], then t + 1.5 * 2^23, whose bits are those of
// 1.5 * 2^23 plus rne(t), and less 1.5 * 2^23 as a float, rne(t) itself.
// y = s_a * (clamp(rne(w / s_a) + zp, 0, 2^A - 1) - zp), here as s_a *
// clamp(rne(w / s_a), -zp, 2^A - 1 - zp), which is equal (a weight-only
// scheme, act.bits == 0, has y = w): the integer-valued
// floats add and subtract exactly below 2^24, and beyond it both clamp to
// the same end.
struct Levels {
  Levels(DF df, const SchemeParams& p)
      : legacy(df, p.max_scale, p.qmax),
        inv_s(hn::Set(df, inv(p.row_scale))),
        s(hn::Set(df, p.row_scale)),
        qmax(hn::Set(df, static_cast<float>(p.qmax))),
        neg_qmax(hn::Set(df, static_cast<float>(-p.qmax))),
        magic(hn::Set(df, 12582912.0f)),
        scale(hn::Set(df, p.act.scale)),
        inv_scale(hn::Set(df, inv(p.act.scale))),
        low(hn::Set(df, static_cast<float>(-p.act.zero_point))),
        high(hn::Set(df, static_cast<float>(p.act.qmax() - p.act.zero_point))),
        weight_only(p.act.bits == 0) {}
  // rne(t) + 1.5 * 2^23 for the clamped t = x * inv(s_r).
  HWY_INLINE hn::Vec<DF> Biased(hn::Vec<DF> x) const {
    return hn::Add(hn::Min(MaxOrLowerIfNaN<DF>(hn::Mul(x, inv_s), neg_qmax), qmax), magic);
  }
  // s_r * (float)q
  HWY_INLINE hn::Vec<DF> Dequantized(hn::Vec<DF> biased) const { return hn::Mul(s, hn::Sub(biased, magic)); }
  HWY_INLINE hn::Vec<DF> Output(hn::Vec<DF> w) const {
    if (weight_only) return w;  // no activation step
    const auto r = RoundHalfEven(DF(), hn::Mul(w, inv_scale));
    return hn::Mul(scale, hn::Min(MaxOrLowerIfNaN<DF>(r, low), high));
  }
  LegacyVec<DF> legacy;
  hn::Vec<DF> inv_s, s, qmax, neg_qmax, magic, scale, inv_scale, low, high;
  bool weight_only;
};

// Error counts per 16 columns: ++counts[index] in the column's copy, the
// copies' bases in registers.
struct ErrorCounter {
  explicit ErrorCounter(uint64_t* counts) : c(counts) {}
  HWY_INLINE void count(const int32_t* HWY_RESTRICT i) const {
    static_assert(kErrorCopies == 4 && kRowPartials == 16, "one copy per column mod 4, 16 columns");
    // The copies lie at fixed offsets from one base register.
    uint64_t v[8];
    std::memcpy(v, i, sizeof v);
    for (size_t k = 0; k < 8; k += 2) {
      ++c[static_cast<uint32_t>(v[k] >> kLowHalf)];
      ++c[kErrorCountStride + static_cast<uint32_t>(v[k] >> kHighHalf)];
      ++c[2 * kErrorCountStride + static_cast<uint32_t>(v[k + 1] >> kLowHalf)];
      ++c[3 * kErrorCountStride + static_cast<uint32_t>(v[k + 1] >> kHighHalf)];
    }
  }
  uint64_t* HWY_RESTRICT c;
};

// The count index of |e| = a: its slot (its bits shifted), kErrorSlots for 0.
HWY_INLINE hn::Vec<DI> ErrorIndex(hn::Vec<DF> a) {
  const DF df;
  const DI di;
#if QEMB_TABLE_IN_REGISTER
  // vfixupimmps turns +0 (token 2) into -0 (response 7), whose bits shifted
  // are kErrorSlots, and keeps every other value: one instruction for the
  // compare and the select.
  const auto zero_to_neg_zero = hn::Set(di, 0x700);
  a = hn::Vec<DF>{_mm512_fixupimm_ps(a.raw, a.raw, zero_to_neg_zero.raw, 0)};
  return hn::BitCast(di, hn::ShiftRight<kErrorSlotShift>(hn::BitCast(DU(), a)));
#else
  const auto slot = hn::BitCast(di, hn::ShiftRight<kErrorSlotShift>(hn::BitCast(DU(), a)));
  return hn::IfThenElse(hn::RebindMask(di, hn::Eq(a, hn::Zero(df))), hn::Set(di, kErrorSlots), slot);
#endif
}

#if QEMB_TABLE_IN_REGISTER
// add_partials of 8 rows of 16 partials at once (v[k] holds row k's partial
// i in lane i): the same double additions in the same tree, two lanes at a
// time: pairs of lanes, then pairs of pairs (two rows per vector), then
// quarters (four rows), then halves (all eight).
HWY_INLINE hn::Vec512<double> PairSums(hn::Vec512<double> hi, hn::Vec512<double> lo) {
  const hn::Full512<double> dd;
  return hn::Add(hn::ConcatEven(dd, hi, lo), hn::ConcatOdd(dd, hi, lo));
}
HWY_INLINE void AddPartials8(const hn::Vec<DF>* v, double* out) {
  const hn::Full512<double> dd;
  const hn::Full256<float> dh;
  hn::Vec512<double> pairs[8], quads[4], eights[2];
  for (int k = 0; k < 8; ++k)  // p2m + p2m+1, m = 0 .. 7
    pairs[k] = PairSums(hn::PromoteTo(dd, hn::UpperHalf(dh, v[k])), hn::PromoteTo(dd, hn::LowerHalf(dh, v[k])));
  for (int k = 0; k < 4; ++k) quads[k] = PairSums(pairs[2 * k + 1], pairs[2 * k]);  // 4 lanes a row
  for (int k = 0; k < 2; ++k) eights[k] = PairSums(quads[2 * k + 1], quads[2 * k]);  // 2 lanes a row
  hn::Store(PairSums(eights[1], eights[0]), dd, out);
}
#endif

// One pattern's sums, maxima and error indices over a row.
struct PatternAcc {
  static constexpr int kSums = 7;  // e2, abs_e, we2, abs_we, ae2, abs_ae, ey
  PatternAcc() {
    for (int k = 0; k < kSums; ++k)
      for (size_t g = 0; g < kGroups; ++g) acc[k][g] = hn::Zero(DF());
    max_e = max_we = max_ae = hn::Zero(DF());
  }
  HWY_INLINE void Add(size_t g, hn::Vec<DF> xv, hn::Vec<DF> yv, hn::Vec<DF> wv, int32_t* at) {
    const auto e = hn::Sub(yv, xv), we = hn::Sub(wv, xv), ae = hn::Sub(yv, wv);
    const auto a = hn::Abs(e), awe = hn::Abs(we), aae = hn::Abs(ae);
    acc[0][g] = hn::Add(acc[0][g], hn::Mul(e, e));
    acc[1][g] = hn::Add(acc[1][g], a);
    acc[2][g] = hn::Add(acc[2][g], hn::Mul(we, we));
    acc[3][g] = hn::Add(acc[3][g], awe);
    acc[4][g] = hn::Add(acc[4][g], hn::Mul(ae, ae));
    acc[5][g] = hn::Add(acc[5][g], aae);
    acc[6][g] = hn::Add(acc[6][g], hn::Mul(e, hn::Add(xv, yv)));
    max_e = hn::Max(max_e, a);
    max_we = hn::Max(max_we, awe);
    max_ae = hn::Max(max_ae, aae);
    hn::Store(ErrorIndex(a), DI(), at);
  }
  // The row's sums and maxima, with the columns [j, dim) added from the
  // level tables (pattern_tables) one by one.
  void Finish(const float* x, const int8_t* q_tail, size_t j, size_t dim, int qmax, const float* y_tab,
              const float* w_tab, uint64_t* counts, PatternRow* out) const {
    const bool vectors = j > 0;
    float me = vectors ? hn::GetLane(hn::MaxOfLanes(DF(), max_e)) : 0.0f;
    float mwe = vectors ? hn::GetLane(hn::MaxOfLanes(DF(), max_we)) : 0.0f;
    float mae = vectors ? hn::GetLane(hn::MaxOfLanes(DF(), max_ae)) : 0.0f;
#if QEMB_TABLE_IN_REGISTER
    if (j == dim) {
      // No tail: the partials are the lanes, added in double vectors.
      const hn::Vec<DF> v[8] = {acc[0][0], acc[1][0], acc[2][0], acc[3][0],
                                acc[4][0], acc[5][0], acc[6][0], hn::Zero(DF())};
      HWY_ALIGN double total[8];
      AddPartials8(v, total);
      out->e2 = total[0];
      out->abs_e = total[1];
      out->we2 = total[2];
      out->abs_we = total[3];
      out->ae2 = total[4];
      out->abs_ae = total[5];
      out->ey = total[6];
      out->max_e = me;
      out->max_we = mwe;
      out->max_ae = mae;
      return;
    }
#endif
    const int8_t* q = q_tail;
    Partials sums[kSums];
    for (int k = 0; k < kSums; ++k) sums[k].store(acc[k]);
    for (; j < dim; ++j, ++q) {
      const int k = *q + qmax;
      const float xv = x[j], yv = y_tab[k], wv = w_tab[k];
      const float e = yv - xv, we = wv - xv, ae = yv - wv;
      const size_t c = j % kRowPartials;
      sums[0].p[c] += e * e;
      sums[1].p[c] += std::fabs(e);
      sums[2].p[c] += we * we;
      sums[3].p[c] += std::fabs(we);
      sums[4].p[c] += ae * ae;
      sums[5].p[c] += std::fabs(ae);
      sums[6].p[c] += e * (xv + yv);
      me = std::max(me, std::fabs(e));
      mwe = std::max(mwe, std::fabs(we));
      mae = std::max(mae, std::fabs(ae));
      ++counts[(c % kErrorCopies) * kErrorCountStride + error_count_index(std::fabs(e))];
    }
    out->e2 = add_partials(sums[0].p);
    out->abs_e = add_partials(sums[1].p);
    out->we2 = add_partials(sums[2].p);
    out->abs_we = add_partials(sums[3].p);
    out->ae2 = add_partials(sums[4].p);
    out->abs_ae = add_partials(sums[5].p);
    out->ey = add_partials(sums[6].p);
    out->max_e = me;
    out->max_we = mwe;
    out->max_ae = mae;
  }
  hn::Vec<DF> acc[kSums][kGroups];
  hn::Vec<DF> max_e, max_we, max_ae;
};


// kInRegister: 512-bit x86 looks y and w of a 4-bit row up in a register
// (15 levels, one permutation each, indexed by q mod 16); elsewhere they are
// computed per value.
template <bool kInRegister>
HWY_INLINE void scheme_loop(const float* x, size_t dim, const SchemeParams& p, PatternRow* out,
                            uint64_t* const* counts) {
  const DF df;
  const Levels lv(df, p);
  PatternAcc opt, leg;
  HWY_ALIGN float y_tab[2][kPatternTableSize], w_tab[2][kPatternTableSize];
#if QEMB_TABLE_IN_REGISTER
  const hn::Full512<float> d16;
  const hn::RebindToSigned<decltype(d16)> d16i;
  hn::Vec<decltype(d16)> y16[2], w16[2];
  if (kInRegister) {
    // Lane i holds level q = ((i + 8) mod 16) - 8, i.e. q mod 16 = i (lane 8,
    // q = -8, is never looked up).
    const auto lane = hn::Iota(d16i, 0);
    const auto q = hn::Sub(hn::And(hn::Add(lane, hn::Set(d16i, 8)), hn::Set(d16i, 15)), hn::Set(d16i, 8));
    w16[0] = hn::Mul(lv.s, hn::ConvertTo(d16, q));  // s_r * (float)q
    y16[0] = lv.Output(w16[0]);
    w16[1] = LegacyRequantized(d16, w16[0], lv.legacy);
    y16[1] = lv.Output(w16[1]);
  }
#endif
  const ErrorCounter count_opt(counts[0]), count_leg(counts[1]);
  HWY_ALIGN int32_t ring[kRing][2][kRowPartials];

  size_t j = 0, step = 0;
  for (; j + kRowPartials <= dim; j += kRowPartials, ++step) {
    int32_t(*at)[kRowPartials] = ring[step % kRing];
    for (size_t g = 0; g < kGroups; ++g) {
      const auto xv = hn::LoadU(df, x + j + g * kLanes);
      const auto biased = lv.Biased(xv);
#if QEMB_TABLE_IN_REGISTER
      if (kInRegister) {
        // The low 4 bits of the biased level's bits are q mod 16; a 16-lane
        // permutation reads only those.
        const hn::Indices512<float> ind{hn::BitCast(DI(), biased).raw};
        opt.Add(g, xv, hn::TableLookupLanes(y16[0], ind), hn::TableLookupLanes(w16[0], ind), at[0] + g * kLanes);
        leg.Add(g, xv, hn::TableLookupLanes(y16[1], ind), hn::TableLookupLanes(w16[1], ind), at[1] + g * kLanes);
        continue;
      }
#endif
      const auto w = lv.Dequantized(biased);
      opt.Add(g, xv, lv.Output(w), w, at[0] + g * kLanes);
      const auto wl = LegacyRequantized(df, w, lv.legacy);
      leg.Add(g, xv, lv.Output(wl), wl, at[1] + g * kLanes);
    }
    if (step >= kCountLag) {
      count_opt.count(ring[(step - kCountLag) % kRing][0]);
      count_leg.count(ring[(step - kCountLag) % kRing][1]);
    }
  }
  for (size_t s = step > kCountLag ? step - kCountLag : 0; s < step; ++s) {
    count_opt.count(ring[s % kRing][0]);
    count_leg.count(ring[s % kRing][1]);
  }
  // The last dim % 16 columns, one by one.
  HWY_ALIGN int8_t q_tail[kRowPartials];
  for (size_t k = j; k < dim; ++k) q_tail[k - j] = quantize_weight(x[k], p.row_scale, p.qmax);
  if (j < dim)
    for (int l = 0; l < 2; ++l) pattern_tables(l == 1, p.row_scale, p.max_scale, p.qmax, p.act, y_tab[l], w_tab[l]);
  opt.Finish(x, q_tail, j, dim, p.qmax, y_tab[0], w_tab[0], counts[0], &out[0]);
  leg.Finish(x, q_tail, j, dim, p.qmax, y_tab[1], w_tab[1], counts[1], &out[1]);
}

void scheme_row(const float* x, size_t dim, const SchemeParams& p, PatternRow* out, uint64_t* const* counts) {
#if QEMB_TABLE_IN_REGISTER
  if (2 * p.qmax + 1 <= 15) return scheme_loop<true>(x, dim, p, out, counts);
#endif
  scheme_loop<false>(x, dim, p, out, counts);
}

}  // namespace HWY_NAMESPACE
}  // namespace qemb
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/dispatch.h"

namespace qemb {

HWY_EXPORT(row_values);
HWY_EXPORT(scheme_row);
HWY_EXPORT(pattern_tables);

namespace {

std::vector<MetricKernelSet> build_sets() {
  std::vector<MetricKernelSet> sets;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    const size_t index = dispatch_index(target);
    MetricKernelSet set;
    set.isa = hwy::TargetName(target);
    set.row_values = HWY_DISPATCH_TABLE(row_values)[index];
    set.scheme_row = HWY_DISPATCH_TABLE(scheme_row)[index];
    set.pattern_tables = HWY_DISPATCH_TABLE(pattern_tables)[index];
    if (set.row_values && set.scheme_row && set.pattern_tables) sets.push_back(set);
  }
  return sets;
}

const std::vector<MetricKernelSet>& sets() {
  static const std::vector<MetricKernelSet> s = build_sets();
  return s;
}

}  // namespace

void error_categories(const ErrorBins& bins, const uint64_t* counts, uint64_t* categories) {
  for (size_t i = 0; i < kErrorCountStride; ++i) {
    uint64_t total = 0;
    for (size_t copy = 0; copy < kErrorCopies; ++copy) total += counts[copy * kErrorCountStride + i];
    if (total == 0) continue;
    int category = bins.n + 2;  // e == 0
    if (i < static_cast<size_t>(kErrorSlots)) {
      const uint32_t slot_bits = static_cast<uint32_t>(i) << kErrorSlotShift;
      float v;
      std::memcpy(&v, &slot_bits, sizeof v);
      // Slot 0 holds the subnormals below its next slot: below any lo a
      // float bin can have. Infinity and NaN slots are above.
      category = v == 0.0f ? 0 : !std::isfinite(v) ? bins.n + 1 : exact_error_category(v, bins);
    }
    categories[category] += total;
  }
}

const MetricKernelSet& best_metric_kernels() { return sets().front(); }
std::vector<MetricKernelSet> all_metric_kernel_sets() { return sets(); }

}  // namespace qemb
#endif  // HWY_ONCE
