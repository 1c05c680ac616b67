// A checkpoint's tensors addressed by dotted paths, for reading and writing
// alike. The checkpoint's names ("model.layers.0.embed.weight") are split at
// '.' into a tree of components; get() and set() walk that tree with one
// shared resolver, so a path that reads a tensor writes the same tensor. (The
// public code this mirrors read nested paths but wrote a flat attribute
// literally named "a.b.c".) set() only ever replaces an existing tensor's
// values; it never creates an entry.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qemb/safetensors.h"
#include "qemb/status.h"

namespace qemb {

// A tensor's float32 values, row-major, with its shape.
struct FloatTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

struct ParamInfo {
  std::string name;  // the full dotted name, as in the checkpoint
  std::string dtype;
  std::vector<int64_t> shape;
};

class ParamStore {
 public:
  // Opens (memory-maps) a safetensors checkpoint and builds the component tree.
  static Result<ParamStore> open(const std::string& path);
  static Result<ParamStore> from_file(SafetensorsFile file);

  ParamStore(ParamStore&&) noexcept;
  ParamStore& operator=(ParamStore&&) noexcept;
  ~ParamStore();

  const SafetensorsFile& file() const { return file_; }
  // Every tensor name, in file order (set() never adds one).
  std::vector<std::string> names() const;

  // The tensor a dotted path names. Errors (the same for get and set):
  //  - kNotFound: a component is missing; the message names the first missing
  //    component, the part of the path that exists, and the closest existing
  //    names at that level;
  //  - kInvalidArgument: the path is empty, or names a module (a prefix such
  //    as "model.layers.0") rather than a tensor; the message lists its members.
  Result<ParamInfo> info(const std::string& path) const;
  // The members of a module path ("" is the root), sorted.
  Result<std::vector<std::string>> children(const std::string& module_path) const;

  // The tensor's current values as float32: what set() stored, else the
  // checkpoint's (F32, F16, BF16; other dtypes are kUnsupported).
  Result<FloatTensor> get(const std::string& path) const;
  // Replaces the tensor's values. The shape must equal the tensor's shape and
  // the value count its element count (kInvalidArgument otherwise); the dtype
  // must be F32, F16 or BF16 (kUnsupported). On save the values are converted
  // to the tensor's own dtype, rounding to nearest even.
  Status set(const std::string& path, FloatTensor tensor);

  // True when set() replaced the tensor at `path` (false for unknown paths).
  bool is_modified(const std::string& path) const;
  // Full names of the tensors set() replaced, in file order.
  std::vector<std::string> modified() const;

  // Writes a copy of the checkpoint in which only the data of modified tensors
  // differ: the header, the __metadata__, every other tensor and the layout
  // stay byte-identical. Atomic; refuses to overwrite the source file.
  Status save(const std::string& out_path) const;

 private:
  struct Node;
  ParamStore(SafetensorsFile file, std::unique_ptr<Node> root);
  // The one resolver behind info, get and set: returns the tensor's index in
  // file_.tensors().
  Result<size_t> resolve(const std::string& path) const;
  Result<const Node*> resolve_node(const std::string& path) const;

  SafetensorsFile file_;
  std::unique_ptr<Node> root_;
  std::map<size_t, std::vector<float>> replaced_;  // tensor index -> new values
};

// Splits a dotted path at every '.'; empty components are kept, so a name is
// always rebuilt by joining its components with '.'.
std::vector<std::string> split_dotted_path(const std::string& path);

}  // namespace qemb
