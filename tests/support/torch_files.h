// Byte builders for PyTorch checkpoints and zip archives written without
// Python: pickles of state dicts (protocol 2, as torch.save writes them),
// hostile pickles, and stored zip archives (torch.save's layout, np.savez's).
// Also the check whether python3 with torch is there, for tests that let
// torch itself write the files.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "support/test_util.h"

// The interpreter the build found (CMake's Python_EXECUTABLE), else python3.
#ifndef QEMB_TEST_PYTHON
#define QEMB_TEST_PYTHON "python3"
#endif

namespace qemb::testing {

inline const std::string kTestPython = QEMB_TEST_PYTHON;

inline std::string le_bytes(uint64_t v, int n) {
  std::string s(static_cast<size_t>(n), '\0');
  for (int i = 0; i < n; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// ---- pickle opcodes ----------------------------------------------------------

inline std::string pk_str(const std::string& s) { return "X" + le_bytes(s.size(), 4) + s; }
inline std::string pk_global(const std::string& module, const std::string& name) {
  return "c" + module + "\n" + name + "\n";
}
inline std::string pk_int(int64_t v) {
  if (v >= 0 && v < 256) return "K" + le_bytes(static_cast<uint64_t>(v), 1);
  return "\x8a\x08" + le_bytes(static_cast<uint64_t>(v), 8);
}
inline std::string pk_tuple(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (int64_t x : v) s += pk_int(x);
  return s + "t";
}
inline std::string pk_ordered_dict() { return pk_global("collections", "OrderedDict") + ")R"; }

struct PickledTensorSpec {
  std::string name;
  std::string storage_type = "FloatStorage";
  std::string key = "0";
  int64_t numel = 0;
  int64_t offset = 0;
  std::vector<int64_t> shape, stride;
};

// torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())
inline std::string pk_tensor(const PickledTensorSpec& t) {
  const std::string pid = "(" + pk_str("storage") + pk_global("torch", t.storage_type) + pk_str(t.key) +
                          pk_str("cpu") + pk_int(t.numel) + "tQ";
  return pk_global("torch._utils", "_rebuild_tensor_v2") + "(" + pid + pk_int(t.offset) + pk_tuple(t.shape) +
         pk_tuple(t.stride) + "\x89" + pk_ordered_dict() + "tR";
}

// A state dict (an OrderedDict) of these tensors.
inline std::string state_dict_pickle(const std::vector<PickledTensorSpec>& tensors) {
  std::string s = "\x80\x02" + pk_ordered_dict();
  for (const PickledTensorSpec& t : tensors) s += pk_str(t.name) + pk_tensor(t) + "s";
  return s + ".";
}

// ---- zip (stored entries) --------------------------------------------------------

inline uint32_t crc32_of(const std::string& data) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : data) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

// A zip archive of stored entries, each one's data 64-byte aligned (as torch
// writes them); `method` 8 marks every entry deflated without deflating it.
inline std::string stored_zip(const std::vector<std::pair<std::string, std::string>>& entries, uint16_t method = 0) {
  std::string out, central;
  for (const auto& [name, data] : entries) {
    const size_t offset = out.size();
    const size_t unpadded = offset + 30 + name.size() + 4;
    const size_t pad = (64 - unpadded % 64) % 64;
    const std::string extra = le_bytes(0x4646, 2) + le_bytes(pad, 2) + std::string(pad, 'Z');
    const uint32_t crc = crc32_of(data);
    out += le_bytes(0x04034b50, 4) + le_bytes(20, 2) + le_bytes(0, 2) + le_bytes(method, 2) + le_bytes(0, 4) +
           le_bytes(crc, 4) + le_bytes(data.size(), 4) + le_bytes(data.size(), 4) + le_bytes(name.size(), 2) +
           le_bytes(extra.size(), 2) + name + extra + data;
    central += le_bytes(0x02014b50, 4) + le_bytes(20, 2) + le_bytes(20, 2) + le_bytes(0, 2) + le_bytes(method, 2) +
               le_bytes(0, 4) + le_bytes(crc, 4) + le_bytes(data.size(), 4) + le_bytes(data.size(), 4) +
               le_bytes(name.size(), 2) + le_bytes(0, 2) + le_bytes(0, 2) + le_bytes(0, 2) + le_bytes(0, 2) +
               le_bytes(0, 4) + le_bytes(offset, 4) + name;
  }
  const size_t cd_offset = out.size();
  out += central;
  out += le_bytes(0x06054b50, 4) + le_bytes(0, 2) + le_bytes(0, 2) + le_bytes(entries.size(), 2) +
         le_bytes(entries.size(), 2) + le_bytes(central.size(), 4) + le_bytes(cd_offset, 4) + le_bytes(0, 2);
  return out;
}

// A torch.save zip checkpoint: archive/data.pkl, archive/data/<key> for each
// storage, archive/version.
inline std::string torch_zip(const std::string& pickle, const std::vector<std::pair<std::string, std::string>>& storages) {
  std::vector<std::pair<std::string, std::string>> entries = {{"archive/data.pkl", pickle}};
  for (const auto& [key, bytes] : storages) entries.emplace_back("archive/data/" + key, bytes);
  entries.emplace_back("archive/version", "3\n");
  return stored_zip(entries);
}

inline std::string float_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// True when the test interpreter can import `module` (torch (Debian's python3-torch); tests that let
// torch write their files skip without it (e.g. under qemu in the cross build).
inline bool python_has(const std::string& module) {
  static std::vector<std::pair<std::string, bool>> known;
  for (const auto& [m, ok] : known)
    if (m == module) return ok;
  const bool ok = run_command(kTestPython + " -c 'import " + module + "' >/dev/null 2>&1").exit_code == 0;
  known.emplace_back(module, ok);
  return ok;
}

}  // namespace qemb::testing
