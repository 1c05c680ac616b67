// Writes a fake-quantized copy of a checkpoint folder (fakequant's folder output).
#pragma once

#include <cstdint>
#include <string>

#include "qemb/checkpoint.h"
#include "io/param_store.h"

namespace qemb {

// Writes `out_folder`: the file of `store` (a shard of `ckpt`, or its lone
// file) saved with its changes, every other regular file under ckpt.folder()
// copied unchanged (symbolic links followed), or, with `link`, the other
// .safetensors files hard-linked where the file system allows. Built in a
// temporary folder next to `out_folder` and renamed into place. Returns how
// many files were hard-linked.
Result<int64_t> write_checkpoint_folder(const Checkpoint& ckpt, const ParamStore& store,
                                        const std::string& out_folder, bool link);

}  // namespace qemb
