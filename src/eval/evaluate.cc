// Accuracy of the deployed lookup against the float table (include/qemb/eval.h
// has the definitions). Two streamed passes over the rows, as compile makes
// one: a scan for the ranges, then the metrics, chunk by chunk on every core.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "compiler/row_source.h"
#include "core/parallel_rows.h"
#include "compiler/table_values.h"
#include "eval/metric_kernels.h"
#include "qemb/eval.h"
#include "qemb/checkpoint.h"
#include "eval/checkpoint_folder.h"
#include "eval/fakequant_store.h"
#include "core/file.h"
#include "kernels/quantize_kernels.h"
#include "qemb/safetensors.h"

namespace qemb {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kCosDecades = 8;  // the cosine CDF resolves 1 - cos down to 1e-8

double sqnr_db(double signal, double noise) {
  if (noise == 0.0) return kInf;
  if (signal == 0.0) return -kInf;
  return 10.0 * std::log10(signal / noise);
}

// One row's deployed values: y (dequantized output), w (the dequantized
// weight the activation quantizer receives) and the uint16 output level.
// Exactly the numeric.h functions, so the runtime reproduces them bit for bit.
void deployed_row(const PcqTable& t, int64_t r, Pattern pattern, const ActivationEncoding& act, float max_scale,
                  int qmax, float* y) {
  const float s = t.scales[static_cast<size_t>(r)];
  const int8_t* q = t.q.data() + r * t.dim;
  for (int64_t j = 0; j < t.dim; ++j) {
    if (act.bits == 0) {  // weight-only: y = s_r * q
      y[j] = dequantize_weight(s, q[j]);
      continue;
    }
    const int32_t out = pattern == Pattern::kOptimized ? optimized_output(s, q[j], act)
                                                       : legacy_output(s, q[j], max_scale, qmax, act);
    y[j] = dequantize_activation(out, act);
  }
}

// y of level q in a row (pattern, row scale, activation encoding).
float deployed_value(const SchemeParams& p, bool legacy, int q) {
  if (p.act.bits == 0) return dequantize_weight(p.row_scale, q);
  const int32_t out = legacy ? legacy_output(p.row_scale, q, p.max_scale, p.qmax, p.act)
                              : optimized_output(p.row_scale, q, p.act);
  return dequantize_activation(out, p.act);
}

// Asks for the part `part` of `parts` of a row mapped in place, ahead of its
// use: a row of 4 KiB is a page of its own, where the hardware's stream
// prefetch stops. In parts between the work on the current row, as a burst
// of more lines than the core has fill buffers stalls.
void prefetch_row(const RowSource& src, int64_t r, int64_t dim, int part, int parts) {
  const float* x = src.rows_in_place(r, r + 1);
  if (!x) return;
  const char* p = reinterpret_cast<const char*>(x);
  const size_t lines = (static_cast<size_t>(dim) * sizeof(float) + 63) / 64;
  const size_t first = lines * static_cast<size_t>(part) / static_cast<size_t>(parts);
  const size_t last = lines * static_cast<size_t>(part + 1) / static_cast<size_t>(parts);
  for (size_t l = first; l < last; ++l) __builtin_prefetch(p + 64 * l);
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

// Floating-point sums of one (scheme, pattern) over one chunk of rows: each
// row's sums (metric_kernels.h: fixed partials by column), added in row order;
// chunks are added in chunk order, so the totals depend on neither the thread
// count nor the instruction set.
struct Sums {
  double e2 = 0, abs_e = 0, we2 = 0, abs_we = 0, ae2 = 0, abs_ae = 0, cos = 0;
  void add(const Sums& o) {
    e2 += o.e2, abs_e += o.abs_e, we2 += o.we2, abs_we += o.abs_we, ae2 += o.ae2, abs_ae += o.abs_ae, cos += o.cos;
  }
};

// What one worker keeps of one (scheme, pattern): order-free, so workers merge
// in any order with the same result.
struct Partial {
  double max_e = 0, max_we = 0, max_ae = 0;
  int64_t collapsed = 0;
  std::vector<uint64_t> errors;  // the error counts by slot (metric_kernels.h)
  Histogram cosines, scales;
  std::vector<RowError> worst;    // a heap: the least bad of the kept rows first
  std::vector<double> low_cos;    // a heap of the smallest cosines: the largest first
};

bool worse(const RowError& l, const RowError& r) {
  return l.rel_err != r.rel_err ? l.rel_err > r.rel_err : l.row < r.row;
}

void merge_into(Histogram& into, const Histogram& h) {
  for (size_t i = 0; i < into.counts.size(); ++i) into.counts[i] += h.counts[i];
  into.below += h.below;
  into.above += h.above;
  into.zeros += h.zeros;
}

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
    deployed_row(table, r, pattern, act, max_scale, qmax, out + (r - row_begin) * table.dim);
  return Status::Ok();
}

Result<std::vector<Scheme>> parse_eval_schemes(const std::string& text) {
  if (text == "all") return std::vector<Scheme>(all_schemes().begin(), all_schemes().end());
  Result<Scheme> one = parse_scheme(text);
  if (!one.ok()) return make_error(ErrorCode::kInvalidArgument, one.error().message + ", or all");
  return std::vector<Scheme>{*one};
}

Result<EvalReport> evaluate_rows(const RowSource& src, const EvalOptions& options, const TargetVersion& target,
                                 const TableSource& source) {
  const int64_t rows = src.rows(), dim = src.dim();
  if (rows <= 0 || dim <= 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "the embedding table is empty (" + std::to_string(rows) + " x " + std::to_string(dim) +
                          "); it needs at least one row and one column");
  if (options.schemes.empty())
    return make_error(ErrorCode::kInvalidArgument, "no scheme to evaluate: EvalOptions.schemes is empty");
  EvalReport report;
  report.file = source.file;
  report.tensor = source.tensor;
  report.dtype = source.dtype;
  report.vocab_size = rows;
  report.dim = dim;
  report.target = target;

  std::vector<int64_t> eval_rows;  // empty: every row
  std::vector<bool> evaluated;     // with --tokens: which rows
  if (options.tokens) {
    QEMB_RETURN_IF_ERROR(check_eval_ids(*options.tokens, rows, "token"));
    eval_rows = *options.tokens;
    std::sort(eval_rows.begin(), eval_rows.end());
    eval_rows.erase(std::unique(eval_rows.begin(), eval_rows.end()), eval_rows.end());
    evaluated.assign(static_cast<size_t>(rows), false);
    for (int64_t r : eval_rows) evaluated[static_cast<size_t>(r)] = true;
    report.rows_source = options.tokens_source.empty() ? "the given tokens" : options.tokens_source;
  } else {
    report.rows_source = "all rows";
  }
  const int64_t n_rows = options.tokens ? static_cast<int64_t>(eval_rows.size()) : rows;
  report.rows_evaluated = n_rows;
  const double n_values = static_cast<double>(n_rows) * static_cast<double>(dim);
  auto row_at = [&](int64_t i) { return options.tokens ? eval_rows[static_cast<size_t>(i)] : i; };

  const int threads = default_threads(options.threads);
  const int64_t chunk = row_chunk(dim);
  const QuantizeKernelSet& qk = best_quantize_kernels();

  // Pass 1, every row: finiteness, the range the activation encoding observes,
  // the largest row amax (s_max of each scheme), and over the evaluated rows
  // the value range and the smallest and largest |x| and amax.
  struct Scan {
    float lo = INFINITY, hi = -INFINITY, amax_max = 0.0f, eval_amax_min = INFINITY;
    double value_min = kInf, value_max = -kInf, max_abs_x = 0.0;
  };
  std::vector<Scan> scans(static_cast<size_t>(threads));
  const ReleaseWindows release_all(src, chunk);
  QEMB_RETURN_IF_ERROR(parallel_rows(rows, chunk, threads, "scan", options.progress,
                                     [&](int worker, int64_t begin, int64_t end) -> Status {
    thread_local std::vector<float> row;  // declared where each worker runs (see compile_rows.cc)
    row.resize(static_cast<size_t>(dim));
    Scan& sc = scans[static_cast<size_t>(worker)];
    for (int64_t r = begin; r < end; ++r) {
      const float* x = src.rows_in_place(r, r + 1);
      if (!x) {
        QEMB_RETURN_IF_ERROR(src.read(r, r + 1, row.data()));
        x = row.data();
      }
      if (r + 1 < end) prefetch_row(src, r + 1, dim, 0, 1);
      RowStats st;
      const int64_t bad = qk.row_stats_f32(x, static_cast<size_t>(dim), &st);
      if (bad >= 0) {
        const float v = x[bad];
        return make_error(ErrorCode::kInvalidArgument,
                          std::string("the table holds a non-finite value (") + (std::isnan(v) ? "NaN" : "Inf") +
                              ") at row " + std::to_string(r) + ", column " + std::to_string(bad) +
                              "; fix the checkpoint before quantizing");
      }
      sc.lo = std::min(sc.lo, st.min);
      sc.hi = std::max(sc.hi, st.max);
      sc.amax_max = std::max(sc.amax_max, st.amax);
      if (options.tokens && !evaluated[static_cast<size_t>(r)]) continue;
      sc.eval_amax_min = std::min(sc.eval_amax_min, st.amax);
      sc.max_abs_x = std::max(sc.max_abs_x, static_cast<double>(st.amax));
      // As a plain loop over the values orders -0 and +0 (the first of equal
      // values stays): the row's extreme values, with a zero's sign from
      // that loop when an extreme is zero.
      double row_min = st.min, row_max = st.max;
      if (st.min == 0.0f || st.max == 0.0f) {
        row_min = kInf;
        row_max = -kInf;
        for (int64_t j = 0; j < dim; ++j) {
          const double v = x[j];
          row_min = std::min(row_min, v);
          row_max = std::max(row_max, v);
        }
      }
      sc.value_min = std::min(sc.value_min, row_min);
      sc.value_max = std::max(sc.value_max, row_max);
    }
    if (!options.tokens) release_all.done(begin, end);
    return Status::Ok();
  }));
  Scan scan;
  for (const Scan& s : scans) {
    scan.lo = std::min(scan.lo, s.lo);
    scan.hi = std::max(scan.hi, s.hi);
    scan.amax_max = std::max(scan.amax_max, s.amax_max);
    scan.eval_amax_min = std::min(scan.eval_amax_min, s.eval_amax_min);
    scan.max_abs_x = std::max(scan.max_abs_x, s.max_abs_x);
  }
  // value_min/max in row order: the first of equal values (-0, +0) stays.
  report.value_min = kInf;
  report.value_max = -kInf;
  for (const Scan& s : scans) {
    if (s.value_min < report.value_min) report.value_min = s.value_min;
    if (s.value_max > report.value_max) report.value_max = s.value_max;
  }

  if (options.calibration_tokens) {
    QEMB_ASSIGN_OR_RETURN(report.act, calibration_encoding_of(src, *options.calibration_tokens));
  } else {
    QEMB_ASSIGN_OR_RETURN(report.act, checked_activation_encoding(scan.lo, scan.hi));
  }
  report.calibration_source = options.calibration_tokens
                                  ? (options.calibration_source.empty() ? "calibration tokens" : options.calibration_source)
                                  : "all table values";
  report.calibration_tokens = options.calibration_tokens ? static_cast<int64_t>(options.calibration_tokens->size()) : 0;
  report.act_range_lo = static_cast<double>(report.act.scale) * -report.act.zero_point;
  report.act_range_hi = static_cast<double>(report.act.scale) * (report.act.qmax() - report.act.zero_point);

  const double half_step = 0.5 * static_cast<double>(report.act.scale);
  Histogram value_hist;
  value_hist.lo = std::min(report.value_min, report.act_range_lo);
  value_hist.hi = std::max(report.value_max, report.act_range_hi);
  if (!(value_hist.hi > value_hist.lo)) value_hist.hi = value_hist.lo + 1.0;
  // Widen by a hair so the maximum lands in the last bin, not in "above".
  value_hist.hi += (value_hist.hi - value_hist.lo) * 1e-9;
  value_hist.counts.assign(static_cast<size_t>(std::max(1, options.value_histogram_bins)), 0);

  // Error histograms share one log10 range so the patterns overlay.
  const double top = scan.max_abs_x > 0.0 ? std::ceil(std::log10(scan.max_abs_x)) : 0.0;
  const int decades = std::max(1, options.error_histogram_decades);
  const int per_decade = std::max(1, options.error_histogram_bins_per_decade);
  Histogram error_hist;
  error_hist.lo = top - decades;
  error_hist.hi = top;
  error_hist.counts.assign(static_cast<size_t>(decades * per_decade), 0);
  // Per-row cosines as log10(1 - cos) (exact 1s counted apart), for the CDF.
  Histogram cos_hist;
  cos_hist.lo = -static_cast<double>(kCosDecades);
  cos_hist.hi = 1.0;  // 1 - cos <= 2
  cos_hist.counts.assign(static_cast<size_t>((kCosDecades + 1) * per_decade), 0);

  const Pattern patterns[2] = {Pattern::kOptimized, Pattern::kLegacy};
  const size_t n_schemes = options.schemes.size(), n_results = 2 * n_schemes;
  struct SchemeInfo {
    int qmax, bits;
    ActivationEncoding act;  // the scheme's own: 16 or 8 bits, or none (bits 0: weight-only)
    float max_scale;
    Histogram scales;  // log10 s_r of the evaluated rows
  };
  std::vector<SchemeInfo> info;
  for (Scheme scheme : options.schemes) {
    SchemeInfo si;
    si.qmax = weight_qmax(scheme);
    si.bits = weight_bits(scheme);
    if (scheme.weight_only()) {
      si.act.bits = 0;
    } else if (scheme.activation_bits() == report.act.bits) {
      si.act = report.act;
    } else if (options.calibration_tokens) {
      QEMB_ASSIGN_OR_RETURN(si.act, calibration_encoding_of(src, *options.calibration_tokens, scheme.activation_bits()));
    } else {
      QEMB_ASSIGN_OR_RETURN(si.act, checked_activation_encoding(scan.lo, scan.hi, scheme.activation_bits()));
    }
    si.max_scale = row_scale_from_amax(scan.amax_max, si.qmax);
    const double smin = std::log10(row_scale_from_amax(scan.eval_amax_min, si.qmax));
    const double smax = std::log10(row_scale_from_amax(scan.amax_max, si.qmax));
    si.scales.lo = std::floor(smin);
    si.scales.hi = std::max(std::ceil(smax), si.scales.lo + 1.0);
    if (si.scales.hi <= smax) si.scales.hi += 1.0;  // s_max itself lands inside
    si.scales.counts.assign(static_cast<size_t>((si.scales.hi - si.scales.lo) * per_decade), 0);
    info.push_back(std::move(si));
  }

  // Pass 2, the evaluated rows: every metric, per scheme and pattern.
  const size_t keep_worst = std::min(options.worst_rows, static_cast<size_t>(n_rows));
  const size_t p1_rank = static_cast<size_t>((n_rows + 99) / 100);  // nearest rank: ceil(0.01 * N)
  const size_t sample_cap = std::max<size_t>(1, options.row_sample);
  const int64_t stride = static_cast<int64_t>((static_cast<size_t>(n_rows) + sample_cap - 1) / sample_cap);
  std::vector<std::vector<RowError>> samples(n_results,
                                             std::vector<RowError>(static_cast<size_t>((n_rows + stride - 1) / stride)));
  const int64_t n_chunks = (n_rows + chunk - 1) / chunk;
  std::vector<Sums> sums(static_cast<size_t>(n_chunks) * n_results);
  std::vector<double> sum_x2(static_cast<size_t>(n_chunks), 0.0);
  const MetricKernelSet& mk = best_metric_kernels();
  ValueBins value_bins;
  value_bins.lo = value_hist.lo;
  value_bins.hi = value_hist.hi;
  value_bins.n = static_cast<int>(value_hist.counts.size());
  value_bins.clip_lo = report.act_range_lo - half_step;
  value_bins.clip_hi = report.act_range_hi + half_step;
  ErrorBins error_bins;
  error_bins.lo = error_hist.lo;
  error_bins.hi = error_hist.hi;
  error_bins.n = static_cast<int>(error_hist.counts.size());
  struct Worker {
    std::vector<Partial> partial;
    std::vector<uint64_t> values;  // value categories: below, the bins, above
    int64_t clipped = 0;
  };
  std::vector<Worker> workers(static_cast<size_t>(threads));
  for (Worker& w : workers) {
    w.values.assign(value_counts_size(value_bins), 0);
    w.partial.resize(n_results);
    for (size_t k = 0; k < n_results; ++k) {
      w.partial[k].errors.assign(kErrorCountsSize, 0);
      w.partial[k].cosines = cos_hist;
      w.partial[k].scales = info[k / 2].scales;
    }
  }
  const ReleaseWindows release_eval(src, chunk);
  QEMB_RETURN_IF_ERROR(parallel_rows(n_rows, chunk, threads, "eval", options.progress,
                                     [&](int worker, int64_t begin, int64_t end) -> Status {
    thread_local std::vector<float> buf;
    buf.resize(static_cast<size_t>(dim));
    Worker& wk = workers[static_cast<size_t>(worker)];
    const int64_t c = begin / chunk;
    Sums* chunk_sums = &sums[static_cast<size_t>(c) * n_results];
    double& chunk_x2 = sum_x2[static_cast<size_t>(c)];
    for (int64_t i = begin; i < end; ++i) {
      const int64_t r = row_at(i);
      const float* x = src.rows_in_place(r, r + 1);
      if (!x) {
        QEMB_RETURN_IF_ERROR(src.read(r, r + 1, buf.data()));
        x = buf.data();
      }
      const int64_t next = i + 1 < end ? row_at(i + 1) : -1;
      const int parts = 1 + 2 * static_cast<int>(n_schemes);
      if (next >= 0) prefetch_row(src, next, dim, 0, parts);
      RowValues rv;
      mk.row_values(x, static_cast<size_t>(dim), value_bins, &rv, wk.values.data());
      wk.clipped += rv.clipped;
      chunk_x2 += rv.x2;
      const double nx2 = rv.x2;
      for (size_t si = 0; si < n_schemes; ++si) {
        const SchemeInfo& sch = info[si];
        const float s = row_scale_from_amax(rv.amax, sch.qmax);
        const double log_s = std::log10(static_cast<double>(s));
        SchemeParams params;
        params.row_scale = s;
        params.max_scale = sch.max_scale;
        params.qmax = sch.qmax;
        params.act = sch.act;
        PatternRow pattern_rows[2];
        uint64_t* pattern_counts[2] = {wk.partial[2 * si].errors.data(), wk.partial[2 * si + 1].errors.data()};
        if (next >= 0) prefetch_row(src, next, dim, 1 + 2 * static_cast<int>(si), parts);
        mk.scheme_row(x, static_cast<size_t>(dim), params, pattern_rows, pattern_counts);
        if (next >= 0) prefetch_row(src, next, dim, 2 + 2 * static_cast<int>(si), parts);
        // The level is nondecreasing in x and y in the level, so the row's
        // extreme values give its extreme outputs.
        const int q_lo = quantize_weight(rv.x_min, s, sch.qmax), q_hi = quantize_weight(rv.x_max, s, sch.qmax);
        for (int p = 0; p < 2; ++p) {
          const size_t k = 2 * si + static_cast<size_t>(p);
          Partial& a = wk.partial[k];
          Sums& sm = chunk_sums[k];
          const bool legacy = patterns[p] == Pattern::kLegacy;
          const PatternRow& pr = pattern_rows[p];
          // sum y^2 and sum x y from the error sums (PatternRow); an all-zero
          // y has sum y^2 = 0 exactly.
          const double ne2 = pr.e2, row_max = pr.max_e;
          const float y_lo = deployed_value(params, legacy, q_lo), y_hi = deployed_value(params, legacy, q_hi);
          const double ny2 = y_lo == 0.0f && y_hi == 0.0f ? 0.0 : std::max(0.0, nx2 + pr.ey);
          const double dot = nx2 + 0.5 * (pr.ey - ne2);
          sm.e2 += ne2;
          sm.abs_e += pr.abs_e;
          sm.we2 += pr.we2;
          sm.abs_we += pr.abs_we;
          sm.ae2 += pr.ae2;
          sm.abs_ae += pr.abs_ae;
          a.max_e = std::max(a.max_e, row_max);
          a.max_we = std::max(a.max_we, static_cast<double>(pr.max_we));
          a.max_ae = std::max(a.max_ae, static_cast<double>(pr.max_ae));
          if (y_lo == y_hi && !rv.constant) ++a.collapsed;
          RowError re;
          re.row = r;
          re.row_scale = s;
          re.max_abs_err = row_max;
          if (nx2 == 0.0) {
            re.rel_err = ne2 == 0.0 ? 0.0 : kInf;
            re.cos = ny2 == 0.0 ? 1.0 : 0.0;
          } else {
            re.rel_err = std::sqrt(ne2 / nx2);
            re.cos = ny2 == 0.0 ? 0.0 : std::clamp(dot / std::sqrt(nx2 * ny2), -1.0, 1.0);
          }
          sm.cos += re.cos;
          if (re.cos == 1.0) {
            a.cosines.zeros++;
          } else {
            a.cosines.add(std::log10(1.0 - re.cos));
          }
          a.scales.add(log_s);
          // A full heap keeps re only if it is worse than the least bad kept
          // row (distinct rows never tie: worse() breaks ties by id).
          if (keep_worst > 0 && (a.worst.size() < keep_worst || worse(re, a.worst.front()))) {
            a.worst.push_back(re);
            std::push_heap(a.worst.begin(), a.worst.end(), worse);
            if (a.worst.size() > keep_worst) {
              std::pop_heap(a.worst.begin(), a.worst.end(), worse);
              a.worst.pop_back();
            }
          }
          if (a.low_cos.size() < p1_rank || re.cos < a.low_cos.front()) {
            a.low_cos.push_back(re.cos);
            std::push_heap(a.low_cos.begin(), a.low_cos.end());
            if (a.low_cos.size() > p1_rank) {
              std::pop_heap(a.low_cos.begin(), a.low_cos.end());
              a.low_cos.pop_back();
            }
          }
          if (i % stride == 0) samples[k][static_cast<size_t>(i / stride)] = re;
        }
      }
    }
    if (!options.tokens) release_eval.done(begin, end);
    return Status::Ok();
  }));

  double total_x2 = 0.0;
  for (double v : sum_x2) total_x2 += v;
  report.value_histogram = value_hist;
  int64_t clipped = 0;
  const size_t n_value_bins = value_hist.counts.size();
  for (const Worker& w : workers) {
    clipped += w.clipped;
    for (size_t copy = 0; copy < kValueCopies; ++copy) {
      const uint64_t* v = w.values.data() + copy * (n_value_bins + 2);
      report.value_histogram.below += v[0];
      for (size_t b = 0; b < n_value_bins; ++b) report.value_histogram.counts[b] += v[b + 1];
      report.value_histogram.above += v[n_value_bins + 1];
    }
  }
  for (size_t si = 0; si < n_schemes; ++si) {
    const Scheme scheme = options.schemes[si];
    Result<PatternChoice> deployed = choose_pattern(Pattern::kAuto, target);
    if (deployed.ok() && !report.has_deployed_pattern) {
      report.deployed_pattern = deployed->pattern;
      report.deployed_reason = deployed->reason;
      report.has_deployed_pattern = true;
    }
    // A weight-only scheme has one result: there is no activation, so no legacy approximation.
    const int n_patterns = scheme.weight_only() ? 1 : 2;
    for (int p = 0; p < n_patterns; ++p) {
      const size_t k = 2 * si + static_cast<size_t>(p);
      Sums total;
      for (int64_t c = 0; c < n_chunks; ++c) total.add(sums[static_cast<size_t>(c) * n_results + k]);
      EvalResult res;
      res.scheme = scheme;
      res.pattern = patterns[p];
      res.deployed = scheme.weight_only() || (deployed.ok() && deployed->pattern == patterns[p]);
      res.act = info[si].act;
      res.bits_per_value = scheme.bits_per_value(dim);
      res.max_scale = info[si].max_scale;
      res.error_histogram = error_hist;
      res.cos_histogram = cos_hist;
      res.scale_histogram = info[si].scales;
      std::vector<RowError> worst;
      std::vector<double> low_cos;
      for (const Worker& w : workers) {
        const Partial& a = w.partial[k];
        res.max_abs_err = std::max(res.max_abs_err, a.max_e);
        res.weight_max_abs_err = std::max(res.weight_max_abs_err, a.max_we);
        res.act_max_abs_err = std::max(res.act_max_abs_err, a.max_ae);
        res.collapsed_rows += a.collapsed;
        std::vector<uint64_t> categories(static_cast<size_t>(error_bins.n) + 3, 0);
        error_categories(error_bins, a.errors.data(), categories.data());
        res.error_histogram.below += categories[0];
        for (size_t b = 0; b < res.error_histogram.counts.size(); ++b) res.error_histogram.counts[b] += categories[b + 1];
        res.error_histogram.above += categories[static_cast<size_t>(error_bins.n) + 1];
        res.error_histogram.zeros += categories[static_cast<size_t>(error_bins.n) + 2];
        merge_into(res.cos_histogram, a.cosines);
        merge_into(res.scale_histogram, a.scales);
        worst.insert(worst.end(), a.worst.begin(), a.worst.end());
        low_cos.insert(low_cos.end(), a.low_cos.begin(), a.low_cos.end());
      }
      res.sqnr_db = sqnr_db(total_x2, total.e2);
      res.mean_abs_err = total.abs_e / n_values;
      res.rms_err = std::sqrt(total.e2 / n_values);
      res.weight_mean_abs_err = total.abs_we / n_values;
      res.weight_sqnr_db = sqnr_db(total_x2, total.we2);
      res.act_mean_abs_err = total.abs_ae / n_values;
      res.act_sqnr_db = sqnr_db(total_x2, total.ae2);
      res.collapsed_fraction = static_cast<double>(res.collapsed_rows) / static_cast<double>(n_rows);
      res.clipped_values = clipped;
      res.clipped_fraction = static_cast<double>(clipped) / n_values;
      res.cos_mean = total.cos / static_cast<double>(n_rows);
      std::sort(low_cos.begin(), low_cos.end());
      res.cos_min = low_cos.front();
      res.cos_p1 = low_cos[p1_rank - 1];
      std::sort(worst.begin(), worst.end(), worse);
      worst.resize(std::min(worst.size(), keep_worst));
      res.worst_rows = std::move(worst);
      res.rows = std::move(samples[k]);
      report.results.push_back(std::move(res));
    }
  }
  if (!report.has_deployed_pattern) {
    // Neither pattern validates for the target with --pattern auto; say so
    // instead of claiming one.
    Result<PatternChoice> why = choose_pattern(Pattern::kAuto, target);
    report.deployed_reason = why.ok() ? "" : "no pattern validates for the target: " + why.error().message;
  }
  return report;
}

Result<EvalReport> evaluate_table(const float* table, int64_t rows, int64_t dim, const EvalOptions& options,
                                  const TargetVersion& target, const TableSource& source) {
  if (rows > 0 && dim > 0 && table == nullptr)
    return make_error(ErrorCode::kInvalidArgument, "no table given");
  return evaluate_rows(ArrayRows(table, rows, dim), options, target, source);
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

Result<FakeQuantResult> fakequant_table(const float* table, int64_t rows, int64_t dim,
                                        const FakeQuantOptions& options, const TargetVersion& target, float* out) {
  QEMB_RETURN_IF_ERROR(check_table(table, rows, dim));
  FakeQuantResult r;
  r.rows = rows;
  r.dim = dim;
  QEMB_ASSIGN_OR_RETURN(PatternChoice resolved, choose_pattern(options.pattern, target, "embedding", options.scheme));
  r.pattern = resolved.pattern;
  r.pattern_reason = resolved.reason;
  if (options.scheme.weight_only()) {
    r.act.bits = 0;  // no activation step: y = s_r * q
  } else {
    QEMB_ASSIGN_OR_RETURN(r.act, observe_activation(table, rows, dim, options.calibration_tokens,
                                                    options.scheme.activation_bits()));
  }
  const PcqTable pcq = quantize_table(table, rows, dim, options.scheme);
  QEMB_RETURN_IF_ERROR(deployed_rows(pcq, r.act, r.pattern, 0, rows, out));
  return r;
}

namespace {

Result<FakeQuantResult> fakequant_named(ParamStore& store, const std::string& name, const FakeQuantOptions& options,
                                        const TargetVersion& target) {
  QEMB_ASSIGN_OR_RETURN(ParamInfo info, store.info(name));
  QEMB_ASSIGN_OR_RETURN(FloatTensor table, store.get(name));
  // Overwrite in place: each row is read (quantized) before it is replaced.
  QEMB_ASSIGN_OR_RETURN(FakeQuantResult out, fakequant_table(table.values.data(), info.shape[0], info.shape[1],
                                                             options, target, table.values.data()));
  out.tensor = name;
  out.dtype = info.dtype;
  QEMB_RETURN_IF_ERROR(store.set(name, std::move(table)));
  return out;
}

// The safetensors file (the lone file, or the shard of the table) as a
// ParamStore, and the table's name in it.
struct StoreAndName {
  ParamStore store;
  std::string name;
};

Result<StoreAndName> open_store(const Checkpoint& ckpt, const std::string& explicit_name) {
  std::string wanted = explicit_name;
  if (wanted.empty()) {
    QEMB_ASSIGN_OR_RETURN(wanted, ckpt.find_embedding(""));
  }
  std::shared_ptr<const SafetensorsFile> file;
  if (ckpt.format() == CheckpointFormat::kSafetensors) {
    QEMB_ASSIGN_OR_RETURN(file, ckpt.lone_safetensors());
  } else {
    QEMB_ASSIGN_OR_RETURN(file, ckpt.safetensors_of(wanted));
  }
  QEMB_ASSIGN_OR_RETURN(ParamStore store, ParamStore::from_file(*file));
  QEMB_ASSIGN_OR_RETURN(std::string name, embedding_name(store, wanted));
  return StoreAndName{std::move(store), std::move(name)};
}

// A --tensor that is a glob (*, ?, [...]) names the one tensor it matches,
// as compile's globs do; a glob matching several is refused, listing them.
Result<std::string> resolve_glob(const Checkpoint& ckpt, const std::string& spec) {
  if (spec.find_first_of("*?[") == std::string::npos) return spec;
  QEMB_ASSIGN_OR_RETURN(std::vector<std::string> names, ckpt.select_tables({spec}));
  if (names.size() == 1) return names[0];
  std::string list;
  for (size_t i = 0; i < names.size() && i < 8; ++i) list += (i ? ", " : "") + names[i];
  if (names.size() > 8) list += ", ...";
  return make_error(ErrorCode::kInvalidArgument,
                    "--tensor '" + spec + "' matches " + std::to_string(names.size()) + " tensors (" + list +
                        "); this command reads one table: name it, or give a glob that matches one");
}

}  // namespace

Result<EvalReport> evaluate_checkpoint(const std::string& checkpoint, const EvalOptions& options) {
  QEMB_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(checkpoint));
  QEMB_ASSIGN_OR_RETURN(const std::string wanted, resolve_glob(ckpt, options.tensor));
  std::string name;
  if (ckpt.format() != CheckpointFormat::kSafetensors && ckpt.format() != CheckpointFormat::kShardedSafetensors) {
    QEMB_ASSIGN_OR_RETURN(name, ckpt.find_embedding(wanted));
  } else {
    // An explicit name resolves as a dotted path, as fakequant writes through.
    QEMB_ASSIGN_OR_RETURN(StoreAndName opened, open_store(ckpt, wanted));
    name = opened.name;
  }
  QEMB_ASSIGN_OR_RETURN(CheckpointTable table, ckpt.table(name));
  QEMB_ASSIGN_OR_RETURN(TargetVersion target, discover_target_version(options.qnn_sdk_version));
  // Streamed from the mapping, a row at a time: the table is never in memory whole.
  QEMB_ASSIGN_OR_RETURN(EvalReport report, evaluate_rows(CheckpointRows(table), options, target,
                                                          TableSource{checkpoint, name, table.info().dtype, to_string(ckpt.format())}));
  report.source_quantized = table.source_quantized();
  return report;
}

Result<FakeQuantResult> fakequant_store(ParamStore& store, const FakeQuantOptions& options,
                                        const TargetVersion& target) {
  QEMB_ASSIGN_OR_RETURN(std::string name, embedding_name(store, options.tensor));
  return fakequant_named(store, name, options, target);
}

Result<FakeQuantResult> fakequant_checkpoint(const std::string& checkpoint, const FakeQuantOptions& options,
                                             const std::string& out_path) {
  if (same_file(checkpoint, out_path))
    return make_error(ErrorCode::kInvalidArgument,
                      "the output '" + out_path + "' is the input checkpoint; choose another path");
  QEMB_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(checkpoint));
  if (ckpt.format() == CheckpointFormat::kGguf)
    return make_error(ErrorCode::kUnsupported, "fakequant writes safetensors checkpoints; '" + checkpoint +
                                                   "' is GGUF (compile and eval read it)");
  if (ckpt.format() != CheckpointFormat::kSafetensors && ckpt.format() != CheckpointFormat::kShardedSafetensors)
    return make_error(ErrorCode::kUnsupported, std::string("fakequant writes safetensors checkpoints; '") + checkpoint +
                                                   "' is a " + to_string(ckpt.format()) +
                                                   " checkpoint (compile and eval read it)");
  QEMB_ASSIGN_OR_RETURN(const std::string wanted, resolve_glob(ckpt, options.tensor));
  QEMB_ASSIGN_OR_RETURN(StoreAndName opened, open_store(ckpt, wanted));
  QEMB_ASSIGN_OR_RETURN(TargetVersion target, discover_target_version(options.qnn_sdk_version));
  QEMB_ASSIGN_OR_RETURN(FakeQuantResult result, fakequant_named(opened.store, opened.name, options, target));
  if (!ckpt.folder().empty() && out_path == kStdioPath)
    return make_error(ErrorCode::kInvalidArgument, "fakequant of a checkpoint folder writes a folder, which cannot go "
                                                   "to standard output; give a new folder path with -o");
  if (ckpt.folder().empty()) {
    QEMB_RETURN_IF_ERROR(opened.store.save(out_path));
  } else {
    // A folder (or an index) in, a complete folder out.
    QEMB_ASSIGN_OR_RETURN(result.linked_files,
                          write_checkpoint_folder(ckpt, opened.store, out_path, options.link, result.skipped));
    result.folder = true;
  }
  return result;
}

}  // namespace qemb
