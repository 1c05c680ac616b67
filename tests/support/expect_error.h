// A library error with its code and a part of its message: what the bad-input
// tests of each layer assert.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "qemb/status.h"

namespace qemb::testing {

inline void expect_error(const Status& s, ErrorCode code, const std::string& substring) {
  ASSERT_FALSE(s.ok()) << "expected an error containing: " << substring;
  EXPECT_EQ(s.error().code, code) << s.error().to_string();
  EXPECT_THAT(s.error().message, ::testing::HasSubstr(substring));
}

}  // namespace qemb::testing
