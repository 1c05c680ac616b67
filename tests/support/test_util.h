// Shared helpers for tests: temp folders, deterministic tables, running the CLI.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "qemb/sdk_version.h"
#include "support/temp_dir.h"

namespace qemb::testing {

// A known target SDK version `v`, as if given from `source`.
inline TargetVersion sdk_target(const char* v, const char* source = "test") {
  TargetVersion t;
  t.version = SdkVersion::parse(v).value();
  t.source = source;
  return t;
}

// splitmix64: portable, so tables are the same on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) / static_cast<float>(1 << 24); }  // [0,1)
  float normal() {
    float u1 = std::max(uniform(), 1e-7f), u2 = uniform();
    return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
  }

 private:
  uint64_t state_;
};

// A [rows, dim] table whose row scales spread log-normally (10^-3 .. 10^1),
// like real embeddings with rare tokens; the legacy pattern loses accuracy on it.
inline std::vector<float> spread_table(int64_t rows, int64_t dim, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> t(static_cast<size_t>(rows * dim));
  for (int64_t r = 0; r < rows; ++r) {
    const float row_scale = std::pow(10.0f, -3.0f + 4.0f * rng.uniform());
    for (int64_t j = 0; j < dim; ++j) t[r * dim + j] = row_scale * rng.normal();
  }
  return t;
}

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

// Runs a shell command, capturing stdout+stderr.
inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace qemb::testing
