// What eval recommends for the target, and the CI gates on its figures.
#include <cmath>
#include <cstdio>

#include "eval/printf_string.h"
#include "qemb/eval.h"

namespace qemb {

namespace {


bool acceptable(const EvalResult& r) { return r.collapsed_rows == 0 && r.cos_p1 >= kRecommendMinCosP1; }

std::string figures(const EvalResult& r) {
  return printf_string("SQNR %.2f dB, row cosine p1 %.4f, %lld rows collapsed", r.sqnr_db, r.cos_p1,
                       static_cast<long long>(r.collapsed_rows));
}

}  // namespace

EvalRecommendation recommend(const EvalReport& report) {
  EvalRecommendation rec;
  // The smallest acceptable result; else, none being acceptable, the most accurate.
  // The NPU's schemes first: a weight-only scheme (float outputs, no QNN
  // pattern) is recommended only when no activation scheme was evaluated.
  auto better = [](const EvalResult& r, const EvalResult* than) {
    if (than == nullptr) return true;
    if (r.scheme.weight_only() != than->scheme.weight_only()) return !r.scheme.weight_only();
    if (acceptable(r) != acceptable(*than)) return acceptable(r);
    // Equal bytes keep the earlier scheme of the table (activation schemes before weight-only ones).
    return acceptable(r) ? r.bits_per_value < than->bits_per_value : r.sqnr_db > than->sqnr_db;
  };
  const EvalResult* best_deployed = nullptr;
  const EvalResult* best_optimized = nullptr;
  for (const EvalResult& r : report.results) {
    if (r.pattern == Pattern::kOptimized && better(r, best_optimized)) best_optimized = &r;
    if (r.deployed && better(r, best_deployed)) best_deployed = &r;
  }
  if (best_deployed == nullptr) {
    rec.text = "no pattern validates for this target, so nothing can be deployed (" + report.deployed_reason + ")";
    return rec;
  }
  rec.found = true;
  rec.scheme = best_deployed->scheme;
  rec.pattern = best_deployed->pattern;
  const std::string name = rec.scheme.weight_only()
                               ? std::string(to_string(rec.scheme)) + " (weight-only: float outputs)"
                               : std::string(to_string(rec.scheme)) + " with the " + to_string(rec.pattern) + " pattern";
  if (acceptable(*best_deployed)) {
    rec.text = name + ": the smallest evaluated scheme this target deploys that collapses no row and keeps the "
               "1st-percentile row cosine >= " + printf_string("%.2f", kRecommendMinCosP1) + " (" +
               figures(*best_deployed) + ")";
    return rec;
  }
  rec.text = name + " is the most accurate this target deploys, but it falls short (" + figures(*best_deployed) + ")";
  if (best_deployed->pattern == Pattern::kLegacy && best_optimized != nullptr)
    rec.text += "; target QNN SDK >= 2.48 (--qnn-sdk-version 2.48) for the optimized pattern: " +
                std::string(to_string(best_optimized->scheme)) + " then gives " + figures(*best_optimized);
  else if (best_deployed->scheme.weight_bits() < 8) {
    const Scheme wider = *find_scheme(8, best_deployed->scheme.activation_bits());
    rec.text += std::string("; evaluate ") + wider.name() + " (--scheme all) for more accuracy at " +
                (best_deployed->scheme.weight_bits() == 4 ? "twice" : "four times") + " the bytes";
  }
  return rec;
}

Status check_eval_gates(const EvalReport& report, std::optional<double> min_sqnr_db,
                        std::optional<double> max_collapsed_pct) {
  std::string failures;
  for (const EvalResult& r : report.results) {
    if (!r.deployed) continue;
    const std::string what = std::string(to_string(r.scheme)) + " " + to_string(r.pattern) + " (deployed)";
    if (min_sqnr_db && !(r.sqnr_db >= *min_sqnr_db))
      failures += (failures.empty() ? "" : "; ") +
                  printf_string("%s: SQNR %.2f dB is below EvalOptions.min_sqnr_db %g", what.c_str(), r.sqnr_db,
                                *min_sqnr_db);
    const double pct = 100.0 * r.collapsed_fraction;
    if (max_collapsed_pct && pct > *max_collapsed_pct)
      failures += (failures.empty() ? "" : "; ") +
                  printf_string("%s: %lld rows collapsed (%.2f%%), over EvalOptions.max_collapsed_pct %g%%",
                                what.c_str(), static_cast<long long>(r.collapsed_rows), pct, *max_collapsed_pct);
  }
  if (failures.empty()) return Status::Ok();
  return make_error(ErrorCode::kValidationError, failures);
}

}  // namespace qemb
