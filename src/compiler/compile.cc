#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "qemb/artifact.h"
#include "qemb/compiler.h"
#include "qemb/file.h"
#include "qemb/passes.h"
#include "qemb/safetensors.h"

namespace qemb {

const char* to_string(CompileMode m) {
  switch (m) {
    case CompileMode::kMaterialize: return "materialize";
    case CompileMode::kFused: return "fused";
    case CompileMode::kAuto: return "auto";
  }
  return "?";
}

Result<CompileMode> parse_compile_mode(const std::string& s) {
  if (s == "materialize") return CompileMode::kMaterialize;
  if (s == "fused") return CompileMode::kFused;
  if (s == "auto") return CompileMode::kAuto;
  return make_error(ErrorCode::kInvalidArgument,
                    "unknown mode '" + s + "': expected materialize, fused or auto");
}

namespace {

std::string mib(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

namespace {

// Runs fn(begin, end) over row chunks on `threads` workers while the calling
// thread reports progress. Returns the error of the lowest failing chunk, so
// the message does not depend on thread timing.
Status parallel_rows(int64_t rows, int threads, const char* phase, const CompileOptions& options,
                     const std::function<Status(int64_t, int64_t)>& fn) {
  const int64_t chunk = 256;
  const int64_t chunks = (rows + chunk - 1) / chunk;
  std::atomic<int64_t> next{0}, done_rows{0};
  std::mutex mu;
  std::condition_variable cv;
  int64_t failed_chunk = INT64_MAX;
  Status failure;
  int running = 0;
  auto worker = [&] {
    for (int64_t c; (c = next.fetch_add(1)) < chunks;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (c > failed_chunk) break;
      }
      const int64_t begin = c * chunk, end = std::min(rows, begin + chunk);
      Status s = fn(begin, end);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (c < failed_chunk) {
          failed_chunk = c;
          failure = s;
        }
      }
      done_rows += end - begin;
    }
    std::lock_guard<std::mutex> lock(mu);
    --running;
    cv.notify_all();
  };
  const int n = static_cast<int>(std::min<int64_t>(threads, chunks));
  std::vector<std::thread> pool;
  running = n;
  for (int t = 0; t < n; ++t) pool.emplace_back(worker);
  {
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0) {
      cv.wait_for(lock, std::chrono::milliseconds(200));
      if (options.progress) {
        lock.unlock();
        options.progress(phase, done_rows.load(), rows);
        lock.lock();
      }
    }
  }
  for (auto& t : pool) t.join();
  if (options.progress) options.progress(phase, done_rows.load(), rows);
  return failure;
}

class ArrayRows final : public RowSource {
 public:
  ArrayRows(const float* table, int64_t rows, int64_t dim) : table_(table), rows_(rows), dim_(dim) {}
  int64_t rows() const override { return rows_; }
  int64_t dim() const override { return dim_; }
  Status read(int64_t begin, int64_t end, float* out) const override {
    std::memcpy(out, table_ + begin * dim_, static_cast<size_t>((end - begin) * dim_) * sizeof(float));
    return Status::Ok();
  }

 private:
  const float* table_;
  int64_t rows_, dim_;
};

// Rows of a memory-mapped safetensors tensor. Rows already processed are
// dropped from memory so a multi-GiB table never becomes resident whole.
class SafetensorsRows final : public RowSource {
 public:
  SafetensorsRows(const SafetensorsFile& file, const SafetensorsTensor& tensor)
      : file_(file), tensor_(tensor), row_bytes_(tensor.byte_size() / static_cast<uint64_t>(tensor.shape[0])) {}
  int64_t rows() const override { return tensor_.shape[0]; }
  int64_t dim() const override { return tensor_.shape[1]; }
  Status read(int64_t begin, int64_t end, float* out) const override {
    return file_.read_rows_float(tensor_.name, begin, end, out);
  }
  void release(int64_t begin, int64_t end) const override {
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t lo = reinterpret_cast<uintptr_t>(file_.raw(tensor_)) + static_cast<uintptr_t>(begin) * row_bytes_;
    const uintptr_t hi = reinterpret_cast<uintptr_t>(file_.raw(tensor_)) + static_cast<uintptr_t>(end) * row_bytes_;
    const uintptr_t first = (lo + page - 1) & ~(page - 1), last = hi & ~(page - 1);
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  }

 private:
  const SafetensorsFile& file_;
  const SafetensorsTensor& tensor_;
  uint64_t row_bytes_;
};

Error non_finite_error(float v, int64_t row, int64_t col) {
  return make_error(ErrorCode::kInvalidArgument,
                    std::string("the table holds a non-finite value (") + (std::isnan(v) ? "NaN" : "Inf") +
                        ") at row " + std::to_string(row) + ", column " + std::to_string(col) +
                        "; fix the checkpoint before quantizing");
}

// The activation encoding observed on the calibration rows only.
Result<ActivationEncoding> calibration_encoding(const RowSource& src, const std::vector<int64_t>& tokens) {
  if (tokens.empty()) return make_error(ErrorCode::kInvalidArgument, "the calibration token list is empty");
  std::vector<float> row(static_cast<size_t>(src.dim()));
  float lo = 0.0f, hi = 0.0f;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= src.rows())
      return make_error(ErrorCode::kOutOfRange,
                        "calibration token " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
                            " is outside the table's rows [0, " + std::to_string(src.rows()) + ")");
    QEMB_RETURN_IF_ERROR(src.read(tokens[i], tokens[i] + 1, row.data()));
    float rlo, rhi;
    min_max(row.data(), row.size(), rlo, rhi);
    lo = std::min(lo, rlo);
    hi = std::max(hi, rhi);
  }
  return activation_encoding(lo, hi);
}

Status empty_table_error(int64_t rows, int64_t dim) {
  return make_error(ErrorCode::kInvalidArgument,
                    "the embedding table is empty (" + std::to_string(rows) + " x " + std::to_string(dim) +
                        "); it needs at least one row and one column");
}

}  // namespace

Status check_table(const float* table, int64_t rows, int64_t dim) {
  if (rows <= 0 || dim <= 0) return empty_table_error(rows, dim);
  for (int64_t k = 0; k < rows * dim; ++k)
    if (!std::isfinite(table[k])) return non_finite_error(table[k], k / dim, k % dim);
  return Status::Ok();
}

Result<ActivationEncoding> observe_activation(const float* table, int64_t rows, int64_t dim,
                                              const std::optional<std::vector<int64_t>>& tokens) {
  if (tokens) return calibration_encoding(ArrayRows(table, rows, dim), *tokens);
  float lo, hi;
  min_max(table, static_cast<size_t>(rows * dim), lo, hi);
  return activation_encoding(lo, hi);
}

Result<CompiledEmbedding> compile_table(const float* table, int64_t rows, int64_t dim,
                                        const CompileOptions& options, const TargetVersion& target,
                                        const TableSource& source) {
  return compile_rows(ArrayRows(table, rows, dim), options, target, source);
}

Result<CompiledEmbedding> compile_rows(const RowSource& src, const CompileOptions& options,
                                       const TargetVersion& target, const TableSource& source) {
  const int64_t rows = src.rows(), dim = src.dim();
  if (rows <= 0 || dim <= 0) return empty_table_error(rows, dim);
  const int threads = options.threads > 0 ? options.threads
                                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int bits = weight_bits(options.scheme), qmax = weight_qmax(options.scheme);
  const size_t row_bytes = row_storage_bytes(DataType::kSFixedPoint8, bits, dim);

  // Pass 1: finiteness, the value range and the row scales.
  std::vector<float> scales(static_cast<size_t>(rows));
  std::mutex range_mu;
  float lo = INFINITY, hi = -INFINITY;
  QEMB_RETURN_IF_ERROR(parallel_rows(rows, threads, "scan", options, [&](int64_t begin, int64_t end) -> Status {
    // Declared where each worker runs: a thread_local declared in the caller
    // is never destroyed in threads that do not pass its declaration (GCC),
    // which leaked one buffer per worker per compile (LeakSanitizer).
    thread_local std::vector<float> buffer;
    buffer.resize(static_cast<size_t>((end - begin) * dim));
    QEMB_RETURN_IF_ERROR(src.read(begin, end, buffer.data()));
    for (size_t k = 0; k < buffer.size(); ++k)
      if (!std::isfinite(buffer[k]))
        return non_finite_error(buffer[k], begin + static_cast<int64_t>(k) / dim, static_cast<int64_t>(k) % dim);
    float clo, chi;
    min_max(buffer.data(), buffer.size(), clo, chi);
    for (int64_t r = begin; r < end; ++r)
      scales[static_cast<size_t>(r)] = weight_row_scale(buffer.data() + (r - begin) * dim, dim, qmax);
    src.release(begin, end);
    std::lock_guard<std::mutex> lock(range_mu);
    lo = std::min(lo, clo);
    hi = std::max(hi, chi);
    return Status::Ok();
  }));

  CompiledEmbedding out;
  out.target = target;
  if (options.calibration_tokens) {
    QEMB_ASSIGN_OR_RETURN(out.act, calibration_encoding(src, *options.calibration_tokens));
  } else {
    out.act = activation_encoding(lo, hi);
  }

  // Pass 2: quantize straight into the weight's storage layout.
  std::vector<uint8_t> packed(row_bytes * static_cast<size_t>(rows), 0);
  QEMB_RETURN_IF_ERROR(parallel_rows(rows, threads, "quantize", options, [&](int64_t begin, int64_t end) -> Status {
    thread_local std::vector<float> buffer;  // see the scan pass
    buffer.resize(static_cast<size_t>((end - begin) * dim));
    QEMB_RETURN_IF_ERROR(src.read(begin, end, buffer.data()));
    for (int64_t r = begin; r < end; ++r) {
      const float* w = buffer.data() + (r - begin) * dim;
      const float s = scales[static_cast<size_t>(r)];
      uint8_t* dst = packed.data() + static_cast<size_t>(r) * row_bytes;
      for (int64_t j = 0; j < dim; ++j) {
        const int8_t q = quantize_weight(w[j], s, qmax);
        if (bits == 4) {
          pack_int4(dst, j, q);
        } else {
          dst[j] = static_cast<uint8_t>(q);
        }
      }
    }
    src.release(begin, end);
    return Status::Ok();
  }));

  Tensor weight;
  weight.name = "weight";
  weight.kind = TensorKind::kStatic;
  weight.dtype = DataType::kSFixedPoint8;
  weight.shape = {rows, dim};
  weight.encoding = Encoding::per_axis(0, std::move(scales), std::vector<int32_t>(static_cast<size_t>(rows), 0), bits);
  weight.data = std::make_shared<OwnedBuffer>(std::move(packed));

  EmbeddingLoweringOptions lo_opts;
  lo_opts.name = options.node_name;
  lo_opts.pattern = options.pattern;
  QEMB_ASSIGN_OR_RETURN(LoweredEmbedding lowered, lower_embedding(std::move(weight), out.act, target, lo_opts));
  out.pattern = lowered.pattern;
  out.pattern_reason = lowered.reason;
  out.lowered = lowered.graph;  // shares the weight's bytes
  const uint64_t materialized = static_cast<uint64_t>(rows) * static_cast<uint64_t>(dim) * 2;
  switch (options.mode) {
    case CompileMode::kMaterialize:
      out.mode = CompileMode::kMaterialize;
      out.mode_reason = "forced with --mode materialize";
      break;
    case CompileMode::kFused:
      out.mode = CompileMode::kFused;
      out.mode_reason = "forced with --mode fused";
      break;
    case CompileMode::kAuto:
      if (materialized > options.memory_budget) {
        out.mode = CompileMode::kFused;
        out.mode_reason = "a materialized uint16 table would take " + mib(materialized) +
                          ", over the memory budget of " + mib(options.memory_budget) +
                          "; keeping the packed PCQ table with a fused requantizing gather";
      } else {
        out.mode = CompileMode::kMaterialize;
        out.mode_reason = "the materialized uint16 table (" + mib(materialized) +
                          ") fits the memory budget of " + mib(options.memory_budget);
      }
      break;
  }
  out.runtime_graph = std::move(lowered.graph);
  if (out.mode == CompileMode::kFused) {
    QEMB_RETURN_IF_ERROR(fuse_requant_gathers(out.runtime_graph));
  } else {
    QEMB_RETURN_IF_ERROR(fold_static_converts(out.runtime_graph));
  }

  nlohmann::json& m = out.metadata;
  m["qemb_version"] = "0.1.0";
  m["node"] = options.node_name;
  m["source"] = {{"file", source.file}, {"tensor", source.tensor}, {"dtype", source.dtype},
                 {"shape", {rows, dim}}};
  m["scheme"] = to_string(options.scheme);
  m["pattern"] = to_string(out.pattern);
  m["pattern_reason"] = out.pattern_reason;
  m["sdk_version"] = target.version ? nlohmann::json(target.version->to_string()) : nlohmann::json();
  m["sdk_version_source"] = target.source;
  m["mode"] = to_string(out.mode);
  m["mode_reason"] = out.mode_reason;
  m["vocab_size"] = rows;
  m["dim"] = dim;
  m["act_scale"] = out.act.scale;
  m["act_offset"] = out.act.offset();
  m["calibration"] = {
      {"source", options.calibration_tokens ? options.calibration_source : "all table values"},
      {"tokens", options.calibration_tokens ? options.calibration_tokens->size() : 0}};
  return out;
}

Result<CompiledEmbedding> compile_checkpoint(const std::string& checkpoint,
                                             const CompileOptions& options,
                                             const std::string& out_path) {
  if (same_file(checkpoint, out_path))
    return make_error(ErrorCode::kInvalidArgument,
                      "the output '" + out_path + "' is the input checkpoint; choose another path");
  QEMB_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(checkpoint));
  QEMB_ASSIGN_OR_RETURN(std::string name, find_embedding_tensor(file, options.tensor));
  const SafetensorsTensor* info = file.find(name);
  if (!is_float_convertible_dtype(info->dtype))
    return make_error(ErrorCode::kUnsupported, "tensor '" + name + "' has dtype " + info->dtype +
                                                   "; qemb reads F32, F16 and BF16 embeddings");
  QEMB_ASSIGN_OR_RETURN(TargetVersion target, discover_target_version(options.qnn_sdk_version));
  TableSource source{checkpoint, name, info->dtype};
  QEMB_ASSIGN_OR_RETURN(CompiledEmbedding compiled,
                        compile_rows(SafetensorsRows(file, *info), options, target, source));
  QEMB_RETURN_IF_ERROR(write_artifact(out_path, compiled.runtime_graph, compiled.metadata));
  return compiled;
}

}  // namespace qemb
