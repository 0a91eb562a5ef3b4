// The NCCL backend: MPI bootstrap, collectives on the communicator's own stream ordered after the compute stream by
// events, completion events the compute stream waits on, sub-groups by ncclCommSplit; see nccl_communicator.h.
#include "gpu/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <mutex>

#include "comm/check.h"
#include "gpu/cuda_check.h"
#include "gpu/cuda_devices.h"
#include "gpu/event_timings.h"
#include "comm/mesh_comms.h"  // node_place
#include "comm/watchdog.h"

namespace lins {

int cuda_device_count() { return cuda_device_count_or_exit(); }

std::string nccl_version_string() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "NCCL (version unknown)";
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::string cuda_version_string() {
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
  cudaGetLastError();
  auto ver = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  return "CUDA runtime " + ver(rt) + ", driver " + (drv ? ver(drv) : std::string("none"));
}

std::string cuda_device_name(int device) {
  if (device < 0 || device >= cuda_device_count()) return "";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "";
  return prop.name;
}

void* device_alloc(size_t bytes) {
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
  return p;
}
void* device_alloc_or_null(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return p;
}
Result<DeviceMemory> device_memory(int device) {
  size_t free_bytes = 0, total_bytes = 0;
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return make_error("cannot read the memory of CUDA device " + std::to_string(device) + ": " + cudaGetErrorString(e));
  }
  return DeviceMemory{double(free_bytes), double(total_bytes)};
}
void device_free(void* p) {
  if (p) CUDA_CHECK(cudaFree(p));
}
void copy_to_device(void* dst, const void* src, size_t bytes) {
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
void copy_to_host(void* dst, const void* src, size_t bytes) {
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

namespace {

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::fp32:
      return ncclFloat32;
    case DType::bf16:
      return ncclBfloat16;
  }
  return ncclFloat32;  // not reached: the switch names every dtype
}

// Completion of one collective: the compute stream waits on its event; the host never blocks here.
struct NcclRequest final : Request::Impl {
  std::shared_ptr<cudaEvent_t> done;  // recorded after the collective (at group_end inside a group)
  cudaStream_t compute = nullptr;
  void wait() override { CUDA_CHECK(cudaStreamWaitEvent(compute, *done, 0)); }
};

// A CUDA stream several communicators can share.
struct NcclStream final : CommStream {
  cudaStream_t stream = nullptr;
  NcclStream() { CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)); }
  ~NcclStream() override {
    if (stream) cudaStreamDestroy(stream);
  }
};

// Timing events through gpu/event_timings.h.
struct CudaTimingApi {
  using Event = cudaEvent_t;
  Event create() {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreate(&e));
    return e;
  }
  void destroy(Event e) { cudaEventDestroy(e); }
  bool completed(Event e) {
    const cudaError_t r = cudaEventQuery(e);
    if (r == cudaErrorNotReady) (void)cudaGetLastError();  // not an error
    return r == cudaSuccess;
  }
  void synchronize(Event e) { cudaEventSynchronize(e); }
  double elapsed_s(Event a, Event b) {
    float ms = 0;
    return cudaEventElapsedTime(&ms, a, b) == cudaSuccess ? ms * 1e-3 : 0.0;
  }
};

// Completion events (no timing), reused once their last owner (a Request, a pending group) lets them go: recording an
// event again after a stream was made to wait on it does not change that wait.
struct DoneEventPool {
  std::mutex m;
  std::vector<cudaEvent_t> free;
  ~DoneEventPool() {
    for (cudaEvent_t e : free) cudaEventDestroy(e);
  }
};

std::shared_ptr<cudaEvent_t> make_done_event(const std::shared_ptr<DoneEventPool>& pool) {
  cudaEvent_t e = nullptr;
  {
    std::lock_guard<std::mutex> lock(pool->m);
    if (!pool->free.empty()) e = pool->free.back(), pool->free.pop_back();
  }
  if (!e) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  std::weak_ptr<DoneEventPool> weak = pool;
  return std::shared_ptr<cudaEvent_t>(new cudaEvent_t(e), [weak](cudaEvent_t* p) {
    if (auto alive = weak.lock()) {
      std::lock_guard<std::mutex> lock(alive->m);
      alive->free.push_back(*p);
    } else {
      cudaEventDestroy(*p);
    }
    delete p;
  });
}

}  // namespace

struct NcclCommunicator::Events {
  EventTimings<CudaTimingApi, kCollKindCount> timings;
  std::shared_ptr<DoneEventPool> done = std::make_shared<DoneEventPool>();
};

Result<std::unique_ptr<NcclCommunicator>> NcclCommunicator::create(MPI_Comm comm, std::string name, Axis axis,
                                                                   CUstream_st* compute_stream) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  const NodePlace here = node_place(comm);  // its local rank picks the device
  const int devices = cuda_device_count();
  // Every rank must agree before anyone enters ncclCommInitRank, or the others would wait there forever.
  int have = devices > 0, all_have = 0;
  MPI_CHECK(MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_LAND, comm));
  if (!all_have)
    return make_error(
        "the nccl backend needs a CUDA device on every rank, and at least one rank has none "
        "(no driver or no visible device); use --backend mpi on machines without GPUs");
  // Before ncclCommInitRank, which would stop at "Duplicate GPU detected" with two ranks on one device.
  if (auto s = check_one_rank_per_gpu(comm, here, devices); !s)
    return make_error("the nccl backend: " + s.error() + "; or use --backend mpi");
  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator());
  c->rank_ = rank;
  c->size_ = size;
  c->device_ = here.local_rank % devices;
  c->name_ = std::move(name);
  c->axis_ = axis;
  c->compute_ = compute_stream;
  CUDA_CHECK(cudaSetDevice(c->device_));
  ncclUniqueId id;
  if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm));
  NCCL_CHECK(ncclCommInitRank(&c->comm_, size, id, rank));
  c->stream_owner_ = std::make_shared<NcclStream>();
  c->stream_ = static_cast<NcclStream*>(c->stream_owner_.get())->stream;
  CUDA_CHECK(cudaMalloc(&c->barrier_buf_, sizeof(float)));
  c->events_ = std::make_unique<Events>();
  CUDA_CHECK(cudaEventCreateWithFlags(&c->ready_, cudaEventDisableTiming));
  c->register_with_watchdog();
  return c;
}

void NcclCommunicator::register_with_watchdog() {
  ncclComm* comm = comm_;
  const std::string name = name_;
  watchdog_check_ = add_watchdog_check([comm, name]() -> std::string {
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &async) != ncclSuccess || async == ncclSuccess || async == ncclInProgress)
      return "";
    return "NCCL communicator '" + name + "' failed asynchronously: " + ncclGetErrorString(async) + " (" +
           ncclGetLastError(comm) + ")";
  });
  watchdog_abort_ = add_watchdog_abort_action([comm]() { ncclCommAbort(comm); });
}

NcclCommunicator::~NcclCommunicator() {
  // Teardown must not abort: the process may be exiting after an error elsewhere. Collectives still deferred to an
  // open group's end are dropped with their events (a wait on an event never recorded returns at once).
  NcclGroupState::current().leave(this);
  remove_watchdog_hooks(watchdog_check_);
  remove_watchdog_hooks(watchdog_abort_);
  if (stream_) cudaStreamSynchronize(stream_);
  if (events_) settle_timings(false);
  events_.reset();  // destroys the timing events; pooled completion events go with their last owner
  if (ready_) cudaEventDestroy(ready_);
  if (barrier_buf_) cudaFree(barrier_buf_);
  if (comm_) ncclCommDestroy(comm_);
  stream_owner_.reset();  // destroys the stream when no other communicator runs on it
}

// Orders the collective after the work already issued on the compute stream; returns its timing start event.
cudaEvent_t NcclCommunicator::begin() {
  CUDA_CHECK(cudaEventRecord(ready_, compute_));
  CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));  // the wait keeps the state recorded now
  cudaEvent_t start = events_->timings.acquire();
  CUDA_CHECK(cudaEventRecord(start, stream_));
  return start;
}

Request NcclCommunicator::finish(CollKind kind, double message_bytes, CUevent_st* start) {
  const int k = static_cast<int>(kind);
  counters_.calls[k] += 1;
  counters_.message_bytes[k] += message_bytes;
  auto req = std::make_shared<NcclRequest>();
  req->compute = compute_;
  req->done = make_done_event(events_->done);
  if (NcclGroupState& group = NcclGroupState::current(); group.open()) {
    // Inside the thread's group (opened on this communicator or another) NCCL enqueues the kernel at the outermost
    // group_end; the events are recorded then (group_flush).
    group_pending_.emplace_back(kind, start);
    group_done_.push_back(req->done);
    group.join(this);
  } else {
    CUDA_CHECK(cudaEventRecord(*req->done, stream_));
    cudaEvent_t stop = events_->timings.acquire();
    CUDA_CHECK(cudaEventRecord(stop, stream_));
    events_->timings.push(size_t(k), start, stop);
    settle_timings(false);
  }
  return Request(std::move(req));
}

// Adds the elapsed time of finished collectives to counters_, in stream order (all of them, waiting, when block is
// set).
void NcclCommunicator::settle_timings(bool block) { events_->timings.settle(block, counters_.seconds); }

Request NcclCommunicator::all_gather(const void* send, void* recv, int64_t send_count, DType dtype) {
  cudaEvent_t start = begin();
  NCCL_CHECK(ncclAllGather(send, recv, size_t(send_count), nccl_type(dtype), comm_, stream_));
  return finish(CollKind::all_gather, double(send_count) * size_ * dtype_bytes(dtype), start);
}

Request NcclCommunicator::reduce_scatter(const void* send, void* recv, int64_t recv_count, DType dtype) {
  cudaEvent_t start = begin();
  NCCL_CHECK(ncclReduceScatter(send, recv, size_t(recv_count), nccl_type(dtype), ncclSum, comm_, stream_));
  return finish(CollKind::reduce_scatter, double(recv_count) * size_ * dtype_bytes(dtype), start);
}

Request NcclCommunicator::all_reduce(const void* send, void* recv, int64_t count, DType dtype) {
  cudaEvent_t start = begin();
  NCCL_CHECK(ncclAllReduce(send, recv, size_t(count), nccl_type(dtype), ncclSum, comm_, stream_));
  return finish(CollKind::all_reduce, double(count) * dtype_bytes(dtype), start);
}

Request NcclCommunicator::broadcast(void* buf, int64_t count, DType dtype, int root) {
  if (root < 0 || root >= size_)
    comm_fatal(__FILE__, __LINE__, "NcclCommunicator::broadcast",
               "root " + std::to_string(root) + " is outside the group of " + std::to_string(size_) + " ranks");
  cudaEvent_t start = begin();
  NCCL_CHECK(ncclBroadcast(buf, buf, size_t(count), nccl_type(dtype), root, comm_, stream_));
  return finish(CollKind::broadcast, double(count) * dtype_bytes(dtype), start);
}

Request NcclCommunicator::all_to_all(const void* send, void* recv, int64_t count, DType dtype) {
  if (send == recv)
    comm_fatal(__FILE__, __LINE__, "NcclCommunicator::all_to_all",
               "send and receive buffers are the same; all_to_all is not in place (give it a separate receive buffer)");
  cudaEvent_t start = begin();
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
  NCCL_CHECK(ncclAlltoAll(send, recv, size_t(count), nccl_type(dtype), comm_, stream_));
#else
  const size_t block = size_t(count) * dtype_bytes(dtype);
  NCCL_CHECK(ncclGroupStart());
  for (int peer = 0; peer < size_; ++peer) {
    NCCL_CHECK(
        ncclSend(static_cast<const char*>(send) + peer * block, size_t(count), nccl_type(dtype), peer, comm_, stream_));
    NCCL_CHECK(
        ncclRecv(static_cast<char*>(recv) + peer * block, size_t(count), nccl_type(dtype), peer, comm_, stream_));
  }
  NCCL_CHECK(ncclGroupEnd());
#endif
  return finish(CollKind::all_to_all, message_bytes(CollKind::all_to_all, count, size_, dtype_bytes(dtype)), start);
}

void NcclCommunicator::group_start() {
  if (NcclGroupState::current().start()) NCCL_CHECK(ncclGroupStart());
}

void NcclCommunicator::group_end() {
  NcclGroupState& group = NcclGroupState::current();
  switch (group.end()) {
    case NcclGroupState::End::unmatched:
      comm_fatal(__FILE__, __LINE__, "NcclCommunicator::group_end",
                 "group_end without a matching group_start on this thread (on any NCCL communicator)");
    case NcclGroupState::End::inner:
      return;
    case NcclGroupState::End::outermost:
      break;
  }
  NCCL_CHECK(ncclGroupEnd());
  for (NcclGroupMember* m : group.take_members()) m->group_flush();
}

void NcclCommunicator::require_no_open_group(const char* what) const {
  const int depth = NcclGroupState::current().depth();
  if (depth > 0)
    comm_fatal(__FILE__, __LINE__, what,
               "called on communicator '" + name_ + "' inside an open NCCL group (" + std::to_string(depth) +
                   " group_start without group_end on this thread): the group's collectives are enqueued only at its "
                   "group_end; call group_end first");
}

void NcclCommunicator::group_flush() {
  if (group_pending_.empty()) return;  // nothing of this communicator to record or time
  cudaEvent_t stop = events_->timings.acquire();
  CUDA_CHECK(cudaEventRecord(stop, stream_));
  for (auto& done : group_done_) CUDA_CHECK(cudaEventRecord(*done, stream_));
  // The fused collectives share one stop; each keeps its own start.
  for (size_t i = 0; i < group_pending_.size(); ++i) {
    cudaEvent_t own_stop = stop;
    if (i + 1 < group_pending_.size()) {
      own_stop = events_->timings.acquire();
      CUDA_CHECK(cudaEventRecord(own_stop, stream_));
    }
    events_->timings.push(size_t(group_pending_[i].first), group_pending_[i].second, own_stop);
  }
  group_pending_.clear();
  group_done_.clear();
}

void NcclCommunicator::synchronize() {
  require_no_open_group("NcclCommunicator::synchronize");
  // The host's only wait on this communicator's collectives: a hung or dead peer shows up here (--timeout).
  WatchdogScope watched("NCCL collectives of communicator '" + name_ + "'");
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  settle_timings(true);
}

void NcclCommunicator::barrier() {
  require_no_open_group("NcclCommunicator::barrier");
  // NCCL has no barrier: a one-element all-reduce every rank must join, then wait for it on the host.
  CUDA_CHECK(cudaEventRecord(ready_, compute_));  // ordered after the compute stream
  CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
  NCCL_CHECK(ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclFloat32, ncclSum, comm_, stream_));
  synchronize();
}

std::shared_ptr<CommStream> NcclCommunicator::make_stream() {
  CUDA_CHECK(cudaSetDevice(device_));
  return std::make_shared<NcclStream>();
}

Request NcclCommunicator::then(std::function<void(void*)> work) {
  // Inside an open group the collectives issued before are enqueued only at group_end: `work` would run before them.
  require_no_open_group("NcclCommunicator::then");
  CUDA_CHECK(cudaEventRecord(ready_, compute_));  // after the compute issued so far, as a collective
  CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
  work(stream_);
  auto req = std::make_shared<NcclRequest>();
  req->compute = compute_;
  req->done = make_done_event(events_->done);
  CUDA_CHECK(cudaEventRecord(*req->done, stream_));
  return Request(std::move(req));
}

void NcclCommunicator::stream_wait(const Request& r) {
  auto* impl = dynamic_cast<NcclRequest*>(r.impl());
  if (!impl) return;  // a completed (default) request
  CUDA_CHECK(cudaStreamWaitEvent(stream_, *impl->done, 0));
}

Result<std::unique_ptr<Communicator>> NcclCommunicator::split(int color, int key, std::string name, Axis axis,
                                                              std::shared_ptr<CommStream> stream) {
  require_no_open_group("NcclCommunicator::split");
  synchronize();
  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator());
  NCCL_CHECK(ncclCommSplit(comm_, color, key, &c->comm_, nullptr));  // inherits the parent's config
  if (!c->comm_) return make_error("ncclCommSplit returned no communicator for color " + std::to_string(color));
  NCCL_CHECK(ncclCommUserRank(c->comm_, &c->rank_));
  NCCL_CHECK(ncclCommCount(c->comm_, &c->size_));
  c->device_ = device_;
  c->name_ = std::move(name);
  c->axis_ = axis;
  c->compute_ = compute_;
  if (stream && !dynamic_cast<NcclStream*>(stream.get()))
    return make_error("NcclCommunicator::split: the stream given was not made by an NCCL communicator");
  c->stream_owner_ = stream ? std::move(stream) : std::make_shared<NcclStream>();
  c->stream_ = static_cast<NcclStream*>(c->stream_owner_.get())->stream;
  CUDA_CHECK(cudaMalloc(&c->barrier_buf_, sizeof(float)));
  c->events_ = std::make_unique<Events>();
  CUDA_CHECK(cudaEventCreateWithFlags(&c->ready_, cudaEventDisableTiming));
  c->register_with_watchdog();
  return std::unique_ptr<Communicator>(std::move(c));
}

}  // namespace lins
