// `qemb run ART --bags OFFSETS.npy ...`: pooled lookups (EmbeddingBag) from
// the command line, over qemb/embedding_bag.h.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "qemb/runtime.h"
#include "qemb/status.h"

namespace qemb::cli {

struct BagFlags {
  std::string bags, bag_format = "include-last-offset", weights, pool = "sum", padding_idx;
  std::string table;  // run's --table: the table of an artifact of several
};

// The table `name` of the artifact, or its only table when `name` is empty
// (an artifact of several needs a name: the error lists them).
Result<const EmbeddingTable*> choose_table(const EmbeddingRuntime& rt, const std::string& name);

// Adds --bags, --bag-format, --weights, --pool and --padding-idx to `run`.
void add_bag_flags(CLI::App& run, BagFlags& flags);
// True when any of them was given.
bool bag_flags_given(const BagFlags& flags);

// Pools the ids of --tokens / --tokens-file by the bags of --bags and writes
// a float32 [B, D] .npy to `out` (or prints one row per bag).
Status run_bags(const std::string& artifact, const std::string& tokens, const std::string& tokens_file,
                const BagFlags& flags, const RuntimeOptions& options, const std::string& out);

}  // namespace qemb::cli
