#include "qemb/bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <random>
#include <vector>

#include "qemb/embedding_bag.h"
#include "core/ir.h"
#include "runtime/runtime_impl.h"
#include "runtime/worker_pool.h"

namespace qemb {

nlohmann::json BenchResult::to_json() const {
  return {{"kernel", kernel},
          {"isa", isa},
          {"threads", threads},
          {"batch", batch},
          {"cold", cold},
          {"rows_per_s", rows_per_s},
          {"bytes_per_s", bytes_per_s},
          {"baseline_rows_per_s", baseline_rows_per_s},
          {"baseline_bytes_per_s", baseline_bytes_per_s},
          {"row_bytes_read", row_bytes_read},
          {"row_bytes_written", row_bytes_written},
          {"baseline_row_bytes", baseline_row_bytes},
          {"ratio", ratio},
          {"pooling", pooling},
          {"table", table}};
}

namespace {

struct StoredTable {
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;
};

// The table the runtime graph reads: the first op's STATIC input.
Result<StoredTable> stored_table(const Graph& g) {
  for (const Op& op : g.ops) {
    const Tensor* t = g.find_tensor(op.inputs[0]);
    if (t && t->kind == TensorKind::kStatic && t->shape.size() == 2)
      // A row-interleaved table's rows are its records (scale and values):
      // the bytes a lookup of the row reads.
      return StoredTable{t->data->data(),
                         t->interleaved() ? t->row_stride : row_storage_bytes(t->dtype, t->bitwidth(), t->shape[1])};
  }
  return make_error(ErrorCode::kUnsupported, "the artifact has no STATIC table to benchmark");
}

struct MemcpyGather {
  StoredTable table;
  const int64_t* ids;
  uint8_t* out;
  // Pooled lookups write no rows: the copies go to a few scratch rows per
  // task, discarded, so the roofline reads the same bytes and writes little.
  bool discard = false;
  static void task(void* ctx, size_t begin, size_t count) {
    auto* self = static_cast<const MemcpyGather*>(ctx);
    const size_t rb = self->table.row_bytes;
    for (size_t i = begin; i < begin + count; ++i) {
      uint8_t* dst = self->out + (self->discard ? begin + i % 16 : i) * rb;
      std::memcpy(dst, self->table.data + static_cast<size_t>(self->ids[i]) * rb, rb);
    }
  }
};

struct PairedRates {
  double kernel_batches_per_s = 0, baseline_batches_per_s = 0;
};

// Runs kBatchesPerTurn batches of the baseline, then as many of the kernel,
// timed apart, turn after turn until min_seconds of both pass. Where the
// memory system's speed drifts within seconds (a shared VM's moved 1.5-2x a
// minute apart), measurements taken one after the other catch different
// weather; turns this short see the same, so their ratio holds. The two use
// different batches, so the kernel never reads rows the copy just brought in.
template <typename Kernel, typename Baseline>
PairedRates measure_pairs(double min_seconds, size_t batches, Kernel kernel, Baseline baseline) {
  using clock = std::chrono::steady_clock;
  constexpr size_t kBatchesPerTurn = 8;
  for (size_t b = 0; b < std::min<size_t>(batches, 4); ++b) {  // warm up
    baseline(b);
    kernel(b);
  }
  size_t next = 0, turns = 0;
  double kernel_s = 0, baseline_s = 0;
  do {
    const auto t0 = clock::now();
    for (size_t k = 0; k < kBatchesPerTurn; ++k) baseline(next++ % batches);
    const auto t1 = clock::now();
    for (size_t k = 0; k < kBatchesPerTurn; ++k) kernel(next++ % batches);
    const auto t2 = clock::now();
    baseline_s += std::chrono::duration<double>(t1 - t0).count();
    kernel_s += std::chrono::duration<double>(t2 - t1).count();
    ++turns;
  } while (kernel_s + baseline_s < 2 * min_seconds);
  const double n = static_cast<double>(turns * kBatchesPerTurn);
  return {n / kernel_s, n / baseline_s};
}

Result<BenchResult> run_bench_ids(const EmbeddingRuntime& runtime, const EmbeddingTable& table,
                                  const BenchOptions& options);

}  // namespace

Result<const EmbeddingTable*> bench_table(const EmbeddingRuntime& runtime, const std::string& name) {
  if (!name.empty()) return runtime.find_table(name);
  if (runtime.table_count() == 1) return &runtime.table(0);
  return several_tables_error(runtime, "choose one with BenchOptions.table");
}

Result<BenchResult> run_bench(const EmbeddingRuntime& runtime, const BenchOptions& options) {
  if (options.batch == 0) return make_error(ErrorCode::kInvalidArgument, "BenchOptions.batch must be at least 1");
  if (options.hot_set == 0 && !options.cold)
    return make_error(ErrorCode::kInvalidArgument, "the hot id set must hold at least 1 id");
  if (!std::isfinite(options.min_seconds) || !(options.min_seconds > 0))
    return make_error(ErrorCode::kInvalidArgument, "the time per measurement must be a finite number of seconds > 0");
  QEMB_ASSIGN_OR_RETURN(const EmbeddingTable* chosen, bench_table(runtime, options.table));
  const EmbeddingTable& table = *chosen;
  const size_t bags = options.batch;
  BenchOptions o = options;
  // ids per step; then a step's ids, output and baseline copy (each row at
  // most float32 wide): refuse what this machine cannot hold before anything
  // is allocated.
  const uint64_t per_row = 8 + 2 * 4 * static_cast<uint64_t>(table.dim());
  const uint64_t memory = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  uint64_t needed = 0;
  if ((o.pooling > 0 && __builtin_mul_overflow(bags, o.pooling, &o.batch)) ||
      __builtin_mul_overflow(static_cast<uint64_t>(o.batch), per_row, &needed) || needed > memory / 2)
    return make_error(ErrorCode::kInvalidArgument,
                      "a batch of " + std::to_string(options.batch) + " rows of " + std::to_string(table.dim()) +
                          " values needs more than half of this machine's memory (" + std::to_string(memory) +
                          " bytes); use a smaller BenchOptions.batch");
  try {
    return run_bench_ids(runtime, table, o);
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::kInvalidArgument,
                      "cannot allocate the buffers for a batch of " + std::to_string(options.batch) +
                          " rows; use a smaller BenchOptions.batch");
  } catch (const std::length_error&) {
    return make_error(ErrorCode::kInvalidArgument,
                      "a batch of " + std::to_string(options.batch) + " rows is too large; use a smaller BenchOptions.batch");
  }
}

namespace {

Result<BenchResult> run_bench_ids(const EmbeddingRuntime& runtime, const EmbeddingTable& chosen,
                                  const BenchOptions& options) {
  QEMB_ASSIGN_OR_RETURN(StoredTable table, stored_table(*table_impl(chosen).graph));
  const int64_t vocab = chosen.vocab_size();
  const size_t dim = static_cast<size_t>(chosen.dim());
  const size_t batch = options.batch;

  // Cold: enough distinct batches to cycle through ~4x the table or 64M ids,
  // whichever is smaller; hot: one small id set reused.
  std::mt19937_64 rng(options.seed);
  std::vector<int64_t> hot_ids(std::min<size_t>(options.hot_set, static_cast<size_t>(vocab)));
  for (auto& id : hot_ids) id = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab));
  size_t batches = 1;
  if (options.cold) {
    const size_t rows_to_touch = std::min<size_t>(4 * static_cast<size_t>(vocab), size_t{1} << 26);
    batches = std::max<size_t>(1, rows_to_touch / batch);
  }
  std::vector<int64_t> ids(batches * batch);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = options.cold ? static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab))
                          : hot_ids[i % hot_ids.size()];

  BenchResult r;
  r.kernel = chosen.kernel_name();
  // The kernel that runs: with --dequantize, the float form's, not the
  // table's native one (the name said requant_gather_s4_u16 while the f32
  // kernel ran).
  if (const EmbeddingTable::Impl& impl = table_impl(chosen);
      options.dequantize && impl.plan.kind != ExecutionPlan::Kind::kInterpreted) {
    const std::optional<GatherKernel> k = options.out_dtype == FloatDtype::kF32   ? impl.plan.f32_kernel
                                          : options.out_dtype == FloatDtype::kF16 ? impl.plan.f16_kernel
                                                                                  : impl.plan.bf16_kernel;
    if (k) r.kernel = kernel_name(*impl.runtime->kernels, *k);
  }
  r.isa = table_impl(chosen).isa;
  r.table = chosen.name();
  r.threads = runtime.threads();
  r.batch = batch;
  r.cold = options.cold;
  r.row_bytes_read = table.row_bytes;
  // The table's own output unless dequantized: uint16, uint8, or a
  // weight-only table's float32.
  const int bits = runtime.activation_bits();
  const bool native_floats = !options.dequantize && bits == 0;
  r.row_bytes_written = dim * (options.dequantize ? float_dtype_size(options.out_dtype) : bits == 0 ? 4 : bits / 8);
  r.baseline_row_bytes = table.row_bytes;

  // uint16 activations or half-precision bits; float32.
  const bool wide = native_floats || (options.dequantize && options.out_dtype == FloatDtype::kF32);
  std::vector<uint16_t> out16(wide || bits == 8 ? 0 : batch * dim);
  std::vector<uint8_t> out8(!options.dequantize && bits == 8 ? batch * dim : 0);
  std::vector<float> out32(wide ? batch * dim : 0);
  std::vector<uint8_t> copy(batch * table.row_bytes);
  std::unique_ptr<WorkerPool> pool;
  if (runtime.threads() > 1) pool = std::make_unique<WorkerPool>(runtime.threads());

  // Fault in every page of the mapped table first, so neither side pays the
  // first touch of a lazily mapped artifact.
  uint8_t touched = 0;
  const size_t table_bytes = table.row_bytes * static_cast<size_t>(vocab);
  for (size_t off = 0; off < table_bytes; off += 4096) touched ^= table.data[off];
  volatile uint8_t sink = touched;
  (void)sink;

  Status failure;
  // Pooled: `batch` bags of `pooling` ids; the lookups below then count ids.
  std::vector<int64_t> offsets;
  std::vector<float> pooled;
  if (options.pooling > 0) {
    for (size_t b = 0; b <= batch / options.pooling; ++b) offsets.push_back(static_cast<int64_t>(b * options.pooling));
    pooled.resize((batch / options.pooling) * dim);
  }
  auto kernel_step = [&](size_t b) {
    std::span<const int64_t> span(ids.data() + b * batch, batch);
    Status s;
    if (options.pooling > 0) {
      TableBags t;
      t.table = &runtime;
      t.embedding_table = &chosen;
      t.indices = span;
      t.boundaries = std::span<const int64_t>(offsets);
      s = embedding_bag(t, pooled.data());
    } else {
      if (!options.dequantize && bits == 16) s = chosen.lookup(span, out16.data());
      else if (!options.dequantize && bits == 8) s = chosen.lookup(span, out8.data());
      else if (wide) s = chosen.lookup_dequantized(span, out32.data());
      else s = chosen.lookup_dequantized(span, options.out_dtype, out16.data());
    }
    if (!s.ok()) failure = s;
  };
  auto baseline_step = [&](size_t b) {
    MemcpyGather g{table, ids.data() + b * batch, copy.data(), options.pooling > 0};
    if (pool && batch >= 128) {
      pool->parallelize(batch, std::max<size_t>(64, batch / (4 * runtime.threads())), &MemcpyGather::task, &g);
    } else {
      MemcpyGather::task(&g, 0, batch);
    }
  };
  const PairedRates rates = measure_pairs(options.min_seconds, batches, kernel_step, baseline_step);
  QEMB_RETURN_IF_ERROR(failure);

  r.rows_per_s = rates.kernel_batches_per_s * static_cast<double>(batch);
  r.bytes_per_s = r.rows_per_s * static_cast<double>(r.row_bytes_written);
  r.baseline_rows_per_s = rates.baseline_batches_per_s * static_cast<double>(batch);
  r.baseline_bytes_per_s = r.baseline_rows_per_s * static_cast<double>(table.row_bytes);
  r.ratio = r.rows_per_s / r.baseline_rows_per_s;
  if (options.pooling > 0) {
    r.pooling = options.pooling;
    r.batch = batch / options.pooling;  // bags
    r.kernel = bag_kernel_name(chosen);
    r.row_bytes_written = 0;  // B rows of D floats for batch * pooling ids
    r.bytes_per_s = r.rows_per_s * static_cast<double>(table.row_bytes);
  }
  return r;
}

}  // namespace

}  // namespace qemb
