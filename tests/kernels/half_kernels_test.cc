// Every half-precision decoder of every instruction set against qemb/half.h,
// bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "qemb/half.h"
#include "kernels/half_kernels.h"

namespace qemb {
namespace {

std::vector<HalfKernelSet> AllSets() {
  std::vector<HalfKernelSet> sets = all_half_kernel_sets();
  sets.push_back(reference_half_kernels());
  return sets;
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

const size_t kDims[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129,
                        1023, 1024, 1025, 2047, 2049, 4096};

TEST(HalfKernels, SetsExist) {
  EXPECT_FALSE(all_half_kernel_sets().empty());
  EXPECT_STREQ(reference_half_kernels().isa, "REFERENCE");
}

// Every one of the 65536 half patterns, from an odd address, at lengths
// around the vector widths: the same float bits as qemb/half.h (NaN: any NaN).
TEST(HalfKernels, DecodeHalfMatchesScalarForEveryValue) {
  std::vector<uint8_t> bytes(2 * 65536 + 1);
  for (uint32_t v = 0; v < 65536; ++v) {
    bytes[1 + 2 * v] = static_cast<uint8_t>(v & 0xFF);
    bytes[2 + 2 * v] = static_cast<uint8_t>(v >> 8);
  }
  const uint8_t* src = bytes.data() + 1;
  for (const HalfKernelSet& set : AllSets()) {
    for (int format = 0; format < 2; ++format) {
      const DecodeHalfFn decode = format == 0 ? set.decode_bf16 : set.decode_f16;
      const char* name = format == 0 ? "BF16" : "F16";
      std::vector<float> out(65536 + 1, 1234.5f);
      decode(src, 65536, out.data());
      for (uint32_t v = 0; v < 65536; ++v) {
        const float want = format == 0 ? bf16_to_float(static_cast<uint16_t>(v)) : f16_to_float(static_cast<uint16_t>(v));
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(out[v])) << set.isa << " " << name << " 0x" << std::hex << v;
        } else {
          ASSERT_EQ(Bits(out[v]), Bits(want)) << set.isa << " " << name << " 0x" << std::hex << v;
        }
      }
      EXPECT_EQ(out[65536], 1234.5f) << set.isa << " " << name << ": wrote past the end";
      for (size_t count : kDims) {
        std::vector<float> part(count + 1, 1234.5f);
        const size_t first = (count * 7919) % (65536 - count);
        decode(src + 2 * first, count, part.data());
        for (size_t i = 0; i < count; ++i) {
          if (std::isnan(out[first + i])) continue;
          ASSERT_EQ(Bits(part[i]), Bits(out[first + i])) << set.isa << " " << name << " count " << count;
        }
        EXPECT_EQ(part[count], 1234.5f) << set.isa << " " << name << " count " << count;
      }
    }
  }
}

}  // namespace
}  // namespace qemb
