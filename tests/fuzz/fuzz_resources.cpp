// libFuzzer target: sizes from the command line into the checks made before any work. The input is split on NUL bytes
// into argv words for an option table of sizes and counts; whatever parses drives the memory verdict of lins step and
// lins comm (need against a budget), the closed-form group meshes (against their members on small meshes) and the
// schedule and memory model of the tiny model on the cluster given, however large.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/groups.h"
#include "core/model/model_spec.h"
#include "core/model/plan.h"
#include "core/model/topology.h"
#include "core/projection/memory_model.h"
#include "core/schedule/schedule.h"
#include "core/schedule/workload.h"
#include "core/util/cli.h"
#include "core/util/resource_check.h"
#include "fuzz_words.h"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void drive_memory_verdict(const lins::ParsedArgs& a) {
  auto max_bytes = a.get_size("maxbytes");
  auto limit = a.get_size("memory-limit");
  auto ranks = a.get_positive_int("ranks");
  if (!max_bytes || !limit || !ranks) return;
  const auto need = lins::comm_buffer_bytes(*max_bytes, a.flag("device"));
  lins::NodeDemand d{"the sweep", *ranks, need.host_bytes * *ranks, need.host_bytes, "send, receive, staging"};
  const lins::NodeBudget b{"host h", double(*limit), "given"};
  const lins::Status s = lins::check_node_memory(b, {d}, {"-e 1M"}, "give --no-memory-check");
  check(bool(s) == (d.node_bytes <= b.available_bytes));
  if (!s)
    check(s.error().find("needs") != std::string::npos && s.error().find("--no-memory-check") != std::string::npos);
}

void drive_cluster(const lins::ParsedArgs& a) {
  auto gpn = a.get_positive_int("gpus-per-node");
  auto nodes = a.get_positive_int("nodes");
  if (!gpn || !nodes) return;
  auto topo = lins::make_topology(*gpn, *nodes);
  if (!topo) return;
  const int world = topo->world();
  if (world <= 512) {  // the closed form against the members, for every group of consecutive blocks
    for (int block = 1; block <= world; ++block) {
      if (world % block) continue;
      for (int period = 1; period <= block; period *= 2) {
        if (block % period) continue;
        const lins::GroupSpec g{block, period};
        for (int rank : {0, world / 2, world - 1}) {
          const lins::Mesh m = lins::group_mesh(g, *topo, rank);
          int same = 0, spanned = 0, last = -1;
          for (int r : lins::group_ranks(g, rank)) {
            const int node = topo->node_of(r);
            same += node == topo->node_of(rank);
            if (node != last) ++spanned, last = node;
          }
          check(m.intra == same && m.inter == spanned);
        }
      }
    }
  }
  static const lins::ModelSpec model = lins::make_model_preset("tiny").value();
  const std::string name = a.get("plan");
  auto plan = lins::parse_plan(name.empty() ? "zero1" : name, *topo);
  if (!plan) return;
  lins::ScheduleOptions so;
  so.micro_batches = 1;
  so.rank = world - 1;
  auto sched = lins::build_schedule(model, *plan, *topo, so);
  if (!sched) return;
  lins::Workload w;
  w.model = model;
  w.seq = 16;
  w.micro_batch_size = 1;
  w.micro_batches = 1;
  w.global_batch_tokens = int64_t(w.seq) * world;
  const auto worst = lins::estimate_memory(*sched, w, {}, lins::MemoryOf::worst_rank);
  const auto mine = lins::estimate_memory(*sched, w, {}, lins::MemoryOf::schedule_rank);
  check(worst.total_bytes > 0 && mine.os_bytes <= worst.os_bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 512) return 0;
  static const lins::CommandSpec spec{"fuzz",
                                      "fuzz target",
                                      "lins fuzz [options]",
                                      {{"maxbytes", 'e', "SIZE", "64M", "largest message"},
                                       {"memory-limit", 0, "SIZE", "16G", "budget per host"},
                                       {"ranks", 0, "N", "2", "ranks on the host"},
                                       {"device", 0, "", "", "buffers on the device"},
                                       {"gpus-per-node", 0, "N", "8", "GPUs per node"},
                                       {"nodes", 0, "N", "1", "nodes"},
                                       {"plan", 0, "TEXT", "", "a plan"}},
                                      ""};
  std::vector<std::string> args = nul_separated_words(data, size);
  if (args.size() == 1 && args[0].empty()) args.clear();
  auto parsed = lins::parse_args(spec, args);
  if (!parsed) {
    check(!parsed.error().empty());
    return 0;
  }
  drive_memory_verdict(*parsed);
  drive_cluster(*parsed);
  return 0;
}
