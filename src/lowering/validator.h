// Shared by the validator and choose_pattern, so a refused optimized pattern
// reads the same whichever finds it first.
#pragma once

#include <string>

#include "qemb/sdk_version.h"
#include "qemb/status.h"

namespace qemb {

Error convert_needs_newer_sdk(const std::string& op_name, const SdkVersion& target);

}  // namespace qemb
