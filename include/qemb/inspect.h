// A description of a loaded artifact for people and scripts (`qemb inspect`).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "qemb/runtime.h"

namespace qemb {

// {"scheme", "pattern", "pattern_reason", "sdk_version", "vocab_size", "dim",
//  "act_scale", "act_offset", "ops": [{"type","name","inputs","outputs"}],
//  "tensors": [{"name","kind","dtype","shape","encoding"}], "kernel", "isa",
//  "mode", "source", "format_version", "sections", ...}
nlohmann::json describe_artifact(const EmbeddingRuntime& runtime);
// A readable multi-line summary of the same.
std::string describe_artifact_text(const EmbeddingRuntime& runtime);

}  // namespace qemb
