#include <cstdio>

#include "cli/cli.h"
#include "qemb/file.h"

int main(int argc, char** argv) {
  CLI::App app{"qemb: per-channel-quantized embedding tables, compiled and served bit-exactly"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "qemb 0.1.0");
  qemb::cli::Action run;
  qemb::cli::add_compile_command(app, run);
  qemb::cli::add_run_command(app, run);
  qemb::cli::add_inspect_command(app, run);
  qemb::cli::add_bench_command(app, run);
  qemb::cli::add_eval_command(app, run);
  qemb::cli::add_fakequant_command(app, run);
  qemb::cli::add_export_onnx_command(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  qemb::Status status = run ? run() : qemb::Status::Ok();
  // Output a command printed may still sit in stdio's buffer: a full disk or
  // /dev/full must fail the command, not vanish at exit.
  if (status.ok()) status = qemb::flush_stdout();
  if (!status.ok()) {
    std::fprintf(stderr, "qemb: error: %s\n", status.error().to_string().c_str());
    return 1;
  }
  return 0;
}
