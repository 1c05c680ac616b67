// Pooled (EmbeddingBag) kernels: a fragment of gather_kernels.cc, which
// includes it once per Highway target inside its qemb::HWY_NAMESPACE, after
// the row-access, prefetch and requantization helpers these kernels share
// with the gathers. Kept apart so the bag and gather kernels change
// independently; no include guard, since every target's pass needs it.
//
// Each bag's output row is the accumulator: zeroed, then every id's row is
// added into it column by column, in the bag's order, so each column sees
// exactly the contract's sequence of float32 operations whatever the vector
// width. Like its includer it is compiled with -ffp-contract=off: a Mul
// followed by an Add must stay two roundings.

// y = s_a * (float)(q16 - zp), optionally times the id's weight, added into o.
template <class DF>
HWY_INLINE void AccumulateY(DF df, hn::Vec<DF> y, bool weighted, hn::Vec<DF> w,
                            float* HWY_RESTRICT o) {
  if (weighted) y = hn::Mul(w, y);
  hn::StoreU(hn::Add(hn::LoadU(df, o), y), df, o);
}

HWY_INLINE void AccumulateScalar(float y, bool weighted, float w, float* HWY_RESTRICT o) {
  if (weighted) {
    const float product = w * y;
    *o = *o + product;
  } else {
    *o = *o + y;
  }
}

// Runs add_row(row id, weighted, weight, out row) for every id of every bag
// that is not the padding id, after zeroing the bag's row, then divides by
// the count for mean. Prefetches rows kBagPrefetchRows ids ahead over the flat
// ids, across bags and up to bag.lookahead_end: a bag of one id has no
// lookahead of its own.
// Ids ahead whose rows are prefetched: the bag kernels spend longer on a row
// than a gather, and each row also needs its scale's line.
constexpr size_t kBagPrefetchRows = 32;
// Into L2, not L1: 32 rows of up to 3 lines ahead are more lines than L1's
// fill buffers track, and the demand loads of a row in L2 overlap with the
// arithmetic. Cold 8M-row 4-bit tables, paired runs on the development VM:
// 0.49x -> 0.55x the memcpy roofline at D=256 pooling 20, 0.54x -> 0.67x at
// D=128 pooling 1; 8-bit D=128 pooling 20 0.38x -> 0.79x.
constexpr int kBagPrefetchLocality = 2;
// Every line of a record up to this many bytes: an 8-bit D=256 record (260
// bytes with its scale) spans 5 or 6 lines, and the gathers' 256-byte cap
// left its last line to a demand miss. Longer rows leave the rest to the
// hardware prefetcher, as the gathers do.
constexpr size_t kBagPrefetchBytesPerRow = 512;

// The lines of a row's record (up to kBagPrefetchBytesPerRow of it: a uint16
// row, or a PCQ row with its scale when interleaved) and, in the plain PCQ
// layout, of its scale, requested with a count that is the same for every
// row: addresses 64 bytes apart from the record's first byte, then its last
// one, cover each line it touches whatever its alignment. A line loop from
// the record's first line to its last (PrefetchPcqRow) ends after a different
// count for differently aligned records, a branch the predictor misses, and
// its extra work per id holds the window that keeps later rows' misses in
// flight: cold 8M-row 8-bit D=256 pooling 20, 0.49x -> 0.72x the memcpy
// roofline (interleaved batches, Zen 5 VM).
struct RecordLines {
  // The uint16 table's rows.
  RecordLines(const uint8_t* rows, size_t row_bytes) : first(rows), stride(row_bytes) { SetSpan(row_bytes); }
  // A PCQ table's rows in either layout.
  RecordLines(const RequantGatherParams& p, size_t row_bytes) {
    const uint8_t* w = p.weights;
    const uint8_t* s = reinterpret_cast<const uint8_t*>(p.row_scales);
    size_t span = row_bytes;
    first = w;
    stride = p.row_stride ? p.row_stride : row_bytes;
    if (p.scale_stride != 0 && p.scale_stride == p.row_stride) {
      first = std::min(s, w);
      span = static_cast<size_t>(std::max(s + sizeof(float), w + row_bytes) - first);
    } else {
      scales = s;
      scale_stride = p.scale_stride ? p.scale_stride : sizeof(float);
    }
    SetSpan(span);
  }
  void SetSpan(size_t span) {
    span = std::min(std::max<size_t>(span, 1), kBagPrefetchBytesPerRow);
    last = span - 1;
    steps = (last + kCacheLine - 1) / kCacheLine;
  }
  HWY_INLINE void Prefetch(size_t r) const {
    const uint8_t* rec = first + r * stride;
    for (size_t k = 0; k < steps; ++k) __builtin_prefetch(rec + k * kCacheLine, 0, kBagPrefetchLocality);
    __builtin_prefetch(rec + last, 0, kBagPrefetchLocality);
    if (scales) __builtin_prefetch(scales + r * scale_stride, 0, kBagPrefetchLocality);
  }
  const uint8_t* first = nullptr;
  size_t stride = 0, steps = 0, last = 0;
  const uint8_t* scales = nullptr;  // the plain layout's scale array
  size_t scale_stride = 0;
};

// Where ids may be read up to, to prefetch rows ahead.
HWY_INLINE size_t LookaheadEnd(const BagParams& bag) {
  return std::max(static_cast<size_t>(bag.offsets[bag.bags]), bag.lookahead_end);
}

// RowWeights and RowScale with the layout read once into locals: the
// kernels' vector stores may alias anything, so fields read through the
// params are loaded again for every row.
struct RowLocations {
  RowLocations(const RequantGatherParams& p, size_t row_bytes)
      : weights(p.weights), scales(reinterpret_cast<const uint8_t*>(p.row_scales)),
        row_stride(p.row_stride ? p.row_stride : row_bytes),
        scale_stride(p.scale_stride ? p.scale_stride : sizeof(float)) {}
  HWY_INLINE const uint8_t* Row(size_t r) const { return weights + r * row_stride; }
  HWY_INLINE float Scale(size_t r) const {
    float s;
    std::memcpy(&s, scales + r * scale_stride, sizeof(s));
    return s;
  }
  const uint8_t* weights;
  const uint8_t* scales;
  size_t row_stride, scale_stride;
};

// Rows read where they are stored: each id's row and scale from the table,
// prefetched kBagPrefetchRows ids ahead (RecordLines).
template <typename Id>
class DirectRows {
 public:
  DirectRows(const RequantGatherParams& p, size_t row_bytes, const Id* ids, const BagParams& bag)
      : lines_(p, row_bytes), at_(p, row_bytes), ids_(ids), end_(LookaheadEnd(bag)) {}
  // Before flat position i's row is read.
  HWY_INLINE void Ahead(size_t i) const {
    if (i + kBagPrefetchRows < end_) lines_.Prefetch(static_cast<size_t>(ids_[i + kBagPrefetchRows]));
  }
  // Row r, the id at flat position i (visited in increasing order).
  HWY_INLINE const uint8_t* Row(size_t /*i*/, size_t r) const { return at_.Row(r); }
  HWY_INLINE float Scale(size_t /*i*/, size_t r) const { return at_.Scale(r); }

 private:
  const RecordLines lines_;
  const RowLocations at_;
  const Id* ids_;
  size_t end_;
};

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// The staging buffer: two blocks of rows, each of as many ids as fit up to
// kStageMaxIds (64 ids of 256-byte rows; bigger blocks keep more misses in
// flight: 32 -> 64 ids of 8-bit D = 256 rows, 0.96x -> 1.03x the memcpy
// gather), and the most bytes a staged row takes (an 8-bit row of up to 16
// vectors and a tail: 271 bytes, in whole lines).
constexpr size_t kStageBufferBytes = 32768;
constexpr size_t kStageMaxIds = 128;
constexpr size_t kStageRowBytes = 320;
// BagParams::RowReads::kAuto stages the rows of tables larger than this
// (far past the last-level cache) when they span more than two lines or the
// bags hold fewer than kStageShortBags ids on average. Zen 5 VM, same-run
// pairs with the memcpy gather of the same records, direct -> staged:
// 8M rows, pooling 20, 8-bit D = 128 / 256 0.63x / 0.65x -> 0.97x / 1.0x;
// pooling 1, 8-bit D = 64 / 128 0.55x / 0.48x -> 0.76x / 0.75x, 4-bit D =
// 128 / 256 0.52x / 0.40x -> 0.69x / 0.75x. Rows of one or two lines in
// longer bags lose (4-bit D = 64 pooling 20: 1.5x -> 0.96x), and so do
// tables that partly stay in cache: 1M rows (138 MB), 8-bit D = 128 and
// 4-bit D = 256 1.17x / 1.21x -> 1.02x / 1.02x; at 272 MB, 8-bit D = 256,
// 0.87x -> 1.03x.
constexpr size_t kStageMinTableBytes = size_t{256} << 20;
constexpr size_t kStageShortBags = 4;

HWY_INLINE bool StageRows(const RequantGatherParams& p, const BagParams& bag, size_t row_bytes) {
  if (row_bytes > kStageRowBytes) return false;
  switch (bag.row_reads) {
    case BagParams::RowReads::kDirect: return false;
    case BagParams::RowReads::kStaged: return true;
    case BagParams::RowReads::kAuto: break;
  }
  const size_t stride = p.row_stride ? p.row_stride : row_bytes;
  if (p.rows <= kStageMinTableBytes / stride) return false;
  const size_t ids = static_cast<size_t>(bag.offsets[bag.bags] - bag.offsets[0]);
  return row_bytes + sizeof(float) > 2 * kCacheLine || ids < kStageShortBags * bag.bags;
}

// Rows copied a block of ids at a time into a buffer that stays in L1, one
// block ahead of the arithmetic, and read from there. The copy loop is a
// memcpy gather (a few instructions an id, every load independent), so its
// misses overlap as the roofline's do; the arithmetic then reads lines in
// L1. Read directly, each cold row's loads wait behind its own and the
// previous rows' arithmetic, and the window of instructions ends before
// enough later rows' misses are in flight: prefetches issued further ahead
// change nothing measurable (distance 2 to 64 ids, into L1 or L2).
template <typename Id>
class StagedRows {
 public:
  // The bags' positions are read in increasing order.
  StagedRows(const RequantGatherParams& p, size_t row_bytes, const Id* ids, const BagParams& bag)
      : lines_(p, row_bytes), at_(p, row_bytes), ids_(ids),
        end_(static_cast<size_t>(bag.offsets[bag.bags])), prefetch_end_(LookaheadEnd(bag)),
        slot_((row_bytes + kCacheLine - 1) / kCacheLine * kCacheLine), lines_per_row_(row_bytes / kCacheLine),
        tail_(row_bytes % kCacheLine == 0 ? 0 : ~0ull >> (kCacheLine - row_bytes % kCacheLine)) {
    block_ids_ = std::min(kStageMaxIds, kStageBufferBytes / (2 * slot_));
    block_begin_ = static_cast<size_t>(bag.offsets[0]);
    block_end_ = Fill(0, block_begin_);
    next_end_ = Fill(1, block_end_);
  }
  HWY_INLINE void Ahead(size_t /*i*/) const {}
  HWY_INLINE const uint8_t* Row(size_t i, size_t /*r*/) {
    // A block of padding ids only is never read: skip past it.
    while (HWY_UNLIKELY(i >= block_end_)) Advance();
    return rows_ + ((current_ * block_ids_) + (i - block_begin_)) * slot_;
  }
  // After Row(i, r).
  HWY_INLINE float Scale(size_t i, size_t /*r*/) const {
    return scales_staged_[current_ * block_ids_ + (i - block_begin_)];
  }

 private:
  HWY_NOINLINE void Advance() {
    current_ ^= 1;
    block_begin_ = block_end_;
    block_end_ = next_end_;
    next_end_ = Fill(current_ ^ 1, block_end_);
  }
  // Copies the rows of positions [from, from + block_ids_) (up to end_) into
  // buffer half `half`; returns where they stop.
  size_t Fill(size_t half, size_t from) {
    const size_t to = std::min(from + block_ids_, end_);
    uint8_t* HWY_RESTRICT dst = rows_ + half * block_ids_ * slot_;
    float* HWY_RESTRICT scales = scales_staged_ + half * block_ids_;
    for (size_t i = from; i < to; ++i, dst += slot_) {
      if (i + kBagPrefetchRows < prefetch_end_) lines_.Prefetch(static_cast<size_t>(ids_[i + kBagPrefetchRows]));
      const size_t r = static_cast<size_t>(ids_[i]);
      const uint8_t* src = at_.Row(r);
      scales[i - from] = at_.Scale(r);
      size_t c = 0;
      for (; c < lines_per_row_; ++c) {
        _mm512_store_si512(dst + c * kCacheLine, _mm512_loadu_si512(src + c * kCacheLine));
      }
      // The row's last bytes with a masked load, which reads nothing past them.
      if (tail_) _mm512_store_si512(dst + c * kCacheLine, _mm512_maskz_loadu_epi8(tail_, src + c * kCacheLine));
    }
    return to;
  }

  const RecordLines lines_;
  const RowLocations at_;
  const Id* ids_;
  size_t end_, prefetch_end_;
  size_t slot_, lines_per_row_;
  __mmask64 tail_;
  size_t block_begin_ = 0, block_end_ = 0, next_end_ = 0, current_ = 0;
  size_t block_ids_ = 0;
  alignas(64) uint8_t rows_[kStageBufferBytes];
  float scales_staged_[2 * kStageMaxIds];
};
#endif

// Runs finish(out row) once a bag's ids are in, when at least one counted:
// kernels that accumulate columns in their own order put them back there.
struct NoFinish {
  void operator()(float*) const {}
};

template <typename Id, class AddRow, class Finish = NoFinish>
HWY_INLINE void PoolBags(size_t dim, const Id* HWY_RESTRICT ids, const BagParams& bag,
                         float* HWY_RESTRICT out, const RecordLines& lines, AddRow&& add_row,
                         Finish&& finish = Finish()) {
  using DF = hn::ScalableTag<float>;
  const DF df;
  const size_t NF = hn::Lanes(df);
  const size_t end = LookaheadEnd(bag);
  const bool weighted = bag.weights != nullptr;
  for (size_t b = 0; b < bag.bags; ++b) {
    float* o = out + b * bag.out_stride;
    size_t j = 0;
    for (; j + NF <= dim; j += NF) hn::StoreU(hn::Zero(df), df, o + j);
    for (; j < dim; ++j) o[j] = +0.0f;
    int64_t count = 0;
    const size_t bag_end = static_cast<size_t>(bag.offsets[b + 1]);
    for (size_t i = static_cast<size_t>(bag.offsets[b]); i < bag_end; ++i) {
      if (i + kBagPrefetchRows < end) lines.Prefetch(static_cast<size_t>(ids[i + kBagPrefetchRows]));
      const int64_t id = ids[i];
      if (id == bag.padding_idx) continue;
      add_row(static_cast<size_t>(id), weighted, weighted ? bag.weights[i] : 1.0f, o);
      ++count;
    }
    if (count > 0) finish(o);
    if (bag.mean && count > 0) {
      const float c = static_cast<float>(count);
      const auto vc = hn::Set(df, c);
      j = 0;
      for (; j + NF <= dim; j += NF) hn::StoreU(hn::Div(hn::LoadU(df, o + j), vc), df, o + j);
      for (; j < dim; ++j) o[j] = o[j] / c;
    }
  }
}

template <typename Id, bool kUnused>
HWY_INLINE void BagU16(const RequantGatherParams& p, const Id* ids, const BagParams& bag,
                       float* out) {
  using DF = hn::ScalableTag<float>;
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> du16;
  const size_t NF = hn::Lanes(df);
  const size_t dim = p.dim;
  const ActivationVec<DF> a(df, p.act);
  const auto zero_point = hn::Set(di, p.act.zero_point);
  const uint16_t* table = reinterpret_cast<const uint16_t*>(p.weights);
  const size_t row_bytes = dim * sizeof(uint16_t);
  PoolBags(
      dim, ids, bag, out,
      RecordLines(p.weights, row_bytes),
      [&](size_t r, bool weighted, float w, float* HWY_RESTRICT o) {
        const uint16_t* row = table + r * dim;
        const auto wv = hn::Set(df, w);
        size_t j = 0;
        for (; j + NF <= dim; j += NF) {
          const auto q = hn::Sub(hn::PromoteTo(di, hn::LoadU(du16, row + j)), zero_point);
          AccumulateY(df, hn::Mul(a.scale(), hn::ConvertTo(df, q)), weighted, wv, o + j);
        }
        for (; j < dim; ++j) AccumulateScalar(dequantize_activation(row[j], p.act), weighted, w, o + j);
      });
}

// y = s_a * (q16 - zp) for one vector of int8 columns. kUnclamped: for a
// row that FitsUnclamped, where q16 - zp = rne(t) exactly and t + 1.5 * 2^23
// minus 1.5 * 2^23 is rne(t) as a float (RequantRowS8Unclamped says why),
// with none of Q16's clamps.
template <bool kLegacy, bool kUnclamped, class DF>
HWY_INLINE hn::Vec<DF> S8Y(DF df, const int8_t* HWY_RESTRICT p, hn::Vec<DF> s, const S8Consts<DF>& c) {
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<int8_t, DF> d8;
  auto x = hn::Mul(s, hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, p))));  // s_r * q
  if constexpr (kLegacy) x = LegacyRequantized(df, x, c.legacy);
  if constexpr (kUnclamped) {
    const auto magic = hn::Set(df, 12582912.0f);
    return hn::Mul(c.a.scale(), hn::Sub(hn::Add(hn::Mul(x, c.a.inv_scale()), magic), magic));
  } else {
    return DequantizeQ16(Q16(df, x, c.a), c.a);
  }
}

// Columns [j, dim) of one 8-bit row's y (times the weight) added into o: whole
// vectors, then scalars.
template <bool kLegacy, class DF>
HWY_INLINE void AccumulateS8Columns(DF df, const int8_t* HWY_RESTRICT row, size_t j, size_t dim, float row_scale,
                                    bool fits, bool weighted, float w, const S8Consts<DF>& c,
                                    float* HWY_RESTRICT o) {
  const size_t NF = hn::Lanes(df);
  const auto s = hn::Set(df, row_scale);
  const auto wv = hn::Set(df, w);
  if (fits) {
    for (; j + NF <= dim; j += NF) AccumulateY(df, S8Y<kLegacy, true>(df, row + j, s, c), weighted, wv, o + j);
  } else {
    for (; j + NF <= dim; j += NF) AccumulateY(df, S8Y<kLegacy, false>(df, row + j, s, c), weighted, wv, o + j);
  }
  for (; j < dim; ++j) {
    const uint16_t v = kLegacy ? legacy_output(row_scale, row[j], c.max_scale, 127, c.act)
                               : optimized_output(row_scale, row[j], c.act);
    AccumulateScalar(dequantize_activation(v, c.act), weighted, w, o + j);
  }
}

#undef QEMB_S8_BAG_REGISTERS
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
#define QEMB_S8_BAG_REGISTERS 1
// Accumulators held in registers: up to 16 vectors on AVX-512 (32 registers),
// 8 elsewhere (16 registers on x86; NEON keeps it simple too).
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr size_t kS8BagMaxVectors = 16;
#else
constexpr size_t kS8BagMaxVectors = 8;
#endif

// Pools bags of an 8-bit table whose first kV * Lanes columns stay in kV
// accumulator registers for the whole bag: each id costs its loads and the
// arithmetic, with no load or store of the bag's row, which PoolBags'
// accumulation in memory spends most of its time on. Columns past them
// (fewer than a vector) are accumulated in memory. Each column sees the
// contract's sequence of operations: the same bits as PoolBags.
template <size_t kV, bool kLegacy, typename Id, class DF>
HWY_NOINLINE void PoolBagsS8Registers(DF df, const RequantGatherParams& p, const Id* HWY_RESTRICT ids,
                                      const BagParams& bag, float* HWY_RESTRICT out, const S8Consts<DF>& c,
                                      bool legacy_fits) {
  using V = hn::Vec<DF>;
  const size_t NF = hn::Lanes(df);
  const size_t dim = p.dim;
  const size_t cols = kV * NF;
  const bool weighted = bag.weights != nullptr;
  const float inv_sa = inv(p.act.scale);
  const float bound = UnclampedBound(p.act);
  const DirectRows<Id> rows(p, dim, ids, bag);
  for (size_t b = 0; b < bag.bags; ++b) {
    float* HWY_RESTRICT o = out + b * bag.out_stride;
    V acc[kV];
    for (size_t v = 0; v < kV; ++v) acc[v] = hn::Zero(df);
    for (size_t j = cols; j < dim; ++j) o[j] = +0.0f;
    int64_t count = 0;
    const size_t bag_end = static_cast<size_t>(bag.offsets[b + 1]);
    for (size_t i = static_cast<size_t>(bag.offsets[b]); i < bag_end; ++i) {
      rows.Ahead(i);
      const int64_t id = ids[i];
      if (id == bag.padding_idx) continue;
      const size_t r = static_cast<size_t>(id);
      const float row_scale = rows.Scale(i, r);
      const int8_t* HWY_RESTRICT row = reinterpret_cast<const int8_t*>(rows.Row(i, r));
      const V s = hn::Set(df, row_scale);
      const float w = weighted ? bag.weights[i] : 1.0f;
      const V wv = hn::Set(df, w);
      const bool fits = kLegacy ? legacy_fits : FitsUnclamped(row_scale, inv_sa, bound);
      if (fits) {
        for (size_t v = 0; v < kV; ++v) {
          V y = S8Y<kLegacy, true>(df, row + v * NF, s, c);
          if (weighted) y = hn::Mul(wv, y);
          acc[v] = hn::Add(acc[v], y);
        }
      } else {
        for (size_t v = 0; v < kV; ++v) {
          V y = S8Y<kLegacy, false>(df, row + v * NF, s, c);
          if (weighted) y = hn::Mul(wv, y);
          acc[v] = hn::Add(acc[v], y);
        }
      }
      if (cols < dim) AccumulateS8Columns<kLegacy>(df, row, cols, dim, row_scale, fits, weighted, w, c, o);
      ++count;
    }
    if (bag.mean && count > 0) {
      const float cf = static_cast<float>(count);
      const V vc = hn::Set(df, cf);
      for (size_t v = 0; v < kV; ++v) acc[v] = hn::Div(acc[v], vc);
      for (size_t j = cols; j < dim; ++j) o[j] = o[j] / cf;
    }
    for (size_t v = 0; v < kV; ++v) hn::StoreU(acc[v], df, o + v * NF);
  }
}

#if HWY_TARGET == HWY_AVX3 && HWY_ARCH_X86
// PoolBagsS8Registers for the optimized pattern on AVX-512, kV vectors of 16
// columns, with what a cold row needs least of: the per-id work is lean
// (fields in locals, the weight's test unswitched, the row's lines requested
// by RecordLines), since on cold rows each id's instructions hold the window
// that keeps later rows' misses in flight. A row that FitsUnclamped costs 7
// vector operations per 16 columns with kFma: s_a * ((t + M) - M), M = 1.5 *
// 2^23, is one rounding of an exact value, and when s_a * M is a float a
// multiply-add with -(s_a * M) rounds the same real number (checked by the
// caller; the weight's product stays apart from its addition, as the contract
// says). Other rows take S8Y's clamped steps. The same bits as PoolBags.
template <size_t kV, bool kFma, bool kWeighted, template <typename> class Rows, typename Id>
HWY_NOINLINE void PoolBagsS8RegistersAvx3(const RequantGatherParams& p, const Id* HWY_RESTRICT ids,
                                          const BagParams& bag, float* HWY_RESTRICT out,
                                          const S8Consts<hn::ScalableTag<float>>& c) {
  const hn::ScalableTag<float> df;
  const size_t dim = p.dim;
  constexpr size_t kCols = kV * 16;
  const float inv_sa = inv(p.act.scale);
  const float bound = UnclampedBound(p.act);
  const __m512 inv_v = _mm512_set1_ps(inv_sa);
  const __m512 scale_a = c.a.scale().raw;
  const __m512 magic = _mm512_set1_ps(12582912.0f);
  const __m512 minus_sm = _mm512_set1_ps(-(p.act.scale * 12582912.0f));
  Rows<Id> rows(p, dim, ids, bag);
  const int64_t padding_idx = bag.padding_idx;
  const float* const id_weights = bag.weights;
  const int64_t* const offsets = bag.offsets;
  for (size_t b = 0; b < bag.bags; ++b) {
    float* HWY_RESTRICT o = out + b * bag.out_stride;
    __m512 acc[kV];
    for (size_t v = 0; v < kV; ++v) acc[v] = _mm512_setzero_ps();
    for (size_t j = kCols; j < dim; ++j) o[j] = +0.0f;
    int64_t count = 0;
    const size_t bag_end = static_cast<size_t>(offsets[b + 1]);
    for (size_t i = static_cast<size_t>(offsets[b]); i < bag_end; ++i) {
      rows.Ahead(i);
      const int64_t id = ids[i];
      if (id == padding_idx) continue;
      const size_t r = static_cast<size_t>(id);
      const int8_t* HWY_RESTRICT row = reinterpret_cast<const int8_t*>(rows.Row(i, r));
      const float row_scale = rows.Scale(i, r);
      const float w = kWeighted ? id_weights[i] : 1.0f;
      const __m512 wv = _mm512_set1_ps(w);
      const bool fits = FitsUnclamped(row_scale, inv_sa, bound);
      if (HWY_LIKELY(fits)) {
        const __m512 s = _mm512_set1_ps(row_scale);
        for (size_t v = 0; v < kV; ++v) {
          const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 16 * v)));
          const __m512 xs = _mm512_mul_ps(s, _mm512_cvtepi32_ps(q));  // s_r * q
          const __m512 sum = _mm512_add_ps(_mm512_mul_ps(xs, inv_v), magic);
          __m512 y;
          if constexpr (kFma) {
            y = _mm512_fmadd_ps(scale_a, sum, minus_sm);
          } else {
            y = _mm512_mul_ps(scale_a, _mm512_sub_ps(sum, magic));
          }
          if constexpr (kWeighted) y = _mm512_mul_ps(wv, y);
          acc[v] = _mm512_add_ps(acc[v], y);
        }
      } else {
        const auto sv = hn::Set(df, row_scale);
        for (size_t v = 0; v < kV; ++v) {
          __m512 y = S8Y<false, false>(df, row + 16 * v, sv, c).raw;
          if constexpr (kWeighted) y = _mm512_mul_ps(wv, y);
          acc[v] = _mm512_add_ps(acc[v], y);
        }
      }
      if (kCols < dim) AccumulateS8Columns<false>(df, row, kCols, dim, row_scale, fits, kWeighted, w, c, o);
      ++count;
    }
    if (bag.mean && count > 0) {
      const float cf = static_cast<float>(count);
      const __m512 vc = _mm512_set1_ps(cf);
      for (size_t v = 0; v < kV; ++v) acc[v] = _mm512_div_ps(acc[v], vc);
      for (size_t j = kCols; j < dim; ++j) o[j] = o[j] / cf;
    }
    for (size_t v = 0; v < kV; ++v) _mm512_storeu_ps(o + 16 * v, acc[v]);
  }
}

template <size_t kV, typename Id>
HWY_INLINE void PoolBagsS8Avx3(const RequantGatherParams& p, const Id* ids, const BagParams& bag, float* out,
                               const S8Consts<hn::ScalableTag<float>>& c) {
  const float sm = p.act.scale * 12582912.0f;
  const bool fma = std::isfinite(sm) && std::fma(p.act.scale, 12582912.0f, -sm) == 0.0f;
  const bool staged = StageRows(p, bag, p.dim);
#define QEMB_S8_AVX3_CALL(fma, weighted)                                             \
  if (staged) PoolBagsS8RegistersAvx3<kV, fma, weighted, StagedRows>(p, ids, bag, out, c); \
  else PoolBagsS8RegistersAvx3<kV, fma, weighted, DirectRows>(p, ids, bag, out, c);
  if (bag.weights) {
    if (fma) { QEMB_S8_AVX3_CALL(true, true) } else { QEMB_S8_AVX3_CALL(false, true) }
  } else {
    if (fma) { QEMB_S8_AVX3_CALL(true, false) } else { QEMB_S8_AVX3_CALL(false, false) }
  }
#undef QEMB_S8_AVX3_CALL
}
#endif

// The register kernel for dims of 1 to kS8BagMaxVectors whole vectors (and
// a partial one); false for others.
template <bool kLegacy, typename Id, class DF>
HWY_INLINE bool PoolBagsS8InRegisters(DF df, const RequantGatherParams& p, const Id* ids, const BagParams& bag,
                                      float* out, const S8Consts<DF>& c, bool legacy_fits) {
#if HWY_TARGET == HWY_AVX3 && HWY_ARCH_X86
  if constexpr (!kLegacy) {
    switch (p.dim / 16) {
#define QEMB_S8_AVX3(v) \
  case v:               \
    PoolBagsS8Avx3<v>(p, ids, bag, out, c); \
    return true;
      QEMB_S8_AVX3(1)
      QEMB_S8_AVX3(2)
      QEMB_S8_AVX3(3)
      QEMB_S8_AVX3(4)
      QEMB_S8_AVX3(5)
      QEMB_S8_AVX3(6)
      QEMB_S8_AVX3(7)
      QEMB_S8_AVX3(8)
      QEMB_S8_AVX3(9)
      QEMB_S8_AVX3(10)
      QEMB_S8_AVX3(11)
      QEMB_S8_AVX3(12)
      QEMB_S8_AVX3(13)
      QEMB_S8_AVX3(14)
      QEMB_S8_AVX3(15)
      QEMB_S8_AVX3(16)
#undef QEMB_S8_AVX3
      default:
        break;
    }
  }
#endif
  switch (p.dim / hn::Lanes(df)) {
#define QEMB_S8_VECTORS(v)                                                          \
  case v:                                                                           \
    if (v <= kS8BagMaxVectors) {                                                    \
      PoolBagsS8Registers<(v <= kS8BagMaxVectors ? v : 1), kLegacy>(df, p, ids, bag, out, c, legacy_fits); \
      return true;                                                                  \
    }                                                                               \
    return false;
    QEMB_S8_VECTORS(1)
    QEMB_S8_VECTORS(2)
    QEMB_S8_VECTORS(3)
    QEMB_S8_VECTORS(4)
    QEMB_S8_VECTORS(5)
    QEMB_S8_VECTORS(6)
    QEMB_S8_VECTORS(7)
    QEMB_S8_VECTORS(8)
    QEMB_S8_VECTORS(9)
    QEMB_S8_VECTORS(10)
    QEMB_S8_VECTORS(11)
    QEMB_S8_VECTORS(12)
    QEMB_S8_VECTORS(13)
    QEMB_S8_VECTORS(14)
    QEMB_S8_VECTORS(15)
    QEMB_S8_VECTORS(16)
#undef QEMB_S8_VECTORS
    default:
      return false;
  }
}
#else
#define QEMB_S8_BAG_REGISTERS 0
#endif

template <typename Id, bool kLegacy>
HWY_INLINE void RequantBagS8(const RequantGatherParams& p, const Id* ids, const BagParams& bag,
                             float* out) {
  using DF = hn::ScalableTag<float>;
  const DF df;
  const S8Consts<DF> c(df, p);
  const size_t dim = p.dim;
  const float inv_sa = inv(p.act.scale);
  const float bound = UnclampedBound(p.act);
  // The legacy intermediate is s_max * qi whatever the row: one test a call.
  const bool legacy_fits = kLegacy && FitsUnclamped(p.max_scale, inv_sa, bound);
#if QEMB_S8_BAG_REGISTERS
  if (PoolBagsS8InRegisters<kLegacy>(df, p, ids, bag, out, c, legacy_fits)) return;
#endif
  PoolBags(
      dim, ids, bag, out,
      RecordLines(p, dim),
      [&](size_t r, bool weighted, float w, float* HWY_RESTRICT o) {
        const float row_scale = RowScale(p, r);
        const bool fits = kLegacy ? legacy_fits : FitsUnclamped(row_scale, inv_sa, bound);
        AccumulateS8Columns<kLegacy>(df, reinterpret_cast<const int8_t*>(RowWeights(p, r, dim)), 0, dim, row_scale,
                                     fits, weighted, w, c, o);
      });
}

// The 16 values y_k (times the weight) of one 4-bit row, as floats.
template <bool kLegacy>
HWY_INLINE void BuildFloatLut(float row_scale, bool weighted, float w,
                              const ActivationVec<LutTag>& a, const LegacyVec<LutTag>& legacy,
                              float* HWY_RESTRICT lut) {
  const LutTag df;
  const size_t NF = hn::Lanes(df);
  const auto s = hn::Set(df, row_scale);
  const auto wv = hn::Set(df, w);
  for (size_t k = 0; k < 16; k += NF) {
    auto x = hn::Mul(s, hn::Load(df, kNibbleValues + k));
    if constexpr (kLegacy) x = LegacyRequantized(df, x, legacy);
    auto y = DequantizeQ16(Q16(df, x, a), a);
    if (weighted) y = hn::Mul(wv, y);
    hn::Store(y, df, lut + k);
  }
}

#undef QEMB_BAG_FLOAT_LUT
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define QEMB_BAG_FLOAT_LUT 1
// 16 float lanes hold the whole per-row table: one permute looks up 16
// columns. Port 5 (every shuffle) is the limit, so each group of 32 columns
// is accumulated as its 16 even columns then its 16 odd ones, straight from
// the bytes' low and high nibbles with no interleave; UnpermuteS4Lut16 puts
// the bag's row back in column order once. Returns the next column.
HWY_INLINE size_t AccumulateS4Lut16(const uint8_t* HWY_RESTRICT row, size_t dim,
                                    const float* HWY_RESTRICT lut, float* HWY_RESTRICT o) {
  const hn::Full512<float> df;
  const hn::Full512<uint32_t> du32;
  const hn::Full512<int32_t> di32;
  const hn::Full128<uint8_t> d8;
  const auto table = hn::Load(df, lut);
  const auto nibble = hn::Set(du32, 15);
  size_t j = 0;
  for (; j + 32 <= dim; j += 32) {
    const auto bytes = hn::PromoteTo(du32, hn::LoadU(d8, row + j / 2));
    const auto even = hn::And(bytes, nibble);
    const auto odd = hn::ShiftRight<4>(bytes);
    const auto ye = hn::TableLookupLanes(table, hn::IndicesFromVec(df, hn::BitCast(di32, even)));
    const auto yo = hn::TableLookupLanes(table, hn::IndicesFromVec(df, hn::BitCast(di32, odd)));
    hn::StoreU(hn::Add(hn::LoadU(df, o + j), ye), df, o + j);
    hn::StoreU(hn::Add(hn::LoadU(df, o + j + 16), yo), df, o + j + 16);
  }
  return j;
}

// Columns [32g, 32g + 32) were held as 16 even then 16 odd: interleave them.
HWY_INLINE void UnpermuteS4Lut16(size_t dim, float* HWY_RESTRICT o) {
  const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  for (size_t j = 0; j + 32 <= dim; j += 32) {
    const __m512 even = _mm512_loadu_ps(o + j);
    const __m512 odd = _mm512_loadu_ps(o + j + 16);
    _mm512_storeu_ps(o + j, _mm512_permutex2var_ps(even, first, odd));
    _mm512_storeu_ps(o + j + 16, _mm512_permutex2var_ps(even, second, odd));
  }
}

// The float table of one row, in a register (BuildFloatLut's arithmetic).
template <bool kLegacy>
HWY_INLINE hn::Vec<hn::Full512<float>> FloatLut16(float row_scale, bool weighted, float w,
                                                  const ActivationVec<LutTag>& a,
                                                  const LegacyVec<LutTag>& legacy) {
  const hn::Full512<float> df;
  auto x = hn::Mul(hn::Set(df, row_scale), hn::Load(df, kNibbleValues));
  if constexpr (kLegacy) x = LegacyRequantized(df, x, legacy);
  auto y = DequantizeQ16(Q16(df, x, a), a);
  if (weighted) y = hn::Mul(hn::Set(df, w), y);
  return y;
}

// Bags of at least this many ids hold the columns of each whole 64-byte
// block of a row in the block layout (S4BlockAccumulate): it saves a third of
// the shuffles per id but costs its transpose once per bag, which shorter
// bags do not repay.
constexpr size_t kS4BlockMinIds = 3;

// The 128 columns of one 64-byte block of a 4-bit row, looked up in the row's
// table with no byte expansion: the permute reads only the low 4 bits of each
// 32-bit index, so the block's 16 dwords shifted right by 4m index nibble m
// of every dword: acc[m] lane k gathers column 8k + m. Fewer shuffles and one
// load instead of four 16-byte ones: on cold rows the kernel's arithmetic
// adds to its memory time rather than hiding under it, so every uop counts.
HWY_INLINE void S4BlockAccumulate(const uint8_t* HWY_RESTRICT block, __m512 table, __m512* HWY_RESTRICT acc) {
  __m512i v = _mm512_loadu_si512(block);
  // One load: folded into each shift, the compiler's choice, it became eight
  // loads that each split a cache line (records are not 64-byte aligned).
  asm("" : "+v"(v));
  acc[0] = _mm512_add_ps(acc[0], _mm512_permutexvar_ps(v, table));
  acc[1] = _mm512_add_ps(acc[1], _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), table));
  acc[2] = _mm512_add_ps(acc[2], _mm512_permutexvar_ps(_mm512_srli_epi32(v, 8), table));
  acc[3] = _mm512_add_ps(acc[3], _mm512_permutexvar_ps(_mm512_srli_epi32(v, 12), table));
  acc[4] = _mm512_add_ps(acc[4], _mm512_permutexvar_ps(_mm512_srli_epi32(v, 16), table));
  acc[5] = _mm512_add_ps(acc[5], _mm512_permutexvar_ps(_mm512_srli_epi32(v, 20), table));
  acc[6] = _mm512_add_ps(acc[6], _mm512_permutexvar_ps(_mm512_srli_epi32(v, 24), table));
  acc[7] = _mm512_add_ps(acc[7], _mm512_permutexvar_ps(_mm512_srli_epi32(v, 28), table));
}

// Lanes [0, 8) of a and b merged in blocks of s lanes (a's, then b's, then
// a's next ...) into lo, lanes [8, 16) into hi.
template <int s>
struct S4MergeIndices {
  constexpr S4MergeIndices() {
    for (int l = 0; l < 16; ++l) {
      lo[l] = (l / s) % 2 * 16 + l / (2 * s) * s + l % s;
      hi[l] = lo[l] + 8;
    }
  }
  alignas(64) int32_t lo[16] = {};
  alignas(64) int32_t hi[16] = {};
};
template <int s>
HWY_INLINE void S4MergeBlocks(__m512 a, __m512 b, __m512& lo, __m512& hi) {
  static constexpr S4MergeIndices<s> kIdx;
  lo = _mm512_permutex2var_ps(a, _mm512_load_si512(kIdx.lo), b);
  hi = _mm512_permutex2var_ps(a, _mm512_load_si512(kIdx.hi), b);
}

// The block layout's acc[m] lane k (column 8k + m) back in column order, to o.
HWY_INLINE void S4StoreBlock(const __m512* HWY_RESTRICT acc, float* HWY_RESTRICT o) {
  __m512 pair[8], quad[8];
  // pair[2q + h]: columns 8k + 2q + {0, 1}, k in [8h, 8h + 8).
  for (int q = 0; q < 4; ++q) S4MergeBlocks<1>(acc[2 * q], acc[2 * q + 1], pair[2 * q], pair[2 * q + 1]);
  // quad[4r + 2h + i]: columns 8k + 4r + [0, 4), k in [8h + 4i, 8h + 4i + 4).
  for (int r = 0; r < 2; ++r) {
    for (int h = 0; h < 2; ++h) {
      S4MergeBlocks<2>(pair[4 * r + h], pair[4 * r + 2 + h], quad[4 * r + 2 * h], quad[4 * r + 2 * h + 1]);
    }
  }
  // Columns 8k + [0, 8) for k in [2v, 2v + 2): 16 in order.
  for (int t = 0; t < 4; ++t) {
    __m512 lo, hi;
    S4MergeBlocks<4>(quad[t], quad[4 + t], lo, hi);
    _mm512_storeu_ps(o + 32 * t, lo);
    _mm512_storeu_ps(o + 32 * t + 16, hi);
  }
}

// One bag of a 4-bit table whose rows' first 32 * kGroups columns stay in
// 2 * kGroups registers for the whole bag: each id costs its lookups and adds,
// with no load or store of the bag's row, which PoolBags' per-row
// accumulation in memory spends most of its time on. With kBlocks, the
// rows' whole 64-byte blocks are held as S4BlockAccumulate orders them, the
// other 32-column groups as AccumulateS4Lut16 does (even columns, then odd);
// the stores put them back in column order. Columns past them (dim % 32) are
// accumulated in memory. Each column still sees the contract's sequence of
// operations: same bits as PoolBags.
template <size_t kGroups, bool kBlocks, bool kLegacy, typename Id, class Rows>
HWY_INLINE void PoolBagS4Registers(const RequantGatherParams& p, const Id* HWY_RESTRICT ids, const BagParams& bag,
                                   size_t begin, size_t bag_end, float* HWY_RESTRICT o,
                                   const ActivationVec<LutTag>& lut_act, const LegacyVec<LutTag>& lut_legacy,
                                   Rows& rows, float* HWY_RESTRICT lut) {
  const hn::Full512<float> df;
  const hn::Full512<uint32_t> du32;
  const hn::Full512<int32_t> di32;
  const hn::Full128<uint8_t> d8;
  using V = hn::Vec<decltype(df)>;
  const size_t dim = p.dim;
  const size_t row_bytes = (dim + 1) / 2;
  constexpr size_t kCols = 32 * kGroups;
  constexpr size_t kBlockCount = kBlocks ? kGroups / 4 : 0;  // 64-byte blocks in the block layout
  constexpr size_t kFirstGroup = 4 * kBlockCount;
  const auto nibble = hn::Set(du32, 15);
  const bool weighted = bag.weights != nullptr;
  __m512 block_acc[8 * kBlockCount + 1];
  for (size_t k = 0; k < 8 * kBlockCount; ++k) block_acc[k] = _mm512_setzero_ps();
  V acc[2 * kGroups];
  for (size_t g = 2 * kFirstGroup; g < 2 * kGroups; ++g) acc[g] = hn::Zero(df);
  for (size_t j = kCols; j < dim; ++j) o[j] = +0.0f;
  int64_t count = 0;
  for (size_t i = begin; i < bag_end; ++i) {
    rows.Ahead(i);
    const int64_t id = ids[i];
    if (id == bag.padding_idx) continue;
    const size_t r = static_cast<size_t>(id);
    const uint8_t* HWY_RESTRICT row = rows.Row(i, r);
    const V table = FloatLut16<kLegacy>(rows.Scale(i, r), weighted, weighted ? bag.weights[i] : 1.0f,
                                        lut_act, lut_legacy);
    for (size_t k = 0; k < kBlockCount; ++k) S4BlockAccumulate(row + 64 * k, table.raw, block_acc + 8 * k);
    for (size_t g = kFirstGroup; g < kGroups; ++g) {
      const auto bytes = hn::PromoteTo(du32, hn::LoadU(d8, row + 16 * g));
      const auto even = hn::And(bytes, nibble);
      const auto odd = hn::ShiftRight<4>(bytes);
      acc[2 * g] = hn::Add(acc[2 * g], hn::TableLookupLanes(table, hn::IndicesFromVec(df, hn::BitCast(di32, even))));
      acc[2 * g + 1] =
          hn::Add(acc[2 * g + 1], hn::TableLookupLanes(table, hn::IndicesFromVec(df, hn::BitCast(di32, odd))));
    }
    if (kCols < dim) {
      hn::Store(table, df, lut);
      for (size_t j = kCols; j < dim; ++j) {
        const uint8_t byte = row[j / 2];
        o[j] = o[j] + lut[(j & 1) ? (byte >> 4) : (byte & 0x0F)];
      }
    }
    ++count;
  }
  if (bag.mean && count > 0) {
    const float c = static_cast<float>(count);
    const auto vc = hn::Set(df, c);
    for (size_t k = 0; k < 8 * kBlockCount; ++k) block_acc[k] = _mm512_div_ps(block_acc[k], vc.raw);
    for (size_t g = 2 * kFirstGroup; g < 2 * kGroups; ++g) acc[g] = hn::Div(acc[g], vc);
    for (size_t j = kCols; j < dim; ++j) o[j] = o[j] / c;
  }
  for (size_t k = 0; k < kBlockCount; ++k) S4StoreBlock(block_acc + 8 * k, o + 128 * k);
  const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  for (size_t g = kFirstGroup; g < kGroups; ++g) {
    const __m512 even = acc[2 * g].raw, odd = acc[2 * g + 1].raw;
    _mm512_storeu_ps(o + 32 * g, _mm512_permutex2var_ps(even, first, odd));
    _mm512_storeu_ps(o + 32 * g + 16, _mm512_permutex2var_ps(even, second, odd));
  }
}

template <size_t kGroups, bool kLegacy, template <typename> class Rows, typename Id>
HWY_NOINLINE void PoolBagsS4Registers(const RequantGatherParams& p, const Id* HWY_RESTRICT ids,
                                      const BagParams& bag, float* HWY_RESTRICT out,
                                      const ActivationVec<LutTag>& lut_act,
                                      const LegacyVec<LutTag>& lut_legacy) {
  Rows<Id> rows(p, (p.dim + 1) / 2, ids, bag);
  alignas(64) float lut[16];
  for (size_t b = 0; b < bag.bags; ++b) {
    float* HWY_RESTRICT o = out + b * bag.out_stride;
    const size_t begin = static_cast<size_t>(bag.offsets[b]);
    const size_t bag_end = static_cast<size_t>(bag.offsets[b + 1]);
    if (kGroups >= 4 && bag_end - begin >= kS4BlockMinIds) {
      PoolBagS4Registers<kGroups, true, kLegacy>(p, ids, bag, begin, bag_end, o, lut_act, lut_legacy, rows, lut);
    } else {
      PoolBagS4Registers<kGroups, false, kLegacy>(p, ids, bag, begin, bag_end, o, lut_act, lut_legacy, rows, lut);
    }
  }
}

// The register kernel for dims of 32 to 287 columns; false for others.
template <bool kLegacy, typename Id>
HWY_INLINE bool PoolBagsS4InRegisters(const RequantGatherParams& p, const Id* ids, const BagParams& bag,
                                      float* out, const ActivationVec<LutTag>& lut_act,
                                      const LegacyVec<LutTag>& lut_legacy) {
  switch (p.dim / 32) {
#define QEMB_S4_GROUPS(g)                                                                     \
  case g:                                                                                     \
    if (StageRows(p, bag, (p.dim + 1) / 2)) {                                                 \
      PoolBagsS4Registers<g, kLegacy, StagedRows>(p, ids, bag, out, lut_act, lut_legacy);     \
    } else {                                                                                  \
      PoolBagsS4Registers<g, kLegacy, DirectRows>(p, ids, bag, out, lut_act, lut_legacy);     \
    }                                                                                         \
    return true;
    QEMB_S4_GROUPS(1)
    QEMB_S4_GROUPS(2)
    QEMB_S4_GROUPS(3)
    QEMB_S4_GROUPS(4)
    QEMB_S4_GROUPS(5)
    QEMB_S4_GROUPS(6)
    QEMB_S4_GROUPS(7)
    QEMB_S4_GROUPS(8)
#undef QEMB_S4_GROUPS
    default:
      return false;
  }
}
#else
#define QEMB_BAG_FLOAT_LUT 0
#endif

#if QEMB_NIBBLE_SHUFFLES && !QEMB_BAG_FLOAT_LUT
// Columns [j, ...) in whole vectors of D8 through the uint16 byte-shuffle
// lookup of the gathers, then dequantized; returns the next column.
template <class D8>
HWY_INLINE size_t AccumulateS4Shuffles(D8 d8, const uint8_t* HWY_RESTRICT row, size_t j,
                                       size_t dim, const NibbleLut& lut,
                                       const uint32_t* transpose,
                                       const DequantVec<hn::RepartitionToWide<D8>>& dq,
                                       bool weighted, float w, float* HWY_RESTRICT o) {
  using D16 = hn::RepartitionToWide<D8>;
  using DF = typename DequantVec<D16>::DF;
  const DF df;
  const typename DequantVec<D16>::DI di;
  const hn::Half<D16> dh16;
  const hn::Repartition<uint32_t, D8> d32;
  const size_t N = hn::Lanes(d8);
  const size_t NF = hn::Lanes(df);
  const bool permute = N > 16;
  const auto wv = hn::Set(df, w);
  const auto transpose_idx = hn::SetTableIndices(d32, transpose);
  const auto tab_lo = hn::LoadDup128(d8, lut.lo);
  const auto tab_hi = hn::LoadDup128(d8, lut.hi);
  for (; j + 2 * N <= dim; j += 2 * N) {
    auto packed = hn::LoadU(d8, row + j / 2);
    if (permute) {
      packed = hn::BitCast(d8, hn::TableLookupLanes(hn::BitCast(d32, packed), transpose_idx));
    }
    LookupNibbles(d8, packed, tab_lo, tab_hi, [&](size_t part, hn::Vec<D16> v) {
      float* op = o + j + part * (N / 2);
      const auto q_lo = hn::Sub(hn::PromoteTo(di, hn::LowerHalf(dh16, v)), dq.zero_point());
      const auto q_hi = hn::Sub(hn::PromoteTo(di, hn::UpperHalf(dh16, v)), dq.zero_point());
      AccumulateY(df, hn::Mul(dq.scale(), hn::ConvertTo(df, q_lo)), weighted, wv, op);
      AccumulateY(df, hn::Mul(dq.scale(), hn::ConvertTo(df, q_hi)), weighted, wv, op + NF);
    });
  }
  return j;
}
#endif

template <typename Id, bool kLegacy>
HWY_INLINE void RequantBagS4(const RequantGatherParams& p, const Id* ids, const BagParams& bag,
                             float* out) {
  const LutTag dlut;
  const ActivationVec<LutTag> lut_act(dlut, p.act);
  const LegacyVec<LutTag> lut_legacy(dlut, p.max_scale, 7);
  const size_t dim = p.dim;
  const size_t row_bytes = (dim + 1) / 2;
#if QEMB_BAG_FLOAT_LUT
  if (PoolBagsS4InRegisters<kLegacy>(p, ids, bag, out, lut_act, lut_legacy)) return;
#endif
#if QEMB_NIBBLE_SHUFFLES && !QEMB_BAG_FLOAT_LUT
  using D8 = hn::ScalableTag<uint8_t>;
  using D8x16 = hn::Full128<uint8_t>;
  const D8 d8;
  const D8x16 d8x16;
  const size_t N = hn::Lanes(d8);
  const size_t blocks = N / 16;
  alignas(64) uint32_t transpose[hn::MaxLanes(hn::Repartition<uint32_t, D8>())];
  for (size_t b = 0; b < blocks; ++b) {
    for (size_t part = 0; part < 4; ++part) {
      transpose[4 * b + part] = static_cast<uint32_t>(part * blocks + b);
    }
  }
  alignas(16) static constexpr uint32_t kIdentity[4] = {0, 1, 2, 3};
  const DequantVec<hn::RepartitionToWide<D8>> dequant(p.act);
  const DequantVec<hn::RepartitionToWide<D8x16>> dequant_x16(p.act);
  NibbleLut nibble_lut;
#endif
  alignas(64) float lut[16];
  PoolBags(
      dim, ids, bag, out,
      RecordLines(p, row_bytes),
      [&](size_t r, bool weighted, float w, float* HWY_RESTRICT o) {
        const float row_scale = RowScale(p, r);
        const uint8_t* row = RowWeights(p, r, row_bytes);
        // The float table: the whole lookup on 16-lane targets, the odd
        // columns' on the others.
        BuildFloatLut<kLegacy>(row_scale, weighted, w, lut_act, lut_legacy, lut);
        size_t j = 0;
#if QEMB_BAG_FLOAT_LUT
        j = AccumulateS4Lut16(row, dim, lut, o);
#elif QEMB_NIBBLE_SHUFFLES
        if (dim >= 2 * 16) {
          BuildNibbleLut<kLegacy>(row_scale, lut_act, lut_legacy, nibble_lut);
          j = AccumulateS4Shuffles(d8, row, j, dim, nibble_lut, transpose, dequant, weighted, w, o);
          if (N > 16) {
            j = AccumulateS4Shuffles(d8x16, row, j, dim, nibble_lut, kIdentity, dequant_x16,
                                     weighted, w, o);
          }
        }
#endif
        // lut[k] already holds w * y_k: the same product, rounded once.
        for (; j < dim; ++j) {
          const uint8_t byte = row[j / 2];
          o[j] = o[j] + lut[(j & 1) ? (byte >> 4) : (byte & 0x0F)];
        }
      },
      [&](float* HWY_RESTRICT o) {
#if QEMB_BAG_FLOAT_LUT
        UnpermuteS4Lut16(dim, o);
#else
        (void)o;
#endif
      });
}

#define QEMB_DEFINE_BAG_KERNELS(name, call, legacy)                                        \
  void name##_i32(const RequantGatherParams& p, const int32_t* ids, const BagParams& bag, \
                  float* out) {                                                           \
    call<int32_t, legacy>(p, ids, bag, out);                                              \
  }                                                                                       \
  void name##_i64(const RequantGatherParams& p, const int64_t* ids, const BagParams& bag, \
                  float* out) {                                                           \
    call<int64_t, legacy>(p, ids, bag, out);                                              \
  }
QEMB_DEFINE_BAG_KERNELS(bag_u16, BagU16, false)
QEMB_DEFINE_BAG_KERNELS(requant_bag_s4, RequantBagS4, false)
QEMB_DEFINE_BAG_KERNELS(requant_bag_s8, RequantBagS8, false)
QEMB_DEFINE_BAG_KERNELS(legacy_bag_s4, RequantBagS4, true)
QEMB_DEFINE_BAG_KERNELS(legacy_bag_s8, RequantBagS8, true)
#undef QEMB_DEFINE_BAG_KERNELS
