// The self-contained HTML report: inline CSS and hand-written SVG, so the file
// opens anywhere (offline, in a mail attachment, in CI artifacts) and fetches
// nothing.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <utility>

#include "eval/printf_string.h"
#include "qemb/eval.h"
#include "core/file.h"
#include "core/strings.h"
#include "qemb/quantize.h"

namespace qemb {

namespace {

constexpr const char* kOptimizedColor = "#1f6fb4";
constexpr const char* kLegacyColor = "#d9541e";
constexpr size_t kMaxScatterPoints = 4000;  // per pattern; keeps the page light on 100k-row vocabularies



std::string db(double v) {
  if (std::isinf(v)) return v > 0 ? "&infin; (exact)" : "&minus;&infin;";
  return printf_string("%.2f", v);
}
std::string sci(double v) { return std::isinf(v) ? "&infin;" : printf_string("%.3e", v); }
std::string percent(double f) { return printf_string("%.2f%%", 100.0 * f); }
const char* color_of(Pattern p) { return p == Pattern::kOptimized ? kOptimizedColor : kLegacyColor; }

// A plot area in SVG pixels and the data range it shows (log axes hold log10
// values).
struct Frame {
  double left = 76, top = 34, width = 560, height = 290;
  double xlo = 0, xhi = 1, ylo = 0, yhi = 1;
  double svg_width() const { return left + width + 24; }
  double svg_height() const { return top + height + 82; }  // x labels, then the legend row
  double px(double x) const { return left + (x - xlo) / (xhi - xlo) * width; }
  double py(double y) const { return top + height - (y - ylo) / (yhi - ylo) * height; }
  double clamp_x(double x) const { return std::clamp(x, xlo, xhi); }
  double clamp_y(double y) const { return std::clamp(y, ylo, yhi); }
};

struct Tick {
  double at;
  std::string label;  // SVG text content
};

// Decades 10^k inside [lo, hi] (log10 units), thinned to about eight.
std::vector<Tick> log_ticks(double lo, double hi) {
  std::vector<Tick> ticks;
  const int step = std::max(1, static_cast<int>(std::ceil((hi - lo) / 8.0)));
  for (int k = static_cast<int>(std::ceil(lo)); k <= static_cast<int>(std::floor(hi)); k += step)
    ticks.push_back({static_cast<double>(k), printf_string("10<tspan dy=\"-6\" font-size=\"9\">%d</tspan>", k)});
  return ticks;
}

std::vector<Tick> linear_ticks(double lo, double hi) {
  std::vector<Tick> ticks;
  const double raw = (hi - lo) / 6.0;
  if (!(raw > 0)) return ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  const double step = (norm < 1.5 ? 1 : norm < 3.5 ? 2 : norm < 7.5 ? 5 : 10) * magnitude;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
    ticks.push_back({v, printf_string("%g", std::abs(v) < step * 1e-9 ? 0.0 : v)});
  return ticks;
}

std::string svg_open(const std::string& id, const std::string& title, const Frame& f) {
  return printf_string("<svg class=\"plot\" id=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
             "viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"",
             id.c_str(), f.svg_width(), f.svg_height(), f.svg_width(), f.svg_height()) +
         escape_html(title) + "\">\n<title>" + escape_html(title) + "</title>\n" +
         printf_string("<rect class=\"bg\" x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", f.svg_width(),
             f.svg_height()) +
         printf_string("<text class=\"plot-title\" x=\"%.1f\" y=\"20\" font-size=\"14\" font-weight=\"600\">", f.left) +
         escape_html(title) + "</text>\n";
}

std::string axes(const Frame& f, const std::vector<Tick>& xticks, const std::vector<Tick>& yticks,
                 const std::string& xlabel, const std::string& ylabel) {
  std::string s = "<g class=\"axes\" font-size=\"11\" fill=\"#333\">\n";
  for (const Tick& t : xticks) {
    const double x = f.px(t.at);
    s += printf_string("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>", x, f.top, x,
             f.top + f.height);
    s += printf_string("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", x, f.top + f.height + 18) + t.label + "</text>\n";
  }
  for (const Tick& t : yticks) {
    const double y = f.py(t.at);
    s += printf_string("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>", f.left, y,
             f.left + f.width, y);
    s += printf_string("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", f.left - 6, y + 4) + t.label + "</text>\n";
  }
  s += printf_string("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#888\"/>\n", f.left,
           f.top, f.width, f.height);
  s += printf_string("<text class=\"xlabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\">",
           f.left + f.width / 2, f.top + f.height + 42) +
       escape_html(xlabel) + "</text>\n";
  s += printf_string("<text class=\"ylabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\" "
           "transform=\"rotate(-90 %.1f %.1f)\">",
           18.0, f.top + f.height / 2, 18.0, f.top + f.height / 2) +
       escape_html(ylabel) + "</text>\n";
  return s + "</g>\n";
}

// One row of swatches under the x-axis label, where it never hides data.
std::string legend(const Frame& f, const std::vector<std::pair<std::string, std::string>>& items) {
  std::string s = "<g class=\"legend\" font-size=\"11\">\n";
  double x = f.left;
  const double y = f.top + f.height + 66;
  for (const auto& [color, label] : items) {
    s += printf_string("<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"10\" fill=\"%s\"/>", x, y - 9, color.c_str());
    s += printf_string("<text x=\"%.1f\" y=\"%.1f\">", x + 17, y) + escape_html(label) + "</text>\n";
    x += 17 + 6.3 * static_cast<double>(label.size()) + 22;
  }
  return s + "</g>\n";
}

const EvalResult* find_result(const EvalReport& report, Scheme scheme, Pattern pattern) {
  for (const EvalResult& r : report.results)
    if (r.scheme == scheme && r.pattern == pattern) return &r;
  return nullptr;
}

std::vector<Scheme> schemes_of(const EvalReport& report) {
  std::vector<Scheme> out;
  for (const EvalResult& r : report.results)
    if (std::find(out.begin(), out.end(), r.scheme) == out.end()) out.push_back(r.scheme);
  return out;
}

// Every row when there are few; otherwise an even stride plus the worst rows,
// so the outliers a reader looks for are always drawn.
std::vector<const RowError*> rows_to_draw(const EvalResult& r, int64_t rows_evaluated) {
  std::vector<const RowError*> out;
  const size_t stride = (r.rows.size() + kMaxScatterPoints - 1) / kMaxScatterPoints;
  for (size_t i = 0; i < r.rows.size(); i += std::max<size_t>(stride, 1)) out.push_back(&r.rows[i]);
  if (stride > 1 || static_cast<int64_t>(r.rows.size()) < rows_evaluated)  // eval kept a sample
    for (const RowError& w : r.worst_rows) out.push_back(&w);
  return out;
}

std::string scatter_plot(const EvalReport& report, Scheme scheme) {
  const EvalResult* results[2] = {find_result(report, scheme, Pattern::kOptimized),
                                  find_result(report, scheme, Pattern::kLegacy)};
  double smin = INFINITY, smax = -INFINITY, emin = INFINITY, emax = -INFINITY;
  for (const EvalResult* r : results) {
    if (!r) continue;
    for (const RowError& row : r->rows) {
      smin = std::min(smin, static_cast<double>(row.row_scale));
      smax = std::max(smax, static_cast<double>(row.row_scale));
      if (row.rel_err > 0 && std::isfinite(row.rel_err)) {
        emin = std::min(emin, row.rel_err);
        emax = std::max(emax, row.rel_err);
      }
    }
  }
  if (!(emin <= emax)) emin = emax = 1e-3;  // every row exact
  Frame f;
  f.xlo = std::floor(std::log10(smin));
  f.xhi = std::ceil(std::log10(smax));
  if (f.xhi <= f.xlo) f.xhi = f.xlo + 1;
  f.ylo = std::floor(std::log10(emin));
  f.yhi = std::max(std::log10(emax), f.ylo + 1) + 0.15;  // a little headroom over the worst row
  const std::string title = std::string(to_string(scheme)) + ": per-row error against row scale";
  std::string s = svg_open(std::string("scatter-") + to_string(scheme), title, f);
  s += axes(f, log_ticks(f.xlo, f.xhi), log_ticks(f.ylo, f.yhi), "row scale s_r (log)",
            "relative row error |y-x| / |x| (log)");
  if (f.ylo < 0 && f.yhi > 0) {
    s += printf_string("<line class=\"row-lost\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" "
             "stroke-dasharray=\"5 4\"/>",
             f.left, f.py(0), f.left + f.width, f.py(0));
    s += printf_string("<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#777\">100%%: the row is lost</text>\n", f.left + 6,
             f.py(0) - 4);
  }
  // Legacy first so the optimized points sit on top where they overlap.
  for (int i = 1; i >= 0; --i) {
    const EvalResult* r = results[i];
    if (!r) continue;
    s += printf_string("<g class=\"points %s\" fill=\"%s\" fill-opacity=\"0.55\">\n", to_string(r->pattern),
             color_of(r->pattern));
    for (const RowError* row : rows_to_draw(*r, report.rows_evaluated)) {
      const double x = f.px(f.clamp_x(std::log10(static_cast<double>(row->row_scale))));
      const double e = row->rel_err > 0 ? std::log10(row->rel_err) : f.ylo;  // exact rows on the bottom edge
      const double y = f.py(f.clamp_y(std::isfinite(e) ? e : f.yhi));
      s += printf_string("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.2\"/>", x, y);
    }
    s += "\n</g>\n";
  }
  std::vector<std::pair<std::string, std::string>> items;
  for (const EvalResult* r : results)
    if (r)
      items.emplace_back(color_of(r->pattern),
                         std::string(to_string(r->pattern)) + " (SQNR " +
                             (std::isinf(r->sqnr_db) ? std::string("inf") : printf_string("%.1f", r->sqnr_db)) + " dB)");
  s += legend(f, items);
  return s + "</svg>\n";
}

std::string error_histogram_plot(const EvalReport& report, Scheme scheme) {
  const EvalResult* results[2] = {find_result(report, scheme, Pattern::kOptimized),
                                  find_result(report, scheme, Pattern::kLegacy)};
  const Histogram* any = nullptr;
  uint64_t peak = 1;
  for (const EvalResult* r : results) {
    if (!r) continue;
    any = &r->error_histogram;
    for (uint64_t c : r->error_histogram.counts) peak = std::max(peak, c);
  }
  Frame f;
  if (any) {
    f.xlo = any->lo;
    f.xhi = any->hi;
  }
  f.ylo = 0;
  f.yhi = static_cast<double>(peak) * 1.08;
  const std::string title = std::string(to_string(scheme)) + ": distribution of |y - x| per value";
  std::string s = svg_open(std::string("errhist-") + to_string(scheme), title, f);
  s += axes(f, log_ticks(f.xlo, f.xhi), linear_ticks(f.ylo, f.yhi), "absolute error |y - x| (log)",
            "values");
  std::vector<std::pair<std::string, std::string>> items;
  for (const EvalResult* r : results) {
    if (!r) continue;
    const Histogram& h = r->error_histogram;
    const size_t n = h.counts.size();
    std::string path = printf_string("M%.1f %.1f", f.px(h.lo), f.py(0));
    for (size_t i = 0; i < n; ++i) {
      const double x0 = h.lo + (h.hi - h.lo) * static_cast<double>(i) / static_cast<double>(n);
      const double x1 = h.lo + (h.hi - h.lo) * static_cast<double>(i + 1) / static_cast<double>(n);
      const double y = f.py(static_cast<double>(h.counts[i]));
      path += printf_string(" L%.1f %.1f L%.1f %.1f", f.px(x0), y, f.px(x1), y);
    }
    path += printf_string(" L%.1f %.1f Z", f.px(h.hi), f.py(0));
    s += printf_string("<path class=\"hist %s\" d=\"%s\" fill=\"%s\" fill-opacity=\"0.3\" stroke=\"%s\" "
             "stroke-width=\"1.5\"/>\n",
             to_string(r->pattern), path.c_str(), color_of(r->pattern), color_of(r->pattern));
    std::string label = to_string(r->pattern);
    if (h.zeros) label += printf_string(", %llu exact", static_cast<unsigned long long>(h.zeros));
    if (h.below) label += printf_string(", %llu below the axis", static_cast<unsigned long long>(h.below));
    items.emplace_back(color_of(r->pattern), label);
  }
  s += legend(f, items);
  return s + "</svg>\n";
}

std::string activation_range_plot(const EvalReport& report) {
  const Histogram& h = report.value_histogram;
  uint64_t peak = 1;
  for (uint64_t c : h.counts) peak = std::max(peak, c);
  Frame f;
  f.xlo = h.lo;
  f.xhi = h.hi;
  f.ylo = -0.3;  // log10(count): a single value still gets a visible bar
  f.yhi = std::log10(static_cast<double>(peak)) + 0.3;
  std::string s = svg_open("act-range", "Activation range over the table's value distribution", f);
  std::vector<Tick> yticks;
  for (const Tick& t : log_ticks(0, f.yhi)) yticks.push_back(t);
  s += axes(f, linear_ticks(f.xlo, f.xhi), yticks, "table value x", "values per bin (log)");
  // Shade what the encoding cannot represent: those values are clipped.
  const double lo = f.px(f.clamp_x(report.act_range_lo)), hi = f.px(f.clamp_x(report.act_range_hi));
  if (lo > f.left + 0.5)
    s += printf_string("<rect class=\"clipped-zone\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#e03030\" "
             "fill-opacity=\"0.12\"/>\n",
             f.left, f.top, lo - f.left, f.height);
  if (hi < f.left + f.width - 0.5)
    s += printf_string("<rect class=\"clipped-zone\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#e03030\" "
             "fill-opacity=\"0.12\"/>\n",
             hi, f.top, f.left + f.width - hi, f.height);
  s += "<g class=\"bars\" fill=\"#7a8794\">\n";
  const size_t n = h.counts.size();
  for (size_t i = 0; i < n; ++i) {
    if (h.counts[i] == 0) continue;
    const double x0 = f.px(h.lo + (h.hi - h.lo) * static_cast<double>(i) / static_cast<double>(n));
    const double x1 = f.px(h.lo + (h.hi - h.lo) * static_cast<double>(i + 1) / static_cast<double>(n));
    const double y = f.py(std::log10(static_cast<double>(h.counts[i])));
    s += printf_string("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>", x0, y, std::max(x1 - x0 - 0.5, 0.5),
             f.py(f.ylo) - y);
  }
  s += "\n</g>\n";
  const std::pair<double, std::string> marks[2] = {
      {report.act_range_lo, printf_string("s_a·(0−zp) = %.4g", report.act_range_lo)},
      {report.act_range_hi, printf_string("s_a·(%d−zp) = %.4g", report.act.qmax(), report.act_range_hi)}};
  for (int i = 0; i < 2; ++i) {
    const double x = f.px(f.clamp_x(marks[i].first));
    s += printf_string("<line class=\"act-bound\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
             "stroke-width=\"2\"/>",
             x, f.top, x, f.top + f.height, kOptimizedColor);
    // Each label sits outside the range when there is room, so the two never cross.
    const double label_width = 5.6 * static_cast<double>(marks[i].second.size()) + 8;
    const bool outside = i == 0 ? x - f.left > label_width : f.left + f.width - x > label_width;
    const bool to_the_right = (i == 1) == outside;
    s += printf_string("<text class=\"act-bound-label\" x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"%s\" "
             "text-anchor=\"%s\">",
             to_the_right ? x + 4 : x - 4, f.top + 14 + 14.0 * i, kOptimizedColor, to_the_right ? "start" : "end") +
         escape_html(marks[i].second) + "</text>\n";
  }
  if (f.xlo < 0 && f.xhi > 0)
    s += printf_string("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\" stroke-dasharray=\"3 3\"/>\n",
             f.px(0), f.top, f.px(0), f.top + f.height);
  s += legend(f, {{"#7a8794", "table values"}, {kOptimizedColor, "activation range"}, {"#f2c4c4", "clipped"}});
  return s + "</svg>\n";
}

// Row scales (log10 s_r) with the legacy collapse threshold: a row whose
// scale is below s_max / (2 qmax) has every s_r * q round to 0 at s_max, so
// the legacy pattern outputs one level for the whole row.
std::string scale_histogram_plot(const EvalReport& report, Scheme scheme) {
  const EvalResult* r = find_result(report, scheme, Pattern::kOptimized);
  if (!r) r = find_result(report, scheme, Pattern::kLegacy);
  const Histogram& h = r->scale_histogram;
  const int qmax = weight_qmax(scheme);
  const double threshold = std::log10(static_cast<double>(r->max_scale) / (2.0 * qmax));
  uint64_t peak = 1;
  for (uint64_t c : h.counts) peak = std::max(peak, c);
  Frame f;
  f.xlo = std::min(h.lo, std::floor(threshold));
  f.xhi = h.hi;
  f.ylo = 0;
  f.yhi = static_cast<double>(peak) * 1.08;
  const std::string title = std::string(to_string(scheme)) + ": row scales and the legacy collapse threshold";
  std::string s = svg_open(std::string("scales-") + to_string(scheme), title, f);
  s += axes(f, log_ticks(f.xlo, f.xhi), linear_ticks(f.ylo, f.yhi), "row scale s_r (log)", "rows");
  s += "<g class=\"bars\" fill=\"#7a8794\">\n";
  const size_t n = h.counts.size();
  uint64_t lost = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x0 = h.lo + (h.hi - h.lo) * static_cast<double>(i) / static_cast<double>(n);
    const double x1 = h.lo + (h.hi - h.lo) * static_cast<double>(i + 1) / static_cast<double>(n);
    if (x1 <= threshold) lost += h.counts[i];
    if (h.counts[i] == 0) continue;
    const double y = f.py(static_cast<double>(h.counts[i]));
    s += printf_string("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>", f.px(x0), y,
                       std::max(f.px(x1) - f.px(x0) - 0.5, 0.5), f.py(0) - y);
  }
  s += "\n</g>\n";
  const double x = f.px(f.clamp_x(threshold));
  s += printf_string("<line class=\"collapse-threshold\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                     "stroke-width=\"2\" stroke-dasharray=\"6 3\"/>\n",
                     x, f.top, x, f.top + f.height, kLegacyColor);
  const std::string label = printf_string("s_max/(2·qmax) = %.3g", r->max_scale / (2.0 * qmax));
  const bool right = f.left + f.width - x > 5.6 * static_cast<double>(label.size()) + 8;
  s += printf_string("<text class=\"collapse-threshold-label\" x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"%s\" "
                     "text-anchor=\"%s\">",
                     right ? x + 4 : x - 4, f.top + 14, kLegacyColor, right ? "start" : "end") +
       escape_html(label) + "</text>\n";
  s += legend(f, {{"#7a8794", "rows per bin"},
                  {kLegacyColor, "legacy collapses rows left of the line"}});
  return s + "</svg>\n";
}

// The share of rows whose 1 - cos is at most x, per pattern (rows with cos
// exactly 1 count from the left edge).
std::string cosine_cdf_plot(const EvalReport& report, Scheme scheme) {
  const EvalResult* results[2] = {find_result(report, scheme, Pattern::kOptimized),
                                  find_result(report, scheme, Pattern::kLegacy)};
  Frame f;
  for (const EvalResult* r : results)
    if (r) {
      f.xlo = r->cos_histogram.lo;
      f.xhi = r->cos_histogram.hi;
    }
  f.ylo = 0;
  f.yhi = 1.0;
  const std::string title = std::string(to_string(scheme)) + ": per-row cosine, cumulative";
  std::string s = svg_open(std::string("cos-cdf-") + to_string(scheme), title, f);
  s += axes(f, log_ticks(f.xlo, f.xhi), linear_ticks(0, 1), "1 - cos(x, y) per row (log)", "share of rows");
  std::vector<std::pair<std::string, std::string>> items;
  for (const EvalResult* r : results) {
    if (!r) continue;
    const Histogram& h = r->cos_histogram;
    const double total = static_cast<double>(std::max<uint64_t>(1, h.total()));
    double done = static_cast<double>(h.zeros + h.below);
    std::string path = printf_string("M%.1f %.1f", f.px(h.lo), f.py(done / total));
    const size_t n = h.counts.size();
    for (size_t i = 0; i < n; ++i) {
      done += static_cast<double>(h.counts[i]);
      const double x1 = h.lo + (h.hi - h.lo) * static_cast<double>(i + 1) / static_cast<double>(n);
      path += printf_string(" L%.1f %.1f", f.px(x1), f.py(done / total));
    }
    s += printf_string("<path class=\"cdf %s\" d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                       to_string(r->pattern), path.c_str(), color_of(r->pattern));
    items.emplace_back(color_of(r->pattern), std::string(to_string(r->pattern)) +
                                                 printf_string(" (cos p1 %.4f)", r->cos_p1));
  }
  s += legend(f, items);
  return s + "</svg>\n";
}

// SQNR of every scheme and pattern as horizontal bars.
std::string sqnr_bars_plot(const EvalReport& report) {
  double top = 1.0;
  for (const EvalResult& r : report.results)
    if (std::isfinite(r.sqnr_db)) top = std::max(top, r.sqnr_db);
  Frame f;
  f.xlo = 0;
  f.xhi = top * 1.1;
  f.ylo = 0;
  f.yhi = static_cast<double>(report.results.size());
  f.left = 130;
  f.width = 506;
  std::string s = svg_open("sqnr-bars", "SQNR by scheme and pattern (higher is better)", f);
  s += axes(f, linear_ticks(f.xlo, f.xhi), {}, "SQNR (dB)", "");
  s += "<g class=\"bars\" font-size=\"11\">\n";
  const double band = f.height / std::max(1.0, f.yhi);
  for (size_t i = 0; i < report.results.size(); ++i) {
    const EvalResult& r = report.results[i];
    const double y = f.top + band * static_cast<double>(i);
    const double v = std::isfinite(r.sqnr_db) ? std::max(0.0, r.sqnr_db) : f.xhi;
    s += printf_string("<rect class=\"sqnr-bar %s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>",
                       to_string(r.pattern), f.left, y + band * 0.18, f.px(v) - f.left, band * 0.64,
                       color_of(r.pattern));
    s += printf_string("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s %s%s</text>", f.left - 6, y + band * 0.55,
                       to_string(r.scheme), to_string(r.pattern), r.deployed ? " *" : "");
    s += printf_string("<text x=\"%.1f\" y=\"%.1f\">", f.px(v) + 4, y + band * 0.55) + db(r.sqnr_db) + "</text>\n";
  }
  s += "</g>\n";
  s += legend(f, {{kOptimizedColor, "optimized"}, {kLegacyColor, "legacy"}, {"#ffffff", "* deployed for the target"}});
  return s + "</svg>\n";
}

constexpr const char* kStyle = R"css(
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; color: #222;
       margin: 24px auto; max-width: 1360px; padding: 0 16px; background: #f7f7f5; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
p.sub, .note { color: #555; font-size: 13px; }
ul.summary li { margin: 4px 0; }
table { border-collapse: collapse; font-size: 13px; background: #fff; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: right; white-space: nowrap; }
th { background: #eef1f4; white-space: normal; vertical-align: bottom; }
td.text, th.text { text-align: left; }
tr.deployed td { background: #eef7ee; font-weight: 600; }
tr.deployed.collapses td { background: #fbe9e7; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 5px; border-radius: 2px; }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 16px; }
svg.plot { background: #fff; border: 1px solid #ddd; border-radius: 4px; font-family: inherit; width: 100%;
           height: auto; }
.worst { display: flex; flex-wrap: wrap; gap: 16px; }
dl { font-size: 13px; color: #444; } dt { font-weight: 600; margin-top: 6px; }
)css";

std::string metrics_table(const EvalReport& report) {
  std::string s =
      "<table class=\"metrics\" id=\"metrics\">\n<tr><th class=\"text\">scheme</th><th class=\"text\">pattern</th>"
      "<th class=\"text\">deployed</th><th>SQNR dB</th><th>cos mean</th><th>cos p1</th><th>cos min</th>"
      "<th>max |err|</th><th>mean |err|</th><th>weight part<br>mean |err|</th><th>activation part<br>mean |err|</th>"
      "<th>collapsed rows</th><th>clipped values</th></tr>\n";
  for (const EvalResult& r : report.results) {
    // The deployed pattern is marked, green only when it does not wipe rows out.
    s += std::string("<tr") +
         (r.deployed ? (r.collapsed_rows > 0 ? " class=\"deployed collapses\"" : " class=\"deployed\"") : "") + ">";
    s += std::string("<td class=\"text\">") + to_string(r.scheme) + "</td>";
    s += printf_string("<td class=\"text\"><span class=\"swatch\" style=\"background:%s\"></span>%s</td>", color_of(r.pattern),
             to_string(r.pattern));
    s += std::string("<td class=\"text\">") + (r.deployed ? "yes" : "") + "</td>";
    s += "<td>" + db(r.sqnr_db) + "</td>";
    s += printf_string("<td>%.6f</td><td>%.6f</td><td>%.6f</td>", r.cos_mean, r.cos_p1, r.cos_min);
    s += "<td>" + sci(r.max_abs_err) + "</td><td>" + sci(r.mean_abs_err) + "</td>";
    s += "<td>" + sci(r.weight_mean_abs_err) + "</td><td>" + sci(r.act_mean_abs_err) + "</td>";
    s += printf_string("<td>%lld (%s)</td>", static_cast<long long>(r.collapsed_rows), percent(r.collapsed_fraction).c_str());
    s += printf_string("<td>%lld (%s)</td>", static_cast<long long>(r.clipped_values), percent(r.clipped_fraction).c_str());
    s += "</tr>\n";
  }
  return s + "</table>\n";
}

std::string summary(const EvalReport& report) {
  std::string s = "<ul class=\"summary\">\n";
  for (Scheme scheme : schemes_of(report)) {
    const EvalResult* opt = find_result(report, scheme, Pattern::kOptimized);
    const EvalResult* leg = find_result(report, scheme, Pattern::kLegacy);
    if (!opt || !leg) continue;
    s += std::string("<li><b>") + to_string(scheme) + "</b>: the optimized pattern keeps " + db(opt->sqnr_db) +
         " dB SQNR, the legacy one " + db(leg->sqnr_db) + " dB";
    if (std::isfinite(opt->sqnr_db) && std::isfinite(leg->sqnr_db))
      s += printf_string(" (%+.2f dB)", leg->sqnr_db - opt->sqnr_db);
    s += printf_string("; legacy collapses %lld of %lld rows (%s) to a single output level.</li>\n",
             static_cast<long long>(leg->collapsed_rows), static_cast<long long>(report.rows_evaluated),
             percent(leg->collapsed_fraction).c_str());
  }
  return s + "</ul>\n";
}

std::string worst_rows_tables(const EvalReport& report) {
  std::string s = "<div class=\"worst\">\n";
  for (const EvalResult& r : report.results) {
    s += std::string("<table class=\"worst-rows\"><caption>") + to_string(r.scheme) + " " + to_string(r.pattern) +
         "</caption>\n<tr><th>id</th><th>row scale</th><th>rel err</th><th>max |err|</th><th>cos</th></tr>\n";
    for (const RowError& row : r.worst_rows)
      s += printf_string("<tr><td>%lld</td><td>%.4e</td><td>%.4f</td><td>%.4e</td><td>%.6f</td></tr>\n",
               static_cast<long long>(row.row), row.row_scale, row.rel_err, row.max_abs_err, row.cos);
    s += "</table>\n";
  }
  return s + "</div>\n";
}

}  // namespace

std::string render_html_report(const EvalReport& report) {
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  s += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  s += "<title>qemb eval: " + escape_html(report.tensor) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  s += "<h1>What quantization cost: " + escape_html(report.tensor) + "</h1>\n";
  s += "<p class=\"sub\">" + escape_html(report.dtype) +
       printf_string(" [%lld &times; %lld]", static_cast<long long>(report.vocab_size), static_cast<long long>(report.dim)) +
       (report.file.empty() ? "" : " from <code>" + escape_html(report.file) + "</code>") +
       (report.source_quantized ? " (the source was already quantized: the float table is its exact dequantization)"
                                : "") +
       printf_string(" &middot; %lld rows evaluated (", static_cast<long long>(report.rows_evaluated)) +
       escape_html(report.rows_source) + ")<br>activation encoding: " +
       printf_string("scale %.6g, offset %d, range [%.6g, %.6g]", report.act.scale, report.act.offset(), report.act_range_lo,
           report.act_range_hi) +
       " from " + escape_html(report.calibration_source) +
       (report.calibration_tokens > 0 ? printf_string(" (%lld tokens)", static_cast<long long>(report.calibration_tokens)) : "") +
       "<br>target: " +
       escape_html(report.target.version ? report.target.version->to_string() + " (" + report.target.source + ")"
                                    : "unknown SDK") +
       " &rarr; deployed pattern: <b>" +
       (report.has_deployed_pattern ? to_string(report.deployed_pattern) : "none") + "</b> (" +
       escape_html(report.deployed_reason) + ")</p>\n";

  s += "<section id=\"summary\">\n<h2>Summary</h2>\n" + summary(report) + "</section>\n";
  s += "<section id=\"metrics-section\">\n<h2>Metrics</h2>\n" + metrics_table(report) +
       "<p class=\"recommendation\"><b>Recommendation:</b> " + escape_html(recommend(report).text) + "</p>\n"
       "<p class=\"note\">Marked row: the pattern a compile for this target deploys, green when it collapses no "
       "row and red when it does. The weight part is the error of "
       "the dequantized weight (s_r&middot;q or s_max&middot;qi); the activation part is what the uint16 output "
       "encoding adds on top.</p>\n</section>\n";
  // One grid for all plots of a kind, two to a row, so the page fills its
  // width with one scheme as with two.
  s += "<section id=\"overview\">\n<h2>SQNR and the activation range</h2>\n<p class=\"note\">Bars: SQNR of "
       "each scheme and pattern (* the pattern a compile for this target deploys). The uint16 output encoding "
       "covers the blue lines; table values in the red zones are clipped. Without calibration tokens the range is "
       "the whole table's, so nothing is clipped.</p>\n<div class=\"plots\">\n" +
       sqnr_bars_plot(report) + activation_range_plot(report) + "</div>\n</section>\n";
  s += "<section id=\"scatter\">\n<h2>Per-row error against row scale</h2>\n<p class=\"note\">One dot per row. The "
       "optimized pattern's relative error stays flat across row scales; the legacy pattern requantizes every row "
       "to the largest row scale, so small rows lose resolution and, below s_max/(2&middot;qmax) (the dashed line "
       "of the row-scale histogram), vanish (relative error 1).</p>\n<div class=\"plots\">\n";
  for (Scheme scheme : schemes_of(report)) s += scatter_plot(report, scheme) + scale_histogram_plot(report, scheme);
  s += "</div>\n</section>\n";
  s += "<section id=\"histograms\">\n<h2>Error histograms and per-row cosines</h2>\n<div class=\"plots\">\n";
  for (Scheme scheme : schemes_of(report)) s += error_histogram_plot(report, scheme) + cosine_cdf_plot(report, scheme);
  s += "</div>\n</section>\n";
  s += "<section id=\"worst\">\n<h2>Worst rows</h2>\n" + worst_rows_tables(report) + "</section>\n";
  s += "<section id=\"definitions\">\n<h2>Definitions</h2>\n<dl>\n"
       "<dt>SQNR</dt><dd>10&middot;log10(&Sigma;x&sup2; / &Sigma;(y&minus;x)&sup2;) over all evaluated values; "
       "&infin; when exact.</dd>\n"
       "<dt>cos</dt><dd>per row, x&middot;y / (|x||y|); p1 is the 1st percentile (nearest rank).</dd>\n"
       "<dt>collapsed row</dt><dd>float values not all equal, outputs all one uint16 level.</dd>\n"
       "<dt>clipped value</dt><dd>more than half a step outside the activation encoding's range.</dd>\n"
       "<dt>relative row error</dt><dd>|y&minus;x| / |x| over the row.</dd>\n</dl>\n</section>\n";
  s += "<p class=\"note\">Generated by qemb eval.</p>\n</body>\n</html>\n";
  return s;
}

Status write_html_report(const EvalReport& report, const std::string& path) {
  const std::string html = render_html_report(report);
  QEMB_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> out, AtomicFileWriter::create(path));
  QEMB_RETURN_IF_ERROR(out->write(html.data(), html.size()));
  return out->commit();
}

}  // namespace qemb
