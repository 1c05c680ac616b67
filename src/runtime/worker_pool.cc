#include "runtime/worker_pool.h"

#include <algorithm>
#include <limits>
#include <system_error>

namespace qemb {

int effective_threads(int requested) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (requested <= 0) return cores;
  return std::min(requested, kMaxThreadsPerCore * cores);
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

size_t WorkerPool::workers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return workers_.size();
}

void WorkerPool::ensure_workers(size_t wanted) {
  while (workers_.size() < wanted) {
    uint64_t seen;
    {
      std::lock_guard<std::mutex> lock(mu_);
      seen = generation_;
    }
    try {
      std::thread t(&WorkerPool::worker_loop, this, seen);
      std::lock_guard<std::mutex> lock(mu_);
      workers_.push_back(std::move(t));
    } catch (const std::system_error&) {
      return;  // out of threads or memory: carry on with those we have
    }
  }
}

void WorkerPool::run_tiles() {
  for (;;) {
    const size_t t = next_tile_.fetch_add(1, std::memory_order_relaxed);
    if (t >= tiles_) return;
    const size_t begin = t * tile_;
    task_(context_, begin, std::min(tile_, n_ - begin));
  }
}

void WorkerPool::worker_loop(uint64_t seen) {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_tiles();
    std::lock_guard<std::mutex> lock(mu_);
    if (--pending_ == 0) done_cv_.notify_one();
  }
}

void WorkerPool::parallelize(size_t n, size_t tile, Task task, void* context) {
  if (n == 0) return;
  tile = std::max<size_t>(tile, 1);
  const size_t tiles = n / tile + (n % tile != 0);
  std::lock_guard<std::mutex> call(call_mu_);
  ensure_workers(std::min(static_cast<size_t>(threads_ - 1), tiles - 1));
  {
    std::lock_guard<std::mutex> lock(mu_);
    task_ = task;
    context_ = context;
    n_ = n;
    tile_ = tile;
    tiles_ = tiles;
    next_tile_.store(0, std::memory_order_relaxed);
    pending_ = workers_.size();
    ++generation_;
  }
  work_cv_.notify_all();
  run_tiles();
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
}

}  // namespace qemb
