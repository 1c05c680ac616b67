// compile, eval and fakequant take every checkpoint form Checkpoint::open
// does and give the same table the same result: a sharded index, a folder, a
// lone file. fakequant of a folder writes a complete new folder.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <cstring>
#include <numeric>

#include "qemb/checkpoint.h"
#include "qemb/eval.h"
#include "qemb/gguf.h"
#include "qemb/half.h"
#include "qemb/runtime.h"
#include "support/checkpoints.h"
#include "support/runtime_rows.h"
#include "support/temp_dir.h"

namespace qemb {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace qemb::testing;

std::vector<std::string> files_under(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(folder))
    if (e.is_regular_file()) names.push_back(e.path().lexically_relative(folder).string());
  std::sort(names.begin(), names.end());
  return names;
}

ino_t inode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

TEST(CheckpointForms, CompileFromIndexFolderAndLoneFileAgreeBitForBit) {
  TempDir dir;
  ShardedCheckpoint c = write_sharded_checkpoint(dir.file("ckpt"));
  const std::string lone = write_lone_embedding(dir.file("lone.safetensors"), c.embedding, kShardedRows, kShardedDim);
  CompileOptions o;
  o.scheme = Scheme::k16a8w;
  o.qnn_sdk_version = "2.48";
  ASSERT_TRUE(compile_checkpoint(lone, o, dir.file("lone.qemb")).ok());
  const std::vector<float> expected = lookup_all(dir.file("lone.qemb"));
  ASSERT_EQ(expected.size(), static_cast<size_t>(kShardedRows * kShardedDim));
  for (const std::string& input : {c.index, c.folder}) {
    const std::string out = dir.file("sharded.qemb");
    fs::remove(out);
    auto compiled = compile_checkpoint(input, o, out);
    ASSERT_TRUE(compiled.ok()) << compiled.error().to_string();
    EXPECT_EQ(compiled->metadata["source"]["tensor"], kShardedEmbedding);
    EXPECT_EQ(lookup_all(out), expected) << input;
  }
}

TEST(CheckpointForms, EvalFromIndexMatchesTheLoneFile) {
  TempDir dir;
  ShardedCheckpoint c = write_sharded_checkpoint(dir.file("ckpt"));
  const std::string lone = write_lone_embedding(dir.file("lone.safetensors"), c.embedding, kShardedRows, kShardedDim);
  EvalOptions o;
  o.qnn_sdk_version = "2.48";
  auto a = evaluate_checkpoint(lone, o);
  auto b = evaluate_checkpoint(c.index, o);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->results.size(), b->results.size());
  for (size_t i = 0; i < a->results.size(); ++i) EXPECT_EQ(a->results[i].sqnr_db, b->results[i].sqnr_db);
  EXPECT_EQ(b->tensor, kShardedEmbedding);
  EXPECT_FALSE(b->source_quantized);
}

class FakeQuantFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    c_ = write_sharded_checkpoint(dir_.file("ckpt"));
    write_text_file(c_.folder + "/config.json", "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 96}\n");
    write_text_file(c_.folder + "/tokenizer.json", "{\"model\": {\"type\": \"BPE\"}}\n");
    fs::create_directories(c_.folder + "/original");
    write_text_file(c_.folder + "/original/params.json", "{\"dim\": 40}\n");
    o_.scheme = Scheme::k16a4w;
    o_.qnn_sdk_version = "2.48";
  }
  TempDir dir_;
  ShardedCheckpoint c_;
  FakeQuantOptions o_;
};

TEST_F(FakeQuantFolder, WritesACompleteFolderWithOnlyTheEmbeddingShardChanged) {
  const std::string out = dir_.file("fq");
  auto r = fakequant_checkpoint(c_.folder, o_, out);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(r->folder);
  EXPECT_EQ(r->linked_files, 0);
  EXPECT_EQ(files_under(out), files_under(c_.folder));
  for (const std::string& f : files_under(c_.folder)) {
    if (f == c_.shards[1]) continue;
    EXPECT_EQ(read_bytes(out + "/" + f), read_bytes(c_.folder + "/" + f)) << f;
    EXPECT_NE(inode(out + "/" + f), inode(c_.folder + "/" + f)) << f;
  }
  // The changed shard is exactly fakequant of that shard on its own.
  auto alone = fakequant_checkpoint(c_.folder + "/" + c_.shards[1], o_, dir_.file("alone.safetensors"));
  ASSERT_TRUE(alone.ok()) << alone.error().to_string();
  EXPECT_FALSE(alone->folder);
  EXPECT_EQ(read_bytes(out + "/" + c_.shards[1]), read_bytes(dir_.file("alone.safetensors")));
  EXPECT_NE(read_bytes(out + "/" + c_.shards[1]), read_bytes(c_.folder + "/" + c_.shards[1]));
  // The index input gives the same folder.
  auto from_index = fakequant_checkpoint(c_.index, o_, dir_.file("fq2"));
  ASSERT_TRUE(from_index.ok());
  for (const std::string& f : files_under(out))
    EXPECT_EQ(read_bytes(out + "/" + f), read_bytes(dir_.file("fq2/" + f))) << f;
}

TEST_F(FakeQuantFolder, LinkHardLinksTheUnchangedShards) {
  o_.link = true;
  const std::string out = dir_.file("fq");
  auto r = fakequant_checkpoint(c_.folder, o_, out);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->linked_files, 2);
  EXPECT_EQ(inode(out + "/" + c_.shards[0]), inode(c_.folder + "/" + c_.shards[0]));
  EXPECT_EQ(inode(out + "/" + c_.shards[2]), inode(c_.folder + "/" + c_.shards[2]));
  EXPECT_NE(inode(out + "/" + c_.shards[1]), inode(c_.folder + "/" + c_.shards[1]));
  EXPECT_NE(inode(out + "/config.json"), inode(c_.folder + "/config.json"));  // only shards are linked
}

TEST_F(FakeQuantFolder, RefusesAnExistingOrNestedOutputAndLeavesNothingOnFailure) {
  fs::create_directories(dir_.file("exists"));
  auto exists = fakequant_checkpoint(c_.folder, o_, dir_.file("exists"));
  ASSERT_FALSE(exists.ok());
  EXPECT_THAT(exists.error().message, HasSubstr("already exists"));
  auto nested = fakequant_checkpoint(c_.folder, o_, c_.folder + "/fq");
  ASSERT_FALSE(nested.ok());
  EXPECT_THAT(nested.error().message, HasSubstr("lies inside the checkpoint folder"));
  // A shard that disagrees with the index fails after the table is chosen; no folder appears.
  write_text_file(c_.folder + "/" + c_.shards[1], "garbage");
  auto bad = fakequant_checkpoint(c_.folder, o_, dir_.file("fq"));
  ASSERT_FALSE(bad.ok());
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir_.path())) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"ckpt", "exists"}));
}

TEST(CheckpointForms, TiedModelCompilesFromLmHead) {
  TempDir dir;
  const auto head = spread_table(64, 16, 5);
  ASSERT_TRUE(write_safetensors(dir.file("tied.safetensors"), {},
                                {{"model.norm.weight", "F32", {16}, encode_floats(std::vector<float>(16, 1.0f), "F32")},
                                 {"lm_head.weight", "F32", {64, 16}, encode_floats(head, "F32")}})
                  .ok());
  write_lone_embedding(dir.file("embed.safetensors"), head, 64, 16, "F32");
  CompileOptions o;
  o.qnn_sdk_version = "2.48";
  auto tied = compile_checkpoint(dir.file("tied.safetensors"), o, dir.file("tied.qemb"));
  ASSERT_TRUE(tied.ok()) << tied.error().to_string();
  EXPECT_EQ(tied->metadata["source"]["tensor"], "lm_head.weight");
  ASSERT_TRUE(compile_checkpoint(dir.file("embed.safetensors"), o, dir.file("embed.qemb")).ok());
  EXPECT_EQ(lookup_all(dir.file("tied.qemb")), lookup_all(dir.file("embed.qemb")));
}


// ggml's dequantization, written out here independently of the reader.
std::vector<float> ggml_dequantize(const std::vector<uint8_t>& blocks, bool q8, size_t count) {
  std::vector<float> out(count);
  const size_t block_bytes = q8 ? 34 : 18;
  for (size_t b = 0; b < count / 32; ++b) {
    const uint8_t* p = blocks.data() + b * block_bytes;
    const float d = f16_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8)));
    for (int j = 0; j < 32; ++j) {
      if (q8) {
        out[b * 32 + j] = static_cast<float>(static_cast<int8_t>(p[2 + j])) * d;
      } else {
        const int nibble = j < 16 ? (p[2 + j] & 0x0F) : (p[2 + j - 16] >> 4);
        out[b * 32 + j] = static_cast<float>(nibble - 8) * d;
      }
    }
  }
  return out;
}

TEST(CheckpointForms, GgufCompilesBitExactToTheSameTableAsSafetensors) {
  TempDir dir;
  constexpr int64_t kRows = 70, kDim = 64;
  const auto table = spread_table(kRows, kDim, 77);
  struct Type {
    const char* name;
    uint32_t id;
  };
  for (const Type type : {Type{"F32", 0}, Type{"F16", 1}, Type{"BF16", 30}, Type{"Q8_0", 8}, Type{"Q4_0", 2}}) {
    SCOPED_TRACE(type.name);
    const std::string name = type.name;
    std::vector<uint8_t> bytes;
    std::string st_dtype = name;
    std::vector<float> st_values = table;
    if (name == "Q8_0" || name == "Q4_0") {
      bytes = name == "Q8_0" ? gguf_quantize_q8_0(table.data(), table.size())
                             : gguf_quantize_q4_0(table.data(), table.size());
      st_dtype = "F32";
      st_values = ggml_dequantize(bytes, name == "Q8_0", table.size());
    } else {
      bytes = encode_floats(table, name);
    }
    const std::string gguf = dir.file("m-" + name + ".gguf");
    ASSERT_TRUE(write_gguf(gguf, {{"general.architecture", "llama"}},
                           {{"output_norm.weight", 0, {kDim}, encode_floats(std::vector<float>(kDim, 1.0f), "F32")},
                            {"token_embd.weight", type.id, {kRows, kDim}, bytes},
                            {"output.weight", 0, {kRows, kDim}, encode_floats(table, "F32")}})
                    .ok());
    const std::string st = dir.file("m-" + name + ".safetensors");
    ASSERT_TRUE(write_safetensors(st, {}, {{"model.embed_tokens.weight", st_dtype, {kRows, kDim},
                                            st_dtype == "F32" && name != "F32" ? encode_floats(st_values, "F32")
                                                                               : bytes}})
                    .ok());
    for (const Scheme scheme : {Scheme::k16a4w, Scheme::k16a8w}) {
      CompileOptions o;
      o.scheme = scheme;
      o.qnn_sdk_version = scheme == Scheme::k16a4w ? "2.48" : "2.37";
      const std::string a = dir.file("g.qemb"), b = dir.file("s.qemb");
      fs::remove(a);
      fs::remove(b);
      auto from_gguf = compile_checkpoint(gguf, o, a);
      ASSERT_TRUE(from_gguf.ok()) << from_gguf.error().to_string();
      EXPECT_EQ(from_gguf->metadata["source"]["tensor"], "token_embd.weight");
      EXPECT_EQ(from_gguf->metadata["source"]["dtype"], name);
      ASSERT_TRUE(compile_checkpoint(st, o, b).ok());
      const auto ga = lookup_all(a), sb = lookup_all(b);
      ASSERT_EQ(ga.size(), static_cast<size_t>(kRows * kDim));
      EXPECT_EQ(0, std::memcmp(ga.data(), sb.data(), ga.size() * sizeof(float)));
    }
    EvalOptions eo;
    eo.qnn_sdk_version = "2.48";
    auto report = evaluate_checkpoint(gguf, eo);
    ASSERT_TRUE(report.ok()) << report.error().to_string();
    const bool quantized = name == "Q8_0" || name == "Q4_0";
    EXPECT_EQ(report->source_quantized, quantized);
    EXPECT_EQ(format_eval_report(*report).find("already quantized (" + name + ")") != std::string::npos, quantized);
    EXPECT_EQ(eval_report_json(*report)["source_quantized"], quantized);
  }
}

TEST(CheckpointForms, GgufFakequantIsRefused) {
  TempDir dir;
  ASSERT_TRUE(write_gguf(dir.file("m.gguf"), {}, {{"token_embd.weight", 0, {2, 2}, encode_floats({1, 2, 3, 4}, "F32")}})
                  .ok());
  auto r = fakequant_checkpoint(dir.file("m.gguf"), FakeQuantOptions{}, dir.file("o.safetensors"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);
  EXPECT_THAT(r.error().message, HasSubstr("is GGUF"));
}

}  // namespace
}  // namespace qemb
