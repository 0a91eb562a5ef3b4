// NCCL's own performance model, as NCCL 2.21.5 uses it to choose an algorithm and a protocol for each collective:
// the time of every (algorithm, protocol) pair from base and per-hop latencies and from channels x per-channel
// bandwidth with its per-protocol caps, and the fastest pair wins. Followed from NVIDIA/nccl tag v2.21.5-1,
// src/graph/tuning.cc (ncclTopoTuneModel, ncclTopoGetAlgoTime), src/enqueue.cc (topoGetAlgoInfo) and, for the
// channel count and per-channel bandwidth the topology search would find, src/graph/search.cc (ncclTopoCompute,
// ncclTopoDupChannels). docs/cost-model.md writes the formulas out.
#pragma once

#include <utility>

#include "core/cost/network_spec.h"
#include "core/model/groups.h"
#include "core/schedule/schedule.h"
#include "core/util/result.h"

namespace lins {

inline constexpr const char* kNcclModelVersion = "2.21.5";

enum class NcclAlgo { tree, ring };
inline constexpr NameTable<NcclAlgo, 2> kNcclAlgoNames{"NCCL algorithm",
                                                       {{
                                                           {NcclAlgo::tree, "Tree", "tree"},
                                                           {NcclAlgo::ring, "Ring", "ring"},
                                                       }}};
static_assert(kNcclAlgoNames.complete(NcclAlgo::ring));
enum class NcclProto { ll, ll128, simple };
inline constexpr NameTable<NcclProto, 3> kNcclProtoNames{"NCCL protocol",
                                                         {{
                                                             {NcclProto::ll, "LL", "ll"},
                                                             {NcclProto::ll128, "LL128", "ll128"},
                                                             {NcclProto::simple, "Simple", "simple"},
                                                         }}};
static_assert(kNcclProtoNames.complete(NcclProto::simple));
const char* nccl_algo_name(NcclAlgo a);
const char* nccl_proto_name(NcclProto p);

// What NCCL's topology search finds for one communicator (src/graph/search.cc): channels and the bandwidth of one
// channel, GB/s. Ring and tree share it here (NCCL searches the tree with the ring's channel count).
struct NcclGraph {
  int channels = 0;
  double bw_intra_gbps = 0;
  double bw_inter_gbps = 0;
  bool nvlink = false;    // the channels run over NVLink inside the node (else PCIe)
  int comm_channels = 0;  // channels of the communicator after src/graph/connect.cc duplicates them
};

struct NcclChoice {
  NcclAlgo algo = NcclAlgo::ring;
  NcclProto proto = NcclProto::simple;
  double time_s = 0;
  double latency_s = 0;   // the pair's latency term
  double algbw_gbps = 0;  // the pair's algorithm bandwidth: message bytes / (time - latency)
};

class NcclModel {
 public:
  // The network must describe GPUs with NVSwitch (or PCIe only) and neither SHARP nor NVLS, which are out of scope.
  static Result<NcclModel> make(const NetworkSpec& net);

  // The communicator of `mesh` (GPUs per node x nodes), `concurrent` groups of the same shape sharing each node's
  // NICs (1 = alone).
  NcclGraph graph(Mesh mesh, int concurrent = 1) const;
  // The pair NCCL picks for `kind` of `message_bytes` (the full buffer of an all-gather or reduce-scatter, as
  // nccl-tests' size column and CommOp::bytes() count it) and its predicted time.
  NcclChoice choose(CollKind kind, double message_bytes, Mesh mesh, int concurrent = 1) const;
  // Seconds of every enabled pair, indexed [algo][proto]; negative where NCCL does not run the pair, and for every
  // pair of a collective NCCL runs as point-to-point sends (collective(kind).nccl_tuned false: all_to_all), which its
  // tuning model does not price (choose() then says 0 s; the nccl network model prices those with alpha-beta).
  void pair_times_s(CollKind kind, double message_bytes, Mesh mesh, int concurrent, double out[2][3]) const;
  double time_s(CollKind kind, double message_bytes, Mesh mesh, int concurrent = 1) const {
    return choose(kind, message_bytes, mesh, concurrent).time_s;
  }

  const NetworkSpec& network() const { return net_; }

 private:
  explicit NcclModel(NetworkSpec net) : net_(std::move(net)) {}
  void pairs(CollKind kind, double message_bytes, Mesh mesh, int concurrent, double time_s[2][3], double lat_s[2][3],
             double algbw_gbps[2][3]) const;
  NetworkSpec net_;
};

}  // namespace lins
