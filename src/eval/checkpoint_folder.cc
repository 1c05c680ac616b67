#include "eval/checkpoint_folder.h"

#include <stdlib.h>

#include <filesystem>
#include <system_error>
#include <vector>

namespace qemb {

namespace fs = std::filesystem;

namespace {

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

Error fs_error(const std::string& what, const std::error_code& ec) {
  return make_error(ErrorCode::kIoError, what + ": " + ec.message());
}

// Removes the folder unless released: a failed run leaves nothing.
class FolderGuard {
 public:
  explicit FolderGuard(std::string path) : path_(std::move(path)) {}
  ~FolderGuard() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  void release() { path_.clear(); }

 private:
  std::string path_;
};

bool inside(const fs::path& child, const fs::path& parent) {
  auto c = child.begin(), p = parent.begin();
  for (; p != parent.end(); ++p, ++c)
    if (c == child.end() || *c != *p) return false;
  return true;
}

}  // namespace

Result<int64_t> write_checkpoint_folder(const Checkpoint& ckpt, const ParamStore& store,
                                        const std::string& out_folder, bool link, std::vector<std::string>& skipped) {
  std::error_code ec;
  const fs::path src = fs::canonical(ckpt.folder(), ec);
  if (ec) return fs_error("cannot resolve the checkpoint folder " + in_quotes(ckpt.folder()), ec);
  if (fs::exists(fs::symlink_status(out_folder, ec)))
    return make_error(ErrorCode::kInvalidArgument,
                      "the output " + in_quotes(out_folder) +
                          " already exists; fakequant of a checkpoint folder writes a new folder, choose a new path");
  fs::path out = fs::absolute(out_folder, ec);
  if (ec) return fs_error("cannot resolve " + in_quotes(out_folder), ec);
  out = out.lexically_normal();
  if (out.has_filename() == false) out = out.parent_path();
  const fs::path parent = fs::weakly_canonical(out.parent_path(), ec);
  if (ec) return fs_error("cannot resolve " + in_quotes(out.parent_path().string()), ec);
  if (inside(parent / out.filename(), src))
    return make_error(ErrorCode::kInvalidArgument, "the output " + in_quotes(out_folder) +
                                                       " lies inside the checkpoint folder " +
                                                       in_quotes(ckpt.folder()) + "; choose a path outside it");
  if (!fs::is_directory(parent, ec))
    return make_error(ErrorCode::kNotFound,
                      "the output's parent folder " + in_quotes(out.parent_path().string()) + " does not exist");

  std::string tmpl = (parent / (out.filename().string() + ".tmp-XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr)
    return fs_error("cannot create a folder next to " + in_quotes(out_folder),
                    std::error_code(errno, std::generic_category()));
  const fs::path tmp = buf.data();
  FolderGuard guard(tmp.string());

  const fs::path changed = fs::canonical(store.file().path(), ec);
  if (ec) return fs_error("cannot resolve " + in_quotes(store.file().path()), ec);
  int64_t linked = 0;
  bool changed_written = false;
  // Real subfolders are copied; links to folders are not followed (a link to
  // "." or ".." would copy the folder into itself, or the output into
  // itself); links to files are copied as the file they reach (a Hugging Face
  // cache is made of links into its blobs/ folder). Anything else is skipped
  // and named in `skipped`.
  for (auto it = fs::recursive_directory_iterator(src, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path rel = it->path().lexically_relative(src);
    const fs::path dst = tmp / rel;
    const fs::file_status own = it->symlink_status(ec);
    if (ec) return fs_error("cannot read " + in_quotes(it->path().string()), ec);
    if (fs::is_directory(own)) {
      fs::create_directories(dst, ec);
      if (ec) return fs_error("cannot create " + in_quotes(dst.string()), ec);
      continue;
    }
    const fs::file_status target = it->status(ec);
    ec.clear();
    const bool is_link = fs::is_symlink(own);
    if (!fs::is_regular_file(target)) {
      const char* why = is_link && fs::is_directory(target) ? "a link to a folder, not followed"
                        : is_link && !fs::exists(target)    ? "a link to nothing"
                        : fs::is_fifo(target)               ? "a FIFO"
                        : fs::is_socket(target)             ? "a socket"
                        : fs::is_block_file(target) || fs::is_character_file(target) ? "a device"
                                                                                      : "not a regular file";
      skipped.push_back(rel.string() + " (" + why + ")");
      continue;
    }
    const fs::path real = fs::canonical(it->path(), ec);
    if (ec) return fs_error("cannot resolve " + in_quotes(it->path().string()), ec);
    if (real == changed && !changed_written) {
      QEMB_RETURN_IF_ERROR(store.save(dst.string()));
      changed_written = true;
      continue;
    }
    if (link && dst.extension() == ".safetensors") {
      fs::create_hard_link(real, dst, ec);
      if (!ec) {
        ++linked;
        continue;
      }
      ec.clear();  // another file system, or links not allowed: copy instead
    }
    fs::copy_file(real, dst, ec);
    if (ec) return fs_error("cannot copy " + in_quotes(it->path().string()) + " to " + in_quotes(dst.string()), ec);
  }
  if (ec) return fs_error("cannot list " + in_quotes(src.string()), ec);
  if (!changed_written)
    return make_error(ErrorCode::kInternal, "the changed file " + in_quotes(store.file().path()) +
                                                " is not inside the checkpoint folder " + in_quotes(src.string()));
  fs::rename(tmp, out, ec);
  if (ec) return fs_error("cannot rename " + in_quotes(tmp.string()) + " to " + in_quotes(out_folder), ec);
  guard.release();
  return linked;
}

}  // namespace qemb
