// The memory budget of a host (MemAvailable, cgroup v1 and v2 limits read from a fake root) and the verdict and
// message of the check lins step and lins comm make before allocating.
#include "core/util/resource_check.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/util/host_memory.h"

namespace lins {
namespace {

namespace fs = std::filesystem;

class FakeRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("lins_host_memory_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  fs::path root_;
};

constexpr double kGiB = 1024.0 * 1024 * 1024;

TEST_F(FakeRoot, MemAvailableWithoutCgroupLimit) {
  write("proc/meminfo", "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2097152 kB\n");
  write("proc/self/cgroup", "0::/\n");
  write("sys/fs/cgroup/memory.max", "max\n");
  auto m = read_host_memory(root_.string());
  ASSERT_TRUE(m) << m.error();
  EXPECT_DOUBLE_EQ(m->available_bytes, 2 * kGiB);
  EXPECT_LT(m->cgroup_available_bytes, 0);
  EXPECT_NE(m->describe().find("no cgroup memory limit"), std::string::npos) << m->describe();
}

TEST_F(FakeRoot, CgroupV2LimitOfAnAncestorBindsAndPageCacheIsNotHeld) {
  write("proc/meminfo", "MemAvailable:   20971520 kB\n");  // 20 GiB
  write("proc/self/cgroup", "0::/job/step\n");
  write("sys/fs/cgroup/job/memory.max", std::to_string(int64_t(4 * kGiB)) + "\n");
  write("sys/fs/cgroup/job/memory.current", std::to_string(int64_t(3 * kGiB)) + "\n");
  write("sys/fs/cgroup/job/memory.stat", "anon 1\ninactive_file " + std::to_string(int64_t(kGiB)) + "\n");
  write("sys/fs/cgroup/job/step/memory.max", "max\n");
  auto m = read_host_memory(root_.string());
  ASSERT_TRUE(m) << m.error();
  EXPECT_DOUBLE_EQ(m->cgroup_limit_bytes, 4 * kGiB);
  EXPECT_DOUBLE_EQ(m->available_bytes, 2 * kGiB);  // 4 GiB limit less 3 GiB used, 1 GiB of it droppable cache
  EXPECT_NE(m->describe().find("job"), std::string::npos) << m->describe();
}

TEST_F(FakeRoot, CgroupV1PathOutsideTheNamespaceFallsBackToTheMountRoot) {
  write("proc/meminfo", "MemAvailable:   20971520 kB\n");
  write("proc/self/cgroup", "4:memory:/not/visible/here\n0::/\n");
  write("sys/fs/cgroup/memory/memory.limit_in_bytes", std::to_string(int64_t(kGiB)) + "\n");
  write("sys/fs/cgroup/memory/memory.usage_in_bytes", "0\n");
  auto m = read_host_memory(root_.string());
  ASSERT_TRUE(m) << m.error();
  EXPECT_DOUBLE_EQ(m->available_bytes, kGiB);
}

TEST_F(FakeRoot, NothingReadableIsAnError) {
  auto m = read_host_memory(root_.string());
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().find("MemAvailable"), std::string::npos) << m.error();
}

TEST(ResourceCheck, FitsOrSaysNeedAvailableAlternativesAndOverride) {
  NodeBudget b{"host a", 10 * kGiB, "10.00 GiB (given)"};
  NodeDemand fits{"strategy zero3", 4, 8 * kGiB, 2 * kGiB, "states 1 GiB"};
  NodeDemand too_big{"strategy ddp", 4, 40 * kGiB, 10 * kGiB, "states 9 GiB"};
  EXPECT_TRUE(check_node_memory(b, {fits}, {}, "give --force"));
  const Status s = check_node_memory(b, {fits, too_big}, {"--strategies zero3"}, "give --force");
  ASSERT_FALSE(s);
  const std::string& e = s.error();
  EXPECT_NE(e.find("strategy ddp needs 40.00 GiB"), std::string::npos) << e;
  EXPECT_EQ(e.find("strategy zero3 needs"), std::string::npos) << e;
  EXPECT_NE(e.find("4 ranks, the largest 10.00 GiB: states 9 GiB"), std::string::npos) << e;
  EXPECT_NE(e.find("host a has 10.00 GiB (given)"), std::string::npos) << e;
  EXPECT_NE(e.find("Would fit: --strategies zero3."), std::string::npos) << e;
  EXPECT_NE(e.find("give --force"), std::string::npos) << e;
}

TEST(ResourceCheck, CommBuffersOnHostAndDevice) {
  const auto host = comm_buffer_bytes(uint64_t(1) << 40, false);
  EXPECT_DOUBLE_EQ(host.host_bytes, 3.0 * double(uint64_t(1) << 40));
  EXPECT_DOUBLE_EQ(host.device_bytes, 0);
  const auto dev = comm_buffer_bytes(uint64_t(1) << 63, true);  // no overflow at the largest size
  EXPECT_DOUBLE_EQ(dev.device_bytes, 2.0 * double(uint64_t(1) << 63));
  EXPECT_DOUBLE_EQ(dev.host_bytes, double(uint64_t(1) << 63));
  EXPECT_DOUBLE_EQ(comm_buffer_bytes(0, false).host_bytes, 3.0);  // a buffer is at least one byte
}

}  // namespace
}  // namespace lins
