/* The C API, compiled as C99: lookups equal the CLI's `qemb run` output bit
 * for bit, errors come back as codes with the library's message in the
 * caller's buffer, nothing is written on error, and threads sharing one
 * runtime each get their own result and message.
 *
 *   c_api_test ART EXPECTED_U16.npy VOCAB ID...
 * EXPECTED_U16.npy is `qemb run ART --tokens ID,... -o` (uint16 [N, D]). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qemb/qemb.h"

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

int main(int argc, char** argv) {
  const char* art;
  size_t n, dim, count, i;
  int64_t vocab;
  int64_t* ids64;
  int32_t* ids32;
  uint16_t* expected;
  uint16_t* out16;
  float* outf;
  char err[256];
  char small[8];
  qemb_runtime* rt = NULL;
  qemb_runtime_options options;
  qemb_status s;

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
