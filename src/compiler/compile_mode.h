#pragma once

#include <cstdint>
#include <string>

#include "qemb/compiler.h"

namespace qemb {

// options.mode, or for kAuto the mode that fits options.memory_budget given
// `materialized` (the uint16 table's bytes); `reason` says why.
CompileMode resolve_mode(const CompileOptions& options, uint64_t materialized, std::string& reason);

}  // namespace qemb
