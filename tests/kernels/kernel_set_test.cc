// The kernel registry: which sets exist, how they are named and chosen.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "hwy/targets.h"
#if HWY_ARCH_ARM_A64 && defined(__linux__)
#include <sys/auxv.h>
#endif
#include "kernels/kernels.h"

namespace qemb {
namespace {

bool complete(const KernelSet& set) {
  bool all = true;
#define QEMB_CHECK_FIELD(name, ...) all = all && set.name != nullptr;
  QEMB_GATHER_KERNELS(QEMB_CHECK_FIELD)
#undef QEMB_CHECK_FIELD
  return all;
}

TEST(KernelSetTest, EverySupportedSetIsCompleteAndDistinct) {
  const auto sets = all_supported_kernel_sets();
  ASSERT_FALSE(sets.empty());
  std::set<std::string> isas;
  for (const KernelSet& set : sets) {
    EXPECT_TRUE(complete(set)) << set.isa;
    EXPECT_NE(set.hwy_target, 0) << set.isa;
    EXPECT_STREQ(set.isa, hwy::TargetName(set.hwy_target));
    EXPECT_TRUE(hwy::SupportedTargets() & set.hwy_target) << set.isa << " is not supported here";
    EXPECT_TRUE(isas.insert(set.isa).second) << "duplicate " << set.isa;
  }
}

TEST(KernelSetTest, SetsComeBestFirstAndBestIsTheFirst) {
  const auto sets = all_supported_kernel_sets();
  for (size_t i = 1; i < sets.size(); ++i) {
    // Highway orders targets by bit, lower bits being better instruction sets.
    EXPECT_LT(sets[i - 1].hwy_target, sets[i].hwy_target);
  }
  EXPECT_STREQ(best_kernels().isa, sets.front().isa);
  EXPECT_EQ(best_kernels().requant_gather_s4_u16, sets.front().requant_gather_s4_u16);
  EXPECT_EQ(&best_kernels(), &best_kernels());  // chosen once
}

TEST(KernelSetTest, DifferentSetsHoldDifferentCode) {
  const auto sets = all_supported_kernel_sets();
  for (size_t i = 1; i < sets.size(); ++i) {
    EXPECT_NE(sets[i - 1].requant_gather_s8_u16, sets[i].requant_gather_s8_u16)
        << sets[i - 1].isa << " vs " << sets[i].isa;
  }
}

#if HWY_ARCH_X86
TEST(KernelSetTest, X86BuildsOfferSse4AndAvx2WhereTheCpuHasThem) {
  const int64_t cpu = hwy::SupportedTargets();
  for (int64_t target : {HWY_SSE4, HWY_AVX2, HWY_AVX3}) {
    if (cpu & target) {
      EXPECT_NE(find_kernel_set(hwy::TargetName(target)), nullptr) << hwy::TargetName(target);
    }
  }
}
#endif

TEST(KernelSetTest, SupportedSetsAreCompiledOnesInTheSameOrder) {
  const std::vector<std::string> compiled = compiled_kernel_isas();
  ASSERT_FALSE(compiled.empty());
  size_t next = 0;
  for (const KernelSet& set : all_supported_kernel_sets()) {
    while (next < compiled.size() && compiled[next] != set.isa) ++next;
    EXPECT_LT(next, compiled.size()) << set.isa << " is supported but not compiled, or out of order";
  }
}

#if HWY_ARCH_ARM_A64 && defined(__linux__)
// What the kernel says the CPU has, read independently of Highway.
TEST(KernelSetTest, ArmBuildsOfferNeonAlwaysAndSveWhereTheCpuHasIt) {
  EXPECT_NE(find_kernel_set("NEON"), nullptr);  // ASIMD is part of every AArch64 CPU
  const bool sve = (getauxval(AT_HWCAP) & HWCAP_SVE) != 0;
  EXPECT_EQ(find_kernel_set("SVE") != nullptr, sve);
  if (!sve) EXPECT_STREQ(best_kernels().isa, "NEON");
}
#endif

// scripts/test-aarch64.sh names the sets each emulated CPU model must get, so
// a wrong detection cannot pass as "fewer sets tested".
TEST(KernelSetTest, SetsAreTheOnesExpectedForThisCpu) {
  const char* expected = std::getenv("QEMB_EXPECT_KERNEL_SETS");
  if (expected == nullptr) GTEST_SKIP() << "QEMB_EXPECT_KERNEL_SETS is not set";
  std::string got;
  for (const KernelSet& set : all_supported_kernel_sets()) got += (got.empty() ? "" : ",") + std::string(set.isa);
  EXPECT_EQ(got, expected);
}

TEST(KernelSetTest, FindByIsa) {
  for (const KernelSet& set : all_supported_kernel_sets()) {
    const KernelSet* found = find_kernel_set(set.isa);
    ASSERT_NE(found, nullptr) << set.isa;
    EXPECT_EQ(found->gather_u16, set.gather_u16);
  }
  EXPECT_EQ(find_kernel_set("REFERENCE"), &scalar_reference_kernels());
  EXPECT_EQ(find_kernel_set("AVX9000"), nullptr);
  EXPECT_EQ(find_kernel_set(""), nullptr);
}

TEST(KernelSetTest, ReferenceSetIsComplete) {
  const KernelSet& ref = scalar_reference_kernels();
  EXPECT_STREQ(ref.isa, "REFERENCE");
  EXPECT_EQ(ref.hwy_target, 0);
  EXPECT_TRUE(complete(ref));
}

TEST(KernelSetTest, NamesSayOpDtypeAndIsa) {
  KernelSet set;
  set.isa = "AVX2";
  EXPECT_EQ(kernel_name(set, GatherKernel::gather_u16), "gather_u16[AVX2]");
  EXPECT_EQ(kernel_name(set, GatherKernel::gather_u16_f32), "gather_u16_f32[AVX2]");
  EXPECT_EQ(kernel_name(set, GatherKernel::requant_gather_s4_u16), "requant_gather_s4_u16[AVX2]");
  EXPECT_EQ(kernel_name(set, GatherKernel::requant_gather_s8_f32), "requant_gather_s8_f32[AVX2]");
  EXPECT_EQ(kernel_name(set, GatherKernel::legacy_gather_s4_f32), "legacy_gather_s4_f32[AVX2]");
  EXPECT_EQ(kernel_name(set, GatherKernel::legacy_gather_s8_u16), "legacy_gather_s8_u16[AVX2]");
  EXPECT_EQ(kernel_name(set, GatherKernel::requant_bag_s4_i32), "requant_bag_s4_i32[AVX2]");
  EXPECT_EQ(kernel_name(set, GatherKernel::bag_u16_i64), "bag_u16_i64[AVX2]");
  EXPECT_EQ(kernel_name(set, GatherKernel::requant_gather_s4_f16), "requant_gather_s4_f16[AVX2]");
  EXPECT_EQ(kernel_name(set, GatherKernel::legacy_gather_s8_bf16), "legacy_gather_s8_bf16[AVX2]");
  EXPECT_EQ(kernel_name(set, GatherKernel::requant_gather_s2_u8_f16), "requant_gather_s2_u8_f16[AVX2]");
  EXPECT_EQ(kernel_name(set, GatherKernel::dequant_gather_s4_f32), "dequant_gather_s4_f32[AVX2]");
  EXPECT_EQ(kernel_name(set, GatherKernel::dequant_bag_s2_i64), "dequant_bag_s2_i64[AVX2]");
  EXPECT_EQ(kernel_name(set, GatherKernel::gather_u8), "gather_u8[AVX2]");
  // 30 tuned kernels of 16-bit activations over 4- and 8-bit weights, and 74
  // generic ones: 2-bit weights (12), uint8 activations (6 + 36), weight-only (5 + 15).
  EXPECT_EQ(kNumGatherKernels, 104);
  std::set<std::string> stems;
  for (int k = 0; k < kNumGatherKernels; ++k) stems.insert(kernel_stem(static_cast<GatherKernel>(k)));
  EXPECT_EQ(stems.size(), 104u);
}

}  // namespace
}  // namespace qemb
