// Pooled (EmbeddingBag) kernel throughput, each case next to its roofline: a
// memcpy gather of the same stored row bytes for the same ids, the copies
// discarded (memcpy_rows), so ratios read off one run; memcpy_rows_scales also
// reads each row's scale from its separate array, as the PCQ kernels must;
// memcpy_rows_out also writes each bag's dim floats of output, as the kernels
// must (what that costs a plain copy at pooling 1, where it outweighs the rows).
//
//   qemb_bench --benchmark_filter='^bag/' --benchmark_repetitions=3
//              --benchmark_enable_random_interleaving=true
//   qemb_bench --benchmark_filter='^bag/cold.*/vs_memcpy_rows'   (paired: see below)
//   QEMB_BENCH_ISA=AVX2 qemb_bench --benchmark_filter='^bag/'   (one instruction set)
//   QEMB_BENCH_HUGEPAGES=1 qemb_bench ...   (tables in transparent huge pages)
//   QEMB_BENCH_ROW_READS=direct|staged qemb_bench ...   (BagParams::row_reads)
//
// Scenarios: batch 2048 bags of L ids (pooling factor L = 1, 20, 100), D = 64,
// 128, 256, with random ids over the whole of
//   hot_v1M   a 1M-row table, read over and over (it stays in the last-level
//             cache where it fits: 32-128 MiB at 4 bits);
//   cold_v8M  an 8M-row table, a fresh stretch of ids every batch;
//   l2_v4K    a 4096-row table that stays in L2: the arithmetic alone,
// on one and two threads (each thread pools its own batches). Counter
// ids/s: indices pooled per second (all threads). Tables are 4-bit and 8-bit
// PCQ (the fused kernels), in the plain layout (scales in their own array) and
// the row-interleaved one (s4_rows, s8_rows: each row's scale next to it; the
// memcpy roofline then copies the scale with the row), and, hot only, the
// materialized uint16 table; one table lives at a time. Every pooled kernel
// of the kernel list is registered from the list (2-bit rows, uint8 and
// float32 tables, the uint8-activation and weight-only families too).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <sys/mman.h>

#include "kernels/kernels.h"

namespace {

using qemb::BagParams;
using qemb::GatherKernel;
using qemb::KernelSet;
using qemb::RequantGatherParams;

// The stored table a bag kernel reads, from its row of the kernel list: a
// materialized table of `bits`-bit values (uint16 / uint8 activations, or
// float32), or per-row weights of `bits` bits, plain or row-interleaved
// (each row's float32 scale and then its weights, every multiple of 4
// bytes: RequantGatherParams::row_stride).
struct Kind {
  bool rows = true;
  int bits = 4;
  bool interleaved = false;
  bool operator==(const Kind& o) const { return rows == o.rows && bits == o.bits && interleaved == o.interleaved; }
};

// "u16", "u8", "f32", "s4", "s8", "s2", "s4_rows", ...
std::string kind_name(Kind k) {
  if (!k.rows) return k.bits == 32 ? "f32" : "u" + std::to_string(k.bits);
  return "s" + std::to_string(k.bits) + (k.interleaved ? "_rows" : "");
}

bool interleaved(Kind k) { return k.interleaved; }

// The bytes a row occupies: with its scale in the interleaved layouts.
size_t row_bytes(Kind k, size_t dim) {
  const size_t values = (dim * static_cast<size_t>(k.bits) + 7) / 8;
  return k.interleaved ? (4 + values + 3) / 4 * 4 : values;
}

Kind kind_of(GatherKernel k, bool interleaved_rows) {
  const qemb::KernelRow& row = qemb::kernel_row(k);
  if (row.family == qemb::KernelFamily::kMaterialized) return {false, row.weight_bits, false};
  return {true, row.weight_bits, interleaved_rows};
}

struct BagScenario {
  std::string name;
  size_t rows, dim, pooling, batch;
  bool hot;  // the same few batches again and again
};

struct BagTable {
  std::string key;
  size_t rows = 0, dim = 0;
  Kind kind;
  struct Free {
    Free() : mapped(nullptr), length(0) {}  // std::free (constructors, not member initializers: those leave
                                           // Free not default-constructible inside BagTable)
    Free(void* m, size_t l) : mapped(m), length(l) {}
    void* mapped;  // the mapping when the table lives in huge pages
    size_t length;
    void operator()(uint8_t* p) const {
      if (mapped) ::munmap(mapped, length);
      else std::free(p);
    }
  };
  std::unique_ptr<uint8_t, Free> bytes;
  std::vector<float> scales;
  std::vector<int64_t> ids;      // batches of batch * pooling ids
  std::vector<int64_t> offsets;  // batch + 1 for one batch
  size_t batches = 0;
};

std::mutex table_mutex;

// 64-byte aligned, as artifact tables are. QEMB_BENCH_HUGEPAGES=1 maps the
// table in transparent huge pages (2 MiB aligned, advised before the first
// touch, which is when the kernel decides), to see what TLB misses cost a
// cold random gather: both sides of every ratio get the same pages.
std::unique_ptr<uint8_t, BagTable::Free> table_bytes(size_t size) {
  const char* env = std::getenv("QEMB_BENCH_HUGEPAGES");
  if (env && std::string(env) == "1") {
    constexpr size_t kHuge = size_t{2} << 20;
    const size_t length = size + kHuge;
    void* mapped = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped != MAP_FAILED) {
      auto* aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(mapped) + kHuge - 1) & ~(kHuge - 1));
      ::madvise(aligned, size, MADV_HUGEPAGE);  // a hint: the kernel may refuse
      return std::unique_ptr<uint8_t, BagTable::Free>(aligned, BagTable::Free{mapped, length});
    }
  }
  return std::unique_ptr<uint8_t, BagTable::Free>(static_cast<uint8_t*>(std::aligned_alloc(64, size)));
}

// The one live table, rebuilt when a benchmark needs another.
const BagTable& table_for(const BagScenario& s, Kind kind) {
  static BagTable t;
  std::lock_guard<std::mutex> lock(table_mutex);
  const std::string key = s.name + kind_name(kind);
  if (t.key == key) return t;
  t = BagTable();
  t.key = key;
  t.rows = s.rows;
  t.dim = s.dim;
  t.kind = kind;
  const size_t total = s.rows * row_bytes(kind, s.dim);
  t.bytes = table_bytes((total + 64) / 64 * 64);
  std::mt19937_64 rng(12345);
  for (size_t i = 0; i < total; i += 8) {
    const uint64_t r = rng();
    std::memcpy(t.bytes.get() + i, &r, 8);
  }
  t.scales.resize(s.rows);
  std::uniform_real_distribution<float> scale(1e-4f, 1e-2f);
  for (float& x : t.scales) x = scale(rng);
  if (!kind.rows && kind.bits == 32) {  // finite floats, like a weight-only table's
    float* f = reinterpret_cast<float*>(t.bytes.get());
    for (size_t i = 0; i < total / 4; ++i) f[i] = static_cast<float>(static_cast<int32_t>(i % 255) - 127) * 1e-3f;
  }
  if (interleaved(kind)) {
    const size_t rb = row_bytes(kind, s.dim);
    for (size_t r = 0; r < s.rows; ++r) std::memcpy(t.bytes.get() + r * rb, &t.scales[r], 4);
  }
  const size_t per_batch = s.batch * s.pooling;
  // Cold: enough batches to touch ~64M ids; hot: a few batches, repeated.
  t.batches = s.hot ? 4 : std::max<size_t>(1, (size_t{1} << 26) / per_batch);
  t.ids.resize(t.batches * per_batch);
  for (auto& id : t.ids) id = static_cast<int64_t>(rng() % s.rows);
  // Touch the whole table once so neither side pays first-touch faults.
  volatile uint8_t sink = 0;
  for (size_t i = 0; i < total; i += 4096) sink = sink ^ t.bytes.get()[i];
  t.offsets.resize(s.batch + 1);
  for (size_t b = 0; b <= s.batch; ++b) t.offsets[b] = static_cast<int64_t>(b * s.pooling);
  return t;
}

void set_rate(benchmark::State& state, const BagScenario& s) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * s.batch * s.pooling));
  state.counters["ids/s"] = benchmark::Counter(static_cast<double>(state.iterations() * s.batch * s.pooling),
                                               benchmark::Counter::kIsRate);
}

RequantGatherParams bag_params(const BagTable& t, const BagScenario& s, Kind kind, int act_bits) {
  RequantGatherParams p;
  p.weights = t.bytes.get();
  p.row_scales = t.scales.data();
  if (interleaved(kind)) {
    p.weights = t.bytes.get() + 4;
    p.row_scales = reinterpret_cast<const float*>(t.bytes.get());
    p.row_stride = p.scale_stride = row_bytes(kind, s.dim);
  }
  p.dim = s.dim;
  p.rows = s.rows;
  p.act = act_bits == 8 ? qemb::ActivationEncoding{3.9e-2f, 128, 8} : qemb::ActivationEncoding{1.5e-4f, 32768};
  p.max_scale = 1e-2f;
  return p;
}

// QEMB_BENCH_ROW_READS=direct|staged overrides the kernels' own choice of
// how to read rows (BagParams::row_reads).
BagParams::RowReads row_reads() {
  const char* env = std::getenv("QEMB_BENCH_ROW_READS");
  if (env && std::string(env) == "direct") return BagParams::RowReads::kDirect;
  if (env && std::string(env) == "staged") return BagParams::RowReads::kStaged;
  return BagParams::RowReads::kAuto;
}

qemb::BagI64Fn bag_fn(const KernelSet& set, GatherKernel k) { return qemb::kernel_fn<qemb::BagI64Fn>(set, k); }

// The roofline: copy each id's stored row bytes to a scratch row, discarded.
// With `scales`, also read each row's scale, which PCQ tables keep in a
// separate array: every bag kernel reads that second line per row too.
void bm_memcpy(benchmark::State& state, BagScenario s, Kind kind, bool scales) {
  const BagTable& t = table_for(s, kind);
  const size_t rb = row_bytes(kind, s.dim);
  std::vector<uint8_t> scratch(rb * 16);
  const size_t per_batch = s.batch * s.pooling;
  size_t batch = static_cast<size_t>(state.thread_index()) % t.batches;
  for (auto _ : state) {
    const int64_t* ids = t.ids.data() + batch * per_batch;
    float sum = 0.0f;
    for (size_t i = 0; i < per_batch; ++i) {
      const size_t r = static_cast<size_t>(ids[i]);
      std::memcpy(scratch.data() + (i % 16) * rb, t.bytes.get() + r * rb, rb);
      if (scales) sum += t.scales[r];
    }
    benchmark::DoNotOptimize(sum);
    benchmark::ClobberMemory();
    batch = (batch + 1) % t.batches;
  }
  set_rate(state, s);
}

// memcpy_rows' copy of n ids' stored rows to scratch rows, discarded.
void copy_rows(const BagTable& t, size_t rb, const int64_t* ids, size_t n, uint8_t* scratch) {
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(scratch + (i % 16) * rb, t.bytes.get() + static_cast<size_t>(ids[i]) * rb, rb);
  }
  benchmark::ClobberMemory();
}

// memcpy_rows plus the output a bag kernel must write: each bag's dim
// float32 values copied into a [batch, dim] array with ordinary stores (a
// memcpy). At pooling 1 the output is 4-8x the row bytes (16-32x at 4 bits):
// this shows what writing it costs a plain copy; memcpy_rows stays the
// roofline of the targets.
void bm_memcpy_out(benchmark::State& state, BagScenario s, Kind kind) {
  const BagTable& t = table_for(s, kind);
  const size_t rb = row_bytes(kind, s.dim);
  std::vector<uint8_t> scratch(rb * 16);
  std::vector<float> out(s.batch * s.dim);
  const std::vector<float> zeros(s.dim);
  const size_t per_batch = s.batch * s.pooling;
  size_t batch = static_cast<size_t>(state.thread_index()) % t.batches;
  for (auto _ : state) {
    const int64_t* ids = t.ids.data() + batch * per_batch;
    for (size_t b = 0; b < s.batch; ++b) {
      for (size_t i = b * s.pooling; i < (b + 1) * s.pooling; ++i) {
        const size_t r = static_cast<size_t>(ids[i]);
        std::memcpy(scratch.data() + (i % 16) * rb, t.bytes.get() + r * rb, rb);
      }
      std::memcpy(out.data() + b * s.dim, zeros.data(), s.dim * sizeof(float));
    }
    benchmark::ClobberMemory();
    batch = (batch + 1) % t.batches;
  }
  set_rate(state, s);
}

void bm_bag(benchmark::State& state, BagScenario s, Kind kind, KernelSet set, GatherKernel k) {
  const BagTable& t = table_for(s, kind);
  const RequantGatherParams p = bag_params(t, s, kind, qemb::kernel_row(k).act_bits);
  std::vector<float> out(s.batch * s.dim);
  const size_t per_batch = s.batch * s.pooling;
  const qemb::BagI64Fn fn = bag_fn(set, k);
  size_t batch = static_cast<size_t>(state.thread_index()) % t.batches;
  for (auto _ : state) {
    // Offsets are absolute positions: point the ids at this batch instead.
    BagParams bag;
    bag.offsets = t.offsets.data();
    bag.bags = s.batch;
    bag.out_stride = s.dim;
    bag.row_reads = row_reads();
    fn(p, t.ids.data() + batch * per_batch, bag, out.data());
    benchmark::ClobberMemory();
    batch = (batch + 1) % t.batches;
  }
  set_rate(state, s);
}

// One batch of the roofline (memcpy_rows), then one of the kernel, timed
// apart, over and over: where the memory system's speed drifts within
// seconds (a shared VM's moved 1.5-2x a minute apart), separate benchmarks
// of the two, even randomly interleaved, catch different weather, while
// batch-by-batch pairs see the same. Reports the kernel's ids/s (its time
// is the iteration's), the copy's (memcpy ids/s) and x_memcpy, the copy's
// time over the kernel's: the kernel's throughput as a fraction of the
// roofline's.
void bm_bag_paired(benchmark::State& state, BagScenario s, Kind kind, KernelSet set, GatherKernel k) {
  using clock = std::chrono::steady_clock;
  const BagTable& t = table_for(s, kind);
  const RequantGatherParams p = bag_params(t, s, kind, qemb::kernel_row(k).act_bits);
  const size_t rb = row_bytes(kind, s.dim);
  std::vector<uint8_t> scratch(rb * 16);
  std::vector<float> out(s.batch * s.dim);
  const size_t per_batch = s.batch * s.pooling;
  const qemb::BagI64Fn fn = bag_fn(set, k);
  BagParams bag;
  bag.offsets = t.offsets.data();
  bag.bags = s.batch;
  bag.out_stride = s.dim;
  bag.row_reads = row_reads();
  size_t batch = static_cast<size_t>(state.thread_index()) % t.batches;
  double copy_s = 0, kernel_s = 0;
  for (auto _ : state) {
    const auto t0 = clock::now();
    copy_rows(t, rb, t.ids.data() + batch * per_batch, per_batch, scratch.data());
    batch = (batch + 1) % t.batches;
    const auto t1 = clock::now();
    fn(p, t.ids.data() + batch * per_batch, bag, out.data());
    benchmark::ClobberMemory();
    const auto t2 = clock::now();
    batch = (batch + 1) % t.batches;
    const double kernel = std::chrono::duration<double>(t2 - t1).count();
    copy_s += std::chrono::duration<double>(t1 - t0).count();
    kernel_s += kernel;
    state.SetIterationTime(kernel);
  }
  const double ids = static_cast<double>(state.iterations() * per_batch);
  state.SetItemsProcessed(static_cast<int64_t>(ids));
  // Per thread, averaged: each thread's ids over its own time.
  state.counters["ids/s"] = benchmark::Counter(ids / kernel_s, benchmark::Counter::kAvgThreads);
  state.counters["memcpy ids/s"] = benchmark::Counter(ids / copy_s, benchmark::Counter::kAvgThreads);
  state.counters["x_memcpy"] = benchmark::Counter(copy_s / kernel_s, benchmark::Counter::kAvgThreads);
}

std::vector<KernelSet> sets_to_bench() {
  const char* env = std::getenv("QEMB_BENCH_ISA");
  if (env == nullptr || *env == '\0') return {qemb::best_kernels()};
  if (std::string(env) == "all") return qemb::all_supported_kernel_sets();
  const KernelSet* set = qemb::find_kernel_set(env);
  return set ? std::vector<KernelSet>{*set} : std::vector<KernelSet>{qemb::best_kernels()};
}

bool register_bag_benchmarks() {
  const std::vector<KernelSet> sets = sets_to_bench();
  const struct {
    const char* name;
    size_t rows;
    bool cold;
  } tables[] = {{"hot_v1M", size_t{1} << 20, false}, {"cold_v8M", size_t{8} << 20, true}, {"l2_v4K", 4096, false}};
  // The tables the list's pooled kernels read, in list order, then the
  // row-interleaved layout of each per-row one.
  std::vector<Kind> kinds;
  for (const qemb::KernelRow& row : qemb::kKernelRows) {
    if (row.form != qemb::KernelForm::kBagI64) continue;
    const Kind kind = kind_of(row.kernel, false);
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
  }
  for (size_t i = 0, n = kinds.size(); i < n; ++i)
    if (kinds[i].rows) kinds.push_back({true, kinds[i].bits, true});
  for (const auto& table : tables) {
    const bool cold = table.cold;
    for (size_t dim : {64, 128, 256}) {
      for (size_t pooling : {1, 20, 100}) {
        BagScenario s{std::string("bag/") + table.name + "/d" + std::to_string(dim) + "/L" + std::to_string(pooling),
                      table.rows, dim, pooling, 2048, !cold};
        for (const Kind& kind : kinds) {
          if (cold && !kind.rows) continue;  // 8M x 256 uint16 is 4 GiB (float32: 8 GiB)
          const std::string prefix = s.name + "/" + kind_name(kind) + "/";
          benchmark::RegisterBenchmark((prefix + "memcpy_rows").c_str(), bm_memcpy, s, kind, false)
              ->Threads(1)->Threads(2)->UseRealTime();
          benchmark::RegisterBenchmark((prefix + "memcpy_rows_out").c_str(), bm_memcpy_out, s, kind)
              ->Threads(1)->Threads(2)->UseRealTime();
          if (kind.rows && !kind.interleaved) {
            benchmark::RegisterBenchmark((prefix + "memcpy_rows_scales").c_str(), bm_memcpy, s, kind, true)
                ->Threads(1)->Threads(2)->UseRealTime();
          }
          // Every pooled kernel of the list over this table (the int64-id form).
          for (const qemb::KernelRow& row : qemb::kKernelRows) {
            if (row.form != qemb::KernelForm::kBagI64 || !(kind_of(row.kernel, kind.interleaved) == kind)) continue;
            const GatherKernel k = row.kernel;
            for (const KernelSet& set : sets) {
              benchmark::RegisterBenchmark((prefix + qemb::kernel_name(set, k)).c_str(), bm_bag, s, kind, set, k)
                  ->Threads(1)->Threads(2)->UseRealTime();
              benchmark::RegisterBenchmark((prefix + qemb::kernel_name(set, k) + "/vs_memcpy_rows").c_str(),
                                           bm_bag_paired, s, kind, set, k)
                  ->Threads(1)->Threads(2)->UseManualTime();
            }
          }
        }
      }
    }
  }
  return true;
}

const bool kRegistered = register_bag_benchmarks();

}  // namespace
