// Writes the seed corpora under <out>/<target>/: small valid inputs of every
// shape each parser accepts, plus a few near misses. The output is committed
// (fuzz/corpus); rerun after a format change:
//   qemb_fuzz_make_corpus fuzz/corpus
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artifact_container.h"
#include "artifact/artifact_io.h"
#include "core/ir.h"
#include "qemb/gguf.h"
#include "qemb/npy.h"
#include "qemb/safetensors.h"

namespace {

namespace fs = std::filesystem;
using qemb::DataType;
using qemb::Encoding;
using qemb::Graph;
using qemb::Op;
using qemb::OpType;
using qemb::Tensor;
using qemb::TensorKind;

std::string out_root;

void fail(const std::string& what) {
  std::fprintf(stderr, "make_corpus: %s\n", what.c_str());
  std::exit(1);
}
void check(const qemb::Status& s, const std::string& what) {
  if (!s.ok()) fail(what + ": " + s.error().to_string());
}

std::string path_of(const std::string& target, const std::string& name) {
  fs::create_directories(fs::path(out_root) / target);
  return (fs::path(out_root) / target / name).string();
}

void write_file(const std::string& target, const std::string& name, const std::string& bytes) {
  std::ofstream out(path_of(target, name), std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) fail("cannot write " + name);
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::vector<uint8_t> counting_bytes(size_t n, uint8_t start = 1) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(start + 37 * i);
  return b;
}

std::vector<uint8_t> f32_bytes(std::vector<float> values) {
  std::vector<uint8_t> b(values.size() * 4);
  std::memcpy(b.data(), values.data(), b.size());
  return b;
}

void safetensors_seeds() {
  const std::string t = "safetensors";
  check(qemb::write_safetensors(path_of(t, "embed_f32"), {{"format", "pt"}},
                                {{"model.embed_tokens.weight", "F32", {4, 3},
                                  f32_bytes({0.5f, -1, 2, 0, 0.25f, -0.125f, 3, 1, -2, 7, 0, 1e-3f})},
                                 {"model.norm.weight", "F32", {3}, f32_bytes({1, 1, 1})}}),
        "embed_f32");
  check(qemb::write_safetensors(path_of(t, "embed_f16"), {},
                                {{"wte.weight", "F16", {3, 2}, counting_bytes(12)}}),
        "embed_f16");
  check(qemb::write_safetensors(path_of(t, "two_bf16"), {},
                                {{"tok_embeddings.weight", "BF16", {2, 4}, counting_bytes(16)},
                                 {"encoder.word_embeddings.weight", "BF16", {2, 4}, counting_bytes(16, 9)}}),
        "two_bf16");
  check(qemb::write_safetensors(path_of(t, "other_dtypes"), {{"note", "not floats"}},
                                {{"a.I8", "I8", {2, 2}, counting_bytes(4)},
                                 {"b.F4", "F4", {2, 2}, counting_bytes(2)},
                                 {"c.U16", "U16", {3}, counting_bytes(6)},
                                 {"d.BOOL", "BOOL", {1}, {1}},
                                 {"e.F64", "F64", {1, 1}, counting_bytes(8)}}),
        "other_dtypes");
  check(qemb::write_safetensors(path_of(t, "cube_and_scalar"), {},
                                {{"token_embd.weight", "F32", {2, 1, 2}, counting_bytes(16)},
                                 {"scalar", "F32", {}, counting_bytes(4)},
                                 {"empty", "F32", {0, 3}, {}}}),
        "cube_and_scalar");
  check(qemb::write_safetensors(path_of(t, "no_tensors"), {}, {}), "no_tensors");
  // Hand-written headers: unpadded, overlapping offsets, a duplicate name.
  auto raw = [&](const std::string& name, const std::string& header, size_t data_bytes) {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    write_file(t, name, bytes + header + std::string(data_bytes, '\x11'));
  };
  raw("unpadded", R"({"x.embed_tokens.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}})", 8);
  raw("overlap", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12);
  raw("duplicate", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", 2);
}

Tensor indices(const std::string& name) {
  Tensor t;
  t.name = name;
  t.kind = TensorKind::kAppWrite;
  t.dtype = DataType::kInt32;
  t.shape = {0};
  return t;
}

Tensor u16(const std::string& name, TensorKind kind, std::vector<int64_t> shape, std::vector<uint8_t> data = {}) {
  Tensor t;
  t.name = name;
  t.kind = kind;
  t.dtype = DataType::kUFixedPoint16;
  t.shape = std::move(shape);
  t.encoding = Encoding::per_tensor(0.001f, -1200, 16);
  if (kind == TensorKind::kStatic) t.data = std::make_shared<qemb::OwnedBuffer>(std::move(data));
  return t;
}

Tensor pcq(const std::string& name, int64_t rows, int64_t dim, int bits) {
  Tensor t;
  t.name = name;
  t.kind = TensorKind::kStatic;
  t.dtype = DataType::kSFixedPoint8;
  t.shape = {rows, dim};
  std::vector<float> scales;
  for (int64_t r = 0; r < rows; ++r) scales.push_back(0.01f * static_cast<float>(r + 1));
  t.encoding = Encoding::per_axis(0, scales, std::vector<int32_t>(static_cast<size_t>(rows), 0), bits);
  t.data = std::make_shared<qemb::OwnedBuffer>(
      counting_bytes(static_cast<size_t>(rows) * qemb::row_storage_bytes(t.dtype, bits, dim)));
  return t;
}

Op op(OpType type, const std::string& name, std::vector<std::string> in, const std::string& out) {
  Op o;
  o.type = type;
  o.name = name;
  o.inputs = std::move(in);
  o.outputs = {out};
  return o;
}

// `format_version` 0: the newest layout; 1: the one older builds wrote.
void artifact_seed(const std::string& name, const Graph& g, uint32_t format_version = 1) {
  const std::string path = path_of("artifact", name);
  nlohmann::json meta = {{"format", "qemb"}, {"scheme", "16a4w"}, {"pattern", "optimized"},
                         {"source", {{"file", "m.safetensors"}, {"tensor", "wte.weight"}}}};
  check(qemb::write_artifact(path, g, meta, qemb::ArtifactWriteOptions{format_version}), name);
  // The same sections, separated, for the container mode of the fuzzer.
  std::vector<uint8_t> bytes = read_file(path);
  auto buffer = std::make_shared<qemb::OwnedBuffer>(bytes);
  auto loaded = qemb::load_artifact_from_bytes(buffer);
  if (!loaded.ok()) fail(name + " does not load: " + loaded.error().to_string());
  std::vector<std::string> parts;
  const qemb::SectionInfo* meta_s = nullptr;
  const qemb::SectionInfo* graph_s = nullptr;
  for (const auto& s : loaded->sections) {
    if (s.kind == qemb::SectionKind::kMeta) meta_s = &s;
    if (s.kind == qemb::SectionKind::kGraph) graph_s = &s;
  }
  auto text = [&](const qemb::SectionInfo& s) {
    return std::string(reinterpret_cast<const char*>(bytes.data() + s.offset), s.size);
  };
  parts.push_back(text(*meta_s));
  // DATA parts are renumbered from 2 in container mode: rewrite the graph's
  // section references accordingly.
  nlohmann::json graph = nlohmann::json::parse(text(*graph_s));
  std::vector<size_t> data_order;
  for (const auto& s : loaded->sections)
    if (s.kind == qemb::SectionKind::kData || s.kind == qemb::SectionKind::kRows) data_order.push_back(s.index);
  auto renumber = [&](nlohmann::json& ref) {
    for (size_t k = 0; k < data_order.size(); ++k)
      if (ref.get<size_t>() == data_order[k]) {
        ref = k + 2;
        return;
      }
  };
  for (auto& t : graph["tensors"]) {
    if (t.contains("data_section")) renumber(t["data_section"]);
    for (const char* key : {"scales_section", "offsets_section"})
      if (t["encoding"].contains(key)) renumber(t["encoding"][key]);
  }
  for (auto& o : graph["ops"])
    if (o.contains("intermediate"))
      for (const char* key : {"scales_section", "offsets_section"})
        if (o["intermediate"].contains(key)) renumber(o["intermediate"][key]);
  parts.push_back(graph.dump());
  for (size_t index : data_order) {
    const bool rows = loaded->sections[index].kind == qemb::SectionKind::kRows;
    parts.push_back((rows ? std::string(qemb::fuzz::kRowsMarker) : std::string()) + text(loaded->sections[index]));
  }
  const std::string joined = qemb::fuzz::join_sections(parts);
  auto packed = qemb::fuzz::pack_sections(qemb::fuzz::split_sections(joined));
  if (!qemb::load_artifact_from_bytes(std::make_shared<qemb::OwnedBuffer>(packed)).ok())
    fail(name + ": its container-mode seed does not load");
  write_file("artifact", name + ".sections", joined);
  // The runtime target decodes its input the same way.
  write_file("runtime", name, std::string(bytes.begin(), bytes.end()));
  write_file("runtime", name + ".sections", joined);
}

void artifact_seeds() {
  {  // The folded optimized pattern: one Gather over a uint16 table.
    Graph g;
    g.add_tensor(u16("emb_convert", TensorKind::kStatic, {4, 3}, counting_bytes(24)));
    g.add_tensor(indices("emb_indices"));
    g.add_tensor(u16("emb", TensorKind::kAppRead, {0, 3}));
    g.add_op(op(OpType::kGather, "emb", {"emb_convert", "emb_indices"}, "emb"));
    artifact_seed("materialized", g);
  }
  {  // Fused optimized 4-bit, odd width (a padded nibble per row).
    Graph g;
    g.add_tensor(pcq("emb_weight", 5, 3, 4));
    g.add_tensor(indices("emb_indices"));
    g.add_tensor(u16("emb", TensorKind::kAppRead, {0, 3}));
    g.add_op(op(OpType::kRequantGather, "emb", {"emb_weight", "emb_indices"}, "emb"));
    artifact_seed("requant_s4", g);
  }
  {  // Fused legacy 8-bit: the per-tensor intermediate rides on the op.
    Graph g;
    g.add_tensor(pcq("emb_weight", 3, 4, 8));
    g.add_tensor(indices("emb_indices"));
    g.add_tensor(u16("emb", TensorKind::kAppRead, {0, 4}));
    Op o = op(OpType::kRequantGather, "emb", {"emb_weight", "emb_indices"}, "emb");
    o.intermediate = Encoding::per_tensor(0.03f, 0, 8);
    g.add_op(o);
    artifact_seed("requant_legacy_s8", g);
  }
  {  // Format 3: the fused tables row-interleaved (ROWS sections), 4-bit odd
     // width and 8-bit legacy.
    Graph g;
    g.add_tensor(interleave_rows(pcq("emb_weight", 5, 3, 4)).value());
    g.add_tensor(indices("emb_indices"));
    g.add_tensor(u16("emb", TensorKind::kAppRead, {0, 3}));
    g.add_op(op(OpType::kRequantGather, "emb", {"emb_weight", "emb_indices"}, "emb"));
    artifact_seed("requant_s4_rows", g, 0);
    Graph l;
    l.add_tensor(interleave_rows(pcq("emb_weight", 3, 4, 8)).value());
    l.add_tensor(indices("emb_indices"));
    l.add_tensor(u16("emb", TensorKind::kAppRead, {0, 4}));
    Op o = op(OpType::kRequantGather, "emb", {"emb_weight", "emb_indices"}, "emb");
    o.intermediate = Encoding::per_tensor(0.03f, 0, 8);
    l.add_op(o);
    artifact_seed("requant_legacy_s8_rows", l, 0);
  }
  {  // The other schemes' graphs: 2-bit rows into uint8 activations (fused,
     // row-interleaved), a weight-only fused gather into FLOAT_32, and the
     // folded uint8 and float32 tables.
    auto act8 = [](const std::string& name, TensorKind kind, std::vector<int64_t> shape, std::vector<uint8_t> data = {}) {
      Tensor t = u16(name, kind, std::move(shape), std::move(data));
      t.dtype = DataType::kUFixedPoint8;
      t.encoding = Encoding::per_tensor(0.02f, -100, 8);
      return t;
    };
    auto floats = [](const std::string& name, TensorKind kind, std::vector<int64_t> shape, std::vector<uint8_t> data = {}) {
      Tensor t = u16(name, kind, std::move(shape), std::move(data));
      t.dtype = DataType::kFloat32;
      t.encoding = Encoding();
      return t;
    };
    Graph a;
    a.add_tensor(interleave_rows(pcq("emb_weight", 5, 7, 2)).value());
    a.add_tensor(indices("emb_indices"));
    a.add_tensor(act8("emb", TensorKind::kAppRead, {0, 7}));
    a.add_op(op(OpType::kRequantGather, "emb", {"emb_weight", "emb_indices"}, "emb"));
    artifact_seed("requant_s2_u8_rows", a, 0);
    Graph w;
    w.add_tensor(pcq("emb_weight", 4, 5, 4));
    w.add_tensor(indices("emb_indices"));
    w.add_tensor(floats("emb", TensorKind::kAppRead, {0, 5}));
    w.add_op(op(OpType::kRequantGather, "emb", {"emb_weight", "emb_indices"}, "emb"));
    artifact_seed("dequant_s4", w);
    Graph m8;
    m8.add_tensor(act8("emb_convert", TensorKind::kStatic, {4, 3}, counting_bytes(12)));
    m8.add_tensor(indices("emb_indices"));
    m8.add_tensor(act8("emb", TensorKind::kAppRead, {0, 3}));
    m8.add_op(op(OpType::kGather, "emb", {"emb_convert", "emb_indices"}, "emb"));
    artifact_seed("materialized_u8", m8);
    Graph mf;
    std::vector<uint8_t> f(4 * 3 * 4);
    for (size_t k = 0; k < 12; ++k) {
      const float v = 0.25f * static_cast<float>(k) - 1.0f;
      std::memcpy(f.data() + 4 * k, &v, 4);
    }
    mf.add_tensor(floats("emb_convert", TensorKind::kStatic, {4, 3}, f));
    mf.add_tensor(indices("emb_indices"));
    mf.add_tensor(floats("emb", TensorKind::kAppRead, {0, 3}));
    mf.add_op(op(OpType::kGather, "emb", {"emb_convert", "emb_indices"}, "emb"));
    artifact_seed("materialized_f32", mf);
  }
  {  // Unfolded legacy pattern: Gather into an intermediate, then Convert.
    Graph g;
    g.add_tensor(pcq("emb_weight", 3, 2, 4));
    g.add_tensor(indices("emb_indices"));
    Tensor inter;
    inter.name = "emb_intermediate";
    inter.kind = TensorKind::kNative;
    inter.dtype = DataType::kSFixedPoint8;
    inter.shape = {0, 2};
    inter.encoding = Encoding::per_tensor(0.03f, 0, 4);
    g.add_tensor(inter);
    g.add_tensor(u16("emb", TensorKind::kAppRead, {0, 2}));
    g.add_op(op(OpType::kGather, "emb_intermediate", {"emb_weight", "emb_indices"}, "emb_intermediate"));
    g.add_op(op(OpType::kConvert, "emb_convert", {"emb_intermediate"}, "emb"));
    artifact_seed("legacy_two_ops", g);
  }
  {  // Unfolded optimized pattern: Convert the table, then Gather.
    Graph g;
    g.add_tensor(pcq("emb_weight", 2, 2, 8));
    g.add_tensor(indices("emb_indices"));
    g.add_tensor(u16("emb_convert", TensorKind::kNative, {2, 2}));
    g.add_tensor(u16("emb", TensorKind::kAppRead, {0, 2}));
    g.add_op(op(OpType::kConvert, "emb_convert", {"emb_weight"}, "emb_convert"));
    g.add_op(op(OpType::kGather, "emb", {"emb_convert", "emb_indices"}, "emb"));
    artifact_seed("optimized_two_ops", g);
  }
}

std::string npy_v1(const std::string& dict, const std::vector<uint8_t>& data, char major = 1) {
  std::string header = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += major;
  out += '\0';
  const size_t n = header.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major != 1) {
    out += static_cast<char>((n >> 16) & 0xff);
    out += static_cast<char>((n >> 24) & 0xff);
  }
  return out + header + std::string(data.begin(), data.end());
}

void npy_seeds() {
  const std::string t = "npy";
  auto encode = [&](const std::string& name, const std::string& descr, std::vector<int64_t> shape,
                    std::vector<uint8_t> bytes) {
    auto e = qemb::encode_npy(descr, shape, bytes.data(), bytes.size());
    if (!e.ok()) fail(name + ": " + e.error().to_string());
    write_file(t, name, std::string(e->begin(), e->end()));
  };
  encode("i4_vector", "<i4", {5}, {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 9, 0, 0, 0});
  encode("i8_matrix", "<i8", {2, 3}, counting_bytes(48));
  encode("u1", "|u1", {4}, counting_bytes(4));
  encode("big_endian_i2", ">i2", {2, 2}, counting_bytes(8));
  encode("u8_scalar", "<u8", {}, counting_bytes(8));
  encode("f4", "<f4", {2}, f32_bytes({1.5f, -2}));
  encode("bool", "|b1", {3}, {1, 0, 1});
  encode("empty", "<i4", {0, 4}, {});
  write_file(t, "fortran_i4", npy_v1("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
                                     counting_bytes(24)));
  write_file(t, "v2_i8", npy_v1("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", counting_bytes(16), 2));
  write_file(t, "v3_u2", npy_v1("{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }", counting_bytes(6), 3));
  write_file(t, "structured", npy_v1("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }",
                                     counting_bytes(4)));
}

void gguf_seeds() {
  const std::string t = "gguf";
  const std::vector<float> values = {0.5f, -1, 2, 0, 0.25f, -0.125f, 3, 1, -2, 7, 0, 1e-3f};
  std::vector<float> wide(64);
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<float>(i % 7) - 3.0f + 0.125f * static_cast<float>(i);
  check(qemb::write_gguf(path_of(t, "embed_f32"), {{"general.architecture", "llama"}},
                         {{"token_embd.weight", 0, {4, 3}, f32_bytes(values)}, {"output_norm.weight", 0, {3}, f32_bytes({1, 1, 1})}}),
        "embed_f32");
  check(qemb::write_gguf(path_of(t, "embed_f16_v2"), {}, {{"token_embd.weight", 1, {3, 2}, counting_bytes(12)}}, 32, 2),
        "embed_f16_v2");
  check(qemb::write_gguf(path_of(t, "embed_bf16_align64"), {{"general.name", "x"}},
                         {{"token_embd.weight", 30, {2, 4}, counting_bytes(16)}}, 64),
        "embed_bf16_align64");
  check(qemb::write_gguf(path_of(t, "embed_q8_0"), {}, {{"token_embd.weight", 8, {2, 32}, qemb::gguf_quantize_q8_0(wide.data(), 64)}}),
        "embed_q8_0");
  check(qemb::write_gguf(path_of(t, "embed_q4_0"), {}, {{"token_embd.weight", 2, {2, 32}, qemb::gguf_quantize_q4_0(wide.data(), 64)}}),
        "embed_q4_0");
  check(qemb::write_gguf(path_of(t, "q4_k_and_3d"), {},
                         {{"blk.0.ffn.weight", 12, {1, 256}, counting_bytes(144)}, {"cube", 0, {2, 1, 2}, f32_bytes({1, 2, 3, 4})}}),
        "q4_k_and_3d");
  // Every block type qemb dequantizes, on bytes that make every code and
  // scale field vary (f16 scales included: some are subnormal, inf or NaN).
  check(qemb::write_gguf(path_of(t, "embed_k_quants"), {},
                         {{"q2_k", 10, {2, 256}, counting_bytes(2 * 84, 3)},
                          {"q3_k", 11, {2, 256}, counting_bytes(2 * 110, 5)},
                          {"q4_k", 12, {1, 512}, counting_bytes(2 * 144, 7)},
                          {"q5_k", 13, {2, 256}, counting_bytes(2 * 176, 11)},
                          {"token_embd.weight", 14, {3, 256}, counting_bytes(3 * 210, 13)}}),
        "embed_k_quants");
  check(qemb::write_gguf(path_of(t, "embed_32_blocks"), {},
                         {{"q4_1", 3, {2, 64}, counting_bytes(4 * 20, 17)},
                          {"q5_0", 6, {3, 32}, counting_bytes(3 * 22, 19)},
                          {"token_embd.weight", 7, {2, 32}, counting_bytes(2 * 24, 23)}}),
        "embed_32_blocks");
  check(qemb::write_gguf(path_of(t, "embed_iq4"), {},
                         {{"iq4_nl", 20, {2, 64}, counting_bytes(4 * 18, 29)},
                          {"token_embd.weight", 23, {2, 256}, counting_bytes(2 * 136, 31)}}),
        "embed_iq4");
  // Types qemb knows but does not read: parsed, then refused by name.
  check(qemb::write_gguf(path_of(t, "iq_and_ternary_refused"), {},
                         {{"iq2_xxs", 16, {1, 256}, counting_bytes(66)},
                          {"iq3_s", 21, {1, 256}, counting_bytes(110)},
                          {"tq1_0", 34, {1, 256}, counting_bytes(54)},
                          {"mxfp4", 39, {2, 32}, counting_bytes(34)}}),
        "iq_and_ternary_refused");
  // Cut inside the last Q6_K block: the tensor claims more than the file holds.
  check(qemb::write_gguf(path_of(t, "q6_k_short_block"), {}, {{"token_embd.weight", 14, {2, 256}, counting_bytes(420)}}),
        "q6_k_short_block");
  fs::resize_file(path_of(t, "q6_k_short_block"), fs::file_size(path_of(t, "q6_k_short_block")) - 50);
  // Near misses (truncated_f32, lying_count) are cut and patched from these by
  // hand and committed beside them.
}

void text_seeds() {
  const char* tokens[] = {"1,2,3", "0\n1\n2\n", "  7 , -3 ,+4 # comment\n5", "9223372036854775807,-9223372036854775808",
                          "", "1,,2", "12abc", "# only a comment\n", "1 2\t3\r\n4"};
  int i = 0;
  for (const char* s : tokens) write_file("token_list", "seed" + std::to_string(i++), s);
  const char* versions[] = {"2.48", "v2.37.0.250724", "3.0.1", "V10.0", "2.48.0.260715", "2.x", "1",
                            "18446744073709551615.0", "2..3", "v", "1.2.3.4.5", "007.08"};
  i = 0;
  for (const char* s : versions) write_file("sdk_version", "seed" + std::to_string(i++), s);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_FOLDER (e.g. fuzz/corpus)\n", argv[0]);
    return 2;
  }
  out_root = argv[1];
  safetensors_seeds();
  gguf_seeds();
  artifact_seeds();
  npy_seeds();
  text_seeds();
  std::printf("wrote seed corpora under %s\n", out_root.c_str());
  return 0;
}
