// What the parts of the task farm share: task lists, the clock, and how long a run whose launcher
// is gone waits. The messages between rank 0 (service.hpp) and the workers (worker.hpp) are in
// protocol.hpp.
#pragma once
#include <chrono>
#include <cstdint>
#include <vector>

namespace rcsweep::sweep {

using TaskList = std::vector<std::uint64_t>;
using steady = std::chrono::steady_clock;

inline double seconds_since(steady::time_point t) { return std::chrono::duration<double>(steady::now() - t).count(); }

// When the launcher has died (stop.hpp), rank 0 takes the last results of the workers for this long
// and workers try this long to hand theirs over; then every rank exits. Results still computing or
// in flight are lost (their tasks stay pending).
constexpr double gone_collect_s = 1.0;
constexpr double gone_send_s = 2.0;

}  // namespace rcsweep::sweep
