// A tiny quantized-graph IR: tensors with kind, dtype, shape and encoding;
// Gather and Convert ops (plus the fused gathers the compile passes make).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qemb/status.h"

namespace qemb {

enum class TensorKind { kStatic, kNative, kAppWrite, kAppRead };
enum class DataType { kSFixedPoint8, kUFixedPoint16, kFloat32, kInt32, kUFixedPoint8 };

const char* to_string(TensorKind kind);  // "STATIC", "NATIVE", "APP_WRITE", "APP_READ"
const char* to_string(DataType dtype);   // "SFIXED_POINT_8", "UFIXED_POINT_16", "UFIXED_POINT_8", ...
Result<TensorKind> parse_tensor_kind(const std::string& s);
Result<DataType> parse_data_type(const std::string& s);

// Backend convention: real = scale * (q + offset), offset = -zero_point.
struct Encoding {
  enum class Type { kNone, kPerTensor, kPerAxis };
  Type type = Type::kNone;
  int bitwidth = 0;  // 2, 4 or 8 for SFIXED_POINT_8, 16 for UFIXED_POINT_16, 8 for UFIXED_POINT_8
  // kPerTensor
  float scale = 0.0f;
  int32_t offset = 0;
  // kPerAxis: one scale/offset per slice along `axis`
  int axis = 0;
  std::vector<float> scales;
  std::vector<int32_t> offsets;

  static Encoding per_tensor(float scale, int32_t offset, int bitwidth);
  static Encoding per_axis(int axis, std::vector<float> scales,
                           std::vector<int32_t> offsets, int bitwidth);
  bool is_per_axis() const { return type == Type::kPerAxis; }
  bool is_per_tensor() const { return type == Type::kPerTensor; }
};
bool operator==(const Encoding& a, const Encoding& b);

// Read-only bytes of a STATIC tensor: owned, or a view into a mapped file.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual const uint8_t* data() const = 0;
  virtual size_t size() const = 0;
};

class OwnedBuffer final : public Buffer {
 public:
  explicit OwnedBuffer(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  const uint8_t* data() const override { return bytes_.data(); }
  size_t size() const override { return bytes_.size(); }

 private:
  std::vector<uint8_t> bytes_;
};

// A view that keeps its owner (e.g. a file mapping) alive.
class ViewBuffer final : public Buffer {
 public:
  ViewBuffer(std::shared_ptr<const void> owner, const uint8_t* data, size_t size)
      : owner_(std::move(owner)), data_(data), size_(size) {}
  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  std::shared_ptr<const void> owner_;
  const uint8_t* data_;
  size_t size_;
};

// Every storage format qemb knows, ggml-style: code asks this table for a
// format's width, row bytes, range and element access instead of testing
// bitwidths, so a format is added in one place, and anything not in the table
// (say SFIXED_POINT_8 at 2 bits) is refused where it is read.
struct StorageFormat {
  DataType dtype;
  int bits;                // per value
  int block;               // values stored together (four 2-bit or two 4-bit values share a byte)
  int32_t qmin, qmax;      // the values quantization produces (weights: the contract's symmetric +-qmax)
  const char* name;        // "int2", "int4", "int8", "uint8", "uint16", "float32", "int32"
  bool is_signed;          // how load() widens the stored bits

  // Bytes one row of `dim` values occupies: ceil(dim * bits / 8).
  size_t row_bytes(int64_t dim) const {
    return (static_cast<size_t>(dim) * static_cast<size_t>(bits) + 7) / 8;
  }
  int32_t load(const uint8_t* row, int64_t col) const;  // the raw value (float32 as its bits)
  void store(uint8_t* row, int64_t col, int32_t q) const;
};

// The format of `dtype` at `bitwidth` (0: the dtype's natural width), or
// nullptr when qemb does not store that combination.
const StorageFormat* find_storage_format(DataType dtype, int bitwidth);
// The formats `dtype` may take, for messages ("4 or 8").
std::string storage_widths(DataType dtype);

// Storage layout of tensor data (what the artifact holds and the runtime maps):
//  - SFIXED_POINT_8, bitwidth 8: one int8 per value, row-major.
//  - SFIXED_POINT_8, bitwidth 4: two's-complement nibbles, two per byte, each
//    row padded to ceil(D/2) bytes; column 2k in the low nibble, 2k+1 high.
//  - SFIXED_POINT_8, bitwidth 2: two's-complement 2-bit fields, four per byte,
//    each row padded to ceil(D/4) bytes; column 4k + i in bits 2i and 2i + 1.
//  - UFIXED_POINT_8: one uint8 per value.
//  - UFIXED_POINT_16: little-endian uint16. FLOAT_32 / INT_32: little-endian.
struct Tensor {
  std::string name;
  TensorKind kind = TensorKind::kNative;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  Encoding encoding;
  std::shared_ptr<const Buffer> data;  // STATIC only
  // Non-zero: row-interleaved storage (see interleaved_row_stride): `data`
  // holds one record of `row_stride` bytes a row, the row's per-axis scale
  // followed by its values, and encoding.scales / offsets are empty (the
  // scales live in the rows; the offsets are 0).
  size_t row_stride = 0;

  int64_t num_elements() const;
  bool interleaved() const { return row_stride != 0; }
  // Row r's per-axis (axis 0) scale: from its record when interleaved, else
  // encoding.scales[r]. Interleaved data must be in memory.
  float row_scale(int64_t r) const;
  // Row r's values in storage layout (interleaved or plain, rank 2).
  const uint8_t* row_values(int64_t r) const;
  int bitwidth() const;  // encoding bitwidth, or the dtype's natural width
  // Its entry in the storage format table; nullptr for a combination qemb
  // does not store (the artifact reader and Graph::check refuse those).
  const StorageFormat* format() const { return find_storage_format(dtype, encoding.bitwidth); }
};

// The product of `shape`, 0 when any dimension is 0, -1 when it overflows
// int64 (parsers call this on untrusted shapes).
int64_t checked_element_count(const std::vector<int64_t>& shape);

// Bytes one row of `dim` values occupies in storage layout.
size_t row_storage_bytes(DataType dtype, int bitwidth, int64_t dim);
// Bytes of a whole [rows, dim] tensor in storage layout (shape rank >= 1);
// rows * row_stride for an interleaved tensor.
size_t storage_bytes(const Tensor& t);

// Row-interleaved layout of a symmetric per-row-quantized [V, D]
// SFIXED_POINT_8 table (the fused lookup's table): row r's record starts at
// r * stride and holds its scale s_r (float32 little-endian) at byte 0, its
// ceil(D * bits / 8) value bytes in storage layout from byte
// kInterleavedValuesOffset, then zero bytes up to the stride. A cold lookup
// of a row reads one contiguous run instead of a row and a distant scale.
inline constexpr size_t kInterleavedValuesOffset = 4;
// The stride: 4 + the row's value bytes, rounded up to 4 so that every scale
// is 4-byte aligned (68 bytes for D = 128 at 4 bits: the fewest whole cache
// lines, two, any 68-byte run can touch).
size_t interleaved_row_stride(int bits, int64_t dim);
// Whether `t` may be stored interleaved: STATIC SFIXED_POINT_8 [V, D], per-axis
// along axis 0 with every offset 0, its data in memory.
bool can_interleave(const Tensor& t);
// The interleaved copy of a plain tensor that can_interleave() accepts.
Result<Tensor> interleave_rows(const Tensor& plain);
// The plain copy (packed values, encoding.scales, zero offsets) of an
// interleaved tensor whose data are in memory; a plain tensor as it is.
Tensor deinterleave_rows(const Tensor& t);

// 4-bit helpers for the packed layout.
inline int8_t unpack_int4(const uint8_t* row, int64_t col) {
  uint8_t b = row[col >> 1];
  uint8_t nib = (col & 1) ? (b >> 4) : (b & 0x0F);
  return static_cast<int8_t>(static_cast<int8_t>(nib << 4) >> 4);
}
// 2-bit helpers: column 4k + i in bits 2i..2i+1 of byte k.
inline int8_t unpack_int2(const uint8_t* row, int64_t col) {
  const uint8_t field = static_cast<uint8_t>((row[col >> 2] >> (2 * (col & 3))) & 3);
  return static_cast<int8_t>(static_cast<int8_t>(field << 6) >> 6);
}
inline void pack_int2(uint8_t* row, int64_t col, int8_t v) {
  const int shift = 2 * static_cast<int>(col & 3);
  uint8_t& b = row[col >> 2];
  b = static_cast<uint8_t>((b & ~(3u << shift)) | ((static_cast<uint8_t>(v) & 3u) << shift));
}
inline void pack_int4(uint8_t* row, int64_t col, int8_t v) {
  uint8_t nib = static_cast<uint8_t>(v) & 0x0F;
  uint8_t& b = row[col >> 1];
  b = (col & 1) ? static_cast<uint8_t>((b & 0x0F) | (nib << 4))
                : static_cast<uint8_t>((b & 0xF0) | nib);
}

// Every op type, in one list: X(enumerator, name, inputs, outputs).
//  - Gather: inputs {table, indices}; param axis.
//  - Convert: inputs {x}; requantizes into the output's encoding.
//  - RequantGather (fused): inputs {pcq weight, indices}; the output's
//    encoding; an optional intermediate encoding (the legacy approximation).
// How each runs (its checks, reference and kernels) is the runtime's op
// registry, one entry per type.
#define QEMB_OP_TYPES(X)                    \
  X(kGather, "Gather", 2, 1)                \
  X(kConvert, "Convert", 1, 1)              \
  X(kRequantGather, "RequantGather", 2, 1)

enum class OpType {
#define QEMB_OP_ENUMERATOR(type, ...) type,
  QEMB_OP_TYPES(QEMB_OP_ENUMERATOR)
#undef QEMB_OP_ENUMERATOR
};
inline constexpr OpType kAllOpTypes[] = {
#define QEMB_OP_ENTRY(type, ...) OpType::type,
    QEMB_OP_TYPES(QEMB_OP_ENTRY)
#undef QEMB_OP_ENTRY
};
const char* to_string(OpType type);  // "Gather", "Convert", "RequantGather"
// How many inputs and outputs an op of `type` has.
int op_input_count(OpType type);
int op_output_count(OpType type);
Result<OpType> parse_op_type(const std::string& s);

struct Op {
  OpType type = OpType::kGather;
  std::string name;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  int axis = 0;                                 // Gather
  std::optional<Encoding> intermediate;         // RequantGather, legacy only
};

struct Graph {
  std::vector<Tensor> tensors;
  std::vector<Op> ops;

  Tensor* find_tensor(const std::string& name);
  const Tensor* find_tensor(const std::string& name) const;
  Tensor& add_tensor(Tensor t);
  void add_op(Op op) { ops.push_back(std::move(op)); }
  // Drops tensors no op references.
  void remove_unused_tensors();
  // Human-readable dump: one line per tensor and op.
  std::string dump() const;
  // Structural checks: unique names, every op input/output exists with the
  // right count, STATIC data sizes and per-axis encodings match the shapes.
  Status check() const;
};

}  // namespace qemb
