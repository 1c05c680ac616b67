#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <cstring>
#include <cstdio>

#include "cli/cli.h"
#include "cli/option_names.h"
#include "qemb/checkpoint.h"
#include "qemb/compiler.h"
#include "core/file.h"
#include "qemb/inspect.h"
#include "core/json_text.h"
#include "qemb/runtime.h"
#include "core/strings.h"
#include "qemb/tokens.h"

namespace qemb::cli {

std::FILE* summary_stream(const std::string& output) {
  return output == kStdioPath || same_file(output, "/dev/stdout") ? stderr : stdout;
}

Result<std::vector<int64_t>> tokens_from_flags(const std::string& list, const std::string& file) {
  if (!list.empty() && !file.empty())
    return make_error(ErrorCode::kInvalidArgument, "give either --tokens or --tokens-file, not both");
  if (!list.empty()) return parse_token_list(list);
  if (!file.empty()) return read_token_file(file);
  return make_error(ErrorCode::kInvalidArgument, "no token ids: pass --tokens 1,2,3 or --tokens-file FILE");
}

namespace {

// A one-line progress bar on stderr: rows done, rate and time left.
class ProgressBar {
 public:
  void operator()(const char* phase, int64_t done, int64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (phase_ == nullptr || std::strcmp(phase, phase_) != 0) {
      phase_ = phase;
      start_ = now;
      finished_ = false;
    }
    if (finished_) return;  // the phase's last report repeats the total
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0;
    const double left = rate > 0 ? static_cast<double>(total - done) / rate : 0.0;
    const int width = 30;
    const int filled = total > 0 ? static_cast<int>(width * done / total) : width;
    std::fprintf(stderr, "\r%-8s [%.*s%*s] %lld/%lld rows  %.0f rows/s  %.1fs left ", phase, filled,
                 "##############################", width - filled, "", static_cast<long long>(done),
                 static_cast<long long>(total), rate, left);
    if (done == total) {
      std::fprintf(stderr, "\n");
      finished_ = true;
    }
    std::fflush(stderr);
  }

 private:
  const char* phase_ = nullptr;
  std::chrono::steady_clock::time_point start_;
  bool finished_ = false;
};

// Checks each "VALUE" or "TENSOR=VALUE" of a per-table flag with `parse`.
// The split is at the last '=' (no value holds one), so a tensor name may.
template <typename Parse>
CLI::Validator per_table(Parse parse) {
  return CLI::Validator(
      [parse](std::string& v) -> std::string {
        const size_t eq = v.rfind('=');
        auto r = parse(eq == std::string::npos ? v : v.substr(eq + 1));
        return r.ok() ? std::string() : r.error().message;
      },
      "");
}

// Applies "VALUE" (every table) and "TABLE=VALUE" (that table, by its name or
// its tensor's; `names` and `tensors` are per table) entries of a
// per-table flag, the general ones first. Two general values, or two values
// for one table, are refused: the last one silently winning hid typos.
Status apply_per_table(const char* flag, const std::vector<std::string>& entries,
                       const std::vector<std::string>& names, const std::vector<std::string>& tensors,
                       const std::function<Status(size_t, const std::string&)>& set) {
  std::map<std::string, std::string> given;  // tensor ("" for every table) -> its entry
  for (const std::string& e : entries) {
    const size_t eq = e.rfind('=');
    const std::string key = eq == std::string::npos ? std::string() : e.substr(0, eq);
    auto [it, fresh] = given.emplace(key, e);
    if (!fresh)
      return make_error(ErrorCode::kInvalidArgument,
                        std::string(flag) + " is given twice for " +
                            (key.empty() ? std::string("every table") : "'" + key + "'") + " (" + flag + " " +
                            it->second + " and " + flag + " " + e + "); give one value");
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (const std::string& e : entries) {
      const size_t eq = e.rfind('=');
      if ((eq == std::string::npos) != (pass == 0)) continue;
      if (eq == std::string::npos) {
        for (size_t i = 0; i < tensors.size(); ++i) QEMB_RETURN_IF_ERROR(set(i, e));
        continue;
      }
      const std::string tensor = e.substr(0, eq);
      auto it = std::find(names.begin(), names.end(), tensor);
      if (it == names.end()) {
        auto by_tensor = std::find(tensors.begin(), tensors.end(), tensor);
        if (by_tensor == tensors.end())
          return make_error(ErrorCode::kInvalidArgument, std::string(flag) + " " + e + ": '" + tensor +
                                                             "' is not one of the tables being compiled");
        it = names.begin() + (by_tensor - tensors.begin());
      }
      QEMB_RETURN_IF_ERROR(set(static_cast<size_t>(it - names.begin()), e.substr(eq + 1)));
    }
  }
  return Status::Ok();
}

}  // namespace

std::function<void(const char*, int64_t, int64_t)> progress_bar() { return ProgressBar(); }

void add_compile_command(CLI::App& app, Action& run) {
  struct Flags {
    std::string checkpoint, sdk_version, calibration, out, name = "embedding", tensor_file;
    std::vector<std::string> tensors, schemes = {"16a4w"}, patterns = {"auto"}, modes = {"auto"};
    uint64_t memory_budget = kDefaultMemoryBudget;
    bool quiet = false, json = false, fail_on_collapse = false;
    int threads = 0;
    int64_t max_collapsed_rows = -1;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("compile", "Quantize a checkpoint's embedding into a .qemb artifact");
  cmd->add_option("checkpoint", f->checkpoint, "checkpoint: safetensors file, index JSON, folder or GGUF file")->required();
  // Repeatable and comma-separated; each takes one value so the checkpoint
  // positional is never swallowed.
  auto list = [](CLI::Option* o) {
    return o->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)->delimiter(',');
  };
  list(cmd->add_option("--tensor", f->tensors,
                       "tensor name or glob, or TENSOR=NAME to name its table (run --table NAME); several "
                       "(repeated or comma-separated) make one artifact of several tables, in the order given, a "
                       "glob's matches in the checkpoint's order (default: the embedding, detected by name)"));
  cmd->add_option("--tensor-file", f->tensor_file,
                  "tensor names, one a line, taken whole (for names holding ',' or '='); adds to --tensor");
  list(cmd->add_option("--scheme", f->schemes, "16a4w | 16a8w | 16a2w | 8a4w | 8a8w | 8a2w (uint16 / uint8 activations) | w4 | w8 | w2 (weight-only: float "
                                                  "outputs), or TENSOR=SCHEME for one table")
           ->capture_default_str()
           ->check(per_table(parse_scheme)));
  list(cmd->add_option("--pattern", f->patterns, "auto | optimized | legacy, or TENSOR=PATTERN for one table")
           ->capture_default_str()
           ->check(per_table(parse_pattern)));
  cmd->add_option("--qnn-sdk-version", f->sdk_version,
                  "target QNN SDK version (default: from QNN_SDK_ROOT)")
      ->check(sdk_version_rule());
  cmd->add_option("--calibration-tokens", f->calibration,
                  "token ids whose rows define the activation range (default: the whole table)");
  list(cmd->add_option("--mode", f->modes, "materialize | fused | auto, or TENSOR=MODE for one table")
           ->capture_default_str()
           ->check(per_table(parse_compile_mode)));
  cmd->add_option("--memory-budget", f->memory_budget,
                  "auto mode: fuse when the uint16 table would exceed this many bytes (256MiB, 1GiB, ...)")
      ->transform(size_rule(kMaxCount))
      ->capture_default_str();
  CLI::Option* name_opt =
      cmd->add_option("--name", f->name, "node name N of the lowered ops (one table; several are named by their tensor)")
          ->capture_default_str();
  cmd->add_option("-o,--output", f->out, "output .qemb file")->required();
  cmd->add_option("--threads", f->threads, "threads that quantize rows (0 = one per core)")
      ->check(count_rule(0, kMaxThreads))
      ->capture_default_str();
  CLI::Option* fail_opt = cmd->add_flag(
      "--fail-on-collapse", f->fail_on_collapse,
      "fail (exit 1, nothing written) when the deployed pattern collapses any row (--max-collapsed-rows 0)");
  cmd->add_option("--max-collapsed-rows", f->max_collapsed_rows,
                  "fail (exit 1, nothing written) when the deployed pattern collapses more than N rows")
      ->check(count_rule(0, kMaxCount))
      ->excludes(fail_opt);
  cmd->add_flag("--quiet", f->quiet, "print nothing on success and no progress bar");
  cmd->add_flag("--json", f->json,
                "print the new artifact as `qemb inspect --json` does, with the compile's timing");
  cmd->callback([f, &run, name_opt] {
    const bool named = name_opt->count() > 0;
    run = [f, named]() -> Status {
      if (f->json && f->out == "-")
        return make_error(ErrorCode::kInvalidArgument,
                          "--json prints to standard output, which '-o -' already carries the artifact on; "
                          "write the artifact to a file with --json, or drop --json");
      QEMB_RETURN_IF_ERROR(
          check_outputs_are_not_inputs({{"-o", f->out}}, {{"--calibration-tokens", f->calibration}}));
      QEMB_RETURN_IF_ERROR(check_outputs_are_not_inputs({{"-o", f->out}}, {{"--tensor-file", f->tensor_file}}));
      std::vector<std::string> specs = f->tensors;
      if (!f->tensor_file.empty()) {
        QEMB_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, read_input(f->tensor_file));
        std::string line;
        for (size_t i = 0; i <= bytes.size(); ++i) {
          if (i == bytes.size() || bytes[i] == '\n') {
            if (!line.empty() && line.back() == '\r') line.pop_back();
            if (!line.empty()) specs.push_back(line);
            line.clear();
          } else {
            line.push_back(static_cast<char>(bytes[i]));
          }
        }
        if (specs.size() == f->tensors.size())
          return make_error(ErrorCode::kInvalidArgument,
                            "--tensor-file '" + f->tensor_file + "' names no tensor (one name a line)");
      }
      QEMB_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(f->checkpoint));
      // --tensor's specs may name their table (TENSOR=NAME); --tensor-file's
      // lines are tensor names taken whole.
      std::vector<NamedTable> selected;
      {
        // No --tensor with a --tensor-file: only the file's tensors, not the
        // detected embedding.
        if (!f->tensors.empty() || f->tensor_file.empty()) {
          QEMB_ASSIGN_OR_RETURN(selected, ckpt.select_named_tables(f->tensors));
        }
        if (!f->tensor_file.empty()) {
          const std::vector<std::string> lines(specs.begin() + static_cast<std::ptrdiff_t>(f->tensors.size()),
                                               specs.end());
          QEMB_ASSIGN_OR_RETURN(std::vector<std::string> from_file, ckpt.select_tables(lines));
          for (const std::string& t : from_file) {
            if (std::any_of(selected.begin(), selected.end(), [&](const NamedTable& s) { return s.tensor == t; }))
              continue;
            if (std::any_of(selected.begin(), selected.end(), [&](const NamedTable& s) { return s.name == t; }))
              return make_error(ErrorCode::kInvalidArgument,
                                "two tables are both named '" + t + "' (a --tensor NAME and a --tensor-file line); "
                                "table names must be unique");
            selected.push_back({t, t});
          }
        }
      }
      const bool aliased = std::any_of(selected.begin(), selected.end(),
                                       [](const NamedTable& t) { return t.name != t.tensor; });
      if (selected.size() > 1 && named)
        return make_error(ErrorCode::kInvalidArgument,
                          "--name names a one-table artifact; with several tables each is named by its tensor or "
                          "by --tensor TENSOR=NAME");
      if (aliased && named)
        return make_error(ErrorCode::kInvalidArgument,
                          "--name and --tensor TENSOR=NAME both name the table; give one of them");
      std::vector<std::string> tensors, table_names;
      for (const NamedTable& t : selected) {
        tensors.push_back(t.tensor);
        table_names.push_back(selected.size() == 1 && !aliased ? f->name : t.name);
      }
      CompileOptions base;
      base.qnn_sdk_version = f->sdk_version;
      base.memory_budget = f->memory_budget;
      base.threads = f->threads;
      base.max_collapsed_rows = f->fail_on_collapse ? 0 : f->max_collapsed_rows;
      // Progress only for a person watching a terminal.
      if (!f->quiet && ::isatty(STDERR_FILENO)) base.progress = ProgressBar();
      if (!f->calibration.empty()) {
        QEMB_ASSIGN_OR_RETURN(base.calibration_tokens, read_token_file(f->calibration));
        base.calibration_source = f->calibration;
      }
      std::vector<CompileOptions> tables;
      for (const std::string& t : tensors) {
        CompileOptions o = base;
        o.tensor = t;
        o.node_name = table_names[tables.size()];
        tables.push_back(std::move(o));
      }
      // Per-table values name a table by its name or its tensor.
      std::vector<std::string> keys = table_names;
      for (size_t i = 0; i < keys.size(); ++i)
        if (selected.size() == 1 || selected[i].name == selected[i].tensor) keys[i] = tensors[i];
      QEMB_RETURN_IF_ERROR(apply_per_table("--scheme", f->schemes, keys, tensors, [&](size_t i, const std::string& v) -> Status {
        QEMB_ASSIGN_OR_RETURN(tables[i].scheme, parse_scheme(v));
        return Status::Ok();
      }));
      QEMB_RETURN_IF_ERROR(apply_per_table("--pattern", f->patterns, keys, tensors, [&](size_t i, const std::string& v) -> Status {
        QEMB_ASSIGN_OR_RETURN(tables[i].pattern, parse_pattern(v));
        return Status::Ok();
      }));
      QEMB_RETURN_IF_ERROR(apply_per_table("--mode", f->modes, keys, tensors, [&](size_t i, const std::string& v) -> Status {
        QEMB_ASSIGN_OR_RETURN(tables[i].mode, parse_compile_mode(v));
        return Status::Ok();
      }));
      const auto start = std::chrono::steady_clock::now();
      QEMB_ASSIGN_OR_RETURN(std::vector<CompiledEmbedding> compiled,
                            compile_checkpoint_tables(f->checkpoint, tables, f->out));
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      // Never lose accuracy silently: the legacy fallback (an old or unknown
      // SDK) is kept, but what it costs is said, even with --quiet or --json.
      for (size_t i = 0; i < compiled.size(); ++i) {
        if (compiled[i].collapsed_rows == 0) continue;
        const std::string table = compiled.size() > 1 ? "table '" + escape_control(tables[i].node_name) + "': " : "";
        std::fprintf(stderr, "qemb: warning: %s%s (--fail-on-collapse or --max-collapsed-rows N make this an error)\n",
                     table.c_str(),
                     with_flag_names(collapse_message(compiled[i].collapsed_rows,
                                                      compiled[i].metadata["vocab_size"].get<int64_t>(),
                                                      tables[i].scheme))
                         .c_str());
      }
      if (f->json) {
        // What inspect reads back from the file, checksums verified.
        QEMB_ASSIGN_OR_RETURN(auto rt, EmbeddingRuntime::load(f->out));
        int64_t rows = 0;
        for (size_t t = 0; t < rt->table_count(); ++t) rows += rt->table(t).vocab_size();
        nlohmann::json j = inspect_json(f->out, *rt);
        j["output"] = f->out;
        j["timing"] = {{"seconds", seconds}, {"rows_per_s", seconds > 0 ? static_cast<double>(rows) / seconds : 0.0}};
        std::printf("%s\n", json_text(j, 2).c_str());
        return Status::Ok();
      }
      if (!f->quiet) {
        std::FILE* out = summary_stream(f->out);
        for (size_t i = 0; i < compiled.size(); ++i) {
          const CompiledEmbedding& c = compiled[i];
          if (compiled.size() > 1) std::fprintf(out, "table:   %s\n", escape_control(tables[i].node_name).c_str());
          std::fprintf(out, "tensor:  %s [%lld x %lld] %s\n",
                       escape_control(c.metadata["source"]["tensor"].get<std::string>()).c_str(),
                       static_cast<long long>(c.metadata["vocab_size"].get<int64_t>()),
                       static_cast<long long>(c.metadata["dim"].get<int64_t>()),
                       c.metadata["source"]["dtype"].get<std::string>().c_str());
          std::fprintf(out, "scheme:  %s\n", to_string(tables[i].scheme));
          std::fprintf(out, "pattern: %s (%s)\n", to_string(c.pattern), escape_control(c.pattern_reason).c_str());
          std::fprintf(out, "mode:    %s (%s)\n", to_string(c.mode), escape_control(c.mode_reason).c_str());
        }
        std::fprintf(out, "wrote %s\n", escape_control(f->out).c_str());
      }
      return Status::Ok();
    };
  });
}

}  // namespace qemb::cli
