// A cluster's network as a user describes it: its GPU (a preset or the datasheet numbers), GPUs and NVLink inside a
// node, NICs and their rate across nodes, and an optional slowdown as the job spans more nodes. Read from a small TOML
// file of top-level keys (format in docs/cost-model.md); the shipped presets are the files of data/networks/, compiled
// into the binary. Both cost models start from it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/cost/contention.h"
#include "core/util/names.h"
#include "core/util/result.h"

namespace lins {

// The PCIe path between a GPU and its nearest NIC, as `nvidia-smi topo -m` names it (NCCL's PATH_* types).
enum class NicPath { pix, pxb, phb, sys };
inline constexpr NameTable<NicPath, 4> kNicPathNames{
    "nic path",
    {{
        {NicPath::pix, "pix", "", "NIC and GPU behind one PCIe switch"},
        {NicPath::pxb, "pxb", "", "several PCIe switches between them"},
        {NicPath::phb, "phb", "", "through the CPU's PCIe host bridge"},
        {NicPath::sys, "sys", "", "across the CPU sockets' interconnect"},
    }}};
static_assert(kNicPathNames.complete(NicPath::sys));
const char* nic_path_name(NicPath p);

// The GPU of a cluster, as projections need it: a preset's datasheet numbers (gpu = "h100-sxm"; gpu_peaks.h), each
// replaced by the file's own key where it gives one, or the three numbers alone.
struct NetworkGpu {
  std::string preset;          // the preset named, or empty when the file gives the numbers alone
  double peak_tflops = 0;      // dense bf16 per GPU (MFU's peak; --compute-efficiency scales it)
  double hbm_gbps = 0;         // HBM bandwidth, GB/s (the optimizer update's memory rate)
  double mem_gib = 0;          // HBM capacity, GiB (2^30 bytes; the datasheets' "80GB", gpu_peaks.cpp)
  int compute_capability = 0;  // the preset's generation; 0 when the numbers are given alone
  // Where each number comes from: "gpu preset h100-sxm" or the file's key ("peak_tflops").
  std::string peak_from, hbm_from, mem_from;

  bool described() const { return peak_tflops > 0; }
};

struct NetworkSpec {
  std::string name;
  std::string description;
  std::string source;  // "preset" or the file it was read from

  int gpus_per_node = 0;  // 0: any (the network does not fix it)
  // GPU generation as NCCL sees it: 70 (Volta), 80 (Ampere), 90 (Hopper); 0 = no GPU (the CPU backend's MPI).
  int compute_capability = 0;
  int nvlink_links = 0;       // NVLink links per GPU (0: GPUs talk over PCIe)
  double nvlink_gbps = 0;     // one link, one direction, GB/s (datasheet)
  bool nvswitch = false;      // links go to NVSwitches (every GPU reaches every other at full rate)
  int pcie_gen = 0;           // PCIe generation of the x16 links of GPUs and NICs
  int nics_per_node = 0;      // network ports per node
  double nic_gbit_per_s = 0;  // one port's rate, Gb/s, as NIC datasheets state it
  NicPath nic_path = NicPath::pxb;
  bool amd_cpu = false;  // NCCL's tuning tables differ for AMD hosts
  bool sharp = false;    // in-network reduction (NCCL's CollNet); neither model prices it
  bool nvls = false;     // NVSwitch multicast (NCCL's NVLS); neither model prices it

  // Alpha-beta terms (the hierarchical ring of cost_model.h). Bandwidths default from the hardware above.
  double intra_gpu_gbps = 0;   // one GPU to the rest of its node; default nvlink_links x nvlink_gbps
  double inter_node_gbps = 0;  // a node's total network rate; default nics_per_node x nic_gbit_per_s / 8
  double inter_gpu_gbps = 0;   // the most one GPU drives across nodes; default one NIC's rate
  double intra_latency_s = 0;  // per ring step inside a node
  double inter_latency_s = 0;  // per ring step across nodes

  // Scale: per doubling of the nodes a group spans, inter-node bandwidth is multiplied by bw_factor (<= 1) and
  // latency by latency_factor (>= 1); 1 and 1 describe a non-blocking fabric.
  double bw_factor_per_node_doubling = 1.0;
  double latency_factor_per_node_doubling = 1.0;

  // What overlap costs on this cluster (its [contention] table; none: overlap is free).
  Contention contention;

  // The GPU (not described: a network without GPUs, or a file written before networks carried their GPU).
  NetworkGpu gpu;
  // What the file says that holds together but looks wrong (gpu_arch against the gpu preset's generation); the
  // commands print each as a warning line.
  std::vector<std::string> warnings;

  bool has_gpu() const { return compute_capability > 0; }
  // NCCL's per-direction rate of a PCIe x16 link, GB/s (src/graph/topo.cc: width x per-lane rate / 80).
  double pcie_gbps() const;
  double nic_gbps() const { return nic_gbit_per_s / 8.0; }
  // The factors above for a group spanning `nodes` nodes (1 for a group inside one node).
  double bw_scale(int nodes) const;
  double latency_scale(int nodes) const;
  std::string summary() const;  // one line: GPUs, NVLink, NICs, SHARP
};

// Parses the text of a network file; `where` names it in errors ("file:line: field: problem; valid: ..."). Text in the
// former `key = value` format (bare words, yes/no) is refused with how to convert it.
Result<NetworkSpec> parse_network_spec(std::string_view text, const std::string& where);
// Reads a file; a path ending in .network (the former format's name) is refused with how to convert it.
Result<NetworkSpec> load_network_spec(const std::string& path);
// A contention file: a TOML file holding one [contention] table, as `lins comm --contention FILE` writes it (or a
// network file, whose [contention] table is taken).
Result<Contention> load_contention(const std::string& path);
// The shipped presets (data/networks/*.toml), in name order.
std::vector<NetworkSpec> network_spec_presets();
std::vector<std::string> network_preset_names();
// A preset name, or the path of a network file (anything with a '/' or a '.', or an existing file).
Result<NetworkSpec> resolve_network_spec(std::string_view name_or_path);

}  // namespace lins
