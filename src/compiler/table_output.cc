#include "compiler/table_output.h"

#include <sys/mman.h>

#include <vector>

namespace qemb {

// Bytes of a size known up front, left uninitialised: every byte is written
// before use, so zero-filling a GiB table first would only cost time. Large
// buffers are anonymous mappings backed by transparent huge pages where the
// kernel allows: first-touch page faults were most of the quantize pass's
// time with 4 KiB pages (one fault per 4 KiB written).
class UninitializedBuffer final : public Buffer {
 public:
  explicit UninitializedBuffer(size_t size) : size_(size) {
    constexpr size_t kHugePage = size_t{2} << 20;
    if (size >= kHugePage) {
      mapped_ = size + kHugePage;  // room to align the start to a huge page
      void* p = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p != MAP_FAILED) {
        map_ = static_cast<uint8_t*>(p);
        bytes_ = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~(kHugePage - 1));
        ::madvise(bytes_, size, MADV_HUGEPAGE);  // a hint: fine if refused
        return;
      }
    }
    heap_.reset(new uint8_t[size ? size : 1]);
    bytes_ = heap_.get();
  }
  ~UninitializedBuffer() override {
    if (map_ != nullptr) ::munmap(map_, mapped_);
  }
  UninitializedBuffer(const UninitializedBuffer&) = delete;
  UninitializedBuffer& operator=(const UninitializedBuffer&) = delete;
  const uint8_t* data() const override { return bytes_; }
  uint8_t* mutable_data() { return bytes_; }
  size_t size() const override { return size_; }

 private:
  size_t size_;
  uint8_t* map_ = nullptr;
  size_t mapped_ = 0;
  std::unique_ptr<uint8_t[]> heap_;
  uint8_t* bytes_ = nullptr;
};

TableOutput::TableOutput(size_t row_bytes, int64_t rows, ArtifactStream* stream) : row_bytes_(row_bytes) {
  const size_t bytes = row_bytes * static_cast<size_t>(rows);
  if (stream != nullptr) {
    streamed_ = stream->reserve(bytes);
  } else {
    memory_ = std::make_shared<UninitializedBuffer>(bytes);
  }
}

uint8_t* TableOutput::rows_at(int64_t begin, int64_t end) {
  if (memory_) return memory_->mutable_data() + static_cast<size_t>(begin) * row_bytes_;
  thread_local std::vector<uint8_t> scratch;
  scratch.resize(static_cast<size_t>(end - begin) * row_bytes_);
  return scratch.data();
}

Status TableOutput::commit(int64_t begin, int64_t end, const uint8_t* rows) {
  if (memory_) return Status::Ok();
  return streamed_->write(static_cast<uint64_t>(begin) * row_bytes_, rows, static_cast<size_t>(end - begin) * row_bytes_);
}

void TableOutput::abort(int64_t begin, const Status& why) {
  if (streamed_) streamed_->abort(static_cast<uint64_t>(begin) * row_bytes_, why.message());
}

std::shared_ptr<const Buffer> TableOutput::buffer() const {
  if (memory_) return memory_;
  return streamed_;
}

}  // namespace qemb
