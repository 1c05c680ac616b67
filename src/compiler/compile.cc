#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <set>
#include <thread>

#include "qemb/artifact.h"
#include "qemb/checkpoint.h"
#include "qemb/compiler.h"
#include "qemb/file.h"
#include "qemb/kernels.h"
#include "qemb/passes.h"
#include "qemb/quantize_kernels.h"
#include "qemb/safetensors.h"
#include "qemb/version.h"
#include "compiler/row_pass.h"

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
  return checked_activation_encoding(lo, hi);
}

Status empty_table_error(int64_t rows, int64_t dim) {
  return make_error(ErrorCode::kInvalidArgument,
                    "the embedding table is empty (" + std::to_string(rows) + " x " + std::to_string(dim) +
                        "); it needs at least one row and one column");
}

}  // namespace

Status parallel_rows(int64_t rows, int64_t chunk, int threads, const char* phase, const ProgressFn& progress,
                     const std::function<Status(int, int64_t, int64_t)>& fn,
                     const std::function<void(int64_t, const Status&)>& on_failure) {
  const int64_t chunks = (rows + chunk - 1) / chunk;
  std::atomic<int64_t> next{0}, done_rows{0};
  std::mutex mu;
  std::condition_variable cv;
  int64_t failed_chunk = INT64_MAX;
  Status failure;
  int running = 0;
  auto worker = [&](int worker_index) {
    for (int64_t c; (c = next.fetch_add(1)) < chunks;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (c > failed_chunk) break;
      }
      const int64_t begin = c * chunk, end = std::min(rows, begin + chunk);
      Status s = fn(worker_index, begin, end);
      if (!s.ok()) {
        if (on_failure) on_failure(begin, s);
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
  const int n = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, chunks)));
  if (progress) progress(phase, 0, rows);  // the phase starts now: rates count from here
  std::vector<std::thread> pool;
  for (int t = 0; t < n; ++t) {
    try {
      std::lock_guard<std::mutex> lock(mu);
      pool.emplace_back(worker, t);
      ++running;
    } catch (const std::system_error&) {
      break;  // out of threads: the ones that started take every chunk
    }
  }
  if (pool.empty()) {
    running = 1;
    worker(0);  // not even one: the calling thread does the work
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0) {
      cv.wait_for(lock, std::chrono::milliseconds(200));
      if (progress) {
        lock.unlock();
        progress(phase, done_rows.load(), rows);
        lock.lock();
      }
    }
  }
  for (auto& t : pool) t.join();
  if (progress) progress(phase, done_rows.load(), rows);
  return failure;
}

Result<ActivationEncoding> calibration_encoding_of(const RowSource& src, const std::vector<int64_t>& tokens) {
  return calibration_encoding(src, tokens);
}

int default_threads(int requested) {
  // More threads than a few per core only add switching and memory.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return requested > 0 ? std::min(requested, 4 * cores) : cores;
}

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
  return checked_activation_encoding(lo, hi);
}

Result<CompiledEmbedding> compile_table(const float* table, int64_t rows, int64_t dim,
                                        const CompileOptions& options, const TargetVersion& target,
                                        const TableSource& source) {
  return compile_rows(ArrayRows(table, rows, dim), options, target, source);
}

namespace {

// Bytes of a size known up front, left uninitialised: every byte is written
// before use, so zero-filling a GiB table first would only cost time. Large
// buffers are anonymous mappings backed by transparent huge pages where the
// kernel allows: first-touch page faults were most of the quantize pass's
// time with 4 KiB pages (one fault per 4 KiB written).
class UninitializedBuffer final : public Buffer {
 public:
  explicit UninitializedBuffer(size_t size) : size_(size) {
    constexpr size_t kHugePage = size_t{2} << 20;
    if (size >= kHugePage) {
      mapped_ = size + kHugePage;  // room to align the start to a huge page
      void* p = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p != MAP_FAILED) {
        map_ = static_cast<uint8_t*>(p);
        bytes_ = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~(kHugePage - 1));
        ::madvise(bytes_, size, MADV_HUGEPAGE);  // a hint: fine if refused
        return;
      }
    }
    heap_.reset(new uint8_t[size ? size : 1]);
    bytes_ = heap_.get();
  }
  ~UninitializedBuffer() override {
    if (map_ != nullptr) ::munmap(map_, mapped_);
  }
  UninitializedBuffer(const UninitializedBuffer&) = delete;
  UninitializedBuffer& operator=(const UninitializedBuffer&) = delete;
  const uint8_t* data() const override { return bytes_; }
  uint8_t* mutable_data() { return bytes_; }
  size_t size() const override { return size_; }

 private:
  size_t size_;
  uint8_t* map_ = nullptr;
  size_t mapped_ = 0;
  std::unique_ptr<uint8_t[]> heap_;
  uint8_t* bytes_ = nullptr;
};

// Stands in for the weight's bytes while the graph is lowered before the
// weight is quantized (the lowering only looks at shapes and encodings).
class PendingBuffer final : public Buffer {
 public:
  explicit PendingBuffer(size_t size) : size_(size) {}
  const uint8_t* data() const override { return nullptr; }
  size_t size() const override { return size_; }

 private:
  size_t size_;
};

// A per-row table being built chunk by chunk: in memory, or written into the
// artifact as it is produced (each worker builds its chunk in a small scratch
// buffer that stays in cache, and the file takes it from there).
class TableOutput {
 public:
  TableOutput(size_t row_bytes, int64_t rows, ArtifactStream* stream) : row_bytes_(row_bytes) {
    const size_t bytes = row_bytes * static_cast<size_t>(rows);
    if (stream != nullptr) {
      streamed_ = stream->reserve(bytes);
    } else {
      memory_ = std::make_shared<UninitializedBuffer>(bytes);
    }
  }
  // Where rows [begin, end) are built; valid until commit() on this thread.
  uint8_t* rows_at(int64_t begin, int64_t end) {
    if (memory_) return memory_->mutable_data() + static_cast<size_t>(begin) * row_bytes_;
    thread_local std::vector<uint8_t> scratch;
    scratch.resize(static_cast<size_t>(end - begin) * row_bytes_);
    return scratch.data();
  }
  Status commit(int64_t begin, int64_t end, const uint8_t* rows) {
    if (memory_) return Status::Ok();
    return streamed_->write(static_cast<uint64_t>(begin) * row_bytes_, rows, static_cast<size_t>(end - begin) * row_bytes_);
  }
  // Rows from `begin` on will never come.
  void abort(int64_t begin, const Status& why) {
    if (streamed_) streamed_->abort(static_cast<uint64_t>(begin) * row_bytes_, why.message());
  }
  std::shared_ptr<const Buffer> buffer() const {
    if (memory_) return memory_;
    return streamed_;
  }

 private:
  size_t row_bytes_;
  std::shared_ptr<UninitializedBuffer> memory_;
  std::shared_ptr<StreamedData> streamed_;
};

CompileMode resolve_mode(const CompileOptions& options, uint64_t materialized, std::string& reason) {
  switch (options.mode) {
    case CompileMode::kMaterialize:
      reason = "forced with --mode materialize";
      return CompileMode::kMaterialize;
    case CompileMode::kFused:
      reason = "forced with --mode fused";
      return CompileMode::kFused;
    case CompileMode::kAuto:
      break;
  }
  if (materialized > options.memory_budget) {
    reason = "a materialized uint16 table would take " + mib(materialized) + ", over the memory budget of " +
             mib(options.memory_budget) + "; keeping the packed PCQ table with a fused requantizing gather";
    return CompileMode::kFused;
  }
  reason = "the materialized uint16 table (" + mib(materialized) + ") fits the memory budget of " +
           mib(options.memory_budget);
  // Measured on the bundled benchmarks (a 2-core AVX-512 VM, same-run ratios).
  if (weight_bits(options.scheme) == 8)
    reason += "; at 8 bits it is also the faster lookup on rows in cache: the fused gather reads half the bytes "
              "but requantizes every value, about 0.8x the materialized gather on rows in cache and 1.0x on cold "
              "ones at D=128";
  return CompileMode::kMaterialize;
}

// The Convert of the optimized pattern that a materialized compile folds into
// a uint16 table (it reads the per-axis STATIC weight and writes a uint16
// tensor of the same shape that is not the graph's output), or -1.
int u16_fold_op(const Graph& g) {
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (op.type != OpType::kConvert || op.inputs.size() != 1 || op.outputs.size() != 1) continue;
    const Tensor* in = g.find_tensor(op.inputs[0]);
    const Tensor* out = g.find_tensor(op.outputs[0]);
    if (in != nullptr && out != nullptr && in->kind == TensorKind::kStatic && in->encoding.is_per_axis() &&
        out->dtype == DataType::kUFixedPoint16 && out->shape == in->shape && out->kind != TensorKind::kAppRead)
      return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

namespace {

Result<CompiledEmbedding> compile_impl(const RowSource& src, const CompileOptions& options,
                                       const TargetVersion& target, const TableSource& source,
                                       ArtifactStream* stream) {
  const int64_t rows = src.rows(), dim = src.dim();
  if (rows <= 0 || dim <= 0) return empty_table_error(rows, dim);
  // A chunk's output (at most 512 KiB) stays in cache until it is written,
  // and chunks are few enough that handing the file from one worker to the
  // next is rare.
  const int64_t chunk = row_chunk(dim);
  if (options.threads < 0)
    return make_error(ErrorCode::kInvalidArgument, "threads must be >= 0 (0 = one per core)");
  const int threads = default_threads(options.threads);
  const int bits = weight_bits(options.scheme), qmax = weight_qmax(options.scheme);
  const size_t row_bytes = row_storage_bytes(DataType::kSFixedPoint8, bits, dim);
  const QuantizeKernelSet& qk = best_quantize_kernels();
  auto quantize_row = [&](const float* w, float s, uint8_t* dst) {
    if (bits == 4) {
      qk.quantize_row_s4(w, static_cast<size_t>(dim), s, dst);
    } else {
      qk.quantize_row_s8(w, static_cast<size_t>(dim), s, reinterpret_cast<int8_t*>(dst));
    }
  };

  CompiledEmbedding out;
  out.target = target;
  const uint64_t materialized = static_cast<uint64_t>(rows) * static_cast<uint64_t>(dim) * 2;
  out.mode = resolve_mode(options, materialized, out.mode_reason);

  EmbeddingLoweringOptions lo_opts;
  lo_opts.name = options.node_name;
  lo_opts.pattern = options.pattern;
  auto weight_tensor_of = [&](std::vector<float> row_scales, std::shared_ptr<Buffer> data) {
    Tensor weight;
    weight.name = "weight";
    weight.kind = TensorKind::kStatic;
    weight.dtype = DataType::kSFixedPoint8;
    weight.shape = {rows, dim};
    weight.encoding =
        Encoding::per_axis(0, std::move(row_scales), std::vector<int32_t>(static_cast<size_t>(rows), 0), bits);
    weight.data = std::move(data);
    return weight;
  };
  // Decided before any row is read: a target that refuses a forced pattern
  // fails at once instead of after the long part.
  if (lo_opts.name.empty()) return make_error(ErrorCode::kInvalidArgument, "embedding node name is empty");
  QEMB_ASSIGN_OR_RETURN(const PatternChoice choice, choose_pattern(options.pattern, target, lo_opts.name));
  const bool fold_to_u16 = out.mode == CompileMode::kMaterialize && choice.pattern == Pattern::kOptimized;
  // A fused compile stores the table its fused gather reads row-interleaved
  // (each row's scale next to its values: one contiguous read a cold lookup).
  // Streamed, the records go straight to the file; in memory the plain rows
  // are kept (the lowered graph holds them) and interleaved after fusing.
  const bool interleave = out.mode == CompileMode::kFused;
  const bool stream_interleaved = interleave && stream != nullptr;
  const size_t stride = interleaved_row_stride(bits, dim);
  const size_t out_row_bytes = stream_interleaved ? stride : row_bytes;

  // The first pass over the input: finiteness, the value range, the row
  // scales and (unless folding) the packed rows, one row at a time so each
  // decoded row is still in cache when it is quantized (a row's scale needs
  // only the row). The packed rows go to the artifact as they are made. A
  // fold into a uint16 table needs the whole table's range before its first
  // row, so there this pass only measures, and the second pass reads the
  // input again and quantizes and folds each chunk while it is in cache:
  // reading the mapped input twice costs less than holding the packed table
  // (0.5 or 1 byte a value) in fresh memory, whose first touch was a fifth of
  // the materialized compile's time on a VM.
  std::optional<TableOutput> packed;
  if (!fold_to_u16) packed.emplace(out_row_bytes, rows, stream);
  std::vector<float> scales(static_cast<size_t>(rows));
  std::mutex range_mu;
  float lo = INFINITY, hi = -INFINITY;
  {
    const ReleaseWindows release_windows(src, chunk);
    QEMB_RETURN_IF_ERROR(parallel_rows(rows, chunk, threads, "scan", options.progress, [&](int, int64_t begin, int64_t end) -> Status {
      // Declared where each worker runs: a thread_local declared in the caller
      // is never destroyed in threads that do not pass its declaration (GCC),
      // which leaked one buffer per worker per compile (LeakSanitizer).
      thread_local std::vector<float> row;
      row.resize(static_cast<size_t>(dim));
      float clo = INFINITY, chi = -INFINITY;
      uint8_t* dst = packed ? packed->rows_at(begin, end) : nullptr;
      for (int64_t r = begin; r < end; ++r) {
        QEMB_RETURN_IF_ERROR(src.read(r, r + 1, row.data()));
        RowStats st;
        const int64_t bad = qk.row_stats_f32(row.data(), static_cast<size_t>(dim), &st);
        if (bad >= 0) return non_finite_error(row[static_cast<size_t>(bad)], r, bad);
        clo = std::min(clo, st.min);
        chi = std::max(chi, st.max);
        const float s = row_scale_from_amax(st.amax, qmax);
        scales[static_cast<size_t>(r)] = s;
        if (dst == nullptr) continue;
        uint8_t* rec = dst + static_cast<size_t>(r - begin) * out_row_bytes;
        if (stream_interleaved) {
          const uint32_t sb = std::bit_cast<uint32_t>(s);
          for (int i = 0; i < 4; ++i) rec[i] = static_cast<uint8_t>(sb >> (8 * i));
          rec += kInterleavedValuesOffset;
          std::memset(rec + row_bytes, 0, stride - kInterleavedValuesOffset - row_bytes);
        }
        quantize_row(row.data(), s, rec);
      }
      if (packed) QEMB_RETURN_IF_ERROR(packed->commit(begin, end, dst));
      release_windows.done(begin, end);
      std::lock_guard<std::mutex> lock(range_mu);
      lo = std::min(lo, clo);
      hi = std::max(hi, chi);
      return Status::Ok();
    }, [&](int64_t begin, const Status& why) { if (packed) packed->abort(begin, why); }));
  }

  if (options.calibration_tokens) {
    QEMB_ASSIGN_OR_RETURN(out.act, calibration_encoding(src, *options.calibration_tokens));
  } else {
    QEMB_ASSIGN_OR_RETURN(out.act, checked_activation_encoding(lo, hi));
  }

  // Lowered over the plain layout's size; streamed records replace it after fusing.
  std::shared_ptr<Buffer> lowered_data =
      packed && !stream_interleaved ? std::const_pointer_cast<Buffer>(packed->buffer())
                                    : std::make_shared<PendingBuffer>(row_bytes * static_cast<size_t>(rows));
  QEMB_ASSIGN_OR_RETURN(LoweredEmbedding lowered,
                        lower_embedding(weight_tensor_of(scales, lowered_data), out.act, target, lo_opts));
  out.pattern = lowered.pattern;
  out.pattern_reason = lowered.reason;
  Graph& graph = lowered.graph;
  const int convert = fold_to_u16 ? u16_fold_op(graph) : -1;
  if (fold_to_u16 && convert < 0)
    return make_error(ErrorCode::kInternal, "the optimized lowering has no Convert to fold");

  if (fold_to_u16) {
    // Materialized optimized pattern: the folded Convert is exactly
    // requant_gather_s{4,8}_u16 over every id. Each chunk of rows is read
    // again, quantized into a small packed buffer and gathered from there,
    // the uint16 rows streamed out as they are made.
    const Tensor& folded_out = *graph.find_tensor(graph.ops[static_cast<size_t>(convert)].outputs[0]);
    const size_t table_row_bytes = static_cast<size_t>(dim) * 2;
    TableOutput table(table_row_bytes, rows, stream);
    const KernelSet& kernels = best_kernels();
    const ActivationEncoding act{folded_out.encoding.scale, -folded_out.encoding.offset};
    const RequantGatherU16Fn gather = bits == 4 ? kernels.requant_gather_s4_u16 : kernels.requant_gather_s8_u16;
    const ReleaseWindows release_windows(src, chunk);
    QEMB_RETURN_IF_ERROR(parallel_rows(rows, chunk, threads, "quantize", options.progress, [&](int, int64_t begin, int64_t end) -> Status {
      thread_local std::vector<float> row;  // see the scan pass
      thread_local std::vector<uint8_t> chunk_rows;
      thread_local std::vector<int64_t> ids;
      const size_t n = static_cast<size_t>(end - begin);
      row.resize(static_cast<size_t>(dim));
      chunk_rows.resize(n * row_bytes);
      ids.resize(n);
      for (int64_t r = begin; r < end; ++r) {
        QEMB_RETURN_IF_ERROR(src.read(r, r + 1, row.data()));
        quantize_row(row.data(), scales[static_cast<size_t>(r)], chunk_rows.data() + static_cast<size_t>(r - begin) * row_bytes);
        ids[static_cast<size_t>(r - begin)] = r - begin;
      }
      release_windows.done(begin, end);
      RequantGatherParams params;
      params.weights = chunk_rows.data();
      params.row_scales = scales.data() + begin;
      params.dim = static_cast<size_t>(dim);
      params.act = act;
      uint8_t* dst = table.rows_at(begin, end);
      gather(params, ids.data(), n, reinterpret_cast<uint16_t*>(dst));
      return table.commit(begin, end, dst);
    }, [&](int64_t begin, const Status& why) { table.abort(begin, why); }));
    out.runtime_graph = graph;
    Op& op = out.runtime_graph.ops[static_cast<size_t>(convert)];
    Tensor* folded = out.runtime_graph.find_tensor(op.outputs[0]);
    folded->kind = TensorKind::kStatic;
    folded->data = std::const_pointer_cast<Buffer>(table.buffer());
    out.runtime_graph.ops.erase(out.runtime_graph.ops.begin() + convert);
    out.runtime_graph.remove_unused_tensors();
    QEMB_RETURN_IF_ERROR(out.runtime_graph.check());
    // The packed weight is dropped now that it is folded: the lowered graph
    // keeps its metadata (shape, per-row encodings) without the data.
    for (Tensor& t : graph.tensors)
      if (t.kind == TensorKind::kStatic && t.encoding.is_per_axis()) t.data.reset();
    out.lowered = std::move(graph);
  } else {
    out.lowered = graph;  // shares the weight's bytes
    out.runtime_graph = std::move(graph);
    if (out.mode == CompileMode::kFused) {
      QEMB_RETURN_IF_ERROR(fuse_requant_gathers(out.runtime_graph));
      if (interleave) {
        // The weight the fused gather reads (both patterns fuse to one RequantGather).
        Tensor* w = nullptr;
        for (const Op& op : out.runtime_graph.ops)
          if (op.type == OpType::kRequantGather) w = out.runtime_graph.find_tensor(op.inputs[0]);
        if (w == nullptr || w->kind != TensorKind::kStatic || !w->encoding.is_per_axis() || !packed)
          return make_error(ErrorCode::kInternal, "the fused graph has no per-row weight to store row-interleaved");
        if (stream_interleaved) {
          w->data = std::const_pointer_cast<Buffer>(packed->buffer());
          w->row_stride = stride;
          w->encoding.scales.clear();
          w->encoding.offsets.clear();
        } else {
          QEMB_ASSIGN_OR_RETURN(*w, interleave_rows(*w));
        }
        QEMB_RETURN_IF_ERROR(out.runtime_graph.check());
      }
    } else {
      QEMB_RETURN_IF_ERROR(fold_static_converts(out.runtime_graph));
    }
  }

  nlohmann::json& m = out.metadata;
  m["qemb_version"] = QEMB_VERSION;
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

}  // namespace

Result<CompiledEmbedding> compile_rows(const RowSource& src, const CompileOptions& options,
                                       const TargetVersion& target, const TableSource& source) {
  return compile_impl(src, options, target, source, nullptr);
}

Result<CompiledEmbedding> compile_rows(const RowSource& src, const CompileOptions& options,
                                       const TargetVersion& target, ArtifactStream& out, const TableSource& source) {
  return compile_impl(src, options, target, source, &out);
}

namespace {

// Compiles each table into one stream, then writes one graph: the tables'
// runtime graphs side by side.
Result<std::vector<CompiledEmbedding>> compile_tables(const Checkpoint& ckpt, const std::string& checkpoint,
                                                      const std::vector<CompileOptions>& tables,
                                                      const std::string& out_path) {
  struct Prepared {
    CheckpointTable table;
    TargetVersion target;
  };
  std::vector<Prepared> prepared;
  for (const CompileOptions& o : tables) {
    // Every table is found and checked before the long part.
    QEMB_ASSIGN_OR_RETURN(std::string name, ckpt.find_embedding(o.tensor));
    QEMB_ASSIGN_OR_RETURN(CheckpointTable table, ckpt.table(name));
    // Before the output exists: an empty table fails with nothing to clean up.
    if (table.rows() <= 0 || table.dim() <= 0) return empty_table_error(table.rows(), table.dim());
    QEMB_ASSIGN_OR_RETURN(TargetVersion target, discover_target_version(o.qnn_sdk_version));
    prepared.push_back({std::move(table), std::move(target)});
  }
  // Opened before the long part, so an unwritable path fails at once.
  QEMB_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactStream> out, ArtifactStream::create(out_path));
  std::vector<CompiledEmbedding> compiled;
  for (size_t i = 0; i < tables.size(); ++i) {
    const CheckpointTable& table = prepared[i].table;
    TableSource source{checkpoint, table.info().name, table.info().dtype};
    Result<CompiledEmbedding> c = compile_rows(CheckpointRows(table), tables[i], prepared[i].target, *out, source);
    if (!c.ok()) {
      if (tables.size() == 1) return c.error();
      return make_error(c.error().code, "table '" + tables[i].node_name + "' (" + table.info().name +
                                            "): " + c.error().message);
    }
    compiled.push_back(std::move(c).value());
  }
  if (compiled.size() == 1) {
    QEMB_RETURN_IF_ERROR(out->finish(compiled[0].runtime_graph, compiled[0].metadata));
    return compiled;
  }
  Graph merged;
  nlohmann::json meta = {{"qemb_version", compiled[0].metadata["qemb_version"]}, {"tables", nlohmann::json::array()}};
  for (size_t i = 0; i < compiled.size(); ++i) {
    for (const Tensor& t : compiled[i].runtime_graph.tensors) {
      if (merged.find_tensor(t.name) != nullptr)
        return make_error(ErrorCode::kInvalidArgument, "tensor '" + t.name + "' of table '" + tables[i].node_name +
                                                           "' clashes with another table's; choose other table names");
      merged.tensors.push_back(t);
    }
    merged.ops.insert(merged.ops.end(), compiled[i].runtime_graph.ops.begin(), compiled[i].runtime_graph.ops.end());
    nlohmann::json m = compiled[i].metadata;
    m.erase("qemb_version");
    m["name"] = tables[i].node_name;
    meta["tables"].push_back(std::move(m));
  }
  QEMB_RETURN_IF_ERROR(out->finish(merged, meta));
  return compiled;
}

// Opens the checkpoint, finds the embedding and the target, then compiles: into
// `out_path` when given, else in memory. Every command that reads a checkpoint
// comes through here, so each input format it learns serves them all.
Result<CompiledEmbedding> compile_checkpoint_impl(const std::string& checkpoint, const CompileOptions& options,
                                                  const std::string* out_path) {
  if (out_path != nullptr && same_file(checkpoint, *out_path))
    return make_error(ErrorCode::kInvalidArgument,
                      "the output '" + *out_path + "' is the input checkpoint; choose another path");
  QEMB_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(checkpoint));
  QEMB_ASSIGN_OR_RETURN(std::string name, ckpt.find_embedding(options.tensor));
  if (out_path == nullptr) {
    QEMB_ASSIGN_OR_RETURN(CheckpointTable table, ckpt.table(name));
    if (table.rows() <= 0 || table.dim() <= 0) return empty_table_error(table.rows(), table.dim());
    QEMB_ASSIGN_OR_RETURN(TargetVersion target, discover_target_version(options.qnn_sdk_version));
    return compile_rows(CheckpointRows(table), options, target, TableSource{checkpoint, name, table.info().dtype});
  }
  CompileOptions resolved = options;
  resolved.tensor = name;
  QEMB_ASSIGN_OR_RETURN(std::vector<CompiledEmbedding> compiled,
                        compile_tables(ckpt, checkpoint, {resolved}, *out_path));
  return std::move(compiled.front());
}

}  // namespace

Result<CompiledEmbedding> compile_checkpoint(const std::string& checkpoint, const CompileOptions& options,
                                             const std::string& out_path) {
  return compile_checkpoint_impl(checkpoint, options, &out_path);
}

Result<CompiledEmbedding> compile_checkpoint(const std::string& checkpoint, const CompileOptions& options) {
  return compile_checkpoint_impl(checkpoint, options, nullptr);
}

Result<std::vector<CompiledEmbedding>> compile_checkpoint_tables(const std::string& checkpoint,
                                                                 const std::vector<CompileOptions>& tables,
                                                                 const std::string& out_path) {
  if (tables.empty()) return make_error(ErrorCode::kInvalidArgument, "no tables to compile");
  std::set<std::string> names;
  for (const CompileOptions& t : tables) {
    if (t.tensor.empty())
      return make_error(ErrorCode::kInvalidArgument, "every table needs its checkpoint tensor named");
    if (!names.insert(t.node_name).second)
      return make_error(ErrorCode::kInvalidArgument,
                        "two tables are both named '" + t.node_name + "'; table names must be unique");
  }
  if (same_file(checkpoint, out_path))
    return make_error(ErrorCode::kInvalidArgument,
                      "the output '" + out_path + "' is the input checkpoint; choose another path");
  QEMB_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(checkpoint));
  return compile_tables(ckpt, checkpoint, tables, out_path);
}

}  // namespace qemb
