// Sizes: K, M, G, T and KiB..TiB are powers of 1024 (nccl-tests, "4M tokens"); KB..TB powers of 1000 (datasheets);
// a memory capacity needs its unit.
#include "core/util/units.h"

#include <gtest/gtest.h>

namespace lins {
namespace {

TEST(Units, BinaryAndDecimalSuffixes) {
  EXPECT_EQ(*parse_size("64M", "--x"), 64ull << 20);
  EXPECT_EQ(*parse_size("64MiB", "--x"), 64ull << 20);
  EXPECT_EQ(*parse_size("80GiB", "--x"), 80ull << 30);
  EXPECT_EQ(*parse_size("80g", "--x"), 80ull << 30);
  EXPECT_EQ(*parse_size("80GB", "--x"), 80'000'000'000ull);
  EXPECT_EQ(*parse_size("80gb", "--x"), 80'000'000'000ull);
  EXPECT_EQ(*parse_size("1KB", "--x"), 1000ull);
  EXPECT_EQ(*parse_size("2TB", "--x"), 2'000'000'000'000ull);
  EXPECT_EQ(*parse_size("7B", "--x"), 7ull);
  EXPECT_EQ(*parse_size("4096", "--x"), 4096ull);  // a count or a message size in bytes, as nccl-tests' -b 8
}

TEST(Units, MemoryCapacityNeedsAUnit) {
  auto bare = parse_memory_size("80", "--gpu-mem");
  ASSERT_FALSE(bare);
  EXPECT_NE(bare.error().find("--gpu-mem: '80' has no unit"), std::string::npos) << bare.error();
  EXPECT_NE(bare.error().find("80GiB"), std::string::npos) << bare.error();
  EXPECT_EQ(*parse_memory_size("80GiB", "--gpu-mem"), 80ull << 30);
  EXPECT_EQ(*parse_memory_size("80GB", "--gpu-mem"), 80'000'000'000ull);
  EXPECT_EQ(*parse_memory_size("0B", "--gpu-mem"), 0ull);
  EXPECT_FALSE(parse_memory_size("80XB", "--gpu-mem"));
}

}  // namespace
}  // namespace lins
