// Files: read-only memory maps, and output written to a temporary name and
// renamed into place so that a failed run never leaves a partial file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "qemb/status.h"

namespace qemb {

class MappedFile {
 public:
  // Maps the whole file read-only. An empty file maps to size 0.
  static Result<std::shared_ptr<const MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Writes to "<path>.tmp-XXXXXX" in the same folder; commit() renames it over
// `path`. Destroying an uncommitted writer removes the temporary file, so an
// existing file at `path` is never clobbered by a failed run.
class AtomicFileWriter {
 public:
  static Result<std::unique_ptr<AtomicFileWriter>> create(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Sequential writes, buffered, from position().
  Status write(const void* data, size_t size);
  uint64_t position() const { return position_; }
  // Writes at an absolute offset without moving position(); safe to call from
  // several threads at once for disjoint ranges. Bytes never written read as
  // zero, so alignment padding needs no writing.
  Status write_at(uint64_t offset, const void* data, size_t size);
  // Sets the file's length (growing it with zeros), e.g. to end it exactly
  // at its last byte after write_at calls.
  Status resize(uint64_t size);
  Status commit();

 private:
  AtomicFileWriter() = default;
  std::string path_;
  std::string tmp_path_;
  std::FILE* file_ = nullptr;
  uint64_t position_ = 0;
  bool committed_ = false;
};

// True when both paths name the same existing file (inode), or are equal.
bool same_file(const std::string& a, const std::string& b);

}  // namespace qemb
