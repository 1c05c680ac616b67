// The artifact layer's internal face: writing artifacts (the compiler side)
// and loading from bytes already in memory (tests, fuzzing). Users load with
// qemb/artifact.h and write through qemb/compiler.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/ir.h"
#include "qemb/artifact.h"
#include "qemb/status.h"

namespace qemb {

// Writes `graph` and `metadata` (a JSON object: provenance such as source file
// and tensor, scheme, SDK version, pattern and why) to `path`. The file appears
// only when complete: it is written under a temporary name and renamed, so a
// failed write leaves nothing behind and never clobbers an existing file.
// STATIC tensor data is streamed from each tensor's Buffer, not copied whole.
Status write_artifact(const std::string& path, const Graph& graph, const nlohmann::json& metadata);

struct ArtifactWriteOptions {
  // 0: the lowest format that holds the graph as it is (artifact_format_version_for).
  // 1 or 2: the layout older qemb builds read: interleaved tensors are written
  // plain (values, then scales and zero offsets in their own DATA sections)
  // and zero offsets are written out; 2 only for several tables.
  uint32_t format_version = 0;
};
Status write_artifact(const std::string& path, const Graph& graph, const nlohmann::json& metadata,
                      const ArtifactWriteOptions& options);

// The format version written for `graph`: 3 when it holds a row-interleaved
// tensor or a per-axis encoding whose offsets are all 0 (left out of the
// file), else 1 for one table (what every qemb reads), 2 for several.
uint32_t artifact_format_version_for(const Graph& graph);

class ArtifactStream;
class AtomicFileWriter;

// One STATIC tensor's bytes, written into an ArtifactStream's file as they are
// produced instead of being held in memory. Put it in the graph as that
// tensor's data; data() is null: the bytes live in the file only.
class StreamedData final : public Buffer {
 public:
  ~StreamedData() override;
  const uint8_t* data() const override { return nullptr; }
  size_t size() const override { return size_; }
  // Writes bytes [offset, offset + size) of the tensor. Safe to call from
  // several threads; each call waits until every byte before `offset` has
  // been written, because the section checksum is computed in file order. So
  // ranges must be handed out in increasing order (e.g. an atomic chunk
  // counter), must not overlap and must leave no gap.
  Status write(uint64_t offset, const void* bytes, size_t size);
  // Says that byte `offset` will never be written (its producer gave up):
  // every write at or after it, waiting or to come, fails with `why`, so later
  // writers do not wait forever; writes before it go on. finish() then fails.
  void abort(uint64_t offset, const std::string& why);

 private:
  friend class ArtifactStream;
  StreamedData(AtomicFileWriter* file, uint64_t file_offset, size_t size);
  struct State;
  uint64_t file_offset_;
  size_t size_;
  std::unique_ptr<State> state_;
};

// Writes an artifact whose large tensors are produced while the file is being
// written: reserve() a region per such tensor, fill it through StreamedData,
// then finish() with the graph (holding those StreamedData) and metadata. The
// regions come first in the file and the section table last (the reader takes
// the table's offset from the header). The file appears under `path` only when
// finish() succeeds; destroying an unfinished stream removes it, so a failed
// compile leaves nothing and never clobbers an existing file.
class ArtifactStream {
 public:
  static Result<std::unique_ptr<ArtifactStream>> create(const std::string& path);
  ~ArtifactStream();
  ArtifactStream(const ArtifactStream&) = delete;
  ArtifactStream& operator=(const ArtifactStream&) = delete;

  std::shared_ptr<StreamedData> reserve(size_t size);
  // Every reserved region must be complete and be the data of exactly one
  // STATIC tensor of `graph`. Same checks as write_artifact.
  Status finish(const Graph& graph, const nlohmann::json& metadata);

 private:
  ArtifactStream() = default;
  void close_regions();  // later writes fail: the file is finished or gone
  std::string path_;
  std::unique_ptr<AtomicFileWriter> file_;
  uint64_t next_offset_ = 0;
  std::vector<std::shared_ptr<StreamedData>> regions_;
};

// load_artifact on bytes already in memory (tests, fuzzing), with the same checks. Data views point
// into `bytes` when it is 64-byte aligned; otherwise into one aligned copy.
Result<LoadedArtifact> load_artifact_from_bytes(std::shared_ptr<const Buffer> bytes,
                                                Verify verify = Verify::kFull);

}  // namespace qemb
