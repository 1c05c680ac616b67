// Opening a checkpoint whatever its form: one safetensors file, a sharded
// Hugging Face checkpoint (model.safetensors.index.json, whose weight_map names
// the shard of each tensor), a checkpoint folder, a GGUF file, a PyTorch
// checkpoint (torch.save zip or legacy file, or pytorch_model.bin.index.json
// and its shards), or a NumPy .npy / .npz file. compile,
// eval, fakequant and export-onnx all open their input here.
//
// Shards are memory-mapped only when a tensor in them is asked for, and each
// is checked against the index when it is mapped.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qemb/gguf.h"
#include "qemb/pytorch.h"
#include "qemb/safetensors.h"
#include "qemb/status.h"

namespace qemb {

enum class CheckpointFormat {
  kSafetensors,         // one .safetensors file (given directly, or the only one in a folder)
  kShardedSafetensors,  // an index JSON and its shards
  kGguf,
  kPytorch,         // one torch.save file (.bin, .pt, .pth; zip or legacy), by its magic
  kShardedPytorch,  // pytorch_model.bin.index.json and its .bin shards
  kNpy,             // one NumPy .npy array
  kNpz,             // a NumPy .npz archive (np.savez), one member per table
};
// "safetensors", "sharded safetensors", "gguf", "pytorch", "sharded pytorch", "npy", "npz"
const char* to_string(CheckpointFormat format);

inline constexpr const char* kSafetensorsIndexName = "model.safetensors.index.json";

struct CheckpointTensorInfo {
  std::string name;
  std::string dtype;           // safetensors dtype, or the GGUF type name ("Q8_0"); PyTorch and NumPy
                               // tensors use the safetensors names ("F32", "F16", "BF16", "I64")
  std::vector<int64_t> shape;  // row-major, outermost first (GGUF dims reversed)
  std::string file;            // the file (shard) that holds it
};

// A 2-D table of a checkpoint, read as float32 a range of rows at a time.
// Keeps its file mapped; thread-safe.
class CheckpointTable {
 public:
  const CheckpointTensorInfo& info() const { return info_; }
  int64_t rows() const { return info_.shape[0]; }
  int64_t dim() const { return info_.shape[1]; }
  // True when the source is block-quantized (GGUF Q8_0, Q4_K, ...): the floats are
  // its exact dequantization, not the original weights.
  bool source_quantized() const;
  Status read_rows(int64_t begin, int64_t end, float* out) const;
  // Rows [begin, end) in the mapping when they are float32 there (a
  // safetensors F32 tensor at a float's alignment), else nullptr.
  const float* rows_in_place(int64_t begin, int64_t end) const;
  // Row `row` in place (in the mapping) when the table is BF16 on a
  // little-endian machine, else nullptr (see RowSource::bf16_row).
  const uint8_t* bf16_row(int64_t row) const;
  // Hints that rows [begin, end) will not be read again soon (drops their pages).
  void release(int64_t begin, int64_t end) const;

 private:
  friend class Checkpoint;
  // The first row in the mapping when rows lie there one after another, else nullptr.
  const uint8_t* in_place_base() const;
  CheckpointTensorInfo info_;
  std::shared_ptr<const SafetensorsFile> st_;
  const SafetensorsTensor* st_tensor_ = nullptr;
  std::shared_ptr<const GgufFile> gguf_;
  const GgufTensor* gguf_tensor_ = nullptr;
  std::shared_ptr<const TensorFile> tf_;  // PyTorch, .npy, .npz
  const FileTensor* tf_tensor_ = nullptr;
  uint64_t row_bytes_ = 0;
};

// A table chosen from a checkpoint: the tensor it reads and its name (the
// artifact's table name).
struct NamedTable {
  std::string tensor, name;
  bool operator==(const NamedTable&) const = default;
};

class Checkpoint {
 public:
  // Detects the form of `path`: a folder (its model.safetensors.index.json,
  // else its one *.safetensors, else its one *.gguf, else its
  // pytorch_model.bin.index.json, else its pytorch_model.bin or one
  // .bin/.pt/.pth), a *.index.json file (safetensors, or PyTorch when every
  // shard is .bin/.pt/.pth), a GGUF file, a torch.save file (zip or legacy),
  // a .npy or .npz file (each by its magic) or a safetensors file. An index is parsed and
  // every shard it names must exist; no shard is mapped yet.
  static Result<Checkpoint> open(const std::string& path);

  CheckpointFormat format() const;
  const std::string& path() const;    // as given
  // The folder a fakequant copy mirrors: the folder given, or the index's
  // folder; empty for a lone file given by its path.
  const std::string& folder() const;
  const std::string& index_path() const;  // sharded only
  // The file that holds the tensors (lone file), for messages and provenance.
  const std::string& file() const;

  // Every tensor name: in index order (sharded), file order otherwise.
  std::vector<std::string> tensor_names() const;
  // Shard file names in index order (sharded only).
  std::vector<std::string> shard_files() const;
  // The file holding `name` (a shard's path); kNotFound naming the closest names.
  Result<std::string> file_of(const std::string& name) const;
  // Maps the shard holding `name` (once) and returns its info.
  Result<CheckpointTensorInfo> info(const std::string& name) const;
  // The safetensors file holding `name`, mapped and checked against the index.
  Result<std::shared_ptr<const SafetensorsFile>> safetensors_of(const std::string& name) const;
  const GgufFile* gguf() const;  // GGUF only
  // The PyTorch / NumPy file holding `name` (mapped once, a shard checked
  // against the index when it is mapped).
  Result<std::shared_ptr<const TensorFile>> tensor_file_of(const std::string& name) const;
  // The lone safetensors file (kSafetensors only).
  Result<std::shared_ptr<const SafetensorsFile>> lone_safetensors() const;

  // The embedding's name. explicit_name empty = detect it: the single 2-D
  // tensor whose name ends with an embedding suffix; when there is none, a
  // tied model's lm_head.weight (unless config.json says
  // "tie_word_embeddings": false). Same errors as find_embedding_tensor.
  Result<std::string> find_embedding(const std::string& explicit_name) const;
  // Several tables: each spec is a tensor name or a glob (*, ?, [...]) over
  // the names; the result keeps the specs' order (a glob's matches in the
  // checkpoint's order, tensor_names()), without duplicates. A name
  // that is missing, a glob that matches nothing, or a match that is not 2-D
  // fails. An empty list means the detected embedding.
  Result<std::vector<std::string>> select_tables(const std::vector<std::string>& specs) const;
  // The same, where a spec may also be "TENSOR=NAME" (split at the last '=',
  // unless the whole spec is a tensor's name): the table NAME reads TENSOR,
  // which must then be one tensor (a glob matching one is fine). Other tables
  // are named by their tensor. Names must be unique; an empty list means the
  // detected embedding.
  Result<std::vector<NamedTable>> select_named_tables(const std::vector<std::string>& specs) const;
  // The 2-D float table `name` (F32/F16/BF16, GGUF also its block types:
  // gguf_readable_types()).
  Result<CheckpointTable> table(const std::string& name) const;

  struct State;

 private:
  explicit Checkpoint(std::shared_ptr<State> state) : s_(std::move(state)) {}
  std::shared_ptr<State> s_;
};

}  // namespace qemb
