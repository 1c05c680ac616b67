#include "cli/run_bags.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "cli/cli.h"
#include "qemb/embedding_bag.h"
#include "core/file.h"
#include "core/json_text.h"
#include "qemb/half.h"
#include "qemb/npy.h"

namespace qemb::cli {

namespace {

const char kDefaultBagFormat[] = "include-last-offset";

// Pooled rows are computed and written about this many bytes at a time.
constexpr size_t kChunkBytes = size_t{16} << 20;

Result<BagBoundaries> parse_bag_format(const std::string& s) {
  if (s == "include-last-offset") return BagBoundaries::kOffsetsWithLast;
  if (s == "offsets") return BagBoundaries::kOffsets;
  if (s == "lengths") return BagBoundaries::kLengths;
  return make_error(ErrorCode::kInvalidArgument,
                    "unknown --bag-format '" + s + "': expected include-last-offset, offsets or lengths");
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A 1-D .npy of the given dtypes, as raw little-endian bytes.
Result<NpyArray> read_vector(const std::string& path, const char* flag, const char* what,
                             std::initializer_list<const char*> dtypes, const char* dtype_words) {
  QEMB_ASSIGN_OR_RETURN(NpyArray a, read_npy(path));
  bool known = false;
  for (const char* d : dtypes) known = known || a.dtype == d;
  if (!known)
    return make_error(ErrorCode::kInvalidArgument, std::string(flag) + " '" + path + "' holds dtype '" + a.dtype +
                                                       "'; " + what + " must be " + dtype_words);
  if (a.shape.size() != 1)
    return make_error(ErrorCode::kInvalidArgument, std::string(flag) + " '" + path + "' has shape " +
                                                       shape_text(a.shape) + "; " + what + " must be a 1-D array");
  return a;
}

}  // namespace

void add_bag_flags(CLI::App& run, BagFlags& f) {
  run.add_option("--bags", f.bags,
                 "pool the ids into bags: an int32/int64 .npy of offsets (B + 1 of them, the last equal to the "
                 "number of ids) or as --bag-format says; writes float32 [B, D] (or --out-dtype). Several "
                 "tables at once: repeat --table NAME, --bags and the ids (and --weights) once per table, in the "
                 "same order; the output is [B, sum of D], each table's columns at its offset")
      ->allow_extra_args(false);
  run.add_option("--bag-format", f.bag_format, "--bags holds: include-last-offset | offsets (B) | lengths (B)")
      ->capture_default_str()
      ->check(parsed_by(parse_bag_format));
  run.add_option("--weights", f.weights,
                 "per-sample weights with --bags: a float32 .npy, one per id (once per table, or not at all)")
      ->allow_extra_args(false);
  run.add_option("--pool", f.pool, "how --bags pools: sum | mean")
      ->capture_default_str()
      ->check(parsed_by([](const std::string& s) { return parse_pool_mode(s); }));
  run.add_option("--padding-idx", f.padding_idx, "with --bags: ids equal to it add nothing and do not count")
      ->check(integer_rule());
}

bool bag_flags_given(const BagFlags& f) {
  return !f.bags.empty() || !f.weights.empty() || f.pool != "sum" || !f.padding_idx.empty() ||
         f.bag_format != kDefaultBagFormat;
}

namespace {

std::string times(size_t n) { return n == 1 ? "once" : std::to_string(n) + " times"; }

}  // namespace

Status run_bags(const std::string& artifact, const std::vector<std::string>& tokens,
                const std::vector<std::string>& tokens_files, const BagFlags& f, const RuntimeOptions& options,
                const std::string& out, bool json) {
  if (f.bags.empty())
    return make_error(ErrorCode::kInvalidArgument,
                      "--weights, --pool, --padding-idx and --bag-format pool bags: give --bags OFFSETS.npy too");
  // Table-batched: --table, --bags, the ids and any --weights once per table,
  // in the same order.
  const size_t tables = std::max<size_t>(1, f.tables.size());
  if ((f.tables.size() > 1 || f.bags.size() > 1) && f.bags.size() != f.tables.size())
    return make_error(ErrorCode::kInvalidArgument,
                      "--bags is given " + times(f.bags.size()) + " and --table " + times(f.tables.size()) +
                          ": pooling several tables takes one --table NAME and one --bags file per table, in the "
                          "same order");
  if (!tokens.empty() && !tokens_files.empty())
    return make_error(ErrorCode::kInvalidArgument, "give either --tokens or --tokens-file, not both");
  const std::vector<std::string>& id_lists = tokens.empty() ? tokens_files : tokens;
  const std::string id_flag = tokens.empty() ? "--tokens-file" : "--tokens";
  if (id_lists.empty())
    return make_error(ErrorCode::kInvalidArgument, "no token ids: pass --tokens 1,2,3 or --tokens-file FILE");
  if (id_lists.size() != tables)
    return make_error(ErrorCode::kInvalidArgument,
                      id_flag + " is given " + times(id_lists.size()) + " for " + std::to_string(tables) +
                          (tables == 1 ? " table" : " tables") + ": give one id list per --table, in the same order");
  if (!f.weights.empty() && f.weights.size() != tables)
    return make_error(ErrorCode::kInvalidArgument,
                      "--weights is given " + times(f.weights.size()) + " for " + std::to_string(tables) +
                          (tables == 1 ? " table" : " tables") +
                          ": give one weights file per --table, in the same order, or none");
  if (json && out == kStdioPath)
    return make_error(ErrorCode::kInvalidArgument,
                      "--json prints to standard output, which '-o -' already carries the pooled rows on; write them "
                      "to a file with --json, or drop --json");
  QEMB_ASSIGN_OR_RETURN(BagBoundaries format, parse_bag_format(f.bag_format));
  QEMB_ASSIGN_OR_RETURN(PoolMode mode, parse_pool_mode(f.pool));
  QEMB_ASSIGN_OR_RETURN(FloatDtype dtype, parse_float_dtype(f.out_dtype));
  std::optional<int64_t> padding;
  if (!f.padding_idx.empty()) {
    int64_t v = 0;
    const char* end = f.padding_idx.data() + f.padding_idx.size();
    auto [ptr, ec] = std::from_chars(f.padding_idx.data(), end, v);
    if (ec != std::errc() || ptr != end)
      return make_error(ErrorCode::kInvalidArgument, "--padding-idx '" + f.padding_idx + "' is not an integer");
    padding = v;
  }
  {
    std::vector<PathFlag> inputs;
    for (const std::string& p : tokens_files) inputs.push_back({"--tokens-file", p});
    for (const std::string& p : f.bags) inputs.push_back({"--bags", p});
    for (const std::string& p : f.weights) inputs.push_back({"--weights", p});
    QEMB_RETURN_IF_ERROR(check_outputs_are_not_inputs({{"-o", out}}, inputs));
  }
  // Every input is read before the artifact is loaded; the spans below point
  // into these.
  std::vector<std::vector<int64_t>> ids(tables);
  std::vector<NpyArray> bounds(tables);
  std::vector<std::optional<NpyArray>> weights(tables);
  for (size_t t = 0; t < tables; ++t) {
    QEMB_ASSIGN_OR_RETURN(ids[t], tokens.empty() ? tokens_from_flags("", tokens_files[t])
                                                  : tokens_from_flags(tokens[t], ""));
    QEMB_ASSIGN_OR_RETURN(bounds[t], read_vector(f.bags[t], "--bags", "bag offsets and lengths", {"<i4", "<i8"},
                                                 "int32 or int64"));
    if (!f.weights.empty()) {
      QEMB_ASSIGN_OR_RETURN(weights[t], read_vector(f.weights[t], "--weights", "per-sample weights", {"<f4"},
                                                    "float32 ('<f4')"));
    }
  }
  if (!out.empty() && same_file(out, artifact))
    return make_error(ErrorCode::kInvalidArgument, "the output '" + out + "' is the input artifact; choose another path");
  QEMB_ASSIGN_OR_RETURN(auto rt, EmbeddingRuntime::load(artifact, options));

  std::vector<TableBags> batch(tables);
  int64_t width = 0;  // sum of the tables' D
  for (size_t t = 0; t < tables; ++t) {
    TableBags& tb = batch[t];
    QEMB_ASSIGN_OR_RETURN(tb.embedding_table, choose_table(*rt, f.tables.empty() ? "" : f.tables[t]));
    tb.table = rt.get();
    // Errors name the table: its --table NAME, or the file of a one-table artifact.
    tb.name = !f.tables.empty() ? f.tables[t] : std::filesystem::path(artifact).filename().string();
    tb.indices = std::span<const int64_t>(ids[t]);
    const size_t count = static_cast<size_t>(bounds[t].num_elements());
    if (bounds[t].dtype == "<i8") {
      tb.boundaries = std::span<const int64_t>(reinterpret_cast<const int64_t*>(bounds[t].data.data()), count);
    } else {
      tb.boundaries = std::span<const int32_t>(reinterpret_cast<const int32_t*>(bounds[t].data.data()), count);
    }
    tb.kind = format;
    tb.mode = mode;
    tb.padding_idx = padding;
    if (weights[t]) {
      tb.per_sample_weights = std::span<const float>(reinterpret_cast<const float*>(weights[t]->data.data()),
                                                     static_cast<size_t>(weights[t]->num_elements()));
    }
    width += tb.embedding_table->dim();  // the chosen table's, not the first's
  }
  // Every input is checked whole before anything is written; then the bags
  // are pooled and written kChunkBytes of output at a time, so memory stays
  // bounded whatever the number of bags (as plain `run` does).
  QEMB_RETURN_IF_ERROR(check_bags(batch));
  QEMB_ASSIGN_OR_RETURN(size_t bags, bag_count(batch[0]));
  const size_t value_bytes = dtype == FloatDtype::kF32 ? sizeof(float) : sizeof(uint16_t);
  const size_t row_bytes = std::max<size_t>(1, static_cast<size_t>(width) * value_bytes);
  const size_t chunk_bags = std::max<size_t>(1, kChunkBytes / row_bytes);
  // Each table's bags as B + 1 absolute offsets into its ids.
  std::vector<std::vector<int64_t>> starts(tables);
  for (size_t t = 0; t < tables; ++t) {
    const TableBags& tb = batch[t];
    std::vector<int64_t>& s = starts[t];
    s.resize(bags + 1);
    const int64_t n = static_cast<int64_t>(tb.indices.size());
    if (tb.kind == BagBoundaries::kLengths) {
      s[0] = 0;
      for (size_t b = 0; b < bags; ++b) s[b + 1] = s[b] + tb.boundaries[b];
    } else {
      for (size_t b = 0; b < bags; ++b) s[b] = tb.boundaries[b];
      s[bags] = n;
    }
  }
  std::unique_ptr<NpyWriter> npy;
  if (!out.empty()) {
    // bfloat16 has no NumPy type: its .npy holds the bit patterns as uint16.
    const char* descr = dtype == FloatDtype::kF32 ? "<f4" : dtype == FloatDtype::kF16 ? "<f2" : "<u2";
    QEMB_ASSIGN_OR_RETURN(npy, NpyWriter::create(out, descr, {static_cast<int64_t>(bags), width}));
  }
  if (json) {
    // A summary of the call (what each table contributes, where its columns
    // are), then the rows unless -o took them.
    nlohmann::json j;
    j["artifact"] = artifact;
    j["bags"] = bags;
    j["width"] = width;
    j["dtype"] = to_string(dtype);
    j["pool"] = to_string(mode);
    j["output"] = out.empty() ? nlohmann::json() : nlohmann::json(out);
    j["tables"] = nlohmann::json::array();
    int64_t column = 0;
    for (size_t t = 0; t < tables; ++t) {
      const EmbeddingTable& table = *batch[t].embedding_table;
      j["tables"].push_back({{"name", table.name()},
                             {"vocab_size", table.vocab_size()},
                             {"dim", table.dim()},
                             {"columns", {column, column + table.dim()}},
                             {"ids", batch[t].indices.size()},
                             {"kernel", bag_kernel_name(table)}});
      column += table.dim();
    }
    std::string head = json_text(j, 2);
    head.resize(head.size() - 2);  // the closing "\n}"
    head += out.empty() ? ",\n  \"rows\": [" : "\n}\n";
    QEMB_RETURN_IF_ERROR(write_stdout(head.data(), head.size()));
  }
  const size_t buffer_bags = std::min(bags, chunk_bags);
  std::vector<float> pooled(dtype == FloatDtype::kF32 ? buffer_bags * static_cast<size_t>(width) : 0);
  std::vector<uint16_t> half(dtype == FloatDtype::kF32 ? 0 : buffer_bags * static_cast<size_t>(width));
  std::vector<std::vector<int64_t>> chunk_offsets(tables);
  std::vector<TableBags> chunk(batch);
  std::string text;
  char buf[32];
  for (size_t first = 0; first < bags; first += chunk_bags) {
    const size_t count = std::min(chunk_bags, bags - first);
    for (size_t t = 0; t < tables; ++t) {
      const TableBags& whole = batch[t];
      const std::vector<int64_t>& s = starts[t];
      const size_t lo = static_cast<size_t>(s[first]), hi = static_cast<size_t>(s[first + count]);
      std::vector<int64_t>& o = chunk_offsets[t];
      o.resize(count + 1);
      for (size_t b = 0; b <= count; ++b) o[b] = s[first + b] - s[first];
      TableBags& c = chunk[t];
      c.indices = std::span<const int64_t>(ids[t].data() + lo, hi - lo);
      c.boundaries = std::span<const int64_t>(o);
      c.kind = BagBoundaries::kOffsetsWithLast;
      if (whole.per_sample_weights) c.per_sample_weights = whole.per_sample_weights->subspan(lo, hi - lo);
    }
    if (dtype == FloatDtype::kF32) {
      QEMB_RETURN_IF_ERROR(embedding_bags(chunk, pooled.data()));
    } else {
      QEMB_RETURN_IF_ERROR(embedding_bags(
          chunk, dtype == FloatDtype::kF16 ? BagOutputType::kFloat16 : BagOutputType::kBFloat16, half.data()));
    }
    const size_t values = count * static_cast<size_t>(width);
    if (npy) {
      if (dtype == FloatDtype::kF32) QEMB_RETURN_IF_ERROR(npy->write(pooled.data(), values * sizeof(float)));
      else QEMB_RETURN_IF_ERROR(npy->write(half.data(), values * sizeof(uint16_t)));
      continue;
    }
    text.clear();
    for (size_t b = 0; b < count; ++b) {
      if (json) text += first + b == 0 ? "\n    [" : ",\n    [";
      else text += std::to_string(first + b) + ':';
      for (int64_t j = 0; j < width; ++j) {
        const size_t k = b * static_cast<size_t>(width) + static_cast<size_t>(j);
        const float y = dtype == FloatDtype::kF32   ? pooled[k]
                        : dtype == FloatDtype::kF16 ? f16_to_float(half[k])
                                                    : bf16_to_float(half[k]);
        if (json && !std::isfinite(y))  // as plain --json rows: JSON has no infinity or NaN
          std::snprintf(buf, sizeof(buf), "%s\"%s\"", j ? ", " : "",
                        std::isnan(y) ? "NaN" : y > 0 ? "Infinity" : "-Infinity");
        else if (json)
          std::snprintf(buf, sizeof(buf), "%s%.9g", j ? ", " : "", static_cast<double>(y));
        else
          std::snprintf(buf, sizeof(buf), " %.9g", static_cast<double>(y));
        text += buf;
      }
      text += json ? "]" : "\n";
    }
    QEMB_RETURN_IF_ERROR(write_stdout(text.data(), text.size()));
  }
  if (json && out.empty()) {
    const std::string tail = bags > 0 ? "\n  ]\n}\n" : "]\n}\n";
    QEMB_RETURN_IF_ERROR(write_stdout(tail.data(), tail.size()));
  }
  if (npy) {
    QEMB_RETURN_IF_ERROR(npy->finish());
    return json ? flush_stdout() : Status::Ok();
  }
  return flush_stdout();
}

}  // namespace qemb::cli
