// `lins comm`: the collective benchmark with nccl-tests' contract (size sweep, warm-up and timed iterations,
// algbw/busbw, a correctness check of every result, non-zero exit on wrong data) plus min/median/max, CSV with a
// JSON provenance file, --profile: every op over every mesh the planner may use, as the planner's profile CSV, and
// --contention: compute and collectives side by side, fitted to the step timeline's rates (apps/contention_bench.h).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "apps/commands.h"
#include "apps/contention_bench.h"
#include "apps/device_rate.h"
#include "apps/memory_check.h"
#include "apps/mpi_app.h"
#include "comm/collective_check.h"
#include "comm/gpu_plugin.h"
#include "comm/mesh_comms.h"
#include "comm/provenance.h"
#include "comm/watchdog.h"
#include "core/cost/cost_model.h"  // kProfileHeader, the columns the planner reads
#include "core/cost/link_fit.h"
#include "core/cost/network_spec.h"
#include "core/output/results_schema.h"
#include "core/util/cli.h"
#include "core/util/csv.h"
#include "core/util/json.h"
#include "core/util/units.h"
#include "lins_git_commit.h"  // generated at build time

namespace lins {
namespace {

const CommandSpec& comm_spec() {
  static const CommandSpec spec = {
      "comm",
      "benchmark collectives (nccl-tests style) and write the bandwidth profile the planner reads",
      "mpirun -np N lins comm [options]",
      {
          {"minbytes", 'b', "SIZE", "4M", "smallest message (K, M, G = powers of 1024)"},
          {"maxbytes", 'e', "SIZE", "64M", "largest message"},
          {"stepfactor", 'f', "N", "2", "multiply the size by N (at least 2) between steps"},
          {"iters", 'n', "N", "20", "timed iterations per size"},
          {"warmup_iters", 'w', "N", "5", "untimed iterations per size before timing"},
          {"op", 'o', "OP", "all",
           "collective: " + kCollKindNames.list({"all"}) +
               " (every one); nccl-tests' and NCCL's spellings (allgather, AllGather) are read too"},
          {"datatype", 'd', "TYPE", "fp32", kDTypeNames.list() + " (also " + kDTypeNames.aliases_text() + ")"},
          {"root", 'r', "N", "0", "broadcast root (index inside the group)"},
          {"check", 'c', "0|1", "1", "check every result against values computed locally"},
          {"backend", 0, "NAME", "auto",
           kBackendNames.described() + ", or auto (nccl when built with CUDA and a device exists, else mpi)"},
          {"mpi-progress", 0, "MODE", "thread", "MPI backend: " + kMpiProgressNames.described()},
          {"gpus-per-node", 0, "N", "auto",
           "ranks per (emulated) node; auto = ranks sharing this host (4 ranks with 2 = 2 nodes of 2)"},
          {"group", 0, "GROUP", "world",
           "world | intra (one node) | inter (same local rank on every node) | INTRAxINTER mesh, e.g. 2x2"},
          {"csv", 0, "FILE", "", "also write the rows as CSV (units in column names) and FILE's .provenance.json"},
          {"profile", 0, "FILE", "",
           "sweep every op over every mesh the planner may use and write the profile CSV `lins plan --profile` reads"},
          {"fit-network", 0, "NET", "cpu-local",
           "--profile: fit this network's alpha-beta link terms (a preset or a network file) to the profile just "
           "measured and print them beside the file's, with each measured mesh's error, as `lins plan --profile` "
           "does (docs/cost-model.md, \"Fitting the link terms\")"},
          {"contention", 0, "FILE", "",
           "measure what compute and collectives cost each other side by side (compute alone and beside a "
           "collective, a collective beside compute, two groups on one link, both fabrics at once) over the intra "
           "and inter groups, and write the fitted [contention] table; -o picks the sweep's op (all: all_gather, "
           "reduce_scatter, all_reduce) and the side-by-side one (all: all_reduce); -b/-e/-f the sweep (default 256K "
           "to 4M by 4)"},
          {"contention-bytes", 0, "SIZE", "4M", "--contention: the message of the side-by-side collective"},
          {"repeats", 0, "N", "5", "--contention: samples of every measurement (median, min and max kept)"},
          {"compute-seconds", 0, "SECONDS", "0.1", "--contention: one compute sample alone"},
          {"device-rate", 0, "TFLOPS", "",
           "--contention: emulate a device of this many TFLOP/s per rank, as `lins step` does: each GEMM pass runs, "
           "then sleeps until its 2 n^3 FLOPs at this rate have passed since it started (a pass that took longer is "
           "an overrun, counted and printed); 'off' turns it off; MPI backend only (default: the environment's "
           "LINS_DEVICE_TFLOPS, which scripts/cluster.sh run sets, else off)"},
          {"device-gbps", 0, "GBPS", "",
           "--contention: with an emulated device, pace the memory pass too: its 12 bytes per element at this many "
           "GB/s per rank; 'off' leaves it unpaced (default: the environment's LINS_DEVICE_GBPS, else off)"},
          {"timeout", 'T', "SECONDS", "300",
           "watchdog: a rank waiting on one collective this long names itself and the operation and ends the job "
           "(0 = off)"},
          {"memory-limit", 0, "SIZE", "",
           "memory each host (each GPU with NCCL) may give the ranks on it, instead of what it has now (MemAvailable "
           "and the cgroup limit; the device's free memory)"},
          {"no-memory-check", 0, "", "",
           "allocate the buffers even when, summed over the ranks of a host (GPU), they exceed what it can give"},
      },
      "examples:\n"
      "  mpirun -np 4 lins comm -b 4K -e 16M -o all_reduce --gpus-per-node 2 --group inter\n"
      "  mpirun -np 4 lins comm -b 4K -e 16M --gpus-per-node 2 --profile profile.csv\n"
      "  mpirun -np 4 lins comm --gpus-per-node 2 --contention contention.toml\n"
      "exit status: 0 all results right, 1 wrong data, 2 bad options or setup.\n",
  };
  return spec;
}

// Everything `lins comm` takes from its options.
struct Settings {
  uint64_t min_bytes = 0, max_bytes = 0;
  int step_factor = 2, iters = 1, warmup = 0, root = 0;
  bool check = true;
  std::vector<CollKind> ops;
  DType dtype = DType::fp32;
  Backend backend = Backend::mpi;
  MpiProgress progress = MpiProgress::thread;
  double timeout_s = 0;
  std::string gpn_text, group, csv, profile, contention;
  std::optional<NetworkSpec> fit_network;  // --profile: the network whose link terms are fitted to it
  bool sweep_given = false;  // -b or -e on the command line (--contention has its own default sweep)
  uint64_t contention_bytes = 0;
  int repeats = 5;
  double compute_s = 0.1;
  DeviceRates device;  // --contention's emulated device (apps/device_rate.h); off unless given or in the environment
  bool memory_check = true;
  std::optional<double> memory_limit_bytes;
};

// A whole number that may be 0 (the parser's positive ints are at least 1).
Result<int> get_count(const ParsedArgs& a, const std::string& name) {
  if (a.get(name) == "0") return 0;
  auto v = a.get_positive_int(name);
  if (!v) return make_error(v.error() + " (0 is allowed)");
  return *v;
}

// -b, -e, -f, -n, -w: the sizes swept and the iterations per size.
Status read_sweep(const ParsedArgs& a, Settings& s) {
  LINS_ASSIGN_OR_RETURN(auto minb, a.get_size("minbytes"));
  LINS_ASSIGN_OR_RETURN(auto maxb, a.get_size("maxbytes"));
  if (minb < 1) return make_error("--minbytes must be at least 1 byte");
  if (minb > maxb)
    return make_error("--minbytes " + a.get("minbytes") + " is larger than --maxbytes " + a.get("maxbytes") +
                      "; give -b no larger than -e");
  s.min_bytes = minb;
  s.max_bytes = maxb;
  LINS_ASSIGN_OR_RETURN(auto f, a.get_positive_int("stepfactor"));
  if (f < 2) return make_error("--stepfactor must be at least 2 (the sweep multiplies the size by it), got 1");
  s.step_factor = f;
  LINS_ASSIGN_OR_RETURN(s.iters, a.get_positive_int("iters"));
  LINS_ASSIGN_OR_RETURN(s.warmup, get_count(a, "warmup_iters"));
  return Status::ok_status();
}

// -o, -d, --backend, --mpi-progress: what is measured and how, each from its name table.
Status read_collectives(const ParsedArgs& a, Settings& s) {
  if (a.get("op") == "all") {
    s.ops = kCollKindNames.values();
  } else {
    LINS_ASSIGN_OR_RETURN(auto op, a.get_enum("op", kCollKindNames, {"all"}));
    s.ops = {op};
  }
  LINS_ASSIGN_OR_RETURN(s.dtype, a.get_enum("datatype", kDTypeNames));
  const std::string be = a.get("backend");
  if (be == "auto") {
    auto b = default_backend(MPI_COMM_WORLD);
    if (!b) return make_error("--backend auto: " + b.error());
    s.backend = *b;
  } else {
    LINS_TRY(a.get_enum("backend", kBackendNames, {"auto"}));
    auto available = parse_backend(be);  // nccl only where the GPU plugin loads
    if (!available) return make_error("--backend: " + available.error());
    s.backend = *available;
  }
  LINS_ASSIGN_OR_RETURN(s.progress, a.get_enum("mpi-progress", kMpiProgressNames));
  return Status::ok_status();
}

// --contention and its sizes. It measures the intra and inter groups itself and writes one file of its own.
Status read_contention(const ParsedArgs& a, Settings& s) {
  s.contention = a.get("contention");
  s.sweep_given = a.has("minbytes") || a.has("maxbytes");
  LINS_ASSIGN_OR_RETURN(auto bytes, a.get_size("contention-bytes"));
  if (bytes < 1) return make_error("--contention-bytes must be at least 1 byte");
  s.contention_bytes = bytes;
  LINS_ASSIGN_OR_RETURN(s.repeats, a.get_positive_int("repeats"));
  LINS_ASSIGN_OR_RETURN(auto compute, a.get_double("compute-seconds"));
  if (!(compute > 0) || compute > 60) return make_error("--compute-seconds must be above 0 and at most 60");
  s.compute_s = compute;
  if (s.contention.empty()) {
    for (const char* only : {"device-rate", "device-gbps"})
      if (a.has(only))
        return make_error(std::string("--") + only + " paces the compute of --contention; give --contention FILE");
    return Status::ok_status();
  }
  LINS_ASSIGN_OR_RETURN(s.device, read_device_rates(a));
  if (s.device.paced() && s.backend != Backend::mpi)
    return make_error(s.device.source.substr(0, s.device.source.find(", ")) +
                      " paces the CPU backend's compute to an emulated device; a GPU keeps its own time (give "
                      "--device-rate off)");
  for (const char* other : {"profile", "csv", "group"})
    if (a.has(other))
      return make_error(std::string("--contention measures the intra and inter groups itself and writes its own "
                                    "file; drop --") + other);
  return Status::ok_status();
}

Result<Settings> read_settings(const ParsedArgs& a) {
  Settings s;
  LINS_TRY(read_sweep(a, s));
  LINS_ASSIGN_OR_RETURN(s.root, get_count(a, "root"));
  const std::string c = a.get("check");
  if (c != "0" && c != "1") return make_error("--check must be 0 or 1, got '" + c + "'");
  s.check = c == "1";
  LINS_TRY(read_collectives(a, s));
  s.gpn_text = a.get("gpus-per-node");
  s.group = a.get("group");
  s.csv = a.get("csv");
  s.profile = a.get("profile");
  if (!s.profile.empty() && a.has("group"))
    return make_error("--profile sweeps every mesh itself; drop --group (or drop --profile to measure one group)");
  if (a.has("fit-network") && s.profile.empty())
    return make_error("--fit-network fits link terms to the profile --profile measures; give --profile FILE");
  if (!s.profile.empty()) {
    auto net = resolve_network_spec(a.get("fit-network"));
    if (!net) return make_error("--fit-network: " + net.error());
    s.fit_network = std::move(*net);
  }
  LINS_TRY(read_contention(a, s));
  LINS_ASSIGN_OR_RETURN(s.timeout_s, a.get_double("timeout"));
  s.memory_check = !a.flag("no-memory-check");
  if (a.has("memory-limit")) {
    LINS_ASSIGN_OR_RETURN(auto limit, a.get_memory_size("memory-limit"));
    if (limit == 0) return make_error("--memory-limit must be at least 1 byte (for example 16GiB)");
    s.memory_limit_bytes = double(limit);
  }
  return s;
}

// Ranks sharing this host (the largest count over hosts, so uneven placements are caught by topology_for_world).
int ranks_per_host() {
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int n = 1, most = 1;
  MPI_Comm_size(local, &n);
  MPI_Comm_free(&local);
  MPI_Allreduce(&n, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return most;
}

Result<GroupSpec> group_from_text(const std::string& text, const Topology& topo) {
  if (text == "world") return GroupSpec{topo.world(), 1};
  if (text == "intra") return GroupSpec{topo.gpus_per_node, 1};
  if (text == "inter") return GroupSpec{topo.world(), topo.gpus_per_node};
  auto m = parse_mesh(text);
  if (!m)
    return make_error("--group '" + text + "' is neither world, intra, inter nor a mesh INTRAxINTER such as " +
                      std::to_string(topo.gpus_per_node) + "x" + std::to_string(topo.nodes));
  auto g = mesh_group_spec(*m, topo);
  if (!g) return make_error("--group: " + g.error());
  return *g;
}

// Host or device buffers of the backend (device ones through the GPU plugin, which the nccl backend has loaded).
struct Buffers {
  const GpuPlugin* gpu = nullptr;  // set for device buffers
  void* send = nullptr;
  void* recv = nullptr;
  std::vector<unsigned char> host;  // staging for fills and checks
  size_t bytes = 0;

  Buffers() = default;
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  // Send and receive buffers of `size` bytes (at least 1) and the host staging copy; an error, not an abort, when
  // any of them cannot be allocated.
  static Result<std::unique_ptr<Buffers>> create(bool on_device, uint64_t size) {
    auto b = std::make_unique<Buffers>();
    b->bytes = size ? size : 1;
    const std::string what = format_bytes(double(b->bytes)) + " (-e " + std::to_string(size) + " bytes)";
    try {
      b->host.resize(b->bytes);
    } catch (const std::exception&) {
      return make_error("cannot allocate the host staging buffer of " + what);
    }
    if (on_device) {
      LINS_ASSIGN_OR_RETURN(b->gpu, gpu_plugin());
      b->send = b->gpu->device_alloc_or_null(b->bytes);
      b->recv = b->send ? b->gpu->device_alloc_or_null(b->bytes) : nullptr;
      if (!b->recv) return make_error("cannot allocate the device send and receive buffers of " + what);
      return b;
    }
    b->send = std::malloc(b->bytes);
    b->recv = b->send ? std::malloc(b->bytes) : nullptr;
    if (!b->recv) return make_error("cannot allocate the host send and receive buffers of " + what);
    return b;
  }
  ~Buffers() {
    if (gpu) {
      gpu->device_free(send);
      gpu->device_free(recv);
      return;
    }
    std::free(send);
    std::free(recv);
  }
  void upload(void* dst, size_t n) {
    if (gpu) return gpu->copy_to_device(dst, host.data(), n);
    std::memcpy(dst, host.data(), n);
  }
  void download(const void* src, size_t n) {
    if (gpu) return gpu->copy_to_host(host.data(), src, n);
    std::memcpy(host.data(), src, n);
  }
};

struct Measurement {
  CollKind kind;
  Mesh mesh;
  int group_size = 1;
  int64_t count = 0;  // the call's count: per rank, per peer or of the buffer (core/collectives.h)
  double message_bytes = 0;
  double t_min = 0, t_med = 0, t_max = 0;
  double algbw_gbps = 0, busbw_gbps = 0;
  int64_t wrong = 0;  // summed over ranks; -1 when not checked
};

// One (op, size) on this rank's group; every group of the mesh runs at the same time. `count` is the call's
// (collective(kind).count_unit).
Measurement measure(Communicator& c, const std::vector<int>& members, CollKind kind, int64_t count, const Settings& s,
                    Buffers& buf, int world_rank, const Mesh& mesh) {
  const Collective& coll = collective(kind);
  const int n = c.size(), me = c.rank();
  const int64_t in_elems = coll.send_elems(count, n);
  const int64_t out_elems = coll.recv_elems(count, n);
  const size_t eb = dtype_bytes(s.dtype);
  const int root = std::min(s.root, n - 1);
  // A rooted collective (broadcast) runs in place on the receive buffer.
  void* input = coll.has_root ? buf.recv : buf.send;
  // Inputs from (world rank, index); broadcast non-roots start from a sentinel the check would catch.
  if (coll.has_root && me != root) {
    check_fill_constant(buf.host.data(), s.dtype, count, -1000);
  } else {
    check_fill(buf.host.data(), s.dtype, in_elems, world_rank);
  }
  buf.upload(input, in_elems * eb);
  auto issue = [&] { return c.run(kind, buf.send, buf.recv, count, s.dtype, root); };
  const bool host_sync = std::strcmp(c.backend(), "mpi") != 0;  // NCCL: wait() orders streams only
  auto run_once = [&] {
    Request r = issue();
    r.wait();
    if (host_sync) c.synchronize();
  };
  for (int i = 0; i < s.warmup; ++i) run_once();
  std::vector<double> times(s.iters);
  for (int i = 0; i < s.iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);  // every group starts together, as in the training step
    const double t0 = MPI_Wtime();
    run_once();
    times[i] = MPI_Wtime() - t0;
  }
  // An iteration lasts as long as its slowest rank.
  MPI_Allreduce(MPI_IN_PLACE, times.data(), s.iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  std::sort(times.begin(), times.end());
  Measurement m;
  m.kind = kind;
  m.mesh = mesh;
  m.group_size = n;
  m.count = count;
  m.message_bytes = message_bytes(kind, count, n, int(eb));
  m.t_min = times.front();
  m.t_max = times.back();
  m.t_med = s.iters % 2 ? times[s.iters / 2] : 0.5 * (times[s.iters / 2 - 1] + times[s.iters / 2]);
  m.algbw_gbps = m.t_med > 0 ? m.message_bytes / m.t_med / 1e9 : 0;
  m.busbw_gbps = m.algbw_gbps * bus_factor(kind, n);
  m.wrong = -1;
  if (s.check) {
    buf.download(buf.recv, out_elems * eb);
    long long wrong = count_wrong(kind, buf.host.data(), s.dtype, count, members, me, root), total = 0;
    MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    m.wrong = total;
  }
  return m;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

void print_table_header() {
  std::printf("#\n# %14s %7s %12s %12s %5s %4s %11s %11s %11s %9s %9s %7s\n", "op", "mesh", "size", "count", "type",
              "root", "time_min", "time_med", "time_max", "algbw", "busbw", "#wrong");
  std::printf("# %14s %7s %12s %12s %5s %4s %11s %11s %11s %9s %9s %7s\n", "", "", "(B)", "(elements)", "", "", "(us)",
              "(us)", "(us)", "(GB/s)", "(GB/s)", "");
}

void print_row(const Measurement& m, const Settings& s) {
  const std::string root = collective(m.kind).has_root ? std::to_string(std::min(s.root, m.group_size - 1)) : "-";
  std::printf("  %14s %7s %12.0f %12lld %5s %4s %11.2f %11.2f %11.2f %9.3f %9.3f %7s\n", coll_kind_name(m.kind),
              m.mesh.to_string().c_str(), m.message_bytes, static_cast<long long>(m.count), dtype_name(s.dtype),
              root.c_str(), m.t_min * 1e6, m.t_med * 1e6, m.t_max * 1e6, m.algbw_gbps, m.busbw_gbps,
              m.wrong < 0 ? "n/a" : std::to_string(m.wrong).c_str());
  std::fflush(stdout);
}

std::vector<std::string> csv_row(const Measurement& m, const Settings& s, const std::string& group, int world) {
  return {coll_kind_name(m.kind),       backend_name(s.backend),
          dtype_name(s.dtype),          group,
          std::to_string(m.mesh.intra), std::to_string(m.mesh.inter),
          std::to_string(m.group_size), std::to_string(world),
          fmt("%.0f", m.message_bytes), std::to_string(m.count),
          std::to_string(s.iters),      std::to_string(s.warmup),
          fmt("%.9g", m.t_min),         fmt("%.9g", m.t_med),
          fmt("%.9g", m.t_max),         fmt("%.6g", m.algbw_gbps),
          fmt("%.6g", m.busbw_gbps),    m.wrong < 0 ? "" : std::to_string(m.wrong)};
}

// --gpus-per-node (a number, or auto: the ranks sharing this host) and the world: the emulated cluster.
Result<Topology> resolve_topology(const Settings& s, int world) {
  int gpn = 0;
  if (s.gpn_text == "auto") {
    gpn = ranks_per_host();
  } else {
    auto v = parse_positive_int(s.gpn_text, "--gpus-per-node");
    if (!v) return make_error(v.error() + " (or auto)");
    gpn = *v;
  }
  return topology_for_world(world, gpn);
}

using LabelledGroups = std::vector<std::pair<std::string, GroupSpec>>;  // (label, group) to measure

// --profile: every mesh the planner may use; else the one --group.
Result<LabelledGroups> resolve_groups(const Settings& s, const Topology& topo) {
  LabelledGroups groups;
  if (!s.profile.empty()) {
    for (const Mesh& m : profile_meshes(topo)) groups.emplace_back(m.to_string(), *mesh_group_spec(m, topo));
    if (groups.empty())
      return make_error(
          "--profile needs at least 2 ranks (every mesh of a single rank is one GPU, which moves nothing)");
  } else {
    LINS_ASSIGN_OR_RETURN(auto g, group_from_text(s.group, topo));
    groups.emplace_back(s.group, g);
  }
  for (const auto& [label, g] : groups)
    if (s.root >= g.size())
      return make_error("--root " + std::to_string(s.root) + " is outside a group of " + std::to_string(g.size()) +
                        " ranks (group " + label + "); give 0.." + std::to_string(g.size() - 1));
  return groups;
}

// Rank 0 writes --csv (and its provenance beside it) and --profile: it checks both paths, and opens the CSV, before
// anything is measured, so a bad path fails in a second, not after the sweep.
Result<std::optional<CsvWriter>> prepare_outputs(const Settings& s, int rank) {
  std::optional<CsvWriter> csv;
  Status st;
  if (rank == 0 && !s.csv.empty()) st = check_output_file("--csv", s.csv);
  if (rank == 0 && st && !s.profile.empty()) st = check_output_file("--profile", s.profile);
  if (rank == 0 && st && !s.contention.empty()) st = check_output_file("--contention", s.contention);
  if (rank == 0 && st && !s.csv.empty()) {
    auto w = CsvWriter::open(s.csv, comm_csv_columns());
    if (w) {
      csv.emplace(std::move(*w));
    } else {
      st = make_error("--csv: " + w.error());
    }
  }
  LINS_TRY(agree(st, rank));
  return csv;
}

void print_run_header(const Settings& s, const Topology& topo, const LabelledGroups& groups, Communicator& world_comm,
                      int world) {
  std::printf("# lins comm %s (commit %s): backend %s", LINS_VERSION, LINS_GIT_COMMIT, backend_name(s.backend));
  if (auto* mpi = dynamic_cast<MpiCommunicator*>(&world_comm))
    std::printf(" (%s progress)", mpi_progress_name(mpi->progress()));
  std::printf(", %d ranks = %d per node x %d nodes, dtype %s, iters %d, warm-up %d, check %s\n", world,
              topo.gpus_per_node, topo.nodes, dtype_name(s.dtype), s.iters, s.warmup, s.check ? "on" : "off");
  for (const auto& [label, g] : groups) {
    const Mesh m = group_mesh(g, topo, 0);
    std::printf("#   group %-6s: %d groups of %d ranks, mesh %s (%s); rank 0's group:", label.c_str(), world / g.size(),
                g.size(), m.to_string().c_str(), m.inter > 1 ? "inter" : "intra");
    for (int r : group_ranks(g, 0)) std::printf(" %d", r);
    std::printf("\n");
  }
  print_table_header();
}

// What the sweep leaves for the summary and the files.
struct SweepResult {
  std::string profile_rows;  // rank 0: the profile CSV's rows
  int64_t total_wrong = 0;
  double busbw_sum = 0;
  int busbw_n = 0;
};

std::string profile_row(const Measurement& m) {
  return std::string(coll_kind_name(m.kind)) + "," + std::to_string(m.mesh.intra) + "," + std::to_string(m.mesh.inter) +
         "," + fmt("%.0f", m.message_bytes) + "," + fmt("%.9g", m.t_med) + "," + fmt("%.6g", m.algbw_gbps) + "," +
         fmt("%.6g", m.busbw_gbps) + "\n";
}

// The buffers of -e on every rank, summed per host (and per GPU with NCCL), against what each can give, before
// they are allocated.
Status check_comm_memory(const Settings& s) {
  const bool device = s.backend == Backend::nccl;
  const CommBufferBytes need = comm_buffer_bytes(s.max_bytes, device);
  auto check = [&](bool on_device, double per_rank, double per_byte) {
    MemoryCheckOptions mo;
    mo.device = on_device;
    mo.limit_bytes = s.memory_limit_bytes;
    mo.limit_option = "--memory-limit";
    mo.override_hint = "To run anyway, give --no-memory-check (or the memory a host may use with --memory-limit).";
    mo.would_fit = [per_byte](double available, int ranks) {
      std::vector<std::string> out;
      const double largest = available / ranks / per_byte;
      double p2 = 1;
      while (p2 * 2 <= largest) p2 *= 2;
      if (largest >= 1) out.push_back("-e " + format_bytes(p2) + " (the largest power of two that fits)");
      out.push_back("fewer ranks on each host");
      return out;
    };
    const std::string what = "the sweep up to -e " + format_bytes(double(s.max_bytes));
    const std::string detail = std::to_string(int(per_byte)) + " x " + format_bytes(double(s.max_bytes)) +
                               (on_device ? " of device memory per rank (send, receive)"
                                          : (device ? " of host memory per rank (staging)"
                                                    : " of host memory per rank (send, receive, staging)"));
    return check_memory_on_every_node({RankDemand{what, per_rank, detail}}, mo);
  };
  if (auto st = check(false, need.host_bytes, device ? 1 : 3); !st) return st;
  if (device) return check(true, need.device_bytes, 2);
  return Status::ok_status();
}

// Every (group, op, size): measured on every rank, printed and written by rank 0.
Result<SweepResult> sweep(const Settings& s, const Topology& topo, const LabelledGroups& groups,
                          Communicator& world_comm, std::optional<CsvWriter>& csv, int rank, int world) {
  auto made = Buffers::create(s.backend == Backend::nccl, s.max_bytes);
  LINS_TRY(agree_any(made ? Status() : Status(make_error(made.error()))));
  Buffers& buf = **made;
  SweepResult out;
  for (const auto& [label, g] : groups) {
    const Mesh mesh = group_mesh(g, topo, rank);
    LINS_ASSIGN_OR_RETURN(auto sub, split_group(world_comm, g, topo, label));
    const auto members = group_ranks(g, rank);
    for (CollKind kind : s.ops) {
      for (uint64_t bytes = s.min_bytes; bytes <= s.max_bytes;) {
        const int64_t count = count_for_message(kind, double(bytes), g.size(), dtype_bytes(s.dtype));
        if (count > 0) {
          Measurement m = measure(*sub, members, kind, count, s, buf, rank, mesh);
          out.total_wrong += std::max<int64_t>(0, m.wrong);
          if (m.group_size > 1) {
            out.busbw_sum += m.busbw_gbps;
            ++out.busbw_n;
          }
          if (rank == 0) {
            print_row(m, s);
            if (csv)
              if (auto st = csv->write_row(csv_row(m, s, label, world)); !st)
                std::fprintf(stderr, "lins comm: --csv: %s\n", st.error().c_str());
            if (m.group_size > 1 && m.t_med > 0) out.profile_rows += profile_row(m);
          }
        }
        if (bytes > s.max_bytes / s.step_factor) break;
        bytes *= s.step_factor;
      }
    }
  }
  return out;
}

void print_summary(const Settings& s, const SweepResult& r) {
  std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(r.total_wrong),
              s.check ? (r.total_wrong ? "WRONG" : "OK") : "(not checked)");
  std::printf("# Avg bus bandwidth    : %.4f GB/s\n#\n", r.busbw_n ? r.busbw_sum / r.busbw_n : 0.0);
  std::fflush(stdout);
}

// --profile: the rows with their provenance in comments, as `lins plan --profile` reads them. Exit code 0 or 2.
int write_profile(const Settings& s, const SweepResult& r, const std::vector<std::string>& argv, const Json& run,
                  int rank) {
  const Json prov = gather_provenance(MPI_COMM_WORLD, argv, run);
  Status st;
  if (rank == 0) {
    std::string text =
        "# bandwidth profile measured by lins comm --profile; time_s = median over iterations of "
        "the slowest rank, algbw_gbps = message_bytes / time_s / 1e9, busbw_gbps with nccl-tests' "
        "factors; message_bytes as CommOp::bytes()\n";
    text += "# provenance: " + json_dump(prov, 0) + "\n";
    text += std::string(kProfileHeader) + "\n" + r.profile_rows;
    st = write_file_atomic(s.profile, text);
  }
  if (auto a = agree(st, rank); !a) {
    if (rank == 0) std::fprintf(stderr, "lins comm: --profile: %s\n", a.error().c_str());
    return 2;
  }
  if (rank == 0) std::printf("# wrote profile %s\n", s.profile.c_str());
  if (rank == 0 && s.fit_network) {
    // The link terms every mesh would be priced with, fitted to what was just measured.
    auto profile = BandwidthProfile::load(s.profile);
    if (!profile) {
      std::fprintf(stderr, "lins comm: --fit-network: %s\n", profile.error().c_str());
      return 2;
    }
    const LinkFit fit = fit_link_terms(alpha_beta_of(*s.fit_network), link_fit_points(*profile));
    std::printf("# network %s's link terms fitted to %s (lins plan --profile %s --network %s prices with them):\n",
                s.fit_network->name.c_str(), s.profile.c_str(), s.profile.c_str(), s.fit_network->name.c_str());
    for (const auto& line : link_fit_lines(fit, true)) std::printf("#%s\n", line.c_str());
  }
  return 0;
}

// --csv: the finished file and its provenance beside it. Exit code 0 or 2.
int finish_csv(const Settings& s, std::optional<CsvWriter>& csv, const std::vector<std::string>& argv, const Json& run,
               int rank) {
  int code = 0;
  Status st;
  if (rank == 0) st = csv->finish();
  if (auto a = agree(st, rank); !a) {
    if (rank == 0) std::fprintf(stderr, "lins comm: --csv: %s\n", a.error().c_str());
    code = 2;
  }
  if (auto p = write_provenance(MPI_COMM_WORLD, provenance_path_for(s.csv), argv, run); !p) {
    if (rank == 0) std::fprintf(stderr, "lins comm: provenance: %s\n", p.error().c_str());
    code = 2;
  } else if (rank == 0) {
    std::printf("# wrote %s and %s\n", s.csv.c_str(), provenance_path_for(s.csv).c_str());
  }
  return code;
}

Json run_summary(const Settings& s, const Topology& topo, const SweepResult& r) {
  Json run = Json::object();
  run["command"] = "comm";
  run["backend"] = backend_name(s.backend);
  run["dtype"] = dtype_name(s.dtype);
  run["topology"] = topo.to_string();
  run["gpus_per_node"] = topo.gpus_per_node;
  run["nodes"] = topo.nodes;
  run["iters"] = s.iters;
  run["warmup_iters"] = s.warmup;
  run["wrong_elems"] = static_cast<long long>(r.total_wrong);
  return run;
}

// --contention: the benchmark of apps/contention_bench.h with this command's options. Exit code 0 or 2.
int run_contention_command(const Settings& s, const Topology& topo, const std::vector<std::string>& argv, int rank) {
  ContentionOptions o;
  o.path = s.contention;
  o.backend = s.backend;
  o.progress = s.progress;
  o.topo = topo;
  o.dtype = s.dtype;
  const bool all = s.ops.size() > 1;
  o.sweep_kinds = all ? std::vector<CollKind>{CollKind::all_gather, CollKind::reduce_scatter, CollKind::all_reduce}
                      : s.ops;
  o.kind = all ? CollKind::all_reduce : s.ops.front();
  if (s.sweep_given) {
    o.sweep_min_bytes = s.min_bytes;
    o.sweep_max_bytes = s.max_bytes;
    o.step_factor = s.step_factor;
  }
  o.bytes = s.contention_bytes;
  o.repeats = s.repeats;
  o.compute_s = s.compute_s;
  o.device_tflops = s.device.tflops;
  o.device_gbps = s.device.gbps;
  o.device_source = s.device.source;
  o.argv = argv;
  if (s.memory_check) {
    MemoryCheckOptions mo;
    mo.device = s.backend == Backend::nccl;
    mo.limit_bytes = s.memory_limit_bytes;
    mo.limit_option = "--memory-limit";
    mo.override_hint = "To run anyway, give --no-memory-check (or a smaller --contention-bytes and -e).";
    mo.would_fit = [](double, int) { return std::vector<std::string>{"a smaller --contention-bytes and -e"}; };
    const double need = contention_buffer_bytes(o);
    if (auto st = check_memory_on_every_node(
            {RankDemand{"the contention benchmark", need,
                        format_bytes(need) + " per rank (kernels' operands, two sets of collective buffers)"}},
            mo);
        !st)
      return fail_mpi(rank, "lins comm", st.error());
  }
  if (auto st = run_contention(o, rank); !st) return fail_mpi(rank, "lins comm", st.error());
  return finish_mpi(0);
}

}  // namespace

int run_comm(const Args& args) {
  const MpiRun mpi = init_mpi();
  const int rank = mpi.rank, world = mpi.world;
  // Every rank parses the same argv, so every rank reaches the same verdict; only rank 0 speaks.
  auto fail = [&](const std::string& msg) { return fail_mpi(rank, "lins comm", msg); };

  ParsedArgs parsed;
  if (auto code = parse_mpi_args(comm_spec(), args, rank, &parsed)) return *code;
  auto settings = read_settings(parsed);
  if (!settings) return fail(settings.error());
  const Settings& s = *settings;
  start_rank_watchdog(s.timeout_s, rank);
  auto csv = prepare_outputs(s, rank);
  if (!csv) return fail(csv.error());
  auto topo = resolve_topology(s, world);
  if (!topo) return fail(topo.error());
  auto groups = resolve_groups(s, *topo);
  if (!groups) return fail(groups.error());
  if (!s.contention.empty()) {
    std::vector<std::string> argv = {"lins", "comm"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_contention_command(s, *topo, argv, rank);
  }
  if (s.memory_check)
    if (auto st = check_comm_memory(s); !st) return fail(st.error());

  CommOptions options;
  options.mpi.progress = s.progress;
  auto world_comm =
      make_communicator(s.backend, MPI_COMM_WORLD, "world", topo->nodes > 1 ? Axis::inter : Axis::intra, options);
  if (!world_comm) return fail(world_comm.error());
  if (rank == 0) print_run_header(s, *topo, *groups, **world_comm, world);
  auto result = sweep(s, *topo, *groups, **world_comm, *csv, rank, world);
  if (!result) return fail(result.error());
  world_comm->reset();  // sub-communicators are gone; free the world one before writing files
  if (rank == 0) print_summary(s, *result);

  int code = result->total_wrong > 0 ? 1 : 0;
  std::vector<std::string> argv = {"lins", "comm"};
  argv.insert(argv.end(), args.begin(), args.end());
  const Json run = run_summary(s, *topo, *result);
  if (!s.profile.empty()) code = std::max(code, write_profile(s, *result, argv, run, rank));
  if (!s.csv.empty()) code = std::max(code, finish_csv(s, *csv, argv, run, rank));
  if (code == 1 && rank == 0)
    std::fprintf(stderr, "lins comm: %lld wrong elements (see #wrong); the collectives returned wrong data\n",
                 static_cast<long long>(result->total_wrong));
  return finish_mpi(code);
}

}  // namespace lins
