#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "qemb/passes.h"
#include "qemb/reference_ops.h"

namespace qemb {

namespace {

// A <= 8-bit SFIXED_POINT_8 input takes at most 256 distinct stored values
// per row, so a row's requantized outputs are a table lookup: each row's
// table is computed by requantize_row itself on a row holding every stored
// value once, which makes the lookup bit-identical to the generic loop by
// construction (and ~1 ns a value instead of a full dequantize/quantize).
bool can_fold_by_lookup(const Tensor& in, const Tensor& out) {
  return in.dtype == DataType::kSFixedPoint8 && (in.bitwidth() == 4 || in.bitwidth() == 8) &&
         out.dtype == DataType::kUFixedPoint16 && out.bitwidth() == 16;
}

void fold_rows_by_lookup(const Tensor& in, const Tensor& out, int64_t row_begin, int64_t row_end,
                         uint8_t* out_data) {
  const int bits = in.bitwidth();
  const int64_t levels = bits == 4 ? 16 : 256, dim = in.shape[1];
  const size_t in_row = row_storage_bytes(in.dtype, bits, dim);
  const size_t out_row = row_storage_bytes(out.dtype, 16, dim);
  // Every stored value once: nibble i at column i, or byte i at column i.
  uint8_t every_value[256];
  if (bits == 4) {
    for (int k = 0; k < 8; ++k) every_value[k] = static_cast<uint8_t>((2 * k) | ((2 * k + 1) << 4));
  } else {
    for (int k = 0; k < 256; ++k) every_value[k] = static_cast<uint8_t>(k);
  }
  uint8_t lut_bytes[512];
  uint16_t lut[256];
  for (int64_t r = row_begin; r < row_end; ++r) {
    requantize_row(every_value, in, r, lut_bytes, out, r, levels);
    std::memcpy(lut, lut_bytes, static_cast<size_t>(levels) * 2);  // storage is little-endian
    const uint8_t* src = in.data->data() + static_cast<size_t>(r) * in_row;
    uint8_t* dst_bytes = out_data + static_cast<size_t>(r) * out_row;
    uint16_t row_values[512];
    for (int64_t j0 = 0; j0 < dim; j0 += 512) {
      const int64_t n = std::min<int64_t>(512, dim - j0);
      for (int64_t j = 0; j < n; ++j) {
        const int64_t col = j0 + j;
        const uint8_t b = bits == 4 ? src[col >> 1] : src[col];
        row_values[j] = lut[bits == 4 ? ((col & 1) ? (b >> 4) : (b & 0x0F)) : b];
      }
      std::memcpy(dst_bytes + static_cast<size_t>(j0) * 2, row_values, static_cast<size_t>(n) * 2);
    }
  }
}

// Row chunks on a few threads: large tables only, small ones stay on the caller.
void fold_by_lookup(const Tensor& in, const Tensor& out, uint8_t* out_data) {
  const int64_t rows = in.shape[0];
  const int64_t values = rows * in.shape[1];
  const int threads = values < (int64_t{1} << 20)
                          ? 1
                          : static_cast<int>(std::min<int64_t>(rows, std::max(1u, std::thread::hardware_concurrency())));
  if (threads <= 1) {
    fold_rows_by_lookup(in, out, 0, rows, out_data);
    return;
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    const int64_t begin = rows * t / threads, end = rows * (t + 1) / threads;
    pool.emplace_back([&, begin, end] { fold_rows_by_lookup(in, out, begin, end, out_data); });
  }
  for (auto& th : pool) th.join();
}

}  // namespace

Status fold_static_converts(Graph& graph) {
  for (size_t i = 0; i < graph.ops.size();) {
    Op& op = graph.ops[i];
    const Tensor* in = op.type == OpType::kConvert ? graph.find_tensor(op.inputs[0]) : nullptr;
    if (in == nullptr || in->kind != TensorKind::kStatic) {
      ++i;
      continue;
    }
    Tensor* out = graph.find_tensor(op.outputs[0]);
    if (out == nullptr || out->shape != in->shape || in->shape.size() != 2)
      return make_error(ErrorCode::kInternal, "cannot fold '" + op.name + "': shapes differ");
    if (out->kind == TensorKind::kAppRead)
      return make_error(ErrorCode::kUnsupported,
                        "cannot fold '" + op.name + "': its output is a graph output");
    if (in->data == nullptr || in->data->data() == nullptr)  // e.g. streamed into a file
      return make_error(ErrorCode::kInternal, "cannot fold '" + op.name + "': its input's data are not in memory");
    // The folds below read plain rows and encoding.scales: a row-interleaved
    // table (a loaded format-3 artifact) is folded from its plain copy.
    Tensor plain;
    if (in->interleaved()) {
      plain = deinterleave_rows(*in);
      in = &plain;
    }
    const int64_t rows = in->shape[0], dim = in->shape[1];
    const size_t in_row = row_storage_bytes(in->dtype, in->bitwidth(), dim);
    const size_t out_row = row_storage_bytes(out->dtype, out->bitwidth(), dim);
    std::vector<uint8_t> data(out_row * static_cast<size_t>(rows), 0);
    if (can_fold_by_lookup(*in, *out)) {
      fold_by_lookup(*in, *out, data.data());
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        requantize_row(in->data->data() + static_cast<size_t>(r) * in_row, *in, r,
                       data.data() + static_cast<size_t>(r) * out_row, *out, r, dim);
      }
    }
    out->kind = TensorKind::kStatic;
    out->data = std::make_shared<OwnedBuffer>(std::move(data));
    graph.ops.erase(graph.ops.begin() + static_cast<std::ptrdiff_t>(i));
  }
  graph.remove_unused_tensors();
  return graph.check();
}

}  // namespace qemb
