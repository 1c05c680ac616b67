// The compile side's one way to spread rows over threads (compile, the fold
// pass and eval): fixed row chunks on a few threads while the calling thread
// reports progress. The runtime keeps its own pool (runtime/worker_pool.h)
// for short calls on warm threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>

#include "qemb/status.h"

namespace qemb {

using ProgressFn = std::function<void(const char* phase, int64_t rows_done, int64_t rows_total)>;

// Runs fn(worker, begin, end) over the chunks [c * chunk, min(rows, (c + 1) *
// chunk)) on up to `threads` workers (worker in [0, threads)) while the
// calling thread reports progress (when `progress` is set). The chunks depend
// only on `rows` and `chunk`, never on the thread count. Returns the error of
// the lowest failing chunk, so the message does not depend on thread timing.
// `on_failure` runs on the failing worker (e.g. to release writers of later
// chunks that wait).
Status parallel_rows(int64_t rows, int64_t chunk, int threads, const char* phase, const ProgressFn& progress,
                     const std::function<Status(int, int64_t, int64_t)>& fn,
                     const std::function<void(int64_t, const Status&)>& on_failure = nullptr);

// More threads than this many per core only add switching and memory.
inline constexpr int kMaxThreadsPerCore = 4;

// `requested` threads (at most kMaxThreadsPerCore a core), or one per core
// when it is 0 or less. Compile, eval and the runtime all size their threads
// with it.
int default_threads(int requested);

// About 1 MiB of float rows per chunk (8 to 4096 rows): a chunk's output stays
// in cache, and chunks are many enough to share among threads.
inline int64_t row_chunk(int64_t dim) { return std::clamp<int64_t>((int64_t{1} << 20) / (dim * 4), 8, 4096); }

}  // namespace qemb
