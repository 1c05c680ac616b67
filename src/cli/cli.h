// The qemb command line: a thin layer that parses flags, calls the library
// and maps a failed Status to a message on stderr and a non-zero exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <functional>
#include <string>

#include "qemb/artifact.h"
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

// Where a command prints its summary: standard error when its output file is
// "-" (standard output carries the file then), else standard output.
std::FILE* summary_stream(const std::string& output);

// Parses "1,2,3" / reads a token file, whichever was given.
Result<std::vector<int64_t>> tokens_from_flags(const std::string& list, const std::string& file);

}  // namespace qemb::cli
