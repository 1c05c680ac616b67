// GGUF (llama.cpp's checkpoint format): a validating, memory-mapped reader of
// versions 2 and 3, and float rows of F32, F16, BF16 tensors and of the ggml
// block types an embedding is stored in (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS), dequantized exactly as ggml does.
//
// Layout: "GGUF", u32 version, u64 tensor count, u64 key/value count; the
// key/value pairs (u64-length strings, u32 value types, typed arrays); one
// info per tensor (name, u32 rank, u64 dims innermost first, u32 ggml type,
// u64 offset into the data region); then, at the next multiple of
// general.alignment (default 32), the data region.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "qemb/status.h"

namespace qemb {

inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr size_t kGgufMaxDims = 4;
// Strings longer than this are refused (a corrupt length must not make us
// read gigabytes as a key).
inline constexpr uint64_t kGgufMaxStringBytes = 64ull << 20;

// Converts `blocks` whole blocks of a ggml type at `src` into
// blocks * block_elements floats at `out`, as ggml's dequantize_row_<type>.
using GgufToFloatFn = void (*)(const uint8_t* src, size_t blocks, float* out);

// A ggml type the reader knows (every tensor of a real file has one): its
// name, block geometry and, for the types qemb reads, its float conversion
// (ggml's type traits, one row per type).
struct GgufTypeInfo {
  uint32_t id = 0;
  const char* name = "";
  uint32_t block_elements = 1;
  uint32_t block_bytes = 0;
  GgufToFloatFn to_float = nullptr;  // nullptr: qemb does not read this type
};
// nullptr when `id` is not a ggml type.
const GgufTypeInfo* gguf_type_info(uint32_t id);
// The types read_rows_float converts (those with a to_float).
bool is_gguf_float_readable(const std::string& type_name);
// Their names for messages: "F32, F16, BF16, Q8_0, ... and IQ4_XS".
const std::string& gguf_readable_types();
// True for block-quantized types (Q8_0, Q4_K, IQ4_XS, ...).
bool is_gguf_quantized(const std::string& type_name);

// One metadata value: scalars are kept; arrays keep their element type and
// length only (token lists run to hundreds of thousands of strings).
struct GgufValue {
  enum class Type : uint32_t {
    kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
    kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
  };
  Type type = Type::kU8;
  uint64_t u = 0;       // unsigned integers and bool
  int64_t i = 0;        // signed integers
  double f = 0.0;       // F32, F64
  // Strings: the bytes in the file itself (valid while the GgufFile, or a
  // copy of it, lives), so a file's metadata text is never copied.
  std::string_view s;
  Type array_type = Type::kU8;
  uint64_t array_size = 0;
};
const char* to_string(GgufValue::Type type);

struct GgufTensor {
  std::string name;
  std::string type;            // ggml type name, e.g. "Q8_0"
  uint32_t type_id = 0;
  std::vector<int64_t> dims;   // as stored: innermost first
  std::vector<int64_t> shape;  // row-major, outermost first (dims reversed)
  uint64_t begin = 0, end = 0; // absolute offsets in the file

  uint64_t byte_size() const { return end - begin; }
};

class GgufFile {
 public:
  static Result<GgufFile> open(const std::string& path);
  // Parses `size` bytes at `data` in place; `keep_alive` (may be null) owns them.
  static Result<GgufFile> from_memory(const uint8_t* data, size_t size, std::shared_ptr<const void> keep_alive,
                                      std::string name = "<memory>");
  static Result<GgufFile> from_bytes(std::vector<uint8_t> bytes, std::string name = "<memory>");

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const std::string& path() const { return path_; }
  size_t file_size() const { return size_; }
  // In file order.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find(const std::string& name) const;
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const uint8_t* raw(const GgufTensor& t) const { return data_ + t.begin; }

  // Rows [row_begin, row_end) of a 2-D tensor as float32 (rows are the outer
  // dimension, GGUF's dims[1]); quantized types are dequantized exactly as
  // ggml's reference dequantize_row_<type> does (the same float operations
  // in the same order, each rounded: e.g. Q8_0 d * q, Q4_1 q * d + m, Q4_K
  // (d * sc) * q - (dmin * m)). Other types are refused, naming the type.
  Status read_rows_float(const GgufTensor& tensor, int64_t row_begin, int64_t row_end, float* out) const;

 private:
  GgufFile() = default;
  std::shared_ptr<const void> owner_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, GgufValue> metadata_;
};

// ---- writing (tests, examples, the fuzz corpus) -------------------------------

struct GgufTensorData {
  std::string name;
  uint32_t type_id = 0;
  std::vector<int64_t> shape;  // row-major, outermost first (written reversed)
  std::vector<uint8_t> bytes;
};

// Writes a GGUF v3 (or v2) file: the given string metadata (plus
// general.alignment when not 32), the tensors in order, each aligned. Atomic.
Status write_gguf(const std::string& path, const std::vector<std::pair<std::string, std::string>>& metadata,
                  const std::vector<GgufTensorData>& tensors, uint32_t alignment = kGgufDefaultAlignment,
                  uint32_t version = 3);

// ggml's Q8_0 and Q4_0 quantizers (round to nearest as ggml's reference code
// does), for writing test files: `values` is rows * cols floats, cols a
// multiple of 32.
std::vector<uint8_t> gguf_quantize_q8_0(const float* values, size_t count);
std::vector<uint8_t> gguf_quantize_q4_0(const float* values, size_t count);

}  // namespace qemb
