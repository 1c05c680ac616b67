// Two ways the artifact fuzzer turns its input into a .qemb file, so that the
// mutations reach the graph decoder instead of dying at a checksum:
//  - input starting with the magic: used as is, and again with the file size,
//    every in-bounds section checksum and the header checksum recomputed;
//  - any other input: split at kSectionSeparator into META JSON, GRAPH JSON
//    and DATA payloads, packed into a well-formed container the way the
//    writer lays it out (header, section table, 64-byte-aligned sections).
//    A payload that starts with kRowsMarker becomes a ROWS section (format
//    3's row-interleaved tables) without the marker.
#pragma once

#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "artifact/artifact_format.h"

namespace qemb::fuzz {

// A 64-byte-aligned, exactly-sized copy: loaded in place, so a read past the
// end of the file is a read past the end of the allocation.
class AlignedBytes final : public Buffer {
 public:
  explicit AlignedBytes(const std::vector<uint8_t>& bytes)
      : size_(bytes.size()), data_(static_cast<uint8_t*>(::operator new(size_ ? size_ : 1, std::align_val_t(64)))) {
    if (size_) std::memcpy(data_, bytes.data(), size_);
  }
  ~AlignedBytes() override { ::operator delete(data_, std::align_val_t(64)); }
  AlignedBytes(const AlignedBytes&) = delete;
  AlignedBytes& operator=(const AlignedBytes&) = delete;
  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  size_t size_;
  uint8_t* data_;
};

inline constexpr std::string_view kSectionSeparator = "\xff\xfeSECTION\xfe\xff";
inline constexpr std::string_view kRowsMarker = "\xfeROWS\xfe";

// Splits at every separator: part 0 is META, part 1 GRAPH, the rest DATA.
inline std::vector<std::string_view> split_sections(std::string_view input) {
  std::vector<std::string_view> parts;
  for (;;) {
    const size_t at = input.find(kSectionSeparator);
    if (at == std::string_view::npos) break;
    parts.push_back(input.substr(0, at));
    input.remove_prefix(at + kSectionSeparator.size());
  }
  parts.push_back(input);
  return parts;
}

inline std::string join_sections(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += kSectionSeparator;
    out += parts[i];
  }
  return out;
}

inline std::vector<uint8_t> pack_sections(const std::vector<std::string_view>& parts) {
  using namespace artifact_detail;
  const size_t count = parts.size();
  const uint64_t table_size = count * kArtifactSectionEntrySize;
  std::vector<uint64_t> offsets(count);
  std::vector<std::string_view> payload(parts);
  std::vector<uint32_t> kinds(count);
  for (size_t i = 0; i < count; ++i) {
    kinds[i] = i == 0 ? 1 : i == 1 ? 2 : 3;  // META, GRAPH, DATA...
    if (i >= 2 && payload[i].substr(0, kRowsMarker.size()) == kRowsMarker) {
      kinds[i] = 4;  // ROWS
      payload[i].remove_prefix(kRowsMarker.size());
    }
  }
  uint64_t cursor = kArtifactHeaderSize + table_size;
  for (size_t i = 0; i < count; ++i) {
    offsets[i] = align_up(cursor, kArtifactDataAlignment);
    cursor = offsets[i] + payload[i].size();
  }
  std::vector<uint8_t> file(cursor, 0);
  uint8_t* header = file.data();
  uint8_t* table = file.data() + kArtifactHeaderSize;
  for (size_t i = 0; i < count; ++i) {
    uint8_t* entry = table + i * kArtifactSectionEntrySize;
    const std::string name = i == 0 ? "META" : i == 1 ? "GRAPH" : "data:" + std::to_string(i);
    if (!payload[i].empty()) std::memcpy(file.data() + offsets[i], payload[i].data(), payload[i].size());
    store_u32(entry + kEntryKindOffset, kinds[i]);
    store_u64(entry + kEntryOffsetOffset, offsets[i]);
    store_u64(entry + kEntrySizeFieldOffset, payload[i].size());
    store_u64(entry + kEntryChecksumOffset, section_checksum(file.data() + offsets[i], payload[i].size()));
    std::memcpy(entry + kEntryNameOffset, name.data(), name.size());
  }
  std::memcpy(header + kMagicOffset, kArtifactMagic, sizeof(kArtifactMagic));
  store_u32(header + kVersionOffset, kArtifactFormatVersion);
  store_u32(header + kSectionCountOffset, static_cast<uint32_t>(count));
  store_u64(header + kFileSizeOffset, file.size());
  store_u64(header + kTableOffsetOffset, kArtifactHeaderSize);
  store_u32(header + kEntrySizeOffset, kArtifactSectionEntrySize);
  store_u64(header + kHeaderChecksumOffset, header_checksum(header, table, table_size));
  return file;
}

// Makes the stored file size and checksums agree with the bytes, where the
// header and table are in bounds; leaves everything else as mutated.
inline void fix_checksums(std::vector<uint8_t>& file) {
  using namespace artifact_detail;
  if (file.size() < kArtifactHeaderSize) return;
  uint8_t* base = file.data();
  store_u64(base + kFileSizeOffset, file.size());
  const uint64_t table_offset = load_u64(base + kTableOffsetOffset);
  const uint64_t count = load_u32(base + kSectionCountOffset);
  if (table_offset < kArtifactHeaderSize || table_offset > file.size() ||
      count > (file.size() - table_offset) / kArtifactSectionEntrySize)
    return;
  uint8_t* table = base + table_offset;
  for (uint64_t i = 0; i < count; ++i) {
    uint8_t* entry = table + i * kArtifactSectionEntrySize;
    const uint64_t offset = load_u64(entry + kEntryOffsetOffset), size = load_u64(entry + kEntrySizeFieldOffset);
    if (offset <= file.size() && size <= file.size() - offset)
      store_u64(entry + kEntryChecksumOffset, section_checksum(base + offset, size));
  }
  store_u64(base + kHeaderChecksumOffset, header_checksum(base, table, count * kArtifactSectionEntrySize));
}

}  // namespace qemb::fuzz
