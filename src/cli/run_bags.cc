#include "cli/run_bags.h"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "cli/cli.h"
#include "qemb/embedding_bag.h"
#include "qemb/file.h"
#include "qemb/npy.h"

namespace qemb::cli {

namespace {

const char kDefaultBagFormat[] = "include-last-offset";

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
                 "number of ids) or as --bag-format says; writes float32 [B, D]");
  run.add_option("--bag-format", f.bag_format, "--bags holds: include-last-offset | offsets (B) | lengths (B)")
      ->capture_default_str()
      ->check(parsed_by(parse_bag_format));
  run.add_option("--weights", f.weights, "per-sample weights with --bags: a float32 .npy, one per id");
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

Status run_bags(const std::string& artifact, const std::string& tokens, const std::string& tokens_file,
                const BagFlags& f, const RuntimeOptions& options, const std::string& out) {
  if (f.bags.empty())
    return make_error(ErrorCode::kInvalidArgument,
                      "--weights, --pool, --padding-idx and --bag-format pool bags: give --bags OFFSETS.npy too");
  QEMB_ASSIGN_OR_RETURN(BagBoundaries format, parse_bag_format(f.bag_format));
  QEMB_ASSIGN_OR_RETURN(PoolMode mode, parse_pool_mode(f.pool));
  std::optional<int64_t> padding;
  if (!f.padding_idx.empty()) {
    int64_t v = 0;
    const char* end = f.padding_idx.data() + f.padding_idx.size();
    auto [ptr, ec] = std::from_chars(f.padding_idx.data(), end, v);
    if (ec != std::errc() || ptr != end)
      return make_error(ErrorCode::kInvalidArgument, "--padding-idx '" + f.padding_idx + "' is not an integer");
    padding = v;
  }
  QEMB_ASSIGN_OR_RETURN(std::vector<int64_t> ids, tokens_from_flags(tokens, tokens_file));
  QEMB_ASSIGN_OR_RETURN(NpyArray bounds,
                        read_vector(f.bags, "--bags", "bag offsets and lengths", {"<i4", "<i8"}, "int32 or int64"));
  std::optional<NpyArray> weights;
  if (!f.weights.empty()) {
    QEMB_ASSIGN_OR_RETURN(weights, read_vector(f.weights, "--weights", "per-sample weights", {"<f4"},
                                               "float32 ('<f4')"));
  }
  if (!out.empty() && same_file(out, artifact))
    return make_error(ErrorCode::kInvalidArgument, "the output '" + out + "' is the input artifact; choose another path");
  QEMB_ASSIGN_OR_RETURN(auto rt, EmbeddingRuntime::load(artifact, options));

  QEMB_ASSIGN_OR_RETURN(const EmbeddingTable* table, choose_table(*rt, f.table));
  TableBags t;
  t.table = rt.get();
  t.embedding_table = table;
  t.name = std::filesystem::path(artifact).filename().string();
  t.indices = std::span<const int64_t>(ids);
  const size_t count = static_cast<size_t>(bounds.num_elements());
  if (bounds.dtype == "<i8") {
    t.boundaries = std::span<const int64_t>(reinterpret_cast<const int64_t*>(bounds.data.data()), count);
  } else {
    t.boundaries = std::span<const int32_t>(reinterpret_cast<const int32_t*>(bounds.data.data()), count);
  }
  t.kind = format;
  t.mode = mode;
  t.padding_idx = padding;
  if (weights) {
    t.per_sample_weights = std::span<const float>(reinterpret_cast<const float*>(weights->data.data()),
                                                  static_cast<size_t>(weights->num_elements()));
  }
  QEMB_ASSIGN_OR_RETURN(size_t bags, bag_count(t));
  const int64_t dim = table->dim();  // the chosen table's, not the first's
  std::vector<float> pooled(bags * static_cast<size_t>(dim));
  QEMB_RETURN_IF_ERROR(embedding_bag(t, pooled.data()));
  if (!out.empty()) return write_npy_f32(out, pooled.data(), static_cast<int64_t>(bags), dim);
  std::string text;
  char buf[32];
  for (size_t b = 0; b < bags; ++b) {
    text += std::to_string(b) + ':';
    for (int64_t j = 0; j < dim; ++j) {
      std::snprintf(buf, sizeof(buf), " %.9g", static_cast<double>(pooled[b * static_cast<size_t>(dim) + j]));
      text += buf;
    }
    text += '\n';
  }
  QEMB_RETURN_IF_ERROR(write_stdout(text.data(), text.size()));
  return flush_stdout();
}

}  // namespace qemb::cli
