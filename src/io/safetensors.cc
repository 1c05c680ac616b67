#include "qemb/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <utility>

#include "core/file.h"
#include "core/ir.h"
#include "core/json_text.h"
#include "core/strings.h"
#include "qemb/half.h"
#include "kernels/half_kernels.h"

namespace qemb {
namespace {

using json = nlohmann::json;

struct DtypeBits {
  const char* name;
  int bits;
};

// Every dtype the safetensors specification defines.
constexpr DtypeBits kDtypes[] = {
    {"BOOL", 8}, {"U8", 8},   {"I8", 8},    {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"I16", 16},
    {"U16", 16}, {"F16", 16}, {"BF16", 16}, {"I32", 32},    {"U32", 32},    {"F32", 32},    {"I64", 64},
    {"U64", 64}, {"F64", 64}, {"F4", 4},    {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"C64", 64},
};

constexpr const char* kFloatDtypesText = "F32, F16, BF16";

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

Error parse_error(const std::string& file, const std::string& what) {
  return make_error(ErrorCode::kParseError, "safetensors file " + in_quotes(file) + ": " + what);
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}


std::string describe(const SafetensorsTensor& t) { return t.name + " " + t.dtype + shape_to_string(t.shape); }

// "a [..], b [..]" capped so a 1000-tensor checkpoint does not flood the terminal.
std::string join_tensors(const std::vector<const SafetensorsTensor*>& list) {
  constexpr size_t kMaxListed = 20;
  std::string out;
  for (size_t i = 0; i < list.size() && i < kMaxListed; ++i) {
    if (i > 0) out += ", ";
    out += describe(*list[i]);
  }
  if (list.size() > kMaxListed) out += ", ... and " + std::to_string(list.size() - kMaxListed) + " more";
  return out;
}

// Reads one non-negative integer that must fit in int64.
bool get_non_negative(const json& v, uint64_t& out) {
  if (!v.is_number_unsigned()) return false;
  out = v.get<uint64_t>();
  return out <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

// How deep a header may nest: a real one is 3 levels deep (header, entry,
// shape); deeper values are refused before anything recurses over them.
constexpr int kMaxHeaderDepth = 16;

Result<json> parse_header_json(const std::string& file, const uint8_t* begin, size_t size) {
  JsonProblem problem;
  json header =
      parse_json_strict(std::string_view(reinterpret_cast<const char*>(begin), size), kMaxHeaderDepth, problem);
  switch (problem.kind) {
    case JsonProblem::Kind::kNone:
      break;
    case JsonProblem::Kind::kSyntax:
      return parse_error(file, "header is not valid UTF-8 JSON (" + problem.detail +
                                   "); the file is corrupt or not a safetensors file");
    case JsonProblem::Kind::kTooDeep:
      return parse_error(file, "header nests JSON deeper than " + std::to_string(kMaxHeaderDepth) +
                                   " levels; the file is corrupt or not a safetensors file");
    case JsonProblem::Kind::kDuplicateKey:
      if (problem.depth == 1) {
        return parse_error(file, "header lists tensor " + in_quotes(problem.detail) +
                                     " more than once; tensor names must be unique");
      }
      return parse_error(file, "header repeats the key " + in_quotes(problem.detail) + " inside an entry");
  }
  if (!header.is_object()) {
    return parse_error(file, std::string("header must be a JSON object, found ") + header.type_name());
  }
  return header;
}

Result<SafetensorsTensor> parse_entry(const std::string& file, const std::string& name, const json& entry,
                                      uint64_t data_offset, uint64_t data_size) {
  auto bad = [&](const std::string& what) { return parse_error(file, "tensor " + in_quotes(name) + ": " + what); };
  if (!entry.is_object()) return bad(std::string("entry must be an object, found ") + entry.type_name());
  SafetensorsTensor t;
  t.name = name;

  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end()) return bad("missing \"dtype\"");
  if (!dtype_it->is_string()) return bad("\"dtype\" must be a string");
  t.dtype = dtype_it->get<std::string>();

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end()) return bad("missing \"shape\"");
  if (!shape_it->is_array()) return bad("\"shape\" must be an array of non-negative integers");
  for (size_t i = 0; i < shape_it->size(); ++i) {
    const json& d = (*shape_it)[i];
    if (d.is_number_integer() && !d.is_number_unsigned()) {
      return bad("negative dimension " + json_brief(d) + " at shape index " + std::to_string(i));
    }
    uint64_t dim = 0;
    if (!get_non_negative(d, dim)) {
      return bad("shape index " + std::to_string(i) + " is " + json_brief(d) + ", not a non-negative integer");
    }
    t.shape.push_back(static_cast<int64_t>(dim));
  }

  auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end()) return bad("missing \"data_offsets\"");
  uint64_t begin = 0, end = 0;
  if (!offsets_it->is_array() || offsets_it->size() != 2 || !get_non_negative((*offsets_it)[0], begin) ||
      !get_non_negative((*offsets_it)[1], end)) {
    return bad("\"data_offsets\" must be [begin, end] with non-negative integers, found " + json_brief(*offsets_it));
  }
  if (begin > end) {
    return bad("data_offsets begin " + std::to_string(begin) + " is after end " + std::to_string(end));
  }
  if (end > data_size) {
    return bad("data_offsets end " + std::to_string(end) + " is past the data region (" + std::to_string(data_size) +
               " bytes); the file is truncated or corrupt");
  }

  const int bits = safetensors_dtype_bits(t.dtype);
  if (bits == 0) {
    return make_error(ErrorCode::kUnsupported, "safetensors file " + in_quotes(file) + ": tensor " + in_quotes(name) +
                                                   " has unknown dtype " + in_quotes(t.dtype) +
                                                   " (known: BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F16, BF16, "
                                                   "F32, F64, F8_E5M2, F8_E4M3, F8_E8M0, F4, F6_E2M3, F6_E3M2, C64)");
  }
  uint64_t total_bits = static_cast<uint64_t>(bits);
  for (int64_t d : t.shape) {
    if (__builtin_mul_overflow(total_bits, static_cast<uint64_t>(d), &total_bits)) {
      return bad("shape " + shape_to_string(t.shape) + " is too large");
    }
  }
  if (total_bits % 8 != 0) {
    return bad("shape " + shape_to_string(t.shape) + " of " + t.dtype + " does not fill whole bytes");
  }
  if (total_bits / 8 != end - begin) {
    return bad("data_offsets cover " + std::to_string(end - begin) + " bytes but " + t.dtype +
               shape_to_string(t.shape) + " needs " + std::to_string(total_bits / 8));
  }
  t.begin = data_offset + begin;
  t.end = data_offset + end;
  return t;
}

// With the vector kernels: a checkpoint is decoded at memory speed.
void decode_to_float(const uint8_t* src, const std::string& dtype, size_t count, float* out) {
  if (count == 0) return;  // an empty tensor's `out` may be null, and memcpy(null, ..., 0) is UB
  if (dtype == "F32") {
    std::memcpy(out, src, count * sizeof(float));
  } else if (dtype == "F16") {
    best_half_kernels().decode_f16(src, count, out);
  } else {  // BF16
    best_half_kernels().decode_bf16(src, count, out);
  }
}

}  // namespace

int safetensors_dtype_bits(const std::string& dtype) {
  for (const auto& d : kDtypes) {
    if (dtype == d.name) return d.bits;
  }
  return 0;
}

bool is_float_convertible_dtype(const std::string& dtype) {
  return dtype == "F32" || dtype == "F16" || dtype == "BF16";
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

int64_t SafetensorsTensor::num_elements() const { return checked_element_count(shape); }

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  QEMB_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> mapped, MappedFile::open(path));
  const uint8_t* data = mapped->data();
  size_t size = mapped->size();
  return from_memory(data, size, std::move(mapped), path);
}

Result<SafetensorsFile> SafetensorsFile::from_bytes(std::vector<uint8_t> bytes, std::string name) {
  auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  return from_memory(owned->data(), owned->size(), owned, std::move(name));
}

Result<SafetensorsFile> SafetensorsFile::from_memory(const uint8_t* data, size_t size,
                                                     std::shared_ptr<const void> keep_alive, std::string name) {
  if (size < 8) {
    return parse_error(name, "file is " + std::to_string(size) +
                                 " bytes, shorter than the 8-byte header length; not a safetensors file");
  }
  const uint64_t header_size = read_u64_le(data);
  if (header_size == 0) return parse_error(name, "header length is 0; not a safetensors file");
  if (header_size > kMaxSafetensorsHeaderBytes) {
    return parse_error(name, "header length " + std::to_string(header_size) + " exceeds the " +
                                 std::to_string(kMaxSafetensorsHeaderBytes) +
                                 "-byte limit; the file is corrupt or not a safetensors file");
  }
  if (header_size > size - 8) {
    return parse_error(name, "header length " + std::to_string(header_size) + " runs past the end of the file (" +
                                 std::to_string(size) + " bytes); the file is truncated or not a safetensors file");
  }
  QEMB_ASSIGN_OR_RETURN(json header, parse_header_json(name, data + 8, header_size));

  SafetensorsFile f;
  f.owner_ = std::move(keep_alive);
  f.data_ = data;
  f.size_ = size;
  f.path_ = name;
  f.header_size_ = header_size;
  const uint64_t data_offset = 8 + header_size;
  const uint64_t data_size = size - data_offset;

  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return parse_error(name, "\"__metadata__\" must be an object of strings");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) {
          return parse_error(
              name, "\"__metadata__\" value for " + in_quotes(m.key()) + " must be a string, found " + json_brief(*m));
        }
        f.metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    QEMB_ASSIGN_OR_RETURN(SafetensorsTensor t, parse_entry(name, it.key(), *it, data_offset, data_size));
    f.tensors_.push_back(std::move(t));
  }

  std::sort(f.tensors_.begin(), f.tensors_.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  for (size_t i = 1; i < f.tensors_.size(); ++i) {
    const SafetensorsTensor& prev = f.tensors_[i - 1];
    const SafetensorsTensor& cur = f.tensors_[i];
    if (cur.begin < prev.end) {
      return parse_error(name, "tensors " + in_quotes(prev.name) + " [" + std::to_string(prev.begin - data_offset) +
                                   ", " + std::to_string(prev.end - data_offset) + ") and " + in_quotes(cur.name) +
                                   " [" + std::to_string(cur.begin - data_offset) + ", " +
                                   std::to_string(cur.end - data_offset) + ") overlap");
    }
  }
  for (size_t i = 0; i < f.tensors_.size(); ++i) f.index_.emplace(f.tensors_[i].name, i);
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Result<const SafetensorsTensor*> SafetensorsFile::find_float_tensor(const std::string& name) const {
  const SafetensorsTensor* t = find(name);
  if (t == nullptr) {
    return make_error(ErrorCode::kNotFound,
                      "safetensors file " + in_quotes(path_) + " has no tensor " + in_quotes(name));
  }
  QEMB_RETURN_IF_ERROR(check_float_dtype(*t));
  return t;
}

Status SafetensorsFile::check_float_dtype(const SafetensorsTensor& t) const {
  if (is_float_convertible_dtype(t.dtype)) return Status::Ok();
  return make_error(ErrorCode::kUnsupported, "tensor " + in_quotes(t.name) + " in " + in_quotes(path_) + " has dtype " +
                                                 t.dtype + "; supported dtypes are " + kFloatDtypesText);
}

Status SafetensorsFile::read_rows_float(const std::string& name, int64_t row_begin, int64_t row_end, float* out) const {
  QEMB_ASSIGN_OR_RETURN(const SafetensorsTensor* t, find_float_tensor(name));
  return read_rows_float(*t, row_begin, row_end, out);
}

Status SafetensorsFile::read_rows_float(const SafetensorsTensor& t, int64_t row_begin, int64_t row_end,
                                        float* out) const {
  QEMB_RETURN_IF_ERROR(check_float_dtype(t));
  if (t.shape.size() != 2) {
    return make_error(ErrorCode::kUnsupported, "tensor " + in_quotes(t.name) + " has shape " +
                                                   shape_to_string(t.shape) + "; reading rows needs a 2-D tensor");
  }
  const int64_t rows = t.shape[0];
  const int64_t cols = t.shape[1];
  if (row_begin < 0 || row_begin > row_end || row_end > rows) {
    return make_error(ErrorCode::kOutOfRange, "rows [" + std::to_string(row_begin) + ", " + std::to_string(row_end) +
                                                  ") are outside tensor " + in_quotes(t.name) + " with " +
                                                  std::to_string(rows) + " rows");
  }
  const size_t element_bytes = static_cast<size_t>(safetensors_dtype_bits(t.dtype) / 8);
  const size_t first = static_cast<size_t>(row_begin) * static_cast<size_t>(cols);
  const size_t count = static_cast<size_t>(row_end - row_begin) * static_cast<size_t>(cols);
  decode_to_float(raw(t) + first * element_bytes, t.dtype, count, out);
  return Status::Ok();
}

Result<std::vector<float>> SafetensorsFile::read_float(const std::string& name) const {
  QEMB_ASSIGN_OR_RETURN(const SafetensorsTensor* t, find_float_tensor(name));
  std::vector<float> out(static_cast<size_t>(t->num_elements()));
  decode_to_float(raw(*t), t->dtype, out.size(), out.data());
  return out;
}

const std::vector<std::string>& embedding_name_suffixes() {
  static const std::vector<std::string> suffixes = {
      "embed_tokens.weight", "tok_embeddings.weight",  "tok_embedding.weight",
      "wte.weight",          "word_embeddings.weight", "token_embd.weight",
  };
  return suffixes;
}

namespace {
bool has_embedding_suffix(const std::string& name) {
  for (const std::string& s : embedding_name_suffixes()) {
    if (name == s) return true;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0 &&
        name[name.size() - s.size() - 1] == '.') {
      return true;
    }
  }
  return false;
}
}  // namespace

Result<std::string> find_embedding_tensor(const SafetensorsFile& f, const std::string& explicit_name) {
  std::vector<const SafetensorsTensor*> two_d;
  for (const SafetensorsTensor& t : f.tensors()) {
    if (t.shape.size() == 2) two_d.push_back(&t);
  }
  const std::string file = in_quotes(f.path());
  const std::string listed = two_d.empty() ? "the file has no 2-D tensors" : "2-D tensors: " + join_tensors(two_d);

  if (!explicit_name.empty()) {
    const SafetensorsTensor* t = f.find(explicit_name);
    if (t == nullptr) {
      std::vector<std::string> names;
      for (const SafetensorsTensor& c : f.tensors()) names.push_back(c.name);
      return make_error(ErrorCode::kNotFound, "no tensor " + in_quotes(explicit_name) + " in " + file + ": " +
                                                  explain_missing_name(explicit_name, names));
    }
    if (t->shape.size() != 2) {
      return make_error(ErrorCode::kUnsupported, "tensor " + in_quotes(explicit_name) + " in " + file + " has shape " +
                                                     shape_to_string(t->shape) +
                                                     "; an embedding table must be 2-D [vocab, dim]");
    }
    return explicit_name;
  }

  std::vector<const SafetensorsTensor*> matches;
  for (const SafetensorsTensor* t : two_d) {
    if (has_embedding_suffix(t->name)) matches.push_back(t);
  }
  if (matches.size() == 1) return matches[0]->name;
  if (matches.empty()) {
    // A model that ties its input embedding to the output head may store the
    // table only as lm_head.weight.
    std::vector<const SafetensorsTensor*> tied;
    for (const SafetensorsTensor* t : two_d)
      if (t->name == "lm_head.weight" || t->name.ends_with(".lm_head.weight")) tied.push_back(t);
    if (tied.size() == 1) return tied[0]->name;
    return make_error(ErrorCode::kNotFound,
                      "no embedding table found in " + file +
                          " (looked for a 2-D tensor named *embed_tokens.weight, "
                          "*tok_embeddings.weight, *tok_embedding.weight, *wte.weight, *word_embeddings.weight or "
                          "*token_embd.weight, or a tied model's *lm_head.weight); " +
                          listed + ". Pass CompileOptions.tensor = NAME");
  }
  return make_error(ErrorCode::kInvalidArgument, "several embedding tables in " + file + ": " + join_tensors(matches) +
                                                     ". Pass CompileOptions.tensor = NAME to choose one");
}

Result<std::vector<uint8_t>> floats_to_dtype_bytes(const float* values, size_t count, const std::string& dtype) {
  std::vector<uint8_t> out;
  if (dtype == "F32") {
    out.resize(count * 4);
    if (count > 0) std::memcpy(out.data(), values, count * 4);
  } else if (dtype == "F16" || dtype == "BF16") {
    out.resize(count * 2);
    const bool f16 = dtype == "F16";
    for (size_t i = 0; i < count; ++i) {
      const uint16_t h = f16 ? float_to_f16(values[i]) : float_to_bf16(values[i]);
      out[2 * i] = static_cast<uint8_t>(h & 0xFF);
      out[2 * i + 1] = static_cast<uint8_t>(h >> 8);
    }
  } else {
    return make_error(ErrorCode::kUnsupported, "cannot encode floats as dtype " + in_quotes(dtype) +
                                                   "; supported dtypes are " + kFloatDtypesText);
  }
  return out;
}

Status write_safetensors(const std::string& path, const std::map<std::string, std::string>& metadata,
                         const std::vector<SafetensorsTensorData>& tensors) {
  auto invalid = [&](const std::string& what) {
    return make_error(ErrorCode::kInvalidArgument, "cannot write safetensors " + in_quotes(path) + ": " + what);
  };
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const SafetensorsTensorData& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") return invalid("invalid tensor name " + in_quotes(t.name));
    if (!names.insert(t.name).second) return invalid("tensor " + in_quotes(t.name) + " appears twice");
    const int bits = safetensors_dtype_bits(t.dtype);
    if (bits == 0) return invalid("tensor " + in_quotes(t.name) + " has unknown dtype " + in_quotes(t.dtype));
    uint64_t total_bits = static_cast<uint64_t>(bits);
    for (int64_t d : t.shape) {
      if (d < 0)
        return invalid("tensor " + in_quotes(t.name) + " has negative dimension in " + shape_to_string(t.shape));
      if (__builtin_mul_overflow(total_bits, static_cast<uint64_t>(d), &total_bits)) {
        return invalid("tensor " + in_quotes(t.name) + " shape is too large");
      }
    }
    if (total_bits % 8 != 0 || total_bits / 8 != t.bytes.size()) {
      return invalid("tensor " + in_quotes(t.name) + " " + t.dtype + shape_to_string(t.shape) + " has " +
                     std::to_string(t.bytes.size()) + " bytes of data, expected " +
                     std::to_string((total_bits + 7) / 8));
    }
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = t.dtype;
    entry["shape"] = t.shape;
    entry["data_offsets"] = {offset, offset + t.bytes.size()};
    header[t.name] = std::move(entry);
    offset += t.bytes.size();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const std::exception& e) {
    return invalid(std::string("names must be valid UTF-8 (") + e.what() + ")");
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the data region starts 8-byte aligned

  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  QEMB_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> out, AtomicFileWriter::create(path));
  QEMB_RETURN_IF_ERROR(out->write(length, sizeof(length)));
  QEMB_RETURN_IF_ERROR(out->write(text.data(), text.size()));
  for (const SafetensorsTensorData& t : tensors) QEMB_RETURN_IF_ERROR(out->write(t.bytes.data(), t.bytes.size()));
  return out->commit();
}

Status copy_with_replaced_tensor(const SafetensorsFile& src, const std::string& name, const float* values,
                                 const std::string& out_path) {
  const SafetensorsTensor* t = src.find(name);
  if (t == nullptr) {
    return make_error(ErrorCode::kNotFound,
                      "safetensors file " + in_quotes(src.path()) + " has no tensor " + in_quotes(name));
  }
  if (!is_float_convertible_dtype(t->dtype)) {
    return make_error(ErrorCode::kUnsupported, "cannot write floats into tensor " + in_quotes(name) + " of dtype " +
                                                   t->dtype + "; supported dtypes are " + kFloatDtypesText);
  }
  if (same_file(src.path(), out_path)) {
    return make_error(ErrorCode::kInvalidArgument, "output " + in_quotes(out_path) + " is the input checkpoint " +
                                                       in_quotes(src.path()) + "; choose a different output path");
  }
  QEMB_ASSIGN_OR_RETURN(std::vector<uint8_t> encoded,
                        floats_to_dtype_bytes(values, static_cast<size_t>(t->num_elements()), t->dtype));
  if (encoded.size() != t->byte_size()) {
    return make_error(ErrorCode::kInternal, "encoded size of " + in_quotes(name) + " does not match the file");
  }
  QEMB_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> out, AtomicFileWriter::create(out_path));
  QEMB_RETURN_IF_ERROR(out->write(src.data(), t->begin));
  QEMB_RETURN_IF_ERROR(out->write(encoded.data(), encoded.size()));
  QEMB_RETURN_IF_ERROR(out->write(src.data() + t->end, src.file_size() - t->end));
  return out->commit();
}

}  // namespace qemb
