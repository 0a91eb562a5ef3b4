// Watchdog thread and scopes; see watchdog.h. The thread polls ten times a second; on a timeout it prints one line
// and calls MPI_Abort, which Open MPI turns into the termination of every rank with a non-zero exit code.
#include "comm/watchdog.h"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

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
  // Hooks by id. Guarded by hooks_mu (not mu) so a check may take its time without delaying scopes.
  std::mutex hooks_mu;
  int next_id = 1;
  std::map<int, std::function<std::string()>> checks;
  std::map<int, std::function<void()>> abort_actions;
};

WatchdogState& state() {
  static WatchdogState s;
  return s;
}

std::atomic<bool> g_enabled{false};

[[noreturn]] void abort_job(WatchdogState& s, const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  {
    std::lock_guard<std::mutex> lock(s.hooks_mu);
    for (auto& [id, action] : s.abort_actions) action();
  }
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);  // MPI_Abort should not return; make sure this process ends either way
}

void watch() {
  auto& s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  while (s.running) {
    s.cv.wait_for(lock, std::chrono::milliseconds(100));
    if (!s.running) break;
    const int rank = s.rank;
    const std::string host = s.host;
    {
      lock.unlock();
      std::string error;
      {
        std::lock_guard<std::mutex> hooks(s.hooks_mu);
        for (auto& [id, check] : s.checks)
          if (error = check(); !error.empty()) break;
      }
      lock.lock();
      if (!error.empty())
        abort_job(s, "lins: rank " + std::to_string(rank) + " on " + host + ": " + error + ". Aborting the job.");
    }
    if (s.depth == 0 || s.timeout_s <= 0) continue;
    const double open_s = std::chrono::duration<double>(Clock::now() - s.since).count();
    if (open_s > s.timeout_s) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "' has not completed after %.1f s (watchdog timeout %.1f s)", open_s, s.timeout_s);
      abort_job(s, "lins: rank " + std::to_string(rank) + " on " + host + ": '" + s.what + buf +
                       "; a peer rank probably died or hangs. Aborting the job.");
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

bool watchdog_enabled() { return g_enabled.load(std::memory_order_relaxed); }

int add_watchdog_check(std::function<std::string()> check) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.hooks_mu);
  s.checks[s.next_id] = std::move(check);
  return s.next_id++;
}

int add_watchdog_abort_action(std::function<void()> action) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.hooks_mu);
  s.abort_actions[s.next_id] = std::move(action);
  return s.next_id++;
}

void remove_watchdog_hooks(int id) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.hooks_mu);
  s.checks.erase(id);
  s.abort_actions.erase(id);
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
