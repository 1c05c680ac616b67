// The ONNX exporter: each form's graph (nodes, tensors and their names), the
// initializers' values, libonnx's checker, the AIMET encodings, and the errors
// of an export that cannot be done. ONNX Runtime runs the models in
// tests/cli/onnx_ort_test.cc.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "artifact/artifact_io.h"
#include "qemb/export.h"
#include "core/file.h"
#include "qemb/safetensors.h"
#include "support/test_util.h"

#ifdef QEMB_HAVE_ONNX
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#endif

namespace qemb {
namespace {

using qemb::testing::TempDir;
constexpr int64_t kRows = 24, kDim = 10;

TargetVersion sdk_2_48() {
  TargetVersion t;
  t.version = SdkVersion::parse("2.48").value();
  t.source = "explicit";
  return t;
}

QuantizedEmbedding compiled(Scheme scheme, Pattern pattern, const std::vector<float>& table) {
  CompileOptions o;
  o.scheme = scheme;
  o.pattern = pattern;
  o.mode = CompileMode::kFused;
  auto c = compile_table(table.data(), kRows, kDim, o, sdk_2_48(), {"model.safetensors", "embed", "F32"});
  EXPECT_TRUE(c.ok()) << c.error().message;
  auto e = quantized_embedding(*c);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return *e;
}

TEST(OnnxExport, QuantizedEmbeddingHoldsTheCompilesNumbers) {
  const std::vector<float> table = qemb::testing::spread_table(kRows, kDim, 3);
  for (Pattern p : {Pattern::kOptimized, Pattern::kLegacy}) {
    const QuantizedEmbedding e = compiled(Scheme::k16a4w, p, table);
    const PcqTable pcq = quantize_table(table.data(), kRows, kDim, Scheme::k16a4w);
    EXPECT_EQ(e.node, "embedding");
    EXPECT_EQ(e.pattern, p);
    EXPECT_EQ(e.rows, kRows);
    EXPECT_EQ(e.dim, kDim);
    EXPECT_EQ(e.q, pcq.q);
    EXPECT_EQ(e.row_scales, pcq.scales);
    float lo, hi;
    min_max(table.data(), table.size(), lo, hi);
    EXPECT_EQ(e.act.scale, activation_encoding(lo, hi).scale);
    EXPECT_EQ(e.act.zero_point, activation_encoding(lo, hi).zero_point);
    if (p == Pattern::kLegacy) {
      EXPECT_EQ(e.max_scale, pcq.max_scale());
    }
  }
}

// A graph with two tables (two lowerings side by side) is refused, not mixed.
TEST(OnnxExport, SeveralTablesAreRefused) {
  const std::vector<float> table = qemb::testing::spread_table(kRows, kDim, 11);
  CompileOptions o;
  o.mode = CompileMode::kFused;
  auto a = compile_table(table.data(), kRows, kDim, o, sdk_2_48());
  o.node_name = "second";
  auto b = compile_table(table.data(), kRows, kDim, o, sdk_2_48());
  ASSERT_TRUE(a.ok() && b.ok());
  Graph g = *a->lowered;
  for (const Tensor& t : b->lowered->tensors) g.add_tensor(t);
  for (const Op& op : b->lowered->ops) g.add_op(op);
  CompiledEmbedding both = *a;
  both.lowered = std::make_shared<const Graph>(std::move(g));
  auto e = quantized_embedding(both);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, ErrorCode::kUnsupported);
  EXPECT_EQ(e.error().message,
            "the graph holds 2 tables; export-onnx exports one table: export each from the checkpoint with CompileOptions.tensor");
}

TEST(OnnxExport, ExportErrorsSayWhatToChange) {
  if (!onnx_export_available()) GTEST_SKIP() << "built without libonnx-dev";
  const std::vector<float> table = qemb::testing::spread_table(kRows, kDim, 4);
  const QuantizedEmbedding opt = compiled(Scheme::k16a8w, Pattern::kOptimized, table);
  const QuantizedEmbedding legacy = compiled(Scheme::k16a4w, Pattern::kLegacy, table);
  struct Case {
    const QuantizedEmbedding* e;
    OnnxExportOptions o;
    ErrorCode code;
    std::string message;
  };
  auto opts = [](int opset, bool folded = false, bool int4 = false) {
    OnnxExportOptions o;
    o.opset = opset;
    o.folded = folded;
    o.int4_weights = int4;
    return o;
  };
  QuantizedEmbedding folded_only = opt;
  folded_only.folded = folded_table(opt);
  folded_only.q.clear();
  folded_only.row_scales.clear();
  const std::vector<Case> cases = {
      {&opt, opts(20), ErrorCode::kUnsupported,
       "opset 20 cannot express scheme 16a8w: its uint16 activation needs QuantizeLinear/DequantizeLinear to uint16, "
       "which ONNX added in opset 21; use OnnxExportOptions.opset = 21"},
      {&opt, opts(23), ErrorCode::kUnsupported, "unknown opset 23: this exporter knows opsets 21 to 22; use OnnxExportOptions.opset = 21"},
      {&opt, opts(-1), ErrorCode::kInvalidArgument, "unknown opset -1: ai.onnx opsets are numbered from 1"},
      {&legacy, opts(21, true), ErrorCode::kInvalidArgument,
       "OnnxExportOptions.folded applies to the optimized pattern only: the legacy pattern's Convert follows its "
       "Gather, so there is no table to fold; drop OnnxExportOptions.folded or use CompileOptions.pattern = "
       "optimized"},
      {&opt, opts(21, false, true), ErrorCode::kInvalidArgument,
       "OnnxExportOptions.int4_weights needs 4-bit weights; scheme 16a8w has 8-bit weights"},
      {&folded_only, opts(21), ErrorCode::kUnsupported,
       "the artifact holds only the folded uint16 table (compiled with the optimized pattern and "
       "CompileOptions.mode = materialize), not the per-row weights; export it with OnnxExportOptions.folded, or "
       "export from the checkpoint or an artifact compiled with CompileOptions.mode = fused"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    auto r = onnx_model_bytes(*c.e, c.o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, c.code);
    EXPECT_EQ(r.error().message, c.message);
  }
  // The 2 GiB protobuf limit is checked from the sizes, before any byte is built.
  QuantizedEmbedding huge = opt;
  huge.rows = int64_t{1} << 20;
  huge.dim = 2048;
  auto r = check_onnx_export(huge, opts(21));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("exceed protobuf's 2 GiB message limit"), std::string::npos) << r.message();
  EXPECT_TRUE(onnx_model_bytes(folded_only, opts(21, true)).ok());
}

// Issue 37, 5: the encodings held about 1.7 KB a row as JSON objects
// (bad_alloc on a 4M-row table); they are streamed, and the text is exactly
// what dump(2) of the whole object gives, for every pattern and form.
TEST(OnnxExport, StreamedEncodingsEqualTheWholeDump) {
  const std::vector<float> table = qemb::testing::spread_table(kRows, kDim, 5);
  for (Pattern p : {Pattern::kOptimized, Pattern::kLegacy}) {
    for (bool folded : {false, true}) {
      if (folded && p == Pattern::kLegacy) continue;
      const QuantizedEmbedding e = compiled(Scheme::k16a4w, p, table);
      OnnxExportOptions o;
      o.folded = folded;
      std::string streamed;
      size_t pieces = 0;
      ASSERT_TRUE(write_onnx_encodings(e, o, [&](std::string_view piece) {
                    streamed += piece;
                    ++pieces;
                    return Status::Ok();
                  }).ok());
      EXPECT_EQ(streamed, onnx_encodings(e, o).dump(2) + "\n");
      EXPECT_EQ(pieces, folded ? 1u : 3u);  // what comes before the list, the list, what follows
    }
  }
}

TEST(OnnxExport, EncodingsAreAimetFormat) {
  const std::vector<float> table = qemb::testing::spread_table(kRows, kDim, 5);
  for (Pattern p : {Pattern::kOptimized, Pattern::kLegacy}) {
    const QuantizedEmbedding e = compiled(Scheme::k16a4w, p, table);
    const nlohmann::json j = onnx_encodings(e, {});
    EXPECT_EQ(j["version"], "0.6.1");
    EXPECT_EQ(j["quantizer_args"], nlohmann::json({{"activation_bitwidth", 16},
                                                   {"dtype", "int"},
                                                   {"is_symmetric", "True"},
                                                   {"param_bitwidth", 4},
                                                   {"per_channel_quantization", "True"},
                                                   {"quant_scheme", "post_training_tf"}}));
    EXPECT_EQ(j["excluded_layers"], nlohmann::json::array());
    const nlohmann::json& w = j["param_encodings"]["embedding_weight"];
    ASSERT_EQ(w.size(), static_cast<size_t>(kRows));
    for (int64_t r = 0; r < kRows; ++r) {
      const double s = e.row_scales[static_cast<size_t>(r)];
      EXPECT_EQ(w[r]["bitwidth"], 4);
      EXPECT_EQ(w[r]["dtype"], "int");
      EXPECT_EQ(w[r]["is_symmetric"], "True");
      EXPECT_EQ(w[r]["offset"], -8);
      EXPECT_EQ(w[r]["scale"].get<double>(), s);
      EXPECT_EQ(w[r]["min"].get<double>(), -8.0 * s);
      EXPECT_EQ(w[r]["max"].get<double>(), 7.0 * s);
    }
    const nlohmann::json& a = j["activation_encodings"]["embedding"];
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0]["bitwidth"], 16);
    EXPECT_EQ(a[0]["is_symmetric"], "False");
    EXPECT_EQ(a[0]["offset"], -e.act.zero_point);
    EXPECT_EQ(a[0]["scale"].get<double>(), static_cast<double>(e.act.scale));
    EXPECT_EQ(a[0]["min"].get<double>(), static_cast<double>(e.act.scale) * -e.act.zero_point);
    EXPECT_EQ(a[0]["max"].get<double>(), static_cast<double>(e.act.scale) * (65535 - e.act.zero_point));
    if (p == Pattern::kOptimized) {
      EXPECT_EQ(j["activation_encodings"]["embedding_convert"], a);
      EXPECT_EQ(j["activation_encodings"].size(), 2u);
    } else {
      const nlohmann::json& i = j["activation_encodings"]["embedding_intermediate"];
      EXPECT_EQ(i[0]["bitwidth"], 4);
      EXPECT_EQ(i[0]["offset"], -8);
      EXPECT_EQ(i[0]["scale"].get<double>(), static_cast<double>(e.max_scale));
      EXPECT_EQ(j["activation_encodings"]["embedding_intermediate_table"], i);
      EXPECT_EQ(j["activation_encodings"].size(), 3u);
    }
  }
}

TEST(OnnxExport, ExportCommandOfAnArtifact) {
  TempDir dir;
  const std::vector<float> table = qemb::testing::spread_table(kRows, kDim, 6);
  for (CompileMode mode : {CompileMode::kFused, CompileMode::kMaterialize}) {
    CompileOptions o;
    o.mode = mode;
    auto c = compile_table(table.data(), kRows, kDim, o, sdk_2_48());
    ASSERT_TRUE(c.ok());
    const std::string path = dir.file("my model.qemb");
    ASSERT_TRUE(write_artifact(path, *c->runtime_graph, c->metadata).ok());
    auto a = load_artifact(path);
    ASSERT_TRUE(a.ok());
    const std::string q = "'" + dir.file("my model");
    EXPECT_EQ(onnx_export_command(path, *a),
              "qemb export-onnx " + q + ".qemb'" + (mode == CompileMode::kMaterialize ? " --folded" : "") +
                  " --encodings " + q + ".encodings.json' -o " + q + ".onnx'");
  }
}

#ifdef QEMB_HAVE_ONNX

onnx::ModelProto parse(const std::string& bytes) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(bytes));
  return m;
}

// "Op name: in, in -> out" per node, in graph order.
std::vector<std::string> nodes(const onnx::ModelProto& m) {
  std::vector<std::string> out;
  for (const auto& n : m.graph().node()) {
    std::string s = n.op_type() + " " + n.name() + ":";
    for (int i = 0; i < n.input_size(); ++i) s += (i ? ", " : " ") + n.input(i);
    s += " -> " + n.output(0);
    for (const auto& a : n.attribute()) s += " [" + a.name() + "=" + std::to_string(a.i()) + "]";
    out.push_back(s);
  }
  return out;
}

const onnx::TensorProto* initializer(const onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return &t;
  ADD_FAILURE() << "no initializer " << name;
  return nullptr;
}

template <typename T>
std::vector<T> values(const onnx::TensorProto* t) {
  std::vector<T> v(t ? t->raw_data().size() / sizeof(T) : 0);
  if (t) std::memcpy(v.data(), t->raw_data().data(), v.size() * sizeof(T));
  return v;
}

// libonnx's checker, as far as this libonnx knows the model's IR version and
// opset: the whole check_model where it does; else check_graph (names, SSA
// and topological order, initializers, each node's inputs, outputs and
// attributes against the newest schema it has), since check_model refuses a
// newer IR version outright. Returns which check ran.
std::string run_checker(const onnx::ModelProto& m) {
  const auto range = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at("");
  const int64_t opset = m.opset_import(0).version();
  if (m.ir_version() <= onnx::IR_VERSION && opset <= range.second) {
    onnx::checker::check_model(m);
    return "check_model";
  }
  onnx::checker::CheckerContext ctx;
  ctx.set_ir_version(static_cast<int>(onnx::IR_VERSION));
  ctx.set_opset_imports({{"", static_cast<int>(opset)}});
  onnx::checker::LexicalScopeContext scope;
  onnx::checker::check_graph(m.graph(), ctx, scope);
  return "check_graph (libonnx knows opsets up to " + std::to_string(range.second) + ", IR version " +
         std::to_string(onnx::IR_VERSION) + ")";
}

TEST(OnnxExport, OptimizedGraph) {
  const std::vector<float> table = qemb::testing::spread_table(kRows, kDim, 7);
  const QuantizedEmbedding e = compiled(Scheme::k16a4w, Pattern::kOptimized, table);
  auto bytes = onnx_model_bytes(e, {});
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  const onnx::ModelProto m = parse(*bytes);
  EXPECT_EQ(m.ir_version(), 10);
  ASSERT_EQ(m.opset_import_size(), 1);
  EXPECT_EQ(m.opset_import(0).version(), 21);
  EXPECT_EQ(nodes(m), (std::vector<std::string>{
                          "DequantizeLinear embedding_weight_dequantize: embedding_weight_quantized, "
                          "embedding_weight_scale, embedding_weight_zero_point -> embedding_weight [axis=0]",
                          "QuantizeLinear embedding_convert: embedding_weight, embedding_act_scale, "
                          "embedding_act_zero_point -> embedding_convert_quantized",
                          "DequantizeLinear embedding_convert_dequantize: embedding_convert_quantized, "
                          "embedding_act_scale, embedding_act_zero_point -> embedding_convert",
                          "Gather embedding: embedding_convert, indices -> embedding [axis=0]",
                      }));
  const auto& g = m.graph();
  ASSERT_EQ(g.input_size(), 1);
  EXPECT_EQ(g.input(0).name(), "indices");
  EXPECT_EQ(g.input(0).type().tensor_type().elem_type(), onnx::TensorProto::INT64);
  EXPECT_EQ(g.input(0).type().tensor_type().shape().dim(0).dim_param(), "N");
  ASSERT_EQ(g.output_size(), 1);
  EXPECT_EQ(g.output(0).name(), "embedding");
  EXPECT_EQ(g.output(0).type().tensor_type().elem_type(), onnx::TensorProto::FLOAT);
  EXPECT_EQ(g.output(0).type().tensor_type().shape().dim(1).dim_value(), kDim);

  const onnx::TensorProto* w = initializer(m, "embedding_weight_quantized");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->data_type(), onnx::TensorProto::INT8);
  EXPECT_EQ(std::vector<int64_t>(w->dims().begin(), w->dims().end()), (std::vector<int64_t>{kRows, kDim}));
  EXPECT_EQ(values<int8_t>(w), e.q);
  EXPECT_EQ(values<float>(initializer(m, "embedding_weight_scale")), e.row_scales);
  EXPECT_EQ(values<int8_t>(initializer(m, "embedding_weight_zero_point")), std::vector<int8_t>(kRows, 0));
  EXPECT_EQ(values<float>(initializer(m, "embedding_act_scale")), std::vector<float>{e.act.scale});
  const onnx::TensorProto* zp = initializer(m, "embedding_act_zero_point");
  ASSERT_NE(zp, nullptr);
  EXPECT_EQ(zp->data_type(), onnx::TensorProto::UINT16);
  EXPECT_EQ(values<uint16_t>(zp), std::vector<uint16_t>{static_cast<uint16_t>(e.act.zero_point)});

  const std::string check = run_checker(m);
  RecordProperty("checker", check);
  std::printf("checker: %s\n", check.c_str());
}

TEST(OnnxExport, FoldedGraphHoldsTheUint16Table) {
  const std::vector<float> table = qemb::testing::spread_table(kRows, kDim, 8);
  const QuantizedEmbedding e = compiled(Scheme::k16a8w, Pattern::kOptimized, table);
  OnnxExportOptions o;
  o.folded = true;
  o.int32_indices = true;
  o.opset = 22;
  auto bytes = onnx_model_bytes(e, o);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  const onnx::ModelProto m = parse(*bytes);
  EXPECT_EQ(m.opset_import(0).version(), 22);
  EXPECT_EQ(nodes(m), (std::vector<std::string>{
                          "Gather embedding: embedding_convert_quantized, indices -> embedding_quantized [axis=0]",
                          "DequantizeLinear embedding_dequantize: embedding_quantized, embedding_act_scale, "
                          "embedding_act_zero_point -> embedding",
                      }));
  EXPECT_EQ(m.graph().input(0).type().tensor_type().elem_type(), onnx::TensorProto::INT32);
  const onnx::TensorProto* t = initializer(m, "embedding_convert_quantized");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->data_type(), onnx::TensorProto::UINT16);
  std::vector<uint16_t> want;
  for (size_t k = 0; k < e.q.size(); ++k) want.push_back(optimized_output(e.row_scales[k / kDim], e.q[k], e.act));
  EXPECT_EQ(values<uint16_t>(t), want);
  run_checker(m);
}

TEST(OnnxExport, LegacyGraph) {
  const std::vector<float> table = qemb::testing::spread_table(kRows, kDim, 9);
  const QuantizedEmbedding e = compiled(Scheme::k16a4w, Pattern::kLegacy, table);
  OnnxExportOptions o;
  o.int4_weights = true;
  auto bytes = onnx_model_bytes(e, o);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  const onnx::ModelProto m = parse(*bytes);
  EXPECT_EQ(nodes(m), (std::vector<std::string>{
                          "DequantizeLinear embedding_weight_dequantize: embedding_weight_quantized, "
                          "embedding_weight_scale, embedding_weight_zero_point -> embedding_weight [axis=0]",
                          "QuantizeLinear embedding_intermediate_quantize: embedding_weight, "
                          "embedding_intermediate_scale, embedding_intermediate_zero_point -> "
                          "embedding_intermediate_table_quantized",
                          "DequantizeLinear embedding_intermediate_dequantize: embedding_intermediate_table_quantized, "
                          "embedding_intermediate_scale, embedding_intermediate_zero_point -> "
                          "embedding_intermediate_table",
                          "Gather embedding_intermediate: embedding_intermediate_table, indices -> "
                          "embedding_intermediate [axis=0]",
                          "QuantizeLinear embedding_convert: embedding_intermediate, embedding_act_scale, "
                          "embedding_act_zero_point -> embedding_quantized",
                          "DequantizeLinear embedding_dequantize: embedding_quantized, embedding_act_scale, "
                          "embedding_act_zero_point -> embedding",
                      }));
  // INT4 (onnx.proto data type 22): two values a byte, the first in the low nibble.
  const onnx::TensorProto* w = initializer(m, "embedding_weight_quantized");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->data_type(), 22);
  const std::vector<uint8_t> packed = values<uint8_t>(w);
  ASSERT_EQ(packed.size(), e.q.size() / 2);
  for (size_t k = 0; k < e.q.size(); ++k) {
    const uint8_t nib = (k & 1) ? packed[k / 2] >> 4 : packed[k / 2] & 0x0F;
    EXPECT_EQ(static_cast<int8_t>(static_cast<int8_t>(nib << 4) >> 4), e.q[k]) << k;
  }
  EXPECT_EQ(values<float>(initializer(m, "embedding_intermediate_scale")), std::vector<float>{e.max_scale});
  EXPECT_EQ(initializer(m, "embedding_intermediate_zero_point")->data_type(), 22);
  run_checker(m);
}

TEST(OnnxExport, FilesAppearWholeOrNotAtAll) {
  TempDir dir;
  const std::vector<float> table = qemb::testing::spread_table(kRows, kDim, 10);
  std::vector<uint8_t> bytes(table.size() * 4);
  std::memcpy(bytes.data(), table.data(), bytes.size());
  const std::string ckpt = dir.file("m.safetensors");
  ASSERT_TRUE(write_safetensors(ckpt, {}, {{"model.embed_tokens.weight", "F32", {kRows, kDim}, bytes}}).ok());
  OnnxExportRequest r;
  r.input = ckpt;
  r.compile.qnn_sdk_version = "2.48";
  r.out_path = dir.file("m.onnx");
  r.encodings_path = dir.file("m.encodings.json");
  auto s = export_onnx(r);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_FALSE(s->from_artifact);
  EXPECT_EQ(s->embedding.pattern, Pattern::kOptimized);
  EXPECT_EQ(std::filesystem::file_size(r.out_path), s->model_bytes);
  auto enc = nlohmann::json::parse(qemb::testing::read_text(r.encodings_path));
  EXPECT_EQ(enc["version"], "0.6.1");
  const onnx::ModelProto m = parse(qemb::testing::read_text(r.out_path));
  EXPECT_EQ(nodes(m).size(), 4u);

  // A failing export (opset 17) leaves both earlier files as they were.
  const std::string model_before = qemb::testing::read_text(r.out_path);
  const std::string enc_before = qemb::testing::read_text(r.encodings_path);
  r.onnx.opset = 17;
  r.compile.scheme = Scheme::k16a8w;
  ASSERT_FALSE(export_onnx(r).ok());
  EXPECT_EQ(qemb::testing::read_text(r.out_path), model_before);
  EXPECT_EQ(qemb::testing::read_text(r.encodings_path), enc_before);
  size_t files = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir.path())) files += f.is_regular_file();
  EXPECT_EQ(files, 3u);  // the checkpoint, the model, the encodings: no temporaries
}

#endif  // QEMB_HAVE_ONNX

}  // namespace
}  // namespace qemb
