// Every row of an artifact, dequantized: what tests compare artifacts by.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "qemb/runtime.h"

namespace qemb::testing {

inline std::vector<float> lookup_all(const std::string& artifact) {
  auto rt = EmbeddingRuntime::load(artifact);
  EXPECT_TRUE(rt.ok()) << rt.error().to_string();
  if (!rt.ok()) return {};
  std::vector<int64_t> ids(static_cast<size_t>((*rt)->vocab_size()));
  std::iota(ids.begin(), ids.end(), 0);
  std::vector<float> out(ids.size() * static_cast<size_t>((*rt)->dim()));
  EXPECT_TRUE((*rt)->lookup_dequantized(ids, out.data()).ok());
  return out;
}

}  // namespace qemb::testing
