// What the parts of the task farm share: task lists, the clock, and the messages between rank 0
// (service.hpp) and the workers (worker.hpp).
#pragma once
#include <chrono>
#include <cstdint>
#include <vector>

namespace rcsweep::sweep {

using TaskList = std::vector<std::uint64_t>;
using steady = std::chrono::steady_clock;

inline double seconds_since(steady::time_point t) { return std::chrono::duration<double>(steady::now() - t).count(); }

constexpr int tag_result = 11;  // worker -> 0: its stop signal (int32) + packed results of its last bundle: "more work"
constexpr int tag_assign = 12;  // 0 -> worker: task ids of the next bundle; empty: stop
constexpr int tag_cancel = 13;  // 0 -> busy worker: abandon the running bundle (grace period over)
constexpr int tag_beat = 14;    // worker -> 0: a heartbeat (no data), at most every beat_s while it works or waits
constexpr double beat_s = 1.0;
constexpr std::int32_t leaving = -1;  // in place of the stop signal: the worker's launcher is gone, it exits now

// When the launcher has died (stop.hpp), rank 0 takes the last results of the workers for this long
// and workers try this long to hand theirs over; then every rank exits. Results still computing or
// in flight are lost (their tasks stay pending).
constexpr double gone_collect_s = 1.0;
constexpr double gone_send_s = 2.0;

}  // namespace rcsweep::sweep
