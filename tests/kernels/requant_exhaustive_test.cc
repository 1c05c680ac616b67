// Exhaustive checks of the vectorized requantization: every weight value
// against many row scales and activation encodings, and the fold identity
// fused(PCQ table) == materialized(folded table).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/gather_tester.h"
#include "core/ir.h"
#include "kernels/kernels.h"
#include "qemb/quantize.h"

namespace qemb {
namespace {

using testing::float_bits;

// Row scales from denormal to near FLT_MAX, on a fine logarithmic grid, plus
// the values that sit on rounding edges.
std::vector<float> scale_grid() {
  std::vector<float> scales;
  for (int e = -149; e <= 120; ++e) {
    for (float m : {1.0f, 1.3333334f, 1.5f, 1.9999999f}) {
      scales.push_back(std::ldexp(m, e));
    }
  }
  for (float s : {kEps, 2 * kEps, 0.49999997f, 0.5f, 0.50000006f, 1.4999999f, 2.5f, 3.5f,
                  1.0f / 3.0f, 0.1f, 0.7f, 1.0f / 127.0f, 1e-4f / 127.0f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::min()}) {
    scales.push_back(s);
  }
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<float> exponent(-12.0f, 4.0f);
  for (int i = 0; i < 256; ++i) scales.push_back(std::pow(10.0f, exponent(rng)));
  return scales;
}

std::vector<ActivationEncoding> activation_grid() {
  std::vector<ActivationEncoding> acts;
  for (float s : {kEps, 1e-6f, 3.0517578e-05f, 1.5259022e-05f, 0.001f, 0.0123f, 1.0f, 0.5f, 7.0f}) {
    for (int32_t zp : {0, 1, 32768, 65535}) acts.push_back({s, zp});
  }
  return acts;
}

// Each row holds every value of the weight type once: the 256 int8 values
// (including -128, outside [-127, 127]), or all 16 nibbles twice, once in the
// low and once in the high half of a byte. Rows rotate the order so values
// visit every lane.
struct ExhaustiveTable {
  std::vector<uint8_t> weights;
  std::vector<float> scales;
  size_t dim = 0;
  size_t row_bytes = 0;
};

ExhaustiveTable make_exhaustive_table(int bits, const std::vector<float>& scales) {
  ExhaustiveTable t;
  t.scales = scales;
  t.dim = bits == 8 ? 256 : 32;
  t.row_bytes = bits == 8 ? 256 : 16;
  t.weights.assign(scales.size() * t.row_bytes, 0);
  for (size_t r = 0; r < scales.size(); ++r) {
    uint8_t* row = t.weights.data() + r * t.row_bytes;
    for (size_t j = 0; j < t.dim; ++j) {
      const size_t k = (j + r) % t.dim;
      if (bits == 8) {
        row[j] = static_cast<uint8_t>(k);
      } else {
        // value k % 16; rotated by k / 16 so both nibble halves see every value
        pack_int4(row, static_cast<int64_t>(j), static_cast<int8_t>(static_cast<int8_t>((k % 16) << 4) >> 4));
      }
    }
  }
  return t;
}

void check_family_exhaustive(int bits) {
  const ExhaustiveTable t = make_exhaustive_table(bits, scale_grid());
  const size_t n = t.scales.size();
  std::vector<int64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int64_t>(i);
  float max_scale = 0.0f;
  for (float s : t.scales) max_scale = std::max(max_scale, s);

  const KernelSet& ref = scalar_reference_kernels();
  struct Kernels {
    GatherKernel u16_name, f32_name;
    RequantGatherU16Fn KernelSet::*u16;
    RequantGatherF32Fn KernelSet::*f32;
    bool legacy;
  };
  const std::vector<Kernels> families =
      bits == 8 ? std::vector<Kernels>{{GatherKernel::requant_gather_s8_u16, GatherKernel::requant_gather_s8_f32,
                                        &KernelSet::requant_gather_s8_u16, &KernelSet::requant_gather_s8_f32, false},
                                       {GatherKernel::legacy_gather_s8_u16, GatherKernel::legacy_gather_s8_f32,
                                        &KernelSet::legacy_gather_s8_u16, &KernelSet::legacy_gather_s8_f32, true}}
                : std::vector<Kernels>{{GatherKernel::requant_gather_s4_u16, GatherKernel::requant_gather_s4_f32,
                                        &KernelSet::requant_gather_s4_u16, &KernelSet::requant_gather_s4_f32, false},
                                       {GatherKernel::legacy_gather_s4_u16, GatherKernel::legacy_gather_s4_f32,
                                        &KernelSet::legacy_gather_s4_u16, &KernelSet::legacy_gather_s4_f32, true}};
  const std::vector<KernelSet> sets = all_supported_kernel_sets();
  std::vector<uint16_t> want_u16(n * t.dim), got_u16(n * t.dim);
  std::vector<float> want_f32(n * t.dim), got_f32(n * t.dim);
  for (const ActivationEncoding& act : activation_grid()) {
    // Legacy: both the table's own s_max and one where most rows are far below it.
    for (float smax : {max_scale, 1.0f}) {
      RequantGatherParams p;
      p.weights = t.weights.data();
      p.row_scales = t.scales.data();
      p.dim = t.dim;
      p.act = act;
      p.max_scale = smax;
      for (const Kernels& k : families) {
        if (!k.legacy && smax != max_scale) continue;
        (ref.*k.u16)(p, ids.data(), n, want_u16.data());
        (ref.*k.f32)(p, ids.data(), n, want_f32.data());
        for (const KernelSet& set : sets) {
          (set.*k.u16)(p, ids.data(), n, got_u16.data());
          (set.*k.f32)(p, ids.data(), n, got_f32.data());
          if (got_u16 == want_u16 &&
              std::memcmp(got_f32.data(), want_f32.data(), want_f32.size() * sizeof(float)) == 0) {
            continue;
          }
          for (size_t e = 0; e < want_u16.size(); ++e) {  // name the first difference
            const size_t r = e / t.dim, j = e % t.dim;
            const int q = bits == 8 ? static_cast<int8_t>(t.weights[r * t.row_bytes + j])
                                    : unpack_int4(t.weights.data() + r * t.row_bytes, static_cast<int64_t>(j));
            ASSERT_EQ(got_u16[e], want_u16[e])
                << kernel_name(set, k.u16_name) << ": q=" << q << " s_r=" << t.scales[r]
                << " s_max=" << smax << " s_a=" << act.scale << " zp=" << act.zero_point;
            ASSERT_EQ(float_bits(got_f32[e]), float_bits(want_f32[e]))
                << kernel_name(set, k.f32_name) << ": q=" << q << " s_r=" << t.scales[r]
                << " s_max=" << smax << " s_a=" << act.scale << " zp=" << act.zero_point;
          }
        }
      }
    }
  }
}

TEST(RequantExhaustiveTest, EveryInt8ValueScaleAndEncoding) { check_family_exhaustive(8); }
TEST(RequantExhaustiveTest, EveryNibbleScaleAndEncoding) { check_family_exhaustive(4); }

// Outside the contract (the compiler never emits such scales), but the
// kernels still agree with the scalar formulas: inf and NaN row scales.
TEST(RequantExhaustiveTest, NonFiniteScalesMatchTheReference) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int bits : {4, 8}) {
    const ExhaustiveTable t = make_exhaustive_table(bits, {inf, -inf, nan, 1.0f});
    const std::vector<int64_t> ids = {0, 1, 2, 3};
    const KernelSet& ref = scalar_reference_kernels();
    for (float smax : {1.0f, inf}) {
      RequantGatherParams p;
      p.weights = t.weights.data();
      p.row_scales = t.scales.data();
      p.dim = t.dim;
      p.act = {0.01f, 100};
      p.max_scale = smax;
      std::vector<uint16_t> want(4 * t.dim), got(4 * t.dim);
      for (const KernelSet& set : all_supported_kernel_sets()) {
        for (auto fn : bits == 8 ? std::vector<RequantGatherU16Fn KernelSet::*>{&KernelSet::requant_gather_s8_u16, &KernelSet::legacy_gather_s8_u16}
                                 : std::vector<RequantGatherU16Fn KernelSet::*>{&KernelSet::requant_gather_s4_u16, &KernelSet::legacy_gather_s4_u16}) {
          (ref.*fn)(p, ids.data(), ids.size(), want.data());
          (set.*fn)(p, ids.data(), ids.size(), got.data());
          EXPECT_EQ(got, want) << set.isa << " bits=" << bits << " s_max=" << smax;
        }
      }
    }
  }
}

// The 8-bit kernels skip the clamp to [0, 65535] for a row when
// |(s * 128) * inv(s_a)| <= min(zp, 65535 - zp) (s: the row scale, or s_max
// for the legacy pattern). Scales a few ulps either side of that edge and of
// where rne(t) first leaves the range, for zero points at and next to the ends
// and the middle, with every int8 value (-128 included) in rows whose width
// leaves a whole-vector and a scalar tail, and in rows long enough for the
// per-row table (whose entries the same arithmetic computes): each output
// form of both patterns matches the reference.
void check_int8_rows_at_the_unclamped_edge(size_t dim, bool u16_only) {
  const float act_scale = 0.0123f;
  std::vector<float> scales;
  for (int32_t zp : {0, 1, 2, 32767, 32768, 65533, 65534, 65535}) {
    const float bound = static_cast<float>(std::min(zp, 65535 - zp));
    // The test's edge, and where rne(t) would first leave the range.
    for (float edge : {bound, bound + 0.5f}) {
      // The largest s whose t(128) is below the edge, then 6 ulps down.
      float s = edge * act_scale / 128.0f;
      const auto t = [&](float x) { return (x * 128.0f) * inv(act_scale); };
      while (t(s) < edge) s = std::nextafter(s, std::numeric_limits<float>::infinity());
      while (s > 0.0f && t(s) >= edge) s = std::nextafter(s, 0.0f);
      for (int k = 0; k < 5; ++k) s = std::nextafter(s, 0.0f);
      for (int k = 0; k < 12; ++k) {
        scales.push_back(s);
        s = std::nextafter(s, std::numeric_limits<float>::infinity());
      }
    }
  }
  const size_t per_zp = 24;
  const ExhaustiveTable base = make_exhaustive_table(8, scales);
  std::vector<uint8_t> weights(scales.size() * dim);
  for (size_t r = 0; r < scales.size(); ++r) {
    for (size_t j = 0; j < dim; ++j) weights[r * dim + j] = base.weights[r * base.row_bytes + j % 256];
  }
  std::vector<int64_t> ids(scales.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
  const KernelSet& ref = scalar_reference_kernels();
  const int32_t zps[] = {0, 1, 2, 32767, 32768, 65533, 65534, 65535};
  for (size_t z = 0; z < 8; ++z) {
    RequantGatherParams p;
    p.weights = weights.data();
    p.row_scales = scales.data();
    p.dim = dim;
    p.act = {act_scale, zps[z]};
    const int64_t* zp_ids = ids.data() + z * per_zp;
    for (size_t k = 0; k < per_zp; ++k) {
      // Legacy: s_max at the edge too (rows' own scales stay as they are).
      p.max_scale = scales[z * per_zp + k];
      struct Form {
        const char* name;
        RequantGatherU16Fn KernelSet::*u16;
        RequantGatherF32Fn KernelSet::*f32;
      };
      const Form forms[] = {
          {"requant_gather_s8_u16/f16/bf16/f32", &KernelSet::requant_gather_s8_u16, &KernelSet::requant_gather_s8_f32},
          {"legacy_gather_s8_u16/f16/bf16/f32", &KernelSet::legacy_gather_s8_u16, &KernelSet::legacy_gather_s8_f32}};
      for (const Form& f : forms) {
        const bool legacy = f.u16 == &KernelSet::legacy_gather_s8_u16;
        RequantGatherHalfFn KernelSet::*halves[2] = {
            legacy ? &KernelSet::legacy_gather_s8_f16 : &KernelSet::requant_gather_s8_f16,
            legacy ? &KernelSet::legacy_gather_s8_bf16 : &KernelSet::requant_gather_s8_bf16};
        std::vector<uint16_t> want(per_zp * dim), got(per_zp * dim);
        std::vector<float> want_f(per_zp * dim), got_f(per_zp * dim);
        for (const KernelSet& set : all_supported_kernel_sets()) {
          SCOPED_TRACE(std::string(set.isa) + " " + f.name + " zp=" + std::to_string(zps[z]) + " k=" +
                       std::to_string(k));
          for (RequantGatherU16Fn KernelSet::*fn : {f.u16, halves[0], halves[1]}) {
            (ref.*fn)(p, zp_ids, per_zp, want.data());
            (set.*fn)(p, zp_ids, per_zp, got.data());
            ASSERT_EQ(got, want);
            if (u16_only) break;
          }
          if (u16_only) continue;
          (ref.*f.f32)(p, zp_ids, per_zp, want_f.data());
          (set.*f.f32)(p, zp_ids, per_zp, got_f.data());
          for (size_t e = 0; e < want_f.size(); ++e) ASSERT_EQ(float_bits(got_f[e]), float_bits(want_f[e])) << e;
        }
      }
    }
  }
}

// 256 + 16 + 3 columns: the row's 256 values, then 19 more of them; and the
// same past 2048, where AVX-512 VBMI looks uint16 outputs of 8-bit rows up
// in a table (the other forms compute every value, as on short rows).
TEST(RequantExhaustiveTest, Int8RowsAtTheUnclampedEdge) { check_int8_rows_at_the_unclamped_edge(275, false); }
TEST(RequantExhaustiveTest, LongInt8RowsAtTheUnclampedEdge) {
  check_int8_rows_at_the_unclamped_edge(2048 + 275, true);
}

// The rounding edge the emulated Round gets wrong: 0.49999997 rounds to 0.
TEST(RequantExhaustiveTest, JustBelowOneHalfRoundsDown) {
  const float below_half = std::nextafter(0.5f, 0.0f);
  const uint8_t weights[2] = {1, 0x01};  // q = 1 (int8), or nibbles {1, 0}
  const float scales[1] = {below_half};
  const int64_t ids[1] = {0};
  RequantGatherParams p;
  p.weights = weights;
  p.row_scales = scales;
  p.dim = 1;
  p.act = {1.0f, 0};
  p.max_scale = 1.0f / 256.0f;  // legacy: qi = clamp(rne(0.49999997 * 256)) = 127 / 7
  for (const KernelSet& set : all_supported_kernel_sets()) {
    uint16_t out = 99;
    set.requant_gather_s8_u16(p, ids, 1, &out);
    EXPECT_EQ(out, 0) << set.isa;
    set.requant_gather_s4_u16(p, ids, 1, &out);
    EXPECT_EQ(out, 0) << set.isa;
  }
}

// Fold: evaluate the Convert ahead of time over the whole PCQ table with the
// scalar formula; gathering from that uint16 table must give exactly what the
// fused kernels compute from the PCQ table.
TEST(RequantExhaustiveTest, FusedEqualsMaterializedFoldedTable) {
  for (int bits : {4, 8}) {
    for (size_t dim : {1, 33, 128, 300}) {
      for (bool legacy : {false, true}) {
        const testing::RandomPcqTable t = testing::make_random_pcq_table(211, dim, bits, 17 + dim);
        const int qmax = bits == 4 ? 7 : 127;
        std::vector<uint16_t> folded(t.rows * dim);
        for (size_t r = 0; r < t.rows; ++r) {
          for (size_t j = 0; j < dim; ++j) {
            folded[r * dim + j] = legacy ? legacy_output(t.scales[r], t.q(r, j), t.max_scale, qmax, t.act)
                                         : optimized_output(t.scales[r], t.q(r, j), t.act);
          }
        }
        std::mt19937_64 rng(5);
        const std::vector<int64_t> ids = testing::random_ids(t.rows, 500, rng);
        const size_t n = ids.size();
        const RequantGatherParams p = t.params();
        for (const KernelSet& set : all_supported_kernel_sets()) {
          RequantGatherU16Fn fused_u16 = bits == 4 ? (legacy ? set.legacy_gather_s4_u16 : set.requant_gather_s4_u16)
                                                   : (legacy ? set.legacy_gather_s8_u16 : set.requant_gather_s8_u16);
          RequantGatherF32Fn fused_f32 = bits == 4 ? (legacy ? set.legacy_gather_s4_f32 : set.requant_gather_s4_f32)
                                                   : (legacy ? set.legacy_gather_s8_f32 : set.requant_gather_s8_f32);
          std::vector<uint16_t> fused(n * dim), materialized(n * dim);
          fused_u16(p, ids.data(), n, fused.data());
          set.gather_u16(folded.data(), dim, ids.data(), n, materialized.data());
          ASSERT_EQ(fused, materialized) << set.isa << " bits=" << bits << " dim=" << dim << " legacy=" << legacy;
          std::vector<float> fused_f(n * dim), materialized_f(n * dim);
          fused_f32(p, ids.data(), n, fused_f.data());
          set.gather_u16_f32(folded.data(), dim, t.act, ids.data(), n, materialized_f.data());
          ASSERT_EQ(0, std::memcmp(fused_f.data(), materialized_f.data(), n * dim * sizeof(float)))
              << set.isa << " bits=" << bits << " dim=" << dim << " legacy=" << legacy;
        }
      }
    }
  }
}

}  // namespace
}  // namespace qemb
