// Writes a fake-quantized copy of a checkpoint folder (fakequant's folder output).
#pragma once

#include <cstdint>
#include <string>

#include "qemb/checkpoint.h"
#include "io/param_store.h"

namespace qemb {

// Writes `out_folder`: the file of `store` (a shard of `ckpt`, or its lone
// file) saved with its changes, every other regular file under ckpt.folder()
// and its real subfolders copied unchanged (a link to a file is copied as
// that file; links to folders are not followed), or, with `link`, the other
// .safetensors files hard-linked where the file system allows. Built in a
// temporary folder next to `out_folder` and renamed into place. Returns how
// many files were hard-linked; `skipped` gets each entry not copied, as
// "relative/path (why)": links to folders, dangling links, FIFOs, sockets,
// devices.
Result<int64_t> write_checkpoint_folder(const Checkpoint& ckpt, const ParamStore& store,
                                        const std::string& out_folder, bool link, std::vector<std::string>& skipped);

}  // namespace qemb
