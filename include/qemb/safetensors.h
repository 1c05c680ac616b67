// safetensors checkpoints: a validating, memory-mapped reader, a writer, and a
// copy-with-one-tensor-replaced used to write dequantized weights back.
//
// Format: u64 little-endian header length N, N bytes of JSON header, then the
// data region. The header maps tensor name -> {"dtype", "shape",
// "data_offsets": [begin, end]} (relative to the data region) plus an optional
// "__metadata__" object of string -> string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "qemb/status.h"

namespace qemb {

// Headers larger than this are refused (a corrupt length must not make us
// parse gigabytes of "JSON").
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

// Bits per element of a safetensors dtype ("F32" -> 32, "F4" -> 4); 0 when the
// dtype string is unknown.
int safetensors_dtype_bits(const std::string& dtype);
// The dtypes read_rows_float/read_float/copy_with_replaced_tensor convert.
bool is_float_convertible_dtype(const std::string& dtype);  // F32, F16, BF16
// "[512, 64]"
std::string shape_to_string(const std::vector<int64_t>& shape);

struct SafetensorsTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // absolute offsets in the file

  int64_t num_elements() const;
  uint64_t byte_size() const { return end - begin; }
};

class SafetensorsFile {
 public:
  // Maps the file read-only and validates the header.
  static Result<SafetensorsFile> open(const std::string& path);
  // Parses bytes already in memory (tests, fuzzers). `name` appears in errors.
  static Result<SafetensorsFile> from_bytes(std::vector<uint8_t> bytes, std::string name = "<memory>");
  // Parses `size` bytes at `data` without copying; `keep_alive` (may be null,
  // then the caller keeps the bytes alive) owns them.
  static Result<SafetensorsFile> from_memory(const uint8_t* data, size_t size, std::shared_ptr<const void> keep_alive,
                                             std::string name = "<memory>");

  // Sorted by data offset.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }
  size_t file_size() const { return size_; }
  // Length N of the JSON header (without the 8-byte length prefix).
  uint64_t header_size() const { return header_size_; }
  // Absolute offset of the data region: 8 + N.
  uint64_t data_offset() const { return 8 + header_size_; }
  // The whole file.
  const uint8_t* data() const { return data_; }
  // Pointer to the tensor's bytes inside the mapping (maybe unaligned).
  const uint8_t* raw(const SafetensorsTensor& t) const { return data_ + t.begin; }

  // Converts rows [row_begin, row_end) of a 2-D F32/F16/BF16 tensor to float32
  // into `out` ((row_end - row_begin) * cols floats, row-major).
  Status read_rows_float(const std::string& name, int64_t row_begin, int64_t row_end, float* out) const;
  // The same for a tensor of this file (one of tensors(), or find()), without
  // the name lookup: for callers that read a table a row at a time.
  Status read_rows_float(const SafetensorsTensor& tensor, int64_t row_begin, int64_t row_end, float* out) const;
  // The whole tensor (any rank) as float32, row-major.
  Result<std::vector<float>> read_float(const std::string& name) const;

 private:
  SafetensorsFile() = default;
  Result<const SafetensorsTensor*> find_float_tensor(const std::string& name) const;
  Status check_float_dtype(const SafetensorsTensor& t) const;  // F32, F16 or BF16, else kUnsupported

  std::shared_ptr<const void> owner_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
  uint64_t header_size_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Suffixes (after a '.' or as the whole name) that mark a token embedding.
const std::vector<std::string>& embedding_name_suffixes();

// The embedding table's tensor name. explicit_name empty = pick the single
// 2-D tensor whose name ends with an embedding suffix, else (a tied model)
// the single 2-D lm_head.weight. Errors: explicit name
// missing -> kNotFound (lists 2-D candidates and the closest names); explicit
// but not 2-D -> kUnsupported; auto with no match -> kNotFound, with several
// -> kInvalidArgument (both list candidates and suggest --tensor NAME).
Result<std::string> find_embedding_tensor(const SafetensorsFile& f, const std::string& explicit_name);

// ---- writing ---------------------------------------------------------------

struct SafetensorsTensorData {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // little-endian, row-major
};

// Float32 values encoded as F32, F16 or BF16 bytes (round to nearest even).
Result<std::vector<uint8_t>> floats_to_dtype_bytes(const float* values, size_t count, const std::string& dtype);

// Writes tensors in the given order, contiguously; the header lists
// "__metadata__" first (when not empty) and is padded with spaces so the data
// region starts 8-byte aligned, as the reference implementation does. Atomic.
Status write_safetensors(const std::string& path, const std::map<std::string, std::string>& metadata,
                         const std::vector<SafetensorsTensorData>& tensors);

// Copies `src` to `out_path` byte for byte except the data of tensor `name`,
// which becomes `values` (num_elements floats) converted to the tensor's own
// dtype. Refuses to overwrite the source. Atomic.
Status copy_with_replaced_tensor(const SafetensorsFile& src, const std::string& name, const float* values,
                                 const std::string& out_path);

}  // namespace qemb
