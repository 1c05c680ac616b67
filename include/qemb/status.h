// Errors cross the library boundary as values, never as exceptions.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace qemb {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,   // bad option or parameter value
  kOutOfRange,        // index outside [0, V)
  kNotFound,          // missing tensor, file or path component
  kParseError,        // malformed input file or text
  kUnsupported,       // dtype, rank or op the target/format does not support
  kIoError,           // open/read/write/rename failed
  kCorrupt,           // checksum mismatch, truncated or foreign artifact
  kVersionError,      // SDK version unknown or unreadable
  kValidationError,   // graph not supported by the target SDK
  kInternal,
};

const char* to_string(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;

  Error() = default;
  Error(ErrorCode c, std::string m) : code(c), message(std::move(m)) {}
  // "invalid argument: <message>"
  std::string to_string() const;
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : error_(std::move(e)), ok_(false) {}  // NOLINT: implicit on purpose
  static Status Ok() { return Status(); }
  bool ok() const { return ok_; }
  const Error& error() const { return error_; }
  ErrorCode code() const { return ok_ ? ErrorCode::kOk : error_.code; }
  const std::string& message() const { return error_.message; }

 private:
  Error error_;
  bool ok_ = true;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT
  Result(Error error) : v_(std::move(error)) {}  // NOLINT
  Result(Status status) : v_(status.error()) { assert(!status.ok()); }  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const Error& error() const { return std::get<1>(v_); }
  Status status() const { return ok() ? Status::Ok() : Status(error()); }

 private:
  std::variant<T, Error> v_;
};

// Builds an Error; usage: return make_error(ErrorCode::kParseError, "...");
inline Error make_error(ErrorCode code, std::string message) {
  return Error(code, std::move(message));
}

}  // namespace qemb

#define QEMB_CONCAT_INNER(a, b) a##b
#define QEMB_CONCAT(a, b) QEMB_CONCAT_INNER(a, b)

// Propagates a failed Status/Result out of the calling function.
#define QEMB_RETURN_IF_ERROR(expr)                       \
  do {                                                   \
    auto qemb_status_ = (expr);                          \
    if (!qemb_status_.ok()) return qemb_status_.error(); \
  } while (0)

#define QEMB_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.error();               \
  lhs = std::move(tmp).value()

#define QEMB_ASSIGN_OR_RETURN(lhs, expr) \
  QEMB_ASSIGN_OR_RETURN_IMPL(QEMB_CONCAT(qemb_result_, __LINE__), lhs, expr)
