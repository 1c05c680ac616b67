// What EmbeddingRuntime holds, shared by the runtime's own files (lookups,
// pooled lookups); not a public header.
#pragma once

#include <memory>
#include <string>

#include "qemb/kernels.h"
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
  GatherKernel u16_kernel = GatherKernel::gather_u16;
  GatherKernel f32_kernel = GatherKernel::gather_u16_f32;
  GatherKernel f16_kernel = GatherKernel::gather_u16_f16;
  GatherKernel bf16_kernel = GatherKernel::gather_u16_bf16;
  ActivationEncoding act;
};

struct EmbeddingRuntime::Impl {
  LoadedArtifact artifact;
  GraphSignature sig;
  ExecutionPlan plan;
  const KernelSet* kernels = nullptr;
  std::string kernel_name;
  std::string isa;
  int threads = 1;
  std::unique_ptr<WorkerPool> pool;  // starts its threads when a batch needs them
};

// The runtime's insides, for the runtime layer's other files.
const EmbeddingRuntime::Impl& runtime_impl(const EmbeddingRuntime& runtime);

}  // namespace qemb
