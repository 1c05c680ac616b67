// The checkpoint of three tables the named-table tests share, and its
// compile with TENSOR=NAME specs.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "qemb/checkpoint.h"
#include "qemb/compiler.h"
#include "support/checkpoints.h"
#include "support/temp_dir.h"

namespace qemb::testing {

// Written in this order (not alphabetical): user, item, ctx.
inline std::string write_tables(const TempDir& dir) {
  const std::string path = dir.file("rec.safetensors");
  Status s = write_safetensors(path, {},
                               {{"emb.user.weight", "F32", {12, 4}, encode_floats(spread_table(12, 4, 1), "F32")},
                                {"emb.item.weight", "F32", {20, 6}, encode_floats(spread_table(20, 6, 2), "F32")},
                                {"emb.ctx.weight", "F32", {8, 3}, encode_floats(spread_table(8, 3, 3), "F32")}});
  EXPECT_TRUE(s.ok()) << s.message();
  return path;
}

inline std::string compile_named(const TempDir& dir, const std::string& ckpt) {
  auto opened = Checkpoint::open(ckpt);
  EXPECT_TRUE(opened.ok());
  auto selected = opened->select_named_tables({"emb.*", "emb.item.weight=unused"});
  EXPECT_FALSE(selected.ok());  // selected twice
  selected = opened->select_named_tables({"emb.user.weight=user", "emb.i*=item", "emb.ctx.weight"});
  EXPECT_TRUE(selected.ok()) << selected.error().message;
  std::vector<CompileOptions> tables;
  for (const NamedTable& t : *selected) {
    CompileOptions o;
    o.tensor = t.tensor;
    o.node_name = t.name;
    o.qnn_sdk_version = "2.48";
    tables.push_back(o);
  }
  const std::string out = dir.file("rec.qemb");
  auto compiled = compile_checkpoint_tables(ckpt, tables, out);
  EXPECT_TRUE(compiled.ok()) << compiled.error().message;
  return out;
}

}  // namespace qemb::testing
