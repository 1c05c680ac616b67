// Where the compiler puts a table it builds chunk by chunk: fresh memory or
// the artifact being streamed.
#pragma once

#include <cstdint>
#include <memory>

#include "artifact/artifact_io.h"

namespace qemb {

class UninitializedBuffer;

// Stands in for the weight's bytes while the graph is lowered before the
// weight is quantized (the lowering only looks at shapes and encodings).
class PendingBuffer final : public Buffer {
 public:
  explicit PendingBuffer(size_t size) : size_(size) {}
  const uint8_t* data() const override { return nullptr; }
  size_t size() const override { return size_; }

 private:
  size_t size_;
};

// A per-row table being built chunk by chunk: in memory, or written into the
// artifact as it is produced (each worker builds its chunk in a small scratch
// buffer that stays in cache, and the file takes it from there).
class TableOutput {
 public:
  TableOutput(size_t row_bytes, int64_t rows, ArtifactStream* stream);
  // Where rows [begin, end) are built; valid until commit() on this thread.
  uint8_t* rows_at(int64_t begin, int64_t end);
  Status commit(int64_t begin, int64_t end, const uint8_t* rows);
  // Rows from `begin` on will never come.
  void abort(int64_t begin, const Status& why);
  std::shared_ptr<const Buffer> buffer() const;

 private:
  size_t row_bytes_;
  std::shared_ptr<UninitializedBuffer> memory_;
  std::shared_ptr<StreamedData> streamed_;
};

}  // namespace qemb
