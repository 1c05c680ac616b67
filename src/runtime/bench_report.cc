// `qemb bench --report`: a batch-size sweep and its self-contained HTML page
// (inline CSS and hand-written SVG, so it opens offline and fetches nothing).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "qemb/bench.h"
#include "core/file.h"
#include "core/strings.h"

namespace qemb {

std::vector<size_t> default_sweep_batches() {
  std::vector<size_t> b;
  for (size_t n = 1; n <= 16384; n *= 4) b.push_back(n);
  return b;
}

nlohmann::json BenchSweep::to_json() const {
  nlohmann::json h = nlohmann::json::array(), c = nlohmann::json::array();
  for (const BenchResult& r : hot) h.push_back(r.to_json());
  for (const BenchResult& r : cold) c.push_back(r.to_json());
  return {{"artifact", artifact}, {"kernel", kernel}, {"isa", isa},        {"threads", threads},
          {"dequantize", dequantize}, {"out_dtype", dequantize ? to_string(out_dtype) : "u16"}, {"vocab", vocab}, {"dim", dim}, {"row_bytes_read", row_bytes_read},
          {"hot", h},           {"cold", c}};
}

Result<BenchSweep> run_bench_sweep(const EmbeddingRuntime& runtime, const BenchOptions& options,
                                   const std::vector<size_t>& batches, const std::string& artifact_name) {
  if (options.pooling != 0)
    return make_error(ErrorCode::kInvalidArgument, "the batch-size sweep measures plain lookups, not pooled ones");
  if (batches.empty()) return make_error(ErrorCode::kInvalidArgument, "the sweep needs at least one batch size");
  QEMB_ASSIGN_OR_RETURN(const EmbeddingTable* table, bench_table(runtime, options.table));
  BenchSweep sweep;
  sweep.artifact = artifact_name;
  sweep.kernel = table->kernel_name();
  sweep.isa = runtime.isa();
  sweep.threads = runtime.threads();
  sweep.dequantize = options.dequantize;
  sweep.out_dtype = options.out_dtype;
  sweep.vocab = table->vocab_size();
  sweep.dim = table->dim();
  std::vector<size_t> sorted = batches;
  std::sort(sorted.begin(), sorted.end());
  for (bool cold : {false, true}) {
    for (size_t batch : sorted) {
      BenchOptions o = options;
      o.batch = batch;
      o.cold = cold;
      QEMB_ASSIGN_OR_RETURN(BenchResult r, run_bench(runtime, o));
      sweep.row_bytes_read = r.row_bytes_read;
      (cold ? sweep.cold : sweep.hot).push_back(std::move(r));
    }
  }
  return sweep;
}

namespace {

std::string fmt(const char* f, double v) {
  const int n = std::snprintf(nullptr, 0, f, v);
  std::string out(static_cast<size_t>(std::max(n, 0)) + 1, '\0');
  std::snprintf(out.data(), out.size(), f, v);
  out.resize(out.size() - 1);
  return out;
}

// Rows/s with an SI prefix: 3.2M, 870k.
std::string rate(double v) {
  if (!(v > 0) || !std::isfinite(v)) return "0";
  if (v >= 1e9) return fmt("%.3gG", v / 1e9);
  if (v >= 1e6) return fmt("%.3gM", v / 1e6);
  if (v >= 1e3) return fmt("%.3gk", v / 1e3);
  return fmt("%.3g", v);
}

struct Series {
  const char* id;
  const char* label;
  const char* color;
  bool dashed;
  std::vector<std::pair<double, double>> points;  // (batch, rows/s)
};

constexpr double kLeft = 84, kTop = 30, kWidth = 640, kHeight = 360;

std::string plot(const std::vector<Series>& series) {
  double xlo = 1e300, xhi = 0, ylo = 1e300, yhi = 0;
  for (const Series& s : series) {
    for (auto [x, y] : s.points) {
      xlo = std::min(xlo, x), xhi = std::max(xhi, x);
      if (y > 0) ylo = std::min(ylo, y), yhi = std::max(yhi, y);
    }
  }
  if (!(xhi >= xlo)) xlo = 1, xhi = 2;
  if (!(yhi >= ylo)) ylo = 1, yhi = 10;
  const double lx0 = std::log2(xlo), lx1 = std::max(std::log2(xhi), lx0 + 1);
  const double ly0 = std::floor(std::log10(ylo)), ly1 = std::max(std::ceil(std::log10(yhi)), ly0 + 1);
  auto px = [&](double x) { return kLeft + (std::log2(x) - lx0) / (lx1 - lx0) * kWidth; };
  auto py = [&](double y) {
    const double l = std::clamp(std::log10(std::max(y, 1e-300)), ly0, ly1);
    return kTop + kHeight - (l - ly0) / (ly1 - ly0) * kHeight;
  };
  std::string svg = fmt("<svg id=\"rows-vs-batch\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\"", kLeft + kWidth + 220) +
                    fmt(" height=\"%.0f\" role=\"img\" aria-label=\"rows per second against batch size\">\n", kTop + kHeight + 60);
  svg += fmt("<rect x=\"%.0f\"", kLeft) + fmt(" y=\"%.0f\"", kTop) + fmt(" width=\"%.0f\"", kWidth) +
         fmt(" height=\"%.0f\" fill=\"none\" stroke=\"#999\"/>\n", kHeight);
  for (double k = ly0; k <= ly1; k += 1) {
    const double y = kTop + kHeight - (k - ly0) / (ly1 - ly0) * kHeight;
    svg += fmt("<line class=\"grid\" x1=\"%.1f\"", kLeft) + fmt(" x2=\"%.1f\"", kLeft + kWidth) + fmt(" y1=\"%.1f\"", y) +
           fmt(" y2=\"%.1f\" stroke=\"#e4e4e4\"/>", y) + fmt("<text x=\"%.1f\"", kLeft - 8) + fmt(" y=\"%.1f\" text-anchor=\"end\" font-size=\"12\">", y + 4) +
           rate(std::pow(10.0, k)) + "</text>\n";
  }
  for (const auto& [x, unused] : series.front().points) {
    (void)unused;
    svg += fmt("<text x=\"%.1f\"", px(x)) + fmt(" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\">", kTop + kHeight + 18) +
           fmt("%.0f", x) + "</text>\n";
  }
  svg += fmt("<text x=\"%.1f\"", kLeft + kWidth / 2) + fmt(" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\">batch size (ids per call)</text>\n", kTop + kHeight + 42);
  svg += fmt("<text transform=\"translate(18 %.1f) rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">rows/s</text>\n", kTop + kHeight / 2);
  double legend_y = kTop + 10;
  for (const Series& s : series) {
    std::string d;
    for (auto [x, y] : s.points) d += (d.empty() ? "M" : " L") + fmt("%.1f", px(x)) + fmt(",%.1f", py(y));
    svg += std::string("<path class=\"series\" id=\"") + s.id + "\" d=\"" + d + "\" fill=\"none\" stroke=\"" + s.color +
           "\" stroke-width=\"2\"" + (s.dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>\n";
    for (auto [x, y] : s.points)
      svg += fmt("<circle cx=\"%.1f\"", px(x)) + fmt(" cy=\"%.1f\" r=\"3\" fill=\"", py(y)) + s.color + "\"><title>" +
             s.label + fmt(", batch %.0f: ", x) + rate(y) + " rows/s</title></circle>\n";
    const double lx = kLeft + kWidth + 16;
    svg += fmt("<line x1=\"%.1f\"", lx) + fmt(" x2=\"%.1f\"", lx + 28) + fmt(" y1=\"%.1f\"", legend_y) + fmt(" y2=\"%.1f\" stroke=\"", legend_y) +
           s.color + "\" stroke-width=\"2\"" + (s.dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>" +
           fmt("<text x=\"%.1f\"", lx + 34) + fmt(" y=\"%.1f\" font-size=\"12\">", legend_y + 4) + s.label + "</text>\n";
    legend_y += 22;
  }
  return svg + "</svg>\n";
}

}  // namespace

std::string render_bench_report(const BenchSweep& sweep) {
  auto points = [](const std::vector<BenchResult>& rs, bool baseline) {
    std::vector<std::pair<double, double>> p;
    for (const BenchResult& r : rs)
      p.emplace_back(static_cast<double>(r.batch), baseline ? r.baseline_rows_per_s : r.rows_per_s);
    return p;
  };
  std::vector<Series> series = {
      {"kernel-hot", "kernel, hot", "#1f6fb4", false, points(sweep.hot, false)},
      {"memcpy-hot", "memcpy gather, hot", "#1f6fb4", true, points(sweep.hot, true)},
      {"kernel-cold", "kernel, cold", "#d9541e", false, points(sweep.cold, false)},
      {"memcpy-cold", "memcpy gather, cold", "#d9541e", true, points(sweep.cold, true)},
  };
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>qemb bench: " + escape_html(sweep.artifact) +
      "</title>\n<style>body{font-family:system-ui,sans-serif;margin:24px;color:#222}"
      "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
      "th{background:#f3f3f3}.note{color:#555;max-width:60em}</style></head><body>\n";
  h += "<h1>Lookup speed against batch size</h1>\n<p><b>" + escape_html(sweep.artifact) + "</b>: " +
       std::to_string(sweep.vocab) + " &times; " + std::to_string(sweep.dim) + ", kernel <code>" + escape_html(sweep.kernel) +
       "</code>, " + std::to_string(sweep.threads) + (sweep.threads == 1 ? " thread" : " threads") + ", " +
       (sweep.dequantize ? std::string(to_string(sweep.out_dtype)) : std::string("uint16")) + " output.</p>\n";
  h += "<p class=\"note\">Solid lines: the artifact's kernel. Dashed: a memcpy gather of the same " +
       std::to_string(sweep.row_bytes_read) +
       " stored bytes a row with the same ids, in the same run (the roofline). Hot cycles 1024 ids whose rows stay "
       "in cache; cold draws fresh random ids over the whole table. Where the solid line meets its dashed one, "
       "the lookup runs at the speed of memory.</p>\n";
  h += plot(series);
  h += "<table id=\"points\"><tr><th>batch</th><th>hot rows/s</th><th>hot memcpy rows/s</th><th>hot ratio</th>"
       "<th>cold rows/s</th><th>cold memcpy rows/s</th><th>cold ratio</th></tr>\n";
  for (size_t i = 0; i < sweep.hot.size(); ++i) {
    const BenchResult& a = sweep.hot[i];
    h += "<tr><td>" + std::to_string(a.batch) + "</td><td>" + rate(a.rows_per_s) + "</td><td>" +
         rate(a.baseline_rows_per_s) + "</td><td>" + fmt("%.2fx", a.ratio) + "</td>";
    if (i < sweep.cold.size()) {
      const BenchResult& c = sweep.cold[i];
      h += "<td>" + rate(c.rows_per_s) + "</td><td>" + rate(c.baseline_rows_per_s) + "</td><td>" + fmt("%.2fx", c.ratio) + "</td>";
    }
    h += "</tr>\n";
  }
  return h + "</table>\n</body></html>\n";
}

Status write_bench_report(const BenchSweep& sweep, const std::string& path) {
  const std::string html = render_bench_report(sweep);
  QEMB_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> out, AtomicFileWriter::create(path));
  QEMB_RETURN_IF_ERROR(out->write(html.data(), html.size()));
  return out->commit();
}

}  // namespace qemb
