// `qemb inspect` names the instruction set its kernels actually use.
// scripts/test-aarch64.sh runs this on emulated CPU models and sets
// QEMB_EXPECT_ISA to the Highway target each model must get.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "kernels/kernels.h"
#include "qemb/safetensors.h"
#include "support/test_util.h"

namespace qemb {
namespace {

using qemb::testing::run_command;
using qemb::testing::TempDir;

const std::string kQemb = QEMB_CLI_PATH;

nlohmann::json inspect(const TempDir& dir, const std::string& mode) {
  const std::string ckpt = dir.file("model.safetensors");
  const auto table = qemb::testing::spread_table(16, 40, 5);
  std::vector<uint8_t> bytes(table.size() * 4);
  std::memcpy(bytes.data(), table.data(), bytes.size());
  EXPECT_TRUE(write_safetensors(ckpt, {}, {{"model.embed_tokens.weight", "F32", {16, 40}, bytes}}).ok());
  const std::string art = dir.file(mode + ".qemb");
  auto r = run_command(kQemb + " compile " + ckpt + " --qnn-sdk-version 2.48 --quiet --mode " + mode + " -o " + art);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  r = run_command(kQemb + " inspect " + art + " --json 2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
}

TEST(InspectIsa, NamesTheKernelsTheRuntimePicksForThisCpu) {
  TempDir dir;
  const std::string best = best_kernels().isa;
  const auto fused = inspect(dir, "fused");
  EXPECT_EQ(fused.value("isa", ""), best);
  EXPECT_EQ(fused.value("kernel", ""), "requant_gather_s4_u16[" + best + "]");
  const auto materialized = inspect(dir, "materialize");
  EXPECT_EQ(materialized.value("isa", ""), best);
  EXPECT_EQ(materialized.value("kernel", ""), "gather_u16[" + best + "]");
}

TEST(InspectIsa, NamesTheIsaExpectedForThisCpuModel) {
  const char* expected = std::getenv("QEMB_EXPECT_ISA");
  if (expected == nullptr) GTEST_SKIP() << "QEMB_EXPECT_ISA is not set";
  TempDir dir;
  EXPECT_EQ(inspect(dir, "fused").value("isa", ""), expected);
}

}  // namespace
}  // namespace qemb
