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

// At most kRowPartials double lanes, so a vector's lanes are partials.
using DD = hn::CappedTag<double, kRowPartials>;
using DF = hn::Rebind<float, DD>;
using DI = hn::RebindToSigned<DF>;
using D8 = hn::Rebind<int8_t, DF>;

// Partial sums: group g, lane l holds the columns j with j % kRowPartials ==
// g * N + l, added in column order.
struct Partials {
  double p[kRowPartials] = {};
  void store(DD d, const hn::Vec<DD>* acc, size_t groups) {
    const size_t n = hn::Lanes(d);
    for (size_t g = 0; g < groups; ++g) hn::StoreU(acc[g], d, p + g * n);
  }
};

void row_values(const float* x, size_t dim, const ValueBins& bins, RowValues* out, uint64_t* counts) {
  const DD d;
  const DF df;
  const DI di;
  constexpr size_t N = hn::MaxLanes(DD()), groups = kRowPartials / N;
  hn::Vec<DD> acc[groups];
  for (size_t g = 0; g < groups; ++g) acc[g] = hn::Zero(d);
  const auto lo = hn::Set(d, bins.lo), hi = hn::Set(d, bins.hi), range = hn::Set(d, bins.hi - bins.lo);
  const auto nbins = hn::Set(d, static_cast<double>(bins.n));
  const auto per_unit = hn::Set(d, static_cast<double>(bins.n) / (bins.hi - bins.lo));
  const auto margin = hn::Set(d, 1e-9), one_minus_margin = hn::Set(d, 1.0 - 1e-9);
  const auto clip_lo = hn::Set(d, bins.clip_lo), clip_hi = hn::Set(d, bins.clip_hi);
  const auto first = hn::Set(df, dim ? x[0] : 0.0f);
  auto amax = hn::Zero(df);
  auto differs = hn::Zero(df);
  int64_t clipped = 0;
  int32_t cat[kRowPartials];
  size_t j = 0;
  // Blocks of kRowPartials columns, the group unrolled: the accumulators
  // stay in registers.
  for (; j + kRowPartials <= dim; j += kRowPartials) {
   for (size_t g = 0; g < groups; ++g) {
    const auto xf = hn::LoadU(df, x + j + g * N);
    amax = hn::Max(amax, hn::Abs(xf));
    differs = hn::Or(differs, hn::VecFromMask(df, hn::Ne(xf, first)));
    const auto xv = hn::PromoteTo(d, xf);
    acc[g] = hn::Add(acc[g], hn::Mul(xv, xv));
    clipped += static_cast<int64_t>(hn::CountTrue(d, hn::Or(hn::Lt(xv, clip_lo), hn::Gt(xv, clip_hi))));
    // Histogram::add: (size_t)((v - lo) / (hi - lo) * n), at most n - 1.
    // A product by n / (hi - lo) is within a few ulps of it, so its floor is
    // the same unless it lies within a hair of an integer: only then (about
    // never) the division.
    auto t = hn::Mul(hn::Sub(xv, lo), per_unit);
    const auto frac = hn::Sub(t, hn::Floor(t));
    if (HWY_UNLIKELY(!hn::AllFalse(d, hn::Or(hn::Lt(frac, margin), hn::Gt(frac, one_minus_margin)))))
      t = hn::Mul(hn::Div(hn::Sub(xv, lo), range), nbins);
    const auto tc = hn::Min(hn::Max(t, hn::Zero(d)), hn::Sub(nbins, hn::Set(d, 1.0)));
    auto c = hn::Add(hn::Floor(tc), hn::Set(d, 1.0));  // tc >= 0: floor is the truncation
    c = hn::IfThenElse(hn::Lt(xv, lo), hn::Zero(d), c);
    c = hn::IfThenElse(hn::Ge(xv, hi), hn::Set(d, static_cast<double>(bins.n + 1)), c);
    hn::StoreU(hn::DemoteTo(di, c), di, cat);
    for (size_t l = 0; l < N; ++l) ++counts[cat[l]];
   }
  }
  Partials x2;
  x2.store(d, acc, groups);
  float amax_s = dim >= kRowPartials ? hn::GetLane(hn::MaxOfLanes(df, amax)) : 0.0f;
  bool constant = dim < kRowPartials || hn::AllTrue(df, hn::Eq(differs, hn::Zero(df)));
  for (; j < dim; ++j) {
    const double v = x[j];
    x2.p[j % kRowPartials] += v * v;
    amax_s = std::max(amax_s, std::fabs(x[j]));
    constant = constant && x[j] == x[0];
    if (v < bins.clip_lo || v > bins.clip_hi) ++clipped;
    if (v < bins.lo) {
      ++counts[0];
    } else if (v >= bins.hi) {
      ++counts[bins.n + 1];
    } else {
      const auto bin = static_cast<size_t>((v - bins.lo) / (bins.hi - bins.lo) * static_cast<double>(bins.n));
      ++counts[std::min(bin, static_cast<size_t>(bins.n) - 1) + 1];
    }
  }
  out->x2 = add_partials(x2.p);
  out->clipped = clipped;
  out->amax = amax_s;
  out->constant = constant;
}

void pattern_row(const float* x, const int8_t* q, size_t dim, int qmax, const float* y_tab, const float* w_tab,
                 const ErrorBins& bins, PatternRow* out, uint64_t* counts) {
  const DD d;
  const DF df;
  const DI di;
  const D8 d8;
  const hn::RebindToSigned<DD> di64;
  const hn::RebindToUnsigned<DD> du64;
  constexpr size_t N = hn::MaxLanes(DD()), groups = kRowPartials / N;
  constexpr int kSums = 8;  // e2, abs_e, we2, abs_we, ae2, abs_ae, dot, y2
  hn::Vec<DD> acc[kSums][groups];
  for (int s = 0; s < kSums; ++s)
    for (size_t g = 0; g < groups; ++g) acc[s][g] = hn::Zero(d);
  auto max_e = hn::Zero(d), max_we = hn::Zero(d), max_ae = hn::Zero(d);
  auto y_min = hn::Set(df, INFINITY), y_max = hn::Set(df, -INFINITY);
  const auto offset = hn::Set(di, qmax);

#if QEMB_TABLE_IN_REGISTER
  // 4-bit tables (15 entries) fit one 512-bit vector: a permutation per
  // vector instead of two gathers.
  const hn::Full512<float> d16;
  const hn::Full512<int32_t> di16;
  const bool in_register = 2 * qmax + 1 <= 16;
  const auto y16 = hn::LoadU(d16, y_tab), w16 = hn::LoadU(d16, w_tab);  // tables hold kPatternTableSize floats
#endif
  // The slot of |e| (ErrorBins): its bits shifted, clamped to the kept
  // slots; 0 for an exact zero.
  const auto slot_base = hn::Set(di64, bins.slot_base);
  const auto slot_last = hn::Set(di64, bins.slot_span - 1);
  const auto zero64 = hn::Zero(di64), one64 = hn::Set(di64, 1);
  const size_t stride = static_cast<size_t>(bins.slot_span) + 1;
  HWY_ALIGN int64_t index[N];

  size_t j = 0;
  for (; j + kRowPartials <= dim; j += kRowPartials) {
   for (size_t g = 0; g < groups; ++g) {
    const size_t col = j + g * N;
    const auto xf = hn::LoadU(df, x + col);
    const auto qi = hn::Add(hn::PromoteTo(di, hn::LoadU(d8, q + col)), offset);
#if QEMB_TABLE_IN_REGISTER
    hn::Vec<DF> yf, wf;
    if (in_register) {
      const auto ind = hn::IndicesFromVec(d16, hn::ZeroExtendVector(di16, qi));
      yf = hn::LowerHalf(df, hn::TableLookupLanes(y16, ind));
      wf = hn::LowerHalf(df, hn::TableLookupLanes(w16, ind));
    } else {
      yf = hn::GatherIndex(df, y_tab, qi);
      wf = hn::GatherIndex(df, w_tab, qi);
    }
#else
    const auto yf = hn::GatherIndex(df, y_tab, qi);
    const auto wf = hn::GatherIndex(df, w_tab, qi);
#endif
    y_min = hn::Min(y_min, yf);
    y_max = hn::Max(y_max, yf);
    const auto xv = hn::PromoteTo(d, xf), yv = hn::PromoteTo(d, yf), wv = hn::PromoteTo(d, wf);
    const auto e = hn::Sub(yv, xv), we = hn::Sub(wv, xv), ae = hn::Sub(yv, wv);
    const auto a = hn::Abs(e), awe = hn::Abs(we), aae = hn::Abs(ae);
    acc[0][g] = hn::Add(acc[0][g], hn::Mul(e, e));
    acc[1][g] = hn::Add(acc[1][g], a);
    acc[2][g] = hn::Add(acc[2][g], hn::Mul(we, we));
    acc[3][g] = hn::Add(acc[3][g], awe);
    acc[4][g] = hn::Add(acc[4][g], hn::Mul(ae, ae));
    acc[5][g] = hn::Add(acc[5][g], aae);
    acc[6][g] = hn::Add(acc[6][g], hn::Mul(xv, yv));
    acc[7][g] = hn::Add(acc[7][g], hn::Mul(yv, yv));
    max_e = hn::Max(max_e, a);
    max_we = hn::Max(max_we, awe);
    max_ae = hn::Max(max_ae, aae);

    const auto slot = hn::Sub(hn::BitCast(di64, hn::ShiftRight<52 - kErrorMantissaBits>(hn::BitCast(du64, a))),
                              slot_base);
    const auto at = hn::Add(hn::Min(hn::Max(slot, zero64), slot_last), one64);
    hn::Store(hn::IfThenElse(hn::RebindMask(di64, hn::Eq(a, hn::Zero(d))), zero64, at), di64, index);
    // Copies of the counts: runs of equal slots do not wait on one counter's
    // store.
    for (size_t l = 0; l < N; ++l) ++counts[(l % kErrorCopies) * stride + static_cast<size_t>(index[l])];
   }
  }
  Partials sums[kSums];
  for (int s = 0; s < kSums; ++s) sums[s].store(d, acc[s], groups);
  const bool vectors = dim >= kRowPartials;
  double me = vectors ? hn::GetLane(hn::MaxOfLanes(d, max_e)) : 0.0;
  double mwe = vectors ? hn::GetLane(hn::MaxOfLanes(d, max_we)) : 0.0;
  double mae = vectors ? hn::GetLane(hn::MaxOfLanes(d, max_ae)) : 0.0;
  float ymin = vectors ? hn::GetLane(hn::MinOfLanes(df, y_min)) : INFINITY;
  float ymax = vectors ? hn::GetLane(hn::MaxOfLanes(df, y_max)) : -INFINITY;
  for (; j < dim; ++j) {
    const int k = q[j] + qmax;
    const double xv = x[j], yv = y_tab[k], wv = w_tab[k];
    const double e = yv - xv, we = wv - xv, ae = yv - wv;
    const size_t p = j % kRowPartials;
    sums[0].p[p] += e * e;
    sums[1].p[p] += std::abs(e);
    sums[2].p[p] += we * we;
    sums[3].p[p] += std::abs(we);
    sums[4].p[p] += ae * ae;
    sums[5].p[p] += std::abs(ae);
    sums[6].p[p] += xv * yv;
    sums[7].p[p] += yv * yv;
    me = std::max(me, std::abs(e));
    mwe = std::max(mwe, std::abs(we));
    mae = std::max(mae, std::abs(ae));
    ymin = std::min(ymin, y_tab[k]);
    ymax = std::max(ymax, y_tab[k]);
    ++counts[error_count_index(std::abs(e), bins)];
  }
  out->e2 = add_partials(sums[0].p);
  out->abs_e = add_partials(sums[1].p);
  out->we2 = add_partials(sums[2].p);
  out->abs_we = add_partials(sums[3].p);
  out->ae2 = add_partials(sums[4].p);
  out->abs_ae = add_partials(sums[5].p);
  out->dot = add_partials(sums[6].p);
  out->y2 = add_partials(sums[7].p);
  out->max_e = me;
  out->max_we = mwe;
  out->max_ae = mae;
  out->y_min = ymin;
  out->y_max = ymax;
}

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
  // the doubles' exponents.
  constexpr double kLog2Of10 = 3.32192809488736234787;
  const double e0 = std::clamp(std::floor(bins.lo * kLog2Of10) - 2.0, -1023.0, 1023.0);
  const double e1 = std::clamp(std::ceil(bins.hi * kLog2Of10) + 1.0, e0 + 1.0, 1024.0);
  bins.slot_base = static_cast<int64_t>(e0 + 1023.0) << kErrorMantissaBits;
  bins.slot_span = (static_cast<int64_t>(e1 + 1023.0) << kErrorMantissaBits) - bins.slot_base + 1;
}

void error_categories(const ErrorBins& bins, const uint64_t* counts, uint64_t* categories) {
  const size_t stride = static_cast<size_t>(bins.slot_span) + 1;
  for (size_t i = 0; i < stride; ++i) {
    uint64_t total = 0;
    for (size_t copy = 0; copy < kErrorCopies; ++copy) total += counts[copy * stride + i];
    if (total == 0) continue;
    int category = bins.n + 2;
    if (i > 0) {
      const uint64_t slot_bits = static_cast<uint64_t>(bins.slot_base + static_cast<int64_t>(i) - 1)
                                 << (52 - kErrorMantissaBits);
      double v;
      std::memcpy(&v, &slot_bits, sizeof v);
      // The first kept slot also counts every value below it: below lo.
      category = i == 1 || v == 0.0 ? 0 : exact_error_category(v, bins);
    }
    categories[category] += total;
  }
}

const MetricKernelSet& best_metric_kernels() { return sets().front(); }
std::vector<MetricKernelSet> all_metric_kernel_sets() { return sets(); }

}  // namespace qemb
#endif  // HWY_ONCE
