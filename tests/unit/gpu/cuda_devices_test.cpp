// gpu/cuda_devices.h: which cudaGetDeviceCount errors mean "no GPU here" (a GPU test is skipped) and which a broken
// GPU machine (it must fail). Runs without a device: the device nodes come from a folder the test makes, and the
// exit path is checked against this machine's own cudaGetDeviceCount error where it has one.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gpu/cuda_devices.h"

namespace lins {
namespace {

namespace fs = std::filesystem;

// A fresh folder standing in for /dev, holding the named (empty) files. Removed when it goes out of scope, and at
// the latest when the process ends through std::exit: a death test's child (which re-runs the test and exits inside
// it) would otherwise leave its folder behind.
class FakeDev {
 public:
  explicit FakeDev(std::initializer_list<const char*> names) {
    dir_ = fs::temp_directory_path() / ("lins_fake_dev_" + std::to_string(getpid()) + "_" + std::to_string(next_++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const char* n : names) std::ofstream(dir_ / n).put('\n');
    static const struct AtExit {
      ~AtExit() {
        std::error_code ignored;
        for (const auto& e : fs::directory_iterator(fs::temp_directory_path(), ignored))
          if (e.path().filename().string().rfind("lins_fake_dev_" + std::to_string(getpid()) + "_", 0) == 0)
            fs::remove_all(e.path(), ignored);
      }
    } at_exit;
  }
  ~FakeDev() { fs::remove_all(dir_); }
  const char* path() const { return dir_.c_str(); }

 private:
  static inline int next_ = 0;
  fs::path dir_;
};

TEST(CudaDevices, DeviceNodesAreNvidiaEntriesOrDxg) {
  EXPECT_FALSE(nvidia_device_node_present(FakeDev({}).path()));
  EXPECT_FALSE(nvidia_device_node_present(FakeDev({"nvme0", "null", "dri"}).path()));
  EXPECT_TRUE(nvidia_device_node_present(FakeDev({"null", "nvidia0"}).path()));
  EXPECT_TRUE(nvidia_device_node_present(FakeDev({"nvidiactl"}).path()));
  EXPECT_TRUE(nvidia_device_node_present(FakeDev({"nvidia-uvm"}).path()));
  EXPECT_TRUE(nvidia_device_node_present(FakeDev({"dxg"}).path()));
  EXPECT_FALSE(nvidia_device_node_present("/nonexistent/lins/dev"));
}

TEST(CudaDevices, OnlyNoDeviceOrNoDriverWithoutDeviceNodeMeansNoGpu) {
  for (bool node : {false, true}) EXPECT_TRUE(cuda_error_means_no_gpu(cudaErrorNoDevice, node)) << node;
  EXPECT_TRUE(cuda_error_means_no_gpu(cudaErrorInsufficientDriver, false));
  EXPECT_TRUE(cuda_error_means_no_gpu(cudaErrorStubLibrary, false));
  // A device node without a working driver library: an old driver, or a container missing libcuda.
  EXPECT_FALSE(cuda_error_means_no_gpu(cudaErrorInsufficientDriver, true));
  EXPECT_FALSE(cuda_error_means_no_gpu(cudaErrorStubLibrary, true));
  for (cudaError_t e : {cudaErrorInitializationError, cudaErrorSystemDriverMismatch, cudaErrorDevicesUnavailable,
                        cudaErrorUnknown, cudaErrorOperatingSystem, cudaErrorCompatNotSupportedOnDevice})
    for (bool node : {false, true}) EXPECT_FALSE(cuda_error_means_no_gpu(e, node)) << cudaGetErrorName(e) << node;
}

TEST(CudaDevices, FailedProbeMessageNamesTheErrorAndWhatToCheck) {
  CudaDeviceProbe p;
  p.error = cudaErrorInsufficientDriver;
  p.device_node_present = true;
  p.no_gpu = false;
  ASSERT_TRUE(p.failed());
  const std::string m = p.message();
  EXPECT_NE(m.find("cudaErrorInsufficientDriver (35)"), std::string::npos) << m;
  EXPECT_NE(m.find(cudaGetErrorString(cudaErrorInsufficientDriver)), std::string::npos) << m;
  EXPECT_NE(m.find("device node exists"), std::string::npos) << m;
  EXPECT_NE(m.find("nvidia-smi"), std::string::npos) << m;
  p.no_gpu = true;
  EXPECT_FALSE(p.failed());
  EXPECT_EQ(p.message(), "");
  p.error = cudaSuccess;
  p.no_gpu = false;
  EXPECT_FALSE(p.failed());
}

// This machine's own answer. Where it has no driver (cudaGetDeviceCount fails with cudaErrorInsufficientDriver or
// cudaErrorStubLibrary), the same error reads as "no GPU" without device nodes and as a failure (exit 1, the error
// named) with one. Where the driver works there is nothing to fail, and the count must be the runtime's.
TEST(CudaDevices, NoDriverSkipsWithoutDeviceNodeAndFailsWithOne) {
  const CudaDeviceProbe here = probe_cuda_devices(FakeDev({}).path());
  if (here.error == cudaSuccess) {
    int n = -1;
    ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
    EXPECT_EQ(cuda_device_count_or_exit(), n);
    GTEST_SKIP() << "this machine's CUDA driver works (" << n << " devices): the no-driver paths cannot be reached";
  }
  if (here.error != cudaErrorInsufficientDriver && here.error != cudaErrorStubLibrary)
    GTEST_SKIP() << "cudaGetDeviceCount fails here with " << cudaGetErrorName(here.error) << ", not a no-driver error";
  EXPECT_TRUE(here.no_gpu);
  EXPECT_EQ(here.count, 0);
  {
    FakeDev empty({"null"});
    EXPECT_EQ(cuda_device_count_or_exit(empty.path()), 0);
  }
  FakeDev with_node({"nvidia0", "nvidiactl"});
  const CudaDeviceProbe broken = probe_cuda_devices(with_node.path());
  EXPECT_TRUE(broken.failed());
  EXPECT_EQ(broken.count, 0);
  const std::string name = cudaGetErrorName(here.error);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(cuda_device_count_or_exit(with_node.path()), testing::ExitedWithCode(1),
              "cudaGetDeviceCount failed: " + name);
}

}  // namespace
}  // namespace lins
