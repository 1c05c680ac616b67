// What EmbeddingRuntime holds, shared by the runtime's own files (lookups,
// pooled lookups); not a public header.
#pragma once

#include <memory>
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
  const uint16_t* table = nullptr;  // kMaterialized
  RequantGatherParams requant;      // kRequant
  // The kernel of each form, from the kernel list (find_kernel).
  GatherKernel u16_kernel = GatherKernel::gather_u16;
  GatherKernel f32_kernel = GatherKernel::gather_u16_f32;
  GatherKernel f16_kernel = GatherKernel::gather_u16_f16;
  GatherKernel bf16_kernel = GatherKernel::gather_u16_bf16;
  GatherKernel bag_i32_kernel = GatherKernel::bag_u16_i32;
  GatherKernel bag_i64_kernel = GatherKernel::bag_u16_i64;
  ActivationEncoding act;
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

// The runtime's insides, for the runtime layer's other files.
const EmbeddingRuntime::Impl& runtime_impl(const EmbeddingRuntime& runtime);
const EmbeddingTable::Impl& table_impl(const EmbeddingTable& table);

}  // namespace qemb
