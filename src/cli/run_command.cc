#include <cstdio>
#include <vector>

#include "cli/cli.h"
#include "qemb/file.h"
#include "qemb/npy.h"
#include "qemb/runtime.h"

namespace qemb::cli {

Result<Verify> parse_verify(const std::string& s) {
  if (s == "full") return Verify::kFull;
  if (s == "header") return Verify::kHeader;
  return make_error(ErrorCode::kInvalidArgument, "unknown --verify '" + s + "': expected full or header");
}

void add_run_command(CLI::App& app, Action& run) {
  struct Flags {
    std::string artifact, tokens, tokens_file, out, verify = "full";
    bool dequantize = false, reference = false;
    int threads = 1;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("run", "Look up token ids in a .qemb artifact");
  cmd->add_option("artifact", f->artifact, ".qemb artifact")->required();
  cmd->add_option("--tokens", f->tokens, "comma-separated ids, e.g. 1,2,3");
  cmd->add_option("--tokens-file", f->tokens_file, "ids in a text file or an int32/int64 .npy");
  cmd->add_option("-o,--output", f->out, "write a [N, D] .npy (uint16, or float32 with --dequantize)");
  cmd->add_flag("--dequantize", f->dequantize, "float32 output: y = s_a * (q16 - zp_a)");
  cmd->add_flag("--reference", f->reference, "use the scalar reference interpreter");
  cmd->add_option("--threads", f->threads, "threads for large batches (0 = one per core)")
      ->capture_default_str();
  cmd->add_option("--verify", f->verify, "checksums to verify on load: full | header")->capture_default_str();
  cmd->callback([f, &run] {
    run = [f]() -> Status {
      QEMB_ASSIGN_OR_RETURN(std::vector<int64_t> ids, tokens_from_flags(f->tokens, f->tokens_file));
      if (!f->out.empty() && same_file(f->out, f->artifact))
        return make_error(ErrorCode::kInvalidArgument,
                          "the output '" + f->out + "' is the input artifact; choose another path");
      RuntimeOptions options;
      QEMB_ASSIGN_OR_RETURN(options.verify, parse_verify(f->verify));
      options.threads = f->threads;
      options.reference = f->reference;
      QEMB_ASSIGN_OR_RETURN(auto rt, EmbeddingRuntime::load(f->artifact, options));
      const int64_t n = static_cast<int64_t>(ids.size()), dim = rt->dim();
      if (f->dequantize) {
        std::vector<float> out(static_cast<size_t>(n * dim));
        QEMB_RETURN_IF_ERROR(rt->lookup_dequantized(ids, out.data()));
        if (!f->out.empty()) return write_npy_f32(f->out, out.data(), n, dim);
        for (int64_t i = 0; i < n; ++i) {
          std::printf("%lld:", static_cast<long long>(ids[i]));
          for (int64_t j = 0; j < dim; ++j) std::printf(" %.9g", out[i * dim + j]);
          std::printf("\n");
        }
      } else {
        std::vector<uint16_t> out(static_cast<size_t>(n * dim));
        QEMB_RETURN_IF_ERROR(rt->lookup(ids, out.data()));
        if (!f->out.empty()) return write_npy_u16(f->out, out.data(), n, dim);
        for (int64_t i = 0; i < n; ++i) {
          std::printf("%lld:", static_cast<long long>(ids[i]));
          for (int64_t j = 0; j < dim; ++j) std::printf(" %u", out[i * dim + j]);
          std::printf("\n");
        }
      }
      return Status::Ok();
    };
  });
}

}  // namespace qemb::cli
