// Compile-time passes over a lowered graph (docs/numeric-contract.md, "Compile modes").
#pragma once

#include "core/ir.h"

namespace qemb {

// Evaluates every Convert whose input is STATIC ahead of time: its output
// becomes a STATIC tensor holding the converted data and the op disappears.
// The optimized pattern folds to a single Gather over a uint16 table; the
// legacy pattern has no STATIC-input Convert and keeps both ops.
Status fold_static_converts(Graph& graph);

// Replaces Convert(STATIC per-axis W) -> Gather and Gather(STATIC per-axis W)
// -> Convert with one RequantGather over the packed PCQ table, so the runtime
// keeps 0.5 or 1 byte per value instead of a 2-byte table. Its output is
// bit-identical to the folded table's (the legacy chain records its per-tensor
// intermediate encoding on the op).
Status fuse_requant_gathers(Graph& graph);

}  // namespace qemb
