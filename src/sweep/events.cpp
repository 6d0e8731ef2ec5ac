#include "sweep/events.hpp"

#include "base/units.hpp"
#include "sweep/stop.hpp"

namespace rcsweep::sweep::event {

std::string stopped_because(const RunSummary& s) {
  if (s.exit_code() != 4) return "";
  if (s.lost_rank > 0) return "stopped because rank " + std::to_string(s.lost_rank) + " was lost";
  if (s.launcher_gone) return "stopped because " + launcher_name() + " is gone";
  if (s.stop_signal)
    return "stopped by " + signal_name(s.stop_signal) +
           (launcher_teardown() ? " from " + launcher_name() : std::string());
  return "time limit of " + human_seconds(s.time_limit_s) + " reached";
}

}  // namespace rcsweep::sweep::event
