// The lookup runtime: maps a .qemb artifact, picks its kernel once, and
// serves lookups into caller buffers. Depends only on the artifact and kernel
// layers, never on the compiler side.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qemb/artifact.h"
#include "qemb/numeric.h"

namespace qemb {

struct RuntimeOptions {
  Verify verify = Verify::kFull;
  // Threads for large batches; 1 = the calling thread only, 0 = one per core.
  int threads = 1;
  // Run the scalar reference interpreter instead of the fast kernels.
  bool reference = false;
};

// The element type of dequantized lookups: float32 y = s_a * (q16 - zp_a),
// or that float32 rounded to nearest even into IEEE binary16 (kF16) or
// bfloat16 (kBF16), as qemb/half.h converts: NaN stays a quiet NaN, binary16
// values past 65504 become infinity, tiny ones subnormals or zero.
enum class FloatDtype { kF32, kF16, kBF16 };
const char* to_string(FloatDtype dtype);  // "f32", "f16", "bf16"
// Bytes per element: 4 or 2.
size_t float_dtype_size(FloatDtype dtype);
// "f32" | "f16" | "bf16"; anything else is kInvalidArgument naming the choices.
Result<FloatDtype> parse_float_dtype(std::string_view name);

class EmbeddingRuntime;

// One table of an artifact: its own shape, activation encoding and kernel.
// Owned by its EmbeddingRuntime, and valid as long as it is. Lookups behave
// exactly like EmbeddingRuntime's (checked ids, nothing written on error,
// thread-safe, the runtime's threads).
class EmbeddingTable {
 public:
  // The table's name: its graph output (the compile's node name; with
  // several tables, the checkpoint tensor it came from).
  const std::string& name() const;
  int64_t vocab_size() const;
  int64_t dim() const;
  ActivationEncoding activation() const;
  const std::string& kernel_name() const;
  // This table's provenance from the artifact's META (scheme, pattern, mode,
  // source...); an empty object when the artifact records none.
  const nlohmann::json& metadata() const;

  Status lookup(std::span<const int64_t> ids, uint16_t* out) const;
  Status lookup(std::span<const int32_t> ids, uint16_t* out) const;
  Status lookup(std::span<const int64_t> ids, uint8_t* out) const;
  Status lookup(std::span<const int32_t> ids, uint8_t* out) const;
  // 16 or 8: the width of the activations lookup() writes; 0 for a
  // weight-only table, whose lookups return floats (lookup_dequantized).
  int activation_bits() const;
  Status lookup_dequantized(std::span<const int64_t> ids, float* out) const;
  Status lookup_dequantized(std::span<const int32_t> ids, float* out) const;
  Status lookup_dequantized(std::span<const int64_t> ids, FloatDtype dtype, void* out) const;
  Status lookup_dequantized(std::span<const int32_t> ids, FloatDtype dtype, void* out) const;

  ~EmbeddingTable();
  EmbeddingTable(const EmbeddingTable&) = delete;
  EmbeddingTable& operator=(const EmbeddingTable&) = delete;
  struct Impl;

 private:
  friend class EmbeddingRuntime;
  friend const Impl& table_impl(const EmbeddingTable& table);
  explicit EmbeddingTable(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class EmbeddingRuntime {
 public:
  static Result<std::unique_ptr<EmbeddingRuntime>> load(const std::string& path,
                                                        const RuntimeOptions& options = {});
  static Result<std::unique_ptr<EmbeddingRuntime>> from_artifact(LoadedArtifact artifact,
                                                                 const RuntimeOptions& options = {});
  ~EmbeddingRuntime();
  EmbeddingRuntime(const EmbeddingRuntime&) = delete;
  EmbeddingRuntime& operator=(const EmbeddingRuntime&) = delete;

  // An artifact holds one table or several, in the order they were compiled.
  // The lookups below that take no table read the only table of a one-table
  // artifact; on an artifact of several they fail (kInvalidArgument listing
  // the tables): look up through table(i) or find_table(NAME) instead. The
  // accessors vocab_size(), dim(), activation() and kernel_name() describe
  // the first table.
  size_t table_count() const;
  const EmbeddingTable& table(size_t index) const;  // index < table_count()
  // The table named `name`; kNotFound listing the names there are.
  Result<const EmbeddingTable*> find_table(const std::string& name) const;
  std::vector<std::string> table_names() const;

  int64_t vocab_size() const;
  int64_t dim() const;
  ActivationEncoding activation() const;

  // Looks up ids.size() rows into out[ids.size() * dim()]. Every id is checked
  // first; on an error nothing is written (in an artifact of several tables
  // the message starts "table 'NAME': "). Thread-safe: one runtime serves
  // concurrent callers. Never allocates on the fast kernel paths.
  // The uint16 form serves 16-bit activation schemes (16a8w, 16a4w, 16a2w),
  // the uint8 form 8-bit ones (8a8w, 8a4w, 8a2w); the other is an error, as
  // both are on a weight-only table (activation_bits() says which).
  Status lookup(std::span<const int64_t> ids, uint16_t* out) const;
  Status lookup(std::span<const int32_t> ids, uint16_t* out) const;
  Status lookup(std::span<const int64_t> ids, uint8_t* out) const;
  Status lookup(std::span<const int32_t> ids, uint8_t* out) const;
  int activation_bits() const;  // the first table's: 16 | 8 | 0 (floats)
  // Dequantized output: y = s_a * (q_A - zp_a), or for a weight-only scheme
  // y = s_r * q itself.
  Status lookup_dequantized(std::span<const int64_t> ids, float* out) const;
  Status lookup_dequantized(std::span<const int32_t> ids, float* out) const;
  // Dequantized output in `dtype`: out holds ids.size() * dim() elements of
  // it (float, or uint16_t bit patterns for kF16 and kBF16), which the kernels
  // write directly.
  Status lookup_dequantized(std::span<const int64_t> ids, FloatDtype dtype, void* out) const;
  Status lookup_dequantized(std::span<const int32_t> ids, FloatDtype dtype, void* out) const;

  // The first table's uint16 kernel with its instruction set, e.g.
  // "gather_u16[AVX3]", "requant_gather_s4_u16[AVX2]", or "reference_interpreter".
  const std::string& kernel_name() const;
  const std::string& isa() const;
  int threads() const;
  const LoadedArtifact& artifact() const;

  struct Impl;

 private:
  friend const Impl& runtime_impl(const EmbeddingRuntime& runtime);
  explicit EmbeddingRuntime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Checks every id against [0, vocab); the error names the position and value.
Status check_ids(std::span<const int64_t> ids, int64_t vocab);

// "the artifact holds 3 tables (a, b, c); " + how: what a call that takes no
// table answers on an artifact of several (kInvalidArgument).
Error several_tables_error(const EmbeddingRuntime& runtime, const std::string& how);

}  // namespace qemb
