// Every gather kernel of every instruction set this machine supports, against
// the scalar reference, at sizes around the vector widths.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "qemb/kernels.h"
#include "kernels/gather_tester.h"

namespace qemb {
namespace {

using testing::GatherFamily;
using testing::GatherTester;

std::vector<std::string> supported_isas() {
  std::vector<std::string> isas;
  for (const KernelSet& set : all_supported_kernel_sets()) isas.push_back(set.isa);
  return isas;
}

class GatherKernelsTest : public ::testing::TestWithParam<std::string> {
 protected:
  const KernelSet& set() const {
    const KernelSet* s = find_kernel_set(GetParam());
    EXPECT_NE(s, nullptr) << GetParam();
    return *s;
  }
};

// Around 16/32/64-byte vectors, 128-bit blocks and the 4-bit nibble pairs.
const size_t kDims[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65,
                        95, 127, 128, 129, 191, 255, 256, 257, 4096};

void run_all_dims(const KernelSet& set, GatherFamily family, int bits) {
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

TEST_P(GatherKernelsTest, Materialized) { run_all_dims(set(), GatherFamily::kMaterialized, 4); }
TEST_P(GatherKernelsTest, OptimizedS4) { run_all_dims(set(), GatherFamily::kOptimized, 4); }
TEST_P(GatherKernelsTest, OptimizedS8) { run_all_dims(set(), GatherFamily::kOptimized, 8); }
TEST_P(GatherKernelsTest, LegacyS4) { run_all_dims(set(), GatherFamily::kLegacy, 4); }
TEST_P(GatherKernelsTest, LegacyS8) { run_all_dims(set(), GatherFamily::kLegacy, 8); }

TEST_P(GatherKernelsTest, ManySeedsAndLargerBatches) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    for (int bits : {4, 8}) {
      for (GatherFamily f : {GatherFamily::kMaterialized, GatherFamily::kOptimized,
                             GatherFamily::kLegacy}) {
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

INSTANTIATE_TEST_SUITE_P(AllIsas, GatherKernelsTest, ::testing::ValuesIn(supported_isas()),
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
      GatherTester().rows(5).dim(9).batch(3).scheme(4).Test(broken, GatherFamily::kOptimized),
      "requant_gather_s4_u16[BROKEN] rows=5 dim=9 batch=3 bits=4 seed=1: output [0][5]");
}

}  // namespace
}  // namespace qemb
