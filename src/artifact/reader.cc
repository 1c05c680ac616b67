// Reads a .qemb artifact. Every field of a hostile file is checked before it
// is used: offsets and sizes against the real byte count (overflow-safe),
// JSON field types and integer ranges, section references, storage sizes.
// Every byte of the file is covered by a checksum or must be zero padding.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "artifact/artifact_format.h"
#include "core/file_kind.h"
#include "artifact/artifact_io.h"
#include "core/file.h"
#include "core/json_text.h"

namespace qemb {
namespace {

using namespace artifact_detail;
using nlohmann::json;

constexpr const char* kRecompile = "; the file is truncated or corrupted; recompile it";

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016" PRIx64, v);
  return buf;
}

std::string hex_bytes(const uint8_t* p, size_t n) {
  std::string out;
  char buf[4];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof(buf), i ? " %02x" : "%02x", p[i]);
    out += buf;
  }
  return out;
}

// 64-byte-aligned private copy, for byte buffers that are not aligned.
class AlignedCopy final : public Buffer {
 public:
  AlignedCopy(const uint8_t* src, size_t size)
      : data_(static_cast<uint8_t*>(::operator new(size == 0 ? 1 : size, std::align_val_t(kArtifactDataAlignment)))),
        size_(size) {
    if (size) std::memcpy(data_, src, size);
  }
  ~AlignedCopy() override { ::operator delete(data_, std::align_val_t(kArtifactDataAlignment)); }
  AlignedCopy(const AlignedCopy&) = delete;
  AlignedCopy& operator=(const AlignedCopy&) = delete;
  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  uint8_t* data_;
  size_t size_;
};

class ArtifactReader {
 public:
  ArtifactReader(std::string source, const uint8_t* base, size_t size, std::shared_ptr<const void> backing,
                 Verify verify)
      : source_(std::move(source)), base_(base), size_(size), backing_(std::move(backing)), verify_(verify) {}

  Result<LoadedArtifact> load();

 private:
  Error corrupt(const std::string& what) const {
    return make_error(ErrorCode::kCorrupt, source_ + ": " + what + kRecompile);
  }
  std::string section_label(size_t index) const {
    return "section " + std::to_string(index) + " '" + out_.sections[index].name + "' (" +
           to_string(out_.sections[index].kind) + ")";
  }

  Status read_header();
  Status read_section_table();
  Status check_layout();
  Status verify_checksums();
  Result<json> parse_json_section(size_t index);
  Status read_graph(const json& graph_json);
  Result<Tensor> read_tensor(const json& j, const std::string& where);
  Result<Op> read_op(const json& j, const std::string& where);
  // `interleaved_rows` >= 0: the encoding of an interleaved tensor with that
  // many rows, whose scales are in its ROWS section.
  Result<Encoding> read_encoding(const json& j, const std::string& where, int64_t interleaved_rows = -1);
  Result<size_t> claim_data_section(const json& value, const std::string& where,
                                    SectionKind kind = SectionKind::kData);
  Status check_interleaved_scales(const Tensor& t, size_t index);

  // JSON field access that names the field in errors.
  Result<const json*> field(const json& obj, const char* key, const std::string& where, bool required = true);
  Result<std::string> string_field(const json& obj, const char* key, const std::string& where);
  Result<int64_t> int_field(const json& obj, const char* key, const std::string& where, int64_t lo, int64_t hi);
  Result<int64_t> as_int(const json& v, const std::string& where, int64_t lo, int64_t hi);
  Result<std::vector<std::string>> string_list(const json& obj, const char* key, const std::string& where);

  std::string source_;
  const uint8_t* base_;
  size_t size_;
  std::shared_ptr<const void> backing_;
  Verify verify_;

  uint32_t section_count_ = 0;
  uint64_t table_offset_ = 0;
  size_t meta_index_ = 0;
  size_t graph_index_ = 0;
  std::vector<bool> data_claimed_;
  LoadedArtifact out_;
  Graph graph_;  // read_graph builds it; out_.graph holds it once checked
};

Status ArtifactReader::read_header() {
  // A foreign file is told apart from a short one by whatever magic bytes exist.
  const size_t magic_bytes = std::min(size_, sizeof(kArtifactMagic));
  if (std::memcmp(base_, kArtifactMagic, magic_bytes) != 0) {
    // A checkpoint given where an artifact belongs: say what it is and what
    // to run (the code stays kCorrupt, a foreign file, as callers test it).
    const FileKind kind = file_kind_of(base_, size_);
    if (kind != FileKind::kUnknown)
      return make_error(ErrorCode::kCorrupt,
                        source_ + ": not a qemb artifact but " + describe(kind) +
                            "; run, inspect and bench read a compiled artifact: compile it first (qemb compile "
                            "CHECKPOINT -o OUT.qemb)");
    return make_error(ErrorCode::kCorrupt,
                      source_ + ": not a qemb artifact (starts with " + hex_bytes(base_, magic_bytes) +
                          ", a .qemb file starts with " +
                          hex_bytes(reinterpret_cast<const uint8_t*>(kArtifactMagic), sizeof(kArtifactMagic)) +
                          "); check the path, or recompile it");
  }
  if (size_ < kArtifactHeaderSize) {
    return corrupt("the file is " + std::to_string(size_) + " bytes, smaller than the " +
                   std::to_string(kArtifactHeaderSize) + "-byte header");
  }
  const uint32_t version = load_u32(base_ + kVersionOffset);
  if (version == 0) return corrupt("format version 0 is not valid");
  if (version > kArtifactFormatVersion) {
    return make_error(ErrorCode::kUnsupported,
                      source_ + ": written by a newer qemb (format " + std::to_string(version) +
                          "); this build reads formats 1 to " + std::to_string(kArtifactFormatVersion) +
                          "; upgrade qemb or recompile the artifact with this version");
  }
  out_.format_version = version;
  const uint64_t declared_size = load_u64(base_ + kFileSizeOffset);
  if (declared_size != size_) {
    return corrupt("the header says the file is " + std::to_string(declared_size) + " bytes but it is " +
                   std::to_string(size_) + " bytes" + (size_ < declared_size ? " (truncated)" : ""));
  }
  const uint32_t entry_size = load_u32(base_ + kEntrySizeOffset);
  if (entry_size != kArtifactSectionEntrySize) {
    return corrupt("the header says section-table entries are " + std::to_string(entry_size) +
                   " bytes, every format uses " + std::to_string(kArtifactSectionEntrySize));
  }
  section_count_ = load_u32(base_ + kSectionCountOffset);
  table_offset_ = load_u64(base_ + kTableOffsetOffset);
  if (table_offset_ < kArtifactHeaderSize || table_offset_ > size_ ||
      section_count_ > (size_ - table_offset_) / kArtifactSectionEntrySize) {
    return corrupt("the section table (" + std::to_string(section_count_) + " entries at offset " +
                   std::to_string(table_offset_) + ") lies outside the " + std::to_string(size_) + "-byte file");
  }
  const uint64_t stored = load_u64(base_ + kHeaderChecksumOffset);
  const uint64_t computed =
      header_checksum(base_, base_ + table_offset_, static_cast<size_t>(section_count_) * kArtifactSectionEntrySize);
  if (stored != computed) {
    return corrupt("header/section-table checksum mismatch: stored " + hex64(stored) + ", computed " +
                   hex64(computed));
  }
  if (load_u32(base_ + kHeaderFlagsOffset) != 0) return corrupt("header flags are not zero");
  for (size_t i = kReservedOffset; i < kArtifactHeaderSize; ++i)
    if (base_[i] != 0) return corrupt("reserved header byte " + std::to_string(i) + " is not zero");
  return Status::Ok();
}

Status ArtifactReader::read_section_table() {
  const uint8_t* table = base_ + table_offset_;
  size_t metas = 0, graphs = 0;
  out_.sections.resize(section_count_);
  data_claimed_.assign(section_count_, false);
  for (uint32_t i = 0; i < section_count_; ++i) {
    const uint8_t* entry = table + static_cast<size_t>(i) * kArtifactSectionEntrySize;
    SectionInfo& s = out_.sections[i];
    s.index = i;
    const uint8_t* name = entry + kEntryNameOffset;
    const uint8_t* name_end = std::find(name, name + kArtifactSectionNameSize, uint8_t{0});
    if (name_end == name + kArtifactSectionNameSize)
      return corrupt("section " + std::to_string(i) + " has a name without a terminating NUL");
    if (std::any_of(name_end, name + kArtifactSectionNameSize, [](uint8_t b) { return b != 0; }))
      return corrupt("section " + std::to_string(i) + " has non-zero bytes after its name");
    s.name.assign(reinterpret_cast<const char*>(name), reinterpret_cast<const char*>(name_end));
    const uint32_t kind = load_u32(entry + kEntryKindOffset);
    const uint32_t max_kind = out_.format_version >= 3 ? 4 : 3;
    if (kind < 1 || kind > max_kind)
      return corrupt("section " + std::to_string(i) + " '" + s.name + "' has unknown kind " + std::to_string(kind) +
                     (max_kind == 4 ? " (expected 1=META, 2=GRAPH, 3=DATA, 4=ROWS)"
                                    : " (expected 1=META, 2=GRAPH, 3=DATA in format " +
                                          std::to_string(out_.format_version) + ")"));
    s.kind = static_cast<SectionKind>(kind);
    if (load_u32(entry + kEntryFlagsOffset) != 0) return corrupt(section_label(i) + " has non-zero flags");
    s.offset = load_u64(entry + kEntryOffsetOffset);
    s.size = load_u64(entry + kEntrySizeFieldOffset);
    s.checksum = load_u64(entry + kEntryChecksumOffset);
    if (s.offset > size_ || s.size > size_ - s.offset) {
      return corrupt(section_label(i) + " spans bytes " + std::to_string(s.offset) + "+" + std::to_string(s.size) +
                     ", outside the " + std::to_string(size_) + "-byte file");
    }
    if ((s.kind == SectionKind::kData || s.kind == SectionKind::kRows) && s.offset % kArtifactDataAlignment != 0) {
      return corrupt(section_label(i) + " starts at offset " + std::to_string(s.offset) + ", not a multiple of " +
                     std::to_string(kArtifactDataAlignment));
    }
    if (s.kind == SectionKind::kMeta) ++metas, meta_index_ = i;
    if (s.kind == SectionKind::kGraph) ++graphs, graph_index_ = i;
  }
  if (metas != 1 || graphs != 1) {
    return corrupt("expected exactly one META and one GRAPH section, found " + std::to_string(metas) + " and " +
                   std::to_string(graphs));
  }
  return Status::Ok();
}

// Header, table and sections must not overlap, and the bytes between them
// must be zero, so that no byte of the file escapes verification.
Status ArtifactReader::check_layout() {
  struct Span {
    uint64_t begin, end;
    std::string label;
  };
  std::vector<Span> spans;
  spans.reserve(out_.sections.size() + 2);
  spans.push_back({0, kArtifactHeaderSize, "the header"});
  spans.push_back({table_offset_, table_offset_ + uint64_t{section_count_} * kArtifactSectionEntrySize,
                   "the section table"});
  for (const auto& s : out_.sections) spans.push_back({s.offset, s.offset + s.size, ""});
  std::vector<size_t> order(spans.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return spans[a].begin != spans[b].begin ? spans[a].begin < spans[b].begin : spans[a].end < spans[b].end;
  });
  auto label = [&](size_t span) { return span < 2 ? spans[span].label : section_label(span - 2); };
  uint64_t covered_to = 0;
  size_t previous = order[0];
  for (size_t k = 0; k < order.size(); ++k) {
    const Span& s = spans[order[k]];
    if (s.begin < covered_to) return corrupt(label(order[k]) + " overlaps " + label(previous));
    for (uint64_t b = covered_to; b < s.begin; ++b)
      if (base_[b] != 0) return corrupt("padding byte at offset " + std::to_string(b) + " is not zero");
    covered_to = s.end;
    previous = order[k];
  }
  for (uint64_t b = covered_to; b < size_; ++b)
    if (base_[b] != 0) return corrupt("trailing byte at offset " + std::to_string(b) + " is not zero");
  return Status::Ok();
}

Status ArtifactReader::verify_checksums() {
  for (size_t i = 0; i < out_.sections.size(); ++i) {
    SectionInfo& s = out_.sections[i];
    if ((s.kind == SectionKind::kData || s.kind == SectionKind::kRows) && verify_ == Verify::kHeader) continue;
    const uint64_t computed = section_checksum(base_ + s.offset, static_cast<size_t>(s.size));
    if (computed != s.checksum) {
      return corrupt(section_label(i) + " checksum mismatch: stored " + hex64(s.checksum) + ", computed " +
                     hex64(computed));
    }
    s.verified = true;
  }
  return Status::Ok();
}

Result<json> ArtifactReader::parse_json_section(size_t index) {
  const SectionInfo& s = out_.sections[index];
  JsonProblem problem;
  json j = parse_json_strict(std::string_view(reinterpret_cast<const char*>(base_ + s.offset), s.size),
                             kMaxJsonDepth, problem);
  switch (problem.kind) {
    case JsonProblem::Kind::kNone:
      break;
    case JsonProblem::Kind::kSyntax:
      return corrupt(section_label(index) + " is not valid JSON");
    case JsonProblem::Kind::kTooDeep:
      return corrupt(section_label(index) + " nests JSON deeper than " + std::to_string(kMaxJsonDepth));
    case JsonProblem::Kind::kDuplicateKey:
      // nlohmann would keep the last value silently; the writer never repeats a key.
      return corrupt(section_label(index) + " repeats the key '" + problem.detail + "' in one object");
  }
  if (!j.is_object()) return corrupt(section_label(index) + " is JSON " + j.type_name() + ", expected an object");
  return j;
}

Result<const json*> ArtifactReader::field(const json& obj, const char* key, const std::string& where,
                                          bool required) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (!required) return static_cast<const json*>(nullptr);
    return corrupt(where + " has no '" + key + "' field");
  }
  return &*it;
}

Result<std::string> ArtifactReader::string_field(const json& obj, const char* key, const std::string& where) {
  QEMB_ASSIGN_OR_RETURN(const json* v, field(obj, key, where));
  if (!v->is_string()) return corrupt(where + "." + key + " is " + v->type_name() + ", expected a string");
  return v->get<std::string>();
}

Result<int64_t> ArtifactReader::as_int(const json& v, const std::string& where, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) return corrupt(where + " is " + v.type_name() + ", expected an integer");
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi) || (lo > 0 && u < static_cast<uint64_t>(lo)))
      return corrupt(where + " is " + std::to_string(u) + ", expected " + std::to_string(lo) + ".." +
                     std::to_string(hi));
    return static_cast<int64_t>(u);
  }
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi)
    return corrupt(where + " is " + std::to_string(i) + ", expected " + std::to_string(lo) + ".." + std::to_string(hi));
  return i;
}

Result<int64_t> ArtifactReader::int_field(const json& obj, const char* key, const std::string& where, int64_t lo,
                                          int64_t hi) {
  QEMB_ASSIGN_OR_RETURN(const json* v, field(obj, key, where));
  return as_int(*v, where + "." + key, lo, hi);
}

Result<std::vector<std::string>> ArtifactReader::string_list(const json& obj, const char* key,
                                                             const std::string& where) {
  QEMB_ASSIGN_OR_RETURN(const json* v, field(obj, key, where));
  const std::string here = where + "." + key;
  if (!v->is_array()) return corrupt(here + " is " + v->type_name() + ", expected an array of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    if (!e.is_string())
      return corrupt(here + "[" + std::to_string(i) + "] is " + e.type_name() + ", expected a string");
    out.push_back(e.get<std::string>());
  }
  return out;
}

// A DATA (or ROWS) section may be referenced once, by index.
Result<size_t> ArtifactReader::claim_data_section(const json& value, const std::string& where, SectionKind kind) {
  QEMB_ASSIGN_OR_RETURN(int64_t index, as_int(value, where, 0, std::numeric_limits<int64_t>::max()));
  if (static_cast<uint64_t>(index) >= out_.sections.size())
    return corrupt(where + " refers to section " + std::to_string(index) + " but the file has " +
                   std::to_string(out_.sections.size()));
  const size_t i = static_cast<size_t>(index);
  if (out_.sections[i].kind != kind)
    return corrupt(where + " refers to " + section_label(i) + ", expected a " + to_string(kind) + " section");
  if (data_claimed_[i]) return corrupt(where + " refers to " + section_label(i) + ", which is already in use");
  data_claimed_[i] = true;
  return i;
}

Result<Encoding> ArtifactReader::read_encoding(const json& j, const std::string& where, int64_t interleaved_rows) {
  if (!j.is_object()) return corrupt(where + " is " + j.type_name() + ", expected an object");
  Encoding e;
  QEMB_ASSIGN_OR_RETURN(std::string type, string_field(j, "type", where));
  QEMB_ASSIGN_OR_RETURN(int64_t bitwidth, int_field(j, "bitwidth", where, 0, 32));
  e.bitwidth = static_cast<int>(bitwidth);
  if (type == "none") {
    e.type = Encoding::Type::kNone;
  } else if (type == "per_tensor") {
    e.type = Encoding::Type::kPerTensor;
    QEMB_ASSIGN_OR_RETURN(const json* scale, field(j, "scale", where));
    if (!scale->is_number()) return corrupt(where + ".scale is " + scale->type_name() + ", expected a number");
    const double value = scale->get<double>();
    // Casting a double beyond float range is undefined: range-check first.
    if (!(std::fabs(value) <= static_cast<double>(std::numeric_limits<float>::max())))
      return corrupt(where + ".scale is not a finite float32");
    e.scale = static_cast<float>(value);
    QEMB_ASSIGN_OR_RETURN(int64_t offset, int_field(j, "offset", where, std::numeric_limits<int32_t>::min(),
                                                    std::numeric_limits<int32_t>::max()));
    e.offset = static_cast<int32_t>(offset);
  } else if (type == "per_axis") {
    e.type = Encoding::Type::kPerAxis;
    QEMB_ASSIGN_OR_RETURN(int64_t axis, int_field(j, "axis", where, 0, std::numeric_limits<int32_t>::max()));
    e.axis = static_cast<int>(axis);
    QEMB_ASSIGN_OR_RETURN(int64_t count, int_field(j, "count", where, 0, std::numeric_limits<int64_t>::max()));
    QEMB_ASSIGN_OR_RETURN(const json* scales_ref, field(j, "scales_section", where, /*required=*/false));
    QEMB_ASSIGN_OR_RETURN(const json* offsets_ref, field(j, "offsets_section", where, /*required=*/false));
    if (interleaved_rows >= 0) {
      // The scales are in the rows and the offsets are 0.
      if (scales_ref || offsets_ref)
        return corrupt(where + " has a " + (scales_ref ? "scales_section" : "offsets_section") +
                       ", but its tensor is row-interleaved (its scales are in its rows, its offsets 0)");
      if (e.axis != 0)
        return corrupt(where + ".axis is " + std::to_string(e.axis) + ", a row-interleaved tensor is quantized "
                       "along axis 0");
      if (count != interleaved_rows)
        return corrupt(where + ".count is " + std::to_string(count) + ", the row-interleaved tensor has " +
                       std::to_string(interleaved_rows) + " rows");
      return e;
    }
    if (!scales_ref) return corrupt(where + " has no 'scales_section' field");
    QEMB_ASSIGN_OR_RETURN(size_t scales_index, claim_data_section(*scales_ref, where + ".scales_section"));
    const SectionInfo& ss = out_.sections[scales_index];
    if (static_cast<uint64_t>(count) > ss.size / 4 || ss.size != static_cast<uint64_t>(count) * 4)
      return corrupt(section_label(scales_index) + " holds " + std::to_string(ss.size) + " bytes, " + where +
                     " needs " + std::to_string(count) + " float32 scales");
    // Format 3 leaves out offsets that are all 0 (symmetric weights).
    const uint8_t* op = nullptr;
    if (offsets_ref) {
      QEMB_ASSIGN_OR_RETURN(size_t offsets_index, claim_data_section(*offsets_ref, where + ".offsets_section"));
      const SectionInfo& os = out_.sections[offsets_index];
      if (os.size != ss.size)
        return corrupt(section_label(offsets_index) + " holds " + std::to_string(os.size) + " bytes, " + where +
                       " needs " + std::to_string(count) + " int32 offsets");
      op = base_ + os.offset;
    } else if (out_.format_version < 3) {
      return corrupt(where + " has no 'offsets_section' field");
    }
    const uint8_t* sp = base_ + ss.offset;
    e.scales.resize(static_cast<size_t>(count));
    e.offsets.assign(static_cast<size_t>(count), 0);
    for (size_t i = 0; i < e.scales.size(); ++i) {
      e.scales[i] = std::bit_cast<float>(load_u32(sp + 4 * i));
      if (!std::isfinite(e.scales[i]))
        return corrupt(section_label(scales_index) + " scale " + std::to_string(i) + " is not finite");
      if (op) e.offsets[i] = static_cast<int32_t>(load_u32(op + 4 * i));
    }
  } else {
    return corrupt(where + ".type is '" + type + "', expected none, per_tensor or per_axis");
  }
  return e;
}

Result<Tensor> ArtifactReader::read_tensor(const json& j, const std::string& where) {
  if (!j.is_object()) return corrupt(where + " is " + j.type_name() + ", expected an object");
  Tensor t;
  QEMB_ASSIGN_OR_RETURN(t.name, string_field(j, "name", where));
  const std::string here = where + " ('" + t.name + "')";
  QEMB_ASSIGN_OR_RETURN(std::string kind, string_field(j, "kind", here));
  auto parsed_kind = parse_tensor_kind(kind);
  if (!parsed_kind.ok()) return corrupt(here + ".kind: " + parsed_kind.error().message);
  t.kind = *parsed_kind;
  QEMB_ASSIGN_OR_RETURN(std::string dtype, string_field(j, "dtype", here));
  auto parsed_dtype = parse_data_type(dtype);
  if (!parsed_dtype.ok()) return corrupt(here + ".dtype: " + parsed_dtype.error().message);
  t.dtype = *parsed_dtype;
  QEMB_ASSIGN_OR_RETURN(const json* shape, field(j, "shape", here));
  if (!shape->is_array()) return corrupt(here + ".shape is " + shape->type_name() + ", expected an array");
  if (shape->size() > kMaxRank)
    return corrupt(here + ".shape has rank " + std::to_string(shape->size()) + ", at most " +
                   std::to_string(kMaxRank) + " is supported");
  for (size_t i = 0; i < shape->size(); ++i) {
    QEMB_ASSIGN_OR_RETURN(int64_t dim, as_int((*shape)[i], here + ".shape[" + std::to_string(i) + "]", 0,
                                              std::numeric_limits<int64_t>::max()));
    t.shape.push_back(dim);
  }
  // Format 3: a row-interleaved table says its record size.
  QEMB_ASSIGN_OR_RETURN(const json* stride, field(j, "row_stride", here, /*required=*/false));
  if (stride) {
    if (out_.format_version < 3)
      return corrupt(here + " has a row_stride, which format " + std::to_string(out_.format_version) +
                     " does not have");
    if (t.kind != TensorKind::kStatic || t.dtype != DataType::kSFixedPoint8 || t.shape.size() != 2)
      return corrupt(here + " has a row_stride but is not a STATIC SFIXED_POINT_8 [rows, dim] table");
    QEMB_ASSIGN_OR_RETURN(int64_t v, as_int(*stride, here + ".row_stride", 1, std::numeric_limits<int32_t>::max()));
    t.row_stride = static_cast<size_t>(v);
  }
  QEMB_ASSIGN_OR_RETURN(const json* encoding, field(j, "encoding", here));
  QEMB_ASSIGN_OR_RETURN(t.encoding,
                        read_encoding(*encoding, here + ".encoding", t.interleaved() ? t.shape[0] : -1));
  if (t.interleaved() && !t.encoding.is_per_axis())
    return corrupt(here + " has a row_stride but its encoding is not per_axis");
  size_t needed = 0;
  Status layout = check_tensor_layout(t, &needed);
  if (!layout.ok()) return corrupt(layout.message());

  QEMB_ASSIGN_OR_RETURN(const json* data_ref, field(j, "data_section", here, /*required=*/false));
  if (t.kind != TensorKind::kStatic) {
    if (data_ref) return corrupt(here + " is " + to_string(t.kind) + " but has a data_section");
    return t;
  }
  if (!data_ref) return corrupt(here + " is STATIC but has no data_section");
  QEMB_ASSIGN_OR_RETURN(size_t index, claim_data_section(*data_ref, here + ".data_section",
                                                         t.interleaved() ? SectionKind::kRows : SectionKind::kData));
  const SectionInfo& s = out_.sections[index];
  if (s.size != needed) {
    return corrupt(section_label(index) + " holds " + std::to_string(s.size) + " bytes, tensor '" + t.name +
                   "' (" + to_string(t.dtype) + ", bitwidth " + std::to_string(t.bitwidth()) +
                   (t.interleaved() ? ", row stride " + std::to_string(t.row_stride) : std::string()) + ") needs " +
                   std::to_string(needed));
  }
  const uint8_t* data = base_ + s.offset;
  if (reinterpret_cast<uintptr_t>(data) % kArtifactDataAlignment != 0)
    return make_error(ErrorCode::kInternal, source_ + ": data of tensor '" + t.name + "' is not " +
                                                std::to_string(kArtifactDataAlignment) + "-byte aligned in memory");
  t.data = std::make_shared<ViewBuffer>(backing_, data, static_cast<size_t>(s.size));
  if (t.interleaved()) QEMB_RETURN_IF_ERROR(check_interleaved_scales(t, index));
  return t;
}

// The scales of a plain table are checked as they are copied out; those in
// a ROWS section only when the section is verified (kHeader opens a big
// table without reading it). A scale the check would refuse cannot make a
// kernel misbehave: every float-to-int conversion is clamped.
Status ArtifactReader::check_interleaved_scales(const Tensor& t, size_t index) {
  if (!out_.sections[index].verified) return Status::Ok();
  for (int64_t r = 0; r < t.shape[0]; ++r)
    if (!std::isfinite(t.row_scale(r)))
      return corrupt(section_label(index) + " row " + std::to_string(r) + " has a scale that is not finite");
  return Status::Ok();
}

Result<Op> ArtifactReader::read_op(const json& j, const std::string& where) {
  if (!j.is_object()) return corrupt(where + " is " + j.type_name() + ", expected an object");
  Op op;
  QEMB_ASSIGN_OR_RETURN(op.name, string_field(j, "name", where));
  const std::string here = where + " ('" + op.name + "')";
  QEMB_ASSIGN_OR_RETURN(std::string type, string_field(j, "type", here));
  auto parsed_type = parse_op_type(type);
  if (!parsed_type.ok()) return corrupt(here + ".type: " + parsed_type.error().message);
  op.type = *parsed_type;
  QEMB_ASSIGN_OR_RETURN(op.inputs, string_list(j, "inputs", here));
  QEMB_ASSIGN_OR_RETURN(op.outputs, string_list(j, "outputs", here));
  QEMB_ASSIGN_OR_RETURN(int64_t axis, int_field(j, "axis", here, std::numeric_limits<int32_t>::min(),
                                                std::numeric_limits<int32_t>::max()));
  op.axis = static_cast<int>(axis);
  QEMB_ASSIGN_OR_RETURN(const json* intermediate, field(j, "intermediate", here, /*required=*/false));
  if (intermediate) {
    QEMB_ASSIGN_OR_RETURN(Encoding e, read_encoding(*intermediate, here + ".intermediate"));
    Status ok = check_op_encoding(op, e);
    if (!ok.ok()) return corrupt(ok.message());
    op.intermediate = std::move(e);
  }
  return op;
}

Status ArtifactReader::read_graph(const json& g) {
  const std::string where = section_label(graph_index_);
  QEMB_ASSIGN_OR_RETURN(const json* tensors, field(g, "tensors", where));
  if (!tensors->is_array()) return corrupt(where + ".tensors is " + tensors->type_name() + ", expected an array");
  QEMB_ASSIGN_OR_RETURN(const json* ops, field(g, "ops", where));
  if (!ops->is_array()) return corrupt(where + ".ops is " + ops->type_name() + ", expected an array");
  for (size_t i = 0; i < tensors->size(); ++i) {
    QEMB_ASSIGN_OR_RETURN(Tensor t, read_tensor((*tensors)[i], "GRAPH tensors[" + std::to_string(i) + "]"));
    graph_.add_tensor(std::move(t));
  }
  for (size_t i = 0; i < ops->size(); ++i) {
    QEMB_ASSIGN_OR_RETURN(Op op, read_op((*ops)[i], "GRAPH ops[" + std::to_string(i) + "]"));
    graph_.add_op(std::move(op));
  }
  for (size_t i = 0; i < data_claimed_.size(); ++i)
    if ((out_.sections[i].kind == SectionKind::kData || out_.sections[i].kind == SectionKind::kRows) &&
        !data_claimed_[i])
      return corrupt(section_label(i) + " is not referenced by the graph");
  Status checked = graph_.check();
  if (!checked.ok()) return corrupt("the graph is inconsistent: " + checked.message());
  out_.graph = std::make_shared<const Graph>(std::move(graph_));
  return Status::Ok();
}

Result<LoadedArtifact> ArtifactReader::load() {
  out_.backing = backing_;
  out_.bytes = base_;
  out_.file_size = size_;
  QEMB_RETURN_IF_ERROR(read_header());
  QEMB_RETURN_IF_ERROR(read_section_table());
  QEMB_RETURN_IF_ERROR(check_layout());
  QEMB_RETURN_IF_ERROR(verify_checksums());
  QEMB_ASSIGN_OR_RETURN(out_.metadata, parse_json_section(meta_index_));
  QEMB_ASSIGN_OR_RETURN(json graph_json, parse_json_section(graph_index_));
  QEMB_RETURN_IF_ERROR(read_graph(graph_json));
  return std::move(out_);
}

Result<LoadedArtifact> load_guarded(const std::string& source, const uint8_t* base, size_t size,
                                    std::shared_ptr<const void> backing, Verify verify) {
  try {
    ArtifactReader reader(source, base, size, std::move(backing), verify);
    return reader.load();
  } catch (const std::exception& e) {  // e.g. std::bad_alloc: never let it cross the boundary
    return make_error(ErrorCode::kInternal, source + ": cannot load artifact: " + e.what());
  }
}

}  // namespace

Result<LoadedArtifact> load_artifact(const std::string& path, Verify verify) {
  QEMB_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::open(path));
  const uint8_t* base = file->data();
  const size_t size = file->size();
  static const uint8_t kEmpty[1] = {0};
  return load_guarded("'" + path + "'", size ? base : kEmpty, size, std::move(file), verify);
}

Result<LoadedArtifact> load_artifact_from_bytes(std::shared_ptr<const Buffer> bytes, Verify verify) {
  if (!bytes) return make_error(ErrorCode::kInvalidArgument, "load_artifact_from_bytes: no buffer given");
  if (bytes->size() > 0 && reinterpret_cast<uintptr_t>(bytes->data()) % kArtifactDataAlignment != 0) {
    try {
      bytes = std::make_shared<AlignedCopy>(bytes->data(), bytes->size());
    } catch (const std::exception& e) {
      return make_error(ErrorCode::kInternal, std::string("artifact in memory: cannot copy it: ") + e.what());
    }
  }
  static const uint8_t kEmpty[1] = {0};
  const uint8_t* base = bytes->size() ? bytes->data() : kEmpty;
  const size_t size = bytes->size();
  return load_guarded("artifact in memory", base, size, std::move(bytes), verify);
}

}  // namespace qemb
