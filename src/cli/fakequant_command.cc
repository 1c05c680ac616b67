#include <cstdio>

#include "cli/cli.h"
#include "qemb/eval.h"
#include "core/strings.h"
#include "qemb/tokens.h"

namespace qemb::cli {

void add_fakequant_command(CLI::App& app, Action& run) {
  struct Flags {
    std::string checkpoint, tensor, scheme, pattern = "auto", sdk_version, calibration, out;
    bool quiet = false, link = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "fakequant",
      "Copy a checkpoint with the embedding replaced by what the deployed lookup returns (dequantized)");
  cmd->add_option("checkpoint", f->checkpoint,
                  "safetensors file, model.safetensors.index.json or checkpoint folder")
      ->required();
  cmd->add_option("--tensor", f->tensor, "embedding tensor: a dotted path, or a glob (*, ?, [...]) matching one, as compile takes (default: detected by name)");
  cmd->add_option("--scheme", f->scheme, "16a4w | 16a8w | 16a2w | 8a4w | 8a8w | 8a2w | w4 | w8 | w2")->required()->check(parsed_by(parse_scheme));
  cmd->add_option("--pattern", f->pattern, "auto | optimized | legacy")
      ->capture_default_str()
      ->check(parsed_by(parse_pattern));
  cmd->add_option("--qnn-sdk-version", f->sdk_version, "target QNN SDK version (default: from QNN_SDK_ROOT)")
      ->check(sdk_version_rule());
  cmd->add_option("--calibration-tokens", f->calibration,
                  "token ids whose rows define the activation range (default: the whole table)");
  cmd->add_option("-o,--output", f->out,
                  "output .safetensors file (a new folder when the input is a folder or an index)")
      ->required();
  cmd->add_flag("--link", f->link, "folder output: hard-link the unchanged shards instead of copying them");
  cmd->add_flag("--quiet", f->quiet, "print nothing on success");
  cmd->callback([f, &run] {
    run = [f]() -> Status {
      QEMB_RETURN_IF_ERROR(
          check_outputs_are_not_inputs({{"-o", f->out}}, {{"--calibration-tokens", f->calibration}}));
      FakeQuantOptions o;
      o.tensor = f->tensor;
      QEMB_ASSIGN_OR_RETURN(o.scheme, parse_scheme(f->scheme));
      QEMB_ASSIGN_OR_RETURN(o.pattern, parse_pattern(f->pattern));
      o.qnn_sdk_version = f->sdk_version;
      o.link = f->link;
      if (!f->calibration.empty()) {
        QEMB_ASSIGN_OR_RETURN(o.calibration_tokens, read_token_file(f->calibration));
      }
      QEMB_ASSIGN_OR_RETURN(FakeQuantResult r, fakequant_checkpoint(f->checkpoint, o, f->out));
      if (!f->quiet) {
        std::FILE* out = summary_stream(f->out);
        std::fprintf(out, "tensor:     %s [%lld x %lld] %s\n", escape_control(r.tensor).c_str(),
                     static_cast<long long>(r.rows), static_cast<long long>(r.dim), r.dtype.c_str());
        std::fprintf(out, "scheme:     %s\n", to_string(o.scheme));
        std::fprintf(out, "pattern:    %s (%s)\n", to_string(r.pattern), escape_control(r.pattern_reason).c_str());
        std::fprintf(out, "activation: scale %.6g, offset %d\n", r.act.scale, r.act.offset());
        for (const std::string& s : r.skipped)
          std::fprintf(stderr, "qemb: warning: skipped %s\n", escape_control(s).c_str());
        if (r.folder) {
          std::fprintf(out, "wrote folder %s (every other tensor and file unchanged%s)\n", escape_control(f->out).c_str(),
                       r.linked_files > 0 ? (", " + std::to_string(r.linked_files) + " shards hard-linked").c_str()
                                          : "");
        } else {
          std::fprintf(out, "wrote %s (every other tensor and the metadata unchanged)\n",
                       escape_control(f->out).c_str());
        }
      }
      return Status::Ok();
    };
  });
}

}  // namespace qemb::cli
