#include <unistd.h>

#include <chrono>
#include <cstring>
#include <cstdio>

#include "cli/cli.h"
#include "qemb/compiler.h"
#include "qemb/file.h"
#include "qemb/inspect.h"
#include "qemb/json_text.h"
#include "qemb/runtime.h"
#include "qemb/strings.h"
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

}  // namespace

std::function<void(const char*, int64_t, int64_t)> progress_bar() { return ProgressBar(); }

void add_compile_command(CLI::App& app, Action& run) {
  struct Flags {
    std::string checkpoint, tensor, scheme = "16a4w", pattern = "auto", sdk_version, calibration,
        mode = "auto", out, name = "embedding";
    uint64_t memory_budget = kDefaultMemoryBudget;
    bool quiet = false, json = false;
    int threads = 0;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("compile", "Quantize a checkpoint's embedding into a .qemb artifact");
  cmd->add_option("checkpoint", f->checkpoint, "checkpoint: safetensors file, index JSON, folder or GGUF file")->required();
  cmd->add_option("--tensor", f->tensor, "embedding tensor name (default: detected by name)");
  cmd->add_option("--scheme", f->scheme, "16a4w | 16a8w")->capture_default_str()->check(parsed_by(parse_scheme));
  cmd->add_option("--pattern", f->pattern, "auto | optimized | legacy")
      ->capture_default_str()
      ->check(parsed_by(parse_pattern));
  cmd->add_option("--qnn-sdk-version", f->sdk_version,
                  "target QNN SDK version (default: from QNN_SDK_ROOT)")
      ->check(sdk_version_rule());
  cmd->add_option("--calibration-tokens", f->calibration,
                  "token ids whose rows define the activation range (default: the whole table)");
  cmd->add_option("--mode", f->mode, "materialize | fused | auto")
      ->capture_default_str()
      ->check(parsed_by(parse_compile_mode));
  cmd->add_option("--memory-budget", f->memory_budget,
                  "auto mode: fuse when the uint16 table would exceed this many bytes")
      ->check(count_rule(0, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--name", f->name, "node name N of the lowered ops")->capture_default_str();
  cmd->add_option("-o,--output", f->out, "output .qemb file")->required();
  cmd->add_option("--threads", f->threads, "threads that quantize rows (0 = one per core)")
      ->check(count_rule(0, kMaxThreads))
      ->capture_default_str();
  cmd->add_flag("--quiet", f->quiet, "print nothing on success and no progress bar");
  cmd->add_flag("--json", f->json,
                "print the new artifact as `qemb inspect --json` does, with the compile's timing");
  cmd->callback([f, &run] {
    run = [f]() -> Status {
      if (f->json && f->out == "-")
        return make_error(ErrorCode::kInvalidArgument,
                          "--json prints to standard output, which '-o -' already carries the artifact on; "
                          "write the artifact to a file with --json, or drop --json");
      CompileOptions o;
      o.tensor = f->tensor;
      QEMB_ASSIGN_OR_RETURN(o.scheme, parse_scheme(f->scheme));
      QEMB_ASSIGN_OR_RETURN(o.pattern, parse_pattern(f->pattern));
      QEMB_ASSIGN_OR_RETURN(o.mode, parse_compile_mode(f->mode));
      o.qnn_sdk_version = f->sdk_version;
      o.memory_budget = f->memory_budget;
      o.node_name = f->name;
      o.threads = f->threads;
      // Progress only for a person watching a terminal.
      if (!f->quiet && ::isatty(STDERR_FILENO)) o.progress = ProgressBar();
      const auto start = std::chrono::steady_clock::now();
      if (!f->calibration.empty()) {
        QEMB_ASSIGN_OR_RETURN(o.calibration_tokens, read_token_file(f->calibration));
        o.calibration_source = f->calibration;
      }
      QEMB_ASSIGN_OR_RETURN(CompiledEmbedding c, compile_checkpoint(f->checkpoint, o, f->out));
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (f->json) {
        // What inspect reads back from the file, checksums verified.
        QEMB_ASSIGN_OR_RETURN(auto rt, EmbeddingRuntime::load(f->out));
        nlohmann::json j = inspect_json(f->out, *rt);
        j["output"] = f->out;
        j["timing"] = {{"seconds", seconds},
                       {"rows_per_s", seconds > 0 ? static_cast<double>(rt->vocab_size()) / seconds : 0.0}};
        std::printf("%s\n", json_text(j, 2).c_str());
        return Status::Ok();
      }
      if (!f->quiet) {
        std::FILE* out = summary_stream(f->out);
        std::fprintf(out, "tensor:  %s [%lld x %lld] %s\n",
                     escape_control(c.metadata["source"]["tensor"].get<std::string>()).c_str(),
                    static_cast<long long>(c.metadata["vocab_size"].get<int64_t>()),
                    static_cast<long long>(c.metadata["dim"].get<int64_t>()),
                    c.metadata["source"]["dtype"].get<std::string>().c_str());
        std::fprintf(out, "scheme:  %s\n", to_string(o.scheme));
        std::fprintf(out, "pattern: %s (%s)\n", to_string(c.pattern), escape_control(c.pattern_reason).c_str());
        std::fprintf(out, "mode:    %s (%s)\n", to_string(c.mode), escape_control(c.mode_reason).c_str());
        std::fprintf(out, "wrote %s\n", escape_control(f->out).c_str());
      }
      return Status::Ok();
    };
  });
}

}  // namespace qemb::cli
