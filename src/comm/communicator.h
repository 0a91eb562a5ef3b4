// The Communicator interface: collectives over one group of ranks, counted in elements of a dtype, with asynchronous
// handles and per-kind counters of message bytes and time. Backends: MPI on host memory (the CPU path and the tests'
// oracle) and NCCL on device memory (ordered after compute by CUDA events). Each communicator runs its collectives on
// a communication stream, one at a time in issue order; several communicators may share one stream (CommStream), and
// work other than collectives (packing a send buffer, adding what arrived) can be queued on it with then().
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/model/vocabulary.h"  // CollKind, DType, Axis
#include "core/util/result.h"

namespace lins {

// Completion of an asynchronous collective. wait() returns once work issued afterwards by the caller (host code
// on the CPU backend, the compute stream on the GPU backend) sees the result. A default Request is complete.
class Request {
 public:
  struct Impl {
    virtual ~Impl() = default;
    virtual void wait() = 0;
    // Host seconds (steady clock) when the work started and ended on its stream, once it has completed; false when
    // the backend does not time it on the host (NCCL: device events only).
    virtual bool executed(double* start_s, double* end_s) const {
      (void)start_s, (void)end_s;
      return false;
    }
  };
  Request() = default;
  explicit Request(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  // Waits once; later calls return at once. The request keeps its timing after the wait.
  void wait() {
    if (impl_ && !waited_) impl_->wait();
    waited_ = true;
  }
  bool pending() const { return impl_ != nullptr && !waited_; }
  bool executed(double* start_s, double* end_s) const { return impl_ && impl_->executed(start_s, end_s); }
  Impl* impl() const { return impl_.get(); }

 private:
  std::shared_ptr<Impl> impl_;
  bool waited_ = false;
};

// A communication stream: communicators created on the same one run their collectives (and then() work) one at a time
// in issue order, as collectives on one NCCL communicator or one process group do. Made by Communicator::make_stream.
struct CommStream {
  virtual ~CommStream() = default;
};

// Per collective kind: calls, message bytes (message_bytes() of core/collectives.h, the schedule's CommOp::bytes():
// gathered size for all_gather, input size for reduce_scatter, buffer for all_reduce and all_to_all, payload for
// broadcast) and seconds from issue to completion.
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
  // recv[size * count]: block j is rank j's send[rank() * count .. + count]; each rank sends `count` elements to
  // every rank (itself included). Not in place.
  virtual Request all_to_all(const void* send, void* recv, int64_t count, DType dtype) = 0;
  // Any collective by its kind, with the count of its row (core/collectives.h): one call site for the tools that
  // run every kind (lins comm, bench_comm). Broadcast runs in place on `recv` from `root`; `send` is ignored.
  Request run(CollKind kind, const void* send, void* recv, int64_t count, DType dtype, int root = 0);
  virtual void barrier() = 0;
  // Fuse the collectives issued between them (NCCL group semantics; a no-op where a backend has none).
  virtual void group_start() {}
  virtual void group_end() {}
  // Blocks the host until every collective issued so far has completed; afterwards counters() include their time.
  virtual void synchronize() {}
  // Collective over this group (MPI_Comm_split / ncclCommSplit): one new communicator per distinct color, ranks
  // ordered by key; `name` and `axis` label it. It runs on `stream` (from make_stream of this backend), or on a stream
  // of its own when null. Backends without sub-groups return an error.
  virtual Result<std::unique_ptr<Communicator>> split(int color, int key, std::string name, Axis axis,
                                                      std::shared_ptr<CommStream> stream = nullptr) {
    (void)color, (void)key, (void)name, (void)axis, (void)stream;
    return make_error("this communicator backend cannot split into sub-groups");
  }
  // A new communication stream for split().
  virtual std::shared_ptr<CommStream> make_stream() { return nullptr; }
  // Work on this communicator's stream, after the collectives and work issued on that stream so far and before
  // later ones: `work(stream)` packs a send buffer, adds what a collective received, and so on. MPI backend: run by
  // the stream's progress thread, stream = nullptr. NCCL backend: called at once, on the calling thread, with the
  // CUDA stream to enqueue device work on. The request completes after the work.
  virtual Request then(std::function<void(void* stream)> work) {
    work(nullptr);
    return Request();
  }
  // Later collectives and work on this communicator's stream start only after `r` completes (a request of any
  // communicator of the same backend): one stream reading what another produced, without the caller waiting.
  virtual void stream_wait(const Request& r) { const_cast<Request&>(r).wait(); }
  virtual const char* backend() const { return "unknown"; }  // "mpi", "nccl"

  const CommCounters& counters() const { return counters_; }
  void reset_counters() { counters_ = CommCounters{}; }

 protected:
  CommCounters counters_;
};

}  // namespace lins
