// The lowering of embedding(weight, indices) and its SDK-version gating
// (docs/numeric-contract.md, "The two lowerings" and "SDK version gating"):
// op and tensor names, kinds, dtypes, shapes, encodings (backend convention
// offset = -zero_point) and the stored weight bytes.
#include "lowering/lowering.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/reference_ops.h"

namespace qemb {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TargetVersion Target(const char* version) {
  Result<SdkVersion> v = SdkVersion::parse(version);
  EXPECT_TRUE(v.ok()) << version;
  return TargetVersion{v.value(), "explicit", ""};
}

TargetVersion UnknownTarget() {
  return TargetVersion{std::nullopt, "unknown", "QNN_SDK_ROOT is not set"};
}

// s_a = 2^-8, zp_a = 16384 -> backend encoding scale 2^-8, offset -16384.
ActivationEncoding Act() {
  ActivationEncoding a;
  a.scale = 0.00390625f;
  a.zero_point = 16384;
  return a;
}

// Hand-made 3 x 3 tables; the 4-bit one has s_max = 0.5, the 8-bit one 1.0.
PcqTable Table4() {
  PcqTable t;
  t.rows = 3;
  t.dim = 3;
  t.scheme = Scheme::k16a4w;
  t.scales = {0.125f, 0.5f, 0.25f};
  t.q = {7, -3, 0,  //
         1, -7, 2,  //
         -1, 5, 7};
  return t;
}

PcqTable Table8() {
  PcqTable t;
  t.rows = 3;
  t.dim = 3;
  t.scheme = Scheme::k16a8w;
  t.scales = {0.0625f, 1.0f, 0.25f};
  t.q = {127, -16, 2,  //
         -127, 0, 5,   //
         6, 10, -6};
  return t;
}

PcqTable TableFor(Scheme s) { return s == Scheme::k16a4w ? Table4() : Table8(); }

EmbeddingLoweringOptions Options(Pattern p, const std::string& name = "tok") {
  EmbeddingLoweringOptions o;
  o.name = name;
  o.pattern = p;
  return o;
}

std::vector<uint8_t> DataOf(const Tensor& t) {
  if (!t.data) return {};
  return std::vector<uint8_t>(t.data->data(), t.data->data() + t.data->size());
}

std::vector<std::string> TensorNames(const Graph& g) {
  std::vector<std::string> names;
  for (const auto& t : g.tensors) names.push_back(t.name);
  return names;
}

void ExpectActivationTensor(const Graph& g, const std::string& name, TensorKind kind,
                            std::vector<int64_t> shape) {
  const Tensor* t = g.find_tensor(name);
  ASSERT_NE(t, nullptr) << name;
  EXPECT_EQ(t->kind, kind) << name;
  EXPECT_EQ(t->dtype, DataType::kUFixedPoint16) << name;
  EXPECT_EQ(t->shape, shape) << name;
  EXPECT_EQ(t->encoding, Encoding::per_tensor(0.00390625f, -16384, 16)) << name;
  EXPECT_EQ(t->encoding.offset, -16384) << name;
  EXPECT_FALSE(t->data) << name;
}

void ExpectWeightAndIndices(const Graph& g, Scheme scheme) {
  const PcqTable table = TableFor(scheme);
  const Tensor* w = g.find_tensor("tok_weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->kind, TensorKind::kStatic);
  EXPECT_EQ(w->dtype, DataType::kSFixedPoint8);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(w->encoding, Encoding::per_axis(0, table.scales, {0, 0, 0}, weight_bits(scheme)));
  EXPECT_EQ(w->bitwidth(), weight_bits(scheme));

  const Tensor* ids = g.find_tensor("tok_indices");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->kind, TensorKind::kAppWrite);
  EXPECT_EQ(ids->dtype, DataType::kInt32);
  EXPECT_EQ(ids->shape, (std::vector<int64_t>{0}));  // the batch, set per call
  EXPECT_FALSE(ids->data);
}

class LoweringSchemeTest : public ::testing::TestWithParam<Scheme> {};

TEST(PatternGate, OptimizedMinimumIs2_48) {
  EXPECT_EQ(optimized_pattern_min_version().parts(), (std::vector<uint64_t>{2, 48}));
  EXPECT_EQ(optimized_pattern_min_version().to_string(), "2.48");
}

TEST_P(LoweringSchemeTest, OptimizedPatternNamesKindsAndEncodings) {
  const Scheme scheme = GetParam();
  Result<LoweredEmbedding> r =
      lower_embedding(TableFor(scheme), Act(), Target("2.48"), Options(Pattern::kOptimized));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Graph& g = r->graph;
  EXPECT_EQ(r->pattern, Pattern::kOptimized);
  EXPECT_EQ(TensorNames(g),
            (std::vector<std::string>{"tok_weight", "tok_indices", "tok_convert", "tok"}));
  ExpectWeightAndIndices(g, scheme);
  // Convert output: NATIVE, full [V, D], the activation encoding.
  ExpectActivationTensor(g, "tok_convert", TensorKind::kNative, {3, 3});
  ExpectActivationTensor(g, "tok", TensorKind::kAppRead, {0, 3});

  ASSERT_EQ(g.ops.size(), 2u);
  EXPECT_EQ(g.ops[0].type, OpType::kConvert);
  EXPECT_EQ(g.ops[0].name, "tok_convert");
  EXPECT_EQ(g.ops[0].inputs, (std::vector<std::string>{"tok_weight"}));
  EXPECT_EQ(g.ops[0].outputs, (std::vector<std::string>{"tok_convert"}));
  EXPECT_EQ(g.ops[1].type, OpType::kGather);
  EXPECT_EQ(g.ops[1].name, "tok");
  EXPECT_EQ(g.ops[1].inputs, (std::vector<std::string>{"tok_convert", "tok_indices"}));
  EXPECT_EQ(g.ops[1].outputs, (std::vector<std::string>{"tok"}));
  EXPECT_EQ(g.ops[1].axis, 0);
  EXPECT_FALSE(g.ops[1].intermediate);
  EXPECT_TRUE(g.check().ok());
}

TEST_P(LoweringSchemeTest, LegacyPatternNamesKindsAndEncodings) {
  const Scheme scheme = GetParam();
  Result<LoweredEmbedding> r =
      lower_embedding(TableFor(scheme), Act(), Target("2.37"), Options(Pattern::kLegacy));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Graph& g = r->graph;
  EXPECT_EQ(r->pattern, Pattern::kLegacy);
  EXPECT_EQ(TensorNames(g),
            (std::vector<std::string>{"tok_weight", "tok_indices", "tok_intermediate", "tok"}));
  ExpectWeightAndIndices(g, scheme);

  // Per-tensor approximation: s_max = max_r s_r (0.5 for 4-bit, 1.0 for 8-bit),
  // offset = max_r offset_r = 0, the weight's bitwidth.
  const Tensor* inter = g.find_tensor("tok_intermediate");
  ASSERT_NE(inter, nullptr);
  EXPECT_EQ(inter->kind, TensorKind::kNative);
  EXPECT_EQ(inter->dtype, DataType::kSFixedPoint8);
  EXPECT_EQ(inter->shape, (std::vector<int64_t>{0, 3}));
  const float s_max = scheme == Scheme::k16a4w ? 0.5f : 1.0f;
  EXPECT_EQ(inter->encoding, Encoding::per_tensor(s_max, 0, weight_bits(scheme)));
  ExpectActivationTensor(g, "tok", TensorKind::kAppRead, {0, 3});
  EXPECT_EQ(g.find_tensor("tok_convert"), nullptr);  // the Convert writes "tok" directly

  ASSERT_EQ(g.ops.size(), 2u);
  EXPECT_EQ(g.ops[0].type, OpType::kGather);
  EXPECT_EQ(g.ops[0].name, "tok_intermediate");
  EXPECT_EQ(g.ops[0].inputs, (std::vector<std::string>{"tok_weight", "tok_indices"}));
  EXPECT_EQ(g.ops[0].outputs, (std::vector<std::string>{"tok_intermediate"}));
  EXPECT_EQ(g.ops[0].axis, 0);
  EXPECT_EQ(g.ops[1].type, OpType::kConvert);
  EXPECT_EQ(g.ops[1].name, "tok_convert");
  EXPECT_EQ(g.ops[1].inputs, (std::vector<std::string>{"tok_intermediate"}));
  EXPECT_EQ(g.ops[1].outputs, (std::vector<std::string>{"tok"}));
  EXPECT_TRUE(g.check().ok());
}

INSTANTIATE_TEST_SUITE_P(Schemes, LoweringSchemeTest,
                         ::testing::Values(Scheme::k16a8w, Scheme::k16a4w),
                         [](const auto& info) { return std::string("s") + to_string(info.param); });

TEST(LoweringWeightDataTest, FourBitIsPackedTwoPerByteColumn2kLow) {
  Result<LoweredEmbedding> r = lower_embedding(Table4(), Act(), Target("2.48"), Options(Pattern::kAuto));
  ASSERT_TRUE(r.ok()) << r.error().message;
  // Rows of ceil(3/2) = 2 bytes:
  //   { 7, -3, 0} -> (0xD << 4) | 0x7 = 0xD7, 0x00
  //   { 1, -7, 2} -> (0x9 << 4) | 0x1 = 0x91, 0x02
  //   {-1,  5, 7} -> (0x5 << 4) | 0xF = 0x5F, 0x07
  EXPECT_EQ(DataOf(*r->graph.find_tensor("tok_weight")),
            (std::vector<uint8_t>{0xD7, 0x00, 0x91, 0x02, 0x5F, 0x07}));
}

TEST(LoweringWeightDataTest, EightBitIsOneTwosComplementBytePerValue) {
  Result<LoweredEmbedding> r = lower_embedding(Table8(), Act(), Target("2.48"), Options(Pattern::kAuto));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(DataOf(*r->graph.find_tensor("tok_weight")),
            (std::vector<uint8_t>{0x7F, 0xF0, 0x02, 0x81, 0x00, 0x05, 0x06, 0x0A, 0xFA}));
}

TEST(LoweringWeightDataTest, MakePcqWeightTensorStandsAlone) {
  Tensor w = make_pcq_weight_tensor("x", Table4());
  EXPECT_EQ(w.name, "x");
  EXPECT_EQ(w.kind, TensorKind::kStatic);
  EXPECT_EQ(storage_bytes(w), 6u);
  EXPECT_EQ(DataOf(w), (std::vector<uint8_t>{0xD7, 0x00, 0x91, 0x02, 0x5F, 0x07}));
}

// ---------------------------------------------------------------------------
// Gating (docs/numeric-contract.md, "SDK version gating").

struct GatingCase {
  const char* version;
  Pattern expected;
};

class AutoGatingTest : public ::testing::TestWithParam<GatingCase> {};

TEST_P(AutoGatingTest, PicksByTheFullVersionTuple) {
  const GatingCase& c = GetParam();
  for (Scheme scheme : {Scheme::k16a8w, Scheme::k16a4w}) {
    Result<LoweredEmbedding> r =
        lower_embedding(TableFor(scheme), Act(), Target(c.version), Options(Pattern::kAuto));
    ASSERT_TRUE(r.ok()) << c.version << ": " << r.error().message;
    EXPECT_EQ(r->pattern, c.expected) << c.version << " " << to_string(scheme);
    const bool optimized = c.expected == Pattern::kOptimized;
    EXPECT_EQ(r->graph.find_tensor("tok_convert") != nullptr, optimized) << c.version;
    EXPECT_EQ(r->graph.find_tensor("tok_intermediate") != nullptr, !optimized) << c.version;
    EXPECT_THAT(r->reason, HasSubstr("2.48")) << r->reason;
    EXPECT_THAT(r->reason, HasSubstr(SdkVersion::parse(c.version)->to_string())) << r->reason;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Versions, AutoGatingTest,
    ::testing::Values(GatingCase{"2.37", Pattern::kLegacy},
                      GatingCase{"v2.37.0.250724", Pattern::kLegacy},
                      GatingCase{"2.47.99", Pattern::kLegacy},
                      GatingCase{"1.99", Pattern::kLegacy},
                      GatingCase{"2.48", Pattern::kOptimized},
                      GatingCase{"2.48.0", Pattern::kOptimized},
                      GatingCase{"2.48.0.260715", Pattern::kOptimized},
                      GatingCase{"2.50", Pattern::kOptimized},
                      GatingCase{"3.0", Pattern::kOptimized},  // minor 0 < 48, but major 3 > 2
                      GatingCase{"3.0.1", Pattern::kOptimized}));

TEST(GatingTest, AutoOnOlderTargetSaysWhyAndHowToGetOptimized) {
  Result<LoweredEmbedding> r = lower_embedding(Table4(), Act(), Target("2.37"), Options(Pattern::kAuto));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->pattern, Pattern::kLegacy);
  EXPECT_THAT(r->reason, HasSubstr("2.37"));
  EXPECT_THAT(r->reason, HasSubstr("2.48"));
  EXPECT_THAT(r->reason, HasSubstr("give that version explicitly"));
}

TEST(GatingTest, UnknownVersionFallsBackToLegacyWithReasonAndRemedy) {
  for (Scheme scheme : {Scheme::k16a8w, Scheme::k16a4w}) {
    Result<LoweredEmbedding> r =
        lower_embedding(TableFor(scheme), Act(), UnknownTarget(), Options(Pattern::kAuto));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->pattern, Pattern::kLegacy);
    EXPECT_NE(r->graph.find_tensor("tok_intermediate"), nullptr);
    EXPECT_THAT(r->reason, HasSubstr("QNN_SDK_ROOT is not set"));  // the unknown reason
    EXPECT_THAT(r->reason, HasSubstr("unknown"));
    EXPECT_THAT(r->reason, HasSubstr("optimized pattern"));  // how to get it:
    EXPECT_THAT(r->reason, HasSubstr("2.48"));
    EXPECT_THAT(r->reason, HasSubstr("give that version explicitly"));
    EXPECT_THAT(r->reason, HasSubstr("QNN_SDK_ROOT"));
  }
}

TEST(GatingTest, ForcedOptimizedOnOlderTargetFailsValidationNamingOpAndVersions) {
  for (Scheme scheme : {Scheme::k16a8w, Scheme::k16a4w}) {
    for (const char* old : {"2.37", "v2.37.0.250724"}) {
      Result<LoweredEmbedding> r =
          lower_embedding(TableFor(scheme), Act(), Target(old), Options(Pattern::kOptimized));
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().code, ErrorCode::kValidationError);
      const std::string& m = r.error().message;
      EXPECT_THAT(m, HasSubstr("'tok_convert'"));  // the op
      EXPECT_THAT(m, HasSubstr("2.48"));           // the version it needs
      EXPECT_THAT(m, HasSubstr(SdkVersion::parse(old)->to_string()));  // the target's
      EXPECT_THAT(m, HasSubstr("CompileOptions.pattern = legacy"));
    }
  }
}

TEST(GatingTest, ForcedOptimizedOnSupportedOrUnknownTargetWorks) {
  for (TargetVersion t : {Target("2.48"), Target("3.0"), UnknownTarget()}) {
    Result<LoweredEmbedding> r = lower_embedding(Table8(), Act(), t, Options(Pattern::kOptimized));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->pattern, Pattern::kOptimized);
    EXPECT_THAT(r->reason, HasSubstr("requested"));
  }
}

TEST(GatingTest, ForcedLegacyWorksOnEveryTarget) {
  for (TargetVersion t : {Target("3.0"), Target("2.48"), Target("2.37"), UnknownTarget()}) {
    Result<LoweredEmbedding> r = lower_embedding(Table4(), Act(), t, Options(Pattern::kLegacy));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->pattern, Pattern::kLegacy);
    EXPECT_NE(r->graph.find_tensor("tok_intermediate"), nullptr);
    EXPECT_THAT(r->reason, HasSubstr("requested"));
  }
}

// The one pattern decision: the lowering takes choose_pattern's pattern and
// reason and refuses with its message, so compile and eval, which ask it
// before lowering, report what the lowering would.
TEST(GatingTest, ChoosePatternIsTheLoweringsDecision) {
  for (TargetVersion t : {Target("2.37"), Target("2.48"), Target("3.0"), UnknownTarget()}) {
    for (Pattern p : {Pattern::kAuto, Pattern::kOptimized, Pattern::kLegacy}) {
      Result<PatternChoice> choice = choose_pattern(p, t, "tok");
      Result<LoweredEmbedding> lowered = lower_embedding(Table4(), Act(), t, Options(p));
      ASSERT_EQ(choice.ok(), lowered.ok()) << to_string(p) << " " << t.source;
      if (!choice.ok()) {
        EXPECT_EQ(choice.error().code, lowered.error().code);
        EXPECT_EQ(choice.error().message, lowered.error().message);
        EXPECT_EQ(choice.error().message,
                  "op 'tok_convert' (Convert on a per-channel STATIC weight) needs QNN SDK >= 2.48, but the target "
                  "is 2.37; use CompileOptions.pattern = legacy (or auto), or target a newer SDK with "
                  "CompileOptions.qnn_sdk_version");
        continue;
      }
      EXPECT_EQ(choice->pattern, lowered->pattern);
      EXPECT_EQ(choice->reason, lowered->reason);
    }
  }
  EXPECT_EQ(choose_pattern(Pattern::kAuto, Target("2.48"))->pattern, Pattern::kOptimized);
  EXPECT_EQ(choose_pattern(Pattern::kAuto, Target("2.37"))->pattern, Pattern::kLegacy);
  EXPECT_EQ(choose_pattern(Pattern::kAuto, UnknownTarget())->pattern, Pattern::kLegacy);
  EXPECT_EQ(choose_pattern(Pattern::kOptimized, UnknownTarget())->pattern, Pattern::kOptimized);
  EXPECT_THAT(choose_pattern(Pattern::kOptimized, Target("2.37")).error().message, HasSubstr("'embedding_convert'"));
}

TEST(GatingTest, PatternNames) {
  EXPECT_STREQ(to_string(Pattern::kAuto), "auto");
  EXPECT_STREQ(to_string(Pattern::kOptimized), "optimized");
  EXPECT_STREQ(to_string(Pattern::kLegacy), "legacy");
  EXPECT_EQ(parse_pattern("auto").value(), Pattern::kAuto);
  EXPECT_EQ(parse_pattern("optimized").value(), Pattern::kOptimized);
  EXPECT_EQ(parse_pattern("legacy").value(), Pattern::kLegacy);
  Result<Pattern> bad = parse_pattern("fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(bad.error().message, HasSubstr("'fast'"));
}

// ---------------------------------------------------------------------------
// Bad input.

TEST(LoweringErrorsTest, EmptyTableOrName) {
  PcqTable empty;
  empty.scheme = Scheme::k16a8w;
  Result<LoweredEmbedding> r = lower_embedding(empty, Act(), Target("2.48"), Options(Pattern::kAuto));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(r.error().message, HasSubstr("empty"));

  r = lower_embedding(Table8(), Act(), Target("2.48"), Options(Pattern::kAuto, ""));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
}

TEST(LoweringErrorsTest, InconsistentTableIsAnErrorNotACrash) {
  PcqTable short_q = Table8();
  short_q.q.resize(4);  // 3 x 3 needs 9 values
  Result<LoweredEmbedding> r = lower_embedding(short_q, Act(), Target("2.48"), Options(Pattern::kAuto));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(r.error().message, HasSubstr("needs 3 scales and 9 values, it has 3 and 4"));

  PcqTable short_scales = Table4();
  short_scales.scales.pop_back();  // 3 rows need 3 scales
  r = lower_embedding(short_scales, Act(), Target("2.48"), Options(Pattern::kAuto));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Per-tensor (non-PCQ) weights: a single Gather.

TEST(PerTensorLoweringTest, SingleGatherForBothBitwidths) {
  const std::vector<int8_t> q = {6, -6, 1,  //
                                 7, 0, -7};
  for (int bits : {8, 4}) {
    Result<LoweredEmbedding> r =
        lower_per_tensor_embedding(q, 2, 3, bits, 0.25f, Act(), Options(Pattern::kAuto));
    ASSERT_TRUE(r.ok()) << r.error().message;
    const Graph& g = r->graph;
    EXPECT_EQ(TensorNames(g), (std::vector<std::string>{"tok_weight", "tok_indices", "tok"}));
    ASSERT_EQ(g.ops.size(), 1u);
    EXPECT_EQ(g.ops[0].type, OpType::kGather);
    EXPECT_EQ(g.ops[0].name, "tok");
    EXPECT_EQ(g.ops[0].inputs, (std::vector<std::string>{"tok_weight", "tok_indices"}));
    EXPECT_EQ(g.ops[0].outputs, (std::vector<std::string>{"tok"}));
    EXPECT_EQ(g.ops[0].axis, 0);

    const Tensor* w = g.find_tensor("tok_weight");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->kind, TensorKind::kStatic);
    EXPECT_EQ(w->dtype, DataType::kSFixedPoint8);
    EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(w->encoding, Encoding::per_tensor(0.25f, 0, bits));
    if (bits == 8) {
      EXPECT_EQ(DataOf(*w), (std::vector<uint8_t>{0x06, 0xFA, 0x01, 0x07, 0x00, 0xF9}));
    } else {
      // {6, -6, 1} -> 0xA6, 0x01; {7, 0, -7} -> 0x07, 0x09.
      EXPECT_EQ(DataOf(*w), (std::vector<uint8_t>{0xA6, 0x01, 0x07, 0x09}));
    }
    ExpectActivationTensor(g, "tok", TensorKind::kAppRead, {0, 3});
    EXPECT_TRUE(validate_for_target(g, SdkVersion::parse("2.37").value()).ok());

    // The Gather requantizes into the activation encoding: row 0 real
    // {1.5, -1.5, 0.25} * 256 = {384, -384, 64} + 16384.
    uint8_t out[6] = {};
    requantize_row(w->data->data(), *w, 0, out, *g.find_tensor("tok"), 0, 3);
    EXPECT_EQ(load_quantized(out, DataType::kUFixedPoint16, 16, 0), 16768);
    EXPECT_EQ(load_quantized(out, DataType::kUFixedPoint16, 16, 1), 16000);
    EXPECT_EQ(load_quantized(out, DataType::kUFixedPoint16, 16, 2), 16448);
  }
}

TEST(PerTensorLoweringTest, BadInputIsInvalidArgument) {
  const std::vector<int8_t> q = {1, 2, 3, 4, 5, 6};
  Result<LoweredEmbedding> r = lower_per_tensor_embedding(q, 2, 4, 8, 0.5f, Act(), Options(Pattern::kAuto));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  r = lower_per_tensor_embedding(q, 2, 3, 3, 0.5f, Act(), Options(Pattern::kAuto));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(r.error().message, HasSubstr("2, 4 or 8"));
  r = lower_per_tensor_embedding({}, 0, 3, 8, 0.5f, Act(), Options(Pattern::kAuto));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  r = lower_per_tensor_embedding(q, 2, 3, 8, 0.5f, Act(), Options(Pattern::kAuto, ""));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace qemb
