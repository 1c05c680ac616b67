// The exported ONNX model run by ONNX Runtime's CPU engine (npm
// onnxruntime-node, through tests/support/ort_run.js) against `qemb run
// --dequantize` of the same compile: 16a4w and 16a8w, both patterns, F32/F16/
// BF16 sources, on a table whose row scales spread over four decades.
//
// ONNX's QuantizeLinear divides (rne(x / s)); the contract multiplies by
// inv(s). The test computes both from the float data: ORT must match the
// division at every element and qemb the multiplication, so the two outputs
// differ exactly where the two formulas do, and nowhere else.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "qemb/npy.h"
#include "qemb/quantize.h"
#include "qemb/safetensors.h"
#include "support/test_util.h"

namespace qemb {
namespace {

using qemb::testing::run_command;
using qemb::testing::TempDir;

const std::string kQemb = QEMB_CLI_PATH;
constexpr int64_t kRows = 384, kDim = 40;

std::string ort_modules() {
  const char* env = std::getenv("QEMB_ORT_MODULES");
  return env != nullptr && *env ? env : QEMB_ORT_MODULES;
}

// Why the ORT tests cannot run here, or "" when they can.
std::string ort_missing() {
  if (run_command("command -v node").exit_code != 0) return "node is not installed (Debian package nodejs)";
  const std::string pkg = ort_modules() + "/onnxruntime-node/package.json";
  if (!std::filesystem::exists(pkg))
    return "onnxruntime-node is not installed in " + ort_modules() +
           " (scripts/test.sh installs it: npm install --ignore-scripts onnxruntime-node)";
  const std::string text = qemb::testing::read_text(pkg);
  const size_t at = text.find("\"version\": \"");
  int major = 0, minor = 0;
  if (at == std::string::npos || std::sscanf(text.c_str() + at + 12, "%d.%d", &major, &minor) != 2)
    return "cannot read onnxruntime-node's version from " + pkg;
  if (major < 1 || (major == 1 && minor < 18))
    return "onnxruntime-node " + std::to_string(major) + "." + std::to_string(minor) +
           " predates opset 21 (uint16 QuantizeLinear/DequantizeLinear), which needs 1.18 or newer";
  return "";
}

std::vector<float> load_f32(const std::string& path) {
  auto a = read_npy(path);
  EXPECT_TRUE(a.ok()) << path << ": " << (a.ok() ? "" : a.error().message);
  if (!a.ok()) return {};
  EXPECT_EQ(a->dtype, "<f4");
  std::vector<float> v(static_cast<size_t>(a->num_elements()));
  std::memcpy(v.data(), a->data.data(), v.size() * 4);
  return v;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// ONNX QuantizeLinear: saturate(rne(x / s) + zp) into [lo, hi].
int32_t onnx_quantize(float x, float s, int32_t zp, int32_t lo, int32_t hi) {
  const float r = std::nearbyintf(x / s) + static_cast<float>(zp);
  return r < static_cast<float>(lo) ? lo : (r > static_cast<float>(hi) ? hi : static_cast<int32_t>(r));
}

struct Expected {
  std::vector<float> contract;  // the multiplying formulas: what qemb serves
  std::vector<float> onnx;      // the dividing formulas: what ONNX specifies
};

// Both formulas for every element, from the float table the compile reads,
// for any scheme: A-bit activations (the contract multiplies by inv(s_a),
// ONNX divides by s_a), or a weight-only scheme's y = s_r * q (the same in
// both: DequantizeLinear multiplies).
Expected expected_outputs(const std::vector<float>& table, Scheme scheme, bool legacy) {
  const PcqTable pcq = quantize_table(table.data(), kRows, kDim, scheme);
  float lo, hi;
  min_max(table.data(), table.size(), lo, hi);
  const int bits = scheme.activation_bits();
  const ActivationEncoding act = activation_encoding(lo, hi, bits == 0 ? 16 : bits);
  const float smax = pcq.max_scale();
  const int qmax = weight_qmax(scheme);
  Expected e;
  for (size_t k = 0; k < table.size(); ++k) {
    const float s = pcq.scales[k / kDim];
    const int q = pcq.q[k];
    if (scheme.weight_only()) {
      e.contract.push_back(dequantize_weight(s, q));
      e.onnx.push_back(static_cast<float>(q) * s);
      continue;
    }
    const int32_t mult = legacy ? legacy_output(s, q, smax, qmax, act) : optimized_output(s, q, act);
    e.contract.push_back(dequantize_activation(mult, act));
    float w = static_cast<float>(q) * s;  // DequantizeLinear, per axis
    if (legacy) w = static_cast<float>(onnx_quantize(w, smax, 0, -128, 127)) * smax;
    const int32_t div = onnx_quantize(w, act.scale, act.zero_point, 0, act.qmax());
    e.onnx.push_back(static_cast<float>(div - act.zero_point) * act.scale);
  }
  return e;
}

class OnnxOrt : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef QEMB_HAVE_ONNX
    GTEST_SKIP() << "ONNX Runtime tests skipped: this qemb was built without ONNX export (no libonnx-dev)";
#endif
    missing_ = ort_missing();
    if (!missing_.empty()) GTEST_SKIP() << "ONNX Runtime tests skipped: " << missing_;
    for (int64_t i = 0; i < kRows; ++i) ids_ += (i ? "," : "") + std::to_string(i);
  }
  std::string q(const std::string& args) const { return kQemb + " " + args; }

  // Writes the table as `dtype` and returns the floats the compile will read.
  std::vector<float> checkpoint(const std::string& dtype, const std::string& path) {
    const std::vector<float> table = qemb::testing::spread_table(kRows, kDim, 2024);
    auto bytes = floats_to_dtype_bytes(table.data(), table.size(), dtype);
    EXPECT_TRUE(bytes.ok());
    EXPECT_TRUE(write_safetensors(path, {}, {{"model.embed_tokens.weight", dtype, {kRows, kDim}, *bytes}}).ok());
    auto f = SafetensorsFile::open(path);
    EXPECT_TRUE(f.ok());
    auto read = f->read_float("model.embed_tokens.weight");
    EXPECT_TRUE(read.ok());
    return *read;
  }

  std::vector<float> run_ort(const std::string& model, const std::string& id_type = "int64") {
    const std::string out = dir_.file("ort.npy");
    // onnxruntime leaves mat-debug-PID.log and .ses in TMPDIR: keep them in this test's folder.
    auto r = run_command("TMPDIR=" + dir_.path().string() + " node " QEMB_SOURCE_DIR "/tests/support/ort_run.js " +
                         ort_modules() + " " + model + " " + ids_ + " " + id_type + " " + out);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return load_f32(out);
  }

  std::vector<float> run_qemb(const std::string& flags) {
    const std::string art = dir_.file("a.qemb"), out = dir_.file("qemb.npy");
    auto r = run_command(q("compile " + flags + " --quiet -o " + art));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    r = run_command(q("run " + art + " --tokens " + ids_ + " --dequantize -o " + out));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return load_f32(out);
  }

  std::string missing_, ids_;
  TempDir dir_;
};

// Every combination, exported from the checkpoint; the folded form of the
// optimized pattern is checked too (its table is qemb's own, so it is exact).
TEST_F(OnnxOrt, MatchesQembRunExceptWhereDivisionAndMultiplicationDiffer) {
  for (const char* dtype : {"F32", "F16", "BF16"}) {
    const std::string ckpt = dir_.file(std::string("model_") + dtype + ".safetensors");
    const std::vector<float> table = checkpoint(dtype, ckpt);
    for (Scheme scheme : {Scheme::k16a4w, Scheme::k16a8w}) {
      for (bool legacy : {false, true}) {
        SCOPED_TRACE(std::string(dtype) + " " + to_string(scheme) + (legacy ? " legacy" : " optimized"));
        const std::string flags = ckpt + " --qnn-sdk-version 2.48 --scheme " + to_string(scheme) +
                                  " --pattern " + (legacy ? "legacy" : "optimized");
        const Expected want = expected_outputs(table, scheme, legacy);
        const std::vector<float> served = run_qemb(flags);
        const std::string model = dir_.file("m.onnx");
        auto r = run_command(q("export-onnx " + flags + " --quiet -o " + model));
        ASSERT_EQ(r.exit_code, 0) << r.out;
        const std::vector<float> ort = run_ort(model);
        ASSERT_EQ(served.size(), want.contract.size());
        ASSERT_EQ(ort.size(), want.onnx.size());
        size_t predicted = 0, differing = 0, bad_qemb = 0, bad_ort = 0;
        for (size_t k = 0; k < ort.size(); ++k) {
          const bool may_differ = bits_of(want.contract[k]) != bits_of(want.onnx[k]);
          predicted += may_differ;
          differing += bits_of(ort[k]) != bits_of(served[k]);
          bad_qemb += bits_of(served[k]) != bits_of(want.contract[k]);
          bad_ort += bits_of(ort[k]) != bits_of(want.onnx[k]);
          if (!may_differ && bits_of(ort[k]) != bits_of(served[k]))
            ADD_FAILURE() << "element " << k << " (row " << k / kDim << ", column " << k % kDim
                          << ") differs but both formulas agree: ort " << ort[k] << ", qemb " << served[k];
        }
        EXPECT_EQ(bad_qemb, 0u);
        EXPECT_EQ(bad_ort, 0u);
        EXPECT_EQ(differing, predicted);
        std::printf("%-4s %s %-9s: %zu of %zu elements differ (predicted %zu)\n", dtype, to_string(scheme),
                    legacy ? "legacy" : "optimized", differing, ort.size(), predicted);

        if (!legacy) {  // the folded table is qemb's own: every element matches
          r = run_command(q("export-onnx " + flags + " --folded --quiet -o " + model));
          ASSERT_EQ(r.exit_code, 0) << r.out;
          const std::vector<float> folded = run_ort(model);
          ASSERT_EQ(folded.size(), served.size());
          size_t diff = 0;
          for (size_t k = 0; k < folded.size(); ++k) diff += bits_of(folded[k]) != bits_of(served[k]);
          EXPECT_EQ(diff, 0u) << "folded";
        }
      }
    }
  }
}

// The schemes beyond 16a4w / 16a8w, from a float32 checkpoint: 2-bit
// weights, uint8 activations (QuantizeLinear to uint8) and weight-only float
// outputs (DequantizeLinear -> Gather), each pattern it has, and the folded
// form of each optimized graph (its table is qemb's own: exact).
TEST_F(OnnxOrt, EveryOtherSchemeMatchesQembRun) {
  const std::string ckpt = dir_.file("model.safetensors");
  const std::vector<float> table = checkpoint("F32", ckpt);
  for (Scheme scheme : all_schemes()) {
    if (scheme == Scheme::k16a4w || scheme == Scheme::k16a8w) continue;  // the test above
    for (bool legacy : {false, true}) {
      if (legacy && scheme.weight_only()) continue;  // no legacy pattern
      SCOPED_TRACE(std::string(to_string(scheme)) + (legacy ? " legacy" : " optimized"));
      const std::string flags = ckpt + " --qnn-sdk-version 2.48 --scheme " + to_string(scheme) + " --pattern " +
                                (legacy ? "legacy" : "optimized");
      const Expected want = expected_outputs(table, scheme, legacy);
      const std::vector<float> served = run_qemb(flags);
      const std::string model = dir_.file("m.onnx");
      auto r = run_command(q("export-onnx " + flags + " --quiet -o " + model));
      ASSERT_EQ(r.exit_code, 0) << r.out;
      const std::vector<float> ort = run_ort(model);
      ASSERT_EQ(served.size(), want.contract.size());
      ASSERT_EQ(ort.size(), want.onnx.size());
      size_t predicted = 0, differing = 0, bad_qemb = 0, bad_ort = 0;
      for (size_t k = 0; k < ort.size(); ++k) {
        predicted += bits_of(want.contract[k]) != bits_of(want.onnx[k]);
        differing += bits_of(ort[k]) != bits_of(served[k]);
        bad_qemb += bits_of(served[k]) != bits_of(want.contract[k]);
        bad_ort += bits_of(ort[k]) != bits_of(want.onnx[k]);
      }
      EXPECT_EQ(bad_qemb, 0u);
      EXPECT_EQ(bad_ort, 0u);
      EXPECT_EQ(differing, predicted);
      if (scheme.weight_only()) EXPECT_EQ(differing, 0u);  // no division anywhere
      if (!legacy) {
        r = run_command(q("export-onnx " + flags + " --folded --quiet -o " + model));
        ASSERT_EQ(r.exit_code, 0) << r.out;
        const std::vector<float> folded = run_ort(model);
        ASSERT_EQ(folded.size(), served.size());
        size_t diff = 0;
        for (size_t k = 0; k < folded.size(); ++k) diff += bits_of(folded[k]) != bits_of(served[k]);
        EXPECT_EQ(diff, 0u) << "folded";
      }
    }
  }
}

// The options: int32 indices, INT4 weights, opset 22, and an artifact as the input
// (fused keeps the weights; materialized optimized holds only the folded table).
TEST_F(OnnxOrt, Int32IndicesInt4WeightsAndArtifactInputs) {
  const std::string ckpt = dir_.file("model.safetensors");
  const std::vector<float> table = checkpoint("BF16", ckpt);
  for (bool legacy : {false, true}) {
    SCOPED_TRACE(legacy ? "legacy" : "optimized");
    const std::string flags = ckpt + " --qnn-sdk-version 2.48 --pattern " + (legacy ? "legacy" : "optimized");
    const Expected want = expected_outputs(table, Scheme::k16a4w, legacy);
    const std::string model = dir_.file("m.onnx");
    auto expect_onnx = [&](const std::vector<float>& got) {
      ASSERT_EQ(got.size(), want.onnx.size());
      size_t bad = 0;
      for (size_t k = 0; k < got.size(); ++k) bad += bits_of(got[k]) != bits_of(want.onnx[k]);
      EXPECT_EQ(bad, 0u);
    };
    // Opset 22 left QuantizeLinear/DequantizeLinear as opset 21 has them.
    auto r = run_command(q("export-onnx " + flags + " --int32-indices --int4-weights --opset " +
                           (legacy ? "22" : "21") + " --quiet -o " + model));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    expect_onnx(run_ort(model, "int32"));

    const std::string art = dir_.file("fused.qemb");
    r = run_command(q("compile " + flags + " --mode fused --quiet -o " + art));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    r = run_command(q("export-onnx " + art + " --quiet -o " + model));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    expect_onnx(run_ort(model));
  }
  // A materialized optimized artifact: only --folded, and it is exact.
  const std::string art = dir_.file("mat.qemb"), served_npy = dir_.file("served.npy");
  auto r = run_command(q("compile " + ckpt + " --qnn-sdk-version 2.48 --mode materialize --quiet -o " + art));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = run_command(q("run " + art + " --tokens " + ids_ + " --dequantize -o " + served_npy));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = run_command(q("export-onnx " + art + " --folded --quiet -o " + dir_.file("f.onnx")));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::vector<float> ort = run_ort(dir_.file("f.onnx")), served = load_f32(served_npy);
  ASSERT_EQ(ort.size(), served.size());
  for (size_t k = 0; k < ort.size(); ++k) ASSERT_EQ(bits_of(ort[k]), bits_of(served[k])) << k;
}

}  // namespace
}  // namespace qemb
