// Gather kernel throughput, each case next to its roofline: a memcpy gather
// of the same stored row bytes with the same ids, so ratios read off one run.
//
//   qemb_bench --benchmark_filter=rec_hot --benchmark_min_time=0.2
//   QEMB_BENCH_ISA=all qemb_bench ...    (every instruction set, not just the best;
//                                         or one name: QEMB_BENCH_ISA=AVX2)
//
// Counters: rows/s, and bytes/s of stored table bytes read (2 * dim per row
// for the uint16 table, dim for int8 and uint8, ceil(dim / 2) for packed
// 4-bit, ceil(dim / 4) for 2-bit, 4 * dim for the float32 table). Every
// gather of the kernel list (kernels/kernels.h) is registered from the list. Rates
// are per CPU second (Google Benchmark's default), which keeps them readable
// on a shared machine; add --benchmark_repetitions=3 for medians.
//
// Scenarios:
//   llm_v128256_d4096/batch:{1,32,2048}  an LLM token embedding; ids are fresh
//       random tokens (cold: every pass over the id pool touches ~256 MB).
//   llm_hot_v128256_d4096/batch:256  the same table, ids repeated from 32 rows.
//   rec_hot_v1M_d128/batch:16384  a recommender table, ids repeated from 2048
//       distinct rows (the working set stays in cache).
//   rec_cold_v4M_d128/batch:16384  fresh random ids over 4M rows.
// Only one table lives at a time (the largest, 4M x 128 uint16, is 1 GiB), so
// benchmarks are grouped by table and each group builds its table once.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"

namespace {

using qemb::ActivationEncoding;
using qemb::GatherKernel;
using qemb::KernelSet;
using qemb::RequantGatherParams;

// The stored table a kernel reads, from its row of the kernel list: a
// materialized table of `bits`-bit values (uint16 or uint8 activations, or
// float32), or per-row weights of `bits` bits, plain or row-interleaved
// (each row's float32 scale and then its weights, every multiple of 4 bytes).
struct TableKind {
  bool rows = false;         // per-row weights (else a materialized table)
  int bits = 16;
  bool interleaved = false;  // rows only
  bool operator==(const TableKind& o) const { return rows == o.rows && bits == o.bits && interleaved == o.interleaved; }
};

// "u16", "u8", "f32", "s4", "s8", "s2", "s4_rows", ...: the memcpy roofline's name.
std::string to_string(TableKind k) {
  if (!k.rows) return k.bits == 32 ? "f32" : "u" + std::to_string(k.bits);
  return "s" + std::to_string(k.bits) + (k.interleaved ? "_rows" : "");
}

TableKind table_kind(GatherKernel k, bool interleaved) {
  const qemb::KernelRow& row = qemb::kernel_row(k);
  if (row.family == qemb::KernelFamily::kMaterialized) return {false, row.weight_bits, false};
  return {true, row.weight_bits, interleaved};
}

struct Scenario {
  std::string name;
  size_t rows;
  size_t dim;
  size_t batch;
  size_t distinct_ids;  // 0: fresh random ids over the whole table
  size_t id_pool;       // ids cycled through, a multiple of batch
};

size_t stored_row_bytes(TableKind kind, size_t dim) {
  const size_t values = (dim * static_cast<size_t>(kind.bits) + 7) / 8;
  return kind.interleaved ? (4 + values + 3) / 4 * 4 : values;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The one live table: rebuilt when a benchmark needs a different one.
struct Table {
  std::string key;
  TableKind kind;
  size_t rows = 0, dim = 0;
  std::unique_ptr<uint8_t[]> bytes;  // storage layout
  std::vector<float> scales;
  ActivationEncoding act{1.5e-4f, 32768};    // 16-bit activations
  ActivationEncoding act8{3.9e-2f, 128, 8};  // 8-bit ones
  float max_scale = 0;

  size_t row_bytes() const { return stored_row_bytes(kind, dim); }
};

Table& table_for(const Scenario& s, TableKind kind) {
  static Table table;
  const std::string key = std::to_string(s.rows) + "x" + std::to_string(s.dim) + to_string(kind);
  if (table.key == key) return table;
  table = Table();  // free the previous one first
  table.key = key;
  table.kind = kind;
  table.rows = s.rows;
  table.dim = s.dim;
  const size_t total = s.rows * table.row_bytes();
  table.bytes.reset(new uint8_t[total + 8]);
  uint64_t state = 12345;
  for (size_t i = 0; i < total; i += 8) {
    const uint64_t r = splitmix64(state);
    std::memcpy(table.bytes.get() + i, &r, 8);
  }
  if (kind.rows && kind.bits == 8) {  // int8 weights live in [-127, 127]
    for (size_t i = 0; i < total; ++i) {
      if (table.bytes[i] == 0x80) table.bytes[i] = 0x81;
    }
  }
  if (!kind.rows && kind.bits == 32) {  // finite floats, like a weight-only table's
    float* f = reinterpret_cast<float*>(table.bytes.get());
    for (size_t i = 0; i < total / 4; ++i) f[i] = static_cast<float>(static_cast<int32_t>(i % 255) - 127) * 1e-3f;
  }
  table.scales.resize(s.rows);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-4.0f, -1.0f);
  for (float& x : table.scales) x = std::pow(10.0f, exponent(rng)) / 7.0f;
  table.max_scale = 0;
  for (float x : table.scales) table.max_scale = std::max(table.max_scale, x);
  if (kind.interleaved) {
    for (size_t r = 0; r < s.rows; ++r) std::memcpy(table.bytes.get() + r * table.row_bytes(), &table.scales[r], 4);
  }
  return table;
}

std::vector<int64_t> make_ids(const Scenario& s) {
  std::mt19937_64 rng(42);
  std::vector<int64_t> distinct;
  for (size_t i = 0; i < s.distinct_ids; ++i) distinct.push_back(static_cast<int64_t>(rng() % s.rows));
  std::vector<int64_t> ids(s.id_pool);
  for (auto& id : ids) {
    id = s.distinct_ids ? distinct[rng() % distinct.size()] : static_cast<int64_t>(rng() % s.rows);
  }
  return ids;
}

void set_counters(benchmark::State& state, const Scenario& s, size_t row_bytes) {
  const double rows = static_cast<double>(state.iterations()) * static_cast<double>(s.batch);
  state.counters["rows/s"] = benchmark::Counter(rows, benchmark::Counter::kIsRate);
  state.counters["bytes/s"] = benchmark::Counter(rows * static_cast<double>(row_bytes),
                                                 benchmark::Counter::kIsRate,
                                                 benchmark::Counter::kIs1024);
}

// Runs `call(ids, out)` over consecutive batches of the id pool.
template <typename Out, typename Call>
void run_batches(benchmark::State& state, const Scenario& s, size_t row_bytes, Call call) {
  const std::vector<int64_t> ids = make_ids(s);
  std::vector<Out> out(s.batch * s.dim + 64, Out{});
  size_t offset = 0;
  for (auto _ : state) {
    call(ids.data() + offset, out.data());
    benchmark::ClobberMemory();
    offset += s.batch;
    if (offset + s.batch > ids.size()) offset = 0;
  }
  set_counters(state, s, row_bytes);
}

// The roofline: copy the same stored row bytes for the same ids.
void bm_memcpy_rows(benchmark::State& state, Scenario s, TableKind kind) {
  const Table& t = table_for(s, kind);
  const size_t rb = t.row_bytes();
  const uint8_t* base = t.bytes.get();
  std::vector<uint8_t> out(s.batch * rb + 64);
  const std::vector<int64_t> ids = make_ids(s);
  size_t offset = 0;
  for (auto _ : state) {
    const int64_t* id = ids.data() + offset;
    for (size_t i = 0; i < s.batch; ++i) {
      std::memcpy(out.data() + i * rb, base + static_cast<size_t>(id[i]) * rb, rb);
    }
    benchmark::ClobberMemory();
    offset += s.batch;
    if (offset + s.batch > ids.size()) offset = 0;
  }
  set_counters(state, s, rb);
}

// Any gather kernel of the list, called through its function type.
void bm_kernel(benchmark::State& state, Scenario s, KernelSet set, GatherKernel k, bool rows) {
  const TableKind kind = table_kind(k, rows);
  const Table& t = table_for(s, kind);
  const size_t rb = t.row_bytes();
  const qemb::KernelRow& row = qemb::kernel_row(k);
  RequantGatherParams p;
  p.weights = t.bytes.get();
  p.row_scales = t.scales.data();
  if (rows) {
    p.weights = t.bytes.get() + 4;
    p.row_scales = reinterpret_cast<const float*>(t.bytes.get());
    p.row_stride = p.scale_stride = rb;
  }
  p.dim = s.dim;
  p.rows = s.rows;
  p.act = row.act_bits == 8 ? t.act8 : t.act;
  p.max_scale = t.max_scale;
  const uint16_t* table16 = reinterpret_cast<const uint16_t*>(t.bytes.get());
  const size_t n = s.batch, dim = s.dim;
  using qemb::kernel_fn;
  if (auto f = kernel_fn<qemb::GatherU16Fn>(set, k)) {
    run_batches<uint16_t>(state, s, rb, [&](const int64_t* id, uint16_t* o) { f(table16, dim, id, n, o); });
  } else if (auto f32 = kernel_fn<qemb::GatherU16F32Fn>(set, k)) {
    run_batches<float>(state, s, rb, [&](const int64_t* id, float* o) { f32(table16, dim, t.act, id, n, o); });
  } else if (auto h = kernel_fn<qemb::GatherU16HalfFn>(set, k)) {
    run_batches<uint16_t>(state, s, rb, [&](const int64_t* id, uint16_t* o) { h(table16, dim, t.act, id, n, o); });
  } else if (auto u16 = kernel_fn<qemb::RequantGatherU16Fn>(set, k)) {
    run_batches<uint16_t>(state, s, rb, [&](const int64_t* id, uint16_t* o) { u16(p, id, n, o); });
  } else if (auto u8 = kernel_fn<qemb::RequantGatherU8Fn>(set, k)) {
    run_batches<uint8_t>(state, s, rb, [&](const int64_t* id, uint8_t* o) { u8(p, id, n, o); });
  } else if (auto rf = kernel_fn<qemb::RequantGatherF32Fn>(set, k)) {
    run_batches<float>(state, s, rb, [&](const int64_t* id, float* o) { rf(p, id, n, o); });
  } else {  // the pooled kernels: bench/bag_bench.cc
    state.SkipWithError("not a gather kernel");
  }
}

std::vector<KernelSet> sets_to_bench() {
  const char* env = std::getenv("QEMB_BENCH_ISA");
  if (env == nullptr || *env == '\0') return {qemb::best_kernels()};
  if (std::string(env) == "all") return qemb::all_supported_kernel_sets();
  const KernelSet* set = qemb::find_kernel_set(env);
  return set ? std::vector<KernelSet>{*set} : std::vector<KernelSet>{qemb::best_kernels()};
}

bool register_kernel_benchmarks() {
  std::vector<Scenario> scenarios;
  for (size_t batch : {1, 32, 2048}) {
    scenarios.push_back({"llm_v128256_d4096/batch:" + std::to_string(batch), 128256, 4096, batch, 0,
                         batch * ((32768 + batch - 1) / batch)});
  }
  // The LLM table's rows in cache: 32 distinct ids, 256 KiB of uint16 rows.
  scenarios.push_back({"llm_hot_v128256_d4096/batch:256", 128256, 4096, 256, 32, 256 * 4});
  scenarios.push_back({"rec_hot_v1M_d128/batch:16384", 1 << 20, 128, 16384, 2048, 16384 * 4});
  scenarios.push_back({"rec_cold_v4M_d128/batch:16384", 4 << 20, 128, 16384, 0, 16384 * 64});

  const std::vector<KernelSet> sets = sets_to_bench();
  // Every gather of the kernel list (the bags: bag_bench.cc), grouped by the
  // table it reads so that each table is built once per scenario, each group
  // after its memcpy roofline; the fused native-form gathers (uint16 / uint8
  // / weight-only float32) also on the row-interleaved layout.
  std::vector<TableKind> kinds;
  for (const qemb::KernelRow& row : qemb::kKernelRows) {
    if (row.form == qemb::KernelForm::kBagI32 || row.form == qemb::KernelForm::kBagI64) continue;
    const TableKind kind = table_kind(row.kernel, false);
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
  }
  for (const Scenario& s : scenarios) {
    for (const TableKind& kind : kinds) {
      benchmark::RegisterBenchmark((s.name + "/memcpy_rows_" + to_string(kind)).c_str(), bm_memcpy_rows, s, kind);
      for (const KernelSet& set : sets) {
        for (const qemb::KernelRow& row : qemb::kKernelRows) {
          if (row.form == qemb::KernelForm::kBagI32 || row.form == qemb::KernelForm::kBagI64) continue;
          if (!(table_kind(row.kernel, false) == kind)) continue;
          benchmark::RegisterBenchmark((s.name + "/" + qemb::kernel_name(set, row.kernel)).c_str(), bm_kernel, s,
                                       set, row.kernel, false);
        }
      }
    }
    for (const TableKind& plain : kinds) {
      if (!plain.rows) continue;
      const TableKind kind{true, plain.bits, true};
      benchmark::RegisterBenchmark((s.name + "/memcpy_rows_" + to_string(kind)).c_str(), bm_memcpy_rows, s, kind);
      for (const KernelSet& set : sets) {
        for (const qemb::KernelRow& row : qemb::kKernelRows) {
          const bool native = row.form == (row.act_bits == 16   ? qemb::KernelForm::kU16
                                           : row.act_bits == 8 ? qemb::KernelForm::kU8
                                                               : qemb::KernelForm::kF32);
          if (!native || row.family == qemb::KernelFamily::kLegacy || !(table_kind(row.kernel, false) == plain))
            continue;
          benchmark::RegisterBenchmark((s.name + "/" + qemb::kernel_name(set, row.kernel) + "/rows").c_str(),
                                       bm_kernel, s, set, row.kernel, true);
        }
      }
    }
  }
  return true;
}

const bool kRegistered = register_kernel_benchmarks();

}  // namespace

// qemb_bench's main (other bench/*.cc files only register benchmarks).
BENCHMARK_MAIN();
