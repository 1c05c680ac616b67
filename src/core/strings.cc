#include "core/strings.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>
#include <vector>

namespace qemb {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, substitute});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

std::vector<std::string> split_dots(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot; (dot = path.find('.', start)) != std::string::npos; start = dot + 1)
    parts.push_back(path.substr(start, dot - start));
  parts.push_back(path.substr(start));
  return parts;
}

// How alike two component names look: a shared prefix ("embed" and
// "embed_tokens") counts first, containment next, edit distance last.
std::pair<int, size_t> likeness(const std::string& wanted, const std::string& name) {
  const bool prefix = name.rfind(wanted, 0) == 0 || wanted.rfind(name, 0) == 0;
  const bool contains = name.find(wanted) != std::string::npos || wanted.find(name) != std::string::npos;
  return {prefix ? 0 : contains ? 1 : 2, edit_distance(wanted, name)};
}

}  // namespace

std::string explain_missing_name(const std::string& wanted, const std::vector<std::string>& names) {
  std::vector<std::vector<std::string>> paths;
  for (const std::string& n : names) {
    if (n == wanted) return "";
    paths.push_back(split_dots(n));
  }
  const std::vector<std::string> parts = split_dots(wanted);
  // Walk down while the wanted path's components exist.
  std::vector<const std::vector<std::string>*> under;  // names below the part that exists
  for (const auto& p : paths) under.push_back(&p);
  size_t depth = 0;
  std::set<std::string> members;  // sorted: ties keep alphabetical order
  bool tensor_here = false;
  for (;; ++depth) {
    members.clear();
    tensor_here = false;
    for (const auto* p : under) {
      if (p->size() > depth) members.insert((*p)[depth]);
      else tensor_here = true;
    }
    if (depth == parts.size() || members.count(parts[depth]) == 0) break;
    std::vector<const std::vector<std::string>*> next;
    for (const auto* p : under)
      if (p->size() > depth && (*p)[depth] == parts[depth]) next.push_back(p);
    under = std::move(next);
  }
  std::string existing;
  for (size_t i = 0; i < depth; ++i) existing += (i ? "." : "") + parts[i];
  std::string where;
  if (depth == parts.size()) {
    where = quoted(existing) + " is a module, not a tensor";
  } else if (depth == 0) {
    where = "the checkpoint has no top-level " + quoted(parts[0]);
  } else if (members.empty() && tensor_here) {
    where = quoted(existing) + " is a tensor and has no member " + quoted(parts[depth]);
  } else {
    where = quoted(existing) + " has no member " + quoted(parts[depth]);
  }
  if (members.empty()) return where;
  const std::string key = depth < parts.size() ? parts[depth] : "";
  std::vector<std::pair<std::pair<int, size_t>, std::string>> ranked;
  for (const std::string& m : members) ranked.emplace_back(likeness(key, m), m);
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string closest;
  for (size_t i = 0; i < ranked.size() && i < 3; ++i)
    closest += (i ? ", " : "") + quoted(existing.empty() ? ranked[i].second : existing + "." + ranked[i].second);
  return where + "; closest existing names: " + closest;
}

std::string escape_control(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  char buf[16];
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) <= 0x9f) {
      std::snprintf(buf, sizeof(buf), "\\xc2\\x%02x", static_cast<unsigned char>(s[i + 1]));
      out += buf;
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string escape_html(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace qemb
