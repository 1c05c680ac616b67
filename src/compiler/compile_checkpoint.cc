// Compiles tables read from a checkpoint into one artifact (or into memory).
#include <memory>
#include <set>

#include "qemb/artifact.h"
#include "qemb/checkpoint.h"
#include "qemb/compiler.h"
#include "core/file.h"
#include "compiler/compile_stream.h"
#include "compiler/row_source.h"
#include "compiler/table_values.h"

namespace qemb {

namespace {

// Compiles each table into one stream, then writes one graph: the tables'
// runtime graphs side by side.
Result<std::vector<CompiledEmbedding>> compile_tables(const Checkpoint& ckpt, const std::string& checkpoint,
                                                      const std::vector<CompileOptions>& tables,
                                                      const std::string& out_path) {
  struct Prepared {
    CheckpointTable table;
    TargetVersion target;
  };
  std::vector<Prepared> prepared;
  for (const CompileOptions& o : tables) {
    // Every table is found and checked before the long part.
    QEMB_ASSIGN_OR_RETURN(std::string name, ckpt.find_embedding(o.tensor));
    QEMB_ASSIGN_OR_RETURN(CheckpointTable table, ckpt.table(name));
    // Before the output exists: an empty table fails with nothing to clean up.
    if (table.rows() <= 0 || table.dim() <= 0) return empty_table_error(table.rows(), table.dim());
    QEMB_ASSIGN_OR_RETURN(TargetVersion target, discover_target_version(o.qnn_sdk_version));
    prepared.push_back({std::move(table), std::move(target)});
  }
  // Opened before the long part, so an unwritable path fails at once.
  QEMB_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactStream> out, ArtifactStream::create(out_path));
  std::vector<CompiledEmbedding> compiled;
  for (size_t i = 0; i < tables.size(); ++i) {
    const CheckpointTable& table = prepared[i].table;
    TableSource source{checkpoint, table.info().name, table.info().dtype, to_string(ckpt.format())};
    Result<CompiledEmbedding> c = compile_rows(CheckpointRows(table), tables[i], prepared[i].target, *out, source);
    if (!c.ok()) {
      if (tables.size() == 1) return c.error();
      return make_error(c.error().code, "table '" + tables[i].node_name + "' (" + table.info().name +
                                            "): " + c.error().message);
    }
    compiled.push_back(std::move(c).value());
  }
  if (compiled.size() == 1) {
    QEMB_RETURN_IF_ERROR(out->finish(*compiled[0].runtime_graph, compiled[0].metadata));
    return compiled;
  }
  Graph merged;
  nlohmann::json meta = {{"qemb_version", compiled[0].metadata["qemb_version"]}, {"tables", nlohmann::json::array()}};
  for (size_t i = 0; i < compiled.size(); ++i) {
    for (const Tensor& t : compiled[i].runtime_graph->tensors) {
      if (merged.find_tensor(t.name) != nullptr)
        return make_error(ErrorCode::kInvalidArgument, "tensor '" + t.name + "' of table '" + tables[i].node_name +
                                                           "' clashes with another table's; choose other table names");
      merged.tensors.push_back(t);
    }
    merged.ops.insert(merged.ops.end(), compiled[i].runtime_graph->ops.begin(), compiled[i].runtime_graph->ops.end());
    nlohmann::json m = compiled[i].metadata;
    m.erase("qemb_version");
    m["name"] = tables[i].node_name;
    meta["tables"].push_back(std::move(m));
  }
  QEMB_RETURN_IF_ERROR(out->finish(merged, meta));
  return compiled;
}

// Opens the checkpoint, finds the embedding and the target, then compiles: into
// `out_path` when given, else in memory. Every command that reads a checkpoint
// comes through here, so each input format it learns serves them all.
Result<CompiledEmbedding> compile_checkpoint_impl(const std::string& checkpoint, const CompileOptions& options,
                                                  const std::string* out_path) {
  if (out_path != nullptr && same_file(checkpoint, *out_path))
    return make_error(ErrorCode::kInvalidArgument,
                      "the output '" + *out_path + "' is the input checkpoint; choose another path");
  QEMB_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(checkpoint));
  QEMB_ASSIGN_OR_RETURN(std::string name, ckpt.find_embedding(options.tensor));
  if (out_path == nullptr) {
    QEMB_ASSIGN_OR_RETURN(CheckpointTable table, ckpt.table(name));
    if (table.rows() <= 0 || table.dim() <= 0) return empty_table_error(table.rows(), table.dim());
    QEMB_ASSIGN_OR_RETURN(TargetVersion target, discover_target_version(options.qnn_sdk_version));
    return compile_rows(CheckpointRows(table), options, target, TableSource{checkpoint, name, table.info().dtype, to_string(ckpt.format())});
  }
  CompileOptions resolved = options;
  resolved.tensor = name;
  QEMB_ASSIGN_OR_RETURN(std::vector<CompiledEmbedding> compiled,
                        compile_tables(ckpt, checkpoint, {resolved}, *out_path));
  return std::move(compiled.front());
}

}  // namespace

Result<CompiledEmbedding> compile_checkpoint(const std::string& checkpoint, const CompileOptions& options,
                                             const std::string& out_path) {
  return compile_checkpoint_impl(checkpoint, options, &out_path);
}

Result<CompiledEmbedding> compile_checkpoint(const std::string& checkpoint, const CompileOptions& options) {
  return compile_checkpoint_impl(checkpoint, options, nullptr);
}

Result<std::vector<CompiledEmbedding>> compile_checkpoint_tables(const std::string& checkpoint,
                                                                 const std::vector<CompileOptions>& tables,
                                                                 const std::string& out_path) {
  if (tables.empty()) return make_error(ErrorCode::kInvalidArgument, "no tables to compile");
  std::set<std::string> names;
  for (const CompileOptions& t : tables) {
    if (t.tensor.empty())
      return make_error(ErrorCode::kInvalidArgument, "every table needs its checkpoint tensor named");
    if (!names.insert(t.node_name).second)
      return make_error(ErrorCode::kInvalidArgument,
                        "two tables are both named '" + t.node_name + "'; table names must be unique");
  }
  if (same_file(checkpoint, out_path))
    return make_error(ErrorCode::kInvalidArgument,
                      "the output '" + out_path + "' is the input checkpoint; choose another path");
  QEMB_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(checkpoint));
  return compile_tables(ckpt, checkpoint, tables, out_path);
}

}  // namespace qemb
