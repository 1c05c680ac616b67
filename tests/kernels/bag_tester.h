// A fluent tester for the pooled (EmbeddingBag) kernels:
//
//   BagTester().rows(37).dim(17).lengths({0, 1, 1000}).scheme(4).weighted(true)
//       .Test(kernel_set, KernelFamily::kOptimized);
//
// builds a random table (the gather tester's, so scales and encodings stress
// rounding and clamping), random ids with repeats and padding ids, optional
// per-sample weights that include 0, -0 and negative values, runs the kernel
// set's bag kernel for int32 and int64 ids and the scalar reference, and
// asserts bit-identical outputs. Bag rows are written with a stride wider
// than dim, and the gaps and the tail must stay untouched.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/gather_tester.h"
#include "kernels/kernels.h"

namespace qemb::testing {

class BagTester {
 public:
  BagTester& rows(size_t v) { rows_ = v; return *this; }
  BagTester& dim(size_t d) { dim_ = d; return *this; }
  BagTester& lengths(std::vector<int64_t> l) { lengths_ = std::move(l); return *this; }
  BagTester& scheme(int weight_bits) { bits_ = weight_bits; return *this; }
  BagTester& weighted(bool w) { weighted_ = w; return *this; }
  BagTester& mean(bool m) { mean_ = m; return *this; }
  // Ids equal to it are skipped; the tester plants some.
  BagTester& padding_idx(int64_t p) { padding_idx_ = p; return *this; }
  BagTester& seed(uint64_t s) { seed_ = s; return *this; }
  // Explicit ids (and weights) instead of random ones.
  BagTester& ids(std::vector<int64_t> v) { ids_ = std::move(v); return *this; }
  BagTester& weights(std::vector<float> w) { weights_ = std::move(w); weighted_ = true; return *this; }
  // Row scales used in turn instead of the random ones.
  BagTester& row_scales(std::vector<float> s) { row_scales_ = std::move(s); return *this; }
  // The activation encoding instead of the random one.
  BagTester& activation(ActivationEncoding a) { act_ = a; has_act_ = true; return *this; }
  // Runs the kernels under test on the row-interleaved layout (each row's
  // scale, then its weights, every `stride` bytes; 0 = the tightest multiple
  // of 4), the reference on the plain one.
  BagTester& interleaved(bool on, size_t stride = 0) { interleaved_ = on; stride_ = stride; return *this; }

  void Test(const KernelSet& set, KernelFamily family) const {
    ASSERT_GT(rows_, 0u);
    std::mt19937_64 rng(seed_ * 0x9E3779B97F4A7C15ull + rows_ * 131 + dim_ * 7 + lengths_.size());
    std::vector<int64_t> offsets{0};
    for (int64_t l : lengths_) offsets.push_back(offsets.back() + l);
    const size_t n = static_cast<size_t>(offsets.back());
    std::vector<int64_t> ids = ids_;
    if (ids.empty()) {
      ids = random_ids(rows_, n, rng);
      if (padding_idx_ >= 0) {
        for (size_t i = 2; i < n; i += 5) ids[i] = padding_idx_;
      }
    }
    ASSERT_EQ(ids.size(), n);
    std::vector<float> weights = weights_;
    if (weighted_ && weights.empty()) {
      std::uniform_real_distribution<float> unit(-2.0f, 2.0f);
      weights.resize(n);
      for (size_t i = 0; i < n; ++i) {
        switch (i % 7) {
          case 3: weights[i] = 0.0f; break;
          case 5: weights[i] = -0.0f; break;
          case 6: weights[i] = -1.0f; break;
          default: weights[i] = unit(rng); break;
        }
      }
    }
    std::vector<int32_t> ids32(ids.begin(), ids.end());

    RandomPcqTable t = make_random_pcq_table(rows_, dim_, bits_, seed_ + 1000003 * dim_);
    if (!row_scales_.empty()) {
      for (size_t r = 0; r < rows_; ++r) t.scales[r] = row_scales_[r % row_scales_.size()];
      t.max_scale = *std::max_element(t.scales.begin(), t.scales.end());
    }
    if (has_act_) t.act = act_;
    std::vector<uint16_t> u16_table;
    RequantGatherParams p = t.params();
    if (family == KernelFamily::kMaterialized) {
      u16_table.resize(rows_ * dim_);
      for (auto& v : u16_table) v = static_cast<uint16_t>(rng());
      for (size_t j = 0; j < std::min<size_t>(dim_, 4); ++j) {  // the range ends
        u16_table[j] = 0;
        u16_table[(rows_ - 1) * dim_ + j] = 65535;
      }
      p.weights = reinterpret_cast<const uint8_t*>(u16_table.data());
    }

    RequantGatherParams pk = p;  // what the kernel under test reads
    std::vector<uint8_t> rows_buffer;
    if (interleaved_ && family != KernelFamily::kMaterialized) pk = t.interleaved_params(stride_, rows_buffer);

    BagParams bag;
    bag.offsets = offsets.data();
    bag.bags = lengths_.size();
    bag.weights = weighted_ ? weights.data() : nullptr;
    bag.padding_idx = padding_idx_;
    bag.mean = mean_;
    bag.out_stride = dim_ + kGap;
    const size_t out_size = bag.bags * bag.out_stride + kGap;

    const KernelSet& ref = scalar_reference_kernels();
    std::vector<float> want(out_size);
    FillPoison(want);
    i64_fn(ref, family)(p, ids.data(), bag, want.data());
    // The kernels under test may read every id ahead (their prefetch): under
    // the sanitizers, a read past the ids fails.
    bag.lookahead_end = n;
    // Every way of reading the rows (the kernels that stage them and those
    // that cannot), and both id widths.
    for (BagParams::RowReads reads : {BagParams::RowReads::kDirect, BagParams::RowReads::kStaged}) {
      bag.row_reads = reads;
      for (bool i32 : {false, true}) {
        std::vector<float> got(out_size);
        FillPoison(got);
        const GatherKernel k = kernel(family, i32);
        if (i32) {
          i32_fn(set, family)(pk, ids32.data(), bag, got.data());
        } else {
          i64_fn(set, family)(pk, ids.data(), bag, got.data());
        }
        const std::string name =
            kernel_name(set, k) + (reads == BagParams::RowReads::kStaged ? " (rows staged)" : "");
        if (!Check(name, want, got, bag.out_stride)) return;
      }
    }
  }

  // The family's pooled kernel of this width, found by its key in the list.
  GatherKernel kernel(KernelFamily f, bool i32) const {
    const int bits = f == KernelFamily::kMaterialized ? 16 : bits_;
    return *find_kernel(f, bits, 16, i32 ? KernelForm::kBagI32 : KernelForm::kBagI64);
  }

 private:
  static constexpr size_t kGap = 5;  // floats between bag rows and after the last
  bool interleaved_ = false;
  std::vector<float> row_scales_;
  ActivationEncoding act_;
  bool has_act_ = false;
  size_t stride_ = 0;
  static constexpr uint32_t kPoison = 0x7FC0BEEFu;

  BagI64Fn i64_fn(const KernelSet& s, KernelFamily f) const { return kernel_fn<BagI64Fn>(s, kernel(f, false)); }
  BagI32Fn i32_fn(const KernelSet& s, KernelFamily f) const { return kernel_fn<BagI32Fn>(s, kernel(f, true)); }

  static void FillPoison(std::vector<float>& v) {
    for (float& f : v) std::memcpy(&f, &kPoison, sizeof(f));
  }

  std::string Where() const {
    std::ostringstream os;
    os << "rows=" << rows_ << " dim=" << dim_ << " bags=" << lengths_.size() << " bits=" << bits_
       << (weighted_ ? " weighted" : "") << (mean_ ? " mean" : " sum")
       << " padding_idx=" << padding_idx_ << " seed=" << seed_;
    return os.str();
  }

  bool Check(const std::string& kernel, const std::vector<float>& want,
             const std::vector<float>& got, size_t stride) const {
    for (size_t k = 0; k < want.size(); ++k) {
      if (float_bits(want[k]) != float_bits(got[k])) {
        const bool gap = k % stride >= dim_ || k >= lengths_.size() * stride;
        ADD_FAILURE() << kernel << " " << Where() << ": "
                      << (gap ? "wrote outside the bag rows at float "
                              : "output [" + std::to_string(k / stride) + "][" +
                                    std::to_string(k % stride) + "]")
                      << (gap ? std::to_string(k) : "") << " is " << got[k] << " (bits 0x"
                      << std::hex << float_bits(got[k]) << "), the reference gives " << std::dec
                      << want[k] << " (bits 0x" << std::hex << float_bits(want[k]) << ")";
        return false;
      }
    }
    return true;
  }

  size_t rows_ = 1;
  size_t dim_ = 1;
  std::vector<int64_t> lengths_{1};
  int bits_ = 4;
  bool weighted_ = false;
  bool mean_ = false;
  int64_t padding_idx_ = -1;
  uint64_t seed_ = 1;
  std::vector<int64_t> ids_;
  std::vector<float> weights_;
};

}  // namespace qemb::testing
