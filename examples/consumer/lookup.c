/* Looks ids up in a .qemb artifact through the C API (runtime only) and
 * prints one row per line ("id: v0 v1 ...").
 *   lookup ART ID... */
#include <stdio.h>
#include <stdlib.h>

#include "qemb/qemb.h"

int main(int argc, char** argv) {
  char err[QEMB_ERROR_BUFFER_SIZE];
  qemb_runtime* rt;
  int64_t* ids;
  uint16_t* out;
  size_t n, i;
  int64_t dim, j;
  qemb_status s;
  if (argc < 3) {
    fprintf(stderr, "usage: lookup ART ID...\n");
    return 2;
  }
  /* A shared libqemb.so may be another version than the header. */
  s = QEMB_CHECK_ABI(err, sizeof err);
  if (s != QEMB_OK) {
    fprintf(stderr, "lookup: %s: %s\n", qemb_status_string(s), err);
    return 1;
  }
  s = qemb_runtime_open(argv[1], NULL, &rt, err, sizeof err);
  if (s != QEMB_OK) {
    fprintf(stderr, "lookup: %s: %s\n", qemb_status_string(s), err);
    return 1;
  }
  n = (size_t)(argc - 2);
  dim = qemb_runtime_dim(rt);
  ids = malloc(n * sizeof *ids);
  out = malloc(n * (size_t)dim * sizeof *out);
  for (i = 0; i < n; ++i) ids[i] = atoll(argv[2 + i]);
  s = qemb_lookup_i64_u16(rt, ids, n, out, err, sizeof err);
  if (s != QEMB_OK) {
    fprintf(stderr, "lookup: %s: %s\n", qemb_status_string(s), err);
    return 1;
  }
  for (i = 0; i < n; ++i) {
    printf("%lld:", (long long)ids[i]);
    for (j = 0; j < dim; ++j) printf(" %u", (unsigned)out[i * (size_t)dim + (size_t)j]);
    printf("\n");
  }
  free(ids);
  free(out);
  qemb_runtime_close(rt);
  return 0;
}
