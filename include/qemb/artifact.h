// The `.qemb` artifact: a versioned, checksummed, little-endian container for a
// quantized graph, its provenance and its 64-byte-aligned constant data, which
// the runtime memory-maps and uses in place. Byte layout: docs/artifact-format.md.
//
// This layer depends only on core (status, ir, file): the runtime links it and
// must never pull in the compiler side. The graph itself is internal (the IR
// lives under src/core); writing artifacts is the compiler's business
// (src/artifact/artifact_io.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qemb/status.h"

namespace qemb {

struct Graph;  // the internal IR (src/core/ir.h)

inline constexpr uint32_t kArtifactFormatVersion = 3;  // the newest format this build reads and writes
// Format 1 holds one table; format 2, written only for a graph of several
// tables (several APP_READ outputs), so older readers refuse it by version.
// Format 3 adds ROWS sections (row-interleaved tables, Tensor::row_stride) and
// leaves out the all-zero offsets of symmetric per-axis encodings; it is
// written only for graphs that use either, so the others stay readable by
// older builds.
inline constexpr size_t kArtifactHeaderSize = 64;
inline constexpr size_t kArtifactSectionEntrySize = 96;
inline constexpr size_t kArtifactSectionNameSize = 64;  // NUL-padded, at most 63 name bytes
inline constexpr size_t kArtifactDataAlignment = 64;    // file offset of every DATA section
// "QEMB", then bytes that break under 7-bit, CRLF and DOS-EOF mangling.
inline constexpr char kArtifactMagic[8] = {'Q', 'E', 'M', 'B', '\x89', '\r', '\n', '\x1a'};

// ROWS (format 3): the data of a row-interleaved tensor; DATA otherwise.
enum class SectionKind : uint32_t { kMeta = 1, kGraph = 2, kData = 3, kRows = 4 };
const char* to_string(SectionKind kind);  // "META", "GRAPH", "DATA", "ROWS"

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

enum class Verify {
  kFull,    // hash every section (catches any flipped byte)
  kHeader,  // hash the header, section table, META and GRAPH only; skip DATA
            // (fast open of multi-GB tables; structure is still fully checked)
};

struct LoadedArtifact {
  // The decoded graph; its STATIC tensor data are views into `backing`,
  // 64-byte aligned. Opaque here: `qemb inspect` (qemb/inspect.h) describes it.
  std::shared_ptr<const Graph> graph;
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

// A human-readable table of the sections (index, kind, offset, size,
// checksum, verified, name) for `qemb inspect`.
std::string describe_sections(const LoadedArtifact& artifact);

}  // namespace qemb
