#include "qemb/checkpoint.h"

#include <fnmatch.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "core/file.h"
#include "core/file_kind.h"
#include "core/json_text.h"
#include "core/strings.h"

namespace qemb {

namespace fs = std::filesystem;

namespace {

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

// An index larger than this is refused (real ones are well under 1 MiB).
constexpr uint64_t kMaxIndexBytes = 100ull << 20;
// Deeper JSON in an index or config.json is refused before anything recurses over it.
constexpr int kMaxIndexDepth = 16;
constexpr size_t kMaxListed = 20;
// An index naming more distinct shard files than this is refused.
constexpr size_t kMaxShards = 100000;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool has_suffix_component(const std::string& name, const std::string& suffix) {
  return name == suffix || ends_with(name, "." + suffix);
}

bool is_embedding_name(const std::string& name) {
  for (const std::string& s : embedding_name_suffixes())
    if (has_suffix_component(name, s)) return true;
  return false;
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kMaxListed; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kMaxListed) out += ", ... and " + std::to_string(names.size() - kMaxListed) + " more";
  return out;
}

bool is_glob(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

Result<std::string> read_small_file(const std::string& path, uint64_t limit) {
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return make_error(ErrorCode::kNotFound, "cannot read " + in_quotes(path) + ": " + ec.message());
  if (size > limit)
    return make_error(ErrorCode::kParseError, in_quotes(path) + " is " + std::to_string(size) + " bytes, over the " +
                                                  std::to_string(limit) + "-byte limit for an index");
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kIoError, "cannot open " + in_quotes(path));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// config.json next to the checkpoint says "tie_word_embeddings": false. No
// config.json is "not untied"; one that cannot be read, does not parse, or
// gives the key a value that is not true or false is an error naming it:
// guessing would compile lm_head.weight as the input embedding.
Result<bool> config_unties(const std::string& folder) {
  if (folder.empty()) return false;
  const std::string path = (fs::path(folder) / "config.json").string();
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return false;
  auto bad = [&](const std::string& what) {
    return make_error(ErrorCode::kParseError,
                      in_quotes(path) + " " + what +
                          "; it decides whether lm_head.weight is the input embedding (\"tie_word_embeddings\"): "
                          "fix the file, or name the table with CompileOptions.tensor");
  };
  auto text = read_small_file(path, 16ull << 20);
  if (!text.ok()) return bad("cannot be read (" + text.error().message + ")");
  JsonProblem problem;
  const nlohmann::json config = parse_json_strict(*text, kMaxIndexDepth, problem);
  if (problem.kind == JsonProblem::Kind::kSyntax) return bad("is not valid JSON (" + problem.detail + ")");
  if (problem.kind == JsonProblem::Kind::kTooDeep)
    return bad("nests JSON deeper than " + std::to_string(kMaxIndexDepth) + " levels");
  if (problem.kind == JsonProblem::Kind::kDuplicateKey) return bad("repeats the key " + in_quotes(problem.detail));
  if (!config.is_object()) return bad("is not a JSON object");
  auto it = config.find("tie_word_embeddings");
  if (it == config.end()) return false;
  if (!it->is_boolean())
    return bad("gives \"tie_word_embeddings\" the value " + it->dump() + ", not true or false");
  return !it->get<bool>();
}

}  // namespace

const char* to_string(CheckpointFormat format) {
  switch (format) {
    case CheckpointFormat::kSafetensors: return "safetensors";
    case CheckpointFormat::kShardedSafetensors: return "sharded safetensors";
    case CheckpointFormat::kGguf: return "gguf";
    case CheckpointFormat::kPytorch: return "pytorch";
    case CheckpointFormat::kShardedPytorch: return "sharded pytorch";
    case CheckpointFormat::kNpy: return "npy";
    case CheckpointFormat::kNpz: return "npz";
  }
  return "?";
}

struct Checkpoint::State {
  CheckpointFormat format = CheckpointFormat::kSafetensors;
  std::string path, folder, index_path, file;
  // Sharded: tensor -> shard file name, sorted by tensor name.
  std::vector<std::pair<std::string, std::string>> weight_map;
  std::map<std::string, std::string> shard_of;
  std::vector<std::string> shards;  // distinct, sorted by name
  std::shared_ptr<const GgufFile> gguf;
  std::mutex mu;  // guards `mapped`
  std::map<std::string, std::shared_ptr<const SafetensorsFile>> mapped;  // by shard file name (or the lone file)
  // PyTorch and NumPy files, by shard file name (or "" for the lone file); guarded by `mu`.
  std::map<std::string, std::shared_ptr<const TensorFile>> tensor_files;
  TensorFileKind lone_kind = TensorFileKind::kPytorchZip;

  std::string shard_path(const std::string& shard) const { return (fs::path(folder) / shard).string(); }
};

namespace {

Status parse_index(Checkpoint::State& s) {
  QEMB_ASSIGN_OR_RETURN(std::string text, read_small_file(s.index_path, kMaxIndexBytes));
  auto bad = [&](const std::string& what) {
    return make_error(ErrorCode::kParseError, "index " + in_quotes(s.index_path) + ": " + what);
  };
  // A real index nests 2 levels (top, weight_map); a tensor listed twice
  // would have two shards, so repeated keys are refused, not resolved.
  JsonProblem problem;
  const nlohmann::json j = parse_json_strict(text, kMaxIndexDepth, problem);
  switch (problem.kind) {
    case JsonProblem::Kind::kNone: break;
    case JsonProblem::Kind::kSyntax: return bad("not valid JSON (" + problem.detail + ")");
    case JsonProblem::Kind::kTooDeep:
      return bad("nests JSON deeper than " + std::to_string(kMaxIndexDepth) + " levels");
    case JsonProblem::Kind::kDuplicateKey:
      return bad(problem.depth == 2 ? "\"weight_map\" lists " + in_quotes(problem.detail) + " more than once"
                                    : "repeats the key " + in_quotes(problem.detail));
  }
  if (!j.is_object()) return bad("the top level must be a JSON object");
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) return bad("has no \"weight_map\" object (tensor name -> shard file)");
  if (wm->empty()) return bad("\"weight_map\" is empty");
  // Shards are named by relative paths without "..", resolved inside the
  // index's folder; what is found there may be a symbolic link to a file
  // anywhere (a Hugging Face cache's snapshot links into its blobs/ folder).
  std::set<std::string> distinct;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string()) return bad("\"weight_map\" entry " + in_quotes(it.key()) + " is not a file name string");
    const std::string shard = it->get<std::string>();
    const fs::path p(shard);
    bool escapes = shard.empty() || p.is_absolute();
    for (const auto& part : p)
      if (part == "..") escapes = true;
    if (escapes)
      return bad("\"weight_map\" places " + in_quotes(it.key()) + " in " + in_quotes(shard) +
                 "; shards must be named inside the index's folder (a relative path without '..'); the file "
                 "found there may be a symbolic link to a file anywhere");
    s.weight_map.emplace_back(it.key(), shard);
    s.shard_of.emplace(it.key(), shard);
    if (distinct.insert(shard).second && distinct.size() > kMaxShards)
      return bad("\"weight_map\" names more than " + std::to_string(kMaxShards) +
                 " distinct shard files; no real checkpoint has that many (the largest have a few hundred)");
  }
  s.shards.assign(distinct.begin(), distinct.end());  // sorted
  for (const std::string& shard : s.shards) {
    std::error_code ec;
    const fs::file_status st = fs::status(s.shard_path(shard), ec);
    if (fs::exists(st) && !fs::is_regular_file(st))
      return make_error(ErrorCode::kInvalidArgument,
                        "index " + in_quotes(s.index_path) + " names shard " + in_quotes(shard) + ", which is " +
                            (fs::is_directory(st) ? "a folder" : fs::is_fifo(st) ? "a FIFO" : "a special file") +
                            ", not a regular file; shards are memory-mapped, so each must be a regular file (or "
                            "a link to one)");
    if (!fs::is_regular_file(st))
      return make_error(ErrorCode::kNotFound, "index " + in_quotes(s.index_path) + " names shard " + in_quotes(shard) +
                                                  ", which is not in " + in_quotes(s.folder) +
                                                  "; the checkpoint is incomplete (download the missing shard)");
  }
  return Status::Ok();
}

bool is_lone_tensor_file(CheckpointFormat f) {
  return f == CheckpointFormat::kPytorch || f == CheckpointFormat::kNpy || f == CheckpointFormat::kNpz;
}

bool is_torch_name(const std::string& name) {
  return ends_with(name, ".bin") || ends_with(name, ".pt") || ends_with(name, ".pth");
}

// The form of the file at `path` when it is a PyTorch or NumPy file, by its
// magic; a .bin/.pt/.pth/.npy/.npz name with no known magic is an error.
Result<bool> sniff_lone_file(Checkpoint::State& s) {
  std::error_code ec;
  if (!fs::is_regular_file(s.file, ec)) return false;
  uint8_t head[16] = {};
  std::ifstream in(s.file, std::ios::binary);
  in.read(reinterpret_cast<char*>(head), sizeof head);
  const size_t got = static_cast<size_t>(in.gcount());
  // An artifact given where a checkpoint belongs: say which command reads it.
  if (file_kind_of(head, got) == FileKind::kArtifact)
    return make_error(ErrorCode::kInvalidArgument, checkpoint_instead_hint(s.file));
  TensorFileKind kind;
  if (sniff_tensor_file(head, got, s.file, &kind)) {
    s.lone_kind = kind;
    s.format = kind == TensorFileKind::kNpy   ? CheckpointFormat::kNpy
               : kind == TensorFileKind::kNpz ? CheckpointFormat::kNpz
                                              : CheckpointFormat::kPytorch;
    return true;
  }
  if (is_torch_name(s.file))
    return make_error(ErrorCode::kParseError,
                      in_quotes(s.file) + " starts with neither a zip header (torch.save) nor the legacy torch.save "
                                          "magic number; not a PyTorch checkpoint (or it is truncated)");
  if (ends_with(s.file, ".npy") || ends_with(s.file, ".npz"))
    return make_error(ErrorCode::kParseError, in_quotes(s.file) + " starts with neither the .npy magic \\x93NUMPY "
                                                                  "nor a zip header; not a NumPy file");
  return false;
}

// A folder of PyTorch files: its pytorch_model.bin.index.json (or one other
// *.bin.index.json), else its pytorch_model.bin, else its one .bin/.pt/.pth.
Status open_pytorch_folder(Checkpoint::State& s) {
  std::vector<std::string> indexes, files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(s.path, ec)) {
    if (!e.is_regular_file(ec)) continue;
    const std::string name = e.path().filename().string();
    if (ends_with(name, ".index.json") && is_torch_name(name.substr(0, name.size() - 11))) indexes.push_back(name);
    else if (is_torch_name(name)) files.push_back(name);
  }
  std::sort(indexes.begin(), indexes.end());
  std::sort(files.begin(), files.end());
  if (std::find(indexes.begin(), indexes.end(), "pytorch_model.bin.index.json") != indexes.end())
    indexes = {"pytorch_model.bin.index.json"};
  if (indexes.size() > 1)
    return make_error(ErrorCode::kInvalidArgument, "folder " + in_quotes(s.path) + " holds several indexes (" +
                                                       join_names(indexes) + "); pass the one to use");
  if (indexes.size() == 1) {
    s.format = CheckpointFormat::kShardedPytorch;
    s.index_path = (fs::path(s.path) / indexes[0]).string();
    return parse_index(s);
  }
  if (std::find(files.begin(), files.end(), "pytorch_model.bin") != files.end()) files = {"pytorch_model.bin"};
  if (files.size() > 1)
    return make_error(ErrorCode::kInvalidArgument,
                      "folder " + in_quotes(s.path) + " holds several PyTorch files (" + join_names(files) +
                          ") but no pytorch_model.bin.index.json saying which tensor is in which; pass one file");
  if (files.size() == 1) {
    s.file = (fs::path(s.path) / files[0]).string();
    QEMB_ASSIGN_OR_RETURN(bool known, sniff_lone_file(s));
    if (!known || s.format != CheckpointFormat::kPytorch)
      return make_error(ErrorCode::kParseError, in_quotes(s.file) + " is not a torch.save checkpoint");
    return Status::Ok();
  }
  return make_error(ErrorCode::kNotFound, "folder " + in_quotes(s.path) +
                                              " holds no model.safetensors.index.json, .safetensors or .gguf file "
                                              "(nor pytorch_model.bin.index.json, .bin, .pt or .pth)");
}

// The checkpoint inside a folder: its index, else its one safetensors file,
// else its one GGUF file.
Status open_folder(Checkpoint::State& s) {
  s.folder = s.path;
  std::vector<std::string> indexes, safetensors, ggufs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(s.path, ec)) {
    if (!e.is_regular_file(ec)) continue;
    const std::string name = e.path().filename().string();
    if (ends_with(name, ".safetensors.index.json")) indexes.push_back(name);
    else if (ends_with(name, ".safetensors")) safetensors.push_back(name);
    else if (ends_with(name, ".gguf")) ggufs.push_back(name);
  }
  if (ec) return make_error(ErrorCode::kIoError, "cannot list folder " + in_quotes(s.path) + ": " + ec.message());
  std::sort(indexes.begin(), indexes.end());
  std::sort(safetensors.begin(), safetensors.end());
  std::sort(ggufs.begin(), ggufs.end());
  const auto join = [&](const std::vector<std::string>& v) { return join_names(v); };
  if (std::find(indexes.begin(), indexes.end(), kSafetensorsIndexName) != indexes.end()) {
    indexes = {kSafetensorsIndexName};
  }
  if (indexes.size() > 1)
    return make_error(ErrorCode::kInvalidArgument, "folder " + in_quotes(s.path) + " holds several indexes (" +
                                                       join(indexes) + "); pass the one to use");
  if (indexes.size() == 1) {
    s.format = CheckpointFormat::kShardedSafetensors;
    s.index_path = (fs::path(s.path) / indexes[0]).string();
    return parse_index(s);
  }
  if (safetensors.size() == 1) {
    s.format = CheckpointFormat::kSafetensors;
    s.file = (fs::path(s.path) / safetensors[0]).string();
    return Status::Ok();
  }
  if (safetensors.size() > 1)
    return make_error(ErrorCode::kInvalidArgument,
                      "folder " + in_quotes(s.path) + " holds several .safetensors files (" + join(safetensors) +
                          ") but no model.safetensors.index.json saying which tensor is in which; pass one file");
  if (ggufs.size() == 1) {
    s.format = CheckpointFormat::kGguf;
    s.file = (fs::path(s.path) / ggufs[0]).string();
    return Status::Ok();
  }
  if (ggufs.size() > 1)
    return make_error(ErrorCode::kInvalidArgument,
                      "folder " + in_quotes(s.path) + " holds several .gguf files (" + join(ggufs) + "); pass one");
  return open_pytorch_folder(s);
}

}  // namespace

Result<Checkpoint> Checkpoint::open(const std::string& path) {
  auto s = std::make_shared<State>();
  s->path = path;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st)) {
    QEMB_RETURN_IF_ERROR(open_folder(*s));
  } else if (ends_with(path, ".json")) {
    s->format = CheckpointFormat::kShardedSafetensors;
    s->index_path = path;
    const fs::path parent = fs::path(path).parent_path();
    s->folder = parent.empty() ? "." : parent.string();
    QEMB_RETURN_IF_ERROR(parse_index(*s));
    if (std::all_of(s->shards.begin(), s->shards.end(), [](const std::string& f) { return is_torch_name(f); }))
      s->format = CheckpointFormat::kShardedPytorch;
  } else {
    s->file = path;
    // A PyTorch or NumPy file by its magic (then s->format says which).
    bool tensor_file = false;
    if (fs::is_regular_file(st) && !ends_with(path, ".gguf") && !ends_with(path, ".safetensors")) {
      QEMB_ASSIGN_OR_RETURN(tensor_file, sniff_lone_file(*s));
    }
    if (!tensor_file) {
      char magic[4] = {};
      std::ifstream in;
      // Only a regular file is sniffed: a FIFO would block or lose its bytes;
      // the readers refuse anything else with a clear message.
      if (fs::is_regular_file(st)) in.open(path, std::ios::binary);
      if (in) in.read(magic, 4);
      // A missing file is left to the safetensors reader, whose error names it.
      const bool gguf = ends_with(path, ".gguf") || (in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0);
      s->format = gguf ? CheckpointFormat::kGguf : CheckpointFormat::kSafetensors;
    }
  }
  if (s->format == CheckpointFormat::kGguf) {
    QEMB_ASSIGN_OR_RETURN(GgufFile g, GgufFile::open(s->file));
    s->gguf = std::make_shared<const GgufFile>(std::move(g));
  } else if (s->format == CheckpointFormat::kSafetensors) {
    QEMB_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(s->file));
    s->mapped.emplace("", std::make_shared<const SafetensorsFile>(std::move(f)));
  } else if (is_lone_tensor_file(s->format)) {
    QEMB_ASSIGN_OR_RETURN(TensorFile f, TensorFile::open(s->file, s->lone_kind));
    s->tensor_files.emplace("", std::make_shared<const TensorFile>(std::move(f)));
  }
  return Checkpoint(std::move(s));
}

CheckpointFormat Checkpoint::format() const { return s_->format; }
const std::string& Checkpoint::path() const { return s_->path; }
const std::string& Checkpoint::folder() const { return s_->folder; }
const std::string& Checkpoint::index_path() const { return s_->index_path; }
const std::string& Checkpoint::file() const {
  return s_->format == CheckpointFormat::kShardedSafetensors || s_->format == CheckpointFormat::kShardedPytorch
             ? s_->index_path
             : s_->file;
}
const GgufFile* Checkpoint::gguf() const { return s_->gguf.get(); }

Result<std::shared_ptr<const SafetensorsFile>> Checkpoint::lone_safetensors() const {
  if (s_->format != CheckpointFormat::kSafetensors)
    return make_error(ErrorCode::kUnsupported, in_quotes(s_->path) + " is a " + to_string(s_->format) +
                                                   " checkpoint, not one safetensors file");
  return s_->mapped.at("");
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> names;
  switch (s_->format) {
    case CheckpointFormat::kShardedSafetensors:
      for (const auto& [name, shard] : s_->weight_map) names.push_back(name);
      break;
    case CheckpointFormat::kGguf:
      for (const GgufTensor& t : s_->gguf->tensors()) names.push_back(t.name);
      break;
    case CheckpointFormat::kSafetensors:
      for (const SafetensorsTensor& t : s_->mapped.at("")->tensors()) names.push_back(t.name);
      break;
    case CheckpointFormat::kShardedPytorch:
      for (const auto& [name, shard] : s_->weight_map) names.push_back(name);
      break;
    case CheckpointFormat::kPytorch:
    case CheckpointFormat::kNpy:
    case CheckpointFormat::kNpz:
      for (const FileTensor& t : s_->tensor_files.at("")->tensors()) names.push_back(t.name);
      break;
  }
  return names;
}

std::vector<std::string> Checkpoint::shard_files() const { return s_->shards; }

Result<std::string> Checkpoint::file_of(const std::string& name) const {
  bool found = false;
  std::string file = s_->file;
  if (s_->format == CheckpointFormat::kShardedSafetensors || s_->format == CheckpointFormat::kShardedPytorch) {
    auto it = s_->shard_of.find(name);
    if (it != s_->shard_of.end()) {
      found = true;
      file = s_->shard_path(it->second);
    }
  } else if (s_->format == CheckpointFormat::kGguf) {
    found = s_->gguf->find(name) != nullptr;
  } else if (is_lone_tensor_file(s_->format)) {
    found = s_->tensor_files.at("")->find(name) != nullptr;
  } else {
    found = s_->mapped.at("")->find(name) != nullptr;
  }
  if (!found) {
    return make_error(ErrorCode::kNotFound, "no tensor " + in_quotes(name) + " in " + in_quotes(this->file()) + ": " +
                                                explain_missing_name(name, tensor_names()));
  }
  return file;
}

namespace {
// A shard (safetensors or torch.save) must hold exactly what the index places
// in it: every tensor the index puts there, and no tensor it lists elsewhere
// or not at all.
template <typename File>
Status check_shard_agrees(const Checkpoint::State& s, const std::string& shard, const File& f) {
  for (const auto& [tensor, where] : s.weight_map)
    if (where == shard && f.find(tensor) == nullptr)
      return make_error(ErrorCode::kParseError, "index " + in_quotes(s.index_path) + " places tensor " +
                                                    in_quotes(tensor) + " in shard " + in_quotes(shard) +
                                                    ", but that shard does not hold it; the index and its shards "
                                                    "disagree (re-download the checkpoint)");
  for (const auto& t : f.tensors()) {
    auto it = s.shard_of.find(t.name);
    if (it == s.shard_of.end() || it->second != shard)
      return make_error(ErrorCode::kParseError,
                        "shard " + in_quotes(shard) + " holds tensor " + in_quotes(t.name) + ", which index " +
                            in_quotes(s.index_path) +
                            (it == s.shard_of.end() ? " does not list" : " places in " + in_quotes(it->second)) +
                            "; the index and its shards disagree");
  }
  return Status::Ok();
}
}  // namespace

Result<std::shared_ptr<const SafetensorsFile>> Checkpoint::safetensors_of(const std::string& name) const {
  if (s_->format == CheckpointFormat::kGguf)
    return make_error(ErrorCode::kUnsupported, in_quotes(s_->file) + " is a GGUF file, not safetensors");
  if (s_->format != CheckpointFormat::kSafetensors && s_->format != CheckpointFormat::kShardedSafetensors)
    return make_error(ErrorCode::kUnsupported, in_quotes(file()) + " is a " + to_string(s_->format) +
                                                   " checkpoint, not safetensors");
  QEMB_RETURN_IF_ERROR(file_of(name).status());
  if (s_->format == CheckpointFormat::kSafetensors) return s_->mapped.at("");
  const std::string shard = s_->shard_of.at(name);
  std::lock_guard<std::mutex> lock(s_->mu);
  if (auto it = s_->mapped.find(shard); it != s_->mapped.end()) return it->second;
  const std::string shard_path = s_->shard_path(shard);
  QEMB_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(shard_path));
  QEMB_RETURN_IF_ERROR(check_shard_agrees(*s_, shard, f));
  auto shared = std::make_shared<const SafetensorsFile>(std::move(f));
  s_->mapped.emplace(shard, shared);
  return shared;
}

Result<std::shared_ptr<const TensorFile>> Checkpoint::tensor_file_of(const std::string& name) const {
  if (!is_lone_tensor_file(s_->format) && s_->format != CheckpointFormat::kShardedPytorch)
    return make_error(ErrorCode::kUnsupported, in_quotes(file()) + " is a " + to_string(s_->format) +
                                                   " checkpoint, not a PyTorch or NumPy file");
  QEMB_RETURN_IF_ERROR(file_of(name).status());
  if (is_lone_tensor_file(s_->format)) return s_->tensor_files.at("");
  const std::string shard = s_->shard_of.at(name);
  std::lock_guard<std::mutex> lock(s_->mu);
  if (auto it = s_->tensor_files.find(shard); it != s_->tensor_files.end()) return it->second;
  const std::string shard_path = s_->shard_path(shard);
  uint8_t head[16] = {};
  {
    std::ifstream in(shard_path, std::ios::binary);
    in.read(reinterpret_cast<char*>(head), sizeof head);
    TensorFileKind kind;
    if (!sniff_tensor_file(head, static_cast<size_t>(in.gcount()), shard_path, &kind) ||
        kind == TensorFileKind::kNpy || kind == TensorFileKind::kNpz)
      return make_error(ErrorCode::kParseError, "shard " + in_quotes(shard_path) +
                                                    " of index " + in_quotes(s_->index_path) +
                                                    " is not a torch.save checkpoint");
    QEMB_ASSIGN_OR_RETURN(TensorFile f, TensorFile::open(shard_path, kind));
    QEMB_RETURN_IF_ERROR(check_shard_agrees(*s_, shard, f));
    auto shared = std::make_shared<const TensorFile>(std::move(f));
    s_->tensor_files.emplace(shard, shared);
    return shared;
  }
}

Result<CheckpointTensorInfo> Checkpoint::info(const std::string& name) const {
  CheckpointTensorInfo info;
  info.name = name;
  if (is_lone_tensor_file(s_->format) || s_->format == CheckpointFormat::kShardedPytorch) {
    QEMB_ASSIGN_OR_RETURN(std::shared_ptr<const TensorFile> f, tensor_file_of(name));
    const FileTensor* t = f->find(name);
    info.dtype = t->dtype;
    info.shape = t->shape;
    info.file = f->path();
    return info;
  }
  if (s_->format == CheckpointFormat::kGguf) {
    const GgufTensor* t = s_->gguf->find(name);
    if (t == nullptr) return file_of(name).status();
    info.dtype = t->type;
    info.shape = t->shape;
    info.file = s_->file;
    return info;
  }
  QEMB_ASSIGN_OR_RETURN(std::shared_ptr<const SafetensorsFile> f, safetensors_of(name));
  const SafetensorsTensor* t = f->find(name);
  info.dtype = t->dtype;
  info.shape = t->shape;
  info.file = f->path();
  return info;
}

Result<std::string> Checkpoint::find_embedding(const std::string& explicit_name) const {
  std::string name;
  const bool numpy = s_->format == CheckpointFormat::kNpy || s_->format == CheckpointFormat::kNpz;
  if (s_->format == CheckpointFormat::kSafetensors) {
    QEMB_ASSIGN_OR_RETURN(name, find_embedding_tensor(*s_->mapped.at(""), explicit_name));
  } else if (numpy && explicit_name.empty()) {
    // An array file names no embedding: its one array is the table.
    const std::vector<std::string> names = tensor_names();
    if (names.size() > 1)
      return make_error(ErrorCode::kInvalidArgument, in_quotes(file()) + " holds several arrays (" +
                                                         join_names(names) +
                                                         "). Pass CompileOptions.tensor = NAME to choose one");
    QEMB_ASSIGN_OR_RETURN(CheckpointTensorInfo info, info(names[0]));
    if (info.shape.size() != 2)
      return make_error(ErrorCode::kUnsupported, "array " + in_quotes(names[0]) + " in " + in_quotes(file()) +
                                                     " has shape " + shape_to_string(info.shape) +
                                                     "; an embedding table must be 2-D [vocab, dim]");
    return names[0];
  } else if (!explicit_name.empty()) {
    QEMB_ASSIGN_OR_RETURN(CheckpointTensorInfo info, info(explicit_name));
    if (info.shape.size() != 2)
      return make_error(ErrorCode::kUnsupported, "tensor " + in_quotes(explicit_name) + " in " + in_quotes(info.file) +
                                                     " has shape " + shape_to_string(info.shape) +
                                                     "; an embedding table must be 2-D [vocab, dim]");
    return explicit_name;
  } else {
    // Only the shards that hold a candidate are mapped.
    std::vector<std::string> matches, tied;
    for (const std::string& n : tensor_names()) {
      const bool embed = is_embedding_name(n), head = has_suffix_component(n, "lm_head.weight");
      if (!embed && !head) continue;
      QEMB_ASSIGN_OR_RETURN(CheckpointTensorInfo info, info(n));
      if (info.shape.size() != 2) continue;
      (embed ? matches : tied).push_back(n);
    }
    if (matches.size() > 1)
      return make_error(ErrorCode::kInvalidArgument, "several embedding tables in " + in_quotes(file()) + ": " +
                                                         join_names(matches) + ". Pass CompileOptions.tensor = NAME to choose one");
    if (matches.empty() && tied.size() == 1) {
      name = tied[0];
    } else if (matches.empty()) {
      return make_error(ErrorCode::kNotFound,
                        "no embedding table found in " + in_quotes(file()) +
                            " (looked for a 2-D tensor named *embed_tokens.weight, *tok_embeddings.weight, "
                            "*tok_embedding.weight, *wte.weight, *word_embeddings.weight or *token_embd.weight, "
                            "or a tied model's *lm_head.weight); tensors: " +
                            join_names(tensor_names()) + ". Pass CompileOptions.tensor = NAME");
    } else {
      name = matches[0];
    }
  }
  bool untied = false;
  if (explicit_name.empty() && has_suffix_component(name, "lm_head.weight")) {
    QEMB_ASSIGN_OR_RETURN(untied, config_unties(s_->folder));
  }
  if (untied)
    return make_error(ErrorCode::kNotFound,
                      "no input embedding in " + in_quotes(file()) + ": only " + in_quotes(name) +
                          ", and config.json says \"tie_word_embeddings\": false, so it is not the input "
                          "embedding. Pass CompileOptions.tensor = " + name + " to quantize it anyway");
  return name;
}

Result<std::vector<std::string>> Checkpoint::select_tables(const std::vector<std::string>& specs) const {
  std::vector<std::string> out;
  if (specs.empty()) {
    QEMB_ASSIGN_OR_RETURN(std::string name, find_embedding(""));
    out.push_back(name);
    return out;
  }
  std::set<std::string> seen;
  const std::vector<std::string> names = tensor_names();
  for (const std::string& spec : specs) {
    std::vector<std::string> hits;
    if (is_glob(spec)) {
      for (const std::string& n : names)
        if (::fnmatch(spec.c_str(), n.c_str(), 0) == 0) hits.push_back(n);
      // The checkpoint's order (tensor_names: the index's, or the file's),
      // so that a recommender's tables come out as the model lists them.
      // A name may hold glob characters itself; else the pattern matched nothing.
      if (hits.empty() && std::find(names.begin(), names.end(), spec) == names.end())
        return make_error(ErrorCode::kNotFound, "no tensor " + in_quotes(spec) + " in " + in_quotes(file()) +
                                                    " and no name matches it as a pattern: " +
                                                    explain_missing_name(spec, names));
      if (hits.empty()) hits.push_back(spec);
    } else {
      hits.push_back(spec);
    }
    for (const std::string& n : hits) {
      QEMB_ASSIGN_OR_RETURN(std::string name, find_embedding(n));  // checks presence and rank
      if (seen.insert(name).second) out.push_back(name);
    }
  }
  return out;
}

Result<std::vector<NamedTable>> Checkpoint::select_named_tables(const std::vector<std::string>& specs) const {
  // Each spec names one table, or (a glob) several; `alias` the one it names.
  struct Spec {
    std::string pattern, alias;
  };
  std::vector<Spec> parsed;
  const std::vector<std::string> names = tensor_names();
  for (const std::string& spec : specs) {
    const size_t eq = spec.rfind('=');
    // A tensor whose own name holds '=' is taken whole.
    if (eq == std::string::npos || std::find(names.begin(), names.end(), spec) != names.end()) {
      parsed.push_back({spec, ""});
      continue;
    }
    Spec s{spec.substr(0, eq), spec.substr(eq + 1)};
    if (s.pattern.empty())
      return make_error(ErrorCode::kInvalidArgument,
                        "table spec " + in_quotes(spec) + " names no tensor before '='; write TENSOR=NAME");
    if (s.alias.empty())
      return make_error(ErrorCode::kInvalidArgument,
                        "table spec " + in_quotes(spec) + " gives an empty name after '='; write TENSOR=NAME");
    parsed.push_back(std::move(s));
  }
  std::vector<NamedTable> out;
  std::map<std::string, std::string> taken;  // table name -> the tensor it names
  for (const Spec& s : parsed) {
    QEMB_ASSIGN_OR_RETURN(std::vector<std::string> hits, select_tables({s.pattern}));
    if (!s.alias.empty() && hits.size() > 1)
      return make_error(ErrorCode::kInvalidArgument,
                        "table spec " + in_quotes(s.pattern + "=" + s.alias) + " gives the name " +
                            in_quotes(s.alias) + " to " + std::to_string(hits.size()) + " tensors (" +
                            join_names(hits) + "); a name is for one table: give each tensor its own TENSOR=NAME");
    for (const std::string& tensor : hits) {
      if (std::any_of(out.begin(), out.end(), [&](const NamedTable& t) { return t.tensor == tensor; })) {
        if (!s.alias.empty())
          return make_error(ErrorCode::kInvalidArgument,
                            "tensor " + in_quotes(tensor) + " is selected twice, the second time as " +
                                in_quotes(s.alias) + "; select each tensor once");
        continue;  // a glob's repeat, as select_tables
      }
      NamedTable t{tensor, s.alias.empty() ? tensor : s.alias};
      auto [it, fresh] = taken.emplace(t.name, tensor);
      if (!fresh)
        return make_error(ErrorCode::kInvalidArgument,
                          "two tables are both named " + in_quotes(t.name) + " (tensors " + in_quotes(it->second) +
                              " and " + in_quotes(tensor) + "); table names must be unique");
      out.push_back(std::move(t));
    }
  }
  if (specs.empty()) {
    QEMB_ASSIGN_OR_RETURN(std::vector<std::string> detected, select_tables({}));
    out.push_back({detected[0], detected[0]});
  }
  return out;
}

Result<CheckpointTable> Checkpoint::table(const std::string& name) const {
  QEMB_ASSIGN_OR_RETURN(CheckpointTensorInfo info, info(name));
  if (info.shape.size() != 2)
    return make_error(ErrorCode::kUnsupported, "tensor " + in_quotes(name) + " has shape " +
                                                   shape_to_string(info.shape) +
                                                   "; an embedding table must be 2-D [vocab, dim]");
  CheckpointTable t;
  t.info_ = info;
  if (s_->format == CheckpointFormat::kGguf) {
    if (!is_gguf_float_readable(info.dtype))
      return make_error(ErrorCode::kUnsupported, "tensor " + in_quotes(name) + " has GGUF type " + info.dtype +
                                                     "; qemb reads " + gguf_readable_types() + " tables");
    t.gguf_ = s_->gguf;
    t.gguf_tensor_ = s_->gguf->find(name);
    t.row_bytes_ = info.shape[0] > 0 ? t.gguf_tensor_->byte_size() / static_cast<uint64_t>(info.shape[0]) : 0;
  } else if (is_lone_tensor_file(s_->format) || s_->format == CheckpointFormat::kShardedPytorch) {
    if (!is_float_convertible_dtype(info.dtype))
      return make_error(ErrorCode::kUnsupported, "tensor '" + name + "' in " + in_quotes(info.file) + " has dtype " +
                                                     info.dtype + "; qemb reads F32, F16 and BF16 embeddings");
    QEMB_ASSIGN_OR_RETURN(t.tf_, tensor_file_of(name));
    t.tf_tensor_ = t.tf_->find(name);
    t.row_bytes_ = static_cast<uint64_t>(info.shape[1]) * static_cast<uint64_t>(t.tf_tensor_->item_size);
  } else {
    if (!is_float_convertible_dtype(info.dtype))
      return make_error(ErrorCode::kUnsupported, "tensor '" + name + "' has dtype " + info.dtype +
                                                     "; qemb reads F32, F16 and BF16 embeddings");
    QEMB_ASSIGN_OR_RETURN(t.st_, safetensors_of(name));
    t.st_tensor_ = t.st_->find(name);
    t.row_bytes_ = info.shape[0] > 0 ? t.st_tensor_->byte_size() / static_cast<uint64_t>(info.shape[0]) : 0;
  }
  return t;
}

bool CheckpointTable::source_quantized() const { return gguf_ != nullptr && is_gguf_quantized(info_.dtype); }

Status CheckpointTable::read_rows(int64_t begin, int64_t end, float* out) const {
  if (gguf_) return gguf_->read_rows_float(*gguf_tensor_, begin, end, out);
  if (tf_) return tf_->read_rows_float(*tf_tensor_, begin, end, out);
  return st_->read_rows_float(*st_tensor_, begin, end, out);
}

const float* CheckpointTable::rows_in_place(int64_t begin, int64_t end) const {
  if (gguf_ || info_.dtype != "F32" || begin < 0 || end < begin || end > rows()) return nullptr;
  const uint8_t* base = in_place_base();
  if (base == nullptr) return nullptr;
  const uint8_t* at = base + static_cast<uint64_t>(begin) * row_bytes_;
  if (reinterpret_cast<uintptr_t>(at) % alignof(float) != 0) return nullptr;
  return reinterpret_cast<const float*>(at);
}

const uint8_t* CheckpointTable::bf16_row(int64_t row) const {
  if (info_.dtype != "BF16" || std::endian::native != std::endian::little || row < 0 || row >= rows()) return nullptr;
  const uint8_t* base = in_place_base();
  return base == nullptr ? nullptr : base + static_cast<uint64_t>(row) * row_bytes_;
}

const uint8_t* CheckpointTable::in_place_base() const {
  if (gguf_) return gguf_->raw(*gguf_tensor_);
  if (tf_) return tf_tensor_->contiguous() ? tf_tensor_->first() : nullptr;  // a strided view is gathered
  return st_->raw(*st_tensor_);
}

void CheckpointTable::release(int64_t begin, int64_t end) const {
  const uint8_t* base = in_place_base();
  if (base == nullptr) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(begin) * row_bytes_;
  const uintptr_t hi = reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(end) * row_bytes_;
  const uintptr_t first = (lo + page - 1) & ~(page - 1), last = hi & ~(page - 1);
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace qemb
