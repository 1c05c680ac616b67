// Concurrency stress: 8 threads x 100k lookup calls on one loaded runtime,
// every result compared with rows precomputed from the artifact's own bytes.
// Built and run under ThreadSanitizer by scripts/ci-sanitizers.sh.
//
// The artifacts are written by hand from the IR (the runtime layer cannot
// compile checkpoints): the folded optimized graph (one Gather over a uint16
// table) and the fused graph (one RequantGather over packed 4-bit weights).
//
// QEMB_STRESS_THREADS and QEMB_STRESS_LOOKUPS (calls per thread) override the
// defaults, e.g. for a quick local run; CI uses the defaults.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "artifact/artifact_io.h"
#include "core/ir.h"
#include "qemb/quantize.h"
#include "qemb/runtime.h"
#include "support/test_util.h"

namespace qemb {
namespace {

using qemb::testing::Rng;
using qemb::testing::TempDir;

int env_count(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  const int n = std::atoi(v);
  return n > 0 ? n : fallback;
}

const int kThreads = env_count("QEMB_STRESS_THREADS", 8);
const int kLookupsPerThread = env_count("QEMB_STRESS_LOOKUPS", 100000);

constexpr int64_t kVocab = 1000;
constexpr int kMaxBatch = 4;

const ActivationEncoding kAct{0.00137f, 20000};

Tensor indices_tensor() {
  Tensor t;
  t.name = "emb_indices";
  t.kind = TensorKind::kAppWrite;
  t.dtype = DataType::kInt32;
  t.shape = {0};
  return t;
}

Tensor output_tensor(int64_t dim) {
  Tensor t;
  t.name = "emb";
  t.kind = TensorKind::kAppRead;
  t.dtype = DataType::kUFixedPoint16;
  t.shape = {0, dim};
  t.encoding = Encoding::per_tensor(kAct.scale, kAct.offset(), 16);
  return t;
}

Op make_op(OpType type, const std::string& table) {
  Op op;
  op.type = type;
  op.name = "emb";
  op.inputs = {table, "emb_indices"};
  op.outputs = {"emb"};
  return op;
}

// An artifact on disk and the uint16 rows every lookup must return.
struct StressArtifact {
  std::string path;
  int64_t dim = 0;
  std::vector<uint16_t> expected;  // kVocab x dim
};

// Writes the one-op graph `type`(table, ids) -> output as `a.path`.
void write_graph(const StressArtifact& a, Tensor table, OpType type, const char* note) {
  Graph g;
  const std::string table_name = table.name;
  g.add_tensor(std::move(table));
  g.add_tensor(indices_tensor());
  g.add_tensor(output_tensor(a.dim));
  g.add_op(make_op(type, table_name));
  EXPECT_TRUE(g.check().ok());
  Status s = write_artifact(a.path, g, {{"note", note}});
  EXPECT_TRUE(s.ok()) << s.message();
}

// The folded optimized graph: Gather over a STATIC [V, D] uint16 table.
StressArtifact materialized_artifact(const TempDir& dir) {
  StressArtifact a;
  a.path = dir.file("materialized.qemb");
  a.dim = 48;
  Rng rng(11);
  a.expected.resize(static_cast<size_t>(kVocab * a.dim));
  for (auto& v : a.expected) v = static_cast<uint16_t>(rng.next());
  std::vector<uint8_t> bytes(a.expected.size() * 2);
  for (size_t i = 0; i < a.expected.size(); ++i) {  // little-endian storage
    bytes[2 * i] = static_cast<uint8_t>(a.expected[i]);
    bytes[2 * i + 1] = static_cast<uint8_t>(a.expected[i] >> 8);
  }
  Tensor table = output_tensor(a.dim);
  table.name = "emb_convert";
  table.kind = TensorKind::kStatic;
  table.shape = {kVocab, a.dim};
  table.data = std::make_shared<OwnedBuffer>(std::move(bytes));
  write_graph(a, std::move(table), OpType::kGather, "materialized stress artifact");
  return a;
}

// The fused graph: RequantGather over per-row 4-bit weights, odd width so
// every row ends in a padding nibble. Expected rows follow docs/numeric-contract.md ("The two lowerings"):
// optimized_output(s_r, q, act).
StressArtifact requant_artifact(const TempDir& dir) {
  StressArtifact a;
  a.path = dir.file("requant_s4.qemb");
  a.dim = 47;
  Rng rng(12);
  const size_t row_bytes = row_storage_bytes(DataType::kSFixedPoint8, 4, a.dim);
  std::vector<uint8_t> packed(row_bytes * kVocab, 0);
  std::vector<float> scales(kVocab);
  a.expected.resize(static_cast<size_t>(kVocab * a.dim));
  for (int64_t r = 0; r < kVocab; ++r) {
    scales[r] = 0.0005f + 0.004f * rng.uniform();
    for (int64_t j = 0; j < a.dim; ++j) {
      const int8_t q = static_cast<int8_t>(static_cast<int>(rng.next() % 15) - 7);
      pack_int4(packed.data() + r * row_bytes, j, q);
      a.expected[r * a.dim + j] = optimized_output(scales[r], q, kAct);
    }
  }
  Tensor w;
  w.name = "emb_weight";
  w.kind = TensorKind::kStatic;
  w.dtype = DataType::kSFixedPoint8;
  w.shape = {kVocab, a.dim};
  w.encoding = Encoding::per_axis(0, scales, std::vector<int32_t>(kVocab, 0), 4);
  w.data = std::make_shared<OwnedBuffer>(std::move(packed));
  write_graph(a, std::move(w), OpType::kRequantGather, "fused 4-bit stress artifact");
  return a;
}

struct ThreadReport {
  int64_t calls = 0, ids = 0, checked_errors = 0;
  std::string first_failure;  // empty when every result matched
};

// One caller: kLookupsPerThread calls of 1..kMaxBatch random ids, alternating
// int64 and int32 ids and, every 64th call, the dequantized output; every
// 501st call holds an id out of range and must fail without writing.
void hammer(const EmbeddingRuntime& rt, const StressArtifact& a, uint64_t seed, ThreadReport& report) {
  Rng rng(seed);
  const size_t dim = static_cast<size_t>(a.dim);
  std::vector<uint16_t> out(kMaxBatch * dim);
  std::vector<float> out_f(kMaxBatch * dim);
  int64_t ids64[kMaxBatch];
  int32_t ids32[kMaxBatch];
  auto fail = [&](const std::string& what) {
    if (report.first_failure.empty())
      report.first_failure = "call " + std::to_string(report.calls) + ": " + what;
  };
  for (int call = 0; call < kLookupsPerThread && report.first_failure.empty(); ++call, ++report.calls) {
    const size_t n = 1 + rng.next() % kMaxBatch;
    for (size_t i = 0; i < n; ++i) {
      ids64[i] = static_cast<int64_t>(rng.next() % kVocab);
      ids32[i] = static_cast<int32_t>(ids64[i]);
    }
    if (call % 501 == 500) {
      const size_t bad = rng.next() % n;
      ids64[bad] = (call & 1) ? kVocab : -1;
      ids32[bad] = static_cast<int32_t>(ids64[bad]);
      std::fill(out.begin(), out.end(), uint16_t{0xBEEF});
      Status s = (call & 2) ? rt.lookup(std::span<const int64_t>(ids64, n), out.data())
                            : rt.lookup(std::span<const int32_t>(ids32, n), out.data());
      const std::string want = "token id " + std::to_string(ids64[bad]) + " at position " + std::to_string(bad);
      if (s.code() != ErrorCode::kOutOfRange || s.message().find(want) == std::string::npos)
        fail("bad id gave '" + s.message() + "', expected '" + want + "'");
      for (uint16_t v : out)
        if (v != 0xBEEF) fail("a failed lookup wrote output");
      ++report.checked_errors;
      continue;
    }
    report.ids += static_cast<int64_t>(n);
    if (call % 64 == 63) {
      Status s = rt.lookup_dequantized(std::span<const int64_t>(ids64, n), out_f.data());
      if (!s.ok()) fail(s.message());
      for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < dim; ++j) {
          const float want = dequantize_activation(a.expected[ids64[i] * dim + j], kAct);
          if (out_f[i * dim + j] != want)
            fail("dequantized row " + std::to_string(ids64[i]) + " column " + std::to_string(j) + " is " +
                 std::to_string(out_f[i * dim + j]) + ", expected " + std::to_string(want));
        }
      continue;
    }
    Status s = (call & 1) ? rt.lookup(std::span<const int32_t>(ids32, n), out.data())
                          : rt.lookup(std::span<const int64_t>(ids64, n), out.data());
    if (!s.ok()) fail(s.message());
    for (size_t i = 0; i < n; ++i)
      if (std::memcmp(out.data() + i * dim, a.expected.data() + ids64[i] * dim, dim * 2) != 0)
        fail("row " + std::to_string(ids64[i]) + " at position " + std::to_string(i) + " differs");
  }
}

void run_stress(const StressArtifact& a, const char* expected_kernel) {
  auto loaded = EmbeddingRuntime::load(a.path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const EmbeddingRuntime& rt = **loaded;
  ASSERT_EQ(rt.vocab_size(), kVocab);
  ASSERT_EQ(rt.dim(), a.dim);
  ASSERT_EQ(rt.kernel_name().rfind(expected_kernel, 0), 0u) << rt.kernel_name();

  std::vector<ThreadReport> reports(static_cast<size_t>(kThreads));
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Start together so the calls really overlap.
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      hammer(rt, a, 1000 + static_cast<uint64_t>(t), reports[static_cast<size_t>(t)]);
    });
  }
  for (auto& th : threads) th.join();

  int64_t calls = 0, ids = 0, errors = 0;
  for (int t = 0; t < kThreads; ++t) {
    const ThreadReport& r = reports[static_cast<size_t>(t)];
    EXPECT_EQ(r.first_failure, "") << "thread " << t;
    EXPECT_EQ(r.calls, kLookupsPerThread) << "thread " << t;
    calls += r.calls, ids += r.ids, errors += r.checked_errors;
  }
  EXPECT_EQ(calls, int64_t{kThreads} * kLookupsPerThread);
  EXPECT_EQ(errors, int64_t{kThreads} * (kLookupsPerThread / 501));
  std::printf("%d threads x %d lookups on %s: %lld ids checked, %lld refused ids checked\n", kThreads,
              kLookupsPerThread, rt.kernel_name().c_str(), static_cast<long long>(ids),
              static_cast<long long>(errors));
}

TEST(RuntimeStress, MaterializedTableServesConcurrentCallers) {
  TempDir dir;
  StressArtifact a = materialized_artifact(dir);
  ASSERT_FALSE(::testing::Test::HasFailure());
  run_stress(a, "gather_u16");
}

TEST(RuntimeStress, FusedFourBitTableServesConcurrentCallers) {
  TempDir dir;
  StressArtifact a = requant_artifact(dir);
  ASSERT_FALSE(::testing::Test::HasFailure());
  run_stress(a, "requant_gather_s4_u16");
}

// Large batches take the runtime's own thread pool; several callers then
// share that pool at once.
TEST(RuntimeStress, ThreadPoolIsSharedByConcurrentCallers) {
  TempDir dir;
  StressArtifact a = materialized_artifact(dir);
  ASSERT_FALSE(::testing::Test::HasFailure());
  RuntimeOptions options;
  options.threads = 4;
  auto loaded = EmbeddingRuntime::load(a.path, options);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const EmbeddingRuntime& rt = **loaded;
  ASSERT_EQ(rt.threads(), 4);
  constexpr size_t kBatch = 4096;  // 4096 x 48 values: above the runtime's threading threshold
  constexpr int kCallers = 4, kCallsEach = 25;
  const size_t dim = static_cast<size_t>(a.dim);
  std::vector<std::string> failures(kCallers);
  std::vector<std::thread> threads;
  for (int t = 0; t < kCallers; ++t) {
    threads.emplace_back([&, t] {
      Rng rng(77 + static_cast<uint64_t>(t));
      std::vector<int64_t> ids(kBatch);
      std::vector<uint16_t> out(kBatch * dim);
      for (int c = 0; c < kCallsEach && failures[t].empty(); ++c) {
        for (auto& id : ids) id = static_cast<int64_t>(rng.next() % kVocab);
        Status s = rt.lookup(ids, out.data());
        if (!s.ok()) failures[t] = s.message();
        for (size_t i = 0; i < kBatch && failures[t].empty(); ++i)
          if (std::memcmp(out.data() + i * dim, a.expected.data() + ids[i] * dim, dim * 2) != 0)
            failures[t] = "call " + std::to_string(c) + ": row " + std::to_string(ids[i]) + " at position " +
                          std::to_string(i) + " differs";
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kCallers; ++t) EXPECT_EQ(failures[t], "") << "caller " << t;
}

}  // namespace
}  // namespace qemb
