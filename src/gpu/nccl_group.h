// NCCL's group state is per host thread, not per communicator: between ncclGroupStart and the matching ncclGroupEnd,
// every collective the thread issues, on any communicator, is only enqueued at the outermost ncclGroupEnd. A
// communicator that records its completion events when the collective is issued would record them, inside another
// communicator's group, before the kernel is on its stream, and a wait on them would be satisfied at once.
//
// NcclGroupState mirrors NCCL's state for NcclCommunicator: one nesting depth per thread, shared by every communicator
// of the thread, and the communicators whose collectives wait for the outermost group_end to record their events.
// Header-only and free of CUDA and NCCL, so that its rules are tested without a device.
#pragma once

#include <algorithm>
#include <vector>

namespace lins {

// A communicator that defers work to the end of the thread's group.
class NcclGroupMember {
 public:
  // Called once after the outermost ncclGroupEnd, for each member that joined the group: record what was deferred.
  virtual void group_flush() = 0;

 protected:
  ~NcclGroupMember() = default;
};

class NcclGroupState {
 public:
  // The calling thread's state (as NCCL's, one per thread).
  static NcclGroupState& current() {
    static thread_local NcclGroupState state;
    return state;
  }

  int depth() const { return depth_; }
  bool open() const { return depth_ > 0; }

  // Opens a group level; true when it is the outermost, for which the caller calls ncclGroupStart.
  bool start() { return depth_++ == 0; }

  enum class End {
    unmatched,  // no group is open: a group_end without its group_start (nothing changes)
    inner,      // an inner level closed: NCCL still defers
    outermost,  // the outermost level closed: the caller calls ncclGroupEnd, then flushes take_members()
  };
  End end() {
    if (depth_ == 0) return End::unmatched;
    return --depth_ == 0 ? End::outermost : End::inner;
  }

  // `m` deferred work to the end of the open group (joining twice counts once).
  void join(NcclGroupMember* m) {
    if (std::find(members_.begin(), members_.end(), m) == members_.end()) members_.push_back(m);
  }
  // The members that joined, in the order they first joined; the list is emptied.
  std::vector<NcclGroupMember*> take_members() {
    std::vector<NcclGroupMember*> out;
    out.swap(members_);
    return out;
  }
  // `m` is going away: it must not be flushed.
  void leave(NcclGroupMember* m) { members_.erase(std::remove(members_.begin(), members_.end(), m), members_.end()); }

 private:
  int depth_ = 0;
  std::vector<NcclGroupMember*> members_;
};

}  // namespace lins
