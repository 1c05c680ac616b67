#include <cstdio>

#include "cli/cli.h"
#include "cli/run_bags.h"
#include "core/json_text.h"
#include "qemb/bench.h"
#include "core/file.h"
#include "core/strings.h"

namespace qemb::cli {

void add_bench_command(CLI::App& app, Action& run) {
  struct Flags {
    std::string artifact, verify = "header", report, out_dtype = "f32", table;
    size_t batch = 2048, pooling = 20;
    int threads = 1;
    bool cold = false, json = false, dequantize = false, bags = false;
    double seconds = 0.5;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Measure the artifact's lookup kernel against a memcpy gather in the same run");
  cmd->add_option("artifact", f->artifact, ".qemb artifact")->required();
  CLI::Option* batch = cmd->add_option("--batch", f->batch, "ids per lookup (bags per call with --bags)")
                           ->check(count_rule(1, kMaxBenchBatch))
                           ->capture_default_str();
  CLI::Option* bags =
      cmd->add_flag("--bags", f->bags, "pooled lookups (EmbeddingBag, sum): --batch bags of --pooling ids");
  cmd->add_option("--pooling", f->pooling, "ids per bag with --bags")
      ->check(count_rule(0, kMaxBenchBatch))
      ->capture_default_str();
  cmd->add_option("--threads", f->threads, "threads (0 = one per core)")
      ->check(count_rule(0, kMaxThreads))
      ->capture_default_str();
  CLI::Option* cold =
      cmd->add_flag("--cold", f->cold, "fresh random ids over the whole table (default: a hot set of 1024 ids)");
  cmd->add_option("--report", f->report,
                  "sweep batch sizes 1, 4, ..., 16384, hot and cold, and write an HTML page plotting rows/s of the "
                  "kernel and the memcpy roofline ('-' is standard output)")
      ->excludes(batch)
      ->excludes(bags)
      ->excludes(cold);
  CLI::Option* dequantize = cmd->add_flag("--dequantize", f->dequantize, "dequantized output (float32 unless --out-dtype)");
  cmd->add_option("--out-dtype", f->out_dtype, "dtype of --dequantize output: f32 | f16 | bf16")
      ->capture_default_str()
      ->check(parsed_by(parse_float_dtype))
      ->needs(dequantize);
  cmd->add_option("--seconds", f->seconds, "minimum time per measurement")
      ->check(seconds_rule(kMaxBenchSeconds))
      ->capture_default_str();
  cmd->add_option("--verify", f->verify, "checksums to verify on load: full | header")
      ->capture_default_str()
      ->check(parsed_by(parse_verify));
  cmd->add_option("--table", f->table,
                  "the table to measure in an artifact of several (see qemb inspect); needed there");
  cmd->add_flag("--json", f->json, "print one JSON object");
  cmd->callback([f, &run] {
    run = [f]() -> Status {
      RuntimeOptions ro;
      QEMB_ASSIGN_OR_RETURN(ro.verify, parse_verify(f->verify));
      ro.threads = f->threads;
      QEMB_ASSIGN_OR_RETURN(auto rt, EmbeddingRuntime::load(f->artifact, ro));
      QEMB_ASSIGN_OR_RETURN(const EmbeddingTable* table, choose_table(*rt, f->table));
      if (f->bags && f->pooling == 0)
        return make_error(ErrorCode::kInvalidArgument, "--pooling must be at least 1");
      if (f->bags && f->dequantize)
        return make_error(ErrorCode::kInvalidArgument, "--bags pools into float32 already; drop --dequantize");
      BenchOptions bo;
      bo.table = table->name();
      bo.batch = f->batch;
      bo.pooling = f->bags ? f->pooling : 0;
      bo.cold = f->cold;
      bo.dequantize = f->dequantize;
      QEMB_ASSIGN_OR_RETURN(bo.out_dtype, parse_float_dtype(f->out_dtype));
      const char* output = !f->dequantize                         ? "uint16"
                           : bo.out_dtype == FloatDtype::kF16  ? "float16"
                           : bo.out_dtype == FloatDtype::kBF16 ? "bfloat16"
                                                               : "float32";
      bo.min_seconds = f->seconds;
      if (!f->report.empty()) {
        if (f->report == kStdioPath && f->json)
          return make_error(ErrorCode::kInvalidArgument,
                            "--report - and --json both write to standard output: give one of them a file");
        if (same_file(f->report, f->artifact))
          return make_error(ErrorCode::kInvalidArgument,
                            "the report path '" + f->report + "' is the input artifact; choose another path");
        QEMB_ASSIGN_OR_RETURN(BenchSweep sweep, run_bench_sweep(*rt, bo, default_sweep_batches(), f->artifact));
        QEMB_RETURN_IF_ERROR(write_bench_report(sweep, f->report));
        if (f->json) {
          std::printf("%s\n", json_text(sweep.to_json(), 2).c_str());
          return Status::Ok();
        }
        std::FILE* out = summary_stream(f->report);
        std::fprintf(out, "kernel:   %s (%d thread%s, %s output)\n", sweep.kernel.c_str(), sweep.threads,
                     sweep.threads == 1 ? "" : "s", output);
        std::fprintf(out, "%8s %12s %12s %7s %12s %12s %7s\n", "batch", "hot rows/s", "memcpy", "ratio", "cold rows/s",
                     "memcpy", "ratio");
        for (size_t i = 0; i < sweep.hot.size(); ++i) {
          const BenchResult& h = sweep.hot[i];
          const BenchResult& c = sweep.cold[i];
          std::fprintf(out, "%8zu %12.3g %12.3g %6.2fx %12.3g %12.3g %6.2fx\n", h.batch, h.rows_per_s,
                       h.baseline_rows_per_s, h.ratio, c.rows_per_s, c.baseline_rows_per_s, c.ratio);
        }
        std::fprintf(out, "report:   %s\n", escape_control(f->report).c_str());
        return Status::Ok();
      }
      QEMB_ASSIGN_OR_RETURN(BenchResult r, run_bench(*rt, bo));
      if (!f->json && rt->table_count() > 1) std::printf("table:    %s\n", escape_control(r.table).c_str());
      if (f->json) {
        std::printf("%s\n", json_text(r.to_json(), 2).c_str());
      } else if (f->bags) {
        std::printf("kernel:   %s (%d thread%s, %zu bags of %zu ids, %s, float32 output)\n", r.kernel.c_str(),
                    r.threads, r.threads == 1 ? "" : "s", r.batch, r.pooling, r.cold ? "cold" : "hot");
        std::printf("kernel:   %.3g ids/s pooled  %.3g GB/s of rows read\n", r.rows_per_s, r.bytes_per_s / 1e9);
        std::printf("memcpy:   %.3g rows/s  %.3g GB/s (gather of the same %zu stored bytes a row, discarded)\n",
                    r.baseline_rows_per_s, r.baseline_bytes_per_s / 1e9, r.baseline_row_bytes);
        std::printf("ratio:    %.2fx\n", r.ratio);
      } else {
        std::printf("kernel:   %s (%d thread%s, batch %zu, %s, %s output)\n", r.kernel.c_str(), r.threads,
                    r.threads == 1 ? "" : "s", r.batch, r.cold ? "cold" : "hot", output);
        std::printf("kernel:   %.3g rows/s  %.3g GB/s written\n", r.rows_per_s, r.bytes_per_s / 1e9);
        std::printf("memcpy:   %.3g rows/s  %.3g GB/s (gather of the same %zu stored bytes a row)\n",
                    r.baseline_rows_per_s, r.baseline_bytes_per_s / 1e9, r.baseline_row_bytes);
        std::printf("ratio:    %.2fx\n", r.ratio);
      }
      return Status::Ok();
    };
  });
}

}  // namespace qemb::cli
