#include "qemb/runtime.h"

#include <algorithm>
#include <optional>
#include <set>
#include <thread>
#include <type_traits>
#include <vector>

#include "qemb/half.h"
#include "core/parallel_rows.h"
#include "kernels/kernels.h"
#include "runtime/interpreter.h"
#include "runtime/op_registry.h"
#include "runtime/runtime_impl.h"

namespace qemb {

namespace {

ActivationEncoding act_of(const Tensor& out) {
  ActivationEncoding a;
  a.scale = out.encoding.scale;
  a.zero_point = -out.encoding.offset;
  return a;
}

// The kernels of `family` at `bits` for every form; false when the list has
// none (the plan then stays on the interpreter).
bool set_kernels(ExecutionPlan& plan, KernelFamily family, int bits) {
  const std::optional<GatherKernel> u16 = find_kernel(family, bits, KernelForm::kU16),
                                    f32 = find_kernel(family, bits, KernelForm::kF32),
                                    f16 = find_kernel(family, bits, KernelForm::kF16),
                                    bf16 = find_kernel(family, bits, KernelForm::kBF16),
                                    bag_i32 = find_kernel(family, bits, KernelForm::kBagI32),
                                    bag_i64 = find_kernel(family, bits, KernelForm::kBagI64);
  if (!u16 || !f32 || !f16 || !bf16 || !bag_i32 || !bag_i64) return false;
  plan.u16_kernel = *u16;
  plan.f32_kernel = *f32;
  plan.f16_kernel = *f16;
  plan.bf16_kernel = *bf16;
  plan.bag_i32_kernel = *bag_i32;
  plan.bag_i64_kernel = *bag_i64;
  return true;
}

void set_requant(ExecutionPlan& plan, const Tensor& weight, KernelFamily family, float max_scale) {
  if (!set_kernels(plan, family, weight.bitwidth())) return;
  plan.kind = ExecutionPlan::Kind::kRequant;
  if (weight.interleaved()) {
    // One contiguous record a row: its scale, then its values.
    plan.requant.weights = weight.data->data() + kInterleavedValuesOffset;
    plan.requant.row_scales = reinterpret_cast<const float*>(weight.data->data());
    plan.requant.row_stride = plan.requant.scale_stride = weight.row_stride;
  } else {
    plan.requant.weights = weight.data->data();
    plan.requant.row_scales = weight.encoding.scales.data();
  }
  plan.requant.dim = static_cast<size_t>(weight.shape[1]);
  plan.requant.rows = static_cast<size_t>(weight.shape[0]);
  plan.requant.act = plan.act;
  plan.requant.max_scale = max_scale;
}

// Walks the graph's op chain through the op registry: each op advances the
// kernel choice or hands the graph to the reference interpreter. Both serve
// only graphs that graph_signature accepted.
ExecutionPlan plan_for(const Graph& g, const GraphSignature& sig) {
  ExecutionPlan plan;
  plan.act = act_of(*sig.output);  // graph_signature checked the offset
  KernelChoice choice;
  for (const Op& op : g.ops) {
    const OpRegistration* reg = find_op(op.type);
    if (reg == nullptr || !reg->select(op, g, choice)) return plan;
  }
  if (choice.state == KernelChoice::State::kMaterialized) {
    if (!set_kernels(plan, KernelFamily::kMaterialized, 16)) return plan;
    plan.kind = ExecutionPlan::Kind::kMaterialized;
    plan.table = reinterpret_cast<const uint16_t*>(choice.table->data->data());
  } else if (choice.state == KernelChoice::State::kFused) {
    set_requant(plan, *choice.table, choice.family, choice.max_scale);
  }
  return plan;
}

Error id_error(int64_t id, size_t position, int64_t vocab) {
  return make_error(ErrorCode::kOutOfRange,
                    "token id " + std::to_string(id) + " at position " + std::to_string(position) +
                        (id < 0 ? " is negative" : " is past the last row") + "; ids must be in [0, " +
                        std::to_string(vocab) + ")");
}

// Rows per task; below this a batch stays on the calling thread.
constexpr size_t kMinRowsPerTask = 64;
constexpr size_t kMinValuesForThreads = 1 << 16;

// What a lookup writes: uint16 activations, or dequantized values in one of
// the float dtypes (the halves as uint16_t bit patterns).
enum class OutKind { kU16, kF32, kF16, kBF16 };
template <OutKind K>
using OutT = std::conditional_t<K == OutKind::kF32, float, uint16_t>;

template <OutKind K>
struct KernelCall {
  const ExecutionPlan* plan;
  const KernelSet* kernels;
  const int64_t* ids;
  OutT<K>* out;
  size_t dim;

  void run(size_t begin, size_t count) const {
    const int64_t* id = ids + begin;
    OutT<K>* o = out + begin * dim;
    const bool materialized = plan->kind == ExecutionPlan::Kind::kMaterialized;
    if constexpr (K == OutKind::kU16) {
      if (materialized) kernels->gather_u16(plan->table, dim, id, count, o);
      else kernel_fn<RequantGatherU16Fn>(*kernels, plan->u16_kernel)(plan->requant, id, count, o);
    } else if constexpr (K == OutKind::kF32) {
      if (materialized) kernels->gather_u16_f32(plan->table, dim, plan->act, id, count, o);
      else kernel_fn<RequantGatherF32Fn>(*kernels, plan->f32_kernel)(plan->requant, id, count, o);
    } else if constexpr (K == OutKind::kF16) {
      if (materialized) kernels->gather_u16_f16(plan->table, dim, plan->act, id, count, o);
      else kernel_fn<RequantGatherHalfFn>(*kernels, plan->f16_kernel)(plan->requant, id, count, o);
    } else {
      if (materialized) kernels->gather_u16_bf16(plan->table, dim, plan->act, id, count, o);
      else kernel_fn<RequantGatherHalfFn>(*kernels, plan->bf16_kernel)(plan->requant, id, count, o);
    }
  }
  static void task(void* ctx, size_t begin, size_t count) {
    static_cast<const KernelCall*>(ctx)->run(begin, count);
  }
};

template <OutKind K>
Status run_checked(const EmbeddingTable::Impl& impl, std::span<const int64_t> ids, OutT<K>* out) {
  const size_t n = ids.size();
  const size_t dim = static_cast<size_t>(impl.sig.dim);
  if (n == 0) return Status::Ok();
  if (impl.plan.kind == ExecutionPlan::Kind::kInterpreted) {
    if constexpr (K == OutKind::kU16) {
      return interpret_graph(*impl.graph, impl.sig, ids, reinterpret_cast<uint8_t*>(out));
    } else {
      std::vector<uint16_t> q(n * dim);
      QEMB_RETURN_IF_ERROR(
          interpret_graph(*impl.graph, impl.sig, ids, reinterpret_cast<uint8_t*>(q.data())));
      for (size_t i = 0; i < q.size(); ++i) {
        const float y = dequantize_activation(q[i], impl.plan.act);
        if constexpr (K == OutKind::kF32) out[i] = y;
        else if constexpr (K == OutKind::kF16) out[i] = float_to_f16(y);
        else out[i] = float_to_bf16(y);
      }
      return Status::Ok();
    }
  }
  const EmbeddingRuntime::Impl& rt = *impl.runtime;
  KernelCall<K> call{&impl.plan, rt.kernels, ids.data(), out, dim};
  if (rt.pool == nullptr || n < 2 * kMinRowsPerTask || n * dim < kMinValuesForThreads) {
    call.run(0, n);  // small batches (a decode step) never leave the calling thread
    return Status::Ok();
  }
  const size_t tasks = static_cast<size_t>(rt.threads) * 4;
  const size_t tile = std::max(kMinRowsPerTask, (n + tasks - 1) / tasks);
  rt.pool->parallelize(n, tile, &KernelCall<K>::task, &call);
  return Status::Ok();
}

template <OutKind K>
Status run_int32(const EmbeddingTable::Impl& impl, std::span<const int32_t> ids, OutT<K>* out) {
  // Widen in fixed chunks on the stack: no allocation on the hot path.
  constexpr size_t kChunk = 1024;
  int64_t wide[kChunk];
  const size_t dim = static_cast<size_t>(impl.sig.dim);
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= impl.sig.vocab) return id_error(ids[i], i, impl.sig.vocab);
  for (size_t begin = 0; begin < ids.size(); begin += kChunk) {
    const size_t count = std::min(kChunk, ids.size() - begin);
    for (size_t i = 0; i < count; ++i) wide[i] = ids[begin + i];
    QEMB_RETURN_IF_ERROR(run_checked<K>(impl, std::span<const int64_t>(wide, count), out + begin * dim));
  }
  return Status::Ok();
}

template <typename Id>
Status run_dtype(const EmbeddingTable::Impl& impl, std::span<const Id> ids, FloatDtype dtype, void* out) {
  auto run = [&]<OutKind K>() -> Status {
    auto* o = static_cast<OutT<K>*>(out);
    if constexpr (std::is_same_v<Id, int32_t>) {
      return run_int32<K>(impl, ids, o);
    } else {
      QEMB_RETURN_IF_ERROR(check_ids(ids, impl.sig.vocab));
      return run_checked<K>(impl, ids, o);
    }
  };
  switch (dtype) {
    case FloatDtype::kF32: return run.template operator()<OutKind::kF32>();
    case FloatDtype::kF16: return run.template operator()<OutKind::kF16>();
    case FloatDtype::kBF16: return run.template operator()<OutKind::kBF16>();
  }
  return make_error(ErrorCode::kInvalidArgument, "unknown output dtype");
}

// The part of `g` that computes `output`: the ops it depends on and their
// tensors, in the graph's order.
Graph table_subgraph(const Graph& g, const std::string& output) {
  std::set<std::string> needed = {output};
  std::vector<bool> used(g.ops.size(), false);
  for (size_t i = g.ops.size(); i-- > 0;) {
    const Op& op = g.ops[i];
    if (std::none_of(op.outputs.begin(), op.outputs.end(), [&](const std::string& o) { return needed.count(o); }))
      continue;
    used[i] = true;
    needed.insert(op.inputs.begin(), op.inputs.end());
    needed.insert(op.outputs.begin(), op.outputs.end());
  }
  Graph sub;
  for (const Tensor& t : g.tensors)
    if (needed.count(t.name)) sub.tensors.push_back(t);
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (used[i]) sub.ops.push_back(g.ops[i]);
  return sub;
}

Status plan_table(EmbeddingTable::Impl& t, const RuntimeOptions& options) {
  QEMB_ASSIGN_OR_RETURN(t.sig, graph_signature(*t.graph));
  t.name = t.sig.output->name;
  t.plan = options.reference ? ExecutionPlan{} : plan_for(*t.graph, t.sig);
  t.plan.act = act_of(*t.sig.output);
  if (t.plan.kind == ExecutionPlan::Kind::kInterpreted) {
    t.kernel_name = "reference_interpreter";
    t.isa = "SCALAR";
  } else {
    t.isa = best_kernels().isa;
    t.kernel_name = qemb::kernel_name(best_kernels(), t.plan.u16_kernel);
  }
  return Status::Ok();
}

}  // namespace

const char* to_string(FloatDtype dtype) {
  switch (dtype) {
    case FloatDtype::kF32: return "f32";
    case FloatDtype::kF16: return "f16";
    case FloatDtype::kBF16: return "bf16";
  }
  return "?";
}

size_t float_dtype_size(FloatDtype dtype) { return dtype == FloatDtype::kF32 ? 4 : 2; }

Result<FloatDtype> parse_float_dtype(std::string_view name) {
  for (FloatDtype d : {FloatDtype::kF32, FloatDtype::kF16, FloatDtype::kBF16})
    if (name == to_string(d)) return d;
  return make_error(ErrorCode::kInvalidArgument,
                    "unknown output dtype '" + std::string(name) + "': expected f32, f16 or bf16");
}

EmbeddingTable::EmbeddingTable(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EmbeddingTable::~EmbeddingTable() = default;
const std::string& EmbeddingTable::name() const { return impl_->name; }
int64_t EmbeddingTable::vocab_size() const { return impl_->sig.vocab; }
int64_t EmbeddingTable::dim() const { return impl_->sig.dim; }
ActivationEncoding EmbeddingTable::activation() const { return impl_->plan.act; }
const std::string& EmbeddingTable::kernel_name() const { return impl_->kernel_name; }
const nlohmann::json& EmbeddingTable::metadata() const { return impl_->metadata; }

Status EmbeddingTable::lookup(std::span<const int64_t> ids, uint16_t* out) const {
  QEMB_RETURN_IF_ERROR(check_ids(ids, impl_->sig.vocab));
  return run_checked<OutKind::kU16>(*impl_, ids, out);
}
Status EmbeddingTable::lookup(std::span<const int32_t> ids, uint16_t* out) const {
  return run_int32<OutKind::kU16>(*impl_, ids, out);
}
Status EmbeddingTable::lookup_dequantized(std::span<const int64_t> ids, float* out) const {
  QEMB_RETURN_IF_ERROR(check_ids(ids, impl_->sig.vocab));
  return run_checked<OutKind::kF32>(*impl_, ids, out);
}
Status EmbeddingTable::lookup_dequantized(std::span<const int32_t> ids, float* out) const {
  return run_int32<OutKind::kF32>(*impl_, ids, out);
}
Status EmbeddingTable::lookup_dequantized(std::span<const int64_t> ids, FloatDtype dtype, void* out) const {
  return run_dtype(*impl_, ids, dtype, out);
}
Status EmbeddingTable::lookup_dequantized(std::span<const int32_t> ids, FloatDtype dtype, void* out) const {
  return run_dtype(*impl_, ids, dtype, out);
}

Status check_ids(std::span<const int64_t> ids, int64_t vocab) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) return id_error(ids[i], i, vocab);
  }
  return Status::Ok();
}

EmbeddingRuntime::EmbeddingRuntime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EmbeddingRuntime::~EmbeddingRuntime() = default;

Result<std::unique_ptr<EmbeddingRuntime>> EmbeddingRuntime::load(const std::string& path,
                                                                 const RuntimeOptions& options) {
  QEMB_ASSIGN_OR_RETURN(LoadedArtifact artifact, load_artifact(path, options.verify));
  return from_artifact(std::move(artifact), options);
}

Result<std::unique_ptr<EmbeddingRuntime>> EmbeddingRuntime::from_artifact(
    LoadedArtifact artifact, const RuntimeOptions& options) {
  if (options.threads < 0)
    return make_error(ErrorCode::kInvalidArgument, "threads must be >= 0 (0 = one per core)");
  auto impl = std::make_unique<Impl>();
  impl->artifact = std::move(artifact);
  if (!impl->artifact.graph) impl->artifact.graph = std::make_shared<const Graph>();  // a default LoadedArtifact: empty, refused by plan_table
  const Graph& graph = *impl->artifact.graph;
  std::vector<std::string> outputs;
  for (const Tensor& t : graph.tensors)
    if (t.kind == TensorKind::kAppRead) outputs.push_back(t.name);
  const nlohmann::json& meta = impl->artifact.metadata;
  const nlohmann::json* listed = meta.is_object() && meta.contains("tables") && meta["tables"].is_array()
                                     ? &meta["tables"]
                                     : nullptr;
  bool any_kernel = false;
  if (outputs.size() <= 1) {
    // One table: the graph as it is (its checks and messages unchanged).
    auto t = std::make_unique<EmbeddingTable::Impl>();
    t->graph = &graph;
    QEMB_RETURN_IF_ERROR(plan_table(*t, options));
    if (meta.is_object()) t->metadata = meta;
    impl->tables.push_back(std::unique_ptr<EmbeddingTable>(new EmbeddingTable(std::move(t))));
  } else {
    for (const std::string& out : outputs) {
      auto t = std::make_unique<EmbeddingTable::Impl>();
      t->own_graph = table_subgraph(graph, out);
      t->graph = &t->own_graph;
      Status planned = plan_table(*t, options);
      if (!planned.ok())
        return make_error(planned.code(), "table '" + out + "': " + planned.message());
      if (listed)
        for (const nlohmann::json& m : *listed)
          if (m.is_object() && m.contains("name") && m["name"] == out) t->metadata = m;
      impl->tables.push_back(std::unique_ptr<EmbeddingTable>(new EmbeddingTable(std::move(t))));
    }
  }
  for (auto& t : impl->tables) {
    t->impl_->runtime = impl.get();
    any_kernel |= t->impl_->plan.kind != ExecutionPlan::Kind::kInterpreted;
  }
  impl->kernels = &best_kernels();
  impl->threads = default_threads(options.threads);
  if (impl->threads > 1 && any_kernel) impl->pool = std::make_unique<WorkerPool>(impl->threads);
  return std::unique_ptr<EmbeddingRuntime>(new EmbeddingRuntime(std::move(impl)));
}

const EmbeddingRuntime::Impl& runtime_impl(const EmbeddingRuntime& runtime) { return *runtime.impl_; }
const EmbeddingTable::Impl& table_impl(const EmbeddingTable& table) { return *table.impl_; }

size_t EmbeddingRuntime::table_count() const { return impl_->tables.size(); }
const EmbeddingTable& EmbeddingRuntime::table(size_t index) const { return *impl_->tables.at(index); }

Result<const EmbeddingTable*> EmbeddingRuntime::find_table(const std::string& name) const {
  for (const auto& t : impl_->tables)
    if (t->name() == name) return t.get();
  std::string names;
  for (const auto& t : impl_->tables) names += (names.empty() ? "" : ", ") + t->name();
  return make_error(ErrorCode::kNotFound, "the artifact has no table '" + name + "'; its tables: " + names);
}

std::vector<std::string> EmbeddingRuntime::table_names() const {
  std::vector<std::string> names;
  for (const auto& t : impl_->tables) names.push_back(t->name());
  return names;
}

int64_t EmbeddingRuntime::vocab_size() const { return table(0).vocab_size(); }
int64_t EmbeddingRuntime::dim() const { return table(0).dim(); }
ActivationEncoding EmbeddingRuntime::activation() const { return table(0).activation(); }
const std::string& EmbeddingRuntime::kernel_name() const { return table(0).kernel_name(); }
const std::string& EmbeddingRuntime::isa() const { return table(0).impl_->isa; }
int EmbeddingRuntime::threads() const { return impl_->threads; }
const LoadedArtifact& EmbeddingRuntime::artifact() const { return impl_->artifact; }

Status EmbeddingRuntime::lookup(std::span<const int64_t> ids, uint16_t* out) const { return table(0).lookup(ids, out); }
Status EmbeddingRuntime::lookup(std::span<const int32_t> ids, uint16_t* out) const { return table(0).lookup(ids, out); }
Status EmbeddingRuntime::lookup_dequantized(std::span<const int64_t> ids, float* out) const {
  return table(0).lookup_dequantized(ids, out);
}
Status EmbeddingRuntime::lookup_dequantized(std::span<const int32_t> ids, float* out) const {
  return table(0).lookup_dequantized(ids, out);
}

Status EmbeddingRuntime::lookup_dequantized(std::span<const int64_t> ids, FloatDtype dtype, void* out) const {
  return table(0).lookup_dequantized(ids, dtype, out);
}

Status EmbeddingRuntime::lookup_dequantized(std::span<const int32_t> ids, FloatDtype dtype, void* out) const {
  return table(0).lookup_dequantized(ids, dtype, out);
}

}  // namespace qemb
