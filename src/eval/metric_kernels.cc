// Eval's metric kernels (eval/metric_kernels.h) for every Highway target this
// build compiles; the HWY_ONCE pass exports them and builds the sets.
#include <cfloat>
#include <cmath>
#include <cstring>

#include <algorithm>

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

// 512-bit x86 targets look small tables up in a register (pattern_row).
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
    hn::StoreU(DequantizeQ16(Q16(df, wv, a), a), df, y + i);
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

// y and w of the levels q (int32 lanes) by the numeric.h formulas,
// the same bits as pattern_tables: y = s_a * (clamp(rne(w / s_a) + zp, 0,
// 65535) - zp), here as s_a * clamp(rne(w / s_a), -zp, 65535 - zp), which is
// equal: the integer-valued floats add and subtract exactly below 2^24, and
// beyond it both clamp to the same end.
template <bool kLegacy>
struct Deployed {
  Deployed(DF df, const PatternParams& p)
      : legacy(df, p.max_scale, p.qmax),
        s(hn::Set(df, p.row_scale)),
        scale(hn::Set(df, p.act.scale)),
        inv_scale(hn::Set(df, inv(p.act.scale))),
        low(hn::Set(df, static_cast<float>(-p.act.zero_point))),
        high(hn::Set(df, static_cast<float>(65535 - p.act.zero_point))) {}
  HWY_INLINE void operator()(hn::Vec<DI> q, hn::Vec<DF>& y, hn::Vec<DF>& w) const {
    const DF df;
    w = hn::Mul(s, hn::ConvertTo(df, q));  // s_r * (float)q
    if (kLegacy) w = LegacyRequantized(df, w, legacy);
    const auto r = RoundHalfEven(df, hn::Mul(w, inv_scale));
    y = hn::Mul(scale, hn::Min(MaxOrLowerIfNaN<DF>(r, low), high));
  }
  LegacyVec<DF> legacy;
  hn::Vec<DF> s, scale, inv_scale, low, high;
};

// kInRegister: 512-bit x86 looks y and w of a 4-bit row up in a register
// (15 levels, one permutation each); elsewhere they are computed per value.
template <bool kLegacy, bool kInRegister>
HWY_INLINE void pattern_loop(const float* x, const int8_t* q, size_t dim, const PatternParams& p,
                             const ErrorBins& bins, PatternRow* out, uint64_t* HWY_RESTRICT counts) {
  const DF df;
  const DI di;
  const D8 d8;
  constexpr int kSums = 7;  // e2, abs_e, we2, abs_we, ae2, abs_ae, ey
  hn::Vec<DF> acc[kSums][kGroups];
  for (int k = 0; k < kSums; ++k)
    for (size_t g = 0; g < kGroups; ++g) acc[k][g] = hn::Zero(df);
  auto max_e = hn::Zero(df), max_we = hn::Zero(df), max_ae = hn::Zero(df);
  const Deployed<kLegacy> deployed(df, p);
  HWY_ALIGN float y_tab[kPatternTableSize], w_tab[kPatternTableSize];
#if QEMB_TABLE_IN_REGISTER
  const auto offset = hn::Set(di, p.qmax);  // q + qmax indexes the level tables
  const hn::Full512<float> d16;
  hn::Vec<decltype(d16)> y16 = hn::Zero(d16), w16 = hn::Zero(d16);
  if (kInRegister) {
    pattern_tables(kLegacy, p.row_scale, p.max_scale, p.qmax, p.act, y_tab, w_tab);
    y16 = hn::LoadU(d16, y_tab);
    w16 = hn::LoadU(d16, w_tab);
  }
#endif
  // The count index: the slot of |e| (its bits shifted) clamped to the kept
  // slots, less slot_base - 1, in the column's copy of the counts; the
  // copy's 0 for an exact zero.
  const int32_t stride = bins.slot_span + 1;
  const auto slot_lo = hn::Set(di, bins.slot_base), slot_hi = hn::Set(di, bins.slot_base + bins.slot_span - 1);
  const auto copy = hn::Mul(hn::And(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(kErrorCopies - 1))),
                            hn::Set(di, stride));
  const auto rebase = hn::Sub(hn::Set(di, bins.slot_base - 1), copy);
  HWY_ALIGN int32_t index[kBlock];

  size_t j = 0;
  while (j + kRowPartials <= dim) {
    const size_t block_end = j + std::min(kBlock, (dim - j) / kRowPartials * kRowPartials);
    int32_t* at = index;
    for (; j < block_end; j += kRowPartials) {
     for (size_t g = 0; g < kGroups; ++g, at += kLanes) {
      const size_t col = j + g * kLanes;
      const auto xv = hn::LoadU(df, x + col);
      const auto qv = hn::PromoteTo(di, hn::LoadU(d8, q + col));
      hn::Vec<DF> yv, wv;
#if QEMB_TABLE_IN_REGISTER
      if (kInRegister) {
        const auto ind = hn::IndicesFromVec(d16, hn::Add(qv, offset));  // DF is 512-bit here
        yv = hn::TableLookupLanes(y16, ind);
        wv = hn::TableLookupLanes(w16, ind);
      } else {
        deployed(qv, yv, wv);
      }
#else
      deployed(qv, yv, wv);
#endif
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
      const auto slot = hn::BitCast(di, hn::ShiftRight<kErrorSlotShift>(hn::BitCast(DU(), a)));
      const auto i = hn::Sub(hn::Min(hn::Max(slot, slot_lo), slot_hi), rebase);
      hn::Store(hn::IfThenElse(hn::RebindMask(di, hn::Eq(a, hn::Zero(df))), copy, i), di, at);
     }
    }
    count_indices(counts, index, at);
  }
  Partials sums[kSums];
  for (int k = 0; k < kSums; ++k) sums[k].store(acc[k]);
  const bool vectors = dim >= kRowPartials;
  float me = vectors ? hn::GetLane(hn::MaxOfLanes(df, max_e)) : 0.0f;
  float mwe = vectors ? hn::GetLane(hn::MaxOfLanes(df, max_we)) : 0.0f;
  float mae = vectors ? hn::GetLane(hn::MaxOfLanes(df, max_ae)) : 0.0f;
  if (j < dim) {
    pattern_tables(kLegacy, p.row_scale, p.max_scale, p.qmax, p.act, y_tab, w_tab);
    for (; j < dim; ++j) {
      const int k = q[j] + p.qmax;
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
      ++counts[(c % kErrorCopies) * static_cast<size_t>(stride) + error_count_index(std::fabs(e), bins)];
    }
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

void pattern_row(const float* x, const int8_t* q, size_t dim, const PatternParams& p, const ErrorBins& bins,
                 PatternRow* out, uint64_t* counts) {
#if QEMB_TABLE_IN_REGISTER
  if (2 * p.qmax + 1 <= 16) {
    if (p.legacy) return pattern_loop<true, true>(x, q, dim, p, bins, out, counts);
    return pattern_loop<false, true>(x, q, dim, p, bins, out, counts);
  }
#endif
  if (p.legacy) return pattern_loop<true, false>(x, q, dim, p, bins, out, counts);
  pattern_loop<false, false>(x, q, dim, p, bins, out, counts);
}

void quantize_row(const float* x, size_t dim, float row_scale, int qmax, int8_t* out) {
  QuantizeToInt8(x, dim, row_scale, qmax, out);
}

}  // namespace HWY_NAMESPACE
}  // namespace qemb
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/dispatch.h"

namespace qemb {

HWY_EXPORT(row_values);
HWY_EXPORT(pattern_row);
HWY_EXPORT(pattern_tables);
HWY_EXPORT(quantize_row);

namespace {

std::vector<MetricKernelSet> build_sets() {
  std::vector<MetricKernelSet> sets;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    const size_t index = dispatch_index(target);
    MetricKernelSet set;
    set.isa = hwy::TargetName(target);
    set.row_values = HWY_DISPATCH_TABLE(row_values)[index];
    set.pattern_row = HWY_DISPATCH_TABLE(pattern_row)[index];
    set.pattern_tables = HWY_DISPATCH_TABLE(pattern_tables)[index];
    set.quantize_row = HWY_DISPATCH_TABLE(quantize_row)[index];
    if (set.row_values && set.pattern_row && set.pattern_tables && set.quantize_row) sets.push_back(set);
  }
  return sets;
}

const std::vector<MetricKernelSet>& sets() {
  static const std::vector<MetricKernelSet> s = build_sets();
  return s;
}

}  // namespace

void prepare_error_bins(ErrorBins& bins) {
  bins.n = std::max(1, bins.n);
  // Binades from one wholly below 10^lo to one starting above 10^hi, within
  // the floats' exponents (biased 0, subnormals, to 255, infinity).
  constexpr double kLog2Of10 = 3.32192809488736234787;
  const double e0 = std::clamp(std::floor(bins.lo * kLog2Of10) - 2.0, -127.0, 127.0);
  const double e1 = std::clamp(std::ceil(bins.hi * kLog2Of10) + 1.0, e0 + 1.0, 128.0);
  bins.slot_base = static_cast<int32_t>(e0 + 127.0) << kErrorMantissaBits;
  bins.slot_span = (static_cast<int32_t>(e1 + 127.0) << kErrorMantissaBits) - bins.slot_base + 1;
}

void error_categories(const ErrorBins& bins, const uint64_t* counts, uint64_t* categories) {
  const size_t stride = static_cast<size_t>(bins.slot_span) + 1;
  for (size_t i = 0; i < stride; ++i) {
    uint64_t total = 0;
    for (size_t copy = 0; copy < kErrorCopies; ++copy) total += counts[copy * stride + i];
    if (total == 0) continue;
    int category = bins.n + 2;
    if (i > 0) {
      const uint32_t slot_bits = static_cast<uint32_t>(bins.slot_base + static_cast<int32_t>(i) - 1)
                                 << kErrorSlotShift;
      float v;
      std::memcpy(&v, &slot_bits, sizeof v);
      // The first kept slot also counts every value below it: below lo.
      category = i == 1 || v == 0.0f ? 0 : exact_error_category(v, bins);
    }
    categories[category] += total;
  }
}

const MetricKernelSet& best_metric_kernels() { return sets().front(); }
std::vector<MetricKernelSet> all_metric_kernel_sets() { return sets(); }

}  // namespace qemb
#endif  // HWY_ONCE
