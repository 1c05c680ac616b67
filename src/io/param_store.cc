#include "io/param_store.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "core/file.h"
#include "core/strings.h"

namespace qemb {

struct ParamStore::Node {
  std::map<std::string, std::unique_ptr<Node>> children;
  std::optional<size_t> tensor;  // index into file_.tensors() when a tensor ends here
};

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

template <typename Members>
std::string list_members(const Members& members) {
  constexpr size_t kMaxListed = 12;
  std::string out;
  size_t i = 0;
  for (const auto& [name, child] : members) {
    if (i == kMaxListed) {
      out += ", ... (" + std::to_string(members.size() - kMaxListed) + " more)";
      break;
    }
    out += (i++ ? ", " : "") + name;
  }
  return out;
}

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

std::vector<std::string> split_dotted_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    if (dot == std::string::npos) {
      parts.push_back(path.substr(start));
      return parts;
    }
    parts.push_back(path.substr(start, dot - start));
    start = dot + 1;
  }
}

ParamStore::ParamStore(SafetensorsFile file, std::unique_ptr<Node> root)
    : file_(std::move(file)), root_(std::move(root)) {}
ParamStore::ParamStore(ParamStore&&) noexcept = default;
ParamStore& ParamStore::operator=(ParamStore&&) noexcept = default;
ParamStore::~ParamStore() = default;

Result<ParamStore> ParamStore::open(const std::string& path) {
  QEMB_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  return from_file(std::move(file));
}

Result<ParamStore> ParamStore::from_file(SafetensorsFile file) {
  auto root = std::make_unique<Node>();
  const std::vector<SafetensorsTensor>& tensors = file.tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    Node* node = root.get();
    for (const std::string& part : split_dotted_path(tensors[i].name)) {
      std::unique_ptr<Node>& child = node->children[part];
      if (!child) child = std::make_unique<Node>();
      node = child.get();
    }
    // safetensors headers are JSON objects, so names are unique; a reader
    // that let a duplicate through must not make paths ambiguous.
    if (node->tensor)
      return make_error(ErrorCode::kParseError, "safetensors file " + quoted(file.path()) +
                                                    " names tensor " + quoted(tensors[i].name) + " twice");
    node->tensor = i;
  }
  return ParamStore(std::move(file), std::move(root));
}

std::vector<std::string> ParamStore::names() const {
  std::vector<std::string> out;
  for (const SafetensorsTensor& t : file_.tensors()) out.push_back(t.name);
  return out;
}

Result<const ParamStore::Node*> ParamStore::resolve_node(const std::string& path) const {
  const std::vector<std::string> parts = split_dotted_path(path);
  const Node* node = root_.get();
  for (size_t i = 0; i < parts.size(); ++i) {
    auto it = node->children.find(parts[i]);
    if (it != node->children.end()) {
      node = it->second.get();
      continue;
    }
    // The same explanation compile gives (core/strings.h).
    return make_error(ErrorCode::kNotFound, "no tensor " + quoted(path) + " in " + quoted(file_.path()) + ": " +
                                                explain_missing_name(path, names()));
  }
  return node;
}

Result<size_t> ParamStore::resolve(const std::string& path) const {
  if (path.empty())
    return make_error(ErrorCode::kInvalidArgument,
                      "empty tensor path; name a tensor such as " +
                          quoted(file_.tensors().empty() ? "model.embed_tokens.weight"
                                                         : file_.tensors().front().name));
  QEMB_ASSIGN_OR_RETURN(const Node* node, resolve_node(path));
  if (!node->tensor)
    return make_error(ErrorCode::kInvalidArgument,
                      quoted(path) + " in " + quoted(file_.path()) +
                          " is a module, not a tensor; its members are: " + list_members(node->children));
  return *node->tensor;
}

Result<std::vector<std::string>> ParamStore::children(const std::string& module_path) const {
  const Node* node = root_.get();
  if (!module_path.empty()) {
    QEMB_ASSIGN_OR_RETURN(node, resolve_node(module_path));
  }
  std::vector<std::string> out;
  for (const auto& [name, child] : node->children) out.push_back(name);
  return out;
}

Result<ParamInfo> ParamStore::info(const std::string& path) const {
  QEMB_ASSIGN_OR_RETURN(size_t index, resolve(path));
  const SafetensorsTensor& t = file_.tensors()[index];
  return ParamInfo{t.name, t.dtype, t.shape};
}

Result<FloatTensor> ParamStore::get(const std::string& path) const {
  QEMB_ASSIGN_OR_RETURN(size_t index, resolve(path));
  const SafetensorsTensor& t = file_.tensors()[index];
  FloatTensor out;
  out.shape = t.shape;
  auto it = replaced_.find(index);
  if (it != replaced_.end()) {
    out.values = it->second;
    return out;
  }
  QEMB_ASSIGN_OR_RETURN(out.values, file_.read_float(t.name));
  return out;
}

Status ParamStore::set(const std::string& path, FloatTensor tensor) {
  QEMB_ASSIGN_OR_RETURN(size_t index, resolve(path));
  const SafetensorsTensor& t = file_.tensors()[index];
  if (!is_float_convertible_dtype(t.dtype))
    return make_error(ErrorCode::kUnsupported, "cannot set tensor " + quoted(t.name) + " of dtype " + t.dtype +
                                                   "; only F32, F16 and BF16 tensors take float values");
  if (tensor.shape != t.shape)
    return make_error(ErrorCode::kInvalidArgument,
                      "cannot set tensor " + quoted(t.name) + " of shape " + shape_to_string(t.shape) +
                          " to values of shape " + shape_to_string(tensor.shape) + "; the shapes must match");
  if (static_cast<int64_t>(tensor.values.size()) != element_count(t.shape))
    return make_error(ErrorCode::kInvalidArgument,
                      "cannot set tensor " + quoted(t.name) + " of shape " + shape_to_string(t.shape) + " (" +
                          std::to_string(element_count(t.shape)) + " values) from " +
                          std::to_string(tensor.values.size()) + " values");
  replaced_[index] = std::move(tensor.values);
  return Status::Ok();
}

bool ParamStore::is_modified(const std::string& path) const {
  Result<size_t> index = resolve(path);
  return index.ok() && replaced_.count(*index) != 0;
}

std::vector<std::string> ParamStore::modified() const {
  std::vector<std::string> out;
  for (const auto& [index, values] : replaced_) out.push_back(file_.tensors()[index].name);
  return out;
}

Status ParamStore::save(const std::string& out_path) const {
  if (same_file(file_.path(), out_path))
    return make_error(ErrorCode::kInvalidArgument, "output " + quoted(out_path) + " is the input checkpoint " +
                                                       quoted(file_.path()) + "; choose a different output path");
  if (replaced_.size() == 1) {
    const auto& [index, values] = *replaced_.begin();
    return copy_with_replaced_tensor(file_, file_.tensors()[index].name, values.data(), out_path);
  }
  // Several (or no) replaced tensors: the same byte-preserving copy, one
  // replaced span after another. Tensors are sorted by offset, and so is
  // replaced_ (indices into that order).
  QEMB_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> out, AtomicFileWriter::create(out_path));
  uint64_t copied_up_to = 0;
  for (const auto& [index, values] : replaced_) {
    const SafetensorsTensor& t = file_.tensors()[index];
    QEMB_ASSIGN_OR_RETURN(std::vector<uint8_t> encoded,
                          floats_to_dtype_bytes(values.data(), values.size(), t.dtype));
    if (encoded.size() != t.byte_size())
      return make_error(ErrorCode::kInternal, "encoded size of " + quoted(t.name) + " does not match the file");
    QEMB_RETURN_IF_ERROR(out->write(file_.data() + copied_up_to, t.begin - copied_up_to));
    QEMB_RETURN_IF_ERROR(out->write(encoded.data(), encoded.size()));
    copied_up_to = t.end;
  }
  QEMB_RETURN_IF_ERROR(out->write(file_.data() + copied_up_to, file_.file_size() - copied_up_to));
  return out->commit();
}

}  // namespace qemb
