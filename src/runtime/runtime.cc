#include "qemb/runtime.h"

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
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
  if (out.dtype == DataType::kFloat32) {  // weight-only: no activation step
    a.bits = 0;
    return a;
  }
  a.scale = out.encoding.scale;
  a.zero_point = -out.encoding.offset;
  a.bits = out.bitwidth();
  return a;
}

// 16 / 8 for an activation-quantized output, 0 for a float one.
int output_bits_of(const Tensor& out) { return out.dtype == DataType::kFloat32 ? 0 : out.bitwidth(); }

// The kernels of `family` over a `weight_bits` table for every form the
// list has; false when it lacks one a lookup of this output needs (the
// output's own form, the float forms and the bags): the plan then stays on
// the interpreter.
bool set_kernels(ExecutionPlan& plan, KernelFamily family, int weight_bits) {
  const int a = plan.output_bits;
  plan.u16_kernel = find_kernel(family, weight_bits, a, KernelForm::kU16);
  plan.u8_kernel = find_kernel(family, weight_bits, a, KernelForm::kU8);
  plan.f32_kernel = find_kernel(family, weight_bits, a, KernelForm::kF32);
  plan.f16_kernel = find_kernel(family, weight_bits, a, KernelForm::kF16);
  plan.bf16_kernel = find_kernel(family, weight_bits, a, KernelForm::kBF16);
  plan.bag_i32_kernel = find_kernel(family, weight_bits, a, KernelForm::kBagI32);
  plan.bag_i64_kernel = find_kernel(family, weight_bits, a, KernelForm::kBagI64);
  return plan.native_kernel() && plan.f32_kernel && plan.f16_kernel && plan.bf16_kernel && plan.bag_i32_kernel &&
         plan.bag_i64_kernel;
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
  plan.output_bits = output_bits_of(*sig.output);
  KernelChoice choice;
  for (const Op& op : g.ops) {
    const OpRegistration* reg = find_op(op.type);
    if (reg == nullptr || !reg->select(op, g, choice)) return plan;
  }
  if (choice.state == KernelChoice::State::kMaterialized) {
    const Tensor& table = *choice.table;
    if (!set_kernels(plan, KernelFamily::kMaterialized, table.bitwidth())) return plan;
    if (table.dtype == DataType::kUFixedPoint16) {
      plan.kind = ExecutionPlan::Kind::kMaterialized;
      plan.table = reinterpret_cast<const uint16_t*>(table.data->data());
    } else {  // a uint8 or float table, read through the params
      plan.kind = ExecutionPlan::Kind::kRequant;
      plan.requant.weights = table.data->data();
      plan.requant.dim = static_cast<size_t>(table.shape[1]);
      plan.requant.rows = static_cast<size_t>(table.shape[0]);
      plan.requant.act = plan.act;
    }
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

// An id that passed its check and then failed it in the private copy: the
// caller changed its ids during the call. Rows before it may be written.
Error changed_error(int64_t id, size_t position, int64_t vocab) {
  return make_error(ErrorCode::kInvalidArgument,
                    "token id " + std::to_string(id) + " at position " + std::to_string(position) +
                        " is outside [0, " + std::to_string(vocab) +
                        ") after it was checked: the ids changed during the lookup (another thread "
                        "wrote them); the rows of this call are not all written");
}

// Rows per task; below this a batch stays on the calling thread.
constexpr size_t kMinRowsPerTask = 64;
constexpr size_t kMinValuesForThreads = 1 << 16;
// Ids are copied into private memory this many at a time, checked there, and
// only the copy is used to index: a caller rewriting its ids during the call
// (another thread) can change which rows are read, never make a kernel read
// outside the table. 256 ids are 2 KiB on the stack.
constexpr size_t kIdChunk = 256;

// What a lookup writes: uint16 or uint8 activations, or dequantized values
// in one of the float dtypes (the halves as uint16_t bit patterns).
enum class OutKind { kU16, kF32, kF16, kBF16, kU8 };
template <OutKind K>
using OutT = std::conditional_t<K == OutKind::kF32, float, std::conditional_t<K == OutKind::kU8, uint8_t, uint16_t>>;

// The first id that failed its check in the private copy (ids changed while
// the lookup read them); tasks on several threads may report one.
struct ChangedId {
  std::mutex mu;
  bool set = false;
  size_t position = 0;
  int64_t id = 0;
  void report(size_t pos, int64_t value) {
    std::lock_guard<std::mutex> lock(mu);
    if (set && position <= pos) return;
    set = true;
    position = pos;
    id = value;
  }
};

template <OutKind K, typename Id>
struct KernelCall {
  const ExecutionPlan* plan;
  const KernelSet* kernels;
  const Id* ids;
  OutT<K>* out;
  size_t dim;
  int64_t vocab;
  ChangedId* changed;

  void run(size_t begin, size_t count) const {
    int64_t wide[kIdChunk];
    for (size_t done = 0; done < count;) {
      const size_t m = std::min(kIdChunk, count - done);
      const size_t first = begin + done;
      // One read of each id, through a volatile pointer so the compiler
      // cannot read the caller's memory again instead of the copy.
      if (copy_caller_ids_checked(ids + first, m, vocab, wide)) {
        int64_t bad = 0;
        const size_t at = first_bad_id(wide, m, vocab, bad);
        changed->report(first + at, bad);
        return;
      }
      gather(wide, m, out + first * dim);
      done += m;
    }
  }
  void gather(const int64_t* id, size_t count, OutT<K>* o) const {
    if (plan->kind == ExecutionPlan::Kind::kMaterialized) {  // the uint16 table
      if constexpr (K == OutKind::kU16) {
        kernels->gather_u16(plan->table, dim, id, count, o);
      } else if constexpr (K == OutKind::kF32) {
        kernels->gather_u16_f32(plan->table, dim, plan->act, id, count, o);
      } else if constexpr (K == OutKind::kF16) {
        kernels->gather_u16_f16(plan->table, dim, plan->act, id, count, o);
      } else if constexpr (K == OutKind::kBF16) {
        kernels->gather_u16_bf16(plan->table, dim, plan->act, id, count, o);
      }
      return;
    }
    // run_lookup checked that the plan has this form's kernel.
    if constexpr (K == OutKind::kU16) {
      kernel_fn<RequantGatherU16Fn>(*kernels, *plan->u16_kernel)(plan->requant, id, count, o);
    } else if constexpr (K == OutKind::kU8) {
      kernel_fn<RequantGatherU8Fn>(*kernels, *plan->u8_kernel)(plan->requant, id, count, o);
    } else if constexpr (K == OutKind::kF32) {
      kernel_fn<RequantGatherF32Fn>(*kernels, *plan->f32_kernel)(plan->requant, id, count, o);
    } else if constexpr (K == OutKind::kF16) {
      kernel_fn<RequantGatherHalfFn>(*kernels, *plan->f16_kernel)(plan->requant, id, count, o);
    } else {
      kernel_fn<RequantGatherHalfFn>(*kernels, *plan->bf16_kernel)(plan->requant, id, count, o);
    }
  }
  static void task(void* ctx, size_t begin, size_t count) {
    static_cast<const KernelCall*>(ctx)->run(begin, count);
  }
};

// A lookup of activations must match the table's output: uint16 or uint8,
// or none (weight-only tables return floats).
Status check_output_form(const EmbeddingTable::Impl& impl, int bits) {
  const int have = impl.plan.output_bits;
  if (have == bits) return Status::Ok();
  const std::string scheme = impl.metadata.contains("scheme") && impl.metadata["scheme"].is_string()
                                 ? " (scheme " + impl.metadata["scheme"].get<std::string>() + ")"
                                 : "";
  if (have == 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "table '" + impl.name + "' is weight-only" + scheme +
                          ": its lookups return floats, not uint" + std::to_string(bits) +
                          " activations; call lookup_dequantized");
  return make_error(ErrorCode::kInvalidArgument,
                    "table '" + impl.name + "' returns uint" + std::to_string(have) + " activations" + scheme +
                        ", not uint" + std::to_string(bits) + ": pass a uint" + std::to_string(have) +
                        "_t buffer to lookup, or call lookup_dequantized");
}

// Checks the ids where the caller keeps them (so that on a bad id nothing is
// written), refuses an output sharing memory with them, then runs the lookup
// on private copies of the ids.
template <OutKind K, typename Id>
Status run_lookup(const EmbeddingTable::Impl& impl, std::span<const Id> ids, OutT<K>* out) {
  const size_t n = ids.size();
  const size_t dim = static_cast<size_t>(impl.sig.dim);
  const int64_t vocab = impl.sig.vocab;
  if constexpr (K == OutKind::kU16 || K == OutKind::kU8) QEMB_RETURN_IF_ERROR(check_output_form(impl, K == OutKind::kU16 ? 16 : 8));
  if (n == 0) return Status::Ok();
  size_t out_bytes = 0;
  if (__builtin_mul_overflow(n, dim * sizeof(OutT<K>), &out_bytes)) out_bytes = SIZE_MAX;
  if (byte_ranges_overlap(ids.data(), n * sizeof(Id), out, out_bytes)) return overlap_error("ids");
  const EmbeddingRuntime::Impl& rt = *impl.runtime;
  const bool one_thread = rt.pool == nullptr || n < 2 * kMinRowsPerTask || n * dim < kMinValuesForThreads;
  if (n <= kIdChunk && one_thread && impl.plan.kind != ExecutionPlan::Kind::kInterpreted) {
    // A small batch (a decode step): one copy, checked, then looked up.
    int64_t wide[kIdChunk];
    if (copy_caller_ids_checked(ids.data(), n, vocab, wide)) {
      int64_t bad = 0;
      const size_t at = first_bad_id(wide, n, vocab, bad);
      return id_error(bad, at, vocab);
    }
    ChangedId unused;
    KernelCall<K, Id>{&impl.plan, rt.kernels, ids.data(), out, dim, vocab, &unused}.gather(wide, n, out);
    return Status::Ok();
  }
  if (any_id_outside(ids.data(), n, vocab)) {
    int64_t bad_id = 0;
    if (const size_t bad = first_bad_id(ids.data(), n, vocab, bad_id); bad < n) return id_error(bad_id, bad, vocab);
  }
  if (impl.plan.kind == ExecutionPlan::Kind::kInterpreted) {
    std::vector<int64_t> copy(n);
    copy_caller_ids(ids.data(), n, copy.data());
    for (size_t i = 0; i < n; ++i)
      if (copy[i] < 0 || copy[i] >= vocab) return changed_error(copy[i], i, vocab);
    if constexpr (K == OutKind::kU16 || K == OutKind::kU8) {
      return interpret_graph(*impl.graph, impl.sig, copy, reinterpret_cast<uint8_t*>(out));
    } else {
      // The output in its own storage layout, then y of each value.
      const int bits = impl.plan.output_bits;
      std::vector<uint8_t> q(n * dim * (bits == 0 ? 4 : bits / 8));
      QEMB_RETURN_IF_ERROR(interpret_graph(*impl.graph, impl.sig, copy, q.data()));
      for (size_t i = 0; i < n * dim; ++i) {
        float y;
        if (bits == 0) {
          std::memcpy(&y, q.data() + 4 * i, 4);
        } else if (bits == 8) {
          y = dequantize_activation(q[i], impl.plan.act);
        } else {
          uint16_t v;
          std::memcpy(&v, q.data() + 2 * i, 2);
          y = dequantize_activation(v, impl.plan.act);
        }
        if constexpr (K == OutKind::kF32) out[i] = y;
        else if constexpr (K == OutKind::kF16) out[i] = float_to_f16(y);
        else out[i] = float_to_bf16(y);
      }
      return Status::Ok();
    }
  }
  ChangedId changed;
  KernelCall<K, Id> call{&impl.plan, rt.kernels, ids.data(), out, dim, vocab, &changed};
  if (one_thread) {
    call.run(0, n);  // small batches (a decode step) never leave the calling thread
  } else {
    const size_t tasks = static_cast<size_t>(rt.threads) * 4;
    const size_t tile = std::max(kMinRowsPerTask, (n + tasks - 1) / tasks);
    rt.pool->parallelize(n, tile, &KernelCall<K, Id>::task, &call);
  }
  if (changed.set) return changed_error(changed.id, changed.position, vocab);
  return Status::Ok();
}

template <typename Id>
Status run_dtype(const EmbeddingTable::Impl& impl, std::span<const Id> ids, FloatDtype dtype, void* out) {
  switch (dtype) {
    case FloatDtype::kF32: return run_lookup<OutKind::kF32>(impl, ids, static_cast<float*>(out));
    case FloatDtype::kF16: return run_lookup<OutKind::kF16>(impl, ids, static_cast<uint16_t*>(out));
    case FloatDtype::kBF16: return run_lookup<OutKind::kBF16>(impl, ids, static_cast<uint16_t*>(out));
  }
  return make_error(ErrorCode::kInvalidArgument, "unknown output dtype");
}

// Where each tensor of a graph is, and which ops write it: built once per
// artifact, so that cutting out each table's part costs that part's size,
// not the whole graph's (an artifact of T tables opens in time linear in T).
struct GraphIndex {
  std::unordered_map<std::string, size_t> tensor;                 // name -> index in g.tensors
  std::unordered_map<std::string, std::vector<size_t>> writers;  // tensor name -> ops writing it
  explicit GraphIndex(const Graph& g) {
    tensor.reserve(g.tensors.size());
    for (size_t i = 0; i < g.tensors.size(); ++i) tensor.emplace(g.tensors[i].name, i);
    for (size_t i = 0; i < g.ops.size(); ++i)
      for (const std::string& o : g.ops[i].outputs) writers[o].push_back(i);
  }
};

// The part of `g` that computes `output`: the ops it depends on (those that
// write it or, before them, any tensor such an op reads or writes) and their
// tensors, in the graph's order.
Graph table_subgraph(const Graph& g, const GraphIndex& index, const std::string& output) {
  std::unordered_set<std::string> needed = {output};
  std::vector<std::string> pending = {output};
  std::set<size_t> used;  // op indices, sorted
  // Walks back from the output: an op is used when it writes a needed tensor
  // and comes before an op already used that needs it (the reverse scan of
  // the graph's order, done through the writers index).
  std::vector<std::pair<std::string, size_t>> work = {{output, g.ops.size()}};
  while (!work.empty()) {
    auto [name, before] = work.back();
    work.pop_back();
    auto w = index.writers.find(name);
    if (w == index.writers.end()) continue;
    for (size_t i : w->second) {
      if (i >= before || !used.insert(i).second) continue;
      const Op& op = g.ops[i];
      for (const std::string& t : op.inputs) {
        needed.insert(t);
        work.push_back({t, i});
      }
      for (const std::string& t : op.outputs) {
        needed.insert(t);
        work.push_back({t, i});
      }
    }
  }
  std::vector<size_t> tensors;
  for (const std::string& name : needed) {
    auto t = index.tensor.find(name);
    if (t != index.tensor.end()) tensors.push_back(t->second);
  }
  std::sort(tensors.begin(), tensors.end());
  Graph sub;
  for (size_t t : tensors) sub.tensors.push_back(g.tensors[t]);
  for (size_t i : used) sub.ops.push_back(g.ops[i]);
  return sub;
}

Status plan_table(EmbeddingTable::Impl& t, const RuntimeOptions& options) {
  QEMB_ASSIGN_OR_RETURN(t.sig, graph_signature(*t.graph));
  t.name = t.sig.output->name;
  t.plan = options.reference ? ExecutionPlan{} : plan_for(*t.graph, t.sig);
  t.plan.act = act_of(*t.sig.output);
  t.plan.output_bits = output_bits_of(*t.sig.output);
  if (t.plan.kind == ExecutionPlan::Kind::kInterpreted) {
    t.kernel_name = "reference_interpreter";
    t.isa = "SCALAR";
  } else {
    t.isa = best_kernels().isa;
    t.kernel_name = qemb::kernel_name(best_kernels(), *t.plan.native_kernel());
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

namespace {
// In an artifact of several tables, an error names the table it came from.
Status named(const EmbeddingTable::Impl& impl, Status s) {
  if (s.ok() || impl.runtime == nullptr || impl.runtime->tables.size() <= 1) return s;
  return make_error(s.code(), "table '" + impl.name + "': " + s.message());
}
}  // namespace

Status EmbeddingTable::lookup(std::span<const int64_t> ids, uint16_t* out) const {
  return named(*impl_, run_lookup<OutKind::kU16>(*impl_, ids, out));
}
Status EmbeddingTable::lookup(std::span<const int64_t> ids, uint8_t* out) const {
  return run_lookup<OutKind::kU8>(*impl_, ids, out);
}
Status EmbeddingTable::lookup(std::span<const int32_t> ids, uint8_t* out) const {
  return run_lookup<OutKind::kU8>(*impl_, ids, out);
}
int EmbeddingTable::activation_bits() const { return impl_->plan.output_bits; }
Status EmbeddingTable::lookup(std::span<const int32_t> ids, uint16_t* out) const {
  return named(*impl_, run_lookup<OutKind::kU16>(*impl_, ids, out));
}
Status EmbeddingTable::lookup_dequantized(std::span<const int64_t> ids, float* out) const {
  return named(*impl_, run_lookup<OutKind::kF32>(*impl_, ids, out));
}
Status EmbeddingTable::lookup_dequantized(std::span<const int32_t> ids, float* out) const {
  return named(*impl_, run_lookup<OutKind::kF32>(*impl_, ids, out));
}
Status EmbeddingTable::lookup_dequantized(std::span<const int64_t> ids, FloatDtype dtype, void* out) const {
  return named(*impl_, run_dtype(*impl_, ids, dtype, out));
}
Status EmbeddingTable::lookup_dequantized(std::span<const int32_t> ids, FloatDtype dtype, void* out) const {
  return named(*impl_, run_dtype(*impl_, ids, dtype, out));
}

bool byte_ranges_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  if (a_bytes == 0 || b_bytes == 0) return false;
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  // Sizes past the address space (a caller's lie) saturate rather than wrap.
  const uintptr_t x_end = x + a_bytes < x ? UINTPTR_MAX : x + a_bytes;
  const uintptr_t y_end = y + b_bytes < y ? UINTPTR_MAX : y + b_bytes;
  return x < y_end && y < x_end;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__) && \
    !defined(__SANITIZE_ADDRESS__)
#define QEMB_ID_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define QEMB_ID_CLONES
#endif

namespace {
// Reads memory the caller may be rewriting (deliberately unsynchronized, see
// runtime_impl.h), so it carries the same attribute as its callers: GCC does
// not extend a caller's no_sanitize to an inlined callee.
template <typename Id>
QEMB_CALLER_MEMORY_READ inline bool copy_checked(const Id* src, size_t n, int64_t vocab, int64_t* dst) {
  CallerIdPtr<Id> s = src;
  uint64_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const int64_t v = s[i];
    dst[i] = v;
    bad |= static_cast<uint64_t>(v) >= static_cast<uint64_t>(vocab) ? 1u : 0u;
  }
  return bad != 0;
}
}  // namespace

QEMB_ID_CLONES QEMB_CALLER_MEMORY_READ bool copy_caller_ids_checked(const int64_t* src, size_t n, int64_t vocab,
                                                                   int64_t* dst) {
  return copy_checked(src, n, vocab, dst);
}
QEMB_ID_CLONES QEMB_CALLER_MEMORY_READ bool copy_caller_ids_checked(const int32_t* src, size_t n, int64_t vocab,
                                                                   int64_t* dst) {
  return copy_checked(src, n, vocab, dst);
}

Error overlap_error(const char* inputs) {
  return make_error(ErrorCode::kInvalidArgument,
                    std::string("the output buffer overlaps the ") + inputs +
                        ": rows written there would overwrite inputs not yet read; pass an output that "
                        "shares no memory with the inputs");
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
    const GraphIndex index(graph);
    std::unordered_map<std::string, const nlohmann::json*> listed_by_name;
    if (listed)
      for (const nlohmann::json& m : *listed)
        if (m.is_object() && m.contains("name") && m["name"].is_string())
          listed_by_name[m["name"].get<std::string>()] = &m;  // the last wins, as before
    for (const std::string& out : outputs) {
      auto t = std::make_unique<EmbeddingTable::Impl>();
      t->own_graph = table_subgraph(graph, index, out);
      t->graph = &t->own_graph;
      Status planned = plan_table(*t, options);
      if (!planned.ok())
        return make_error(planned.code(), "table '" + out + "': " + planned.message());
      auto m = listed_by_name.find(out);
      if (m != listed_by_name.end()) t->metadata = *m->second;
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

Error several_tables_error(const EmbeddingRuntime& runtime, const std::string& how) {
  std::string names;
  for (const std::string& n : runtime.table_names()) names += (names.empty() ? "" : ", ") + n;
  return make_error(ErrorCode::kInvalidArgument, "the artifact holds " + std::to_string(runtime.table_count()) +
                                                     " tables (" + names + "); " + how);
}

namespace {
// The one table a lookup without a table reads; an artifact of several has
// no such table (no silent first one).
Result<const EmbeddingTable*> only_table(const EmbeddingRuntime& rt) {
  if (rt.table_count() == 1) return &rt.table(0);
  return several_tables_error(rt, "look one up through EmbeddingRuntime::find_table(NAME) or table(INDEX)");
}
}  // namespace

Status EmbeddingRuntime::lookup(std::span<const int64_t> ids, uint16_t* out) const {
  QEMB_ASSIGN_OR_RETURN(const EmbeddingTable* t, only_table(*this));
  return t->lookup(ids, out);
}
Status EmbeddingRuntime::lookup(std::span<const int32_t> ids, uint16_t* out) const {
  QEMB_ASSIGN_OR_RETURN(const EmbeddingTable* t, only_table(*this));
  return t->lookup(ids, out);
}
Status EmbeddingRuntime::lookup(std::span<const int64_t> ids, uint8_t* out) const {
  QEMB_ASSIGN_OR_RETURN(const EmbeddingTable* t, only_table(*this));
  return t->lookup(ids, out);
}
Status EmbeddingRuntime::lookup(std::span<const int32_t> ids, uint8_t* out) const {
  QEMB_ASSIGN_OR_RETURN(const EmbeddingTable* t, only_table(*this));
  return t->lookup(ids, out);
}
int EmbeddingRuntime::activation_bits() const { return table(0).activation_bits(); }
Status EmbeddingRuntime::lookup_dequantized(std::span<const int64_t> ids, float* out) const {
  QEMB_ASSIGN_OR_RETURN(const EmbeddingTable* t, only_table(*this));
  return t->lookup_dequantized(ids, out);
}
Status EmbeddingRuntime::lookup_dequantized(std::span<const int32_t> ids, float* out) const {
  QEMB_ASSIGN_OR_RETURN(const EmbeddingTable* t, only_table(*this));
  return t->lookup_dequantized(ids, out);
}

Status EmbeddingRuntime::lookup_dequantized(std::span<const int64_t> ids, FloatDtype dtype, void* out) const {
  QEMB_ASSIGN_OR_RETURN(const EmbeddingTable* t, only_table(*this));
  return t->lookup_dequantized(ids, dtype, out);
}

Status EmbeddingRuntime::lookup_dequantized(std::span<const int32_t> ids, FloatDtype dtype, void* out) const {
  QEMB_ASSIGN_OR_RETURN(const EmbeddingTable* t, only_table(*this));
  return t->lookup_dequantized(ids, dtype, out);
}

}  // namespace qemb
