// Small text helpers shared by the layers that suggest names in errors.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace qemb {

// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(const std::string& a, const std::string& b);

// The one way qemb explains a tensor name that is not in a checkpoint (compile,
// eval and fakequant alike). Names are dotted paths; the explanation says
// where `wanted` leaves the tree of `names` and lists up to three names of
// the members there, closest first (a shared prefix, then containment, then
// edit distance), e.g. "'model' has no member 'embed'; closest existing
// names: 'model.embed_tokens'". Empty when `wanted` is one of `names`.
std::string explain_missing_name(const std::string& wanted, const std::vector<std::string>& names);

// Text from a file made safe to print on a terminal: control characters (C0,
// DEL and UTF-8-encoded C1, which can move the cursor, rewrite lines or start
// escape sequences) become \n, \r, \t or \xNN. Other bytes pass unchanged.
std::string escape_control(std::string_view s);

// Text made safe inside HTML and SVG, in elements and quoted attributes:
// & < > " ' become entities (the eval and bench reports).
std::string escape_html(std::string_view s);

}  // namespace qemb
