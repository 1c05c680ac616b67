// What EmbeddingRuntime holds, shared by the runtime's own files (lookups,
// pooled lookups); not a public header.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "qemb/runtime.h"
#include "runtime/interpreter.h"
#include "runtime/worker_pool.h"

namespace qemb {

// How an artifact's runtime graph is executed, decided once at load.
struct ExecutionPlan {
  enum class Kind { kMaterialized, kRequant, kInterpreted };
  Kind kind = Kind::kInterpreted;
  const uint16_t* table = nullptr;  // kMaterialized: the uint16 table
  // kRequant: every other kernel plan, all called with these params: fused
  // rows, or a materialized uint8 / float table (weights: the table).
  RequantGatherParams requant;
  // The kernel of each form, from the kernel list (find_kernel); none where
  // the list has no such form (a uint8 table has no uint16 gather).
  std::optional<GatherKernel> u16_kernel, u8_kernel, f32_kernel, f16_kernel, bf16_kernel, bag_i32_kernel,
      bag_i64_kernel;
  ActivationEncoding act;
  // The output: 16 / 8 for uint16 / uint8 activations, 0 for floats (weight-only).
  int output_bits = 16;
  // The output's native form's kernel: what kernel_name() reports.
  std::optional<GatherKernel> native_kernel() const {
    return output_bits == 16 ? u16_kernel : output_bits == 8 ? u8_kernel : f32_kernel;
  }
};

struct EmbeddingRuntime::Impl {
  LoadedArtifact artifact;
  std::vector<std::unique_ptr<EmbeddingTable>> tables;
  const KernelSet* kernels = nullptr;
  int threads = 1;
  std::unique_ptr<WorkerPool> pool;  // starts its threads when a batch needs them
};

// One table: its part of the graph, signature and kernel plan. The runtime's
// kernels and threads are shared by all its tables.
struct EmbeddingTable::Impl {
  std::string name;
  Graph own_graph;               // this table's ops and tensors, when the artifact holds several
  const Graph* graph = nullptr;  // &own_graph, or the artifact's graph for a one-table artifact
  GraphSignature sig;
  ExecutionPlan plan;
  std::string kernel_name, isa;
  nlohmann::json metadata = nlohmann::json::object();
  const EmbeddingRuntime::Impl* runtime = nullptr;
};

// Reads of a caller's ids (and bag offsets) that a caller's other thread may
// be rewriting at the same time: each value is read once, into a private copy
// or a check, and only checked private copies index a table. That race is
// the caller's and harmless here, so ThreadSanitizer is told not to report
// these reads (every other access stays checked).
#define QEMB_CALLER_MEMORY_READ __attribute__((no_sanitize("thread")))

// Plain loops the compiler vectorizes; under ThreadSanitizer through volatile,
// so that no memcpy it would make of them reaches TSan's interceptor.
#if defined(__SANITIZE_THREAD__)
template <typename Id>
using CallerIdPtr = const volatile Id*;
#else
template <typename Id>
using CallerIdPtr = const Id*;
#endif

// Copies n caller ids into dst (private memory that only this call uses).
template <typename Id>
QEMB_CALLER_MEMORY_READ inline void copy_caller_ids(const Id* src, size_t n, int64_t* dst) {
  CallerIdPtr<Id> s = src;
  for (size_t i = 0; i < n; ++i) dst[i] = s[i];
}
// Copies n caller ids into dst and says whether any lies outside [0, vocab):
// one pass, each id read once. On x86-64 an AVX2 clone is picked at load
// (the build's baseline, SSE2, has no 64-bit compare: the scalar loop cost
// 10-15% of a hot lookup, the AVX2 one about a third of that).
bool copy_caller_ids_checked(const int64_t* src, size_t n, int64_t vocab, int64_t* dst);
bool copy_caller_ids_checked(const int32_t* src, size_t n, int64_t vocab, int64_t* dst);
// Whether any of n ids lies outside [0, vocab) (vocab > 0): one branch-free
// pass (a negative id is a huge unsigned one).
template <typename Id>
QEMB_CALLER_MEMORY_READ inline bool any_id_outside(const Id* ids, size_t n, int64_t vocab) {
  CallerIdPtr<Id> s = ids;
  uint64_t bad = 0;
  for (size_t i = 0; i < n; ++i)
    bad |= static_cast<uint64_t>(static_cast<int64_t>(s[i])) >= static_cast<uint64_t>(vocab) ? 1u : 0u;
  return bad != 0;
}
// The position of the first id outside [0, vocab), or n when there is none
// (a caller's other thread may have put a bad id back since any_id_outside
// saw it); `bad` gets its value.
template <typename Id>
QEMB_CALLER_MEMORY_READ size_t first_bad_id(const Id* ids, size_t n, int64_t vocab, int64_t& bad) {
  CallerIdPtr<Id> s = ids;
  for (size_t i = 0; i < n; ++i) {
    const int64_t id = s[i];
    if (id < 0 || id >= vocab) {
      bad = id;
      return i;
    }
  }
  return n;
}

// kInvalidArgument: the output buffer shares memory with `inputs` ("ids",
// "indices, offsets or per-sample weights").
Error overlap_error(const char* inputs);
// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte.
bool byte_ranges_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes);

// The runtime's insides, for the runtime layer's other files.
const EmbeddingRuntime::Impl& runtime_impl(const EmbeddingRuntime& runtime);
const EmbeddingTable::Impl& table_impl(const EmbeddingTable& table);

}  // namespace qemb
