// The device-side timing of a communicator's collectives: a start and a stop event per collective, recorded on the
// communicator's stream, settled into seconds per collective kind once the stop has completed.
//
// Collectives on one stream complete in issue order, so the pending timings form a queue: settling walks it from the
// front and stops at the first stop that has not completed (one event query when nothing has finished, not one per
// pending collective: with ~1,300 DDP all-reduces per step, querying every pending timing after each issue was
// quadratic). Settled events go back to a pool and are recorded again, instead of one create and one destroy per
// event. Header-only and free of CUDA (the event calls come in through `Api`), so its counts are tested without a
// device: tests/unit/gpu/event_timings_test.cpp.
#pragma once

#include <array>
#include <cstddef>
#include <deque>
#include <vector>

namespace lins {

// Api: `using Event = ...;` and
//   Event create();                       a new timing event
//   void destroy(Event);
//   bool completed(Event);                cudaEventQuery == cudaSuccess
//   void synchronize(Event);              cudaEventSynchronize
//   double elapsed_s(Event a, Event b);   cudaEventElapsedTime / 1e3 (0 when it cannot be read)
template <class Api, size_t Kinds>
class EventTimings {
 public:
  using Event = typename Api::Event;

  explicit EventTimings(Api api = {}) : api_(std::move(api)) {}
  ~EventTimings() {
    for (const Pending& p : pending_) api_.destroy(p.start), api_.destroy(p.stop);
    for (Event e : pool_) api_.destroy(e);
  }
  EventTimings(const EventTimings&) = delete;
  EventTimings& operator=(const EventTimings&) = delete;

  // An event to record: a settled one when the pool has one, else a new one.
  Event acquire() {
    if (pool_.empty()) return api_.create();
    Event e = pool_.back();
    pool_.pop_back();
    return e;
  }
  // A recorded collective of kind `kind`, after every one pushed before it on the same stream.
  void push(size_t kind, Event start, Event stop) { pending_.push_back({kind, start, stop}); }

  // Adds the elapsed time of the completed collectives at the front of the queue to seconds[kind]; every pending one,
  // waiting for each, when `block`.
  void settle(bool block, std::array<double, Kinds>& seconds) {
    while (!pending_.empty()) {
      const Pending p = pending_.front();
      if (block)
        api_.synchronize(p.stop);
      else if (!api_.completed(p.stop))
        return;  // stream order: nothing behind it has completed either
      if (p.kind < Kinds) seconds[p.kind] += api_.elapsed_s(p.start, p.stop);
      pending_.pop_front();
      pool_.push_back(p.start);
      pool_.push_back(p.stop);
    }
  }

  size_t pending() const { return pending_.size(); }
  size_t pooled() const { return pool_.size(); }

 private:
  struct Pending {
    size_t kind;
    Event start, stop;
  };
  Api api_;
  std::deque<Pending> pending_;
  std::vector<Event> pool_;
};

}  // namespace lins
