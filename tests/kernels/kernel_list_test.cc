// Every row of the kernel list (kernels/kernels.h), generically: for each
// kernel of each instruction set this build compiled, a random table of the
// row's key (family, weight bits, activation bits), random ids and bags,
// the row's function called through kernel_fn and compared bit for bit with
// the scalar reference of the same row, at the odd dims around the vector
// widths. No kernel is named here: a new row of the list is tested by
// existing, and a row whose kernel is missing or differs fails by its name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/ir.h"
#include "kernels/kernels.h"

namespace qemb {
namespace {

const size_t kDims[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 300};

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// A table of the row's key in its storage layout, with its scales and encodings.
struct Table {
  size_t rows = 0, dim = 0;
  std::vector<uint8_t> data;  // the table (materialized) or the packed rows
  std::vector<float> scales;
  std::vector<uint8_t> records;  // the row-interleaved copy (per-row families)
  RequantGatherParams params;    // plain layout
  RequantGatherParams interleaved;
};

ActivationEncoding random_act(std::mt19937_64& rng, int bits) {
  ActivationEncoding a;
  a.bits = bits;
  if (bits == 0) return a;
  const int32_t qmax = a.qmax();
  std::uniform_real_distribution<float> e(-6.0f, 0.0f);
  a.scale = rng() % 7 == 0 ? activation_eps(bits) : std::pow(10.0f, e(rng));
  switch (rng() % 4) {
    case 0: a.zero_point = 0; break;
    case 1: a.zero_point = qmax; break;
    default: a.zero_point = static_cast<int32_t>(rng() % static_cast<uint64_t>(qmax + 1)); break;
  }
  return a;
}

float random_float(std::mt19937_64& rng) {
  switch (rng() % 16) {
    case 0: return std::numeric_limits<float>::infinity();
    case 1: return -1e30f;
    case 2: return std::numeric_limits<float>::quiet_NaN();
    case 3: return 1e-41f;  // subnormal
    case 4: return 70000.0f;  // past binary16
    default: return std::uniform_real_distribution<float>(-3.0f, 3.0f)(rng);
  }
}

Table make_table(const KernelRow& row, size_t rows, size_t dim, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Table t;
  t.rows = rows;
  t.dim = dim;
  const ActivationEncoding act = random_act(rng, row.act_bits);
  const int w = row.weight_bits;
  const size_t row_bytes = (dim * static_cast<size_t>(w) + 7) / 8;
  t.data.assign(rows * row_bytes, 0);
  if (row.family == KernelFamily::kMaterialized) {
    for (size_t r = 0; r < rows; ++r) {
      uint8_t* p = t.data.data() + r * row_bytes;
      for (size_t j = 0; j < dim; ++j) {
        if (w == 32) {
          const float f = random_float(rng);
          std::memcpy(p + 4 * j, &f, 4);
        } else if (w == 16) {
          const uint16_t v = static_cast<uint16_t>(rng());
          std::memcpy(p + 2 * j, &v, 2);
        } else {
          p[j] = static_cast<uint8_t>(rng());
        }
      }
    }
  } else {
    const int qmax = (1 << (w - 1)) - 1;
    const StorageFormat& f = *find_storage_format(DataType::kSFixedPoint8, w);
    t.scales.resize(rows);
    std::uniform_real_distribution<float> e(-6.0f, 3.0f);
    for (size_t r = 0; r < rows; ++r) {
      t.scales[r] = rng() % 9 == 0 ? kEps : (rng() % 9 == 1 && act.bits ? act.scale * 0.5f * static_cast<float>(1 + rng() % 5)
                                                                          : std::pow(10.0f, e(rng)));
      uint8_t* p = t.data.data() + r * row_bytes;
      for (size_t j = 0; j < dim; ++j) {
        // Mostly [-qmax, qmax]; now and then the one two's-complement value
        // below it, which the kernels must map as the reference does.
        const int q = rng() % 32 == 0 ? -qmax - 1 : static_cast<int>(rng() % static_cast<uint64_t>(2 * qmax + 1)) - qmax;
        f.store(p, static_cast<int64_t>(j), q);
      }
      // Unused bits of the last byte hold garbage the kernels must ignore.
      if (w < 8 && dim * static_cast<size_t>(w) % 8 != 0)
        p[row_bytes - 1] |= static_cast<uint8_t>(0xFF << ((dim * static_cast<size_t>(w)) % 8));
    }
  }
  t.params.weights = t.data.data();
  t.params.row_scales = t.scales.empty() ? nullptr : t.scales.data();
  t.params.dim = dim;
  t.params.rows = rows;
  t.params.act = act;
  t.params.max_scale = t.scales.empty() ? 0.0f : *std::max_element(t.scales.begin(), t.scales.end());
  t.interleaved = t.params;
  if (!t.scales.empty()) {
    const size_t stride = (4 + row_bytes + 3) / 4 * 4;
    t.records.assign(rows * stride, 0xEE);
    for (size_t r = 0; r < rows; ++r) {
      std::memcpy(t.records.data() + r * stride, &t.scales[r], 4);
      std::memcpy(t.records.data() + r * stride + 4, t.data.data() + r * row_bytes, row_bytes);
    }
    t.interleaved.weights = t.records.data() + 4;
    t.interleaved.row_scales = reinterpret_cast<const float*>(t.records.data());
    t.interleaved.row_stride = t.interleaved.scale_stride = stride;
  }
  return t;
}

std::vector<int64_t> random_ids(size_t rows, size_t n, std::mt19937_64& rng) {
  std::vector<int64_t> ids(n);
  for (auto& id : ids) id = static_cast<int64_t>(rng() % rows);
  if (n > 0) ids[0] = 0;
  if (n > 1) ids[n - 1] = static_cast<int64_t>(rows - 1);
  return ids;
}

// Output bytes compared exactly (float outputs by bit pattern), and a guard
// past the end that must stay untouched.
template <typename T>
void check(const std::string& what, const std::vector<T>& want, const std::vector<T>& got, size_t n) {
  for (size_t k = 0; k < n; ++k) {
    if (std::memcmp(&want[k], &got[k], sizeof(T)) != 0) {
      if constexpr (std::is_same_v<T, float>)
        ADD_FAILURE() << what << ": value " << k << " is " << got[k] << " (0x" << std::hex << bits_of(got[k])
                      << "), the reference gives " << want[k] << " (0x" << bits_of(want[k]) << ")";
      else
        ADD_FAILURE() << what << ": value " << k << " is " << +got[k] << ", the reference gives " << +want[k];
      return;
    }
  }
  for (size_t k = n; k < got.size(); ++k) {
    if (std::memcmp(&got[k], &want[k], sizeof(T)) != 0) {
      ADD_FAILURE() << what << " wrote past its output";
      return;
    }
  }
}

constexpr size_t kGuard = 37;

// One gather row of the list: set's kernel against the reference's.
template <typename T, typename Fn>
void test_gather(const KernelSet& set, GatherKernel k, const Table& t, const std::vector<int64_t>& ids,
                 const std::string& what) {
  const size_t n = ids.size() * t.dim;
  std::vector<T> want(n + kGuard), got(n + kGuard);
  std::memset(want.data(), 0x5A, want.size() * sizeof(T));
  std::memset(got.data(), 0x5A, got.size() * sizeof(T));
  const Fn ref = kernel_fn<Fn>(scalar_reference_kernels(), k), fn = kernel_fn<Fn>(set, k);
  ASSERT_NE(fn, nullptr) << what << " is missing";
  for (const RequantGatherParams* p : {&t.params, &t.interleaved}) {
    if (p == &t.interleaved && t.scales.empty()) continue;
    if constexpr (std::is_same_v<Fn, GatherU16Fn>) {
      ref(reinterpret_cast<const uint16_t*>(t.data.data()), t.dim, ids.data(), ids.size(), want.data());
      fn(reinterpret_cast<const uint16_t*>(t.data.data()), t.dim, ids.data(), ids.size(), got.data());
    } else if constexpr (std::is_same_v<Fn, GatherU16F32Fn> || std::is_same_v<Fn, GatherU16HalfFn>) {
      ref(reinterpret_cast<const uint16_t*>(t.data.data()), t.dim, t.params.act, ids.data(), ids.size(), want.data());
      fn(reinterpret_cast<const uint16_t*>(t.data.data()), t.dim, t.params.act, ids.data(), ids.size(), got.data());
    } else {
      ref(t.params, ids.data(), ids.size(), want.data());
      fn(*p, ids.data(), ids.size(), got.data());
    }
    check(what + (p == &t.interleaved ? " (row-interleaved)" : ""), want, got, n);
  }
}

template <typename Id, typename Fn>
void test_bag(const KernelSet& set, GatherKernel k, const Table& t, std::mt19937_64& rng, const std::string& what) {
  const Fn ref = kernel_fn<Fn>(scalar_reference_kernels(), k), fn = kernel_fn<Fn>(set, k);
  ASSERT_NE(fn, nullptr) << what << " is missing";
  const size_t bags = 1 + rng() % 6;
  std::vector<int64_t> offsets(bags + 1, 0);
  for (size_t b = 0; b < bags; ++b) offsets[b + 1] = offsets[b] + static_cast<int64_t>(rng() % 5);  // empty bags too
  const size_t n = static_cast<size_t>(offsets[bags]);
  std::vector<int64_t> wide = random_ids(t.rows, n, rng);
  std::vector<Id> ids(wide.begin(), wide.end());
  std::vector<float> weights(n);
  for (float& w : weights) w = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
  for (int variant = 0; variant < 3; ++variant) {
    BagParams bag;
    bag.offsets = offsets.data();
    bag.bags = bags;
    bag.out_stride = t.dim + 3;
    bag.weights = variant == 1 ? weights.data() : nullptr;
    bag.mean = variant == 2;
    bag.padding_idx = variant == 2 && n > 0 ? ids[0] : -1;
    std::vector<float> want(bags * bag.out_stride, 7.0f), got(bags * bag.out_stride, 7.0f);
    for (const RequantGatherParams* p : {&t.params, &t.interleaved}) {
      if (p == &t.interleaved && t.scales.empty()) continue;
      ref(t.params, ids.data(), bag, want.data());
      fn(*p, ids.data(), bag, got.data());
      check(what + " variant " + std::to_string(variant), want, got, want.size());
    }
  }
}

class KernelListTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    set_ = find_kernel_set(GetParam());
    if (set_ == nullptr) GTEST_SKIP() << GetParam() << " is compiled in but this CPU does not have it";
  }
  const KernelSet* set_ = nullptr;
};

TEST_P(KernelListTest, EveryRowMatchesTheReference) {
  const KernelSet& set = *set_;
  for (const KernelRow& row : kKernelRows) {
    const std::string name = kernel_name(set, row.kernel);
    for (size_t dim : kDims) {
      for (size_t rows : {1, 37}) {
        const uint64_t seed = dim * 1000 + rows + static_cast<uint64_t>(row.kernel) * 7919;
        const Table t = make_table(row, rows, dim, seed);
        std::mt19937_64 rng(seed + 1);
        const std::vector<int64_t> ids = random_ids(rows, 19, rng);  // past the prefetch distance
        const std::string what = name + " dim=" + std::to_string(dim) + " rows=" + std::to_string(rows);
        const GatherKernel k = row.kernel;
        if (kernel_fn<GatherU16Fn>(set, k)) test_gather<uint16_t, GatherU16Fn>(set, k, t, ids, what);
        else if (kernel_fn<GatherU16F32Fn>(set, k)) test_gather<float, GatherU16F32Fn>(set, k, t, ids, what);
        else if (kernel_fn<GatherU16HalfFn>(set, k)) test_gather<uint16_t, GatherU16HalfFn>(set, k, t, ids, what);
        else if (kernel_fn<RequantGatherU16Fn>(set, k)) test_gather<uint16_t, RequantGatherU16Fn>(set, k, t, ids, what);
        else if (kernel_fn<RequantGatherU8Fn>(set, k)) test_gather<uint8_t, RequantGatherU8Fn>(set, k, t, ids, what);
        else if (kernel_fn<RequantGatherF32Fn>(set, k)) test_gather<float, RequantGatherF32Fn>(set, k, t, ids, what);
        else if (kernel_fn<BagI32Fn>(set, k)) test_bag<int32_t, BagI32Fn>(set, k, t, rng, what);
        else if (kernel_fn<BagI64Fn>(set, k)) test_bag<int64_t, BagI64Fn>(set, k, t, rng, what);
        else ADD_FAILURE() << name << " is missing from the set";
        if (HasFailure()) return;
      }
    }
  }
}

// The list's keys are unique: find_kernel finds each row by its own key.
TEST(KernelList, KeysAreUniqueAndFindTheirRow) {
  for (const KernelRow& row : kKernelRows) {
    const std::optional<GatherKernel> found = find_kernel(row.family, row.weight_bits, row.act_bits, row.form);
    ASSERT_TRUE(found.has_value());
    EXPECT_EQ(static_cast<int>(*found), static_cast<int>(row.kernel)) << kernel_stem(row.kernel);
    EXPECT_EQ(&kernel_row(row.kernel), &row);
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, KernelListTest, ::testing::ValuesIn(compiled_kernel_isas()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace qemb
