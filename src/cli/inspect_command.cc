#include <cstdio>

#include "cli/cli.h"
#include "qemb/export.h"
#include "qemb/inspect.h"
#include "core/json_text.h"
#include "qemb/runtime.h"
#include "core/strings.h"

namespace qemb::cli {

nlohmann::json inspect_json(const std::string& path, const EmbeddingRuntime& runtime) {
  nlohmann::json j = describe_artifact(runtime);
  // How to hand this artifact to the ONNX toolchains (qemb export-onnx).
  j["export_onnx_command"] = onnx_export_command(path, runtime.artifact());
  return j;
}

void add_inspect_command(CLI::App& app, Action& run) {
  struct Flags {
    std::string artifact, verify = "full";
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("inspect", "Describe a .qemb artifact: provenance, graph, kernel");
  cmd->add_option("artifact", f->artifact, ".qemb artifact")->required();
  cmd->add_flag("--json", f->json, "print one JSON object");
  cmd->add_option("--verify", f->verify, "checksums to verify on load: full | header")
      ->capture_default_str()
      ->check(parsed_by(parse_verify));
  cmd->callback([f, &run] {
    run = [f]() -> Status {
      RuntimeOptions options;
      QEMB_ASSIGN_OR_RETURN(options.verify, parse_verify(f->verify));
      QEMB_ASSIGN_OR_RETURN(auto rt, EmbeddingRuntime::load(f->artifact, options));
      // How to hand this artifact to the ONNX toolchains (qemb export-onnx).
      const std::string export_command = onnx_export_command(f->artifact, rt->artifact());
      if (f->json) {
        std::printf("%s\n", json_text(inspect_json(f->artifact, *rt), 2).c_str());
      } else {
        std::printf("%s", describe_artifact_text(*rt).c_str());
        std::printf("export:       %s\n", escape_control(export_command).c_str());
      }
      return Status::Ok();
    };
  });
}

}  // namespace qemb::cli
