/* The C API of the qemb lookup runtime (C99), for foreign-function callers:
 * an ExecuTorch custom op, a JNI wrapper, a Rust or Go binding.
 *
 * Runtime only: open a .qemb artifact, query it, look ids up or pool them
 * into bags (EmbeddingBag), close it. Every fallible call returns a
 * qemb_status and, when `err` is not NULL, writes the
 * library's message (NUL-terminated, truncated to err_size bytes) into the
 * caller's buffer. Messages name files, tensors and values and can run to a
 * few hundred bytes; QEMB_ERROR_BUFFER_SIZE bytes hold every message whole.
 * There is no global state: one runtime may be shared by any number of
 * threads, and each call reports its own error.
 *
 * Link: qemb::runtime (CMake, static) or `pkg-config --libs qemb`; or the
 * shared library libqemb.so (qemb::c, `-lqemb`), which exports only these
 * functions. A program that loads the shared library should call
 * QEMB_CHECK_ABI once (see qemb_abi_check). */
#ifndef QEMB_QEMB_H_
#define QEMB_QEMB_H_

#include <stddef.h>
#include <stdint.h>

#include "qemb/version.h"
#define QEMB_HEADER_VERSION QEMB_VERSION

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

/* An error buffer of this many bytes holds any message whole (longer
 * messages are cut, still NUL-terminated, to the err_size given). */
#define QEMB_ERROR_BUFFER_SIZE 1024

/* The library's version, "MAJOR.MINOR.PATCH" (QEMB_VERSION of qemb/version.h). */
const char* qemb_version(void);

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
 * position and value, and nothing is written. An `out` that shares memory
 * with the ids is refused (QEMB_INVALID_ARGUMENT, nothing written); ids
 * another thread rewrites during the call never index outside the table
 * (the call may then fail, saying the ids changed). */
qemb_status qemb_lookup_i32_u16(const qemb_runtime* runtime, const int32_t* ids, size_t count, uint16_t* out,
                                char* err, size_t err_size);
qemb_status qemb_lookup_i64_u16(const qemb_runtime* runtime, const int64_t* ids, size_t count, uint16_t* out,
                                char* err, size_t err_size);
/* The uint8 activations of an 8-bit activation scheme (8a8w, 8a4w, 8a2w).
 * The uint16 calls serve 16-bit ones; each refuses the other's table
 * (QEMB_INVALID_ARGUMENT saying which to call), as both refuse a weight-only
 * table (w8, w4, w2), whose lookups are the float calls below.
 * qemb_runtime_activation_bits says which: 16, 8, or 0 (floats). */
qemb_status qemb_lookup_i32_u8(const qemb_runtime* runtime, const int32_t* ids, size_t count, uint8_t* out,
                               char* err, size_t err_size);
qemb_status qemb_lookup_i64_u8(const qemb_runtime* runtime, const int64_t* ids, size_t count, uint8_t* out,
                               char* err, size_t err_size);
int qemb_runtime_activation_bits(const qemb_runtime* runtime);
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

/* What a lookup writes: uint16 activations, or dequantized float32, or the
 * float32 value rounded to binary16 / bfloat16 (as 16-bit patterns). */
typedef enum qemb_out_type {
  QEMB_OUT_U16 = 0, /* uint16_t out[count * dim] */
  QEMB_OUT_F32 = 1, /* float out[count * dim] */
  QEMB_OUT_F16 = 2, /* uint16_t out[count * dim], binary16 bits */
  QEMB_OUT_BF16 = 3, /* uint16_t out[count * dim], bfloat16 bits */
  QEMB_OUT_U8 = 4    /* uint8_t out[count * dim]: an 8-bit activation scheme's */
} qemb_out_type;

/* ---- Pooled lookups (EmbeddingBag) -------------------------------------
 * Each sample gathers a bag of ids and reduces their dequantized rows to one
 * float32 row, by sum or mean, with optional per-sample weights, like
 * PyTorch's nn.EmbeddingBag. Several tables go in one call (FBGEMM's
 * table-batched layout): out[B][sum of the tables' dims], table t's columns
 * starting after those of tables 0..t-1. The arithmetic (float32, in index
 * order) is the same bits on every instruction set and thread count. */

typedef enum qemb_int_type {
  QEMB_INT32 = 0,
  QEMB_INT64 = 1
} qemb_int_type;

/* What qemb_bags.boundaries holds. */
typedef enum qemb_bag_format {
  QEMB_BAG_OFFSETS_INCLUDE_LAST = 0, /* B + 1 offsets, the last equal to num_indices */
  QEMB_BAG_OFFSETS = 1,              /* B offsets, bag B-1 running to the end */
  QEMB_BAG_LENGTHS = 2               /* B lengths adding up to num_indices */
} qemb_bag_format;

typedef enum qemb_pool_mode {
  QEMB_POOL_SUM = 0,
  QEMB_POOL_MEAN = 1 /* an empty bag gives 0 */
} qemb_pool_mode;

/* One table's share of a pooled call. Arrays are read in place. */
typedef struct qemb_bags {
  const qemb_runtime* runtime; /* the table */
  const void* indices;         /* num_indices ids of indices_type */
  size_t num_indices;
  qemb_int_type indices_type;
  const void* boundaries; /* num_boundaries offsets or lengths of boundaries_type */
  size_t num_boundaries;
  qemb_int_type boundaries_type;
  qemb_bag_format format;
  const float* per_sample_weights; /* NULL, or num_indices weights (sum only) */
  qemb_pool_mode mode;
  int has_padding_idx; /* non-zero: ids equal to padding_idx add nothing and do not count */
  int64_t padding_idx; /* a row; negative counts from the end */
  const char* name;    /* for error messages; NULL: the table's name when `table` is set */
  const char* table;   /* the artifact's table of that name; NULL: its only table (an artifact of
                          several tables needs one: NULL is then QEMB_INVALID_ARGUMENT listing them) */
} qemb_bags;

/* All zero: no arrays, int64 ids and boundaries, B + 1 offsets, sum, no
 * weights, no padding id, the only table. */
qemb_bags qemb_bags_default(void);

/* Checks that the program and the library it runs with agree on the C API's
 * structs (qemb_bags, qemb_runtime_options): a program built against one
 * version's header and run with another library (the shared libqemb.so
 * replaced under it) would otherwise pass structs of the wrong size. QEMB_OK
 * when they agree; else QEMB_VERSION_ERROR naming both sizes and versions.
 * Call it through QEMB_CHECK_ABI(err, err_size), which passes this header's
 * sizes. */
qemb_status qemb_abi_check(size_t bags_size, size_t runtime_options_size, const char* header_version, char* err,
                           size_t err_size);
#define QEMB_CHECK_ABI(err, err_size) \
  qemb_abi_check(sizeof(qemb_bags), sizeof(qemb_runtime_options), QEMB_HEADER_VERSION, (err), (err_size))

/* The number of bags B that `bags` describes (not yet checked against its ids). */
qemb_status qemb_bag_count(const qemb_bags* bags, size_t* count, char* err, size_t err_size);

/* An artifact holds one table or several, each with its own name, shape and
 * kernel; table `index` < qemb_runtime_table_count. A bad index gives NULL,
 * 0. The name is owned by the runtime. */
size_t qemb_runtime_table_count(const qemb_runtime* runtime);
const char* qemb_runtime_table_name(const qemb_runtime* runtime, size_t index);
int64_t qemb_runtime_table_vocab_size(const qemb_runtime* runtime, size_t index);
int64_t qemb_runtime_table_dim(const qemb_runtime* runtime, size_t index);

/* The bag kernel a runtime uses, e.g. "requant_bag_s4_i64[AVX2]" (for int64
 * ids); owned by the runtime. */
const char* qemb_runtime_bag_kernel(const qemb_runtime* runtime);

/* Pools `num_tables` tables (of one artifact or several) into
 * out[B * sum D_t] (row-major). out_count is
 * the number of values `out` holds; it must be at least B * sum D_t. Every
 * table must describe the same B. Everything is checked first (boundaries,
 * weights, padding id, every id); on an error nothing is written and the
 * message names the table, and for an id its bag, position and value
 * (QEMB_OUT_OF_RANGE); a `table` the artifact lacks is QEMB_NOT_FOUND
 * listing its tables; other bad input is QEMB_INVALID_ARGUMENT, an `out`
 * sharing memory with any table's indices, boundaries or weights included.
 * Runs on the threads of tables[0].runtime. */
qemb_status qemb_embedding_bags(const qemb_bags* tables, size_t num_tables, float* out, size_t out_count,
                                char* err, size_t err_size);

/* The same, each float32 result rounded once (to nearest even) to IEEE
 * binary16 (f16) or bfloat16 (bf16), written as its 16-bit pattern. */
qemb_status qemb_embedding_bags_f16(const qemb_bags* tables, size_t num_tables, uint16_t* out, size_t out_count,
                                    char* err, size_t err_size);
qemb_status qemb_embedding_bags_bf16(const qemb_bags* tables, size_t num_tables, uint16_t* out, size_t out_count,
                                     char* err, size_t err_size);

/* Looks `count` ids of ids_type (QEMB_INT32 or QEMB_INT64) up in the table
 * named `table` (see qemb_runtime_table_name) into `out`, of out_type, with
 * that table's dim (qemb_runtime_table_dim) values a row. NULL `table` is
 * the only table of a one-table artifact. The qemb_lookup_* calls above
 * take no table: on an artifact of several tables they fail with
 * QEMB_INVALID_ARGUMENT listing the tables, as this call does for NULL; a
 * `table` the artifact lacks is QEMB_NOT_FOUND listing them. Ids, errors and
 * outputs as for qemb_lookup_*; in an artifact of several tables an error
 * message starts "table 'NAME': ". */
qemb_status qemb_lookup_table(const qemb_runtime* runtime, const char* table, const void* ids,
                              qemb_int_type ids_type, size_t count, qemb_out_type out_type, void* out, char* err,
                              size_t err_size);

/* The flat, table-batched pooled call of FBGEMM's TBE and TorchRec's
 * KeyedJaggedTensor: F = num_features features of B bags each, all their ids
 * in one `indices` array and all their bags in one `offsets` array of
 * F * B + 1 values, feature-major (feature f's bag b is
 * indices[offsets[f*B + b] .. offsets[f*B + b + 1]]), offsets[0] = 0 and the
 * last equal to num_indices. Feature f reads table feature_tables[f] (an index
 * < qemb_runtime_table_count; features may share a table); feature_tables
 * NULL with num_features 0 means one feature per table, in order.
 * per_sample_weights is NULL or num_indices floats (QEMB_POOL_SUM only).
 * Writes out[B * sum_f D_f] float32 (out_count values at least), feature f's
 * columns after those of features 0..f-1. Everything is checked first; on an
 * error nothing is written (an id's message names its feature, table,
 * position in indices and bag: QEMB_OUT_OF_RANGE). */
qemb_status qemb_embedding_bags_flat(const qemb_runtime* runtime, const int32_t* feature_tables, size_t num_features,
                                     const void* indices, size_t num_indices, qemb_int_type indices_type,
                                     const void* offsets, size_t num_offsets, qemb_int_type offsets_type,
                                     const float* per_sample_weights, qemb_pool_mode mode, float* out,
                                     size_t out_count, char* err, size_t err_size);

#ifdef __cplusplus
}
#endif

#endif /* QEMB_QEMB_H_ */
