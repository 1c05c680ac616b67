// Tensors in files that are not safetensors or GGUF: PyTorch checkpoints
// (torch.save, zip and legacy formats), NumPy .npy arrays and .npz archives.
//
// A torch.save file is a pickle of the object (a state dict) whose tensors
// point at storages kept beside it: in a zip archive (<archive>/data.pkl and
// <archive>/data/<key>, written STORED and 64-byte aligned) or, in the legacy
// format, appended raw after the pickles. The pickle is read by a restricted
// unpickler that understands the opcodes a state dict uses and accepts only
// the globals it needs (collections.OrderedDict, torch's tensor and parameter
// rebuilds, torch storage types), refusing every other one by name, as
// torch.load(weights_only=True) does. It never executes anything.
//
// Every tensor is read in place from the mapped file: views (a storage offset,
// any non-negative strides) and tensors sharing one storage read right.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "qemb/status.h"

namespace qemb {

// ---- the restricted unpickler ----------------------------------------------

// Bounds on what a pickle may build.
inline constexpr int kMaxPickleDepth = 64;             // containers inside containers
inline constexpr size_t kMaxPickleStack = 1u << 20;    // values on the stack (marks included)
inline constexpr size_t kMaxPickleMemo = 1u << 20;     // memo entries
inline constexpr int kMaxTensorRank = 8;

// A tensor as the pickle describes it; its bytes are elsewhere (the storage).
struct PickledTensor {
  std::string name;                   // dotted: nested dicts joined with "."
  std::string dtype;                  // "F32", "F16", "BF16", "F64", "I64", ... (from the storage type)
  int item_size = 0;                  // bytes per element
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;       // in elements
  int64_t storage_offset = 0;         // in elements
  std::string storage_key;            // the zip record data/<key>, or the legacy storage key
  int64_t storage_numel = 0;          // elements the storage holds, as the pickle says
};

// Runs the pickle in `data` (the whole of it, or up to its STOP when `end` is
// given: then *end receives the offset just past STOP) and returns the tensors
// of the state dict it builds, in insertion order. `name` (e.g. "'m.pt'
// data.pkl") starts every error message.
Result<std::vector<PickledTensor>> unpickle_state_dict(const uint8_t* data, size_t size, const std::string& name,
                                                       size_t* end = nullptr);

// ---- zip archives (central directory) --------------------------------------

struct ZipEntry {
  std::string name;
  uint16_t method = 0;       // 0 stored, 8 deflated
  uint16_t flags = 0;
  uint64_t data_offset = 0;  // absolute offset of the entry's bytes in the archive
  uint64_t compressed_size = 0, size = 0;
};
inline constexpr uint8_t kZipMagic[4] = {'P', 'K', 3, 4};

// Reads the central directory (zip64 included) and each entry's local header;
// every entry's bytes are checked to lie inside the archive.
Result<std::vector<ZipEntry>> read_zip_directory(const uint8_t* data, size_t size, const std::string& name);

// ---- files of tensors --------------------------------------------------------

enum class TensorFileKind { kPytorchZip, kPytorchLegacy, kNpy, kNpz };
const char* to_string(TensorFileKind kind);  // "pytorch zip", "pytorch legacy", "npy", "npz"

// The kind `size` bytes at `data` start like (by magic), or false.
bool sniff_tensor_file(const uint8_t* data, size_t size, const std::string& path, TensorFileKind* kind);

struct FileTensor {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", ... or the NumPy descr when it has no such name (">f4")
  int item_size = 0;
  std::vector<int64_t> shape, strides;  // strides in elements
  int64_t offset = 0;                   // first element, in elements from `base`
  const uint8_t* base = nullptr;        // the storage's first byte (in the mapping)
  bool contiguous() const;              // row-major with no gaps
  const uint8_t* first() const { return base + offset * item_size; }
};

class TensorFile {
 public:
  // Maps `path` and reads it as `kind`.
  static Result<TensorFile> open(const std::string& path, TensorFileKind kind);
  // Parses `size` bytes at `data` in place; `keep_alive` (may be null) owns them.
  static Result<TensorFile> from_memory(const uint8_t* data, size_t size, std::shared_ptr<const void> keep_alive,
                                        TensorFileKind kind, std::string name = "<memory>");

  TensorFileKind kind() const { return kind_; }
  const std::string& path() const { return path_; }
  const std::vector<FileTensor>& tensors() const { return tensors_; }
  const FileTensor* find(const std::string& name) const;
  // Rows [row_begin, row_end) of a 2-D F32/F16/BF16 tensor as float32
  // (row-major, any strides).
  Status read_rows_float(const FileTensor& t, int64_t row_begin, int64_t row_end, float* out) const;

 private:
  TensorFile() = default;
  std::shared_ptr<const void> owner_;
  std::string path_;
  TensorFileKind kind_ = TensorFileKind::kPytorchZip;
  std::vector<FileTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace qemb
