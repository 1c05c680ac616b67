// What a file is, by its first bytes: the inputs qemb reads are told apart so
// that a checkpoint given where an artifact belongs (run, inspect, bench), or
// an artifact given where a checkpoint belongs (compile, eval, fakequant), is
// answered with the command to use instead of a parse error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace qemb {

enum class FileKind {
  kUnknown,
  kArtifact,       // "QEMB\x89\r\n\x1a"
  kSafetensors,    // u64 header length, then '{'
  kGguf,           // "GGUF"
  kZip,            // "PK\x03\x04": a torch.save zip or an .npz
  kTorchLegacy,    // pickle protocol 2 with torch's legacy magic number
  kNpy,            // "\x93NUMPY"
};

// From a file's first bytes (16 are enough).
FileKind file_kind_of(const uint8_t* data, size_t size);
// "a safetensors checkpoint", "a qemb artifact", ...; empty for kUnknown.
std::string describe(FileKind kind);
// "'PATH' is a qemb artifact, not a checkpoint: compile, eval and fakequant
// read the float checkpoint it was compiled from ...": an artifact given
// where a checkpoint belongs, with the commands that read it.
std::string checkpoint_instead_hint(const std::string& path);

}  // namespace qemb
