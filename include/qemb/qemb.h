/* The C API of the qemb lookup runtime (C99), for foreign-function callers:
 * an ExecuTorch custom op, a JNI wrapper, a Rust or Go binding.
 *
 * Runtime only: open a .qemb artifact, query it, look ids up, close it. Every
 * fallible call returns a qemb_status and, when `err` is not NULL, writes the
 * library's message (NUL-terminated, truncated to err_size bytes) into the
 * caller's buffer. There is no global state: one runtime may be shared by any
 * number of threads, and each call reports its own error.
 *
 * Link: qemb::runtime (CMake) or `pkg-config --libs qemb`. */
#ifndef QEMB_QEMB_H_
#define QEMB_QEMB_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One value per error kind of the library, in the same order. */
typedef enum qemb_status {
  QEMB_OK = 0,
  QEMB_INVALID_ARGUMENT = 1, /* bad option or parameter value */
  QEMB_OUT_OF_RANGE = 2,     /* an id outside [0, vocab_size) */
  QEMB_NOT_FOUND = 3,        /* missing file */
  QEMB_PARSE_ERROR = 4,      /* malformed input */
  QEMB_UNSUPPORTED = 5,      /* e.g. an artifact of a newer format version */
  QEMB_IO_ERROR = 6,         /* open/read failed */
  QEMB_CORRUPT = 7,          /* checksum mismatch, truncated or foreign file */
  QEMB_VERSION_ERROR = 8,
  QEMB_VALIDATION_ERROR = 9,
  QEMB_INTERNAL = 10
} qemb_status;

/* "ok", "invalid argument", "out of range", ...; never NULL. */
const char* qemb_status_string(qemb_status status);

typedef enum qemb_verify {
  QEMB_VERIFY_FULL = 0,  /* hash every section on open */
  QEMB_VERIFY_HEADER = 1 /* skip hashing the data sections (very large files) */
} qemb_verify;

typedef struct qemb_runtime_options {
  int threads;     /* threads for large batches; 1 = the calling thread, 0 = one per core */
  qemb_verify verify;
  int reference;   /* non-zero: the scalar reference interpreter */
} qemb_runtime_options;

/* threads = 1, verify = QEMB_VERIFY_FULL, reference = 0. */
qemb_runtime_options qemb_runtime_options_default(void);

/* An opened artifact. Opaque; thread-safe for lookups. */
typedef struct qemb_runtime qemb_runtime;

/* Opens `path` (memory-mapped, checked). `options` may be NULL for the
 * defaults. On success *out holds a runtime to pass to qemb_runtime_close;
 * on failure *out is NULL. */
qemb_status qemb_runtime_open(const char* path, const qemb_runtime_options* options, qemb_runtime** out,
                              char* err, size_t err_size);
/* Releases the runtime; NULL is ignored. */
void qemb_runtime_close(qemb_runtime* runtime);

int64_t qemb_runtime_vocab_size(const qemb_runtime* runtime);
int64_t qemb_runtime_dim(const qemb_runtime* runtime);
/* The output encoding: real = scale * (q + offset), offset = -zero_point. */
float qemb_runtime_activation_scale(const qemb_runtime* runtime);
int32_t qemb_runtime_activation_offset(const qemb_runtime* runtime);
/* The kernel in use, e.g. "gather_u16[AVX2]"; owned by the runtime. */
const char* qemb_runtime_kernel(const qemb_runtime* runtime);
/* Its instruction set, e.g. "AVX2"; owned by the runtime. */
const char* qemb_runtime_isa(const qemb_runtime* runtime);

/* Looks up `count` ids into out[count * dim]: uint16 activations, or float32
 * dequantized values y = scale * (q + offset). Every id is checked first: an
 * id outside [0, vocab_size) fails with QEMB_OUT_OF_RANGE naming its
 * position and value, and nothing is written. */
qemb_status qemb_lookup_i32_u16(const qemb_runtime* runtime, const int32_t* ids, size_t count, uint16_t* out,
                                char* err, size_t err_size);
qemb_status qemb_lookup_i64_u16(const qemb_runtime* runtime, const int64_t* ids, size_t count, uint16_t* out,
                                char* err, size_t err_size);
qemb_status qemb_lookup_i32_f32(const qemb_runtime* runtime, const int32_t* ids, size_t count, float* out,
                                char* err, size_t err_size);
qemb_status qemb_lookup_i64_f32(const qemb_runtime* runtime, const int64_t* ids, size_t count, float* out,
                                char* err, size_t err_size);
/* Dequantized values in half precision, as uint16_t bit patterns: the float32
 * y above rounded to nearest even into IEEE binary16 (f16) or bfloat16
 * (bf16). NaN stays a quiet NaN; binary16 values past 65504 become infinity.
 * Same rules for ids and errors. */
qemb_status qemb_lookup_i32_f16(const qemb_runtime* runtime, const int32_t* ids, size_t count, uint16_t* out,
                                char* err, size_t err_size);
qemb_status qemb_lookup_i64_f16(const qemb_runtime* runtime, const int64_t* ids, size_t count, uint16_t* out,
                                char* err, size_t err_size);
qemb_status qemb_lookup_i32_bf16(const qemb_runtime* runtime, const int32_t* ids, size_t count, uint16_t* out,
                                 char* err, size_t err_size);
qemb_status qemb_lookup_i64_bf16(const qemb_runtime* runtime, const int64_t* ids, size_t count, uint16_t* out,
                                 char* err, size_t err_size);

#ifdef __cplusplus
}
#endif

#endif /* QEMB_QEMB_H_ */
