// A small thread pool that starts its workers only when a batch needs them
// and survives a failed thread creation: the work then runs on the threads
// that did start (at least the caller), instead of waiting forever for a
// worker that never came (what pthreadpool_create does when pthread_create
// fails).
//
// Handing a call to the workers and waiting for them spins briefly before it
// sleeps, as pthreadpool does: on a VM a condition-variable wake-up costs tens
// of microseconds, as much as a worker's share of a 2048-row lookup. A call
// waits only for the tiles that workers took, never for a worker that has not
// woken up yet (the caller then runs its tiles): on a loaded machine a
// descheduled worker does not hold every call up.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace qemb {

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
  mutable std::mutex mu_;  // guards workers_ and the sleeping side of the flags below
  std::condition_variable work_cv_, done_cv_;
  std::vector<std::thread> workers_;
  // The current job; rewritten only while generation_ is odd and no worker
  // is inside a job (active_ == 0).
  Task task_ = nullptr;
  void* context_ = nullptr;
  size_t n_ = 0, tile_ = 1, tiles_ = 0;
  // Even: a job is published (or none yet); odd: the caller rewrites the job.
  // Each hot counter sits on its own cache line.
  alignas(64) std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleeping_workers_{0};
  alignas(64) std::atomic<int> active_{0};  // workers between entering and leaving a job
  alignas(64) std::atomic<size_t> next_tile_{0};
  alignas(64) std::atomic<size_t> done_tiles_{0};
  std::atomic<bool> caller_sleeping_{false};
};

}  // namespace qemb
