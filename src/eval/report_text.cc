// The --json object and the readable table of `qemb eval`.
#include <cmath>
#include <cstdarg>
#include <cstdio>

#include "eval/printf_string.h"
#include "qemb/eval.h"
#include "core/strings.h"

namespace qemb {

namespace {

using json = nlohmann::ordered_json;

// JSON has no infinity: a non-finite number (an exact SQNR) becomes null.
json number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }


std::string db(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return printf_string("%.2f", v);
}

std::string sci(double v) {
  if (std::isinf(v)) return "inf";
  return printf_string("%.3e", v);
}

std::string percent(double fraction) { return printf_string("%.2f%%", 100.0 * fraction); }

json row_json(const RowError& r) {
  return {{"id", r.row},
          {"row_scale", r.row_scale},
          {"rel_err", number(r.rel_err)},
          {"max_abs_err", r.max_abs_err},
          {"cos", r.cos}};
}

}  // namespace

nlohmann::ordered_json eval_report_json(const EvalReport& report) {
  json out;
  out["tensor"] = report.tensor;
  out["dtype"] = report.dtype;
  out["source_quantized"] = report.source_quantized;
  out["file"] = report.file;
  out["vocab_size"] = report.vocab_size;
  out["dim"] = report.dim;
  out["rows_evaluated"] = report.rows_evaluated;
  out["rows_source"] = report.rows_source;
  out["activation"] = {{"scale", report.act.scale},
                       {"zero_point", report.act.zero_point},
                       {"offset", report.act.offset()},
                       {"range", {report.act_range_lo, report.act_range_hi}},
                       {"calibration", report.calibration_source},
                       {"calibration_tokens", report.calibration_tokens}};
  out["values"] = {{"min", report.value_min}, {"max", report.value_max}};
  out["target"] = {
      {"sdk_version", report.target.version ? json(report.target.version->to_string()) : json(nullptr)},
      {"source", report.target.source},
      {"deployed_pattern", report.has_deployed_pattern ? json(to_string(report.deployed_pattern)) : json(nullptr)},
      {"reason", report.deployed_reason}};
  json results = json::array();
  for (const EvalResult& r : report.results) {
    json worst = json::array();
    for (const RowError& row : r.worst_rows) worst.push_back(row_json(row));
    results.push_back({{"scheme", to_string(r.scheme)},
                       {"pattern", to_string(r.pattern)},
                       {"bits_per_value", r.bits_per_value},
                       {"act_bits", r.act.bits},
                       {"deployed", r.deployed},
                       {"sqnr_db", number(r.sqnr_db)},
                       {"cos_mean", r.cos_mean},
                       {"cos_p1", r.cos_p1},
                       {"cos_min", r.cos_min},
                       {"max_abs_err", r.max_abs_err},
                       {"mean_abs_err", r.mean_abs_err},
                       {"rms_err", r.rms_err},
                       {"weight_max_abs_err", r.weight_max_abs_err},
                       {"weight_mean_abs_err", r.weight_mean_abs_err},
                       {"weight_sqnr_db", number(r.weight_sqnr_db)},
                       {"act_max_abs_err", r.act_max_abs_err},
                       {"act_mean_abs_err", r.act_mean_abs_err},
                       {"act_sqnr_db", number(r.act_sqnr_db)},
                       {"collapsed_rows", r.collapsed_rows},
                       {"collapsed_fraction", r.collapsed_fraction},
                       {"clipped_values", r.clipped_values},
                       {"clipped_fraction", r.clipped_fraction},
                       {"worst_rows", std::move(worst)}});
  }
  out["results"] = std::move(results);
  const EvalRecommendation rec = recommend(report);
  out["recommendation"] = {{"scheme", rec.found ? json(to_string(rec.scheme)) : json(nullptr)},
                           {"pattern", rec.found ? json(to_string(rec.pattern)) : json(nullptr)},
                           {"reason", rec.text}};
  return out;
}

std::string format_eval_report(const EvalReport& report) {
  std::string s;
  // Names and paths come from files and the environment: escape control bytes.
  s += printf_string("tensor      %s %s [%lld x %lld]%s%s\n", escape_control(report.tensor).c_str(),
                     report.dtype.c_str(), static_cast<long long>(report.vocab_size),
                     static_cast<long long>(report.dim), report.file.empty() ? "" : " from ",
                     escape_control(report.file).c_str());
  if (report.source_quantized)
    s += printf_string("source      already quantized (%s): the float table is its exact dequantization, so the "
                       "figures below measure re-quantization only\n",
                       report.dtype.c_str());
  s += printf_string("rows        %lld of %lld (%s)\n", static_cast<long long>(report.rows_evaluated),
                     static_cast<long long>(report.vocab_size), escape_control(report.rows_source).c_str());
  s += printf_string("activation  scale %.6g, offset %d, range [%.6g, %.6g] from %s", report.act.scale,
                     report.act.offset(), report.act_range_lo, report.act_range_hi,
                     escape_control(report.calibration_source).c_str());
  if (report.calibration_tokens > 0)
    s += printf_string(" (%lld tokens)", static_cast<long long>(report.calibration_tokens));
  s += "\n";
  if (!report.results.empty()) {
    const EvalResult& r0 = report.results.front();
    s += printf_string("clipped     %lld of %lld values (%s) outside the activation range\n",
                       static_cast<long long>(r0.clipped_values),
                       static_cast<long long>(report.rows_evaluated * report.dim),
                       percent(r0.clipped_fraction).c_str());
  }
  s += printf_string("target      %s -> deployed pattern: %s\n",
                     report.target.version ? escape_control(report.target.version->to_string() + " (" + report.target.source + ")").c_str()
                                           : "unknown SDK",
                     report.has_deployed_pattern ? to_string(report.deployed_pattern) : "none");
  s += "            (" + escape_control(report.deployed_reason) + ")\n\n";

  s += printf_string("%-6s %-10s %6s %-3s %8s %9s %9s %9s %10s %10s %10s %10s %s\n", "scheme", "pattern", "bits/v",
                     "dep", "SQNR dB", "cos mean", "cos p1", "cos min", "max|err|", "mean|err|", "w mean|e|", "a mean|e|",
                     "collapsed rows");
  for (const EvalResult& r : report.results) {
    s += printf_string("%-6s %-10s %6.3f %-3s %8s %9.6f %9.6f %9.6f %10s %10s %10s %10s %lld (%s)\n",
                       to_string(r.scheme), r.scheme.weight_only() ? "-" : to_string(r.pattern), r.bits_per_value,
                       r.deployed ? "*" : "", db(r.sqnr_db).c_str(), r.cos_mean, r.cos_p1,
                       r.cos_min, sci(r.max_abs_err).c_str(), sci(r.mean_abs_err).c_str(),
                       sci(r.weight_mean_abs_err).c_str(), sci(r.act_mean_abs_err).c_str(),
                       static_cast<long long>(r.collapsed_rows), percent(r.collapsed_fraction).c_str());
  }
  s += "(bits/v = stored bits per value, the row scales included; dep * = the pattern a compile for this target "
       "deploys; pattern - = a weight-only scheme, whose float outputs have no activation step; w/a = the weight- "
       "and activation-quantization parts of the error)\n";

  for (const EvalResult& r : report.results) {
    if (r.worst_rows.empty()) continue;
    s += printf_string("\nworst rows, %s %s (relative error |y-x|/|x| over the row)\n", to_string(r.scheme),
                       to_string(r.pattern));
    s += printf_string("  %8s %11s %10s %11s %9s\n", "id", "row scale", "rel err", "max|err|", "cos");
    for (const RowError& row : r.worst_rows)
      s += printf_string("  %8lld %11.4e %10.4f %11.4e %9.6f\n", static_cast<long long>(row.row), row.row_scale,
                         row.rel_err, row.max_abs_err, row.cos);
  }
  s += "\nrecommendation: " + escape_control(recommend(report).text) + "\n";
  return s;
}

}  // namespace qemb
