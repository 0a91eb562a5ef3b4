// The options that choose how communication is priced (--network, --network-model, --profile, --nccl-tests,
// --pricing), the GPU a projection assumes (the network's, or --peak-tflops, --hbm-gbps, --gpu-mem) and how much
// memory a GPU run loses beyond its tensors (--reserve-*), shared by `lins plan`, `lins step` and `lins simulate` so
// they read the same flags the same way.
#pragma once

#include <string>
#include <vector>

#include "core/cost/cost_model.h"
#include "core/util/cli.h"
#include "core/util/result.h"

namespace lins {

// What a GPU run needs beyond the tensors the memory model counts. Defaults (docs/cost-model.md, "The reserve"):
// - CUDA context: 666,632,192 bytes, the context PyTorch measured with eager module loading (pytorch/pytorch pull
//   request 86509; 287,047,680 bytes with lazy loading, the default from CUDA 12.2 on). The larger is kept.
// - cuBLAS workspace: 32 MiB, the cuBLAS API reference's recommended workspace for Hopper (4 MiB for other GPUs;
//   cublasSetWorkspace), for the one handle of the compute stream.
// - NCCL: per communicator, 16 channels x 3 connections (ring 1, tree 2) x the receive buffers of each protocol,
//   LL 512 KiB + LL128 4.6875 MiB + Simple 4 MiB = 441 MiB. Buffer sizes from NCCL v2.21.5-1 src/init.cc
//   (DEFAULT_LL_BUFFSIZE, DEFAULT_LL128_BUFFSIZE, DEFAULT_BUFFSIZE); 16 channels is what that version gives a
//   communicator over 8 NVSwitch-connected A800/A100 GPUs (src/graph/connect.cc doubles the ring graph's 8).
// - Fragmentation: 5% of the counted tensors, an assumption (allocator caches leave free blocks that do not fit the
//   next request; the ZeRO paper reports running out of memory with over 30% free in extreme cases).
// No GPU measurement of lins's executor exists yet; when one does, these defaults will be set from it.
struct MemoryReserve {
  double cuda_context_bytes = 666632192.0;
  double cublas_workspace_bytes = 32.0 * (1 << 20);
  double nccl_bytes_per_communicator = 16.0 * 3 * (512.0 * 1024 + 4915200.0 + 4.0 * (1 << 20));
  double fragmentation_fraction = 0.05;
};

// --network FILE|PRESET, --network-model auto|nccl|alpha-beta, --profile FILE, --nccl-tests LIST,
// --pricing paper|shared (|both when `allow_both`: rank by paper, show both).
std::vector<OptionSpec> cost_options(const std::string& default_network = "paper-a800",
                                     const std::string& default_pricing = "paper", bool allow_both = false);
// The network of --network (a preset or a file), read once: the cost model and the GPU assumption both take it.
Result<NetworkSpec> parse_network(const ParsedArgs& args);
// The cost model of those options: `net` priced by the chosen model, measured bandwidth (--profile and --nccl-tests
// files, merged) first where it covers an (op, mesh). With `gpus_per_node` > 0 the network must have room for that
// many GPUs per node.
Result<CostModel> parse_cost_model(const ParsedArgs& args, const NetworkSpec& net, int gpus_per_node = 0);

// The GPU a projection assumes: the network's (its gpu preset or its numbers; docs/cost-model.md, "The GPU"), each
// number replaced by its option when given. A network that describes no GPU (cpu-local, or a file written before
// networks carried one) is projected on kFallbackGpu, the paper's A800, and the sources say so.
struct GpuAssumption {
  double peak_tflops = 0;      // dense bf16 per GPU: MFU's peak, scaled by --compute-efficiency
  double hbm_gbps = 0;         // the optimizer update's memory rate, GB/s
  double mem_bytes = 0;        // memory per GPU
  int compute_capability = 0;  // the GPU's generation (80, 90, 100; 0 unknown): which kernel efficiencies apply
  // Where each number comes from: "--peak-tflops", "network h100-ndr's gpu preset h100-sxm", ...
  std::string peak_from, hbm_from, mem_from;
  // Numbers that disagree with the network: a --peak-tflops of another GPU generation than the network's gpu_arch,
  // a GPU network that names no GPU. The commands print each as a warning line.
  std::vector<std::string> warnings;
};
inline constexpr const char* kFallbackGpu = "a800-sxm";

// --peak-tflops and --gpu-mem as `lins plan` and `lins simulate` take them (no default value: the network's GPU);
// `gpu_mem_help` says what the command does with the memory. --hbm-gbps is among compute_options(), with this help.
std::vector<OptionSpec> gpu_options(const std::string& gpu_mem_help);
std::string hbm_gbps_help();
// The GPU of `net` (--network's) with --peak-tflops, --hbm-gbps and --gpu-mem (those the command has) over it. Errors
// name the option and what is valid.
Result<GpuAssumption> parse_gpu_assumption(const ParsedArgs& args, const NetworkSpec& net);

// --reserve-context, --reserve-cublas, --reserve-nccl (per communicator), --reserve-fragmentation.
std::vector<OptionSpec> memory_reserve_options();
Result<MemoryReserve> parse_memory_reserve(const ParsedArgs& args);

}  // namespace lins
