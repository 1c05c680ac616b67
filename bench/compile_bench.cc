// Compile throughput against a plain read pass over the same safetensors input,
// in the same run. Table size: QEMB_BENCH_COMPILE_ROWS x QEMB_BENCH_COMPILE_DIM
// (default 32768 x 4096 BF16 = 256 MiB; scripts/bench-large.sh runs the
// Llama-3 and Gemma sizes and also records peak memory).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "qemb/compiler.h"
#include "qemb/half.h"
#include "qemb/safetensors.h"

namespace {

int64_t env_or(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoll(v) : fallback;
}

// Writes the input once per process.
const std::string& input_checkpoint() {
  static const std::string path = [] {
    const int64_t rows = env_or("QEMB_BENCH_COMPILE_ROWS", 32768), dim = env_or("QEMB_BENCH_COMPILE_DIM", 4096);
    std::string p = (std::filesystem::temp_directory_path() /
                     ("qemb_compile_bench_" + std::to_string(::getpid()) + ".safetensors"))
                        .string();
    std::vector<uint8_t> bytes(static_cast<size_t>(rows * dim) * 2);
    uint64_t state = 42;
    for (size_t i = 0; i < bytes.size(); i += 2) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const float v = static_cast<float>(static_cast<int32_t>(state >> 40) - (1 << 23)) * 1e-8f;
      const uint16_t b = qemb::float_to_bf16(v);
      bytes[i] = static_cast<uint8_t>(b & 0xFF);
      bytes[i + 1] = static_cast<uint8_t>(b >> 8);
    }
    auto s = qemb::write_safetensors(p, {}, {{"model.embed_tokens.weight", "BF16", {rows, dim}, std::move(bytes)}});
    if (!s.ok()) std::abort();
    std::atexit([] { std::filesystem::remove(input_checkpoint()); });
    return p;
  }();
  return path;
}

// The baselines: touch every byte of the mapped input once (how compile
// reads it), or read(2) it through a reused 1 MiB buffer.
void BM_ReadPass(benchmark::State& state) {
  const std::string& path = input_checkpoint();
  for (auto _ : state) {
    auto file = qemb::SafetensorsFile::open(path);
    const auto& t = file->tensors()[0];
    const uint8_t* p = file->raw(t);
    uint64_t sum = 0;
    for (uint64_t i = 0; i + 8 <= t.byte_size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      sum += w;
    }
    benchmark::DoNotOptimize(sum);
    state.counters["bytes_per_s"] = benchmark::Counter(static_cast<double>(t.byte_size()),
                                                       benchmark::Counter::kIsIterationInvariantRate);
  }
}

void BM_ReadPassPread(benchmark::State& state) {
  const std::string& path = input_checkpoint();
  std::vector<uint8_t> buffer(size_t{1} << 20);
  uint64_t size = 0;
  for (auto _ : state) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    uint64_t sum = 0;
    size = 0;
    for (ssize_t n; (n = ::pread(fd, buffer.data(), buffer.size(), static_cast<off_t>(size))) > 0;) {
      for (ssize_t i = 0; i + 8 <= n; i += 8) {
        uint64_t w;
        std::memcpy(&w, buffer.data() + i, 8);
        sum += w;
      }
      size += static_cast<uint64_t>(n);
    }
    ::close(fd);
    benchmark::DoNotOptimize(sum);
  }
  state.counters["bytes_per_s"] =
      benchmark::Counter(static_cast<double>(size), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Compile(benchmark::State& state) {
  const std::string& path = input_checkpoint();
  const std::string out = path + ".qemb";
  qemb::CompileOptions o;
  o.qnn_sdk_version = "2.48";
  o.scheme = state.range(0) == 4 ? qemb::Scheme::k16a4w : qemb::Scheme::k16a8w;
  o.mode = state.range(1) ? qemb::CompileMode::kFused : qemb::CompileMode::kMaterialize;
  for (auto _ : state) {
    auto c = qemb::compile_checkpoint(path, o, out);
    if (!c.ok()) state.SkipWithError(c.error().message.c_str());
  }
  std::filesystem::remove(out);
  auto file = qemb::SafetensorsFile::open(path);
  state.counters["bytes_per_s"] = benchmark::Counter(static_cast<double>(file->tensors()[0].byte_size()),
                                                     benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_ReadPass)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ReadPassPread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Compile)
    ->ArgNames({"bits", "fused"})
    ->Args({4, 1})
    ->Args({4, 0})
    ->Args({8, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
