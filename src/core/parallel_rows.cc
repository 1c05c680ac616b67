#include "core/parallel_rows.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace qemb {

Status parallel_rows(int64_t rows, int64_t chunk, int threads, const char* phase, const ProgressFn& progress,
                     const std::function<Status(int, int64_t, int64_t)>& fn,
                     const std::function<void(int64_t, const Status&)>& on_failure) {
  const int64_t chunks = (rows + chunk - 1) / chunk;
  std::atomic<int64_t> next{0}, done_rows{0};
  std::mutex mu;
  std::condition_variable cv;
  int64_t failed_chunk = INT64_MAX;
  Status failure;
  int running = 0;
  auto worker = [&](int worker_index) {
    for (int64_t c; (c = next.fetch_add(1)) < chunks;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (c > failed_chunk) break;
      }
      const int64_t begin = c * chunk, end = std::min(rows, begin + chunk);
      Status s = fn(worker_index, begin, end);
      if (!s.ok()) {
        if (on_failure) on_failure(begin, s);
        std::lock_guard<std::mutex> lock(mu);
        if (c < failed_chunk) {
          failed_chunk = c;
          failure = s;
        }
      }
      done_rows += end - begin;
    }
    std::lock_guard<std::mutex> lock(mu);
    --running;
    cv.notify_all();
  };
  const int n = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, chunks)));
  if (progress) progress(phase, 0, rows);  // the phase starts now: rates count from here
  std::vector<std::thread> pool;
  for (int t = 0; t < n; ++t) {
    try {
      std::lock_guard<std::mutex> lock(mu);
      pool.emplace_back(worker, t);
      ++running;
    } catch (const std::system_error&) {
      break;  // out of threads: the ones that started take every chunk
    }
  }
  if (pool.empty()) {
    running = 1;
    worker(0);  // not even one: the calling thread does the work
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0) {
      cv.wait_for(lock, std::chrono::milliseconds(200));
      if (progress) {
        lock.unlock();
        progress(phase, done_rows.load(), rows);
        lock.lock();
      }
    }
  }
  for (auto& t : pool) t.join();
  if (progress) progress(phase, done_rows.load(), rows);
  return failure;
}

int default_threads(int requested) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return requested > 0 ? std::min(requested, kMaxThreadsPerCore * cores) : cores;
}

}  // namespace qemb
