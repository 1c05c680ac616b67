// The compile pipeline over a row source: scan the rows, lower for the target,
// then fold or fuse, the table built chunk by chunk into memory or the stream.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include "qemb/compiler.h"
#include "qemb/half.h"
#include "passes/passes.h"
#include "qemb/version.h"
#include "compiler/compile_mode.h"
#include "compiler/compile_stream.h"
#include "compiler/row_source.h"
#include "compiler/table_output.h"
#include "compiler/table_values.h"
#include "core/parallel_rows.h"
#include "lowering/lowering.h"
#include "passes/convert_fold.h"
#include "passes/weight_kernels.h"

namespace qemb {

std::string collapse_message(int64_t collapsed, int64_t rows, Scheme scheme) {
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.2f%%", 100.0 * static_cast<double>(collapsed) / static_cast<double>(rows));
  return "the legacy pattern collapses " + std::to_string(collapsed) + " of " + std::to_string(rows) + " rows (" +
         pct + ") of this " + to_string(scheme) +
         " table to a constant (their scales are under 1/(2 qmax) of the largest); target QNN SDK >= 2.48 "
         "(CompileOptions.qnn_sdk_version = 2.48) for the optimized pattern, which loses none" +
         (scheme.weight_bits() < 8 ? std::string(", or use ") + find_scheme(8, scheme.activation_bits())->name() +
                                         ", which collapses fewer"
                                   : std::string());
}

Result<CompiledEmbedding> compile_table(const float* table, int64_t rows, int64_t dim,
                                        const CompileOptions& options, const TargetVersion& target,
                                        const TableSource& source) {
  return compile_rows(ArrayRows(table, rows, dim), options, target, source);
}

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
    return make_error(ErrorCode::kInvalidArgument, "CompileOptions.threads must be >= 0 (0 = one per core)");
  const int threads = default_threads(options.threads);
  const int bits = weight_bits(options.scheme), qmax = weight_qmax(options.scheme);
  const size_t row_bytes = row_storage_bytes(DataType::kSFixedPoint8, bits, dim);
  const QuantizeKernelSet& qk = best_quantize_kernels();
  const WeightKernels* wk = weight_kernels(find_storage_format(DataType::kSFixedPoint8, bits));
  if (wk == nullptr) return make_error(ErrorCode::kInternal, "no kernels quantize " + std::to_string(bits) + "-bit weights");
  auto quantize_row = [&](const float* w, float s, uint8_t* dst) { wk->quantize_row(qk, w, static_cast<size_t>(dim), s, dst); };
  // A BF16 source is read in place: its row statistics and quantization
  // load the BF16 values straight from the mapping, with no float row
  // written and read back in between (that copy cost as much as the read).
  const bool bf16 = src.bf16_row(0) != nullptr;

  CompiledEmbedding out;
  out.target = target;
  const Scheme scheme = options.scheme;
  // The materialized table's bytes a value: the uint16 / uint8 activation, or
  // a weight-only scheme's float32.
  const uint64_t out_value_bytes = scheme.weight_only() ? 4 : static_cast<uint64_t>(scheme.activation_bits() / 8);
  const uint64_t materialized = static_cast<uint64_t>(rows) * static_cast<uint64_t>(dim) * out_value_bytes;
  out.mode = resolve_mode(options, materialized, out.mode_reason);

  EmbeddingLoweringOptions lo_opts;
  lo_opts.name = options.node_name;
  lo_opts.pattern = options.pattern;
  lo_opts.scheme = scheme;
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
  if (lo_opts.name.empty()) return make_error(ErrorCode::kInvalidArgument, "CompileOptions.node_name is empty; name the table's node");
  QEMB_ASSIGN_OR_RETURN(const PatternChoice choice, choose_pattern(options.pattern, target, lo_opts.name, scheme));
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
        const uint8_t* raw = bf16 ? src.bf16_row(r) : nullptr;
        RowStats st;
        int64_t bad;
        if (raw != nullptr) {
          bad = qk.row_stats_bf16(raw, static_cast<size_t>(dim), &st);
          if (bad >= 0) return non_finite_error(bf16_to_float(static_cast<uint16_t>(raw[2 * bad] | (raw[2 * bad + 1] << 8))), r, bad);
        } else {
          QEMB_RETURN_IF_ERROR(src.read(r, r + 1, row.data()));
          bad = qk.row_stats_f32(row.data(), static_cast<size_t>(dim), &st);
          if (bad >= 0) return non_finite_error(row[static_cast<size_t>(bad)], r, bad);
        }
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
        if (raw != nullptr) {
          wk->quantize_own_row_bf16(qk, raw, static_cast<size_t>(dim), s, rec);
        } else {
          quantize_row(row.data(), s, rec);
        }
      }
      if (packed) QEMB_RETURN_IF_ERROR(packed->commit(begin, end, dst));
      release_windows.done(begin, end);
      std::lock_guard<std::mutex> lock(range_mu);
      lo = std::min(lo, clo);
      hi = std::max(hi, chi);
      return Status::Ok();
    }, [&](int64_t begin, const Status& why) { if (packed) packed->abort(begin, why); }));
  }

  if (scheme.weight_only()) {
    // No activation step: the lookup returns s_r * q itself.
  } else if (options.calibration_tokens) {
    QEMB_ASSIGN_OR_RETURN(out.act, calibration_encoding_of(src, *options.calibration_tokens, scheme.activation_bits()));
  } else {
    QEMB_ASSIGN_OR_RETURN(out.act, checked_activation_encoding(lo, hi, scheme.activation_bits()));
  }

  // Lowered over the plain layout's size; streamed records replace it after fusing.
  std::shared_ptr<Buffer> lowered_data =
      packed && !stream_interleaved ? std::const_pointer_cast<Buffer>(packed->buffer())
                                    : std::make_shared<PendingBuffer>(row_bytes * static_cast<size_t>(rows));
  QEMB_ASSIGN_OR_RETURN(LoweredEmbedding lowered,
                        lower_embedding(weight_tensor_of(scales, lowered_data), out.act, target, lo_opts));
  out.pattern = lowered.pattern;
  out.pattern_reason = lowered.reason;
  // What the deployed pattern costs, measured before anything is written:
  // the legacy pattern's max-scale approximation collapses small-scale rows.
  if (out.pattern == Pattern::kLegacy) {
    const float s_max = *std::max_element(scales.begin(), scales.end());
    for (const float s : scales) out.collapsed_rows += legacy_row_collapses(s, s_max, qmax) ? 1 : 0;
  }
  if (options.max_collapsed_rows >= 0 && out.collapsed_rows > options.max_collapsed_rows)
    return make_error(ErrorCode::kValidationError, collapse_message(out.collapsed_rows, rows, options.scheme) +
                                                       ", more than CompileOptions.max_collapsed_rows = " +
                                                       std::to_string(options.max_collapsed_rows) +
                                                       "; nothing was written");
  Graph& graph = lowered.graph;
  size_t convert = 0;
  const std::optional<ConvertFold> fold = fold_to_u16 ? ConvertFold::find(graph, &convert) : std::nullopt;
  if (fold_to_u16 && !fold) return make_error(ErrorCode::kInternal, "the optimized lowering has no Convert to fold");

  Graph runtime_graph;
  if (fold_to_u16) {
    // Materialized optimized pattern: the Convert folded as the fold pass
    // folds it, a chunk at a time. Each chunk of rows is read again,
    // quantized into a small packed buffer and folded from there, the uint16
    // rows streamed out as they are made.
    TableOutput table(fold->out_row_bytes(), rows, stream);
    const ReleaseWindows release_windows(src, chunk);
    QEMB_RETURN_IF_ERROR(parallel_rows(rows, chunk, threads, "quantize", options.progress, [&](int, int64_t begin, int64_t end) -> Status {
      thread_local std::vector<float> row;  // see the scan pass
      thread_local std::vector<uint8_t> chunk_rows;
      row.resize(static_cast<size_t>(dim));
      chunk_rows.resize(static_cast<size_t>(end - begin) * row_bytes);
      for (int64_t r = begin; r < end; ++r) {
        uint8_t* q = chunk_rows.data() + static_cast<size_t>(r - begin) * row_bytes;
        if (const uint8_t* raw = bf16 ? src.bf16_row(r) : nullptr) {
          wk->quantize_own_row_bf16(qk, raw, static_cast<size_t>(dim), scales[static_cast<size_t>(r)], q);
          continue;
        }
        QEMB_RETURN_IF_ERROR(src.read(r, r + 1, row.data()));
        quantize_row(row.data(), scales[static_cast<size_t>(r)], q);
      }
      release_windows.done(begin, end);
      uint8_t* dst = table.rows_at(begin, end);
      fold->fold_rows(chunk_rows.data(), scales.data() + begin, end - begin, dst);
      return table.commit(begin, end, dst);
    }, [&](int64_t begin, const Status& why) { table.abort(begin, why); }));
    runtime_graph = graph;
    QEMB_RETURN_IF_ERROR(replace_with_constant(runtime_graph, convert, table.buffer()));
    // The packed weight is dropped now that it is folded: the lowered graph
    // keeps its metadata (shape, per-row encodings) without the data.
    for (Tensor& t : graph.tensors)
      if (t.kind == TensorKind::kStatic && t.encoding.is_per_axis()) t.data.reset();
    out.lowered = std::make_shared<const Graph>(std::move(graph));
  } else {
    out.lowered = std::make_shared<const Graph>(graph);  // shares the weight's bytes
    runtime_graph = std::move(graph);
    if (out.mode == CompileMode::kFused) {
      QEMB_RETURN_IF_ERROR(fuse_requant_gathers(runtime_graph));
      if (interleave) {
        // The weight the fused gather reads (both patterns fuse to one RequantGather).
        Tensor* w = nullptr;
        for (const Op& op : runtime_graph.ops)
          if (op.type == OpType::kRequantGather) w = runtime_graph.find_tensor(op.inputs[0]);
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
        QEMB_RETURN_IF_ERROR(runtime_graph.check());
      }
    } else {
      QEMB_RETURN_IF_ERROR(fold_static_converts(runtime_graph));
    }
  }
  out.runtime_graph = std::make_shared<const Graph>(std::move(runtime_graph));

  nlohmann::json& m = out.metadata;
  m["qemb_version"] = QEMB_VERSION;
  m["node"] = options.node_name;
  m["source"] = {{"file", source.file}, {"tensor", source.tensor}, {"dtype", source.dtype},
                 {"shape", {rows, dim}}};
  if (!source.format.empty()) m["source"]["format"] = source.format;
  m["scheme"] = to_string(options.scheme);
  m["pattern"] = to_string(out.pattern);
  m["pattern_reason"] = out.pattern_reason;
  m["sdk_version"] = target.version ? nlohmann::json(target.version->to_string()) : nlohmann::json();
  m["sdk_version_source"] = target.source;
  m["mode"] = to_string(out.mode);
  m["mode_reason"] = out.mode_reason;
  m["vocab_size"] = rows;
  m["dim"] = dim;
  // A weight-only scheme's float outputs have no activation encoding; the
  // width of the others is the scheme's (and the graph output's dtype).
  if (!scheme.weight_only()) {
    m["act_scale"] = out.act.scale;
    m["act_offset"] = out.act.offset();
  }
  m["collapsed_rows"] = out.collapsed_rows;
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

}  // namespace qemb
