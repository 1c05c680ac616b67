// Small generated checkpoints of every form qemb opens: one safetensors file,
// a sharded index with its shards, checkpoint folders.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "qemb/safetensors.h"
#include "support/test_util.h"

namespace qemb::testing {

inline std::vector<uint8_t> encode_floats(const std::vector<float>& values, const std::string& dtype) {
  auto bytes = floats_to_dtype_bytes(values.data(), values.size(), dtype);
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

inline void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

struct ShardedCheckpoint {
  std::string folder, index;
  std::vector<std::string> shards;  // file names, in order
  std::vector<float> embedding;     // the table's float values
};

inline constexpr int64_t kShardedRows = 96, kShardedDim = 40;
inline constexpr const char* kShardedEmbedding = "model.embed_tokens.weight";

// Three shards: the embedding [96, 40] BF16 in shard 2, and 40 other tensors
// spread over the three; model.safetensors.index.json names them all.
inline ShardedCheckpoint write_sharded_checkpoint(const std::string& folder, const std::string& dtype = "BF16") {
  ShardedCheckpoint c;
  c.folder = folder;
  std::filesystem::create_directories(folder);
  c.shards = {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
              "model-00003-of-00003.safetensors"};
  std::vector<std::vector<SafetensorsTensorData>> parts(3);
  c.embedding = spread_table(kShardedRows, kShardedDim, 2024);
  parts[1].push_back({kShardedEmbedding, dtype, {kShardedRows, kShardedDim}, encode_floats(c.embedding, dtype)});
  for (int k = 0; k < 40; ++k) {
    const std::string name = "model.layers." + std::to_string(k / 4) + ".w" + std::to_string(k % 4) + ".weight";
    parts[static_cast<size_t>(k % 3)].push_back(
        {name, "F32", {3, 2 + k % 5}, encode_floats(spread_table(3, 2 + k % 5, 100 + k), "F32")});
  }
  std::string map;
  for (size_t s = 0; s < 3; ++s) {
    EXPECT_TRUE(write_safetensors(folder + "/" + c.shards[s], {{"format", "pt"}}, parts[s]).ok());
    for (const auto& t : parts[s]) map += std::string(map.empty() ? "" : ",\n    ") + "\"" + t.name + "\": \"" + c.shards[s] + "\"";
  }
  c.index = folder + "/model.safetensors.index.json";
  write_text_file(c.index, "{\n  \"metadata\": {\"total_size\": 12345},\n  \"weight_map\": {\n    " + map + "\n  }\n}\n");
  return c;
}

// The same embedding as one lone safetensors file.
inline std::string write_lone_embedding(const std::string& path, const std::vector<float>& values, int64_t rows,
                                        int64_t dim, const std::string& dtype = "BF16",
                                        const std::string& name = kShardedEmbedding) {
  EXPECT_TRUE(write_safetensors(path, {}, {{name, dtype, {rows, dim}, encode_floats(values, dtype)}}).ok());
  return path;
}

}  // namespace qemb::testing
