// The qemb command line: a thin layer that parses flags, calls the library
// and maps a failed Status to a message on stderr and a non-zero exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdint>
#include <limits>
#include <functional>
#include <string>

#include "qemb/artifact.h"
#include "qemb/runtime.h"
#include "qemb/status.h"

namespace qemb::cli {

// Each command adds itself to the app and sets `run` to its action.
using Action = std::function<Status()>;
void add_compile_command(CLI::App& app, Action& run);
void add_run_command(CLI::App& app, Action& run);
void add_inspect_command(CLI::App& app, Action& run);
void add_bench_command(CLI::App& app, Action& run);
void add_eval_command(CLI::App& app, Action& run);
void add_fakequant_command(CLI::App& app, Action& run);
void add_export_onnx_command(CLI::App& app, Action& run);

Result<Verify> parse_verify(const std::string& s);  // "full" | "header"

// The progress bar compile and eval show on stderr: phase, rows done, rows/s
// and time left.
std::function<void(const char* phase, int64_t rows_done, int64_t rows_total)> progress_bar();

// What `qemb inspect --json` prints for the artifact at `path`.
nlohmann::json inspect_json(const std::string& path, const EmbeddingRuntime& runtime);

// Where a command prints its summary: standard error when its output file is
// standard output ("-", /dev/stdout), which carries the file then; else
// standard output.
std::FILE* summary_stream(const std::string& output);
// One rule for every count and size on the command line: plain decimal digits
// whose value lies in [lo, hi]. A sign, a fraction or a value past 64 bits is a
// parse error (CLI::ValidationError), never wrapped or clamped into range.
CLI::Validator count_rule(uint64_t lo, uint64_t hi);
// Bytes: digits, or digits and a unit (256MiB, 1GiB, 500MB), rewritten to digits.
CLI::Validator size_rule(uint64_t hi);
inline constexpr uint64_t kMaxCount = std::numeric_limits<int64_t>::max();  // sizes in bytes, row counts
inline constexpr uint64_t kMaxThreads = 1 << 16;  // the library caps at a multiple of the cores
inline constexpr uint64_t kMaxBenchBatch = 1 << 24;
inline constexpr double kMaxBenchSeconds = 3600;
// A duration in seconds: a finite number in (0, hi].
CLI::Validator seconds_rule(double hi);
// A signed decimal int64 (an id that may count from the end).
CLI::Validator integer_rule();
// An ai.onnx opset the exporter writes (kOnnxMinOpset to kOnnxMaxOpset).
CLI::Validator opset_rule();
// A target SDK version as SdkVersion::parse takes it; empty means "discover".
CLI::Validator sdk_version_rule();

// Exit codes, as most Unix tools use them.
constexpr int kExitOk = 0;
constexpr int kExitError = 1;  // the command ran and failed (bad input, I/O...)
constexpr int kExitUsage = 2;  // the command line itself is wrong
// A file qemb had memory-mapped (an artifact, a checkpoint) was truncated or
// rewritten in place while qemb read it: SIGBUS, caught in main.
constexpr int kExitMappedFileChanged = 3;

// A CLI11 check that runs one of the library's parsers on an option's value,
// so a bad value is a usage error (exit 2) that carries the parser's message.
template <typename Parse>
CLI::Validator parsed_by(Parse parse) {
  return CLI::Validator(
      [parse](std::string& value) -> std::string {
        auto r = parse(value);
        return r.ok() ? std::string() : r.error().message;
      },
      "");
}

// An output or input path of a command and the flag that named it.
struct PathFlag {
  std::string flag;  // "-o", "--bags", "--tokens-file"...
  std::string path;
};
// Refuses an output that is one of the command's inputs: the same file (its
// device and inode, whatever name or link reaches it), which writing the
// output would replace. Empty paths and "-" (standard input or output) are
// skipped. Every command calls it before it writes anything.
Status check_outputs_are_not_inputs(const std::vector<PathFlag>& outputs, const std::vector<PathFlag>& inputs);

// Parses "1,2,3" / reads a token file, whichever was given.
Result<std::vector<int64_t>> tokens_from_flags(const std::string& list, const std::string& file);

}  // namespace qemb::cli
