#include "runtime/worker_pool.h"

#include <algorithm>
#include <chrono>
#include <system_error>

namespace qemb {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Long enough to cover the gap between back-to-back calls and a worker's last
// tile, short enough that an idle pool gives its cores back at once.
constexpr auto kSpin = std::chrono::microseconds(50);
// Past this, spinning yields between checks: on a loaded machine the thread
// it waits for may be queued on this very core.
constexpr auto kPauseOnly = std::chrono::microseconds(5);

// Spins until done() or kSpin has passed; true if done().
template <typename Done>
bool spin_until(Done done) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    const auto spent = std::chrono::steady_clock::now() - start;
    if (spent >= kSpin) return done();
    if (spent >= kPauseOnly) std::this_thread::yield();
  }
}

}  // namespace

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
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
    // Only this thread (holding call_mu_) moves generation_.
    const uint64_t seen = generation_.load(std::memory_order_relaxed);
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
    if (done_tiles_.fetch_add(1) + 1 == tiles_ && caller_sleeping_.load()) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

// The flags pair as in Dekker's algorithm (all sequentially consistent): one
// side announces itself, then checks the other's flag; the other side writes
// its flag, then checks the first one's. One of the two always sees the
// other. So no wake-up is lost and the waker takes the mutex only when
// someone sleeps; and a worker that enters a job (active_) either sees the
// caller start rewriting it (odd generation_) and backs out, or is seen and
// waited for before the job is rewritten.
void WorkerPool::worker_loop(uint64_t seen) {
  for (;;) {
    auto published = [&] {
      const uint64_t g = generation_.load();
      return (g != seen && g % 2 == 0) || stop_.load();
    };
    if (!spin_until(published)) {
      std::unique_lock<std::mutex> lock(mu_);
      sleeping_workers_.fetch_add(1);
      work_cv_.wait(lock, published);
      sleeping_workers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = generation_.load();
    if (seen % 2 != 0) continue;  // already being rewritten: wait for the next job
    active_.fetch_add(1);
    if (generation_.load() == seen) run_tiles();  // else the job is being rewritten: wait for the next
    active_.fetch_sub(1);
  }
}

void WorkerPool::parallelize(size_t n, size_t tile, Task task, void* context) {
  if (n == 0) return;
  tile = std::max<size_t>(tile, 1);
  const size_t tiles = n / tile + (n % tile != 0);
  std::lock_guard<std::mutex> call(call_mu_);
  ensure_workers(std::min(static_cast<size_t>(threads_ - 1), tiles - 1));
  size_t workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers = workers_.size();
  }
  if (workers == 0) {
    for (size_t t = 0; t < tiles; ++t) task(context, t * tile, std::min(tile, n - t * tile));
    return;
  }
  // Workers still inside the previous job only find its tiles gone; wait for
  // them to leave before the job's fields change under them.
  generation_.fetch_add(1);
  auto left = [&] { return active_.load() == 0; };
  if (!spin_until(left)) {
    while (!left()) std::this_thread::yield();  // a worker descheduled between two instructions
  }
  task_ = task;
  context_ = context;
  n_ = n;
  tile_ = tile;
  tiles_ = tiles;
  next_tile_.store(0);
  done_tiles_.store(0);
  generation_.fetch_add(1);  // publishes the job
  if (sleeping_workers_.load() > 0) {
    // Taking the mutex orders this notify after a sleeper's last check.
    { std::lock_guard<std::mutex> lock(mu_); }
    work_cv_.notify_all();
  }
  run_tiles();
  auto done = [&] { return done_tiles_.load() == tiles; };
  if (!spin_until(done)) {
    std::unique_lock<std::mutex> lock(mu_);
    caller_sleeping_.store(true);
    done_cv_.wait(lock, done);
    caller_sleeping_.store(false);
  }
}

}  // namespace qemb
