// Every gather kernel of every instruction set this build compiled, against
// the scalar reference, at sizes around the vector widths. A set the CPU lacks
// is skipped, so the test names are the same on every (emulated) CPU.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/gather_tester.h"

namespace qemb {
namespace {

using testing::GatherTester;

class GatherKernelsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    set_ = find_kernel_set(GetParam());
    if (set_ == nullptr) GTEST_SKIP() << GetParam() << " is compiled in but this CPU does not have it";
  }
  const KernelSet& set() const { return *set_; }

 private:
  const KernelSet* set_ = nullptr;
};

// Around 16/32/64-byte vectors, 128-bit blocks, the 4-bit nibble pairs and
// the row length from which 8-bit rows are looked up in a table.
const size_t kDims[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65,
                        95, 127, 128, 129, 191, 255, 256, 257, 2047, 2048, 2111, 4096};

void run_all_dims(const KernelSet& set, KernelFamily family, int bits) {
  for (size_t dim : kDims) {
    for (size_t rows : {1, 3, 37}) {
      for (size_t batch : {1, 2, 19}) {  // 19 > the prefetch distance
        SCOPED_TRACE(std::string(set.isa) + " dim=" + std::to_string(dim));
        GatherTester().rows(rows).dim(dim).batch(batch).scheme(bits).seed(dim + rows).Test(set, family);
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

TEST_P(GatherKernelsTest, Materialized) { run_all_dims(set(), KernelFamily::kMaterialized, 4); }
TEST_P(GatherKernelsTest, OptimizedS4) { run_all_dims(set(), KernelFamily::kOptimized, 4); }
TEST_P(GatherKernelsTest, OptimizedS8) { run_all_dims(set(), KernelFamily::kOptimized, 8); }
TEST_P(GatherKernelsTest, LegacyS4) { run_all_dims(set(), KernelFamily::kLegacy, 4); }
TEST_P(GatherKernelsTest, LegacyS8) { run_all_dims(set(), KernelFamily::kLegacy, 8); }

// The row-interleaved layout: each row's scale, then its weights, at the
// tightest stride and at a wider one, for every dim and both patterns.
TEST_P(GatherKernelsTest, RowInterleavedLayout) {
  for (size_t dim : kDims) {
    for (int bits : {4, 8}) {
      for (KernelFamily f : {KernelFamily::kOptimized, KernelFamily::kLegacy}) {
        for (size_t extra : {0, 60}) {
          const size_t stride = extra == 0 ? 0 : (4 + (bits == 4 ? (dim + 1) / 2 : dim) + extra + 3) / 4 * 4;
          SCOPED_TRACE(std::string(set().isa) + " dim=" + std::to_string(dim) + " stride=" + std::to_string(stride));
          GatherTester().rows(37).dim(dim).batch(19).scheme(bits).seed(dim).interleaved(true, stride).Test(set(), f);
          if (HasFailure()) return;
        }
      }
    }
  }
}

TEST_P(GatherKernelsTest, ManySeedsAndLargerBatches) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    for (int bits : {4, 8}) {
      for (KernelFamily f : {KernelFamily::kMaterialized, KernelFamily::kOptimized,
                             KernelFamily::kLegacy}) {
        GatherTester().rows(101).dim(48 + seed % 23).batch(257).scheme(bits).seed(seed).Test(set(), f);
        if (HasFailure()) return;
      }
    }
  }
}

TEST_P(GatherKernelsTest, EmptyBatchWritesNothing) {
  const KernelSet& s = set();
  const uint16_t table[4] = {1, 2, 3, 4};
  const uint8_t weights[4] = {0x12, 0x34, 0x56, 0x78};
  const float scales[2] = {0.5f, 0.25f};
  RequantGatherParams p;
  p.weights = weights;
  p.row_scales = scales;
  p.dim = 4;
  p.max_scale = 0.5f;
  const int64_t ids[1] = {1};
  uint16_t u16 = 7;
  float f32 = 7.0f;
  s.gather_u16(table, 2, ids, 0, &u16);
  s.gather_u16_f32(table, 2, p.act, ids, 0, &f32);
  s.requant_gather_s4_u16(p, ids, 0, &u16);
  s.requant_gather_s8_f32(p, ids, 0, &f32);
  s.legacy_gather_s4_f32(p, ids, 0, &f32);
  s.legacy_gather_s8_u16(p, ids, 0, &u16);
  p.dim = 0;  // zero-width rows: nothing to write either
  s.requant_gather_s4_u16(p, ids, 1, &u16);
  s.requant_gather_s8_u16(p, ids, 1, &u16);
  s.gather_u16(table, 0, ids, 1, &u16);
  EXPECT_EQ(u16, 7);
  EXPECT_EQ(f32, 7.0f);
}

// Half-precision outputs at their edges: every uint16 value through
// activation scales whose outputs are binary16 subnormals (and round to
// zero), ties (an integer y with more than 11 significant bits), values past
// 65504 (infinity), and an infinite scale (infinity and, at q16 == zp, NaN).
TEST_P(GatherKernelsTest, HalfOutputsAtTheEdges) {
  const KernelSet& s = set();
  const KernelSet& ref = scalar_reference_kernels();
  std::vector<uint16_t> table(65536);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<uint16_t>(i);
  const size_t dim = 256;
  std::vector<int64_t> ids(table.size() / dim);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
  const float scales[] = {kEps, 5.9604645e-8f, 2.9802322e-8f, 1.0f, 1.0000001f, 3.0f, 0.33333334f,
                          1e-3f, 1e5f, 3.4e38f, std::numeric_limits<float>::infinity()};
  for (float scale : scales) {
    for (int32_t zp : {0, 32768, 65535}) {
      const ActivationEncoding act{scale, zp};
      for (bool bf16 : {false, true}) {
        std::vector<uint16_t> want(table.size()), got(table.size());
        (bf16 ? ref.gather_u16_bf16 : ref.gather_u16_f16)(table.data(), dim, act, ids.data(), ids.size(), want.data());
        (bf16 ? s.gather_u16_bf16 : s.gather_u16_f16)(table.data(), dim, act, ids.data(), ids.size(), got.data());
        for (size_t k = 0; k < want.size(); ++k) {
          ASSERT_EQ(got[k], want[k]) << s.isa << (bf16 ? " bf16" : " f16") << " scale=" << scale << " zp=" << zp
                                     << " q16=" << k;
        }
      }
    }
  }
  // The reference itself: spot values of the conversion.
  const ActivationEncoding one{1.0f, 0};
  const int64_t id = 0;
  const uint16_t q[4] = {2049, 2051, 65520, 1};
  uint16_t h[4];
  ref.gather_u16_f16(q, 4, one, &id, 1, h);
  EXPECT_EQ(h[0], 0x6800);  // 2049 is a tie: to even, 2048
  EXPECT_EQ(h[1], 0x6802);  // 2051 ties up to 2052
  EXPECT_EQ(h[2], 0x7C00);  // past 65504 + half an ulp: infinity
  EXPECT_EQ(h[3], 0x3C00);  // 1.0
  const ActivationEncoding inf_scale{std::numeric_limits<float>::infinity(), 1};
  ref.gather_u16_bf16(q + 3, 1, inf_scale, &id, 1, h);
  // inf * 0 is NaN (its sign is the CPU's choice): it stays a quiet NaN.
  EXPECT_EQ(h[0] & 0x7FC0, 0x7FC0) << std::hex << h[0];
}

INSTANTIATE_TEST_SUITE_P(AllIsas, GatherKernelsTest, ::testing::ValuesIn(compiled_kernel_isas()),
                         [](const auto& info) { return info.param; });

// The tester itself must be able to fail: the reference against a kernel set
// whose u16 kernel is off by one somewhere.
void off_by_one_s4(const RequantGatherParams& p, const int64_t* ids, size_t n, uint16_t* out) {
  scalar_reference_kernels().requant_gather_s4_u16(p, ids, n, out);
  if (n * p.dim > 5) out[5] ^= 1;
}

TEST(GatherTesterTest, CatchesAWrongKernel) {
  KernelSet broken = scalar_reference_kernels();
  broken.isa = "BROKEN";
  broken.requant_gather_s4_u16 = &off_by_one_s4;
  EXPECT_NONFATAL_FAILURE(
      GatherTester().rows(5).dim(9).batch(3).scheme(4).Test(broken, KernelFamily::kOptimized),
      "requant_gather_s4_u16[BROKEN] rows=5 dim=9 batch=3 bits=4 seed=1: output [0][5]");
}

}  // namespace
}  // namespace qemb
