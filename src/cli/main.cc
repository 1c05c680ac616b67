#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/option_names.h"
#include "core/file.h"
#include "core/strings.h"
#include "qemb/version.h"

namespace {

// Checkpoints and artifacts are memory-mapped: a file truncated under the
// mapping (another program rewriting it in place) makes the next read of a
// page past its new end raise SIGBUS. There is no way to go on, but the user
// gets a message and a documented exit status instead of "Bus error". Only
// async-signal-safe calls: write(2) of a fixed message, then _exit(2).
constexpr char kMappedFileChanged[] =
    "qemb: error: a memory-mapped input file (an artifact or checkpoint) was truncated or rewritten in "
    "place while qemb read it (SIGBUS); do not modify files qemb is reading: write a new file and rename "
    "it over the old one\n";

extern "C" void on_sigbus(int) {
  const ssize_t ignored = ::write(STDERR_FILENO, kMappedFileChanged, sizeof kMappedFileChanged - 1);
  (void)ignored;
  ::_exit(qemb::cli::kExitMappedFileChanged);
}

void catch_sigbus() {
  struct sigaction sa = {};
  sa.sa_handler = on_sigbus;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  ::sigaction(SIGBUS, &sa, nullptr);
}

// The known name closest to `wanted` by edit distance, if it is close
// enough to be a typo (at most a third of its length, and at most 3); else "".
std::string closest(const std::string& wanted, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = std::min<size_t>(3, std::max<size_t>(1, wanted.size() / 3)) + 1;
  for (const std::string& n : names) {
    const size_t d = qemb::edit_distance(wanted, n);
    if (d < best_d) {
      best_d = d;
      best = n;
    }
  }
  return best;
}

// "; did you mean --memory-budget?" for the first unknown flag given to the
// command being parsed, when one of its flags is a likely typo of it.
std::string did_you_mean(const CLI::App& app, int argc, char** argv) {
  const CLI::App* cmd = nullptr;
  for (const CLI::App* c : app.get_subcommands()) cmd = c;
  if (cmd == nullptr) return "";
  std::vector<std::string> flags;
  for (const CLI::Option* o : cmd->get_options())
    for (const std::string& l : o->get_lnames()) flags.push_back("--" + l);
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) continue;
    const std::string flag = arg.substr(0, arg.find('='));
    if (std::find(flags.begin(), flags.end(), flag) != flags.end()) continue;
    const std::string near = closest(flag, flags);
    if (!near.empty()) return "; did you mean " + near + "?";
    return "";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  catch_sigbus();
  CLI::App app{"qemb: per-channel-quantized embedding tables, compiled and served bit-exactly"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "qemb " QEMB_VERSION);
  qemb::cli::Action run;
  qemb::cli::add_compile_command(app, run);
  qemb::cli::add_run_command(app, run);
  qemb::cli::add_inspect_command(app, run);
  qemb::cli::add_bench_command(app, run);
  qemb::cli::add_eval_command(app, run);
  qemb::cli::add_fakequant_command(app, run);
  qemb::cli::add_export_onnx_command(app, run);
  // One example a command, shown at the end of its --help.
  static const struct { const char* command; const char* example; } kExamples[] = {
      {"compile", "qemb compile model.safetensors --scheme 16a4w --qnn-sdk-version 2.48 -o model.qemb"},
      {"run", "qemb run model.qemb --tokens 1,2,3 --dequantize -o rows.npy"},
      {"inspect", "qemb inspect model.qemb --json"},
      {"bench", "qemb bench model.qemb --cold --seconds 2"},
      {"eval", "qemb eval model.safetensors --scheme all --qnn-sdk-version 2.48 --report report.html"},
      {"fakequant", "qemb fakequant checkpoint_folder --scheme 16a4w --qnn-sdk-version 2.48 -o quantized_folder"},
      {"export-onnx",
       "qemb export-onnx model.safetensors --qnn-sdk-version 2.48 --encodings model.encodings.json -o model.onnx"},
  };
  for (const auto& e : kExamples)
    app.get_subcommand(e.command)->footer(std::string("\nExample:\n  ") + e.example +
                                          "\n\nEvery flag: docs/cli.md in qemb's source tree.");
  if (argc > 1 && argv[1][0] != '-') {
    // CLI11 would only say that a command is required.
    std::string names;
    std::vector<std::string> list;
    bool known = false;
    for (const CLI::App* cmd : app.get_subcommands([](const CLI::App*) { return true; })) {
      known = known || cmd->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + cmd->get_name();
      list.push_back(cmd->get_name());
    }
    if (!known) {
      const std::string near = closest(argv[1], list);
      std::fprintf(stderr, "qemb: error: unknown command '%s'%s; the commands are %s\n",
                   qemb::escape_control(argv[1]).c_str(),
                   near.empty() ? "" : ("; did you mean '" + near + "'?").c_str(), names.c_str());
      return qemb::cli::kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end parsing with success and print as CLI11 does;
    // every other parse error (unknown flag, missing value, a value a check
    // refused) is a usage error, whatever CLI11's own code for it.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    const std::string hint = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr ? did_you_mean(app, argc, argv) : "";
    std::fprintf(stderr, "qemb: error: %s%s\nRun 'qemb --help' or 'qemb COMMAND --help' for usage.\n",
                 qemb::escape_control(e.what()).c_str(), qemb::escape_control(hint).c_str());
    return qemb::cli::kExitUsage;
  }
  qemb::Status status;
  try {
    status = run ? run() : qemb::Status::Ok();
  } catch (const std::bad_alloc&) {
    // Large allocations are sized first and refused with what they need; an
    // allocation that still fails is the machine's memory running out.
    status = qemb::make_error(qemb::ErrorCode::kUnsupported,
                              "out of memory: this command needed more memory than the system would give "
                              "(std::bad_alloc); free memory or work on a smaller input");
  } catch (const std::exception& e) {
    // The last line of defence: every known cause returns a Status instead.
    status = qemb::make_error(qemb::ErrorCode::kInternal, std::string("unexpected failure: ") + e.what());
  }
  // Output a command printed may still sit in stdio's buffer: a full disk or
  // /dev/full must fail the command, not vanish at exit.
  if (status.ok()) status = qemb::flush_stdout();
  if (!status.ok()) {
    // Messages quote names and text taken from input files.
    std::fprintf(stderr, "qemb: error: %s\n",
                 qemb::escape_control(qemb::cli::with_flag_names(status.error().to_string())).c_str());
    return qemb::cli::kExitError;
  }
  return qemb::cli::kExitOk;
}
