// The compiler's parallel pass over the rows of a table, shared with eval:
// fixed row chunks on a few threads, a progress report, and a row source over
// a memory-mapped checkpoint table that drops the pages it has consumed.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "qemb/compiler.h"
#include "qemb/checkpoint.h"

namespace qemb {

using ProgressFn = std::function<void(const char* phase, int64_t rows_done, int64_t rows_total)>;

// Runs fn(worker, begin, end) over the chunks [c * chunk, min(rows, (c + 1) *
// chunk)) on up to `threads` workers (worker in [0, threads)) while the
// calling thread reports progress. The chunks depend only on `rows` and
// `chunk`, never on the thread count. Returns the error of the lowest failing
// chunk, so the message does not depend on thread timing. `on_failure` runs on
// the failing worker (e.g. to release writers of later chunks that wait).
Status parallel_rows(int64_t rows, int64_t chunk, int threads, const char* phase, const ProgressFn& progress,
                     const std::function<Status(int, int64_t, int64_t)>& fn,
                     const std::function<void(int64_t, const Status&)>& on_failure = nullptr);

// The activation encoding observed on the calibration rows only (the error
// names a token outside the table's rows).
Result<ActivationEncoding> calibration_encoding_of(const RowSource& src, const std::vector<int64_t>& tokens);

// `requested` threads (at most 4 per core), or one per core when it is 0 or less.
int default_threads(int requested);

// About 1 MiB of float rows per chunk (8 to 4096 rows): a chunk's output stays
// in cache, and chunks are many enough to share among threads.
inline int64_t row_chunk(int64_t dim) { return std::clamp<int64_t>((int64_t{1} << 20) / (dim * 4), 8, 4096); }

// A float32 [rows, dim] table already in memory, read in place.
class ArrayRows final : public RowSource {
 public:
  ArrayRows(const float* table, int64_t rows, int64_t dim) : table_(table), rows_(rows), dim_(dim) {}
  int64_t rows() const override { return rows_; }
  int64_t dim() const override { return dim_; }
  Status read(int64_t begin, int64_t end, float* out) const override {
    std::memcpy(out, table_ + begin * dim_, static_cast<size_t>((end - begin) * dim_) * sizeof(float));
    return Status::Ok();
  }

 private:
  const float* table_;
  int64_t rows_, dim_;
};

// Rows of a memory-mapped checkpoint table. Rows already processed are
// dropped from memory so a multi-GiB table never becomes resident whole.
class CheckpointRows final : public RowSource {
 public:
  explicit CheckpointRows(const CheckpointTable& table) : table_(table) {}
  int64_t rows() const override { return table_.rows(); }
  int64_t dim() const override { return table_.dim(); }
  Status read(int64_t begin, int64_t end, float* out) const override { return table_.read_rows(begin, end, out); }
  void release(int64_t begin, int64_t end) const override { table_.release(begin, end); }

 private:
  const CheckpointTable& table_;
};

// Releases consumed input in windows of about 8 MiB of float rows, each once,
// when the last of its rows is done (whichever worker finishes it): a madvise
// per small chunk would split the huge mappings the page cache may use and
// flush TLBs on every core each time, and a window released while another
// worker still reads it would fault back in and stay.
class ReleaseWindows {
 public:
  ReleaseWindows(const RowSource& src, int64_t chunk)
      : src_(src),
        window_(std::max<int64_t>(chunk, (int64_t{8} << 20) / (std::max<int64_t>(src.dim(), 1) * 4))),
        left_(static_cast<size_t>((src.rows() + window_ - 1) / window_)) {
    for (size_t w = 0; w < left_.size(); ++w) {
      const int64_t begin = static_cast<int64_t>(w) * window_;
      left_[w].store(std::min(src.rows(), begin + window_) - begin, std::memory_order_relaxed);
    }
  }
  void done(int64_t begin, int64_t end) const {
    for (int64_t w = begin / window_; w * window_ < end; ++w) {
      const int64_t lo = std::max(begin, w * window_), hi = std::min(end, (w + 1) * window_);
      if (left_[static_cast<size_t>(w)].fetch_sub(hi - lo, std::memory_order_acq_rel) == hi - lo)
        src_.release(w * window_, std::min(src_.rows(), (w + 1) * window_));
    }
  }

 private:
  const RowSource& src_;
  int64_t window_;
  mutable std::vector<std::atomic<int64_t>> left_;  // rows of each window not yet done
};

}  // namespace qemb
