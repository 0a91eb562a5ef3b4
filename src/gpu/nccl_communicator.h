// The NCCL backend of Communicator: collectives on device memory on the communicator's own CUDA stream, ordered
// after a compute stream by CUDA events; Request::wait makes the compute stream wait for the collective's
// completion event (the host does not block). Built only with CUDA and NCCL, into the GPU plugin (comm/gpu_plugin.h);
// this header needs neither.
#pragma once

#include <mpi.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/gpu_plugin.h"
#include "gpu/nccl_group.h"
#include "core/util/result.h"

struct CUstream_st;  // cudaStream_t
struct CUevent_st;   // cudaEvent_t
struct ncclComm;     // ncclComm_t

namespace lins {

// Devices visible to this process; 0 when the machine has no GPU (cudaErrorNoDevice, or no driver and no NVIDIA
// device node). Any other cudaGetDeviceCount error (a broken or too old driver) prints it and exits with status 1:
// see gpu/cuda_devices.h.
int cuda_device_count();
// "NCCL 2.28.9", "CUDA runtime 13.0, driver 13.0", the name of device `device` ("" when none).
std::string nccl_version_string();
std::string cuda_version_string();
std::string cuda_device_name(int device);
// Device memory of the current device for benchmarks and tests; errors abort through CUDA_CHECK.
void* device_alloc(size_t bytes);
// The same without aborting: nullptr when cudaMalloc fails (the error is cleared).
void* device_alloc_or_null(size_t bytes);
// Free and total bytes of device `device` (cudaMemGetInfo after cudaSetDevice); an error names the CUDA error.
Result<DeviceMemory> device_memory(int device);
void device_free(void* p);
void copy_to_device(void* dst, const void* src, size_t bytes);  // synchronous
void copy_to_host(void* dst, const void* src, size_t bytes);    // synchronous

class NcclCommunicator final : public Communicator, private NcclGroupMember {
 public:
  // Collective over `comm`: local rank through MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), cudaSetDevice(local rank %
  // device count), ncclGetUniqueId on rank 0, MPI_Bcast, ncclCommInitRank. Every rank returns the same error when
  // any rank has no device. `compute_stream` may be null (the legacy default stream).
  static Result<std::unique_ptr<NcclCommunicator>> create(MPI_Comm comm, std::string name, Axis axis,
                                                          CUstream_st* compute_stream);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  Axis axis() const override { return axis_; }
  const char* backend() const override { return "nccl"; }
  int device() const { return device_; }
  CUstream_st* stream() const { return stream_; }
  CUstream_st* compute_stream() const { return compute_; }
  void set_compute_stream(CUstream_st* compute) { compute_ = compute; }
  ncclComm* comm() const { return comm_; }

  // Device pointers. In place as NCCL defines it (all_gather send == recv + rank * send_count, reduce_scatter
  // recv == send + rank * recv_count, all_reduce send == recv).
  Request all_gather(const void* send, void* recv, int64_t send_count, DType dtype) override;
  Request reduce_scatter(const void* send, void* recv, int64_t recv_count, DType dtype) override;
  Request all_reduce(const void* send, void* recv, int64_t count, DType dtype) override;
  Request broadcast(void* buf, int64_t count, DType dtype, int root) override;
  // ncclAlltoAll from NCCL 2.28; before it, one ncclSend and one ncclRecv per peer in a group, as nccl-tests'
  // alltoall.cu does.
  Request all_to_all(const void* send, void* recv, int64_t count, DType dtype) override;
  // Host-blocking: every collective issued so far has completed on every rank of the group.
  void barrier() override;
  // NCCL's group is the calling thread's (NcclGroupState), not this communicator's: between group_start and the
  // matching group_end on any NcclCommunicator, collectives on every communicator of the thread are fused and only
  // enqueued at the outermost group_end, which then records their completion events. barrier(), synchronize(),
  // split() and then() inside an open group are errors (fatal): the collectives they would wait for, or run after,
  // are not enqueued yet.
  void group_start() override;
  void group_end() override;
  void synchronize() override;
  Result<std::unique_ptr<Communicator>> split(int color, int key, std::string name, Axis axis,
                                              std::shared_ptr<CommStream> stream = nullptr) override;
  std::shared_ptr<CommStream> make_stream() override;
  Request then(std::function<void(void* stream)> work) override;
  void stream_wait(const Request& r) override;

 private:
  NcclCommunicator() = default;
  Request finish(CollKind kind, double message_bytes, CUevent_st* start);
  void group_flush() override;  // records the events of the collectives deferred to the group's end
  // Fatal when the thread has an open group: `what` waits for collectives that group has not enqueued yet.
  void require_no_open_group(const char* what) const;
  void settle_timings(bool block);
  // Orders the next collective after the compute stream's work so far; returns its start event, recorded.
  CUevent_st* begin();
  // Lets the watchdog poll ncclCommGetAsyncError and call ncclCommAbort before it ends the job.
  void register_with_watchdog();

  ncclComm* comm_ = nullptr;
  int watchdog_check_ = 0, watchdog_abort_ = 0;  // hook ids (0 = none)
  int rank_ = 0, size_ = 1, device_ = 0;
  std::string name_;
  Axis axis_ = Axis::intra;
  std::shared_ptr<CommStream> stream_owner_;  // owns stream_ (maybe shared with other communicators)
  CUstream_st* stream_ = nullptr;             // collectives run here
  CUstream_st* compute_ = nullptr;            // they start after the work issued on it before them
  CUevent_st* ready_ = nullptr;               // "the compute stream got here", recorded again before every collective
  std::vector<std::pair<CollKind, CUevent_st*>> group_pending_;  // started inside the thread's open group
  std::vector<std::shared_ptr<CUevent_st*>> group_done_;         // completion events to record at group_end
  struct Events;                    // the pool and the timing queue (gpu/event_timings.h), CUDA types inside
  std::unique_ptr<Events> events_;  // made with the communicator
  float* barrier_buf_ = nullptr;    // one device float for barrier()
};

}  // namespace lins
