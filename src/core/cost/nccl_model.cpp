// NCCL 2.21.5's algorithm/protocol model; see nccl_model.h. Every constant below is copied from NVIDIA/nccl at tag
// v2.21.5-1 and names the file and symbol it comes from; the arithmetic follows the code it cites line for line,
// in double instead of NCCL's float.
#include "core/cost/nccl_model.h"

#include <algorithm>
#include <cmath>

namespace lins {
namespace {

constexpr int kTree = 0, kRing = 1;                   // NCCL_ALGO_TREE, NCCL_ALGO_RING
constexpr int kLL = 0, kLL128 = 1, kSimple = 2;       // NCCL_PROTO_LL, NCCL_PROTO_LL128, NCCL_PROTO_SIMPLE
constexpr int kHwNvlink = 0, kHwPci = 1, kHwNet = 2;  // NCCL_HW_NVLINK, NCCL_HW_PCI, NCCL_HW_NET
constexpr int kMaxChannels = 32;                      // src/include/device.h MAXCHANNELS

// src/graph/tuning.cc baseLat: latencies in microseconds, [algo][proto].
constexpr double kBaseLat[2][3] = {{6.8, 14.0, 0}, {6.6, 14.0, 8.4}};
// src/graph/tuning.cc hwLat: per-hop latencies in microseconds, [hw][algo][proto].
constexpr double kHwLat[3][2][3] = {{{.6, 1.25, 28}, {.6, 1.9, 3.4}},     // NVLink
                                    {{1.0, 1.9, 28}, {1.0, 2.5, 5.7}},    // PCI
                                    {{5.0, 8.5, 28}, {2.7, 4.0, 14.0}}};  // network
// src/graph/tuning.cc llMaxBws, perChMaxRingLL128Bws, perChMaxTreeLL128Bws, perChMaxTreeBws: GB/s,
// [Volta/Ampere/Hopper (or Intel/AMD CPU for llMaxBws across nodes)][one node / two nodes / more].
constexpr double kLLMaxBw[3][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}};
constexpr double kPerChMaxRingLL128Bw[3][3] = {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}};
constexpr double kPerChMaxTreeLL128Bw[3][3] = {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}};
constexpr double kPerChMaxTreeBw[3][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}};
// src/graph/tuning.cc treeCorrectionFactor: [proto][log2(bytes / 64)], 64 B to 256 MB.
constexpr double kTreeCorrection[3][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};

// src/graph/search.cc: the per-channel speeds the search tries, fastest first (GB/s).
constexpr double kSpeedIntra[] = {40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0};
constexpr double kSpeedInter[] = {48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0,
                                  7.0,  6.0,  5.0,  4.0,  3.0,  2.4,  1.2,  0.24, 0.12};
constexpr double kSm90SpeedIntra[] = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0};
constexpr double kSm90SpeedInter[] = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                      15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};

// src/graph/topo.h SM70_NVLINK_BW, SM80_NVLINK_BW, SM90_NVLINK_BW: what NCCL assumes one NVLink carries, GB/s.
double nvlink_bw_per_link(int cc) { return cc >= 90 ? 20.6 : 20.0; }

int log2i(long long n) {  // src/include/utils.h log2i: floor(log2(n)), 0 for n <= 1
  int l = 0;
  while (n >>= 1) ++l;
  return l;
}

int cc_index(int cc) { return cc >= 90 ? 2 : cc >= 80 ? 1 : 0; }  // HOPPER/AMPERE/VOLTA_COMPCAP_IDX

}  // namespace

const char* nccl_algo_name(NcclAlgo a) { return kNcclAlgoNames.name(a); }
const char* nccl_proto_name(NcclProto p) { return kNcclProtoNames.name(p); }

Result<NcclModel> NcclModel::make(const NetworkSpec& net) {
  const std::string where = "network " + net.name + " (" + net.source + ")";
  if (!net.has_gpu())
    return make_error(where +
                      " describes no GPU (gpu_arch = \"none\"); the nccl model prices NCCL on GPUs: use "
                      "--network-model alpha-beta, or describe GPUs (gpu_arch \"sm70\", \"sm80\" or \"sm90\")");
  if (net.sharp)
    return make_error(where +
                      " has sharp = true: in-network reduction (NCCL's CollNet algorithms) is out of scope "
                      "of the nccl model; set sharp = false to price Ring and Tree without it");
  if (net.nvls)
    return make_error(where +
                      " has nvls = true: NVSwitch multicast (NCCL's NVLS algorithms) is out of scope of the "
                      "nccl model; set nvls = false to price Ring and Tree without it");
  if (net.nvlink_links > 0 && !net.nvswitch)
    return make_error(where +
                      " has NVLink without NVSwitch: NCCL's search over a partial NVLink mesh is not "
                      "modelled; the nccl model takes NVSwitch nodes (nvswitch = true) or PCIe-only ones "
                      "(nvlink_links = 0)");
  if (net.nics_per_node < 1 || net.nic_gbit_per_s <= 0 || net.pcie_gen < 3)
    return make_error(where + " lacks nics_per_node, nic_gbit_per_s or pcie_gen, which the nccl model needs");
  return NcclModel(net);
}

NcclGraph NcclModel::graph(Mesh mesh, int concurrent) const {
  NcclGraph g;
  const int p0 = mesh.intra, p1 = mesh.inter, cc = net_.compute_capability;
  if (p0 * static_cast<long long>(p1) < 2) return g;
  g.nvlink = net_.nvlink_links > 0 && net_.nvswitch && p0 > 1;
  // One GPU's link capacity inside the node: src/graph/search.cc getTotalBw sums its NVLinks (topo.cc gives each
  // link SMxx_NVLINK_BW); through an NVSwitch every GPU reaches every other at that rate.
  const double nvlink_total = net_.nvlink_links * nvlink_bw_per_link(cc);
  const double intra_cap = net_.nvlink_links > 0 ? nvlink_total : net_.pcie_gbps();
  const int max_channels = kMaxChannels / 2;  // src/init.cc ringGraph.maxChannels = MAXCHANNELS/2

  const double* speeds;
  int nspeeds;
  double max_bw, total_bw;
  // channels(s): how many channels of speed s the search can route (each channel takes s on every link it uses).
  auto channels_at = [&](double s) -> int {
    const double eps = 1e-9;
    if (p1 == 1) return std::min(max_channels, static_cast<int>(std::floor(intra_cap / s + eps)));
    // Across nodes each channel enters the node through one NIC and leaves through it (no cross-NIC rings here):
    // src/graph/search.cc ncclTopoSearchTryGpu/ncclTopoSearchRecNet take s from the NIC's port and from the PCIe
    // links between it and the GPU. The groups of lins spread their p0 GPUs evenly over the node, so they sit
    // next to min(NICs, p0) different NICs. Groups running at once share every NIC's rate.
    const int nics = std::min(net_.nics_per_node, p0);
    const int per_nic = static_cast<int>(std::floor(max_bw / s + eps));
    int n = std::min(max_channels, nics * per_nic);
    // Inside the node a channel goes NIC -> first GPU -> ... -> last GPU -> NIC: every GPU but the last sends on its
    // NVLink. With channels starting at GPUs spread evenly, a GPU sends on (p0 - 1) / p0 of them.
    if (p0 > 1) n = std::min(n, static_cast<int>(std::floor(intra_cap * p0 / ((p0 - 1) * s) + eps)));
    return n;
  };
  if (p1 == 1) {
    speeds = cc >= 90 ? kSm90SpeedIntra : kSpeedIntra;
    nspeeds = cc >= 90 ? std::size(kSm90SpeedIntra) : std::size(kSpeedIntra);
    max_bw = total_bw = intra_cap;  // search.cc getMaxBw / getTotalBw for a GPU-only system
  } else {
    speeds = cc >= 90 ? kSm90SpeedInter : kSpeedInter;
    nspeeds = cc >= 90 ? std::size(kSm90SpeedInter) : std::size(kSpeedInter);
    // Groups of one shape running at once on a node: concurrent x min(NICs, p0) channel ends over the node's NICs.
    const double sharing =
        std::max(1.0, double(concurrent) * std::min(net_.nics_per_node, p0) / double(net_.nics_per_node));
    // getMaxBw: the narrowest link between a GPU and the network (its PCIe path, the NIC's port).
    max_bw = std::min(net_.pcie_gbps(), net_.nic_gbps() / sharing);
    total_bw = std::max(net_.pcie_gbps(), nvlink_total);
  }
  // ncclTopoCompute: start at the fastest speed no faster than the narrowest path (and, x minChannels = 1, than
  // the GPU's total bandwidth), keep the channels the search routes at that speed.
  int idx = 0;
  while ((speeds[idx] > max_bw || speeds[idx] > total_bw) && idx < nspeeds - 1) ++idx;
  double s = speeds[idx];
  int n = channels_at(s);
  if (n < 1) {  // search.cc falls back to one slow channel when nothing routes
    n = 1;
    s = std::min(s, max_bw);
  }
  // ncclTopoDupChannels: fast channels are doubled at half the speed each.
  if (s >= 25.0 && !(cc > 80 && s < 50.0 && n > 4)) {
    const int dup = std::min(n * 2, max_channels);
    s /= (dup + n - 1) / n;
    n = dup;
  }
  // Pass 2 of ncclTopoCompute: try faster speeds keeping at least these channels; keep the most channels x speed.
  {
    int j = 0;
    while (speeds[j] > s && j < nspeeds - 1) ++j;  // index of the current speed
    double best = n * s;
    for (int k = j - 1; k >= 0; --k) {
      const int nk = channels_at(speeds[k]);
      if (nk >= n && nk * speeds[k] > best) {
        best = nk * speeds[k];
        n = nk;
        s = speeds[k];
      }
    }
  }
  g.channels = n;
  g.bw_intra_gbps = g.bw_inter_gbps = s;
  // src/graph/connect.cc ncclTopoPostset: the communicator runs twice the ring graph's channels (more on Hopper
  // across nodes with fast rings).
  g.comm_channels = std::min(kMaxChannels, n * 2);
  if (cc == 90 && p1 > 1 && s > 45.0 && g.comm_channels < 16)
    g.comm_channels = std::min(kMaxChannels, g.comm_channels * 2);
  return g;
}

void NcclModel::pair_times_s(CollKind kind, double bytes, Mesh mesh, int concurrent, double out[2][3]) const {
  pairs(kind, bytes, mesh, concurrent, out, nullptr, nullptr);
}

void NcclModel::pairs(CollKind kind, double bytes, Mesh mesh, int concurrent, double out[2][3], double lat_s[2][3],
                      double algbw_gbps[2][3]) const {
  for (int a = 0; a < 2; ++a)
    for (int p = 0; p < 3; ++p) out[a][p] = -1;
  const int nRanks = mesh.intra * mesh.inter, nNodes = mesh.inter;
  if (nRanks < 2 || bytes <= 0) return;
  if (!collective(kind).nccl_tuned) return;  // point-to-point (all_to_all): not in tuning.cc
  const int cc = net_.compute_capability, ci = cc_index(cc);
  const NcclGraph g = graph(mesh, concurrent);

  // ncclTopoTuneModel.
  const int index2 = nNodes <= 2 ? nNodes - 1 : 2;
  const int index1 = nNodes == 1 ? ci : net_.amd_cpu ? 1 : 0;
  const double llMaxBw = kLLMaxBw[index1][index2];
  const double perChMaxTreeBw = kPerChMaxTreeBw[ci][index2];
  const double perChMaxRingLL128Bw = kPerChMaxRingLL128Bw[ci][index2];
  const double perChMaxTreeLL128Bw = kPerChMaxTreeLL128Bw[ci][index2];
  const double ppn = double(nRanks) / nNodes;
  // typeIntra == LINK_NVL picks the NVLink latencies; a single GPU per node has typeIntra PATH_LOC, hence PCI.
  const int intraHw = g.nvlink ? kHwNvlink : kHwPci;
  const int hw = nNodes == 1 ? intraHw : kHwNet;
  const bool ar = kind == CollKind::all_reduce, bc = kind == CollKind::broadcast;
  // In 64 bits: an all-reduce over 2^30 ranks or more has more ring steps than an int holds.
  const int64_t nsteps = ar ? 2 * (int64_t(nRanks) - 1) : bc ? int64_t(nRanks) : int64_t(nRanks) - 1;
  const int64_t nInterSteps = ar ? (nNodes > 1 ? 2 * int64_t(nNodes) : 0) : bc ? int64_t(nNodes) : int64_t(nNodes) - 1;
  // getNetOverhead: 1 us per network post on Intel (and other) CPUs, 2 on AMD.
  const double netOverheadBase = net_.amd_cpu ? 2.0 : 1.0;
  // LL128 is on by default only with NVLink (or one GPU) inside the node and the NIC on the GPU's PCIe switch
  // (PATH_PXB or closer; PATH_PXN too on Hopper), for Volta, Ampere and Hopper.
  const int typeInter = nNodes == 1 ? 3 /*PATH_PIX*/ : 3 + static_cast<int>(net_.nic_path);
  const bool intraOk = g.nvlink || mesh.intra == 1;
  const bool ll128 = (typeInter <= 4 || (cc >= 90 && typeInter <= 5)) && intraOk && (cc == 70 || cc == 80 || cc == 90);
  const double bwScale = net_.bw_scale(nNodes), latScale = net_.latency_scale(nNodes);

  const int logSize = log2i(static_cast<long long>(bytes) >> 6);
  for (int a = 0; a < 2; ++a) {
    if (a == kTree && !ar) continue;  // broadcast, all-gather and reduce-scatter run Ring (NVLS/CollNet aside)
    for (int p = 0; p < 3; ++p) {
      if (p == kLL128 && !ll128) continue;
      const double bw = nNodes <= 2 ? g.bw_intra_gbps : g.bw_inter_gbps;
      double busBw = g.channels * bw;
      if (a == kRing && p == kLL) busBw = std::min(llMaxBw, busBw * .5);
      if (a == kRing && p == kLL128) busBw = std::min(busBw * (ppn < 2 ? 0.7 : 0.92), g.channels * perChMaxRingLL128Bw);
      if (a == kTree) busBw = std::min(busBw * .92, g.channels * perChMaxTreeBw);
      if (a == kTree && p == kLL) busBw = std::min(busBw * 1.0 / 3.8, llMaxBw);
      if (a == kTree && p == kLL128)
        busBw = std::min(busBw * (nNodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), g.channels * perChMaxTreeLL128Bw);
      // (graphs[TREE]->pattern == NCCL_TOPO_PATTERN_TREE would cost another x0.85; the balanced tree NCCL finds
      // on these nodes does not.) Bus bandwidth to algorithm bandwidth:
      double algBw = busBw * (a == kRing ? double(nRanks) / nsteps : 0.5);

      double lat = kBaseLat[a][p];
      double intraLat = kHwLat[intraHw][a][p];
      const double interLat = kHwLat[kHwNet][a][p];  // + graph latencyInter, 0 for InfiniBand and RoCE NICs
      if (a == kRing) {
        if (bc) {
          // sameChannels: one hop's latency (the search keeps the same GPU order on every channel here).
          lat += kHwLat[hw][a][p];
        } else {
          double netOverhead = 0;
          if (nNodes > 1) netOverhead = netOverheadBase * (p == kSimple ? 3 : 1);
          intraLat = std::max(intraLat, netOverhead);
          lat += (nsteps - nInterSteps) * intraLat + nInterSteps * interLat;
        }
      } else {
        lat += 2 * ((nRanks / nNodes - 1) * intraLat + log2i(nNodes) * interLat);
      }

      // ncclTopoGetAlgoTime.
      algBw *= bwScale;
      lat *= latScale;
      if (a == kTree && logSize < 23) algBw *= kTreeCorrection[p][logSize];
      if (a == kRing && p == kSimple && nNodes > 1 && ar && bytes / (double(g.comm_channels) * nRanks) >= 64)
        lat *= cc < 80 ? 1.9 : 1.4;  // "plateau effect of ring"
      if (algBw <= 0) continue;
      out[a][p] = (lat + bytes / (1000.0 * algBw)) * 1e-6;
      if (lat_s) lat_s[a][p] = lat * 1e-6;
      if (algbw_gbps) algbw_gbps[a][p] = algBw;
    }
  }
}

NcclChoice NcclModel::choose(CollKind kind, double bytes, Mesh mesh, int concurrent) const {
  double t[2][3], lat[2][3], bw[2][3];
  pairs(kind, bytes, mesh, concurrent, t, lat, bw);
  NcclChoice c;
  c.time_s = -1;
  // topoGetAlgoInfo: the smallest time wins; ties keep the first pair in (Tree, Ring) x (LL, LL128, Simple) order.
  for (int a = 0; a < 2; ++a)
    for (int p = 0; p < 3; ++p)
      if (t[a][p] >= 0 && (c.time_s < 0 || t[a][p] < c.time_s)) {
        c.time_s = t[a][p];
        c.algo = static_cast<NcclAlgo>(a);
        c.proto = static_cast<NcclProto>(p);
      }
  if (c.time_s < 0) {
    c.time_s = 0;
    return c;
  }
  c.latency_s = lat[int(c.algo)][int(c.proto)];
  c.algbw_gbps = bw[int(c.algo)][int(c.proto)];
  return c;
}

}  // namespace lins
