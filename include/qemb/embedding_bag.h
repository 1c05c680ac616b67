// Pooled lookups (EmbeddingBag): each sample gathers a bag of ids from a table
// and reduces their dequantized rows to one float32 row, by sum or mean, with
// optional per-sample weights, like PyTorch's nn.EmbeddingBag. Several tables
// go in one call (table-batched, FBGEMM's TBE layout): one [B, sum D_t] output
// with table t's columns at its offset. Semantics and exact arithmetic:
// docs/numeric-contract.md, "Pooled lookups".
//
// Runtime layer: reads the tables through their EmbeddingRuntime, never the
// compiler side.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "qemb/runtime.h"
#include "qemb/status.h"

namespace qemb {

enum class PoolMode { kSum, kMean };
const char* to_string(PoolMode mode);  // "sum" | "mean"
Result<PoolMode> parse_pool_mode(std::string_view s);

// How a table's ids are split into bags.
enum class BagBoundaries {
  kOffsetsWithLast,  // B + 1 offsets, the last equal to the number of ids
                     // (PyTorch's include_last_offset=True, FBGEMM's TBE)
  kOffsets,          // B offsets, bag B-1 running to the end (PyTorch's default)
  kLengths,          // B bag lengths
};

// A read-only array of int32 or int64 values (ids, offsets, lengths), used in
// place.
class IntSpan {
 public:
  IntSpan() = default;
  IntSpan(std::span<const int32_t> v) : data_(v.data()), size_(v.size()), is64_(false) {}  // NOLINT
  IntSpan(std::span<const int64_t> v) : data_(v.data()), size_(v.size()), is64_(true) {}   // NOLINT
  size_t size() const { return size_; }
  bool is_int64() const { return is64_; }
  const int32_t* data32() const { return static_cast<const int32_t*>(data_); }
  const int64_t* data64() const { return static_cast<const int64_t*>(data_); }
  int64_t operator[](size_t i) const { return is64_ ? data64()[i] : data32()[i]; }

 private:
  const void* data_ = nullptr;
  size_t size_ = 0;
  bool is64_ = true;
};

// One table's share of a pooled call.
struct TableBags {
  // The table: a one-table runtime, or one table of an artifact of several
  // (EmbeddingRuntime::table / find_table), which wins when both are set. A
  // runtime of several tables without embedding_table is refused, listing them.
  const EmbeddingRuntime* table = nullptr;
  const EmbeddingTable* embedding_table = nullptr;
  std::string name;  // for error messages; empty: "table <index in the call>"
  IntSpan indices;
  IntSpan boundaries;  // offsets or lengths, as `kind` says
  BagBoundaries kind = BagBoundaries::kOffsetsWithLast;
  // One float32 weight per id, in the ids' order (sum only, as in PyTorch).
  std::optional<std::span<const float>> per_sample_weights;
  PoolMode mode = PoolMode::kSum;
  // Ids equal to it add nothing and do not count; negative counts from the end.
  std::optional<int64_t> padding_idx;
};

// The output element type. Half types round the float32 result once, to
// nearest even.
enum class BagOutputType { kFloat32, kFloat16, kBFloat16 };
const char* to_string(BagOutputType type);  // "float32" | "float16" | "bfloat16"

// The number of bags B that `bags` describes (not yet validated against its ids).
Result<size_t> bag_count(const TableBags& bags);

// Every check embedding_bags makes before it writes (offsets or lengths, ids,
// weights, padding_idx, the same number of bags in every table), without
// writing: a caller that pools a large batch in pieces checks the whole of it
// first, so that a bad id fails before any piece is written.
Status check_bags(std::span<const TableBags> tables);

// Pools every table into out[B][sum_t D_t] (row-major), table t's D_t columns
// starting at sum_{u<t} D_u. Every table must describe the same B. Everything
// is checked first (boundaries, weights, padding id, every id); on an error
// nothing is written and the message names the table (and for an id, its bag,
// position and value). Runs on the threads of tables[0]'s runtime.
Status embedding_bags(std::span<const TableBags> tables, float* out);
// The same, writing float16 or bfloat16 bits.
Status embedding_bags(std::span<const TableBags> tables, BagOutputType type, uint16_t* out);

// The pooled kernel a runtime uses with its instruction set, e.g.
// "requant_bag_s4_i64[AVX3]" (int64 ids), or "reference_interpreter".
std::string bag_kernel_name(const EmbeddingRuntime& runtime);  // its first table's
std::string bag_kernel_name(const EmbeddingTable& table);

// The table a TableBags pools: embedding_table, else table's first.
const EmbeddingTable* bag_table(const TableBags& bags);

// One table: out[B][D].
inline Status embedding_bag(const TableBags& bags, float* out) {
  return embedding_bags(std::span<const TableBags>(&bags, 1), out);
}

// The flat, table-batched form of FBGEMM's TBE and TorchRec's
// KeyedJaggedTensor: F features of B bags each, all their ids in one array and
// all their bags in one offsets array of F * B + 1 values, feature-major
// (feature f's bag b is indices[offsets[f * B + b] : offsets[f * B + b + 1]]),
// the first 0 and the last the number of ids. Feature f reads the artifact's
// table feature_tables[f] (an index into EmbeddingRuntime::table; features may
// share a table), or, when feature_tables is empty, table f (one feature per
// table, in the artifact's order).
struct FlatBags {
  const EmbeddingRuntime* runtime = nullptr;
  std::span<const int32_t> feature_tables;  // F entries; empty: every table once
  IntSpan indices;
  IntSpan offsets;  // F * B + 1
  std::optional<std::span<const float>> per_sample_weights;  // one per id, sum only
  PoolMode mode = PoolMode::kSum;
  std::optional<int64_t> padding_idx;  // as TableBags', for every feature
};

struct FlatBagsShape {
  size_t bags = 0;   // B
  size_t width = 0;  // sum over the features of their table's D
};
// B and the output's width, from the number of features and offsets (the
// arrays not yet checked).
Result<FlatBagsShape> flat_bags_shape(const FlatBags& flat);

// Pools into out[B][sum_f D_f] (row-major), feature f's columns after those
// of features 0..f-1: the output of embedding_bags over the features as
// tables. Everything is checked first (offsets, weights, every id against its
// feature's table, the output not sharing memory with an input); on an error
// nothing is written, and an id's message names its feature, table, position
// in indices and bag.
Status embedding_bags_flat(const FlatBags& flat, float* out);
// The same, writing float16 or bfloat16 bits.
Status embedding_bags_flat(const FlatBags& flat, BagOutputType type, uint16_t* out);

}  // namespace qemb
