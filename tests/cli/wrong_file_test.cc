// The right file, the right message: a checkpoint given where an artifact
// belongs (run, inspect, bench), an artifact where a checkpoint belongs
// (compile, eval, fakequant), or a folder given as an artifact is recognised
// by its first bytes and answered with the command to use.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "qemb/npy.h"
#include "qemb/safetensors.h"
#include "support/test_util.h"

namespace qemb {
namespace {

using qemb::testing::run_command;
using qemb::testing::TempDir;

const std::string kQemb = QEMB_CLI_PATH;

class WrongFile : public ::testing::Test {
 protected:
  void SetUp() override {
    ckpt_ = dir_.file("model.safetensors");
    std::vector<float> table(16 * 8);
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i % 7) - 3.0f;
    std::vector<uint8_t> bytes(table.size() * 4);
    std::memcpy(bytes.data(), table.data(), bytes.size());
    ASSERT_TRUE(write_safetensors(ckpt_, {}, {{"model.embed_tokens.weight", "F32", {16, 8}, bytes}}).ok());
    art_ = dir_.file("model.qemb");
    auto r = run_command(kQemb + " compile " + ckpt_ + " --qnn-sdk-version 2.48 --quiet -o " + art_);
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  TempDir dir_;
  std::string ckpt_, art_;
};

TEST_F(WrongFile, ACheckpointWhereAnArtifactBelongs) {
  const std::string want = ": not a qemb artifact but a safetensors checkpoint; run, inspect and bench read a "
                           "compiled artifact: compile it first (qemb compile CHECKPOINT -o OUT.qemb)\n";
  for (const std::string& cmd : {"run " + ckpt_ + " --tokens 1", "inspect " + ckpt_, "bench " + ckpt_ + " --seconds 0.1"}) {
    auto r = run_command(kQemb + " " + cmd);
    EXPECT_EQ(r.exit_code, 1) << cmd << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("qemb: error: ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << cmd << "\n" << r.out;
  }
  // GGUF and NumPy files likewise, by their magic.
  const std::string gguf = dir_.file("m.gguf");
  ASSERT_EQ(run_command("printf 'GGUF\\003\\000\\000\\000' > " + gguf).exit_code, 0);
  auto r = run_command(kQemb + " inspect " + gguf);
  EXPECT_NE(r.out.find(": not a qemb artifact but a GGUF checkpoint; "), std::string::npos) << r.out;
  const std::string npy = dir_.file("t.npy");
  const std::vector<float> ones(4, 1.0f);
  ASSERT_TRUE(write_npy_f32(npy, ones.data(), 2, 2).ok());
  r = run_command(kQemb + " run " + npy + " --tokens 0");
  EXPECT_NE(r.out.find(": not a qemb artifact but a NumPy .npy array; "), std::string::npos) << r.out;
  // A checkpoint folder.
  r = run_command(kQemb + " run " + dir_.path().string() + " --tokens 1");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("' is a folder, not a file: an artifact is one memory-mapped .qemb file (a checkpoint "
                       "folder is compiled into one: qemb compile '"),
            std::string::npos)
      << r.out;
}

TEST_F(WrongFile, AnArtifactWhereACheckpointBelongs) {
  const std::string want = "qemb: error: invalid argument: '" + art_ +
                           "' is a qemb artifact, not a checkpoint: compile, eval and fakequant read the float "
                           "checkpoint it was compiled from (qemb inspect '" + art_ + "' names it); qemb run '" +
                           art_ + "' looks ids up in it and qemb export-onnx '" + art_ + "' exports it\n";
  for (const std::string& cmd : {"compile " + art_ + " -o " + dir_.file("x.qemb"), "eval " + art_,
                                 "fakequant " + art_ + " --scheme 16a4w -o " + dir_.file("fq.safetensors")}) {
    auto r = run_command(kQemb + " " + cmd);
    EXPECT_EQ(r.exit_code, 1) << cmd << "\n" << r.out;
    EXPECT_EQ(r.out, want) << cmd;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.file("x.qemb")));
  EXPECT_FALSE(std::filesystem::exists(dir_.file("fq.safetensors")));
}

}  // namespace
}  // namespace qemb
