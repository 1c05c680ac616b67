// Compiles a small generated table into OUT.qemb with the C++ API, then looks
// the given ids up and prints one row per line ("id: v0 v1 ...").
//   compile_table OUT.qemb ID...
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "qemb/compiler.h"
#include "qemb/runtime.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: compile_table OUT.qemb ID...\n");
    return 2;
  }
  const int64_t rows = 32, dim = 8;
  std::vector<float> table(rows * dim);
  for (int64_t i = 0; i < rows * dim; ++i) table[i] = std::sin(0.37f * static_cast<float>(i)) / (1 + i / dim);
  qemb::CompileOptions options;
  options.qnn_sdk_version = "2.48";
  auto compiled = qemb::compile_array(table.data(), "F32", rows, dim, options, argv[1]);
  if (!compiled.ok()) {
    std::fprintf(stderr, "compile_table: %s\n", compiled.error().to_string().c_str());
    return 1;
  }
  auto rt = qemb::EmbeddingRuntime::load(argv[1]);
  if (!rt.ok()) {
    std::fprintf(stderr, "compile_table: %s\n", rt.error().to_string().c_str());
    return 1;
  }
  std::vector<int64_t> ids;
  for (int i = 2; i < argc; ++i) ids.push_back(std::atoll(argv[i]));
  std::vector<uint16_t> out(ids.size() * dim);
  if (auto s = (*rt)->lookup(ids, out.data()); !s.ok()) {
    std::fprintf(stderr, "compile_table: %s\n", s.error().to_string().c_str());
    return 1;
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    std::printf("%lld:", static_cast<long long>(ids[i]));
    for (int64_t j = 0; j < dim; ++j) std::printf(" %u", out[i * dim + j]);
    std::printf("\n");
  }
  return 0;
}
