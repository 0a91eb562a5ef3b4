// The MPI backend of Communicator: collectives on host memory over one MPI communicator (the CPU path of the
// training step and the oracle of the tests). fp32 maps to MPI_FLOAT; bf16 travels as MPI_UINT16_T and is summed
// by a user MPI_Op that adds in fp32 and rounds to nearest even.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/util/names.h"
#include "core/util/result.h"

namespace lins {

// How asynchronous collectives make progress.
enum class MpiProgress {
  // A thread per communication stream runs the blocking collectives (and then() work) of the communicators on that
  // stream in issue order (the default; needs MPI_THREAD_MULTIPLE). Why: the blocking calls use Open MPI's tuned
  // algorithms (the nonblocking ones go through libnbc, which is slower at large sizes), and a thread progresses the
  // collective while the caller computes, whereas MPI_I* collectives only move when the caller enters MPI, so they
  // would not truly overlap compute.
  thread,
  // MPI_Iallgather & co., completed by MPI_Wait in Request::wait (any thread level). There is no stream to queue work
  // on: then() and stream_wait() complete what they depend on at once, on the calling thread.
  nonblocking,
};
// --mpi-progress of `lins comm` and `lins step`, and their provenance.
inline constexpr NameTable<MpiProgress, 2> kMpiProgressNames{
    "progress mode",
    {{
        {MpiProgress::thread, "thread", "", "a progress thread per communication stream"},
        {MpiProgress::nonblocking, "nonblocking", "", "MPI_I* collectives"},
    }}};
static_assert(kMpiProgressNames.complete(MpiProgress::nonblocking));
const char* mpi_progress_name(MpiProgress p);

struct MpiStream;  // a progress thread and its queue (defined in the .cpp)

struct MpiCommOptions {
  MpiProgress progress = MpiProgress::thread;  // falls back to nonblocking below MPI_THREAD_MULTIPLE
  std::shared_ptr<CommStream> stream;          // the stream to run on (an MpiStream); null: a stream of its own
};

// The bf16 sum as an MPI_Op (created on first use, freed at MPI_Finalize); elements are MPI_UINT16_T.
MPI_Op mpi_bf16_sum_op();
MPI_Datatype mpi_datatype(DType dtype);

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates `comm` (collective over it); the duplicate is freed when this object is destroyed, which must
  // happen before MPI_Finalize.
  static Result<std::unique_ptr<MpiCommunicator>> create(MPI_Comm comm, std::string name, Axis axis,
                                                         MpiCommOptions options = {});
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  Axis axis() const override { return axis_; }
  const char* backend() const override { return "mpi"; }
  MpiProgress progress() const { return options_.progress; }
  MPI_Comm comm() const { return comm_; }  // the duplicate; do not issue collectives on it while requests pend

  // In place: all_gather with send == recv + rank * send_count elements, reduce_scatter with
  // send + rank * recv_count elements == recv (NCCL's conventions), all_reduce with send == recv. Buffers must stay
  // valid, and unread/unwritten by the caller, until the request is waited for.
  Request all_gather(const void* send, void* recv, int64_t send_count, DType dtype) override;
  Request reduce_scatter(const void* send, void* recv, int64_t recv_count, DType dtype) override;
  Request all_reduce(const void* send, void* recv, int64_t count, DType dtype) override;
  Request broadcast(void* buf, int64_t count, DType dtype, int root) override;
  Request all_to_all(const void* send, void* recv, int64_t count, DType dtype) override;
  void barrier() override;
  void synchronize() override;
  Result<std::unique_ptr<Communicator>> split(int color, int key, std::string name, Axis axis,
                                              std::shared_ptr<CommStream> stream = nullptr) override;
  std::shared_ptr<CommStream> make_stream() override;
  Request then(std::function<void(void* stream)> work) override;
  void stream_wait(const Request& r) override;

  struct Task;  // one collective, piece of work or stream wait (defined in the .cpp)

 private:
  MpiCommunicator() = default;
  Request submit(std::shared_ptr<Task> task);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::string name_;
  Axis axis_ = Axis::intra;
  MpiCommOptions options_;
  std::shared_ptr<MpiStream> stream_;  // progress thread (MpiProgress::thread), maybe shared with other communicators
  std::vector<std::weak_ptr<Task>> pending_;  // nonblocking progress: issued, maybe not yet completed
  std::shared_ptr<int> alive_;                // requests check it before touching counters_ after destruction
};

}  // namespace lins
