// Pacing a synchronous backend's work to an emulated device (train/pacing.h): the one sleep the executor's tasks and
// the contention benchmark's compute passes share.
#include "train/pacing.h"

#include <chrono>
#include <thread>

namespace lins {

double steady_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool pace_until(double end_s, double* late_s) {
  if (steady_now_s() > end_s) return false;
  // steady_now_s counts from steady_clock's epoch, so end_s converts back to its time point; the loop guards against
  // a wake that the conversion's rounding makes a hair early.
  const auto deadline = std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(end_s)));
  while (steady_now_s() < end_s) std::this_thread::sleep_until(deadline + std::chrono::microseconds(1));
  if (late_s) *late_s = steady_now_s() - end_s;
  return true;
}

}  // namespace lins
