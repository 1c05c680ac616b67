// Writes a small, deterministic, LLM-shaped safetensors checkpoint to try qemb
// on without downloading anything:
//
//   qemb_make_example OUT.safetensors
//   qemb_make_example --rows R --dim D [--dtype BF16|F32] OUT.safetensors
//                       (a large table only, BF16 by default, for benchmarks)
//
// The embedding rows have log-normally spread scales, as in real checkpoints
// (rare tokens have small rows), so the legacy per-tensor approximation
// visibly loses accuracy on the small rows while the optimized pattern does not.
// Uses its own PRNG and Box-Muller so the bytes do not depend on the C++
// library's distributions.
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "qemb/half.h"
#include "qemb/safetensors.h"

namespace {

constexpr int64_t kVocab = 512;
constexpr int64_t kDim = 64;
constexpr uint64_t kSeed = 0x5EED0F0E3BEDD1A6ull;

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1]: never 0, so log() below is finite.
  double uniform() { return (static_cast<double>(next() >> 11) + 1.0) * (1.0 / 9007199254740992.0); }
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double radius = std::sqrt(-2.0 * std::log(uniform()));
    const double angle = 6.283185307179586 * uniform();
    spare_ = radius * std::sin(angle);
    has_spare_ = true;
    return radius * std::cos(angle);
  }

 private:
  uint64_t state_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

// Row r gets scale base * exp(sigma * N(0,1)); values are N(0,1) * scale.
std::vector<float> lognormal_rows(SplitMix64& rng, int64_t rows, int64_t cols, double base, double sigma) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const double scale = base * std::exp(sigma * rng.normal());
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(r * cols + c)] = static_cast<float>(rng.normal() * scale);
  }
  return out;
}

std::vector<float> gaussian(SplitMix64& rng, size_t count, double mean, double stddev) {
  std::vector<float> out(count);
  for (float& v : out) v = static_cast<float>(mean + stddev * rng.normal());
  return out;
}

bool add(std::vector<qemb::SafetensorsTensorData>& tensors, const std::string& name, const std::string& dtype,
         std::vector<int64_t> shape, const std::vector<float>& values) {
  auto bytes = qemb::floats_to_dtype_bytes(values.data(), values.size(), dtype);
  if (!bytes.ok()) {
    std::fprintf(stderr, "qemb_make_example: %s\n", bytes.error().to_string().c_str());
    return false;
  }
  tensors.push_back({name, dtype, std::move(shape), std::move(bytes).value()});
  return true;
}

// A production-sized BF16 (or F32) embedding, made row by row so only the
// output bytes are ever held in memory.
int write_large_table(int64_t rows, int64_t dim, const std::string& dtype, const char* path) {
  if (rows <= 0 || dim <= 0) {
    std::fprintf(stderr, "qemb_make_example: --rows and --dim must be positive\n");
    return 2;
  }
  if (dtype != "BF16" && dtype != "F32") {
    std::fprintf(stderr, "qemb_make_example: --dtype must be BF16 or F32\n");
    return 2;
  }
  const size_t width = dtype == "F32" ? 4 : 2;
  SplitMix64 rng(kSeed);
  std::vector<uint8_t> bytes(static_cast<size_t>(rows * dim) * width);
  for (int64_t r = 0; r < rows; ++r) {
    const double scale = 0.02 * std::exp(0.5 * rng.normal());
    uint8_t* row = bytes.data() + static_cast<size_t>(r * dim) * width;
    for (int64_t c = 0; c < dim; ++c) {
      const float v = static_cast<float>(rng.normal() * scale);
      if (width == 4) {
        std::memcpy(row + 4 * c, &v, 4);  // little-endian hosts only, as the rest of qemb
        continue;
      }
      const uint16_t b = qemb::float_to_bf16(v);
      row[2 * c] = static_cast<uint8_t>(b & 0xFF);
      row[2 * c + 1] = static_cast<uint8_t>(b >> 8);
    }
  }
  std::vector<qemb::SafetensorsTensorData> tensors;
  tensors.push_back({"model.embed_tokens.weight", dtype, {rows, dim}, std::move(bytes)});
  qemb::Status status = qemb::write_safetensors(path, {{"format", "pt"}}, tensors);
  if (!status.ok()) {
    std::fprintf(stderr, "qemb_make_example: %s\n", status.error().to_string().c_str());
    return 1;
  }
  std::printf("wrote %s: model.embed_tokens.weight %s [%lld, %lld]\n", path, dtype.c_str(),
              static_cast<long long>(rows), static_cast<long long>(dim));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "--rows" && std::string(argv[3]) == "--dim")
    return write_large_table(std::atoll(argv[2]), std::atoll(argv[4]), "BF16", argv[5]);
  if (argc == 8 && std::string(argv[1]) == "--rows" && std::string(argv[3]) == "--dim" &&
      std::string(argv[5]) == "--dtype")
    return write_large_table(std::atoll(argv[2]), std::atoll(argv[4]), argv[6], argv[7]);
  if (argc != 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fprintf(stderr,
                 "usage: qemb_make_example OUT.safetensors\n"
                 "       qemb_make_example --rows R --dim D [--dtype BF16|F32] OUT.safetensors\n"
                 "Writes a small deterministic LLM-like checkpoint (embedding "
                 "'model.embed_tokens.weight' BF16 [%lld, %lld]).\n",
                 static_cast<long long>(kVocab), static_cast<long long>(kDim));
    return argc == 2 ? 0 : 2;
  }
  SplitMix64 rng(kSeed);
  std::vector<qemb::SafetensorsTensorData> tensors;
  bool ok =
      add(tensors, "model.embed_tokens.weight", "BF16", {kVocab, kDim}, lognormal_rows(rng, kVocab, kDim, 0.02, 0.5)) &&
      add(tensors, "model.layers.0.self_attn.q_proj.weight", "BF16", {kDim, kDim},
          gaussian(rng, kDim * kDim, 0.0, 0.125)) &&
      add(tensors, "model.layers.0.input_layernorm.weight", "F32", {kDim}, gaussian(rng, kDim, 1.0, 0.05)) &&
      add(tensors, "model.norm.weight", "F32", {kDim}, gaussian(rng, kDim, 1.0, 0.05)) &&
      add(tensors, "lm_head.weight", "BF16", {kVocab, kDim}, gaussian(rng, kVocab * kDim, 0.0, 0.02));
  if (!ok) return 1;
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"generator", "qemb_make_example"}};
  qemb::Status status = qemb::write_safetensors(argv[1], metadata, tensors);
  if (!status.ok()) {
    std::fprintf(stderr, "qemb_make_example: %s\n", status.error().to_string().c_str());
    return 1;
  }
  std::printf("wrote %s: model.embed_tokens.weight BF16 [%lld, %lld] and %zu other tensors\n", argv[1],
              static_cast<long long>(kVocab), static_cast<long long>(kDim), tensors.size() - 1);
  return 0;
}
