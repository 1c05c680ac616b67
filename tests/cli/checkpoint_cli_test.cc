// The command line over every checkpoint form: a sharded folder for compile
// and fakequant (--link), GGUF for eval, and an artifact of several tables
// for compile --tensor, inspect and run --table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "qemb/gguf.h"
#include "qemb/npy.h"
#include "support/checkpoints.h"
#include "support/torch_files.h"
#include "support/temp_dir.h"

namespace qemb {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace qemb::testing;

const std::string kQemb = QEMB_CLI_PATH;

CommandResult qemb(const std::string& args) { return run_command(kQemb + " " + args); }

TEST(CheckpointCli, ShardedFolderCompilesAndFakequantsIntoAFolder) {
  TempDir dir;
  ShardedCheckpoint c = write_sharded_checkpoint(dir.file("ckpt"));
  write_text_file(c.folder + "/config.json", "{\"vocab_size\": 96}\n");
  auto r = qemb("compile " + c.folder + " --qnn-sdk-version 2.48 -o " + dir.file("a.qemb"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("tensor:  model.embed_tokens.weight [96 x 40] BF16"));
  r = qemb("fakequant " + c.folder + " --scheme 16a4w --qnn-sdk-version 2.48 --link -o " + dir.file("fq"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("wrote folder " + dir.file("fq") + " (every other tensor and file unchanged, 2 shards "
                               "hard-linked)"));
  EXPECT_EQ(read_bytes(dir.file("fq/config.json")), read_bytes(c.folder + "/config.json"));
  EXPECT_EQ(read_bytes(dir.file("fq/model.safetensors.index.json")), read_bytes(c.index));
}

TEST(CheckpointCli, ExportOnnxReadsShardedFoldersAndGguf) {
  TempDir dir;
  ShardedCheckpoint c = write_sharded_checkpoint(dir.file("ckpt"));
  auto r = qemb("export-onnx " + c.folder + " --qnn-sdk-version 2.48 -o " + dir.file("s.onnx"));
  if (r.out.find("built without ONNX export") != std::string::npos) GTEST_SKIP() << r.out;
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("checkpoint: 16a4w [96 x 40], optimized pattern"));
  // The model records where its table came from.
  const std::vector<uint8_t> model = read_bytes(dir.file("s.onnx"));
  const std::string text(model.begin(), model.end());
  EXPECT_THAT(text, HasSubstr("\"file\":\"" + c.folder + "\""));
  EXPECT_THAT(text, HasSubstr("\"tensor\":\"model.embed_tokens.weight\""));

  const auto table = spread_table(40, 64, 8);
  ASSERT_TRUE(write_gguf(dir.file("m.gguf"), {{"general.architecture", "llama"}},
                         {{"token_embd.weight", 8, {40, 64}, gguf_quantize_q8_0(table.data(), table.size())}})
                  .ok());
  r = qemb("export-onnx " + dir.file("m.gguf") + " --qnn-sdk-version 2.48 -o " + dir.file("g.onnx"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("checkpoint: 16a4w [40 x 64], optimized pattern"));
}

TEST(CheckpointCli, EvalOfAQuantizedGgufSaysSo) {
  TempDir dir;
  const auto table = spread_table(40, 64, 8);
  ASSERT_TRUE(write_gguf(dir.file("m.gguf"), {{"general.architecture", "llama"}},
                         {{"token_embd.weight", 8, {40, 64}, gguf_quantize_q8_0(table.data(), table.size())}})
                  .ok());
  auto r = qemb("eval " + dir.file("m.gguf") + " --qnn-sdk-version 2.48");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("tensor      token_embd.weight Q8_0 [40 x 64]"));
  EXPECT_THAT(r.out, HasSubstr("source      already quantized (Q8_0)"));
}

TEST(CheckpointCli, SeveralTablesInOneArtifact) {
  TempDir dir;
  ShardedCheckpoint c = write_sharded_checkpoint(dir.file("ckpt"));
  const std::string art = dir.file("t.qemb");
  auto r = qemb("compile " + c.index + " --tensor model.embed_tokens.weight --tensor 'model.layers.1.w*'" +
                " --scheme 16a8w --scheme model.layers.1.w2.weight=16a4w --mode model.layers.1.w0.weight=fused" +
                " --qnn-sdk-version 2.48 -o " + art);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = qemb("inspect " + art + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["tables"].size(), 5u);
  EXPECT_EQ(j["tables"][0]["name"], "model.embed_tokens.weight");
  EXPECT_EQ(j["tables"][1]["name"], "model.layers.1.w0.weight");
  EXPECT_EQ(j["tables"][1]["mode"], "fused");
  EXPECT_EQ(j["tables"][3]["scheme"], "16a4w");
  EXPECT_EQ(j["tables"][4]["scheme"], "16a8w");
  r = qemb("inspect " + art);
  EXPECT_THAT(r.out, HasSubstr("tables:       5"));
  EXPECT_THAT(r.out, HasSubstr("  model.layers.1.w2.weight: 16a4w optimized"));

  // --table picks one; its rows are what a one-table compile of it gives.
  ASSERT_EQ(qemb("compile " + c.index + " --tensor model.layers.1.w2.weight --scheme 16a4w --qnn-sdk-version 2.48 -o " +
                 dir.file("one.qemb"))
                .exit_code,
            0);
  auto picked = qemb("run " + art + " --table model.layers.1.w2.weight --tokens 2,0,1");
  auto alone = qemb("run " + dir.file("one.qemb") + " --tokens 2,0,1");
  ASSERT_EQ(picked.exit_code, 0) << picked.out;
  EXPECT_EQ(picked.out, alone.out);
  auto none = qemb("run " + art + " --tokens 1");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_THAT(none.out, HasSubstr("the artifact holds 5 tables (model.embed_tokens.weight, model.layers.1.w0.weight"));
  EXPECT_THAT(none.out, HasSubstr("choose one with --table NAME"));
  // --name is for one table only.
  auto named = qemb("compile " + c.index + " --tensor 'model.layers.1.w*' --name x -o " + dir.file("n.qemb"));
  EXPECT_NE(named.exit_code, 0);
  EXPECT_THAT(named.out, HasSubstr("--name names a one-table artifact"));
  EXPECT_FALSE(fs::exists(dir.file("n.qemb")));
}

TEST(CheckpointCli, PytorchAndNumpyInputsCompileAndInspectNamesTheirForm) {
  TempDir dir;
  const auto table = spread_table(40, 16, 12);
  std::ofstream(dir.file("m.pt"), std::ios::binary)
      << torch_zip(state_dict_pickle({{"model.embed_tokens.weight", "FloatStorage", "0", 640, 0, {40, 16}, {16, 1}}}),
                   {{"0", float_bytes(table)}});
  auto r = qemb("compile " + dir.file("m.pt") + " --qnn-sdk-version 2.48 -o " + dir.file("p.qemb"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("tensor:  model.embed_tokens.weight [40 x 16] F32"));
  r = qemb("inspect " + dir.file("p.qemb"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("source:       " + dir.file("m.pt") + " : model.embed_tokens.weight (F32, pytorch)\n"));
  r = qemb("inspect " + dir.file("p.qemb") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["source"]["format"], "pytorch");

  const std::vector<uint8_t> halves = encode_floats(table, "F16");
  std::ofstream(dir.file("two.npz"), std::ios::binary) << stored_zip(
      {{"emb.npy", [&] {
          auto n = encode_npy("<f2", {40, 16}, halves.data(), halves.size());
          return std::string(n->begin(), n->end());
        }()},
       {"ids.npy", [&] {
          const std::vector<uint8_t> z(8, 0);
          auto n = encode_npy("<i8", {1}, z.data(), z.size());
          return std::string(n->begin(), n->end());
        }()}});
  r = qemb("compile " + dir.file("two.npz") + " --tensor emb --qnn-sdk-version 2.48 -o " + dir.file("z.qemb"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("tensor:  emb [40 x 16] F16"));
  r = qemb("inspect " + dir.file("z.qemb"));
  EXPECT_THAT(r.out, HasSubstr(" : emb (F16, npz)\n"));
  r = qemb("eval " + dir.file("two.npz") + " --tensor emb --qnn-sdk-version 2.48");
  ASSERT_EQ(r.exit_code, 0) << r.out;
}

TEST(CheckpointCli, TorchWrittenFolderCompiles) {
  if (!python_has("torch")) GTEST_SKIP() << "python3 cannot import torch (Debian's python3-torch writes the file)";
  TempDir dir;
  std::filesystem::create_directories(dir.file("ckpt"));
  std::ofstream(dir.file("w.py")) << "import sys, torch\n"
                                     "torch.manual_seed(0)\n"
                                     "m = torch.nn.Module()\n"
                                     "m.embed_tokens = torch.nn.Embedding(50, 24)\n"
                                     "m.proj = torch.nn.Linear(24, 8)\n"
                                     "torch.save(m.state_dict(), sys.argv[1] + '/pytorch_model.bin')\n";
  auto r = run_command(kTestPython + " " + dir.file("w.py") + " " + dir.file("ckpt"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = qemb("compile " + dir.file("ckpt") + " --qnn-sdk-version 2.48 -o " + dir.file("a.qemb"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("tensor:  embed_tokens.weight [50 x 24] F32"));
  r = qemb("inspect " + dir.file("a.qemb"));
  EXPECT_THAT(r.out, HasSubstr(" : embed_tokens.weight (F32, pytorch)\n"));
}

}  // namespace
}  // namespace qemb
