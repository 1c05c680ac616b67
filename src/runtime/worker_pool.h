// A small thread pool that starts its workers only when a batch needs them
// and survives a failed thread creation: the work then runs on the threads
// that did start (at least the caller), instead of waiting forever for a
// worker that never came (what pthreadpool_create does when pthread_create
// fails).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace qemb {

// More threads than this many per core only add switching and memory.
inline constexpr int kMaxThreadsPerCore = 4;

// `requested` threads (0 = one per core), capped at kMaxThreadsPerCore a core.
int effective_threads(int requested);

class WorkerPool {
 public:
  using Task = void (*)(void* context, size_t begin, size_t count);

  // Up to `threads` threads run each call, the calling thread included.
  explicit WorkerPool(int threads) : threads_(threads < 1 ? 1 : threads) {}
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs task(context, begin, count) over [0, n) in tiles of `tile` items and
  // returns when all are done. Calls from several threads take turns.
  void parallelize(size_t n, size_t tile, Task task, void* context);

  // Workers started so far (the calling thread not counted).
  size_t workers() const;

 private:
  void ensure_workers(size_t wanted);
  void worker_loop(uint64_t seen);
  void run_tiles();

  const int threads_;
  std::mutex call_mu_;  // one parallelize() at a time
  mutable std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::vector<std::thread> workers_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  size_t pending_ = 0;  // workers still in the current generation
  // The current job; written under mu_ before generation_ moves.
  Task task_ = nullptr;
  void* context_ = nullptr;
  size_t n_ = 0, tile_ = 1, tiles_ = 0;
  std::atomic<size_t> next_tile_{0};
};

}  // namespace qemb
