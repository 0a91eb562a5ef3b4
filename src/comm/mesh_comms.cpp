// Backend factory, group splitting and the per-role communicators of a plan; see mesh_comms.h.
#include "comm/mesh_comms.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "comm/check.h"
#include "comm/gpu_plugin.h"
#include "core/util/units.h"

namespace lins {

const char* backend_name(Backend b) { return kBackendNames.name(b); }

// MPI's shared-memory split, then a split by NCCL_HOSTID where it is set, as NCCL tells hosts apart by it (two ranks
// on one GPU, each with its own NCCL_HOSTID, are two nodes to NCCL). Every rank makes the second split, with or
// without the variable, so it stays collective.
NodePlace node_place(MPI_Comm comm) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_Comm shared, node;
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared));
  const char* id = std::getenv("NCCL_HOSTID");
  const int color = int(std::hash<std::string>{}(id ? id : "") & 0x7fffffff);
  MPI_CHECK(MPI_Comm_split(shared, color, rank, &node));
  MPI_CHECK(MPI_Comm_free(&shared));
  NodePlace p;
  MPI_CHECK(MPI_Comm_rank(node, &p.local_rank));
  MPI_CHECK(MPI_Comm_size(node, &p.ranks));
  MPI_CHECK(MPI_Comm_free(&node));
  return p;
}

Status check_one_rank_per_gpu(MPI_Comm comm, const NodePlace& here, int devices) {
  const int ranks_here = here.ranks;
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  struct {
    int excess, rank;
  } mine{ranks_here - devices, rank}, worst{0, 0};
  MPI_CHECK(MPI_Allreduce(&mine, &worst, 1, MPI_2INT, MPI_MAXLOC, comm));
  if (worst.excess <= 0) return Status::ok_status();
  int figures[2] = {ranks_here, devices};
  MPI_CHECK(MPI_Bcast(figures, 2, MPI_INT, worst.rank, comm));
  return make_error("a host runs " + std::to_string(figures[0]) + " ranks but has " + std::to_string(figures[1]) +
                    " CUDA device(s) (the host of rank " + std::to_string(worst.rank) +
                    "): NCCL runs one rank per GPU and refuses two on one device; start at most " +
                    std::to_string(figures[1]) +
                    " ranks per host (mpirun --map-by ppr:" + std::to_string(std::max(1, figures[1])) + ":node)");
}

bool nccl_available() { return gpu_plugin().ok(); }

Result<int> cuda_device_count_probed() {
  auto plugin = gpu_plugin();
  if (!plugin) return 0;
  const GpuDeviceProbe p = (*plugin)->probe_devices();
  if (p.failed()) return make_error(p.error);
  return p.count;
}

Result<Backend> default_backend(MPI_Comm comm) {
  LINS_ASSIGN_OR_RETURN(auto devices, cuda_device_count_probed());
  const int ranks_here = node_place(comm).ranks;
  // Every rank must take the same backend: nccl only where every host has a device for each of its ranks.
  int mine[2] = {devices > 0, devices >= ranks_here}, all[2] = {0, 0};
  MPI_CHECK(MPI_Allreduce(mine, all, 2, MPI_INT, MPI_LAND, comm));
  if (all[0] && all[1]) return Backend::nccl;
  int rank = 0, any_gpu = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Allreduce(&mine[0], &any_gpu, 1, MPI_INT, MPI_LOR, comm));
  if (any_gpu && rank == 0)
    std::printf(
        "# --backend auto: mpi, not nccl: NCCL runs one rank per GPU and a host runs more ranks than it has "
        "GPUs (this host: %d ranks, %d GPUs)\n",
        ranks_here, devices);
  return Backend::mpi;
}

Result<Backend> parse_backend(std::string_view text) {
  LINS_ASSIGN_OR_RETURN(auto b, kBackendNames.parse(text));
  switch (b) {
    case Backend::mpi:
      return b;
    case Backend::nccl:
      if (auto plugin = gpu_plugin(); !plugin)
        return make_error("backend 'nccl' is not available: " + plugin.error() + "; use --backend mpi");
      return b;
  }
  return b;
}

Result<std::unique_ptr<Communicator>> make_communicator(Backend backend, MPI_Comm comm, std::string name, Axis axis,
                                                        const CommOptions& options) {
  if (backend == Backend::mpi) {
    LINS_ASSIGN_OR_RETURN(auto c, MpiCommunicator::create(comm, std::move(name), axis, options.mpi));
    return std::unique_ptr<Communicator>(std::move(c));
  }
  auto plugin = gpu_plugin();
  if (!plugin) return make_error("backend 'nccl' is not available: " + plugin.error() + "; use the mpi backend");
  return (*plugin)->make_nccl_communicator(comm, std::move(name), axis, options.compute_stream);
}

Result<std::unique_ptr<Communicator>> make_communicator(std::string_view backend, MPI_Comm comm, std::string name,
                                                        Axis axis, const CommOptions& options) {
  LINS_ASSIGN_OR_RETURN(auto b, parse_backend(backend));
  return make_communicator(b, comm, std::move(name), axis, options);
}

Result<std::unique_ptr<Communicator>> split_group(Communicator& world, const GroupSpec& g, const Topology& topo,
                                                  std::string name) {
  if (world.size() != topo.world())
    return make_error("split_group: the communicator has " + std::to_string(world.size()) + " ranks but the topology " +
                      topo.to_string() + " has " + std::to_string(topo.world()));
  if (g.block < 1 || g.period < 1 || g.block % g.period != 0 || topo.world() % g.block != 0)
    return make_error("split_group: group spec block " + std::to_string(g.block) + " period " +
                      std::to_string(g.period) + " does not tile " + std::to_string(topo.world()) + " ranks");
  const int rank = world.rank();
  const Mesh m = group_mesh(g, topo, rank);
  return world.split(group_ranks(g, rank).front(), rank, std::move(name), m.inter > 1 ? Axis::inter : Axis::intra);
}

Result<GroupSpec> mesh_group_spec(const Mesh& mesh, const Topology& topo) {
  const int R = topo.gpus_per_node, N = topo.nodes;
  if (mesh.intra < 1 || mesh.inter < 1 || R % mesh.intra != 0 || N % mesh.inter != 0)
    return make_error("mesh " + mesh.to_string() + " does not fit " + std::to_string(R) + " GPUs per node x " +
                      std::to_string(N) + " nodes; a mesh INTRAxINTER needs INTRA dividing " + std::to_string(R) +
                      " and INTER dividing " + std::to_string(N));
  if (mesh.inter == 1) return GroupSpec{mesh.intra, 1};
  return GroupSpec{R * mesh.inter, R / mesh.intra};
}

Result<Mesh> parse_mesh(std::string_view text) {
  const auto x = text.find('x');
  auto intra = parse_positive_int(text.substr(0, x), "mesh intra-node size");
  if (!intra) return make_error(intra.error() + " (write a mesh as INTRAxINTER, e.g. 2x2)");
  int inter = 1;
  if (x != std::string_view::npos) {
    auto v = parse_positive_int(text.substr(x + 1), "mesh inter-node size");
    if (!v) return make_error(v.error() + " (write a mesh as INTRAxINTER, e.g. 2x2)");
    inter = *v;
  }
  return Mesh{*intra, inter};
}

std::vector<Mesh> profile_meshes(const Topology& topo) {
  std::vector<Mesh> out;
  for (int b = 1; b <= topo.nodes; ++b) {
    if (topo.nodes % b) continue;
    for (int a = 1; a <= topo.gpus_per_node; ++a)
      if (topo.gpus_per_node % a == 0 && a * b > 1) out.push_back(Mesh{a, b});
  }
  return out;
}

Mesh MeshComms::mesh(GroupRole role) const { return group_mesh(spec(role), topo_, rank_); }

void MeshComms::synchronize() {
  world_->synchronize();
  for (auto& c : comms_) c->synchronize();
}

void MeshComms::reset_counters() {
  world_->reset_counters();
  for (auto& c : comms_) c->reset_counters();
}

Result<std::unique_ptr<MeshComms>> make_mesh_comms(Backend backend, MPI_Comm world, const Plan& plan,
                                                   const Topology& topo, const CommOptions& options) {
  int size = 0;
  MPI_CHECK(MPI_Comm_size(world, &size));
  if (size != topo.world())
    return make_error("the job has " + std::to_string(size) + " ranks but the topology " + topo.to_string() +
                      " (GPUs per node x nodes) needs " + std::to_string(topo.world()));
  auto out = std::make_unique<MeshComms>();
  out->backend_ = backend;
  out->plan_ = plan;
  out->topo_ = topo;
  LINS_ASSIGN_OR_RETURN(
      out->world_, make_communicator(backend, world, "world", topo.nodes > 1 ? Axis::inter : Axis::intra, options));
  out->rank_ = out->world_->rank();
  for (int r = 0; r < kGroupRoleCount; ++r) {
    const auto role = static_cast<GroupRole>(r);
    out->specs_[r] = group_spec(role, plan, topo);
    auto c = split_group(*out->world_, out->specs_[r], topo, group_role_name(role));
    if (!c) return make_error(std::string(group_role_name(role)) + " group: " + c.error());
    out->comms_[r] = std::move(*c);
  }
  return out;
}

std::string describe_groups(const Plan& plan, const Topology& topo, int rank) {
  std::ostringstream os;
  os << "groups on " << topo.world() << " ranks (" << topo.gpus_per_node << " per node x " << topo.nodes
     << " nodes), plan " << (plan.name.empty() ? "custom" : plan.name) << " " << plan.tuple_string() << ":\n";
  for (int r = 0; r < kGroupRoleCount; ++r) {
    const auto role = static_cast<GroupRole>(r);
    const GroupSpec g = group_spec(role, plan, topo);
    const Mesh m = group_mesh(g, topo, rank);
    char line[96];
    std::snprintf(line, sizeof line, "  %-10s size %-4d mesh %-7s %s  ranks of rank %d's group:", group_role_name(role),
                  g.size(), m.to_string().c_str(), m.inter > 1 ? "inter" : "intra", rank);
    os << line;
    for (int x : group_ranks(g, rank)) os << ' ' << x;
    os << '\n';
  }
  return os.str();
}

}  // namespace lins
