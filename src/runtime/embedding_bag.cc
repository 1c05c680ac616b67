#include "qemb/embedding_bag.h"

#include <algorithm>
#include <vector>

#include "qemb/half.h"
#include "runtime/runtime_impl.h"

namespace qemb {

const char* to_string(PoolMode mode) { return mode == PoolMode::kMean ? "mean" : "sum"; }

Result<PoolMode> parse_pool_mode(std::string_view s) {
  if (s == "sum") return PoolMode::kSum;
  if (s == "mean") return PoolMode::kMean;
  return make_error(ErrorCode::kInvalidArgument,
                    "unknown pool mode '" + std::string(s) + "': expected sum or mean");
}

const char* to_string(BagOutputType type) {
  switch (type) {
    case BagOutputType::kFloat32: return "float32";
    case BagOutputType::kFloat16: return "float16";
    case BagOutputType::kBFloat16: return "bfloat16";
  }
  return "?";
}

Result<size_t> bag_count(const TableBags& bags) {
  if (bags.kind != BagBoundaries::kOffsetsWithLast) return bags.boundaries.size();
  if (bags.boundaries.size() == 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "offsets that include the last one need B + 1 values, starting with 0; got none");
  return bags.boundaries.size() - 1;
}

namespace {

// A table whose input has been checked, with its bags as B + 1 int64 offsets.
struct PreparedTable {
  const TableBags* bags = nullptr;
  const EmbeddingTable::Impl* impl = nullptr;
  size_t dim = 0;
  size_t column = 0;  // its first output column
  std::vector<int64_t> offsets_storage;
  const int64_t* offsets = nullptr;  // B + 1, absolute positions into the ids
  int64_t padding = -1;
};

std::string label(const TableBags& t, size_t index) {
  std::string s = "table " + std::to_string(index);
  if (!t.name.empty()) s += " ('" + t.name + "')";
  return s;
}

std::string at(const char* array, size_t i, int64_t v) {
  return std::string(array) + "[" + std::to_string(i) + "] = " + std::to_string(v);
}

// Checks offsets or lengths and leaves B + 1 int64 offsets in `p`.
Status prepare_offsets(const TableBags& t, size_t bags, PreparedTable& p, std::string& why) {
  const IntSpan& bounds = t.boundaries;
  const int64_t n = static_cast<int64_t>(t.indices.size());
  if (t.kind == BagBoundaries::kLengths) {
    p.offsets_storage.resize(bags + 1);
    int64_t end = 0;
    p.offsets_storage[0] = 0;
    for (size_t b = 0; b < bags; ++b) {
      const int64_t len = bounds[b];
      if (len < 0) {
        why = at("lengths", b, len) + " is negative";
        return make_error(ErrorCode::kInvalidArgument, why);
      }
      if (len > n - end) {
        why = at("lengths", b, len) + " runs past the end of the " + std::to_string(n) +
              " indices (bag " + std::to_string(b) + " starts at " + std::to_string(end) + ")";
        return make_error(ErrorCode::kInvalidArgument, why);
      }
      end += len;
      p.offsets_storage[b + 1] = end;
    }
    if (end != n) {
      why = "the lengths add up to " + std::to_string(end) + " but there are " + std::to_string(n) +
            " indices";
      return make_error(ErrorCode::kInvalidArgument, why);
    }
    p.offsets = p.offsets_storage.data();
    return Status::Ok();
  }
  int64_t prev = 0;
  for (size_t b = 0; b < bounds.size(); ++b) {
    const int64_t v = bounds[b];
    if (b == 0 && v != 0) {
      why = at("offsets", 0, v) + "; the first offset must be 0";
      return make_error(ErrorCode::kInvalidArgument, why);
    }
    if (v < prev) {
      why = at("offsets", b, v) + " is less than " + at("offsets", b - 1, prev) +
            "; offsets must not decrease";
      return make_error(ErrorCode::kInvalidArgument, why);
    }
    if (v > n) {
      why = at("offsets", b, v) + " is past the end of the " + std::to_string(n) + " indices";
      return make_error(ErrorCode::kInvalidArgument, why);
    }
    prev = v;
  }
  if (t.kind == BagBoundaries::kOffsetsWithLast) {
    if (prev != n) {
      why = "the last offset, " + at("offsets", bags, prev) + ", must equal the number of indices (" +
            std::to_string(n) + ")";
      return make_error(ErrorCode::kInvalidArgument, why);
    }
    if (bounds.is_int64()) {
      p.offsets = bounds.data64();  // used in place
      return Status::Ok();
    }
  } else if (bags == 0 && n > 0) {
    why = "no offsets (0 bags) for " + std::to_string(n) + " indices";
    return make_error(ErrorCode::kInvalidArgument, why);
  }
  p.offsets_storage.resize(bags + 1);
  for (size_t b = 0; b < bags; ++b) p.offsets_storage[b] = bounds[b];
  p.offsets_storage[bags] = n;
  p.offsets = p.offsets_storage.data();
  return Status::Ok();
}

template <typename Id>
QEMB_CALLER_MEMORY_READ Status check_bag_ids(const Id* ids, const PreparedTable& p, size_t bags, int64_t vocab,
                     const std::string& table) {
  for (size_t b = 0; b < bags; ++b) {
    for (int64_t i = p.offsets[b]; i < p.offsets[b + 1]; ++i) {
      const int64_t id = static_cast<CallerIdPtr<Id>>(ids)[i];
      if (id < 0 || id >= vocab) {
        return make_error(ErrorCode::kOutOfRange,
                          table + ": id " + std::to_string(id) + " at position " + std::to_string(i) +
                              " (bag " + std::to_string(b) + ")" +
                              (id < 0 ? " is negative" : " is past the last row") +
                              "; ids must be in [0, " + std::to_string(vocab) + ")");
      }
    }
  }
  return Status::Ok();
}

Status prepare(const TableBags& t, size_t index, PreparedTable& p, size_t& bags) {
  const std::string name = label(t, index);
  if (t.table == nullptr && t.embedding_table == nullptr)
    return make_error(ErrorCode::kInvalidArgument, name + " has no runtime");
  if (t.embedding_table == nullptr && t.table->table_count() > 1)
    return make_error(ErrorCode::kInvalidArgument,
                      name + ": " +
                          several_tables_error(*t.table, "choose one with TableBags.embedding_table "
                                                         "(EmbeddingRuntime::find_table(NAME))")
                              .message);
  p.bags = &t;
  p.impl = t.embedding_table ? &table_impl(*t.embedding_table) : &table_impl(t.table->table(0));
  p.dim = static_cast<size_t>(p.impl->sig.dim);
  auto count = bag_count(t);
  if (!count.ok()) return make_error(count.error().code, name + ": " + count.error().message);
  bags = *count;
  std::string why;
  if (!prepare_offsets(t, bags, p, why).ok()) return make_error(ErrorCode::kInvalidArgument, name + ": " + why);
  const size_t n = t.indices.size();
  if (t.per_sample_weights) {
    if (t.mode != PoolMode::kSum)
      return make_error(ErrorCode::kInvalidArgument,
                        name + ": per-sample weights need pool mode sum (as in PyTorch, mean takes none)");
    if (t.per_sample_weights->size() != n)
      return make_error(ErrorCode::kInvalidArgument,
                        name + ": " + std::to_string(t.per_sample_weights->size()) +
                            " per-sample weights for " + std::to_string(n) +
                            " indices; give one weight per index");
  }
  const int64_t vocab = p.impl->sig.vocab;
  if (t.padding_idx) {
    const int64_t pad = *t.padding_idx;
    if (pad < -vocab || pad >= vocab)
      return make_error(ErrorCode::kInvalidArgument,
                        name + ": padding_idx " + std::to_string(pad) + " is outside [" +
                            std::to_string(-vocab) + ", " + std::to_string(vocab) + ")");
    p.padding = pad < 0 ? pad + vocab : pad;
  }
  return t.indices.is_int64() ? check_bag_ids(t.indices.data64(), p, bags, vocab, name)
                              : check_bag_ids(t.indices.data32(), p, bags, vocab, name);
}

// The pooled kernel matching a runtime's plan.
struct BagKernel {
  BagI64Fn i64 = nullptr;
  BagI32Fn i32 = nullptr;
};

BagKernel bag_kernel(const EmbeddingTable::Impl& impl) {
  const KernelSet& k = *impl.runtime->kernels;
  return {kernel_fn<BagI64Fn>(k, *impl.plan.bag_i64_kernel), kernel_fn<BagI32Fn>(k, *impl.plan.bag_i32_kernel)};
}

// A graph only the reference interpreter runs: look the chunk's ids (the
// private copy `ids`, which bag.offsets index) up into rows of the output
// (uint16, uint8 or float), then pool those rows with the scalar reference
// of that materialized table.
Status pool_interpreted(const PreparedTable& p, const int64_t* chunk_ids, const BagParams& bag, float* out) {
  const int64_t lo = bag.offsets[0], hi = bag.offsets[bag.bags];
  const size_t m = static_cast<size_t>(hi - lo);
  std::vector<int64_t> ids(m), positions(m);
  for (size_t i = 0; i < m; ++i) {
    ids[i] = chunk_ids[static_cast<size_t>(lo) + i];
    // Padding ids point at an extra row the kernel skips by its index.
    positions[i] = ids[i] == p.padding ? static_cast<int64_t>(m) : static_cast<int64_t>(i);
  }
  const int bits = p.impl->plan.output_bits;
  const int table_bits = bits == 0 ? 32 : bits;
  std::vector<uint8_t> rows((m + 1) * p.dim * static_cast<size_t>(table_bits / 8), 0);
  if (m > 0) QEMB_RETURN_IF_ERROR(interpret_graph(*p.impl->graph, p.impl->sig, ids, rows.data()));
  std::vector<int64_t> offsets(bag.bags + 1);
  for (size_t b = 0; b <= bag.bags; ++b) offsets[b] = bag.offsets[b] - lo;
  BagParams local = bag;
  local.offsets = offsets.data();
  local.lookahead_end = 0;  // the positions are this chunk's
  local.padding_idx = static_cast<int64_t>(m);
  if (bag.weights) local.weights = bag.weights + lo;
  RequantGatherParams table;
  table.weights = rows.data();
  table.dim = p.dim;
  table.act = p.impl->plan.act;
  const std::optional<GatherKernel> k = find_kernel(KernelFamily::kMaterialized, table_bits, bits, KernelForm::kBagI64);
  if (!k) return make_error(ErrorCode::kInternal, "no reference pools a table of " + std::to_string(table_bits) + "-bit values");
  kernel_fn<BagI64Fn>(scalar_reference_kernels(), *k)(table, positions.data(), local, out);
  return Status::Ok();
}

// Bags per task: enough work to amortize a task, few enough to balance
// threads; small bags (pooling 1) are grouped up to kIdsPerTask ids, since a
// kernel call of 64 ids spends much of it on rows whose prefetch its thread
// only issued when the call began.
constexpr size_t kBagsPerTask = 64;
constexpr int64_t kIdsPerTask = 1024;
constexpr size_t kMinValuesForThreads = 1 << 16;

// Ids past a task's last bag copied with its own, for the kernel's prefetch
// (it looks 32 ids ahead).
constexpr size_t kLookaheadIds = 64;

struct Task {
  const PreparedTable* table;
  size_t table_index, first_bag, bags;
};

struct Call {
  const std::vector<Task>* tasks;
  size_t total_dim;
  float* out32;
  uint16_t* out16;
  BagOutputType type;
  std::vector<Status>* status;

  Status run(const Task& task) const {
    const PreparedTable& p = *task.table;
    const TableBags& t = *p.bags;
    // The task's offsets and ids are read once, into private memory, and
    // checked again there: every id was checked in place before anything was
    // written, but a caller's other thread may rewrite them during the call,
    // and only checked values may index the table. The ids copied run
    // kLookaheadIds past the task's last bag, so the kernel's prefetch keeps
    // going across tasks.
    const size_t n = t.indices.size();
    std::vector<int64_t> offsets(task.bags + 1);
    copy_caller_ids(p.offsets + task.first_bag, task.bags + 1, offsets.data());
    for (size_t b = 0; b <= task.bags; ++b) {
      if (offsets[b] < (b == 0 ? 0 : offsets[b - 1]) || offsets[b] > static_cast<int64_t>(n))
        return make_error(ErrorCode::kInvalidArgument,
                          label(t, task.table_index) + ": the offsets changed during the call (another "
                          "thread wrote them) and are no longer valid; the output is not all written");
    }
    const size_t lo = static_cast<size_t>(offsets[0]);
    const size_t end = std::min(n, static_cast<size_t>(offsets[task.bags]) + kLookaheadIds);
    std::vector<int64_t> ids(end - lo);
    if (t.indices.is_int64()) copy_caller_ids(t.indices.data64() + lo, ids.size(), ids.data());
    else copy_caller_ids(t.indices.data32() + lo, ids.size(), ids.data());
    const int64_t vocab = p.impl->sig.vocab;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= vocab)
        return make_error(ErrorCode::kInvalidArgument,
                          label(t, task.table_index) + ": id " + std::to_string(ids[i]) + " at position " +
                              std::to_string(lo + i) + " is outside [0, " + std::to_string(vocab) +
                              ") after it was checked: the ids changed during the call (another thread "
                              "wrote them); the output is not all written");
    }
    for (int64_t& o : offsets) o -= static_cast<int64_t>(lo);
    BagParams bag;
    bag.offsets = offsets.data();
    bag.bags = task.bags;
    bag.weights = t.per_sample_weights ? t.per_sample_weights->data() + lo : nullptr;
    bag.padding_idx = p.padding;
    bag.mean = t.mode == PoolMode::kMean;
    bag.lookahead_end = ids.size();
    std::vector<float> scratch;
    float* out = nullptr;
    if (out32) {
      out = out32 + task.first_bag * total_dim + p.column;
      bag.out_stride = total_dim;
    } else {
      scratch.resize(task.bags * p.dim);
      out = scratch.data();
      bag.out_stride = p.dim;
    }
    if (p.impl->plan.kind == ExecutionPlan::Kind::kInterpreted) {
      QEMB_RETURN_IF_ERROR(pool_interpreted(p, ids.data(), bag, out));
    } else {
      const RequantGatherParams* params = &p.impl->plan.requant;
      RequantGatherParams materialized;
      if (p.impl->plan.kind == ExecutionPlan::Kind::kMaterialized) {
        materialized.weights = reinterpret_cast<const uint8_t*>(p.impl->plan.table);
        materialized.dim = p.dim;
        materialized.act = p.impl->plan.act;
        params = &materialized;
      }
      bag_kernel(*p.impl).i64(*params, ids.data(), bag, out);
    }
    if (out16) {
      for (size_t b = 0; b < task.bags; ++b) {
        uint16_t* o = out16 + (task.first_bag + b) * total_dim + p.column;
        const float* s = scratch.data() + b * p.dim;
        if (type == BagOutputType::kFloat16) {
          for (size_t j = 0; j < p.dim; ++j) o[j] = float_to_f16(s[j]);
        } else {
          for (size_t j = 0; j < p.dim; ++j) o[j] = float_to_bf16(s[j]);
        }
      }
    }
    return Status::Ok();
  }

  static void task(void* ctx, size_t i) {
    const Call* call = static_cast<const Call*>(ctx);
    (*call->status)[i] = call->run((*call->tasks)[i]);
  }
  static void tasks_in(void* ctx, size_t begin, size_t count) {
    for (size_t i = begin; i < begin + count; ++i) task(ctx, i);
  }
};

// Checks every table and that they agree on the number of bags.
Status prepare_all(std::span<const TableBags> tables, std::vector<PreparedTable>& prepared, size_t& batch,
                   size_t& total_dim, size_t& total_values) {
  if (tables.empty()) return make_error(ErrorCode::kInvalidArgument, "no tables to pool");
  prepared.resize(tables.size());
  batch = total_dim = total_values = 0;
  for (size_t t = 0; t < tables.size(); ++t) {
    size_t bags = 0;
    QEMB_RETURN_IF_ERROR(prepare(tables[t], t, prepared[t], bags));
    if (t == 0) {
      batch = bags;
    } else if (bags != batch) {
      return make_error(ErrorCode::kInvalidArgument,
                        label(tables[t], t) + " has " + std::to_string(bags) + " bags but " +
                            label(tables[0], 0) + " has " + std::to_string(batch) +
                            "; every table of a call needs the same number of bags");
    }
    prepared[t].column = total_dim;
    total_dim += prepared[t].dim;
    total_values += tables[t].indices.size() * prepared[t].dim;
  }
  return Status::Ok();
}

Status pool_tables(std::span<const TableBags> tables, float* out32, uint16_t* out16,
                   BagOutputType type) {
  std::vector<PreparedTable> prepared;
  size_t batch = 0, total_dim = 0, total_values = 0;
  QEMB_RETURN_IF_ERROR(prepare_all(tables, prepared, batch, total_dim, total_values));
  if (batch == 0 || total_dim == 0) return Status::Ok();
  if (out32 == nullptr && out16 == nullptr)
    return make_error(ErrorCode::kInvalidArgument, "the output buffer is null");
  // Rows written into an input not yet read would be read as ids, offsets or
  // weights: refused, for every input of every table.
  const void* out = out32 ? static_cast<const void*>(out32) : static_cast<const void*>(out16);
  size_t out_bytes = 0;
  if (__builtin_mul_overflow(batch, total_dim * (out32 ? sizeof(float) : sizeof(uint16_t)), &out_bytes))
    out_bytes = SIZE_MAX;
  for (size_t t = 0; t < tables.size(); ++t) {
    const TableBags& tb = tables[t];
    const size_t id_size = tb.indices.is_int64() ? 8 : 4, bound_size = tb.boundaries.is_int64() ? 8 : 4;
    const void* ids = tb.indices.is_int64() ? static_cast<const void*>(tb.indices.data64())
                                            : static_cast<const void*>(tb.indices.data32());
    const void* bounds = tb.boundaries.is_int64() ? static_cast<const void*>(tb.boundaries.data64())
                                                  : static_cast<const void*>(tb.boundaries.data32());
    const char* what = nullptr;
    if (byte_ranges_overlap(out, out_bytes, ids, tb.indices.size() * id_size)) what = "indices";
    else if (byte_ranges_overlap(out, out_bytes, bounds, tb.boundaries.size() * bound_size)) what = "offsets";
    else if (tb.per_sample_weights &&
             byte_ranges_overlap(out, out_bytes, tb.per_sample_weights->data(),
                                 tb.per_sample_weights->size() * sizeof(float)))
      what = "per-sample weights";
    if (what) {
      const Error e = overlap_error(what);
      return make_error(e.code, label(tb, t) + ": " + e.message);
    }
  }

  std::vector<Task> tasks;
  for (size_t ti = 0; ti < prepared.size(); ++ti) {
    const PreparedTable& p = prepared[ti];
    for (size_t b = 0; b < batch;) {
      size_t e = std::min(batch, b + kBagsPerTask);
      while (e < batch && p.offsets[e] - p.offsets[b] < kIdsPerTask) e = std::min(batch, e + kBagsPerTask);
      tasks.push_back({&p, ti, b, e - b});
      b = e;
    }
  }
  std::vector<Status> status(tasks.size());
  Call call{&tasks, total_dim, out32, out16, type, &status};
  WorkerPool* pool = prepared[0].impl->runtime->pool.get();
  if (pool != nullptr && tasks.size() > 1 && total_values >= kMinValuesForThreads) {
    pool->parallelize(tasks.size(), 1, &Call::tasks_in, &call);
  } else {
    for (size_t i = 0; i < tasks.size(); ++i) Call::task(&call, i);
  }
  for (const Status& s : status) QEMB_RETURN_IF_ERROR(s);
  return Status::Ok();
}

}  // namespace

std::string bag_kernel_name(const EmbeddingRuntime& runtime) { return bag_kernel_name(runtime.table(0)); }

const EmbeddingTable* bag_table(const TableBags& bags) {
  if (bags.embedding_table != nullptr) return bags.embedding_table;
  return bags.table != nullptr ? &bags.table->table(0) : nullptr;
}

std::string bag_kernel_name(const EmbeddingTable& table) {
  const EmbeddingTable::Impl& impl = table_impl(table);
  if (impl.plan.kind == ExecutionPlan::Kind::kInterpreted) return "reference_interpreter";
  return kernel_name(*impl.runtime->kernels, *impl.plan.bag_i64_kernel);
}

Status check_bags(std::span<const TableBags> tables) {
  std::vector<PreparedTable> prepared;
  size_t batch = 0, total_dim = 0, total_values = 0;
  return prepare_all(tables, prepared, batch, total_dim, total_values);
}

Status embedding_bags(std::span<const TableBags> tables, float* out) {
  return pool_tables(tables, out, nullptr, BagOutputType::kFloat32);
}

Status embedding_bags(std::span<const TableBags> tables, BagOutputType type, uint16_t* out) {
  if (type == BagOutputType::kFloat32)
    return make_error(ErrorCode::kInvalidArgument,
                      "a uint16 output holds float16 or bfloat16; pass a float buffer for float32");
  return pool_tables(tables, nullptr, out, type);
}

// ---- the flat, table-batched form (TBE / KeyedJaggedTensor) -----------------

namespace {

// The features' tables, checked: feature f reads *tables[f].
Status flat_tables(const FlatBags& flat, std::vector<const EmbeddingTable*>& tables) {
  if (flat.runtime == nullptr) return make_error(ErrorCode::kInvalidArgument, "FlatBags.runtime is null");
  const EmbeddingRuntime& rt = *flat.runtime;
  tables.clear();
  if (flat.feature_tables.empty()) {
    for (size_t t = 0; t < rt.table_count(); ++t) tables.push_back(&rt.table(t));
    return Status::Ok();
  }
  for (size_t f = 0; f < flat.feature_tables.size(); ++f) {
    const int64_t t = flat.feature_tables[f];
    if (t < 0 || static_cast<size_t>(t) >= rt.table_count()) {
      std::string names;
      for (size_t i = 0; i < rt.table_count(); ++i)
        names += (i ? ", " : "") + std::to_string(i) + " '" + rt.table(i).name() + "'";
      return make_error(ErrorCode::kInvalidArgument,
                        "feature_tables[" + std::to_string(f) + "] = " + std::to_string(t) +
                            " is not a table of the artifact; its tables: " + names);
    }
    tables.push_back(&rt.table(static_cast<size_t>(t)));
  }
  return Status::Ok();
}

std::string feature_label(size_t f, const EmbeddingTable& t) {
  return "feature " + std::to_string(f) + " (table '" + t.name() + "')";
}

// Checks the flat arrays and splits them into one TableBags per feature, each
// with its bags' offsets rebased to its own ids (held in `offsets`).
Status split_flat(const FlatBags& flat, std::vector<TableBags>& out, std::vector<int64_t>& offsets, size_t& bags) {
  std::vector<const EmbeddingTable*> tables;
  QEMB_RETURN_IF_ERROR(flat_tables(flat, tables));
  const size_t features = tables.size();
  if (features == 0) return make_error(ErrorCode::kInvalidArgument, "no features to pool: feature_tables is empty");
  const size_t m = flat.offsets.size();
  const int64_t n = static_cast<int64_t>(flat.indices.size());
  if (m == 0 || (m - 1) % features != 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "offsets holds " + std::to_string(m) + " values; " + std::to_string(features) +
                          " features of B bags each need " + std::to_string(features) +
                          " * B + 1 (feature-major: feature f's bag b starts at offsets[f * B + b], the last "
                          "equal to the number of indices)");
  bags = (m - 1) / features;
  int64_t prev = 0;
  for (size_t i = 0; i < m; ++i) {
    const int64_t v = flat.offsets[i];
    if (i == 0 && v != 0)
      return make_error(ErrorCode::kInvalidArgument, "offsets[0] = " + std::to_string(v) + "; the first offset must be 0");
    if (v < prev)
      return make_error(ErrorCode::kInvalidArgument, "offsets[" + std::to_string(i) + "] = " + std::to_string(v) +
                                                         " is less than offsets[" + std::to_string(i - 1) + "] = " +
                                                         std::to_string(prev) + "; offsets must not decrease");
    if (v > n)
      return make_error(ErrorCode::kInvalidArgument, "offsets[" + std::to_string(i) + "] = " + std::to_string(v) +
                                                         " is past the end of the " + std::to_string(n) + " indices");
    prev = v;
  }
  if (prev != n)
    return make_error(ErrorCode::kInvalidArgument, "the last offset, offsets[" + std::to_string(m - 1) + "] = " +
                                                       std::to_string(prev) +
                                                       ", must equal the number of indices (" + std::to_string(n) + ")");
  if (flat.per_sample_weights) {
    if (flat.mode != PoolMode::kSum)
      return make_error(ErrorCode::kInvalidArgument,
                        "per-sample weights need pool mode sum (as in PyTorch, mean takes none)");
    if (flat.per_sample_weights->size() != flat.indices.size())
      return make_error(ErrorCode::kInvalidArgument,
                        std::to_string(flat.per_sample_weights->size()) + " per-sample weights for " +
                            std::to_string(n) + " indices; give one weight per index");
  }
  // Every id against its feature's table, at its position in the flat array.
  for (size_t f = 0; f < features; ++f) {
    const int64_t vocab = tables[f]->vocab_size();
    for (size_t b = 0; b < bags; ++b) {
      for (int64_t i = flat.offsets[f * bags + b]; i < flat.offsets[f * bags + b + 1]; ++i) {
        const int64_t id = flat.indices[static_cast<size_t>(i)];
        if (id < 0 || id >= vocab)
          return make_error(ErrorCode::kOutOfRange,
                            feature_label(f, *tables[f]) + ": id " + std::to_string(id) + " at position " +
                                std::to_string(i) + " of indices (bag " + std::to_string(b) + ")" +
                                (id < 0 ? " is negative" : " is past the last row") + "; ids must be in [0, " +
                                std::to_string(vocab) + ")");
      }
    }
  }
  offsets.resize(features * (bags + 1));
  out.assign(features, TableBags{});
  for (size_t f = 0; f < features; ++f) {
    const int64_t lo = flat.offsets[f * bags], hi = flat.offsets[(f + 1) * bags];
    int64_t* o = offsets.data() + f * (bags + 1);
    for (size_t b = 0; b <= bags; ++b) o[b] = flat.offsets[f * bags + b] - lo;
    TableBags& t = out[f];
    t.table = flat.runtime;
    t.embedding_table = tables[f];
    t.name = tables[f]->name();  // messages say "table F ('NAME')", F the feature
    const size_t count = static_cast<size_t>(hi - lo);
    if (flat.indices.is_int64()) t.indices = std::span<const int64_t>(flat.indices.data64() + lo, count);
    else t.indices = std::span<const int32_t>(flat.indices.data32() + lo, count);
    t.boundaries = std::span<const int64_t>(o, bags + 1);
    t.kind = BagBoundaries::kOffsetsWithLast;
    if (flat.per_sample_weights) t.per_sample_weights = flat.per_sample_weights->subspan(static_cast<size_t>(lo), count);
    t.mode = flat.mode;
    t.padding_idx = flat.padding_idx;
  }
  return Status::Ok();
}

// The flat arrays may not share memory with the output either.
Status flat_overlap(const FlatBags& flat, const void* out, size_t out_bytes) {
  const size_t id_size = flat.indices.is_int64() ? 8 : 4, off_size = flat.offsets.is_int64() ? 8 : 4;
  const void* ids = flat.indices.is_int64() ? static_cast<const void*>(flat.indices.data64())
                                            : static_cast<const void*>(flat.indices.data32());
  const void* offs = flat.offsets.is_int64() ? static_cast<const void*>(flat.offsets.data64())
                                             : static_cast<const void*>(flat.offsets.data32());
  if (byte_ranges_overlap(out, out_bytes, ids, flat.indices.size() * id_size)) return overlap_error("indices");
  if (byte_ranges_overlap(out, out_bytes, offs, flat.offsets.size() * off_size)) return overlap_error("offsets");
  return Status::Ok();
}

Status pool_flat(const FlatBags& flat, float* out32, uint16_t* out16, BagOutputType type) {
  std::vector<TableBags> tables;
  std::vector<int64_t> offsets;
  size_t bags = 0;
  QEMB_RETURN_IF_ERROR(split_flat(flat, tables, offsets, bags));
  size_t width = 0;
  for (const TableBags& t : tables) width += static_cast<size_t>(t.embedding_table->dim());
  size_t out_bytes = 0;
  if (__builtin_mul_overflow(bags, width * (out32 ? sizeof(float) : sizeof(uint16_t)), &out_bytes)) out_bytes = SIZE_MAX;
  QEMB_RETURN_IF_ERROR(flat_overlap(flat, out32 ? static_cast<const void*>(out32) : out16, out_bytes));
  return pool_tables(tables, out32, out16, type);
}

}  // namespace

Result<FlatBagsShape> flat_bags_shape(const FlatBags& flat) {
  std::vector<const EmbeddingTable*> tables;
  QEMB_RETURN_IF_ERROR(flat_tables(flat, tables));
  if (tables.empty()) return make_error(ErrorCode::kInvalidArgument, "no features to pool: feature_tables is empty");
  const size_t m = flat.offsets.size();
  if (m == 0 || (m - 1) % tables.size() != 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "offsets holds " + std::to_string(m) + " values; " + std::to_string(tables.size()) +
                          " features of B bags each need " + std::to_string(tables.size()) + " * B + 1");
  FlatBagsShape shape;
  shape.bags = (m - 1) / tables.size();
  for (const EmbeddingTable* t : tables) shape.width += static_cast<size_t>(t->dim());
  return shape;
}

Status embedding_bags_flat(const FlatBags& flat, float* out) {
  return pool_flat(flat, out, nullptr, BagOutputType::kFloat32);
}

Status embedding_bags_flat(const FlatBags& flat, BagOutputType type, uint16_t* out) {
  if (type == BagOutputType::kFloat32)
    return make_error(ErrorCode::kInvalidArgument,
                      "a uint16 output holds float16 or bfloat16; pass a float buffer for float32");
  return pool_flat(flat, nullptr, out, type);
}

}  // namespace qemb
