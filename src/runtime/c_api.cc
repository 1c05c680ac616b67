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

#include "qemb/runtime.h"

struct qemb_runtime {
  std::unique_ptr<qemb::EmbeddingRuntime> rt;
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
    const std::span<const Id> span(ids, count);
    if constexpr (std::is_same_v<Out, uint16_t>) {
      if (half != qemb::FloatDtype::kF32) return report(runtime->rt->lookup_dequantized(span, half, out), err, err_size);
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

}  // namespace

extern "C" {

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
    *out = new qemb_runtime{std::move(loaded).value()};
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

}  // extern "C"
