// Checkpoint::open: one safetensors file, a sharded index, a folder, GGUF;
// only the embedding's shard is mapped; the index and its shards must agree.
#include "qemb/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "qemb/half.h"
#include "support/expect_error.h"
#include "support/checkpoints.h"
#include "support/temp_dir.h"

namespace qemb {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace qemb::testing;

std::vector<float> read_table(const Checkpoint& ckpt, const std::string& name) {
  auto t = ckpt.table(name);
  EXPECT_TRUE(t.ok()) << t.error().to_string();
  if (!t.ok()) return {};
  std::vector<float> out(static_cast<size_t>(t->rows() * t->dim()));
  EXPECT_TRUE(t->read_rows(0, t->rows(), out.data()).ok());
  return out;
}

std::vector<float> bf16_rounded(const std::vector<float>& v) {
  auto bytes = encode_floats(v, "BF16");
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = bf16_to_float(static_cast<uint16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8)));
  return out;
}

TEST(Checkpoint, ThreeShardIndexReadsTheEmbeddingFromShardTwoOnly) {
  TempDir dir;
  ShardedCheckpoint c = write_sharded_checkpoint(dir.file("ckpt"));
  // Shards 1 and 3 become garbage: opening and reading the embedding must
  // never parse (map) them.
  write_text_file(c.folder + "/" + c.shards[0], "not a safetensors file");
  write_text_file(c.folder + "/" + c.shards[2], "not a safetensors file");
  for (const std::string& path : {c.index, c.folder}) {
    auto ckpt = Checkpoint::open(path);
    ASSERT_TRUE(ckpt.ok()) << ckpt.error().to_string();
    EXPECT_EQ(ckpt->format(), CheckpointFormat::kShardedSafetensors);
    EXPECT_EQ(ckpt->tensor_names().size(), 41u);
    EXPECT_EQ(ckpt->shard_files(), c.shards);
    EXPECT_EQ(fs::path(ckpt->folder()), fs::path(c.folder));
    auto name = ckpt->find_embedding("");
    ASSERT_TRUE(name.ok()) << name.error().to_string();
    EXPECT_EQ(*name, kShardedEmbedding);
    auto file = ckpt->file_of(*name);
    ASSERT_TRUE(file.ok());
    EXPECT_EQ(fs::path(*file).filename(), c.shards[1]);
    EXPECT_EQ(read_table(*ckpt, *name), bf16_rounded(c.embedding));
    // A tensor of a garbage shard fails when (and only when) it is asked for.
    expect_error(ckpt->info("model.layers.0.w0.weight").status(), ErrorCode::kParseError, c.shards[0]);
  }
}

TEST(Checkpoint, F32RowsAreReadInPlaceOthersAreNot) {
  TempDir dir;
  const std::vector<float> values = {1.5f, -2.0f, 0.25f, 3.0f, -0.5f, 7.0f};
  for (const std::string dtype : {"F32", "BF16", "F16"}) {
    auto ckpt = Checkpoint::open(write_lone_embedding(dir.file(dtype + ".safetensors"), values, 3, 2, dtype));
    ASSERT_TRUE(ckpt.ok()) << ckpt.error().to_string();
    auto t = ckpt->table(kShardedEmbedding);
    ASSERT_TRUE(t.ok()) << t.error().to_string();
    const float* rows = t->rows_in_place(1, 3);
    if (dtype != "F32") {
      EXPECT_EQ(rows, nullptr) << dtype;
      continue;
    }
    // The writer starts the data 8-byte aligned, so F32 rows are in place.
    ASSERT_NE(rows, nullptr);
    EXPECT_EQ(std::vector<float>(rows, rows + 4), std::vector<float>(values.begin() + 2, values.end()));
    EXPECT_EQ(t->rows_in_place(0, 4), nullptr);  // past the last row
    EXPECT_EQ(t->rows_in_place(-1, 1), nullptr);
  }
}

TEST(Checkpoint, MissingShardIsNamed) {
  TempDir dir;
  ShardedCheckpoint c = write_sharded_checkpoint(dir.file("ckpt"));
  fs::remove(c.folder + "/" + c.shards[2]);
  expect_error(Checkpoint::open(c.index).status(), ErrorCode::kNotFound,
               "names shard 'model-00003-of-00003.safetensors', which is not in");
}

TEST(Checkpoint, TensorInTheIndexButNotInItsShard) {
  TempDir dir;
  ShardedCheckpoint c = write_sharded_checkpoint(dir.file("ckpt"));
  std::string index = read_text(c.index);
  index.replace(index.find("\"weight_map\": {"), 15,
                "\"weight_map\": {\n    \"model.ghost.weight\": \"model-00002-of-00003.safetensors\",");
  write_text_file(c.index, index);
  auto ckpt = Checkpoint::open(c.index);
  ASSERT_TRUE(ckpt.ok()) << ckpt.error().to_string();
  expect_error(ckpt->find_embedding("").status(), ErrorCode::kParseError,
               "places tensor 'model.ghost.weight' in shard 'model-00002-of-00003.safetensors', but that shard "
               "does not hold it");
}

TEST(Checkpoint, ShardDisagreeingWithTheIndex) {
  TempDir dir;
  ShardedCheckpoint c = write_sharded_checkpoint(dir.file("ckpt"));
  const std::string original = read_text(c.index);
  // model.layers.0.w1.weight lives in shard 2; the index claims shard 1.
  std::string moved = original;
  const std::string entry = "\"model.layers.0.w1.weight\": \"model-00002-of-00003.safetensors\"";
  ASSERT_NE(moved.find(entry), std::string::npos);
  moved.replace(moved.find(entry), entry.size(), "\"model.layers.0.w1.weight\": \"model-00001-of-00003.safetensors\"");
  write_text_file(c.index, moved);
  auto ckpt = Checkpoint::open(c.index);
  ASSERT_TRUE(ckpt.ok());
  expect_error(ckpt->table(kShardedEmbedding).status(), ErrorCode::kParseError,
               "shard 'model-00002-of-00003.safetensors' holds tensor 'model.layers.0.w1.weight', which index '" +
                   c.index + "' places in 'model-00001-of-00003.safetensors'; the index and its shards disagree");
  // And one the index does not list at all.
  std::string unlisted = original;
  unlisted.replace(unlisted.find(entry), entry.size() + 1, "");
  write_text_file(c.index, unlisted);
  auto again = Checkpoint::open(c.index);
  ASSERT_TRUE(again.ok());
  expect_error(again->table(kShardedEmbedding).status(), ErrorCode::kParseError,
               "holds tensor 'model.layers.0.w1.weight', which index '" + c.index + "' does not list");
}

TEST(Checkpoint, BadIndexes) {
  TempDir dir;
  const std::string index = dir.file("model.safetensors.index.json");
  write_text_file(index, "{\"weight_map\": ");
  expect_error(Checkpoint::open(index).status(), ErrorCode::kParseError, "not valid JSON");
  write_text_file(index, "{\"metadata\": {}}");
  expect_error(Checkpoint::open(index).status(), ErrorCode::kParseError, "has no \"weight_map\" object");
  write_text_file(index, "{\"weight_map\": {\"a\": 3}}");
  expect_error(Checkpoint::open(index).status(), ErrorCode::kParseError, "entry 'a' is not a file name string");
  write_text_file(index, "{\"weight_map\": {\"a\": \"../outside.safetensors\"}}");
  expect_error(Checkpoint::open(index).status(), ErrorCode::kParseError, "shards must be named inside the index's folder");
  write_text_file(index, "{\"weight_map\": {}}");
  expect_error(Checkpoint::open(index).status(), ErrorCode::kParseError, "\"weight_map\" is empty");
  write_text_file(index, "{\"weight_map\": {\"a\": \"x.safetensors\", \"a\": \"y.safetensors\"}}");
  expect_error(Checkpoint::open(index).status(), ErrorCode::kParseError, "\"weight_map\" lists 'a' more than once");
  write_text_file(index, "{\"weight_map\": {\"a\": \"x.safetensors\"}, \"weight_map\": {}}");
  expect_error(Checkpoint::open(index).status(), ErrorCode::kParseError, "repeats the key 'weight_map'");
  write_text_file(index, std::string(100000, '[') + std::string(100000, ']'));
  expect_error(Checkpoint::open(index).status(), ErrorCode::kParseError, "nests JSON deeper than 16 levels");
  expect_error(Checkpoint::open(dir.file("nope")).status(), ErrorCode::kNotFound, "No such file or directory");
}

TEST(Checkpoint, FolderWithOneFileOrNone) {
  TempDir dir;
  fs::create_directories(dir.file("one"));
  const auto values = spread_table(5, 3, 1);
  write_lone_embedding(dir.file("one/model.safetensors"), values, 5, 3, "F32");
  write_text_file(dir.file("one/config.json"), "{}");
  auto ckpt = Checkpoint::open(dir.file("one"));
  ASSERT_TRUE(ckpt.ok()) << ckpt.error().to_string();
  EXPECT_EQ(ckpt->format(), CheckpointFormat::kSafetensors);
  EXPECT_EQ(read_table(*ckpt, kShardedEmbedding), values);

  fs::create_directories(dir.file("two"));
  write_lone_embedding(dir.file("two/a.safetensors"), values, 5, 3, "F32");
  write_lone_embedding(dir.file("two/b.safetensors"), values, 5, 3, "F32");
  expect_error(Checkpoint::open(dir.file("two")).status(), ErrorCode::kInvalidArgument,
               "holds several .safetensors files (a.safetensors, b.safetensors) but no "
               "model.safetensors.index.json");
  fs::create_directories(dir.file("none"));
  expect_error(Checkpoint::open(dir.file("none")).status(), ErrorCode::kNotFound,
               "holds no model.safetensors.index.json, .safetensors or .gguf file");
}

TEST(Checkpoint, TiedModelUsesLmHeadUnlessConfigUnties) {
  TempDir dir;
  fs::create_directories(dir.file("tied"));
  const auto head = spread_table(6, 4, 9);
  ASSERT_TRUE(write_safetensors(dir.file("tied/model.safetensors"), {},
                                {{"lm_head.weight", "F32", {6, 4}, encode_floats(head, "F32")},
                                 {"model.norm.weight", "F32", {4}, encode_floats({1, 1, 1, 1}, "F32")}})
                  .ok());
  auto ckpt = Checkpoint::open(dir.file("tied"));
  ASSERT_TRUE(ckpt.ok());
  auto name = ckpt->find_embedding("");
  ASSERT_TRUE(name.ok()) << name.error().to_string();
  EXPECT_EQ(*name, "lm_head.weight");
  EXPECT_EQ(read_table(*ckpt, *name), head);

  write_text_file(dir.file("tied/config.json"), "{\"tie_word_embeddings\": false}");
  auto untied = Checkpoint::open(dir.file("tied"));
  ASSERT_TRUE(untied.ok());
  expect_error(untied->find_embedding("").status(), ErrorCode::kNotFound,
               "config.json says \"tie_word_embeddings\": false");
  // Asked for by name, it is still there.
  EXPECT_EQ(*untied->find_embedding("lm_head.weight"), "lm_head.weight");
}

TEST(Checkpoint, SelectTablesByNamesAndGlobs) {
  TempDir dir;
  ShardedCheckpoint c = write_sharded_checkpoint(dir.file("ckpt"));
  auto ckpt = Checkpoint::open(c.folder);
  ASSERT_TRUE(ckpt.ok());
  auto some = ckpt->select_tables({"model.layers.1.w*", kShardedEmbedding, "model.layers.1.w2.weight"});
  ASSERT_TRUE(some.ok()) << some.error().to_string();
  EXPECT_EQ(*some, (std::vector<std::string>{"model.layers.1.w0.weight", "model.layers.1.w1.weight",
                                             "model.layers.1.w2.weight", "model.layers.1.w3.weight",
                                             kShardedEmbedding}));
  auto detected = ckpt->select_tables({});
  ASSERT_TRUE(detected.ok());
  EXPECT_EQ(*detected, std::vector<std::string>{kShardedEmbedding});
  expect_error(ckpt->select_tables({"decoder.*"}).status(), ErrorCode::kNotFound,
               "no tensor 'decoder.*' in '" + c.index + "' and no name matches it as a pattern: ");
  expect_error(ckpt->select_tables({"model.embed_token.weight"}).status(), ErrorCode::kNotFound,
               "'model' has no member 'embed_token'; closest existing names: 'model.embed_tokens', 'model.layers'");
}

}  // namespace
}  // namespace qemb
