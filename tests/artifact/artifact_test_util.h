// Shared by the artifact tests: a graph with every dtype and op the IR has, a
// temporary folder, file helpers, and an independent re-implementation of the
// documented byte layout (docs/artifact-format.md) used to forge files whose
// checksums are right but whose contents are wrong.
#pragma once

#include <dirent.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "artifact/artifact_io.h"
#include "core/ir.h"

namespace qemb::artifact_test {

using nlohmann::json;

class ScopedTempDir {
 public:
  ScopedTempDir() {
    std::string tmpl = ::testing::TempDir() + "qemb_artifact_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    const char* made = ::mkdtemp(buf.data());
    EXPECT_NE(made, nullptr);
    path_ = made ? made : "";
  }
  ~ScopedTempDir() {
    for (const auto& name : entries()) ::unlink((path_ + "/" + name).c_str());
    ::rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    if (DIR* d = ::opendir(path_.c_str())) {
      while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") names.push_back(n);
      }
      ::closedir(d);
    }
    return names;
  }

 private:
  std::string path_;
};

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Bytes at a 64-byte-aligned address, so load_artifact_from_bytes uses them in place.
class AlignedBytes final : public Buffer {
 public:
  explicit AlignedBytes(const std::vector<uint8_t>& bytes)
      : data_(static_cast<uint8_t*>(::operator new(bytes.size() + 1, std::align_val_t(64)))), size_(bytes.size()) {
    if (size_) std::memcpy(data_, bytes.data(), size_);
  }
  ~AlignedBytes() override { ::operator delete(data_, std::align_val_t(64)); }
  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  uint8_t* data_;
  size_t size_;
};

inline Result<LoadedArtifact> load_bytes(const std::vector<uint8_t>& bytes, Verify verify = Verify::kFull) {
  return load_artifact_from_bytes(std::make_shared<AlignedBytes>(bytes), verify);
}

inline std::shared_ptr<const Buffer> owned(std::vector<uint8_t> bytes) {
  return std::make_shared<OwnedBuffer>(std::move(bytes));
}

inline std::vector<float> random_scales(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> dist(1e-6f, 0.05f);
  std::vector<float> s(n);
  for (auto& v : s) v = dist(rng);
  // Values whose decimal forms are awkward: they must still come back bit-exact.
  if (n > 0) s[0] = std::nextafter(0.1f, 1.0f);
  if (n > 1) s[1] = std::numeric_limits<float>::denorm_min() * 3;
  if (n > 2) s[2] = 0.0001f / 65535.0f;
  return s;
}

constexpr int64_t kRows = 5;
constexpr int64_t kDim = 7;  // odd: the 4-bit rows end in a half-used byte
constexpr int64_t kIds = 3;

// Every dtype and op of the IR:
//   w8  STATIC SFIXED_POINT_8 bw8 per-axis  -> Convert w8_convert (NATIVE u16) -> Gather g8 (APP_READ)
//   w4  STATIC SFIXED_POINT_8 bw4 per-axis, packed -> RequantGather g4 with a legacy intermediate
//   t16 STATIC UFIXED_POINT_16 per-tensor  -> Gather g16
//   f32 STATIC FLOAT_32                    -> Gather gf
//   ids APP_WRITE INT_32, no data
inline Graph make_test_graph(uint32_t seed = 1234) {
  std::mt19937 rng(seed);
  Graph g;
  const Encoding act = Encoding::per_tensor(1.2345678e-5f, -32768, 16);

  std::vector<int32_t> offsets(kRows);
  for (int64_t r = 0; r < kRows; ++r) offsets[r] = static_cast<int32_t>(r) - 2;  // exercise negative values

  Tensor w8{"w8", TensorKind::kStatic, DataType::kSFixedPoint8, {kRows, kDim},
            Encoding::per_axis(0, random_scales(rng, kRows), offsets, 8), nullptr};
  std::vector<uint8_t> w8_bytes(kRows * kDim);
  for (auto& b : w8_bytes) b = static_cast<uint8_t>(static_cast<int8_t>(std::uniform_int_distribution<int>(-127, 127)(rng)));
  w8.data = owned(w8_bytes);
  g.add_tensor(w8);

  Tensor w4{"w4", TensorKind::kStatic, DataType::kSFixedPoint8, {kRows, kDim},
            Encoding::per_axis(0, random_scales(rng, kRows), std::vector<int32_t>(kRows, 0), 4), nullptr};
  const size_t row4 = (kDim + 1) / 2;
  std::vector<uint8_t> w4_bytes(kRows * row4, 0);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < kDim; ++c)
      pack_int4(w4_bytes.data() + r * row4, c, static_cast<int8_t>(std::uniform_int_distribution<int>(-7, 7)(rng)));
  w4.data = owned(w4_bytes);
  g.add_tensor(w4);

  Tensor t16{"t16", TensorKind::kStatic, DataType::kUFixedPoint16, {kRows, kDim}, act, nullptr};
  std::vector<uint8_t> t16_bytes(kRows * kDim * 2);
  for (auto& b : t16_bytes) b = static_cast<uint8_t>(rng());
  t16.data = owned(t16_bytes);
  g.add_tensor(t16);

  Tensor f32{"f32", TensorKind::kStatic, DataType::kFloat32, {kRows, 3}, Encoding{}, nullptr};
  std::vector<uint8_t> f32_bytes(kRows * 3 * 4);
  for (size_t i = 0; i < f32_bytes.size() / 4; ++i) {
    float v = std::uniform_real_distribution<float>(-1, 1)(rng);
    std::memcpy(f32_bytes.data() + 4 * i, &v, 4);
  }
  f32.data = owned(f32_bytes);
  g.add_tensor(f32);

  g.add_tensor({"ids", TensorKind::kAppWrite, DataType::kInt32, {kIds}, Encoding{}, nullptr});
  g.add_tensor({"w8_convert", TensorKind::kNative, DataType::kUFixedPoint16, {kRows, kDim}, act, nullptr});
  g.add_tensor({"g8", TensorKind::kAppRead, DataType::kUFixedPoint16, {kIds, kDim}, act, nullptr});
  g.add_tensor({"g4", TensorKind::kAppRead, DataType::kUFixedPoint16, {kIds, kDim}, act, nullptr});
  g.add_tensor({"g16", TensorKind::kAppRead, DataType::kUFixedPoint16, {kIds, kDim}, act, nullptr});
  g.add_tensor({"gf", TensorKind::kAppRead, DataType::kFloat32, {kIds, 3}, Encoding{}, nullptr});

  g.add_op({OpType::kConvert, "w8_convert", {"w8"}, {"w8_convert"}, 0, std::nullopt});
  g.add_op({OpType::kGather, "g8", {"w8_convert", "ids"}, {"g8"}, 0, std::nullopt});
  g.add_op({OpType::kRequantGather, "g4", {"w4", "ids"}, {"g4"}, 0, Encoding::per_tensor(0.0123f, 0, 4)});
  g.add_op({OpType::kGather, "g16", {"t16", "ids"}, {"g16"}, 0, std::nullopt});
  g.add_op({OpType::kGather, "gf", {"f32", "ids"}, {"gf"}, 0, std::nullopt});
  return g;
}

// One STATIC per-axis table, the indices and a Gather: a ~1 KiB artifact.
inline Graph make_small_graph() {
  Graph g;
  g.add_tensor({"w", TensorKind::kStatic, DataType::kSFixedPoint8, {2, 3},
                Encoding::per_axis(0, {0.5f, 0.25f}, {0, 0}, 8), owned({1, 2, 3, 0xFD, 0xFE, 0xFF})});
  g.add_tensor({"ids", TensorKind::kAppWrite, DataType::kInt32, {2}, Encoding{}, nullptr});
  g.add_tensor({"out", TensorKind::kAppRead, DataType::kSFixedPoint8, {2, 3}, Encoding::per_tensor(0.5f, 0, 8), nullptr});
  g.add_op({OpType::kGather, "out", {"w", "ids"}, {"out"}, 0, std::nullopt});
  return g;
}

inline json test_metadata() {
  return json{{"source_file", "model.safetensors"},
              {"source_tensor", "model.embed_tokens.weight"},
              {"scheme", "16a4w"},
              {"sdk_version", "2.48.0.250101"},
              {"pattern", "optimized"},
              {"reason", "target SDK 2.48.0.250101 >= 2.48"},
              {"mode", "fused"},
              {"extra", {{"list", {1, 2.5, "\xc3\xbc"}}, {"flag", true}}}};
}

// ---- independent writer of the documented layout ----

inline void put_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void put_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint32_t get_u32(const std::vector<uint8_t>& b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | b[at + i];
  return v;
}
inline uint64_t get_u64(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[at + i];
  return v;
}

struct RawSection {
  uint32_t kind;
  std::string name;
  std::vector<uint8_t> bytes;
  int64_t offset = -1;  // -1: next 64-byte boundary
};

inline std::vector<uint8_t> text_bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

// Header and table as documented; checksums always right.
inline std::vector<uint8_t> build_raw(const std::vector<RawSection>& sections, uint32_t version = 1) {
  const size_t table_size = sections.size() * 96;
  std::vector<uint64_t> offsets;
  uint64_t cursor = 64 + table_size;
  uint64_t end = cursor;
  for (const auto& s : sections) {
    uint64_t off = s.offset >= 0 ? static_cast<uint64_t>(s.offset) : (cursor + 63) / 64 * 64;
    offsets.push_back(off);
    cursor = off + s.bytes.size();
    end = std::max(end, cursor);
  }
  std::vector<uint8_t> file(end, 0);
  std::memcpy(file.data(), "QEMB\x89\r\n\x1a", 8);
  put_u32(file, 8, version);
  put_u32(file, 12, static_cast<uint32_t>(sections.size()));
  put_u64(file, 16, file.size());
  put_u64(file, 24, 64);
  put_u32(file, 40, 96);
  for (size_t i = 0; i < sections.size(); ++i) {
    const size_t e = 64 + i * 96;
    put_u32(file, e, sections[i].kind);
    put_u64(file, e + 8, offsets[i]);
    put_u64(file, e + 16, sections[i].bytes.size());
    put_u64(file, e + 24, XXH3_64bits(sections[i].bytes.data(), sections[i].bytes.size()));
    std::memcpy(file.data() + e + 32, sections[i].name.data(), std::min<size_t>(sections[i].name.size(), 63));
  }
  for (size_t i = 0; i < sections.size(); ++i)
    if (!sections[i].bytes.empty())
      std::memcpy(file.data() + offsets[i], sections[i].bytes.data(), sections[i].bytes.size());
  put_u64(file, 32, XXH3_64bits(file.data(), 64 + table_size));  // checksum field is still zero here
  return file;
}

// Recomputes the header checksum after the header or table was edited.
inline void rechecksum_header(std::vector<uint8_t>& file) {
  put_u64(file, 32, 0);
  put_u64(file, 32, XXH3_64bits(file.data(), 64 + get_u32(file, 12) * size_t{96}));
}

// Splits a valid artifact back into its sections (via the documented table).
inline std::vector<RawSection> split_raw(const std::vector<uint8_t>& file) {
  std::vector<RawSection> out;
  const uint32_t count = get_u32(file, 12);
  for (uint32_t i = 0; i < count; ++i) {
    const size_t e = 64 + i * 96;
    RawSection s;
    s.kind = get_u32(file, e);
    s.name = std::string(reinterpret_cast<const char*>(file.data() + e + 32));
    const uint64_t off = get_u64(file, e + 8), size = get_u64(file, e + 16);
    s.bytes.assign(file.begin() + off, file.begin() + off + size);
    out.push_back(std::move(s));
  }
  return out;
}

// Re-encodes `file` after editing its GRAPH JSON (section 1), checksums right.
inline std::vector<uint8_t> with_graph_json(const std::vector<uint8_t>& file, const std::function<void(json&)>& edit) {
  auto sections = split_raw(file);
  json g = json::parse(sections[1].bytes.begin(), sections[1].bytes.end());
  edit(g);
  sections[1].bytes = text_bytes(g.dump());
  return build_raw(sections, get_u32(file, 8));
}

}  // namespace qemb::artifact_test
