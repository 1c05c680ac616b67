#include "qemb/npy.h"

#include <cctype>
#include <cstring>
#include <limits>
#include <map>
#include <memory>

#include "core/file.h"
#include "core/ir.h"

namespace qemb {
namespace {

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

Error npy_error(const std::string& name, const std::string& what) {
  return make_error(ErrorCode::kParseError, ".npy file " + in_quotes(name) + ": " + what);
}

// A Python literal as found in .npy headers (numpy writes them with repr()
// and reads them with ast.literal_eval).
struct PyValue {
  enum class Kind { kString, kBool, kNone, kInt, kSequence, kDict } kind = Kind::kNone;
  std::string text;               // kString
  bool flag = false;              // kBool
  int64_t number = 0;             // kInt
  std::vector<PyValue> items;     // kSequence elements, or kDict values
  std::vector<std::string> keys;  // kDict keys (string keys only), parallel to items
};

class PyLiteralParser {
 public:
  explicit PyLiteralParser(const std::string& text) : s_(text) {}

  bool parse(PyValue& out, std::string& error) {
    if (!value(out, 0)) {
      error = error_ + " at header character " + std::to_string(pos_);
      return false;
    }
    skip_space();
    if (pos_ != s_.size()) {
      error = "unexpected text after the header dictionary at character " + std::to_string(pos_);
      return false;
    }
    return true;
  }

 private:
  static constexpr int kMaxDepth = 16;

  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool fail(const std::string& e) {
    error_ = e;
    return false;
  }
  bool consume_word(const char* w) {
    size_t n = std::strlen(w);
    if (s_.compare(pos_, n, w) != 0) return false;
    pos_ += n;
    return true;
  }

  bool value(PyValue& out, int depth) {
    if (depth > kMaxDepth) return fail("header nests too deeply");
    skip_space();
    if (pos_ >= s_.size()) return fail("header ends early");
    char c = s_[pos_];
    if (c == '\'' || c == '"') {
      out.kind = PyValue::Kind::kString;
      return string(out.text);
    }
    if (c == '{') return dict(out, depth);
    if (c == '(' || c == '[') return sequence(out, depth, c == '(' ? ')' : ']');
    if (consume_word("True")) {
      out.kind = PyValue::Kind::kBool;
      out.flag = true;
      return true;
    }
    if (consume_word("False")) {
      out.kind = PyValue::Kind::kBool;
      out.flag = false;
      return true;
    }
    if (consume_word("None")) {
      out.kind = PyValue::Kind::kNone;
      return true;
    }
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) return integer(out);
    return fail(std::string("unexpected character '") + c + "'");
  }

  bool string(std::string& out) {
    const char quote = s_[pos_++];
    out.clear();
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '\\') return fail("escape sequences in header strings are not supported");
      out += s_[pos_++];
    }
    if (pos_ >= s_.size()) return fail("unterminated string");
    ++pos_;
    return true;
  }

  bool integer(PyValue& out) {
    bool negative = s_[pos_] == '-';
    if (negative) ++pos_;
    if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) return fail("malformed number");
    uint64_t v = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      uint64_t digit = static_cast<uint64_t>(s_[pos_++] - '0');
      if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - digit) / 10) {
        return fail("number too large");
      }
      v = v * 10 + digit;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'L' || s_[pos_] == 'l')) ++pos_;  // Python 2 long suffix
    out.kind = PyValue::Kind::kInt;
    out.number = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
    return true;
  }

  bool sequence(PyValue& out, int depth, char close) {
    ++pos_;
    out.kind = PyValue::Kind::kSequence;
    for (;;) {
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == close) {
        ++pos_;
        return true;
      }
      PyValue item;
      if (!value(item, depth + 1)) return false;
      out.items.push_back(std::move(item));
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
      } else if (pos_ < s_.size() && s_[pos_] == close) {
        ++pos_;
        return true;
      } else {
        return fail("expected ',' or closing bracket");
      }
    }
  }

  bool dict(PyValue& out, int depth) {
    ++pos_;
    out.kind = PyValue::Kind::kDict;
    for (;;) {
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return fail("expected a string key");
      std::string key;
      if (!string(key)) return false;
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != ':') return fail("expected ':'");
      ++pos_;
      PyValue v;
      if (!value(v, depth + 1)) return false;
      for (const std::string& k : out.keys) {
        if (k == key) return fail("key " + in_quotes(key) + " appears twice");
      }
      out.keys.push_back(std::move(key));
      out.items.push_back(std::move(v));
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
      } else if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return true;
      } else {
        return fail("expected ',' or '}'");
      }
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string error_;
};

uint64_t read_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  if (shape.size() == 1) out += ",";
  return out + ")";
}

// The data bytes an array of this dtype and shape holds.
Result<uint64_t> npy_data_bytes(const std::string& descr, const std::vector<int64_t>& shape) {
  QEMB_ASSIGN_OR_RETURN(NpyDtype dtype, parse_npy_dtype(descr));
  uint64_t expected = static_cast<uint64_t>(dtype.item_size);
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(expected, static_cast<uint64_t>(d), &expected)) {
      return make_error(ErrorCode::kInvalidArgument, "invalid .npy shape " + shape_text(shape));
    }
  }
  return expected;
}

// Validates descr/shape/byte count for writing and returns the header block
// (magic through the '\n'-terminated dictionary).
Result<std::string> npy_header(const std::string& descr, const std::vector<int64_t>& shape, size_t byte_count) {
  QEMB_ASSIGN_OR_RETURN(const uint64_t expected, npy_data_bytes(descr, shape));
  if (expected != byte_count) {
    return make_error(ErrorCode::kInvalidArgument, "a " + descr + " array of shape " + shape_text(shape) + " needs " +
                                                       std::to_string(expected) + " bytes, got " +
                                                       std::to_string(byte_count));
  }
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  // Version 1.0 has a 2-byte header length; fall back to 2.0 beyond that.
  int length_bytes = 2;
  size_t total = 6 + 2 + length_bytes + dict.size() + 1;
  size_t padded = (total + 63) / 64 * 64;
  if (padded - 10 > 0xFFFF) {
    length_bytes = 4;
    total = 6 + 2 + length_bytes + dict.size() + 1;
    padded = (total + 63) / 64 * 64;
  }
  const size_t header_len = padded - (6 + 2 + length_bytes);
  std::string out(reinterpret_cast<const char*>(kNpyMagic), 6);
  out += static_cast<char>(length_bytes == 2 ? 1 : 2);
  out += static_cast<char>(0);
  for (int i = 0; i < length_bytes; ++i) out += static_cast<char>((header_len >> (8 * i)) & 0xFF);
  out += dict;
  out.append(padded - out.size() - 1, ' ');
  out += '\n';
  return out;
}

}  // namespace

int64_t NpyArray::num_elements() const { return checked_element_count(shape); }

int NpyArray::item_size() const {
  auto parsed = parse_npy_dtype(dtype);
  return parsed.ok() ? parsed->item_size : 0;
}

bool has_npy_magic(const uint8_t* data, size_t size) {
  return size >= sizeof(kNpyMagic) && std::memcmp(data, kNpyMagic, sizeof(kNpyMagic)) == 0;
}

Result<NpyDtype> parse_npy_dtype(const std::string& descr) {
  auto unsupported = [&]() {
    return make_error(ErrorCode::kUnsupported,
                      ".npy dtype " + in_quotes(descr) +
                          " is not supported; expected a plain number type such as '<i4', '<i8', '<u2', '<f4'");
  };
  if (descr.size() < 3) return unsupported();
  NpyDtype d;
  d.byte_order = descr[0];
  if (d.byte_order == '=') d.byte_order = '<';  // native order; this code runs on little-endian hosts
  if (d.byte_order != '<' && d.byte_order != '>' && d.byte_order != '|') return unsupported();
  d.kind = descr[1];
  if (d.kind != 'b' && d.kind != 'i' && d.kind != 'u' && d.kind != 'f' && d.kind != 'c') return unsupported();
  const std::string size_text = descr.substr(2);
  if (size_text != "1" && size_text != "2" && size_text != "4" && size_text != "8" && size_text != "16") {
    return unsupported();
  }
  d.item_size = std::stoi(size_text);
  if (d.kind == 'b' && d.item_size != 1) return unsupported();
  if (d.kind == 'f' && d.item_size == 1) return unsupported();
  if (d.kind == 'c' && d.item_size < 8) return unsupported();
  if ((d.kind == 'i' || d.kind == 'u') && d.item_size > 8) return unsupported();
  if (d.item_size == 1) d.byte_order = '|';
  return d;
}

Result<NpyArray> parse_npy(const uint8_t* data, size_t size, const std::string& name) {
  size_t data_offset = 0;
  QEMB_ASSIGN_OR_RETURN(NpyArray array, parse_npy_header(data, size, name, data_offset));
  array.data.assign(data + data_offset, data + size);
  return array;
}

Result<NpyArray> parse_npy_header(const uint8_t* data, size_t size, const std::string& name, size_t& data_offset) {
  if (!has_npy_magic(data, size)) {
    return npy_error(name, "does not start with the .npy magic \\x93NUMPY; not a NumPy .npy file");
  }
  if (size < 10) return npy_error(name, "file is truncated inside the header");
  const int major = data[6];
  const int minor = data[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    return make_error(ErrorCode::kUnsupported, ".npy file " + in_quotes(name) + ": format version " +
                                                   std::to_string(major) + "." + std::to_string(minor) +
                                                   " is not supported (1.0, 2.0 and 3.0 are)");
  }
  const int length_bytes = major == 1 ? 2 : 4;
  if (size < static_cast<size_t>(8 + length_bytes)) return npy_error(name, "file is truncated inside the header");
  const uint64_t header_len = read_le(data + 8, length_bytes);
  const uint64_t data_start = 8 + static_cast<uint64_t>(length_bytes) + header_len;
  if (data_start > size) {
    return npy_error(name, "header length " + std::to_string(header_len) + " runs past the end of the file (" +
                               std::to_string(size) + " bytes); the file is truncated");
  }
  const std::string header(reinterpret_cast<const char*>(data + 8 + length_bytes), header_len);
  if (major < 3) {
    for (unsigned char c : header) {
      if (c >= 0x80) return npy_error(name, "header of a version 1/2 file must be ASCII");
    }
  }
  PyValue dict;
  std::string parse_message;
  if (!PyLiteralParser(header).parse(dict, parse_message)) {
    return npy_error(name, "malformed header dictionary: " + parse_message);
  }
  if (dict.kind != PyValue::Kind::kDict) return npy_error(name, "header is not a dictionary");

  const PyValue* descr = nullptr;
  const PyValue* fortran = nullptr;
  const PyValue* shape = nullptr;
  for (size_t i = 0; i < dict.keys.size(); ++i) {
    const std::string& key = dict.keys[i];
    const PyValue& v = dict.items[i];
    if (key == "descr") {
      descr = &v;
    } else if (key == "fortran_order") {
      fortran = &v;
    } else if (key == "shape") {
      shape = &v;
    } else {
      return npy_error(name, "unexpected header key " + in_quotes(key) + " (expected descr, fortran_order, shape)");
    }
  }
  if (descr == nullptr || fortran == nullptr || shape == nullptr) {
    return npy_error(name, "header must contain 'descr', 'fortran_order' and 'shape'");
  }
  if (descr->kind != PyValue::Kind::kString) {
    return make_error(ErrorCode::kUnsupported,
                      ".npy file " + in_quotes(name) + ": structured dtypes are not supported; save a plain array");
  }
  if (fortran->kind != PyValue::Kind::kBool) return npy_error(name, "'fortran_order' must be True or False");
  if (shape->kind != PyValue::Kind::kSequence) return npy_error(name, "'shape' must be a tuple of integers");

  NpyArray array;
  array.dtype = descr->text;
  array.fortran_order = fortran->flag;
  QEMB_ASSIGN_OR_RETURN(NpyDtype dtype, parse_npy_dtype(array.dtype));
  uint64_t expected = static_cast<uint64_t>(dtype.item_size);
  for (const PyValue& d : shape->items) {
    if (d.kind != PyValue::Kind::kInt || d.number < 0) {
      return npy_error(name, "'shape' must hold non-negative integers");
    }
    if (__builtin_mul_overflow(expected, static_cast<uint64_t>(d.number), &expected)) {
      return npy_error(name, "shape is too large");
    }
    array.shape.push_back(d.number);
  }
  const uint64_t available = size - data_start;
  if (available != expected) {
    return npy_error(name, "a " + array.dtype + " array of shape " + shape_text(array.shape) + " needs " +
                               std::to_string(expected) + " data bytes but the file has " + std::to_string(available) +
                               (available < expected ? " (truncated)" : ""));
  }
  data_offset = static_cast<size_t>(data_start);
  return array;
}

Result<NpyArray> read_npy(const std::string& path) {
  QEMB_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::open(path));
  return parse_npy(file->data(), file->size(), path);
}

std::vector<uint8_t> npy_c_order_data(const NpyArray& array) {
  if (!array.fortran_order || array.shape.size() < 2) return array.data;
  const size_t item = static_cast<size_t>(array.item_size());
  const size_t rank = array.shape.size();
  const size_t count = static_cast<size_t>(array.num_elements());
  if (item == 0 || array.data.size() != count * item) return array.data;  // not a parsed array; leave as is
  std::vector<size_t> fortran_stride(rank);
  size_t stride = 1;
  for (size_t k = 0; k < rank; ++k) {
    fortran_stride[k] = stride;
    stride *= static_cast<size_t>(array.shape[k]);
  }
  std::vector<uint8_t> out(array.data.size());
  std::vector<int64_t> index(rank, 0);
  for (size_t i = 0; i < count; ++i) {
    size_t source = 0;
    for (size_t k = 0; k < rank; ++k) source += static_cast<size_t>(index[k]) * fortran_stride[k];
    std::memcpy(out.data() + i * item, array.data.data() + source * item, item);
    for (size_t k = rank; k-- > 0;) {  // advance the C-order multi-index
      if (++index[k] < array.shape[k]) break;
      index[k] = 0;
    }
  }
  return out;
}

Result<std::vector<uint8_t>> encode_npy(const std::string& descr, const std::vector<int64_t>& shape, const void* bytes,
                                        size_t byte_count) {
  QEMB_ASSIGN_OR_RETURN(std::string header, npy_header(descr, shape, byte_count));
  std::vector<uint8_t> out(header.begin(), header.end());
  const uint8_t* p = static_cast<const uint8_t*>(bytes);
  out.insert(out.end(), p, p + byte_count);
  return out;
}

Status write_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
                 const void* bytes, size_t byte_count) {
  auto header = npy_header(descr, shape, byte_count);
  if (!header.ok()) {
    return make_error(header.error().code, "cannot write " + in_quotes(path) + ": " + header.error().message);
  }
  QEMB_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> out, AtomicFileWriter::create(path));
  QEMB_RETURN_IF_ERROR(out->write(header->data(), header->size()));
  QEMB_RETURN_IF_ERROR(out->write(bytes, byte_count));
  return out->commit();
}

Result<std::unique_ptr<NpyWriter>> NpyWriter::create(const std::string& path, const std::string& descr,
                                                     const std::vector<int64_t>& shape) {
  auto expected = npy_data_bytes(descr, shape);
  if (!expected.ok())
    return make_error(expected.error().code, "cannot write " + in_quotes(path) + ": " + expected.error().message);
  QEMB_ASSIGN_OR_RETURN(std::string header, npy_header(descr, shape, static_cast<size_t>(*expected)));
  std::unique_ptr<NpyWriter> w(new NpyWriter());
  w->path_ = path;
  w->expected_ = *expected;
  QEMB_ASSIGN_OR_RETURN(w->out_, AtomicFileWriter::create(path));
  QEMB_RETURN_IF_ERROR(w->out_->write(header.data(), header.size()));
  return w;
}

NpyWriter::~NpyWriter() = default;

Status NpyWriter::write(const void* bytes, size_t size) {
  if (size > expected_ - written_)
    return make_error(ErrorCode::kInvalidArgument, "cannot write " + out_->display_name() + ": more than the " +
                                                       std::to_string(expected_) + " data bytes its shape holds");
  QEMB_RETURN_IF_ERROR(out_->write(bytes, size));
  written_ += size;
  return Status::Ok();
}

Status NpyWriter::finish() {
  if (written_ != expected_)
    return make_error(ErrorCode::kInternal, "cannot write " + out_->display_name() + ": " + std::to_string(written_) +
                                                " of its " + std::to_string(expected_) + " data bytes were given");
  return out_->commit();
}

Status write_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
                 const std::vector<uint8_t>& bytes) {
  return write_npy(path, descr, shape, bytes.data(), bytes.size());
}

Status write_npy_u16(const std::string& path, const uint16_t* data, int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0)
    return make_error(ErrorCode::kInvalidArgument, "negative .npy shape for " + in_quotes(path));
  return write_npy(path, "<u2", {rows, cols}, data, static_cast<size_t>(rows * cols) * sizeof(uint16_t));
}

Status write_npy_f32(const std::string& path, const float* data, int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0)
    return make_error(ErrorCode::kInvalidArgument, "negative .npy shape for " + in_quotes(path));
  return write_npy(path, "<f4", {rows, cols}, data, static_cast<size_t>(rows * cols) * sizeof(float));
}

}  // namespace qemb
