// Every pooled (EmbeddingBag) kernel of every instruction set this build
// compiled, against the scalar reference, at the gather tests' dims. A set the
// CPU lacks is skipped, so the test names are the same on every (emulated) CPU.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/bag_tester.h"
#include "kernels/kernels.h"

namespace qemb {
namespace {

using testing::BagTester;
using testing::float_bits;

class BagKernelsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    set_ = find_kernel_set(GetParam());
    if (set_ == nullptr) GTEST_SKIP() << GetParam() << " is compiled in but this CPU does not have it";
  }
  const KernelSet& set() const { return *set_; }

 private:
  const KernelSet* set_ = nullptr;
};

// The gather tests' dims: around 16/32/64-byte vectors, 128-bit blocks and
// the 4-bit nibble pairs.
const size_t kDims[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65,
                        95, 127, 128, 129, 191, 223, 255, 256, 257, 287, 4096};

// Empty bags, bags of 1, and bags longer than the prefetch distance, in one batch.
const std::vector<int64_t> kLengths = {0, 1, 3, 0, 19, 1, 2};

void run_all_dims(const KernelSet& set, KernelFamily family, int bits) {
  for (size_t dim : kDims) {
    for (size_t rows : {1, 3, 37}) {
      SCOPED_TRACE(std::string(set.isa) + " dim=" + std::to_string(dim));
      const uint64_t seed = dim + rows;
      BagTester().rows(rows).dim(dim).lengths(kLengths).scheme(bits).seed(seed).Test(set, family);
      BagTester().rows(rows).dim(dim).lengths(kLengths).scheme(bits).seed(seed).weighted(true).Test(set, family);
      BagTester().rows(rows).dim(dim).lengths(kLengths).scheme(bits).seed(seed).mean(true)
          .padding_idx(static_cast<int64_t>(rows / 2)).Test(set, family);
      BagTester().rows(rows).dim(dim).lengths(kLengths).scheme(bits).seed(seed).weighted(true)
          .padding_idx(0).Test(set, family);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST_P(BagKernelsTest, Materialized) { run_all_dims(set(), KernelFamily::kMaterialized, 4); }
TEST_P(BagKernelsTest, OptimizedS4) { run_all_dims(set(), KernelFamily::kOptimized, 4); }
TEST_P(BagKernelsTest, OptimizedS8) { run_all_dims(set(), KernelFamily::kOptimized, 8); }
TEST_P(BagKernelsTest, LegacyS4) { run_all_dims(set(), KernelFamily::kLegacy, 4); }
TEST_P(BagKernelsTest, LegacyS8) { run_all_dims(set(), KernelFamily::kLegacy, 8); }

// The row-interleaved layout: each row's scale, then its weights, at the
// tightest stride and at a wider one, for every dim, scheme and pattern.
TEST_P(BagKernelsTest, RowInterleavedLayout) {
  for (size_t dim : kDims) {
    for (int bits : {4, 8}) {
      for (KernelFamily f : {KernelFamily::kOptimized, KernelFamily::kLegacy}) {
        for (size_t extra : {0, 60}) {
          const size_t stride = extra == 0 ? 0 : (4 + (bits == 4 ? (dim + 1) / 2 : dim) + extra + 3) / 4 * 4;
          SCOPED_TRACE(std::string(set().isa) + " dim=" + std::to_string(dim) + " stride=" + std::to_string(stride));
          BagTester().rows(37).dim(dim).lengths(kLengths).scheme(bits).seed(dim).weighted(true).padding_idx(3)
              .interleaved(true, stride).Test(set(), f);
          BagTester().rows(37).dim(dim).lengths(kLengths).scheme(bits).seed(dim + 1).mean(true)
              .interleaved(true, stride).Test(set(), f);
          if (HasFailure()) return;
        }
      }
    }
  }
}

TEST_P(BagKernelsTest, BagsOf1000) {
  for (size_t dim : {17, 64, 128, 129}) {
    for (int bits : {4, 8}) {
      for (KernelFamily f : {KernelFamily::kMaterialized, KernelFamily::kOptimized, KernelFamily::kLegacy}) {
        BagTester().rows(101).dim(dim).lengths({1000, 0, 1000}).scheme(bits).seed(dim).Test(set(), f);
        BagTester().rows(101).dim(dim).lengths({1000, 1}).scheme(bits).seed(dim).weighted(true).Test(set(), f);
        BagTester().rows(101).dim(dim).lengths({1000}).scheme(bits).seed(dim).mean(true).padding_idx(5).Test(set(), f);
        if (HasFailure()) return;
      }
    }
  }
}

// Row scales at the edges of the float range: zero, subnormal, tiny (whose
// products with q and inv(s_a) underflow) and huge (whose outputs saturate,
// so the AVX-512 kernel leaves its unclamped path for them), mixed in one
// bag, at the dims of whole 64-byte groups and around them.
TEST_P(BagKernelsTest, ExtremeRowScales) {
  const std::vector<float> scales = {0.0f, 0x1p-102f, 0x1.fffffep-103f, 0x1p-126f, 0x1p-149f,
                                     0x1.8p-110f, 1e-30f, 3e4f, 0.37f};
  for (size_t dim : {64, 65, 128, 191, 192, 256, 257}) {
    SCOPED_TRACE(std::string(set().isa) + " dim=" + std::to_string(dim));
    for (KernelFamily f : {KernelFamily::kOptimized, KernelFamily::kLegacy}) {
      BagTester().rows(9).dim(dim).lengths({20, 1, 0, 7}).scheme(8).seed(dim).row_scales(scales).Test(set(), f);
      BagTester().rows(9).dim(dim).lengths({20, 1, 7}).scheme(8).seed(dim).row_scales(scales).weighted(true)
          .Test(set(), f);
      BagTester().rows(9).dim(dim).lengths({20, 7}).scheme(8).seed(dim).row_scales(scales).mean(true)
          .interleaved(true).Test(set(), f);
      if (HasFailure()) return;
    }
  }
}

// The AVX-512 8-bit kernel computes s_a * ((t + M) - M), M = 1.5 * 2^23, as
// one multiply-add with -(s_a * M) when that product is a float, and as the
// contract's subtraction and product otherwise: both forms, for every count
// of 16-column vectors it holds in registers (and a tail past them),
// weighted or not, in both layouts.
TEST_P(BagKernelsTest, BothFormsOfTheActivationProduct) {
  const float exact = 0x1.2p-12f;  // s_a * M needs 4 significant bits
  const float inexact = 0x1.fffffep-13f;
  ASSERT_EQ(std::fma(exact, 12582912.0f, -(exact * 12582912.0f)), 0.0f);
  ASSERT_NE(std::fma(inexact, 12582912.0f, -(inexact * 12582912.0f)), 0.0f);
  for (float scale : {exact, inexact}) {
    for (size_t dim = 16; dim <= 272; dim += 16) {
      for (size_t d : {dim, dim + 5}) {
        SCOPED_TRACE(std::string(set().isa) + " dim=" + std::to_string(d) + " s_a=" + std::to_string(scale));
        const ActivationEncoding act{scale, 30000};
        BagTester().rows(29).dim(d).lengths(kLengths).scheme(8).seed(d).activation(act).Test(set(),
                                                                                            KernelFamily::kOptimized);
        BagTester().rows(29).dim(d).lengths(kLengths).scheme(8).seed(d).activation(act).weighted(true)
            .interleaved(true).Test(set(), KernelFamily::kOptimized);
        BagTester().rows(29).dim(d).lengths(kLengths).scheme(8).seed(d).activation(act).mean(true).padding_idx(2)
            .Test(set(), KernelFamily::kOptimized);
        if (HasFailure()) return;
      }
    }
  }
}

// Rows staged a block of positions at a time (51 to 128 of them, by the row's
// size): bags that cross blocks, a bag of 400, and at every dim at least one
// whole block of padding ids that no row is read for, so the stage moves past
// blocks it was never asked for.
TEST_P(BagKernelsTest, StagedBlocks) {
  std::vector<int64_t> ids;
  for (int k = 0; k < 400; ++k) ids.push_back(k >= 70 && k < 260 ? 4 : (k * 7) % 23);
  for (size_t dim : {16, 64, 128, 129, 255, 256, 271, 287}) {
    SCOPED_TRACE(std::string(set().isa) + " dim=" + std::to_string(dim));
    for (int bits : {4, 8}) {
      for (KernelFamily f : {KernelFamily::kOptimized, KernelFamily::kLegacy}) {
        BagTester().rows(23).dim(dim).lengths({65, 1, 0, 200, 63, 71}).ids(ids).padding_idx(4).scheme(bits)
            .Test(set(), f);
        BagTester().rows(23).dim(dim).lengths({65, 1, 0, 200, 63, 71}).ids(ids).padding_idx(4).scheme(bits)
            .mean(true).interleaved(true).Test(set(), f);
        BagTester().rows(23).dim(dim).lengths({400}).ids(ids).padding_idx(4).scheme(bits).weighted(true)
            .Test(set(), f);
        if (HasFailure()) return;
      }
    }
  }
}

// One row repeated: a bag of one id many times, so every step adds the same
// value to a growing sum (rounding differs at every step).
TEST_P(BagKernelsTest, RepeatedIds) {
  for (int bits : {4, 8}) {
    for (KernelFamily f : {KernelFamily::kMaterialized, KernelFamily::kOptimized, KernelFamily::kLegacy}) {
      BagTester().rows(9).dim(33).lengths({300, 2}).ids(std::vector<int64_t>(302, 4)).scheme(bits).Test(set(), f);
      BagTester().rows(9).dim(33).lengths({300, 2}).ids(std::vector<int64_t>(302, 4)).scheme(bits)
          .mean(true).Test(set(), f);
      if (HasFailure()) return;
    }
  }
}

// Only padding ids: the bag counts nothing, so sum and mean are +0.
TEST_P(BagKernelsTest, OnlyPaddingGivesZeros) {
  for (bool mean : {false, true}) {
    BagTester().rows(9).dim(65).lengths({4, 0}).ids({3, 3, 3, 3}).padding_idx(3).mean(mean)
        .Test(set(), KernelFamily::kOptimized);
  }
  const KernelSet& s = set();
  const std::vector<uint16_t> table(4 * 9, 1234);
  RequantGatherParams p;
  p.weights = reinterpret_cast<const uint8_t*>(table.data());
  p.dim = 9;
  p.act = ActivationEncoding{0.5f, 0};
  const int64_t offsets[3] = {0, 2, 2};
  const int64_t ids[2] = {1, 1};
  BagParams bag;
  bag.offsets = offsets;
  bag.bags = 2;
  bag.padding_idx = 1;
  bag.mean = true;
  bag.out_stride = 9;
  std::vector<float> out(18, 7.0f);
  s.bag_u16_i64(p, ids, bag, out.data());
  for (float v : out) {
    EXPECT_EQ(float_bits(v), 0u);  // +0.0f, not -0 and not NaN
  }
}

// No multiply-add contraction: acc + (w * y) must round the product first.
// The values are chosen where a fused multiply-add gives other bits.
TEST_P(BagKernelsTest, WeightedSumIsNotFused) {
  const ActivationEncoding act{0.1f, 0};
  const int q0 = 3, q1 = 7;
  const float y0 = dequantize_activation(q0, act), y1 = dequantize_activation(q1, act);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(-3.0f, 3.0f);
  float w = 0;
  volatile float product = 0;
  float expected = 0;
  bool found = false;
  for (int tries = 0; tries < 1000 && !found; ++tries) {
    w = unit(rng);
    product = w * y1;
    expected = y0 + product;
    found = std::fma(w, y1, y0) != expected;
  }
  ASSERT_TRUE(found) << "no weight found where fma differs; the test could not fail";

  const size_t dim = 37;  // vector lanes and a scalar tail
  std::vector<uint16_t> table(2 * dim);
  for (size_t j = 0; j < dim; ++j) {
    table[j] = q0;
    table[dim + j] = q1;
  }
  RequantGatherParams p;
  p.weights = reinterpret_cast<const uint8_t*>(table.data());
  p.dim = dim;
  p.act = act;
  const int64_t offsets[2] = {0, 2};
  const int64_t ids[2] = {0, 1};
  const float weights[2] = {1.0f, w};
  BagParams bag;
  bag.offsets = offsets;
  bag.bags = 1;
  bag.weights = weights;
  bag.out_stride = dim;
  for (const KernelSet* s : {&set(), &scalar_reference_kernels()}) {
    std::vector<float> out(dim);
    s->bag_u16_i64(p, ids, bag, out.data());
    for (size_t j = 0; j < dim; ++j) {
      ASSERT_EQ(float_bits(out[j]), float_bits(expected)) << s->isa << " column " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, BagKernelsTest, ::testing::ValuesIn(compiled_kernel_isas()),
                         [](const auto& info) { return info.param; });

// The tester must be able to fail: a kernel that loses the last id of a bag.
void drops_last_id(const RequantGatherParams& p, const int64_t* ids, const BagParams& bag, float* out) {
  std::vector<int64_t> offsets(bag.offsets, bag.offsets + bag.bags + 1);
  if (bag.bags > 0 && offsets[1] > offsets[0]) offsets[1] -= 1;
  BagParams b = bag;
  b.offsets = offsets.data();
  scalar_reference_kernels().requant_bag_s8_i64(p, ids, b, out);
}

TEST(BagTesterTest, CatchesAWrongKernel) {
  KernelSet broken = scalar_reference_kernels();
  broken.isa = "BROKEN";
  broken.requant_bag_s8_i64 = &drops_last_id;
  EXPECT_NONFATAL_FAILURE(
      BagTester().rows(5).dim(9).lengths({3}).scheme(8).Test(broken, KernelFamily::kOptimized),
      "requant_bag_s8_i64[BROKEN] rows=5 dim=9 bags=1 bits=8 sum padding_idx=-1 seed=1: output [0]");
}

}  // namespace
}  // namespace qemb
