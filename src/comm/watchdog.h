// A per-process watchdog: code that may block on other ranks (collective waits, barriers) runs inside a
// WatchdogScope naming the operation; if one stays open longer than the timeout, the watchdog prints which rank and
// operation are stuck and aborts the whole MPI job, so a dead or hung peer never hangs an allocation.
#pragma once

#include <functional>
#include <string>

namespace lins {

// Starts the process-wide watchdog (timeout_s <= 0: disabled). `rank` and `host` name this process in the message.
// Safe to call once per process; later calls change the timeout.
void start_watchdog(double timeout_s, int rank, const std::string& host);
void stop_watchdog();
bool watchdog_enabled();  // cheap: one atomic load

// Checks the watchdog runs every poll (about ten times a second) while it is on, each returning an error text or ""
// (the NCCL backend reports ncclCommGetAsyncError here), and actions it runs before aborting (ncclCommAbort).
// Both return an id for remove_watchdog_hooks (call it before the objects they capture are destroyed).
int add_watchdog_check(std::function<std::string()> check);
int add_watchdog_abort_action(std::function<void()> action);
void remove_watchdog_hooks(int id);

// Marks the calling thread as inside `what` until destroyed. Nested scopes keep the outermost start time. Cheap
// when the watchdog is off.
class WatchdogScope {
 public:
  explicit WatchdogScope(const char* what);
  explicit WatchdogScope(const std::string& what) : WatchdogScope(what.c_str()) {}
  ~WatchdogScope();
  WatchdogScope(const WatchdogScope&) = delete;
  WatchdogScope& operator=(const WatchdogScope&) = delete;

 private:
  bool active_ = false;
};

}  // namespace lins
