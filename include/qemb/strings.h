// Small text helpers shared by the layers that suggest names in errors.
#pragma once

#include <cstddef>
#include <string>

namespace qemb {

// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace qemb
