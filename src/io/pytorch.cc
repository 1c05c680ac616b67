// PyTorch checkpoints (zip and legacy torch.save), .npy and .npz files as
// tables of tensors read in place from one mapping.
//
// The zip reader is a central-directory reader for stored entries: torch
// writes every record STORED and 64-byte aligned and np.savez writes STORED
// members, and reading them in place needs each entry's data offset in the
// mapping, which is what this computes (with zip64). A deflated member
// (np.savez_compressed) is refused with what to do instead.
#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <functional>
#include <unordered_map>

#include "core/file.h"
#include "io/pickle_plain.h"
#include "qemb/half.h"
#include "qemb/npy.h"
#include "qemb/pytorch.h"
#include "qemb/safetensors.h"

namespace qemb {
namespace {

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

uint64_t rd(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int k = n - 1; k >= 0; --k) v = (v << 8) | p[k];
  return v;
}

Error zip_error(const std::string& name, const std::string& what) {
  return make_error(ErrorCode::kParseError, "zip archive " + in_quotes(name) + ": " + what);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The 8-byte legacy magic number: LONG1 of 10 bytes, 0x1950a86a20f9469cfc6c.
constexpr uint8_t kLegacyStart[4] = {0x80, 0x02, 0x8a, 0x0a};
constexpr uint8_t kLegacyMagic[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

}  // namespace

Result<std::vector<ZipEntry>> read_zip_directory(const uint8_t* data, size_t size, const std::string& name) {
  // The end of central directory record: 22 bytes and a comment of at most 65535.
  if (size < 22) return zip_error(name, "is " + std::to_string(size) + " bytes, too short for a zip archive");
  size_t eocd = size;
  const size_t lowest = size > 22 + 65535 ? size - 22 - 65535 : 0;
  for (size_t at = size - 22 + 1; at-- > lowest;) {
    if (rd(data + at, 4) == 0x06054b50 && at + 22 + rd(data + at + 20, 2) == size) {
      eocd = at;
      break;
    }
  }
  if (eocd == size) return zip_error(name, "has no end of central directory record (truncated or not a zip file)");
  uint64_t count = rd(data + eocd + 10, 2), cd_size = rd(data + eocd + 12, 4), cd_offset = rd(data + eocd + 16, 4);
  if (count == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {
    if (eocd < 20 || rd(data + eocd - 20, 4) != 0x07064b50)
      return zip_error(name, "needs a zip64 end of central directory locator, which is missing");
    const uint64_t z64 = rd(data + eocd - 20 + 8, 8);
    if (z64 > size || size - z64 < 56 || rd(data + z64, 4) != 0x06064b50)
      return zip_error(name, "has a zip64 end of central directory record outside the file");
    count = rd(data + z64 + 32, 8);
    cd_size = rd(data + z64 + 40, 8);
    cd_offset = rd(data + z64 + 48, 8);
  }
  if (cd_offset > size || cd_size > size - cd_offset)
    return zip_error(name, "has a central directory that runs past the end of the file (truncated)");
  if (count > cd_size / 46) return zip_error(name, "claims " + std::to_string(count) + " entries in a central directory of " +
                                                       std::to_string(cd_size) + " bytes");
  std::vector<ZipEntry> entries;
  entries.reserve(static_cast<size_t>(count));
  uint64_t at = cd_offset;
  const uint64_t cd_end = cd_offset + cd_size;
  for (uint64_t k = 0; k < count; ++k) {
    if (cd_end - at < 46 || rd(data + at, 4) != 0x02014b50)
      return zip_error(name, "has a malformed central directory entry " + std::to_string(k));
    const uint8_t* c = data + at;
    ZipEntry e;
    e.flags = static_cast<uint16_t>(rd(c + 8, 2));
    e.method = static_cast<uint16_t>(rd(c + 10, 2));
    e.compressed_size = rd(c + 20, 4);
    e.size = rd(c + 24, 4);
    const uint64_t name_len = rd(c + 28, 2), extra_len = rd(c + 30, 2), comment_len = rd(c + 32, 2);
    uint64_t local = rd(c + 42, 4);
    if (cd_end - at - 46 < name_len + extra_len + comment_len)
      return zip_error(name, "has a central directory entry " + std::to_string(k) + " that runs past the directory");
    e.name.assign(reinterpret_cast<const char*>(c + 46), static_cast<size_t>(name_len));
    // zip64 extended information: the fields that are 0xFFFFFFFF above, in order.
    const uint8_t* x = c + 46 + name_len;
    for (uint64_t off = 0; off + 4 <= extra_len;) {
      const uint64_t id = rd(x + off, 2), len = rd(x + off + 2, 2);
      if (off + 4 + len > extra_len) break;
      if (id == 0x0001) {
        const uint8_t* f = x + off + 4;
        uint64_t used = 0;
        for (uint64_t* field : {&e.size, &e.compressed_size, &local}) {
          if (*field != 0xFFFFFFFF) continue;
          if (used + 8 > len) return zip_error(name, "entry " + in_quotes(e.name) + " has a short zip64 field");
          *field = rd(f + used, 8);
          used += 8;
        }
      }
      off += 4 + len;
    }
    if (local > size || size - local < 30 || rd(data + local, 4) != 0x04034b50)
      return zip_error(name, "entry " + in_quotes(e.name) + " has no local header where the directory says");
    const uint64_t local_name = rd(data + local + 26, 2), local_extra = rd(data + local + 28, 2);
    e.data_offset = local + 30 + local_name + local_extra;
    if (e.data_offset > size || e.compressed_size > size - e.data_offset)
      return zip_error(name, "entry " + in_quotes(e.name) + " runs past the end of the file (truncated)");
    if (e.method == 0 && e.compressed_size != e.size)
      return zip_error(name, "stored entry " + in_quotes(e.name) + " has two different sizes");
    entries.push_back(std::move(e));
    at += 46 + name_len + extra_len + comment_len;
  }
  return entries;
}

const char* to_string(TensorFileKind kind) {
  switch (kind) {
    case TensorFileKind::kPytorchZip: return "pytorch zip";
    case TensorFileKind::kPytorchLegacy: return "pytorch legacy";
    case TensorFileKind::kNpy: return "npy";
    case TensorFileKind::kNpz: return "npz";
  }
  return "?";
}

bool sniff_tensor_file(const uint8_t* data, size_t size, const std::string& path, TensorFileKind* kind) {
  if (size >= 4 && std::memcmp(data, kZipMagic, 4) == 0) {
    *kind = ends_with(path, ".npz") ? TensorFileKind::kNpz : TensorFileKind::kPytorchZip;
    return true;
  }
  if (size >= 14 && std::memcmp(data, kLegacyStart, 4) == 0 && std::memcmp(data + 4, kLegacyMagic, 10) == 0) {
    *kind = TensorFileKind::kPytorchLegacy;
    return true;
  }
  if (has_npy_magic(data, size)) {
    *kind = TensorFileKind::kNpy;
    return true;
  }
  return false;
}

bool FileTensor::contiguous() const {
  int64_t expect = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && strides[d] != expect) return false;
    expect *= shape[d];
  }
  return true;
}

namespace {

// dtype names for NumPy descrs that have one.
std::string npy_dtype_name(const std::string& descr, int* item_size) {
  auto d = parse_npy_dtype(descr);
  if (!d.ok()) return descr;
  *item_size = d->item_size;
  if (d->byte_order == '>') return descr;  // big-endian: named as NumPy names it, and refused
  switch (d->kind) {
    case 'f': return "F" + std::to_string(8 * d->item_size);
    case 'i': return "I" + std::to_string(8 * d->item_size);
    case 'u': return "U" + std::to_string(8 * d->item_size);
    case 'b': return "BOOL";
    case 'c': return "C" + std::to_string(8 * d->item_size);
  }
  return descr;
}

Status add_npy(const uint8_t* data, size_t size, const std::string& tensor, const std::string& label,
               std::vector<FileTensor>& out) {
  QEMB_ASSIGN_OR_RETURN(NpyHeader h, parse_npy_header(data, size, label));
  FileTensor t;
  t.name = tensor;
  t.dtype = npy_dtype_name(h.dtype, &t.item_size);
  t.shape = h.shape;
  t.strides.assign(h.shape.size(), 1);
  int64_t stride = 1;
  if (h.fortran_order) {
    for (size_t d = 0; d < h.shape.size(); ++d) {
      t.strides[d] = stride;
      stride *= h.shape[d];
    }
  } else {
    for (size_t d = h.shape.size(); d-- > 0;) {
      t.strides[d] = stride;
      stride *= h.shape[d];
    }
  }
  t.base = data + h.data_offset;
  out.push_back(std::move(t));
  return Status::Ok();
}

struct StorageRecord {
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
};

// Places the pickled tensors on their storages, checking each storage's
// record holds every element the pickle says it has.
Status place_tensors(const std::vector<PickledTensor>& pickled,
                     const std::function<Result<StorageRecord>(const std::string& key)>& record,
                     const std::string& file, std::vector<FileTensor>& out) {
  for (const PickledTensor& p : pickled) {
    QEMB_ASSIGN_OR_RETURN(StorageRecord r, record(p.storage_key));
    uint64_t needed = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(p.storage_numel), static_cast<uint64_t>(p.item_size), &needed) ||
        needed > r.bytes)
      return make_error(ErrorCode::kParseError,
                        in_quotes(file) + ": tensor " + in_quotes(p.name) + " says its storage " + in_quotes(p.storage_key) +
                            " holds " + std::to_string(p.storage_numel) + " elements of " +
                            std::to_string(p.item_size) + " bytes, but the file has " + std::to_string(r.bytes) +
                            " bytes for it; the checkpoint is corrupt or truncated");
    FileTensor t;
    t.name = p.name;
    t.dtype = p.dtype;
    t.item_size = p.item_size;
    t.shape = p.shape;
    t.strides = p.strides;
    t.offset = p.storage_offset;
    t.base = r.data;
    out.push_back(std::move(t));
  }
  return Status::Ok();
}

Status open_torch_zip(const uint8_t* data, size_t size, const std::string& file, std::vector<FileTensor>& out) {
  QEMB_ASSIGN_OR_RETURN(std::vector<ZipEntry> entries, read_zip_directory(data, size, file));
  const ZipEntry* pkl = nullptr;
  for (const ZipEntry& e : entries) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      if (pkl != nullptr)
        return make_error(ErrorCode::kParseError, in_quotes(file) + " holds two pickles (" + pkl->name + ", " + e.name +
                                                      "); not one torch.save checkpoint");
      pkl = &e;
    }
  }
  if (pkl == nullptr)
    return make_error(ErrorCode::kParseError,
                      in_quotes(file) + " is a zip archive without <archive>/data.pkl; not a torch.save checkpoint");
  const std::string prefix = pkl->name.substr(0, pkl->name.size() - std::strlen("data.pkl"));
  std::unordered_map<std::string, const ZipEntry*> by_name;
  for (const ZipEntry& e : entries) by_name.emplace(e.name, &e);
  auto stored = [&](const ZipEntry& e) -> Status {
    if (e.method != 0 || (e.flags & 1))
      return make_error(ErrorCode::kUnsupported, in_quotes(file) + ": record " + in_quotes(e.name) +
                                                     " is compressed or encrypted; torch.save writes records stored, "
                                                     "so this archive was rewritten by another tool");
    return Status::Ok();
  };
  if (auto it = by_name.find(prefix + "byteorder"); it != by_name.end()) {
    QEMB_RETURN_IF_ERROR(stored(*it->second));
    const std::string order(reinterpret_cast<const char*>(data + it->second->data_offset),
                            static_cast<size_t>(it->second->size));
    if (order != "little")
      return make_error(ErrorCode::kUnsupported, in_quotes(file) + " was saved on a " + order +
                                                     "-endian machine; qemb reads little-endian checkpoints");
  }
  QEMB_RETURN_IF_ERROR(stored(*pkl));
  QEMB_ASSIGN_OR_RETURN(std::vector<PickledTensor> pickled,
                        unpickle_state_dict(data + pkl->data_offset, static_cast<size_t>(pkl->size),
                                            in_quotes(file) + " " + pkl->name));
  auto record = [&](const std::string& key) -> Result<StorageRecord> {
    auto it = by_name.find(prefix + "data/" + key);
    if (it == by_name.end())
      return make_error(ErrorCode::kParseError, in_quotes(file) + " has no record " + in_quotes(prefix + "data/" + key) +
                                                    " for a storage its pickle names; the checkpoint is incomplete");
    QEMB_RETURN_IF_ERROR(stored(*it->second));
    return StorageRecord{data + it->second->data_offset, it->second->size};
  };
  return place_tensors(pickled, record, file, out);
}

Status open_torch_legacy(const uint8_t* data, size_t size, const std::string& file, std::vector<FileTensor>& out) {
  size_t at = 0;
  auto next = [&](const char* what) -> Result<PlainPickle> {
    QEMB_ASSIGN_OR_RETURN(PlainPickle p, unpickle_plain(data + at, size - at, in_quotes(file) + " " + what));
    at += p.end;
    return p;
  };
  // The magic number pickle (an 80-bit int, checked by the caller) ends with STOP.
  if (size < 15 || data[14] != '.')
    return make_error(ErrorCode::kParseError, in_quotes(file) + ": the legacy magic number pickle is malformed");
  at = 15;
  QEMB_ASSIGN_OR_RETURN(PlainPickle protocol, next("(protocol version pickle)"));
  if (!protocol.is_int || protocol.int_value != 1001)
    return make_error(ErrorCode::kUnsupported, in_quotes(file) + " is a legacy torch.save file of protocol version " +
                                                   (protocol.is_int ? std::to_string(protocol.int_value) : "?") +
                                                   "; qemb reads version 1001");
  QEMB_RETURN_IF_ERROR(next("(system info pickle)").status());
  size_t used = 0;
  QEMB_ASSIGN_OR_RETURN(std::vector<PickledTensor> pickled,
                        unpickle_state_dict(data + at, size - at, in_quotes(file) + " (object pickle)", &used));
  at += used;
  QEMB_ASSIGN_OR_RETURN(PlainPickle keys, next("(storage keys pickle)"));
  if (!keys.is_string_list)
    return make_error(ErrorCode::kParseError, in_quotes(file) + ": the storage keys pickle is not a list of strings");
  // Each storage: an 8-byte little-endian element count, then its bytes.
  std::unordered_map<std::string, int> item_size;
  for (const PickledTensor& p : pickled) item_size[p.storage_key] = p.item_size;
  std::unordered_map<std::string, StorageRecord> records;
  for (const std::string& key : keys.strings) {
    if (size - at < 8)
      return make_error(ErrorCode::kParseError, in_quotes(file) + " ends before storage " + in_quotes(key) +
                                                    " (truncated)");
    const uint64_t numel = rd(data + at, 8);
    at += 8;
    auto it = item_size.find(key);
    if (it == item_size.end())
      return make_error(ErrorCode::kUnsupported, in_quotes(file) + ": storage " + in_quotes(key) +
                                                     " belongs to no tensor of the state dict, so its element size "
                                                     "is unknown; save the state dict alone");
    const uint64_t item = static_cast<uint64_t>(it->second);
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(numel, item, &bytes) || bytes > size - at)
      return make_error(ErrorCode::kParseError, in_quotes(file) + ": storage " + in_quotes(key) + " of " +
                                                    std::to_string(numel) + " elements runs past the end of the file "
                                                    "(truncated)");
    if (!records.emplace(key, StorageRecord{data + at, bytes}).second)
      return make_error(ErrorCode::kParseError, in_quotes(file) + " lists storage " + in_quotes(key) + " twice");
    at += static_cast<size_t>(bytes);
  }
  auto record = [&](const std::string& key) -> Result<StorageRecord> {
    auto it = records.find(key);
    if (it == records.end())
      return make_error(ErrorCode::kParseError, in_quotes(file) + " has no storage " + in_quotes(key) +
                                                    " for a tensor its pickle names; the checkpoint is incomplete");
    return it->second;
  };
  return place_tensors(pickled, record, file, out);
}

Status open_npz(const uint8_t* data, size_t size, const std::string& file, std::vector<FileTensor>& out) {
  QEMB_ASSIGN_OR_RETURN(std::vector<ZipEntry> entries, read_zip_directory(data, size, file));
  for (const ZipEntry& e : entries) {
    if (!ends_with(e.name, ".npy")) continue;
    const std::string tensor = e.name.substr(0, e.name.size() - 4);
    if (e.method != 0 || (e.flags & 1))
      return make_error(ErrorCode::kUnsupported,
                        in_quotes(file) + ": array " + in_quotes(tensor) +
                            " is compressed (np.savez_compressed); qemb reads arrays in place and does not inflate "
                            "them: save with np.savez, or the table alone with np.save");
    QEMB_RETURN_IF_ERROR(add_npy(data + e.data_offset, static_cast<size_t>(e.size), tensor,
                                 file + ":" + e.name, out));
  }
  if (out.empty())
    return make_error(ErrorCode::kParseError, in_quotes(file) + " holds no .npy arrays; not a NumPy .npz file");
  return Status::Ok();
}

template <typename Decode>
void gather_rows(const FileTensor& t, int64_t b, int64_t e, float* out, Decode decode) {
  const int64_t cols = t.shape[1];
  for (int64_t r = b; r < e; ++r)
    for (int64_t c = 0; c < cols; ++c)
      *out++ = decode(t.base + static_cast<size_t>(t.offset + r * t.strides[0] + c * t.strides[1]) *
                                   static_cast<size_t>(t.item_size));
}

}  // namespace

Result<TensorFile> TensorFile::from_memory(const uint8_t* data, size_t size, std::shared_ptr<const void> keep_alive,
                                           TensorFileKind kind, std::string name) {
  TensorFile f;
  f.owner_ = std::move(keep_alive);
  f.path_ = std::move(name);
  f.kind_ = kind;
  switch (kind) {
    case TensorFileKind::kPytorchZip: QEMB_RETURN_IF_ERROR(open_torch_zip(data, size, f.path_, f.tensors_)); break;
    case TensorFileKind::kPytorchLegacy:
      if (size < 14 || std::memcmp(data, kLegacyStart, 4) != 0 || std::memcmp(data + 4, kLegacyMagic, 10) != 0)
        return make_error(ErrorCode::kParseError, in_quotes(f.path_) + " does not start with torch.save's legacy magic "
                                                                    "number; not a PyTorch checkpoint");
      QEMB_RETURN_IF_ERROR(open_torch_legacy(data, size, f.path_, f.tensors_));
      break;
    case TensorFileKind::kNpy: {
      std::string stem = std::filesystem::path(f.path_).stem().string();
      if (stem.empty()) stem = "array";
      QEMB_RETURN_IF_ERROR(add_npy(data, size, stem, f.path_, f.tensors_));
      break;
    }
    case TensorFileKind::kNpz: QEMB_RETURN_IF_ERROR(open_npz(data, size, f.path_, f.tensors_)); break;
  }
  for (size_t k = 0; k < f.tensors_.size(); ++k) {
    FileTensor& t = f.tensors_[k];
    if (t.name.empty()) t.name = "tensor";  // torch.save of one tensor
    if (!f.index_.emplace(t.name, k).second)
      return make_error(ErrorCode::kParseError, in_quotes(f.path_) + " names two tensors " + in_quotes(t.name));
  }
  return f;
}

Result<TensorFile> TensorFile::open(const std::string& path, TensorFileKind kind) {
  QEMB_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::open(path));
  return from_memory(file->data(), file->size(), file, kind, path);
}

const FileTensor* TensorFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Status TensorFile::read_rows_float(const FileTensor& t, int64_t row_begin, int64_t row_end, float* out) const {
  if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16")
    return make_error(ErrorCode::kUnsupported, "tensor " + in_quotes(t.name) + " has dtype " + t.dtype +
                                                   "; qemb reads F32, F16 and BF16 embeddings");
  if (t.shape.size() != 2)
    return make_error(ErrorCode::kUnsupported, "tensor " + in_quotes(t.name) + " has shape " + shape_to_string(t.shape) +
                                                   "; reading rows needs a 2-D tensor");
  if (row_begin < 0 || row_begin > row_end || row_end > t.shape[0])
    return make_error(ErrorCode::kOutOfRange, "rows [" + std::to_string(row_begin) + ", " + std::to_string(row_end) +
                                                  ") are outside tensor " + in_quotes(t.name) + " with " +
                                                  std::to_string(t.shape[0]) + " rows");
  if (t.dtype == "F32") {
    gather_rows(t, row_begin, row_end, out, [](const uint8_t* p) {
      uint32_t u;
      std::memcpy(&u, p, 4);
      return bits_to_float(u);
    });
  } else if (t.dtype == "F16") {
    gather_rows(t, row_begin, row_end, out, [](const uint8_t* p) {
      return f16_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8)));
    });
  } else {
    gather_rows(t, row_begin, row_end, out, [](const uint8_t* p) {
      return bf16_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8)));
    });
  }
  return Status::Ok();
}

}  // namespace qemb
