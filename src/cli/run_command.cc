#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/run_bags.h"
#include "core/file.h"
#include "qemb/half.h"
#include "qemb/npy.h"
#include "qemb/runtime.h"
#include "qemb/tokens.h"

namespace qemb::cli {
namespace {

// Lookups run and leave in pieces of about this many bytes, so that any
// number of ids needs bounded memory.
constexpr size_t kChunkBytes = size_t{16} << 20;

// The ids to look up: a --tokens list, or a --tokens-file (a regular-file
// .npy is read through its mapping a piece at a time, never held whole).
Result<std::unique_ptr<TokenStream>> tokens_for_run(const std::string& list, const std::string& file) {
  if (!list.empty() && !file.empty())
    return make_error(ErrorCode::kInvalidArgument, "give either --tokens or --tokens-file, not both");
  std::unique_ptr<TokenStream> ids;
  if (!list.empty()) {
    TokenBatch batch;
    QEMB_ASSIGN_OR_RETURN(batch.ids, parse_token_list(list));
    batch.shape = {static_cast<int64_t>(batch.ids.size())};
    ids = TokenStream::from_batch(std::move(batch));
  } else if (!file.empty()) {
    QEMB_ASSIGN_OR_RETURN(ids, TokenStream::open(file));
  } else {
    return make_error(ErrorCode::kInvalidArgument, "no token ids: pass --tokens 1,2,3 or --tokens-file FILE");
  }
  // As eval does: an empty list is a mistake, and must not replace an output.
  if (ids->size() == 0)
    return make_error(ErrorCode::kInvalidArgument, "the token list is empty: there are no ids to look up");
  return ids;
}

// Text rows, as "id: v v v" lines or, with --json, one JSON value nested as
// the output's shape (a 0-d id gives one array).
class RowPrinter {
 public:
  RowPrinter(const std::vector<int64_t>& token_shape, bool json) : shape_(token_shape), json_(json) {
    index_.assign(shape_.size(), 0);
  }

  // `dtype` says how to print uint16 values that hold half-precision bits.
  template <typename T>
  void row(int64_t id, const T* values, int64_t dim, const FloatDtype* dtype = nullptr) {
    if (json_) {
      // Open a bracket for every dimension this row starts.
      for (size_t k = 0; k < index_.size(); ++k)
        if (std::all_of(index_.begin() + static_cast<std::ptrdiff_t>(k), index_.end(), [](int64_t i) { return i == 0; }))
          text_ += '[';
      text_ += '[';
    } else {
      text_ += std::to_string(id) + ':';
    }
    char buf[32];
    // JSON has no infinity or NaN: --json writes them as the strings
    // "Infinity", "-Infinity" and "NaN" (which float() in Python and
    // Number() in JavaScript read back); text rows print inf, -inf, nan.
    auto put_float = [&](float y) {
      if (json_ && !std::isfinite(y))
        std::snprintf(buf, sizeof(buf), "%s", std::isnan(y) ? "\"NaN\"" : y > 0 ? "\"Infinity\"" : "\"-Infinity\"");
      else
        std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(y));
    };
    for (int64_t j = 0; j < dim; ++j) {
      if constexpr (std::is_same_v<T, float>) {
        put_float(values[j]);
      } else if (dtype != nullptr) {
        put_float(*dtype == FloatDtype::kF16 ? f16_to_float(values[j]) : bf16_to_float(values[j]));
      } else {
        std::snprintf(buf, sizeof(buf), "%u", static_cast<unsigned>(values[j]));
      }
      if (json_) text_ += j > 0 ? ", " : "";
      else text_ += ' ';
      text_ += buf;
    }
    if (!json_) {
      text_ += '\n';
      return;
    }
    text_ += ']';
    // Close every dimension this row ends, then advance the index.
    bool last_everywhere = true;
    for (size_t k = index_.size(); k-- > 0;) {
      if (index_[k] + 1 < shape_[k]) {
        last_everywhere = false;
        break;
      }
    }
    for (size_t k = index_.size(); k-- > 0;) {
      bool ends = true;
      for (size_t m = k; m < index_.size(); ++m) ends = ends && index_[m] + 1 == shape_[m];
      if (ends) text_ += ']';
    }
    text_ += last_everywhere ? "\n" : ",\n";
    for (size_t k = index_.size(); k-- > 0;) {
      if (++index_[k] < shape_[k]) break;
      index_[k] = 0;
    }
  }

  Status flush() {
    Status s = write_stdout(text_.data(), text_.size());
    text_.clear();
    return s;
  }

 private:
  std::vector<int64_t> shape_, index_;
  bool json_;
  std::string text_;
};

// `dtype` is the float type of dequantized rows, or nullptr for the
// activations themselves (uint16, or uint8 for an 8-bit activation scheme). bfloat16 has no NumPy type: its .npy holds the bit patterns
// as uint16.
template <typename T>
Status run_lookups(const EmbeddingTable& rt, const TokenStream& batch, const std::string& out, bool json,
                   const FloatDtype* dtype, const std::string& table_prefix) {
  const int64_t dim = rt.dim();
  const size_t n = batch.size();
  const size_t row_bytes = static_cast<size_t>(dim) * sizeof(T);
  const size_t chunk_rows = std::max<size_t>(1, kChunkBytes / std::max<size_t>(1, row_bytes));
  // Ids are read kIdChunk at a time (the rows chunk_rows at a time): memory
  // stays bounded whatever the number of ids.
  constexpr size_t kIdChunk = size_t{1} << 16;
  std::vector<int64_t> ids_buf(std::min(n, std::max(chunk_rows, kIdChunk)));
  // Every id is checked before anything is written, so an error names its
  // position in the whole list and leaves no partial output.
  for (size_t first = 0; first < n; first += ids_buf.size()) {
    const size_t count = std::min(ids_buf.size(), n - first);
    QEMB_RETURN_IF_ERROR(batch.read(first, count, ids_buf.data()));
    Status s = check_ids(std::span<const int64_t>(ids_buf.data(), count), rt.vocab_size());
    if (!s.ok()) {
      for (size_t i = 0; i < count; ++i) {
        const int64_t id = ids_buf[i];
        if (id < 0 || id >= rt.vocab_size())
          return make_error(ErrorCode::kOutOfRange,
                            table_prefix + "token id " + std::to_string(id) + " at position " + std::to_string(first + i) +
                                (id < 0 ? " is negative" : " is past the last row") + "; ids must be in [0, " +
                                std::to_string(rt.vocab_size()) + ")");
      }
      return s;
    }
  }
  std::unique_ptr<NpyWriter> npy;
  if (!out.empty()) {
    std::vector<int64_t> shape = batch.shape();
    shape.push_back(dim);
    const char* descr = dtype == nullptr ? (sizeof(T) == 1 ? "|u1" : "<u2")
                        : *dtype == FloatDtype::kF32 ? "<f4"
                        : *dtype == FloatDtype::kF16 ? "<f2"
                                                     : "<u2";
    QEMB_ASSIGN_OR_RETURN(npy, NpyWriter::create(out, descr, shape));
  }
  RowPrinter printer(batch.shape(), json);
  const size_t step = std::min(chunk_rows, ids_buf.size());
  std::vector<T> rows(std::min(n, step) * static_cast<size_t>(dim));
  for (size_t first = 0; first < n; first += step) {
    const size_t count = std::min(step, n - first);
    QEMB_RETURN_IF_ERROR(batch.read(first, count, ids_buf.data()));
    const std::span<const int64_t> ids(ids_buf.data(), count);
    if (dtype != nullptr) QEMB_RETURN_IF_ERROR(rt.lookup_dequantized(ids, *dtype, rows.data()));
    else if constexpr (std::is_same_v<T, float>) return make_error(ErrorCode::kInternal, "float rows need a dtype");
    else QEMB_RETURN_IF_ERROR(rt.lookup(ids, rows.data()));
    if (npy) {
      QEMB_RETURN_IF_ERROR(npy->write(rows.data(), count * row_bytes));
      continue;
    }
    const FloatDtype* half = std::is_same_v<T, float> ? nullptr : dtype;
    for (size_t i = 0; i < count; ++i) printer.row(ids[i], rows.data() + i * static_cast<size_t>(dim), dim, half);
    QEMB_RETURN_IF_ERROR(printer.flush());
  }
  return npy ? npy->finish() : flush_stdout();
}

}  // namespace

Result<const EmbeddingTable*> choose_table(const EmbeddingRuntime& rt, const std::string& name) {
  if (!name.empty()) return rt.find_table(name);
  if (rt.table_count() == 1) return &rt.table(0);
  std::string names;
  for (const std::string& n : rt.table_names()) names += (names.empty() ? "" : ", ") + n;
  return make_error(ErrorCode::kInvalidArgument, "the artifact holds " + std::to_string(rt.table_count()) +
                                                     " tables (" + names + "); choose one with --table NAME");
}

Result<Verify> parse_verify(const std::string& s) {
  if (s == "full") return Verify::kFull;
  if (s == "header") return Verify::kHeader;
  return make_error(ErrorCode::kInvalidArgument, "unknown --verify '" + s + "': expected full or header");
}

void add_run_command(CLI::App& app, Action& run) {
  struct Flags {
    std::string artifact, out, verify = "full", out_dtype = "f32";
    // Repeated once per table when pooling several (run_bags.h).
    std::vector<std::string> tokens, tokens_file, tables;
    bool dequantize = false, reference = false, json = false;
    int threads = 1;
  };
  auto f = std::make_shared<Flags>();
  auto bag = std::make_shared<BagFlags>();
  CLI::App* cmd = app.add_subcommand("run", "Look up token ids in a .qemb artifact");
  cmd->add_option("artifact", f->artifact, ".qemb artifact")->required();
  cmd->add_option("--tokens", f->tokens, "comma-separated ids, e.g. 1,2,3")->allow_extra_args(false);
  cmd->add_option("--tokens-file", f->tokens_file,
                  "ids in a text file or an int32/int64 .npy; '-' reads standard input")
      ->allow_extra_args(false);
  cmd->add_option("-o,--output", f->out,
                  "write a [N, D] .npy (the table's activations: uint16, or uint8 for 8a* schemes; floats for "
                  "--dequantize, with --out-dtype, and for weight-only w* schemes); '-' is standard output");
  CLI::Option* dequantize =
      cmd->add_flag("--dequantize", f->dequantize, "float output: y = s_a * (q - zp_a), float32 unless --out-dtype (weight-only w* tables: y = s_r * q, "
                    "their only output)");
  CLI::Option* out_dtype =
      cmd->add_option("--out-dtype", f->out_dtype,
                      "dtype of --dequantize or --bags output: f32 | f16 | bf16 (rounded to nearest even from the "
                      "float32 value; a bf16 .npy holds the bit patterns as uint16)")
          ->capture_default_str()
          ->check(parsed_by(parse_float_dtype));
  cmd->add_flag("--json", f->json,
                "print the rows as JSON arrays, nested as the output's shape; with --bags, a JSON summary (bags, "
                "each table's name, dim and columns) with the rows, or without them when -o writes them");
  cmd->add_flag("--reference", f->reference, "use the scalar reference interpreter");
  cmd->add_option("--threads", f->threads, "threads for large batches (0 = one per core)")
      ->check(count_rule(0, kMaxThreads))
      ->capture_default_str();
  cmd->add_option("--verify", f->verify, "checksums to verify on load: full | header")
      ->capture_default_str()
      ->check(parsed_by(parse_verify));
  add_bag_flags(*cmd, *bag);
  cmd->add_option("--table", f->tables,
                  "the table to look up in an artifact of several (see qemb inspect); with --bags, repeat it to "
                  "pool several tables in one call")
      ->allow_extra_args(false);
  cmd->callback([f, bag, out_dtype, dequantize, &run] {
    if (out_dtype->count() > 0 && !dequantize->count() && !bag_flags_given(*bag))
      throw CLI::RequiresError("--out-dtype", "--dequantize or --bags");
    run = [f, bag]() -> Status {
      if (bag_flags_given(*bag)) {
        RuntimeOptions options;
        QEMB_ASSIGN_OR_RETURN(options.verify, parse_verify(f->verify));
        options.threads = f->threads;
        options.reference = f->reference;
        bag->tables = f->tables;
        bag->out_dtype = f->out_dtype;
        return run_bags(f->artifact, f->tokens, f->tokens_file, *bag, options, f->out, f->json);
      }
      // A plain lookup reads one id list from one table.
      if (f->tables.size() > 1)
        return make_error(ErrorCode::kInvalidArgument,
                          "--table is given " + std::to_string(f->tables.size()) +
                              " times; a lookup reads one table (pool several with one --bags per --table)");
      for (const auto* list : {&f->tokens, &f->tokens_file}) {
        if (list->size() > 1)
          return make_error(ErrorCode::kInvalidArgument,
                            std::string(list == &f->tokens ? "--tokens" : "--tokens-file") + " is given " +
                                std::to_string(list->size()) +
                                " times; a lookup reads one id list (pool several tables with --bags)");
      }
      if (f->json && !f->out.empty())
        return make_error(ErrorCode::kInvalidArgument,
                          "--json prints the rows; -o writes them to a .npy: give one or the other");
      QEMB_RETURN_IF_ERROR(check_outputs_are_not_inputs(
          {{"-o", f->out}}, {{"--tokens-file", f->tokens_file.empty() ? "" : f->tokens_file[0]}}));
      QEMB_ASSIGN_OR_RETURN(std::unique_ptr<TokenStream> batch,
                            tokens_for_run(f->tokens.empty() ? "" : f->tokens[0],
                                           f->tokens_file.empty() ? "" : f->tokens_file[0]));
      if (!f->out.empty() && same_file(f->out, f->artifact))
        return make_error(ErrorCode::kInvalidArgument,
                          "the output '" + f->out + "' is the input artifact; choose another path");
      RuntimeOptions options;
      QEMB_ASSIGN_OR_RETURN(options.verify, parse_verify(f->verify));
      options.threads = f->threads;
      options.reference = f->reference;
      QEMB_ASSIGN_OR_RETURN(auto rt, EmbeddingRuntime::load(f->artifact, options));
      QEMB_ASSIGN_OR_RETURN(const EmbeddingTable* table, choose_table(*rt, f->tables.empty() ? "" : f->tables[0]));
      // In an artifact of several tables, errors name the table.
      const std::string prefix = rt->table_count() > 1 ? "table '" + table->name() + "': " : "";
      // Activations as they are (uint16 or uint8); a weight-only table's
      // lookups are floats already, so it writes them with or without --dequantize.
      const int bits = table->activation_bits();
      if (!f->dequantize && bits == 16) return run_lookups<uint16_t>(*table, *batch, f->out, f->json, nullptr, prefix);
      if (!f->dequantize && bits == 8) return run_lookups<uint8_t>(*table, *batch, f->out, f->json, nullptr, prefix);
      QEMB_ASSIGN_OR_RETURN(const FloatDtype dtype, parse_float_dtype(f->out_dtype));
      if (dtype == FloatDtype::kF32) return run_lookups<float>(*table, *batch, f->out, f->json, &dtype, prefix);
      return run_lookups<uint16_t>(*table, *batch, f->out, f->json, &dtype, prefix);
    };
  });
}

}  // namespace qemb::cli
