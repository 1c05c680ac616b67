// `qemb run ART --bags OFFSETS.npy ...`: pooled lookups (EmbeddingBag) from
// the command line, over qemb/embedding_bag.h.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "qemb/runtime.h"
#include "qemb/status.h"

namespace qemb::cli {

struct BagFlags {
  // Once per table, in the order of run's --table (FBGEMM's table-batched
  // form when there are several): --bags and, for every table or none, --weights.
  std::vector<std::string> bags, weights;
  std::string bag_format = "include-last-offset", pool = "sum", padding_idx;
  std::vector<std::string> tables;  // run's --table, once per pooled table
  std::string out_dtype = "f32";    // run's --out-dtype: f32 | f16 | bf16
};

// The table `name` of the artifact, or its only table when `name` is empty
// (an artifact of several needs a name: the error lists them).
Result<const EmbeddingTable*> choose_table(const EmbeddingRuntime& rt, const std::string& name);

// Adds --bags, --bag-format, --weights, --pool and --padding-idx to `run`.
void add_bag_flags(CLI::App& run, BagFlags& flags);
// True when any of them was given.
bool bag_flags_given(const BagFlags& flags);

// Pools the ids of --tokens / --tokens-file (one list per table) by the bags
// of --bags and writes a [B, sum of D_t] .npy to `out` (float32, or float16 /
// bfloat16 bits as --out-dtype says), table t's columns at its offset, or
// prints one row per bag. `json`: prints a JSON summary (bags, width, dtype,
// pool, output, each table's name, dim, columns, ids and kernel) and, without
// `out`, the rows under "rows".
Status run_bags(const std::string& artifact, const std::vector<std::string>& tokens,
                const std::vector<std::string>& tokens_files, const BagFlags& flags, const RuntimeOptions& options,
                const std::string& out, bool json = false);

}  // namespace qemb::cli
