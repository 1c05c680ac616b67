#include "core/ir.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>
#include <iterator>
#include <set>
#include <sstream>

#include "core/strings.h"

namespace qemb {

const char* to_string(TensorKind kind) {
  switch (kind) {
    case TensorKind::kStatic: return "STATIC";
    case TensorKind::kNative: return "NATIVE";
    case TensorKind::kAppWrite: return "APP_WRITE";
    case TensorKind::kAppRead: return "APP_READ";
  }
  return "?";
}

const char* to_string(DataType dtype) {
  switch (dtype) {
    case DataType::kSFixedPoint8: return "SFIXED_POINT_8";
    case DataType::kUFixedPoint16: return "UFIXED_POINT_16";
    case DataType::kFloat32: return "FLOAT_32";
    case DataType::kInt32: return "INT_32";
    case DataType::kUFixedPoint8: return "UFIXED_POINT_8";
  }
  return "?";
}

namespace {

// QEMB_OP_TYPES as a table, indexed by OpType; nullptr for a value outside it.
struct OpTypeRow {
  const char* name;
  int inputs, outputs;
};
const OpTypeRow* op_type_row(OpType type) {
  static constexpr OpTypeRow rows[] = {
#define QEMB_OP_ROW(t, name, inputs, outputs) {name, inputs, outputs},
      QEMB_OP_TYPES(QEMB_OP_ROW)
#undef QEMB_OP_ROW
  };
  const auto i = static_cast<size_t>(type);
  return i < std::size(rows) ? &rows[i] : nullptr;
}

}  // namespace

const char* to_string(OpType type) {
  const OpTypeRow* row = op_type_row(type);
  return row ? row->name : "?";
}
int op_input_count(OpType type) {
  const OpTypeRow* row = op_type_row(type);
  return row ? row->inputs : -1;
}
int op_output_count(OpType type) {
  const OpTypeRow* row = op_type_row(type);
  return row ? row->outputs : -1;
}

Result<TensorKind> parse_tensor_kind(const std::string& s) {
  for (auto k : {TensorKind::kStatic, TensorKind::kNative, TensorKind::kAppWrite, TensorKind::kAppRead})
    if (s == to_string(k)) return k;
  return make_error(ErrorCode::kParseError, "unknown tensor kind '" + s + "'");
}

Result<DataType> parse_data_type(const std::string& s) {
  for (auto d : {DataType::kSFixedPoint8, DataType::kUFixedPoint16, DataType::kFloat32, DataType::kInt32,
                 DataType::kUFixedPoint8})
    if (s == to_string(d)) return d;
  return make_error(ErrorCode::kParseError, "unknown data type '" + s + "'");
}

Result<OpType> parse_op_type(const std::string& s) {
  for (OpType t : kAllOpTypes)
    if (s == to_string(t)) return t;
  return make_error(ErrorCode::kParseError, "unknown op type '" + s + "'");
}

Encoding Encoding::per_tensor(float scale, int32_t offset, int bitwidth) {
  Encoding e;
  e.type = Type::kPerTensor;
  e.scale = scale;
  e.offset = offset;
  e.bitwidth = bitwidth;
  return e;
}

Encoding Encoding::per_axis(int axis, std::vector<float> scales, std::vector<int32_t> offsets,
                            int bitwidth) {
  Encoding e;
  e.type = Type::kPerAxis;
  e.axis = axis;
  e.scales = std::move(scales);
  e.offsets = std::move(offsets);
  e.bitwidth = bitwidth;
  return e;
}

bool operator==(const Encoding& a, const Encoding& b) {
  if (a.type != b.type || a.bitwidth != b.bitwidth) return false;
  switch (a.type) {
    case Encoding::Type::kNone: return true;
    case Encoding::Type::kPerTensor: return a.scale == b.scale && a.offset == b.offset;
    case Encoding::Type::kPerAxis:
      return a.axis == b.axis && a.scales == b.scales && a.offsets == b.offsets;
  }
  return false;
}

int64_t Tensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}


int64_t checked_element_count(const std::vector<int64_t>& shape) {
  // A zero dimension makes the product 0 even where the others would overflow.
  for (int64_t d : shape)
    if (d == 0) return 0;
  uint64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return -1;
  return n > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(n);
}

namespace {

constexpr StorageFormat kFormats[] = {
    {DataType::kSFixedPoint8, 2, 4, -1, 1, "int2", true},
    {DataType::kSFixedPoint8, 4, 2, -7, 7, "int4", true},
    {DataType::kSFixedPoint8, 8, 1, -127, 127, "int8", true},
    {DataType::kUFixedPoint8, 8, 1, 0, 255, "uint8", false},
    {DataType::kUFixedPoint16, 16, 1, 0, 65535, "uint16", false},
    {DataType::kFloat32, 32, 1, INT32_MIN, INT32_MAX, "float32", true},
    {DataType::kInt32, 32, 1, INT32_MIN, INT32_MAX, "int32", true},
};

int natural_width(DataType dtype) {
  switch (dtype) {
    case DataType::kSFixedPoint8: return 8;
    case DataType::kUFixedPoint8: return 8;
    case DataType::kUFixedPoint16: return 16;
    case DataType::kFloat32:
    case DataType::kInt32: return 32;
  }
  return 0;
}

}  // namespace

const StorageFormat* find_storage_format(DataType dtype, int bitwidth) {
  const int bits = bitwidth == 0 ? natural_width(dtype) : bitwidth;
  for (const StorageFormat& f : kFormats)
    if (f.dtype == dtype && f.bits == bits) return &f;
  return nullptr;
}

int Tensor::bitwidth() const { return encoding.bitwidth != 0 ? encoding.bitwidth : natural_width(dtype); }

std::string storage_widths(DataType dtype) {
  std::vector<int> widths;
  for (const StorageFormat& f : kFormats)
    if (f.dtype == dtype) widths.push_back(f.bits);
  std::string out;
  for (size_t i = 0; i < widths.size(); ++i)
    out += (i == 0 ? "" : i + 1 == widths.size() ? " or " : ", ") + std::to_string(widths[i]);
  return out;
}

int32_t StorageFormat::load(const uint8_t* row, int64_t col) const {
  switch (bits) {
    case 2: return unpack_int2(row, col);
    case 4: return unpack_int4(row, col);
    case 8: return is_signed ? static_cast<int32_t>(static_cast<int8_t>(row[col])) : static_cast<int32_t>(row[col]);
    case 16: {
      uint16_t v;
      std::memcpy(&v, row + 2 * col, 2);
      return v;
    }
    default: {
      int32_t v;
      std::memcpy(&v, row + 4 * col, 4);
      return v;
    }
  }
}

void StorageFormat::store(uint8_t* row, int64_t col, int32_t q) const {
  switch (bits) {
    case 2: pack_int2(row, col, static_cast<int8_t>(q)); return;
    case 4: pack_int4(row, col, static_cast<int8_t>(q)); return;
    case 8: row[col] = static_cast<uint8_t>(q); return;
    case 16: {
      const uint16_t v = static_cast<uint16_t>(q);
      std::memcpy(row + 2 * col, &v, 2);
      return;
    }
    default: std::memcpy(row + 4 * col, &q, 4); return;
  }
}

size_t row_storage_bytes(DataType dtype, int bitwidth, int64_t dim) {
  const StorageFormat* f = find_storage_format(dtype, bitwidth);
  return f == nullptr ? 0 : f->row_bytes(dim);
}

size_t storage_bytes(const Tensor& t) {
  if (t.interleaved()) return t.shape.empty() ? 0 : static_cast<size_t>(t.shape[0]) * t.row_stride;
  if (t.shape.empty()) return row_storage_bytes(t.dtype, t.bitwidth(), 1);
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < t.shape.size(); ++i) rows *= t.shape[i];
  return static_cast<size_t>(rows) * row_storage_bytes(t.dtype, t.bitwidth(), t.shape.back());
}

size_t interleaved_row_stride(int bits, int64_t dim) {
  const size_t values = (static_cast<size_t>(dim) * static_cast<size_t>(bits) + 7) / 8;
  return (kInterleavedValuesOffset + values + 3) / 4 * 4;
}

float Tensor::row_scale(int64_t r) const {
  if (!interleaved()) return encoding.scales[static_cast<size_t>(r)];
  const uint8_t* p = data->data() + static_cast<size_t>(r) * row_stride;
  const uint32_t bits = uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
  return std::bit_cast<float>(bits);
}

const uint8_t* Tensor::row_values(int64_t r) const {
  if (interleaved()) return data->data() + static_cast<size_t>(r) * row_stride + kInterleavedValuesOffset;
  return data->data() + static_cast<size_t>(r) * row_storage_bytes(dtype, bitwidth(), shape.back());
}

bool can_interleave(const Tensor& t) {
  if (t.interleaved() || t.kind != TensorKind::kStatic || t.dtype != DataType::kSFixedPoint8 ||
      t.shape.size() != 2 || !t.encoding.is_per_axis() || t.encoding.axis != 0 || t.format() == nullptr ||
      !t.data || t.data->data() == nullptr || t.data->size() != storage_bytes(t) ||
      static_cast<int64_t>(t.encoding.scales.size()) != t.shape[0] ||
      t.encoding.offsets.size() != t.encoding.scales.size())
    return false;
  return std::all_of(t.encoding.offsets.begin(), t.encoding.offsets.end(), [](int32_t o) { return o == 0; });
}

Result<Tensor> interleave_rows(const Tensor& plain) {
  if (!can_interleave(plain))
    return make_error(ErrorCode::kInvalidArgument,
                      "tensor '" + plain.name + "' cannot be stored row-interleaved: only a STATIC SFIXED_POINT_8 "
                      "[rows, dim] table quantized per row with zero offsets, its data in memory, can");
  Tensor t = plain;
  const int64_t rows = plain.shape[0], dim = plain.shape[1];
  const size_t values = row_storage_bytes(plain.dtype, plain.bitwidth(), dim);
  t.row_stride = interleaved_row_stride(plain.bitwidth(), dim);
  std::vector<uint8_t> bytes(static_cast<size_t>(rows) * t.row_stride, 0);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* rec = bytes.data() + static_cast<size_t>(r) * t.row_stride;
    const uint32_t s = std::bit_cast<uint32_t>(plain.encoding.scales[static_cast<size_t>(r)]);
    for (int i = 0; i < 4; ++i) rec[i] = static_cast<uint8_t>(s >> (8 * i));
    std::memcpy(rec + kInterleavedValuesOffset, plain.data->data() + static_cast<size_t>(r) * values, values);
  }
  t.data = std::make_shared<OwnedBuffer>(std::move(bytes));
  t.encoding.scales.clear();
  t.encoding.offsets.clear();
  return t;
}

Tensor deinterleave_rows(const Tensor& t) {
  if (!t.interleaved()) return t;
  Tensor plain = t;
  plain.row_stride = 0;
  const int64_t rows = t.shape[0], dim = t.shape[1];
  const size_t values = row_storage_bytes(t.dtype, t.bitwidth(), dim);
  std::vector<uint8_t> bytes(static_cast<size_t>(rows) * values);
  plain.encoding.scales.resize(static_cast<size_t>(rows));
  plain.encoding.offsets.assign(static_cast<size_t>(rows), 0);
  for (int64_t r = 0; r < rows; ++r) {
    plain.encoding.scales[static_cast<size_t>(r)] = t.row_scale(r);
    std::memcpy(bytes.data() + static_cast<size_t>(r) * values, t.row_values(r), values);
  }
  plain.data = std::make_shared<OwnedBuffer>(std::move(bytes));
  return plain;
}

Tensor* Graph::find_tensor(const std::string& name) {
  for (auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const Tensor* Graph::find_tensor(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

Tensor& Graph::add_tensor(Tensor t) {
  tensors.push_back(std::move(t));
  return tensors.back();
}

void Graph::remove_unused_tensors() {
  std::set<std::string> used;
  for (const auto& op : ops) {
    used.insert(op.inputs.begin(), op.inputs.end());
    used.insert(op.outputs.begin(), op.outputs.end());
  }
  tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                               [&](const Tensor& t) { return !used.count(t.name); }),
                tensors.end());
}

namespace {
std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string encoding_text(const Encoding& e) {
  std::ostringstream os;
  os.precision(9);
  switch (e.type) {
    case Encoding::Type::kNone: return "none";
    case Encoding::Type::kPerTensor:
      os << "per-tensor bw=" << e.bitwidth << " scale=" << e.scale << " offset=" << e.offset;
      return os.str();
    case Encoding::Type::kPerAxis: {
      os << "per-axis axis=" << e.axis << " bw=" << e.bitwidth << " n=" << e.scales.size();
      if (!e.scales.empty()) {
        auto [lo, hi] = std::minmax_element(e.scales.begin(), e.scales.end());
        os << " scales=[" << *lo << " .. " << *hi << "]";
      }
      return os.str();
    }
  }
  return "?";
}
}  // namespace

std::string Graph::dump() const {
  std::ostringstream os;
  os << "tensors:\n";
  for (const auto& t : tensors) {
    os << "  " << escape_control(t.name) << ": " << to_string(t.kind) << " " << to_string(t.dtype) << " "
       << shape_text(t.shape) << " {";
    if (t.interleaved() && t.shape.size() == 2) {
      // Its scales are in its rows, not in the encoding (n would say 0).
      os << "per-axis axis=" << t.encoding.axis << " bw=" << t.encoding.bitwidth << " n=" << t.shape[0]
         << " scales in rows} row_stride=" << t.row_stride;
    } else {
      os << encoding_text(t.encoding) << "}";
    }
    if (t.data) os << " data=" << t.data->size() << "B";
    os << "\n";
  }
  os << "ops:\n";
  for (const auto& op : ops) {
    os << "  " << escape_control(op.name) << " = " << to_string(op.type) << "(";
    for (size_t i = 0; i < op.inputs.size(); ++i) os << (i ? ", " : "") << escape_control(op.inputs[i]);
    os << ") -> ";
    for (size_t i = 0; i < op.outputs.size(); ++i) os << (i ? ", " : "") << escape_control(op.outputs[i]);
    if (op.type == OpType::kGather) os << " axis=" << op.axis;
    if (op.intermediate) os << " intermediate={" << encoding_text(*op.intermediate) << "}";
    os << "\n";
  }
  return os.str();
}

Status Graph::check() const {
  std::set<std::string> names;
  for (const auto& t : tensors) {
    if (!names.insert(t.name).second)
      return make_error(ErrorCode::kCorrupt, "duplicate tensor name '" + t.name + "'");
    for (int64_t d : t.shape)
      if (d < 0) return make_error(ErrorCode::kCorrupt, "tensor '" + t.name + "' has a negative dimension");
    if (t.kind == TensorKind::kStatic) {
      if (!t.data) return make_error(ErrorCode::kCorrupt, "STATIC tensor '" + t.name + "' has no data");
      if (t.data->size() != storage_bytes(t))
        return make_error(ErrorCode::kCorrupt,
                          "STATIC tensor '" + t.name + "' holds " + std::to_string(t.data->size()) +
                              " bytes, its shape needs " + std::to_string(storage_bytes(t)));
    }
    if (t.interleaved()) {
      const auto& e = t.encoding;
      if (t.kind != TensorKind::kStatic || t.dtype != DataType::kSFixedPoint8 || t.shape.size() != 2 ||
          !e.is_per_axis() || e.axis != 0 || !e.scales.empty() || !e.offsets.empty() || t.format() == nullptr ||
          t.row_stride != interleaved_row_stride(t.bitwidth(), t.shape[1]))
        return make_error(ErrorCode::kCorrupt,
                          "tensor '" + t.name + "' is row-interleaved but is not a STATIC SFIXED_POINT_8 [rows, dim] "
                          "table quantized along axis 0 with the stride its row needs");
    } else if (t.encoding.is_per_axis()) {
      const auto& e = t.encoding;
      if (e.axis < 0 || static_cast<size_t>(e.axis) >= t.shape.size() ||
          static_cast<int64_t>(e.scales.size()) != t.shape[e.axis] ||
          e.offsets.size() != e.scales.size())
        return make_error(ErrorCode::kCorrupt,
                          "tensor '" + t.name + "' has a per-axis encoding that does not match its shape");
    }
  }
  for (const auto& op : ops) {
    if (op.inputs.size() != static_cast<size_t>(op_input_count(op.type)) ||
        op.outputs.size() != static_cast<size_t>(op_output_count(op.type)))
      return make_error(ErrorCode::kCorrupt, "op '" + op.name + "' has the wrong number of inputs or outputs");
    for (const auto& n : op.inputs)
      if (!names.count(n)) return make_error(ErrorCode::kCorrupt, "op '" + op.name + "' reads unknown tensor '" + n + "'");
    for (const auto& n : op.outputs)
      if (!names.count(n)) return make_error(ErrorCode::kCorrupt, "op '" + op.name + "' writes unknown tensor '" + n + "'");
  }
  return Status::Ok();
}

}  // namespace qemb
