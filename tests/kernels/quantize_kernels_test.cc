// Every quantization kernel of every instruction set against the scalar
// contract of qemb/numeric.h, bit for bit, at dims around the vector widths.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/ir.h"
#include "qemb/quantize.h"
#include "kernels/quantize_kernels.h"

namespace qemb {
namespace {

std::vector<QuantizeKernelSet> AllSets() {
  std::vector<QuantizeKernelSet> sets = all_quantize_kernel_sets();
  sets.push_back(reference_quantize_kernels());
  return sets;
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// weight_row_scale and min_max restated (the kernels layer does not link quant).
float ScalarRowScale(const std::vector<float>& w, int qmax) {
  float amax = 0.0f;
  for (float v : w) amax = std::max(amax, std::fabs(v));
  return std::max(amax / static_cast<float>(qmax), kEps);
}

// Rows with ties (k + 0.5 times the scale), 0.49999997, clamps, zeros, -0.
std::vector<float> TestRow(size_t dim, uint32_t seed, int kind) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(dim);
  for (size_t j = 0; j < dim; ++j) {
    switch (kind) {
      case 0: w[j] = normal(rng); break;
      case 1: w[j] = 0.0f; break;
      case 2: w[j] = (j % 3 == 0) ? -0.0f : 0.0f; break;
      case 3: w[j] = static_cast<float>(static_cast<int>(rng() % 31) - 15) * 0.5f; break;  // ties at scale 1
      case 4: w[j] = (j % 2 ? 1 : -1) * 0.49999997f * static_cast<float>(1 + j % 4); break;
      default: w[j] = normal(rng) * std::pow(10.0f, static_cast<float>(static_cast<int>(rng() % 60) - 30)); break;
    }
  }
  return w;
}

const size_t kDims[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129,
                        1023, 1024, 1025, 2047, 2049, 4096};

TEST(QuantizeKernels, RowStatsMatchScalar) {
  for (const QuantizeKernelSet& set : AllSets()) {
    for (size_t dim : kDims) {
      for (int kind = 0; kind < 6; ++kind) {
        const std::vector<float> w = TestRow(dim, static_cast<uint32_t>(dim * 7 + kind), kind);
        RowStats st;
        ASSERT_EQ(set.row_stats_f32(w.data(), dim, &st), -1) << set.isa;
        float lo = w[0], hi = w[0];
        for (float v : w) lo = std::min(lo, v), hi = std::max(hi, v);
        EXPECT_EQ(st.min, lo) << set.isa << " dim " << dim;  // == : -0 and +0 may swap
        EXPECT_EQ(st.max, hi) << set.isa << " dim " << dim;
        for (int qmax : {7, 127})
          EXPECT_EQ(Bits(row_scale_from_amax(st.amax, qmax)), Bits(ScalarRowScale(w, qmax)))
              << set.isa << " dim " << dim << " kind " << kind;
      }
    }
  }
}

TEST(QuantizeKernels, QuantizeMatchesScalarBitForBit) {
  for (const QuantizeKernelSet& set : AllSets()) {
    for (size_t dim : kDims) {
      for (int kind = 0; kind < 6; ++kind) {
        const std::vector<float> w = TestRow(dim, static_cast<uint32_t>(dim * 13 + kind), kind);
        for (int bits : {4, 8}) {
          const int qmax = bits == 4 ? 7 : 127;
          // Scale 1 keeps the ties of kind 3/4 exact ties; scale 0.1 clamps.
          for (float s : {ScalarRowScale(w, qmax), 1.0f, 0.1f, kEps}) {
            if (bits == 8) {
              std::vector<int8_t> got(dim + 8, 0x55);
              set.quantize_row_s8(w.data(), dim, s, got.data());
              for (size_t j = 0; j < dim; ++j)
                ASSERT_EQ(got[j], quantize_weight(w[j], s, qmax)) << set.isa << " dim " << dim << " kind " << kind << " scale " << s << " col " << j;
              EXPECT_EQ(got[dim], 0x55) << "wrote past the row";
            } else {
              const size_t bytes = (dim + 1) / 2;
              std::vector<uint8_t> got(bytes + 8, 0xAA), want(bytes, 0);
              for (size_t j = 0; j < dim; ++j)
                pack_int4(want.data(), static_cast<int64_t>(j), quantize_weight(w[j], s, qmax));
              set.quantize_row_s4(w.data(), dim, s, got.data());
              for (size_t k = 0; k < bytes; ++k)
                ASSERT_EQ(got[k], want[k]) << set.isa << " dim " << dim << " kind " << kind << " scale " << s << " byte " << k;
              EXPECT_EQ(got[bytes], 0xAA) << "wrote past the row";
            }
          }
        }
      }
    }
  }
}

TEST(QuantizeKernels, OddRowPaddingNibbleIsZero) {
  for (const QuantizeKernelSet& set : AllSets()) {
    const std::vector<float> w(33, -7.0f);
    std::vector<uint8_t> got(17, 0xFF);
    set.quantize_row_s4(w.data(), 33, 1.0f, got.data());
    EXPECT_EQ(got[16], 0x09) << set.isa;  // -7 = 0b1001 low, padding 0 high
    EXPECT_EQ(got[0], 0x99) << set.isa;
  }
}

// A float row rounded to BF16 (truncation is enough: any BF16 will do), as
// little-endian bytes at an odd address, and the floats those bytes are.
struct Bf16Row {
  std::vector<uint8_t> storage;
  std::vector<float> values;
  const uint8_t* bytes() const { return storage.data() + 1; }
};
Bf16Row ToBf16(const std::vector<float>& w) {
  Bf16Row r;
  r.storage.assign(2 * w.size() + 1, 0);
  for (size_t j = 0; j < w.size(); ++j) {
    const uint32_t top = Bits(w[j]) >> 16;
    r.storage[1 + 2 * j] = static_cast<uint8_t>(top);
    r.storage[2 + 2 * j] = static_cast<uint8_t>(top >> 8);
    const uint32_t bits = top << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    r.values.push_back(f);
  }
  return r;
}

TEST(QuantizeKernels, Bf16FormsMatchTheFloatFormsOnTheDecodedRow) {
  for (const QuantizeKernelSet& set : AllSets()) {
    for (size_t dim : kDims) {
      for (int kind = 0; kind < 6; ++kind) {
        const Bf16Row row = ToBf16(TestRow(dim, static_cast<uint32_t>(dim * 17 + kind), kind));
        const std::vector<float>& w = row.values;
        RowStats want, got;
        ASSERT_EQ(set.row_stats_f32(w.data(), dim, &want), -1);
        ASSERT_EQ(set.row_stats_bf16(row.bytes(), dim, &got), -1) << set.isa << " dim " << dim;
        EXPECT_EQ(got.min, want.min) << set.isa << " dim " << dim << " kind " << kind;  // -0 and +0 may swap
        EXPECT_EQ(got.max, want.max) << set.isa << " dim " << dim << " kind " << kind;
        EXPECT_EQ(Bits(got.amax), Bits(want.amax)) << set.isa << " dim " << dim << " kind " << kind;
        for (float s : {ScalarRowScale(w, 7), ScalarRowScale(w, 127), 1.0f, 0.1f, kEps}) {
          std::vector<int8_t> want8(dim + 8, 0x55), got8(dim + 8, 0x55);
          set.quantize_row_s8(w.data(), dim, s, want8.data());
          set.quantize_row_s8_bf16(row.bytes(), dim, s, got8.data());
          ASSERT_EQ(got8, want8) << set.isa << " dim " << dim << " kind " << kind << " scale " << s;
          std::vector<uint8_t> want4((dim + 1) / 2 + 8, 0xAA), got4(want4.size(), 0xAA);
          set.quantize_row_s4(w.data(), dim, s, want4.data());
          set.quantize_row_s4_bf16(row.bytes(), dim, s, got4.data());
          ASSERT_EQ(got4, want4) << set.isa << " dim " << dim << " kind " << kind << " scale " << s;
        }
      }
    }
  }
}

// Rows of random finite BF16 bit patterns over every exponent (subnormals,
// the largest finite magnitude 0x7F7F, ties once scaled), quantized with
// their own scale: the forms without the clamp give the clamped forms' bytes.
TEST(QuantizeKernels, OwnScaleFormsMatchTheClampedFormsOnTheRowsOwnScale) {
  std::mt19937 rng(7);
  std::vector<std::vector<uint16_t>> rows;
  for (size_t dim : kDims) {
    for (int kind = 0; kind < 6; ++kind) {  // the float test rows, as BF16
      const Bf16Row r = ToBf16(TestRow(dim, static_cast<uint32_t>(dim * 31 + kind), kind));
      std::vector<uint16_t> bits(dim);
      std::memcpy(bits.data(), r.bytes(), 2 * dim);
      rows.push_back(bits);
    }
    for (int top_exponent : {0, 1, 60, 127, 200, 254}) {  // the row's largest exponent
      std::vector<uint16_t> bits(dim);
      for (uint16_t& b : bits) {
        const uint32_t exponent = static_cast<uint32_t>(rng() % (static_cast<uint32_t>(top_exponent) + 1));
        b = static_cast<uint16_t>((rng() & 0x8000) | (exponent << 7) | (rng() & 0x7F));
      }
      bits[rng() % dim] = static_cast<uint16_t>((rng() & 0x8000) | (top_exponent << 7) | 0x7F);  // its amax
      rows.push_back(bits);
    }
  }
  for (const QuantizeKernelSet& set : AllSets()) {
    for (const std::vector<uint16_t>& bits : rows) {
      const size_t dim = bits.size();
      std::vector<uint8_t> storage(2 * dim + 1);
      std::memcpy(storage.data() + 1, bits.data(), 2 * dim);  // at an odd address
      const uint8_t* row = storage.data() + 1;
      RowStats st;
      ASSERT_EQ(set.row_stats_bf16(row, dim, &st), -1);
      const float s8 = row_scale_from_amax(st.amax, 127), s4 = row_scale_from_amax(st.amax, 7);
      std::vector<int8_t> want8(dim + 8, 0x55), got8(dim + 8, 0x55);
      set.quantize_row_s8_bf16(row, dim, s8, want8.data());
      set.quantize_row_s8_bf16_own_scale(row, dim, s8, got8.data());
      ASSERT_EQ(got8, want8) << set.isa << " dim " << dim << " amax " << st.amax;
      std::vector<uint8_t> want4((dim + 1) / 2 + 8, 0xAA), got4(want4.size(), 0xAA);
      set.quantize_row_s4_bf16(row, dim, s4, want4.data());
      set.quantize_row_s4_bf16_own_scale(row, dim, s4, got4.data());
      ASSERT_EQ(got4, want4) << set.isa << " dim " << dim << " amax " << st.amax;
    }
  }
}

TEST(QuantizeKernels, RowStatsReportFirstNonFiniteColumn) {
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  for (const QuantizeKernelSet& set : AllSets()) {
    for (size_t dim : {1, 5, 16, 33, 130}) {
      for (size_t col : {size_t{0}, dim / 2, dim - 1}) {
        for (float b : bad) {
          std::vector<float> w = TestRow(dim, 3, 0);
          w[col] = b;
          if (col + 1 < dim) w[dim - 1] = std::numeric_limits<float>::quiet_NaN();
          RowStats st;
          EXPECT_EQ(set.row_stats_f32(w.data(), dim, &st), static_cast<int64_t>(col))
              << set.isa << " dim " << dim;
          // The BF16 kernel finds non-finite values from the 16-bit magnitude.
          EXPECT_EQ(set.row_stats_bf16(ToBf16(w).bytes(), dim, &st), static_cast<int64_t>(col))
              << set.isa << " bf16 dim " << dim;
        }
      }
    }
  }
}

TEST(QuantizeKernels, AtLeastOneVectorSet) {
  EXPECT_FALSE(all_quantize_kernel_sets().empty());
  EXPECT_STREQ(reference_quantize_kernels().isa, "REFERENCE");
}

}  // namespace
}  // namespace qemb
