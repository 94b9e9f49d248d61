//===- ErrorTest.cpp - require() and its message --------------------------===//

#include "Error.h"

#include <gtest/gtest.h>

#include <ostream>

using namespace cleave::rt;

namespace {

/// Counts how often it is written to a stream.
struct Counted {
  int *writes;
};

std::ostream &operator<<(std::ostream &os, const Counted &c) {
  ++*c.writes;
  return os << "counted";
}

// The checks on every GEMM and collective call pass almost always; their
// messages must be formatted only when one fails.
TEST(RequireTest, FormatsTheMessageOnlyOnFailure) {
  int writes = 0;
  require(true, "size ", 4, " of ", Counted{&writes});
  EXPECT_EQ(writes, 0);
  try {
    require(false, "size ", 4, " of ", Counted{&writes});
    FAIL() << "require(false, ...) did not throw";
  } catch (const RuntimeError &e) {
    EXPECT_STREQ(e.what(), "size 4 of counted");
  }
  EXPECT_EQ(writes, 1);
}

} // namespace
