// The repository is self-contained: no document or comment cites a design
// document that is not in it, and every relative link in a Markdown file
// names a file of the repository (and, with #anchor, one of its headings).
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
const fs::path kRoot = QEMB_SOURCE_DIR;

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Tracked-looking text files: sources, scripts and docs, not build trees.
std::vector<fs::path> text_files() {
  static const std::set<std::string> kExt = {".md", ".h", ".cc", ".sh", ".txt", ".py", ".cmake", ".yml", ".yaml"};
  std::vector<fs::path> out;
  for (auto it = fs::recursive_directory_iterator(kRoot); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && (name.rfind("build", 0) == 0 || name[0] == '.' || name == "node_modules")) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && (kExt.count(it->path().extension().string()) || name == "run")) out.push_back(it->path());
  }
  return out;
}

// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'.
std::string slug(const std::string& heading) {
  std::string s;
  for (unsigned char c : heading) {
    if (std::isalnum(c) || c == '-' || c == '_' || c >= 0x80) s += static_cast<char>(std::tolower(c));
    else if (c == ' ') s += '-';
  }
  return s;
}

std::set<std::string> anchors(const fs::path& md) {
  std::set<std::string> out;
  std::istringstream in(read(md));
  bool fenced = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) fenced = !fenced;
    if (fenced || line.empty() || line[0] != '#') continue;
    const size_t text = line.find_first_not_of('#');
    if (text == std::string::npos || line[text] != ' ') continue;
    out.insert(slug(line.substr(text + 1)));
  }
  return out;
}

TEST(Docs, NoCitationOfAnOutsideDesignDocument) {
  const std::regex outside(std::string("DESIGN") + "( \xC2\xA7|\\.md)");
  std::string found;
  for (const fs::path& p : text_files()) {
    std::istringstream in(read(p));
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      if (std::regex_search(line, outside)) found += fs::relative(p, kRoot).string() + ":" + std::to_string(n) + ": " + line + "\n";
    }
  }
  EXPECT_EQ(found, "") << "cite docs/numeric-contract.md (or another file of the repository) instead";
}

TEST(Docs, MarkdownLinksResolveInsideTheRepository) {
  const std::regex link(R"(\]\(([^)\s]+)\))");
  std::string broken;
  int checked = 0;
  for (const fs::path& md : text_files()) {
    if (md.extension() != ".md") continue;
    const std::string text = read(md);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), link); it != std::sregex_iterator(); ++it) {
      const std::string target = (*it)[1];
      if (target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0) continue;
      const size_t hash = target.find('#');
      const std::string file = target.substr(0, hash), anchor = hash == std::string::npos ? "" : target.substr(hash + 1);
      const fs::path resolved = file.empty() ? md : md.parent_path() / file;
      const std::string where = fs::relative(md, kRoot).string() + ": (" + target + ")";
      ++checked;
      if (!fs::exists(resolved)) {
        broken += where + " names no file\n";
      } else if (!anchor.empty() && (resolved.extension() != ".md" || !anchors(resolved).count(anchor))) {
        broken += where + " names no heading of " + fs::relative(resolved, kRoot).string() + "\n";
      }
    }
  }
  EXPECT_GT(checked, 0);
  EXPECT_EQ(broken, "");
}

}  // namespace
