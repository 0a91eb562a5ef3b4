// Communicators for every group role of a plan (groups of consecutive ranks; docs/method.md, "The sharding space"),
// for either backend, plus the group shapes a bandwidth profile covers. The training step gets its communicators here:
//   auto mesh = make_mesh_comms(Backend::mpi, MPI_COMM_WORLD, plan, topo);  mesh->get(GroupRole::p_shard) ...
#pragma once

#include <mpi.h>

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "core/model/groups.h"
#include "core/model/plan.h"
#include "core/model/topology.h"
#include "core/util/names.h"
#include "core/util/result.h"

namespace lins {

enum class Backend { mpi, nccl };
// --backend of `lins comm` and the backend column of its CSV.
inline constexpr NameTable<Backend, 2> kBackendNames{"backend",
                                                     {{
                                                         {Backend::mpi, "mpi", "", "host memory, MPI collectives"},
                                                         {Backend::nccl, "nccl", "", "device memory, NCCL collectives"},
                                                     }}};
static_assert(kBackendNames.complete(Backend::nccl));
const char* backend_name(Backend b);
// "mpi" or "nccl"; an unknown name, or nccl where the GPU plugin cannot be loaded, is an error that says why and what
// is valid here.
Result<Backend> parse_backend(std::string_view text);
// The GPU plugin (comm/gpu_plugin.h), which holds the NCCL backend, loads.
bool nccl_available();
// CUDA devices visible to this rank: 0 without the plugin or a GPU; an error on a GPU machine whose GPU does not work.
Result<int> cuda_device_count_probed();
// --backend auto, collective over `comm`: nccl when every host has a CUDA device for each of its ranks (NCCL runs one
// rank per GPU), else mpi, with one line on rank 0 when GPUs exist but are too few.
Result<Backend> default_backend(MPI_Comm comm);

// This rank's place on its node: its index among the ranks of `comm` there, and how many ranks of `comm` the node
// runs. A node is a host (MPI_COMM_TYPE_SHARED), split further by NCCL_HOSTID where that is set (NCCL's own notion of
// a host). The index modulo the node's device count is the device NcclCommunicator selects, and so the device every
// other GPU user of the rank (compute backend, tests) must use. Collective over `comm`.
struct NodePlace {
  int local_rank = 0;
  int ranks = 1;
};
NodePlace node_place(MPI_Comm comm);
// Collective: an error naming the counts, the host and what to do when any node runs more ranks than its `devices`
// (`here`: this rank's node_place(comm)).
Status check_one_rank_per_gpu(MPI_Comm comm, const NodePlace& here, int devices);

struct CommOptions {
  MpiCommOptions mpi;              // MPI backend: how asynchronous collectives progress
  void* compute_stream = nullptr;  // NCCL backend: the cudaStream_t collectives are ordered after (null: default)
};

// A communicator over every rank of `comm` (collective over it). NCCL: bootstraps through MPI (local rank from
// MPI_Comm_split_type, cudaSetDevice(local rank % devices), ncclGetUniqueId on rank 0, MPI_Bcast, ncclCommInitRank).
Result<std::unique_ptr<Communicator>> make_communicator(Backend backend, MPI_Comm comm, std::string name = "world",
                                                        Axis axis = Axis::inter, const CommOptions& options = {});
Result<std::unique_ptr<Communicator>> make_communicator(std::string_view backend, MPI_Comm comm,
                                                        std::string name = "world", Axis axis = Axis::inter,
                                                        const CommOptions& options = {});

// `rank`'s group of spec `g` as a communicator: a split of `world` (which must span topo.world() ranks in order)
// with color = the group's first rank and key = the rank. Collective over `world`.
Result<std::unique_ptr<Communicator>> split_group(Communicator& world, const GroupSpec& g, const Topology& topo,
                                                  std::string name);

// The group spec whose groups have shape `mesh` (intra GPUs of a node x inter nodes) on `topo`: consecutive ranks
// when it lies in one node ({intra, 1}), otherwise `intra` ranks spaced evenly in each node of `inter` consecutive
// nodes ({R * inter, R / intra}); full-node meshes are consecutive ranks. Errors unless intra | R and inter | N.
Result<GroupSpec> mesh_group_spec(const Mesh& mesh, const Topology& topo);
// "2x2" or "4" (= 4x1) -> Mesh; checked against topo by mesh_group_spec.
Result<Mesh> parse_mesh(std::string_view text);
// Every mesh a plan on `topo` may use (intra | R, inter | N, more than one rank), intra-node ones first.
std::vector<Mesh> profile_meshes(const Topology& topo);

// One communicator per GroupRole (every role, size-one groups included, so callers need no special case).
class MeshComms {
 public:
  Communicator& world() { return *world_; }
  Communicator& get(GroupRole role) { return *comms_[static_cast<int>(role)]; }
  const GroupSpec& spec(GroupRole role) const { return specs_[static_cast<int>(role)]; }
  Mesh mesh(GroupRole role) const;  // this rank's group of the role
  const Plan& plan() const { return plan_; }
  const Topology& topology() const { return topo_; }
  Backend backend() const { return backend_; }
  int rank() const { return rank_; }
  // Every communicator's collectives completed (counters settled).
  void synchronize();
  void reset_counters();

 private:
  friend Result<std::unique_ptr<MeshComms>> make_mesh_comms(Backend, MPI_Comm, const Plan&, const Topology&,
                                                            const CommOptions&);
  Backend backend_ = Backend::mpi;
  Plan plan_;
  Topology topo_;
  int rank_ = 0;
  std::unique_ptr<Communicator> world_;
  std::array<GroupSpec, kGroupRoleCount> specs_{};
  std::array<std::unique_ptr<Communicator>, kGroupRoleCount> comms_{};
};

// Collective over `world`, whose size must equal topo.world().
Result<std::unique_ptr<MeshComms>> make_mesh_comms(Backend backend, MPI_Comm world, const Plan& plan,
                                                   const Topology& topo, const CommOptions& options = {});

// One line per role: group size, mesh (p0 x p1), axis and the ranks of `rank`'s group, for rank 0 to print at
// start-up so nobody runs a silently wrong layout.
std::string describe_groups(const Plan& plan, const Topology& topo, int rank = 0);

}  // namespace lins
