// The op pattern a compile targets, and the one place it is decided from the
// target SDK version (docs/numeric-contract.md: "The two lowerings", "SDK
// version gating").
#pragma once

#include <string>

#include "qemb/scheme.h"
#include "qemb/sdk_version.h"
#include "qemb/status.h"

namespace qemb {

enum class Pattern { kAuto, kOptimized, kLegacy };
const char* to_string(Pattern p);  // "auto", "optimized", "legacy"
Result<Pattern> parse_pattern(const std::string& s);

// The first SDK version with the optimized PCQ embedding op pattern (a Convert
// on a per-axis STATIC input): 2.48. Older and unknown targets get the legacy
// pattern.
SdkVersion optimized_pattern_min_version();

// The one pattern decision: auto picks optimized for a target SDK >= 2.48 and
// legacy for an older or unknown one; a forced pattern is kept. A forced
// optimized pattern on a known older target is refused with the validator's
// message, naming the Convert op of the node `name`. A weight-only scheme
// has no QNN pattern: it is always the optimized graph (DequantizeLinear ->
// Gather) whatever the target, and a forced legacy pattern is refused.
struct PatternChoice {
  Pattern pattern = Pattern::kLegacy;  // optimized | legacy (never auto)
  std::string reason;                  // why this pattern, for the user
};
Result<PatternChoice> choose_pattern(Pattern requested, const TargetVersion& target,
                                     const std::string& name = "embedding", Scheme scheme = Scheme::k16a4w);

}  // namespace qemb
