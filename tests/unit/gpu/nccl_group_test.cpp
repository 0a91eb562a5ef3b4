// gpu/nccl_group.h: NCCL's group state as NcclCommunicator keeps it, one per thread and shared by every
// communicator of the thread: a collective on communicator B inside a group that A opened is deferred to the
// outermost group_end with A's, and only then are its events recorded. No device needed.
#include "gpu/nccl_group.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace lins {
namespace {

// A stand-in communicator: group_start/group_end/a collective as NcclCommunicator does them, with the NCCL calls and
// the event records written to a shared log instead.
struct FakeComm final : NcclGroupMember {
  FakeComm(std::string name, std::vector<std::string>* log) : name(std::move(name)), log(log) {}
  ~FakeComm() { NcclGroupState::current().leave(this); }
  void group_start() {
    if (NcclGroupState::current().start()) log->push_back("ncclGroupStart");
  }
  bool group_end() {  // false: unmatched
    NcclGroupState& g = NcclGroupState::current();
    switch (g.end()) {
      case NcclGroupState::End::unmatched:
        return false;
      case NcclGroupState::End::inner:
        return true;
      case NcclGroupState::End::outermost:
        break;
    }
    log->push_back("ncclGroupEnd");
    for (NcclGroupMember* m : g.take_members()) m->group_flush();
    return true;
  }
  void collective() {
    log->push_back(name + ".enqueue");
    if (NcclGroupState& g = NcclGroupState::current(); g.open()) {
      ++deferred;
      g.join(this);
    } else {
      log->push_back(name + ".record");
    }
  }
  void group_flush() override {
    for (; deferred > 0; --deferred) log->push_back(name + ".record");
  }

  std::string name;
  std::vector<std::string>* log;
  int deferred = 0;
};

using Log = std::vector<std::string>;

TEST(NcclGroup, OutsideAGroupEventsAreRecordedAtOnce) {
  Log log;
  FakeComm a("a", &log);
  a.collective();
  EXPECT_EQ(log, (Log{"a.enqueue", "a.record"}));
  EXPECT_FALSE(NcclGroupState::current().open());
}

// The case that went wrong with a depth per communicator: B's collective inside A's group recorded its events at once,
// before NCCL had enqueued its kernel (at A's group_end).
TEST(NcclGroup, ACollectiveOnAnotherCommunicatorInsideTheGroupIsRecordedAtTheGroupEnd) {
  Log log;
  FakeComm a("a", &log), b("b", &log);
  a.group_start();
  a.collective();
  b.collective();
  b.collective();
  EXPECT_EQ(log, (Log{"ncclGroupStart", "a.enqueue", "b.enqueue", "b.enqueue"}));
  ASSERT_TRUE(a.group_end());
  EXPECT_EQ(log, (Log{"ncclGroupStart", "a.enqueue", "b.enqueue", "b.enqueue", "ncclGroupEnd", "a.record", "b.record",
                      "b.record"}));
  EXPECT_FALSE(NcclGroupState::current().open());
}

TEST(NcclGroup, NestedLevelsOnDifferentCommunicatorsShareOneDepth) {
  Log log;
  FakeComm a("a", &log), b("b", &log);
  a.group_start();
  b.group_start();  // an inner level: no second ncclGroupStart
  EXPECT_EQ(NcclGroupState::current().depth(), 2);
  b.collective();
  ASSERT_TRUE(b.group_end());  // inner: NCCL still defers, nothing recorded
  EXPECT_EQ(log, (Log{"ncclGroupStart", "b.enqueue"}));
  a.collective();
  ASSERT_TRUE(a.group_end());
  EXPECT_EQ(log, (Log{"ncclGroupStart", "b.enqueue", "a.enqueue", "ncclGroupEnd", "b.record", "a.record"}));
  // A group closed on another communicator than the one that opened it is the same group.
  b.group_start();
  a.collective();
  ASSERT_TRUE(a.group_end());
  EXPECT_EQ(log.back(), "a.record");
  EXPECT_EQ(NcclGroupState::current().depth(), 0);
}

TEST(NcclGroup, GroupEndWithoutStartIsUnmatchedAndChangesNothing) {
  Log log;
  FakeComm a("a", &log);
  EXPECT_FALSE(a.group_end());
  EXPECT_EQ(NcclGroupState::current().depth(), 0);
  a.collective();  // still outside any group
  EXPECT_EQ(log, (Log{"a.enqueue", "a.record"}));
}

TEST(NcclGroup, EachThreadHasItsOwnGroup) {
  Log log, other_log;
  FakeComm a("a", &log);
  a.group_start();
  int other_depth = -1;
  std::thread t([&] {
    FakeComm c("c", &other_log);
    other_depth = NcclGroupState::current().depth();
    c.collective();  // not inside this thread's (nonexistent) group
  });
  t.join();
  EXPECT_EQ(other_depth, 0);
  EXPECT_EQ(other_log, (Log{"c.enqueue", "c.record"}));
  ASSERT_TRUE(a.group_end());
}

TEST(NcclGroup, AMemberGoneBeforeTheGroupEndIsNotFlushed) {
  Log log;
  FakeComm a("a", &log);
  a.group_start();
  {
    FakeComm b("b", &log);
    b.collective();
  }
  a.collective();
  a.collective();  // joins once
  ASSERT_TRUE(a.group_end());
  EXPECT_EQ(log,
            (Log{"ncclGroupStart", "b.enqueue", "a.enqueue", "a.enqueue", "ncclGroupEnd", "a.record", "a.record"}));
}

}  // namespace
}  // namespace lins
