// Hand-built graphs for the runtime's tests: a tensor (STATIC ones filled
// with one byte value) and a one-output op.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/ir.h"

namespace qemb::testing {

inline Tensor graph_tensor(const std::string& name, TensorKind kind, DataType dtype, std::vector<int64_t> shape,
                           Encoding encoding, uint8_t fill = 7) {
  Tensor t;
  t.name = name;
  t.kind = kind;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.encoding = std::move(encoding);
  if (kind == TensorKind::kStatic)
    t.data = std::make_shared<OwnedBuffer>(std::vector<uint8_t>(storage_bytes(t), fill));
  return t;
}

inline Op graph_op(OpType type, const std::string& name, std::vector<std::string> inputs, const std::string& out) {
  Op o;
  o.type = type;
  o.name = name;
  o.inputs = std::move(inputs);
  o.outputs = {out};
  return o;
}

}  // namespace qemb::testing
