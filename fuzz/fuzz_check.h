// An invariant a fuzz target checks beyond "no crash": on failure it prints
// what broke and aborts, which libFuzzer reports as a finding.
#pragma once

#include <cstdio>
#include <cstdlib>

// The optional detail is a printf format and its arguments.
#define QEMB_FUZZ_CHECK(cond, ...)                                                          \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);     \
      __VA_OPT__(std::fprintf(stderr, __VA_ARGS__); std::fprintf(stderr, "\n");)           \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)
