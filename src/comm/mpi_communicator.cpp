// The MPI backend: blocking collectives on a progress thread per communication stream (or MPI_I* collectives),
// counters per collective kind, and the bf16 sum as a user MPI_Op; see mpi_communicator.h.
#include "comm/mpi_communicator.h"

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "comm/check.h"
#include "comm/watchdog.h"
#include "core/util/bf16.h"

namespace lins {

const char* mpi_progress_name(MpiProgress p) { return kMpiProgressNames.name(p); }

namespace {

void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0, n = *len; i < n; ++i) b[i] = bf16_add(a[i], b[i]);
}

MPI_Op g_bf16_op = MPI_OP_NULL;
std::once_flag g_bf16_once;

// Frees the op when MPI_Finalize deletes MPI_COMM_SELF's attributes.
int free_bf16_op(MPI_Comm, int, void*, void*) {
  if (g_bf16_op != MPI_OP_NULL) MPI_Op_free(&g_bf16_op);
  return MPI_SUCCESS;
}

}  // namespace

MPI_Op mpi_bf16_sum_op() {
  std::call_once(g_bf16_once, [] {
    MPI_CHECK(MPI_Op_create(&bf16_sum, /*commute=*/1, &g_bf16_op));
    int key = MPI_KEYVAL_INVALID;
    MPI_CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &free_bf16_op, &key, nullptr));
    MPI_CHECK(MPI_Comm_set_attr(MPI_COMM_SELF, key, nullptr));
  });
  return g_bf16_op;
}

MPI_Datatype mpi_datatype(DType dtype) {
  switch (dtype) {
    case DType::fp32:
      return MPI_FLOAT;
    case DType::bf16:
      return MPI_UINT16_T;  // summed by mpi_bf16_sum_op
  }
  return MPI_DATATYPE_NULL;
}

namespace {
MPI_Op sum_op(DType dtype) {
  switch (dtype) {
    case DType::fp32:
      return MPI_SUM;
    case DType::bf16:
      return mpi_bf16_sum_op();
  }
  return MPI_OP_NULL;
}
}  // namespace

namespace {
double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

struct MpiCommunicator::Task {
  enum class Type { collective, barrier, marker, work, stream_wait } type = Type::collective;
  MPI_Comm comm = MPI_COMM_NULL;  // the communicator it runs on (a stream may serve several)
  CollKind kind = CollKind::all_gather;
  const void* send = nullptr;
  void* recv = nullptr;
  int count = 0;  // the call's count: per rank, per peer or of the buffer, as its row says (core/collectives.h)
  DType dtype = DType::fp32;
  int root = 0;
  bool rs_in_place = false;  // reduce_scatter in place: MPI leaves the slice at the start; move it to rank's slot
  void* rs_slice = nullptr;  // ... which is this (the caller's recv)
  std::function<void(void*)> work;              // Type::work
  std::shared_ptr<Task> waited_for;             // Type::stream_wait: the stream waits for this task
  double issue_s = 0, start_s = 0, done_s = 0;  // steady-clock seconds
  std::atomic<bool> done{false};
  MPI_Request request = MPI_REQUEST_NULL;  // nonblocking progress
};

namespace {
// How long the progress thread and a waiter poll (yielding the core) before sleeping on a futex: a back-to-back
// collective, or one that ends soon, then costs no wake-up (about 5 us each way on Linux).
constexpr auto kSpin = std::chrono::microseconds(20);

void wait_done(const MpiCommunicator::Task& t) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  while (!t.done.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  t.done.wait(false, std::memory_order_acquire);
}

// The blocking call of one task (progress thread, or the caller in nonblocking mode for work and waits).
void run_task(MpiCommunicator::Task& t) {
  using Type = MpiCommunicator::Task::Type;
  switch (t.type) {
    case Type::marker:
      return;
    case Type::barrier:
      MPI_CHECK(MPI_Barrier(t.comm));
      return;
    case Type::work:
      t.work(nullptr);
      return;
    case Type::stream_wait:
      wait_done(*t.waited_for);
      return;
    case Type::collective:
      break;
  }
  const MPI_Datatype type = mpi_datatype(t.dtype);
  switch (t.kind) {
    case CollKind::all_gather:
      MPI_CHECK(MPI_Allgather(t.send, t.count, type, t.recv, t.count, type, t.comm));
      break;
    case CollKind::reduce_scatter:
      MPI_CHECK(MPI_Reduce_scatter_block(t.send, t.recv, t.count, type, sum_op(t.dtype), t.comm));
      if (t.rs_in_place && t.rs_slice != t.recv)
        std::memmove(t.rs_slice, t.recv, size_t(t.count) * dtype_bytes(t.dtype));
      break;
    case CollKind::all_reduce:
      MPI_CHECK(MPI_Allreduce(t.send, t.recv, t.count, type, sum_op(t.dtype), t.comm));
      break;
    case CollKind::broadcast:
      MPI_CHECK(MPI_Bcast(t.recv, t.count, type, t.root, t.comm));
      break;
    case CollKind::all_to_all:
      MPI_CHECK(MPI_Alltoall(t.send, t.count, type, t.recv, t.count, type, t.comm));
      break;
  }
}

void finish_task(MpiCommunicator::Task& t) {
  t.done_s = steady_seconds();
  t.done.store(true, std::memory_order_release);
  t.done.notify_all();
}

}  // namespace

// A progress thread and its queue: the tasks of every communicator on this stream, run one at a time in issue order.
struct MpiStream final : CommStream {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<MpiCommunicator::Task>> queue;
  bool stop = false;
  std::atomic<int64_t> pushed{0};  // tasks ever queued: lets the thread spin briefly without taking the lock
  std::thread thread;

  MpiStream() {
    thread = std::thread([this] {
      int64_t taken = 0;
      while (true) {
        const auto until = std::chrono::steady_clock::now() + kSpin;
        while (pushed.load(std::memory_order_acquire) == taken && std::chrono::steady_clock::now() < until)
          std::this_thread::yield();
        std::shared_ptr<MpiCommunicator::Task> t;
        {
          std::unique_lock lk(mu);
          cv.wait(lk, [&] { return stop || !queue.empty(); });
          if (queue.empty()) return;  // stop requested and everything issued has run
          t = std::move(queue.front());
          queue.pop_front();
          ++taken;
        }
        t->start_s = steady_seconds();
        run_task(*t);
        finish_task(*t);
      }
    });
  }
  ~MpiStream() override {
    {
      std::lock_guard lk(mu);
      stop = true;
    }
    cv.notify_one();
    thread.join();
  }
  void push(std::shared_ptr<MpiCommunicator::Task> t) {
    {
      std::lock_guard lk(mu);
      queue.push_back(std::move(t));
      pushed.fetch_add(1, std::memory_order_release);
    }
    cv.notify_one();
  }
};

namespace {

struct MpiRequest final : Request::Impl {
  std::function<void(double)> record;  // adds the seconds to the communicator's counters while it lives
  std::weak_ptr<int> alive;
  std::shared_ptr<MpiCommunicator::Task> task;
  bool nonblocking = false;
  std::string label;  // for the watchdog's message; set only while the watchdog is on

  void wait() override {
    auto& t = *task;
    std::optional<WatchdogScope> watched;  // a peer that died or hangs shows up here, as a wait that never ends
    if (!label.empty()) watched.emplace(label);
    if (nonblocking) {
      complete_nonblocking(t);
    } else {
      wait_done(t);
    }
    if (!alive.expired() && record) record(t.done_s - t.issue_s);
  }
  bool executed(double* start_s, double* end_s) const override {
    if (!task->done.load(std::memory_order_acquire)) return false;
    *start_s = task->start_s;
    *end_s = task->done_s;
    return true;
  }
  // Nonblocking progress: MPI_Wait once (the task may have been completed by then() or stream_wait() already).
  static void complete_nonblocking(MpiCommunicator::Task& t) {
    if (t.done.load(std::memory_order_acquire)) return;
    if (t.request != MPI_REQUEST_NULL) MPI_CHECK(MPI_Wait(&t.request, MPI_STATUS_IGNORE));
    if (t.rs_in_place && t.rs_slice != t.recv) std::memmove(t.rs_slice, t.recv, size_t(t.count) * dtype_bytes(t.dtype));
    finish_task(t);
  }
};

void check_count(int64_t count, const char* what) {
  if (count < 0) comm_fatal(__FILE__, __LINE__, what, "negative element count " + std::to_string(count));
  if (count > INT_MAX)
    comm_fatal(__FILE__, __LINE__, what,
               "element count " + std::to_string(count) + " exceeds the MPI limit of " + std::to_string(INT_MAX));
}

}  // namespace

Result<std::unique_ptr<MpiCommunicator>> MpiCommunicator::create(MPI_Comm comm, std::string name, Axis axis,
                                                                 MpiCommOptions options) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return make_error("MpiCommunicator needs MPI to be initialized and not finalized");
  if (comm == MPI_COMM_NULL) return make_error("MpiCommunicator: MPI_COMM_NULL is not a communicator");
  std::unique_ptr<MpiCommunicator> c(new MpiCommunicator());
  int provided = MPI_THREAD_SINGLE;
  MPI_CHECK(MPI_Query_thread(&provided));
  if (options.progress == MpiProgress::thread && provided < MPI_THREAD_MULTIPLE)
    options.progress = MpiProgress::nonblocking;
  MPI_CHECK(MPI_Comm_dup(comm, &c->comm_));
  MPI_CHECK(MPI_Comm_rank(c->comm_, &c->rank_));
  MPI_CHECK(MPI_Comm_size(c->comm_, &c->size_));
  c->name_ = std::move(name);
  c->axis_ = axis;
  c->alive_ = std::make_shared<int>(0);
  mpi_bf16_sum_op();  // create it on this thread, before any progress thread uses it
  if (options.progress == MpiProgress::thread) {
    c->stream_ = std::dynamic_pointer_cast<MpiStream>(options.stream);
    if (options.stream && !c->stream_)
      return make_error("MpiCommunicator: the stream given was not made by an MPI communicator");
    if (!c->stream_) c->stream_ = std::make_shared<MpiStream>();
  }
  options.stream = nullptr;  // a split gets a stream of its own unless it is given one
  c->options_ = options;
  return c;
}

MpiCommunicator::~MpiCommunicator() {
  alive_.reset();
  if (stream_) synchronize();  // the stream may outlive this communicator: nothing of ours may be left on it
  stream_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::shared_ptr<CommStream> MpiCommunicator::make_stream() {
  if (options_.progress != MpiProgress::thread) return nullptr;
  return std::make_shared<MpiStream>();
}

Request MpiCommunicator::submit(std::shared_ptr<Task> task) {
  task->comm = comm_;
  task->issue_s = steady_seconds();
  if (task->type == Task::Type::collective) {
    const int k = static_cast<int>(task->kind);
    counters_.calls[k] += 1;
    counters_.message_bytes[k] += message_bytes(task->kind, task->count, size_, dtype_bytes(task->dtype));
  }
  auto req = std::make_shared<MpiRequest>();
  req->task = task;
  req->alive = alive_;
  if (watchdog_enabled()) {
    switch (task->type) {
      case Task::Type::barrier:
        req->label = "barrier on group '" + name_ + "'";
        break;
      case Task::Type::collective:
        req->label = std::string(coll_kind_name(task->kind)) + " of " + std::to_string(task->count) + " " +
                     count_unit(task->kind) + " on group '" + name_ + "'";
        break;
      case Task::Type::marker:
      case Task::Type::work:
      case Task::Type::stream_wait:
        req->label = "the collectives queued before it on group '" + name_ + "'";
        break;
    }
  }
  if (task->type == Task::Type::collective) {
    const int k = static_cast<int>(task->kind);
    req->record = [this, k](double s) { counters_.seconds[k] += s; };
  }
  if (stream_) {
    stream_->push(std::move(task));
    return Request(std::move(req));
  }
  // Nonblocking progress: start the MPI_I* call now; Request::wait completes it.
  req->nonblocking = true;
  Task& t = *req->task;
  t.start_s = t.issue_s;
  const MPI_Datatype type = mpi_datatype(t.dtype);
  switch (t.type) {
    case Task::Type::barrier:
      MPI_CHECK(MPI_Ibarrier(comm_, &t.request));
      break;
    case Task::Type::collective:
      switch (t.kind) {
        case CollKind::all_gather:
          MPI_CHECK(MPI_Iallgather(t.send, t.count, type, t.recv, t.count, type, comm_, &t.request));
          break;
        case CollKind::reduce_scatter:
          MPI_CHECK(MPI_Ireduce_scatter_block(t.send, t.recv, t.count, type, sum_op(t.dtype), comm_, &t.request));
          break;
        case CollKind::all_reduce:
          MPI_CHECK(MPI_Iallreduce(t.send, t.recv, t.count, type, sum_op(t.dtype), comm_, &t.request));
          break;
        case CollKind::broadcast:
          MPI_CHECK(MPI_Ibcast(t.recv, t.count, type, t.root, comm_, &t.request));
          break;
        case CollKind::all_to_all:
          MPI_CHECK(MPI_Ialltoall(t.send, t.count, type, t.recv, t.count, type, comm_, &t.request));
          break;
      }
      break;
    case Task::Type::marker:
    case Task::Type::work:
    case Task::Type::stream_wait:
      break;  // run by then() / stream_wait() themselves
  }
  pending_.push_back(req->task);
  return Request(std::move(req));
}

Request MpiCommunicator::then(std::function<void(void*)> work) {
  auto t = std::make_shared<Task>();
  t->type = Task::Type::work;
  t->work = std::move(work);
  if (stream_) return submit(std::move(t));
  // Nonblocking progress: what is pending completes first, then the work runs here.
  for (auto& w : pending_)
    if (auto p = w.lock()) MpiRequest::complete_nonblocking(*p);
  pending_.clear();
  Request r = submit(t);
  t->work(nullptr);
  finish_task(*t);
  return r;
}

void MpiCommunicator::stream_wait(const Request& r) {
  auto* impl = dynamic_cast<MpiRequest*>(r.impl());
  if (!impl) return;  // a completed (default) request
  if (!stream_) {
    if (impl->nonblocking) MpiRequest::complete_nonblocking(*impl->task);
    return;
  }
  auto t = std::make_shared<Task>();
  t->type = Task::Type::stream_wait;
  t->waited_for = impl->task;
  submit(std::move(t));
}

Request MpiCommunicator::all_gather(const void* send, void* recv, int64_t send_count, DType dtype) {
  check_count(send_count, "MpiCommunicator::all_gather");
  auto t = std::make_shared<Task>();
  t->kind = CollKind::all_gather;
  const size_t bytes = size_t(send_count) * dtype_bytes(dtype);
  t->send = send == static_cast<const char*>(recv) + rank_ * bytes ? MPI_IN_PLACE : send;
  t->recv = recv;
  t->count = int(send_count);
  t->dtype = dtype;
  return submit(std::move(t));
}

Request MpiCommunicator::reduce_scatter(const void* send, void* recv, int64_t recv_count, DType dtype) {
  check_count(recv_count, "MpiCommunicator::reduce_scatter");
  auto t = std::make_shared<Task>();
  t->kind = CollKind::reduce_scatter;
  const size_t bytes = size_t(recv_count) * dtype_bytes(dtype);
  if (static_cast<const char*>(send) + rank_ * bytes == recv) {
    // NCCL's in-place form; MPI_IN_PLACE reads the whole input from, and writes the slice to the start of, recvbuf.
    t->send = MPI_IN_PLACE;
    t->recv = const_cast<void*>(send);
    t->rs_in_place = true;
    t->rs_slice = recv;
  } else {
    t->send = send;
    t->recv = recv;
  }
  t->count = int(recv_count);
  t->dtype = dtype;
  return submit(std::move(t));
}

Request MpiCommunicator::all_reduce(const void* send, void* recv, int64_t count, DType dtype) {
  check_count(count, "MpiCommunicator::all_reduce");
  auto t = std::make_shared<Task>();
  t->kind = CollKind::all_reduce;
  t->send = send == recv ? MPI_IN_PLACE : send;
  t->recv = recv;
  t->count = int(count);
  t->dtype = dtype;
  return submit(std::move(t));
}

Request MpiCommunicator::broadcast(void* buf, int64_t count, DType dtype, int root) {
  check_count(count, "MpiCommunicator::broadcast");
  if (root < 0 || root >= size_)
    comm_fatal(__FILE__, __LINE__, "MpiCommunicator::broadcast",
               "root " + std::to_string(root) + " is outside the group of " + std::to_string(size_) + " ranks");
  auto t = std::make_shared<Task>();
  t->kind = CollKind::broadcast;
  t->recv = buf;
  t->count = int(count);
  t->dtype = dtype;
  t->root = root;
  return submit(std::move(t));
}

Request MpiCommunicator::all_to_all(const void* send, void* recv, int64_t count, DType dtype) {
  check_count(count, "MpiCommunicator::all_to_all");
  if (send == recv)
    comm_fatal(__FILE__, __LINE__, "MpiCommunicator::all_to_all",
               "send and receive buffers are the same; all_to_all is not in place (give it a separate receive buffer)");
  auto t = std::make_shared<Task>();
  t->kind = CollKind::all_to_all;
  t->send = send;
  t->recv = recv;
  t->count = int(count);
  t->dtype = dtype;
  return submit(std::move(t));
}

void MpiCommunicator::barrier() {
  auto t = std::make_shared<Task>();
  t->type = Task::Type::barrier;
  submit(std::move(t)).wait();
}

void MpiCommunicator::synchronize() {
  if (!stream_) {  // nonblocking progress: complete what is pending
    for (auto& w : pending_)
      if (auto p = w.lock()) MpiRequest::complete_nonblocking(*p);
    pending_.clear();
    return;
  }
  auto t = std::make_shared<Task>();
  t->type = Task::Type::marker;
  submit(std::move(t)).wait();
}

Result<std::unique_ptr<Communicator>> MpiCommunicator::split(int color, int key, std::string name, Axis axis,
                                                             std::shared_ptr<CommStream> stream) {
  synchronize();  // the progress thread must not run a collective on comm_ while this thread splits it
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split(comm_, color, key, &sub));
  MpiCommOptions o = options_;
  o.stream = std::move(stream);
  auto c = create(sub, std::move(name), axis, o);
  MPI_CHECK(MPI_Comm_free(&sub));
  if (!c) return make_error(c.error());
  return std::unique_ptr<Communicator>(std::move(*c));
}

}  // namespace lins
