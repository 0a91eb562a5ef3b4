// Watchdog thread and scopes; see watchdog.h. The thread polls ten times a second; on a timeout it prints one line
// and calls MPI_Abort, which Open MPI turns into the termination of every rank with a non-zero exit code.
#include "comm/watchdog.h"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

namespace lins {
namespace {

using Clock = std::chrono::steady_clock;

struct WatchdogState {
  std::mutex mu;
  std::condition_variable cv;
  std::thread thread;
  bool running = false;
  double timeout_s = 0;
  int rank = 0;
  std::string host;
  // What is open now (outermost scope) and since when; depth counts nested scopes across threads.
  int depth = 0;
  std::string what;
  Clock::time_point since;
};

WatchdogState& state() {
  static WatchdogState s;
  return s;
}

std::atomic<bool> g_enabled{false};

void watch() {
  auto& s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  while (s.running) {
    s.cv.wait_for(lock, std::chrono::milliseconds(100));
    if (!s.running || s.depth == 0 || s.timeout_s <= 0) continue;
    const double open_s = std::chrono::duration<double>(Clock::now() - s.since).count();
    if (open_s > s.timeout_s) {
      std::fprintf(stderr,
                   "lins: rank %d on %s: '%s' has not completed after %.1f s (watchdog timeout %.1f s); a peer rank "
                   "probably died or hangs. Aborting the job.\n",
                   s.rank, s.host.c_str(), s.what.c_str(), open_s, s.timeout_s);
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 3);
      std::_Exit(3);  // MPI_Abort should not return; make sure this process ends either way
    }
  }
}

}  // namespace

void start_watchdog(double timeout_s, int rank, const std::string& host) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.timeout_s = timeout_s;
  s.rank = rank;
  s.host = host;
  g_enabled = timeout_s > 0;
  if (timeout_s > 0 && !s.running) {
    s.running = true;
    s.thread = std::thread(watch);
  }
}

void stop_watchdog() {
  auto& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.running) return;
    s.running = false;
    g_enabled = false;
  }
  s.cv.notify_all();
  s.thread.join();
}

double watchdog_timeout_s() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.timeout_s;
}

WatchdogScope::WatchdogScope(const char* what) {
  if (!g_enabled.load(std::memory_order_relaxed)) return;
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.depth++ == 0) {
    s.what = what;
    s.since = Clock::now();
  }
  active_ = true;
}

WatchdogScope::~WatchdogScope() {
  if (!active_) return;
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  --s.depth;
}

}  // namespace lins
