#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "core/ir.h"
#include "qemb/compiler.h"
#include "qemb/safetensors.h"
#include "support/address_limit.h"
#include "support/test_util.h"

namespace qemb {
namespace {

using qemb::testing::spread_table;
using qemb::testing::TempDir;

TargetVersion target(const char* v) { return qemb::testing::sdk_target(v, "explicit"); }

TargetVersion unknown_target() {
  TargetVersion t;
  t.source = "unknown";
  t.unknown_reason = "QNN_SDK_ROOT is not set";
  return t;
}

std::vector<std::string> op_types(const Graph& g) {
  std::vector<std::string> out;
  for (const Op& op : g.ops) out.push_back(std::string(to_string(op.type)) + ":" + op.name);
  return out;
}

TEST(CompileTable, OptimizedFoldsToOneGatherOverUint16Table) {
  auto table = spread_table(17, 5, 1);
  CompileOptions o;
  o.mode = CompileMode::kMaterialize;
  auto c = compile_table(table.data(), 17, 5, o, target("2.48"));
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(c->pattern, Pattern::kOptimized);
  EXPECT_EQ(op_types(*c->runtime_graph), (std::vector<std::string>{"Gather:embedding"}));
  const Tensor* t = c->runtime_graph->find_tensor("embedding_convert");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->kind, TensorKind::kStatic);
  EXPECT_EQ(t->dtype, DataType::kUFixedPoint16);
  EXPECT_EQ(c->metadata["pattern"], "optimized");
  EXPECT_EQ(c->metadata["sdk_version"], "2.48");
}

TEST(CompileTable, LegacyKeepsBothOpsWhenMaterialized) {
  auto table = spread_table(9, 4, 2);
  CompileOptions o;
  o.mode = CompileMode::kMaterialize;
  auto c = compile_table(table.data(), 9, 4, o, target("2.37"));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->pattern, Pattern::kLegacy);
  EXPECT_EQ(op_types(*c->runtime_graph),
            (std::vector<std::string>{"Gather:embedding_intermediate", "Convert:embedding_convert"}));
  EXPECT_NE(c->pattern_reason.find("2.37"), std::string::npos);
  EXPECT_NE(c->pattern_reason.find("2.48"), std::string::npos);
}

TEST(CompileTable, FusedModeLeavesOneRequantGatherForBothPatterns) {
  auto table = spread_table(9, 4, 3);
  CompileOptions o;
  o.mode = CompileMode::kFused;
  for (const char* v : {"2.37", "2.48"}) {
    auto c = compile_table(table.data(), 9, 4, o, target(v));
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(op_types(*c->runtime_graph), (std::vector<std::string>{"RequantGather:embedding"})) << v;
    EXPECT_EQ(c->runtime_graph->ops[0].intermediate.has_value(), c->pattern == Pattern::kLegacy);
  }
}

TEST(CompileTable, AutoModePicksFusedOverTheMemoryBudget) {
  auto table = spread_table(64, 32, 4);  // materialized: 64*32*2 = 4096 bytes
  CompileOptions o;
  o.mode = CompileMode::kAuto;
  o.memory_budget = 4096;
  auto fits = compile_table(table.data(), 64, 32, o, target("2.48"));
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ(fits->mode, CompileMode::kMaterialize);
  o.memory_budget = 4095;
  auto over = compile_table(table.data(), 64, 32, o, target("2.48"));
  ASSERT_TRUE(over.ok());
  EXPECT_EQ(over->mode, CompileMode::kFused);
  EXPECT_NE(over->mode_reason.find("over the memory budget"), std::string::npos) << over->mode_reason;
}

// At 8 bits materializing is also the faster lookup, and the reason says so.
TEST(CompileTable, AutoModeSaysWhyItMaterializes8Bit) {
  auto table = spread_table(64, 32, 4);
  CompileOptions o;
  o.mode = CompileMode::kAuto;
  auto four = compile_table(table.data(), 64, 32, o, target("2.48"));
  ASSERT_TRUE(four.ok());
  EXPECT_EQ(four->mode_reason, "the materialized uint16 table (0.0 MiB) fits the memory budget of 256.0 MiB");
  o.scheme = Scheme::k16a8w;
  auto eight = compile_table(table.data(), 64, 32, o, target("2.48"));
  ASSERT_TRUE(eight.ok());
  EXPECT_EQ(eight->mode, CompileMode::kMaterialize);
  EXPECT_EQ(eight->mode_reason,
            "the materialized uint16 table (0.0 MiB) fits the memory budget of 256.0 MiB; at 8 bits it is also the "
            "faster lookup on rows in cache: the fused gather reads half the bytes but requantizes every value, "
            "about 0.8x the materialized gather on rows in cache at D=128 and 0.9x at D=4096, and 1.2x on cold rows");
}

TEST(CompileTable, UnknownSdkFallsBackToLegacyAndSaysWhy) {
  auto table = spread_table(4, 4, 5);
  auto c = compile_table(table.data(), 4, 4, CompileOptions{}, unknown_target());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->pattern, Pattern::kLegacy);
  EXPECT_NE(c->pattern_reason.find("QNN_SDK_ROOT is not set"), std::string::npos) << c->pattern_reason;
  EXPECT_NE(c->pattern_reason.find("give that version explicitly"), std::string::npos);
  EXPECT_TRUE(c->metadata["sdk_version"].is_null());
}

TEST(CompileTable, ForcedOptimizedOnOldTargetFailsValidation) {
  auto table = spread_table(4, 4, 6);
  CompileOptions o;
  o.pattern = Pattern::kOptimized;
  auto c = compile_table(table.data(), 4, 4, o, target("2.37"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::kValidationError);
  EXPECT_NE(c.error().message.find("embedding_convert"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find(">= 2.48"), std::string::npos);
  EXPECT_NE(c.error().message.find("2.37"), std::string::npos);
}

TEST(CompileTable, CalibrationUsesOnlyTheObservedRows) {
  // Row 0 spans [-1, 2], row 1 spans [-4, 12]: calibrating on row 0 gives
  // s_a = 3/65535 and zp = rne(1 / s_a) = 21845; the whole table gives
  // s_a = 16/65535 and zp = rne(4 * 65535 / 16) = rne(16383.75) = 16384.
  std::vector<float> table = {-1.0f, 2.0f, -4.0f, 12.0f};
  CompileOptions o;
  o.calibration_tokens = std::vector<int64_t>{0};
  auto c = compile_table(table.data(), 2, 2, o, target("2.48"));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->act.scale, 3.0f / 65535.0f);
  EXPECT_EQ(c->act.zero_point, 21845);
  auto all = compile_table(table.data(), 2, 2, CompileOptions{}, target("2.48"));
  EXPECT_EQ(all->act.scale, 16.0f / 65535.0f);
  EXPECT_EQ(all->act.zero_point, 16384);
}

TEST(CompileTable, CalibrationTokenOutOfRangeNamesPositionAndValue) {
  std::vector<float> table(8, 1.0f);
  CompileOptions o;
  o.calibration_tokens = std::vector<int64_t>{1, 0, 4};
  auto c = compile_table(table.data(), 4, 2, o, target("2.48"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::kOutOfRange);
  EXPECT_NE(c.error().message.find("calibration token 4 at position 2"), std::string::npos) << c.error().message;
}

TEST(CompileTable, NonFiniteValuesAreRefusedWithRowAndColumn) {
  std::vector<float> table(12, 0.5f);
  table[7] = std::nanf("");
  auto c = compile_table(table.data(), 3, 4, CompileOptions{}, target("2.48"));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("NaN) at row 1, column 3"), std::string::npos) << c.error().message;
  table[7] = INFINITY;
  c = compile_table(table.data(), 3, 4, CompileOptions{}, target("2.48"));
  EXPECT_NE(c.error().message.find("Inf) at row 1, column 3"), std::string::npos);
}

TEST(CompileTable, EmptyTableIsAnError) {
  std::vector<float> table(4, 1.0f);
  auto c = compile_table(table.data(), 0, 4, CompileOptions{}, target("2.48"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(c.error().message.find("empty (0 x 4)"), std::string::npos);
}

class CompileCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    ckpt_ = dir_.file("model.safetensors");
    auto table = spread_table(32, 8, 7);
    std::vector<uint8_t> bytes(table.size() * 4);
    std::memcpy(bytes.data(), table.data(), bytes.size());
    std::vector<uint8_t> bias(8 * 4, 0);
    ASSERT_TRUE(write_safetensors(ckpt_, {{"format", "pt"}},
                                  {{"model.embed_tokens.weight", "F32", {32, 8}, bytes},
                                   {"model.norm.weight", "F32", {8}, bias}})
                    .ok());
  }
  TempDir dir_;
  std::string ckpt_;
};

TEST_F(CompileCheckpoint, WritesTheArtifactAndRecordsProvenance) {
  CompileOptions o;
  o.qnn_sdk_version = "v2.48.0.260715";
  auto c = compile_checkpoint(ckpt_, o, dir_.file("out.qemb"));
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_TRUE(std::filesystem::exists(dir_.file("out.qemb")));
  EXPECT_EQ(c->metadata["source"]["tensor"], "model.embed_tokens.weight");
  EXPECT_EQ(c->metadata["source"]["dtype"], "F32");
  EXPECT_EQ(c->metadata["sdk_version"], "2.48.0.260715");
  EXPECT_EQ(c->pattern, Pattern::kOptimized);
}

TEST_F(CompileCheckpoint, ReadsTheTargetFromQnnSdkRoot) {
  auto sdk = dir_.path() / "qairt" / "2.48.1.250101";
  std::filesystem::create_directories(sdk);
  ::setenv("QNN_SDK_ROOT", sdk.c_str(), 1);
  auto c = compile_checkpoint(ckpt_, CompileOptions{}, dir_.file("env.qemb"));
  ::unsetenv("QNN_SDK_ROOT");
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(c->pattern, Pattern::kOptimized);
  EXPECT_EQ(c->metadata["sdk_version"], "2.48.1.250101");
  auto unset = compile_checkpoint(ckpt_, CompileOptions{}, dir_.file("unset.qemb"));
  ASSERT_TRUE(unset.ok());
  EXPECT_EQ(unset->pattern, Pattern::kLegacy);
  EXPECT_NE(unset->pattern_reason.find("QNN_SDK_ROOT"), std::string::npos) << unset->pattern_reason;
}

TEST_F(CompileCheckpoint, RefusesToOverwriteItsInput) {
  auto c = compile_checkpoint(ckpt_, CompileOptions{}, ckpt_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("is the input checkpoint"), std::string::npos);
}

TEST_F(CompileCheckpoint, MissingTensorSuggestsTheClosestNamesAndWritesNothing) {
  CompileOptions o;
  o.tensor = "model.embed.weight";
  auto c = compile_checkpoint(ckpt_, o, dir_.file("x.qemb"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::kNotFound);
  EXPECT_NE(c.error().message.find("'model' has no member 'embed'; closest existing names: 'model.embed_tokens'"),
            std::string::npos)
      << c.error().message;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("x.qemb")));
}

TEST_F(CompileCheckpoint, NonTwoDimensionalTensorIsRefused) {
  CompileOptions o;
  o.tensor = "model.norm.weight";
  auto c = compile_checkpoint(ckpt_, o, dir_.file("x.qemb"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::kUnsupported);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("x.qemb")));
}

TEST_F(CompileCheckpoint, BadExplicitVersionIsAnError) {
  CompileOptions o;
  o.qnn_sdk_version = "2.x";
  auto c = compile_checkpoint(ckpt_, o, dir_.file("x.qemb"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::kVersionError);
}

// Progress reports: each phase opens with 0 rows done (so a rate counts from
// its start), never goes back, and closes with every row done; the
// materialized optimized pattern has a second phase, the others one.
TEST(CompileTable, ProgressReportsEachPhaseFromZeroToEveryRow) {
  const int64_t rows = 3000, dim = 64;
  const auto table = qemb::testing::spread_table(rows, dim, 11);
  struct Case {
    CompileMode mode;
    const char* version;
    std::vector<std::string> phases;
  };
  for (const Case& c : {Case{CompileMode::kMaterialize, "2.48", {"scan", "quantize"}},
                        Case{CompileMode::kMaterialize, "2.37", {"scan"}},
                        Case{CompileMode::kFused, "2.48", {"scan"}}}) {
    std::vector<std::tuple<std::string, int64_t, int64_t>> reports;
    CompileOptions o;
    o.mode = c.mode;
    o.threads = 2;
    o.progress = [&](const char* phase, int64_t done, int64_t total) { reports.emplace_back(phase, done, total); };
    ASSERT_TRUE(compile_table(table.data(), rows, dim, o, target(c.version)).ok());
    std::vector<std::string> phases;
    for (size_t i = 0; i < reports.size(); ++i) {
      const auto& [phase, done, total] = reports[i];
      EXPECT_EQ(total, rows);
      if (phases.empty() || phases.back() != phase) {
        EXPECT_EQ(done, 0) << phase << " must open at 0 rows";
        if (!phases.empty()) EXPECT_EQ(std::get<1>(reports[i - 1]), rows) << phases.back() << " must close at every row";
        phases.push_back(phase);
      } else {
        EXPECT_GE(done, std::get<1>(reports[i - 1])) << phase << " went back";
      }
    }
    EXPECT_EQ(phases, c.phases) << to_string(c.mode) << " " << c.version;
    ASSERT_FALSE(reports.empty());
    EXPECT_EQ(std::get<1>(reports.back()), rows);
  }
}

TEST(CompileTable, RangeBeyondFloat32IsRefusedWithTheCause) {
  // Finite values whose span hi - lo overflows: every output used to be NaN.
  auto table = spread_table(6, 4, 3);
  table[5] = 2e38f;
  table[9] = -2e38f;
  CompileOptions o;
  auto c = compile_table(table.data(), 6, 4, o, target("2.48"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(c.error().message.find("the table's values span [-2e+38, 2e+38], wider than float32 can hold"),
            std::string::npos)
      << c.error().message;
}

TEST(CompileTable, NegativeThreadCountIsRefused) {
  auto table = spread_table(6, 4, 3);
  CompileOptions o;
  o.threads = -5;
  auto c = compile_table(table.data(), 6, 4, o, target("2.48"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message, "CompileOptions.threads must be >= 0 (0 = one per core)");
}

TEST(CompileThreads, FinishesWhenThreadsCannotBeStarted) {
  // std::thread's system_error escaped compile and aborted the process.
#ifdef QEMB_SANITIZED
  GTEST_SKIP() << "the sanitizers' own address-space reservations defeat RLIMIT_AS";
#else
  TempDir dir;
  const int64_t rows = 512, dim = 16;
  auto table = spread_table(rows, dim, 9);
  std::vector<uint8_t> bytes(table.size() * 4);
  std::memcpy(bytes.data(), table.data(), bytes.size());
  const std::string ckpt = dir.file("m.safetensors");
  ASSERT_TRUE(write_safetensors(ckpt, {}, {{"model.embed_tokens.weight", "F32", {rows, dim}, bytes}}).ok());
  CompileOptions o;
  o.qnn_sdk_version = "2.48";
  o.threads = 1;
  ASSERT_TRUE(compile_checkpoint(ckpt, o, dir.file("one.qemb")).ok());
  // Room for the compile's buffers, not for two 8 MiB thread stacks.
  const int status = qemb::testing::run_with_address_limit(12 << 20, 60, [&] {
    o.threads = 8;
    return compile_checkpoint(ckpt, o, dir.file("eight.qemb")).ok() ? 0 : 6;
  });
  ASSERT_NE(status, -1) << "fork failed";
  ASSERT_TRUE(WIFEXITED(status)) << "compile crashed or hung (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(qemb::testing::read_text(dir.file("eight.qemb")), qemb::testing::read_text(dir.file("one.qemb")));
#endif
}

}  // namespace
}  // namespace qemb
