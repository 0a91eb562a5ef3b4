// Pacing a synchronous backend's work to an emulated device: after a piece of work that began at `start_s`, the host
// sleeps until start_s + the device's time for that work. Shared by the executor's tasks (train/executor.cpp) and the
// contention benchmark's compute passes (apps/contention_bench.cpp), so both pace the same way.
#pragma once

namespace lins {

// The steady clock in seconds since its epoch: the time base of the CPU backend's events (Event::host_s).
double steady_now_s();

// Sleeps until `end_s` (steady_now_s's time base). Returns false, without sleeping, when the work already ran past
// it (an overrun: the work took longer than the device would have). On a sleep, *late_s (if given) gets how long
// after end_s the host woke (the scheduler may give the core away).
bool pace_until(double end_s, double* late_s = nullptr);

}  // namespace lins
