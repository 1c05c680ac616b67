// Fake-quantizing a checkpoint already opened as a ParamStore; internal
// because ParamStore (io/param_store.h) is not part of the public face.
#pragma once

#include "io/param_store.h"
#include "qemb/eval.h"

namespace qemb {

// Replaces, in `store`, the embedding's values with what the deployed lookup
// returns (deployed_rows over every row). The store is not saved.
Result<FakeQuantResult> fakequant_store(ParamStore& store, const FakeQuantOptions& options,
                                        const TargetVersion& target);

}  // namespace qemb
