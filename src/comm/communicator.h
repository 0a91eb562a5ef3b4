// The Communicator interface (DESIGN.md): collectives over one group of ranks, counted in elements of a dtype, with
// asynchronous handles and per-kind counters of message bytes and time. Backends: MPI on host memory (the CPU path
// and the tests' oracle) and NCCL on device memory (own stream, ordered after compute by CUDA events).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "core/result.h"
#include "core/schedule.h"  // CollKind, DType, Axis

namespace lins {

// Completion of an asynchronous collective. wait() returns once work issued afterwards by the caller (host code
// on the CPU backend, the compute stream on the GPU backend) sees the result. A default Request is complete.
class Request {
 public:
  struct Impl {
    virtual ~Impl() = default;
    virtual void wait() = 0;
  };
  Request() = default;
  explicit Request(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  void wait() {
    if (impl_) impl_->wait();
    impl_.reset();
  }
  bool pending() const { return impl_ != nullptr; }

 private:
  std::shared_ptr<Impl> impl_;
};

// Per collective kind: calls, message bytes (the schedule's CommOp::bytes(): gathered size for all_gather, input
// size for reduce_scatter, buffer for all_reduce, payload for broadcast) and seconds from issue to completion.
struct CommCounters {
  std::array<int64_t, kCollKindCount> calls{};
  std::array<double, kCollKindCount> message_bytes{};
  std::array<double, kCollKindCount> seconds{};
  double total_message_bytes() const;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;  // index inside this group
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;  // the group's role or mesh axis, e.g. "p_shard"
  virtual Axis axis() const = 0;                // intra when the group lies inside one node

  // recv[size * send_count] = concatenation of every rank's send[send_count], in rank order.
  virtual Request all_gather(const void* send, void* recv, int64_t send_count, DType dtype) = 0;
  // recv[recv_count] = this rank's slice of the element-wise sum of every rank's send[size * recv_count].
  virtual Request reduce_scatter(const void* send, void* recv, int64_t recv_count, DType dtype) = 0;
  // recv[count] = element-wise sum of every rank's send[count]; send == recv is in place.
  virtual Request all_reduce(const void* send, void* recv, int64_t count, DType dtype) = 0;
  // buf[count] on every rank = buf[count] of rank `root` (index inside this group).
  virtual Request broadcast(void* buf, int64_t count, DType dtype, int root) = 0;
  virtual void barrier() = 0;
  // Fuse the collectives issued between them (NCCL group semantics; a no-op where a backend has none).
  virtual void group_start() {}
  virtual void group_end() {}
  // Blocks the host until every collective issued so far has completed; afterwards counters() include their time.
  virtual void synchronize() {}
  // Collective over this group (MPI_Comm_split / ncclCommSplit): one new communicator per distinct color, ranks
  // ordered by key; `name` and `axis` label it. Backends without sub-groups return an error.
  virtual Result<std::unique_ptr<Communicator>> split(int color, int key, std::string name, Axis axis) {
    (void)color, (void)key, (void)name, (void)axis;
    return make_error("this communicator backend cannot split into sub-groups");
  }
  virtual const char* backend() const { return "unknown"; }  // "mpi", "nccl"

  const CommCounters& counters() const { return counters_; }
  void reset_counters() { counters_ = CommCounters{}; }

 protected:
  CommCounters counters_;
};

}  // namespace lins
