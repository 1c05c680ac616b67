// Private to the artifact layer: the byte layout shared by the writer and the
// reader (docs/artifact-format.md), little-endian helpers, and the per-tensor
// storage checks both sides apply so that whatever writes also reads.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "qemb/artifact.h"
#include "core/ir.h"
#include "qemb/status.h"

namespace qemb::artifact_detail {

// Header field offsets (bytes from the start of the file).
inline constexpr size_t kMagicOffset = 0;
inline constexpr size_t kVersionOffset = 8;
inline constexpr size_t kSectionCountOffset = 12;
inline constexpr size_t kFileSizeOffset = 16;
inline constexpr size_t kTableOffsetOffset = 24;
inline constexpr size_t kHeaderChecksumOffset = 32;
inline constexpr size_t kEntrySizeOffset = 40;
inline constexpr size_t kHeaderFlagsOffset = 44;
inline constexpr size_t kReservedOffset = 48;  // 16 zero bytes to the end of the header

// Section-table entry field offsets (bytes from the start of the entry).
inline constexpr size_t kEntryKindOffset = 0;
inline constexpr size_t kEntryFlagsOffset = 4;
inline constexpr size_t kEntryOffsetOffset = 8;
inline constexpr size_t kEntrySizeFieldOffset = 16;
inline constexpr size_t kEntryChecksumOffset = 24;
inline constexpr size_t kEntryNameOffset = 32;
static_assert(kEntryNameOffset + kArtifactSectionNameSize == kArtifactSectionEntrySize);

// Deepest JSON nesting accepted in META/GRAPH: keeps recursive consumers
// (dump, copy, compare) of a hostile file far from the stack limit.
inline constexpr int kMaxJsonDepth = 64;
// Highest tensor rank accepted; embedding graphs use rank 1 and 2.
inline constexpr size_t kMaxRank = 8;

inline void store_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void store_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t load_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

inline uint64_t align_up(uint64_t v, uint64_t alignment) {
  return (v + alignment - 1) / alignment * alignment;
}

// XXH3-64 (seed 0) of a section's bytes.
uint64_t section_checksum(const uint8_t* data, size_t size);
// section_checksum of bytes that arrive in pieces, in order.
class StreamingChecksum {
 public:
  StreamingChecksum();
  ~StreamingChecksum();
  StreamingChecksum(const StreamingChecksum&) = delete;
  StreamingChecksum& operator=(const StreamingChecksum&) = delete;
  void update(const uint8_t* data, size_t size);
  uint64_t digest() const;

 private:
  void* state_;  // XXH3_state_t, kept out of this header
};

// XXH3-64 (seed 0) of the 64-byte header with its checksum field read as
// zero, followed by the section table.
uint64_t header_checksum(const uint8_t* header, const uint8_t* table, size_t table_size);

// Names of Encoding::Type in the GRAPH JSON.
const char* encoding_type_name(Encoding::Type type);  // "none", "per_tensor", "per_axis"

// Section name truncated to fit the table's name field.
std::string section_name(const std::string& prefix, const std::string& name);

// Checks what the artifact needs of a tensor's layout (both sides): rank,
// non-negative dims whose product and storage size do not overflow, a
// bitwidth that fits the dtype, finite scales, per-axis sizes matching the
// axis dimension. On success *storage_bytes holds the storage-layout size.
Status check_tensor_layout(const Tensor& tensor, size_t* storage_bytes);
// Same for an op's intermediate encoding (no shape to match).
Status check_op_encoding(const Op& op, const Encoding& encoding);

}  // namespace qemb::artifact_detail
