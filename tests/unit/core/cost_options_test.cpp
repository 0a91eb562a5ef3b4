// The shared pricing and GPU options (core/cost/cost_options.h): the GPU a projection assumes comes from the network
// or from --peak-tflops, --hbm-gbps and --gpu-mem, each number saying where it came from; a --peak-tflops of another
// generation than the network's is a warning; nvls (or sharp) under the alpha-beta model is a warning, and under the
// nccl model a refusal names only the options given.
#include "core/cost/cost_options.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/cost/compute_model.h"
#include "core/schedule/workload.h"

namespace lins {
namespace {

CommandSpec spec() {
  CommandSpec s;
  s.name = "test";
  s.usage = "lins test";
  s.options = concat_options(cost_options(), gpu_options("test"));
  s.options = concat_options(s.options, compute_options());
  return s;
}

ParsedArgs parse(const std::vector<std::string>& words) {
  auto a = parse_args(spec(), words);
  EXPECT_TRUE(a) << a.error();
  return *a;
}

// The network of --network read once, as the commands read it, then what is parsed from it.
Result<GpuAssumption> gpu_assumption(const ParsedArgs& a) {
  LINS_ASSIGN_OR_RETURN(const NetworkSpec net, parse_network(a));
  return parse_gpu_assumption(a, net);
}
Result<CostModel> cost_model(const ParsedArgs& a) {
  LINS_ASSIGN_OR_RETURN(const NetworkSpec net, parse_network(a));
  return parse_cost_model(a, net);
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST(GpuAssumption, TheNetworksGpuUnlessAnOptionGivesANumber) {
  auto a800 = gpu_assumption(parse({}));  // the default network, paper-a800
  ASSERT_TRUE(a800) << a800.error();
  EXPECT_DOUBLE_EQ(a800->peak_tflops, 312.0);
  EXPECT_DOUBLE_EQ(a800->hbm_gbps, 2039.0);
  EXPECT_DOUBLE_EQ(a800->mem_bytes, 80.0 * (1ull << 30));
  EXPECT_EQ(a800->peak_from, "network paper-a800's gpu preset a800-sxm");
  EXPECT_TRUE(a800->warnings.empty()) << joined(a800->warnings);

  auto h100 = gpu_assumption(parse({"--network", "h100-ndr", "--hbm-gbps", "3000", "--gpu-mem", "64GiB"}));
  ASSERT_TRUE(h100) << h100.error();
  EXPECT_DOUBLE_EQ(h100->peak_tflops, 989.4);
  EXPECT_EQ(h100->peak_from, "network h100-ndr's gpu preset h100-sxm");
  EXPECT_DOUBLE_EQ(h100->hbm_gbps, 3000.0);
  EXPECT_EQ(h100->hbm_from, "--hbm-gbps");
  EXPECT_DOUBLE_EQ(h100->mem_bytes, 64.0 * (1ull << 30));
  EXPECT_EQ(h100->mem_from, "--gpu-mem");
  EXPECT_TRUE(h100->warnings.empty()) << joined(h100->warnings);

  // The compute model scales the peak it is given and runs the optimizer at the HBM rate.
  auto compute = parse_compute_model(parse({}), h100->peak_tflops, h100->hbm_gbps);
  ASSERT_TRUE(compute) << compute.error();
  EXPECT_DOUBLE_EQ(compute->sustained_flops_per_s, 0.6 * 989.4e12);
  EXPECT_DOUBLE_EQ(compute->optimizer_bytes_per_s, 3000e9);
}

TEST(GpuAssumption, APeakOfAnotherGenerationIsAWarning) {
  // 312 is an A800's or A100's (sm80); h100-ndr is sm90: taken as given, with a warning naming both.
  auto g = gpu_assumption(parse({"--network", "h100-ndr", "--peak-tflops", "312"}));
  ASSERT_TRUE(g) << g.error();
  EXPECT_DOUBLE_EQ(g->peak_tflops, 312.0);
  EXPECT_EQ(g->peak_from, "--peak-tflops");
  ASSERT_EQ(g->warnings.size(), 1u) << joined(g->warnings);
  EXPECT_NE(g->warnings[0].find("--peak-tflops 312 is the dense bf16 peak of a800-sxm and a100-sxm (sm80), but network "
                                "h100-ndr has gpu_arch = \"sm90\" and its GPU h100-sxm a peak of 989.4 TFLOP/s"),
            std::string::npos)
      << g->warnings[0];
  // The same generation (an H200's peak on an H100 network), a peak of no listed GPU, or no GPU at all: no warning.
  for (const std::vector<std::string>& words :
       {std::vector<std::string>{"--network", "h100-ndr", "--peak-tflops", "989"},
        std::vector<std::string>{"--network", "h100-ndr", "--peak-tflops", "700"},
        std::vector<std::string>{"--network", "cpu-local", "--peak-tflops", "989.4"},
        std::vector<std::string>{"--peak-tflops", "312"}}) {
    auto ok = gpu_assumption(parse(words));
    ASSERT_TRUE(ok) << ok.error();
    EXPECT_TRUE(ok->warnings.empty()) << words[1] << " " << words.back() << ": " << joined(ok->warnings);
  }
}

TEST(GpuAssumption, ANetworkWithoutAGpuAssumesThePapersAndSaysSo) {
  auto cpu = gpu_assumption(parse({"--network", "cpu-local"}));
  ASSERT_TRUE(cpu) << cpu.error();
  EXPECT_DOUBLE_EQ(cpu->peak_tflops, 312.0);
  EXPECT_EQ(cpu->peak_from, "gpu preset a800-sxm (network cpu-local names no GPU)");
  EXPECT_TRUE(cpu->warnings.empty()) << "a network without GPUs has nothing to name";
  // A GPU network file that names no GPU (as files did before they carried one) gets a warning.
  const auto dir = std::filesystem::temp_directory_path() / "lins_cost_options_test";
  std::filesystem::create_directories(dir);
  const auto path = (dir / "old-a100.toml").string();
  std::ofstream(path) << "name = \"old-a100\"\ngpu_arch = \"sm80\"\nnvlink_links = 12\nnvlink_gbps = 25\n"
                         "nvswitch = true\npcie_gen = 4\nnics_per_node = 1\nnic_gbit_per_s = 100\n"
                         "intra_latency_us = 2\ninter_latency_us = 6\n";
  auto old = gpu_assumption(parse({"--network", path}));
  ASSERT_TRUE(old) << old.error();
  ASSERT_EQ(old->warnings.size(), 1u);
  EXPECT_NE(old->warnings[0].find("has GPUs but names none (gpu = \"...\", or peak_tflops, hbm_gbps and gpu_mem_gib)"),
            std::string::npos)
      << old->warnings[0];
  // Unless every number is given.
  auto given =
      gpu_assumption(parse({"--network", path, "--peak-tflops", "312", "--hbm-gbps", "2039", "--gpu-mem", "40GiB"}));
  ASSERT_TRUE(given) << given.error();
  EXPECT_TRUE(given->warnings.empty()) << joined(given->warnings);
  std::filesystem::remove_all(dir);
}

TEST(GpuAssumption, ABadNumberNamesItsOption) {
  for (const auto& [words, message] :
       {std::pair<std::vector<std::string>, std::string>{{"--peak-tflops", "0"}, "--peak-tflops must be positive"},
        {{"--hbm-gbps", "0"}, "--hbm-gbps must be positive"},
        {{"--hbm-gbps", "fast"}, "--hbm-gbps: 'fast'"},
        {{"--gpu-mem", "0B"}, "--gpu-mem must be positive"},
        {{"--gpu-mem", "80"}, "--gpu-mem: '80' has no unit"},
        {{"--network", "h100"}, "--network: unknown network 'h100'"}}) {
    auto g = gpu_assumption(parse(words));
    ASSERT_FALSE(g) << words[0];
    EXPECT_NE(g.error().find(message), std::string::npos) << g.error();
  }
}

// A network file with NVLS: the paper-a800 fixture's keys with nvls = true.
std::string nvls_network(const std::filesystem::path& dir) {
  const auto path = (dir / "nvls.toml").string();
  std::ofstream(path) << "name = \"nvls-h100\"\ngpu_arch = \"sm90\"\ngpu = \"h100-sxm\"\nnvlink_links = 18\n"
                         "nvlink_gbps = 25\nnvswitch = true\nnvls = true\npcie_gen = 5\nnics_per_node = 8\n"
                         "nic_gbit_per_s = 400\nintra_latency_us = 2\ninter_latency_us = 5\n";
  return path;
}

TEST(CostOptions, NvlsUnderAlphaBetaIsAWarningAndTheNcclRefusalNamesOnlyGivenOptions) {
  const auto dir = std::filesystem::temp_directory_path() / "lins_cost_options_nvls";
  std::filesystem::create_directories(dir);
  const std::string path = nvls_network(dir);
  auto ab = cost_model(parse({"--network", path, "--network-model", "alpha-beta"}));
  ASSERT_TRUE(ab) << ab.error();
  ASSERT_EQ(ab->warnings().size(), 1u);
  EXPECT_NE(ab->warnings()[0].find("network nvls-h100 (" + path +
                                   ") has nvls = true, which the alpha-beta model does not price"),
            std::string::npos)
      << ab->warnings()[0];
  // The nccl model refuses it; chosen by auto, the refusal does not pretend --network-model was given.
  auto chosen = cost_model(parse({"--network", path}));
  ASSERT_FALSE(chosen);
  EXPECT_EQ(chosen.error().find("--network-model nccl"), std::string::npos) << chosen.error();
  EXPECT_NE(chosen.error().find("the nccl model (chosen for a network with GPUs): network nvls-h100"),
            std::string::npos)
      << chosen.error();
  EXPECT_NE(chosen.error().find("has nvls = true"), std::string::npos) << chosen.error();
  auto given = cost_model(parse({"--network", path, "--network-model", "nccl"}));
  ASSERT_FALSE(given);
  EXPECT_EQ(given.error().rfind("--network-model nccl: network nvls-h100", 0), 0u) << given.error();
  // No warning where nothing is left out.
  auto plain = cost_model(parse({"--network", "h100-ndr", "--network-model", "alpha-beta"}));
  ASSERT_TRUE(plain) << plain.error();
  EXPECT_TRUE(plain->warnings().empty()) << joined(plain->warnings());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lins
