// compile_array: the compile pipeline over a table the caller holds in memory.
#include <cstring>

#include "qemb/compiler.h"
#include "qemb/half.h"
#include "compiler/compile_stream.h"

namespace qemb {
namespace {

// Rows of an F32, F16 or BF16 array, converted a chunk at a time, so a half
// table is never copied whole into float32.
class MemoryRows final : public RowSource {
 public:
  MemoryRows(const void* data, int bits, bool bf16, int64_t rows, int64_t dim)
      : data_(static_cast<const uint8_t*>(data)), bits_(bits), bf16_(bf16), rows_(rows), dim_(dim) {}
  int64_t rows() const override { return rows_; }
  int64_t dim() const override { return dim_; }
  Status read(int64_t begin, int64_t end, float* out) const override {
    const size_t n = static_cast<size_t>((end - begin) * dim_);
    const size_t first = static_cast<size_t>(begin * dim_);
    if (bits_ == 32) {
      std::memcpy(out, data_ + first * 4, n * sizeof(float));
      return Status::Ok();
    }
    const uint8_t* p = data_ + first * 2;
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, p + i * 2, 2);
      out[i] = bf16_ ? bf16_to_float(h) : f16_to_float(h);
    }
    return Status::Ok();
  }

 private:
  const uint8_t* data_;
  int bits_;
  bool bf16_;
  int64_t rows_, dim_;
};

}  // namespace

Result<CompiledEmbedding> compile_array(const void* data, const std::string& dtype, int64_t rows, int64_t dim,
                                        const CompileOptions& options, const std::string& out_path,
                                        TableSource source) {
  int bits = 0;
  if (dtype == "F32") bits = 32;
  if (dtype == "F16" || dtype == "BF16") bits = 16;
  if (bits == 0)
    return make_error(ErrorCode::kUnsupported,
                      "the table's dtype is " + dtype + "; qemb compiles F32, F16 and BF16 tables");
  if (data == nullptr && rows > 0 && dim > 0) return make_error(ErrorCode::kInvalidArgument, "the table's data pointer is null");
  if (source.file.empty()) source.file = "<memory>";
  if (source.dtype.empty()) source.dtype = dtype;
  QEMB_ASSIGN_OR_RETURN(TargetVersion target, discover_target_version(options.qnn_sdk_version));
  // Opened before the long part, so an unwritable path fails at once.
  QEMB_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactStream> out, ArtifactStream::create(out_path));
  QEMB_ASSIGN_OR_RETURN(CompiledEmbedding compiled,
                        compile_rows(MemoryRows(data, bits, dtype == "BF16", rows, dim), options, target, *out, source));
  QEMB_RETURN_IF_ERROR(out->finish(*compiled.runtime_graph, compiled.metadata));
  return compiled;
}

}  // namespace qemb
