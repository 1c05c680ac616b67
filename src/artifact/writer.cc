// Writes .qemb artifacts. write_artifact() computes every offset and checksum
// before the first byte is written (hashing a Buffer is cheap next to writing
// it) and writes tensor data straight from each Buffer. ArtifactStream writes
// large tensors while they are produced and the rest when they are known.
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <string>
#include <vector>

#include "artifact/artifact_format.h"
#include "artifact/artifact_io.h"
#include "core/file.h"
#include "core/json_text.h"

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
  bool in_file = false;  // streamed: already written, offset and checksum known
};

class SectionPlan {
 public:
  // Returns the index the section will have in the table.
  size_t add(SectionKind kind, std::string name, const uint8_t* data, size_t size) {
    sections_.push_back({kind, std::move(name), data, size});
    return sections_.size() - 1;
  }
  size_t add_in_file(SectionKind kind, std::string name, uint64_t offset, size_t size, uint64_t checksum) {
    sections_.push_back({kind, std::move(name), nullptr, size, offset, checksum, true});
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

bool all_zero(const std::vector<int32_t>& offsets) {
  for (int32_t o : offsets)
    if (o != 0) return false;
  return true;
}

// Per-axis scales and offsets become DATA sections; the JSON refers to them.
// Format 3 leaves out offsets that are all 0, and an interleaved tensor's
// scales are in its rows (`rows_count`: its row count, else -1).
json encoding_json(const Encoding& e, const std::string& owner_name, const char* prefix, SectionPlan& plan,
                   uint32_t version, int64_t rows_count = -1) {
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
      if (rows_count >= 0) {
        j["count"] = rows_count;
        break;
      }
      j["count"] = e.scales.size();
      j["scales_section"] = plan.add_owned(SectionKind::kData, section_name(std::string(prefix) + "scales:", owner_name),
                                           encode_scales(e.scales));
      if (version < 3 || !all_zero(e.offsets))
        j["offsets_section"] = plan.add_owned(
            SectionKind::kData, section_name(std::string(prefix) + "offsets:", owner_name), encode_offsets(e.offsets));
      break;
  }
  return j;
}

// Where a STATIC tensor's data already is in the file (ArtifactStream).
struct StreamedSection {
  uint64_t offset;
  size_t size;
  uint64_t checksum;
};
using StreamedLookup = std::function<Result<std::optional<StreamedSection>>(const Tensor&)>;

// Plans every section of `graph` and `metadata`, then lays out and writes the
// file: sections not yet in the file go from `first_free` on (after the table
// when the table comes first), the table at 64 (`table_first`) or after the
// last section. `check_before_writing` runs once everything is planned.
Status write_impl(const std::string& where, AtomicFileWriter& writer, const Graph& graph, const json& metadata,
                  uint32_t version, const StreamedLookup& streamed, bool table_first, uint64_t first_free,
                  const std::function<Status()>& check_before_writing) {
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
    const SectionKind data_kind = t.interleaved() ? SectionKind::kRows : SectionKind::kData;
    if (t.interleaved()) {
      if (version < 3)
        return make_error(ErrorCode::kInvalidArgument, where + "tensor '" + t.name + "' is row-interleaved, which "
                                                           "format " + std::to_string(version) + " cannot hold");
      jt["row_stride"] = t.row_stride;
    }
    if (t.kind == TensorKind::kStatic) {
      QEMB_ASSIGN_OR_RETURN(std::optional<StreamedSection> in_file, streamed(t));
      if (in_file) {
        jt["data_section"] = plan.add_in_file(data_kind, section_name("tensor:", t.name), in_file->offset,
                                              in_file->size, in_file->checksum);
      } else if (t.data->size() > 0 && t.data->data() == nullptr) {
        return make_error(ErrorCode::kInvalidArgument,
                          where + "the data of tensor '" + t.name + "' are not in memory or in this file");
      } else {
        jt["data_section"] = plan.add(data_kind, section_name("tensor:", t.name), t.data->data(), t.data->size());
      }
    }
    jt["encoding"] = encoding_json(t.encoding, t.name, "", plan, version, t.interleaved() ? t.shape[0] : -1);
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
    if (op.intermediate) jo["intermediate"] = encoding_json(*op.intermediate, op.name, "op_", plan, version);
    ops.push_back(std::move(jo));
  }
  json graph_json = json::object();
  graph_json["tensors"] = std::move(tensors);
  graph_json["ops"] = std::move(ops);

  // META is provenance: a legal file name that is not UTF-8 is recorded with
  // U+FFFD for its odd bytes rather than refused. Graph names must be exact.
  const std::string meta_text = json_text(metadata);
  std::string graph_text;
  try {
    graph_text = graph_json.dump();
  } catch (const json::exception& e) {  // invalid UTF-8 in a string
    return make_error(ErrorCode::kInvalidArgument, where + "a tensor or op name is not valid UTF-8 (" + e.what() +
                                                       ")");
  }
  auto& sections = plan.sections();
  sections[0].data = reinterpret_cast<const uint8_t*>(meta_text.data());
  sections[0].size = meta_text.size();
  sections[1].data = reinterpret_cast<const uint8_t*>(graph_text.data());
  sections[1].size = graph_text.size();

  // Layout: every section at a 64-byte-aligned offset.
  const uint64_t table_size = sections.size() * kArtifactSectionEntrySize;
  uint64_t cursor = table_first ? kArtifactHeaderSize + table_size : first_free;
  for (auto& s : sections) {
    if (s.in_file) continue;
    s.offset = align_up(cursor, kArtifactDataAlignment);
    cursor = s.offset + s.size;
    s.checksum = section_checksum(s.data, s.size);
  }
  const uint64_t table_offset = table_first ? kArtifactHeaderSize : align_up(cursor, kArtifactDataAlignment);
  const uint64_t file_size = table_first ? cursor : table_offset + table_size;

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
  store_u32(header + kVersionOffset, version);
  store_u32(header + kSectionCountOffset, static_cast<uint32_t>(sections.size()));
  store_u64(header + kFileSizeOffset, file_size);
  store_u64(header + kTableOffsetOffset, table_offset);
  store_u32(header + kEntrySizeOffset, kArtifactSectionEntrySize);
  store_u64(header + kHeaderChecksumOffset, header_checksum(header, table.data(), table.size()));

  QEMB_RETURN_IF_ERROR(check_before_writing());
  // Padding is never written: unwritten bytes of a file read as zero.
  for (const auto& s : sections)
    if (!s.in_file) QEMB_RETURN_IF_ERROR(writer.write_at(s.offset, s.data, s.size));
  QEMB_RETURN_IF_ERROR(writer.write_at(table_offset, table.data(), table.size()));
  QEMB_RETURN_IF_ERROR(writer.write_at(0, header, sizeof(header)));
  QEMB_RETURN_IF_ERROR(writer.resize(file_size));
  return writer.commit();
}

}  // namespace

namespace {

uint32_t tables_version(const Graph& graph) {
  size_t outputs = 0;
  for (const Tensor& t : graph.tensors) outputs += t.kind == TensorKind::kAppRead;
  return outputs > 1 ? 2 : 1;
}

bool zero_per_axis_offsets(const Encoding& e) {
  return e.is_per_axis() && !e.offsets.empty() && all_zero(e.offsets);
}

}  // namespace

uint32_t artifact_format_version_for(const Graph& graph) {
  for (const Tensor& t : graph.tensors)
    if (t.interleaved() || zero_per_axis_offsets(t.encoding)) return 3;
  for (const Op& op : graph.ops)
    if (op.intermediate && zero_per_axis_offsets(*op.intermediate)) return 3;
  return tables_version(graph);
}

Status write_artifact(const std::string& path, const Graph& graph, const nlohmann::json& metadata) {
  return write_artifact(path, graph, metadata, ArtifactWriteOptions{});
}

Status write_artifact(const std::string& path, const Graph& graph, const nlohmann::json& metadata,
                      const ArtifactWriteOptions& options) {
  try {
    const std::string where = "cannot write artifact '" + path + "': ";
    const uint32_t wanted = options.format_version;
    const Graph* to_write = &graph;
    Graph plain;
    uint32_t version = artifact_format_version_for(graph);
    if (wanted == 1 || wanted == 2) {
      // The layout older builds read: every tensor plain.
      plain = graph;
      for (Tensor& t : plain.tensors) {
        if (!t.interleaved()) continue;
        if (!t.data || t.data->data() == nullptr || t.data->size() != storage_bytes(t))
          return make_error(ErrorCode::kInvalidArgument,
                            where + "the data of tensor '" + t.name + "' are not in memory");
        t = deinterleave_rows(t);
      }
      to_write = &plain;
      version = tables_version(plain);
      if (version != wanted)
        return make_error(ErrorCode::kInvalidArgument,
                          where + "format " + std::to_string(wanted) + " holds " +
                              (wanted == 1 ? "one table" : "several tables") + ", the graph has " +
                              (version == 1 ? "one" : "several"));
    } else if (wanted == 3) {
      version = 3;
    } else if (wanted != 0) {
      return make_error(ErrorCode::kInvalidArgument, where + "format " + std::to_string(wanted) +
                                                         " is not one this build writes (1 to " +
                                                         std::to_string(kArtifactFormatVersion) + ")");
    }
    QEMB_ASSIGN_OR_RETURN(auto writer, AtomicFileWriter::create(path));
    const StreamedLookup nothing_streamed = [](const Tensor&) -> Result<std::optional<StreamedSection>> {
      return std::optional<StreamedSection>();
    };
    return write_impl(where, *writer, *to_write, metadata, version, nothing_streamed, /*table_first=*/true, 0,
                      [] { return Status::Ok(); });
  } catch (const std::exception& e) {  // e.g. std::bad_alloc: never let it cross the boundary
    return make_error(ErrorCode::kInternal, "cannot write artifact '" + path + "': " + e.what());
  }
}

struct StreamedData::State {
  std::mutex mu;
  std::condition_variable cv;
  AtomicFileWriter* file;  // null once the stream is finished or gone
  // Changed under mu; atomic so that a waiting writer can spin on them.
  std::atomic<uint64_t> written{0};                // bytes [0, written) are in the file and hashed
  std::atomic<uint64_t> failed_from{UINT64_MAX};  // writes at or after this offset fail
  std::string failure;                             // why, set by abort() or a failed write
  artifact_detail::StreamingChecksum checksum;
};

StreamedData::StreamedData(AtomicFileWriter* file, uint64_t file_offset, size_t size)
    : file_offset_(file_offset), size_(size), state_(std::make_unique<State>()) {
  state_->file = file;
}

StreamedData::~StreamedData() = default;

Status StreamedData::write(uint64_t offset, const void* bytes, size_t size) {
  State& st = *state_;
  auto range = [&] {
    return "bytes " + std::to_string(offset) + "+" + std::to_string(size) + " of a " + std::to_string(size_) +
           "-byte streamed tensor";
  };
  if (offset > size_ || size > size_ - offset)
    return make_error(ErrorCode::kInvalidArgument, "cannot write " + range() + ": outside the tensor");
  // The turn usually comes within microseconds (a chunk's write and hash):
  // spin briefly before sleeping, as a futex sleep and wake-up cost more.
  for (int spin = 0; spin < 4000 && st.written.load() < offset && offset < st.failed_from.load(); ++spin) {
    if (spin >= 64) std::this_thread::yield();
  }
  std::unique_lock<std::mutex> lock(st.mu);
  st.cv.wait(lock, [&] { return offset >= st.failed_from || st.written >= offset; });
  if (offset >= st.failed_from) return make_error(ErrorCode::kIoError, st.failure);
  if (st.file == nullptr)
    return make_error(ErrorCode::kInvalidArgument, "cannot write " + range() + ": the artifact is closed");
  if (st.written != offset)
    return make_error(ErrorCode::kInvalidArgument, "cannot write " + range() + ": it overlaps bytes already written");
  // Our turn: every other writer waits for `written` to move, so the file
  // and the checksum are ours. Writing in turn costs nothing: the file system
  // serialises writes to one file anyway, and waiters spin less on its lock.
  AtomicFileWriter* file = st.file;
  lock.unlock();
  Status status = file->write_at(file_offset_ + offset, bytes, size);
  if (status.ok()) {
    st.checksum.update(static_cast<const uint8_t*>(bytes), size);
    // Each completed 32 MiB window goes to the disk now, while the rest is
    // computed, instead of all of it in the fsync at the end (a GiB table is
    // far below the kernel's background writeback threshold). Measured on a
    // materialized 1 GiB compile: the final fsync fell from 0.52 s to 0.01 s.
    constexpr uint64_t kWindow = uint64_t{32} << 20;
    const uint64_t from = offset / kWindow * kWindow, to = (offset + size) / kWindow * kWindow;
    if (to > from) file->start_writeback(file_offset_ + from, to - from);
  }
  lock.lock();
  if (status.ok()) {
    st.written += size;
  } else if (offset < st.failed_from) {
    st.failed_from = offset;
    st.failure = status.message();
  }
  st.cv.notify_all();
  return status;
}

void StreamedData::abort(uint64_t offset, const std::string& why) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (offset < state_->failed_from) {
    state_->failed_from = offset;
    state_->failure = why.empty() ? "the streamed tensor was abandoned at byte " + std::to_string(offset) : why;
  }
  state_->cv.notify_all();
}

Result<std::unique_ptr<ArtifactStream>> ArtifactStream::create(const std::string& path) {
  QEMB_ASSIGN_OR_RETURN(auto file, AtomicFileWriter::create(path));
  std::unique_ptr<ArtifactStream> stream(new ArtifactStream());
  stream->path_ = path;
  stream->file_ = std::move(file);
  stream->next_offset_ = kArtifactHeaderSize;
  return stream;
}

ArtifactStream::~ArtifactStream() { close_regions(); }

void ArtifactStream::close_regions() {
  for (auto& region : regions_) {
    std::lock_guard<std::mutex> lock(region->state_->mu);
    region->state_->file = nullptr;
  }
}

std::shared_ptr<StreamedData> ArtifactStream::reserve(size_t size) {
  const uint64_t offset = artifact_detail::align_up(next_offset_, kArtifactDataAlignment);
  next_offset_ = offset + size;
  regions_.push_back(std::shared_ptr<StreamedData>(new StreamedData(file_.get(), offset, size)));
  return regions_.back();
}

Status ArtifactStream::finish(const Graph& graph, const nlohmann::json& metadata) {
  const std::string where = "cannot write artifact '" + path_ + "': ";
  if (!file_) return make_error(ErrorCode::kInvalidArgument, where + "the stream is already finished");
  std::vector<int> uses(regions_.size(), 0);
  const StreamedLookup lookup = [&](const Tensor& t) -> Result<std::optional<StreamedSection>> {
    const auto* streamed = dynamic_cast<const StreamedData*>(t.data.get());
    if (streamed == nullptr) return std::optional<StreamedSection>();
    size_t index = 0;
    while (index < regions_.size() && regions_[index].get() != streamed) ++index;
    if (index == regions_.size())
      return make_error(ErrorCode::kInvalidArgument,
                        where + "tensor '" + t.name + "' holds data streamed into another artifact");
    StreamedData::State& st = *streamed->state_;
    std::lock_guard<std::mutex> lock(st.mu);
    if (!st.failure.empty()) return make_error(ErrorCode::kIoError, where + st.failure);
    if (st.written != streamed->size_)
      return make_error(ErrorCode::kInvalidArgument, where + "tensor '" + t.name + "' is incomplete: " +
                                                         std::to_string(st.written) + " of " +
                                                         std::to_string(streamed->size_) + " bytes written");
    ++uses[index];
    return std::optional<StreamedSection>(StreamedSection{streamed->file_offset_, streamed->size_, st.checksum.digest()});
  };
  try {
    QEMB_RETURN_IF_ERROR(write_impl(where, *file_, graph, metadata, artifact_format_version_for(graph), lookup,
                                    /*table_first=*/false, next_offset_,
                                    [&]() -> Status {
                                      for (size_t i = 0; i < uses.size(); ++i)
                                        if (uses[i] != 1)
                                          return make_error(ErrorCode::kInvalidArgument,
                                                            where + "streamed region " + std::to_string(i) +
                                                                " is the data of " + std::to_string(uses[i]) +
                                                                " tensors; it must be exactly one");
                                      return Status::Ok();
                                    }));
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kInternal, where + e.what());
  }
  close_regions();
  file_.reset();
  return Status::Ok();
}

}  // namespace qemb
