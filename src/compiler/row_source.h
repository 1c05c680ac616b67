// Row sources the compiler and eval read tables through (an array in memory,
// a memory-mapped checkpoint table that drops the pages it has consumed) and
// the release of consumed input in large windows.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "qemb/compiler.h"
#include "qemb/checkpoint.h"

namespace qemb {

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
  const float* rows_in_place(int64_t begin, int64_t) const override { return table_ + begin * dim_; }

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
  const float* rows_in_place(int64_t begin, int64_t end) const override { return table_.rows_in_place(begin, end); }
  const uint8_t* bf16_row(int64_t row) const override { return table_.bf16_row(row); }

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
