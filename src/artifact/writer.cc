// Writes a .qemb artifact. All offsets and checksums are computed before the
// first byte is written (hashing a Buffer is cheap next to writing it), so the
// file is streamed front to back through AtomicFileWriter, which cannot seek,
// and tensor data go straight from each Buffer to the file.
#include <exception>
#include <string>
#include <vector>

#include "artifact/artifact_format.h"
#include "qemb/artifact.h"
#include "qemb/file.h"

namespace qemb {
namespace {

using namespace artifact_detail;
using nlohmann::json;

struct PendingSection {
  SectionKind kind;
  std::string name;
  const uint8_t* data;
  size_t size;
  uint64_t offset = 0;
  uint64_t checksum = 0;
};

class SectionPlan {
 public:
  // Returns the index the section will have in the table.
  size_t add(SectionKind kind, std::string name, const uint8_t* data, size_t size) {
    sections_.push_back({kind, std::move(name), data, size});
    return sections_.size() - 1;
  }
  // Keeps bytes encoded here (scales, offsets, JSON) alive until written.
  size_t add_owned(SectionKind kind, std::string name, std::vector<uint8_t> bytes) {
    owned_.push_back(std::move(bytes));  // moving a vector keeps its heap buffer
    return add(kind, std::move(name), owned_.back().data(), owned_.back().size());
  }
  std::vector<PendingSection>& sections() { return sections_; }

 private:
  std::vector<PendingSection> sections_;
  std::vector<std::vector<uint8_t>> owned_;
};

std::vector<uint8_t> encode_scales(const std::vector<float>& scales) {
  std::vector<uint8_t> bytes(scales.size() * 4);
  for (size_t i = 0; i < scales.size(); ++i) store_u32(bytes.data() + 4 * i, std::bit_cast<uint32_t>(scales[i]));
  return bytes;
}

std::vector<uint8_t> encode_offsets(const std::vector<int32_t>& offsets) {
  std::vector<uint8_t> bytes(offsets.size() * 4);
  for (size_t i = 0; i < offsets.size(); ++i) store_u32(bytes.data() + 4 * i, static_cast<uint32_t>(offsets[i]));
  return bytes;
}

// Per-axis scales and offsets become DATA sections; the JSON refers to them.
json encoding_json(const Encoding& e, const std::string& owner_name, const char* prefix, SectionPlan& plan) {
  json j = json::object();
  j["type"] = encoding_type_name(e.type);
  j["bitwidth"] = e.bitwidth;
  switch (e.type) {
    case Encoding::Type::kNone: break;
    case Encoding::Type::kPerTensor:
      // A float widened to double prints and parses back bit-exactly.
      j["scale"] = static_cast<double>(e.scale);
      j["offset"] = e.offset;
      break;
    case Encoding::Type::kPerAxis:
      j["axis"] = e.axis;
      j["count"] = e.scales.size();
      j["scales_section"] = plan.add_owned(SectionKind::kData, section_name(std::string(prefix) + "scales:", owner_name),
                                           encode_scales(e.scales));
      j["offsets_section"] = plan.add_owned(
          SectionKind::kData, section_name(std::string(prefix) + "offsets:", owner_name), encode_offsets(e.offsets));
      break;
  }
  return j;
}

Status write_impl(const std::string& path, const Graph& graph, const json& metadata) {
  const std::string where = "cannot write artifact '" + path + "': ";
  if (!metadata.is_object())
    return make_error(ErrorCode::kInvalidArgument,
                      where + "metadata must be a JSON object, got " + std::string(metadata.type_name()));
  for (const auto& t : graph.tensors) {
    size_t bytes = 0;
    Status layout = check_tensor_layout(t, &bytes);
    if (!layout.ok()) return make_error(ErrorCode::kInvalidArgument, where + layout.message());
    if (t.kind != TensorKind::kStatic && t.data)
      return make_error(ErrorCode::kInvalidArgument, where + "tensor '" + t.name + "' is " + to_string(t.kind) +
                                                         " but carries data; only STATIC tensors are stored");
  }
  Status checked = graph.check();
  if (!checked.ok()) return make_error(ErrorCode::kInvalidArgument, where + "invalid graph: " + checked.message());
  for (const auto& op : graph.ops) {
    if (!op.intermediate) continue;
    Status enc = check_op_encoding(op, *op.intermediate);
    if (!enc.ok()) return make_error(ErrorCode::kInvalidArgument, where + enc.message());
  }

  SectionPlan plan;
  plan.add(SectionKind::kMeta, "META", nullptr, 0);    // filled in below
  plan.add(SectionKind::kGraph, "GRAPH", nullptr, 0);

  json tensors = json::array();
  for (const auto& t : graph.tensors) {
    json jt = json::object();
    jt["name"] = t.name;
    jt["kind"] = to_string(t.kind);
    jt["dtype"] = to_string(t.dtype);
    jt["shape"] = t.shape;
    if (t.kind == TensorKind::kStatic)
      jt["data_section"] = plan.add(SectionKind::kData, section_name("tensor:", t.name), t.data->data(), t.data->size());
    jt["encoding"] = encoding_json(t.encoding, t.name, "", plan);
    tensors.push_back(std::move(jt));
  }
  json ops = json::array();
  for (const auto& op : graph.ops) {
    json jo = json::object();
    jo["type"] = to_string(op.type);
    jo["name"] = op.name;
    jo["inputs"] = op.inputs;
    jo["outputs"] = op.outputs;
    jo["axis"] = op.axis;
    if (op.intermediate) jo["intermediate"] = encoding_json(*op.intermediate, op.name, "op_", plan);
    ops.push_back(std::move(jo));
  }
  json graph_json = json::object();
  graph_json["tensors"] = std::move(tensors);
  graph_json["ops"] = std::move(ops);

  std::string meta_text, graph_text;
  try {
    meta_text = metadata.dump();
    graph_text = graph_json.dump();
  } catch (const json::exception& e) {  // invalid UTF-8 in a string
    return make_error(ErrorCode::kInvalidArgument, where + "metadata or a tensor/op name is not valid UTF-8 (" +
                                                       e.what() + ")");
  }
  auto& sections = plan.sections();
  sections[0].data = reinterpret_cast<const uint8_t*>(meta_text.data());
  sections[0].size = meta_text.size();
  sections[1].data = reinterpret_cast<const uint8_t*>(graph_text.data());
  sections[1].size = graph_text.size();

  // Layout: header, table, then every section at a 64-byte-aligned offset.
  const uint64_t table_offset = kArtifactHeaderSize;
  const uint64_t table_size = sections.size() * kArtifactSectionEntrySize;
  uint64_t cursor = table_offset + table_size;
  for (auto& s : sections) {
    s.offset = align_up(cursor, kArtifactDataAlignment);
    cursor = s.offset + s.size;
    s.checksum = section_checksum(s.data, s.size);
  }
  const uint64_t file_size = cursor;

  std::vector<uint8_t> table(table_size, 0);
  for (size_t i = 0; i < sections.size(); ++i) {
    uint8_t* entry = table.data() + i * kArtifactSectionEntrySize;
    store_u32(entry + kEntryKindOffset, static_cast<uint32_t>(sections[i].kind));
    store_u64(entry + kEntryOffsetOffset, sections[i].offset);
    store_u64(entry + kEntrySizeFieldOffset, sections[i].size);
    store_u64(entry + kEntryChecksumOffset, sections[i].checksum);
    std::memcpy(entry + kEntryNameOffset, sections[i].name.data(), sections[i].name.size());
  }
  uint8_t header[kArtifactHeaderSize] = {};
  std::memcpy(header + kMagicOffset, kArtifactMagic, sizeof(kArtifactMagic));
  store_u32(header + kVersionOffset, kArtifactFormatVersion);
  store_u32(header + kSectionCountOffset, static_cast<uint32_t>(sections.size()));
  store_u64(header + kFileSizeOffset, file_size);
  store_u64(header + kTableOffsetOffset, table_offset);
  store_u32(header + kEntrySizeOffset, kArtifactSectionEntrySize);
  store_u64(header + kHeaderChecksumOffset, header_checksum(header, table.data(), table.size()));

  QEMB_ASSIGN_OR_RETURN(auto writer, AtomicFileWriter::create(path));
  QEMB_RETURN_IF_ERROR(writer->write(header, sizeof(header)));
  QEMB_RETURN_IF_ERROR(writer->write(table.data(), table.size()));
  for (const auto& s : sections) {
    QEMB_RETURN_IF_ERROR(writer->write_zeros(s.offset - writer->position()));
    QEMB_RETURN_IF_ERROR(writer->write(s.data, s.size));
  }
  if (writer->position() != file_size)
    return make_error(ErrorCode::kInternal, where + "wrote " + std::to_string(writer->position()) +
                                                " bytes, planned " + std::to_string(file_size));
  return writer->commit();
}

}  // namespace

Status write_artifact(const std::string& path, const Graph& graph, const nlohmann::json& metadata) {
  try {
    return write_impl(path, graph, metadata);
  } catch (const std::exception& e) {  // e.g. std::bad_alloc: never let it cross the boundary
    return make_error(ErrorCode::kInternal, "cannot write artifact '" + path + "': " + e.what());
  }
}

}  // namespace qemb
