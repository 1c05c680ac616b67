/* The C API, compiled as C99: lookups equal the CLI's `qemb run` output bit
 * for bit, pooled lookups (EmbeddingBag) equal the contract's float32 sum of
 * the looked-up rows in index order, errors come back as codes with the
 * library's message in the caller's buffer, nothing is written on error, and
 * threads sharing one runtime each get their own result and message.
 *
 *   c_api_test ART EXPECTED_U16.npy VOCAB ID...
 * EXPECTED_U16.npy is `qemb run ART --tokens ID,... -o` (uint16 [N, D]).
 *   c_api_test --tables MULTI.qemb NAME=SINGLE.qemb...
 * pools the named tables of the multi-table artifact in one call and checks
 * each table's columns against the same bags pooled from the artifact of
 * that table alone. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qemb/qemb.h"
#include "qemb/version.h"

static int failures = 0;
#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                          \
    }                                                                      \
  } while (0)
#define CHECK_STR(a, b)                                                                       \
  do {                                                                                        \
    if (strcmp((a), (b)) != 0) {                                                              \
      fprintf(stderr, "%s:%d: expected \"%s\"\n  got      \"%s\"\n", __FILE__, __LINE__, (b), (a)); \
      ++failures;                                                                             \
    }                                                                                         \
  } while (0)

/* The data of a little-endian uint16 .npy written by qemb (header ends at the first '\n'). */
static uint16_t* read_npy_u16(const char* path, size_t* count) {
  FILE* f = fopen(path, "rb");
  long size;
  char* bytes;
  char* nl;
  size_t header;
  uint16_t* values;
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  size = ftell(f);
  fseek(f, 0, SEEK_SET);
  bytes = malloc((size_t)size);
  if (fread(bytes, 1, (size_t)size, f) != (size_t)size) {
    fclose(f);
    free(bytes);
    return NULL;
  }
  fclose(f);
  nl = memchr(bytes, '\n', (size_t)size);
  header = (size_t)(nl - bytes) + 1;
  *count = ((size_t)size - header) / 2;
  values = malloc(*count * 2);
  memcpy(values, bytes + header, *count * 2);
  free(bytes);
  return values;
}

typedef struct {
  const qemb_runtime* rt;
  const int64_t* ids;
  size_t n;
  const uint16_t* expected;
  int bad; /* look up an out-of-range id instead */
  int ok;
  char err[256];
} worker;

static void* work(void* arg) {
  worker* w = arg;
  const size_t dim = (size_t)qemb_runtime_dim(w->rt);
  uint16_t* out = malloc(w->n * dim * sizeof(uint16_t));
  int round;
  w->ok = 1;
  for (round = 0; round < 200; ++round) {
    if (w->bad) {
      int64_t ids[2];
      ids[0] = 0;
      ids[1] = qemb_runtime_vocab_size(w->rt) + round;
      if (qemb_lookup_i64_u16(w->rt, ids, 2, out, w->err, sizeof w->err) != QEMB_OUT_OF_RANGE) w->ok = 0;
    } else {
      if (qemb_lookup_i64_u16(w->rt, w->ids, w->n, out, w->err, sizeof w->err) != QEMB_OK) w->ok = 0;
      if (memcmp(out, w->expected, w->n * dim * sizeof(uint16_t)) != 0) w->ok = 0;
    }
  }
  free(out);
  return NULL;
}


/* The contract's pooling of rows[ids] (dequantized lookups, dim floats each)
 * for bags [offsets[b], offsets[b+1]): float32, in index order, product
 * rounded before the sum (this file is compiled with -ffp-contract=off). */
static void pool_reference(const float* rows, size_t dim, const int64_t* ids, const int64_t* offsets, size_t bags,
                           const float* weights, int mean, int has_pad, int64_t pad, float* out, size_t stride) {
  size_t b, j;
  int64_t i;
  for (b = 0; b < bags; ++b) {
    for (j = 0; j < dim; ++j) {
      float acc = 0.0f;
      int count = 0;
      for (i = offsets[b]; i < offsets[b + 1]; ++i) {
        if (has_pad && ids[i] == pad) continue;
        if (weights) {
          const float product = weights[i] * rows[(size_t)i * dim + j];
          acc = acc + product;
        } else {
          acc = acc + rows[(size_t)i * dim + j];
        }
        ++count;
      }
      out[b * stride + j] = mean ? (count > 0 ? acc / (float)count : 0.0f) : acc;
    }
  }
}

static uint16_t bf16_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* float -> IEEE binary16, nearest even, for finite values below 65504. */
static uint16_t f16_of(float f) {
  uint32_t u;
  float a;
  uint16_t sign;
  memcpy(&u, &f, sizeof u);
  sign = (uint16_t)((u >> 16) & 0x8000u);
  u &= 0x7FFFFFFFu;
  memcpy(&a, &u, sizeof a);
  if (a < 6.103515625e-05f) { /* a subnormal half: a * 2^24 rounded to an integer */
    const float q = (a * 16777216.0f + 8388608.0f) - 8388608.0f;
    return (uint16_t)(sign | (uint16_t)q);
  }
  u = u + 0xFFFu + ((u >> 13) & 1u);
  return (uint16_t)(sign | (uint16_t)((u >> 13) - (112u << 10)));
}

static int all_bytes(const void* p, size_t n, unsigned char v) {
  const unsigned char* c = p;
  size_t i;
  for (i = 0; i < n; ++i)
    if (c[i] != v) return 0;
  return 1;
}

/* Pooled lookups against pool_reference, and their errors. */
static void check_bags(const qemb_runtime* rt, const int64_t* ids64, const int32_t* ids32, size_t n, int64_t vocab) {
  const size_t dim = (size_t)qemb_runtime_dim(rt);
  /* 4 bags over the n >= 8 ids: [0,3), an empty one, [3,7), [7,n). */
  const int64_t offsets[5] = {0, 3, 3, 7, (int64_t)n};
  const int32_t offsets32[4] = {0, 3, 3, 7};
  const int64_t lengths[4] = {3, 0, 4, (int64_t)n - 7};
  float* rows = malloc(n * dim * sizeof *rows);
  float* want = malloc(4 * 2 * dim * sizeof *want);
  float* got = malloc(4 * 2 * dim * sizeof *got);
  uint16_t* half = malloc(4 * dim * sizeof *half);
  float* weights = malloc(n * sizeof *weights);
  qemb_bags bags[2];
  char err[256], want_err[256];
  size_t i, count = 99;
  const size_t size = 4 * dim * sizeof(float);

  CHECK(qemb_lookup_i64_f32(rt, ids64, n, rows, err, sizeof err) == QEMB_OK);
  for (i = 0; i < n; ++i) weights[i] = i == 1 ? 0.0f : (i % 3 == 0 ? -0.75f : 1.5f + (float)i);
  CHECK(strstr(qemb_runtime_bag_kernel(rt), "bag") != NULL || strcmp(qemb_runtime_bag_kernel(rt), "reference_interpreter") == 0);

  bags[0] = qemb_bags_default();
  CHECK(bags[0].indices_type == QEMB_INT64 && bags[0].format == QEMB_BAG_OFFSETS_INCLUDE_LAST &&
        bags[0].mode == QEMB_POOL_SUM && bags[0].per_sample_weights == NULL && bags[0].has_padding_idx == 0);
  bags[0].runtime = rt;
  bags[0].indices = ids64;
  bags[0].num_indices = n;
  bags[0].boundaries = offsets;
  bags[0].num_boundaries = 5;
  CHECK(qemb_bag_count(&bags[0], &count, err, sizeof err) == QEMB_OK && count == 4);

  /* sum, int64 everything */
  pool_reference(rows, dim, ids64, offsets, 4, NULL, 0, 0, 0, want, dim);
  CHECK(qemb_embedding_bags(bags, 1, got, 4 * dim, err, sizeof err) == QEMB_OK);
  CHECK_STR(err, "");
  CHECK(memcmp(got, want, size) == 0);
  CHECK(all_bytes(got + dim, dim * sizeof(float), 0)); /* the empty bag: +0.0f */
  /* int32 ids, B offsets (the last implied) */
  bags[0].indices = ids32;
  bags[0].indices_type = QEMB_INT32;
  bags[0].boundaries = offsets32;
  bags[0].boundaries_type = QEMB_INT32;
  bags[0].num_boundaries = 4;
  bags[0].format = QEMB_BAG_OFFSETS;
  memset(got, 0, size);
  CHECK(qemb_embedding_bags(bags, 1, got, 4 * dim, err, sizeof err) == QEMB_OK);
  CHECK(memcmp(got, want, size) == 0);
  /* lengths, weighted (0 and negative weights included) */
  bags[0].boundaries = lengths;
  bags[0].boundaries_type = QEMB_INT64;
  bags[0].format = QEMB_BAG_LENGTHS;
  bags[0].per_sample_weights = weights;
  pool_reference(rows, dim, ids64, offsets, 4, weights, 0, 0, 0, want, dim);
  CHECK(qemb_embedding_bags(bags, 1, got, 4 * dim, err, sizeof err) == QEMB_OK);
  CHECK(memcmp(got, want, size) == 0);
  /* mean with a padding id (given from the end): ids equal to it neither add nor count */
  bags[0].per_sample_weights = NULL;
  bags[0].mode = QEMB_POOL_MEAN;
  bags[0].has_padding_idx = 1;
  bags[0].padding_idx = ids64[4] - vocab;
  pool_reference(rows, dim, ids64, offsets, 4, NULL, 1, 1, ids64[4], want, dim);
  CHECK(qemb_embedding_bags(bags, 1, got, 4 * dim, err, sizeof err) == QEMB_OK);
  CHECK(memcmp(got, want, size) == 0);

  /* Two tables in one call: [B, 2 * dim], the second table's columns after the first's. */
  bags[1] = bags[0];
  bags[1].mode = QEMB_POOL_SUM;
  bags[1].has_padding_idx = 0;
  bags[1].per_sample_weights = weights;
  pool_reference(rows, dim, ids64, offsets, 4, NULL, 1, 1, ids64[4], want, 2 * dim);
  pool_reference(rows, dim, ids64, offsets, 4, weights, 0, 0, 0, want + dim, 2 * dim);
  CHECK(qemb_embedding_bags(bags, 2, got, 8 * dim, err, sizeof err) == QEMB_OK);
  CHECK(memcmp(got, want, 2 * size) == 0);

  /* Half outputs round the float32 result once. */
  bags[0] = bags[1];
  CHECK(qemb_embedding_bags_bf16(bags, 1, half, 4 * dim, err, sizeof err) == QEMB_OK);
  pool_reference(rows, dim, ids64, offsets, 4, weights, 0, 0, 0, want, dim);
  for (i = 0; i < 4 * dim; ++i) CHECK(half[i] == bf16_of(want[i]));
  CHECK(qemb_embedding_bags_f16(bags, 1, half, 4 * dim, err, sizeof err) == QEMB_OK);
  for (i = 0; i < 4 * dim; ++i) CHECK(half[i] == f16_of(want[i]));

  /* Bad input: the status, the library's message, nothing written. */
#define EXPECT_BAG_ERROR(call, status, message)              \
  do {                                                       \
    memset(got, 0xAB, size);                                 \
    CHECK((call) == (status));                               \
    CHECK_STR(err, (message));                               \
    CHECK(all_bytes(got, size, 0xAB));                       \
  } while (0)
  bags[0] = qemb_bags_default();
  bags[0].runtime = rt;
  bags[0].indices = ids64;
  bags[0].num_indices = n;
  bags[0].boundaries = offsets;
  bags[0].num_boundaries = 5;
  bags[0].name = "user";
  {
    int64_t bad[5];
    int64_t bad_ids[8];
    memcpy(bad, offsets, sizeof bad);
    bad[0] = 1;
    bags[0].boundaries = bad;
    EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 1, got, 4 * dim, err, sizeof err), QEMB_INVALID_ARGUMENT,
                     "table 0 ('user'): offsets[0] = 1; the first offset must be 0");
    bad[0] = 0;
    bad[2] = 2;
    EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 1, got, 4 * dim, err, sizeof err), QEMB_INVALID_ARGUMENT,
                     "table 0 ('user'): offsets[2] = 2 is less than offsets[1] = 3; offsets must not decrease");
    bad[2] = 3;
    bad[4] = (int64_t)n + 1;
    snprintf(want_err, sizeof want_err, "table 0 ('user'): offsets[4] = %zu is past the end of the %zu indices", n + 1, n);
    EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 1, got, 4 * dim, err, sizeof err), QEMB_INVALID_ARGUMENT, want_err);
    bad[4] = (int64_t)n - 1;
    snprintf(want_err, sizeof want_err,
             "table 0 ('user'): the last offset, offsets[4] = %zu, must equal the number of indices (%zu)", n - 1, n);
    EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 1, got, 4 * dim, err, sizeof err), QEMB_INVALID_ARGUMENT, want_err);
    bags[0].boundaries = lengths;
    bags[0].num_boundaries = 4;
    bags[0].format = QEMB_BAG_LENGTHS;
    bags[0].num_indices = n - 1;
    snprintf(want_err, sizeof want_err,
             "table 0 ('user'): lengths[3] = %zu runs past the end of the %zu indices (bag 3 starts at 7)", n - 7, n - 1);
    EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 1, got, 4 * dim, err, sizeof err), QEMB_INVALID_ARGUMENT, want_err);
    bags[0].num_indices = n;
    bags[0].mode = QEMB_POOL_MEAN;
    bags[0].per_sample_weights = weights;
    EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 1, got, 4 * dim, err, sizeof err), QEMB_INVALID_ARGUMENT,
                     "table 0 ('user'): per-sample weights need pool mode sum (as in PyTorch, mean takes none)");
    bags[0].mode = QEMB_POOL_SUM;
    bags[0].per_sample_weights = NULL;
    bags[0].has_padding_idx = 1;
    bags[0].padding_idx = vocab;
    snprintf(want_err, sizeof want_err, "table 0 ('user'): padding_idx %lld is outside [%lld, %lld)",
             (long long)vocab, (long long)-vocab, (long long)vocab);
    EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 1, got, 4 * dim, err, sizeof err), QEMB_INVALID_ARGUMENT, want_err);
    bags[0].has_padding_idx = 0;
    /* An id out of range: its table, bag, position and value. */
    memcpy(bad_ids, ids64, sizeof bad_ids);
    bad_ids[5] = vocab + 3;
    bags[0].indices = bad_ids;
    snprintf(want_err, sizeof want_err,
             "table 0 ('user'): id %lld at position 5 (bag 2) is past the last row; ids must be in [0, %lld)",
             (long long)(vocab + 3), (long long)vocab);
    EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 1, got, 4 * dim, err, sizeof err), QEMB_OUT_OF_RANGE, want_err);
    bags[1] = bags[0];
    bags[0].indices = ids64;
    bags[1].name = NULL;
    bad_ids[5] = -2;
    snprintf(want_err, sizeof want_err,
             "table 1: id -2 at position 5 (bag 2) is negative; ids must be in [0, %lld)", (long long)vocab);
    EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 2, got, 8 * dim, err, sizeof err), QEMB_OUT_OF_RANGE, want_err);
    /* Tables of different batch sizes. */
    bags[1].indices = ids64;
    bags[1].boundaries = offsets;
    bags[1].num_boundaries = 3;
    bags[1].format = QEMB_BAG_OFFSETS;
    EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 2, got, 8 * dim, err, sizeof err), QEMB_INVALID_ARGUMENT,
                     "table 1 has 3 bags but table 0 ('user') has 4; every table of a call needs the same number of bags");
  }
  /* What only the C API checks: the output's size, NULLs, enum values. */
  snprintf(want_err, sizeof want_err, "out holds %zu values; this call writes 4 bags x %zu columns = %zu",
           4 * dim - 1, dim, 4 * dim);
  EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 1, got, 4 * dim - 1, err, sizeof err), QEMB_INVALID_ARGUMENT, want_err);
  EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 1, NULL, 4 * dim, err, sizeof err), QEMB_INVALID_ARGUMENT, "out is NULL");
  EXPECT_BAG_ERROR(qemb_embedding_bags(NULL, 1, got, 4 * dim, err, sizeof err), QEMB_INVALID_ARGUMENT, "tables is NULL");
  EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 0, got, 4 * dim, err, sizeof err), QEMB_INVALID_ARGUMENT,
                   "no tables to pool");
  bags[1] = bags[0];
  bags[1].runtime = NULL;
  EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 2, got, 8 * dim, err, sizeof err), QEMB_INVALID_ARGUMENT,
                   "tables[1].runtime is NULL");
  bags[1] = bags[0];
  bags[1].indices = NULL;
  EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 2, got, 8 * dim, err, sizeof err), QEMB_INVALID_ARGUMENT,
                   "tables[1].indices is NULL");
  bags[1] = bags[0];
  bags[1].boundaries = NULL;
  EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 2, got, 8 * dim, err, sizeof err), QEMB_INVALID_ARGUMENT,
                   "tables[1].boundaries is NULL");
  bags[1] = bags[0];
  bags[1].indices_type = (qemb_int_type)16;
  EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 2, got, 8 * dim, err, sizeof err), QEMB_INVALID_ARGUMENT,
                   "tables[1].indices_type is 16: expected QEMB_INT32 or QEMB_INT64");
  bags[1] = bags[0];
  bags[1].boundaries_type = (qemb_int_type)-1;
  EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 2, got, 8 * dim, err, sizeof err), QEMB_INVALID_ARGUMENT,
                   "tables[1].boundaries_type is -1: expected QEMB_INT32 or QEMB_INT64");
  bags[1] = bags[0];
  bags[1].format = (qemb_bag_format)3;
  EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 2, got, 8 * dim, err, sizeof err), QEMB_INVALID_ARGUMENT,
                   "tables[1].format is 3: expected QEMB_BAG_OFFSETS_INCLUDE_LAST, QEMB_BAG_OFFSETS or QEMB_BAG_LENGTHS");
  bags[1] = bags[0];
  bags[1].mode = (qemb_pool_mode)2;
  EXPECT_BAG_ERROR(qemb_embedding_bags(bags, 2, got, 8 * dim, err, sizeof err), QEMB_INVALID_ARGUMENT,
                   "tables[1].mode is 2: expected QEMB_POOL_SUM or QEMB_POOL_MEAN");
  memset(half, 0xAB, 4 * dim * sizeof *half);
  CHECK(qemb_embedding_bags_bf16(bags, 1, half, 4 * dim - 2, err, sizeof err) == QEMB_INVALID_ARGUMENT);
  snprintf(want_err, sizeof want_err, "out holds %zu values; this call writes 4 bags x %zu columns = %zu",
           4 * dim - 2, dim, 4 * dim);
  CHECK_STR(err, want_err);
  CHECK(all_bytes(half, 4 * dim * sizeof *half, 0xAB));
  bags[0].num_boundaries = 0;
  bags[0].format = QEMB_BAG_OFFSETS_INCLUDE_LAST;
  CHECK(qemb_bag_count(&bags[0], &count, err, sizeof err) == QEMB_INVALID_ARGUMENT && count == 0);
  CHECK_STR(err, "offsets that include the last one need B + 1 values, starting with 0; got none");
  CHECK(qemb_bag_count(NULL, &count, err, sizeof err) == QEMB_INVALID_ARGUMENT);
  CHECK_STR(err, "bags is NULL");
  /* No bags: nothing to write, and out may be NULL. */
  bags[0].num_indices = 0;
  bags[0].format = QEMB_BAG_LENGTHS;
  CHECK(qemb_embedding_bags(bags, 1, NULL, 0, err, sizeof err) == QEMB_OK);
  /* An output sharing memory with the ids (or offsets, or weights) is refused
   * and nothing is written: rows would overwrite ids not yet read (this
   * crashed). The ids are copied into the start of `got`. */
  bags[0] = qemb_bags_default();
  bags[0].runtime = rt;
  bags[0].num_indices = n;
  bags[0].boundaries = offsets;
  bags[0].num_boundaries = 5;
  {
    int64_t* in_out = malloc((n + 4) * dim * sizeof(float) + n * sizeof(int64_t));
    int64_t* in_out_ids = in_out;
    float* out_over_ids = (float*)in_out;
    memcpy(in_out_ids, ids64, n * sizeof *ids64);
    bags[0].indices = in_out_ids;
    CHECK(qemb_embedding_bags(bags, 1, out_over_ids, 4 * dim, err, sizeof err) == QEMB_INVALID_ARGUMENT);
    CHECK_STR(err, "table 0: the output buffer overlaps the indices: rows written there would overwrite inputs not "
                   "yet read; pass an output that shares no memory with the inputs");
    CHECK(memcmp(in_out_ids, ids64, n * sizeof *ids64) == 0);
    bags[0].indices = ids64;
    for (i = 0; i < n; ++i) ((float*)in_out)[i] = 1.0f;
    bags[0].per_sample_weights = (const float*)in_out;
    CHECK(qemb_embedding_bags(bags, 1, (float*)in_out, 4 * dim, err, sizeof err) == QEMB_INVALID_ARGUMENT);
    CHECK_STR(err, "table 0: the output buffer overlaps the per-sample weights: rows written there would overwrite "
                   "inputs not yet read; pass an output that shares no memory with the inputs");
    bags[0].per_sample_weights = NULL;
    /* A plain lookup into its own ids: qemb_lookup_i64_u16 with out == ids. */
    memcpy(in_out_ids, ids64, n * sizeof *ids64);
    CHECK(qemb_lookup_i64_u16(rt, in_out_ids, n, (uint16_t*)in_out, err, sizeof err) == QEMB_INVALID_ARGUMENT);
    CHECK_STR(err, "the output buffer overlaps the ids: rows written there would overwrite inputs not yet read; "
                   "pass an output that shares no memory with the inputs");
    CHECK(memcmp(in_out_ids, ids64, n * sizeof *ids64) == 0);
    CHECK(qemb_lookup_i64_f32(rt, in_out_ids + 1, n - 1, (float*)in_out, err, sizeof err) == QEMB_INVALID_ARGUMENT);
    CHECK(memcmp(in_out_ids, ids64, n * sizeof *ids64) == 0);
    free(in_out);
  }
#undef EXPECT_BAG_ERROR
  free(rows);
  free(want);
  free(got);
  free(half);
  free(weights);
}

/* Table-batched bags over the tables of one artifact: [B, sum D_t], table t's
 * columns at its offset, each equal to its single-table artifact's bags. */
static int check_tables(int argc, char** argv) {
  const char* multi_path = argv[2];
  const int t_count = argc - 3;
  qemb_runtime* multi = NULL;
  qemb_runtime* singles[8];
  qemb_bags bags[8];
  char err[256], want_err[512];
  const int64_t ids[7] = {0, 5, 63, 5, 1, 2, 63};
  const int64_t offsets[4] = {0, 3, 3, 7}; /* 3 bags, one empty */
  size_t width = 0, col, i;
  int t;
  float* got;
  float* one;
  if (t_count < 2 || t_count > 8) return 2;
  CHECK(qemb_runtime_open(multi_path, NULL, &multi, err, sizeof err) == QEMB_OK);
  if (multi == NULL) return 1;
  CHECK(qemb_runtime_table_count(multi) == (size_t)t_count);
  CHECK(qemb_runtime_table_name(multi, (size_t)t_count) == NULL);
  CHECK(qemb_runtime_table_dim(multi, (size_t)t_count) == 0);
  for (t = 0; t < t_count; ++t) {
    char* eq = strchr(argv[3 + t], '=');
    if (eq == NULL) return 2;
    *eq = '\0';
    CHECK(qemb_runtime_open(eq + 1, NULL, &singles[t], err, sizeof err) == QEMB_OK);
    CHECK_STR(qemb_runtime_table_name(multi, (size_t)t), argv[3 + t]);
    CHECK(qemb_runtime_table_dim(multi, (size_t)t) == qemb_runtime_dim(singles[t]));
    CHECK(qemb_runtime_table_vocab_size(multi, (size_t)t) == qemb_runtime_vocab_size(singles[t]));
    bags[t] = qemb_bags_default();
    bags[t].runtime = multi;
    bags[t].table = argv[3 + t];
    bags[t].indices = ids;
    bags[t].num_indices = 7;
    bags[t].boundaries = offsets;
    bags[t].num_boundaries = 4;
    bags[t].mode = t % 2 ? QEMB_POOL_MEAN : QEMB_POOL_SUM;
    width += (size_t)qemb_runtime_dim(singles[t]);
  }
  got = malloc(3 * width * sizeof *got);
  one = malloc(3 * width * sizeof *one);
  /* In reverse order: the columns follow the call's tables, not the artifact's. */
  {
    qemb_bags reversed[8];
    for (t = 0; t < t_count; ++t) reversed[t] = bags[t_count - 1 - t];
    CHECK(qemb_embedding_bags(reversed, (size_t)t_count, got, 3 * width, err, sizeof err) == QEMB_OK);
    CHECK_STR(err, "");
  }
  col = width;
  for (t = 0; t < t_count; ++t) {
    const size_t d = (size_t)qemb_runtime_dim(singles[t]);
    qemb_bags single = bags[t];
    size_t b;
    single.runtime = singles[t];
    single.table = NULL;
    col -= d; /* table t sits at the offset of the tables after it in the artifact */
    CHECK(qemb_embedding_bags(&single, 1, one, 3 * d, err, sizeof err) == QEMB_OK);
    for (b = 0; b < 3; ++b) CHECK(memcmp(got + b * width + col, one + b * d, d * sizeof(float)) == 0);
  }
  /* A table the artifact lacks: NOT_FOUND, naming its tables; an id out of one
   * table's range names that table. */
  bags[1].table = "no_such_table";
  CHECK(qemb_embedding_bags(bags, (size_t)t_count, got, 3 * width, err, sizeof err) == QEMB_NOT_FOUND);
  snprintf(want_err, sizeof want_err, "tables[1].table: the artifact has no table 'no_such_table'; its tables: %s",
           qemb_runtime_table_name(multi, 0));
  for (t = 1; t < t_count; ++t) {
    strcat(want_err, ", ");
    strcat(want_err, qemb_runtime_table_name(multi, (size_t)t));
  }
  CHECK_STR(err, want_err);
  bags[1].table = argv[4];
  {
    const int64_t bad_ids[7] = {0, 5, 64, 5, 1, 2, 63};
    int small = -1;
    for (t = 0; t < t_count; ++t) {
      bags[t].indices = bad_ids;
      if (small < 0 && qemb_runtime_table_vocab_size(multi, (size_t)t) <= 64) small = t;
    }
    CHECK(small > 0); /* the test needs a table of at most 64 rows after the first */
    if (small > 0) {
      memset(got, 0xAB, 3 * width * sizeof *got);
      CHECK(qemb_embedding_bags(bags, (size_t)t_count, got, 3 * width, err, sizeof err) == QEMB_OUT_OF_RANGE);
      snprintf(want_err, sizeof want_err,
               "table %d ('%s'): id 64 at position 2 (bag 0) is past the last row; ids must be in [0, %lld)", small,
               argv[3 + small], (long long)qemb_runtime_table_vocab_size(multi, (size_t)small));
      CHECK_STR(err, want_err);
      CHECK(all_bytes(got, 3 * width * sizeof *got, 0xAB));
    }
  }
  for (i = 0; i < (size_t)t_count; ++i) qemb_runtime_close(singles[i]);
  qemb_runtime_close(multi);
  free(got);
  free(one);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("c_api_test --tables: all checks passed (%d tables, %zu columns)\n", t_count, width);
  return 0;
}

/* The 8-bit and weight-only forms: c_api_test --forms ART_8A8W ART_W4.
 * uint8 lookups of an 8a8w table dequantize (s_a * (q + offset)) to exactly
 * its float lookups; each table refuses the forms it does not return, with
 * the message that names the call to make, and writes nothing. */
static int check_forms(char** argv) {
  char err[QEMB_ERROR_BUFFER_SIZE];
  qemb_runtime* a8 = NULL;
  qemb_runtime* w4 = NULL;
  const int64_t ids[] = {0, 511, 7, 7, 300};
  const size_t n = sizeof ids / sizeof *ids;
  size_t dim, i;
  uint8_t* q;
  uint16_t* q16;
  float* y;
  float scale;
  int32_t offset;
  CHECK(qemb_runtime_open(argv[2], NULL, &a8, err, sizeof err) == QEMB_OK);
  CHECK(qemb_runtime_open(argv[3], NULL, &w4, err, sizeof err) == QEMB_OK);
  if (a8 == NULL || w4 == NULL) return 1;
  CHECK(qemb_runtime_activation_bits(a8) == 8);
  CHECK(qemb_runtime_activation_bits(w4) == 0);
  dim = (size_t)qemb_runtime_dim(a8);
  q = malloc(n * dim);
  q16 = malloc(n * dim * sizeof *q16);
  y = malloc(n * dim * sizeof *y);
  CHECK(qemb_lookup_i64_u8(a8, ids, n, q, err, sizeof err) == QEMB_OK);
  CHECK(qemb_lookup_i64_f32(a8, ids, n, y, err, sizeof err) == QEMB_OK);
  scale = qemb_runtime_activation_scale(a8);
  offset = qemb_runtime_activation_offset(a8);
  for (i = 0; i < n * dim; ++i) CHECK(y[i] == scale * (float)((int32_t)q[i] + offset));
  memset(q16, 0xAB, n * dim * sizeof *q16);
  CHECK(qemb_lookup_i64_u16(a8, ids, n, q16, err, sizeof err) == QEMB_INVALID_ARGUMENT);
  CHECK_STR(err, "table 'embedding' returns uint8 activations (scheme 8a8w), not uint16: pass a uint8_t buffer to "
                 "lookup, or call lookup_dequantized");
  CHECK(all_bytes(q16, n * dim * sizeof *q16, 0xAB));
  memset(q, 0xAB, n * dim);
  CHECK(qemb_lookup_i64_u8(w4, ids, n, q, err, sizeof err) == QEMB_INVALID_ARGUMENT);
  CHECK_STR(err, "table 'embedding' is weight-only (scheme w4): its lookups return floats, not uint8 activations; "
                 "call lookup_dequantized");
  CHECK(all_bytes(q, n * dim, 0xAB));
  CHECK(qemb_lookup_table(w4, NULL, ids, QEMB_INT64, n, QEMB_OUT_F32, y, err, sizeof err) == QEMB_OK);
  CHECK(qemb_lookup_table(a8, NULL, ids, QEMB_INT64, n, QEMB_OUT_U8, q, err, sizeof err) == QEMB_OK);
  free(q);
  free(q16);
  free(y);
  qemb_runtime_close(a8);
  qemb_runtime_close(w4);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("c_api_test --forms: all checks passed\n");
  return 0;
}

int main(int argc, char** argv) {
  const char* art;
  size_t n, dim, count, i;
  int64_t vocab;
  int64_t* ids64;
  int32_t* ids32;
  uint16_t* expected;
  uint16_t* out16;
  float* outf;
  char err[QEMB_ERROR_BUFFER_SIZE];
  char small[8];
  qemb_runtime* rt = NULL;
  qemb_runtime_options options;
  qemb_status s;

  if (argc >= 2 && strcmp(argv[1], "--tables") == 0) return check_tables(argc, argv);
  if (argc == 4 && strcmp(argv[1], "--forms") == 0) return check_forms(argv);
  /* The header and the library agree; a program built against other
     structs is told so, with both sizes. */
  CHECK(strcmp(qemb_version(), QEMB_VERSION) == 0);
  CHECK(QEMB_CHECK_ABI(err, sizeof err) == QEMB_OK && err[0] == '\0');
  {
    char want[512];
    snprintf(want, sizeof want,
             "the program was built against qemb 0.0.9's qemb/qemb.h (qemb_bags %u bytes, qemb_runtime_options %u) "
             "but runs with the qemb %s library (%u and %u bytes); rebuild the program against the installed headers",
             (unsigned)(sizeof(qemb_bags) - 8), (unsigned)sizeof(qemb_runtime_options), QEMB_VERSION,
             (unsigned)sizeof(qemb_bags), (unsigned)sizeof(qemb_runtime_options));
    CHECK(qemb_abi_check(sizeof(qemb_bags) - 8, sizeof(qemb_runtime_options), "0.0.9", err, sizeof err) ==
          QEMB_VERSION_ERROR);
    CHECK(strcmp(err, want) == 0);
  }
  if (argc < 5) {
    fprintf(stderr, "usage: c_api_test ART EXPECTED_U16.npy VOCAB ID...\n");
    return 2;
  }
  art = argv[1];
  vocab = atoll(argv[3]);
  n = (size_t)(argc - 4);
  ids64 = malloc(n * sizeof *ids64);
  ids32 = malloc(n * sizeof *ids32);
  for (i = 0; i < n; ++i) {
    ids64[i] = atoll(argv[4 + i]);
    ids32[i] = (int32_t)ids64[i];
  }
  expected = read_npy_u16(argv[2], &count);
  if (expected == NULL) {
    fprintf(stderr, "cannot read %s\n", argv[2]);
    return 2;
  }
  dim = count / n;

  /* Errors on open: a missing file, a foreign one, bad options, NULLs. */
  CHECK(qemb_runtime_open("no-such-file.qemb", NULL, &rt, err, sizeof err) == QEMB_NOT_FOUND);
  CHECK(rt == NULL);
  CHECK(strstr(err, "no-such-file.qemb") != NULL);
  CHECK(qemb_runtime_open(argv[2], NULL, &rt, err, sizeof err) == QEMB_CORRUPT); /* an .npy is no artifact */
  CHECK(rt == NULL);
  CHECK(strlen(err) > 0);
  options = qemb_runtime_options_default();
  CHECK(options.threads == 1 && options.verify == QEMB_VERIFY_FULL && options.reference == 0);
  options.verify = (qemb_verify)7;
  CHECK(qemb_runtime_open(art, &options, &rt, err, sizeof err) == QEMB_INVALID_ARGUMENT);
  CHECK_STR(err, "unknown verify value 7: expected QEMB_VERIFY_FULL or QEMB_VERIFY_HEADER");
  options.verify = QEMB_VERIFY_FULL;
  options.threads = -1;
  CHECK(qemb_runtime_open(art, &options, &rt, err, sizeof err) == QEMB_INVALID_ARGUMENT);
  CHECK_STR(err, "threads is -1: expected 0 (one per core) or more");
  CHECK(qemb_runtime_open(NULL, NULL, &rt, err, sizeof err) == QEMB_INVALID_ARGUMENT);
  CHECK_STR(err, "path is NULL");
  CHECK(qemb_runtime_open(art, NULL, NULL, NULL, 0) == QEMB_INVALID_ARGUMENT);
  CHECK_STR(qemb_status_string(QEMB_OUT_OF_RANGE), "out of range");
  CHECK_STR(qemb_status_string(QEMB_CORRUPT), "corrupt");
  CHECK_STR(qemb_status_string((qemb_status)99), "unknown error");
  CHECK_STR(qemb_version(), QEMB_VERSION);

  /* Open and describe. */
  options = qemb_runtime_options_default();
  options.verify = QEMB_VERIFY_HEADER;
  s = qemb_runtime_open(art, &options, &rt, err, sizeof err);
  CHECK(s == QEMB_OK);
  if (s != QEMB_OK) {
    fprintf(stderr, "open failed: %s\n", err);
    return 1;
  }
  CHECK_STR(err, "");
  CHECK(qemb_runtime_vocab_size(rt) == vocab);
  CHECK((size_t)qemb_runtime_dim(rt) == dim);
  CHECK(qemb_runtime_activation_scale(rt) > 0.0f);
  CHECK(qemb_runtime_activation_offset(rt) <= 0);
  CHECK(strstr(qemb_runtime_kernel(rt), qemb_runtime_isa(rt)) != NULL);

  /* Lookups equal `qemb run` bit for bit, with int32 and int64 ids. */
  out16 = malloc(n * dim * sizeof *out16);
  outf = malloc(n * dim * sizeof *outf);
  CHECK(qemb_lookup_i64_u16(rt, ids64, n, out16, err, sizeof err) == QEMB_OK);
  CHECK(memcmp(out16, expected, n * dim * sizeof *out16) == 0);
  memset(out16, 0, n * dim * sizeof *out16);
  CHECK(qemb_lookup_i32_u16(rt, ids32, n, out16, err, sizeof err) == QEMB_OK);
  CHECK(memcmp(out16, expected, n * dim * sizeof *out16) == 0);
  /* Dequantized: y = scale * (q + offset), in float32. */
  CHECK(qemb_lookup_i32_f32(rt, ids32, n, outf, err, sizeof err) == QEMB_OK);
  for (i = 0; i < n * dim; ++i) {
    const float y = qemb_runtime_activation_scale(rt) * (float)((int32_t)expected[i] + qemb_runtime_activation_offset(rt));
    CHECK(memcmp(&outf[i], &y, sizeof y) == 0);
  }
  memset(outf, 0, n * dim * sizeof *outf);
  CHECK(qemb_lookup_i64_f32(rt, ids64, n, outf, err, sizeof err) == QEMB_OK);
  CHECK(outf[0] == qemb_runtime_activation_scale(rt) * (float)((int32_t)expected[0] + qemb_runtime_activation_offset(rt)));
  CHECK(qemb_lookup_i64_u16(rt, ids64, 0, NULL, err, sizeof err) == QEMB_OK); /* an empty batch */

  /* Half precision: bfloat16 is the float32 y rounded to nearest even (no NaN
   * here); binary16 equals the reference interpreter's, from both id types. */
  {
    uint16_t* half = malloc(n * dim * sizeof *half);
    uint16_t* half_ref = malloc(n * dim * sizeof *half_ref);
    qemb_runtime* ref = NULL;
    qemb_runtime_options ro = qemb_runtime_options_default();
    ro.reference = 1;
    CHECK(qemb_lookup_i64_f32(rt, ids64, n, outf, err, sizeof err) == QEMB_OK);
    CHECK(qemb_lookup_i32_bf16(rt, ids32, n, half, err, sizeof err) == QEMB_OK);
    for (i = 0; i < n * dim; ++i) {
      uint32_t bits;
      memcpy(&bits, &outf[i], sizeof bits);
      CHECK(half[i] == (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16));
    }
    CHECK(qemb_lookup_i64_bf16(rt, ids64, n, half_ref, err, sizeof err) == QEMB_OK);
    CHECK(memcmp(half, half_ref, n * dim * sizeof *half) == 0);
    CHECK(qemb_runtime_open(art, &ro, &ref, err, sizeof err) == QEMB_OK);
    CHECK(qemb_lookup_i64_f16(rt, ids64, n, half, err, sizeof err) == QEMB_OK);
    CHECK(qemb_lookup_i32_f16(ref, ids32, n, half_ref, err, sizeof err) == QEMB_OK);
    CHECK(memcmp(half, half_ref, n * dim * sizeof *half) == 0);
    CHECK(qemb_lookup_i64_f16(rt, ids64, n, NULL, err, sizeof err) == QEMB_INVALID_ARGUMENT);
    CHECK_STR(err, "out is NULL");
    qemb_runtime_close(ref);
    free(half);
    free(half_ref);
  }

  /* An out-of-range id fails the whole call, names position and value, writes nothing. */
  {
    int64_t bad[3];
    int32_t bad32[2];
    char want[160];
    bad[0] = 1;
    bad[1] = 2;
    bad[2] = vocab;
    memset(out16, 0xAB, n * dim * sizeof *out16);
    CHECK(qemb_lookup_i64_u16(rt, bad, 3, out16, err, sizeof err) == QEMB_OUT_OF_RANGE);
    snprintf(want, sizeof want, "token id %lld at position 2 is past the last row; ids must be in [0, %lld)",
             (long long)vocab, (long long)vocab);
    CHECK_STR(err, want);
    for (i = 0; i < 3 * dim; ++i) CHECK(out16[i] == 0xABAB);
    bad32[0] = -5;
    bad32[1] = 0;
    CHECK(qemb_lookup_i32_f32(rt, bad32, 2, outf, err, sizeof err) == QEMB_OUT_OF_RANGE);
    snprintf(want, sizeof want, "token id -5 at position 0 is negative; ids must be in [0, %lld)", (long long)vocab);
    CHECK_STR(err, want);
    /* A short buffer gets the message's start, NUL-terminated; NULL gets nothing. */
    CHECK(qemb_lookup_i64_u16(rt, bad, 3, out16, small, sizeof small) == QEMB_OUT_OF_RANGE);
    CHECK_STR(small, "token i");
    CHECK(qemb_lookup_i64_u16(rt, bad, 3, out16, NULL, 0) == QEMB_OUT_OF_RANGE);
  }
  CHECK(qemb_lookup_i64_u16(NULL, ids64, n, out16, err, sizeof err) == QEMB_INVALID_ARGUMENT);
  CHECK_STR(err, "the runtime is NULL");
  CHECK(qemb_lookup_i64_u16(rt, ids64, n, NULL, err, sizeof err) == QEMB_INVALID_ARGUMENT);
  CHECK_STR(err, "out is NULL");
  CHECK(qemb_lookup_i64_f32(rt, NULL, n, outf, err, sizeof err) == QEMB_INVALID_ARGUMENT);
  CHECK_STR(err, "ids is NULL");

  check_bags(rt, ids64, ids32, n, vocab);

  /* Eight threads share the runtime; one of them keeps failing, and its
   * errors neither disturb the others' rows nor leak into their messages. */
  {
    pthread_t threads[8];
    worker workers[8];
    int t;
    for (t = 0; t < 8; ++t) {
      workers[t].rt = rt;
      workers[t].ids = ids64;
      workers[t].n = n;
      workers[t].expected = expected;
      workers[t].bad = t == 3;
      workers[t].err[0] = '\0';
      pthread_create(&threads[t], NULL, work, &workers[t]);
    }
    for (t = 0; t < 8; ++t) pthread_join(threads[t], NULL);
    for (t = 0; t < 8; ++t) {
      CHECK(workers[t].ok);
      if (t == 3) {
        CHECK(strstr(workers[t].err, "at position 1 is past the last row") != NULL);
      } else {
        CHECK_STR(workers[t].err, "");
      }
    }
  }

  qemb_runtime_close(rt);
  qemb_runtime_close(NULL);
  free(out16);
  free(outf);
  free(expected);
  free(ids64);
  free(ids32);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("c_api_test: all checks passed (%zu ids, dim %zu)\n", n, dim);
  return 0;
}
