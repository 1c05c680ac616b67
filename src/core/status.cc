#include "qemb/status.h"

namespace qemb {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kOutOfRange: return "out of range";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kParseError: return "parse error";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kIoError: return "I/O error";
    case ErrorCode::kCorrupt: return "corrupt";
    case ErrorCode::kVersionError: return "SDK version error";
    case ErrorCode::kValidationError: return "validation error";
    case ErrorCode::kInternal: return "internal error";
  }
  return "unknown error";
}

std::string Error::to_string() const {
  return std::string(qemb::to_string(code)) + ": " + message;
}

}  // namespace qemb
