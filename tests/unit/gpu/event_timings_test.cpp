// gpu/event_timings.h without a device: a fake event API whose events complete when the test says so counts every
// create, query and destroy. Settling after each of many collectives queries O(1) events per collective (the stream
// order lets it stop at the first incomplete one), settled events are reused, and the seconds add up per kind.
#include "gpu/event_timings.h"

#include <gtest/gtest.h>

#include <array>
#include <set>

namespace lins {
namespace {

struct FakeDevice {
  int created = 0, destroyed = 0, queries = 0, syncs = 0;
  int completed_up_to = -1;  // events recorded at positions <= this have completed
  int next_position = 0;
  std::set<int> live;
};

// An event is an id; its "recording" position is the order in which the test records it (record()).
struct FakeApi {
  using Event = int;
  FakeDevice* dev = nullptr;
  std::array<int, 4096>* position = nullptr;  // id -> position of its latest record
  Event create() {
    dev->live.insert(dev->created);
    return dev->created++;
  }
  void destroy(Event e) {
    dev->live.erase(e);
    ++dev->destroyed;
  }
  bool completed(Event e) {
    ++dev->queries;
    return (*position)[size_t(e)] <= dev->completed_up_to;
  }
  void synchronize(Event e) {
    ++dev->syncs;
    dev->completed_up_to = std::max(dev->completed_up_to, (*position)[size_t(e)]);
  }
  double elapsed_s(Event a, Event b) { return 1e-3 * ((*position)[size_t(b)] - (*position)[size_t(a)]); }
};

struct Harness {
  FakeDevice dev;
  std::array<int, 4096> position{};
  EventTimings<FakeApi, 3> timings{FakeApi{&dev, &position}};
  std::array<double, 3> seconds{};
  void record(int e) { position[size_t(e)] = dev.next_position++; }
  // One collective of `kind`: start and stop recorded back to back (1 ms apart in the fake clock).
  void issue(size_t kind) {
    const int start = timings.acquire(), stop = timings.acquire();
    record(start);
    record(stop);
    timings.push(kind, start, stop);
  }
};

TEST(EventTimings, SettlingAfterEveryIssueQueriesAConstantNumberOfEventsPerCollective) {
  Harness h;
  const int collectives = 1300;  // a 7B DDP step's all-reduces at 1 MiB buckets
  for (int i = 0; i < collectives; ++i) {
    h.issue(size_t(i % 3));
    h.timings.settle(false, h.seconds);  // the device is far behind: nothing completes
  }
  EXPECT_EQ(h.timings.pending(), size_t(collectives));
  EXPECT_EQ(h.dev.queries, collectives) << "one query per settle while nothing completes, not one per pending timing";
  h.dev.completed_up_to = h.dev.next_position;  // the device catches up
  h.timings.settle(false, h.seconds);
  EXPECT_EQ(h.timings.pending(), 0u);
  EXPECT_LE(h.dev.queries, 2 * collectives + 1);
  EXPECT_EQ(h.dev.syncs, 0);
  EXPECT_NEAR(h.seconds[0] + h.seconds[1] + h.seconds[2], collectives * 1e-3, 1e-9);
  EXPECT_NEAR(h.seconds[0], 434 * 1e-3, 1e-9);  // kinds 0, 1, 2 in turn: 434, 433, 433
}

TEST(EventTimings, StopsAtTheFirstIncompleteCollectiveAndKeepsTheRestInOrder) {
  Harness h;
  for (int i = 0; i < 10; ++i) h.issue(0);
  h.dev.completed_up_to = 2 * 4 - 1;  // the first four collectives' stops (positions 1, 3, 5, 7) completed
  h.timings.settle(false, h.seconds);
  EXPECT_EQ(h.timings.pending(), 6u);
  EXPECT_EQ(h.dev.queries, 5) << "four completed, the fifth is the first incomplete one";
  EXPECT_NEAR(h.seconds[0], 4e-3, 1e-12);
  h.timings.settle(true, h.seconds);  // blocking: waits for each
  EXPECT_EQ(h.timings.pending(), 0u);
  EXPECT_EQ(h.dev.syncs, 6);
  EXPECT_NEAR(h.seconds[0], 10e-3, 1e-12);
}

TEST(EventTimings, SettledEventsAreReusedNotCreatedAgain) {
  Harness h;
  for (int i = 0; i < 1000; ++i) {
    h.issue(1);
    h.dev.completed_up_to = h.dev.next_position;  // each completes before the next is issued
    h.timings.settle(false, h.seconds);
  }
  EXPECT_EQ(h.dev.created, 2) << "one start and one stop event, recorded again for every collective";
  EXPECT_EQ(h.dev.destroyed, 0);
  EXPECT_EQ(h.timings.pooled(), 2u);
}

TEST(EventTimings, DestroysEveryEventItHolds) {
  FakeDevice dev;
  std::array<int, 4096> position{};
  {
    EventTimings<FakeApi, 3> t{FakeApi{&dev, &position}};
    std::array<double, 3> s{};
    for (int i = 0; i < 5; ++i) t.push(0, t.acquire(), t.acquire());
    dev.completed_up_to = 100;
    t.settle(false, s);  // all five back in the pool
    for (int i = 0; i < 3; ++i) t.push(2, t.acquire(), t.acquire());  // three pending at destruction
  }
  EXPECT_EQ(dev.created, 10);
  EXPECT_TRUE(dev.live.empty()) << dev.live.size() << " events leaked";
}

}  // namespace
}  // namespace lins
