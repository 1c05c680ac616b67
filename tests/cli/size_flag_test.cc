// Sizes on the command line take units: --memory-budget 256MiB.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "qemb/safetensors.h"
#include "support/test_util.h"

namespace qemb {
namespace {

using qemb::testing::run_command;
using qemb::testing::TempDir;

const std::string kQemb = QEMB_CLI_PATH;

TEST(SizeFlag, MemoryBudgetTakesUnits) {
  TempDir dir;
  const std::string ckpt = dir.file("m.safetensors"), art = dir.file("a.qemb");
  std::vector<float> table(64 * 32);  // a 4 KiB uint16 table
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i % 13) - 6.0f;
  std::vector<uint8_t> bytes(table.size() * 4);
  std::memcpy(bytes.data(), table.data(), bytes.size());
  ASSERT_TRUE(write_safetensors(ckpt, {}, {{"model.embed_tokens.weight", "F32", {64, 32}, bytes}}).ok());
  auto mode = [&](const std::string& budget) {
    auto r = run_command(kQemb + " compile " + ckpt + " --qnn-sdk-version 2.48 --quiet --memory-budget " + budget +
                         " -o " + art);
    EXPECT_EQ(r.exit_code, 0) << budget << "\n" << r.out;
    auto i = run_command(kQemb + " inspect " + art + " --json");
    return nlohmann::json::parse(i.out)["mode"].get<std::string>();
  };
  EXPECT_EQ(mode("4096"), "materialize");
  EXPECT_EQ(mode("4KiB"), "materialize");
  EXPECT_EQ(mode("4K"), "materialize");
  EXPECT_EQ(mode("4kB"), "fused");  // 4000 bytes: under the 4096-byte table
  EXPECT_EQ(mode("4095"), "fused");
  EXPECT_EQ(mode("1GiB"), "materialize");
  for (const std::string& bad : {"4XB", "-1MiB", "MiB", "1.5GiB", "99999999999TiB"}) {
    auto r = run_command(kQemb + " compile " + ckpt + " --memory-budget " + bad + " -o " + art);
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.out;
    EXPECT_NE(r.out.find("--memory-budget"), std::string::npos) << r.out;
  }
  auto r = run_command(kQemb + " compile " + ckpt + " --memory-budget 4XB -o " + art);
  EXPECT_NE(r.out.find("'4XB' is not a size: give bytes (268435456) or a whole number with a unit (256MiB; KiB "
                       "MiB GiB TiB or K M G T are powers of 1024, kB MB GB TB powers of 1000)"),
            std::string::npos)
      << r.out;
  r = run_command(kQemb + " compile " + ckpt + " --memory-budget 99999999999TiB -o " + art);
  EXPECT_NE(r.out.find("'99999999999TiB' is too large; the most is 9223372036854775807 bytes"), std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace qemb
