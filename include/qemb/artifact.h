// The `.qemb` artifact: a versioned, checksummed, little-endian container for a
// quantized graph, its provenance and its 64-byte-aligned constant data, which
// the runtime memory-maps and uses in place. Byte layout: docs/artifact-format.md.
//
// This layer depends only on core (status, ir, file): the runtime links it and
// must never pull in the compiler side.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qemb/ir.h"
#include "qemb/status.h"

namespace qemb {

inline constexpr uint32_t kArtifactFormatVersion = 1;  // the newest format this build reads and writes
inline constexpr size_t kArtifactHeaderSize = 64;
inline constexpr size_t kArtifactSectionEntrySize = 96;
inline constexpr size_t kArtifactSectionNameSize = 64;  // NUL-padded, at most 63 name bytes
inline constexpr size_t kArtifactDataAlignment = 64;    // file offset of every DATA section
// "QEMB", then bytes that break under 7-bit, CRLF and DOS-EOF mangling.
inline constexpr char kArtifactMagic[8] = {'Q', 'E', 'M', 'B', '\x89', '\r', '\n', '\x1a'};

enum class SectionKind : uint32_t { kMeta = 1, kGraph = 2, kData = 3 };
const char* to_string(SectionKind kind);  // "META", "GRAPH", "DATA"

// One entry of the section table, as read from the file.
struct SectionInfo {
  uint32_t index = 0;
  SectionKind kind = SectionKind::kData;
  std::string name;        // e.g. "tensor:weight", "scales:weight"
  uint64_t offset = 0;     // file offset of the first byte
  uint64_t size = 0;       // bytes
  uint64_t checksum = 0;   // XXH3-64 of the section bytes
  bool verified = false;   // checksum was recomputed and matched at load
};

// Writes `graph` and `metadata` (a JSON object: provenance such as source file
// and tensor, scheme, SDK version, pattern and why) to `path`. The file appears
// only when complete: it is written under a temporary name and renamed, so a
// failed write leaves nothing behind and never clobbers an existing file.
// STATIC tensor data is streamed from each tensor's Buffer, not copied whole.
Status write_artifact(const std::string& path, const Graph& graph, const nlohmann::json& metadata);

enum class Verify {
  kFull,    // hash every section (catches any flipped byte)
  kHeader,  // hash the header, section table, META and GRAPH only; skip DATA
            // (fast open of multi-GB tables; structure is still fully checked)
};

struct LoadedArtifact {
  Graph graph;  // STATIC tensor data are ViewBuffers into `backing`, 64-byte aligned
  nlohmann::json metadata;
  uint32_t format_version = 0;
  std::shared_ptr<const void> backing;  // keeps the mapping (or byte buffer) alive
  const uint8_t* bytes = nullptr;       // first byte of the loaded file, inside `backing`
  size_t file_size = 0;
  std::vector<SectionInfo> sections;    // in section-table order
};

// Maps `path` read-only and decodes it without copying tensor data. Refuses a
// foreign, truncated, corrupted or inconsistent file with ErrorCode::kCorrupt
// (kUnsupported for a newer format version; kNotFound/kIoError when the file
// cannot be opened), naming what is wrong and where.
Result<LoadedArtifact> load_artifact(const std::string& path, Verify verify = Verify::kFull);

// Same checks on bytes already in memory (tests, fuzzing). Data views point
// into `bytes` when it is 64-byte aligned; otherwise into one aligned copy.
Result<LoadedArtifact> load_artifact_from_bytes(std::shared_ptr<const Buffer> bytes,
                                                Verify verify = Verify::kFull);

// A human-readable table of the sections (index, kind, offset, size,
// checksum, verified, name) for `qemb inspect`.
std::string describe_sections(const LoadedArtifact& artifact);

}  // namespace qemb
