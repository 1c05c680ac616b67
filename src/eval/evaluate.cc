// Accuracy of the deployed lookup against the float table (include/qemb/eval.h
// has the definitions).
#include <algorithm>
#include <cmath>
#include <limits>

#include "qemb/eval.h"
#include "qemb/file.h"
#include "qemb/safetensors.h"

namespace qemb {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double sqnr_db(double signal, double noise) {
  if (noise == 0.0) return kInf;
  if (signal == 0.0) return -kInf;
  return 10.0 * std::log10(signal / noise);
}

// One row's deployed values: y (dequantized output), w (the dequantized
// weight the activation quantizer receives) and the uint16 output level.
// Exactly the quantize.h functions, so the runtime reproduces them bit for bit.
void deployed_row(const PcqTable& t, int64_t r, Pattern pattern, const ActivationEncoding& act, float max_scale,
                  int qmax, float* y, float* w, uint16_t* level) {
  const float s = t.scales[static_cast<size_t>(r)];
  const int8_t* q = t.q.data() + r * t.dim;
  for (int64_t j = 0; j < t.dim; ++j) {
    uint16_t out;
    float weight;
    if (pattern == Pattern::kOptimized) {
      out = optimized_output(s, q[j], act);
      weight = s * static_cast<float>(q[j]);
    } else {
      out = legacy_output(s, q[j], max_scale, qmax, act);
      weight = max_scale * static_cast<float>(legacy_intermediate(s, q[j], max_scale, qmax));
    }
    y[j] = dequantize_activation(out, act);
    if (w) w[j] = weight;
    if (level) level[j] = out;
  }
}

Status check_eval_ids(const std::vector<int64_t>& ids, int64_t rows, const char* what) {
  if (ids.empty()) return make_error(ErrorCode::kInvalidArgument, std::string("the ") + what + " list is empty");
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= rows)
      return make_error(ErrorCode::kOutOfRange, std::string(what) + " " + std::to_string(ids[i]) + " at position " +
                                                    std::to_string(i) + " is outside the table's rows [0, " +
                                                    std::to_string(rows) + ")");
  }
  return Status::Ok();
}

// Running sums for one (scheme, pattern).
struct Accumulator {
  double sum_e2 = 0, sum_abs_e = 0, max_abs_e = 0;
  double sum_we2 = 0, sum_abs_we = 0, max_abs_we = 0;
  double sum_ae2 = 0, sum_abs_ae = 0, max_abs_ae = 0;
  int64_t collapsed = 0;
  std::vector<RowError> rows;
  Histogram errors;
};

}  // namespace

void Histogram::add(double v) {
  if (v < lo) {
    ++below;
    return;
  }
  if (v >= hi) {
    ++above;
    return;
  }
  auto bin = static_cast<size_t>((v - lo) / (hi - lo) * static_cast<double>(counts.size()));
  counts[std::min(bin, counts.size() - 1)]++;
}

uint64_t Histogram::total() const {
  uint64_t n = below + above + zeros;
  for (uint64_t c : counts) n += c;
  return n;
}

Status deployed_rows(const PcqTable& table, const ActivationEncoding& act, Pattern pattern, int64_t row_begin,
                     int64_t row_end, float* out) {
  if (pattern == Pattern::kAuto)
    return make_error(ErrorCode::kInvalidArgument, "deployed_rows needs a resolved pattern (optimized or legacy)");
  if (row_begin < 0 || row_end < row_begin || row_end > table.rows)
    return make_error(ErrorCode::kOutOfRange, "rows [" + std::to_string(row_begin) + ", " + std::to_string(row_end) +
                                                  ") are outside the table's rows [0, " +
                                                  std::to_string(table.rows) + ")");
  const float max_scale = table.max_scale();
  const int qmax = weight_qmax(table.scheme);
  for (int64_t r = row_begin; r < row_end; ++r)
    deployed_row(table, r, pattern, act, max_scale, qmax, out + (r - row_begin) * table.dim, nullptr, nullptr);
  return Status::Ok();
}

Result<LoweredEmbedding> resolve_pattern(Pattern requested, const TargetVersion& target, Scheme scheme) {
  // The lowering decides and validates; a one-value table keeps it cheap.
  PcqTable probe;
  probe.rows = 1;
  probe.dim = 1;
  probe.scheme = scheme;
  probe.scales = {1.0f};
  probe.q = {0};
  EmbeddingLoweringOptions options;
  options.pattern = requested;
  return lower_embedding(probe, ActivationEncoding{}, target, options);
}

Result<std::vector<Scheme>> parse_eval_schemes(const std::string& text) {
  if (text == "all") return std::vector<Scheme>{Scheme::k16a4w, Scheme::k16a8w};
  Result<Scheme> one = parse_scheme(text);
  if (!one.ok())
    return make_error(ErrorCode::kInvalidArgument, "unknown --scheme '" + text + "': expected 16a4w, 16a8w or all");
  return std::vector<Scheme>{*one};
}

Result<EvalReport> evaluate_table(const float* table, int64_t rows, int64_t dim, const EvalOptions& options,
                                  const TargetVersion& target, const TableSource& source) {
  QEMB_RETURN_IF_ERROR(check_table(table, rows, dim));
  if (options.schemes.empty())
    return make_error(ErrorCode::kInvalidArgument, "no scheme to evaluate; pass --scheme 16a4w, 16a8w or all");
  EvalReport report;
  report.file = source.file;
  report.tensor = source.tensor;
  report.dtype = source.dtype;
  report.vocab_size = rows;
  report.dim = dim;
  report.target = target;

  QEMB_ASSIGN_OR_RETURN(report.act, observe_activation(table, rows, dim, options.calibration_tokens));
  report.calibration_source = options.calibration_tokens
                                  ? (options.calibration_source.empty() ? "calibration tokens" : options.calibration_source)
                                  : "all table values";
  report.calibration_tokens = options.calibration_tokens ? static_cast<int64_t>(options.calibration_tokens->size()) : 0;
  report.act_range_lo = static_cast<double>(report.act.scale) * -report.act.zero_point;
  report.act_range_hi = static_cast<double>(report.act.scale) * (65535 - report.act.zero_point);

  std::vector<int64_t> eval_rows;
  if (options.tokens) {
    QEMB_RETURN_IF_ERROR(check_eval_ids(*options.tokens, rows, "token"));
    eval_rows = *options.tokens;
    std::sort(eval_rows.begin(), eval_rows.end());
    eval_rows.erase(std::unique(eval_rows.begin(), eval_rows.end()), eval_rows.end());
    report.rows_source = options.tokens_source.empty() ? "the given tokens" : options.tokens_source;
  } else {
    eval_rows.resize(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) eval_rows[static_cast<size_t>(r)] = r;
    report.rows_source = "all rows";
  }
  const int64_t n_rows = static_cast<int64_t>(eval_rows.size());
  report.rows_evaluated = n_rows;
  const double n_values = static_cast<double>(n_rows) * static_cast<double>(dim);

  // Table-only statistics: range, signal energy, clipping, the value histogram.
  double sum_x2 = 0.0, max_abs_x = 0.0;
  report.value_min = kInf;
  report.value_max = -kInf;
  for (int64_t r : eval_rows) {
    for (int64_t j = 0; j < dim; ++j) {
      const double x = table[r * dim + j];
      sum_x2 += x * x;
      max_abs_x = std::max(max_abs_x, std::abs(x));
      report.value_min = std::min(report.value_min, x);
      report.value_max = std::max(report.value_max, x);
    }
  }
  const double half_step = 0.5 * static_cast<double>(report.act.scale);
  Histogram& vh = report.value_histogram;
  vh.lo = std::min(report.value_min, report.act_range_lo);
  vh.hi = std::max(report.value_max, report.act_range_hi);
  if (!(vh.hi > vh.lo)) vh.hi = vh.lo + 1.0;
  // Widen by a hair so the maximum lands in the last bin, not in "above".
  vh.hi += (vh.hi - vh.lo) * 1e-9;
  vh.counts.assign(static_cast<size_t>(std::max(1, options.value_histogram_bins)), 0);
  int64_t clipped = 0;
  for (int64_t r : eval_rows) {
    for (int64_t j = 0; j < dim; ++j) {
      const double x = table[r * dim + j];
      vh.add(x);
      if (x < report.act_range_lo - half_step || x > report.act_range_hi + half_step) ++clipped;
    }
  }

  // Error histograms share one log10 range so the patterns overlay.
  const double top = max_abs_x > 0.0 ? std::ceil(std::log10(max_abs_x)) : 0.0;
  const int decades = std::max(1, options.error_histogram_decades);
  const int per_decade = std::max(1, options.error_histogram_bins_per_decade);

  const Pattern patterns[2] = {Pattern::kOptimized, Pattern::kLegacy};
  std::vector<float> y(static_cast<size_t>(dim)), w(static_cast<size_t>(dim));
  std::vector<uint16_t> level(static_cast<size_t>(dim));
  for (Scheme scheme : options.schemes) {
    Result<LoweredEmbedding> deployed = resolve_pattern(Pattern::kAuto, target, scheme);
    if (deployed.ok() && !report.has_deployed_pattern) {
      report.deployed_pattern = deployed->pattern;
      report.deployed_reason = deployed->reason;
      report.has_deployed_pattern = true;
    }
    const PcqTable pcq = quantize_table(table, rows, dim, scheme);
    const float max_scale = pcq.max_scale();
    const int qmax = weight_qmax(scheme);

    Accumulator acc[2];
    for (Accumulator& a : acc) {
      a.rows.reserve(static_cast<size_t>(n_rows));
      a.errors.lo = top - decades;
      a.errors.hi = top;
      a.errors.counts.assign(static_cast<size_t>(decades * per_decade), 0);
    }
    for (int64_t r : eval_rows) {
      const float* x = table + r * dim;
      bool row_constant = true;
      for (int64_t j = 1; j < dim; ++j) row_constant = row_constant && x[j] == x[0];
      for (int p = 0; p < 2; ++p) {
        Accumulator& a = acc[p];
        deployed_row(pcq, r, patterns[p], report.act, max_scale, qmax, y.data(), w.data(), level.data());
        double dot = 0, nx2 = 0, ny2 = 0, ne2 = 0, row_max = 0;
        bool one_level = true;
        for (int64_t j = 0; j < dim; ++j) {
          const double xv = x[j], yv = y[static_cast<size_t>(j)], wv = w[static_cast<size_t>(j)];
          const double e = yv - xv, we = wv - xv, ae = yv - wv;
          dot += xv * yv;
          nx2 += xv * xv;
          ny2 += yv * yv;
          ne2 += e * e;
          row_max = std::max(row_max, std::abs(e));
          a.sum_abs_e += std::abs(e);
          a.sum_we2 += we * we;
          a.sum_abs_we += std::abs(we);
          a.max_abs_we = std::max(a.max_abs_we, std::abs(we));
          a.sum_ae2 += ae * ae;
          a.sum_abs_ae += std::abs(ae);
          a.max_abs_ae = std::max(a.max_abs_ae, std::abs(ae));
          one_level = one_level && level[static_cast<size_t>(j)] == level[0];
          if (e == 0.0) {
            a.errors.zeros++;
          } else {
            a.errors.add(std::log10(std::abs(e)));
          }
        }
        a.sum_e2 += ne2;
        a.max_abs_e = std::max(a.max_abs_e, row_max);
        if (one_level && !row_constant) ++a.collapsed;
        RowError re;
        re.row = r;
        re.row_scale = pcq.scales[static_cast<size_t>(r)];
        re.max_abs_err = row_max;
        if (nx2 == 0.0) {
          re.rel_err = ne2 == 0.0 ? 0.0 : kInf;
          re.cos = ny2 == 0.0 ? 1.0 : 0.0;
        } else {
          re.rel_err = std::sqrt(ne2 / nx2);
          re.cos = ny2 == 0.0 ? 0.0 : std::clamp(dot / std::sqrt(nx2 * ny2), -1.0, 1.0);
        }
        a.rows.push_back(re);
      }
    }

    for (int p = 0; p < 2; ++p) {
      Accumulator& a = acc[p];
      EvalResult res;
      res.scheme = scheme;
      res.pattern = patterns[p];
      res.deployed = deployed.ok() && deployed->pattern == patterns[p];
      res.sqnr_db = sqnr_db(sum_x2, a.sum_e2);
      res.max_abs_err = a.max_abs_e;
      res.mean_abs_err = a.sum_abs_e / n_values;
      res.rms_err = std::sqrt(a.sum_e2 / n_values);
      res.weight_max_abs_err = a.max_abs_we;
      res.weight_mean_abs_err = a.sum_abs_we / n_values;
      res.weight_sqnr_db = sqnr_db(sum_x2, a.sum_we2);
      res.act_max_abs_err = a.max_abs_ae;
      res.act_mean_abs_err = a.sum_abs_ae / n_values;
      res.act_sqnr_db = sqnr_db(sum_x2, a.sum_ae2);
      res.collapsed_rows = a.collapsed;
      res.collapsed_fraction = static_cast<double>(a.collapsed) / static_cast<double>(n_rows);
      res.clipped_values = clipped;
      res.clipped_fraction = static_cast<double>(clipped) / n_values;

      std::vector<double> cosines;
      cosines.reserve(a.rows.size());
      double cos_sum = 0.0;
      for (const RowError& re : a.rows) {
        cosines.push_back(re.cos);
        cos_sum += re.cos;
      }
      std::sort(cosines.begin(), cosines.end());
      res.cos_mean = cos_sum / static_cast<double>(n_rows);
      res.cos_min = cosines.front();
      const size_t rank = (cosines.size() + 99) / 100;  // nearest rank: ceil(0.01 * N)
      res.cos_p1 = cosines[rank - 1];

      std::vector<RowError> ranked = a.rows;
      const size_t keep = std::min(options.worst_rows, ranked.size());
      std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(keep), ranked.end(),
                        [](const RowError& l, const RowError& r) {
                          return l.rel_err != r.rel_err ? l.rel_err > r.rel_err : l.row < r.row;
                        });
      ranked.resize(keep);
      res.worst_rows = std::move(ranked);
      res.rows = std::move(a.rows);
      res.error_histogram = std::move(a.errors);
      report.results.push_back(std::move(res));
    }
  }
  if (!report.has_deployed_pattern) {
    // Neither pattern validates for the target with --pattern auto; say so
    // instead of claiming one.
    Result<LoweredEmbedding> why = resolve_pattern(Pattern::kAuto, target, options.schemes.front());
    report.deployed_reason = why.ok() ? "" : "no pattern validates for the target: " + why.error().message;
  }
  return report;
}

namespace {

// An explicit name resolves as a dotted path (the same resolver fakequant
// writes through); none means detect the embedding by its name.
Result<std::string> embedding_name(const ParamStore& store, const std::string& explicit_name) {
  if (explicit_name.empty()) return find_embedding_tensor(store.file(), "");
  QEMB_ASSIGN_OR_RETURN(ParamInfo info, store.info(explicit_name));
  if (info.shape.size() != 2)
    return make_error(ErrorCode::kUnsupported, "tensor '" + info.name + "' has shape " +
                                                   shape_to_string(info.shape) +
                                                   "; an embedding table is 2-D [vocab, dim]");
  if (!is_float_convertible_dtype(info.dtype))
    return make_error(ErrorCode::kUnsupported, "tensor '" + info.name + "' has dtype " + info.dtype +
                                                   "; qemb reads F32, F16 and BF16 tables");
  return info.name;
}

}  // namespace

Result<EvalReport> evaluate_checkpoint(const std::string& checkpoint, const EvalOptions& options) {
  QEMB_ASSIGN_OR_RETURN(ParamStore store, ParamStore::open(checkpoint));
  QEMB_ASSIGN_OR_RETURN(std::string name, embedding_name(store, options.tensor));
  QEMB_ASSIGN_OR_RETURN(ParamInfo info, store.info(name));
  QEMB_ASSIGN_OR_RETURN(FloatTensor table, store.get(name));
  QEMB_ASSIGN_OR_RETURN(TargetVersion target, discover_target_version(options.qnn_sdk_version));
  return evaluate_table(table.values.data(), info.shape[0], info.shape[1], options, target,
                        TableSource{checkpoint, name, info.dtype});
}

Result<FakeQuantResult> fakequant_store(ParamStore& store, const FakeQuantOptions& options,
                                        const TargetVersion& target) {
  QEMB_ASSIGN_OR_RETURN(std::string name, embedding_name(store, options.tensor));
  QEMB_ASSIGN_OR_RETURN(ParamInfo info, store.info(name));
  QEMB_ASSIGN_OR_RETURN(FloatTensor table, store.get(name));
  const int64_t rows = info.shape[0], dim = info.shape[1];
  QEMB_RETURN_IF_ERROR(check_table(table.values.data(), rows, dim));
  FakeQuantResult out;
  out.tensor = name;
  out.dtype = info.dtype;
  out.rows = rows;
  out.dim = dim;
  QEMB_ASSIGN_OR_RETURN(LoweredEmbedding resolved, resolve_pattern(options.pattern, target, options.scheme));
  out.pattern = resolved.pattern;
  out.pattern_reason = resolved.reason;
  QEMB_ASSIGN_OR_RETURN(out.act, observe_activation(table.values.data(), rows, dim, options.calibration_tokens));
  const PcqTable pcq = quantize_table(table.values.data(), rows, dim, options.scheme);
  // Overwrite in place: each row is read (quantized above) before it is replaced.
  QEMB_RETURN_IF_ERROR(deployed_rows(pcq, out.act, out.pattern, 0, rows, table.values.data()));
  QEMB_RETURN_IF_ERROR(store.set(name, std::move(table)));
  return out;
}

Result<FakeQuantResult> fakequant_checkpoint(const std::string& checkpoint, const FakeQuantOptions& options,
                                             const std::string& out_path) {
  if (same_file(checkpoint, out_path))
    return make_error(ErrorCode::kInvalidArgument,
                      "the output '" + out_path + "' is the input checkpoint; choose another path");
  QEMB_ASSIGN_OR_RETURN(ParamStore store, ParamStore::open(checkpoint));
  QEMB_ASSIGN_OR_RETURN(TargetVersion target, discover_target_version(options.qnn_sdk_version));
  QEMB_ASSIGN_OR_RETURN(FakeQuantResult result, fakequant_store(store, options, target));
  QEMB_RETURN_IF_ERROR(store.save(out_path));
  return result;
}

}  // namespace qemb
