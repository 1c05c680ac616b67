// The C API (include/qemb/qemb.h): a thin shell over EmbeddingRuntime. No
// C++ exception may cross into a C caller, so each entry point catches them.
#include "qemb/qemb.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <type_traits>

#include <vector>

#include "qemb/embedding_bag.h"
#include "qemb/runtime.h"
#include "qemb/version.h"

struct qemb_runtime {
  std::unique_ptr<qemb::EmbeddingRuntime> rt;
  std::string bag_kernel;
};

namespace {

static_assert(static_cast<int>(qemb::ErrorCode::kInternal) == QEMB_INTERNAL, "qemb_status follows ErrorCode");

void write_message(const std::string& message, char* err, size_t err_size) {
  if (err == nullptr || err_size == 0) return;
  const size_t n = std::min(message.size(), err_size - 1);
  std::memcpy(err, message.data(), n);
  err[n] = '\0';
}

qemb_status fail(qemb_status status, const std::string& message, char* err, size_t err_size) {
  write_message(message, err, err_size);
  return status;
}

qemb_status report(const qemb::Status& s, char* err, size_t err_size) {
  if (s.ok()) {
    write_message("", err, err_size);
    return QEMB_OK;
  }
  return fail(static_cast<qemb_status>(s.code()), s.message(), err, err_size);
}

// `half` is the float dtype of uint16 outputs that hold binary16 / bfloat16
// bits; kF32 for the uint16 activations (and ignored for float outputs).
template <typename Id, typename Out>
qemb_status lookup(const qemb_runtime* runtime, const Id* ids, size_t count, Out* out, char* err,
                   size_t err_size, qemb::FloatDtype half = qemb::FloatDtype::kF32) {
  if (runtime == nullptr) return fail(QEMB_INVALID_ARGUMENT, "the runtime is NULL", err, err_size);
  if (count > 0 && ids == nullptr) return fail(QEMB_INVALID_ARGUMENT, "ids is NULL", err, err_size);
  if (count > 0 && out == nullptr) return fail(QEMB_INVALID_ARGUMENT, "out is NULL", err, err_size);
  try {
    if (runtime->rt->table_count() > 1)
      return report(qemb::several_tables_error(*runtime->rt, "look one up with qemb_lookup_table(runtime, NAME, ...)"),
                    err, err_size);
    const std::span<const Id> span(ids, count);
    if constexpr (std::is_same_v<Out, uint16_t>) {
      if (half != qemb::FloatDtype::kF32) return report(runtime->rt->lookup_dequantized(span, half, out), err, err_size);
      return report(runtime->rt->lookup(span, out), err, err_size);
    } else if constexpr (std::is_same_v<Out, uint8_t>) {
      return report(runtime->rt->lookup(span, out), err, err_size);
    } else {
      return report(runtime->rt->lookup_dequantized(span, out), err, err_size);
    }
  } catch (const std::bad_alloc&) {
    return fail(QEMB_INTERNAL, "out of memory", err, err_size);
  } catch (const std::exception& e) {
    return fail(QEMB_INTERNAL, e.what(), err, err_size);
  }
}

// A C caller may store any int in an enum field; in C++ loading a value
// outside the enumerators is undefined, so enums are read as the int they are.
template <typename Enum>
int enum_value(const Enum& e) {
  static_assert(sizeof(Enum) == sizeof(int));
  int v = 0;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

std::string field(size_t t, const char* name) { return "tables[" + std::to_string(t) + "]." + name; }

// The library's view of tables[t], or the status and message saying what is wrong.
bool to_table_bags(const qemb_bags& c, size_t t, qemb::TableBags& out, std::string& why,
                   qemb_status* status = nullptr) {
  if (status) *status = QEMB_INVALID_ARGUMENT;
  if (c.runtime == nullptr) {
    why = field(t, "runtime") + " is NULL";
    return false;
  }
  const int ids_type = enum_value(c.indices_type), bounds_type = enum_value(c.boundaries_type);
  const int format = enum_value(c.format), mode = enum_value(c.mode);
  if (ids_type != QEMB_INT32 && ids_type != QEMB_INT64) {
    why = field(t, "indices_type") + " is " + std::to_string(ids_type) + ": expected QEMB_INT32 or QEMB_INT64";
    return false;
  }
  if (bounds_type != QEMB_INT32 && bounds_type != QEMB_INT64) {
    why = field(t, "boundaries_type") + " is " + std::to_string(bounds_type) +
          ": expected QEMB_INT32 or QEMB_INT64";
    return false;
  }
  if (format != QEMB_BAG_OFFSETS_INCLUDE_LAST && format != QEMB_BAG_OFFSETS && format != QEMB_BAG_LENGTHS) {
    why = field(t, "format") + " is " + std::to_string(format) +
          ": expected QEMB_BAG_OFFSETS_INCLUDE_LAST, QEMB_BAG_OFFSETS or QEMB_BAG_LENGTHS";
    return false;
  }
  if (mode != QEMB_POOL_SUM && mode != QEMB_POOL_MEAN) {
    why = field(t, "mode") + " is " + std::to_string(mode) + ": expected QEMB_POOL_SUM or QEMB_POOL_MEAN";
    return false;
  }
  if (c.num_indices > 0 && c.indices == nullptr) {
    why = field(t, "indices") + " is NULL";
    return false;
  }
  if (c.num_boundaries > 0 && c.boundaries == nullptr) {
    why = field(t, "boundaries") + " is NULL";
    return false;
  }
  out.table = c.runtime->rt.get();
  if (c.table != nullptr) {
    auto found = c.runtime->rt->find_table(c.table);
    if (!found.ok()) {
      why = field(t, "table") + ": " + found.error().message;
      if (status) *status = QEMB_NOT_FOUND;
      return false;
    }
    out.embedding_table = *found;
    out.name = c.table;
  } else if (c.runtime->rt->table_count() > 1) {
    why = field(t, "table") + " is NULL: " +
          qemb::several_tables_error(*c.runtime->rt, "set it to one of them").message;
    return false;
  }
  if (c.name != nullptr) out.name = c.name;
  if (ids_type == QEMB_INT32) {
    out.indices = std::span<const int32_t>(static_cast<const int32_t*>(c.indices), c.num_indices);
  } else {
    out.indices = std::span<const int64_t>(static_cast<const int64_t*>(c.indices), c.num_indices);
  }
  if (bounds_type == QEMB_INT32) {
    out.boundaries = std::span<const int32_t>(static_cast<const int32_t*>(c.boundaries), c.num_boundaries);
  } else {
    out.boundaries = std::span<const int64_t>(static_cast<const int64_t*>(c.boundaries), c.num_boundaries);
  }
  out.kind = format == QEMB_BAG_LENGTHS  ? qemb::BagBoundaries::kLengths
             : format == QEMB_BAG_OFFSETS ? qemb::BagBoundaries::kOffsets
                                          : qemb::BagBoundaries::kOffsetsWithLast;
  // NULL weights with num_indices ids is "no weights"; the length is the ids'.
  if (c.per_sample_weights != nullptr) out.per_sample_weights = std::span<const float>(c.per_sample_weights, c.num_indices);
  out.mode = mode == QEMB_POOL_MEAN ? qemb::PoolMode::kMean : qemb::PoolMode::kSum;
  if (c.has_padding_idx) out.padding_idx = c.padding_idx;
  return true;
}

template <typename Out>
qemb_status bags(const qemb_bags* tables, size_t num_tables, qemb::BagOutputType type, Out* out,
                 size_t out_count, char* err, size_t err_size) {
  if (num_tables > 0 && tables == nullptr) return fail(QEMB_INVALID_ARGUMENT, "tables is NULL", err, err_size);
  try {
    std::vector<qemb::TableBags> list(num_tables);
    std::string why;
    size_t total_dim = 0;
    for (size_t t = 0; t < num_tables; ++t) {
      qemb_status status = QEMB_OK;
      if (!to_table_bags(tables[t], t, list[t], why, &status)) return fail(status, why, err, err_size);
      total_dim += static_cast<size_t>(qemb::bag_table(list[t])->dim());
    }
    if (num_tables > 0) {
      auto count = qemb::bag_count(list[0]);
      size_t need = 0;
      if (count.ok() && !__builtin_mul_overflow(*count, total_dim, &need) && need > 0) {
        if (out == nullptr) return fail(QEMB_INVALID_ARGUMENT, "out is NULL", err, err_size);
        if (out_count < need)
          return fail(QEMB_INVALID_ARGUMENT,
                      "out holds " + std::to_string(out_count) + " values; this call writes " +
                          std::to_string(*count) + " bags x " + std::to_string(total_dim) + " columns = " +
                          std::to_string(need),
                      err, err_size);
      }
    }
    if constexpr (std::is_same_v<Out, float>) {
      (void)type;
      return report(qemb::embedding_bags(list, out), err, err_size);
    } else {
      return report(qemb::embedding_bags(list, type, out), err, err_size);
    }
  } catch (const std::bad_alloc&) {
    return fail(QEMB_INTERNAL, "out of memory", err, err_size);
  } catch (const std::exception& e) {
    return fail(QEMB_INTERNAL, e.what(), err, err_size);
  }
}

qemb::IntSpan c_int_span(const void* data, size_t count, int type) {
  if (type == QEMB_INT32) return std::span<const int32_t>(static_cast<const int32_t*>(data), count);
  return std::span<const int64_t>(static_cast<const int64_t*>(data), count);
}

}  // namespace

extern "C" {

const char* qemb_version(void) { return QEMB_VERSION; }

qemb_status qemb_abi_check(size_t bags_size, size_t runtime_options_size, const char* header_version, char* err,
                           size_t err_size) {
  if (bags_size == sizeof(qemb_bags) && runtime_options_size == sizeof(qemb_runtime_options)) {
    write_message("", err, err_size);
    return QEMB_OK;
  }
  const std::string built = header_version != nullptr ? std::string(header_version) : std::string("?");
  return fail(QEMB_VERSION_ERROR,
              "the program was built against qemb " + built + "'s qemb/qemb.h (qemb_bags " +
                  std::to_string(bags_size) + " bytes, qemb_runtime_options " + std::to_string(runtime_options_size) +
                  ") but runs with the qemb " QEMB_VERSION " library (" + std::to_string(sizeof(qemb_bags)) + " and " +
                  std::to_string(sizeof(qemb_runtime_options)) +
                  " bytes); rebuild the program against the installed headers",
              err, err_size);
}

const char* qemb_status_string(qemb_status status) {
  static_assert(sizeof(qemb_status) == sizeof(int));
  int code = 0;  // read as int: C callers may pass any value (see qemb_runtime_open)
  std::memcpy(&code, &status, sizeof code);
  if (code < QEMB_OK || code > QEMB_INTERNAL) return "unknown error";
  return qemb::to_string(static_cast<qemb::ErrorCode>(code));
}

qemb_runtime_options qemb_runtime_options_default(void) {
  qemb_runtime_options o;
  o.threads = 1;
  o.verify = QEMB_VERIFY_FULL;
  o.reference = 0;
  return o;
}

qemb_status qemb_runtime_open(const char* path, const qemb_runtime_options* options, qemb_runtime** out,
                              char* err, size_t err_size) {
  if (out == nullptr) return fail(QEMB_INVALID_ARGUMENT, "out is NULL", err, err_size);
  *out = nullptr;
  if (path == nullptr) return fail(QEMB_INVALID_ARGUMENT, "path is NULL", err, err_size);
  const qemb_runtime_options o = options != nullptr ? *options : qemb_runtime_options_default();
  // A C caller may store any int in the enum; in C++ loading a value outside
  // the enumerators is undefined, so the field is read as the int it is.
  static_assert(sizeof(qemb_verify) == sizeof(int));
  int verify = 0;
  std::memcpy(&verify, &o.verify, sizeof verify);
  if (verify != QEMB_VERIFY_FULL && verify != QEMB_VERIFY_HEADER)
    return fail(QEMB_INVALID_ARGUMENT,
                "unknown verify value " + std::to_string(verify) +
                    ": expected QEMB_VERIFY_FULL or QEMB_VERIFY_HEADER",
                err, err_size);
  if (o.threads < 0)
    return fail(QEMB_INVALID_ARGUMENT,
                "threads is " + std::to_string(o.threads) + ": expected 0 (one per core) or more", err, err_size);
  try {
    qemb::RuntimeOptions ro;
    ro.verify = verify == QEMB_VERIFY_HEADER ? qemb::Verify::kHeader : qemb::Verify::kFull;
    ro.threads = o.threads;
    ro.reference = o.reference != 0;
    auto loaded = qemb::EmbeddingRuntime::load(path, ro);
    if (!loaded.ok()) return report(loaded.status(), err, err_size);
    *out = new qemb_runtime{std::move(loaded).value(), {}};
    (*out)->bag_kernel = qemb::bag_kernel_name(*(*out)->rt);
    write_message("", err, err_size);
    return QEMB_OK;
  } catch (const std::bad_alloc&) {
    return fail(QEMB_INTERNAL, "out of memory", err, err_size);
  } catch (const std::exception& e) {
    return fail(QEMB_INTERNAL, e.what(), err, err_size);
  }
}

void qemb_runtime_close(qemb_runtime* runtime) { delete runtime; }

int64_t qemb_runtime_vocab_size(const qemb_runtime* runtime) { return runtime ? runtime->rt->vocab_size() : 0; }
int64_t qemb_runtime_dim(const qemb_runtime* runtime) { return runtime ? runtime->rt->dim() : 0; }
float qemb_runtime_activation_scale(const qemb_runtime* runtime) {
  return runtime ? runtime->rt->activation().scale : 0.0f;
}
int32_t qemb_runtime_activation_offset(const qemb_runtime* runtime) {
  return runtime ? runtime->rt->activation().offset() : 0;
}
const char* qemb_runtime_kernel(const qemb_runtime* runtime) {
  return runtime ? runtime->rt->kernel_name().c_str() : "";
}
const char* qemb_runtime_isa(const qemb_runtime* runtime) { return runtime ? runtime->rt->isa().c_str() : ""; }

qemb_status qemb_lookup_i32_u16(const qemb_runtime* runtime, const int32_t* ids, size_t count, uint16_t* out,
                                char* err, size_t err_size) {
  return lookup(runtime, ids, count, out, err, err_size);
}
qemb_status qemb_lookup_i64_u16(const qemb_runtime* runtime, const int64_t* ids, size_t count, uint16_t* out,
                                char* err, size_t err_size) {
  return lookup(runtime, ids, count, out, err, err_size);
}
qemb_status qemb_lookup_i32_u8(const qemb_runtime* runtime, const int32_t* ids, size_t count, uint8_t* out,
                               char* err, size_t err_size) {
  return lookup(runtime, ids, count, out, err, err_size);
}
qemb_status qemb_lookup_i64_u8(const qemb_runtime* runtime, const int64_t* ids, size_t count, uint8_t* out,
                               char* err, size_t err_size) {
  return lookup(runtime, ids, count, out, err, err_size);
}
int qemb_runtime_activation_bits(const qemb_runtime* runtime) { return runtime ? runtime->rt->activation_bits() : 0; }
qemb_status qemb_lookup_i32_f32(const qemb_runtime* runtime, const int32_t* ids, size_t count, float* out,
                                char* err, size_t err_size) {
  return lookup(runtime, ids, count, out, err, err_size);
}
qemb_status qemb_lookup_i64_f32(const qemb_runtime* runtime, const int64_t* ids, size_t count, float* out,
                                char* err, size_t err_size) {
  return lookup(runtime, ids, count, out, err, err_size);
}

qemb_status qemb_lookup_i32_f16(const qemb_runtime* runtime, const int32_t* ids, size_t count, uint16_t* out,
                                char* err, size_t err_size) {
  return lookup(runtime, ids, count, out, err, err_size, qemb::FloatDtype::kF16);
}
qemb_status qemb_lookup_i64_f16(const qemb_runtime* runtime, const int64_t* ids, size_t count, uint16_t* out,
                                char* err, size_t err_size) {
  return lookup(runtime, ids, count, out, err, err_size, qemb::FloatDtype::kF16);
}
qemb_status qemb_lookup_i32_bf16(const qemb_runtime* runtime, const int32_t* ids, size_t count, uint16_t* out,
                                 char* err, size_t err_size) {
  return lookup(runtime, ids, count, out, err, err_size, qemb::FloatDtype::kBF16);
}
qemb_status qemb_lookup_i64_bf16(const qemb_runtime* runtime, const int64_t* ids, size_t count, uint16_t* out,
                                 char* err, size_t err_size) {
  return lookup(runtime, ids, count, out, err, err_size, qemb::FloatDtype::kBF16);
}

qemb_bags qemb_bags_default(void) {
  qemb_bags b;
  std::memset(&b, 0, sizeof b);
  b.indices_type = QEMB_INT64;
  b.boundaries_type = QEMB_INT64;
  b.format = QEMB_BAG_OFFSETS_INCLUDE_LAST;
  b.mode = QEMB_POOL_SUM;
  return b;
}

qemb_status qemb_bag_count(const qemb_bags* bags, size_t* count, char* err, size_t err_size) {
  if (count == nullptr) return fail(QEMB_INVALID_ARGUMENT, "count is NULL", err, err_size);
  *count = 0;
  if (bags == nullptr) return fail(QEMB_INVALID_ARGUMENT, "bags is NULL", err, err_size);
  try {
    qemb::TableBags t;
    std::string why;
    qemb_status status = QEMB_OK;
    if (!to_table_bags(*bags, 0, t, why, &status)) return fail(status, why, err, err_size);
    auto n = qemb::bag_count(t);
    if (!n.ok()) return report(n.status(), err, err_size);
    *count = *n;
    write_message("", err, err_size);
    return QEMB_OK;
  } catch (const std::exception& e) {
    return fail(QEMB_INTERNAL, e.what(), err, err_size);
  }
}

size_t qemb_runtime_table_count(const qemb_runtime* runtime) { return runtime ? runtime->rt->table_count() : 0; }
const char* qemb_runtime_table_name(const qemb_runtime* runtime, size_t index) {
  return runtime && index < runtime->rt->table_count() ? runtime->rt->table(index).name().c_str() : nullptr;
}
int64_t qemb_runtime_table_vocab_size(const qemb_runtime* runtime, size_t index) {
  return runtime && index < runtime->rt->table_count() ? runtime->rt->table(index).vocab_size() : 0;
}
int64_t qemb_runtime_table_dim(const qemb_runtime* runtime, size_t index) {
  return runtime && index < runtime->rt->table_count() ? runtime->rt->table(index).dim() : 0;
}

const char* qemb_runtime_bag_kernel(const qemb_runtime* runtime) { return runtime ? runtime->bag_kernel.c_str() : ""; }

qemb_status qemb_embedding_bags(const qemb_bags* tables, size_t num_tables, float* out, size_t out_count,
                                char* err, size_t err_size) {
  return bags(tables, num_tables, qemb::BagOutputType::kFloat32, out, out_count, err, err_size);
}

qemb_status qemb_embedding_bags_f16(const qemb_bags* tables, size_t num_tables, uint16_t* out, size_t out_count,
                                    char* err, size_t err_size) {
  return bags(tables, num_tables, qemb::BagOutputType::kFloat16, out, out_count, err, err_size);
}

qemb_status qemb_embedding_bags_bf16(const qemb_bags* tables, size_t num_tables, uint16_t* out, size_t out_count,
                                     char* err, size_t err_size) {
  return bags(tables, num_tables, qemb::BagOutputType::kBFloat16, out, out_count, err, err_size);
}

qemb_status qemb_lookup_table(const qemb_runtime* runtime, const char* table, const void* ids,
                              qemb_int_type ids_type, size_t count, qemb_out_type out_type, void* out, char* err,
                              size_t err_size) {
  if (runtime == nullptr) return fail(QEMB_INVALID_ARGUMENT, "the runtime is NULL", err, err_size);
  const int id_type = enum_value(ids_type), type = enum_value(out_type);
  if (id_type != QEMB_INT32 && id_type != QEMB_INT64)
    return fail(QEMB_INVALID_ARGUMENT,
                "ids_type is " + std::to_string(id_type) + ": expected QEMB_INT32 or QEMB_INT64", err, err_size);
  if (type < QEMB_OUT_U16 || type > QEMB_OUT_U8)
    return fail(QEMB_INVALID_ARGUMENT,
                "out_type is " + std::to_string(type) +
                    ": expected QEMB_OUT_U16, QEMB_OUT_F32, QEMB_OUT_F16, QEMB_OUT_BF16 or QEMB_OUT_U8",
                err, err_size);
  if (count > 0 && ids == nullptr) return fail(QEMB_INVALID_ARGUMENT, "ids is NULL", err, err_size);
  if (count > 0 && out == nullptr) return fail(QEMB_INVALID_ARGUMENT, "out is NULL", err, err_size);
  try {
    const qemb::EmbeddingTable* t = nullptr;
    if (table != nullptr) {
      auto found = runtime->rt->find_table(table);
      if (!found.ok()) return report(found.status(), err, err_size);
      t = *found;
    } else if (runtime->rt->table_count() == 1) {
      t = &runtime->rt->table(0);
    } else {
      return report(qemb::several_tables_error(*runtime->rt, "name one as the table argument"), err, err_size);
    }
    auto run = [&](auto span) -> qemb::Status {
      switch (type) {
        case QEMB_OUT_U16: return t->lookup(span, static_cast<uint16_t*>(out));
        case QEMB_OUT_F32: return t->lookup_dequantized(span, static_cast<float*>(out));
        case QEMB_OUT_F16: return t->lookup_dequantized(span, qemb::FloatDtype::kF16, out);
        case QEMB_OUT_U8: return t->lookup(span, static_cast<uint8_t*>(out));
        default: return t->lookup_dequantized(span, qemb::FloatDtype::kBF16, out);
      }
    };
    if (id_type == QEMB_INT32)
      return report(run(std::span<const int32_t>(static_cast<const int32_t*>(ids), count)), err, err_size);
    return report(run(std::span<const int64_t>(static_cast<const int64_t*>(ids), count)), err, err_size);
  } catch (const std::bad_alloc&) {
    return fail(QEMB_INTERNAL, "out of memory", err, err_size);
  } catch (const std::exception& e) {
    return fail(QEMB_INTERNAL, e.what(), err, err_size);
  }
}

qemb_status qemb_embedding_bags_flat(const qemb_runtime* runtime, const int32_t* feature_tables, size_t num_features,
                                     const void* indices, size_t num_indices, qemb_int_type indices_type,
                                     const void* offsets, size_t num_offsets, qemb_int_type offsets_type,
                                     const float* per_sample_weights, qemb_pool_mode mode, float* out,
                                     size_t out_count, char* err, size_t err_size) {
  if (runtime == nullptr) return fail(QEMB_INVALID_ARGUMENT, "the runtime is NULL", err, err_size);
  const int ids_type = enum_value(indices_type), offs_type = enum_value(offsets_type), pool = enum_value(mode);
  if (ids_type != QEMB_INT32 && ids_type != QEMB_INT64)
    return fail(QEMB_INVALID_ARGUMENT,
                "indices_type is " + std::to_string(ids_type) + ": expected QEMB_INT32 or QEMB_INT64", err, err_size);
  if (offs_type != QEMB_INT32 && offs_type != QEMB_INT64)
    return fail(QEMB_INVALID_ARGUMENT,
                "offsets_type is " + std::to_string(offs_type) + ": expected QEMB_INT32 or QEMB_INT64", err, err_size);
  if (pool != QEMB_POOL_SUM && pool != QEMB_POOL_MEAN)
    return fail(QEMB_INVALID_ARGUMENT,
                "mode is " + std::to_string(pool) + ": expected QEMB_POOL_SUM or QEMB_POOL_MEAN", err, err_size);
  if (num_features > 0 && feature_tables == nullptr)
    return fail(QEMB_INVALID_ARGUMENT, "feature_tables is NULL", err, err_size);
  if (num_indices > 0 && indices == nullptr) return fail(QEMB_INVALID_ARGUMENT, "indices is NULL", err, err_size);
  if (num_offsets > 0 && offsets == nullptr) return fail(QEMB_INVALID_ARGUMENT, "offsets is NULL", err, err_size);
  try {
    qemb::FlatBags flat;
    flat.runtime = runtime->rt.get();
    flat.feature_tables = std::span<const int32_t>(feature_tables, num_features);
    flat.indices = c_int_span(indices, num_indices, ids_type);
    flat.offsets = c_int_span(offsets, num_offsets, offs_type);
    if (per_sample_weights != nullptr) flat.per_sample_weights = std::span<const float>(per_sample_weights, num_indices);
    flat.mode = pool == QEMB_POOL_MEAN ? qemb::PoolMode::kMean : qemb::PoolMode::kSum;
    auto shape = qemb::flat_bags_shape(flat);
    if (!shape.ok()) return report(shape.status(), err, err_size);
    size_t need = 0;
    if (__builtin_mul_overflow(shape->bags, shape->width, &need)) need = SIZE_MAX;
    if (need > 0 && out == nullptr) return fail(QEMB_INVALID_ARGUMENT, "out is NULL", err, err_size);
    if (out_count < need)
      return fail(QEMB_INVALID_ARGUMENT,
                  "out holds " + std::to_string(out_count) + " values; this call writes " +
                      std::to_string(shape->bags) + " bags x " + std::to_string(shape->width) + " columns = " +
                      std::to_string(need),
                  err, err_size);
    return report(qemb::embedding_bags_flat(flat, out), err, err_size);
  } catch (const std::bad_alloc&) {
    return fail(QEMB_INTERNAL, "out of memory", err, err_size);
  } catch (const std::exception& e) {
    return fail(QEMB_INTERNAL, e.what(), err, err_size);
  }
}

}  // extern "C"
