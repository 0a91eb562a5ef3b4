// The MPI backend: blocking collectives on a per-communicator progress thread (or MPI_I* collectives), counters
// per collective kind, and the bf16 sum as a user MPI_Op; see mpi_communicator.h.
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

#include "core/bf16.h"
#include "comm/check.h"
#include "comm/watchdog.h"

namespace lins {

const char* mpi_progress_name(MpiProgress p) { return p == MpiProgress::thread ? "thread" : "nonblocking"; }

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

MPI_Datatype mpi_datatype(DType dtype) { return dtype == DType::fp32 ? MPI_FLOAT : MPI_UINT16_T; }

namespace {
MPI_Op sum_op(DType dtype) { return dtype == DType::fp32 ? MPI_SUM : mpi_bf16_sum_op(); }
}  // namespace

struct MpiCommunicator::Task {
  enum class Type { collective, barrier, marker } type = Type::collective;
  CollKind kind = CollKind::all_gather;
  const void* send = nullptr;
  void* recv = nullptr;
  int count = 0;  // per-rank elements for all_gather / reduce_scatter, else the buffer
  DType dtype = DType::fp32;
  int root = 0;
  bool rs_in_place = false;  // reduce_scatter in place: MPI leaves the slice at the start; move it to rank's slot
  void* rs_slice = nullptr;  // ... which is this (the caller's recv)
  double issue_s = 0, done_s = 0;
  std::atomic<bool> done{false};
  MPI_Request request = MPI_REQUEST_NULL;  // nonblocking progress
};

struct MpiCommunicator::Worker {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Task>> queue;
  bool stop = false;
  std::atomic<int64_t> pushed{0};  // tasks ever queued: lets the thread spin briefly without taking the lock
  std::thread thread;
};

namespace {
// How long the progress thread and a waiter poll (yielding the core) before sleeping on a futex: a back-to-back
// collective, or one that ends soon, then costs no wake-up (about 5 us each way on Linux).
constexpr auto kSpin = std::chrono::microseconds(20);
}  // namespace

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
      MPI_CHECK(MPI_Wait(&t.request, MPI_STATUS_IGNORE));
      if (t.rs_in_place && t.rs_slice != t.recv)
        std::memmove(t.rs_slice, t.recv, size_t(t.count) * dtype_bytes(t.dtype));
      t.done_s = MPI_Wtime();
    } else {
      const auto until = std::chrono::steady_clock::now() + kSpin;
      while (!t.done.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
      t.done.wait(false, std::memory_order_acquire);
    }
    if (!alive.expired()) record(t.done_s - t.issue_s);
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
  c->options_ = options;
  c->alive_ = std::make_shared<int>(0);
  mpi_bf16_sum_op();  // create it on this thread, before any worker uses it
  if (options.progress == MpiProgress::thread) {
    c->worker_ = std::make_unique<Worker>();
    MpiCommunicator* self = c.get();
    c->worker_->thread = std::thread([self] {
      Worker& w = *self->worker_;
      int64_t taken = 0;
      while (true) {
        const auto until = std::chrono::steady_clock::now() + kSpin;
        while (w.pushed.load(std::memory_order_acquire) == taken && std::chrono::steady_clock::now() < until)
          std::this_thread::yield();
        std::shared_ptr<Task> t;
        {
          std::unique_lock lk(w.mu);
          w.cv.wait(lk, [&] { return w.stop || !w.queue.empty(); });
          if (w.queue.empty()) return;  // stop requested and everything issued has run
          t = std::move(w.queue.front());
          w.queue.pop_front();
          ++taken;
        }
        self->run_now(*t);
        t->done_s = MPI_Wtime();
        t->done.store(true, std::memory_order_release);
        t->done.notify_all();
      }
    });
  }
  return c;
}

MpiCommunicator::~MpiCommunicator() {
  alive_.reset();
  if (worker_) {
    {
      std::lock_guard lk(worker_->mu);
      worker_->stop = true;
    }
    worker_->cv.notify_one();
    worker_->thread.join();
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

// The blocking call of one task (progress thread).
void MpiCommunicator::run_now(Task& t) {
  const MPI_Datatype type = mpi_datatype(t.dtype);
  if (t.type == Task::Type::marker) return;
  if (t.type == Task::Type::barrier) {
    MPI_CHECK(MPI_Barrier(comm_));
    return;
  }
  switch (t.kind) {
    case CollKind::all_gather:
      MPI_CHECK(MPI_Allgather(t.send, t.count, type, t.recv, t.count, type, comm_));
      break;
    case CollKind::reduce_scatter:
      MPI_CHECK(MPI_Reduce_scatter_block(t.send, t.recv, t.count, type, sum_op(t.dtype), comm_));
      if (t.rs_in_place && t.rs_slice != t.recv)
        std::memmove(t.rs_slice, t.recv, size_t(t.count) * dtype_bytes(t.dtype));
      break;
    case CollKind::all_reduce:
      MPI_CHECK(MPI_Allreduce(t.send, t.recv, t.count, type, sum_op(t.dtype), comm_));
      break;
    case CollKind::broadcast:
      MPI_CHECK(MPI_Bcast(t.recv, t.count, type, t.root, comm_));
      break;
  }
}

Request MpiCommunicator::submit(std::shared_ptr<Task> task) {
  task->issue_s = MPI_Wtime();
  if (task->type == Task::Type::collective) {
    const int k = static_cast<int>(task->kind);
    const bool per_rank = task->kind == CollKind::all_gather || task->kind == CollKind::reduce_scatter;
    counters_.calls[k] += 1;
    counters_.message_bytes[k] += double(task->count) * (per_rank ? size_ : 1) * dtype_bytes(task->dtype);
  }
  auto req = std::make_shared<MpiRequest>();
  req->task = task;
  req->alive = alive_;
  if (watchdog_enabled())
    req->label =
        task->type == Task::Type::barrier
            ? "barrier on group '" + name_ + "'"
            : std::string(coll_kind_name(task->kind)) + " of " + std::to_string(task->count) +
                  (task->kind == CollKind::all_gather || task->kind == CollKind::reduce_scatter ? " elements per rank"
                                                                                                : " elements") +
                  " on group '" + name_ + "'";
  if (task->type == Task::Type::collective) {
    const int k = static_cast<int>(task->kind);
    req->record = [this, k](double s) { counters_.seconds[k] += s; };
  } else {
    req->record = [](double) {};
  }
  if (worker_) {
    {
      std::lock_guard lk(worker_->mu);
      worker_->queue.push_back(std::move(task));
      worker_->pushed.fetch_add(1, std::memory_order_release);
    }
    worker_->cv.notify_one();
    return Request(std::move(req));
  }
  // Nonblocking progress: start the MPI_I* call now; Request::wait completes it.
  req->nonblocking = true;
  Task& t = *req->task;
  const MPI_Datatype type = mpi_datatype(t.dtype);
  if (t.type == Task::Type::barrier) {
    MPI_CHECK(MPI_Ibarrier(comm_, &t.request));
  } else if (t.type == Task::Type::collective) {
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
    }
  }
  return Request(std::move(req));
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

void MpiCommunicator::barrier() {
  auto t = std::make_shared<Task>();
  t->type = Task::Type::barrier;
  submit(std::move(t)).wait();
}

void MpiCommunicator::synchronize() {
  if (!worker_) return;  // nonblocking progress: each request completes in its own wait()
  auto t = std::make_shared<Task>();
  t->type = Task::Type::marker;
  submit(std::move(t)).wait();
}

Result<std::unique_ptr<Communicator>> MpiCommunicator::split(int color, int key, std::string name, Axis axis) {
  synchronize();  // the progress thread must not run a collective on comm_ while this thread splits it
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split(comm_, color, key, &sub));
  auto c = create(sub, std::move(name), axis, options_);
  MPI_CHECK(MPI_Comm_free(&sub));
  if (!c) return make_error(c.error());
  return std::unique_ptr<Communicator>(std::move(*c));
}

}  // namespace lins
