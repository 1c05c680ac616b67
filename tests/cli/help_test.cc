// Every command's --help ends with an example of it.
#include <gtest/gtest.h>

#include "support/test_util.h"

namespace qemb {
namespace {

TEST(Help, EveryCommandShowsAnExample) {
  for (const std::string cmd : {"compile", "run", "inspect", "bench", "eval", "fakequant", "export-onnx"}) {
    auto r = qemb::testing::run_command(std::string(QEMB_CLI_PATH) + " " + cmd + " --help");
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("\nExample:\n  qemb " + cmd + " "), std::string::npos) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("Every flag: docs/cli.md"), std::string::npos) << cmd;
  }
}

}  // namespace
}  // namespace qemb
