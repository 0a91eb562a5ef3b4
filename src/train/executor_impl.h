// The executor's private state, shared by executor.cpp (set-up, the step loop over the program, statistics) and
// executor_ops.cpp (the buffer mechanics of each op purpose's rules, core/purposes.h: its buffers, its issue, the work
// its stream does after it, what its wait releases). Nothing outside src/train/executor*.cpp includes this.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/schedule/purposes.h"
#include "core/schedule/timeline.h"
#include "train/executor.h"

namespace lins {

// A range of the local buffer owned by this rank, and where it sits in the owned (optimizer) buffers. `decay`:
// AdamW's weight decay applies to the whole range (matrices and the embedding; not norm weights, not padding), the
// usual LLM practice (Megatron-LM, GPT-2/nanoGPT); owned slices are cut where that changes.
struct OwnedRange {
  int64_t local_offset = 0, elems = 0, owned_offset = 0;
  bool decay = false;
};

using ElemRange = LocalRange;

struct Executor::Impl {
  // ---- inputs -----------------------------------------------------------------------------------------------------
  const ModelSpec* spec = nullptr;
  Plan plan;
  Topology topo;
  int rank = 0;
  ComputeBackend* be = nullptr;
  ExecutorOptions opt;
  Schedule* sched = nullptr;
  LlamaModel* model = nullptr;
  std::vector<TraceEvent>* trace = nullptr;
  std::vector<ActionRecord>* actions = nullptr;
  std::vector<int>* issued = nullptr;          // this step's ops in issue order
  std::vector<Action>* comm_events = nullptr;  // this step's issues and host waits, as they happened
  SyntheticTask task;
  std::vector<Action> program;  // step_program(*sched)

  // ---- communicators: one per (group role, stream) the schedule uses, each op pointing at its own ------------------
  std::vector<std::unique_ptr<Communicator>> comms;
  std::vector<Communicator*> op_comm;  // per op

  // ---- layout -------------------------------------------------------------------------------------------------------
  int n_mod = 0;
  DType sd = DType::fp32;         // storage dtype of P, G and every collective's payload (ExecutorOptions::state_dtype)
  int64_t esize = 4;              // its bytes per element
  bool g_owned = false;           // G kept only for the owned elements (s_g > s_p, ZeRO-2)
  std::vector<OwnedRange> owned;  // this rank's owned ranges, local order
  std::vector<std::vector<ElemRange>> owner_ranges;  // per owner index: its slices, local order
  int64_t owned_elems = 0;
  // Per op: its purpose's rules under this schedule (core/purposes.h) and what it holds from its issue.
  PurposeContext purposes;
  std::vector<PurposeRule> op_rules;
  std::vector<OpHold> op_holds;
  // Where a module's backward writes its gradient in micro-batch mb: a whole-module buffer some op reads (a
  // reduce-scatter, ZeRO-2's bucket all-reduce) when grad_readers[mb][m] > 0; else the transient buffer
  // (Schedule::transient_grads), else G itself (accumulated). From gradient_readers (core/purposes.h).
  std::vector<std::vector<int>> grad_readers;
  std::vector<std::vector<int>> op_grad_modules;  // per op: the modules whose whole-module gradient it reads

  // ---- persistent state -------------------------------------------------------------------------------------------
  DeviceBuffer p_local;                  // P: [local_elems]
  DeviceBuffer g_acc;                    // G: [local_elems] or [owned_elems]
  DeviceBuffer master, mom, var;         // OS: [owned_elems] each
  DeviceBuffer g_mb;                     // transient micro-batch gradient [local_elems] (Schedule::transient_grads)
  std::vector<DeviceBuffer> persistent;  // per module: gathered P kept across steps (DeepSpeed persistent modules)
  std::vector<DeviceBuffer> hpz_part;    // per module: this rank's part of the secondary copy of P (ZeRO++, FSDP2 K)

  // ---- per-module working buffers -----------------------------------------------------------------------------------
  std::vector<DeviceBuffer> grad_full;       // [padded] one micro-batch's gradient of a module (see grad_readers)
  std::vector<int> grad_full_left;           // ops still to read grad_full[m] in this micro-batch
  std::vector<DeviceBuffer> params_compute;  // a module's parameters in the compute dtype, when storage differs

  // ---- ops in flight
  // --------------------------------------------------------------------------------------------------
  struct Flight {
    Request first;       // the work its stream does before the collective (packing a send buffer), if any
    Request collective;  // the collective itself (its counters and timing)
    Request done;        // completes when the op and the work its stream does after it are done
    bool issued = false, waited = false;
    double issue_s = 0;  // host seconds, from the step's origin
    DeviceBuffer buf;    // the gathered parameters, a packed send buffer or a broadcast payload
    DeviceBuffer quant;  // ZeRO++'s quantized values and scales (quantization_buffer_bytes), freed at the wait
  };
  std::vector<Flight> flights;  // this step's, per op
  std::vector<Flight> carried;  // the previous step's ops waited for in this one (next-step waits)

  // ---- step measurements
  // ----------------------------------------------------------------------------------------------
  int step_index = 0;
  double wait_s = 0;
  double step_origin_s = 0;
  enum class Section { forward, backward, optimizer };
  struct Span {
    Event start, end;
    Section section;
    std::string name;
  };
  std::vector<Span> spans;
  // Compute-stream events around each wait: on a backend whose waits only order streams (GPU) the host returns at
  // once, and the time the compute stream stalls between these two events is the exposed communication.
  struct WaitSpan {
    Event start, end;
  };
  std::vector<WaitSpan> wait_spans;
  Event step_event;
  // Pacing to an emulated device: each task's device seconds (0: not paced), and this step's counts.
  std::vector<double> device_task_s;
  int paced_tasks = 0, overrun_tasks = 0;
  double pace_late_s = 0;

  static double now();
  void add_trace(const std::string& name, const char* cat, double t0, double t1, int lane);
  void record_action(int position, double t0, double t1);

  // ---- buffers and elements
  // -------------------------------------------------------------------------------------------
  Result<DeviceBuffer> alloc_state(int64_t elems, MemCategory c, bool zero = true) {
    return be->allocate(elems * esize, c, zero);
  }
  Result<DeviceBuffer> alloc_f32(int64_t elems, MemCategory c, bool zero = true) {
    return be->allocate(elems * 4, c, zero);
  }
  // Storage narrower than fp32: the fp32 initial weights and the model's fp32 weight gradients go through fp32 scratch.
  bool mixed() const { return sd != DType::fp32; }
  void* at(const DeviceBuffer& b, int64_t i) const { return static_cast<char*>(b.data()) + i * esize; }
  void* local(int64_t offset) const { return at(p_local, offset); }
  const ModuleShard& shard_of(int m) const { return sched->layout.modules[static_cast<std::size_t>(m)]; }
  // The range of the local buffer op i reduces or spreads (a module's shard, or a bucket).
  ElemRange local_range(int i) const {
    return op_local_range(sched->ops[static_cast<std::size_t>(i)], sched->layout,
                          op_rules[static_cast<std::size_t>(i)]);
  }
  // Where element `a` of the local buffer, inside owned range `ow`, lies in G (owned-only or the whole local buffer).
  void* g_at_owned(const OwnedRange& ow, int64_t a) const {
    return at(g_acc, (g_owned ? ow.owned_offset : ow.local_offset) + (a - ow.local_offset));
  }

  // ---- set-up (executor.cpp)
  // --------------------------------------------------------------------------------------------
  Status init(Communicator* world);
  Status make_communicators(Communicator* world);
  Status index_ops();
  Status allocate_states();

  // ---- the step (executor.cpp)
  // --------------------------------------------------------------------------------------------
  Result<StepStats> step();
  Status run_task(int task);
  Status forward_module(int mb, int m, int task);
  Status backward_module(int mb, int m, int task);
  Status optimizer(int task);
  // The end event of task `task` begun at `start`: after its device time, slept until (or an overrun, counted).
  Event pace(int task, const Event& start);
  Result<const void*> task_params(int task, int m, int64_t* elems);
  void after_task(int task, int m);
  Result<const void*> compute_params(int m, const void* src, int64_t elems);
  double timed_wait(Request& req, const std::string& what);
  Status wait_op(int i);
  Status wait_carried(int i, bool* timed, double* exec_start, double* exec_end);
  // When op flight `f` ran on its stream (its first work to the end of its last), host seconds from the step's start.
  bool exec_interval(const Flight& f, double* start, double* end) const;
  Status finish();

  // ---- the buffer mechanics of the purposes' rules (executor_ops.cpp)
  // ---------------------------------------------------------------------
  Status issue(int i);
  Status complete(int i, Flight& f);       // on the compute side, after the wait: release what the op held
  Status allocate_held(int i, Flight& f);  // the buffer op i holds from its issue (op_holds), into f.buf
  // The work op i's stream does once the collective is in (its rule's AtCompletion); `result`: where the collective
  // left the op's range r (or this rank's slice of it).
  Request land(int i, Communicator* c, ElemRange r, void* result);
  Status issue_gather(int i, Flight& f);
  Status issue_reduce_scatter(int i, Flight& f);
  Status issue_all_reduce_g(int i, Flight& f);
  Status issue_packed_all_reduce(int i, Flight& f);
  Status issue_transient_all_reduce(int i, Flight& f);
  Status issue_update_gather(int i, Flight& f);
  Status issue_broadcast(int i, Flight& f);
  // ZeRO++: a qwZ gather (issue_gather's, with the input `send` of `part` elements), qgZ's two exchanges.
  Status issue_quantized_gather(int i, Flight& f, const void* send, int64_t part);
  Status issue_qgz_node_exchange(int i, Flight& f);
  Status issue_qgz_peer_exchange(int i, Flight& f);
  int64_t pack_owner(int owner, const ModuleShard& msh, void* payload, bool to_payload, void* stream);
  // dst += src (or dst = src) over n storage-dtype elements, on `stream` (the communication stream doing it).
  void accumulate_on(void* stream, void* dst, const void* src, int64_t n);
  void copy_on(void* stream, void* dst, const void* src, int64_t n);
};

}  // namespace lins
