// The checks every name table must pass (core/names.h), shared by the core and comm unit tests: every value has a
// name, every name and alias parses back to its own value, no spelling belongs to two values, and the table's error
// for an unknown word names the option and lists every name.
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/util/names.h"

namespace lins {

template <class E, std::size_t N, class NameFn>
void expect_table_round_trips(const NameTable<E, N>& table, NameFn name_fn) {
  std::set<std::string> seen;
  for (std::size_t i = 0; i < N; ++i) {
    const E v = static_cast<E>(i);
    const std::string name = table.name(v);
    EXPECT_FALSE(name.empty() || name == "?") << table.noun << " " << i << " has no name";
    EXPECT_EQ(std::string(name_fn(v)), name) << "the name function and the table disagree on " << name;
    for (auto spelling : table.spellings(v)) {
      auto back = table.find(spelling);
      ASSERT_TRUE(back.has_value()) << table.noun << " '" << spelling << "' does not parse";
      EXPECT_EQ(*back, v) << table.noun << " '" << spelling << "' parses to another value";
      EXPECT_TRUE(seen.insert(std::string(spelling)).second) << "'" << spelling << "' names two " << table.noun << "s";
    }
    auto parsed = table.parse(name, "--opt");
    ASSERT_TRUE(parsed) << parsed.error();
    EXPECT_EQ(*parsed, v);
  }
  EXPECT_EQ(table.values().size(), N);
  auto bad = table.parse("no-such-word", "--opt");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().rfind("--opt: unknown " + std::string(table.noun) + " 'no-such-word'; valid: ", 0), 0u)
      << bad.error();
  for (std::size_t i = 0; i < N; ++i)
    EXPECT_NE(bad.error().find(table.name(static_cast<E>(i))), std::string::npos) << bad.error();
}

}  // namespace lins
