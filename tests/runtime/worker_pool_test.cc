// The runtime's thread pool: every item exactly once, threads started only
// when a batch needs them and capped at a multiple of the cores, and a failed
// thread creation survived (pthreadpool, used before, waited forever for the
// worker that never started: run and bench hung).
#include <dirent.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "artifact/artifact_io.h"
#include "core/ir.h"
#include "qemb/runtime.h"
#include "core/parallel_rows.h"
#include "runtime/worker_pool.h"
#include "support/address_limit.h"
#include "support/test_util.h"

namespace qemb {
namespace {

using qemb::testing::TempDir;

constexpr int64_t kVocab = 256, kDim = 64;

int thread_count() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

// A materialized table whose row r holds r * 64 + column.
std::string write_table_artifact(const TempDir& dir) {
  const Encoding act = Encoding::per_tensor(0.01f, 0, 16);
  std::vector<uint8_t> data(kVocab * kDim * 2);
  for (int64_t i = 0; i < kVocab * kDim; ++i) {
    data[2 * i] = static_cast<uint8_t>(i & 0xff);
    data[2 * i + 1] = static_cast<uint8_t>(i >> 8);
  }
  Graph g;
  g.add_tensor({"table", TensorKind::kStatic, DataType::kUFixedPoint16, {kVocab, kDim}, act,
                std::make_shared<OwnedBuffer>(std::move(data))});
  g.add_tensor({"ids", TensorKind::kAppWrite, DataType::kInt32, {0}, Encoding{}, nullptr});
  g.add_tensor({"out", TensorKind::kAppRead, DataType::kUFixedPoint16, {0, kDim}, act, nullptr});
  g.add_op({OpType::kGather, "out", {"table", "ids"}, {"out"}, 0, std::nullopt});
  const std::string path = dir.file("table.qemb");
  EXPECT_TRUE(write_artifact(path, g, nlohmann::json::object()).ok());
  return path;
}

// Large enough that the runtime splits it over its threads.
bool big_lookup_is_right(const EmbeddingRuntime& rt) {
  std::vector<int64_t> ids(8192);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 37) % kVocab);
  std::vector<uint16_t> out(ids.size() * kDim);
  if (!rt.lookup(ids, out.data()).ok()) return false;
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t j = 0; j < kDim; ++j)
      if (out[i * kDim + j] != static_cast<uint16_t>(ids[i] * kDim + j)) return false;
  return true;
}

TEST(WorkerPool, RunsEveryItemOnceWhateverTheTiling) {
  WorkerPool pool(4);
  for (size_t n : {1u, 7u, 64u, 1000u}) {
    for (size_t tile : {0u, 1u, 3u, 64u, 5000u}) {
      std::vector<std::atomic<int>> hits(n);
      struct Ctx {
        std::vector<std::atomic<int>>* hits;
      } ctx{&hits};
      pool.parallelize(n, tile, [](void* c, size_t begin, size_t count) {
        for (size_t i = begin; i < begin + count; ++i) (*static_cast<Ctx*>(c)->hits)[i]++;
      }, &ctx);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " tile=" << tile << " i=" << i;
    }
  }
  EXPECT_LE(pool.workers(), 3u);
}

TEST(WorkerPool, ThreadsAreCappedAtAMultipleOfTheCores) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(default_threads(0), cores);
  EXPECT_EQ(default_threads(1), 1);
  EXPECT_EQ(default_threads(100000), kMaxThreadsPerCore * cores);
}

TEST(WorkerPool, RuntimeStartsNoThreadUntilABatchNeedsThem) {
  // --threads 100000 used to start every thread at load, even for one id.
  TempDir dir;
  const std::string path = write_table_artifact(dir);
  const int before = thread_count();
  RuntimeOptions options;
  options.threads = 100000;
  auto rt = EmbeddingRuntime::load(path, options);
  ASSERT_TRUE(rt.ok()) << rt.error().message;
  EXPECT_EQ((*rt)->threads(), default_threads(100000));
  std::vector<uint16_t> one(kDim);
  ASSERT_TRUE((*rt)->lookup(std::vector<int64_t>{5}, one.data()).ok());
  EXPECT_EQ(one[3], 5 * kDim + 3);
  EXPECT_EQ(thread_count(), before);
  EXPECT_TRUE(big_lookup_is_right(**rt));
  EXPECT_GT(thread_count(), before);
}

TEST(WorkerPool, LookupsFinishWhenThreadsCannotBeStarted) {
#ifdef QEMB_SANITIZED
  GTEST_SKIP() << "the sanitizers' own address-space reservations defeat RLIMIT_AS";
#else
  TempDir dir;
  const std::string path = write_table_artifact(dir);
  // Room for the artifact and a little heap, not for two 8 MiB thread stacks.
  const int status = qemb::testing::run_with_address_limit(12 << 20, 30, [&] {
    RuntimeOptions options;
    options.threads = 8;
    auto rt = EmbeddingRuntime::load(path, options);
    if (!rt.ok()) return 3;
    return big_lookup_is_right(**rt) ? 0 : 6;
  });
  ASSERT_NE(status, -1) << "fork failed";
  ASSERT_TRUE(WIFEXITED(status)) << "the lookup hung or crashed (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
#endif
}

}  // namespace
}  // namespace qemb
